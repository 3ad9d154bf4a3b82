// SPDX-License-Identifier: GPL-2.0
// allocator.cpp - the per-chiplet caching allocator (PyTorch's
// CUDACachingAllocator policy, written anew) and the per-device group.
//
// Data structures: a block is one range of a segment; the blocks of a
// segment form a doubly linked list in address order.  Free blocks sit in
// their pool's set ordered by (stream, size, address), so lower_bound is
// the best fit on the request's stream.  Blocks come from an arena with a
// free list and set nodes are recycled (extract / insert of node handles),
// so a cached alloc/free pair allocates no host memory.
//
// The repeat shortcut.  Freeing a block right after allocating it from the
// cache restores the pools exactly: the block came from a free block X
// whose neighbours were not free (free blocks merge), so it merges back
// into a block with X's address, size and neighbours (or, unsplit, returns
// as X).  The same request next then picks the same X again and is given
// the same address.  So DeviceAllocator keeps that last allocation
// (Repeat): a free of it parks the block instead of merging, and the same
// request next takes it back.  Every statistic's current value is the same
// after each such pair, and its peak is already reached (an earlier reset
// of the peaks would have settled), so only the "allocated"/"freed" halves
// owe something: Repeat counts the pairs and settle() adds them (and frees
// a parked block for real) before anything else happens on the device:
// another allocation or free, an event completing, empty_cache, reading or
// resetting statistics.  Not with garbage collection (its clock counts
// lookups), nor for a block that came from a new segment: its free leaves
// the pools other than its request found them, and the same lookup may
// then miss it (an oversize cached block first in best-fit order refuses a
// smaller request, as it did before).

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define RBLN_HAVE_SINGLE_THREADED 1
#endif

#include <unistd.h>

#include "kernel/kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "runtime/fork_state.hpp"

namespace rbln {

namespace detail {

struct Pool;
struct Block;

/// The device mutex as allocate and free take it: not at all while the
/// process has one thread, as glibc's malloc skips its arena lock then
/// (__libc_single_threaded).  Only this thread could start another, and
/// nothing done under the lock starts threads (librbln starts none; a
/// SegmentProvider must not start one that uses this allocator while it
/// runs), so no thread can run beside a section that went without the lock.
/// Once a second thread exists every section takes the mutex: thread
/// creation orders everything before it.
class AllocLock {
public:
    explicit AllocLock(std::mutex& m) : mutex_(m) { lock(); }
    ~AllocLock() { unlock(); }
    AllocLock(const AllocLock&) = delete;
    AllocLock& operator=(const AllocLock&) = delete;
    AllocLock(AllocLock&&) = delete;
    AllocLock& operator=(AllocLock&&) = delete;

    void lock() {
#ifdef RBLN_HAVE_SINGLE_THREADED
        held_ = __libc_single_threaded == 0;
#else
        held_ = true;
#endif
        if (held_)
            mutex_.lock();
    }
    void unlock() noexcept {
        if (held_)
            mutex_.unlock();
        held_ = false;
    }

private:
    std::mutex& mutex_;
    bool held_ = false;
};

namespace {

struct BlockKey {
    StreamId stream;
    std::uint64_t size;
    std::uint64_t va;
};

/// A pool's set entry: the block and a copy of its key, so that a search
/// compares in the tree's own nodes instead of loading every visited block
/// (with 100,000 blocks that halves the dependent loads of a lookup).  The
/// copy is refreshed whenever the block's key changes in the pool
/// (ChipletAllocator::rekey); the key fields are mutable for that, which
/// keeps the set's order as long as rekey is only used where the order
/// holds.
struct Slot {
    Slot() = default;
    Slot(Block* b) noexcept; // NOLINT(google-explicit-constructor): a set of blocks
    Block* operator->() const noexcept { return block; }
    operator Block*() const noexcept { return block; } // NOLINT(google-explicit-constructor)

    StreamId stream = kDefaultStream;
    mutable std::uint64_t size = 0;
    mutable std::uint64_t va = 0;
    Block* block = nullptr;
};

struct BlockLess {
    using is_transparent = void;
    template <typename B> static auto key(const B* b) noexcept {
        return std::tie(b->stream, b->size, b->va);
    }
    static auto key(const BlockKey& k) noexcept { return std::tie(k.stream, k.size, k.va); }
    static auto key(const Slot& s) noexcept { return std::tie(s.stream, s.size, s.va); }
    template <typename A, typename B> bool operator()(const A& a, const B& b) const noexcept {
        return key(a) < key(b);
    }
};

} // namespace

using BlockSet = std::set<Slot, BlockLess>;

struct Block {
    std::uint64_t va = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
    std::uint64_t segment_va = 0;
    StreamId stream = kDefaultStream;
    Pool* pool = nullptr;
    Block* prev = nullptr; ///< neighbours in the segment
    Block* next = nullptr;
    ChipletAllocator* owner = nullptr;
    std::uint64_t gc_base = 0; ///< pool's get_free_calls when last handed out
    BlockSet::iterator pos{};  ///< its node in pool->blocks (valid while in_pool)
    std::uint32_t handle = 0;
    std::uint32_t event_count = 0; ///< fences not yet done (freed, awaiting streams)
    bool allocated = false;
    bool in_pool = false;
    std::vector<std::shared_ptr<StreamFenceSource>> stream_uses;

    bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
};

namespace {
inline Slot::Slot(Block* b) noexcept : stream(b->stream), size(b->size), va(b->va), block(b) {}
} // namespace

struct Pool {
    explicit Pool(bool is_small) : small(is_small) {}
    BlockSet blocks;
    bool small;
    std::uint64_t get_free_calls = 0; ///< garbage-collection clock
    StatType type() const noexcept { return small ? StatType::SmallPool : StatType::LargePool; }
};

class ChipletAllocator {
public:
    /// @track_total: the device has other chiplets, so its totals are kept
    /// apart (with one chiplet they are this chiplet's statistics).
    ChipletAllocator(DeviceAllocator& device, AllocatorPlace place, bool track_total)
        : device_(device), npu_(place.npu), chiplet_(place.chiplet),
          provider_(std::move(place.provider)), track_total_(track_total),
          plain_rounding_(std::all_of(device.config_.roundup_power2_divisions.begin(),
                                      device.config_.roundup_power2_divisions.end(),
                                      [](std::uint32_t d) { return d <= 1; })) {
        stats_.max_split_size = max_split_stat(device.config_);
    }
    ChipletAllocator(const ChipletAllocator&) = delete;
    ChipletAllocator& operator=(const ChipletAllocator&) = delete;
    ChipletAllocator(ChipletAllocator&&) = delete;
    ChipletAllocator& operator=(ChipletAllocator&&) = delete;
    ~ChipletAllocator() = default;

