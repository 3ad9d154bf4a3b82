// SPDX-License-Identifier: GPL-2.0
// The caching allocator's statistics against hand-computed values: every
// key of memory_stats() after a known sequence, the exact joint peak over
// chiplets, per-chiplet keys, resets, and the memory summary's exact text.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "fake_segment_provider.hpp"
#include "rbln/allocator.hpp"

namespace rbln::test::allocator_stats_test {
namespace {

/// Every key of memory_stats() with the value 0 (max_split_size -1), then
/// the values a test expects.
class Expected {
public:
    Expected() {
        AllocatorStats zero;
        append_memory_stats(map, zero);
    }
    /// name.<current|peak|allocated|freed> = the four values.
    Expected& stat(const std::string& name, std::int64_t current, std::int64_t peak,
                   std::int64_t allocated, std::int64_t freed) {
        set(name + ".current", current);
        set(name + ".peak", peak);
        set(name + ".allocated", allocated);
        set(name + ".freed", freed);
        return *this;
    }
    /// The same values for name.all and name.<pool>.
    Expected& pool(const std::string& name, const std::string& pool, std::int64_t current,
                   std::int64_t peak, std::int64_t allocated, std::int64_t freed) {
        stat(name + ".all", current, peak, allocated, freed);
        return stat(name + "." + pool, current, peak, allocated, freed);
    }
    Expected& set(const std::string& key, std::int64_t value) {
        EXPECT_EQ(map.count(key), 1u) << "no such key: " << key;
        map[key] = value;
        return *this;
    }
    MemoryStats map;
};

constexpr auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };

TEST(AllocatorStats, KeysAreExactlyPyTorchsNames) {
    AllocatorStats s;
    MemoryStats m;
    append_memory_stats(m, s);
    EXPECT_EQ(m.size(), 9u * 3u * 4u + 2u * 4u + 6u);
    for (const char* k :
         {"allocated_bytes.all.current", "allocated_bytes.small_pool.peak",
          "reserved_bytes.large_pool.allocated", "active_bytes.all.freed",
          "inactive_split_bytes.all.current", "requested_bytes.all.peak", "allocation.all.current",
          "segment.large_pool.current", "active.small_pool.current", "inactive_split.all.current",
          "oversize_allocations.current", "oversize_segments.peak", "num_alloc_retries", "num_ooms",
          "num_device_alloc", "num_device_free", "num_sync_all_streams", "max_split_size"})
        EXPECT_EQ(m.count(k), 1u) << k;
    EXPECT_EQ(m["max_split_size"], -1) << "no limit, as PyTorch reports it";
}

TEST(AllocatorStats, EveryStatisticOfASmallAndALargeAllocationAndTheirFrees) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm);
    DeviceBlock s = a->allocate(1000);    // 1024 of a 2 MiB small segment
    DeviceBlock l = a->allocate(3 * MiB); // 3 MiB of a 20 MiB large segment
    {
        Expected e;
        e.pool("allocation", "small_pool", 1, 1, 1, 0)
            .pool("allocation", "large_pool", 1, 1, 1, 0)
            .stat("allocation.all", 2, 2, 2, 0)
            .pool("segment", "small_pool", 1, 1, 1, 0)
            .pool("segment", "large_pool", 1, 1, 1, 0)
            .stat("segment.all", 2, 2, 2, 0)
            .pool("active", "small_pool", 1, 1, 1, 0)
            .pool("active", "large_pool", 1, 1, 1, 0)
            .stat("active.all", 2, 2, 2, 0)
            .pool("inactive_split", "small_pool", 1, 1, 1, 0)
            .pool("inactive_split", "large_pool", 1, 1, 1, 0)
            .stat("inactive_split.all", 2, 2, 2, 0)
            .pool("allocated_bytes", "small_pool", 1024, 1024, 1024, 0)
            .pool("allocated_bytes", "large_pool", i64(3 * MiB), i64(3 * MiB), i64(3 * MiB), 0)
            .stat("allocated_bytes.all", i64(3 * MiB + 1024), i64(3 * MiB + 1024),
                  i64(3 * MiB + 1024), 0)
            .pool("reserved_bytes", "small_pool", i64(2 * MiB), i64(2 * MiB), i64(2 * MiB), 0)
            .pool("reserved_bytes", "large_pool", i64(20 * MiB), i64(20 * MiB), i64(20 * MiB), 0)
            .stat("reserved_bytes.all", i64(22 * MiB), i64(22 * MiB), i64(22 * MiB), 0)
            .pool("active_bytes", "small_pool", 1024, 1024, 1024, 0)
            .pool("active_bytes", "large_pool", i64(3 * MiB), i64(3 * MiB), i64(3 * MiB), 0)
            .stat("active_bytes.all", i64(3 * MiB + 1024), i64(3 * MiB + 1024), i64(3 * MiB + 1024),
                  0)
            .pool("inactive_split_bytes", "small_pool", i64(2 * MiB - 1024), i64(2 * MiB - 1024),
                  i64(2 * MiB - 1024), 0)
            .pool("inactive_split_bytes", "large_pool", i64(17 * MiB), i64(17 * MiB), i64(17 * MiB),
                  0)
            .stat("inactive_split_bytes.all", i64(19 * MiB - 1024), i64(19 * MiB - 1024),
                  i64(19 * MiB - 1024), 0)
            .pool("requested_bytes", "small_pool", 1000, 1000, 1000, 0)
            .pool("requested_bytes", "large_pool", i64(3 * MiB), i64(3 * MiB), i64(3 * MiB), 0)
            .stat("requested_bytes.all", i64(3 * MiB + 1000), i64(3 * MiB + 1000),
                  i64(3 * MiB + 1000), 0)
            .set("num_device_alloc", 2);
        EXPECT_EQ(a->memory_stats(), e.map);
    }
    s.reset();
    l.reset();
    {
        // Both blocks merged back: no split block left, everything cached.
        Expected e;
        e.pool("allocation", "small_pool", 0, 1, 1, 1)
            .pool("allocation", "large_pool", 0, 1, 1, 1)
            .stat("allocation.all", 0, 2, 2, 2)
            .pool("segment", "small_pool", 1, 1, 1, 0)
            .pool("segment", "large_pool", 1, 1, 1, 0)
            .stat("segment.all", 2, 2, 2, 0)
            .pool("active", "small_pool", 0, 1, 1, 1)
            .pool("active", "large_pool", 0, 1, 1, 1)
            .stat("active.all", 0, 2, 2, 2)
            .pool("inactive_split", "small_pool", 0, 1, 1, 1)
            .pool("inactive_split", "large_pool", 0, 1, 1, 1)
            .stat("inactive_split.all", 0, 2, 2, 2)
            .pool("allocated_bytes", "small_pool", 0, 1024, 1024, 1024)
            .pool("allocated_bytes", "large_pool", 0, i64(3 * MiB), i64(3 * MiB), i64(3 * MiB))
            .stat("allocated_bytes.all", 0, i64(3 * MiB + 1024), i64(3 * MiB + 1024),
                  i64(3 * MiB + 1024))
            .pool("reserved_bytes", "small_pool", i64(2 * MiB), i64(2 * MiB), i64(2 * MiB), 0)
            .pool("reserved_bytes", "large_pool", i64(20 * MiB), i64(20 * MiB), i64(20 * MiB), 0)
            .stat("reserved_bytes.all", i64(22 * MiB), i64(22 * MiB), i64(22 * MiB), 0)
            .pool("active_bytes", "small_pool", 0, 1024, 1024, 1024)
            .pool("active_bytes", "large_pool", 0, i64(3 * MiB), i64(3 * MiB), i64(3 * MiB))
            .stat("active_bytes.all", 0, i64(3 * MiB + 1024), i64(3 * MiB + 1024),
                  i64(3 * MiB + 1024))
            .pool("inactive_split_bytes", "small_pool", 0, i64(2 * MiB - 1024), i64(2 * MiB - 1024),
                  i64(2 * MiB - 1024))
            .pool("inactive_split_bytes", "large_pool", 0, i64(17 * MiB), i64(17 * MiB),
                  i64(17 * MiB))
            .stat("inactive_split_bytes.all", 0, i64(19 * MiB - 1024), i64(19 * MiB - 1024),
                  i64(19 * MiB - 1024))
            .pool("requested_bytes", "small_pool", 0, 1000, 1000, 1000)
            .pool("requested_bytes", "large_pool", 0, i64(3 * MiB), i64(3 * MiB), i64(3 * MiB))
            .stat("requested_bytes.all", 0, i64(3 * MiB + 1000), i64(3 * MiB + 1000),
                  i64(3 * MiB + 1000))
            .set("num_device_alloc", 2);
        EXPECT_EQ(a->memory_stats(), e.map);
    }
    a->empty_cache();
    const MemoryStats m = a->memory_stats();
    EXPECT_EQ(m.at("reserved_bytes.all.current"), 0);
    EXPECT_EQ(m.at("reserved_bytes.all.freed"), i64(22 * MiB));
    EXPECT_EQ(m.at("segment.small_pool.freed"), 1);
    EXPECT_EQ(m.at("num_device_free"), 2);
    EXPECT_EQ(m.at("num_sync_all_streams"), 1);
}

