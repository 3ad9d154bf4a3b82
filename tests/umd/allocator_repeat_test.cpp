// SPDX-License-Identifier: GPL-2.0
// The caching allocator's repeat shortcut (DeviceAllocator::
// set_repeat_shortcut): a block freed right after its allocation is parked
// and handed out again to the same request.  It must change nothing a
// caller can see, so the same operations run on two allocators, one with
// the shortcut and one without, and every block, segment and statistic is
// compared; plus the points where a parked block must be given back.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/error.hpp"

namespace rbln::test::allocator_repeat_test {
namespace {

constexpr auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };

TEST(AllocatorRepeat, RepeatedPairsCountInTheStatisticsAsFullPairs) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm);
    for (int i = 0; i < 1000; i++) {
        DeviceBlock b = a->allocate(1000);
        ASSERT_EQ(b.device_va(), hbm[0]->live.begin()->first) << "pair " << i;
    }
    const AllocatorStats s = a->stats();
    const auto rest = i64(2 * MiB - 1024);
    EXPECT_EQ(s.allocation[0].allocated, 1000);
    EXPECT_EQ(s.allocation[0].freed, 1000);
    EXPECT_EQ(s.allocation[0].current, 0);
    EXPECT_EQ(s.allocation[0].peak, 1);
    EXPECT_EQ(s.allocated_bytes[1].allocated, 1000 * 1024);
    EXPECT_EQ(s.allocated_bytes[1].freed, 1000 * 1024);
    EXPECT_EQ(s.active_bytes[0].freed, 1000 * 1024);
    EXPECT_EQ(s.requested_bytes[0].allocated, 1000 * 1000);
    EXPECT_EQ(s.requested_bytes[0].peak, 1000);
    EXPECT_EQ(s.inactive_split[1].allocated, 1000) << "the remainder, once per pair";
    EXPECT_EQ(s.inactive_split[1].freed, 1000);
    EXPECT_EQ(s.inactive_split[1].current, 0) << "merged back after the last pair";
    EXPECT_EQ(s.inactive_split_bytes[0].allocated, 1000 * rest);
    EXPECT_EQ(s.inactive_split_bytes[0].peak, rest);
    EXPECT_EQ(s.segment[0].allocated, 1);
    EXPECT_EQ(s.num_device_alloc, 1);
}

TEST(AllocatorRepeat, StatisticsReadBetweenAFreeAndTheNextAllocationSeeTheBlockFreed) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 4);
    DeviceBlock warm = a->allocate(3 * MiB, kDefaultStream, 2u);
    warm.reset();
    for (int i = 0; i < 3; i++) {
        DeviceBlock b = a->allocate(3 * MiB, kDefaultStream, 2u);
        EXPECT_EQ(a->memory_allocated(), 3 * MiB);
        b.reset();
        EXPECT_EQ(a->memory_allocated(), 0u) << "pair " << i;
        EXPECT_EQ(a->stats(2).inactive_split[2].current, 0) << "merged back when read";
        EXPECT_EQ(a->memory_stats_per_chiplet().at("npu.0.chiplet.2.active_bytes.all.current"), 0);
    }
}

TEST(AllocatorRepeat, APeakResetBetweenPairsIsRaisedAgainByTheNextAllocation) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    DeviceBlock b = a->allocate(MiB);
    b.reset();
    b = a->allocate(MiB); // a repeat
    b.reset();            // parked
    a->reset_peak_memory_stats();
    EXPECT_EQ(a->max_memory_allocated(), 0u);
    b = a->allocate(MiB);
    EXPECT_EQ(a->max_memory_allocated(), MiB);
    EXPECT_EQ(a->stats(0).allocated_bytes[1].peak, i64(MiB));
    b.reset();
    a->reset_accumulated_memory_stats();
    b = a->allocate(MiB);
    b.reset();
    EXPECT_EQ(a->stats().allocation[0].allocated, 1) << "only the pair after the reset";
}

