// SPDX-License-Identifier: GPL-2.0
// The caching allocator's policy against a fake segment provider:
// rounding, pools, splitting and merging, best fit, stream-aware reuse,
// record_stream, the out-of-memory ladder, max_split_size, garbage
// collection, the memory fraction, empty_cache.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "fake_segment_provider.hpp"
#include "rbln/allocator.hpp"

namespace rbln::test::allocator_policy_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

AllocatorConfig conf(const char* text) {
    return AllocatorConfig::parse(text);
}

TEST(AllocatorRounding, RequestsRoundUpTo512Bytes) {
    const AllocatorConfig c;
    EXPECT_EQ(round_request(0, c), 512u);
    EXPECT_EQ(round_request(1, c), 512u);
    EXPECT_EQ(round_request(512, c), 512u);
    EXPECT_EQ(round_request(513, c), 1024u);
    EXPECT_EQ(round_request(MiB + 1, c), MiB + 512);
    EXPECT_EQ(round_request(100 * MiB + 3, c), 100 * MiB + 512);
}

TEST(AllocatorRounding, PowerOfTwoDivisionsRoundToTheNextDivision) {
    const AllocatorConfig c = conf("roundup_power2_divisions:4");
    EXPECT_EQ(round_request(1000, c), 1024u) << "at most 512 x divisions: plain rounding";
    EXPECT_EQ(round_request(3000, c), 3072u) << "[2048, 4096) in steps of 512";
    EXPECT_EQ(round_request(MiB + 1, c), MiB + 256 * KiB);
    EXPECT_EQ(round_request(5 * MiB, c), 5 * MiB) << "on a division";
    EXPECT_EQ(round_request(5 * MiB + 1, c), 6 * MiB);
    EXPECT_EQ(round_request(64 * MiB, c), 64 * MiB) << "a power of two stays";
}

TEST(AllocatorRounding, DivisionsApplyPerPowerOfTwoInterval) {
    const AllocatorConfig c = conf("roundup_power2_divisions:[4:1,8:2,>:8]");
    EXPECT_EQ(c.divisions_for(512), 1u) << "below 4 MiB";
    EXPECT_EQ(c.divisions_for(3 * MiB), 1u);
    EXPECT_EQ(c.divisions_for(4 * MiB), 2u) << "[4, 8) MiB";
    EXPECT_EQ(c.divisions_for(8 * MiB - 1), 2u);
    EXPECT_EQ(c.divisions_for(8 * MiB), 8u) << "from 8 MiB on";
    EXPECT_EQ(c.divisions_for(1ull << 50), 8u);
    EXPECT_EQ(round_request(5 * MiB, c), 6 * MiB) << "2 divisions of [4, 8) MiB";
    EXPECT_EQ(round_request(9 * MiB + 1, c), 10 * MiB) << "8 divisions of [8, 16) MiB";
    EXPECT_EQ(round_request(3 * MiB + 1, c), 3 * MiB + 512) << "1 division: plain rounding";
}

TEST(AllocatorRounding, SegmentSizesFollowThePools) {
    EXPECT_EQ(segment_size_for(512), 2 * MiB);
    EXPECT_EQ(segment_size_for(MiB), 2 * MiB);
    EXPECT_EQ(segment_size_for(MiB + 512), 20 * MiB);
    EXPECT_EQ(segment_size_for(10 * MiB - 512), 20 * MiB);
    EXPECT_EQ(segment_size_for(10 * MiB), 10 * MiB);
    EXPECT_EQ(segment_size_for(11 * MiB + 512), 12 * MiB);
    EXPECT_TRUE(is_small_request(MiB));
    EXPECT_FALSE(is_small_request(MiB + 512));
}

class Allocator : public ::testing::Test {
protected:
    void make(unsigned n = 1, std::uint64_t capacity = 1024 * MiB, AllocatorConfig c = {}) {
        a = fake_allocator(hbm, n, capacity, c);
    }
    void SetUp() override { make(); }
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    std::unique_ptr<DeviceAllocator> a;
};