TEST(AllocatorStats, ReusingAnInactiveSplitBlockShrinksOrRemovesIt) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm);
    DeviceBlock x = a->allocate(512);
    DeviceBlock y = a->allocate(512);
    DeviceBlock z = a->allocate(512);
    y.reset(); // inactive split: y (512) and the tail
    EXPECT_EQ(a->stats().inactive_split_bytes[0].current, i64(2 * MiB - 1024));
    DeviceBlock y2 = a->allocate(512); // takes y whole: one split block fewer
    EXPECT_EQ(a->stats().inactive_split[0].current, 1);
    EXPECT_EQ(a->stats().inactive_split_bytes[0].current, i64(2 * MiB - 1536));
    DeviceBlock w = a->allocate(1024); // shrinks the tail
    EXPECT_EQ(a->stats().inactive_split[0].current, 1);
    EXPECT_EQ(a->stats().inactive_split_bytes[0].current, i64(2 * MiB - 2560));
    (void)x;
    (void)z;
}

TEST(AllocatorStats, RequestedBytesAndActiveStayUntilADeferredFreeCompletes) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm);
    auto s2 = std::make_shared<FakeStream>(2);
    DeviceBlock x = a->allocate(1000, 1);
    a->record_stream(x, s2);
    x.reset();
    AllocatorStats st = a->stats();
    EXPECT_EQ(st.allocated_bytes[0].current, 0);
    EXPECT_EQ(st.active_bytes[0].current, 1024);
    EXPECT_EQ(st.requested_bytes[0].current, 1000);
    s2->complete_all();
    a->allocate(4 * MiB).reset(); // processes the fences
    st = a->stats();
    EXPECT_EQ(st.active_bytes[0].current, 0);
    EXPECT_EQ(st.requested_bytes[0].current, 0);
}

