// SPDX-License-Identifier: GPL-2.0
// dma::copy on its own: the pieces a COPY packet's VA ranges translate to,
// below and above the size from which the engine's writes bypass the CPU
// caches (dma::kStreamThreshold), at odd offsets and sizes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "dma.h"

using namespace rbln::emu;

namespace dma_test {

namespace {

constexpr std::byte kGuard{0xa5};

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
    std::vector<std::byte> v(n);
    std::uint32_t x = seed;
    for (std::byte& b : v) {
        x = x * 1664525U + 1013904223U;
        b = static_cast<std::byte>(x >> 24);
    }
    return v;
}

// @buf cut into pieces of @piece bytes, listed last piece first.
std::vector<HostSpan> reversed_pieces(std::byte* buf, std::size_t n, std::size_t piece) {
    std::vector<HostSpan> out;
    const std::size_t count = (n + piece - 1) / piece;
    for (std::size_t i = count; i-- > 0;)
        out.emplace_back(buf + i * piece, std::min(piece, n - i * piece));
    return out;
}

// The bytes @spans list, in order.
std::vector<std::byte> gather(const std::vector<HostSpan>& spans) {
    std::vector<std::byte> out;
    for (const HostSpan& s : spans)
        out.insert(out.end(), s.begin(), s.end());
    return out;
}

bool all(const std::byte* p, std::size_t n, std::byte v) {
    for (std::size_t i = 0; i < n; i++) {
        if (p[i] != v)
            return false;
    }
    return true;
}

} // namespace

TEST(DmaCopy, ScatteredPagesAboveTheStreamThresholdArriveByteExactAtAnOddOffset) {
    for (const std::size_t n : {dma::kStreamThreshold - 1, dma::kStreamThreshold + 4097}) {
        std::vector<std::byte> src = pattern(n, 7);
        std::vector<std::byte> dst(n + 128, kGuard);
        const std::vector<HostSpan> from = reversed_pieces(src.data(), n, 4096);
        const std::vector<HostSpan> to{HostSpan(dst.data() + 61, n)};
        ASSERT_TRUE(dma::copy(to, from));
        const std::vector<std::byte> want = gather(from);
        EXPECT_EQ(std::memcmp(dst.data() + 61, want.data(), n), 0) << n;
        EXPECT_TRUE(all(dst.data(), 61, kGuard));
        EXPECT_TRUE(all(dst.data() + 61 + n, 128 - 61, kGuard));
    }
}

TEST(DmaCopy, OddSizedPiecesOnBothSidesArriveByteExactAboveTheStreamThreshold) {
    const std::size_t n = dma::kStreamThreshold + 12345;
    std::vector<std::byte> src = pattern(n + 3, 11);
    std::vector<std::byte> dst(n + 64, kGuard);
    const std::vector<HostSpan> from = reversed_pieces(src.data() + 3, n, 4093);
    const std::vector<HostSpan> to = reversed_pieces(dst.data() + 5, n, 1021);
    ASSERT_TRUE(dma::copy(to, from));
    EXPECT_EQ(gather(to), gather(from));
    EXPECT_TRUE(all(dst.data(), 5, kGuard));
    EXPECT_TRUE(all(dst.data() + 5 + n, 59, kGuard));
}

TEST(DmaCopy, OneLargeSpanWithACancelFlagArrivesByteExact) {
    const std::size_t n = (3 * dma::kStreamThreshold) + 17;
    std::vector<std::byte> src = pattern(n, 3);
    std::vector<std::byte> dst(n + 9, kGuard);
    const Cancel cancel{false};
    ASSERT_TRUE(dma::copy({HostSpan(dst.data() + 9, n)}, {HostSpan(src.data(), n)}, &cancel));
    EXPECT_EQ(std::memcmp(dst.data() + 9, src.data(), n), 0);
    EXPECT_TRUE(all(dst.data(), 9, kGuard));
}

TEST(DmaCopy, ASetCancelFlagStopsALargeCopyBeforeItsEnd) {
    const std::size_t n = 64ULL << 20;
    std::vector<std::byte> src = pattern(n, 5);
    std::vector<std::byte> dst(n, kGuard);
    const Cancel cancel{true};
    EXPECT_FALSE(dma::copy({HostSpan(dst.data(), n)}, {HostSpan(src.data(), n)}, &cancel));
    EXPECT_TRUE(all(dst.data() + n - 4096, 4096, kGuard)); // the last bytes did not move
    // Through pieces, last page first: the first page would move last.
    std::vector<std::byte> dst2(n, kGuard);
    EXPECT_FALSE(
        dma::copy(reversed_pieces(dst2.data(), n, 4096), {HostSpan(src.data(), n)}, &cancel));
    EXPECT_TRUE(all(dst2.data(), 4096, kGuard));
}

TEST(DmaCopy, OverlappingLargeCopyIsStillAMemmove) {
    const std::size_t n = dma::kStreamThreshold + 4097;
    std::vector<std::byte> buf = pattern(n + 4097, 9);
    const std::vector<std::byte> want(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    ASSERT_TRUE(dma::copy({HostSpan(buf.data() + 4097, n)}, {HostSpan(buf.data(), n)}));
    EXPECT_EQ(std::memcmp(buf.data() + 4097, want.data(), n), 0);
    // The same through pieces (page spans of the one buffer, in order).
    std::vector<std::byte> buf2 = pattern(n + 4097, 9);
    std::vector<HostSpan> from;
    std::vector<HostSpan> to;
    for (std::size_t at = 0; at < n; at += 4096) {
        const std::size_t c = std::min<std::size_t>(4096, n - at);
        from.emplace_back(buf2.data() + at, c);
        to.emplace_back(buf2.data() + 4097 + at, c);
    }
    ASSERT_TRUE(dma::copy(to, from));
    EXPECT_EQ(std::memcmp(buf2.data() + 4097, want.data(), n), 0);
}
} // namespace dma_test
