// SPDX-License-Identifier: GPL-2.0
// host_allocator.cpp - the caching allocator of pinned host blocks and
// huge_host_empty() (rbln/host_allocator.hpp).

#include "rbln/host_allocator.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <numaif.h>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernel/kernel.hpp"
#include "rbln/device.hpp"
#include "rbln/error.hpp"
#include "runtime/process_context.hpp"

namespace rbln {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kHuge = 2ull << 20;
constexpr unsigned kMinClass = 12; // 4 KiB
constexpr unsigned kClasses = 64;

// libnuma, loaded at run time: librbln (and its static consumers) do not
// link it, and a system without it simply places nothing.
struct Numa {
    using AvailableFn = int (*)();
    using MaxNodeFn = int (*)();
    using MbindFn = long (*)(void*, unsigned long, int, const unsigned long*, unsigned long,
                             unsigned);
    AvailableFn available = nullptr;
    MaxNodeFn max_node = nullptr;
    MbindFn mbind = nullptr;
    bool usable = false;

    Numa() {
        void* h = ::dlopen("libnuma.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr)
            return;
        available = reinterpret_cast<AvailableFn>(::dlsym(h, "numa_available"));
        max_node = reinterpret_cast<MaxNodeFn>(::dlsym(h, "numa_max_node"));
        mbind = reinterpret_cast<MbindFn>(::dlsym(h, "mbind"));
        usable =
            available != nullptr && max_node != nullptr && mbind != nullptr && available() >= 0;
    }
};

const Numa& numa() {
    static const Numa n;
    return n;
}

// mbind(MPOL_PREFERRED) of [p, p + size) to @node: 0, an errno, or ENOSYS
// when there is no NUMA support to use.
int system_bind(void* p, std::size_t size, int node) {
    const Numa& n = numa();
    if (!n.usable)
        return ENOSYS;
    if (node < 0 || node > n.max_node())
        return EINVAL;
    constexpr unsigned kBits = 64;
    std::array<unsigned long, 16> mask{}; // up to 1024 nodes
    if (static_cast<unsigned>(node) >= mask.size() * kBits)
        return EINVAL;
    mask[static_cast<unsigned>(node) / kBits] |= 1ul << (static_cast<unsigned>(node) % kBits);
    errno = 0;
    if (n.mbind(p, size, MPOL_PREFERRED, mask.data(), mask.size() * kBits + 1, 0) != 0)
        return errno != 0 ? errno : EINVAL;
    return 0;
}

int system_mlock(void* p, std::size_t size) {
    return ::mlock(p, size) == 0 ? 0 : errno;
}

// Places [p, p + size) on @node as @policy says; true if placed.
bool place_pages(const HostPagePolicy& policy, int node, void* p, std::size_t size) {
    if (node < 0)
        return false;
    const int err = policy.bind_fn ? policy.bind_fn(p, size, node) : system_bind(p, size, node);
    return err == 0;
}

int card_node(const HostPagePolicy& policy, Device& device) {
    if (policy.numa_node)
        return *policy.numa_node;
    return query_device_identity(device.kernel()).numa_node;
}

void add(HostStat& s, std::int64_t n) {
    s.current += n;
    s.allocated += n;
    s.peak = std::max(s.peak, s.current);
}

void sub(HostStat& s, std::int64_t n) {
    s.current -= n;
    s.freed += n;
}

unsigned class_of(std::uint64_t size) {
    const std::uint64_t c = std::max<std::uint64_t>(std::bit_ceil(size), 1ull << kMinClass);
    return static_cast<unsigned>(std::countr_zero(c));
}

std::string mib(std::uint64_t bytes) {
    std::ostringstream o;
    o.precision(1);
    o << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
    return o.str();
}

} // namespace

namespace detail {

struct HostSegment {
    std::byte* data = nullptr;
    std::uint64_t size = 0;
    unsigned cls = 0;
    std::shared_ptr<Memory> memory;
    bool locked = false;
    bool in_use = false;
    std::vector<Stream> streams; ///< recorded while handed out
    std::vector<Event> events;   ///< recorded at free
};

struct HostAllocatorState {
    HostAllocatorState(std::shared_ptr<Device> d, HostPagePolicy p)
        : device(std::move(d)), policy(std::move(p)), node(card_node(policy, *device)) {}
    HostAllocatorState(const HostAllocatorState&) = delete;
    HostAllocatorState& operator=(const HostAllocatorState&) = delete;
    HostAllocatorState(HostAllocatorState&&) = delete;
    HostAllocatorState& operator=(HostAllocatorState&&) = delete;
    ~HostAllocatorState();

