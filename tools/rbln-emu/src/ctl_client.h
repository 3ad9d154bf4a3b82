// SPDX-License-Identifier: GPL-2.0
// "rbln-emu ctl": send one control command, print the reply.
#pragma once

#include "options.h"

namespace rbln::emu {

// Exit status: 0 on "ok...", 1 on "error...", 2 on connection failure or
// a reply that is neither.
int run_ctl(const CtlOptions& opt);

} // namespace rbln::emu
