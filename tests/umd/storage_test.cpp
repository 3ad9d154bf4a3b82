// SPDX-License-Identifier: GPL-2.0
// Lazy device storage (rbln/storage.hpp) on a Device over a FakeKernel
// that runs its packets, with the caching allocator over the same fake:
// commit at first use, statistics, OOM, RBLN_EAGER_MALLOC, every coherence
// transition (and that only the documented ones move data, counted both
// by the storage and by the device's copies), bind_device_memory and
// set_device_layout_like.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "device_fixture.hpp"
#include "fake_kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/storage.hpp"
#include "testing.hpp"

namespace rbln::test::storage_test {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kBytes = 4096;

EnvSource env_with(const std::optional<std::string>& eager) {
    return [eager](std::string_view name) -> std::optional<std::string> {
        if (name == "RBLN_EAGER_MALLOC")
            return eager;
        return std::nullopt;
    };
}

/// A device, its allocator (made before it, destroyed after it) and a
/// stream, all over one FakeKernel.
struct Card {
    explicit Card(std::uint64_t hbm = 512 * kMiB) : k(std::make_shared<FakeKernel>()) {
        for (auto& h : k->device.hbm_size)
            h = hbm;
        alloc = DeviceAllocator::for_kernels(0, {{0, k}});
        dev = fake_device(k, Path::Ioctl);
        stream.emplace(dev->default_stream());
    }
    ~Card() {
        stream.reset();
        dev.reset();
    }
    Card(const Card&) = delete;
    Card& operator=(const Card&) = delete;
    Card(Card&&) = delete;
    Card& operator=(Card&&) = delete;

    std::shared_ptr<Storage> lazy(std::uint64_t n = kBytes, ElementType t = ElementType::U8) {
        return Storage::create(dev, *alloc, n, t, StorageOptions{CommitMode::Lazy, {}});
    }
    std::uint64_t h2d() const {
        const CopyStats s = dev->copy_stats();
        return s.sync_h2d + s.async_h2d;
    }
    std::uint64_t d2h() const {
        const CopyStats s = dev->copy_stats();
        return s.sync_d2h + s.async_d2h;
    }
    /// The card's bytes of @s (the fake's memory behind its VA).
    std::vector<std::byte> on_card(Storage& s) {
        const std::byte* p = k->translate(s.data_ptr(), s.nbytes());
        return p == nullptr ? std::vector<std::byte>{} : std::vector<std::byte>(p, p + s.nbytes());
    }
    /// A device operation that overwrites @s with @value (a real FILL job).
    void device_fill(Storage& s, std::uint8_t value) {
        const auto& m = s.device_use(*stream, DeviceAccess::Write);
        stream->fill(m, 0, s.nbytes(), value);
        stream->synchronize();
    }

