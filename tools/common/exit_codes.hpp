// SPDX-License-Identifier: GPL-2.0
// exit_codes.hpp - the exit status of the rbln tools (rbln-smi, rbln-demo):
// one table for what every tool reports alike, so a script tells "no
// driver", "no card" and "no permission" apart the same way whichever tool
// it ran.  Each tool adds its own statuses (rbln-demo: 1 for a wrong
// result) and its "another error" (rbln-smi 1, rbln-demo 6).
#pragma once

#include "rbln/error.hpp"

namespace rbln::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;           ///< a malformed command line
inline constexpr int kExitDriverNotLoaded = 3; ///< /sys/module/rbln is absent
inline constexpr int kExitNoDevice = 4;        ///< the driver is loaded, no card is bound to it
inline constexpr int kExitPermission = 5;      ///< a node that is needed could not be opened

/// The exit status for a librbln error of code @code: the shared statuses
/// for the conditions above, @other (the tool's "another error") for every
/// other code.
constexpr int exit_status_for(Errc code, int other) noexcept {
    switch (code) {
    case Errc::DriverNotLoaded:
        return kExitDriverNotLoaded;
    case Errc::NoDevice:
        return kExitNoDevice;
    case Errc::PermissionDenied:
        return kExitPermission;
    default:
        return other;
    }
}

} // namespace rbln::tools