    std::shared_ptr<Device> device;
    HostPagePolicy policy;
    int node;

    mutable std::mutex mutex;
    std::array<std::vector<HostSegment*>, kClasses> free; ///< reusable, by class
    std::vector<HostSegment*> pending;                    ///< freed, card maybe still using
    std::unordered_map<HostSegment*, std::unique_ptr<HostSegment>> all;
    HostAllocatorStats stats;

    /// A new segment of class @cls (no lock held).
    std::unique_ptr<HostSegment> make_segment(unsigned cls, bool& placed, bool& lock_failed);
    /// Returns @seg to the system (no lock needed; not in any list).
    static void release_segment(HostSegment& seg) noexcept;
    /// Moves pending segments the card is done with to the free lists.
    void process_pending_locked();
    /// Takes every free segment out of the lists and accounts for it.
    std::vector<std::unique_ptr<HostSegment>> take_free_locked();
    void free_block(HostSegment* seg) noexcept;
};

namespace {

bool card_done(const HostSegment& seg) {
    if (seg.memory.use_count() > 1)
        return false; // a job still lists it
    for (const Event& e : seg.events) {
        try {
            if (!e.query())
                return false;
        } catch (...) { // NOLINT(bugprone-empty-catch): a failed job is over too
        }
    }
    return true;
}

} // namespace

std::unique_ptr<HostSegment> HostAllocatorState::make_segment(unsigned cls, bool& placed,
                                                              bool& lock_failed) {
    const std::uint64_t size = 1ull << cls;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        throw Error(Errc::OutOfMemory, "pinned host allocation", device->kernel().path(), err,
                    "cannot map " + mib(size) + " of host memory: " + std::strerror(err));
    }
    auto seg = std::make_unique<HostSegment>();
    seg->data = static_cast<std::byte*>(p);
    seg->size = size;
    seg->cls = cls;
    placed = place_pages(policy, node, p, size);
    try {
        seg->memory = device->register_host(p, size);
    } catch (...) {
        ::munmap(p, size);
        throw;
    }
    if (policy.lock) {
        const int err = policy.mlock_fn ? policy.mlock_fn(p, size) : system_mlock(p, size);
        seg->locked = err == 0;
        lock_failed = err != 0;
    }
    return seg;
}

void HostAllocatorState::release_segment(HostSegment& seg) noexcept {
    seg.memory.reset(); // unregisters (unpins) it
    seg.events.clear();
    if (seg.locked)
        ::munlock(seg.data, seg.size);
    ::munmap(seg.data, seg.size);
}

void HostAllocatorState::process_pending_locked() {
    std::erase_if(pending, [this](HostSegment* seg) {
        if (!card_done(*seg))
            return false;
        seg->events.clear();
        free[seg->cls].push_back(seg);
        return true;
    });
}

std::vector<std::unique_ptr<HostSegment>> HostAllocatorState::take_free_locked() {
    std::vector<std::unique_ptr<HostSegment>> out;
    for (auto& list : free) {
        for (HostSegment* seg : list) {
            auto node_handle = all.extract(seg);
            out.push_back(std::move(node_handle.mapped()));
            sub(stats.segment, 1);
            sub(stats.reserved_bytes, static_cast<std::int64_t>(seg->size));
            stats.num_host_free++;
        }
        list.clear();
    }
    return out;
}

void HostAllocatorState::free_block(HostSegment* seg) noexcept {
    // Events on the streams that used it (outside the lock: an enqueue).
    std::vector<Event> events;
    try {
        for (Stream& s : seg->streams) {
            Event e(false);
            e.record(s);
            events.push_back(std::move(e));
        }
    } catch (...) { // NOLINT(bugprone-empty-catch): the events recorded so far still guard it
    }
    try {
        const std::lock_guard<std::mutex> lock(mutex);
        seg->streams.clear();
        seg->in_use = false;
        seg->events = std::move(events);
        sub(stats.allocation, 1);
        sub(stats.allocated_bytes, static_cast<std::int64_t>(seg->size));
        if (seg->events.empty() && seg->memory.use_count() == 1)
            free[seg->cls].push_back(seg);
        else
            pending.push_back(seg);
    } catch (...) { // NOLINT(bugprone-empty-catch): a lost block is unmapped with the state
    }
}

HostAllocatorState::~HostAllocatorState() {
    for (auto& [p, seg] : all) {
        for (const Event& e : seg->events) {
            try {
                e.synchronize();
            } catch (...) { // NOLINT(bugprone-empty-catch): its job is over either way
            }
        }
        release_segment(*seg);
    }
}

} // namespace detail

