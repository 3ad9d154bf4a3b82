// SPDX-License-Identifier: GPL-2.0
// kernel_uring.cpp - KernelDevice's io_uring (kernel.hpp CommandRing):
// SQE128/CQE32 rings whose SQEs are the uAPI's uring commands
// (RBLN_URING_CMD_SUBMIT, _WAIT), filled by kernel_uapi.hpp as the ioctls
// are; optionally single-issuer or SQPOLL.

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <liburing.h>

#include "kernel/kernel.hpp"
#include "kernel/kernel_uapi.hpp"

namespace rbln {

namespace {

// Where the 80-byte command payload of a 128-byte SQE starts.
constexpr std::size_t kSqeCmdOffset = 48;
constexpr std::size_t kSqeCmdBytes = 80;
static_assert(offsetof(io_uring_sqe, addr3) == kSqeCmdOffset);

// The SQPOLL rings of this process share one polling thread: a new ring
// attaches to a live one (IORING_SETUP_ATTACH_WQ), so N devices cost one
// polling CPU, not N.  A ring leaves the list before it is closed, under
// the mutex, so an fd read from the list stays that ring while the mutex is
// held.
struct SqpollRings {
    std::mutex mutex;
    std::vector<int> fds;
};

SqpollRings& sqpoll_rings() {
    // Never destroyed: devices may close their rings during static
    // destruction, after a static list would be gone.
    static SqpollRings* const rings = std::make_unique<SqpollRings>().release();
    return *rings;
}

class IoUring final : public CommandRing {
public:
    IoUring(int fd, io_uring ring, unsigned setup_flags, RingMode mode)
        : fd_(fd), ring_(ring), mode_(mode),
          deferred_((setup_flags & IORING_SETUP_DEFER_TASKRUN) != 0),
          taskrun_flag_((setup_flags & IORING_SETUP_TASKRUN_FLAG) != 0),
          sqpoll_((setup_flags & IORING_SETUP_SQPOLL) != 0) {
        if (sqpoll_) {
            SqpollRings& r = sqpoll_rings();
            const std::lock_guard<std::mutex> lock(r.mutex);
            r.fds.push_back(ring_.ring_fd);
        }
    }
    IoUring(const IoUring&) = delete;
    IoUring& operator=(const IoUring&) = delete;
    IoUring(IoUring&&) = delete;
    IoUring& operator=(IoUring&&) = delete;
    ~IoUring() override {
        std::unique_lock<std::mutex> lock; // SQPOLL: out of the list, then closed
        if (sqpoll_) {
            SqpollRings& r = sqpoll_rings();
            lock = std::unique_lock<std::mutex>(r.mutex);
            std::erase(r.fds, ring_.ring_fd);
        }
        io_uring_queue_exit(&ring_);
    }

    RingMode mode() const noexcept override { return mode_; }

    unsigned space() const override { return io_uring_sq_space_left(&ring_); }

    void push_submit(const SubmitArgs& job, std::uint64_t user_data) override {
        // The drm_rbln_sync array the SQE points to lives until its CQE.
        static const std::vector<drm_rbln_sync> none;
        const std::vector<drm_rbln_sync>* in = &none;
        if (!job.in_syncs.empty()) {
            std::vector<drm_rbln_sync> v;
            if (!spare_.empty()) {
                v = std::move(spare_.back());
                spare_.pop_back();
            }
            detail::encode_syncs(job.in_syncs, v);
            in = &(syncs_[user_data] = std::move(v));
        }
        const drm_rbln_submit p = detail::encode_submit(job, *in);
        push(RBLN_URING_CMD_SUBMIT, &p, sizeof(p), user_data);
    }

    void push_wait(const WaitArgs& wait, std::uint64_t user_data) override {
        const drm_rbln_wait w = detail::encode_wait(wait);
        push(RBLN_URING_CMD_WAIT, &w, sizeof(w), user_data);
    }

    // With SQPOLL, liburing returns the SQEs the polling thread has not
    // read yet (0..pushed), not how many it took: only an error counts.
    int submit() override {
        for (;;) {
            const int r = io_uring_submit(&ring_);
            if (r != -EINTR)
                return r;
        }
    }

    std::size_t drain(std::span<RingCompletion> out) override {
        // DEFER_TASKRUN: completions are posted only when the issuer asks
        // for events; TASKRUN_FLAG says whether any are waiting.
        if (deferred_ &&
            (!taskrun_flag_ || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) != 0))
            io_uring_enter(ring_.ring_fd, 0, 0, IORING_ENTER_GETEVENTS, nullptr);
        std::size_t n = 0;
        unsigned head = 0;
        io_uring_cqe* cqe = nullptr;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            if (n == out.size())
                break;
            out[n].user_data = cqe->user_data;
            out[n].res = cqe->res;
            out[n].extra = cqe->big_cqe[0];
            n++;
        }
        io_uring_cq_advance(&ring_, static_cast<unsigned>(n));
        if (!syncs_.empty())
            for (std::size_t i = 0; i < n; i++)
                if (auto it = syncs_.find(out[i].user_data); it != syncs_.end()) {
                    if (spare_.size() < kSpareSyncArrays)
                        spare_.push_back(std::move(it->second));
                    syncs_.erase(it);
                }
        return n;
    }

    int wait_for_completion() override { return wait_for_completions(1); }

