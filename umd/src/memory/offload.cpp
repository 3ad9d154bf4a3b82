// SPDX-License-Identifier: GPL-2.0
// offload.cpp - offload scopes and host regions paged out to a file with
// io_uring (rbln/offload.hpp).

#include "rbln/offload.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernel/unique_fd.hpp"
#include "runtime/error_text.hpp"

namespace rbln {

namespace {

constexpr std::uint64_t kExtentAlign = 4096;
// io_uring's read/write length is 32-bit; the kernel caps one request near 2 GiB.
constexpr std::uint64_t kMaxChunk = std::uint64_t{1} << 30;

struct Totals {
    std::atomic<std::uint64_t> writes{0};
    std::atomic<std::uint64_t> bytes_offloaded{0};
    std::atomic<std::uint64_t> reads{0};
    std::atomic<std::uint64_t> bytes_brought_back{0};
    std::atomic<std::uint64_t> failures{0};
    std::atomic<std::uint64_t> bytes_dropped{0};
    std::atomic<std::uint64_t> bytes_paged_out{0};
};
Totals g_totals;

std::atomic<unsigned> g_open_scopes{0};

std::string errno_text(int err) {
    return std::string(std::strerror(err)) + " (" + detail::errno_name(err) + ")";
}

std::string bytes_text(std::uint64_t n) {
    return std::to_string(n) + (n == 1 ? " byte" : " bytes");
}

// Forks, as the parent sees them.  A fork() child shares the offload files
// and holds copies of the storages as they were at the fork, so an extent
// that existed at a fork may still be read by a child: the parent neither
// punches it nor writes over it (HostRegion).  g_fork_epoch counts the
// forks; g_fork_guard is held across each fork and across a punch, so a
// punch that saw the old epoch is done before the child exists.  (A plain
// mutex: the child makes it anew, which an rwlock held by the parent's
// thread would not allow.)
std::atomic<std::uint64_t> g_fork_epoch{0};
pthread_mutex_t g_fork_guard = PTHREAD_MUTEX_INITIALIZER;

void fork_prepare() noexcept {
    (void)::pthread_mutex_lock(&g_fork_guard);
}
void fork_parent() noexcept {
    g_fork_epoch.fetch_add(1, std::memory_order_relaxed);
    (void)::pthread_mutex_unlock(&g_fork_guard);
}
void fork_child() noexcept {
    (void)::pthread_mutex_init(&g_fork_guard, nullptr);
}

std::uint64_t fork_epoch() noexcept {
    return g_fork_epoch.load(std::memory_order_relaxed);
}

void watch_forks() noexcept {
    static const int registered = ::pthread_atfork(fork_prepare, fork_parent, fork_child);
    (void)registered;
}

} // namespace

namespace detail {

struct OffloadState {
    OffloadState(OffloadOptions opts, std::string location)
        : options(std::move(opts)), where(std::move(location)), owner(std::this_thread::get_id()),
          pid(::getpid()) {
        watch_forks();
    }
    OffloadState(const OffloadState&) = delete;
    OffloadState& operator=(const OffloadState&) = delete;
    OffloadState(OffloadState&&) = delete;
    OffloadState& operator=(OffloadState&&) = delete;
    ~OffloadState() {
        if (ring_ok)
            io_uring_queue_exit(&ring);
    }

    const OffloadOptions options;
    const std::string where; ///< the directory (or the given file)
    const std::thread::id owner;
    const pid_t pid; ///< the process that made the file (and the ring)
    std::atomic<bool> open{true};

    /// A fork() child must not use the parent's ring (its memory is shared)
    /// nor allocate extents (the parent allocates the same ones).
    bool forked() const noexcept { return ::getpid() != pid; }

    // The file and its I/O.
    UniqueFd fd;
    std::mutex io_mutex;
    io_uring ring{};               ///< guarded by io_mutex
    bool ring_ok = false;          ///< set before first use
    std::uint64_t next_offset = 0; ///< guarded by io_mutex