    std::shared_ptr<FakeKernel> k;
    std::unique_ptr<DeviceAllocator> alloc;
    std::shared_ptr<Device> dev;
    std::optional<Stream> stream;
};

std::vector<std::byte> bytes(std::size_t n, std::uint8_t v) {
    return std::vector<std::byte>(n, std::byte{v});
}

// ---- identity, commit, statistics ----------------------------------------

TEST(StorageLazy, ANewStorageHasAnIdentityButNoDeviceMemory) {
    Card c;
    auto a = c.lazy();
    auto b = c.lazy();
    EXPECT_NE(a->id(), 0u);
    EXPECT_NE(a->id(), b->id());
    EXPECT_FALSE(a->resident());
    EXPECT_EQ(a->coherence(), Coherence::InSync);
    EXPECT_EQ(c.alloc->memory_allocated(), 0u);
    EXPECT_EQ(c.alloc->memory_reserved(), 0u);
    EXPECT_EQ(c.k->count(KernelOp::BoCreate), 0) << "no device memory asked of the kernel";
    EXPECT_EQ(a->transfers().commits, 0u);
}

TEST(StorageLazy, StatisticsRiseAtTheFirstDeviceUseOnly) {
    Card c;
    auto s = c.lazy(128 * 128 * 2, ElementType::Fp16);
    EXPECT_EQ(c.alloc->memory_allocated(), 0u);
    const auto& m = s->device_use(*c.stream, DeviceAccess::Read);
    EXPECT_TRUE(s->resident());
    EXPECT_EQ(c.alloc->memory_allocated(), 128u * 128 * 2);
    EXPECT_GE(c.alloc->memory_reserved(), c.alloc->memory_allocated());
    EXPECT_EQ(c.alloc->max_memory_allocated(), c.alloc->memory_allocated());
    EXPECT_EQ(m->size(), s->nbytes());
    EXPECT_FALSE(m->is_host());
    s->device_use(*c.stream, DeviceAccess::ReadWrite);
    EXPECT_EQ(s->transfers().commits, 1u) << "committed once";
    EXPECT_EQ(c.alloc->memory_allocated(), 128u * 128 * 2);
    s.reset();
    EXPECT_EQ(c.alloc->memory_allocated(), 0u) << "the block went back to the cache";
}

TEST(StorageLazy, DataPtrIsTheDeviceVaAndCommitsWithoutMovingData) {
    Card c;
    auto s = c.lazy();
    const std::uint64_t va = s->data_ptr();
    EXPECT_TRUE(s->resident());
    EXPECT_EQ(va, s->device_use(*c.stream, DeviceAccess::Read)->device_va());
    EXPECT_NE(c.k->translate(va, kBytes), nullptr) << "an address in the card's VM";
    EXPECT_EQ(s->transfers().uploads + s->transfers().downloads, 0u);
    EXPECT_EQ(c.h2d() + c.d2h(), 0u);
}

TEST(StorageLazy, OutOfMemoryAtFirstUseIsTheSameTypedErrorAsAtEagerCreation) {
    Card c(64 * kMiB);
    auto s = Storage::create(c.dev, *c.alloc, 100 * kMiB, ElementType::U8,
                             StorageOptions{CommitMode::Lazy, 0u});
    EXPECT_FALSE(s->resident()) << "creation cannot fail for lack of memory";
    std::string lazy_message;
    try {
        s->device_use(*c.stream, DeviceAccess::Write);
        FAIL() << "no OOM";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory);
        EXPECT_THAT(e.what(), HasSubstr("NPU 0 chiplet 0 is out of memory"));
        lazy_message = e.what();
    }
    EXPECT_FALSE(s->resident());
    EXPECT_EQ(s->coherence(), Coherence::InSync) << "a failed use changes no state";
    EXPECT_EQ(c.alloc->stats().num_ooms, 1);
    try {
        Storage::create(c.dev, *c.alloc, 100 * kMiB, ElementType::U8,
                        StorageOptions{CommitMode::Eager, 0u});
        FAIL() << "no OOM";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory);
        EXPECT_EQ(e.what(), lazy_message);
    }
}

TEST(StorageLazy, EagerModeCommitsAtCreation) {
    Card c;
    auto s = Storage::create(c.dev, *c.alloc, kBytes, ElementType::U8,
                             StorageOptions{CommitMode::Eager, {}});
    EXPECT_TRUE(s->resident());
    EXPECT_EQ(c.alloc->memory_allocated(), kBytes);
    EXPECT_EQ(s->transfers().uploads, 0u);
}

TEST(StorageLazy, RblnEagerMallocOneMakesTheProcessModeEager) {
    Card c;
    ProcessOptions p;
    p.runtime.env = env_with("1");
    reset_process_for_tests(std::move(p));
    auto eager = Storage::create(c.dev, *c.alloc, kBytes);
    p = {};
    p.runtime.env = env_with(std::nullopt);
    reset_process_for_tests(std::move(p));
    auto lazy = Storage::create(c.dev, *c.alloc, kBytes);
    reset_process_for_tests();
    EXPECT_TRUE(eager->resident());
    EXPECT_FALSE(lazy->resident());
}