TEST(AllocatorRepeat, EmptyCacheGivesAParkedBlocksSegmentBack) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm);
    for (int i = 0; i < 2; i++) {
        DeviceBlock b = a->allocate(64 * KiB);
    }
    ASSERT_EQ(hbm[0]->live.size(), 1u);
    a->empty_cache();
    EXPECT_TRUE(hbm[0]->live.empty());
    EXPECT_EQ(a->memory_reserved(), 0u);
}

TEST(AllocatorRepeat, AnotherRequestSizeStreamOrPlaceTakesTheFullPath) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    DeviceBlock b = a->allocate(4096);
    const std::uint64_t va = b.device_va();
    b.reset();
    b = a->allocate(4096);
    b.reset(); // parked
    DeviceBlock other_stream = a->allocate(4096, 1);
    EXPECT_NE(other_stream.device_va(), va) << "a stream reuses only its own blocks";
    DeviceBlock same = a->allocate(4096);
    EXPECT_EQ(same.device_va(), va);
    same.reset();
    DeviceBlock larger = a->allocate(8192);
    EXPECT_EQ(larger.device_va(), va) << "the parked block merged back first";
    DeviceBlock elsewhere = a->allocate(4096, kDefaultStream, 1u);
    EXPECT_EQ(elsewhere.place(), 1u);
}

TEST(AllocatorRepeat, ABlockUsedByAnotherStreamIsNotParked) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm);
    auto other = std::make_shared<FakeStream>(5);
    DeviceBlock b = a->allocate(MiB);
    b.reset();
    b = a->allocate(MiB);
    const std::uint64_t va = b.device_va();
    a->record_stream(b, other);
    b.reset();
    DeviceBlock next = a->allocate(MiB);
    EXPECT_NE(next.device_va(), va) << "still in use by stream 5";
    other->complete_all();
    next.reset();
    DeviceBlock again = a->allocate(MiB);
    EXPECT_EQ(again.device_va(), va) << "back once stream 5's fence is done";
}

TEST(AllocatorRepeat, AFenceCompletingBesideAParkedBlockMergesAsOnTheFullPath) {
    std::vector<std::uint64_t> seen[2];
    MemoryStats stats[2];
    for (const bool shortcut : {true, false}) {
        std::vector<std::shared_ptr<FakeHbm>> hbm;
        auto a = fake_allocator(hbm);
        a->set_repeat_shortcut(shortcut);
        auto other = std::make_shared<FakeStream>(5);
        std::vector<std::uint64_t>& out = seen[shortcut ? 0 : 1];
        DeviceBlock first = a->allocate(4096);
        out.push_back(first.device_va());
        a->record_stream(first, other);
        first.reset(); // waits for stream 5
        DeviceBlock b = a->allocate(4096);
        out.push_back(b.device_va());
        b.reset(); // parked (with the shortcut), next to the waiting block
        other->complete_all();
        // The waiting block comes back (merging with its neighbours) before
        // this request is looked up.
        DeviceBlock next = a->allocate(4096);
        out.push_back(next.device_va());
        out.push_back(next.size());
        next.reset();
        DeviceBlock whole = a->allocate(MiB);
        out.push_back(whole.device_va());
        out.push_back(static_cast<std::uint64_t>(hbm[0]->allocs));
        whole.reset();
        stats[shortcut ? 0 : 1] = a->memory_stats();
    }
    EXPECT_EQ(seen[0], seen[1]);
    EXPECT_EQ(seen[1][2], seen[1][0]) << "the whole segment was free again";
    EXPECT_EQ(seen[1][5], 1u) << "and served a 1 MiB request";
    EXPECT_EQ(stats[0], stats[1]);
}

/// A stream whose fences run @hook when waited for: the allocator waits
/// without its mutex, so the hook plays another thread using it meanwhile.
class HookedStream final : public StreamFenceSource {
public:
    explicit HookedStream(std::function<void()> hook) : hook_(std::move(hook)) {}
    StreamId stream_id() const noexcept override { return 9; }
    std::unique_ptr<StreamFence> record() override { return std::make_unique<Fence>(hook_); }

private:
    class Fence final : public StreamFence {
    public:
        explicit Fence(std::function<void()> hook) : hook_(std::move(hook)) {}
        bool query() override { return false; }
        void synchronize() override { hook_(); }

