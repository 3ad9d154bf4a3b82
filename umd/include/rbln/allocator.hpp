// SPDX-License-Identifier: GPL-2.0
// rbln/allocator.hpp - the caching allocator of device memory: one per
// chiplet, grouped per logical device, with PyTorch's policy and statistics.
//
// Policy (PyTorch's CUDACachingAllocator, see umd/README.md for the
// reasoning and the few deliberate differences):
//   - a request is rounded up to a multiple of 512 B (or, when
//     roundup_power2_divisions applies, to the next of N equal divisions of
//     its power-of-two interval);
//   - rounded requests up to 1 MiB come from the small pool, whose segments
//     are 2 MiB; larger ones from the large pool, whose segments are 20 MiB
//     for requests under 10 MiB and the request rounded up to 2 MiB above;
//   - the best-fitting free block of the request's own stream is used: the
//     smallest one at least as large (ties: lowest address).  A block at or
//     above max_split_size serves only requests at or above it, and only if
//     it is less than 20 MiB larger than the request;
//   - a small-pool block is split when at least 512 B remain, a large-pool
//     block when the request is below max_split_size and more than 1 MiB
//     remains; a freed block merges with free neighbours of its segment;
//   - a block used by other streams (record_stream()) returns to the pool
//     only when fences recorded on those streams at free() time are done;
//     free() never blocks the host;
//   - out of memory: free cached blocks of oversize segments, then every
//     cached unsplit segment, and retry (num_alloc_retries); then throw
//     Errc::OutOfMemory (num_ooms) naming the NPU, the chiplet, the request
//     and the chiplet's allocated / reserved / free bytes;
//   - garbage_collection_threshold: before asking the kernel for a segment,
//     when the chiplet's reserved bytes exceed the threshold times its
//     allowed maximum, free the oldest unused unsplit large segments.
//
// Thread safety: a DeviceAllocator is safe to use from any thread (one
// mutex per logical device, as PyTorch has one per GPU).  Fences are
// queried and recorded outside that mutex, so a fence whose query drops the
// last reference to a block (a job's keep-alive) may free into the
// allocator.
//
// Lifetime: a DeviceBlock refers to its allocator; destroy the blocks
// before the allocator (the process allocators of rbln_alloc.h live until
// the process exits).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rbln/devices.hpp"
#include "rbln/error.hpp"
#include "rbln/export.h"

// librbln's own (umd/src): the kernel interface, where segments come from
// (segment_provider.hpp) and the blocks and pools; hidden from librbln.so
// (rbln/export.h).
namespace rbln {
class KernelInterface;
struct AllocatorPlace;
namespace detail {
struct Block;
class ChipletAllocator;
} // namespace detail
} // namespace rbln

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// PyTorch's constants, under the same names.
namespace alloc {
inline constexpr std::uint64_t kMinBlockSize = 512;          ///< rounding unit
inline constexpr std::uint64_t kSmallSize = 1ull << 20;      ///< largest small-pool request
inline constexpr std::uint64_t kSmallBuffer = 2ull << 20;    ///< small-pool segment
inline constexpr std::uint64_t kLargeBuffer = 20ull << 20;   ///< large-pool segment under 10 MiB
inline constexpr std::uint64_t kMinLargeAlloc = 10ull << 20; ///< from here: rounded segments
inline constexpr std::uint64_t kRoundLarge = 2ull << 20;     ///< their rounding
inline constexpr unsigned kRoundupIntervals = 16; ///< 1 MiB .. 64 GiB, one per power of 2
inline constexpr std::uint64_t kNoMaxSplit = std::numeric_limits<std::uint64_t>::max();
} // namespace alloc