    static std::int64_t max_split_stat(const AllocatorConfig& c) noexcept {
        return c.max_split_size == alloc::kNoMaxSplit ? -1
                                                      : static_cast<std::int64_t>(c.max_split_size);
    }

    // ---- with the device mutex held --------------------------------------

    Block* malloc(std::uint64_t size, StreamId stream, AllocLock& lock);
    void free(Block* block, AllocLock& lock) noexcept;
    void record_stream(Block* block, std::shared_ptr<StreamFenceSource> source);
    /// PyTorch's release_cached_blocks (empty_cache, last OOM step).
    void release_cached_blocks(AllocLock& lock);
    /// At destruction: every cached segment back (pending fences waited for).
    void release_all(AllocLock& lock) noexcept;
    void set_fraction(double fraction) noexcept {
        allowed_max_ =
            static_cast<std::uint64_t>(fraction * static_cast<double>(provider_->capacity()));
        fraction_set_ = true;
    }

    /// This chiplet's statistics (see stats_).
    AllocatorStats view() const noexcept {
        AllocatorStats s = stats_;
        derive_all(s);
        return s;
    }
    /// The device's statistics (see DeviceAllocator::total_).
    static AllocatorStats device_view(const DeviceAllocator& d);
    /// The device's current / peak value of @f's "all" entry.
    static std::int64_t device_current(const DeviceAllocator& d, StatArray AllocatorStats::*f);
    static std::int64_t device_peak(const DeviceAllocator& d, StatArray AllocatorStats::*f);
    /// Peaks := current values (of "all": the pools' sum, its current
    /// value is not kept, see inc()); for this chiplet or, with @s, the
    /// device's totals.
    void reset_peaks() noexcept { reset_peaks(stats_); }
    static void reset_peaks(AllocatorStats& s) noexcept;
    /// The "allocated"/"freed" halves and the num_* counters := 0.
    void reset_accumulated() noexcept;
    unsigned npu() const noexcept { return npu_; }
    unsigned chiplet() const noexcept { return chiplet_; }

    /// The statistics' halves of @r's pairs (free + allocate repeats).
    void count_repeats(const DeviceAllocator::Repeat& r) noexcept;
    /// Frees @b (allocated, no stream uses) into its pool for real.
    void free_unused(Block* b) noexcept {
        unallocate(b);
        free_block(b);
    }

    // ---- without the device mutex -----------------------------------------

    /// Returns the blocks whose fences are done to the pools.
    void process_events() {
        if (pending_count_.load(std::memory_order_acquire) != 0)
            process_pending_events();
    }

private:
    struct Params {
        std::uint64_t size;       ///< rounded request
        std::uint64_t alloc_size; ///< segment size if a new one is needed
        StreamId stream;
        Pool* pool;
    };
    struct PendingFence {
        std::unique_ptr<StreamFence> fence;
        Block* block;
    };
    using PendingMap = std::map<StreamId, std::deque<PendingFence>>;

    const AllocatorConfig& config() const noexcept { return device_.config_; }
    std::uint64_t max_split() const noexcept { return config().max_split_size; }
    bool gc_enabled() const noexcept { return config().garbage_collection_threshold > 0.0; }

    // Statistics: this chiplet's and, on a device of several chiplets, the
    // device's (exact joint peaks: both change under the same mutex).  The
    // pool entries ([1], [2]) of stats_ are kept whole; of the "all" entry
    // [0] only the peak (of the pools' sum), its current value and halves
    // are the pools' sums (derive_all()).  Of the device's StatArrays
    // (total_) the pools' current values and peaks and the "all" peak are
    // kept; the "all" current value is the pools' sum and the halves are
    // the chiplets' sums (device_view()).  So an update writes one pool
    // entry and one peak here and one current value and peaks there.
    void inc(StatArray AllocatorStats::*f, StatType t, std::uint64_t n) noexcept {
        const auto a = static_cast<std::int64_t>(n);
        const auto i = static_cast<std::size_t>(t);
        StatArray& s = stats_.*f;
        // From registers: no reload of what was just stored, no store of
        // an unchanged peak.
        const std::int64_t cur = s[i].current + a;
        s[i].current = cur;
        s[i].allocated += a;
        if (cur > s[i].peak)
            s[i].peak = cur;
        if (const std::int64_t all = cur + s[3 - i].current; all > s[0].peak)
            s[0].peak = all;
        if (track_total_) {
            StatArray& d = device_.total_.*f;
            const std::int64_t dcur = d[i].current + a;
            d[i].current = dcur;
            if (dcur > d[i].peak)
                d[i].peak = dcur;
            if (const std::int64_t dall = dcur + d[3 - i].current; dall > d[0].peak)
                d[0].peak = dall;
        }
    }
    void dec(StatArray AllocatorStats::*f, StatType t, std::uint64_t n) noexcept {
        const auto a = static_cast<std::int64_t>(n);
        const auto i = static_cast<std::size_t>(t);
        (stats_.*f)[i].decrease(a);
        if (track_total_) {
            (device_.total_.*f)[i].current -= a;
        }
    }
    void inc(Stat AllocatorStats::*f) noexcept {
        (stats_.*f).increase(1);
        if (track_total_)
            (device_.total_.*f).increase(1);
    }
    void dec(Stat AllocatorStats::*f) noexcept {
        (stats_.*f).decrease(1);
        if (track_total_)
            (device_.total_.*f).decrease(1);
    }
    void count(std::int64_t AllocatorStats::*f) noexcept {
        ++(stats_.*f);
        if (track_total_)
            ++(device_.total_.*f);
    }
    /// The "all" entries' current values and halves from the pools'.
    static void derive_all(AllocatorStats& s) noexcept;
    std::int64_t current_all(StatArray AllocatorStats::*f) const noexcept {
        return (stats_.*f)[1].current + (stats_.*f)[2].current;
    }
    std::uint64_t round(std::uint64_t size) const noexcept {
        if (!plain_rounding_)
            return round_request(size, config());
        if (size < alloc::kMinBlockSize)
            return alloc::kMinBlockSize;
        return (size + alloc::kMinBlockSize - 1) & ~(alloc::kMinBlockSize - 1);
    }