    private:
        std::function<void()> hook_;
    };
    std::function<void()> hook_;
};

TEST(AllocatorRepeat, APairMadeWhileEmptyCacheWaitsIsSettledBeforeTheWaitedBlockReturns) {
    std::uint64_t reserved[2] = {};
    MemoryStats stats[2];
    for (const bool shortcut : {true, false}) {
        std::vector<std::shared_ptr<FakeHbm>> hbm;
        auto a = fake_allocator(hbm);
        a->set_repeat_shortcut(shortcut);
        auto waited = std::make_shared<HookedStream>([&a] {
            for (int i = 0; i < 2; i++) {
                DeviceBlock b = a->allocate(4096); // next to the waited block
            }
        });
        DeviceBlock first = a->allocate(4096);
        a->record_stream(first, waited);
        first.reset();
        a->empty_cache();
        reserved[shortcut ? 0 : 1] = a->memory_reserved();
        stats[shortcut ? 0 : 1] = a->memory_stats();
    }
    EXPECT_EQ(reserved[1], 0u) << "the segment merged whole and went back";
    EXPECT_EQ(reserved[0], reserved[1]);
    EXPECT_EQ(stats[0], stats[1]);
}

// A block that needed a new segment is not parked: after its free the same
// lookup may not find it.  Here an oversize cached block (22 MiB, >= 21)
// comes first in best-fit order and refuses the 20.5 MiB request, so the
// full path asks for a new segment every time.
TEST(AllocatorRepeat, ABlockFromANewSegmentIsLookedUpAgainAfterItsFree) {
    std::vector<std::shared_ptr<FakeHbm>> on_hbm;
    std::vector<std::shared_ptr<FakeHbm>> off_hbm;
    const AllocatorConfig config = AllocatorConfig::parse("max_split_size_mb:21");
    auto on = fake_allocator(on_hbm, 1, 1024 * MiB, config);
    auto off = fake_allocator(off_hbm, 1, 1024 * MiB, config);
    off->set_repeat_shortcut(false);
    std::vector<std::uint64_t> vas[2];
    int i = 0;
    for (DeviceAllocator* a : {on.get(), off.get()}) {
        DeviceBlock oversize = a->allocate(21 * MiB);
        oversize.reset();
        for (int k = 0; k < 3; k++) {
            DeviceBlock b = a->allocate(20 * MiB + 512 * KiB);
            vas[i].push_back(b.device_va());
        }
        i++;
    }
    EXPECT_EQ(vas[0], vas[1]);
    EXPECT_EQ(on_hbm[0]->allocs, off_hbm[0]->allocs);
    EXPECT_EQ(off_hbm[0]->allocs, 4)
        << "every request needs a segment of its own: revisit the test";
    EXPECT_EQ(on->memory_stats(), off->memory_stats());
}

// Several threads each repeating their own pair: the shortcut passes from
// one to another under the device mutex, and the counts stay exact.
TEST(AllocatorRepeat, ThreadsRepeatingPairsAtOnceLeaveExactCounts) {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    auto a = fake_allocator(hbm, 2);
    constexpr int kThreads = 4;
    constexpr int kPairs = 20000;
    constexpr std::uint64_t kSizes[kThreads] = {512, 512, 64 * KiB, 3 * MiB};
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&a, &kSizes, t] {
            for (int i = 0; i < kPairs; i++) {
                DeviceBlock b =
                    a->allocate(kSizes[t], kDefaultStream, static_cast<unsigned>(t % 2));
                if (i % 1000 == 0)
                    (void)a->memory_allocated(); // a reader settles in between
            }
        });
    }
    for (std::thread& t : threads)
        t.join();
    const MemoryStats m = a->memory_stats();
    EXPECT_EQ(m.at("allocation.all.current"), 0);
    EXPECT_EQ(m.at("allocation.all.allocated"), kThreads * kPairs);
    EXPECT_EQ(m.at("allocation.all.freed"), kThreads * kPairs);
    EXPECT_EQ(m.at("allocated_bytes.all.allocated"), kPairs * i64(512 + 512 + 64 * KiB + 3 * MiB));
    EXPECT_EQ(m.at("allocated_bytes.all.allocated"), m.at("allocated_bytes.all.freed"));
    EXPECT_EQ(m.at("inactive_split.all.allocated"), m.at("inactive_split.all.freed"));
    EXPECT_EQ(m.at("inactive_split.all.current"), 0) << "every split block merged back";
    EXPECT_LE(m.at("allocation.all.peak"), kThreads);
    a->empty_cache();
    EXPECT_EQ(a->memory_reserved(), 0u);
}