/// The allocator's settings, from a PyTorch-style string such as
/// "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:4],
/// garbage_collection_threshold:0.6" (RBLN_ALLOC_CONF).
struct AllocatorConfig {
    /// Blocks at or above it are never split (alloc::kNoMaxSplit: no limit).
    std::uint64_t max_split_size = alloc::kNoMaxSplit;
    /// Divisions per power-of-two interval: entry i covers sizes in
    /// [2^(20+i), 2^(21+i)) bytes, entry 0 everything below 2 MiB too, the
    /// last everything above; 0 or 1: plain 512 B rounding.  The list form
    /// "[256:1,512:2,>:4]" reads as PyTorch documents it: 1 division below
    /// 256 MiB, 2 in [256, 512) MiB, 4 from 512 MiB on.
    std::array<std::uint32_t, alloc::kRoundupIntervals> roundup_power2_divisions{};
    /// In (0, 1); 0: no garbage collection.
    double garbage_collection_threshold = 0.0;

    /// Parses @text; throws Errc::BadConfig naming @variable, the option
    /// and what is wrong.  "" is the default configuration.
    static AllocatorConfig parse(std::string_view text,
                                 std::string_view variable = "RBLN_ALLOC_CONF");
    /// RBLN_ALLOC_CONF from @env (empty: the process environment).
    static AllocatorConfig from_environment(const EnvSource& env = {});

    /// The divisions that apply to a request of @size bytes.
    std::uint32_t divisions_for(std::uint64_t size) const noexcept;
};

/// The rounded request (PyTorch's round_size).
std::uint64_t round_request(std::uint64_t size, const AllocatorConfig& config) noexcept;
/// The segment size for a rounded request (PyTorch's get_allocation_size).
std::uint64_t segment_size_for(std::uint64_t rounded) noexcept;
/// Whether a rounded request is served by the small pool.
constexpr bool is_small_request(std::uint64_t rounded) noexcept {
    return rounded <= alloc::kSmallSize;
}

/// Identifies a stream to the allocator: blocks are reused only by
/// requests of the stream that allocated them.  Any stable value works;
/// stream_id(const Stream&) (rbln/allocator_stream.hpp) gives librbln's.
using StreamId = std::uint64_t;
inline constexpr StreamId kDefaultStream = 0;

/// A point on a stream: done when the work enqueued on the stream before it
/// is done.  (librbln's implementation is an rbln::Event.)
class StreamFence {
public:
    StreamFence() = default;
    StreamFence(const StreamFence&) = delete;
    StreamFence& operator=(const StreamFence&) = delete;
    StreamFence(StreamFence&&) = delete;
    StreamFence& operator=(StreamFence&&) = delete;
    virtual ~StreamFence() = default;
    /// True once done; must not block.
    virtual bool query() = 0;
    /// Blocks until done (empty_cache() and the out-of-memory path).
    virtual void synchronize() = 0;
};

/// A stream other than a block's own that uses the block (record_stream()):
/// at free() the allocator records a fence on it.
class StreamFenceSource {
public:
    StreamFenceSource() = default;
    StreamFenceSource(const StreamFenceSource&) = delete;
    StreamFenceSource& operator=(const StreamFenceSource&) = delete;
    StreamFenceSource(StreamFenceSource&&) = delete;
    StreamFenceSource& operator=(StreamFenceSource&&) = delete;
    virtual ~StreamFenceSource() = default;
    virtual StreamId stream_id() const noexcept = 0;
    /// A fence after the work enqueued on the stream so far.
    virtual std::unique_ptr<StreamFence> record() = 0;
};

/// PyTorch's Stat: current value, its peak, and what was added / removed.
struct Stat {
    std::int64_t current = 0;
    std::int64_t peak = 0;
    std::int64_t allocated = 0;
    std::int64_t freed = 0;

    void increase(std::int64_t amount) noexcept {
        current += amount;
        if (current > peak)
            peak = current;
        allocated += amount;
    }
    void decrease(std::int64_t amount) noexcept {
        current -= amount;
        freed += amount;
    }
    void reset_accumulated() noexcept { allocated = freed = 0; }
    void reset_peak() noexcept { peak = current; }
};

/// Index into a StatArray: "all", "small_pool", "large_pool".
enum class StatType : unsigned { All = 0, SmallPool = 1, LargePool = 2 };
using StatArray = std::array<Stat, 3>;