TEST(AllocatorStats, TheDevicePeakIsTheJointPeakNotTheSumOfChipletPeaks) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    a->allocate(4 * MiB, 0, 0).reset();         // chiplet 0: 4 MiB, then 0
    DeviceBlock y = a->allocate(4 * MiB, 0, 1); // chiplet 1: 4 MiB while chiplet 0 has 0
    DeviceBlock z = a->allocate(512, 0, 0);
    EXPECT_EQ(a->stats(0).allocated_bytes[0].peak, i64(4 * MiB));
    EXPECT_EQ(a->stats(1).allocated_bytes[0].peak, i64(4 * MiB));
    EXPECT_EQ(a->max_memory_allocated(), 4 * MiB + 512) << "never 8 MiB at once";
    EXPECT_EQ(a->memory_allocated(), 4 * MiB + 512);
    EXPECT_EQ(a->memory_stats().at("allocated_bytes.large_pool.peak"), i64(4 * MiB));
    EXPECT_EQ(a->memory_stats().at("allocated_bytes.small_pool.peak"), 512);
    EXPECT_EQ(a->memory_reserved(), 42 * MiB) << "20 + 20 + 2, all cached segments count";
    EXPECT_EQ(a->max_memory_reserved(), 42 * MiB);
    (void)y;
    (void)z;
}

