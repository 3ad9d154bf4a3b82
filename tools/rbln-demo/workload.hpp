// SPDX-License-Identifier: GPL-2.0
// workload.hpp - y = relu(x @ w) * scale on the card, through librbln as a
// framework drives it: lazy storages from the device's caching allocator,
// rbln::ops on streams, asynchronous copies from and to pinned host memory,
// and events with timing around each phase.
//
// The rows of x (and so of y) are split over the chosen chiplets.  Slice c
// has its own stream and its own storages in chiplet c's HBM: x_c, a copy
// of w, x_c @ w, its relu and y_c.  Each stream copies x_c and w in from
// pinned host memory, runs MATMUL, RELU and SCALE (rbln::ops) and copies
// y_c back into the pinned y, with a timing event between the phases.
// Everything is enqueued before anything is waited for, so the kernel runs
// the streams side by side (it keeps a busy queue on one chiplet ring and
// gives a new one the least loaded ring).  Then the CPU reference and the
// check of the whole y.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "dtype.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "reference.hpp"

namespace rbln::demo {

struct WorkloadOptions {
    Shape shape;
    DType dtype = DType::Fp32;
    std::vector<unsigned> chiplets{0, 1, 2, 3}; ///< the chiplets the rows of x are split over
    float scale = 0.375F;
    std::uint64_t seed = 1;
};

/// Card time of one slice's phases, from its events (ns).
struct CardTimes {
    std::uint64_t copy_in_ns = 0;    ///< x_c and w host -> HBM
    std::uint64_t matmul_ns = 0;     ///< MATMUL
    std::uint64_t relu_scale_ns = 0; ///< RELU + SCALE
    std::uint64_t copy_out_ns = 0;   ///< y_c HBM -> host
    std::uint64_t total_ns = 0;      ///< first to last event
};

/// One slice: rows [first_row, first_row + rows) of x and y on a chiplet.
struct Slice {
    unsigned chiplet = 0;
    std::uint64_t first_row = 0;
    std::uint64_t rows = 0;
    std::uint32_t queue_id = 0; ///< its stream's kernel queue
    std::uint64_t jobs = 0;     ///< jobs its stream ran
    CardTimes card;
};

struct WorkloadResult {
    std::vector<Slice> slices;    ///< in chiplet order; slices without rows are left out
    std::uint64_t host_bytes = 0; ///< pinned host memory of x, w and y, as allocated
    std::uint64_t hbm_bytes = 0;  ///< the storages' bytes on the chiplets
    std::chrono::nanoseconds enqueue_to_done{}; ///< host: first enqueue until every stream is done
    std::chrono::nanoseconds cpu_reference{};   ///< the CPU reference (double)
    CheckResult check;
};

/// Runs the workload once on @device, with storages from @allocator (the
/// device's caching allocator).  Throws rbln::Error: Errc::InvalidArgument
/// for a chiplet the card lacks (before anything is allocated), librbln's
/// errors (Errc::OutOfMemory, Errc::JobFailed or Errc::Timeout for a job
/// that failed on the card, kernel errors).
WorkloadResult run_workload(const std::shared_ptr<Device>& device, DeviceAllocator& allocator,
                            const WorkloadOptions& options);

} // namespace rbln::demo