TEST_F(Allocator, SmallRequestsShareOneTwoMiBSegment) {
    DeviceBlock x = a->allocate(1000);
    DeviceBlock y = a->allocate(512);
    EXPECT_EQ(x.size(), 1024u);
    EXPECT_EQ(x.requested_size(), 1000u);
    EXPECT_EQ(y.device_va(), x.device_va() + 1024) << "split from the same segment";
    EXPECT_EQ(y.handle(), x.handle());
    EXPECT_EQ(y.segment_offset(), 1024u);
    EXPECT_THAT(hbm[0]->asked, ElementsAre(2 * MiB));
}

TEST_F(Allocator, LargeRequestsUnderTenMiBShareTwentyMiBSegments) {
    DeviceBlock x = a->allocate(2 * MiB);
    DeviceBlock y = a->allocate(9 * MiB);
    EXPECT_EQ(y.device_va(), x.device_va() + 2 * MiB);
    DeviceBlock z = a->allocate(9 * MiB); // 9 MiB remain: exactly enough
    EXPECT_EQ(z.device_va(), y.device_va() + 9 * MiB);
    EXPECT_EQ(z.size(), 9 * MiB) << "nothing left to split off";
    EXPECT_THAT(hbm[0]->asked, ElementsAre(20 * MiB));
}

TEST_F(Allocator, RequestsFromTenMiBGetTheirOwnSegmentRoundedToTwoMiB) {
    DeviceBlock x = a->allocate(11 * MiB);
    EXPECT_EQ(x.size(), 12 * MiB) << "the whole segment: 1 MiB left is not split";
    DeviceBlock y = a->allocate(10 * MiB);
    EXPECT_THAT(hbm[0]->asked, ElementsAre(12 * MiB, 10 * MiB));
}

TEST_F(Allocator, ALargeBlockSplitsOnlyWhenMoreThanOneMiBRemains) {
    DeviceBlock big = a->allocate(19 * MiB); // 20 MiB segment, 1 MiB left: not split
    EXPECT_EQ(big.size(), 20 * MiB);
    big.reset();
    DeviceBlock again = a->allocate(18 * MiB + 512); // the cached 20 MiB block
    EXPECT_EQ(again.size(), 18 * MiB + 512) << "2 MiB - 512 remain: split";
    EXPECT_EQ(hbm[0]->allocs, 1);
}

TEST_F(Allocator, ASmallBlockSplitsWhen512BytesRemain) {
    DeviceBlock x = a->allocate(MiB);
    DeviceBlock y = a->allocate(MiB - 512);
    EXPECT_EQ(y.size(), MiB - 512) << "512 B remain: split";
    DeviceBlock z = a->allocate(512);
    EXPECT_EQ(z.device_va(), y.device_va() + MiB - 512) << "the last 512 B of the segment";
    EXPECT_EQ(a->stats().segment[0].current, 1);
    EXPECT_EQ(a->stats().inactive_split[0].current, 0) << "nothing left over";
    DeviceBlock next = a->allocate(512);
    EXPECT_EQ(a->stats().segment[0].current, 2) << "the first segment is used up";
    (void)x;
}

TEST_F(Allocator, FreedNeighboursMergeBackIntoTheWholeSegment) {
    DeviceBlock x = a->allocate(512);
    DeviceBlock y = a->allocate(512);
    DeviceBlock z = a->allocate(512);
    const std::uint64_t base = x.device_va();
    y.reset();
    EXPECT_EQ(a->stats().inactive_split[0].current, 2) << "y and the tail are separate";
    x.reset();
    EXPECT_EQ(a->stats().inactive_split[0].current, 2) << "x merged with y";
    EXPECT_EQ(a->stats().inactive_split_bytes[0].current, static_cast<std::int64_t>(2 * MiB - 512));
    z.reset();
    EXPECT_EQ(a->stats().inactive_split[0].current, 0) << "one unsplit block";
    EXPECT_EQ(a->stats().inactive_split_bytes[0].current, 0);
    DeviceBlock whole = a->allocate(MiB);
    EXPECT_EQ(whole.device_va(), base);
    EXPECT_EQ(hbm[0]->allocs, 1);
}