// With one thread the allocator skips its mutex (as glibc's malloc does);
// with several it must take it: four threads at once leave exact counts.
TEST(AllocatorStats, ThreadsAllocatingAndFreeingAtOnceLeaveExactCounts) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    constexpr int kThreads = 4;
    constexpr int kAllocs = 20000;
    constexpr std::array<std::uint64_t, 4> kSizes{512, 64 * KiB, 3 * MiB, 512 * KiB + 7};
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&a, &kSizes, t] {
            std::vector<DeviceBlock> held;
            for (int i = 0; i < kAllocs; i++) {
                held.push_back(a->allocate(kSizes[static_cast<std::size_t>(i + t) % kSizes.size()],
                                           0, static_cast<unsigned>(i % 2)));
                if (held.size() > 8)
                    held.erase(held.begin());
            }
        });
    }
    for (std::thread& t : threads)
        t.join();
    const MemoryStats m = a->memory_stats();
    EXPECT_EQ(m.at("allocation.all.current"), 0);
    EXPECT_EQ(m.at("allocation.all.allocated"), kThreads * kAllocs);
    EXPECT_EQ(m.at("allocation.all.freed"), kThreads * kAllocs);
    EXPECT_EQ(m.at("active.all.current"), 0);
    EXPECT_EQ(m.at("allocated_bytes.all.allocated"), m.at("allocated_bytes.all.freed"));
    EXPECT_EQ(m.at("requested_bytes.all.current"), 0);
    EXPECT_EQ(m.at("inactive_split.all.current"), 0) << "every split block merged back";
    EXPECT_EQ(a->memory_allocated(), 0u);
}

TEST(AllocatorStats, PerChipletKeysCarryTheNpuAndChipletPrefix) {
    std::vector<AllocatorPlace> places;
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    for (unsigned npu : {2u, 5u}) {
        auto h = std::make_shared<FakeHbm>();
        h->capacity = 100 * MiB;
        h->next_va = (npu + 1ull) << 40;
        hbm.push_back(h);
        places.push_back(AllocatorPlace{npu, 0, std::make_unique<FakeSegmentProvider>(h)});
    }
    DeviceAllocator a(1, std::move(places));
    DeviceBlock x = a.allocate(2048, 0, 1);
    const MemoryStats per = a.memory_stats_per_chiplet();
    EXPECT_EQ(per.at("npu.5.chiplet.0.allocated_bytes.all.current"), 2048);
    EXPECT_EQ(per.at("npu.2.chiplet.0.allocated_bytes.all.current"), 0);
    EXPECT_EQ(per.at("npu.5.chiplet.0.num_device_alloc"), 1);
    EXPECT_EQ(per.size(), 2 * a.memory_stats().size());
    EXPECT_EQ(a.find_place(5, 0), 1u);
}

TEST(AllocatorStats, ResetPeakSetsPeaksToCurrentValues) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    DeviceBlock x = a->allocate(8 * MiB, 0, 0);
    a->allocate(8 * MiB, 0, 1).reset();
    a->reset_peak_memory_stats();
    EXPECT_EQ(a->max_memory_allocated(), 8 * MiB);
    EXPECT_EQ(a->stats(1).allocated_bytes[0].peak, 0);
    EXPECT_EQ(a->stats(0).allocated_bytes[0].peak, i64(8 * MiB));
    EXPECT_EQ(a->stats().allocation[0].allocated, 2) << "accumulated counts stay";
    (void)x;
}

