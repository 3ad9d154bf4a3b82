// SPDX-License-Identifier: GPL-2.0
// Host tests of rbln-soak's CPU reference (soak_ref.hpp): the soak can only
// call a card result wrong if its own arithmetic is the card's, so the
// conversions are checked on known values and bit for bit against the
// emulated card's own (tools/rbln-emu/src/fp.h, an independent
// implementation), and the generator's draws are pinned so a printed seed
// replays on any machine.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fp.h" // tools/rbln-emu/src: the card's conversions
#include "soak_ref.hpp"

namespace rbln::soak {
namespace {

TEST(SoakRef, HalfRoundsToNearestEvenOnKnownValues) {
    EXPECT_EQ(f32_to_f16(1.0F), 0x3c00);
    EXPECT_EQ(f32_to_f16(-2.0F), 0xc000);
    EXPECT_EQ(f32_to_f16(-0.0F), 0x8000);
    EXPECT_EQ(f32_to_f16(65504.0F), 0x7bff);
    EXPECT_EQ(f32_to_f16(65519.996F), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0F), 0x7c00); // the tie above the largest rounds to Inf
    EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0F, -24)), 0x0001);        // the smallest subnormal
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0F, -25)), 0x0000);        // a tie: to even (0)
    EXPECT_EQ(f32_to_f16(std::ldexp(3.0F, -25)), 0x0002);        // a tie: to even (2)
    EXPECT_EQ(f32_to_f16(1.0F + std::ldexp(1.0F, -11)), 0x3c00); // tie between 1 and next
    EXPECT_EQ(f32_to_f16(1.0F + std::ldexp(3.0F, -11)), 0x3c02);
    EXPECT_EQ(f32_to_f16(std::ldexp(1023.5F, -24)), 0x0400); // rounds up into the normals
}

TEST(SoakRef, BfloatRoundsToNearestEvenOnKnownValues) {
    EXPECT_EQ(f32_to_bf16(1.0F), 0x3f80);
    EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000U)), 0x3f80); // tie: to even
    EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000U)), 0x3f82); // tie: to even
    EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001U)), 0x3f81);
    EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f7fffffU)), 0x7f80); // overflow to Inf
}

TEST(SoakRef, EveryHalfAndBfloatSurvivesARoundTrip) {
    for (std::uint32_t h = 0; h < 0x10000U; h++) {
        const auto v = static_cast<std::uint16_t>(h);
        if ((v & 0x7c00U) != 0x7c00U || (v & 0x3ffU) == 0) { // not an fp16 NaN
            ASSERT_EQ(f32_to_f16(f16_to_f32(v)), v) << std::hex << h;
        }
        if ((v & 0x7f80U) != 0x7f80U || (v & 0x7fU) == 0) { // not a bf16 NaN
            ASSERT_EQ(f32_to_bf16(bf16_to_f32(v)), v) << std::hex << h;
        }
    }
}

TEST(SoakRef, ConversionsAreTheEmulatedCardsBitForBit) {
    Rng rng(7);
    for (int i = 0; i < 2'000'000; i++) {
        // Every exponent equally often: random bits, NaNs included.
        const auto bits = static_cast<std::uint32_t>(rng.next());
        const float f = std::bit_cast<float>(bits);
        ASSERT_EQ(f32_to_f16(f), emu::fp::f32_to_f16(f)) << std::hex << bits;
        ASSERT_EQ(f32_to_bf16(f), emu::fp::f32_to_bf16(f)) << std::hex << bits;
    }
    for (std::uint32_t h = 0; h < 0x10000U; h++) {
        const auto v = static_cast<std::uint16_t>(h);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(f16_to_f32(v)),
                  std::bit_cast<std::uint32_t>(emu::fp::f16_to_f32(v)))
            << std::hex << h;
    }
}

TEST(SoakRef, ElementwiseKernelsRoundOnceAfterOneFp32Operation) {
    // 2049 is not an fp16; 2048 + 1 in fp32 is exact, then rounds to even.
    EXPECT_EQ(apply(Kernel::Add, Type::Fp16, 2048.0F, 1.0F, 0.0F), 2048.0F);
    EXPECT_EQ(apply(Kernel::Add, Type::Fp16, 2048.0F, 3.0F, 0.0F), 2052.0F);
    EXPECT_EQ(apply(Kernel::Mul, Type::Bf16, 3.0F, 3.0F, 0.0F), 9.0F);
    EXPECT_EQ(apply(Kernel::Scale, Type::Fp32, 3.0F, 0.0F, -0.5F), -1.5F);
    // RELU of -0 is +0 (the card's rule), not -0.
    EXPECT_EQ(std::bit_cast<std::uint32_t>(apply(Kernel::Relu, Type::Fp32, -0.0F, 0.0F, 0.0F)), 0U);
    EXPECT_EQ(apply(Kernel::Relu, Type::Fp16, -3.0F, 0.0F, 0.0F), 0.0F);
}

TEST(SoakRef, MatmulOfSmallIntegersIsExact) {
    const std::vector<float> a{1, 2, 3, 4, 5, 6};   // 2 x 3
    const std::vector<float> b{-1, 0, 2, 1, -3, 4}; // 3 x 2
    const std::vector<float> out = matmul(Type::Fp32, a, b, 2, 2, 3);
    EXPECT_EQ(out, (std::vector<float>{-6, 14, -12, 29}));
    EXPECT_TRUE(small_integer(-4.0F, 4.0F));
    EXPECT_FALSE(small_integer(4.5F, 8.0F));
    EXPECT_FALSE(small_integer(5.0F, 4.0F));
}

TEST(SoakRef, ViewsEnumerateOffsetsTransposesAndBroadcasts) {
    const View t{1, {2, 3}, {1, 2}}; // a transposed 3 x 2 from element 1
    EXPECT_EQ(t.indices(), (std::vector<std::size_t>{1, 3, 5, 2, 4, 6}));
    const View row{4, {3, 2}, {0, 1}}; // one row broadcast three times
    EXPECT_EQ(row.indices(), (std::vector<std::size_t>{4, 5, 4, 5, 4, 5}));
    EXPECT_EQ(row_major({2, 3, 4}), (std::vector<std::int64_t>{12, 4, 1}));
}

TEST(SoakRef, TheDrawsOfASeedAreFixed) {
    // A seed printed by one build replays on another: the draws are
    // SplitMix64's, not a standard library's.
    Rng rng(0);
    EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);
    EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ULL);
    Rng r2(42);
    for (int i = 0; i < 1000; i++) {
        const std::uint64_t v = r2.range(3, 10);
        ASSERT_GE(v, 3U);
        ASSERT_LE(v, 10U);
        const std::uint64_t s = r2.log_size(256, 256 << 10);
        ASSERT_GE(s, 256U);
        ASSERT_LE(s, 256U << 10);
    }
    EXPECT_NE(mix(1, 0), mix(1, 1));
    EXPECT_NE(mix(1, 0), mix(2, 0));
}

} // namespace
} // namespace rbln::soak
