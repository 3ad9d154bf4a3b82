// SPDX-License-Identifier: GPL-2.0
// cli.hpp - rbln-smi's command line and exit codes.
#pragma once

#include <chrono>
#include <functional>
#include <ostream>
#include <span>
#include <string_view>

#include "exit_codes.hpp"
#include "rbln/diagnostics.hpp"
#include "rbln/error.hpp"

namespace rbln::smi {

/// Exit codes (also in --help and README.md): the tools' shared table
/// (tools/common/exit_codes.hpp), and 1 for any other error.
using tools::kExitDriverNotLoaded;
using tools::kExitNoDevice;
using tools::kExitOk;
using tools::kExitPermission;
using tools::kExitUsage;
inline constexpr int kExitError = 1;
/// --reset refused: processes hold the card (and no --force).
inline constexpr int kExitCardInUse = 6;

/// The exit code for an error of librbln.
int exit_code_for(const Error& error) noexcept;

/// The default interval between the two samples of the busy counters.
inline constexpr unsigned kDefaultIntervalMs = 100;
/// The longest --interval-ms.
inline constexpr unsigned kMaxIntervalMs = 60000;
/// The longest -l period, in seconds (a day).
inline constexpr unsigned kMaxLoopSeconds = 86400;

/// What rbln-smi takes from its surroundings besides --root: tests inject
/// how a /proc/<pid>/fd/<n> of a fake tree is classified, the clock and
/// the wait of the utilisation samples (so they can change the counters
/// between the samples without sleeping), the wait between the samples of
/// -l, and whether the caller is root.
struct Environment {
    CharDeviceProbe char_device_probe; ///< empty: stat()
    /// The clock of the samples and of -l; empty: CLOCK_MONOTONIC.
    std::function<std::chrono::nanoseconds()> clock{};
    /// Returns once clock() has reached @deadline; empty: sleeps.
    std::function<void(std::chrono::nanoseconds deadline)> sleep_until{};
    /// -l: waits until clock() reaches @deadline and returns true, or
    /// returns false as soon as the loop is to stop.  Empty: SIGINT and
    /// SIGTERM are blocked while -l runs (a sample is never cut short) and
    /// this waits for them with sigtimedwait(); one that arrived during a
    /// sample stops the loop right after that sample's output.
    std::function<bool(std::chrono::nanoseconds deadline)> wait_next{};
    /// --reset: whether the caller may reset cards; empty: geteuid() == 0.
    std::function<bool()> is_root{};
};

/// Runs rbln-smi with @args (without argv[0]); writes the view to @out and
/// errors to @err; returns the exit code.
int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
        const Environment& env = {});

} // namespace rbln::smi
