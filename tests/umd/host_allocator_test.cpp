// SPDX-License-Identifier: GPL-2.0
// Pinned host memory (rbln/host_allocator.hpp) over a FakeKernel: size
// classes, registration as pinned user pages (copies async, the card's view
// is the block), caching and reuse only once the card is done (recorded
// streams and jobs holding the memory), every statistic, best-effort mlock,
// NUMA placement, the registration-failure ladder, and huge_host_empty().

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <utility>
#include <vector>

#include "device_fixture.hpp"
#include "fake_kernel.hpp"
#include "rbln/copy.hpp"
#include "rbln/host_allocator.hpp"

namespace rbln::test::host_allocator_test {
namespace {

using ::testing::ElementsAre;

constexpr std::uint64_t kMiB = 1024 * 1024;

struct Bind {
    std::size_t size;
    int node;
};

class HostAlloc : public ::testing::Test {
protected:
    void SetUp() override { dev = fake_device(k, Path::Ioctl); }

    /// A policy whose system calls are recorded (mlock succeeds, mbind
    /// succeeds) unless told otherwise.
    HostPagePolicy recorded(int mlock_err = 0, int bind_err = 0) {
        HostPagePolicy p;
        p.mlock_fn = [this, mlock_err](void* /*p*/, std::size_t size) {
            locks.push_back(size);
            return mlock_err;
        };
        p.bind_fn = [this, bind_err](void* /*p*/, std::size_t size, int node) {
            binds.push_back({size, node});
            return bind_err;
        };
        return p;
    }

