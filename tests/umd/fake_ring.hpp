// SPDX-License-Identifier: GPL-2.0
// fake_ring.hpp - a CommandRing over FakeKernel: SUBMIT SQEs become
// FakeKernel::submit() calls at submit(), their CQEs appear when the fake's
// jobs complete (res = job error, extra = seqno; a refused SUBMIT: -errno,
// extra 0), WAIT answers at once.  wait_for_completion() plays the card
// progressing: it completes one held job if no CQE is there.
#pragma once

#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "drm/rbln_accel.h"
#include "fake_kernel.hpp"
#include "rbln/submitter.hpp"

namespace rbln::test {

class FakeRing final : public CommandRing {
public:
    FakeRing(FakeKernel& kernel, unsigned entries) : k_(kernel), entries_(entries) {}

    unsigned space() const override { return entries_ - static_cast<unsigned>(sq_.size()); }

    void push(std::uint32_t cmd_op, std::span<const std::byte> payload,
              std::uint64_t user_data) override {
        Sqe e;
        e.op = cmd_op;
        e.user_data = user_data;
        std::memcpy(e.payload, payload.data(), std::min(payload.size(), sizeof(e.payload)));
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
            if (e.op == RBLN_URING_CMD_WAIT) {
                drm_rbln_wait w{};
                std::memcpy(&w, e.payload, sizeof(w));
                try {
                    const WaitResult r = k_.wait({w.queue_id, w.seqno, std::nullopt, 0});
                    cq_.push_back({e.user_data, r.done ? r.job_error : -ETIME, w.seqno});
                } catch (const Error& err) {
                    cq_.push_back({e.user_data, -err.sys_errno(), 0});
                }
                continue;
            }
            drm_rbln_submit s{};
            std::memcpy(&s, e.payload, sizeof(s));
            SubmitArgs a;
            a.queue_id = s.queue_id;
            a.cmd_handle = s.cmd_handle;
            a.cmd_size = s.cmd_size;
            a.cmd_offset = s.cmd_offset;
            // The payload carries user pointers, as the uAPI's does.
            a.bo_handles = std::span<const std::uint32_t>(
                reinterpret_cast<const std::uint32_t*>( // NOLINT(performance-no-int-to-ptr)
                    s.bo_handles),
                s.bo_count);
            std::vector<SyncPoint> in;
            const auto* raw =
                reinterpret_cast<const drm_rbln_sync*>( // NOLINT(performance-no-int-to-ptr)
                    s.in_syncs);
            for (std::uint32_t i = 0; i < s.in_count; i++)
                in.push_back({raw[i].handle, raw[i].point});
            a.in_syncs = in;
            a.out = {s.out_handle, s.out_point};
            try {
                const std::uint64_t seqno = k_.submit(a);
                inflight_.push_back({e.user_data, s.queue_id, seqno});
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
        std::uint32_t op = 0;
        std::uint64_t user_data = 0;
        std::byte payload[80]{};
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

/// A RingFactory handing out FakeRings over @k (@last: the ring made last).
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
