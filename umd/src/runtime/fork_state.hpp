// SPDX-License-Identifier: GPL-2.0
// fork_state.hpp - librbln's one fork check (private to librbln).
//
// A fork() child shares its parent's open device files, so it must not use
// a device its parent opened: it gets Errc::BadFork ("use the spawn start
// method").  The process registry (process_context.hpp) stamps the commit
// of the device mapping and every device it opens with a ForkStamp; the
// device's hot paths check it with one relaxed atomic load (the fork
// generation below, no getpid() system call), and the slower paths
// (commit, synchronize) also compare the pid, which catches a child made
// by a raw clone() that runs no atfork handlers.
//
// The generation is bumped in every fork() child by a pthread_atfork
// handler that Runtime::commit() registers (before the first stamp).
#pragma once

#include <cstdint>
#include <sys/types.h>
#include <unistd.h>

#include "rbln/error.hpp"

namespace rbln::detail {

/// Incremented in every fork() child once a Runtime has committed.
std::uint64_t fork_generation() noexcept;

/// The Errc::BadFork error of a child of @parent ("use the spawn start method").
Error bad_fork_error(pid_t parent);

/// Which process (and fork generation) made something a child must not use.
struct ForkStamp {
    pid_t pid = 0;
    std::uint64_t generation = 0;
    bool armed = false; ///< false: not the process's (Device::open()): never refused

    /// This process, now.
    static ForkStamp now() noexcept { return {::getpid(), fork_generation(), true}; }

    /// One relaxed load: true in a fork() child of the stamping process.
    bool forked() const noexcept { return armed && generation != fork_generation(); }
    /// Throws Errc::BadFork in a fork() child (hot paths).
    void check() const {
        if (forked()) [[unlikely]]
            throw bad_fork_error(pid);
    }
    /// check(), and also a child of a raw clone() (one getpid()).
    void check_strict() const {
        if (armed && (generation != fork_generation() || pid != ::getpid())) [[unlikely]]
            throw bad_fork_error(pid);
    }
};

} // namespace rbln::detail
