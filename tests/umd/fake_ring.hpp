// SPDX-License-Identifier: GPL-2.0
// fake_ring.hpp - a CommandRing over FakeKernel: pushed SUBMITs become
// FakeKernel::submit() calls with the same SubmitArgs at submit(), their
// CQEs appear when the fake's jobs complete (res = job error, extra =
// seqno; a refused SUBMIT: -errno, extra 0), WAIT answers at once.  wait_for_completion() plays the
// card progressing: it completes one held job if no CQE is there.
#pragma once

#include <cerrno>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "fake_kernel.hpp"
#include "kernel/kernel.hpp"

namespace rbln::test {

class FakeRing final : public CommandRing {
public:
    FakeRing(FakeKernel& kernel, unsigned entries) : k_(kernel), entries_(entries) {}

    RingMode mode() const noexcept override { return RingMode::AnyThread; }

    unsigned space() const override { return entries_ - static_cast<unsigned>(sq_.size()); }

    // The SQE keeps the job as pushed: its arrays must live until its CQE
    // (as the real ring's contract says), and the fake reads them only at
    // submit(), as the kernel does when it issues the command.
    void push_submit(const SubmitArgs& job, std::uint64_t user_data) override {
        Sqe e;
        e.user_data = user_data;
        e.submit = job;
        sq_.push_back(e);
    }

    void push_wait(const WaitArgs& wait, std::uint64_t user_data) override {
        Sqe e;
        e.user_data = user_data;
        e.wait = wait;
        sq_.push_back(e);
    }

    int submit() override {
        if (submit_errno != 0)
            return -submit_errno;
        const int n = static_cast<int>(sq_.size());
        enters++;
        for (const Sqe& e : sq_) {
            if (reject_with != 0) {
                cq_.push_back({e.user_data, -reject_with, 0});
                continue;
            }
            if (e.wait) {
                try {
                    WaitArgs w = *e.wait;
                    w.deadline_ns = 0;
                    const WaitResult r = k_.wait(w);
                    cq_.push_back({e.user_data, r.done ? r.job_error : -ETIME, w.seqno});
                } catch (const Error& err) {
                    cq_.push_back({e.user_data, -err.sys_errno(), 0});
                }
                continue;
            }
            try {
                const std::uint64_t seqno = k_.submit(e.submit);
                inflight_.push_back({e.user_data, e.submit.queue_id, seqno});
            } catch (const Error& err) {
                cq_.push_back({e.user_data, -err.sys_errno(), 0});
            }
        }
        sq_.clear();
        return n;
    }

    std::size_t drain(std::span<RingCompletion> out) override {
        collect();
        std::size_t n = 0;
        while (n < out.size() && !cq_.empty()) {
            out[n++] = cq_.front();
            cq_.pop_front();
        }
        return n;
    }

    int wait_for_completion() override {
        blocking_waits++;
        collect();
        if (!cq_.empty())
            return 0;
        if (k_.pending_jobs() == 0)
            return -EDEADLK; // nothing will ever complete: a Submitter bug
        k_.complete_jobs(1);
        return 0;
    }

    int reject_with = 0;  ///< every command completes with -reject_with
    int submit_errno = 0; ///< io_uring_enter fails with it
    int enters = 0;       ///< submit() calls that handed SQEs over
    int blocking_waits = 0;

private:
    struct Sqe {
        std::uint64_t user_data = 0;
        SubmitArgs submit;
        std::optional<WaitArgs> wait; ///< set: a WAIT, else the SUBMIT of @submit
    };
    struct InFlight {
        std::uint64_t user_data;
        std::uint32_t queue;
        std::uint64_t seqno;
    };

    void collect() {
        for (auto it = inflight_.begin(); it != inflight_.end();) {
            if (k_.job_done(it->queue, it->seqno)) {
                cq_.push_back({it->user_data, k_.job_error(it->queue, it->seqno), it->seqno});
                it = inflight_.erase(it);
            } else {
                ++it;
            }
        }
    }

    FakeKernel& k_;
    unsigned entries_;
    std::vector<Sqe> sq_;
    std::deque<InFlight> inflight_;
    std::deque<RingCompletion> cq_;
};

/// A RingFactory handing out FakeRings over @k (@last: the ring made last);
/// set it as k.rings.
inline RingFactory fake_ring_factory(FakeKernel& k, FakeRing** last = nullptr) {
    return [&k, last](KernelInterface& /*kernel*/,
                      unsigned entries) -> Result<std::unique_ptr<CommandRing>> {
        auto ring = std::make_unique<FakeRing>(k, entries);
        if (last != nullptr)
            *last = ring.get();
        return std::unique_ptr<CommandRing>(std::move(ring));
    };
}

/// A RingFactory that fails as io_uring_setup does with @err.
inline RingFactory failing_ring_factory(int err) {
    return [err](KernelInterface& kernel, unsigned) -> Result<std::unique_ptr<CommandRing>> {
        return Error::from_errno("io_uring_queue_init(SQE128 | CQE32)", kernel.path(), err);
    };
}

} // namespace rbln::test