    // Members and figures.
    mutable std::mutex mutex;
    std::vector<std::weak_ptr<OffloadMember>> members; ///< guarded
    std::size_t prune_at = 64;                         ///< guarded
    OffloadStats stats;                                ///< guarded
    std::vector<Error> failures;                       ///< guarded

    /// One read or write of @n bytes at @offset, through io_uring or
    /// pread/pwrite: bytes done, or -errno.
    std::int64_t transfer_once(bool write, std::byte* data, std::uint64_t n, std::uint64_t offset) {
        if (!ring_ok || forked()) {
            const ssize_t r = write ? ::pwrite(fd.get(), data, n, static_cast<off_t>(offset))
                                    : ::pread(fd.get(), data, n, static_cast<off_t>(offset));
            return r < 0 ? -errno : r;
        }
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (sqe == nullptr)
            return -EBUSY; // cannot happen: one request at a time under io_mutex
        const auto len = static_cast<unsigned>(std::min(n, kMaxChunk));
        if (write)
            io_uring_prep_write(sqe, fd.get(), data, len, offset);
        else
            io_uring_prep_read(sqe, fd.get(), data, len, offset);
        return submit_and_wait();
    }

    /// Submits the one prepared SQE and waits for its CQE: its res, or
    /// -errno of io_uring itself.
    int submit_and_wait() {
        int r = io_uring_submit(&ring);
        if (r < 0)
            return r;
        io_uring_cqe* cqe = nullptr;
        do {
            r = io_uring_wait_cqe(&ring, &cqe);
        } while (r == -EINTR);
        if (r < 0)
            return r;
        r = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        return r;
    }

    /// All @n bytes: 0, or -errno with *@done the bytes that got through
    /// (a transfer that makes no progress is -EIO for a write, -ENODATA for
    /// a read past the end of the file).
    int transfer(bool write, std::byte* data, std::uint64_t n, std::uint64_t offset,
                 std::uint64_t* done) {
        const std::lock_guard<std::mutex> lock(io_mutex);
        *done = 0;
        while (*done < n) {
            const std::int64_t r = transfer_once(write, data + *done, n - *done, offset + *done);
            if (r == -EINTR || r == -EAGAIN)
                continue;
            if (r < 0)
                return static_cast<int>(r);
            if (r == 0)
                return write ? -EIO : -ENODATA;
            *done += static_cast<std::uint64_t>(r);
        }
        return 0;
    }

    /// fdatasync of the file: 0 or -errno (a file that cannot be synced,
    /// EINVAL, counts as synced: there is nothing more to do).
    int sync() {
        const std::lock_guard<std::mutex> lock(io_mutex);
        int r = 0;
        if (ring_ok && !forked()) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            if (sqe == nullptr)
                return -EBUSY;
            io_uring_prep_fsync(sqe, fd.get(), IORING_FSYNC_DATASYNC);
            r = submit_and_wait();
        } else if (::fdatasync(fd.get()) != 0) {
            r = -errno;
        }
        if (r == -EINVAL || r == -EROFS)
            return 0;
        if (r < 0)
            return r;
        // The data is on stable storage: its page-cache copy can go too.
        (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
        return 0;
    }

    std::uint64_t allocate(std::uint64_t n) {
        const std::lock_guard<std::mutex> lock(io_mutex);
        const std::uint64_t at = next_offset;
        next_offset +=
            (std::max<std::uint64_t>(n, 1) + kExtentAlign - 1) / kExtentAlign * kExtentAlign;
        return at;
    }

    /// Gives the disk space of an extent written in fork epoch @epoch back
    /// (best effort).  Not in a fork() child (the extents are the
    /// parent's), nor for an extent a child forked since may read: its
    /// space comes back when the file is closed by all.
    void release(std::uint64_t offset, std::uint64_t n, std::uint64_t epoch) noexcept {
        if (n == 0 || !options.file.empty() || forked())
            return;
        if (::pthread_mutex_lock(&g_fork_guard) != 0)
            return;
        if (epoch == fork_epoch()) // else a child forked since may read it
            (void)::fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(offset), static_cast<off_t>(n));
        (void)::pthread_mutex_unlock(&g_fork_guard);
    }