    // Invariant: spare_blocks_ and spare_nodes_ have capacity for every
    // block of the arena, and there are as many set nodes as blocks, so
    // freeing (recycle, erase, insert) never allocates and cannot throw.
    Block* new_block() {
        if (!spare_blocks_.empty()) [[likely]] {
            Block* b = spare_blocks_.back();
            spare_blocks_.pop_back();
            return b;
        }
        return new_arena_block();
    }
    /// A new block at the end of the arena, with a set node made for it.
    [[gnu::noinline]] Block* new_arena_block() {
        // Geometric growth: reserve(n + 1) alone reallocates every time
        // (libstdc++ reserves exactly), quadratic in the number of blocks.
        if (spare_blocks_.capacity() < arena_.size() + 1)
            spare_blocks_.reserve(std::max<std::size_t>(64, 2 * (arena_.size() + 1)));
        if (spare_nodes_.capacity() < arena_.size() + 1)
            spare_nodes_.reserve(std::max<std::size_t>(64, 2 * (arena_.size() + 1)));
        const auto [it, inserted] = scratch_.insert(&scratch_key_);
        (void)inserted;
        BlockSet::node_type node = scratch_.extract(it);
        Block* b = &arena_.emplace_back();
        spare_nodes_.push_back(std::move(node));
        return b;
    }
    /// Back to the spares.  Every caller hands in a block out of the pool
    /// (in_pool false, pos unset), not allocated, with no fences pending
    /// and no stream uses: the state a spare is in.  The other fields are
    /// set by whoever takes it next, except the neighbours, which a new
    /// segment's block does not set.
    void recycle(Block* b) noexcept {
        assert(!b->in_pool && !b->allocated && b->event_count == 0 && b->stream_uses.empty());
        b->prev = b->next = nullptr;
        spare_blocks_.push_back(b);
    }
    void insert(Pool& pool, Block* b) {
        if (spare_nodes_.empty()) {
            b->pos = pool.blocks.insert(b).first;
        } else {
            BlockSet::node_type node = std::move(spare_nodes_.back());
            spare_nodes_.pop_back();
            node.value() = b;
            b->pos = pool.blocks.insert(std::move(node)).position;
        }
        b->in_pool = true;
    }
    /// Puts @b (in the pool, its key changed) back in order.
    static void reorder(Pool& pool, Block* b) noexcept {
        BlockSet::node_type node = pool.blocks.extract(b->pos);
        node.value() = b;
        b->pos = pool.blocks.insert(std::move(node)).position;
    }
    /// @b's key changed in the pool without changing its place in the
    /// order: the entry's copy follows.
    static void rekey(Block* b) noexcept {
        b->pos->size = b->size;
        b->pos->va = b->va;
    }
    void erase(Pool& pool, Block* b) noexcept {
        spare_nodes_.push_back(pool.blocks.extract(b->pos));
        b->pos = {};
        b->in_pool = false;
    }

    /// The best-fitting free block, left in the pool (nullptr: none).
    Block* get_free_block(const Params& p);
    Block* alloc_block(const Params& p, bool is_retry);
    bool release_available_cached_blocks(const Params& p);
    void release_block(Block* b) noexcept;
    void release_blocks(Pool& pool) noexcept;
    void garbage_collect() noexcept;
    void synchronize_and_free_events(AllocLock& lock);
    bool should_split(const Block* b, std::uint64_t size) const noexcept;
    /// Hands out @b (in the pool, or a new segment that is not), split if
    /// worth it.
    Block* alloc_found_block(Block* b, const Params& p, std::uint64_t requested);
    void free_block(Block* b);
    /// Marks @b free in the statistics (its space returns by free_block).
    void unallocate(Block* b) noexcept;
    bool mergeable(const Block* b) const noexcept {
        return b != nullptr && !b->allocated && b->event_count == 0 && b->stream_uses.empty();
    }
    void process_pending_events();
    void complete(const std::vector<Block*>& done);
    void restore(PendingMap& local);
    [[noreturn]] void throw_oom(std::uint64_t size, std::uint64_t alloc_size) const;

    DeviceAllocator& device_;
    unsigned npu_;
    unsigned chiplet_;
    std::unique_ptr<SegmentProvider> provider_;
    Pool small_{true};
    Pool large_{false};
    std::deque<Block> arena_; ///< stable addresses
    std::vector<Block*> spare_blocks_;
    std::vector<BlockSet::node_type> spare_nodes_;
    BlockSet scratch_;  ///< where new set nodes are made
    Block scratch_key_; ///< the value they are made with
    /// Pool entries whole; of "all" only the peak (derive_all() the rest).
    AllocatorStats stats_;
    bool track_total_;    ///< the device has other chiplets
    bool plain_rounding_; ///< no roundup_power2_divisions: 512 B rounding
    bool fraction_set_ = false;
    std::uint64_t allowed_max_ = 0;