TEST_F(Allocator, TheSmallestFreeBlockThatFitsIsReused) {
    DeviceBlock a1 = a->allocate(4096);
    DeviceBlock sep1 = a->allocate(512);
    DeviceBlock a2 = a->allocate(2048);
    DeviceBlock sep2 = a->allocate(512);
    const std::uint64_t small_hole = a2.device_va();
    a1.reset();
    a2.reset();
    DeviceBlock b = a->allocate(1500);
    EXPECT_EQ(b.device_va(), small_hole) << "the 2 KiB hole, not the 4 KiB one";
    (void)sep1;
    (void)sep2;
}

TEST_F(Allocator, SplitAndMergedBlocksKeepThePoolInBestFitOrder) {
    DeviceBlock l1 = a->allocate(512);
    DeviceBlock hole4 = a->allocate(4096);
    DeviceBlock l2 = a->allocate(512);
    DeviceBlock hole8 = a->allocate(8192);
    DeviceBlock l3 = a->allocate(512);
    const std::uint64_t va4 = hole4.device_va();
    const std::uint64_t va8 = hole8.device_va();
    hole4.reset();
    hole8.reset();
    DeviceBlock x = a->allocate(6144); // from the 8 KiB hole: a 2 KiB remainder
    EXPECT_EQ(x.device_va(), va8);
    DeviceBlock y = a->allocate(2048); // the remainder moved before the 4 KiB hole
    EXPECT_EQ(y.device_va(), va8 + 6144);
    DeviceBlock z = a->allocate(4096);
    EXPECT_EQ(z.device_va(), va4);
    z.reset();
    x.reset(); // 6 KiB, then 8 KiB with... y is live: stays 6 KiB, after the 4 KiB hole
    DeviceBlock w = a->allocate(5000);
    EXPECT_EQ(w.device_va(), va8) << "6 KiB is the best fit for 5000 B";
    l2.reset(); // merges the 4 KiB hole and l2 with... w is live: hole of 4.5 KiB
    DeviceBlock v = a->allocate(4608);
    EXPECT_EQ(v.device_va(), va4) << "the merged 4.5 KiB block, in its new place";
    (void)l1;
    (void)l3;
}

TEST_F(Allocator, ARandomSequenceKeepsTheBooksAndMergesBackCompletely) {
    make(1, 1ull << 40);
    std::uint64_t seed = 12345;
    auto next = [&seed] {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return seed >> 33;
    };
    static constexpr std::uint64_t kSizes[] = {1,        512,      700,      4096,    65536,
                                               MiB - 1,  MiB,      MiB + 1,  3 * MiB, 9 * MiB,
                                               10 * MiB, 11 * MiB, 25 * MiB, 100000,  300000};
    std::vector<DeviceBlock> live;
    std::map<std::uint64_t, std::uint64_t> ranges;
    for (int op = 0; op < 20000; op++) {
        if (live.empty() || (live.size() < 300 && next() % 2 == 0)) {
            const std::uint64_t size = kSizes[next() % std::size(kSizes)];
            DeviceBlock b = a->allocate(size, next() % 2);
            ASSERT_GE(b.size(), size);
            auto after = ranges.lower_bound(b.device_va());
            ASSERT_TRUE(after == ranges.end() || after->first >= b.device_va() + b.size())
                << "overlaps the block after it";
            ASSERT_TRUE(after == ranges.begin() ||
                        std::prev(after)->first + std::prev(after)->second <= b.device_va())
                << "overlaps the block before it";
            ranges[b.device_va()] = b.size();
            live.push_back(std::move(b));
        } else {
            const std::size_t i = next() % live.size();
            ranges.erase(live[i].device_va());
            live[i] = std::move(live.back());
            live.pop_back();
        }
        std::uint64_t bytes = 0;
        for (const auto& [va, size] : ranges)
            bytes += size;
        ASSERT_EQ(a->memory_allocated(), bytes) << "op " << op;
    }
    live.clear();
    const AllocatorStats s = a->stats();
    EXPECT_EQ(s.allocated_bytes[0].current, 0);
    EXPECT_EQ(s.active[0].current, 0);
    EXPECT_EQ(s.inactive_split[0].current, 0) << "every segment merged back whole";
    EXPECT_EQ(s.inactive_split_bytes[0].current, 0);
    EXPECT_EQ(s.requested_bytes[0].current, 0);
    a->empty_cache();
    EXPECT_TRUE(hbm[0]->live.empty());
    EXPECT_EQ(a->memory_reserved(), 0u);
}

