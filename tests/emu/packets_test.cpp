// SPDX-License-Identifier: GPL-2.0
// Every packet of rbln_fw_cmd.h through a command ring: what it does,
// every malformed field (BAD_PACKET at its offset, the packets before it
// ran, the ones after it did not), privileged packets, kernel jobs on DMA
// addresses, and MMU faults from packets (no byte moved, the event).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ring_fixture.h"

using namespace rbln::emu;
using namespace rbln::emu::test;

namespace packets_test {

namespace {

constexpr std::uint64_t k4K = RBLN_FW_PAGE_SIZE;
constexpr std::uint8_t kGuard = 0xa5;
// 16 host pages at kHost + 4 MiB mapped in reverse order at this VA.
constexpr std::uint64_t kVaScatter = 0x50'0000'0000ULL;
constexpr std::uint64_t kScatterGpaOff = 4ULL << 20;
constexpr unsigned kScatterPages = 16;

class Packets : public ::testing::Test {
protected:
    Packets() {
        for (unsigned i = 0; i < kScatterPages; i++)
            t.pt.map_4k(kVaScatter + i * k4K,
                        TestCard::kHost + kScatterGpaOff + (kScatterPages - 1 - i) * k4K, kPteRw);
    }

    // The host byte behind VA kVaScatter + off.
    std::byte* scatter(std::uint64_t off) {
        return t.host(kScatterGpaOff + (kScatterPages - 1 - off / k4K) * k4K + off % k4K);
    }

    static void random_bytes(std::byte* p, std::size_t n, std::uint32_t seed) {
        std::mt19937 rng(seed);
        for (std::size_t i = 0; i < n; i++) {
            auto b = static_cast<std::uint8_t>(rng());
            if (b == kGuard)
                b ^= 0xff;
            p[i] = std::byte{b};
        }
    }

    static bool all(const std::byte* p, std::size_t n, std::uint8_t v) {
        for (std::size_t i = 0; i < n; i++) {
            if (std::to_integer<std::uint8_t>(p[i]) != v)
                return false;
        }
        return true;
    }

    TestCard t;
    FakeHost& h = t.h;
};

// --- what packets do ------------------------------------------------------------

TEST_F(Packets, NopOfAnySizeDoesNothingAndTheNextPacketRuns) {
    CmdBuf cb;
    cb.nop(8).nop(16).nop(1024).signal(TestCard::kVaHost, 3);
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 3U);
}

TEST_F(Packets, CopyMovesExactBytesBetweenHostAndHbmOfAnyChipletAtOddOffsets) {
    struct Side {
        const char* name;
        std::uint64_t va;
        std::function<std::byte*(std::uint64_t)> at;
    };
    const std::vector<Side> sides{
        {"host", TestCard::kVaHost, [&](std::uint64_t o) { return t.host(o); }},
        {"hbm0", TestCard::hbm_va(0), [&](std::uint64_t o) { return t.hbm(0, o); }},
        {"hbm3", TestCard::hbm_va(3), [&](std::uint64_t o) { return t.hbm(3, o); }},
    };
    const std::uint64_t sizes[] = {1, 7, 4095, 4097, 65537, (3ULL << 20) + 5};
    std::uint32_t seed = 1;
    for (const Side& from : sides) {
        for (const Side& to : sides) {
            for (std::uint64_t n : sizes) {
                const std::uint64_t src = 0x13;
                const std::uint64_t dst = (8ULL << 20) + 0x2f; // no overlap with src
                random_bytes(from.at(src), n, seed++);
                std::memset(to.at(dst - 64), kGuard, n + 128);
                CmdBuf cb;
                cb.copy(from.va + src, to.va + dst, n);
                ASSERT_EQ(t.status(1, cb), RBLN_FW_JOB_OK) << from.name << "->" << to.name;
                EXPECT_EQ(std::memcmp(to.at(dst), from.at(src), n), 0)
                    << from.name << "->" << to.name << " " << n;
                EXPECT_TRUE(all(to.at(dst - 64), 64, kGuard));
                EXPECT_TRUE(all(to.at(dst + n), 64, kGuard));
            }
        }
    }
    EXPECT_GT(h.card.stats().dma_bytes, 9U * (3ULL << 20));
}

TEST_F(Packets, CopyOfZeroBytesMovesNothingAndTranslatesNothing) {
    CmdBuf cb;
    cb.copy(0x7f'0000'0000ULL, 0x7e'0000'0000ULL, 0).signal(TestCard::kVaHost, 1);
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 1U);
}