    std::mutex events_mutex_; ///< guards pending_ (never held while calling a fence)
    PendingMap pending_;
    std::atomic<std::size_t> pending_count_{0};
};

Block* ChipletAllocator::get_free_block(const Params& p) {
    Pool& pool = *p.pool;
    if (gc_enabled())
        pool.get_free_calls++;
    const auto it = pool.blocks.lower_bound(BlockKey{p.stream, p.size, 0});
    if (it == pool.blocks.end() || (*it)->stream != p.stream)
        return nullptr;
    Block* b = *it;
    // An oversize block serves only oversize requests, and only if it is
    // not much larger.
    if (p.size < max_split() && b->size >= max_split())
        return nullptr;
    if (p.size >= max_split() && b->size >= p.size + alloc::kLargeBuffer)
        return nullptr;
    b->gc_base = pool.get_free_calls;
    return b;
}

Block* ChipletAllocator::alloc_block(const Params& p, bool is_retry) {
    if (is_retry)
        count(&AllocatorStats::num_alloc_retries);
    const auto reserved = static_cast<std::uint64_t>(current_all(&AllocatorStats::reserved_bytes));
    if (fraction_set_ && reserved + p.alloc_size > allowed_max_)
        return nullptr;
    const std::optional<Segment> seg = provider_->allocate(p.alloc_size);
    if (!seg)
        return nullptr;
    Block* b = nullptr;
    try {
        b = new_block();
    } catch (...) {
        provider_->release(Segment{seg->handle, seg->device_va, p.alloc_size});
        throw;
    }
    b->va = seg->device_va;
    b->segment_va = seg->device_va;
    b->size = p.alloc_size;
    b->handle = seg->handle;
    b->stream = p.stream;
    b->pool = p.pool;
    b->owner = this;
    b->gc_base = p.pool->get_free_calls;
    inc(&AllocatorStats::segment, p.pool->type(), 1);
    inc(&AllocatorStats::reserved_bytes, p.pool->type(), p.alloc_size);
    if (p.alloc_size >= max_split())
        inc(&AllocatorStats::oversize_segments);
    count(&AllocatorStats::num_device_alloc);
    return b;
}

void ChipletAllocator::release_block(Block* b) noexcept {
    Pool& pool = *b->pool;
    provider_->release(Segment{b->handle, b->va, b->size});
    dec(&AllocatorStats::segment, pool.type(), 1);
    dec(&AllocatorStats::reserved_bytes, pool.type(), b->size);
    if (b->size >= max_split())
        dec(&AllocatorStats::oversize_segments);
    count(&AllocatorStats::num_device_free);
    erase(pool, b);
    recycle(b);
}

// Frees oversize cached segments of the request's stream: the smallest one
// that covers the request, else the largest ones until they add up to it.
bool ChipletAllocator::release_available_cached_blocks(const Params& p) {
    if (max_split() == alloc::kNoMaxSplit)
        return false;
    Pool& pool = *p.pool;
    const std::uint64_t want = std::max(p.size, max_split());
    auto it = pool.blocks.lower_bound(BlockKey{p.stream, want, 0});
    if (it != pool.blocks.end() && (*it)->stream == p.stream && !(*it)->is_split()) {
        release_block(*it);
        return true;
    }
    if (it == pool.blocks.begin())
        return false;
    --it;
    std::uint64_t released = 0;
    while (released < want && (*it)->size >= max_split() && (*it)->stream == p.stream) {
        const auto cur = it;
        const bool first = cur == pool.blocks.begin();
        if (!first)
            --it;
        if (!(*cur)->is_split()) {
            released += (*cur)->size;
            release_block(*cur);
        }
        if (first)
            break;
    }
    return released >= want;
}

void ChipletAllocator::release_blocks(Pool& pool) noexcept {
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
        Block* b = *it;
        ++it;
        if (!b->is_split())
            release_block(b);
    }
}

void ChipletAllocator::synchronize_and_free_events(AllocLock& lock) {
    count(&AllocatorStats::num_sync_all_streams);
    if (pending_count_.load() == 0)
        return;
    PendingMap local;
    lock.unlock();
    {
        const std::lock_guard<std::mutex> ev(events_mutex_);
        local.swap(pending_);
        pending_count_.store(0);
    }
    std::vector<Block*> done;
    for (auto& [stream, queue] : local) {
        for (auto& e : queue) {
            try {
                e.fence->synchronize();
            } catch (...) { // NOLINT(bugprone-empty-catch)
                // The stream's work ended (a failure is the stream's to
                // report): nothing uses the block any more.
            }
            done.push_back(e.block);
        }
    }
    local.clear(); // fences go without the mutex
    lock.lock();
    device_.settle(); // another thread may have allocated meanwhile
    for (Block* b : done)
        if (--b->event_count == 0)
            free_block(b);
}

void ChipletAllocator::release_cached_blocks(AllocLock& lock) {
    synchronize_and_free_events(lock);
    release_blocks(large_);
    release_blocks(small_);
}

void ChipletAllocator::release_all(AllocLock& lock) noexcept {
    try {
        synchronize_and_free_events(lock);
    } catch (...) { // NOLINT(bugprone-empty-catch)
        // host memory: what stays pending stays with the kernel
    }
    release_blocks(large_);
    release_blocks(small_);
}

// PyTorch's garbage_collect_cached_blocks: while reserved is above the
// threshold, free unsplit large blocks at least as old as the average.
void ChipletAllocator::garbage_collect() noexcept {
    const double allowed = fraction_set_ ? static_cast<double>(allowed_max_)
                                         : static_cast<double>(provider_->capacity());
    const auto threshold =
        static_cast<std::uint64_t>(config().garbage_collection_threshold * allowed);
    const auto reserved = static_cast<std::uint64_t>(current_all(&AllocatorStats::reserved_bytes));
    if (reserved <= threshold)
        return;
    const std::uint64_t target = reserved - threshold;
    std::uint64_t total_age = 0;
    std::uint64_t freeable = 0;
    for (const Block* b : large_.blocks) {
        if (!b->is_split()) {
            total_age += large_.get_free_calls - b->gc_base;
            freeable++;
        }
    }
    std::uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
        const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
        freed = false;
        for (auto it = large_.blocks.begin(); it != large_.blocks.end();) {
            Block* b = *it;
            ++it;
            const std::uint64_t age = large_.get_free_calls - b->gc_base;
            if (!b->is_split() && static_cast<double>(age) >= age_threshold) {
                freed = true;
                reclaimed += b->size;
                total_age -= age;
                freeable--;
                release_block(b);
            }
        }
    }
}

inline bool ChipletAllocator::should_split(const Block* b, std::uint64_t size) const noexcept {
    const std::uint64_t remaining = b->size - size;
    if (b->pool->small)
        return remaining >= alloc::kMinBlockSize;
    return size < max_split() && remaining > alloc::kSmallSize;
}

// The pool's order is (stream, size, address).  A block whose key changes
// is moved only if it would be out of order: splitting shrinks the
// remainder (it can only move left), merging grows the survivor (right).
Block* ChipletAllocator::alloc_found_block(Block* b, const Params& p, std::uint64_t requested) {
    Pool& pool = *p.pool;
    const bool in_pool = b->in_pool;
    const StatType t = pool.type();
    const bool already_split = b->is_split();
    Block* block = b;
    if (should_split(b, p.size)) {
        Block* remaining = b;
        try {
            block = new_block();
        } catch (...) {
            if (!in_pool)
                insert(pool, b);
            throw;
        }
        block->va = remaining->va;
        block->size = p.size;
        block->segment_va = remaining->segment_va;
        block->handle = remaining->handle;
        block->stream = remaining->stream;
        block->pool = &pool;
        block->owner = this;
        block->gc_base = remaining->gc_base;
        block->prev = remaining->prev;
        if (block->prev != nullptr)
            block->prev->next = block;
        block->next = remaining;
        remaining->prev = block;
        remaining->va += p.size;
        remaining->size -= p.size;
        if (!in_pool) {
            insert(pool, remaining);
        } else if (remaining->pos != pool.blocks.begin() &&
                   !BlockLess{}(*std::prev(remaining->pos), remaining)) {
            reorder(pool, remaining);
        } else {
            rekey(remaining);
        }
        if (already_split) {
            // An inactive split block shrinks by the allocation.
            dec(&AllocatorStats::inactive_split_bytes, t, block->size);
        } else {
            // A new inactive split block: the remainder.
            inc(&AllocatorStats::inactive_split_bytes, t, remaining->size);
            inc(&AllocatorStats::inactive_split, t, 1);
        }
    } else {
        if (in_pool)
            erase(pool, b);
        if (already_split) {
            // An inactive split block becomes active whole.
            dec(&AllocatorStats::inactive_split_bytes, t, block->size);
            dec(&AllocatorStats::inactive_split, t, 1);
        }
    }
    block->allocated = true;
    block->requested = requested;
    inc(&AllocatorStats::allocation, t, 1);
    inc(&AllocatorStats::allocated_bytes, t, block->size);
    inc(&AllocatorStats::active, t, 1);
    inc(&AllocatorStats::active_bytes, t, block->size);
    inc(&AllocatorStats::requested_bytes, t, requested);
    if (block->size >= max_split())
        inc(&AllocatorStats::oversize_allocations);
    if (in_pool && device_.repeat_on_ && !gc_enabled())
        device_.repeat_ = DeviceAllocator::Repeat{
            block, this,       requested,    p.stream, block == b ? 0 : b->size,
            0,     block != b, already_split};
    return block;
}

