// SPDX-License-Identifier: GPL-2.0
// submitter.cpp - jobs to rbln.ko over io_uring (or the ioctls), batched,
// with completions reaped by the threads that wait (submitter.hpp).

#include "exec/submitter.hpp"
#include "exec/job_detail.hpp"
#include "kernel/kernel.hpp"

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace rbln {

namespace {

// user_data of the start-up probe (records are pointers, never 1).
constexpr std::uint64_t kProbeTag = 1;

std::int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

// ---- the Submitter -----------------------------------------------------------

struct Submitter::Record {
    Job job;
    Channel* ch = nullptr;   // the job's queue (map nodes do not move)
    std::uint64_t n = 0;     // channel job number
    std::uint64_t seqno = 0; // the kernel's (ioctl: at submit; io_uring: at completion)
    enum class State { Queued, InKernel, Done } state = State::Queued;
    int err = 0;
    bool refused = false;

    // What the kernel gets for the job, on either path.  It points into
    // @job, which lives until the job is done.
    SubmitArgs args() const {
        SubmitArgs a;
        a.queue_id = job.queue_id;
        a.flags = job.flags;
        a.cmd_handle = job.cmd_handle;
        a.cmd_size = job.cmd_size;
        a.cmd_offset = job.cmd_offset;
        a.bo_handles = job.bo_handles;
        a.in_syncs = job.in_syncs;
        a.out = job.out;
        return a;
    }
};

struct Submitter::Channel {
    std::uint64_t last = 0;                      // jobs enqueued
    std::uint64_t done_upto = 0;                 // every job <= this is done
    std::deque<std::unique_ptr<Record>> records; // jobs done_upto+1 .. last
    std::optional<JobFailure> failure;
};

// Records of finished jobs are kept for reuse (a job costs no allocation of
// its own); what their jobs kept alive is released outside the mutex.
constexpr std::size_t kSpareRecords = 1024;

struct Submitter::State {
    SubmitterOptions options;
    std::mutex mutex;
    std::condition_variable reaped;
    bool reaping = false; // a thread waits in the kernel for CQEs (only it drains)
    std::unique_ptr<CommandRing> ring;
    Path path = Path::Ioctl;
    std::string fallback_reason;
    std::thread::id owner; // single_issuer: the only thread that may submit and wait
    bool sqpoll = false;   // the ring is an SQPOLL ring
    std::map<std::uint32_t, Channel> channels;
    std::uint32_t last_queue = 0; // channel_locked's cache (nullptr: none)
    Channel* last_channel = nullptr;
    std::vector<Record*> queued; // enqueued, not yet handed to the kernel
    std::vector<Record*> batch;  // flush_locked's hand-over (capacity kept)
    std::size_t in_kernel = 0;
    SubmitterStats stats;
    std::vector<std::unique_ptr<Record>> spare;        // finished, for reuse
    std::vector<std::shared_ptr<const void>> released; // keep_alive of finished jobs
    std::array<RingCompletion, 64> cqes;               // drain()'s buffer
    KernelInterface* kernel = nullptr;                 // the Submitter's kernel_
};

namespace {

// The card's detail of a done job, by a non-blocking WAIT; none if the
// kernel cannot say any more (e.g. the queue is gone).
std::optional<JobDetail> poll_detail(KernelInterface& kernel, std::uint32_t queue,
                                     std::uint64_t seqno) {
    WaitArgs w;
    w.queue_id = queue;
    w.seqno = seqno;
    try {
        const WaitResult res = kernel.wait(w);
        if (res.done)
            return res.detail;
    } catch (const Error&) { // NOLINT(bugprone-empty-catch): the errno is reported anyway
    }
    return std::nullopt;
}

void warn_default(const std::string& message) {
    std::fprintf(stderr, "librbln: %s\n", message.c_str());
}

// Takes what finished jobs kept alive while the mutex is held (declared
// after the lock); it is released after the mutex is (@dead is declared
// before it), so no buffer is freed under the mutex.
struct Retire {
    std::vector<std::shared_ptr<const void>>& dead;
    std::vector<std::shared_ptr<const void>>& released;
    Retire(std::vector<std::shared_ptr<const void>>& d, std::vector<std::shared_ptr<const void>>& r)
        : dead(d), released(r) {}
    Retire(const Retire&) = delete;
    Retire& operator=(const Retire&) = delete;
    Retire(Retire&&) = delete;
    Retire& operator=(Retire&&) = delete;
    ~Retire() {
        if (!released.empty())
            dead.swap(released);
    }
};

using Keeps = std::vector<std::shared_ptr<const void>>;

} // namespace

Submitter::Submitter(std::shared_ptr<KernelInterface> kernel, SubmitterOptions options)
    : kernel_(std::move(kernel)), s_(std::make_unique<State>()) {
    s_->kernel = kernel_.get();
    s_->options = std::move(options);
    s_->owner = std::this_thread::get_id();
    auto& o = s_->options;
    if (o.sqpoll_idle_ms > 0 && o.single_issuer)
        throw Error(Errc::InvalidArgument, "Submitter", kernel_->path(), 0,
                    "an SQPOLL ring and single-issuer mode exclude each other (a single-issuer "
                    "ring defers completions to the issuing thread; an SQPOLL ring's kernel "
                    "thread issues): ask for one of them");
    if (o.sqpoll_idle_ms > kMaxSqpollIdleMs)
        throw Error(Errc::InvalidArgument, "Submitter", kernel_->path(), 0,
                    "an SQPOLL thread's idle time of " + std::to_string(o.sqpoll_idle_ms) +
                        " ms is above " + std::to_string(kMaxSqpollIdleMs) + " ms");
    if (o.batch == 0)
        o.batch = 1;
    if (o.max_in_flight == 0)
        o.max_in_flight = 1;
    if (o.ring_entries < o.batch)
        o.ring_entries = o.batch;
    // CQ = 2 x SQ entries: keep the jobs in the kernel below it.
    if (o.max_in_flight > 2 * o.ring_entries)
        o.max_in_flight = 2 * o.ring_entries;
    s_->queued.reserve(o.batch);
    if (!o.use_io_uring) {
        s_->fallback_reason = "io_uring not requested";
        return;
    }
    std::unique_ptr<CommandRing> ring;
    {
        const RingMode mode = o.single_issuer        ? RingMode::SingleIssuer
                              : o.sqpoll_idle_ms > 0 ? RingMode::SqPoll
                                                     : RingMode::AnyThread;
        Result<std::unique_ptr<CommandRing>> made =
            kernel_->make_ring(o.ring_entries, mode, o.sqpoll_idle_ms);
        if (!made && mode == RingMode::SqPoll) {
            // Without SQPOLL the jobs still go through io_uring.
            static std::once_flag logged;
            std::call_once(logged, [&] {
                (o.warn ? o.warn : warn_default)(
                    "an SQPOLL io_uring is unavailable, submitting through a ring without "
                    "it: " +
                    std::string(made.error().what()));
            });
            made = kernel_->make_ring(o.ring_entries, RingMode::AnyThread, 0);
        }
        if (made) {
            ring = std::move(*made);
            s_->sqpoll = ring->mode() == RingMode::SqPoll;
        } else {
            s_->fallback_reason = made.error().what();
        }
    }
    if (ring) {
        // Probe: a WAIT for queue 0 is -ENOENT from a kernel that serves
        // rbln uring_cmds; -EOPNOTSUPP / -EINVAL mean it does not.
        ring->push_wait(WaitArgs{}, kProbeTag);
        int r = ring->submit();
        std::array<RingCompletion, 1> cqe{};
        while (r >= 0 && ring->drain(cqe) == 0)
            r = ring->wait_for_completion();
        if (r < 0)
            s_->fallback_reason = "io_uring_enter failed (" + std::string(strerror(-r)) + ")";
        else if (cqe[0].res != 0 && cqe[0].res != -ENOENT)
            s_->fallback_reason = "the kernel rejects rbln uring_cmds on " + kernel_->path() +
                                  " (" + strerror(-cqe[0].res) + ")";
        else {
            s_->ring = std::move(ring);
            s_->path = Path::IoUring;
            return;
        }
    }
    s_->sqpoll = false;
    // Once per process: every device falls back for the same reason.
    static std::once_flag logged;
    std::call_once(logged, [&] {
        (o.warn ? o.warn : warn_default)("io_uring is unavailable, using the SUBMIT/WAIT "
                                         "ioctls instead: " +
                                         s_->fallback_reason);
    });
    // The analyzer loses the ring inside Result's std::variant and reports a
    // leak here; the unique_ptr owns it on every path.
} // NOLINT(clang-analyzer-cplusplus.NewDeleteLeaks)

Submitter::~Submitter() {
    if (s_->options.single_issuer && std::this_thread::get_id() != s_->owner)
        return; // the ring refuses other threads; the kernel finishes the jobs
    try {
        wait_all();
    } catch (...) { // NOLINT(bugprone-empty-catch): nothing left to report to
    }
}

Submitter::Path Submitter::path() const noexcept {
    return s_->path;
}

std::string Submitter::fallback_reason() const {
    return s_->path == Path::IoUring ? std::string() : s_->fallback_reason;
}

bool Submitter::single_issuer() const noexcept {
    return s_->options.single_issuer;
}

bool Submitter::sqpoll() const noexcept {
    return s_->sqpoll;
}

void Submitter::check_thread(const char* operation) const {
    if (!s_->options.single_issuer || std::this_thread::get_id() == s_->owner) [[likely]]
        return;
    std::ostringstream owner;
    std::ostringstream self;
    owner << s_->owner;
    self << std::this_thread::get_id();
    throw Error(Errc::InvalidArgument, operation, kernel_->path(), 0,
                "this device submits in single-issuer mode (RBLN_SINGLE_ISSUER=1 or "
                "SubmitterOptions::single_issuer), so only the thread that opened it (thread " +
                    owner.str() + ") may submit work and wait for it; this is thread " +
                    self.str() +
                    ". Use the device from that thread, or open it without single-issuer mode");
}

// The bookkeeping of @queue (mutex held).
Submitter::Channel& Submitter::channel_locked(std::uint32_t queue) {
    State& s = *s_;
    if (s.last_channel != nullptr && s.last_queue == queue) [[likely]]
        return *s.last_channel;
    Channel& ch = s.channels[queue];
    s.last_queue = queue;
    s.last_channel = &ch;
    return ch;
}

// Marks @r done (called with the mutex held) and retires the done prefix
// of its channel: the records go back to the spare list, what their jobs
// kept alive to State::released (freed outside the mutex).
void Submitter::complete(State& s, Record& r, int err, bool refused,
                         std::optional<JobDetail> detail) {
    if (r.state == Record::State::Done)
        return;
    if (r.state == Record::State::InKernel)
        s.in_kernel--;
    r.state = Record::State::Done;
    r.err = err;
    r.refused = refused;
    s.stats.completions++;
    Channel& ch = *r.ch;
    if (err != 0) {
        s.stats.failures++;
        if (!ch.failure) {
            // A CQE has no room for the card's detail: WAIT (a poll, as the
            // job is done) reads it, for the first failure of the queue.
            if (!refused && !detail && r.seqno != 0)
                detail = poll_detail(*s.kernel, r.job.queue_id, r.seqno);
            ch.failure = JobFailure{r.n, err, refused, detail.value_or(JobDetail{})};
        }
    }
    while (!ch.records.empty() && ch.records.front()->state == Record::State::Done) {
        std::unique_ptr<Record> done = std::move(ch.records.front());
        ch.records.pop_front();
        ch.done_upto = done->n;
        Keeps& keep = done->job.keep_alive;
        if (!keep.empty()) {
            if (s.released.empty())
                s.released.swap(keep);
            else
                for (auto& k : keep)
                    s.released.push_back(std::move(k));
            keep.clear();
        }
        if (s.spare.size() < kSpareRecords) {
            done->job.bo_handles.clear();
            done->job.in_syncs.clear();
            s.spare.push_back(std::move(done));
        }
    }
}

// Processes the CQEs that are there; returns how many.
std::size_t Submitter::drain(State& s) {
    std::size_t total = 0;
    for (;;) {
        const std::size_t n = s.ring->drain(s.cqes);
        for (std::size_t i = 0; i < n; i++) {
            const RingCompletion& c = s.cqes[i];
            if (c.user_data == kProbeTag)
                continue;
            // user_data carries back the record pointer push() was given.
            auto* r = reinterpret_cast<Record*>( // NOLINT(performance-no-int-to-ptr)
                c.user_data);
            r->seqno = c.extra;
            // big_cqe[0] is the job's seqno; 0: SUBMIT refused the job.
            complete(s, *r, c.res < 0 ? -c.res : 0, c.res < 0 && r->seqno == 0);
        }
        total += n;
        if (n < s.cqes.size())
            return total;
    }
}

std::uint64_t Submitter::enqueue(Job job) {
    check_thread("enqueue");
    Keeps dead;
    std::unique_lock<std::mutex> lock(s_->mutex);
    const Retire retire(dead, s_->released);
    State& s = *s_;
    std::unique_ptr<Record> rec;
    if (!s.spare.empty()) {
        rec = std::move(s.spare.back());
        s.spare.pop_back();
        rec->seqno = 0;
        rec->state = Record::State::Queued;
        rec->err = 0;
        rec->refused = false;
    } else {
        rec = std::make_unique<Record>();
    }
    rec->job = std::move(job);
    Channel& ch = channel_locked(rec->job.queue_id);
    rec->ch = &ch;
    rec->n = ++ch.last;
    const std::uint64_t n = rec->n;
    s.queued.push_back(rec.get());
    ch.records.push_back(std::move(rec));
    s.stats.jobs++;
    if (s.queued.size() >= s.options.batch)
        flush_locked(lock);
    return n;
}

void Submitter::flush() {
    check_thread("flush");
    Keeps dead;
    std::unique_lock<std::mutex> lock(s_->mutex);
    const Retire retire(dead, s_->released);
    flush_locked(lock);
}

void Submitter::flush_locked(std::unique_lock<std::mutex>& lock) {
    State& s = *s_;
    if (s.path == Path::IoUring && !s.reaping)
        drain(s);
    while (!s.queued.empty()) {
        // Room in the kernel for at least one job.
        while (s.in_kernel >= s.options.max_in_flight)
            reap_locked(lock, nullptr, 1);
        // reap_locked may have let another thread flush.
        if (s.queued.empty())
            break;
        const std::size_t room = s.options.max_in_flight - s.in_kernel;
        const std::size_t count = std::min(room, s.queued.size());
        s.batch.assign(s.queued.begin(), s.queued.begin() + static_cast<std::ptrdiff_t>(count));
        s.queued.erase(s.queued.begin(), s.queued.begin() + static_cast<std::ptrdiff_t>(count));
        if (s.path == Path::IoUring)
            submit_uring(s.batch);
        else
            submit_ioctl(s.batch);
    }
}

void Submitter::submit_uring(std::span<Record* const> batch) {
    State& s = *s_;
    std::size_t pushed = 0;
    auto hand_over = [&] {
        const int r = s.ring->submit();
        if (r < 0) // the ring itself failed: nothing it held will complete
            throw Error::from_errno("io_uring_enter", kernel_->path(), -r);
        s.stats.batches++;
        pushed = 0;
    };
    for (Record* r : batch) {
        if (s.ring->space() == 0)
            hand_over();
        s.ring->push_submit(r->args(), reinterpret_cast<std::uintptr_t>(r));
        r->state = Record::State::InKernel;
        s.in_kernel++;
        pushed++;
    }
    if (pushed > 0)
        hand_over();
}

void Submitter::submit_ioctl(std::span<Record* const> batch) {
    State& s = *s_;
    s.stats.batches++;
    for (Record* r : batch) {
        try {
            r->seqno = kernel_->submit(r->args());
            r->state = Record::State::InKernel;
            s.in_kernel++;
        } catch (const Error& e) {
            // As on the io_uring path: the refusal is the job's outcome.
            complete(s, *r, e.sys_errno() != 0 ? e.sys_errno() : EIO, true);
        }
    }
}

// One step towards progress: processes completions, blocking for at least
// one if none is there (or, with another reaper active, for its round).
// @target (ioctl path): the record to wait for; nullptr: the oldest.
// @want (io_uring, single issuer): CQEs certain to come that the caller
// needs (a waiter asks for them all at once: one wake-up).
void Submitter::reap_locked(std::unique_lock<std::mutex>& lock, Record* target, unsigned want) {
    State& s = *s_;
    if (s.path == Path::IoUring) {
        // While a reaper waits only it takes CQEs: the kernel wakes it for
        // CQEs posted after it went to sleep, and must not wait for one
        // another thread took in the meantime.
        if (s.reaping) {
            s.reaped.wait(lock);
            return;
        }
        if (drain(s) > 0)
            return;
        if (s.in_kernel == 0)
            throw Error(Errc::Internal, "wait", kernel_->path(), 0,
                        "waiting for a job that is not in the kernel");
        // Another thread's job may finish first (any-thread mode): wake
        // for every CQE then.
        if (!s.options.single_issuer || want == 0)
            want = 1;
        if (want > s.in_kernel)
            want = static_cast<unsigned>(s.in_kernel);
        s.reaping = true;
        lock.unlock();
        const int r = s.ring->wait_for_completions(want);
        lock.lock();
        s.reaping = false;
        drain(s);
        s.reaped.notify_all();
        if (r < 0)
            throw Error::from_errno("io_uring_enter(GETEVENTS)", kernel_->path(), -r);
        return;
    }
    // ioctl: WAIT for one job, without the mutex.
    if (target == nullptr) {
        for (auto& [q, ch] : s.channels)
            for (auto& rec : ch.records)
                if (rec->state == Record::State::InKernel) {
                    target = rec.get();
                    break;
                }
        if (target == nullptr)
            throw Error(Errc::Internal, "wait", kernel_->path(), 0,
                        "waiting for a job that is not in the kernel");
    }
    const std::uint32_t queue = target->job.queue_id;
    const std::uint64_t n = target->n;
    WaitArgs w;
    w.queue_id = queue;
    w.seqno = target->seqno;
    WaitResult res;
    lock.unlock();
    try {
        do {
            w.deadline_ns = monotonic_ns() + 1000000000;
            res = kernel_->wait(w);
        } while (!res.done);
    } catch (...) {
        lock.lock();
        throw;
    }
    lock.lock();
    // Another thread may have completed (and retired) it meanwhile.
    Channel& ch = channel_locked(queue);
    if (n <= ch.done_upto)
        return;
    for (auto& rec : ch.records)
        if (rec->n == n) {
            complete(s, *rec, res.job_error < 0 ? -res.job_error : res.job_error, false,
                     res.detail);
            break;
        }
}

// Polls the jobs of @ch up to @n without blocking (ioctl path).
void Submitter::poll_ioctl(Channel& ch, std::uint64_t n) {
    for (std::size_t i = 0; i < ch.records.size();) {
        Record& r = *ch.records[i];
        if (r.n > n || r.state == Record::State::Queued)
            return;
        if (r.state == Record::State::Done) {
            i++;
            continue;
        }
        WaitArgs w;
        w.queue_id = r.job.queue_id;
        w.seqno = r.seqno;
        const WaitResult res = kernel_->wait(w);
        if (!res.done)
            return;
        const std::size_t before = ch.records.size();
        complete(*s_, r, res.job_error < 0 ? -res.job_error : res.job_error, false, res.detail);
        if (ch.records.size() == before)
            i++; // not retired (an earlier job is still pending)
        else
            i = 0;
    }
}

bool Submitter::done(std::uint32_t queue, std::uint64_t n) {
    Keeps dead;
    std::unique_lock<std::mutex> lock(s_->mutex);
    const Retire retire(dead, s_->released);
    if (s_->options.single_issuer && std::this_thread::get_id() != s_->owner) {
        // Not the issuer: what the issuer has reaped, without the ring.
        const auto it = s_->channels.find(queue);
        return it != s_->channels.end() && n <= it->second.done_upto;
    }
    flush_locked(lock);
    Channel& ch = channel_locked(queue);
    if (n <= ch.done_upto)
        return true;
    if (s_->path == Path::IoUring) {
        if (!s_->reaping)
            drain(*s_);
    } else {
        poll_ioctl(ch, n);
    }
    return n <= ch.done_upto;
}

void Submitter::wait(std::uint32_t queue, std::uint64_t n) {
    check_thread("wait");
    Keeps dead;
    std::unique_lock<std::mutex> lock(s_->mutex);
    const Retire retire(dead, s_->released);
    flush_locked(lock);
    for (;;) {
        Channel& ch = channel_locked(queue);
        if (n <= ch.done_upto)
            break;
        if (n > ch.last)
            throw Error(Errc::InvalidArgument, "wait", kernel_->path(), 0,
                        "job " + std::to_string(n) + " of queue " + std::to_string(queue) +
                            " was never enqueued");
        Record* target = nullptr;
        unsigned want = 1;
        if (s_->path == Path::Ioctl) {
            for (auto& rec : ch.records)
                if (rec->n <= n && rec->state == Record::State::InKernel) {
                    target = rec.get();
                    break;
                }
            if (target == nullptr) { // all done, not yet retired: cannot happen
                flush_locked(lock);
                continue;
            }
        } else if (s_->options.single_issuer) {
            // Every job of the queue up to @n that is in the kernel will
            // post its CQE before @n is done.
            want = 0;
            for (const auto& rec : ch.records) {
                if (rec->n > n)
                    break;
                if (rec->state == Record::State::InKernel)
                    want++;
            }
        }
        reap_locked(lock, target, want);
    }
}

void Submitter::wait_all() {
    check_thread("wait");
    std::vector<std::pair<std::uint32_t, std::uint64_t>> lasts;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        for (const auto& [q, ch] : s_->channels)
            lasts.emplace_back(q, ch.last);
    }
    for (const auto& [q, n] : lasts)
        wait(q, n);
}

std::uint64_t Submitter::last_job(std::uint32_t queue) const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    const auto it = s_->channels.find(queue);
    return it == s_->channels.end() ? 0 : it->second.last;
}