// ---- HostBlock ------------------------------------------------------------

HostBlock::HostBlock(HostBlock&& other) noexcept
    : owner_(std::move(other.owner_)), seg_(std::exchange(other.seg_, nullptr)),
      requested_(std::exchange(other.requested_, 0)) {}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = std::move(other.owner_);
        seg_ = std::exchange(other.seg_, nullptr);
        requested_ = std::exchange(other.requested_, 0);
    }
    return *this;
}

std::byte* HostBlock::data() const noexcept {
    return seg_ != nullptr ? seg_->data : nullptr;
}

std::uint64_t HostBlock::size() const noexcept {
    return seg_ != nullptr ? seg_->size : 0;
}

const std::shared_ptr<Memory>& HostBlock::memory() const noexcept {
    static const std::shared_ptr<Memory> none;
    return seg_ != nullptr ? seg_->memory : none;
}

void HostBlock::record_stream(const Stream& stream) {
    if (seg_ == nullptr)
        throw Error(Errc::InvalidArgument, "record_stream", "", 0, "the host block is empty");
    const std::lock_guard<std::mutex> lock(owner_->mutex);
    if (std::find(seg_->streams.begin(), seg_->streams.end(), stream) == seg_->streams.end())
        seg_->streams.push_back(stream);
}

void HostBlock::reset() noexcept {
    if (seg_ == nullptr)
        return;
    owner_->free_block(std::exchange(seg_, nullptr));
    owner_.reset();
    requested_ = 0;
}

// ---- HostAllocator ----------------------------------------------------------

HostAllocator::HostAllocator(std::shared_ptr<Device> device, HostPagePolicy policy) {
    if (!device)
        throw Error(Errc::InvalidArgument, "host allocator", "", 0, "no device");
    s_ = std::make_shared<detail::HostAllocatorState>(std::move(device), std::move(policy));
}

HostAllocator::~HostAllocator() {
    try {
        empty_cache();
    } catch (...) { // NOLINT(bugprone-empty-catch): the state frees the rest
    }
}

HostBlock HostAllocator::allocate(std::uint64_t size) {
    if (size == 0)
        return {};
    if (size > (1ull << (kClasses - 2)))
        throw Error(Errc::OutOfMemory, "pinned host allocation", s_->device->kernel().path(), 0,
                    "a request of " + std::to_string(size) + " bytes is too large");
    const unsigned cls = class_of(size);
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        if (!s_->pending.empty())
            s_->process_pending_locked();
        auto& list = s_->free[cls];
        if (!list.empty()) {
            detail::HostSegment* seg = list.back();
            list.pop_back();
            seg->in_use = true;
            add(s_->stats.allocation, 1);
            add(s_->stats.allocated_bytes, static_cast<std::int64_t>(seg->size));
            s_->stats.num_cache_hits++;
            return HostBlock(s_, seg, size);
        }
    }
    bool placed = false;
    bool lock_failed = false;
    std::unique_ptr<detail::HostSegment> seg;
    try {
        seg = s_->make_segment(cls, placed, lock_failed);
    } catch (const Error&) {
        empty_cache(); // give cached pins back, then try once more
        seg = s_->make_segment(cls, placed, lock_failed);
    }
    detail::HostSegment* raw = seg.get();
    raw->in_use = true;
    const std::lock_guard<std::mutex> lock(s_->mutex);
    s_->all.emplace(raw, std::move(seg));
    auto& st = s_->stats;
    st.num_host_alloc++;
    (placed ? st.num_numa_placements : st.num_numa_unplaced)++;
    if (lock_failed)
        st.num_mlock_failures++;
    add(st.segment, 1);
    add(st.reserved_bytes, static_cast<std::int64_t>(raw->size));
    add(st.allocation, 1);
    add(st.allocated_bytes, static_cast<std::int64_t>(raw->size));
    return HostBlock(s_, raw, size);
}