TEST(StorageLazy, RblnEagerMallocValues) {
    EXPECT_EQ(commit_mode_from_environment(env_with(std::nullopt)), CommitMode::Lazy);
    EXPECT_EQ(commit_mode_from_environment(env_with("")), CommitMode::Lazy);
    EXPECT_EQ(commit_mode_from_environment(env_with("0")), CommitMode::Lazy);
    EXPECT_EQ(commit_mode_from_environment(env_with("1")), CommitMode::Eager);
    try {
        commit_mode_from_environment(env_with("yes"));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::BadConfig);
        EXPECT_THAT(e.what(), HasSubstr("RBLN_EAGER_MALLOC"));
        EXPECT_THAT(e.what(), HasSubstr("'yes'"));
    }
}

TEST(StorageLazy, SizesMustBeWholeElementsAndAccessesInRange) {
    Card c;
    EXPECT_THROW(c.lazy(3, ElementType::Fp16), Error);
    auto s = c.lazy(16);
    std::vector<std::byte> buf(8);
    try {
        s->read(12, buf);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_THAT(e.what(), HasSubstr("outside the storage of 16 bytes"));
    }
    EXPECT_THROW(s->write(9, buf), Error);
    EXPECT_EQ(s->coherence(), Coherence::InSync);
}

// ---- coherence: every transition -------------------------------------------

enum class Op { DeviceRead, DeviceWrite, DeviceReadWrite, HostRead, HostWriteWhole, HostWritePart };

struct Transition {
    Coherence from;
    Op op;
    Coherence to;
    std::uint64_t uploads;
    std::uint64_t downloads;
};

const char* name(Coherence c) {
    switch (c) {
    case Coherence::HostLatest:
        return "HostLatest";
    case Coherence::DeviceLatest:
        return "DeviceLatest";
    case Coherence::InSync:
        return "InSync";
    }
    return "?";
}

const char* name(Op op) {
    switch (op) {
    case Op::DeviceRead:
        return "DeviceRead";
    case Op::DeviceWrite:
        return "DeviceWrite";
    case Op::DeviceReadWrite:
        return "DeviceReadWrite";
    case Op::HostRead:
        return "HostRead";
    case Op::HostWriteWhole:
        return "HostWriteWhole";
    case Op::HostWritePart:
        return "HostWritePart";
    }
    return "?";
}

void PrintTo(const Transition& t, std::ostream* os) {
    *os << name(t.from) << "+" << name(t.op);
}

class StorageTransition : public ::testing::TestWithParam<Transition> {};

/// A resident storage of the card in state @c.
std::shared_ptr<Storage> storage_in(Card& card, Coherence c) {
    auto s = card.lazy();
    s->commit();
    if (c == Coherence::HostLatest)
        s->write(0, bytes(kBytes, 0x11));
    else if (c == Coherence::DeviceLatest)
        card.device_fill(*s, 0x22);
    return s;
}

void apply(Card& card, Storage& s, Op op) {
    std::vector<std::byte> buf(kBytes);
    switch (op) {
    case Op::DeviceRead:
        s.device_use(*card.stream, DeviceAccess::Read);
        break;
    case Op::DeviceWrite:
        s.device_use(*card.stream, DeviceAccess::Write);
        break;
    case Op::DeviceReadWrite:
        s.device_use(*card.stream, DeviceAccess::ReadWrite);
        break;
    case Op::HostRead:
        s.read(0, buf);
        break;
    case Op::HostWriteWhole:
        s.write(0, buf);
        break;
    case Op::HostWritePart:
        s.write(8, std::span<const std::byte>(buf).first(8));
        break;
    }
}

