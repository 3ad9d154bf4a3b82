// SPDX-License-Identifier: GPL-2.0
// The card's MMU on its own: the walk, every fault reason, LOCAL pages,
// the TLB and its invalidation (rbln_fw_mmu.md).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bar_layout.h"
#include "guest_memory.h"
#include "mmu.h"
#include "page_table_builder.h"

using namespace rbln::emu;
using rbln::emu::test::kPteRw;
using rbln::emu::test::make_va;
using rbln::emu::test::PageTableBuilder;

namespace mmu_test {

namespace {

constexpr std::uint64_t k4K = RBLN_FW_PAGE_SIZE;
constexpr std::uint64_t k2M = RBLN_FW_HUGE_SIZE;
constexpr std::uint64_t kR = RBLN_FW_PTE_READ;
constexpr std::uint64_t kW = RBLN_FW_PTE_WRITE;
constexpr std::uint64_t kLocal = RBLN_FW_PTE_LOCAL;

// Guest RAM: 12 MiB low, the PCI hole, 4 MiB at 4 GiB.
constexpr std::uint64_t kRamSize = 16ULL << 20;
constexpr std::uint64_t kLowmem = 12ULL << 20;
constexpr std::uint64_t kHigh = k4GiB;
constexpr std::uint64_t kTables = 1ULL << 20; // 2 MiB of tables
constexpr std::uint64_t kPages = 4ULL << 20;  // 4 KiB data pages
constexpr std::uint64_t kHuge = 6ULL << 20;   // 2 MiB pages at 6, 8, 10 MiB
constexpr std::uint64_t kHole = 0xc0000000ULL;
constexpr std::uint32_t kAsid = 1;

// A VA with a different index at every level, so a walk that used the
// wrong bits would find nothing.
constexpr std::uint64_t kVa = make_va(5, 6, 7, 8);

class MmuTest : public ::testing::Test {
protected:
    MmuTest()
        : ram_(kRamSize), mem_(ram_, kLowmem), layout_(compute_bar_layout(4, 4ULL << 20)),
          bar_(layout_.used_size), pt_(mem_, kTables, 2ULL << 20),
          mmu_(mem_, std::span<std::byte>(bar_), layout_) {
        EXPECT_TRUE(mmu_.bind(kAsid, pt_.root()));
    }

    std::byte* host(std::uint64_t gpa) { return mem_.translate(gpa, 1); }
    std::byte* hbm(std::uint64_t bar_offset) { return bar_.data() + bar_offset; }

    MmuFault expect_fault(std::uint64_t va, std::uint64_t len, Access access,
                          std::uint32_t asid = kAsid) {
        const Translation t = mmu_.translate(asid, va, len, access);
        EXPECT_FALSE(t.ok());
        if (t.ok())
            return {};
        EXPECT_EQ(t.fault().access, access);
        return t.fault();
    }

    std::vector<HostSpan> expect_spans(std::uint64_t va, std::uint64_t len, Access access,
                                       std::uint32_t asid = kAsid) {
        const Translation t = mmu_.translate(asid, va, len, access);
        EXPECT_TRUE(t.ok()) << "reason " << (t.ok() ? 0 : t.fault().reason);
        if (!t.ok())
            return {};
        return t.spans();
    }