    int wait_for_completions(unsigned want) override {
        // Returns at once if @want CQEs are there; consumes none.
        const int r =
            io_uring_enter(ring_.ring_fd, 0, want == 0 ? 1 : want, IORING_ENTER_GETEVENTS, nullptr);
        if (r < 0)
            return errno == EINTR ? 0 : -errno;
        return 0;
    }

private:
    static constexpr std::size_t kSpareSyncArrays = 64;

    // Fills one SQE: IORING_OP_URING_CMD @cmd_op with @payload (<= 80 bytes).
    void push(std::uint32_t cmd_op, const void* payload, std::size_t bytes,
              std::uint64_t user_data) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        // SQPOLL: SQEs handed over stay taken until the polling thread has
        // read them; wait for it (it is awake: the caller just submitted).
        while (sqe == nullptr && sqpoll_) {
            const int r = io_uring_sqring_wait(&ring_);
            if (r < 0 && r != -EINTR)
                throw Error::from_errno("io_uring_sqring_wait", "", -r);
            sqe = io_uring_get_sqe(&ring_);
        }
        if (sqe == nullptr)
            throw Error(Errc::Internal, "io_uring", "", 0, "the submission queue is full");
        // Liburing 2.3 has no uring_cmd prep helper: all 128 bytes zero
        // (__pad1 and uring_cmd_flags must be 0), the payload at byte 48.
        auto* raw = reinterpret_cast<std::byte*>(sqe);
        const std::size_t size = bytes < kSqeCmdBytes ? bytes : kSqeCmdBytes;
        std::memset(raw, 0, kSqeCmdOffset);
        std::memcpy(raw + kSqeCmdOffset, payload, size);
        if (size < kSqeCmdBytes)
            std::memset(raw + kSqeCmdOffset + size, 0, kSqeCmdBytes - size);
        sqe->opcode = IORING_OP_URING_CMD;
        sqe->fd = fd_;
        sqe->cmd_op = cmd_op;
        sqe->user_data = user_data;
    }

    int fd_;
    io_uring ring_;
    RingMode mode_;
    bool deferred_;
    bool taskrun_flag_;
    bool sqpoll_;
    /// In-sync arrays of SUBMITs whose CQE has not been drained, by user_data.
    std::unordered_map<std::uint64_t, std::vector<drm_rbln_sync>> syncs_;
    std::vector<std::vector<drm_rbln_sync>> spare_; ///< for reuse
};

} // namespace

Result<std::unique_ptr<CommandRing>> KernelDevice::make_ring(unsigned entries, RingMode mode,
                                                             unsigned sq_idle_ms) {
    io_uring ring{};
    unsigned flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
    const char* what = "io_uring_queue_init(SQE128 | CQE32)";
    int r = 0;
    if (mode == RingMode::SingleIssuer) {
        what = "io_uring_queue_init(SQE128 | CQE32 | SINGLE_ISSUER | DEFER_TASKRUN)";
        flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
        r = io_uring_queue_init(entries, &ring, flags | IORING_SETUP_TASKRUN_FLAG);
        if (r == 0)
            flags |= IORING_SETUP_TASKRUN_FLAG;
        else if (r == -EINVAL)
            r = io_uring_queue_init(entries, &ring, flags);
    } else if (mode == RingMode::SqPoll) {
        if (sq_idle_ms == 0 || sq_idle_ms > kMaxSqpollIdleMs)
            return Error(Errc::InvalidArgument, "io_uring_queue_init", path_, EINVAL,
                         "an SQPOLL thread's idle time of " + std::to_string(sq_idle_ms) +
                             " ms is outside 1.." + std::to_string(kMaxSqpollIdleMs));
        what = "io_uring_queue_init(SQE128 | CQE32 | SQPOLL)";
        flags |= IORING_SETUP_SQPOLL;
        io_uring_params p{};
        p.flags = flags;
        p.sq_thread_idle = sq_idle_ms;
        SqpollRings& rings = sqpoll_rings();
        const std::lock_guard<std::mutex> lock(rings.mutex);
        if (!rings.fds.empty()) {
            // Share the polling thread of a live ring.  Refused (EPERM) for
            // a ring of another process (inherited over fork): own thread.
            io_uring_params attach = p;
            attach.flags |= IORING_SETUP_ATTACH_WQ;
            attach.wq_fd = static_cast<std::uint32_t>(rings.fds.front());
            r = io_uring_queue_init_params(entries, &ring, &attach);
        }
        if (rings.fds.empty() || r < 0)
            r = io_uring_queue_init_params(entries, &ring, &p);
    } else {
        r = io_uring_queue_init(entries, &ring, flags);
    }
    if (r < 0) {
        const char* why =
            -r == EPERM    ? "io_uring is disabled (sysctl kernel.io_uring_disabled)"
            : -r == ENOSYS ? "the kernel has no io_uring"
            : -r == EINVAL
                ? (mode == RingMode::SingleIssuer ? "the kernel lacks SQE128/CQE32 or "
                                                    "single-issuer deferred rings"
                   : mode == RingMode::SqPoll     ? "the kernel lacks SQE128/CQE32 or SQPOLL rings"
                                                  : "the kernel lacks SQE128/CQE32 rings")
                : strerror(-r);
        return Error(errc_from_errno(-r), what, path_, -r,
                     std::string(why) + " (" + strerrorname_np(-r) + ")");
    }
    return std::unique_ptr<CommandRing>(std::make_unique<IoUring>(fd_.get(), ring, flags, mode));
}

} // namespace rbln
