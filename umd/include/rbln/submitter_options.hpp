// SPDX-License-Identifier: GPL-2.0
// rbln/submitter_options.hpp - how a device hands its jobs to rbln.ko
// (DeviceOptions::submitter, rbln/device.hpp): the io_uring ring or the
// ioctls, batching, single-issuer and SQPOLL modes.  The submitter itself
// is librbln's own (umd/src/exec/submitter.hpp, whose comment gives the
// threading model these options choose between).
#pragma once

#include <functional>
#include <string>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// The longest polling time of an SQPOLL ring's thread librbln accepts (ms).
inline constexpr unsigned kMaxSqpollIdleMs = 60000;

struct SubmitterOptions {
    bool use_io_uring = true; ///< false: the ioctl path from the start
    unsigned ring_entries = 256;
    unsigned batch = 32;          ///< jobs per io_uring_enter (1: every job at once)
    unsigned max_in_flight = 512; ///< jobs in the kernel at once
    std::function<void(const std::string&)> warn; ///< empty: stderr, "librbln: ..."
    /// Only the thread that opened the device may submit and wait; its ring
    /// is an IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN one.
    bool single_issuer = false;
    /// > 0: an SQPOLL ring whose kernel thread polls this many ms after the
    /// last submission (at most kMaxSqpollIdleMs; not with single_issuer:
    /// the device refuses it with Errc::InvalidArgument).
    unsigned sqpoll_idle_ms = 0;
};

} // namespace rbln

#pragma GCC visibility pop