    std::shared_ptr<FakeKernel> k = std::make_shared<FakeKernel>();
    std::shared_ptr<Device> dev;
    std::vector<std::size_t> locks;
    std::vector<Bind> binds;
};

TEST_F(HostAlloc, RequestsRoundUpToPowerOfTwoClassesOfAtLeastAPageAndArePageAligned) {
    HostAllocator a(dev, recorded());
    const HostBlock b1 = a.allocate(1);
    const HostBlock b2 = a.allocate(5000);
    const HostBlock b3 = a.allocate(kMiB);
    const HostBlock b4 = a.allocate(kMiB + 1);
    EXPECT_EQ(b1.size(), 4096u);
    EXPECT_EQ(b2.size(), 8192u);
    EXPECT_EQ(b3.size(), kMiB);
    EXPECT_EQ(b4.size(), 2 * kMiB);
    EXPECT_EQ(b2.requested_size(), 5000u);
    for (const HostBlock* b : {&b1, &b2, &b3, &b4})
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % 4096, 0u);
    const HostBlock none = a.allocate(0);
    EXPECT_FALSE(none);
    EXPECT_EQ(none.data(), nullptr);
    EXPECT_EQ(a.stats().allocation.current, 4);
}

TEST_F(HostAlloc, BlocksArePinnedUserPagesTheCardSeesAndCopiesFromThemAreAsync) {
    HostAllocator a(dev, recorded());
    HostBlock b = a.allocate(10000);
    ASSERT_TRUE(b);
    EXPECT_EQ(k->count(KernelOp::BoUserptr), 1);
    ASSERT_TRUE(b.memory());
    EXPECT_EQ(b.memory()->kind(), MemoryKind::HostRegistered);
    EXPECT_EQ(b.memory()->size(), b.size());
    // The card's view of the block is the block itself (no staging copy).
    EXPECT_EQ(k->translate(b.memory()->device_va(), b.size()), b.data());
    auto d = dev->allocate(4096);
    EXPECT_EQ(
        plan_copy(*dev, CopyEndpoint::of(d), CopyEndpoint::of_host(b.data() + 512, 4096)).mode,
        CopyMode::Async);
    // Data really travels both ways through it.
    Stream s = dev->default_stream();
    for (std::size_t i = 0; i < 4096; i++)
        b.data()[i] = static_cast<std::byte>(i * 3 + 1);
    copy(s, CopyEndpoint::of(d), CopyEndpoint::of_host(b.data(), 4096), true);
    copy(s, CopyEndpoint::of_host(b.data() + 4096, 4096), CopyEndpoint::of(d), true);
    s.synchronize();
    EXPECT_EQ(std::memcmp(b.data(), b.data() + 4096, 4096), 0);
    const CopyStats cs = dev->copy_stats();
    EXPECT_EQ(cs.async_h2d, 1u);
    EXPECT_EQ(cs.async_d2h, 1u);
    EXPECT_EQ(cs.sync_h2d + cs.sync_d2h, 0u);
}

TEST_F(HostAlloc, AFreedBlockIsReusedForItsSizeClassOnly) {
    HostAllocator a(dev, recorded());
    HostBlock b = a.allocate(3000);
    std::byte* first = b.data();
    b.reset();
    const HostBlock other = a.allocate(8192); // another class: a new block
    EXPECT_NE(other.data(), first);
    const HostBlock again = a.allocate(4000); // same class as 3000
    EXPECT_EQ(again.data(), first);
    const HostAllocatorStats st = a.stats();
    EXPECT_EQ(st.num_host_alloc, 2);
    EXPECT_EQ(st.num_cache_hits, 1);
    EXPECT_EQ(k->count(KernelOp::BoUserptr), 2);
}

TEST_F(HostAlloc, ARecordedStreamKeepsTheBlockOutOfTheCacheUntilItsWorkIsDone) {
    HostAllocator a(dev, recorded());
    Stream s = dev->default_stream();
    k->hold_jobs = true;
    k->complete_on_blocking_wait = false;
    HostBlock b = a.allocate(4096);
    std::byte* first = b.data();
    b.record_stream(s);
    b.reset(); // records an event on s: the card has not run it
    HostBlock c = a.allocate(4096);
    std::byte* second = c.data();
    EXPECT_NE(second, first) << "reused while the card may still use it";
    c.reset(); // no stream recorded: cached at once
    HostBlock again = a.allocate(4096);
    EXPECT_EQ(again.data(), second) << "the first is still waiting for the card";
    again.reset();
    k->complete_jobs();
    ASSERT_TRUE(s.query());
    // Both are reusable now.
    const HostBlock d = a.allocate(4096);
    const HostBlock e = a.allocate(4096);
    EXPECT_THAT((std::vector<std::byte*>{d.data(), e.data()}),
                ::testing::UnorderedElementsAre(first, second));
    EXPECT_EQ(a.stats().num_host_alloc, 2);
}

TEST_F(HostAlloc, AnAsyncCopyStillRunningKeepsTheBlockOutOfTheCacheWithoutRecordStream) {
    HostAllocator a(dev, recorded());
    Stream s = dev->default_stream();
    auto d = dev->allocate(4096);
    k->hold_jobs = true;
    k->complete_on_blocking_wait = false;
    HostBlock b = a.allocate(4096);
    std::byte* first = b.data();
    copy(s, CopyEndpoint::of(d), CopyEndpoint::of_host(b.data(), 4096), true);
    b.reset();
    HostBlock c = a.allocate(4096);
    EXPECT_NE(c.data(), first) << "reused while a copy job still lists it";
    k->complete_jobs();
    k->complete_on_blocking_wait = true;
    s.synchronize();
    HostBlock e = a.allocate(4096);
    EXPECT_EQ(e.data(), first);
}

TEST_F(HostAlloc, StatisticsFollowPyTorchsHostKeys) {
    HostAllocator a(dev, recorded());
    HostBlock b1 = a.allocate(4096);       // class 4 KiB
    HostBlock b2 = a.allocate(3 * 4096);   // class 16 KiB
    HostBlock b3 = a.allocate(100 * 1024); // class 128 KiB
    b2.reset();
    HostBlock b4 = a.allocate(16 * 1024); // reuses b2's
    b1.reset();
    b3.reset();
    const auto m = a.memory_stats();
    EXPECT_EQ(m.at("allocation.current"), 1);
    EXPECT_EQ(m.at("allocation.peak"), 3);
    EXPECT_EQ(m.at("allocation.allocated"), 4);
    EXPECT_EQ(m.at("allocation.freed"), 3);
    EXPECT_EQ(m.at("segment.current"), 3);
    EXPECT_EQ(m.at("segment.peak"), 3);
    EXPECT_EQ(m.at("segment.allocated"), 3);
    EXPECT_EQ(m.at("segment.freed"), 0);
    EXPECT_EQ(m.at("allocated_bytes.current"), 16 * 1024);
    EXPECT_EQ(m.at("allocated_bytes.peak"), (4 + 16 + 128) * 1024);
    EXPECT_EQ(m.at("allocated_bytes.allocated"), (4 + 16 + 128 + 16) * 1024);
    EXPECT_EQ(m.at("allocated_bytes.freed"), (4 + 16 + 128) * 1024);
    EXPECT_EQ(m.at("reserved_bytes.current"), (4 + 16 + 128) * 1024);
    EXPECT_EQ(m.at("reserved_bytes.peak"), (4 + 16 + 128) * 1024);
    EXPECT_EQ(m.at("num_host_alloc"), 3);
    EXPECT_EQ(m.at("num_host_free"), 0);
    EXPECT_EQ(m.at("num_mlock_failures"), 0);
    EXPECT_EQ(m.size(), 21u);

    a.empty_cache(); // b1's and b3's blocks go; b4 is in use
    const auto e = a.memory_stats();
    EXPECT_EQ(e.at("segment.current"), 1);
    EXPECT_EQ(e.at("segment.freed"), 2);
    EXPECT_EQ(e.at("reserved_bytes.current"), 16 * 1024);
    EXPECT_EQ(e.at("reserved_bytes.freed"), (4 + 128) * 1024);
    EXPECT_EQ(e.at("num_host_free"), 2);
    EXPECT_EQ(k->count(KernelOp::GemClose), 2);

    a.reset_peak_stats();
    EXPECT_EQ(a.stats().allocated_bytes.peak, 16 * 1024);
    a.reset_accumulated_stats();
    const HostAllocatorStats r = a.stats();
    EXPECT_EQ(r.allocation.allocated, 0);
    EXPECT_EQ(r.num_host_alloc, 0);
    EXPECT_EQ(r.allocation.current, 1) << "current values are not accumulated ones";
}

TEST_F(HostAlloc, EmptyCacheUnregistersAndUnmapsCachedBlocksAndTheNextAllocationPaysAgain) {
    HostAllocator a(dev, recorded());
    HostBlock b = a.allocate(4096);
    std::byte* p = b.data();
    b.reset();
    EXPECT_EQ(k->buffer_count(), 1u);
    a.empty_cache();
    EXPECT_EQ(k->buffer_count(), 0u) << "the userptr BO is closed";
    unsigned char vec = 0;
    EXPECT_EQ(::mincore(p, 4096, &vec), -1) << "the pages are unmapped";
    EXPECT_EQ(errno, ENOMEM);
    const HostBlock c = a.allocate(4096);
    EXPECT_EQ(a.stats().num_host_alloc, 2);
    EXPECT_EQ(k->count(KernelOp::BoUserptr), 2);
}

TEST_F(HostAlloc, AFailedMlockIsCountedAndNotAnError) {
    HostAllocator a(dev, recorded(ENOMEM));
    const HostBlock b = a.allocate(64 * 1024);
    EXPECT_TRUE(b);
    EXPECT_THAT(locks, ElementsAre(64 * 1024));
    EXPECT_EQ(a.stats().num_mlock_failures, 1);
    HostPagePolicy off = recorded();
    off.lock = false;
    HostAllocator b2(dev, off);
    locks.clear();
    const HostBlock c = b2.allocate(4096);
    EXPECT_TRUE(locks.empty());
    EXPECT_EQ(b2.stats().num_mlock_failures, 0);
}

TEST_F(HostAlloc, BlocksArePlacedOnTheCardsNumaNode) {
    k->device.numa_node = 3;
    HostAllocator a(dev, recorded());
    EXPECT_EQ(a.numa_node(), 3);
    const HostBlock b = a.allocate(20000);
    ASSERT_EQ(binds.size(), 1u);
    EXPECT_EQ(binds[0].node, 3);
    EXPECT_EQ(binds[0].size, 32768u);
    EXPECT_EQ(a.stats().num_numa_placements, 1);
    EXPECT_EQ(a.stats().num_numa_unplaced, 0);
}

TEST_F(HostAlloc, NoNodeOrNoLibnumaMeansNoPlacementCounted) {
    k->device.numa_node = -1;
    HostAllocator none(dev, recorded());
    const HostBlock b = none.allocate(4096);
    EXPECT_TRUE(binds.empty()) << "node -1: nothing to bind to";
    EXPECT_EQ(none.stats().num_numa_unplaced, 1);
    HostPagePolicy p = recorded(0, ENOSYS); // libnuma unavailable at run time
    p.numa_node = 0;
    HostAllocator nolib(dev, p);
    const HostBlock c = nolib.allocate(4096);
    EXPECT_EQ(nolib.stats().num_numa_placements, 0);
    EXPECT_EQ(nolib.stats().num_numa_unplaced, 1);
}

TEST_F(HostAlloc, TheRealLibnumaPlacesOnNodeZeroOfThisMachineOrCountsItUnplaced) {
    HostPagePolicy p;
    p.numa_node = 0;
    HostAllocator a(dev, p);
    HostBlock b = a.allocate(4096);
    b.data()[0] = std::byte{1};
    const HostAllocatorStats st = a.stats();
    EXPECT_EQ(st.num_numa_placements + st.num_numa_unplaced, 1);
}

TEST_F(HostAlloc, APinFailureAfterEmptyingTheCacheIsOutOfMemory) {
    k->memlock_limit = 4 * 4096;
    HostAllocator a(dev, recorded());
    HostBlock small = a.allocate(4096);
    small.reset();
    HostBlock big = a.allocate(16384); // 4 + 16 > 16: empties the cache, then fits
    EXPECT_TRUE(big);
    EXPECT_EQ(a.stats().num_host_free, 1);
    try {
        const HostBlock more = a.allocate(16384);
        FAIL() << "pinned more than RLIMIT_MEMLOCK allows";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory) << e.what();
    }
    EXPECT_EQ(a.stats().allocation.current, 1);
}