std::uint64_t Submitter::completed(std::uint32_t queue) const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    const auto it = s_->channels.find(queue);
    return it == s_->channels.end() ? 0 : it->second.done_upto;
}

std::optional<JobFailure> Submitter::take_failure(std::uint32_t queue) {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    const auto it = s_->channels.find(queue);
    if (it == s_->channels.end())
        return std::nullopt;
    return std::exchange(it->second.failure, std::nullopt);
}

void Submitter::forget_queue(std::uint32_t queue) {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    const auto it = s_->channels.find(queue);
    if (it != s_->channels.end() && it->second.records.empty()) {
        if (s_->last_channel == &it->second)
            s_->last_channel = nullptr;
        s_->channels.erase(it);
    }
}

SubmitterStats Submitter::stats() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->stats;
}

Error job_error(const JobFailure& f, const std::string& path) {
    if (f.refused)
        return kernel_error(KernelOp::Submit, path, f.err);
    const char* meaning = nullptr;
    switch (f.err) {
    case EFAULT:
        meaning = "an MMU fault: the job touched device memory not mapped for it (this open "
                  "file's later jobs fail too: open the device anew)";
        break;
    case EINVAL:
        meaning = "the card refused a command packet of the job (a librbln bug)";
        break;
    case EPERM:
        meaning = "the job carried a privileged packet";
        break;
    case EIO:
        meaning = "a DMA error, or the card failed and lost the job";
        break;
    case ETIMEDOUT:
        meaning = "the job timed out or hung the chiplet, which was reset";
        break;
    case ECANCELED:
        meaning = "the job was cancelled: the open file that submitted it was closed (or its "
                  "process ended) before it finished, and the driver's release_grace_ms passed";
        break;
    default:
        meaning = "the job failed on the card";
        break;
    }
    const char* name = strerrorname_np(f.err);
    const std::string detail = describe_job_detail(f.detail);
    if (!detail.empty() && f.err == EINVAL)
        meaning = "the card refused a command packet of the job";
    return Error(f.err == ETIMEDOUT ? Errc::Timeout : Errc::JobFailed,
                 "job " + std::to_string(f.job), path, f.err,
                 std::string(meaning) + (detail.empty() ? "" : ": " + detail) + " (" +
                     (name != nullptr ? name : "errno " + std::to_string(f.err)) +
                     "); later work on the stream ran as usual");
}

} // namespace rbln