/// PyTorch's DeviceStats.
struct AllocatorStats {
    StatArray allocation{};                ///< allocated blocks
    StatArray segment{};                   ///< segments from the kernel
    StatArray active{};                    ///< allocated or awaiting other streams
    StatArray inactive_split{};            ///< free blocks of split segments
    StatArray allocated_bytes{};           ///< bytes of allocated blocks (rounded)
    StatArray reserved_bytes{};            ///< bytes of segments
    StatArray active_bytes{};              ///< bytes of active blocks
    StatArray inactive_split_bytes{};      ///< bytes of inactive_split blocks
    StatArray requested_bytes{};           ///< bytes the callers asked for (active blocks)
    Stat oversize_allocations{};           ///< allocated blocks >= max_split_size
    Stat oversize_segments{};              ///< segments >= max_split_size
    std::int64_t num_alloc_retries = 0;    ///< allocations that freed the whole cache and retried
    std::int64_t num_ooms = 0;             ///< allocations that failed
    std::int64_t num_sync_all_streams = 0; ///< waits for every pending fence
    std::int64_t num_device_alloc = 0;     ///< segments asked of the kernel
    std::int64_t num_device_free = 0;      ///< segments given back
    std::int64_t max_split_size = -1;      ///< the setting; -1: no limit (as PyTorch)
};

/// Flat statistics under PyTorch's key names ("allocated_bytes.all.current",
/// "num_ooms", ...), sorted by key like torch.cuda.memory_stats().
using MemoryStats = std::map<std::string, std::int64_t, std::less<>>;

/// @stats under PyTorch's names, each prefixed with @prefix.
void append_memory_stats(MemoryStats& out, const AllocatorStats& stats,
                         std::string_view prefix = {});

class DeviceAllocator;

/// An allocated block; frees it (to the cache) when destroyed.  Move-only.
class DeviceBlock {
public:
    DeviceBlock() = default;
    DeviceBlock(const DeviceBlock&) = delete;
    DeviceBlock& operator=(const DeviceBlock&) = delete;
    DeviceBlock(DeviceBlock&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)),
          block_(std::exchange(other.block_, nullptr)) {}
    DeviceBlock& operator=(DeviceBlock&& other) noexcept;
    ~DeviceBlock() { reset(); }

    explicit operator bool() const noexcept { return block_ != nullptr; }
    /// Device VA of byte 0 of the block.
    std::uint64_t device_va() const noexcept;
    /// The block's size (the rounded request, or more when not split).
    std::uint64_t size() const noexcept;
    /// What the caller asked for.
    std::uint64_t requested_size() const noexcept;
    /// GEM handle of the segment holding it (list it in the jobs using it).
    std::uint32_t handle() const noexcept;
    /// Offset of the block in its segment.
    std::uint64_t segment_offset() const noexcept;
    /// Index of the chiplet in the allocator's places.
    unsigned place() const noexcept;
    StreamId stream() const noexcept;
    /// Frees now (no-op if empty).
    void reset() noexcept;

private:
    friend class DeviceAllocator;
    DeviceBlock(DeviceAllocator* owner, detail::Block* block) : owner_(owner), block_(block) {}
    DeviceAllocator* owner_ = nullptr;
    detail::Block* block_ = nullptr;
};

/// Options of memory_summary().
struct SummaryOptions {
    std::string title_word = "rbln"; ///< first word of the title (a framework's name)
    std::optional<long> pid;         ///< default: getpid()
};

/// The caching allocators of one logical device, one per chiplet.
class DeviceAllocator {
public:
    /// @device_index names the device in messages ("rbln:<index>");
    /// @places: where each chiplet's segments come from (internal:
    /// segment_provider.hpp; frameworks use process_allocator()).
    RBLN_LOCAL DeviceAllocator(unsigned device_index, std::vector<AllocatorPlace> places,
                               AllocatorConfig config = {});
    DeviceAllocator(const DeviceAllocator&) = delete;
    DeviceAllocator& operator=(const DeviceAllocator&) = delete;
    DeviceAllocator(DeviceAllocator&&) = delete;
    DeviceAllocator& operator=(DeviceAllocator&&) = delete;
    /// Gives every segment back (blocks must be gone; see the file comment).
    ~DeviceAllocator();

