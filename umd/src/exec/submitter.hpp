// SPDX-License-Identifier: GPL-2.0
// submitter.hpp - (internal) hands jobs (command buffers) to rbln.ko and
// learns when they are done: one Submitter per open node (per logical device).
//
// Paths.  The hot path is the node's io_uring (KernelInterface::make_ring):
// a job is an RBLN_URING_CMD_SUBMIT whose CQE arrives when the job is done
// (res = 0 or its -errno; big_cqe[0] = its seqno, 0 if SUBMIT refused it).
// If the ring cannot be had (io_uring_setup fails: ENOSYS on an old kernel,
// EPERM under kernel.io_uring_disabled, ...) or the kernel rejects the
// uring_cmd on the node (probed once at start), the Submitter uses the
// ioctls SUBMIT and WAIT instead, says so once through the warning sink,
// and behaves the same: the same batching, the same completion order, the
// same errors at the same points.  Both paths hand the kernel one
// SubmitArgs per job, made from the Job the same way (flags, buffers,
// in-syncs and out-sync alike); the Submitter knows no uAPI struct.
//
// Batching.  enqueue() only queues a job; the queued jobs go to the kernel
// together (one io_uring_enter for the batch) when the batch is full
// (SubmitterOptions::batch), and at every flush(), done() and wait().
// At most max_in_flight jobs are in the kernel at once (enqueue waits for
// completions beyond that), so the completion queue never overflows and the
// kernel's per-queue history of 4096 jobs always covers a WAIT.
//
// Channels.  Jobs go to kernel queues; each queue is a channel whose jobs
// are numbered 1, 2, ... by enqueue() (not the kernel's seqno, which the
// io_uring path learns only at completion).  A queue runs its jobs in order,
// so "job n of channel q is done" means every earlier job of q is done too;
// done()/wait() take (queue, n).
//
// Threading model.  Thread-safe; no thread of its own.  One mutex guards
// the state.  Completions are reaped by whichever thread calls done(),
// wait(), flush() or enqueue(): done() drains the completions that are
// there without blocking; a waiting thread becomes the reaper, drops the
// mutex and blocks in the kernel (io_uring_enter(GETEVENTS) for one CQE, or
// WAIT on its job for the ioctl path), then takes the mutex again to process
// what arrived.  One thread at a time is the io_uring reaper, and only the
// reaper takes CQEs while it waits; other waiters sleep on a condition
// variable and re-check after each reap.  So there is no thread per stream
// or per device, and a thread that never waits costs nothing.
//
// Single issuer (SubmitterOptions::single_issuer, opt-in).  The ring is
// made IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN: the kernel runs the
// completion work only when the issuing thread asks for events, and wakes
// a thread waiting for N CQEs once, when the N-th arrives (rbln.ko
// completes uring commands with lazy wake-ups), so a waiter asks for every
// CQE it needs at once.  The price is the rule: only the thread that made
// the Submitter may call enqueue(), flush(), wait() and wait_all(); a call
// from another thread throws Errc::InvalidArgument (saying which thread
// owns it) before anything reaches the kernel, which would refuse it with
// -EEXIST.  done() from another thread does not touch the ring: it answers
// from what the owning thread has reaped so far (a job may look not done
// for longer).  last_job(), take_failure(), forget_queue(), completed()
// and stats() may be called from any thread.  The rule holds on the ioctl
// path too (so a program behaves the same on either path).  The destructor
// waits only on the owning thread; elsewhere it leaves the jobs to the
// kernel.
//
// SQPOLL (SubmitterOptions::sqpoll_idle_ms, opt-in, or RBLN_URING_SQPOLL=MS
// for the devices of Device::get()).  The ring is IORING_SETUP_SQPOLL: a
// kernel thread of the process takes the SQEs off the ring and issues them,
// and the uring commands' completions run in its context, so a submitting
// thread only fills SQEs (and enters the kernel only to wake that thread
// after it slept).  The thread polls for sqpoll_idle_ms after the last
// submission before it sleeps, a CPU's worth of time: the trade for a
// submitting thread that must not spend time in the kernel, not a cheaper
// submission (tests/bench/README.md).  It needs CPUs that run alongside the
// submitter; it excludes single-issuer mode (DEFER_TASKRUN rings cannot
// poll).  The SQPOLL rings of a process share one polling thread
// (IORING_SETUP_ATTACH_WQ to a live one), so several devices poll with one
// CPU.  If the kernel refuses an SQPOLL ring, the Submitter says so once
// through the warning sink and uses the default ring.
//
// Lifetime.  A job's record keeps what it needs until it is done: the
// arrays its SUBMIT points to and the owners (shared_ptr) of every buffer
// it uses, so a caller dropping its buffer cannot free memory the card
// still reads.  The destructor waits for every job.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernel/kernel.hpp"
#include "rbln/error.hpp"
#include "rbln/submitter_options.hpp"

