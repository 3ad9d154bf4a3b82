// SPDX-License-Identifier: GPL-2.0
// One emulated card process: wires the firmware model to the ivshmem
// transport, the guest RAM file, the heartbeat timer, signals and the
// control socket, and runs the event loop.
#pragma once

#include "log.h"
#include "options.h"

namespace rbln::emu {

// Runs the card until QEMU disconnects (after having connected), SIGTERM
// or SIGINT.  Returns the process exit status.  Throws std::runtime_error
// on set-up failures (the message names the option when it is one's fault).
int run_emulator(const Options& opt, Logger& log);

} // namespace rbln::emu