Block* ChipletAllocator::malloc(std::uint64_t size, StreamId stream, AllocLock& lock) {
    const std::uint64_t rounded = round(size);
    Pool& pool = is_small_request(rounded) ? small_ : large_;
    Params p{rounded, 0, stream, &pool};
    Block* b = get_free_block(p);
    if (b == nullptr) {
        p.alloc_size = segment_size_for(rounded);
        if (gc_enabled())
            garbage_collect();
        b = alloc_block(p, false);
        if (b == nullptr && release_available_cached_blocks(p))
            b = alloc_block(p, false);
        if (b == nullptr) {
            release_cached_blocks(lock);
            b = alloc_block(p, true);
        }
    }
    if (b == nullptr) {
        count(&AllocatorStats::num_ooms);
        throw_oom(size, p.alloc_size);
    }
    return alloc_found_block(b, p, size);
}

// PyTorch's free_block: the block merges with its free neighbours.  The
// merged block takes the place of a neighbour already in the pool (moved
// only if out of order), with the freed block's fields.
void ChipletAllocator::free_block(Block* b) {
    Pool& pool = *b->pool;
    const StatType t = pool.type();
    const std::uint64_t original = b->size;
    const std::uint64_t requested = b->requested;
    Block* const prev = mergeable(b->prev) ? b->prev : nullptr;
    Block* const next = mergeable(b->next) ? b->next : nullptr;
    std::int64_t split_blocks = 0;
    std::int64_t split_bytes = 0;
    Block* survivor = b;
    if (prev != nullptr) { // [prev b (next)] -> prev
        split_blocks -= 1;
        split_bytes -= static_cast<std::int64_t>(prev->size);
        std::uint64_t grow = b->size;
        prev->next = b->next;
        if (next != nullptr) {
            erase(pool, next);
            split_blocks -= 1;
            split_bytes -= static_cast<std::int64_t>(next->size);
            grow += next->size;
            prev->next = next->next;
        }
        if (prev->next != nullptr)
            prev->next->prev = prev;
        prev->size += grow;
        prev->gc_base = b->gc_base;
        survivor = prev;
        if (next != nullptr)
            recycle(next);
        recycle(b);
    } else if (next != nullptr) { // [b next] -> next
        split_blocks -= 1;
        split_bytes -= static_cast<std::int64_t>(next->size);
        next->va = b->va;
        next->size += b->size;
        next->prev = b->prev;
        if (next->prev != nullptr)
            next->prev->next = next;
        next->gc_base = b->gc_base;
        survivor = next;
        recycle(b);
    }
    if (!survivor->in_pool) {
        insert(pool, survivor);
    } else if (pool.blocks.rbegin()->block != survivor &&
               !BlockLess{}(survivor, *std::next(survivor->pos))) {
        reorder(pool, survivor);
    } else { // the last one stays last; or still before its successor
        rekey(survivor);
    }
    if (survivor->is_split()) {
        split_blocks += 1;
        split_bytes += static_cast<std::int64_t>(survivor->size);
    }
    if (split_blocks > 0)
        inc(&AllocatorStats::inactive_split, t, static_cast<std::uint64_t>(split_blocks));
    else if (split_blocks < 0)
        dec(&AllocatorStats::inactive_split, t, static_cast<std::uint64_t>(-split_blocks));
    if (split_bytes > 0)
        inc(&AllocatorStats::inactive_split_bytes, t, static_cast<std::uint64_t>(split_bytes));
    else if (split_bytes < 0)
        dec(&AllocatorStats::inactive_split_bytes, t, static_cast<std::uint64_t>(-split_bytes));
    dec(&AllocatorStats::active, t, 1);
    dec(&AllocatorStats::active_bytes, t, original);
    dec(&AllocatorStats::requested_bytes, t, requested);
}

inline void ChipletAllocator::unallocate(Block* block) noexcept {
    const StatType t = block->pool->type();
    block->allocated = false;
    dec(&AllocatorStats::allocation, t, 1);
    dec(&AllocatorStats::allocated_bytes, t, block->size);
    if (block->size >= max_split())
        dec(&AllocatorStats::oversize_allocations);
}

void ChipletAllocator::count_repeats(const DeviceAllocator::Repeat& r) noexcept {
    if (r.pairs == 0)
        return;
    const auto k = static_cast<std::int64_t>(r.pairs);
    const auto i = static_cast<std::size_t>(r.block->pool->type());
    const auto n = static_cast<std::int64_t>(r.block->size);
    // One pair: what free() then alloc_found_block() add to the halves.
    const auto both = [&](StatArray AllocatorStats::*f, std::int64_t amount) {
        (stats_.*f)[i].allocated += k * amount;
        (stats_.*f)[i].freed += k * amount;
    };
    both(&AllocatorStats::allocation, 1);
    both(&AllocatorStats::allocated_bytes, n);
    both(&AllocatorStats::active, 1);
    both(&AllocatorStats::active_bytes, n);
    both(&AllocatorStats::requested_bytes, static_cast<std::int64_t>(r.size));
    if (r.block->size >= max_split()) {
        // A Stat of its own: the device keeps its halves too.
        for (Stat* o : {&stats_.oversize_allocations, &device_.total_.oversize_allocations}) {
            o->allocated += k;
            o->freed += k;
            if (!track_total_)
                break;
        }
    }
    // The split bookkeeping: the remainder of an unsplit block becomes an
    // inactive split block and merges back; a split block shrinks by the
    // allocation and grows back; an unsplit piece of a split segment
    // leaves the inactive split blocks and comes back.
    if (r.split && !r.was_split) {
        both(&AllocatorStats::inactive_split, 1);
        both(&AllocatorStats::inactive_split_bytes, static_cast<std::int64_t>(r.rest));
    } else if (r.was_split) {
        both(&AllocatorStats::inactive_split_bytes, n);
        if (!r.split)
            both(&AllocatorStats::inactive_split, 1);
    }
}