TEST(AllocatorStats, ResetAccumulatedClearsAllocatedFreedAndCounters) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 1, 4 * MiB);
    DeviceBlock x = a->allocate(MiB);
    EXPECT_THROW(a->allocate(3 * MiB), Error);
    a->reset_accumulated_memory_stats();
    const AllocatorStats s = a->stats();
    EXPECT_EQ(s.allocation[0].allocated, 0);
    EXPECT_EQ(s.allocation[0].freed, 0);
    EXPECT_EQ(s.allocation[0].current, 1) << "current values stay";
    EXPECT_EQ(s.allocated_bytes[0].peak, i64(MiB)) << "peaks stay";
    EXPECT_EQ(s.num_ooms, 0);
    EXPECT_EQ(s.num_alloc_retries, 0);
    EXPECT_EQ(s.num_device_alloc, 0);
    EXPECT_EQ(a->stats(0).num_ooms, 0);
    (void)x;
}

TEST(AllocatorStats, MaxSplitSizeIsReportedInBytes) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2, 1024 * MiB, AllocatorConfig::parse("max_split_size_mb:64"));
    EXPECT_EQ(a->memory_stats().at("max_split_size"), i64(64 * MiB)) << "not summed";
    EXPECT_EQ(a->memory_stats_per_chiplet().at("npu.0.chiplet.1.max_split_size"), i64(64 * MiB));
}

TEST(AllocatorSummary, TheTableHasTheIssuesExactLayout) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 4);
    DeviceBlock x = a->allocate(512 * KiB, 0, 0);
    a->allocate(512 * KiB, 0, 0).reset();
    DeviceBlock l = a->allocate(3 * MiB, 0, 2);
    EXPECT_THROW(a->allocate(2048 * MiB, 0, 3), Error);
    SummaryOptions o;
    o.title_word = "torch_rbln";
    o.pid = 4242;
    const std::string expected =
        "torch_rbln memory summary (device=rbln:0, MiB)\n"
        "scope: pid 4242 -- caching allocator only, this process only\n"
        "npu: physical NPU id as in device_summary() (relative to RBLN_VISIBLE_DEVICES, may "
        "differ from rbln-smi)\n"
        "  npu  chiplet    allocated   alloc peak     reserved    resv peak       active       "
        "cached\n"
        "--------------------------------------------------------------------------------------"
        "------\n"
        "    0        0          0.5          1.0          2.0          2.0          0.5       "
        "   1.5\n"
        "    0        1          0.0          0.0          0.0          0.0          0.0       "
        "   0.0\n"
        "    0        2          3.0          3.0         20.0         20.0          3.0       "
        "  17.0\n"
        "    0        3          0.0          0.0          0.0          0.0          0.0       "
        "   0.0\n"
        "--------------------------------------------------------------------------------------"
        "------\n"
        "         total          3.5          4.0         22.0         22.0          3.5       "
        "  18.5\n"
        "alloc retries: 1   ooms: 1\n";
    EXPECT_EQ(a->memory_summary(o), expected);
    (void)x;
    (void)l;
}

TEST(AllocatorSummary, TheDefaultTitleWordIsRblnAndThePidIsThisProcesss) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 1, 1024 * MiB, {}, 3);
    const std::string s = a->memory_summary();
    EXPECT_THAT(s, ::testing::StartsWith("rbln memory summary (device=rbln:3, MiB)\n"));
    EXPECT_THAT(s, ::testing::HasSubstr("scope: pid " + std::to_string(::getpid()) + " --"));
}

TEST(AllocatorSummary, TheTotalRowAddsChipletPeaksWhichBoundTheJointPeak) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    a->allocate(4 * MiB, 0, 0).reset();
    a->allocate(4 * MiB, 0, 1).reset();
    const std::string s = a->memory_summary();
    EXPECT_THAT(s, ::testing::HasSubstr("         total          0.0          8.0         40.0"));
    EXPECT_EQ(a->max_memory_allocated(), 4 * MiB);
}

} // namespace
} // namespace rbln::test::allocator_stats_test