// ---- the same operations with and without the shortcut ---------------------

struct Variant {
    const char* name;
    unsigned chiplets;
    std::uint64_t capacity;
    const char* config;
};

void PrintTo(const Variant& v, std::ostream* os) {
    *os << v.name;
}

/// One allocator of the pair and what a test holds of it.
struct Side {
    std::vector<std::shared_ptr<FakeHbm>> hbm;
    std::unique_ptr<DeviceAllocator> alloc;
    std::shared_ptr<FakeStream> other = std::make_shared<FakeStream>(7);
    std::vector<DeviceBlock> live;
};

class AllocatorRepeatTwin : public ::testing::TestWithParam<Variant> {
protected:
    void SetUp() override {
        const Variant& v = GetParam();
        for (Side* s : {&on_, &off_})
            s->alloc =
                fake_allocator(s->hbm, v.chiplets, v.capacity, AllocatorConfig::parse(v.config));
        off_.alloc->set_repeat_shortcut(false);
    }

    std::uint64_t next() {
        seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull;
        return seed_ >> 33;
    }

    /// The keys whose values differ ("" if none).
    static std::string differences(const MemoryStats& with, const MemoryStats& without) {
        std::string out;
        for (const auto& [key, value] : with) {
            const auto it = without.find(key);
            if (it == without.end())
                out += " " + key + " only with the shortcut;";
            else if (it->second != value)
                out += " " + key + " " + std::to_string(value) + " (full path " +
                       std::to_string(it->second) + ");";
        }
        if (without.size() != with.size())
            out += " the full path has other keys;";
        return out;
    }

    static void expect_same_stats(const Side& a, const Side& b, int op) {
        ASSERT_EQ(differences(a.alloc->memory_stats(), b.alloc->memory_stats()), "") << "op " << op;
        ASSERT_EQ(
            differences(a.alloc->memory_stats_per_chiplet(), b.alloc->memory_stats_per_chiplet()),
            "")
            << "op " << op;
    }

    static void expect_same_segments(const Side& a, const Side& b, int op) {
        for (std::size_t c = 0; c < a.hbm.size(); c++) {
            ASSERT_EQ(a.hbm[c]->live, b.hbm[c]->live) << "chiplet " << c << ", op " << op;
            ASSERT_EQ(a.hbm[c]->asked, b.hbm[c]->asked) << "chiplet " << c << ", op " << op;
        }
    }

    Side on_;
    Side off_;
    std::uint64_t seed_ = 20261206;
};

struct Request {
    std::uint64_t size;
    StreamId stream;
    unsigned place;
};