TEST_F(Packets, OverlappingCopiesBehaveAsMemmoveInContiguousAndScatteredMemory) {
    struct Case {
        std::uint64_t src;
        std::uint64_t dst;
        std::uint64_t n;
    };
    const Case cases[] = {{0, 5000, 40000},  {5000, 0, 40000}, {100, 101, 20000},
                          {101, 100, 20000}, {0, 4096, 50000}, {7, 7, 1000}};
    std::uint32_t seed = 77;
    for (const Case& c : cases) {
        // Contiguous (one span): host data through a 2 MiB page.
        std::vector<std::byte> model(64 * 1024);
        random_bytes(model.data(), model.size(), seed);
        std::memcpy(t.host(0), model.data(), model.size());
        std::memmove(model.data() + c.dst, model.data() + c.src, c.n);
        CmdBuf cb;
        cb.copy(TestCard::kVaHost + c.src, TestCard::kVaHost + c.dst, c.n);
        ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
        EXPECT_EQ(std::memcmp(t.host(0), model.data(), model.size()), 0) << c.src << "->" << c.dst;
        // Scattered: pages in reverse host order, one span per page.
        random_bytes(model.data(), model.size(), seed++);
        for (std::uint64_t o = 0; o < model.size(); o++)
            *scatter(o) = model[o];
        std::memmove(model.data() + c.dst, model.data() + c.src, c.n);
        cb.clear();
        cb.copy(kVaScatter + c.src, kVaScatter + c.dst, c.n);
        ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
        bool same = true;
        for (std::uint64_t o = 0; o < model.size() && same; o++)
            same = *scatter(o) == model[o];
        EXPECT_TRUE(same) << "scattered " << c.src << "->" << c.dst;
    }
}

TEST_F(Packets, CopyBetweenAliasedMappingsIsAsIfEverySourceByteWasReadFirst) {
    // VA A maps pages P0 P1, VA B maps P1 P0: A -> B must give B = old A,
    // whichever order the pieces move in.
    const std::uint64_t va_a = 0x51'0000'0000ULL;
    const std::uint64_t va_b = 0x52'0000'0000ULL;
    const std::uint64_t p0 = TestCard::kHost + (6ULL << 20);
    const std::uint64_t p1 = p0 + k4K;
    t.pt.map_4k(va_a, p0, kPteRw);
    t.pt.map_4k(va_a + k4K, p1, kPteRw);
    t.pt.map_4k(va_b, p1, kPteRw);
    t.pt.map_4k(va_b + k4K, p0, kPteRw);
    std::vector<std::byte> old(2 * k4K);
    random_bytes(old.data(), old.size(), 5);
    std::memcpy(h.ram(p0), old.data(), old.size());
    CmdBuf cb;
    cb.copy(va_a, va_b, 2 * k4K);
    ASSERT_EQ(t.status(2, cb), RBLN_FW_JOB_OK);
    // B's view: P1 then P0.
    EXPECT_EQ(std::memcmp(h.ram(p1), old.data(), k4K), 0);
    EXPECT_EQ(std::memcmp(h.ram(p0), old.data() + k4K, k4K), 0);
}