    std::vector<std::byte> ram_;
    SpanGuestMemory mem_;
    BarLayout layout_;
    std::vector<std::byte> bar_;
    PageTableBuilder pt_;
    Mmu mmu_;
};

} // namespace

// --- the walk ---------------------------------------------------------------

TEST_F(MmuTest, FourKPageWalksAllFourLevelsToThePage) {
    pt_.map_4k(kVa, kPages + 3 * k4K, kPteRw);
    const auto spans = expect_spans(kVa + 0x10, 100, Access::read);
    ASSERT_EQ(spans.size(), 1U);
    EXPECT_EQ(spans[0].data(), host(kPages + 3 * k4K + 0x10));
    EXPECT_EQ(spans[0].size(), 100U);
    // The neighbours at each level are not mapped.
    for (std::uint64_t other :
         {make_va(4, 6, 7, 8), make_va(5, 5, 7, 8), make_va(5, 6, 6, 8), make_va(5, 6, 7, 9)})
        EXPECT_EQ(expect_fault(other, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED) << other;
}

TEST_F(MmuTest, TwoMPageIsALeafAtLevel1) {
    const std::uint64_t va = make_va(5, 6, 9, 0);
    pt_.map_2m(va, kHuge, kPteRw);
    const auto spans = expect_spans(va + 0x12345, 0x1000, Access::write);
    ASSERT_EQ(spans.size(), 1U);
    EXPECT_EQ(spans[0].data(), host(kHuge + 0x12345));
    // The whole 2 MiB in one span.
    const auto whole = expect_spans(va, k2M, Access::read);
    ASSERT_EQ(whole.size(), 1U);
    EXPECT_EQ(whole[0].data(), host(kHuge));
    EXPECT_EQ(whole[0].size(), k2M);
    EXPECT_EQ(expect_fault(va + k2M, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
}

TEST_F(MmuTest, HostPagesAboveFourGiBResolve) {
    pt_.map_4k(kVa, kHigh + k4K, kPteRw);
    pt_.map_2m(make_va(1, 0, 1, 0), kHigh + k2M, kPteRw);
    EXPECT_EQ(expect_spans(kVa, 8, Access::read).at(0).data(), host(kHigh + k4K));
    EXPECT_EQ(expect_spans(make_va(1, 0, 1, 0, 5), 8, Access::read).at(0).data(),
              host(kHigh + k2M + 5));
}

TEST_F(MmuTest, RangeCrossingFromA4KPageIntoA2MPageGivesOneSpanPerPage) {
    // The last 4 KiB page below a 2 MiB boundary, then a 2 MiB page.
    const std::uint64_t va4k = make_va(0, 1, 2, 511);
    const std::uint64_t va2m = make_va(0, 1, 3, 0);
    ASSERT_EQ(va4k + k4K, va2m);
    pt_.map_4k(va4k, kPages, kPteRw);
    pt_.map_2m(va2m, kHuge + k2M, kPteRw);
    const auto spans = expect_spans(va4k + 0x800, 0x1000, Access::write);
    ASSERT_EQ(spans.size(), 2U);
    EXPECT_EQ(spans[0].data(), host(kPages + 0x800));
    EXPECT_EQ(spans[0].size(), 0x800U);
    EXPECT_EQ(spans[1].data(), host(kHuge + k2M));
    EXPECT_EQ(spans[1].size(), 0x800U);
}

TEST_F(MmuTest, PagesContiguousInHostMemoryMergeIntoOneSpan) {
    for (std::uint64_t i = 0; i < 4; i++)
        pt_.map_4k(kVa + i * k4K, kPages + i * k4K, kPteRw);
    pt_.map_4k(kVa + 4 * k4K, kPages + 9 * k4K, kPteRw); // not contiguous
    const auto spans = expect_spans(kVa + 1, 5 * k4K - 2, Access::read);
    ASSERT_EQ(spans.size(), 2U);
    EXPECT_EQ(spans[0].data(), host(kPages + 1));
    EXPECT_EQ(spans[0].size(), 4 * k4K - 1);
    EXPECT_EQ(spans[1].data(), host(kPages + 9 * k4K));
    EXPECT_EQ(spans[1].size(), k4K - 1);
}

TEST_F(MmuTest, ZeroLengthTranslatesToNothing) {
    EXPECT_TRUE(expect_spans(kVa, 0, Access::write).empty());
}

TEST_F(MmuTest, ReadAndWriteHelpersCopyAcrossPages) {
    pt_.map_4k(kVa, kPages + 2 * k4K, kPteRw);
    pt_.map_4k(kVa + k4K, kPages, kPteRw);
    std::vector<std::byte> in(300);
    for (std::size_t i = 0; i < in.size(); i++)
        in[i] = static_cast<std::byte>(i * 7);
    EXPECT_FALSE(mmu_.write(kAsid, kVa + k4K - 100, in.data(), in.size()));
    EXPECT_EQ(std::memcmp(host(kPages + 3 * k4K - 100), in.data(), 100), 0);
    EXPECT_EQ(std::memcmp(host(kPages), in.data() + 100, 200), 0);
    std::vector<std::byte> out(300);
    EXPECT_FALSE(mmu_.read(kAsid, kVa + k4K - 100, out.data(), out.size()));
    EXPECT_EQ(out, in);
}

// --- permissions ------------------------------------------------------------

TEST_F(MmuTest, ReadOnlyPageReadsButAWriteIsNoWrite) {
    pt_.map_4k(kVa, kPages, kR);
    EXPECT_EQ(expect_spans(kVa, 16, Access::read).size(), 1U);
    const MmuFault f = expect_fault(kVa + 4, 16, Access::write);
    EXPECT_EQ(f.reason, RBLN_FW_MMU_NO_WRITE);
    EXPECT_EQ(f.va, kVa + 4);
}

TEST_F(MmuTest, WriteOnlyPageWritesButAReadIsNoRead) {
    pt_.map_2m(make_va(0, 0, 1, 0), kHuge, kW);
    EXPECT_EQ(expect_spans(make_va(0, 0, 1, 0), 16, Access::write).size(), 1U);
    EXPECT_EQ(expect_fault(make_va(0, 0, 1, 0), 16, Access::read).reason, RBLN_FW_MMU_NO_READ);
}

TEST_F(MmuTest, PageWithoutPermissionsFaultsBothWays) {
    pt_.map_4k(kVa, kPages, 0);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_NO_READ);
    EXPECT_EQ(expect_fault(kVa, 1, Access::write).reason, RBLN_FW_MMU_NO_WRITE);
}

TEST_F(MmuTest, FaultVaIsTheFirstByteOfTheFirstFaultingPage) {
    pt_.map_4k(kVa, kPages, kPteRw);
    pt_.map_4k(kVa + k4K, kPages + k4K, kR);
    const MmuFault f = expect_fault(kVa + 0x800, 0x2000, Access::write);
    EXPECT_EQ(f.reason, RBLN_FW_MMU_NO_WRITE);
    EXPECT_EQ(f.va, kVa + k4K);
    // The third page is not mapped: a read stops there.
    const MmuFault g = expect_fault(kVa + 0x800, 0x2000, Access::read);
    EXPECT_EQ(g.reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(g.va, kVa + 2 * k4K);
}

TEST_F(MmuTest, FaultingWriteMovesNoByteEvenOnTheGoodPages) {
    pt_.map_4k(kVa, kPages, kPteRw);
    pt_.map_4k(kVa + k4K, kPages + k4K, kR);
    std::memset(host(kPages), 0x11, 2 * k4K);
    const std::vector<std::byte> src(0x1000, std::byte{0xee});
    const auto f = mmu_.write(kAsid, kVa + 0x800, src.data(), src.size());
    ASSERT_TRUE(f);
    EXPECT_EQ(f->reason, RBLN_FW_MMU_NO_WRITE);
    for (std::uint64_t i = 0; i < 2 * k4K; i++)
        ASSERT_EQ(*host(kPages + i), std::byte{0x11}) << i;
}

TEST_F(MmuTest, FaultingReadLeavesTheDestinationUntouched) {
    pt_.map_4k(kVa, kPages, kPteRw);
    std::vector<std::byte> dst(0x1800, std::byte{0x5a});
    const auto f = mmu_.read(kAsid, kVa + 0x800, dst.data(), dst.size());
    ASSERT_TRUE(f);
    EXPECT_EQ(f->reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(f->va, kVa + k4K);
    EXPECT_EQ(f->access, Access::read);
    for (std::byte b : dst)
        ASSERT_EQ(b, std::byte{0x5a});
}

// --- fault reasons ----------------------------------------------------------

class MmuNotMappedAtLevel : public MmuTest, public ::testing::WithParamInterface<int> {};

TEST_P(MmuNotMappedAtLevel, InvalidEntryEndsTheWalkWithNotMapped) {
    const int level = GetParam();
    pt_.map_4k(kVa, kPages, kPteRw);
    // An invalid entry with other bits set is still just invalid.
    pt_.set(kVa, level, pt_.get(kVa, level) & ~RBLN_FW_PTE_VALID);
    const MmuFault f = expect_fault(kVa + 3, 1, Access::read);
    EXPECT_EQ(f.reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(f.va, kVa + 3);
}

INSTANTIATE_TEST_SUITE_P(Levels, MmuNotMappedAtLevel, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "Level" + std::to_string(info.param); });

struct BadEntry {
    const char* name;
    int level;          // entry changed on the walk of kVa (4K mapping)
    std::uint64_t bits; // ORed into it
};

void PrintTo(const BadEntry& b, std::ostream* os) {
    *os << b.name;
}

class MmuBadEntry : public MmuTest, public ::testing::WithParamInterface<BadEntry> {};

TEST_P(MmuBadEntry, MalformedEntryIsBadEntry) {
    const BadEntry& b = GetParam();
    pt_.map_4k(kVa, kPages, kPteRw);
    pt_.set(kVa, b.level, pt_.get(kVa, b.level) | b.bits);
    const MmuFault f = expect_fault(kVa, 8, Access::read);
    EXPECT_EQ(f.reason, RBLN_FW_MMU_BAD_ENTRY);
    EXPECT_EQ(f.va, kVa);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MmuBadEntry,
    ::testing::Values(BadEntry{"ReservedBit5AtLevel3", 3, 1ULL << 5},
                      BadEntry{"ReservedBit11AtLevel2", 2, 1ULL << 11},
                      BadEntry{"ReservedBit52AtLevel1", 1, 1ULL << 52},
                      BadEntry{"ReservedBit63AtLevel0", 0, 1ULL << 63},
                      BadEntry{"ReservedBit7OnAPage", 0, 1ULL << 7},
                      BadEntry{"ReadOnATablePointerAtLevel3", 3, RBLN_FW_PTE_READ},
                      BadEntry{"WriteOnATablePointerAtLevel2", 2, RBLN_FW_PTE_WRITE},
                      BadEntry{"LocalOnATablePointerAtLevel1", 1, RBLN_FW_PTE_LOCAL},
                      BadEntry{"ReadOnATablePointerAtLevel1", 1, RBLN_FW_PTE_READ},
                      BadEntry{"LeafAtLevel3", 3, RBLN_FW_PTE_LEAF},
                      BadEntry{"LeafAtLevel2", 2, RBLN_FW_PTE_LEAF},
                      BadEntry{"LeafAtLevel0", 0, RBLN_FW_PTE_LEAF}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(MmuTest, MisalignedTwoMPageIsBadEntry) {
    const std::uint64_t va = make_va(0, 0, 1, 0);
    pt_.map_2m(va, kHuge + k4K, kPteRw);
    EXPECT_EQ(expect_fault(va + 100, 1, Access::read).reason, RBLN_FW_MMU_BAD_ENTRY);
    pt_.map_2m(va, kHuge + (1ULL << 20), kPteRw);
    EXPECT_EQ(expect_fault(va, 1, Access::read).reason, RBLN_FW_MMU_BAD_ENTRY);
    pt_.map_2m(va, kHuge, kPteRw); // not cached: fixed at once
    EXPECT_TRUE(mmu_.translate(kAsid, va, 1, Access::read).ok());
}

TEST_F(MmuTest, TableOutsideGuestRamIsBadAddress) {
    pt_.map_4k(kVa, kPages, kPteRw);
    for (int level = 3; level >= 1; level--) {
        const std::uint64_t old = pt_.get(kVa, level);
        pt_.set(kVa, level, kHole | RBLN_FW_PTE_VALID); // the PCI hole
        EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS) << level;
        pt_.set(kVa, level, (kHigh + (4ULL << 20)) | RBLN_FW_PTE_VALID); // past the end of RAM
        EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS) << level;
        pt_.set(kVa, level, old);
    }
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
}

TEST_F(MmuTest, HostPageOutsideGuestRamIsBadAddress) {
    pt_.map_4k(kVa, kHole, kPteRw);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    pt_.map_4k(kVa, kHigh + (4ULL << 20), kPteRw);
    EXPECT_EQ(expect_fault(kVa, 1, Access::write).reason, RBLN_FW_MMU_BAD_ADDRESS);
    // A 2 MiB host page must be RAM throughout: this one runs into the hole.
    const std::uint64_t va = make_va(0, 0, 1, 0);
    pt_.map_2m(va, kLowmem, kPteRw);
    EXPECT_EQ(expect_fault(va, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    pt_.map_2m(va, kLowmem - k2M, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, va, 1, Access::read).ok());
    // An address beyond 4 GiB + RAM (bit 51 set).
    pt_.map_4k(kVa + k4K, 1ULL << 51, kPteRw);
    EXPECT_EQ(expect_fault(kVa + k4K, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
}

TEST_F(MmuTest, UnboundAsidIsNoVm) {
    pt_.map_4k(kVa, kPages, kPteRw);
    for (std::uint32_t asid : {0U, 2U, 4095U, 4096U, 0xffffffffU}) {
        const MmuFault f = expect_fault(kVa, 1, Access::read, asid);
        EXPECT_EQ(f.reason, RBLN_FW_MMU_NO_VM) << asid;
        EXPECT_EQ(f.va, kVa);
    }
}

TEST_F(MmuTest, VaBeyond48BitsIsBadVa) {
    EXPECT_EQ(expect_fault(1ULL << 48, 1, Access::read).reason, RBLN_FW_MMU_BAD_VA);
    EXPECT_EQ(expect_fault(~0ULL - 7, 1, Access::write).reason, RBLN_FW_MMU_BAD_VA);
    // The last page below 2^48 is fine; a range running past it faults at 2^48.
    const std::uint64_t last = (1ULL << 48) - k4K;
    pt_.map_4k(last, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, last, k4K, Access::read).ok());
    const MmuFault f = expect_fault(last + 16, k4K, Access::read);
    EXPECT_EQ(f.reason, RBLN_FW_MMU_BAD_VA);
    EXPECT_EQ(f.va, 1ULL << 48);
    // A length that wraps the 64-bit space.
    EXPECT_EQ(expect_fault(last, ~0ULL, Access::read).reason, RBLN_FW_MMU_BAD_VA);
}

TEST_F(MmuTest, FaultsAreCounted) {
    (void)expect_fault(kVa, 1, Access::read);
    (void)expect_fault(kVa, 1, Access::read, 7);
    EXPECT_EQ(mmu_.stats().faults, 2U);
}

// --- LOCAL pages (HBM) ------------------------------------------------------

TEST_F(MmuTest, LocalPagesResolveIntoEveryChipletsHbm) {
    for (unsigned i = 0; i < layout_.chiplets; i++) {
        const HbmAperture& r = layout_.hbm.at(i);
        const std::uint64_t va4k = make_va(2, i, 0, 3);
        const std::uint64_t va2m = make_va(2, i, 1, 0);
        pt_.map_4k(va4k, r.bar_offset + r.size - k4K, kPteRw | kLocal); // last 4K of the region
        pt_.map_2m(va2m, r.bar_offset + r.size - k2M, kPteRw | kLocal); // last 2M of the region
        const auto s4 = expect_spans(va4k + 1, 10, Access::write);
        ASSERT_EQ(s4.size(), 1U);
        EXPECT_EQ(s4[0].data(), hbm(r.bar_offset + r.size - k4K + 1)) << i;
        const auto s2 = expect_spans(va2m, k2M, Access::read);
        ASSERT_EQ(s2.size(), 1U);
        EXPECT_EQ(s2[0].data(), hbm(r.bar_offset + r.size - k2M)) << i;
        EXPECT_EQ(s2[0].size(), k2M);
        // The first page of the region too.
        pt_.map_4k(va4k + k4K, r.bar_offset, kPteRw | kLocal);
        EXPECT_EQ(expect_spans(va4k + k4K, 1, Access::read).at(0).data(), hbm(r.bar_offset));
    }
}

TEST_F(MmuTest, LocalWriteLandsInHbmAndReadsBack) {
    const HbmAperture& r = layout_.hbm.at(2);
    pt_.map_4k(kVa, r.bar_offset + 5 * k4K, kPteRw | kLocal);
    const char msg[] = "hello hbm";
    EXPECT_FALSE(mmu_.write(kAsid, kVa + 7, msg, sizeof(msg)));
    EXPECT_EQ(std::memcmp(hbm(r.bar_offset + 5 * k4K + 7), msg, sizeof(msg)), 0);
    char back[sizeof(msg)] = {};
    EXPECT_FALSE(mmu_.read(kAsid, kVa + 7, back, sizeof(back)));
    EXPECT_STREQ(back, msg);
}

TEST_F(MmuTest, LocalPageOutsideEveryHbmRegionIsBadAddress) {
    const std::uint64_t va2m = make_va(0, 0, 1, 0);
    // The control region (offset 0 and the control block's own page).
    pt_.map_4k(kVa, 0, kPteRw | kLocal);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    pt_.map_2m(va2m, 0, kPteRw | kLocal);
    EXPECT_EQ(expect_fault(va2m, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    // Past the last region, inside the power-of-two BAR.
    ASSERT_LT(layout_.used_size, layout_.bar_size);
    pt_.map_4k(kVa + k4K, layout_.used_size, kPteRw | kLocal);
    EXPECT_EQ(expect_fault(kVa + k4K, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    // Past the BAR altogether.
    pt_.map_4k(kVa + 2 * k4K, layout_.bar_size + k2M, kPteRw | kLocal);
    EXPECT_EQ(expect_fault(kVa + 2 * k4K, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    // Without LOCAL the same number is a guest-physical address (RAM here).
    pt_.map_4k(kVa + 3 * k4K, layout_.hbm[0].bar_offset, kPteRw);
    EXPECT_EQ(expect_spans(kVa + 3 * k4K, 1, Access::read).at(0).data(),
              host(layout_.hbm[0].bar_offset));
}

TEST(MmuLocal, PageStraddlingTwoHbmRegionsIsBadAddress) {
    // A hand-made layout with 3 MiB regions: [2M, 5M) and [5M, 8M).
    std::vector<std::byte> ram(4ULL << 20);
    SpanGuestMemory mem(ram, ram.size());
    BarLayout layout;
    layout.chiplets = 2;
    layout.ctrl_size = 2ULL << 20;
    layout.hbm[0] = {2ULL << 20, 3ULL << 20};
    layout.hbm[1] = {5ULL << 20, 3ULL << 20};
    layout.used_size = 8ULL << 20;
    layout.bar_size = 8ULL << 20;
    std::vector<std::byte> bar(layout.used_size);
    PageTableBuilder pt(mem, 0, 1ULL << 20);
    Mmu mmu(mem, bar, layout);
    ASSERT_TRUE(mmu.bind(3, pt.root()));
    const std::uint64_t va = make_va(0, 0, 1, 0);
    pt.map_2m(va, 4ULL << 20, kPteRw | kLocal); // [4M, 6M): crosses 5M
    const Translation t = mmu.translate(3, va, 1, Access::read);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.fault().reason, RBLN_FW_MMU_BAD_ADDRESS);
    pt.map_2m(va + k2M, 6ULL << 20, kPteRw | kLocal); // [6M, 8M): inside region 1
    EXPECT_TRUE(mmu.translate(3, va + k2M, 1, Access::read).ok());
    // A range over two pages of different regions is fine page by page.
    pt.map_4k(make_va(0, 0, 0, 1), (5ULL << 20) - k4K, kPteRw | kLocal);
    pt.map_4k(make_va(0, 0, 0, 2), 5ULL << 20, kPteRw | kLocal);
    const Translation both = mmu.translate(3, make_va(0, 0, 0, 1), 2 * k4K, Access::read);
    ASSERT_TRUE(both.ok());
    ASSERT_EQ(both.spans().size(), 1U); // contiguous in the BAR
    EXPECT_EQ(both.spans()[0].data(), bar.data() + (5ULL << 20) - k4K);
}

TEST(MmuLocal, HbmBeyondTheBarTheCardHasIsBadAddress) {
    std::vector<std::byte> ram(2ULL << 20);
    SpanGuestMemory mem(ram, ram.size());
    const BarLayout layout = compute_bar_layout(1, 4ULL << 20);
    std::vector<std::byte> bar(layout.hbm[0].bar_offset + k2M); // half the HBM only
    PageTableBuilder pt(mem, 0, 1ULL << 20);
    Mmu mmu(mem, bar, layout);
    ASSERT_TRUE(mmu.bind(1, pt.root()));
    pt.map_2m(make_va(0, 0, 1, 0), layout.hbm[0].bar_offset, kPteRw | kLocal);
    pt.map_2m(make_va(0, 0, 2, 0), layout.hbm[0].bar_offset + k2M, kPteRw | kLocal);
    EXPECT_TRUE(mmu.translate(1, make_va(0, 0, 1, 0), k2M, Access::read).ok());
    const Translation t = mmu.translate(1, make_va(0, 0, 2, 0), 1, Access::read);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.fault().reason, RBLN_FW_MMU_BAD_ADDRESS);
}

// --- bindings ---------------------------------------------------------------

TEST_F(MmuTest, BindRefusesAsidZeroOutOfRangeMisalignedOrNonRamRoots) {
    EXPECT_FALSE(mmu_.bind(0, pt_.root()));
    EXPECT_FALSE(mmu_.bind(RBLN_FW_MAX_ASID, pt_.root()));
    EXPECT_FALSE(mmu_.bind(2, pt_.root() + 8));
    EXPECT_FALSE(mmu_.bind(2, kHole));
    EXPECT_FALSE(mmu_.bind(2, kHigh + (4ULL << 20)));
    EXPECT_TRUE(mmu_.bind(RBLN_FW_MAX_ASID - 1, pt_.root()));
    EXPECT_EQ(mmu_.bound_count(), 2U);
    EXPECT_EQ(mmu_.root(RBLN_FW_MAX_ASID - 1), pt_.root());
}

TEST_F(MmuTest, UnbindThenNoVm) {
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
    EXPECT_TRUE(mmu_.unbind(kAsid));
    EXPECT_FALSE(mmu_.unbind(kAsid));
    EXPECT_EQ(mmu_.bound_count(), 0U);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_NO_VM);
    // Bound again: nothing of the old binding's TLB survived, it walks.
    const auto misses = mmu_.stats().tlb_misses;
    EXPECT_TRUE(mmu_.bind(kAsid, pt_.root()));
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
    EXPECT_EQ(mmu_.stats().tlb_misses, misses + 1);
}

TEST_F(MmuTest, RebindReplacesTheRootAndDropsTheCachedTranslations) {
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_EQ(expect_spans(kVa, 1, Access::read).at(0).data(), host(kPages));
    PageTableBuilder other(mem_, kTables + (1ULL << 20), 1ULL << 20);
    other.map_4k(kVa, kPages + 7 * k4K, kR);
    EXPECT_TRUE(mmu_.bind(kAsid, other.root()));
    EXPECT_EQ(mmu_.bound_count(), 1U);
    EXPECT_EQ(expect_spans(kVa, 1, Access::read).at(0).data(), host(kPages + 7 * k4K));
    EXPECT_EQ(expect_fault(kVa, 1, Access::write).reason, RBLN_FW_MMU_NO_WRITE);
}

TEST_F(MmuTest, ResetDropsEveryBinding) {
    EXPECT_TRUE(mmu_.bind(9, pt_.root()));
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(9, kVa, 1, Access::read).ok());
    mmu_.reset();
    EXPECT_EQ(mmu_.bound_count(), 0U);
    EXPECT_EQ(mmu_.tlb_size(), 0U);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_NO_VM);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read, 9).reason, RBLN_FW_MMU_NO_VM);
}

// --- TLB --------------------------------------------------------------------

TEST_F(MmuTest, SecondTranslationOfAPageHitsTheTlb) {
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
    EXPECT_EQ(mmu_.stats().tlb_misses, 1U);
    EXPECT_EQ(mmu_.stats().tlb_hits, 0U);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa + 100, 8, Access::write).ok());
    EXPECT_EQ(mmu_.stats().tlb_misses, 1U);
    EXPECT_EQ(mmu_.stats().tlb_hits, 1U);
    // The leaf and the three tables above it are cached.
    EXPECT_EQ(mmu_.tlb_size(), 4U);
}

TEST_F(MmuTest, NeighbourPageWalksOnlyTheLastLevelFromTheCachedTable) {
    pt_.map_4k(kVa, kPages, kPteRw);
    pt_.map_4k(kVa + k4K, kPages + k4K, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
    // Break the upper levels in memory: a walk from the root would fail,
    // the cached level-0 table still serves the neighbour.
    pt_.set(kVa, 3, 0);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa + k4K, 1, Access::read).ok());
    EXPECT_EQ(mmu_.stats().tlb_misses, 2U);
}

TEST_F(MmuTest, ChangedLeafStaysStaleUntilInvalidatedThenIsFresh) {
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_EQ(expect_spans(kVa, 1, Access::read).at(0).data(), host(kPages));
    pt_.map_4k(kVa, kPages + 5 * k4K, kR); // the host forgets to invalidate
    EXPECT_EQ(expect_spans(kVa, 1, Access::write).at(0).data(), host(kPages)); // stale
    mmu_.invalidate(kAsid, kVa, k4K);
    EXPECT_EQ(mmu_.stats().tlb_invalidations, 1U);
    EXPECT_EQ(expect_spans(kVa, 1, Access::read).at(0).data(), host(kPages + 5 * k4K));
    EXPECT_EQ(expect_fault(kVa, 1, Access::write).reason, RBLN_FW_MMU_NO_WRITE);
}

TEST_F(MmuTest, ClearedTableStaysStaleUntilInvalidatedThenNotMapped) {
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
    pt_.clear(kVa, 0); // unmaps the page...
    pt_.clear(kVa, 2); // ...and frees the level-1 table, no invalidation yet
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok()); // stale leaf
    mmu_.invalidate(kAsid, kVa & ~(k2M - 1), k2M);
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
}

TEST_F(MmuTest, StaleTwoMPageUntilAnInvalidateOverlappingAny4KOfIt) {
    const std::uint64_t va = make_va(0, 0, 1, 0);
    pt_.map_2m(va, kHuge, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, va, 1, Access::read).ok());
    pt_.clear(va, 1);
    mmu_.invalidate(kAsid, va + k2M, k4K); // the next 2 MiB: does not overlap
    EXPECT_TRUE(mmu_.translate(kAsid, va + 5, 1, Access::read).ok());
    mmu_.invalidate(kAsid, va + 300 * k4K, k4K); // one 4 KiB page inside
    EXPECT_EQ(expect_fault(va + 5, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
}

TEST_F(MmuTest, InvalidateDropsOnlyTheRangeAndOnlyThatAsid) {
    ASSERT_TRUE(mmu_.bind(2, pt_.root())); // same tables, another ASID
    pt_.map_4k(kVa, kPages, kPteRw);
    pt_.map_4k(kVa + k4K, kPages + k4K, kPteRw);
    for (std::uint32_t asid : {kAsid, 2U}) {
        EXPECT_TRUE(mmu_.translate(asid, kVa, 2 * k4K, Access::read).ok());
    }
    pt_.clear(kVa, 0);
    pt_.clear(kVa + k4K, 0);
    mmu_.invalidate(kAsid, kVa + k4K, k4K);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok()); // not in the range
    EXPECT_EQ(expect_fault(kVa + k4K, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_TRUE(mmu_.translate(2, kVa, 2 * k4K, Access::read).ok()); // other ASID kept
}

TEST_F(MmuTest, WholeAsidInvalidateDropsEverythingOfThatAsidOnly) {
    ASSERT_TRUE(mmu_.bind(2, pt_.root()));
    const std::uint64_t far = make_va(300, 0, 0, 0);
    pt_.map_4k(kVa, kPages, kPteRw);
    pt_.map_4k(far, kPages + k4K, kPteRw);
    for (std::uint32_t asid : {kAsid, 2U}) {
        EXPECT_TRUE(mmu_.translate(asid, kVa, 1, Access::read).ok());
        EXPECT_TRUE(mmu_.translate(asid, far, 1, Access::read).ok());
    }
    pt_.clear(kVa, 0);
    pt_.clear(far, 0);
    mmu_.invalidate(kAsid, 0, 0); // size 0: the whole ASID
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(expect_fault(far, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_TRUE(mmu_.translate(2, kVa, 1, Access::read).ok());
    EXPECT_TRUE(mmu_.translate(2, far, 1, Access::read).ok());
}

TEST_F(MmuTest, InvalidEntriesAreNeverCachedSoANewMappingNeedsNoInvalidate) {
    EXPECT_EQ(expect_fault(kVa, 1, Access::read).reason, RBLN_FW_MMU_NOT_MAPPED);
    pt_.map_4k(kVa, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa, 1, Access::read).ok());
    // Same for an entry that was malformed or pointed outside RAM.
    pt_.map_4k(kVa + k4K, kPages | (1ULL << 9), kPteRw);
    EXPECT_EQ(expect_fault(kVa + k4K, 1, Access::read).reason, RBLN_FW_MMU_BAD_ENTRY);
    pt_.map_4k(kVa + k4K, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa + k4K, 1, Access::read).ok());
    pt_.map_4k(kVa + 2 * k4K, kHole, kPteRw);
    EXPECT_EQ(expect_fault(kVa + 2 * k4K, 1, Access::read).reason, RBLN_FW_MMU_BAD_ADDRESS);
    pt_.map_4k(kVa + 2 * k4K, kPages, kPteRw);
    EXPECT_TRUE(mmu_.translate(kAsid, kVa + 2 * k4K, 1, Access::read).ok());
}

TEST_F(MmuTest, TlbIsBoundedAndEvictionKeepsTranslationsCorrect) {
    // 2 x kTlbEntries distinct 4 KiB pages in 2 MiB of VA x 16 tables.
    const std::uint64_t pages = 2 * Mmu::kTlbEntries;
    for (std::uint64_t i = 0; i < pages; i++)
        pt_.map_4k(make_va(0, 0, 0, 0) + i * k4K, kPages + (i % 64) * k4K, kPteRw);
    for (int pass = 0; pass < 2; pass++) {
        for (std::uint64_t i = 0; i < pages; i++) {
            const auto spans = expect_spans(i * k4K + 8, 1, Access::read);
            ASSERT_EQ(spans.size(), 1U);
            ASSERT_EQ(spans[0].data(), host(kPages + (i % 64) * k4K + 8)) << i;
        }
        EXPECT_LE(mmu_.tlb_size(), Mmu::kTlbEntries);
    }
    EXPECT_GT(mmu_.stats().tlb_hits, 0U);
    EXPECT_EQ(mmu_.stats().tlb_hits + mmu_.stats().tlb_misses, 2 * pages);
}

TEST_F(MmuTest, TranslateIntoReusesTheCallersVector) {
    pt_.map_2m(make_va(0, 0, 1, 0), kHuge, kPteRw);
    std::vector<HostSpan> spans;
    spans.reserve(4);
    const HostSpan* storage = spans.data();
    for (int i = 0; i < 100; i++) {
        ASSERT_FALSE(mmu_.translate_into(kAsid, make_va(0, 0, 1, 0, i), 64, Access::read, spans));
        ASSERT_EQ(spans.size(), 1U);
    }
    EXPECT_EQ(spans.data(), storage);
    // A fault leaves no spans behind.
    const auto f = mmu_.translate_into(kAsid, kVa, 1, Access::read, spans);
    ASSERT_TRUE(f);
    EXPECT_TRUE(spans.empty());
}
} // namespace mmu_test