TEST_P(StorageTransition, MovesDataOnlyAtTheDocumentedStateChanges) {
    const Transition t = GetParam();
    Card card;
    auto s = storage_in(card, t.from);
    ASSERT_EQ(s->coherence(), t.from);
    const StorageTransfers before = s->transfers();
    const std::uint64_t h2d = card.h2d();
    const std::uint64_t d2h = card.d2h();
    apply(card, *s, t.op);
    EXPECT_EQ(s->coherence(), t.to);
    EXPECT_EQ(s->transfers().uploads - before.uploads, t.uploads);
    EXPECT_EQ(s->transfers().downloads - before.downloads, t.downloads);
    EXPECT_EQ(s->transfers().upload_bytes - before.upload_bytes, t.uploads * kBytes);
    EXPECT_EQ(s->transfers().download_bytes - before.download_bytes, t.downloads * kBytes);
    EXPECT_EQ(card.h2d() - h2d, t.uploads) << "copies the device ran";
    EXPECT_EQ(card.d2h() - d2h, t.downloads) << "copies the device ran";
    // The same operation again moves nothing more (a state is reached once).
    const StorageTransfers after = s->transfers();
    apply(card, *s, t.op);
    EXPECT_EQ(s->transfers().uploads, after.uploads);
    EXPECT_EQ(s->transfers().downloads, after.downloads);
}

using C = Coherence;
INSTANTIATE_TEST_SUITE_P(
    All, StorageTransition,
    ::testing::Values(Transition{C::InSync, Op::DeviceRead, C::InSync, 0, 0},
                      Transition{C::InSync, Op::DeviceWrite, C::DeviceLatest, 0, 0},
                      Transition{C::InSync, Op::DeviceReadWrite, C::DeviceLatest, 0, 0},
                      Transition{C::InSync, Op::HostRead, C::InSync, 0, 0},
                      Transition{C::InSync, Op::HostWriteWhole, C::HostLatest, 0, 0},
                      Transition{C::InSync, Op::HostWritePart, C::HostLatest, 0, 0},
                      Transition{C::HostLatest, Op::DeviceRead, C::InSync, 1, 0},
                      Transition{C::HostLatest, Op::DeviceWrite, C::DeviceLatest, 0, 0},
                      Transition{C::HostLatest, Op::DeviceReadWrite, C::DeviceLatest, 1, 0},
                      Transition{C::HostLatest, Op::HostRead, C::HostLatest, 0, 0},
                      Transition{C::HostLatest, Op::HostWriteWhole, C::HostLatest, 0, 0},
                      Transition{C::HostLatest, Op::HostWritePart, C::HostLatest, 0, 0},
                      Transition{C::DeviceLatest, Op::DeviceRead, C::DeviceLatest, 0, 0},
                      Transition{C::DeviceLatest, Op::DeviceWrite, C::DeviceLatest, 0, 0},
                      Transition{C::DeviceLatest, Op::DeviceReadWrite, C::DeviceLatest, 0, 0},
                      Transition{C::DeviceLatest, Op::HostRead, C::InSync, 0, 1},
                      Transition{C::DeviceLatest, Op::HostWriteWhole, C::HostLatest, 0, 0},
                      Transition{C::DeviceLatest, Op::HostWritePart, C::HostLatest, 0, 1}),
    [](const ::testing::TestParamInfo<Transition>& info) {
        return std::string(name(info.param.from)) + "_" + name(info.param.op);
    });

// ---- coherence: the data that moves ----------------------------------------

TEST(StorageCoherence, TheUploadPutsTheHostDataOnTheCard) {
    Card c;
    auto s = c.lazy();
    std::vector<std::byte> data(kBytes);
    for (std::size_t i = 0; i < data.size(); i++)
        data[i] = static_cast<std::byte>(i * 7);
    s->write(0, data);
    EXPECT_FALSE(s->resident()) << "a host write needs no device memory";
    s->device_use(*c.stream, DeviceAccess::Read);
    EXPECT_EQ(c.on_card(*s), data);
    EXPECT_EQ(s->transfers().uploads, 1u);
}

TEST(StorageCoherence, TheDownloadBringsTheCardsDataToTheHost) {
    Card c;
    auto s = c.lazy();
    c.device_fill(*s, 0x5a);
    std::vector<std::byte> out(kBytes);
    s->read(0, out);
    EXPECT_EQ(out, bytes(kBytes, 0x5a));
    EXPECT_EQ(s->transfers().downloads, 1u);
    std::vector<std::byte> again(16);
    s->read(100, again);
    EXPECT_EQ(again, bytes(16, 0x5a));
    EXPECT_EQ(s->transfers().downloads, 1u) << "in sync: the host copy serves";
}