TEST_F(Packets, StridedCopyMovesRowsAndPlanesAndKeepsTheGaps) {
    // 3 planes x 5 rows x 100 bytes; src pitch 128 / slice 1024, dst pitch
    // 200 / slice 1500 in HBM.
    random_bytes(t.host(0), 4096, 9);
    std::memset(t.hbm(1, 0), kGuard, 8192);
    CmdBuf cb;
    cb.strided(TestCard::kVaHost + 3, TestCard::hbm_va(1, 5), 100, 5, 3, 128, 1024, 200, 1500);
    ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    std::vector<std::byte> want(8192, std::byte{kGuard});
    for (unsigned z = 0; z < 3; z++)
        for (unsigned y = 0; y < 5; y++)
            std::memcpy(&want[5 + z * 1500 + y * 200], t.host(3 + z * 1024 + y * 128), 100);
    EXPECT_EQ(std::memcmp(t.hbm(1, 0), want.data(), want.size()), 0);
    // 2-D into scattered pages, rows crossing page boundaries.
    for (std::uint64_t o = 0; o < kScatterPages * k4K; o++)
        *scatter(o) = std::byte{kGuard};
    cb.clear();
    cb.strided(TestCard::kVaHost + 7, kVaScatter + 4000, 300, 10, 1, 301, 0, 4096, 0);
    ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    for (unsigned y = 0; y < 10; y++) {
        for (unsigned x = 0; x < 300; x++)
            ASSERT_EQ(*scatter(4000 + y * 4096 + x), *t.host(7 + y * 301 + x)) << y << " " << x;
        EXPECT_EQ(*scatter(4000 + y * 4096 + 300), std::byte{kGuard});
    }
    EXPECT_EQ(*scatter(3999), std::byte{kGuard});
}

// Found by tests/fuzz: 0-byte rows of 2^32 x 2^32 used to translate row by
// row for as long as the rows lasted (47 s for 5.6e8 rows).
TEST_F(Packets, StridedCopyOfZeroWidthMovesNothingAndTranslatesNothing) {
    CmdBuf cb;
    cb.strided(0x7f'0000'0000ULL, 0x7e'0000'0000ULL, 0, 0xffffffffU, 0xffffffffU, 8, 8, 8, 8)
        .signal(TestCard::kVaHost, 1);
    const std::uint64_t moved = h.card.stats().dma_bytes;
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 1U);
    EXPECT_EQ(h.card.stats().dma_bytes, moved);
}

TEST_F(Packets, FillRepeatsOneTwoFourAndEightBytePatternsLittleEndian) {
    const std::uint64_t pattern = 0x8877665544332211ULL; // upper bytes beyond the width ignored
    for (std::uint32_t pb : {1U, 2U, 4U, 8U}) {
        for (std::uint64_t off : {0, 1, 3, 4093}) {
            for (std::uint64_t len :
                 {std::uint64_t{pb}, std::uint64_t{pb} * 1001, std::uint64_t{pb} << 19}) {
                std::memset(t.hbm(2, 0), kGuard, off + len + 64);
                CmdBuf cb;
                cb.fill(TestCard::hbm_va(2, off), len, pattern, pb);
                ASSERT_EQ(t.status(3, cb), RBLN_FW_JOB_OK);
                const std::byte* p = t.hbm(2, off);
                bool ok = true;
                for (std::uint64_t k = 0; k < len && ok; k++)
                    ok = std::to_integer<std::uint8_t>(p[k]) ==
                         static_cast<std::uint8_t>(pattern >> (8 * (k % pb)));
                EXPECT_TRUE(ok) << pb << " " << off << " " << len;
                EXPECT_TRUE(all(t.hbm(2, 0), off, kGuard));
                EXPECT_TRUE(all(p + len, 64, kGuard));
            }
        }
    }
    // Across scattered pages the phase continues.
    CmdBuf cb;
    cb.fill(kVaScatter + 4090, 24, 0x0403020104030201ULL, 4);
    ASSERT_EQ(t.status(3, cb), RBLN_FW_JOB_OK);
    for (unsigned k = 0; k < 24; k++)
        EXPECT_EQ(std::to_integer<unsigned>(*scatter(4090 + k)), 1 + k % 4) << k;
}