    /// An allocator over the HBM of every chiplet of @npus (NPU id, node),
    /// in that order (capacities from GET_INFO).
    RBLN_LOCAL static std::unique_ptr<DeviceAllocator>
    for_kernels(unsigned device_index,
                const std::vector<std::pair<unsigned, std::shared_ptr<KernelInterface>>>& npus,
                AllocatorConfig config = {});

    unsigned device_index() const noexcept { return device_index_; }
    std::size_t place_count() const noexcept { return chiplets_.size(); }
    unsigned npu_of(unsigned place) const;
    unsigned chiplet_of(unsigned place) const;
    /// The place of (@npu, @chiplet); Errc::InvalidArgument if none.
    unsigned find_place(unsigned npu, unsigned chiplet) const;
    const AllocatorConfig& config() const noexcept { return config_; }

    /// Placement: allocations without a place go to the default place,
    /// place 0 (the first chiplet of the first NPU) unless changed, so that
    /// a single-chiplet workload stays on one chiplet, as CUDA's current
    /// device.  Errc::InvalidArgument if out of range.
    void set_default_place(unsigned place);
    unsigned default_place() const noexcept { return default_place_.load(); }

    /// A block of at least @size bytes (0 gives an empty DeviceBlock) for
    /// @stream on @place.  Throws Errc::OutOfMemory, Errc::InvalidArgument.
    /// (Overloads rather than one std::optional parameter: a caller builds
    /// an optional with a byte store and passes it as one 8-byte load,
    /// which stalls store-to-load forwarding, about 3 ns of a 32 ns cached
    /// pair.)
    DeviceBlock allocate(std::uint64_t size, StreamId stream = kDefaultStream) {
        return allocate(size, stream, default_place_.load(std::memory_order_relaxed));
    }
    DeviceBlock allocate(std::uint64_t size, StreamId stream, unsigned place);
    DeviceBlock allocate(std::uint64_t size, StreamId stream, std::optional<unsigned> place) {
        return place ? allocate(size, stream, *place) : allocate(size, stream);
    }
    /// @block is also used by @stream: when freed, it returns to the pool
    /// only after the work enqueued on @stream until then.  No-op for the
    /// block's own stream.
    void record_stream(const DeviceBlock& block, std::shared_ptr<StreamFenceSource> stream);
    /// Waits for pending fences of freed blocks, then gives every unused
    /// segment (all chiplets) back to the kernel.
    void empty_cache();
    /// Caps a chiplet at @fraction of its HBM (PyTorch's
    /// set_per_process_memory_fraction); also the base of the
    /// garbage-collection threshold (which otherwise uses the whole HBM).
    void set_memory_fraction(double fraction, unsigned place);

    /// Statistics of the logical device: sums over the chiplets, peaks of
    /// the sums (tracked exactly, not added up).
    AllocatorStats stats() const;
    /// Statistics of one chiplet.
    AllocatorStats stats(unsigned place) const;
    /// stats() under PyTorch's key names.
    MemoryStats memory_stats() const;
    /// Every chiplet's stats, keys prefixed "npu.<n>.chiplet.<c>.".
    MemoryStats memory_stats_per_chiplet() const;
    std::uint64_t memory_allocated() const;
    std::uint64_t memory_reserved() const;
    std::uint64_t max_memory_allocated() const;
    std::uint64_t max_memory_reserved() const;
    /// Peaks := current values (device and chiplets).
    void reset_peak_memory_stats();
    /// The "allocated"/"freed" halves and the num_* counters := 0.
    void reset_accumulated_memory_stats();
    /// The table of rbln/allocator.hpp's issue layout: one row per NPU and
    /// chiplet, MiB with one decimal, a total row, the retry/oom line.
    std::string memory_summary(const SummaryOptions& options = {}) const;