TEST_F(HostAlloc, BlocksMayOutliveTheirAllocator) {
    HostBlock b;
    {
        HostAllocator a(dev, recorded());
        b = a.allocate(4096);
    }
    b.data()[100] = std::byte{7};
    EXPECT_EQ(k->buffer_count(), 1u);
    b.reset();
    EXPECT_EQ(k->buffer_count(), 0u);
}

// ---- huge_host_empty ----------------------------------------------------------

TEST_F(HostAlloc, HugeHostEmptyIsTwoMiBAlignedRoundedPrefaultedAndPinned) {
    HugeHostOptions o;
    o.policy = recorded();
    o.policy.numa_node = 0;
    HugeHostBuffer h = huge_host_empty(dev, 3 * kMiB, o);
    ASSERT_TRUE(h);
    EXPECT_EQ(h.size(), 4 * kMiB);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(h.data()) % (2 * kMiB), 0u);
    std::vector<unsigned char> vec(h.size() / 4096);
    ASSERT_EQ(::mincore(h.data(), h.size(), vec.data()), 0);
    for (std::size_t i = 0; i < vec.size(); i++)
        ASSERT_NE(vec[i] & 1, 0) << "page " << i << " is not resident";
    ASSERT_TRUE(h.memory());
    EXPECT_EQ(h.memory()->kind(), MemoryKind::HostRegistered);
    EXPECT_EQ(k->translate(h.memory()->device_va(), h.size()), h.data());
    auto d = dev->allocate(kMiB);
    EXPECT_EQ(
        plan_copy(*dev, CopyEndpoint::of(d), CopyEndpoint::of_host(h.data() + kMiB, kMiB)).mode,
        CopyMode::Async);
    ASSERT_EQ(binds.size(), 1u);
    EXPECT_EQ(binds[0].node, 0);
    EXPECT_EQ(binds[0].size, 4 * kMiB);
    EXPECT_TRUE(h.numa_placed());
    EXPECT_LE(h.huge_bytes(), h.size());
}