TEST_F(Allocator, BlocksAreReusedOnlyByTheirOwnStream) {
    DeviceBlock x = a->allocate(MiB, 1);
    const std::uint64_t va = x.device_va();
    x.reset();
    DeviceBlock other = a->allocate(MiB, 2);
    EXPECT_NE(other.device_va(), va);
    EXPECT_EQ(other.stream(), 2u);
    EXPECT_EQ(hbm[0]->allocs, 2) << "stream 2 needed its own segment";
    DeviceBlock same = a->allocate(MiB, 1);
    EXPECT_EQ(same.device_va(), va);
}

TEST_F(Allocator, RecordStreamDefersReuseUntilTheOtherStreamsFenceIsDone) {
    auto s2 = std::make_shared<FakeStream>(2);
    DeviceBlock x = a->allocate(MiB, 1);
    const std::uint64_t va = x.device_va();
    a->record_stream(x, s2);
    x.reset();
    ASSERT_EQ(s2->fences.size(), 1u) << "a fence recorded at free time";
    EXPECT_EQ(a->stats().active[0].current, 1) << "still in use by stream 2";
    EXPECT_EQ(a->stats().allocation[0].current, 0);
    DeviceBlock y = a->allocate(MiB, 1);
    EXPECT_NE(y.device_va(), va) << "not reusable before the fence";
    y.reset();
    EXPECT_EQ(a->stats().active[0].current, 1);
    s2->complete_all();
    DeviceBlock z = a->allocate(MiB, 1); // the next allocation looks at the fences
    EXPECT_EQ(z.device_va(), va) << "the deferred block went back and merged";
    EXPECT_EQ(a->stats().active[0].current, 1);
    EXPECT_EQ(a->stats().inactive_split[0].current, 1);
    EXPECT_EQ(s2->fences[0]->syncs, 0) << "free never waited";
}

TEST_F(Allocator, RecordStreamOnTheBlocksOwnStreamIsANoOp) {
    auto s1 = std::make_shared<FakeStream>(1);
    DeviceBlock x = a->allocate(MiB, 1);
    const std::uint64_t va = x.device_va();
    a->record_stream(x, s1);
    x.reset();
    EXPECT_TRUE(s1->fences.empty());
    EXPECT_EQ(a->allocate(MiB, 1).device_va(), va);
}

TEST_F(Allocator, EmptyCacheWaitsForPendingFencesAndReturnsEverySegment) {
    auto s2 = std::make_shared<FakeStream>(2);
    DeviceBlock x = a->allocate(MiB);
    DeviceBlock y = a->allocate(30 * MiB);
    a->record_stream(x, s2);
    x.reset();
    y.reset();
    a->empty_cache();
    EXPECT_EQ(s2->fences[0]->syncs, 1);
    EXPECT_TRUE(hbm[0]->live.empty());
    EXPECT_EQ(a->memory_reserved(), 0u);
    EXPECT_EQ(a->stats().num_device_free, 2);
    EXPECT_EQ(a->stats().num_sync_all_streams, 1);
}

TEST_F(Allocator, EmptyCacheKeepsSegmentsWithLiveBlocks) {
    DeviceBlock x = a->allocate(512);
    DeviceBlock y = a->allocate(512);
    y.reset();
    a->empty_cache();
    EXPECT_EQ(hbm[0]->live.size(), 1u);
    EXPECT_EQ(a->memory_reserved(), 2 * MiB);
    (void)x;
}