    void fail(const Error& e) {
        const std::lock_guard<std::mutex> lock(mutex);
        stats.failures++;
        failures.push_back(e);
        g_totals.failures.fetch_add(1, std::memory_order_relaxed);
    }

    template <typename F> void update(F&& f) {
        const std::lock_guard<std::mutex> lock(mutex);
        f(stats);
    }

    /// Phase 1 and 2 over every live member; the first failure, if any.
    std::optional<Error> offload_members() {
        std::vector<std::shared_ptr<OffloadMember>> live;
        {
            const std::lock_guard<std::mutex> lock(mutex);
            std::erase_if(members, [](const auto& m) { return m.expired(); });
            for (const auto& m : members)
                if (auto p = m.lock())
                    live.push_back(std::move(p));
        }
        std::optional<Error> first;
        std::vector<std::pair<std::shared_ptr<OffloadMember>, std::uint64_t>> written;
        for (auto& m : live) {
            try {
                const std::uint64_t token = m->offload_write();
                if (token != 0)
                    written.emplace_back(std::move(m), token);
            } catch (const Error& e) {
                if (!first)
                    first = e;
            }
        }
        if (written.empty())
            return first;
        const int r = sync();
        if (r < 0) {
            Error e(Errc::Io, "offload", where, -r,
                    "syncing the offload file failed: " + errno_text(-r) + "; " +
                        std::to_string(written.size()) +
                        " host copies written to it stay in memory: the data stays in "
                        "memory; check the file system of '" +
                        where + "'");
            fail(e);
            if (!first)
                first = e;
        }
        for (auto& [m, token] : written)
            m->offload_finish(token, r == 0);
        return first;
    }
};

namespace {

thread_local std::vector<std::shared_ptr<OffloadState>> t_scopes; ///< open on this thread

} // namespace

std::shared_ptr<OffloadState> current_offload_scope() {
    if (g_open_scopes.load(std::memory_order_relaxed) == 0 || t_scopes.empty())
        return nullptr;
    return t_scopes.back();
}

void offload_register(const std::shared_ptr<OffloadState>& scope,
                      const std::shared_ptr<OffloadMember>& member) {
    const std::lock_guard<std::mutex> lock(scope->mutex);
    if (scope->members.size() >= scope->prune_at) {
        std::erase_if(scope->members, [](const auto& m) { return m.expired(); });
        scope->prune_at = std::max<std::size_t>(64, scope->members.size() * 2);
    }
    scope->members.push_back(member);
}

// ---- HostRegion ----------------------------------------------------------

HostRegion::HostRegion(std::shared_ptr<OffloadState> scope, std::uint64_t storage,
                       std::uint64_t nbytes)
    : scope_(std::move(scope)), storage_(storage), nbytes_(nbytes) {}

HostRegion::~HostRegion() {
    if (!scope_)
        return;
    if (paged_out()) {
        scope_->update([&](OffloadStats& s) { s.bytes_paged_out -= nbytes_; });
        g_totals.bytes_paged_out.fetch_sub(nbytes_, std::memory_order_relaxed);
    }
    if (extent_)
        scope_->release(*extent_, nbytes_, extent_epoch_);
}

std::byte* HostRegion::get(bool need_data) {
    if (data_)
        return data_.get();
    if (!paged_out() || !need_data) {
        data_ = std::make_unique<std::byte[]>(nbytes_); // zeroed
        if (file_valid_) {
            // The caller overwrites it all: the file's copy is not needed.
            file_valid_ = false;
            scope_->update([&](OffloadStats& s) { s.bytes_paged_out -= nbytes_; });
            g_totals.bytes_paged_out.fetch_sub(nbytes_, std::memory_order_relaxed);
        }
        return data_.get();
    }
    auto data = std::make_unique_for_overwrite<std::byte[]>(nbytes_);
    std::uint64_t done = 0;
    const int r = scope_->transfer(false, data.get(), nbytes_, *extent_, &done);
    if (r < 0) {
        Error e(Errc::Io, "offload", scope_->where, -r,
                "reading storage " + std::to_string(storage_) + "'s host copy (" +
                    bytes_text(nbytes_) + ") back from the offload file failed after " +
                    bytes_text(done) + ": " + errno_text(-r) +
                    "; the data stays in the file and the next use tries again");
        scope_->fail(e);
        throw e;
    }
    data_ = std::move(data);
    scope_->update([&](OffloadStats& s) {
        s.reads++;
        s.bytes_brought_back += nbytes_;
        s.bytes_paged_out -= nbytes_;
    });
    g_totals.reads.fetch_add(1, std::memory_order_relaxed);
    g_totals.bytes_brought_back.fetch_add(nbytes_, std::memory_order_relaxed);
    g_totals.bytes_paged_out.fetch_sub(nbytes_, std::memory_order_relaxed);
    return data_.get();
}

void HostRegion::modified() noexcept {
    generation_++;
    file_valid_ = false;
}

std::uint64_t HostRegion::offload_write(bool stale) {
    if (!scope_ || !data_ || nbytes_ < scope_->options.min_bytes)
        return 0;
    if (stale || file_valid_) {
        // Nothing to write: the device holds newer data, or the file the same.
        if (stale)
            file_valid_ = false;
        data_.reset();
        const bool paged = file_valid_;
        scope_->update([&](OffloadStats& s) {
            s.bytes_dropped += nbytes_;
            if (paged)
                s.bytes_paged_out += nbytes_;
        });
        g_totals.bytes_dropped.fetch_add(nbytes_, std::memory_order_relaxed);
        if (paged)
            g_totals.bytes_paged_out.fetch_add(nbytes_, std::memory_order_relaxed);
        return 0;
    }
    if (scope_->forked()) {
        Error e(Errc::BadFork, "offload", scope_->where, 0,
                "storage " + std::to_string(storage_) + "'s host copy (" + bytes_text(nbytes_) +
                    ") is not written: this is a fork() child of the process that opened the "
                    "offload scope, whose file it shares; the data stays in memory");
        scope_->fail(e);
        throw e;
    }
    if (!extent_ || extent_epoch_ != fork_epoch()) {
        // A child forked since the extent was written may still read it:
        // the new data goes to a new one.
        extent_ = scope_->allocate(nbytes_);
        extent_epoch_ = fork_epoch();
    }
    std::uint64_t done = 0;
    const int r = scope_->transfer(true, data_.get(), nbytes_, *extent_, &done);
    if (r < 0) {
        Error e(Errc::Io, "offload", scope_->where, -r,
                "writing storage " + std::to_string(storage_) + "'s host copy (" +
                    bytes_text(nbytes_) + ") to the offload file failed after " + bytes_text(done) +
                    ": " + errno_text(-r) +
                    "; the data stays in memory; free space there or set "
                    "RBLN_OFFLOAD_DIR (OffloadOptions::directory) to a larger file system");
        scope_->fail(e);
        throw e;
    }
    file_valid_ = true;
    return generation_;
}

void HostRegion::offload_finish(std::uint64_t token, bool synced) noexcept {
    if (token != generation_ || !data_)
        return; // changed since: the new data stays in memory
    if (!synced) {
        file_valid_ = false;
        return;
    }
    data_.reset();
    scope_->update([&](OffloadStats& s) {
        s.writes++;
        s.bytes_offloaded += nbytes_;
        s.bytes_paged_out += nbytes_;
    });
    g_totals.writes.fetch_add(1, std::memory_order_relaxed);
    g_totals.bytes_offloaded.fetch_add(nbytes_, std::memory_order_relaxed);
    g_totals.bytes_paged_out.fetch_add(nbytes_, std::memory_order_relaxed);
}

} // namespace detail