    /// The repeat shortcut (on by default): when a block is freed right
    /// after it was allocated from the cache, and the same request (size,
    /// stream, place) comes next with nothing else in between, the
    /// allocator hands the same block out again without merging and
    /// splitting, and adds the statistics' "allocated"/"freed" halves of
    /// those pairs when anything else happens (or the statistics are
    /// read).  Every result (VAs, statistics, peaks, segments) is the one
    /// of the full path; only the work differs.  Off: every pair takes the
    /// full path (tests compare both; benchmarks report both).
    void set_repeat_shortcut(bool on);

private:
    friend class DeviceBlock;
    friend class detail::ChipletAllocator;
    /// The last allocation while nothing else happened on the device since
    /// (see "The repeat shortcut" in allocator.cpp).  Guarded by mutex_.
    struct Repeat {
        detail::Block* block = nullptr; ///< nullptr: none
        detail::ChipletAllocator* chiplet = nullptr;
        std::uint64_t size = 0; ///< the request as the caller gave it
        StreamId stream = kDefaultStream;
        std::uint64_t rest = 0;  ///< the remainder when the block was split off
        std::uint64_t pairs = 0; ///< free + allocate repeats not yet counted
        bool split = false;      ///< split off the cached block it came from
        bool was_split = false;  ///< that block was a split one
        bool parked = false;     ///< freed by the caller, not yet given back
    };
    /// Counts the repeats and gives a parked block back to its pool.
    void settle() const noexcept {
        if (repeat_.block != nullptr)
            settle_repeat();
    }
    RBLN_LOCAL void settle_repeat() const noexcept;
    RBLN_LOCAL void free(detail::Block* block) noexcept;
    RBLN_LOCAL detail::ChipletAllocator& chiplet(unsigned place) const;
    /// The device's and every chiplet's statistics at one moment.
    RBLN_LOCAL void snapshot(AllocatorStats& total, std::vector<AllocatorStats>& per) const;

    unsigned device_index_;
    AllocatorConfig config_;
    mutable std::mutex mutex_;
    AllocatorStats total_;  ///< guarded by mutex_
    mutable Repeat repeat_; ///< settled by the const readers too
    bool repeat_on_ = true; ///< guarded by mutex_
    std::vector<std::unique_ptr<detail::ChipletAllocator>> chiplets_;
    std::atomic<unsigned> default_place_{0};
};

/// The caching allocator of logical device @index of the process, in the
/// process's context of that device (with Device::get(@index) and its
/// host allocator), made at first use over the device's node (a
/// multi-NPU ATOM device: its first NPU for now, as its streams) with
/// RBLN_ALLOC_CONF read then.  The first use commits the device mapping
/// and opens the device (Errc::BadFork in a fork() child of a process that
/// committed); an allocator already made is returned in a child too (its
/// copy: statistics and empty_cache() work, new segments are refused).
/// Never destroyed (as Device::get()'s devices: a fork() child's exit must
/// not close the parent's buffers).  Thread-safe.
DeviceAllocator& process_allocator(unsigned index);

/// What the statistics of logical device @index read (memory_stats(),
/// memory_allocated(), memory_summary(), ... of the result): queries plan,
/// they do not commit.  Once the device was used, its process_allocator();
/// before, an empty allocator planned from sysfs (the chiplets the live one
/// will have, zero everywhere).  Reading it opens no NPU and leaves the
/// device mapping unfixed, so a process that only read statistics may
/// still fork() workers that use the device, and later changes to the
/// mapping variables count.  Errc::NoDevice if @index is not a device of
/// the plan.  Thread-safe.
const DeviceAllocator& process_allocator_stats(unsigned index);

/// "20.00 MiB", "512 bytes", ... (PyTorch's format_size).
std::string format_bytes(std::uint64_t bytes);

} // namespace rbln

#pragma GCC visibility pop