TEST_F(Allocator, OutOfMemoryFreesTheCacheAndRetriesOnce) {
    make(1, 40 * MiB);
    a->allocate(2 * MiB).reset(); // a cached 20 MiB segment
    DeviceBlock x = a->allocate(30 * MiB);
    EXPECT_EQ(x.size(), 30 * MiB);
    EXPECT_EQ(a->stats().num_alloc_retries, 1);
    EXPECT_EQ(a->stats().num_ooms, 0);
    EXPECT_EQ(hbm[0]->releases, 1) << "the cached segment went back first";
}

TEST_F(Allocator, OutOfMemoryAfterTheRetryThrowsATypedErrorNamingTheChiplet) {
    make(2, 40 * MiB);
    DeviceBlock x = a->allocate(30 * MiB, 0, 1);
    try {
        a->allocate(20 * MiB, 0, 1);
        FAIL() << "expected an out-of-memory error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory);
        const std::string m = e.what();
        EXPECT_THAT(m, HasSubstr("rbln:0 NPU 0 chiplet 1 is out of memory"));
        EXPECT_THAT(m, HasSubstr("tried to allocate 20.00 MiB for a request of 20.00 MiB"));
        EXPECT_THAT(m, HasSubstr("40.00 MiB in total, of which 10.00 MiB is free"));
        EXPECT_THAT(m, HasSubstr("30.00 MiB allocated and 30.00 MiB reserved"));
        EXPECT_THAT(m, HasSubstr("another chiplet"));
    }
    EXPECT_EQ(a->stats(1).num_ooms, 1);
    EXPECT_EQ(a->stats(1).num_alloc_retries, 1);
    EXPECT_EQ(a->stats().num_ooms, 1);
    EXPECT_EQ(a->stats(0).num_ooms, 0);
    DeviceBlock elsewhere = a->allocate(20 * MiB, 0, 0);
    EXPECT_TRUE(elsewhere) << "the other chiplet has room";
}

TEST_F(Allocator, WithoutAFreeFigureTheMessageGivesAnUpperBound) {
    auto h = std::make_shared<FakeHbm>();
    h->capacity = 4 * MiB;
    std::vector<AllocatorPlace> p;
    p.push_back(AllocatorPlace{3, 0, std::make_unique<FakeSegmentProvider>(h, false)});
    DeviceAllocator d(5, std::move(p));
    DeviceBlock x = d.allocate(MiB);
    try {
        d.allocate(3 * MiB);
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("rbln:5 NPU 3 chiplet 0"));
        EXPECT_THAT(e.what(), HasSubstr("at most 2.00 MiB is free"));
    }
}

TEST_F(Allocator, OversizeBlocksServeOnlyCloseOversizeRequests) {
    make(1, 1024 * MiB, conf("max_split_size_mb:40"));
    DeviceBlock big = a->allocate(50 * MiB);
    const std::uint64_t va = big.device_va();
    EXPECT_EQ(a->stats().oversize_segments.current, 1);
    EXPECT_EQ(a->stats().oversize_allocations.current, 1);
    big.reset();
    DeviceBlock small = a->allocate(12 * MiB);
    EXPECT_NE(small.device_va(), va) << "below max_split_size: not from an oversize block";
    DeviceBlock far = a->allocate(30 * MiB + 512);
    EXPECT_NE(far.device_va(), va) << "below max_split_size";
    DeviceBlock close = a->allocate(45 * MiB);
    EXPECT_EQ(close.device_va(), va) << "50 < 45 + 20: reused";
    EXPECT_EQ(close.size(), 50 * MiB) << "never split";
    DeviceBlock huge = a->allocate(72 * MiB);
    const std::uint64_t huge_va = huge.device_va();
    huge.reset();
    DeviceBlock loose = a->allocate(45 * MiB);
    EXPECT_NE(loose.device_va(), huge_va) << "72 >= 45 + 20: too loose a fit";
    EXPECT_EQ(loose.size(), 46 * MiB);
}

TEST_F(Allocator, OutOfMemoryFreesOversizeCachedBlocksBeforeEverything) {
    make(1, 90 * MiB, conf("max_split_size_mb:40"));
    a->allocate(50 * MiB).reset();
    a->allocate(2 * MiB).reset();          // a cached 20 MiB segment that survives
    DeviceBlock x = a->allocate(30 * MiB); // may not use the oversize block
    EXPECT_TRUE(x);
    EXPECT_EQ(a->stats().num_alloc_retries, 0) << "freeing the oversize block sufficed";
    EXPECT_EQ(hbm[0]->releases, 1);
    EXPECT_EQ(a->memory_reserved(), 50 * MiB);
}

