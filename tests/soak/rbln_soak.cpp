// SPDX-License-Identifier: GPL-2.0
// rbln-soak: one process on one logical device doing, for a time budget,
// random mixes of librbln's work and checking every result against the CPU
// (tests/soak/README.md).  Public API only (rbln/rbln.hpp).
//
// The work comes in rounds.  A round is a few random operations on four
// streams (the default one and three of Low, Normal and High priority):
// device memory allocated and freed through the caching allocator (raw
// blocks of Device::allocate() and lazy storages), fills, copies in every
// direction (pageable host, pinned host from the host allocator, host GEM
// buffers, registered user pages, device to device, strided, broadcast,
// host to host), the built-in kernels (rbln::ops add, mul, relu, scale,
// matmul, copy) on fp32/fp16/bf16 views (offset, transposed, broadcast,
// in place), and events: work on one stream that touches memory another
// stream wrote or reads first waits for an event recorded there.  The CPU
// keeps the expected bytes of every object; a round ends by synchronising
// every stream and reading back whatever a device operation changed.  Host
// buffers are dropped right after the asynchronous copies that use them and
// device memory right after the copies that read it (the library must keep
// them until the card is done).
//
// A wrong byte ends the process at once with exit status 1 and a message
// saying what differed, where, and how to replay the run (the seed; the
// draws depend only on it and the round number).  With --tolerate-timeouts
// (the soak's fault injector hangs chiplets), a job that fails with the
// documented error of a hung and reset chiplet (Errc::Timeout, ETIMEDOUT,
// rbln/stream.hpp) costs its round: the streams are drained, every object
// of the round is dropped (its contents are unknown) and the soak goes on;
// such rounds are counted ("tolerated").  Any other error fails the run.

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rbln/rbln.hpp"
#include "soak_ref.hpp"