TEST(StorageCoherence, APartialHostWriteKeepsTheRestOfTheDevicesData) {
    Card c;
    auto s = c.lazy();
    c.device_fill(*s, 0x33);
    s->write(16, bytes(16, 0x44));
    EXPECT_EQ(s->transfers().downloads, 1u);
    s->device_use(*c.stream, DeviceAccess::Read);
    EXPECT_EQ(s->transfers().uploads, 1u);
    std::vector<std::byte> expected = bytes(kBytes, 0x33);
    std::memset(expected.data() + 16, 0x44, 16);
    EXPECT_EQ(c.on_card(*s), expected);
}

TEST(StorageCoherence, AWholeDeviceWriteOfHostLatestDataUploadsNothing) {
    Card c;
    auto s = c.lazy();
    s->write(0, bytes(kBytes, 0x10));
    c.device_fill(*s, 0x20);
    std::vector<std::byte> out(kBytes);
    s->read(0, out);
    EXPECT_EQ(out, bytes(kBytes, 0x20));
    EXPECT_EQ(s->transfers().uploads, 0u);
    EXPECT_EQ(s->transfers().downloads, 1u);
}

TEST(StorageCoherence, ARoundTripIsExactlyOneUploadAndOneDownload) {
    Card c;
    auto s = c.lazy();
    const StorageTransfers total = storage_transfer_totals();
    s->write(0, bytes(kBytes, 1));
    s->device_use(*c.stream, DeviceAccess::Read);
    s->device_use(*c.stream, DeviceAccess::Read);
    c.device_fill(*s, 2);
    std::vector<std::byte> out(kBytes);
    s->read(0, out);
    s->read(0, out);
    EXPECT_EQ(s->transfers().uploads, 1u);
    EXPECT_EQ(s->transfers().downloads, 1u);
    EXPECT_EQ(storage_transfer_totals().uploads - total.uploads, 1u);
    EXPECT_EQ(storage_transfer_totals().downloads - total.downloads, 1u);
}

TEST(StorageCoherence, TheDeviceMemoryOutlivesTheStorageWhileAJobUsesIt) {
    Card c;
    auto s = c.lazy();
    c.k->hold_jobs = true;
    std::shared_ptr<Memory> m = s->device_use(*c.stream, DeviceAccess::Write);
    c.stream->fill(m, 0, kBytes, 0x7);
    m.reset();
    s.reset();
    EXPECT_EQ(c.alloc->memory_allocated(), kBytes) << "the job still holds the block";
    c.k->complete_jobs();
    c.stream->synchronize();
    EXPECT_EQ(c.alloc->memory_allocated(), 0u);
}

// ---- bind_device_memory ----------------------------------------------------

Errc code_of(const std::function<void()>& f, std::string* message = nullptr) {
    try {
        f();
    } catch (const Error& e) {
        if (message != nullptr)
            *message = e.what();
        return e.code();
    }
    return Errc{};
}

TEST(StorageBind, BindsTheWholeStorageAsOneFlatRegionNow) {
    Card c;
    auto s = c.lazy(64 * 64 * 4, ElementType::Fp32);
    bind_device_memory(StorageView::contiguous(s, {64, 64}));
    EXPECT_TRUE(s->resident());
    EXPECT_EQ(c.alloc->memory_allocated(), 64u * 64 * 4);
    EXPECT_EQ(s->device_layout(), (DeviceLayout{DeviceLayout::kFlat, {64, 64}}));
    EXPECT_EQ(s->transfers().uploads, 0u);
    EXPECT_NE(c.k->translate(s->data_ptr(), s->nbytes()), nullptr) << "one region";
}