void ChipletAllocator::free(Block* block, AllocLock& lock) noexcept {
    unallocate(block);
    if (block->stream_uses.empty()) {
        // Nodes and spare blocks are reserved ahead, so this cannot throw.
        free_block(block);
        return;
    }
    // Used by other streams: back to the pool once their work up to now is
    // done.  The fences are recorded without the mutex (recording enqueues
    // work on the stream, which may free into this allocator).
    std::vector<std::shared_ptr<StreamFenceSource>> uses = std::move(block->stream_uses);
    block->stream_uses.clear();
    block->event_count = static_cast<std::uint32_t>(uses.size());
    lock.unlock();
    std::vector<std::pair<StreamId, PendingFence>> recorded;
    for (auto& use : uses) {
        try {
            recorded.emplace_back(use->stream_id(), PendingFence{use->record(), block});
        } catch (const std::exception& e) {
            // Without a fence nobody can tell when that stream is done with
            // the block: it never returns to the pool (it stays active).
            std::fprintf(stderr,
                         "librbln: warning: record_stream fence failed (%s); a %llu-byte "
                         "block stays in use\n",
                         e.what(), static_cast<unsigned long long>(block->size));
        }
    }
    const std::lock_guard<std::mutex> ev(events_mutex_);
    for (auto& [stream, pending] : recorded) {
        try {
            pending_[stream].push_back(std::move(pending));
            pending_count_.fetch_add(1);
        } catch (...) { // NOLINT(bugprone-empty-catch)
            // Host memory exhausted: as above, the block stays in use.
        }
    }
}

void ChipletAllocator::record_stream(Block* block, std::shared_ptr<StreamFenceSource> source) {
    if (source->stream_id() == block->stream)
        return;
    for (const auto& u : block->stream_uses)
        if (u->stream_id() == source->stream_id())
            return;
    block->stream_uses.push_back(std::move(source));
}

void ChipletAllocator::complete(const std::vector<Block*>& done) {
    if (done.empty())
        return;
    const std::lock_guard<std::mutex> lock(device_.mutex_);
    device_.settle();
    for (Block* b : done)
        if (--b->event_count == 0)
            free_block(b);
}

void ChipletAllocator::restore(PendingMap& local) {
    const std::lock_guard<std::mutex> ev(events_mutex_);
    for (auto& [stream, queue] : local) {
        if (queue.empty())
            continue;
        auto& dst = pending_[stream];
        pending_count_.fetch_add(queue.size());
        dst.insert(dst.begin(), std::make_move_iterator(queue.begin()),
                   std::make_move_iterator(queue.end()));
    }
}

void ChipletAllocator::process_pending_events() {
    PendingMap local;
    {
        const std::lock_guard<std::mutex> ev(events_mutex_);
        local.swap(pending_);
        pending_count_.store(0);
    }
    std::vector<Block*> done;
    try {
        for (auto& [stream, queue] : local) {
            // In order per stream; a busy stream does not hold up others.
            while (!queue.empty() && queue.front().fence->query()) {
                done.push_back(queue.front().block);
                queue.pop_front();
            }
        }
    } catch (...) {
        restore(local);
        complete(done);
        throw;
    }
    restore(local);
    complete(done);
}

namespace {

constexpr std::array<StatArray AllocatorStats::*, 9> kStatArrays = {
    &AllocatorStats::allocation,      &AllocatorStats::segment,
    &AllocatorStats::active,          &AllocatorStats::inactive_split,
    &AllocatorStats::allocated_bytes, &AllocatorStats::reserved_bytes,
    &AllocatorStats::active_bytes,    &AllocatorStats::inactive_split_bytes,
    &AllocatorStats::requested_bytes};

template <typename F> void for_each_stat(AllocatorStats& s, F f) {
    for (StatArray AllocatorStats::*a : kStatArrays)
        for (Stat& st : s.*a)
            f(st);
    f(s.oversize_allocations);
    f(s.oversize_segments);
}

void reset_counters(AllocatorStats& s) noexcept {
    for_each_stat(s, [](Stat& st) { st.reset_accumulated(); });
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
    s.num_sync_all_streams = 0;
    s.num_device_alloc = 0;
    s.num_device_free = 0;
}

} // namespace

void ChipletAllocator::derive_all(AllocatorStats& s) noexcept {
    for (StatArray AllocatorStats::*f : kStatArrays) {
        StatArray& a = s.*f;
        a[0].current = a[1].current + a[2].current;
        a[0].allocated = a[1].allocated + a[2].allocated;
        a[0].freed = a[1].freed + a[2].freed;
    }
}

AllocatorStats ChipletAllocator::device_view(const DeviceAllocator& d) {
    if (d.chiplets_.size() == 1)
        return d.chiplets_.front()->view();
    AllocatorStats s = d.total_;
    for (StatArray AllocatorStats::*f : kStatArrays) {
        (s.*f)[0].current = (s.*f)[1].current + (s.*f)[2].current;
        for (Stat& st : s.*f)
            st.allocated = st.freed = 0;
        for (const auto& c : d.chiplets_) {
            const StatArray& a = c->stats_.*f;
            for (std::size_t i = 1; i < 3; i++) {
                (s.*f)[0].allocated += a[i].allocated;
                (s.*f)[0].freed += a[i].freed;
                (s.*f)[i].allocated += a[i].allocated;
                (s.*f)[i].freed += a[i].freed;
            }
        }
    }
    return s;
}

std::int64_t ChipletAllocator::device_current(const DeviceAllocator& d,
                                              StatArray AllocatorStats::*f) {
    if (d.chiplets_.size() == 1)
        return d.chiplets_.front()->current_all(f);
    return (d.total_.*f)[1].current + (d.total_.*f)[2].current;
}

std::int64_t ChipletAllocator::device_peak(const DeviceAllocator& d, StatArray AllocatorStats::*f) {
    if (d.chiplets_.size() == 1)
        return (d.chiplets_.front()->stats_.*f)[0].peak;
    return (d.total_.*f)[0].peak;
}