TEST_P(AllocatorRepeatTwin, GivesTheSameBlocksSegmentsAndStatisticsAsTheFullPath) {
    static constexpr std::uint64_t kSizes[] = {1,       512,     700,     4096,     65536,
                                               MiB - 1, MiB,     3 * MiB, 12 * MiB, 25 * MiB,
                                               100000,  2 * MiB, 9 * MiB, 30 * MiB, 44 * MiB};
    const unsigned places = GetParam().chiplets;
    std::optional<Request> last;
    int ooms = 0;
    for (int op = 0; op < 30000; op++) {
        const std::uint64_t pick = next() % 1000;
        if (pick < 450 || on_.live.empty()) {
            // Half of the requests repeat the last one, to make pairs.
            Request r{kSizes[next() % std::size(kSizes)], next() % 2,
                      static_cast<unsigned>(next() % places)};
            if (last && next() % 2 == 0)
                r = *last;
            last = r;
            std::optional<DeviceBlock> got[2];
            std::string error[2];
            int i = 0;
            for (Side* s : {&on_, &off_}) {
                try {
                    got[i] = s->alloc->allocate(r.size, r.stream, r.place);
                } catch (const Error& e) {
                    ASSERT_EQ(e.code(), Errc::OutOfMemory) << e.what();
                    error[i] = e.what();
                }
                i++;
            }
            ASSERT_EQ(error[0], error[1]) << "op " << op;
            if (!got[0]) {
                ooms++;
                continue;
            }
            ASSERT_EQ(got[0]->device_va(), got[1]->device_va()) << "op " << op;
            ASSERT_EQ(got[0]->size(), got[1]->size()) << "op " << op;
            ASSERT_EQ(got[0]->handle(), got[1]->handle()) << "op " << op;
            ASSERT_EQ(got[0]->segment_offset(), got[1]->segment_offset()) << "op " << op;
            ASSERT_EQ(got[0]->place(), got[1]->place()) << "op " << op;
            on_.live.push_back(std::move(*got[0]));
            off_.live.push_back(std::move(*got[1]));
        } else if (pick < 800) {
            // Free the newest block (the one a repeat would park) ...
            for (Side* s : {&on_, &off_})
                s->live.pop_back();
        } else if (pick < 930) {
            // ... or any.
            const std::size_t i = next() % on_.live.size();
            for (Side* s : {&on_, &off_}) {
                s->live[i] = std::move(s->live.back());
                s->live.pop_back();
            }
        } else if (pick < 950) {
            const std::size_t i = next() % on_.live.size();
            for (Side* s : {&on_, &off_})
                s->alloc->record_stream(s->live[i], s->other);
        } else if (pick < 965) {
            for (Side* s : {&on_, &off_})
                s->other->complete_all();
        } else if (pick < 970) {
            for (Side* s : {&on_, &off_})
                s->alloc->empty_cache();
        } else if (pick < 978) {
            for (Side* s : {&on_, &off_})
                s->alloc->reset_peak_memory_stats();
        } else if (pick < 982) {
            for (Side* s : {&on_, &off_})
                s->alloc->reset_accumulated_memory_stats();
        } else {
            ASSERT_EQ(on_.alloc->max_memory_allocated(), off_.alloc->max_memory_allocated())
                << "op " << op;
            ASSERT_NO_FATAL_FAILURE(expect_same_stats(on_, off_, op));
            ASSERT_NO_FATAL_FAILURE(expect_same_segments(on_, off_, op));
        }
        if (on_.live.size() > 400) {
            for (Side* s : {&on_, &off_})
                s->live.erase(s->live.begin(), s->live.begin() + 200);
        }
    }
    expect_same_stats(on_, off_, -1);
    for (Side* s : {&on_, &off_}) {
        s->live.clear();
        s->other->complete_all();
    }
    expect_same_stats(on_, off_, -2);
    for (Side* s : {&on_, &off_})
        s->alloc->empty_cache();
    expect_same_stats(on_, off_, -3);
    expect_same_segments(on_, off_, -3);
    EXPECT_EQ(on_.alloc->memory_reserved(), 0u);
    if (GetParam().capacity < 256 * MiB) {
        EXPECT_GT(ooms, 0) << "the small variants are meant to reach out of memory";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, AllocatorRepeatTwin,
    ::testing::Values(Variant{"one_chiplet", 1, 1024 * MiB, ""},
                      Variant{"four_chiplets", 4, 1024 * MiB, ""},
                      Variant{"max_split", 2, 1024 * MiB, "max_split_size_mb:22"},
                      Variant{"roundup", 1, 1024 * MiB, "roundup_power2_divisions:4"},
                      Variant{"gc", 1, 200 * MiB, "garbage_collection_threshold:0.5"},
                      Variant{"tight", 2, 96 * MiB, "max_split_size_mb:22"}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

} // namespace
} // namespace rbln::test::allocator_repeat_test