TEST_F(Packets, SignalStores64BitValuesThatLaterPacketsSee) {
    const std::uint64_t values[] = {0, 1, 0xffffffffULL, 1ULL << 32, 0xfedcba9876543210ULL, ~0ULL};
    CmdBuf cb;
    for (unsigned i = 0; i < 6; i++)
        cb.signal(TestCard::hbm_va(0, 8 * i), values[i]);
    cb.copy(TestCard::hbm_va(0), TestCard::kVaHost + 64, 48);
    ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    for (unsigned i = 0; i < 6; i++)
        EXPECT_EQ(t.host_u64(64 + 8 * i), values[i]) << i;
}

TEST_F(Packets, WaitOnAValueAlreadyThereDoesNotBlock) {
    t.set_host_u64(0, 10);
    CmdBuf cb;
    cb.wait(TestCard::kVaHost, 10).wait(TestCard::kVaHost, 3).signal(TestCard::kVaHost + 8, 1);
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(8), 1U);
}

// --- malformed packets ---------------------------------------------------------------

struct BadPacket {
    const char* name;
    std::function<void(CmdBuf&)> add;
    std::uint16_t status;
    std::uint32_t asid = TestCard::kAsid;
};

template <typename P> std::function<void(CmdBuf&)> pkt(std::uint8_t op, P p, std::uint8_t f = 0) {
    return [op, p, f](CmdBuf& cb) { cb.add(op, p, f); };
}

// A packet whose header claims `bytes` (the struct is cut or padded).
template <typename P>
std::function<void(CmdBuf&)> sized(std::uint8_t op, P p, std::uint32_t bytes) {
    return [op, p, bytes](CmdBuf& cb) {
        std::vector<std::byte> raw(bytes);
        std::memcpy(raw.data(), &p, std::min<std::size_t>(bytes, sizeof(p)));
        const std::uint32_t hdr = RBLN_FW_PKT_HDR(op, 0, bytes);
        std::memcpy(raw.data(), &hdr, 4);
        cb.raw(raw.data(), raw.size());
    };
}

std::function<void(CmdBuf&)> header(std::uint32_t hdr) {
    return [hdr](CmdBuf& cb) {
        const std::uint64_t w = hdr;
        cb.raw(&w, 8);
    };
}

rbln_fw_pkt_copy copy_pkt() {
    rbln_fw_pkt_copy p{};
    p.src = TestCard::kVaHost;
    p.dst = TestCard::kVaHost + 4096;
    p.size = 8;
    return p;
}
rbln_fw_pkt_copy_strided strided_pkt() {
    rbln_fw_pkt_copy_strided p{};
    p.src = TestCard::kVaHost;
    p.dst = TestCard::kVaHost + 4096;
    p.width = 8;
    p.height = 2;
    p.depth = 1;
    p.src_pitch = 16;
    p.dst_pitch = 16;
    return p;
}
rbln_fw_pkt_fill fill_pkt(std::uint32_t pb, std::uint64_t size) {
    rbln_fw_pkt_fill p{};
    p.pattern_bytes = pb;
    p.dst = TestCard::kVaHost + 4096;
    p.size = size;
    p.pattern = 0x99;
    return p;
}
rbln_fw_pkt_signal signal_pkt(std::uint64_t va = TestCard::kVaHost + 4096) {
    rbln_fw_pkt_signal p{};
    p.va = va;
    p.value = 1;
    return p;
}
rbln_fw_pkt_wait wait_pkt(std::uint64_t va = TestCard::kVaHost + 4096) {
    rbln_fw_pkt_wait p{};
    p.va = va;
    return p;
}
rbln_fw_pkt_timestamp ts_pkt(std::uint64_t va = TestCard::kVaHost + 4096) {
    rbln_fw_pkt_timestamp p{};
    p.va = va;
    return p;
}
rbln_fw_pkt_tlb_invalidate inv_pkt(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
    rbln_fw_pkt_tlb_invalidate p{};
    p.asid = asid;
    p.va = va;
    p.size = size;
    return p;
}
rbln_fw_pkt_write64 w64_pkt(std::uint64_t addr) {
    rbln_fw_pkt_write64 p{};
    p.addr = addr;
    p.value = 1;
    return p;
}