void HostAllocator::empty_cache() {
    std::vector<std::unique_ptr<detail::HostSegment>> gone;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        s_->process_pending_locked();
        gone = s_->take_free_locked();
    }
    for (auto& seg : gone)
        detail::HostAllocatorState::release_segment(*seg);
}

HostAllocatorStats HostAllocator::stats() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->stats;
}

std::map<std::string, std::int64_t> HostAllocator::memory_stats() const {
    const HostAllocatorStats st = stats();
    std::map<std::string, std::int64_t> m;
    const auto put = [&m](const std::string& name, const HostStat& s) {
        m[name + ".current"] = s.current;
        m[name + ".peak"] = s.peak;
        m[name + ".allocated"] = s.allocated;
        m[name + ".freed"] = s.freed;
    };
    put("allocation", st.allocation);
    put("segment", st.segment);
    put("allocated_bytes", st.allocated_bytes);
    put("reserved_bytes", st.reserved_bytes);
    m["num_host_alloc"] = st.num_host_alloc;
    m["num_host_free"] = st.num_host_free;
    m["num_mlock_failures"] = st.num_mlock_failures;
    m["num_numa_placements"] = st.num_numa_placements;
    m["num_numa_unplaced"] = st.num_numa_unplaced;
    return m;
}

void HostAllocator::reset_peak_stats() {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    auto& st = s_->stats;
    for (HostStat* s : {&st.allocation, &st.segment, &st.allocated_bytes, &st.reserved_bytes})
        s->peak = s->current;
}

void HostAllocator::reset_accumulated_stats() {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    auto& st = s_->stats;
    for (HostStat* s : {&st.allocation, &st.segment, &st.allocated_bytes, &st.reserved_bytes}) {
        s->allocated = 0;
        s->freed = 0;
    }
    st.num_host_alloc = 0;
    st.num_host_free = 0;
    st.num_mlock_failures = 0;
    st.num_numa_placements = 0;
    st.num_numa_unplaced = 0;
    st.num_cache_hits = 0;
}

int HostAllocator::numa_node() const noexcept {
    return s_->node;
}

const std::shared_ptr<Device>& HostAllocator::device() const noexcept {
    return s_->device;
}

HostAllocator& process_host_allocator(unsigned index) {
    return detail::ProcessContexts::get().host_allocator(index);
}

// ---- huge_host_empty -----------------------------------------------------------

const char* huge_backing_name(HugeBacking backing) noexcept {
    switch (backing) {
    case HugeBacking::HugeTlb:
        return "hugetlb";
    case HugeBacking::TransparentHuge:
        return "thp";
    case HugeBacking::SmallPages:
        return "small-pages";
    }
    return "?";
}

HugeHostBuffer::HugeHostBuffer(HugeHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)), memory_(std::move(other.memory_)),
      backing_(other.backing_), placed_(other.placed_) {}

HugeHostBuffer& HugeHostBuffer::operator=(HugeHostBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, 0);
        memory_ = std::move(other.memory_);
        backing_ = other.backing_;
        placed_ = other.placed_;
    }
    return *this;
}

HugeHostBuffer::~HugeHostBuffer() {
    release();
}

void HugeHostBuffer::release() noexcept {
    memory_.reset();
    if (data_ != nullptr)
        ::munmap(data_, mapped_);
    data_ = nullptr;
    size_ = 0;
    mapped_ = 0;
}

