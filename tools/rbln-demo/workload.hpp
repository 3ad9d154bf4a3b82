// SPDX-License-Identifier: GPL-2.0
// workload.hpp - y = relu(x @ w) * scale as one job on the card.
//
// Through librbln's KernelInterface: host buffers for x, w and y (x, w and
// the command buffer device-read-only), HBM buffers on one chiplet for x,
// w, x @ w, its relu and y, one command buffer (TIMESTAMP, COPY x and w
// host -> HBM, TIMESTAMP, LAUNCH MATMUL, TIMESTAMP, LAUNCH RELU, LAUNCH
// SCALE, TIMESTAMP, COPY y HBM -> host, TIMESTAMP), one SUBMIT on a queue
// of that chiplet and one WAIT; then the CPU reference and the check.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>

#include "dtype.hpp"
#include "rbln/error.hpp"
#include "rbln/kernel.hpp"
#include "reference.hpp"

namespace rbln::demo {

struct WorkloadOptions {
    Shape shape;
    DType dtype = DType::Fp32;
    unsigned chiplet = 0;
    float scale = 0.375F;
    std::uint64_t seed = 1;
    std::chrono::milliseconds timeout{60000}; ///< for the job, from SUBMIT
};

/// Card time of the job's phases, from its TIMESTAMP packets (ns).
struct CardTimes {
    std::uint64_t copy_in_ns = 0;    ///< x and w host -> HBM
    std::uint64_t matmul_ns = 0;     ///< LAUNCH MATMUL
    std::uint64_t relu_scale_ns = 0; ///< LAUNCH RELU + LAUNCH SCALE
    std::uint64_t copy_out_ns = 0;   ///< y HBM -> host
    std::uint64_t total_ns = 0;      ///< first to last TIMESTAMP
};

struct WorkloadResult {
    std::uint32_t queue_id = 0;
    std::uint64_t seqno = 0;
    unsigned packets = 0;
    std::uint64_t cmd_bytes = 0;
    std::uint64_t host_bytes = 0; ///< host buffers, as allocated
    std::uint64_t hbm_bytes = 0;  ///< HBM buffers, as allocated
    CardTimes card;
    std::chrono::nanoseconds submit_to_done{}; ///< host: SUBMIT until WAIT returned
    std::chrono::nanoseconds cpu_reference{};  ///< the CPU reference (double)
    CheckResult check;
};

/// The job ran and failed on the card: code() is Errc::Timeout for a job
/// that timed out, Errc::Io otherwise; sys_errno() is the job's errno and
/// what() says what it means (for an MMU fault: where, and in which buffer).
class JobError : public Error {
public:
    JobError(const std::string& operation, const std::string& path, int job_errno,
             const std::string& message)
        : Error(job_errno == ETIMEDOUT ? Errc::Timeout : Errc::Io, operation, path, job_errno,
                message) {}
};

/// Runs the workload once.  Throws rbln::Error (the kernel's errors,
/// Errc::InvalidArgument for a chiplet the card lacks, Errc::Timeout if the
/// job did not finish in time) and JobError.
WorkloadResult run_workload(KernelInterface& kernel, const WorkloadOptions& options);

} // namespace rbln::demo
