// SPDX-License-Identifier: GPL-2.0
// version.cpp - version of librbln (from the CMake project version).

#include "rbln/version.hpp"

#ifndef RBLN_VERSION_STRING
#error "RBLN_VERSION_STRING must be defined by the build"
#endif

namespace rbln {

std::string_view library_version() noexcept {
    return RBLN_VERSION_STRING;
}

} // namespace rbln