TEST_F(Allocator, GarbageCollectionFreesTheOldestCachedSegments) {
    make(1, 100 * MiB, conf("garbage_collection_threshold:0.3"));
    DeviceBlock x = a->allocate(12 * MiB); // ages: x 3, y 2, z 1 at the next request
    DeviceBlock y = a->allocate(12 * MiB);
    DeviceBlock z = a->allocate(12 * MiB);
    const std::uint64_t z_va = z.device_va();
    x.reset();
    y.reset();
    z.reset();
    EXPECT_EQ(a->memory_reserved(), 36 * MiB);
    DeviceBlock w = a->allocate(14 * MiB); // 36 MiB > 30 MiB: collect
    EXPECT_EQ(hbm[0]->releases, 2) << "x and y are at least the average age";
    EXPECT_EQ(a->memory_reserved(), 26 * MiB);
    EXPECT_EQ(hbm[0]->live.count(z_va), 1u) << "the youngest stays";
}

TEST_F(Allocator, NoGarbageCollectionBelowTheThreshold) {
    make(1, 100 * MiB, conf("garbage_collection_threshold:0.5"));
    a->allocate(12 * MiB).reset();
    a->allocate(12 * MiB).reset(); // reuses
    DeviceBlock w = a->allocate(14 * MiB);
    EXPECT_EQ(hbm[0]->releases, 0);
    (void)w;
}

TEST_F(Allocator, AMemoryFractionCapsTheChiplet) {
    make(1, 100 * MiB);
    a->set_memory_fraction(0.5, 0);
    DeviceBlock x = a->allocate(40 * MiB);
    try {
        a->allocate(12 * MiB);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory);
        EXPECT_THAT(e.what(), HasSubstr("this process may use 50.00 MiB"));
    }
    EXPECT_EQ(hbm[0]->refusals, 0) << "refused before asking the kernel";
    EXPECT_THROW(a->set_memory_fraction(1.5, 0), Error);
}

TEST_F(Allocator, ZeroBytesGiveAnEmptyBlockAndBadPlacesAreRefused) {
    DeviceBlock z = a->allocate(0);
    EXPECT_FALSE(z);
    EXPECT_EQ(hbm[0]->allocs, 0);
    try {
        a->allocate(512, 0, 7);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
    }
    EXPECT_THROW(a->allocate(1ull << 62), Error);
}

TEST_F(Allocator, TheDefaultPlaceIsTheFirstChipletUnlessChanged) {
    make(4);
    DeviceBlock x = a->allocate(512);
    EXPECT_EQ(x.place(), 0u);
    EXPECT_EQ(hbm[0]->allocs, 1);
    a->set_default_place(2);
    DeviceBlock y = a->allocate(512);
    EXPECT_EQ(y.place(), 2u);
    EXPECT_EQ(hbm[2]->allocs, 1);
    EXPECT_EQ(a->find_place(0, 3), 3u);
    EXPECT_THROW(a->find_place(1, 0), Error);
    EXPECT_THROW(a->set_default_place(4), Error);
}

TEST_F(Allocator, DestroyingTheAllocatorReturnsCachedSegments) {
    { DeviceBlock x = a->allocate(MiB); }
    a.reset();
    EXPECT_TRUE(hbm[0]->live.empty());
}

TEST_F(Allocator, MovedBlocksFreeOnce) {
    DeviceBlock x = a->allocate(512);
    DeviceBlock y = std::move(x);
    EXPECT_FALSE(x); // NOLINT(bugprone-use-after-move)
    y = a->allocate(1024);
    EXPECT_EQ(a->stats().allocation[0].current, 1);
    EXPECT_EQ(a->stats().allocation[0].freed, 1);
}

} // namespace
} // namespace rbln::test::allocator_policy_test