TEST(StorageBind, RefusesViewsThatAreNotTheWholeContiguousStorage) {
    Card c;
    auto s = c.lazy(64 * 4, ElementType::Fp32);
    std::string msg;

    StorageView strided = StorageView::contiguous(s, {32});
    strided.strides = {2};
    EXPECT_EQ(code_of([&] { bind_device_memory(strided); }, &msg), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("is not contiguous"));

    StorageView offset = StorageView::contiguous(s, {63});
    offset.offset = 1;
    EXPECT_EQ(code_of([&] { bind_device_memory(offset); }, &msg), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("starts at element 1, not at offset 0"));

    EXPECT_EQ(code_of(
                  [&] {
                      bind_device_memory(StorageView::contiguous(s, {8, 4}));
                  },
                  &msg),
              Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("covers 128 of the storage's 256 bytes"));

    EXPECT_EQ(code_of([&] { bind_device_memory(StorageView{}); }, &msg), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("no storage"));

    EXPECT_FALSE(s->resident()) << "a refused bind allocates nothing";
    EXPECT_EQ(c.alloc->memory_allocated(), 0u);
}

// ---- set_device_layout_like ------------------------------------------------

TEST(StorageLayout, TargetTakesRefsLayoutWithoutCopyingData) {
    Card c;
    auto ref = c.lazy(16 * 16 * 2, ElementType::Fp16);
    auto target = c.lazy(16 * 16 * 2, ElementType::Fp16);
    c.device_fill(*ref, 9);
    ref->set_device_layout(DeviceLayout{7, {16, 16}});
    const std::uint64_t copies = c.h2d() + c.d2h();
    set_device_layout_like(StorageView::contiguous(target, {16, 16}),
                           StorageView::contiguous(ref, {16, 16}));
    EXPECT_EQ(target->device_layout(), (DeviceLayout{7, {16, 16}}));
    EXPECT_FALSE(target->resident()) << "no memory needed for a layout";
    EXPECT_EQ(c.h2d() + c.d2h(), copies);
    EXPECT_EQ(target->transfers().uploads + target->transfers().downloads, 0u);
    EXPECT_EQ(ref->coherence(), Coherence::DeviceLatest);
}

TEST(StorageLayout, RefusesEveryMismatch) {
    Card c;
    Card other;
    auto ref = c.lazy(64 * 2, ElementType::Fp16);
    ref->commit();
    auto unresident = c.lazy(64 * 2, ElementType::Fp16);
    auto target = c.lazy(64 * 2, ElementType::Fp16);
    auto wrong_type = c.lazy(64 * 2, ElementType::Bf16);
    auto elsewhere = other.lazy(64 * 2, ElementType::Fp16);
    elsewhere->commit();
    const auto whole = [](const std::shared_ptr<Storage>& s) { return StorageView::whole(s); };
    std::string msg;
    const auto refused = [&](const StorageView& t, const StorageView& r) {
        return code_of([&] { set_device_layout_like(t, r); }, &msg);
    };

    EXPECT_EQ(refused(whole(target), whole(elsewhere)), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("same device"));
    EXPECT_EQ(refused(whole(wrong_type), whole(ref)), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("element type"));
    StorageView part = StorageView::contiguous(target, {32});
    EXPECT_EQ(refused(part, whole(ref)), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("target must cover its whole storage"));
    StorageView strided_ref = StorageView::contiguous(ref, {32});
    strided_ref.strides = {2};
    EXPECT_EQ(refused(whole(target), strided_ref), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("ref must cover its whole storage"));
    EXPECT_EQ(refused(StorageView::contiguous(target, {8, 8}), whole(ref)), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("sizes [8,8] differ from ref's [64]"));
    EXPECT_EQ(refused(whole(target), whole(unresident)), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("ref has no device memory yet"));
    EXPECT_EQ(refused(StorageView{}, whole(ref)), Errc::InvalidArgument);
    EXPECT_THAT(msg, HasSubstr("target has no storage"));

    EXPECT_EQ(target->device_layout(), DeviceLayout{}) << "unchanged by refusals";
    EXPECT_EQ(refused(whole(target), whole(ref)), Errc{});
}

} // namespace
} // namespace rbln::test::storage_test
