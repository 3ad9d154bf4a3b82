// SPDX-License-Identifier: GPL-2.0
// rbln/version.hpp - version of librbln.
#pragma once

#include <string_view>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// "major.minor.patch" of this librbln.
std::string_view library_version() noexcept;

} // namespace rbln

#pragma GCC visibility pop