TEST_F(HostAlloc, HugeHostEmptyWithoutHugetlbReportsThpOrSmallPages) {
    HugeHostOptions o;
    o.try_hugetlb = false;
    const HugeHostBuffer h = huge_host_empty(dev, 1, o);
    EXPECT_EQ(h.size(), 2 * kMiB);
    EXPECT_NE(h.backing(), HugeBacking::HugeTlb);
    EXPECT_STRNE(huge_backing_name(h.backing()), "hugetlb");
    if (h.backing() == HugeBacking::SmallPages) {
        EXPECT_EQ(h.huge_bytes(), 0u);
    }
}

TEST_F(HostAlloc, HugeHostEmptyDestroyedUnregistersAndUnmaps) {
    HugeHostBuffer h = huge_host_empty(dev, 2 * kMiB);
    std::byte* p = h.data();
    EXPECT_EQ(k->buffer_count(), 1u);
    HugeHostBuffer moved = std::move(h);
    EXPECT_FALSE(h); // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(moved.data(), p);
    moved = HugeHostBuffer{};
    EXPECT_EQ(k->buffer_count(), 0u);
    unsigned char vec = 0;
    EXPECT_EQ(::mincore(p, 4096, &vec), -1);
}

TEST_F(HostAlloc, HugeHostEmptyOfZeroBytesOrBeyondThePinLimitIsATypedError) {
    try {
        (void)huge_host_empty(dev, 0);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
    }
    k->memlock_limit = 2 * kMiB;
    try {
        (void)huge_host_empty(dev, 4 * kMiB);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory) << e.what();
    }
}

} // namespace
} // namespace rbln::test::host_allocator_test
