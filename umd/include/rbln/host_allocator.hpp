// SPDX-License-Identifier: GPL-2.0
// rbln/host_allocator.hpp - pinned host memory: a caching allocator of
// page-locked blocks the card DMAs directly, and huge_host_empty().
//
// HostAllocator (one per Device; process_host_allocator(n) for logical
// device n) hands out blocks of host memory that are:
//   - page-aligned and a power of two in size (at least 4 KiB): a request
//     is rounded up to its size class, as PyTorch's CachingHostAllocator;
//   - placed on the card's NUMA node (DeviceIdentity::numa_node) with
//     libnuma's mbind(MPOL_PREFERRED) before the first touch.  libnuma is
//     loaded at run time (dlopen of libnuma.so.1), so librbln and its
//     static consumers do not link it; when the node is -1, libnuma is not
//     installed or the kernel has no NUMA support, the block is not placed
//     and num_numa_unplaced counts it;
//   - registered with the kernel as pinned user pages (RBLN_BO_USERPTR, a
//     Memory of kind HostRegistered, in the device's pinned registry), so
//     copies from and to it are asynchronous and the card DMAs it with no
//     staging copy; registration failing (RLIMIT_MEMLOCK) is an error;
//   - mlock()ed, best effort: a failure is not an error, num_mlock_failures
//     counts it (the kernel's pin already keeps the pages resident; the
//     lock keeps the kernel from trying to reclaim them).
//
// Caching.  Freeing a block keeps it for the next request of its size
// class.  A freed block is reused only once the card is done with it:
//   - record_stream(block, stream) (PyTorch's record_event): at free time an
//     Event is recorded on every such stream; the block is reusable when all
//     those events are done;
//   - any job still holding the block's Memory (an async copy lists it and
//     keeps it until done) keeps the block out of the cache, so copies
//     through librbln need no record_stream.
// Freed blocks waiting for the card are looked at again at each allocate()
// and empty_cache(); the host never blocks on them.  empty_cache() returns
// every cached block whose card work is done to the system (unregistered,
// unlocked, unmapped); the next allocation pays mmap + registration again.
// If making a block fails, the cache is emptied and it is tried once more.
//
// Statistics (memory_stats(), PyTorch's torch.cuda.host_memory_stats()
// keys without the timings): "allocation", "segment", "allocated_bytes",
// "reserved_bytes", each ".current", ".peak", ".allocated", ".freed"
// (allocation: blocks handed out; segment: blocks made; bytes are size-class
// bytes), "num_host_alloc" / "num_host_free" (blocks made / returned to the
// system), and librbln's "num_mlock_failures", "num_numa_placements",
// "num_numa_unplaced".
//
// huge_host_empty(nbytes): one buffer (not cached) of nbytes rounded up to
// 2 MiB, 2 MiB-aligned, NUMA-local as above, prefaulted, and registered as
// pinned user pages.  It is backed by hugetlbfs pages (MAP_HUGETLB) if the
// system has free ones, else by transparent huge pages (madvise
// MADV_HUGEPAGE), else by small pages; backing() says which was set up and
// huge_bytes() how much of it the kernel reports as huge now.
//
// Thread safety: an allocator may be used from any thread.  Lifetime:
// blocks may outlive their allocator (they keep its state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "rbln/memory.hpp"
#include "rbln/stream.hpp"

// librbln's own (host_allocator.cpp), hidden from librbln.so (rbln/export.h).
namespace rbln::detail {
struct HostAllocatorState;
struct HostSegment;
} // namespace rbln::detail

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

class Device;

/// How host pages are prepared (tests replace the system calls).
struct HostPagePolicy {
    /// NUMA node to place memory on; default: the card's (-1: none).
    std::optional<int> numa_node;
    /// mlock() blocks (best effort).
    bool lock = true;
    /// Replaces mlock(2): returns 0 or an errno.
    std::function<int(void*, std::size_t)> mlock_fn;
    /// Replaces libnuma's mbind: returns 0, an errno, or ENOSYS when NUMA
    /// placement is not available at all.
    std::function<int(void*, std::size_t, int node)> bind_fn;
};

/// One counter of the host statistics, as PyTorch's Stat.
struct HostStat {
    std::int64_t current = 0;
    std::int64_t peak = 0;
    std::int64_t allocated = 0;
    std::int64_t freed = 0;
};

struct HostAllocatorStats {
    HostStat allocation;             ///< blocks handed out
    HostStat segment;                ///< blocks made (cached or handed out)
    HostStat allocated_bytes;        ///< size-class bytes handed out
    HostStat reserved_bytes;         ///< size-class bytes of all blocks made
    std::int64_t num_host_alloc = 0; ///< blocks made (mmap + registration)
    std::int64_t num_host_free = 0;  ///< blocks returned to the system
    std::int64_t num_mlock_failures = 0;
    std::int64_t num_numa_placements = 0; ///< blocks placed on a node
    std::int64_t num_numa_unplaced = 0;   ///< blocks made with no placement
    std::int64_t num_cache_hits = 0;      ///< allocations served from the cache
};

/// A block of pinned host memory; returns to its allocator's cache when
/// reset or destroyed.
class HostBlock {
public:
    HostBlock() = default;
    HostBlock(const HostBlock&) = delete;
    HostBlock& operator=(const HostBlock&) = delete;
    HostBlock(HostBlock&& other) noexcept;
    HostBlock& operator=(HostBlock&& other) noexcept;
    ~HostBlock() { reset(); }