namespace rbln::soak {
namespace {

using Clock = std::chrono::steady_clock;

constexpr unsigned kStreams = 4;
constexpr std::size_t kMaxBufs = 14;    // live raw device blocks
constexpr std::size_t kMaxTensors = 16; // live storages
constexpr std::uint64_t kMinBuf = 256;
constexpr std::uint64_t kMaxSmallBuf = 256 << 10; // most blocks (small pool)
constexpr std::uint64_t kMaxLargeBuf = 2 << 20;   // 1 in 16 (large pool)
constexpr std::int64_t kMaxDim = 48;              // tensor dimensions
constexpr float kIntLimit = 4.0F;                 // small-integer tensors (matmul inputs)
constexpr unsigned kQueueHistory = 4096;          // RBLN_QUEUE_HISTORY (kernel/rbln_queue.c)
constexpr long kCheckpointRssKib = 1024;          // RSS growth allowed between quiet points

struct Options {
    unsigned device = 0;
    double seconds = 60.0;
    std::uint64_t rounds = 0; // 0: until the time is up
    std::uint64_t seed = 0;
    bool seed_given = false;
    bool tolerate_timeouts = false;
    bool trace = false;
    double progress = 30.0;
    std::uint32_t skip = 0; // operations left out (bits of Op)
};

/// A wrong result: what differed (caught to see whether a reported job
/// failure of the same round explains it).
struct Mismatch {
    std::string what;
};

/// A fatal error of the soak itself (not of the card).
struct Fatal {
    std::string what;
};

std::string hex(std::uint64_t v) {
    std::array<char, 24> b{};
    std::snprintf(b.data(), b.size(), "0x%" PRIx64, v);
    return b.data();
}

std::string mib(std::uint64_t bytes) {
    std::array<char, 32> b{};
    std::snprintf(b.data(), b.size(), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
    return b.data();
}

/// Where two byte ranges first differ, as a sentence; "" if equal.
std::string first_difference(std::span<const std::byte> expect, std::span<const std::byte> got,
                             std::uint64_t base) {
    if (expect.size() == got.size() && std::memcmp(expect.data(), got.data(), expect.size()) == 0)
        return {};
    std::size_t i = 0;
    while (i < expect.size() && i < got.size() && expect[i] == got[i])
        i++;
    std::size_t wrong = 0;
    for (std::size_t j = i; j < std::min(expect.size(), got.size()); j++)
        wrong += expect[j] != got[j] ? 1 : 0;
    std::array<char, 160> b{};
    std::snprintf(b.data(), b.size(),
                  "byte %" PRIu64 " is 0x%02x, expected 0x%02x (%zu of %zu bytes differ)", base + i,
                  i < got.size() ? static_cast<unsigned>(got[i]) : 0U,
                  i < expect.size() ? static_cast<unsigned>(expect[i]) : 0U, wrong, expect.size());
    return b.data();
}

/// munmap()s a mapping when it goes.
struct Unmap {
    void* p;
    std::size_t len;
    Unmap(void* at, std::size_t bytes) : p(at), len(bytes) {}
    Unmap(const Unmap&) = delete;
    Unmap& operator=(const Unmap&) = delete;
    Unmap(Unmap&&) = delete;
    Unmap& operator=(Unmap&&) = delete;
    ~Unmap() { ::munmap(p, len); }
};

/// Which streams wrote and read an object since the last full
/// synchronisation: the cross-stream order the soak must establish.
struct Hazard {
    int writer = -1;         // stream of the last device write, -1: none pending
    std::uint32_t readers{}; // streams with device reads since that write
};

/// A raw block of device memory and its expected contents.
struct Buf {
    unsigned id = 0;
    std::shared_ptr<Memory> mem;
    std::vector<std::byte> ref;
    Hazard hz;
    bool unchecked = false; // device-written since last read back
};

/// A lazy storage and its expected values.
struct Tensor {
    unsigned id = 0;
    std::shared_ptr<Storage> st;
    Type type = Type::Fp32;
    std::vector<std::int64_t> shape; // its natural (contiguous) shape
    std::vector<float> ref;
    Hazard hz;
    bool host_dirty = false;  // host-written since its last device use (next use uploads)
    bool unchecked = false;   // device-written since last read back
    int first_stream = -1;    // the stream of its first device use (commit)
    std::uint32_t recorded{}; // streams passed to record_stream()
};

/// An asynchronous read back into host memory, checked after the round.
struct PendingCheck {
    std::string what;
    HostBlock block;             // or
    std::shared_ptr<Memory> gem; // a host GEM buffer
    std::vector<std::byte> expect;
};

struct Totals {
    std::uint64_t rounds = 0;
    std::uint64_t ops = 0;
    std::uint64_t jobs_waited = 0; // cross-stream event waits
    std::uint64_t bytes_checked = 0;
    std::uint64_t values_checked = 0;
    std::uint64_t tolerated = 0;
    std::uint64_t allocs = 0;
    std::uint64_t frees = 0;
    std::uint64_t kernels = 0;
    std::uint64_t copies = 0;
    std::uint64_t empty_caches = 0;
    std::array<std::uint64_t, 32> per_op{};
};

enum Op : unsigned {
    kAlloc,
    kFree,
    kFill,
    kH2dPageable,
    kH2dPinned,
    kH2dGem,
    kH2dRegistered,
    kD2hPageable,
    kD2hPinned,
    kD2hGem,
    kD2d,
    kStridedH2d,
    kStridedD2h,
    kBroadcast,
    kHostToHost,
    kTensorNew,
    kTensorFree,
    kTensorWrite,
    kTensorRead,
    kElementwise,
    kMatmul,
    kTensorCopy,
    kEmptyCache,
    kOpCount
};

constexpr std::array<const char*, kOpCount> kOpNames{
    "alloc",       "free",         "fill",         "h2d-pageable", "h2d-pinned",  "h2d-gem",
    "h2d-userptr", "d2h-pageable", "d2h-pinned",   "d2h-gem",      "d2d",         "strided-h2d",
    "strided-d2h", "broadcast",    "host-to-host", "tensor-new",   "tensor-free", "tensor-write",
    "tensor-read", "elementwise",  "matmul",       "tensor-copy",  "empty-cache"};

// Relative weights of the operations.
constexpr std::array<unsigned, kOpCount> kWeights{8, 6, 6, 5, 5, 2, 1, 4,  5, 2, 7, 3,
                                                  3, 2, 2, 6, 4, 3, 3, 10, 5, 4, 1};

class Soak {
public:
    explicit Soak(const Options& o)
        : o_(o), dev_(Device::get(o.device)), alloc_(dev_->allocator()),
          host_(process_host_allocator(o.device)), chiplets_(dev_->chiplet_count()) {
        streams_.push_back(dev_->default_stream());
        streams_.emplace_back(dev_, StreamPriority::Low);
        streams_.emplace_back(dev_, StreamPriority::Normal);
        streams_.emplace_back(dev_, StreamPriority::High);
    }

    /// Runs until the time or the rounds are used up; the exit status.
    int run() {
        std::printf("rbln-soak: device %u (%s, %u chiplets) seed %s, %s, %s\n", o_.device,
                    dev_->node_path().c_str(), chiplets_, hex(o_.seed).c_str(),
                    o_.rounds != 0 ? (std::to_string(o_.rounds) + " rounds").c_str()
                                   : (std::to_string(o_.seconds) + " s").c_str(),
                    o_.tolerate_timeouts ? "tolerating chiplet-hang timeouts" : "strict");
        std::fflush(stdout);
        fill_job_history();
        const auto start = Clock::now();
        auto next_progress = start + to_duration(o_.progress);
        for (std::uint64_t r = 0;; r++) {
            const auto now = Clock::now();
            if (o_.rounds != 0 ? r >= o_.rounds : now - start >= to_duration(o_.seconds))
                break;
            round_ = r;
            if (!one_round())
                return 1;
            t_.rounds++;
            if (Clock::now() >= next_progress) {
                what_ = "checkpoint";
                if (!guarded([&] { checkpoint(Clock::now() - start); }))
                    return 1;
                next_progress += to_duration(o_.progress);
            }
        }
        return finish(Clock::now() - start);
    }

private:
    static Clock::duration to_duration(double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    }

    // ---- rounds -----------------------------------------------------------------------

    /// One round; false if the run failed (reported).
    bool one_round() {
        Rng rng(mix(o_.seed, round_));
        const unsigned nops = static_cast<unsigned>(rng.range(3, 10));
        op_ = 0;
        what_.clear();
        return guarded([&] {
            for (; op_ < nops; op_++) {
                const Op op = pick(rng);
                what_ = kOpNames.at(op);
                do_op(op, rng);
                t_.ops++;
                t_.per_op.at(op)++;
            }
            what_ = "end of round";
            end_of_round(rng);
        });
    }

    /// Runs @work; false if the run failed (reported).  A wrong result or
    /// an error that a hung chiplet explains (--tolerate-timeouts) costs
    /// the round and returns true.
    template <typename F> bool guarded(F&& work) {
        try {
            try {
                work();
                return true;
            } catch (const Mismatch& m) {
                // A job of this round that failed (and was reported)
                // explains wrong data; drain() finds out.
                const std::string failure = drain();
                if (!failure.empty() && o_.tolerate_timeouts) {
                    tolerate(failure, "then read wrong data: " + m.what);
                    return true;
                }
                report("wrong result: " + m.what +
                       (failure.empty() ? "" : " (after a failed job: " + failure + ")"));
                return false;
            } catch (const Error& e) {
                if (!o_.tolerate_timeouts || !is_hang_error(e))
                    throw;
                const std::string rest = drain();
                tolerate(e.what(), rest);
                return true;
            }
        } catch (const Error& e) {
            report(std::string("error: ") + e.what());
        } catch (const Fatal& f) {
            report(f.what);
        }
        return false;
    }

    /// The documented failure of a job on a chiplet that hung and was reset
    /// (kernel/README.md, "Ring reset"; rbln/stream.hpp).
    static bool is_hang_error(const Error& e) {
        return e.code() == Errc::Timeout && e.sys_errno() == ETIMEDOUT;
    }

    /// Synchronises every stream and the device until none reports a
    /// failure; the failures seen ("" if none).  A failure that is not the
    /// hang's is fatal (thrown as Fatal).
    std::string drain() {
        std::string seen;
        for (int attempt = 0; attempt < 8; attempt++) {
            bool clean = true;
            for (auto& s : streams_) {
                try {
                    s.synchronize();
                } catch (const Error& e) {
                    clean = false;
                    if (!is_hang_error(e))
                        throw Fatal{std::string("error while draining the streams: ") + e.what()};
                    seen += seen.empty() ? e.what() : std::string("; ") + e.what();
                }
            }
            try {
                dev_->synchronize();
            } catch (const Error& e) {
                clean = false;
                if (!is_hang_error(e))
                    throw Fatal{std::string("error while draining the device: ") + e.what()};
                seen += seen.empty() ? e.what() : std::string("; ") + e.what();
            }
            if (clean)
                return seen;
        }
        throw Fatal{"the streams still report failures after 8 synchronisations: " + seen};
    }

    /// The round is lost to a chiplet hang: every object of it is dropped.
    void tolerate(const std::string& failure, const std::string& more) {
        t_.tolerated++;
        std::printf("rbln-soak: device %u round %" PRIu64 " op %u (%s): tolerated: %s%s%s\n",
                    o_.device, round_, op_, what_.c_str(), failure.c_str(),
                    more.empty() ? "" : "; ", more.c_str());
        std::fflush(stdout);
        bufs_.clear();
        tensors_.clear();
        pending_.clear();
    }

    void report(const std::string& what) {
        std::fprintf(stderr,
                     "rbln-soak: FAILED on device %u at round %" PRIu64 " op %u (%s): %s\n"
                     "rbln-soak: replay: rbln-soak --device %u --seed %s --rounds %" PRIu64
                     " (the same draws; without the fault injector, unless it caused this)\n",
                     o_.device, round_, op_, what_.c_str(), what.c_str(), o_.device,
                     hex(o_.seed).c_str(), round_ + 1);
        std::fflush(stderr);
    }

    /// The weight of @op now: 0 if not allowed; frees weigh more as the
    /// live objects near their caps, so kernels are rarely blocked.
    unsigned weight(Op op) const {
        if (!allowed(op))
            return 0;
        if (op == kTensorFree && tensors_.size() > kMaxTensors / 2)
            return kWeights.at(op) * 3;
        if (op == kFree && bufs_.size() > kMaxBufs / 2)
            return kWeights.at(op) * 2;
        return kWeights.at(op);
    }

    Op pick(Rng& rng) const {
        unsigned total = 0;
        for (unsigned i = 0; i < kOpCount; i++)
            total += weight(static_cast<Op>(i));
        unsigned x = static_cast<unsigned>(rng.below(total));
        for (unsigned i = 0; i < kOpCount; i++) {
            const unsigned w = weight(static_cast<Op>(i));
            if (x < w)
                return static_cast<Op>(i);
            x -= w;
        }
        return kAlloc;
    }

    bool allowed(Op op) const {
        if ((o_.skip & (1U << op)) != 0)
            return false;
        switch (op) {
        case kAlloc:
            return bufs_.size() < kMaxBufs;
        case kTensorNew:
        case kElementwise:
        case kMatmul:
            return tensors_.size() + 3 <= kMaxTensors; // may create up to three
        case kTensorFree:
        case kTensorWrite:
        case kTensorRead:
        case kTensorCopy:
            return !tensors_.empty();
        case kEmptyCache:
        case kHostToHost:
            return true;
        default:
            return !bufs_.empty();
        }
    }

    void do_op(Op op, Rng& rng) {
        switch (op) {
        case kAlloc:
            return op_alloc(rng);
        case kFree:
            return op_free(rng);
        case kFill:
            return op_fill(rng);
        case kH2dPageable:
        case kH2dPinned:
        case kH2dGem:
        case kH2dRegistered:
            return op_h2d(op, rng);
        case kD2hPageable:
        case kD2hPinned:
        case kD2hGem:
            return op_d2h(op, rng);
        case kD2d:
            return op_d2d(rng);
        case kStridedH2d:
        case kStridedD2h:
            return op_strided(op == kStridedH2d, rng);
        case kBroadcast:
            return op_broadcast(rng);
        case kHostToHost:
            return op_host_to_host(rng);
        case kTensorNew:
            new_tensor(rng, random_type(rng), random_shape(rng), rng.chance(1, 2));
            return;
        case kTensorFree:
            return op_tensor_free(rng);
        case kTensorWrite:
            return op_tensor_write(rng);
        case kTensorRead:
            return op_tensor_read(rng);
        case kElementwise:
            return op_elementwise(rng);
        case kMatmul:
            return op_matmul(rng);
        case kTensorCopy:
            return op_tensor_copy(rng);
        case kEmptyCache:
            alloc_.empty_cache();
            host_.empty_cache();
            t_.empty_caches++;
            return;
        case kOpCount:
            break;
        }
    }

    /// With --trace: one line per device write, for replaying a failure.
    __attribute__((format(printf, 2, 3))) void trace(const char* fmt, ...) const {
        if (!o_.trace)
            return;
        std::fprintf(stderr, "trace: r%" PRIu64 " op%u: ", round_, op_);
        va_list ap;
        va_start(ap, fmt);
        std::vfprintf(stderr, fmt, ap);
        va_end(ap);
        std::fputc('\n', stderr);
    }

    // ---- ordering between streams ------------------------------------------------------

    int random_stream(Rng& rng) { return static_cast<int>(rng.below(kStreams)); }

    /// Later work of stream @to waits for the work enqueued on @from so far.
    void wait(int from, int to, Rng& rng) {
        Event e(rng.chance(1, 4)); // timing on some: a TIMESTAMP instead of a NOP
        e.record(streams_.at(from));
        streams_.at(to).wait_event(e);
        t_.jobs_waited++;
    }
    void before_read(Hazard& h, int s, Rng& rng) {
        if (h.writer >= 0 && h.writer != s)
            wait(h.writer, s, rng);
    }
    void before_write(Hazard& h, int s, Rng& rng) {
        before_read(h, s, rng);
        for (unsigned r = 0; r < kStreams; r++)
            if ((h.readers & (1U << r)) != 0 && static_cast<int>(r) != s)
                wait(static_cast<int>(r), s, rng);
    }
    static void after_read(Hazard& h, int s) { h.readers |= 1U << s; }
    static void after_write(Hazard& h, int s) {
        h.writer = s;
        h.readers = 0;
    }

    // ---- raw device blocks --------------------------------------------------------------

    Buf& random_buf(Rng& rng) { return bufs_.at(rng.below(bufs_.size())); }

    /// A random range [off, off + size) of @b (size >= 1).
    static std::pair<std::uint64_t, std::uint64_t> random_range(const Buf& b, Rng& rng) {
        const std::uint64_t n = b.ref.size();
        if (rng.chance(1, 5))
            return {0, n};
        const std::uint64_t size = rng.range(1, n);
        return {rng.range(0, n - size), size};
    }

    void op_alloc(Rng& rng) {
        Buf b;
        b.id = next_id_++;
        const std::uint64_t size = rng.chance(1, 16) ? rng.log_size(kMaxSmallBuf, kMaxLargeBuf)
                                                     : rng.log_size(kMinBuf, kMaxSmallBuf);
        std::optional<unsigned> chiplet;
        if (!rng.chance(1, 4))
            chiplet = static_cast<unsigned>(rng.below(chiplets_));
        b.mem = dev_->allocate(size, chiplet);
        if (b.mem->size() < size)
            throw Fatal{"Device::allocate(" + std::to_string(size) + ") gave " +
                        std::to_string(b.mem->size()) + " bytes"};
        b.ref.resize(size);
        t_.allocs++;
        trace("alloc block %u: %" PRIu64 " bytes on chiplet %u (va %" PRIx64 ")", b.id, size,
              b.mem->chiplet(), b.mem->device_va());
        // Its contents are unknown until written whole: a fill or a copy.
        const int s = random_stream(rng);
        if (rng.chance(1, 2)) {
            fill(b, s, 0, size, rng);
        } else {
            rng.fill(b.ref);
            copy(streams_.at(s), CopyEndpoint::of(b.mem, 0, size),
                 CopyEndpoint::of_host(b.ref.data(), size));
            after_write(b.hz, s);
            t_.copies++;
        }
        b.unchecked = true;
        bufs_.push_back(std::move(b));
    }

    /// Frees a random block; an unchecked one is first read back
    /// asynchronously (the read keeps the freed block until done).
    void op_free(Rng& rng) {
        const std::size_t i = rng.below(bufs_.size());
        Buf& b = bufs_.at(i);
        if (b.unchecked)
            read_back_pinned(b, 0, b.ref.size(), random_stream(rng), rng);
        trace("free block %u", b.id);
        bufs_.erase(bufs_.begin() + static_cast<std::ptrdiff_t>(i));
        t_.frees++;
    }

    void fill(Buf& b, int s, std::uint64_t off, std::uint64_t size, Rng& rng) {
        static constexpr std::array<unsigned, 4> kPatternBytes{1, 2, 4, 8};
        unsigned pb = kPatternBytes.at(rng.below(4));
        while (size % pb != 0) // FILL sizes are whole patterns: the largest that fits
            pb /= 2;
        const std::uint64_t pattern = rng.next();
        before_write(b.hz, s, rng);
        streams_.at(s).fill(b.mem, off, size, pattern, pb);
        trace("fill block %u [%" PRIu64 ", +%" PRIu64 ") pattern %" PRIx64 "/%u on stream %d", b.id,
              off, size, pattern, pb, s);
        after_write(b.hz, s);
        for (std::uint64_t i = 0; i < size; i++)
            b.ref[off + i] = static_cast<std::byte>((pattern >> (8 * (i % pb))) & 0xff);
        b.unchecked = true;
    }

    void op_fill(Rng& rng) {
        Buf& b = random_buf(rng);
        const auto [off, size] = random_range(b, rng);
        fill(b, random_stream(rng), off, size, rng);
    }

    /// Host to device from pageable memory (synchronous), a pinned block of
    /// the host allocator or a host GEM buffer (asynchronous; the host side
    /// is dropped at once), or registered user pages (synchronous).
    void op_h2d(Op op, Rng& rng) {
        Buf& b = random_buf(rng);
        const auto [off, size] = random_range(b, rng);
        const int s = random_stream(rng);
        std::vector<std::byte> data(size);
        rng.fill(data);
        before_write(b.hz, s, rng);
        const CopyEndpoint dst = CopyEndpoint::of(b.mem, off, size);
        Stream& st = streams_.at(s);
        switch (op) {
        case kH2dPinned: {
            HostBlock hb = host_.allocate(size);
            std::memcpy(hb.data(), data.data(), size);
            copy(st, dst, CopyEndpoint::of(hb.memory(), 0, size), true);
            break; // hb freed now: the copy's job keeps it out of the cache
        }
        case kH2dGem: {
            const std::shared_ptr<Memory> gem = dev_->allocate_host(size);
            std::memcpy(gem->host_data(), data.data(), size);
            copy(st, dst, CopyEndpoint::of(gem, 0, size), true);
            break;
        }
        case kH2dRegistered: {
            const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
            const std::uint64_t len = (size + page - 1) / page * page;
            void* p =
                ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                throw Fatal{std::string("mmap: ") + std::strerror(errno)};
            const Unmap unmap{p, len};
            std::memcpy(p, data.data(), size);
            const std::shared_ptr<Memory> reg = dev_->register_host(p, len);
            // Pageable memory inside registered memory is recognised as pinned.
            if (dev_->find_pinned(p, size) == nullptr)
                throw Fatal{"find_pinned() does not find memory just registered"};
            copy(st, dst, CopyEndpoint::of_host(p, size), false); // done before the unmap
            break;
        }
        default:
            copy(st, dst, CopyEndpoint::of_host(data.data(), size));
            break;
        }
        after_write(b.hz, s);
        trace("%s block %u [%" PRIu64 ", +%" PRIu64 ") on stream %d", kOpNames.at(op), b.id, off,
              size, s);
        std::memcpy(b.ref.data() + off, data.data(), size);
        b.unchecked = true;
        t_.copies++;
    }

    /// Reads [off, off + size) of @b into a pinned block asynchronously on
    /// stream @s; checked at the end of the round.
    void read_back_pinned(Buf& b, std::uint64_t off, std::uint64_t size, int s, Rng& rng) {
        before_read(b.hz, s, rng);
        PendingCheck c;
        c.block = host_.allocate(size);
        copy(streams_.at(s), CopyEndpoint::of(c.block.memory(), 0, size),
             CopyEndpoint::of(b.mem, off, size), true);
        after_read(b.hz, s);
        c.expect.assign(b.ref.begin() + static_cast<std::ptrdiff_t>(off),
                        b.ref.begin() + static_cast<std::ptrdiff_t>(off + size));
        c.what = "block " + std::to_string(b.id) + " (" + std::to_string(b.ref.size()) +
                 " bytes, chiplet " + std::to_string(b.mem->chiplet()) + ") bytes [" +
                 std::to_string(off) + ", +" + std::to_string(size) +
                 ") read into pinned memory on stream " + std::to_string(s);
        if (off == 0 && size == b.ref.size())
            b.unchecked = false;
        pending_.push_back(std::move(c));
        t_.copies++;
    }

    void op_d2h(Op op, Rng& rng) {
        Buf& b = random_buf(rng);
        const auto [off, size] = random_range(b, rng);
        const int s = random_stream(rng);
        if (op == kD2hPinned)
            return read_back_pinned(b, off, size, s, rng);
        before_read(b.hz, s, rng);
        const std::span<const std::byte> expect(b.ref.data() + off, size);
        std::string where = "block " + std::to_string(b.id) + " bytes [" + std::to_string(off) +
                            ", +" + std::to_string(size) + ") read on stream " + std::to_string(s);
        if (op == kD2hGem) {
            PendingCheck c;
            c.gem = dev_->allocate_host(size);
            copy(streams_.at(s), CopyEndpoint::of(c.gem, 0, size),
                 CopyEndpoint::of(b.mem, off, size), true);
            c.expect.assign(expect.begin(), expect.end());
            c.what = where + " into a host GEM buffer";
            pending_.push_back(std::move(c));
        } else {
            std::vector<std::byte> got(size);
            copy(streams_.at(s), CopyEndpoint::of_host(got.data(), size),
                 CopyEndpoint::of(b.mem, off, size));
            check(expect, got, off, where + " into pageable memory");
        }
        after_read(b.hz, s);
        if (off == 0 && size == b.ref.size())
            b.unchecked = false;
        t_.copies++;
    }

    void op_d2d(Rng& rng) {
        Buf& src = random_buf(rng);
        Buf& dst = random_buf(rng);
        const std::uint64_t size =
            rng.range(1, std::min<std::uint64_t>(src.ref.size(), dst.ref.size()));
        const std::uint64_t so = rng.range(0, src.ref.size() - size);
        std::uint64_t d_off = rng.range(0, dst.ref.size() - size);
        if (&src == &dst && (d_off < so + size && so < d_off + size))
            return; // overlapping ranges of one block: not a copy the card defines
        const int s = random_stream(rng);
        before_read(src.hz, s, rng);
        before_write(dst.hz, s, rng);
        copy(streams_.at(s), CopyEndpoint::of(dst.mem, d_off, size),
             CopyEndpoint::of(src.mem, so, size), rng.chance(3, 4));
        after_read(src.hz, s);
        after_write(dst.hz, s);
        trace("d2d block %u [%" PRIu64 ", +%" PRIu64 ") -> block %u [%" PRIu64 ", +%" PRIu64
              ") on stream %d",
              src.id, so, size, dst.id, d_off, size, s);
        std::memcpy(dst.ref.data() + d_off, src.ref.data() + so, size);
        dst.unchecked = true;
        t_.copies++;
        // Sometimes the source goes at once: the copy's job keeps it.
        if (&src != &dst && !src.unchecked && rng.chance(1, 4)) {
            const auto it = std::find_if(bufs_.begin(), bufs_.end(),
                                         [&src](const Buf& x) { return &x == &src; });
            trace("free block %u", src.id);
            bufs_.erase(it);
            t_.frees++;
        }
    }

    /// Rows of a device block at a pitch from or to contiguous host memory
    /// (COPY_STRIDED through the staging buffer).
    void op_strided(bool to_device, Rng& rng) {
        Buf& b = random_buf(rng);
        const std::uint64_t n = b.ref.size();
        const std::uint64_t row = rng.range(1, std::min<std::uint64_t>(n, 4096));
        const std::uint64_t pitch = rng.range(row, std::min<std::uint64_t>(n, row * 3));
        const std::uint64_t max_rows = pitch > n - row ? 1 : (n - row) / pitch + 1;
        const std::uint64_t rows = rng.range(1, std::min<std::uint64_t>(max_rows, 64));
        const std::uint64_t extent = (rows - 1) * pitch + row;
        const std::uint64_t off = rng.range(0, n - extent);
        const int s = random_stream(rng);
        const CopyEndpoint dev = CopyEndpoint::of(b.mem, off, rows * row).strided(row, pitch);
        std::vector<std::byte> host(rows * row);
        if (to_device) {
            rng.fill(host);
            before_write(b.hz, s, rng);
            copy(streams_.at(s), dev, CopyEndpoint::of_host(host.data(), host.size()));
            after_write(b.hz, s);
            trace("strided-h2d block %u from %" PRIu64 ": %" PRIu64 " rows of %" PRIu64
                  " at pitch %" PRIu64 " on stream %d",
                  b.id, off, rows, row, pitch, s);
            for (std::uint64_t r = 0; r < rows; r++)
                std::memcpy(b.ref.data() + off + r * pitch, host.data() + r * row, row);
            b.unchecked = true;
        } else {
            before_read(b.hz, s, rng);
            copy(streams_.at(s), CopyEndpoint::of_host(host.data(), host.size()), dev);
            after_read(b.hz, s);
            std::vector<std::byte> expect(rows * row);
            for (std::uint64_t r = 0; r < rows; r++)
                std::memcpy(expect.data() + r * row, b.ref.data() + off + r * pitch, row);
            check(expect, host, 0,
                  "block " + std::to_string(b.id) + ": " + std::to_string(rows) + " rows of " +
                      std::to_string(row) + " bytes at pitch " + std::to_string(pitch) +
                      " from byte " + std::to_string(off) + " read on stream " + std::to_string(s));
        }
        t_.copies++;
    }

    /// A device range receives a smaller one repeated (synchronous).
    void op_broadcast(Rng& rng) {
        Buf& src = random_buf(rng);
        Buf& dst = random_buf(rng);
        if (&src == &dst)
            return;
        const std::uint64_t unit = rng.range(1, std::min<std::uint64_t>(src.ref.size(), 4096));
        const std::uint64_t times = rng.range(2, std::max<std::uint64_t>(2, dst.ref.size() / unit));
        if (unit * times > dst.ref.size())
            return;
        const std::uint64_t so = rng.range(0, src.ref.size() - unit);
        const std::uint64_t d_off = rng.range(0, dst.ref.size() - unit * times);
        const int s = random_stream(rng);
        before_read(src.hz, s, rng);
        before_write(dst.hz, s, rng);
        copy(streams_.at(s), CopyEndpoint::of(dst.mem, d_off, unit * times),
             CopyEndpoint::of(src.mem, so, unit));
        after_read(src.hz, s);
        after_write(dst.hz, s);
        trace("broadcast block %u [%" PRIu64 ", +%" PRIu64 ") x%" PRIu64 " -> block %u at %" PRIu64
              " on stream %d",
              src.id, so, unit, times, dst.id, d_off, s);
        for (std::uint64_t t = 0; t < times; t++)
            std::memcpy(dst.ref.data() + d_off + t * unit, src.ref.data() + so, unit);
        dst.unchecked = true;
        t_.copies++;
    }

    /// Pinned host memory to pageable host memory through librbln's copy().
    void op_host_to_host(Rng& rng) {
        const std::uint64_t size = rng.log_size(1, 64 << 10);
        HostBlock hb = host_.allocate(size);
        rng.fill(std::span(hb.data(), size));
        std::vector<std::byte> got(size);
        copy(streams_.at(random_stream(rng)), CopyEndpoint::of_host(got.data(), size),
             CopyEndpoint::of(hb.memory(), 0, size));
        check(std::span(hb.data(), size), got, 0, "a host-to-host copy from pinned memory");
    }

    // ---- storages and kernels ---------------------------------------------------------

    static Type random_type(Rng& rng) {
        const std::uint64_t x = rng.below(4);
        return x < 2 ? Type::Fp32 : (x == 2 ? Type::Fp16 : Type::Bf16);
    }
    static std::vector<std::int64_t> random_shape(Rng& rng) {
        if (rng.chance(1, 3))
            return {static_cast<std::int64_t>(rng.range(1, 2048))};
        return {static_cast<std::int64_t>(rng.range(1, kMaxDim)),
                static_cast<std::int64_t>(rng.range(1, kMaxDim))};
    }
    static std::size_t numel(const std::vector<std::int64_t>& shape) {
        std::size_t n = 1;
        for (const auto s : shape)
            n *= static_cast<std::size_t>(s);
        return n;
    }
    static ElementType element_type(Type t) { return static_cast<ElementType>(t); }

    /// Values for a new tensor: small integers (matmul inputs) or
    /// multiples of 1/64 in [-8, 8), rounded to @t.
    static std::vector<float> random_values(Type t, std::size_t n, bool ints, Rng& rng) {
        std::vector<float> v(n);
        for (auto& x : v)
            x = ints ? static_cast<float>(static_cast<int>(rng.below(9)) - 4)
                     : round_to(t, static_cast<float>(static_cast<int>(rng.below(1024)) - 512) /
                                       64.0F);
        return v;
    }

    /// A new storage with host-written values (lazy: committed at its
    /// first device use, on the allocator place drawn here).
    Tensor& new_tensor(Rng& rng, Type t, std::vector<std::int64_t> shape, bool ints) {
        Tensor x;
        x.id = next_id_++;
        x.type = t;
        x.shape = std::move(shape);
        x.ref = random_values(t, numel(x.shape), ints, rng);
        StorageOptions so;
        if (!rng.chance(1, 4))
            so.place = static_cast<unsigned>(rng.below(alloc_.place_count()));
        x.st = Storage::create(dev_, alloc_, x.ref.size() * type_size(t), element_type(t), so);
        const std::vector<std::byte> bytes = to_bytes(t, x.ref);
        ops::from_host(StorageView::whole(x.st), bytes);
        x.host_dirty = true;
        tensors_.push_back(std::move(x));
        return tensors_.back();
    }

    /// The device use of @x as an input on stream @s: ordered after other
    /// streams' writes (and, if it uploads, their reads).
    void use_input(Tensor& x, int s, Rng& rng) {
        if (x.host_dirty)
            before_write(x.hz, s, rng); // the upload writes its device memory
        else
            before_read(x.hz, s, rng);
        note_stream(x, s);
    }
    void done_input(Tensor& x, int s) {
        if (x.host_dirty) {
            after_write(x.hz, s);
            x.host_dirty = false;
        }
        after_read(x.hz, s);
    }
    void use_output(Tensor& x, int s, Rng& rng) {
        before_write(x.hz, s, rng);
        note_stream(x, s);
    }
    void done_output(Tensor& x, int s) {
        after_write(x.hz, s);
        x.host_dirty = false;
        x.unchecked = true;
    }
    /// A storage used on a stream other than its first goes to
    /// record_stream() (rbln/storage.hpp).
    void note_stream(Tensor& x, int s) {
        if (x.first_stream < 0) {
            x.first_stream = s;
        } else if (x.first_stream != s && (x.recorded & (1U << s)) == 0) {
            x.st->record_stream(streams_.at(s));
            x.recorded |= 1U << s;
        }
    }

    Tensor& random_tensor(Rng& rng) { return tensors_.at(rng.below(tensors_.size())); }

    /// A view of sizes @shape on a random existing tensor of type @t (a
    /// slice at an offset, a transposed 2-D tensor, or a broadcast row), or
    /// nullptr if none fits.
    Tensor* view_on(Type t, const std::vector<std::int64_t>& shape, bool ints, View& v, Rng& rng,
                    const Tensor* not_this = nullptr) {
        std::vector<Tensor*> fits;
        for (auto& x : tensors_)
            if (x.type == t && &x != not_this &&
                x.ref.size() >= (shape.size() == 2 ? static_cast<std::size_t>(shape[1]) : 1))
                fits.push_back(&x);
        if (fits.empty())
            return nullptr;
        Tensor* x = fits.at(rng.below(fits.size()));
        const std::size_t n = numel(shape);
        const std::uint64_t form = rng.below(3);
        v.sizes = shape;
        if (form == 1 && shape.size() == 2 && x->shape.size() == 2 && x->shape[0] == shape[1] &&
            x->shape[1] == shape[0]) {
            v.offset = 0;
            v.strides = {1, shape[0]};
        } else if (form == 2 && shape.size() == 2) {
            v.offset = static_cast<std::int64_t>(
                rng.range(0, x->ref.size() - static_cast<std::size_t>(shape[1])));
            v.strides = {0, 1};
        } else if (x->ref.size() >= n) {
            v.offset = static_cast<std::int64_t>(rng.range(0, x->ref.size() - n));
            v.strides = row_major(shape);
        } else {
            return nullptr;
        }
        if (ints)
            for (const std::size_t i : v.indices())
                if (!small_integer(x->ref[i], kIntLimit))
                    return nullptr;
        return x;
    }

    static StorageView storage_view(const Tensor& x, const View& v) {
        StorageView sv;
        sv.storage = x.st;
        sv.offset = static_cast<std::uint64_t>(v.offset);
        sv.sizes = v.sizes;
        sv.strides = v.strides;
        return sv;
    }

    /// An input view of @shape: on an existing tensor, or a new one.
    std::pair<Tensor*, View> input(Type t, const std::vector<std::int64_t>& shape, bool ints,
                                   Rng& rng) {
        View v;
        if (!rng.chance(1, 4))
            if (Tensor* x = view_on(t, shape, ints, v, rng))
                return {x, v};
        Tensor& x = new_tensor(rng, t, shape, ints);
        v.offset = 0;
        v.sizes = shape;
        v.strides = row_major(shape);
        return {&x, v};
    }

    /// The output: a new tensor (written whole), an existing one of the
    /// same number of elements (whole: possibly an input, in place) or a
    /// slice of a larger one.
    std::pair<Tensor*, View> output(Type t, const std::vector<std::int64_t>& shape, Rng& rng) {
        const std::size_t n = numel(shape);
        View v;
        v.sizes = shape;
        v.strides = row_major(shape);
        if (!rng.chance(1, 3)) {
            std::vector<Tensor*> fits;
            for (auto& x : tensors_)
                if (x.type == t && x.ref.size() >= n)
                    fits.push_back(&x);
            if (!fits.empty()) {
                Tensor* x = fits.at(rng.below(fits.size()));
                v.offset = static_cast<std::int64_t>(rng.range(0, x->ref.size() - n));
                return {x, v};
            }
        }
        Tensor& x = new_tensor(rng, t, shape, false);
        v.offset = 0;
        return {&x, v};
    }

    void op_elementwise(Rng& rng) {
        static constexpr std::array<Kernel, 4> kKernels{Kernel::Add, Kernel::Mul, Kernel::Relu,
                                                        Kernel::Scale};
        const Kernel k = kKernels.at(rng.below(4));
        const Type t = random_type(rng);
        const std::vector<std::int64_t> shape = random_shape(rng);
        const bool two = k == Kernel::Add || k == Kernel::Mul;
        const auto [a, va] = input(t, shape, false, rng);
        std::pair<Tensor*, View> b{nullptr, {}};
        if (two)
            b = input(t, shape, false, rng);
        const auto [out, vo] = output(t, shape, rng);
        const float factor = static_cast<float>(static_cast<int>(rng.below(64)) - 32) / 8.0F;

        // The expected values: every input read before any output written.
        const std::vector<std::size_t> ia = va.indices();
        const std::vector<std::size_t> io = vo.indices();
        std::vector<std::size_t> ib;
        if (two)
            ib = b.second.indices();
        std::vector<float> result(io.size());
        for (std::size_t i = 0; i < io.size(); i++) {
            result[i] = apply(k, t, a->ref[ia[i]], two ? b.first->ref[ib[i]] : 0.0F, factor);
            // Keep magnitudes where every type stays finite: skip an op
            // that would leave fp16's range (mul chains grow).
            if (!std::isfinite(result[i]) || std::fabs(result[i]) > 16384.0F)
                return;
        }
        const int s = random_stream(rng);
        use_input(*a, s, rng);
        if (two)
            use_input(*b.first, s, rng);
        use_output(*out, s, rng);
        Stream& st = streams_.at(s);
        const StorageView so = storage_view(*out, vo);
        const StorageView sa = storage_view(*a, va);
        switch (k) {
        case Kernel::Add:
            ops::add(st, so, sa, storage_view(*b.first, b.second));
            break;
        case Kernel::Mul:
            ops::mul(st, so, sa, storage_view(*b.first, b.second));
            break;
        case Kernel::Relu:
            ops::relu(st, so, sa);
            break;
        case Kernel::Scale:
            ops::scale(st, so, sa, factor);
            break;
        }
        done_input(*a, s);
        if (two)
            done_input(*b.first, s);
        done_output(*out, s);
        for (std::size_t i = 0; i < io.size(); i++)
            out->ref[io[i]] = result[i];
        t_.kernels++;
    }

    void op_matmul(Rng& rng) {
        const Type t = random_type(rng);
        const auto m = static_cast<std::int64_t>(rng.range(1, 32));
        const auto n = static_cast<std::int64_t>(rng.range(1, 32));
        const auto k = static_cast<std::int64_t>(rng.range(1, 32));
        const auto [a, va] = input(t, {m, k}, true, rng);
        const auto [b, vb] = input(t, {k, n}, true, rng);
        const Type to = rng.chance(1, 2) ? Type::Fp32 : t;
        const auto [out, vo] = output(to, {m, n}, rng);
        std::vector<float> av;
        for (const std::size_t i : va.indices())
            av.push_back(a->ref[i]);
        std::vector<float> bv;
        for (const std::size_t i : vb.indices())
            bv.push_back(b->ref[i]);
        const std::vector<float> result =
            matmul(to, av, bv, static_cast<std::size_t>(m), static_cast<std::size_t>(n),
                   static_cast<std::size_t>(k));
        const int s = random_stream(rng);
        use_input(*a, s, rng);
        use_input(*b, s, rng);
        use_output(*out, s, rng);
        ops::matmul(streams_.at(s), storage_view(*out, vo), storage_view(*a, va),
                    storage_view(*b, vb));
        done_input(*a, s);
        done_input(*b, s);
        done_output(*out, s);
        const std::vector<std::size_t> io = vo.indices();
        for (std::size_t i = 0; i < io.size(); i++)
            out->ref[io[i]] = result[i];
        t_.kernels++;
    }

    /// ops::copy between two tensors of one type (contiguous slices).
    void op_tensor_copy(Rng& rng) {
        Tensor& src = random_tensor(rng);
        std::vector<Tensor*> fits;
        for (auto& x : tensors_)
            if (x.type == src.type && &x != &src)
                fits.push_back(&x);
        if (fits.empty())
            return;
        Tensor& dst = *fits.at(rng.below(fits.size()));
        const std::size_t n = rng.range(1, std::min(src.ref.size(), dst.ref.size()));
        View vs{static_cast<std::int64_t>(rng.range(0, src.ref.size() - n)),
                {static_cast<std::int64_t>(n)},
                {1}};
        View vd{static_cast<std::int64_t>(rng.range(0, dst.ref.size() - n)),
                {static_cast<std::int64_t>(n)},
                {1}};
        const int s = random_stream(rng);
        use_input(src, s, rng);
        use_output(dst, s, rng);
        ops::copy(streams_.at(s), storage_view(dst, vd), storage_view(src, vs));
        done_input(src, s);
        done_output(dst, s);
        for (std::size_t i = 0; i < n; i++)
            dst.ref[static_cast<std::size_t>(vd.offset) + i] =
                src.ref[static_cast<std::size_t>(vs.offset) + i];
        t_.copies++;
    }

    void op_tensor_write(Rng& rng) {
        Tensor& x = random_tensor(rng);
        if (x.unchecked)
            check_tensor(x);
        x.ref = random_values(x.type, x.ref.size(), rng.chance(1, 2), rng);
        ops::from_host(StorageView::whole(x.st), to_bytes(x.type, x.ref));
        x.host_dirty = true;
    }

    void op_tensor_read(Rng& rng) { check_tensor(random_tensor(rng)); }

    void op_tensor_free(Rng& rng) {
        const std::size_t i = rng.below(tensors_.size());
        if (tensors_.at(i).unchecked)
            check_tensor(tensors_.at(i));
        tensors_.erase(tensors_.begin() + static_cast<std::ptrdiff_t>(i));
        t_.frees++;
    }

    /// Reads the whole storage (a download on its last writer's stream
    /// if the device is latest) and compares every element bit for bit.
    void check_tensor(Tensor& x) {
        std::vector<std::byte> got(x.ref.size() * type_size(x.type));
        ops::to_host(StorageView::whole(x.st), got);
        for (std::size_t i = 0; i < x.ref.size(); i++) {
            const std::uint32_t want = encode(x.type, x.ref[i]);
            const std::uint32_t have = bits_at(x.type, got, i);
            if (want != have) {
                std::size_t wrong = 0;
                for (std::size_t j = i; j < x.ref.size(); j++)
                    wrong += encode(x.type, x.ref[j]) != bits_at(x.type, got, j) ? 1 : 0;
                std::array<char, 256> b{};
                std::snprintf(b.data(), b.size(),
                              "tensor %u (%s, %zu elements): element %zu is %g (bits 0x%x), "
                              "expected %g (bits 0x%x); %zu elements differ",
                              x.id, type_name(x.type), x.ref.size(), i,
                              static_cast<double>(decode(x.type, have)), have,
                              static_cast<double>(x.ref[i]), want, wrong);
                throw Mismatch{b.data()};
            }
        }
        t_.values_checked += x.ref.size();
        t_.bytes_checked += got.size();
        x.unchecked = false;
    }

    void check(std::span<const std::byte> expect, std::span<const std::byte> got,
               std::uint64_t base, const std::string& what) {
        const std::string d = first_difference(expect, got, base);
        if (!d.empty())
            throw Mismatch{what + ": " + d};
        t_.bytes_checked += got.size();
    }

    // ---- end of a round ---------------------------------------------------------------

    void end_of_round(Rng& rng) {
        // A timing pair around the round's last work on one stream.
        const int s = random_stream(rng);
        Event start;
        Event end;
        start.record(streams_.at(s));
        end.record(streams_.at(s));
        for (auto& st : streams_)
            st.synchronize();
        dev_->synchronize();
        end.synchronize();
        if (!end.query() || !start.query())
            throw Fatal{"an event is not done after synchronize()"};
        const double ms = Event::elapsed_time(start, end);
        if (!(ms >= 0.0) || ms > 60'000.0)
            throw Fatal{"elapsed_time() of two events on one stream is " + std::to_string(ms) +
                        " ms"};
        for (auto& st : streams_)
            if (!st.query())
                throw Fatal{"a stream is not idle after synchronize()"};
        // Everything is done: the pending read backs, then whatever the
        // device changed and nobody read.
        for (auto& c : pending_) {
            const std::span<const std::byte> got =
                c.gem ? std::span<const std::byte>(c.gem->host_data(), c.expect.size())
                      : std::span<const std::byte>(c.block.data(), c.expect.size());
            check(c.expect, got, 0, c.what);
        }
        pending_.clear();
        for (auto& b : bufs_) {
            b.hz = {};
            if (b.unchecked) {
                std::vector<std::byte> got(b.ref.size());
                copy(streams_.at(0), CopyEndpoint::of_host(got.data(), got.size()),
                     CopyEndpoint::of(b.mem, 0, b.ref.size()));
                check(b.ref, got, 0,
                      "block " + std::to_string(b.id) + " (" + std::to_string(b.ref.size()) +
                          " bytes, chiplet " + std::to_string(b.mem->chiplet()) +
                          ") read back at the end of the round");
                b.unchecked = false;
            }
        }
        for (auto& x : tensors_) {
            x.hz = {};
            if (x.unchecked)
                check_tensor(x);
        }
        // The allocator's own books: what is live is allocated.
        std::uint64_t live = 0;
        for (const auto& b : bufs_)
            live += b.mem->size();
        if (alloc_.memory_allocated() < live)
            throw Fatal{"the allocator counts " + std::to_string(alloc_.memory_allocated()) +
                        " bytes allocated, but " + std::to_string(live) +
                        " bytes of blocks are live"};
    }

    void progress(Clock::duration elapsed) {
        const AllocatorStats a = alloc_.stats();
        const HostAllocatorStats h = host_.stats();
        std::printf("rbln-soak: device %u t=%.0fs rounds=%" PRIu64 " ops=%" PRIu64
                    " checked=%s tolerated=%" PRIu64 " allocated=%s reserved=%s host=%s "
                    "segments=%" PRId64 "/%" PRId64 "\n",
                    o_.device, std::chrono::duration<double>(elapsed).count(), t_.rounds, t_.ops,
                    mib(t_.bytes_checked).c_str(), t_.tolerated,
                    mib(static_cast<std::uint64_t>(a.allocated_bytes[0].current)).c_str(),
                    mib(static_cast<std::uint64_t>(a.reserved_bytes[0].current)).c_str(),
                    mib(static_cast<std::uint64_t>(h.reserved_bytes.current)).c_str(),
                    a.num_device_alloc, a.num_device_free);
        std::fflush(stdout);
    }

    /// Reads back what is unchecked, drops every object, waits for the
    /// device and checks that the allocators give everything back.
    void quiesce() {
        for (auto& b : bufs_)
            if (b.unchecked) {
                std::vector<std::byte> got(b.ref.size());
                copy(streams_.at(0), CopyEndpoint::of_host(got.data(), got.size()),
                     CopyEndpoint::of(b.mem, 0, b.ref.size()));
                check(b.ref, got, 0, "block " + std::to_string(b.id) + " before it was dropped");
            }
        for (auto& x : tensors_)
            if (x.unchecked)
                check_tensor(x);
        bufs_.clear();
        tensors_.clear();
        pending_.clear();
        for (auto& s : streams_)
            s.synchronize();
        dev_->synchronize();
        if (alloc_.memory_allocated() != 0)
            throw Fatal{"with every block freed and the device idle, the allocator still counts " +
                        std::to_string(alloc_.memory_allocated()) + " bytes allocated"};
        alloc_.empty_cache();
        if (alloc_.memory_reserved() != 0)
            throw Fatal{"after empty_cache() the allocator still holds " +
                        std::to_string(alloc_.memory_reserved()) + " bytes of segments"};
        host_.empty_cache();
        const HostAllocatorStats h = host_.stats();
        if (h.allocation.current != 0 || h.reserved_bytes.current != 0)
            throw Fatal{"after empty_cache() the host allocator still has " +
                        std::to_string(h.allocation.current) + " blocks out and " +
                        std::to_string(h.reserved_bytes.current) + " bytes reserved"};
    }

    /// Every --progress seconds: a quiet point (quiesce(), malloc_trim())
    /// where the process's own memory is measured without the live set's
    /// noise.  From the second on, RSS may not exceed the first by more
    /// than kCheckpointRssKib and the open files may not exceed the first.
    void checkpoint(Clock::duration elapsed) {
        quiesce();
        ::malloc_trim(0);
        const long rss = status_kib("VmRSS:");
        const long fds = open_files();
        const struct mallinfo2 mi = ::mallinfo2();
        const auto heap = static_cast<long>(mi.uordblks + mi.hblkhd);
        checkpoints_++;
        progress(elapsed);
        std::printf("rbln-soak: device %u checkpoint %u: rss=%ld KiB fds=%ld heap=%ld bytes in "
                    "use (quiet: no live objects, caches emptied)\n",
                    o_.device, checkpoints_, rss, fds, heap);
        std::fflush(stdout);
        if (checkpoints_ == 1) {
            rss_ref_ = rss;
            fds_ref_ = fds;
            return;
        }
        if (rss > rss_ref_ + kCheckpointRssKib)
            throw Fatal{"a leak: at a quiet point the RSS is " + std::to_string(rss) + " KiB, " +
                        std::to_string(rss - rss_ref_) +
                        " KiB over the first quiet point (tolerance " +
                        std::to_string(kCheckpointRssKib) + " KiB)"};
        if (fds > fds_ref_)
            throw Fatal{"a leak: at a quiet point the process holds " + std::to_string(fds) +
                        " open files, " + std::to_string(fds - fds_ref_) +
                        " more than at the first"};
    }

    static long status_kib(std::string_view key) {
        std::ifstream f("/proc/self/status");
        std::string line;
        while (std::getline(f, line))
            if (line.starts_with(key))
                return std::strtol(line.c_str() + key.size(), nullptr, 10);
        return -1;
    }

    static long open_files() {
        long n = 0;
        std::error_code ec;
        for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
             !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
            n++;
        return n - 1; // the iterator's own
    }

    /// The kernel keeps the fences of each queue's last 4096 jobs
    /// (RBLN_QUEUE_HISTORY, kernel/rbln_queue.c) for WAIT by seqno: a
    /// bounded cache in slab that grows with a queue's first 4096 jobs.
    /// Filling it before the first round (an event without timing is a NOP
    /// job) keeps that growth out of the soak's slab samples, so growth
    /// after warm-up is a leak.
    void fill_job_history() {
        const auto t = Clock::now();
        for (auto& st : streams_) {
            for (unsigned i = 0; i < kQueueHistory + 64; i++) {
                Event e(false);
                e.record(st);
            }
            st.synchronize();
        }
        std::printf("rbln-soak: device %u: %u NOP jobs on each of %u streams (the kernel's job "
                    "history) in %.1f s\n",
                    o_.device, kQueueHistory + 64, kStreams,
                    std::chrono::duration<double>(Clock::now() - t).count());
        std::fflush(stdout);
    }

    /// Drops everything and checks the allocators give it all back.
    int finish(Clock::duration elapsed) {
        what_ = "finish";
        try {
            quiesce();
        } catch (const Mismatch& m) {
            report("wrong result: " + m.what);
            return 1;
        } catch (const Error& e) {
            report(std::string("error: ") + e.what());
            return 1;
        } catch (const Fatal& f) {
            report(f.what);
            return 1;
        }
        progress(elapsed);
        std::string mix_line;
        for (unsigned i = 0; i < kOpCount; i++)
            mix_line += std::string(i != 0 ? " " : "") + kOpNames.at(i) + "=" +
                        std::to_string(t_.per_op.at(i));
        std::printf("rbln-soak: device %u ops: %s\n", o_.device, mix_line.c_str());
        const CopyStats cs = dev_->copy_stats();
        std::printf("rbln-soak: device %u copies: async h2d=%" PRIu64 " d2h=%" PRIu64
                    " d2d=%" PRIu64 ", sync h2d=%" PRIu64 " d2h=%" PRIu64 " d2d=%" PRIu64
                    ", host-to-host=%" PRIu64 "; event waits=%" PRIu64 " kernels=%" PRIu64
                    " empty_cache=%" PRIu64 "\n",
                    o_.device, cs.async_h2d, cs.async_d2h, cs.async_d2d, cs.sync_h2d, cs.sync_d2h,
                    cs.sync_d2d, cs.host_to_host, t_.jobs_waited, t_.kernels, t_.empty_caches);
        std::printf("rbln-soak: device %u PASS rounds=%" PRIu64 " ops=%" PRIu64
                    " checked_bytes=%" PRIu64 " checked_values=%" PRIu64 " tolerated=%" PRIu64
                    " seed=%s\n",
                    o_.device, t_.rounds, t_.ops, t_.bytes_checked, t_.values_checked, t_.tolerated,
                    hex(o_.seed).c_str());
        std::fflush(stdout);
        return 0;
    }

    Options o_;
    std::shared_ptr<Device> dev_;
    DeviceAllocator& alloc_;
    HostAllocator& host_;
    unsigned chiplets_;
    std::vector<Stream> streams_;
    // deques: references stay valid while an operation adds objects
    std::deque<Buf> bufs_;
    std::deque<Tensor> tensors_;
    std::vector<PendingCheck> pending_;
    Totals t_;
    unsigned next_id_ = 1;
    unsigned checkpoints_ = 0;
    long rss_ref_ = 0;
    long fds_ref_ = 0;
    std::uint64_t round_ = 0;
    unsigned op_ = 0;
    std::string what_;
};

constexpr std::string_view kHelp = R"(Usage: rbln-soak [OPTION]...
Random mixes of librbln's work on one logical device (allocations and frees
through the caching allocator, copies in every direction, built-in kernels,
streams and events), every result checked against the CPU.

  --device N           logical device (default 0)
  --seconds S          run for S seconds (default 60)
  --rounds N           run exactly N rounds instead (a replay)
  --seed N             seed of the draws (default: from the clock; printed)
  --tolerate-timeouts  a job failing as a hung chiplet's does (ETIMEDOUT)
                       costs its round instead of failing the run
  --progress S         a progress line every S seconds (default 30)
  --trace              one line per device write on stderr (for a replay)
  --skip OP[,OP...]    leave these operations out (to narrow a failure down;
                       the names are those of the final "ops:" line; not alloc)
  -h, --help           this help

Exit status: 0 passed; 1 a wrong result or an error (the message says what
and how to replay); 2 usage.
)";

template <typename T> std::optional<T> number(std::string_view s) {
    T v{};
    int base = 10;
    if (s.starts_with("0x")) {
        s.remove_prefix(2);
        base = 16;
    }
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
        return std::nullopt;
    return v;
}

std::optional<Options> parse(int argc, char** argv) {
    Options o;
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); i++) {
        const std::string_view a = args[i];
        auto value = [&]() -> std::string_view {
            if (i + 1 >= args.size())
                return {};
            return args[++i];
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kHelp.data(), stdout);
            std::exit(0);
        } else if (a == "--skip") {
            std::string_view list = value();
            while (!list.empty()) {
                const std::string_view name = list.substr(0, list.find(','));
                list.remove_prefix(std::min(list.size(), name.size() + 1));
                const auto it = std::find(kOpNames.begin(), kOpNames.end(), name);
                if (it == kOpNames.end() || name == "alloc")
                    return std::nullopt;
                o.skip |= 1U << static_cast<unsigned>(it - kOpNames.begin());
            }
        } else if (a == "--trace") {
            o.trace = true;
        } else if (a == "--tolerate-timeouts") {
            o.tolerate_timeouts = true;
        } else if (a == "--device") {
            const auto v = number<unsigned>(value());
            if (!v)
                return std::nullopt;
            o.device = *v;
        } else if (a == "--seconds" || a == "--progress") {
            const std::string s(value());
            char* end = nullptr;
            const double d = std::strtod(s.c_str(), &end);
            if (s.empty() || *end != '\0' || !(d > 0.0))
                return std::nullopt;
            (a == "--seconds" ? o.seconds : o.progress) = d;
        } else if (a == "--rounds") {
            const auto v = number<std::uint64_t>(value());
            if (!v || *v == 0)
                return std::nullopt;
            o.rounds = *v;
        } else if (a == "--seed") {
            const auto v = number<std::uint64_t>(value());
            if (!v)
                return std::nullopt;
            o.seed = *v;
            o.seed_given = true;
        } else {
            return std::nullopt;
        }
    }
    if (!o.seed_given)
        o.seed = mix(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()),
                     static_cast<std::uint64_t>(::getpid()));
    return o;
}

} // namespace
} // namespace rbln::soak

int main(int argc, char** argv) {
    const auto o = rbln::soak::parse(argc, argv);
    if (!o) {
        std::fputs("rbln-soak: bad arguments (rbln-soak --help)\n", stderr);
        return 2;
    }
    try {
        rbln::soak::Soak soak(*o);
        return soak.run();
    } catch (const rbln::Error& e) {
        std::fprintf(stderr, "rbln-soak: device %u: %s\n", o->device, e.what());
        return 1;
    }
}
