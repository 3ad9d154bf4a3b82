// SPDX-License-Identifier: GPL-2.0
// dma::copy on its own: the pieces a COPY packet's VA ranges translate to,
// below and above the size from which the engine's writes bypass the CPU
// caches (dma::stream_threshold()), at odd offsets and sizes; and how that
// size is chosen.
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
    for (const std::size_t n : {dma::stream_threshold() - 1, dma::stream_threshold() + 4097}) {
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
    const std::size_t n = dma::stream_threshold() + 12345;
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
    const std::size_t n = (3 * dma::stream_threshold()) + 17;
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
    const std::size_t n = dma::stream_threshold() + 4097;
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

TEST(DmaCopy, CopiesOnBothSidesOfAThresholdSetAtRunTimeArriveByteExact) {
    const std::size_t before = dma::stream_threshold();
    constexpr std::size_t kSmall = 64 * 1024;
    dma::set_stream_threshold(kSmall);
    for (const std::size_t n : {kSmall - 1, kSmall, kSmall + 4097}) {
        std::vector<std::byte> src = pattern(n, 13);
        std::vector<std::byte> dst(n + 64, kGuard);
        const std::vector<HostSpan> from = reversed_pieces(src.data(), n, 4096);
        ASSERT_TRUE(dma::copy({HostSpan(dst.data() + 3, n)}, from));
        EXPECT_EQ(std::memcmp(dst.data() + 3, gather(from).data(), n), 0) << n;
        EXPECT_TRUE(all(dst.data() + 3 + n, 61, kGuard)) << n;
    }
    EXPECT_EQ(dma::stream_threshold(), kSmall);
    dma::set_stream_threshold(0);
    EXPECT_EQ(dma::stream_threshold(), 1U); // every copy apart from its source streams
    dma::set_stream_threshold(before);
}

// The threshold rule on made-up measurements.
TEST(DmaStreamThreshold, IsTheSmallestClearStreamingWinWithNoClearCachedWinAbove) {
    constexpr std::size_t M = 1ULL << 20;
    // The clear win at 2 MiB does not count: cached wins clearly at 4 MiB.
    EXPECT_EQ(
        dma::choose_stream_threshold(
            {{1 * M, 50, 30}, {2 * M, 40, 45}, {4 * M, 45, 40}, {8 * M, 30, 35}, {16 * M, 20, 34}}),
        8 * M);
    // Ties (within 10%) neither start nor stop the range.
    EXPECT_EQ(dma::choose_stream_threshold(
                  {{1 * M, 50, 30}, {2 * M, 40, 42}, {4 * M, 30, 40}, {8 * M, 16.8, 16.2}}),
              4 * M);
    EXPECT_EQ(dma::choose_stream_threshold({{1 * M, 10, 12}, {2 * M, 10, 12}}), 1 * M);
}

TEST(DmaStreamThreshold, IsTwiceTheLargestSizeWithoutAClearStreamingWinOrDefaultWithoutData) {
    constexpr std::size_t M = 1ULL << 20;
    EXPECT_EQ(dma::choose_stream_threshold({{1 * M, 50, 30}, {32 * M, 40, 39}}), 64 * M);
    EXPECT_EQ(dma::choose_stream_threshold({{1 * M, 20, 40}, {32 * M, 40, 30}}), 64 * M);
    EXPECT_EQ(dma::choose_stream_threshold({}), dma::kDefaultStreamThreshold);
}

// On this host, for real.
TEST(DmaStreamThreshold, CalibrationMeasuresBothWaysAtEverySizeAndAppliesItsRule) {
    const dma::StreamCalibration c = dma::calibrate_stream_threshold();
    ASSERT_EQ(c.points.size(), 6U);
    std::size_t want = 1ULL << 20;
    for (const dma::StreamPoint& p : c.points) {
        EXPECT_EQ(p.size, want);
        EXPECT_GT(p.cached_gbps, 0.0) << p.size;
        EXPECT_GT(p.streamed_gbps, 0.0) << p.size;
        want *= 2;
    }
    EXPECT_EQ(c.threshold, dma::choose_stream_threshold(c.points));
}

} // namespace dma_test
