// SPDX-License-Identifier: GPL-2.0
// error_text.hpp - errno names for librbln's error messages.  Private.
#pragma once

#include <string>

namespace rbln::detail {

/// "ENOSPC", or "errno N" for a value without a name.
std::string errno_name(int err);

} // namespace rbln::detail