    explicit operator bool() const noexcept { return seg_ != nullptr; }
    /// CPU address of byte 0 (page-aligned; nullptr if empty).
    std::byte* data() const noexcept;
    /// The size class (the request rounded up to a power of two, >= 4 KiB).
    std::uint64_t size() const noexcept;
    std::uint64_t requested_size() const noexcept { return requested_; }
    /// The registered memory (kind HostRegistered) for copies and jobs.
    const std::shared_ptr<Memory>& memory() const noexcept;
    /// The block is used by work on @stream: freeing it waits for that work.
    void record_stream(const Stream& stream);
    /// Frees it to the cache now (no-op if empty).
    void reset() noexcept;

private:
    friend class HostAllocator;
    HostBlock(std::shared_ptr<detail::HostAllocatorState> owner, detail::HostSegment* seg,
              std::uint64_t requested)
        : owner_(std::move(owner)), seg_(seg), requested_(requested) {}
    std::shared_ptr<detail::HostAllocatorState> owner_;
    detail::HostSegment* seg_ = nullptr;
    std::uint64_t requested_ = 0;
};

class HostAllocator {
public:
    explicit HostAllocator(std::shared_ptr<Device> device, HostPagePolicy policy = {});
    HostAllocator(const HostAllocator&) = delete;
    HostAllocator& operator=(const HostAllocator&) = delete;
    HostAllocator(HostAllocator&&) = delete;
    HostAllocator& operator=(HostAllocator&&) = delete;
    /// Frees the cached blocks (waiting for card work still using them).
    ~HostAllocator();

    /// A block of at least @size bytes (0: an empty block).  Errc::OutOfMemory
    /// if no memory can be mapped or pinned (RLIMIT_MEMLOCK), with the sizes.
    HostBlock allocate(std::uint64_t size);
    /// Returns cached blocks whose card work is done to the system.
    void empty_cache();

    HostAllocatorStats stats() const;
    /// The statistics under PyTorch's host keys (see the file comment).
    std::map<std::string, std::int64_t> memory_stats() const;
    void reset_peak_stats();
    void reset_accumulated_stats();

    /// The NUMA node blocks are placed on (-1: none).
    int numa_node() const noexcept;
    const std::shared_ptr<Device>& device() const noexcept;

private:
    std::shared_ptr<detail::HostAllocatorState> s_;
};

/// The host allocator of logical device @index (Device::get(@index)), in
/// the process's context of that device: made at first use (which opens
/// the device) and never destroyed (as Device::get()'s devices).
HostAllocator& process_host_allocator(unsigned index);

/// What backs a huge_host_empty() buffer.
enum class HugeBacking : std::uint8_t {
    HugeTlb,         ///< hugetlbfs pages (MAP_HUGETLB)
    TransparentHuge, ///< anonymous memory advised MADV_HUGEPAGE
    SmallPages,      ///< neither was available
};

/// "hugetlb", "thp", "small-pages".
const char* huge_backing_name(HugeBacking backing) noexcept;

struct HugeHostOptions {
    HostPagePolicy policy; ///< NUMA node and seams (lock is not used)
    bool try_hugetlb = true;
};

/// A huge_host_empty() buffer; unregistered and unmapped when destroyed
/// (jobs still using its memory keep the registration until done, and the
/// pages stay pinned until then).
class HugeHostBuffer {
public:
    HugeHostBuffer() = default;
    HugeHostBuffer(const HugeHostBuffer&) = delete;
    HugeHostBuffer& operator=(const HugeHostBuffer&) = delete;
    HugeHostBuffer(HugeHostBuffer&& other) noexcept;
    HugeHostBuffer& operator=(HugeHostBuffer&& other) noexcept;
    ~HugeHostBuffer();

    explicit operator bool() const noexcept { return data_ != nullptr; }
    std::byte* data() const noexcept { return data_; }
    /// The size (the request rounded up to 2 MiB).
    std::uint64_t size() const noexcept { return size_; }
    const std::shared_ptr<Memory>& memory() const noexcept { return memory_; }
    HugeBacking backing() const noexcept { return backing_; }
    /// Whether it was placed on a NUMA node.
    bool numa_placed() const noexcept { return placed_; }
    /// Bytes of it the kernel backs with huge pages now (/proc/self/smaps).
    std::uint64_t huge_bytes() const;

private:
    friend HugeHostBuffer huge_host_empty(const std::shared_ptr<Device>& device,
                                          std::uint64_t nbytes, const HugeHostOptions& options);
    void release() noexcept;
    std::byte* data_ = nullptr;
    std::uint64_t size_ = 0;
    std::uint64_t mapped_ = 0; ///< bytes to munmap at data_
    std::shared_ptr<Memory> memory_;
    HugeBacking backing_ = HugeBacking::SmallPages;
    bool placed_ = false;
};

/// A 2 MiB-aligned, prefaulted, NUMA-local buffer of at least @nbytes,
/// pinned for @device (see the file comment).  Errc::InvalidArgument for 0
/// bytes; Errc::OutOfMemory if it cannot be mapped or pinned.
HugeHostBuffer huge_host_empty(const std::shared_ptr<Device>& device, std::uint64_t nbytes,
                               const HugeHostOptions& options = {});
/// The same on the calling thread's current device (Device::current()).
HugeHostBuffer huge_host_empty(std::uint64_t nbytes);

} // namespace rbln

#pragma GCC visibility pop