// ---- scopes ---------------------------------------------------------------

OffloadStats offload_totals() noexcept {
    return {g_totals.writes.load(),         g_totals.bytes_offloaded.load(),
            g_totals.reads.load(),          g_totals.bytes_brought_back.load(),
            g_totals.failures.load(),       g_totals.bytes_dropped.load(),
            g_totals.bytes_paged_out.load()};
}

std::string offload_directory(const OffloadOptions& options, const EnvSource& env) {
    if (!options.directory.empty())
        return options.directory;
    const EnvSource& source = env ? env : process_environment();
    for (const char* name : {"RBLN_OFFLOAD_DIR", "TMPDIR"}) {
        const std::optional<std::string> v = source(name);
        if (v && !v->empty())
            return *v;
    }
    return "/var/tmp";
}

namespace {

detail::UniqueFd make_file(const OffloadOptions& options, const std::string& where) {
    int fd = -1;
    int err = 0;
    if (!options.file.empty()) {
        fd = ::open(options.file.c_str(), O_RDWR | O_CLOEXEC);
        err = errno;
        if (fd < 0)
            throw Error(errc_from_errno(err), "offload", where, err,
                        "cannot open the offload file: " + errno_text(err) +
                            "; OffloadOptions::file must name an existing, writable file");
        return detail::UniqueFd(fd);
    }
    fd = ::open(where.c_str(), O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    err = errno;
    if (fd < 0 && (err == EOPNOTSUPP || err == EISDIR || err == EINVAL)) {
        // No O_TMPFILE on this file system: a named file, unlinked at once.
        std::string name = where + "/rbln-offload-XXXXXX";
        fd = ::mkostemp(name.data(), O_CLOEXEC);
        err = errno;
        if (fd >= 0)
            (void)::unlink(name.c_str());
    }
    if (fd < 0)
        throw Error(err == ENOENT || err == ENOTDIR ? Errc::NotFound : errc_from_errno(err),
                    "offload", where, err,
                    "cannot make the offload file in this directory: " + errno_text(err) +
                        "; set RBLN_OFFLOAD_DIR (or OffloadOptions::directory) to an "
                        "existing, writable directory");
    return detail::UniqueFd(fd);
}

} // namespace

OffloadScope::OffloadScope(OffloadOptions options) {
    std::string where = options.file.empty() ? offload_directory(options) : options.file;
    detail::UniqueFd fd = make_file(options, where);
    s_ = std::make_shared<detail::OffloadState>(std::move(options), std::move(where));
    s_->fd = std::move(fd);
    s_->ring_ok = io_uring_queue_init(4, &s_->ring, 0) == 0;
    detail::t_scopes.push_back(s_);
    g_open_scopes.fetch_add(1, std::memory_order_relaxed);
}

OffloadScope::~OffloadScope() {
    try {
        close();
    } catch (...) { // NOLINT(bugprone-empty-catch): a destructor must not throw
    }
}

void OffloadScope::offload_now() {
    if (std::optional<Error> e = s_->offload_members())
        throw std::move(*e);
}

void OffloadScope::close() {
    if (!s_->open.load(std::memory_order_acquire))
        return;
    if (std::this_thread::get_id() != s_->owner)
        throw Error(Errc::InvalidArgument, "offload", s_->where, 0,
                    "an offload scope must be closed on the thread that opened it");
    // I/O failures are recorded in the scope (failures(), stats()); anything
    // else (no host memory) is thrown once the scope is closed.
    std::exception_ptr other;
    try {
        (void)s_->offload_members();
    } catch (...) {
        other = std::current_exception();
    }
    s_->open.store(false, std::memory_order_release);
    std::erase(detail::t_scopes, s_);
    g_open_scopes.fetch_sub(1, std::memory_order_relaxed);
    if (other)
        std::rethrow_exception(other);
}

bool OffloadScope::open() const noexcept {
    return s_->open.load(std::memory_order_acquire);
}

const std::string& OffloadScope::where() const noexcept {
    return s_->where;
}

OffloadStats OffloadScope::stats() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->stats;
}

std::vector<Error> OffloadScope::failures() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->failures;
}

bool OffloadScope::uses_io_uring() const noexcept {
    return s_->ring_ok;
}

} // namespace rbln