template <typename P, typename F> P with(P p, F f) {
    f(p);
    return p;
}

const std::uint64_t kKernelData = TestCard::kHost + 4096; // GPA for kernel jobs

class MalformedPacket : public ::testing::TestWithParam<BadPacket> {};

TEST_P(MalformedPacket, FailsTheJobAtItsOffsetAfterThePacketsBeforeIt) {
    TestCard t;
    std::memset(t.host(4096), 0, 4096);
    const BadPacket& c = GetParam();
    // Kernel jobs address host memory by DMA address, user jobs by VA.
    const std::uint64_t base = c.asid == 0 ? TestCard::kHost : TestCard::kVaHost;
    CmdBuf cb;
    cb.signal(base + 8, 1);
    const std::uint32_t at = cb.here();
    c.add(cb);
    cb.signal(base + 16, 2);
    const auto cpl = t.run(0, cb, c.asid);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, c.status);
    EXPECT_EQ(cpl->packet_offset, at);
    EXPECT_EQ(t.host_u64(8), 1U);  // the packet before ran
    EXPECT_EQ(t.host_u64(16), 0U); // the one after did not
    std::byte zero[4096] = {};
    EXPECT_EQ(std::memcmp(t.host(4096), zero, 4096), 0); // the bad one moved nothing
    // The next job of the ring runs normally.
    CmdBuf ok;
    ok.signal(base + 24, 3);
    EXPECT_EQ(t.status(0, ok, c.asid), RBLN_FW_JOB_OK);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedPacket,
    ::testing::Values(
        BadPacket{"HeaderSizeZero", header(RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 0)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"RunsPastTheBuffer", header(RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 64)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"UnknownOpcode8", header(RBLN_FW_PKT_HDR(0x08, 0, 8)), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"UnknownOpcode3f", header(RBLN_FW_PKT_HDR(0x3f, 0, 8)), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"GraphOpcode40", header(RBLN_FW_PKT_HDR(0x40, 0, 8)), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"GraphOpcode4f", header(RBLN_FW_PKT_HDR(0x4f, 0, 8)), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"NopFlags", header(RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 1, 8)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"CopyShort", sized(RBLN_FW_PKT_COPY, copy_pkt(), 24), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"CopyLong", sized(RBLN_FW_PKT_COPY, copy_pkt(), 40), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"CopyFlags", pkt(RBLN_FW_PKT_COPY, copy_pkt(), 1), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"CopyReserved",
                  pkt(RBLN_FW_PKT_COPY, with(copy_pkt(), [](auto& p) { p.reserved = 1; })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"StridedShort", sized(RBLN_FW_PKT_COPY_STRIDED, strided_pkt(), 64),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{
            "StridedReserved",
            pkt(RBLN_FW_PKT_COPY_STRIDED, with(strided_pkt(), [](auto& p) { p.reserved = 1; })),
            RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"StridedHeightZero",
                  pkt(RBLN_FW_PKT_COPY_STRIDED, with(strided_pkt(), [](auto& p) { p.height = 0; })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"StridedDepthZero",
                  pkt(RBLN_FW_PKT_COPY_STRIDED, with(strided_pkt(), [](auto& p) { p.depth = 0; })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"StridedPastTheAddressSpace",
                  pkt(RBLN_FW_PKT_COPY_STRIDED, with(strided_pkt(),
                                                     [](auto& p) {
                                                         p.dst_pitch = 1ULL << 63;
                                                         p.height = 3;
                                                     })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillShort", sized(RBLN_FW_PKT_FILL, fill_pkt(1, 8), 24), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillPatternBytes0", pkt(RBLN_FW_PKT_FILL, fill_pkt(0, 8)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillPatternBytes3", pkt(RBLN_FW_PKT_FILL, fill_pkt(3, 9)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillPatternBytes16", pkt(RBLN_FW_PKT_FILL, fill_pkt(16, 16)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillSizeNotMultipleOf4", pkt(RBLN_FW_PKT_FILL, fill_pkt(4, 6)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillSizeNotMultipleOf8", pkt(RBLN_FW_PKT_FILL, fill_pkt(8, 12)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"FillFlags", pkt(RBLN_FW_PKT_FILL, fill_pkt(1, 8), 0x80), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"SignalLong", sized(RBLN_FW_PKT_SIGNAL, signal_pkt(), 32),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"SignalUnknownFlag", pkt(RBLN_FW_PKT_SIGNAL, signal_pkt(), 2),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"SignalReserved",
                  pkt(RBLN_FW_PKT_SIGNAL, with(signal_pkt(), [](auto& p) { p.reserved = 1; })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"SignalMisaligned", pkt(RBLN_FW_PKT_SIGNAL, signal_pkt(TestCard::kVaHost + 4100)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"WaitShort", sized(RBLN_FW_PKT_WAIT, wait_pkt(), 24), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"WaitFlags", pkt(RBLN_FW_PKT_WAIT, wait_pkt(), 1), RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"WaitReserved",
                  pkt(RBLN_FW_PKT_WAIT, with(wait_pkt(), [](auto& p) { p.reserved = 1; })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"WaitMisaligned", pkt(RBLN_FW_PKT_WAIT, wait_pkt(TestCard::kVaHost + 4097)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"TimestampLong", sized(RBLN_FW_PKT_TIMESTAMP, ts_pkt(), 24),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"TimestampReserved",
                  pkt(RBLN_FW_PKT_TIMESTAMP, with(ts_pkt(), [](auto& p) { p.reserved = 1; })),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"TimestampMisaligned", pkt(RBLN_FW_PKT_TIMESTAMP, ts_pkt(TestCard::kVaHost + 4)),
                  RBLN_FW_JOB_BAD_PACKET},
        BadPacket{"LaunchShort", sized(RBLN_FW_PKT_LAUNCH, rbln_fw_pkt_launch{}, 168),
                  RBLN_FW_JOB_BAD_PACKET},
        // Privileged packets in a user job.
        BadPacket{"TlbInvalidateInUserJob", pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(1, 0, 0)),
                  RBLN_FW_JOB_PRIVILEGED},
        BadPacket{"Write64InUserJob", pkt(RBLN_FW_PKT_WRITE64, w64_pkt(kKernelData)),
                  RBLN_FW_JOB_PRIVILEGED},
        BadPacket{"UnknownPrivilegedInUserJob", header(RBLN_FW_PKT_HDR(0xff, 0, 8)),
                  RBLN_FW_JOB_PRIVILEGED},
        // Malformed privileged packets in a kernel job.
        BadPacket{"TlbInvalidateAsid0", pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(0, 0, 0)),
                  RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{"TlbInvalidateAsid4096",
                  pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(RBLN_FW_MAX_ASID, 0, 0)),
                  RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{"TlbInvalidateVaMisaligned",
                  pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(1, 0x800, 4096)), RBLN_FW_JOB_BAD_PACKET,
                  0},
        BadPacket{"TlbInvalidateSizeMisaligned",
                  pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(1, 0, 100)), RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{"TlbInvalidateBeyond48Bits",
                  pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(1, 1ULL << 48, 4096)),
                  RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{"TlbInvalidateFlags", pkt(RBLN_FW_PKT_TLB_INVALIDATE, inv_pkt(1, 0, 0), 1),
                  RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{"Write64Misaligned", pkt(RBLN_FW_PKT_WRITE64, w64_pkt(kKernelData + 4)),
                  RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{
            "Write64Reserved",
            pkt(RBLN_FW_PKT_WRITE64, with(w64_pkt(kKernelData), [](auto& p) { p.reserved = 1; })),
            RBLN_FW_JOB_BAD_PACKET, 0},
        BadPacket{"UnknownPrivilegedInKernelJob", header(RBLN_FW_PKT_HDR(0x82, 0, 8)),
                  RBLN_FW_JOB_BAD_PACKET, 0}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Packets, NopWithAReservedWordFailsButPaddingBeyondItIsIgnored) {
    CmdBuf cb;
    const std::uint64_t nop = RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 8) | (1ULL << 32);
    cb.raw(&nop, 8);
    auto cpl = t.run(0, cb);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_BAD_PACKET);
    cb.clear();
    std::uint64_t padded[3] = {RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 24), ~0ULL, ~0ULL};
    cb.raw(padded, sizeof(padded));
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
}

// --- kernel jobs ----------------------------------------------------------------------

TEST_F(Packets, KernelJobAddressesHostMemoryByDmaAddressAndMayUsePrivilegedPackets) {
    random_bytes(t.host(0), 256, 3);
    CmdBuf cb;
    cb.copy(TestCard::kHost, TestCard::kHost + 8192, 256)
        .write64(TestCard::kHost + 12288, 0x1234)
        .signal(TestCard::kHost + 12296, 5);
    EXPECT_EQ(t.status(1, cb, 0), RBLN_FW_JOB_OK);
    EXPECT_EQ(std::memcmp(t.host(8192), t.host(0), 256), 0);
    EXPECT_EQ(t.host_u64(12288), 0x1234U);
    EXPECT_EQ(t.host_u64(12296), 5U);
}

TEST_F(Packets, KernelJobOutsideHostRamFaultsWithBadAddress) {
    CmdBuf cb;
    cb.write64(0xfee00000, 1);
    auto cpl = t.run(1, cb, 0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_reason, RBLN_FW_MMU_BAD_ADDRESS);
    EXPECT_EQ(cpl->fault_va, 0xfee00000U);
    EXPECT_EQ(cpl->fault_access, RBLN_FW_ACCESS_WRITE);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].data[0], 0U); // asid 0
    EXPECT_EQ(evs[0].chiplet, 1U);
    // A kernel job's command buffer outside RAM faults the same way.
    cpl = h.run_job(1, FakeHost::job(0, h.ram_size(), 8));
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_reason, RBLN_FW_MMU_BAD_ADDRESS);
    EXPECT_EQ(cpl->fault_access, RBLN_FW_ACCESS_READ);
}

TEST_F(Packets, TlbInvalidatePacketOfAKernelJobDropsStaleTranslationsOfEveryRing) {
    const std::uint64_t va = 0x53'0000'0000ULL;
    t.pt.map_4k(va, TestCard::kHost + 0x10000, kPteRw);
    t.set_host_u64(0x10000, 1);
    t.set_host_u64(0x11000, 2);
    CmdBuf rd;
    rd.copy(va, TestCard::kVaHost + 0x12000, 8);
    ASSERT_EQ(t.status(0, rd), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0x12000), 1U);
    t.pt.map_4k(va, TestCard::kHost + 0x11000, kPteRw);
    ASSERT_EQ(t.status(0, rd), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0x12000), 1U); // cached
    CmdBuf inv;
    inv.tlb_invalidate(TestCard::kAsid, va, k4K);
    ASSERT_EQ(t.status(2, inv, 0), RBLN_FW_JOB_OK);
    ASSERT_EQ(t.status(0, rd), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0x12000), 2U);
}

// --- MMU faults from packets -----------------------------------------------------------

struct FaultCase {
    const char* name;
    std::function<void(CmdBuf&)> add;
    std::uint64_t va;
    std::uint32_t reason;
    std::uint32_t access;
};

constexpr std::uint64_t kHole = 0x60'0000'0000ULL;
constexpr std::uint64_t kEndOfHost = TestCard::kVaHost + (16ULL << 20); // first unmapped byte

class PacketFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(PacketFault, FailsWithTheFaultMovesNoByteAndPostsTheEvent) {
    TestCard t;
    const FaultCase& c = GetParam();
    std::memset(t.host(0), kGuard, 64 * 1024);
    std::memset(t.hbm(0, 0), kGuard, 64 * 1024);
    CmdBuf cb;
    cb.signal(TestCard::kVaHost + 64 * 1024, 1);
    const std::uint32_t at = cb.here();
    c.add(cb);
    cb.signal(TestCard::kVaHost + 64 * 1024 + 8, 2);
    const auto cpl = t.run(2, cb);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->packet_offset, at);
    EXPECT_EQ(cpl->fault_va, c.va);
    EXPECT_EQ(cpl->fault_reason, c.reason);
    EXPECT_EQ(cpl->fault_access, c.access);
    EXPECT_EQ(t.host_u64(64 * 1024), 1U);
    EXPECT_EQ(t.host_u64(64 * 1024 + 8), 0U);
    std::vector<std::byte> guard(64 * 1024, std::byte{kGuard});
    EXPECT_EQ(std::memcmp(t.host(0), guard.data(), guard.size()), 0);
    EXPECT_EQ(std::memcmp(t.hbm(0, 0), guard.data(), guard.size()), 0);
    const auto evs = t.h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_MMU_FAULT);
    EXPECT_EQ(evs[0].code, c.reason);
    EXPECT_EQ(evs[0].chiplet, 2U);
    EXPECT_EQ(evs[0].data[0], TestCard::kAsid);
    EXPECT_EQ(evs[0].data[1], c.va);
    EXPECT_EQ(evs[0].data[2], c.access);
    EXPECT_EQ(evs[0].data[3], 3U); // 1 + ring
    CmdBuf ok;
    ok.nop();
    EXPECT_EQ(t.status(2, ok), RBLN_FW_JOB_OK);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PacketFault,
    ::testing::Values(
        FaultCase{"CopyFromAHole", [](CmdBuf& cb) { cb.copy(kHole + 0x80, TestCard::kVaHost, 64); },
                  kHole + 0x80, RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_READ},
        FaultCase{"CopyRunningOffTheMapping",
                  [](CmdBuf& cb) { cb.copy(kEndOfHost - 100, TestCard::hbm_va(0), 200); },
                  kEndOfHost, RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_READ},
        FaultCase{"CopyIntoReadOnly",
                  [](CmdBuf& cb) { cb.copy(TestCard::hbm_va(0), TestCard::kVaRo + 10, 64); },
                  TestCard::kVaRo + 10, RBLN_FW_MMU_NO_WRITE, RBLN_FW_ACCESS_WRITE},
        FaultCase{"CopyIntoAHoleAfterAGoodSource",
                  [](CmdBuf& cb) { cb.copy(TestCard::kVaHost, kHole, 64); }, kHole,
                  RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_WRITE},
        FaultCase{"StridedLastRowUnmapped",
                  [](CmdBuf& cb) {
                      cb.strided(TestCard::kVaHost, kEndOfHost - 3 * 4096, 64, 4, 1, 64, 0, 4096,
                                 0);
                  },
                  kEndOfHost, RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_WRITE},
        FaultCase{"FillIntoReadOnly", [](CmdBuf& cb) { cb.fill(TestCard::kVaRo + 100, 64, 0, 1); },
                  TestCard::kVaRo + 100, RBLN_FW_MMU_NO_WRITE, RBLN_FW_ACCESS_WRITE},
        FaultCase{"SignalIntoAHole", [](CmdBuf& cb) { cb.signal(kHole + 8, 1); }, kHole + 8,
                  RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_WRITE},
        FaultCase{"WaitOnAHole", [](CmdBuf& cb) { cb.wait(kHole + 16, 1); }, kHole + 16,
                  RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_READ},
        FaultCase{"TimestampIntoReadOnly", [](CmdBuf& cb) { cb.timestamp(TestCard::kVaRo); },
                  TestCard::kVaRo, RBLN_FW_MMU_NO_WRITE, RBLN_FW_ACCESS_WRITE},
        FaultCase{"CopyBeyond48Bits",
                  [](CmdBuf& cb) { cb.copy((1ULL << 48) - 8, TestCard::kVaHost, 16); },
                  (1ULL << 48) - 8, RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_READ}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Packets, AccessBeyond48BitVasIsBadVa) {
    CmdBuf cb;
    cb.signal(1ULL << 48, 1);
    const auto cpl = t.run(0, cb);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_reason, RBLN_FW_MMU_BAD_VA);
}

} // namespace
} // namespace packets_test