namespace rbln {

/// One job: a command buffer on a queue, the buffers it uses, its syncs.
struct Job {
    std::uint32_t queue_id = 0;
    std::uint32_t cmd_handle = 0;
    std::uint64_t cmd_offset = 0;
    std::uint32_t cmd_size = 0;
    SubmitFlags flags = SubmitFlags::None;
    std::vector<std::uint32_t> bo_handles;
    std::vector<SyncPoint> in_syncs;
    SyncPoint out; ///< handle 0: none
    /// Owners of what the job uses; released when the job is done.
    std::vector<std::shared_ptr<const void>> keep_alive;
};

/// A failed job: the errno, and whether SUBMIT refused it (nothing ran) or
/// the card failed it.
struct JobFailure {
    std::uint64_t job = 0; ///< channel job number
    int err = 0;           ///< positive errno
    bool refused = false;  ///< SUBMIT refused it; else the job failed on the card
    JobDetail detail;      ///< the card's detail of the failure (a refused graph: which check)
};

struct SubmitterStats {
    std::uint64_t jobs = 0;        ///< jobs enqueued
    std::uint64_t batches = 0;     ///< io_uring_enter / flushes that carried jobs
    std::uint64_t completions = 0; ///< jobs reaped
    std::uint64_t failures = 0;    ///< jobs reaped with an error
};

class Submitter {
public:
    enum class Path { IoUring, Ioctl };

    Submitter(std::shared_ptr<KernelInterface> kernel, SubmitterOptions options = {});
    Submitter(const Submitter&) = delete;
    Submitter& operator=(const Submitter&) = delete;
    Submitter(Submitter&&) = delete;
    Submitter& operator=(Submitter&&) = delete;
    /// Waits for every job (errors are dropped).
    ~Submitter();

    Path path() const noexcept;
    /// Why the ioctl path is used ("" on the io_uring path).
    std::string fallback_reason() const;

    /// Queues @job; returns its number in its channel (queue).  May hand
    /// the batch to the kernel, and may wait for completions while
    /// max_in_flight jobs are in the kernel.
    std::uint64_t enqueue(Job job);
    /// Hands every queued job to the kernel.
    void flush();
    /// Whether job @n of @queue is done (flushes, reaps without blocking).
    bool done(std::uint32_t queue, std::uint64_t n);
    /// Blocks until job @n of @queue is done.
    void wait(std::uint32_t queue, std::uint64_t n);
    /// Blocks until every job enqueued so far is done.
    void wait_all();
    /// Jobs of @queue enqueued so far (the number of the last).
    std::uint64_t last_job(std::uint32_t queue) const;
    /// Every job of @queue up to this number is known done (no reaping).
    std::uint64_t completed(std::uint32_t queue) const;
    /// Whether only the constructing thread may submit and wait.
    bool single_issuer() const noexcept;
    /// Whether the jobs go through an SQPOLL ring (asked for and granted).
    bool sqpoll() const noexcept;
    /// The first failure of @queue since the last call, and forgets it.
    std::optional<JobFailure> take_failure(std::uint32_t queue);
    /// Forgets a queue's bookkeeping (after its jobs are done).
    void forget_queue(std::uint32_t queue);

    SubmitterStats stats() const;
    KernelInterface& kernel() noexcept { return *kernel_; }

private:
    struct State;
    struct Record;
    struct Channel;
    void check_thread(const char* operation) const;
    Channel& channel_locked(std::uint32_t queue);
    void flush_locked(std::unique_lock<std::mutex>& lock);
    void submit_uring(std::span<Record* const> batch);
    void submit_ioctl(std::span<Record* const> batch);
    void reap_locked(std::unique_lock<std::mutex>& lock, Record* target, unsigned want);
    void poll_ioctl(Channel& ch, std::uint64_t n);
    static void complete(State& s, Record& r, int err, bool refused,
                         std::optional<JobDetail> detail = std::nullopt);
    static std::size_t drain(State& s);

    std::shared_ptr<KernelInterface> kernel_;
    std::unique_ptr<State> s_;
};

/// The Error for a failed job of a stream on @path (what failed, the
/// errno, what it means).
Error job_error(const JobFailure& failure, const std::string& path);

} // namespace rbln