void ChipletAllocator::reset_peaks(AllocatorStats& s) noexcept {
    for (StatArray AllocatorStats::*f : kStatArrays) {
        StatArray& a = s.*f;
        a[1].reset_peak();
        a[2].reset_peak();
        a[0].peak = a[1].current + a[2].current;
    }
    s.oversize_allocations.reset_peak();
    s.oversize_segments.reset_peak();
}

void ChipletAllocator::reset_accumulated() noexcept {
    reset_counters(stats_);
}

void ChipletAllocator::throw_oom(std::uint64_t size, std::uint64_t alloc_size) const {
    const auto allocated =
        static_cast<std::uint64_t>(current_all(&AllocatorStats::allocated_bytes));
    const auto reserved = static_cast<std::uint64_t>(current_all(&AllocatorStats::reserved_bytes));
    const std::uint64_t capacity = provider_->capacity();
    std::string free_text;
    if (const std::optional<std::uint64_t> f = provider_->free_bytes())
        free_text = format_bytes(*f) + " is free";
    else
        free_text =
            "at most " + format_bytes(capacity > reserved ? capacity - reserved : 0) + " is free";
    std::string msg = "rbln:" + std::to_string(device_.device_index()) + " NPU " +
                      std::to_string(npu_) + " chiplet " + std::to_string(chiplet_) +
                      " is out of memory: tried to allocate " + format_bytes(alloc_size) +
                      " for a request of " + format_bytes(size) + "; the chiplet has " +
                      format_bytes(capacity) + " in total, of which " + free_text;
    if (fraction_set_)
        msg += " (this process may use " + format_bytes(allowed_max_) + ")";
    msg += "; this process's caching allocator has " + format_bytes(allocated) + " allocated and " +
           format_bytes(reserved) + " reserved on this chiplet (" +
           format_bytes(reserved - allocated) +
           " reserved but unallocated). Other chiplets of the device are not used for it: "
           "place the allocation on another chiplet or free memory on this one; if reserved "
           "but unallocated memory is large, RBLN_ALLOC_CONF=max_split_size_mb:<MiB> "
           "limits fragmentation";
    throw Error(Errc::OutOfMemory, "allocate", provider_->node(), ENOSPC, msg);
}

} // namespace detail

// ---- KernelSegmentProvider ------------------------------------------------

KernelSegmentProvider::KernelSegmentProvider(
    std::shared_ptr<KernelInterface> kernel, unsigned chiplet, std::uint64_t capacity,
    std::function<std::optional<std::uint64_t>()> free_probe)
    : kernel_(std::move(kernel)), chiplet_(chiplet), capacity_(capacity),
      free_probe_(std::move(free_probe)), pid_(::getpid()) {}

std::optional<Segment> KernelSegmentProvider::allocate(std::uint64_t size) {
    // The allocator may be a copy in a fork() child: its memory is the
    // parent's (fork_state.hpp).  Not a ForkStamp: an allocator of a
    // Device::open() device is refused too.
    if (::getpid() != pid_)
        throw detail::bad_fork_error(static_cast<pid_t>(pid_));
    try {
        const BoHandle bo =
            kernel_->bo_create(BoCreateArgs{size, Region::Hbm, chiplet_, BoFlags::None});
        return Segment{bo.handle, bo.device_va, size};
    } catch (const Error& e) {
        if (e.code() == Errc::OutOfMemory)
            return std::nullopt;
        throw;
    }
}

void KernelSegmentProvider::release(const Segment& segment) noexcept {
    try {
        kernel_->gem_close(segment.handle);
    } catch (...) { // NOLINT(bugprone-empty-catch)
        // The node is gone: the kernel freed the buffer with it.
    }
}

std::optional<std::uint64_t> KernelSegmentProvider::free_bytes() const {
    if (!free_probe_)
        return std::nullopt;
    return free_probe_();
}

// ---- DeviceBlock ----------------------------------------------------------

DeviceBlock& DeviceBlock::operator=(DeviceBlock&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = std::exchange(other.owner_, nullptr);
        block_ = std::exchange(other.block_, nullptr);
    }
    return *this;
}

std::uint64_t DeviceBlock::device_va() const noexcept {
    return block_ ? block_->va : 0;
}
std::uint64_t DeviceBlock::size() const noexcept {
    return block_ ? block_->size : 0;
}
std::uint64_t DeviceBlock::requested_size() const noexcept {
    return block_ ? block_->requested : 0;
}
std::uint32_t DeviceBlock::handle() const noexcept {
    return block_ ? block_->handle : 0;
}
std::uint64_t DeviceBlock::segment_offset() const noexcept {
    return block_ ? block_->va - block_->segment_va : 0;
}
StreamId DeviceBlock::stream() const noexcept {
    return block_ ? block_->stream : 0;
}

unsigned DeviceBlock::place() const noexcept {
    if (!block_)
        return 0;
    for (unsigned i = 0; i < owner_->chiplets_.size(); i++)
        if (owner_->chiplets_[i].get() == block_->owner)
            return i;
    return 0;
}

void DeviceBlock::reset() noexcept {
    if (block_ != nullptr)
        owner_->free(std::exchange(block_, nullptr));
    owner_ = nullptr;
}

// ---- DeviceAllocator -------------------------------------------------------

DeviceAllocator::DeviceAllocator(unsigned device_index, std::vector<AllocatorPlace> places,
                                 AllocatorConfig config)
    : device_index_(device_index), config_(config) {
    if (places.empty())
        throw Error(Errc::InvalidArgument, "DeviceAllocator", "", 0,
                    "a device allocator needs at least one chiplet");
    total_.max_split_size = detail::ChipletAllocator::max_split_stat(config_);
    const bool track_total = places.size() > 1;
    for (auto& p : places) {
        if (!p.provider)
            throw Error(Errc::InvalidArgument, "DeviceAllocator", "", 0,
                        "chiplet " + std::to_string(p.chiplet) + " of NPU " +
                            std::to_string(p.npu) + " has no segment provider");
        chiplets_.push_back(
            std::make_unique<detail::ChipletAllocator>(*this, std::move(p), track_total));
    }
}

DeviceAllocator::~DeviceAllocator() {
    detail::AllocLock lock(mutex_);
    settle();
    for (auto& c : chiplets_)
        c->release_all(lock);
}

