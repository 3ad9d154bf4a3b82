// SPDX-License-Identifier: GPL-2.0
// fork_state.hpp - the process's fork generation, for the cheap fork check
// on librbln's hot paths (private to librbln: devices.cpp, device.cpp).
//
// The pthread_atfork child handler that Runtime::commit() registers bumps
// the generation in every fork() child, so "opened in another generation"
// means "a forked child of the process that opened the device": one
// relaxed atomic load, no getpid() system call.
#pragma once

#include <cstdint>
#include <sys/types.h>

#include "rbln/error.hpp"

namespace rbln::detail {

/// Incremented in every fork() child once a Runtime has committed.
std::uint64_t fork_generation() noexcept;

/// The Errc::BadFork error of a child of @parent ("use the spawn start method").
Error bad_fork_error(pid_t parent);

} // namespace rbln::detail