std::uint64_t HugeHostBuffer::huge_bytes() const {
    if (data_ == nullptr)
        return 0;
    std::ifstream smaps("/proc/self/smaps");
    const auto lo = reinterpret_cast<std::uintptr_t>(data_);
    const std::uintptr_t hi = lo + size_;
    std::uint64_t total = 0;
    bool inside = false;
    std::string line;
    while (std::getline(smaps, line)) {
        const auto dash = line.find('-');
        const auto space = line.find(' ');
        if (dash != std::string::npos && space != std::string::npos && dash < space &&
            line.find(':') > space) {
            // A mapping's header line: "start-end perms ...".
            const std::uintptr_t start = std::stoull(line.substr(0, dash), nullptr, 16);
            const std::uintptr_t end =
                std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
            inside = start < hi && end > lo;
            continue;
        }
        if (!inside)
            continue;
        for (const char* key : {"AnonHugePages:", "Private_Hugetlb:", "Shared_Hugetlb:"}) {
            if (line.starts_with(key))
                total += std::stoull(line.substr(std::strlen(key))) * 1024;
        }
    }
    return std::min<std::uint64_t>(total, size_);
}

namespace {

bool thp_enabled() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(f, s);
    return !s.empty() && s.find("[never]") == std::string::npos;
}

// Faults every page of [p, p + size) in for writing.
void prefault(std::byte* p, std::uint64_t size) {
#ifndef MADV_POPULATE_WRITE
    constexpr int MADV_POPULATE_WRITE = 23; // Linux 5.14
#endif
    if (::madvise(p, size, MADV_POPULATE_WRITE) == 0)
        return;
    for (std::uint64_t off = 0; off < size; off += kPage)
        *reinterpret_cast<volatile std::byte*>(p + off) = std::byte{0};
}

} // namespace

HugeHostBuffer huge_host_empty(const std::shared_ptr<Device>& device, std::uint64_t nbytes,
                               const HugeHostOptions& options) {
    constexpr const char* op = "huge_host_empty";
    if (!device)
        throw Error(Errc::InvalidArgument, op, "", 0, "no device");
    if (nbytes == 0)
        throw Error(Errc::InvalidArgument, op, device->kernel().path(), 0,
                    "a buffer of 0 bytes was asked for");
    if (nbytes > (1ull << 62))
        throw Error(Errc::OutOfMemory, op, device->kernel().path(), 0,
                    std::to_string(nbytes) + " bytes is too large");
    const int node = card_node(options.policy, *device);
    HugeHostBuffer b;
    b.size_ = (nbytes + kHuge - 1) / kHuge * kHuge;
    if (options.try_hugetlb) {
        constexpr int kHuge2MB = 21 << MAP_HUGE_SHIFT;
        void* p = ::mmap(nullptr, b.size_, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | kHuge2MB, -1, 0);
        if (p != MAP_FAILED) {
            b.data_ = static_cast<std::byte*>(p);
            b.mapped_ = b.size_;
            b.backing_ = HugeBacking::HugeTlb;
        }
    }
    if (b.data_ == nullptr) {
        const std::uint64_t span = b.size_ + kHuge;
        void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            throw Error(Errc::OutOfMemory, op, device->kernel().path(), err,
                        "cannot map " + mib(b.size_) + " of host memory: " + std::strerror(err));
        }
        auto* raw = static_cast<std::byte*>(p);
        const auto addr = reinterpret_cast<std::uintptr_t>(raw);
        const std::uintptr_t aligned = (addr + kHuge - 1) / kHuge * kHuge;
        const std::uint64_t head = aligned - addr;
        if (head != 0)
            ::munmap(raw, head);
        const std::uint64_t tail = span - head - b.size_;
        if (tail != 0)
            ::munmap(raw + head + b.size_, tail);
        b.data_ = raw + head;
        b.mapped_ = b.size_;
        b.backing_ = thp_enabled() && ::madvise(b.data_, b.size_, MADV_HUGEPAGE) == 0
                         ? HugeBacking::TransparentHuge
                         : HugeBacking::SmallPages;
    }
    b.placed_ = place_pages(options.policy, node, b.data_, b.size_);
    prefault(b.data_, b.size_);
    b.memory_ = device->register_host(b.data_, b.size_); // b unmaps on a throw
    return b;
}

HugeHostBuffer huge_host_empty(std::uint64_t nbytes) {
    return huge_host_empty(Device::current(), nbytes);
}

} // namespace rbln