std::unique_ptr<DeviceAllocator> DeviceAllocator::for_kernels(
    unsigned device_index,
    const std::vector<std::pair<unsigned, std::shared_ptr<KernelInterface>>>& npus,
    AllocatorConfig config) {
    std::vector<AllocatorPlace> places;
    for (const auto& [npu, kernel] : npus) {
        const DeviceIdentity id = query_device_identity(*kernel);
        for (unsigned c = 0; c < id.chiplet_count; c++)
            places.push_back(AllocatorPlace{
                npu, c, std::make_unique<KernelSegmentProvider>(kernel, c, id.hbm_size[c])});
    }
    return std::make_unique<DeviceAllocator>(device_index, std::move(places), config);
}

detail::ChipletAllocator& DeviceAllocator::chiplet(unsigned place) const {
    if (place >= chiplets_.size())
        throw Error(Errc::InvalidArgument, "allocate", "", 0,
                    "place " + std::to_string(place) +
                        " does not exist: rbln:" + std::to_string(device_index_) + " has " +
                        std::to_string(chiplets_.size()) + " chiplets");
    return *chiplets_[place];
}

unsigned DeviceAllocator::npu_of(unsigned place) const {
    return chiplet(place).npu();
}
unsigned DeviceAllocator::chiplet_of(unsigned place) const {
    return chiplet(place).chiplet();
}

unsigned DeviceAllocator::find_place(unsigned npu, unsigned chiplet_index) const {
    for (unsigned i = 0; i < chiplets_.size(); i++)
        if (chiplets_[i]->npu() == npu && chiplets_[i]->chiplet() == chiplet_index)
            return i;
    throw Error(Errc::InvalidArgument, "find_place", "", 0,
                "rbln:" + std::to_string(device_index_) + " has no chiplet " +
                    std::to_string(chiplet_index) + " on NPU " + std::to_string(npu));
}

void DeviceAllocator::set_default_place(unsigned place) {
    chiplet(place);
    default_place_.store(place);
}

DeviceBlock DeviceAllocator::allocate(std::uint64_t size, StreamId stream, unsigned place) {
    if (size == 0)
        return {};
    detail::ChipletAllocator& c =
        place < chiplets_.size() ? *chiplets_[place] : chiplet(place); // chiplet() throws
    if (size > (1ull << 60))
        throw Error(Errc::InvalidArgument, "allocate", "", 0,
                    "a request of " + std::to_string(size) +
                        " bytes is larger than any device memory");
    c.process_events();
    detail::AllocLock lock(mutex_);
    if (repeat_.parked && repeat_.size == size && repeat_.stream == stream &&
        repeat_.chiplet == &c) {
        repeat_.parked = false;
        repeat_.pairs++;
        repeat_.block->allocated = true;
        return DeviceBlock(this, repeat_.block);
    }
    settle();
    return DeviceBlock(this, c.malloc(size, stream, lock));
}

void DeviceAllocator::free(detail::Block* block) noexcept {
    detail::AllocLock lock(mutex_);
    if (block == repeat_.block && block->stream_uses.empty()) {
        repeat_.parked = true;
        block->allocated = false;
        return;
    }
    settle();
    block->owner->free(block, lock);
}

void DeviceAllocator::settle_repeat() const noexcept {
    const Repeat r = std::exchange(repeat_, Repeat{});
    r.chiplet->count_repeats(r);
    if (r.parked)
        r.chiplet->free_unused(r.block);
}

void DeviceAllocator::set_repeat_shortcut(bool on) {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    repeat_on_ = on;
}

void DeviceAllocator::record_stream(const DeviceBlock& block,
                                    std::shared_ptr<StreamFenceSource> stream) {
    if (!block || block.owner_ != this)
        throw Error(Errc::InvalidArgument, "record_stream", "", 0,
                    "the block is empty or belongs to another allocator");
    if (!stream)
        throw Error(Errc::InvalidArgument, "record_stream", "", 0, "no stream");
    const std::lock_guard<std::mutex> lock(mutex_);
    block.block_->owner->record_stream(block.block_, std::move(stream));
}

void DeviceAllocator::empty_cache() {
    for (auto& c : chiplets_)
        c->process_events();
    detail::AllocLock lock(mutex_);
    settle();
    for (auto& c : chiplets_)
        c->release_cached_blocks(lock);
}

void DeviceAllocator::set_memory_fraction(double fraction, unsigned place) {
    if (!(fraction >= 0.0 && fraction <= 1.0))
        throw Error(Errc::InvalidArgument, "set_memory_fraction", "", 0,
                    "fraction " + std::to_string(fraction) + " is outside 0..1");
    detail::ChipletAllocator& c = chiplet(place);
    const std::lock_guard<std::mutex> lock(mutex_);
    c.set_fraction(fraction);
}

AllocatorStats DeviceAllocator::stats() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    return detail::ChipletAllocator::device_view(*this);
}

AllocatorStats DeviceAllocator::stats(unsigned place) const {
    const detail::ChipletAllocator& c = chiplet(place);
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    return c.view();
}

void DeviceAllocator::snapshot(AllocatorStats& total, std::vector<AllocatorStats>& per) const {
    per.clear();
    per.reserve(chiplets_.size());
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    total = detail::ChipletAllocator::device_view(*this);
    for (const auto& c : chiplets_)
        per.push_back(c->view());
}

std::uint64_t DeviceAllocator::memory_allocated() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    return static_cast<std::uint64_t>(
        detail::ChipletAllocator::device_current(*this, &AllocatorStats::allocated_bytes));
}
std::uint64_t DeviceAllocator::memory_reserved() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    return static_cast<std::uint64_t>(
        detail::ChipletAllocator::device_current(*this, &AllocatorStats::reserved_bytes));
}
std::uint64_t DeviceAllocator::max_memory_allocated() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    return static_cast<std::uint64_t>(
        detail::ChipletAllocator::device_peak(*this, &AllocatorStats::allocated_bytes));
}
std::uint64_t DeviceAllocator::max_memory_reserved() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    return static_cast<std::uint64_t>(
        detail::ChipletAllocator::device_peak(*this, &AllocatorStats::reserved_bytes));
}

void DeviceAllocator::reset_peak_memory_stats() {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    detail::ChipletAllocator::reset_peaks(total_);
    for (auto& c : chiplets_)
        c->reset_peaks();
}

void DeviceAllocator::reset_accumulated_memory_stats() {
    const std::lock_guard<std::mutex> lock(mutex_);
    settle();
    detail::reset_counters(total_);
    for (auto& c : chiplets_)
        c->reset_accumulated();
}

} // namespace rbln
