// SPDX-License-Identifier: GPL-2.0
// The fp16/bf16 conversions of the built-in kernels (fp.h) and the vector
// primitives (simd.h): widening exhaustively against the mathematical
// value, narrowing against reference cases (ties, subnormals, overflow,
// NaN payloads) and against an independent reference on millions of
// values, and the AVX2 code bit for bit against the scalar code.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp.h"
#include "simd.h"

using namespace rbln::emu;

namespace fp_test {

namespace {

std::uint32_t bits(float f) {
    return std::bit_cast<std::uint32_t>(f);
}
float from_bits(std::uint32_t u) {
    return std::bit_cast<float>(u);
}

// fp16 -> value, from the definition of the format.
double f16_value(std::uint16_t h) {
    const int sign = (h & 0x8000) != 0 ? -1 : 1;
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    if (e == 0)
        return sign * std::ldexp(m, -24);
    return sign * std::ldexp(1024 + m, e - 25);
}

// Round |x| (finite, not NaN) to a format with `mant` fraction bits, minimum
// normal exponent `emin`, overflow threshold `max_finite` and bias: the
// encoding without the sign, computed in double with nearbyint (ties to
// even under the default rounding mode).
std::uint32_t reference_narrow(double ax, int mant, int emin, double max_finite, int bias,
                               std::uint32_t inf) {
    const double half_ulp_max = std::ldexp(1.0, std::ilogb(max_finite) - mant - 1);
    if (ax >= max_finite + half_ulp_max)
        return inf; // the tie above max_finite rounds to even: up (max is odd)
    const int e = ax == 0 ? emin : std::max(std::ilogb(ax), emin);
    const double q = std::ldexp(1.0, e - mant);
    const double n = std::nearbyint(ax / q);
    const double r = n * q;
    if (r < std::ldexp(1.0, emin))
        return static_cast<std::uint32_t>(n); // subnormal (or zero)
    const int re = std::ilogb(r);
    const auto frac = static_cast<std::uint32_t>(r / std::ldexp(1.0, re - mant)) - (1U << mant);
    return (static_cast<std::uint32_t>(re + bias) << mant) | frac;
}

std::uint16_t reference_f16(float f) {
    const std::uint32_t u = bits(f);
    const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
    return static_cast<std::uint16_t>(
        sign | reference_narrow(std::fabs(static_cast<double>(f)), 10, -14, 65504.0, 15, 0x7c00));
}

std::uint16_t reference_bf16(float f) {
    const std::uint32_t u = bits(f);
    const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
    const double max = std::ldexp(255.0, 120); // (2 - 2^-7) * 2^127
    return static_cast<std::uint16_t>(
        sign | reference_narrow(std::fabs(static_cast<double>(f)), 7, -126, max, 127, 0x7f80));
}

// Every fp32 bit pattern whose low `low_bits` are one of a few rounding
// cases, over all high bits: ~4 M values for fp16's 13 dropped bits.
std::vector<std::uint32_t> rounding_sample(unsigned low_bits) {
    const std::uint32_t half = 1U << (low_bits - 1);
    const std::uint32_t mask = (1U << low_bits) - 1;
    const std::uint32_t lows[] = {0, 1, half - 1, half, half + 1, mask};
    std::mt19937 rng(42);
    std::vector<std::uint32_t> out;
    const std::uint32_t highs = 1U << (32 - low_bits);
    out.reserve(static_cast<std::size_t>(highs) * 7);
    for (std::uint32_t hi = 0; hi < highs; hi++) {
        for (std::uint32_t lo : lows)
            out.push_back((hi << low_bits) | lo);
        out.push_back((hi << low_bits) | (rng() & mask));
    }
    return out;
}

} // namespace

// --- widening ------------------------------------------------------------------

TEST(Fp16, EveryFp16WidensToItsExactValueNaNsKeepTheirPayload) {
    for (std::uint32_t h = 0; h < 0x10000; h++) {
        const auto v = static_cast<std::uint16_t>(h);
        const float f = fp::f16_to_f32(v);
        const std::uint32_t e = (h >> 10) & 0x1f;
        const std::uint32_t m = h & 0x3ff;
        if (e == 0x1f) {
            // Inf or NaN: all-ones exponent, the payload moved up, sign kept.
            EXPECT_EQ(bits(f), ((h & 0x8000U) << 16) | 0x7f800000U | (m << 13)) << h;
            EXPECT_EQ(std::isnan(f), m != 0) << h;
            continue;
        }
        EXPECT_EQ(static_cast<double>(f), f16_value(v)) << h;
        EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << h; // -0 too
    }
}

TEST(Bf16, EveryBf16WidensToTheFp32WithTheSameHighBits) {
    for (std::uint32_t b = 0; b < 0x10000; b++) {
        const float f = fp::bf16_to_f32(static_cast<std::uint16_t>(b));
        EXPECT_EQ(bits(f), b << 16) << b;
        const std::uint32_t e = (b >> 7) & 0xff;
        if (e != 0 && e != 0xff) {
            const double want = ((b & 0x8000) != 0 ? -1 : 1) *
                                std::ldexp(128 + (b & 0x7f), static_cast<int>(e) - 134);
            EXPECT_EQ(static_cast<double>(f), want) << b;
        }
    }
}

// --- narrowing: reference cases ------------------------------------------------------

struct Narrow {
    std::uint32_t in; // fp32 bits
    std::uint16_t out;
    const char* what;
};

TEST(Fp16, NarrowingReferenceCases) {
    const float t24 = std::ldexp(1.0F, -24);
    const Narrow cases[] = {
        {bits(1.0F), 0x3c00, "one"},
        {bits(-2.0F), 0xc000, "minus two"},
        {bits(0.0F), 0x0000, "zero"},
        {bits(-0.0F), 0x8000, "minus zero"},
        {bits(65504.0F), 0x7bff, "largest"},
        {bits(65519.996F), 0x7bff, "just below the tie to Inf"},
        {bits(65520.0F), 0x7c00, "tie above the largest: even is Inf"},
        {bits(1e10F), 0x7c00, "overflow"},
        {bits(-1e10F), 0xfc00, "negative overflow"},
        {0x7f800000, 0x7c00, "Inf"},
        {0xff800000, 0xfc00, "-Inf"},
        {bits(1.0F + std::ldexp(1.0F, -11)), 0x3c00, "tie, even below"},
        {bits(1.0F + 3 * std::ldexp(1.0F, -11)), 0x3c02, "tie, even above"},
        {bits(1.0F + std::ldexp(1.0F, -11) + std::ldexp(1.0F, -23)), 0x3c01, "just above a tie"},
        {bits(2047.5F), 0x6800, "tie carrying into the exponent"},
        {bits(std::ldexp(1.0F, -14)), 0x0400, "smallest normal"},
        {bits(std::ldexp(1.0F, -14) - std::ldexp(1.0F, -25)), 0x0400,
         "tie between largest subnormal and smallest normal"},
        {bits(std::ldexp(1.0F, -14) - std::ldexp(1.0F, -24)), 0x03ff, "largest subnormal"},
        {bits(std::ldexp(1.0F, -14) - 3 * std::ldexp(1.0F, -25)), 0x03fe,
         "tie 1022|1023: even 1022"},
        {bits(t24), 0x0001, "smallest subnormal"},
        {bits(t24 / 2), 0x0000, "half the smallest subnormal: tie to 0"},
        {bits(t24 / 2) + 1, 0x0001, "just above half the smallest"},
        {bits(3 * t24 / 2), 0x0002, "tie 1|2: even 2"},
        {bits(5 * t24 / 2), 0x0002, "tie 2|3: even 2"},
        {bits(-5 * t24), 0x8005, "negative subnormal"},
        {bits(std::ldexp(1.0F, -30)), 0x0000, "far below"},
        {0x00000001, 0x0000, "fp32 denormal"},
        {0x7fc00000, 0x7e00, "quiet NaN"},
        {0x7f800001, 0x7e00, "signaling NaN becomes quiet"},
        {0x7fa00000, 0x7f00, "signaling NaN keeps its top payload"},
        {0x7fffe000, 0x7fff, "NaN with every kept payload bit"},
        {0xffc00001, 0xfe00, "negative NaN"},
    };
    for (const Narrow& c : cases)
        EXPECT_EQ(fp::f32_to_f16(from_bits(c.in)), c.out) << c.what << ": 0x" << std::hex << c.in;
}

TEST(Bf16, NarrowingReferenceCases) {
    const Narrow cases[] = {
        {bits(1.0F), 0x3f80, "one"},
        {bits(-0.0F), 0x8000, "minus zero"},
        {bits(1.0F + std::ldexp(1.0F, -8)), 0x3f80, "tie, even below"},
        {bits(1.0F + 3 * std::ldexp(1.0F, -8)), 0x3f82, "tie, even above"},
        {bits(1.0F + std::ldexp(1.0F, -8)) + 1, 0x3f81, "just above a tie"},
        {0x7f7fffff, 0x7f80, "largest fp32 rounds to Inf"},
        {0x7f7f7fff, 0x7f7f, "largest bf16"},
        {0x7f7f8000, 0x7f80, "tie above the largest: even is Inf"},
        {0x7f800000, 0x7f80, "Inf"},
        {0xff800000, 0xff80, "-Inf"},
        {0x00008000, 0x0000, "subnormal tie to even 0"},
        {0x00018000, 0x0002, "subnormal tie to even 2"},
        {0x00010001, 0x0001, "subnormal rounding down"},
        {0x007fffff, 0x0080, "largest fp32 subnormal rounds to the smallest normal"},
        {0x7fc00000, 0x7fc0, "quiet NaN"},
        {0x7f800001, 0x7fc0, "signaling NaN becomes quiet"},
        {0x7fa00000, 0x7fe0, "signaling NaN keeps its top payload"},
        {0xff800001, 0xffc0, "negative NaN"},
        {0x7fbfffff, 0x7fff, "NaN that would round to Inf stays NaN"},
    };
    for (const Narrow& c : cases)
        EXPECT_EQ(fp::f32_to_bf16(from_bits(c.in)), c.out) << c.what << ": 0x" << std::hex << c.in;
}

// --- narrowing: against the independent reference --------------------------------------

TEST(Fp16, NarrowingMatchesAnIndependentReferenceAtEveryExponentAndRoundingCase) {
    ASSERT_EQ(std::fegetround(), FE_TONEAREST);
    std::uint64_t checked = 0;
    for (std::uint32_t u : rounding_sample(13)) {
        const float f = from_bits(u);
        const std::uint16_t got = fp::f32_to_f16(f);
        if (std::isnan(f)) {
            ASSERT_EQ(got & 0x7e00, 0x7e00) << std::hex << u; // NaN, quiet
            ASSERT_EQ(got & 0x1ff, (u >> 13) & 0x1ff) << std::hex << u;
            continue;
        }
        ASSERT_EQ(got, reference_f16(f)) << std::hex << u;
        checked++;
    }
    EXPECT_GT(checked, 3'000'000U);
}

TEST(Bf16, NarrowingMatchesAnIndependentReferenceAtEveryExponentAndRoundingCase) {
    std::uint64_t checked = 0;
    for (std::uint32_t u : rounding_sample(16)) {
        const float f = from_bits(u);
        const std::uint16_t got = fp::f32_to_bf16(f);
        if (std::isnan(f)) {
            ASSERT_EQ(got & 0x7fc0, 0x7fc0) << std::hex << u;
            ASSERT_EQ(got & 0x3f, (u >> 16) & 0x3f) << std::hex << u;
            continue;
        }
        ASSERT_EQ(got, reference_bf16(f)) << std::hex << u;
        checked++;
    }
    EXPECT_GT(checked, 400'000U);
}

// --- the vector code -----------------------------------------------------------------------

class Avx2 : public ::testing::Test {
protected:
    void SetUp() override {
        ops_ = simd::avx2();
        if (ops_ == nullptr)
            GTEST_SKIP() << "no AVX2+FMA on this CPU";
    }
    const simd::Ops* ops_ = nullptr;
    const simd::Ops& scalar_ = simd::generic();
};

TEST_F(Avx2, WideningEveryFp16AndBf16GivesTheScalarBits) {
    std::vector<std::uint16_t> all(0x10000 + 3); // + a tail the vector loop leaves
    for (std::uint32_t i = 0; i < all.size(); i++)
        all[i] = static_cast<std::uint16_t>(i * 40503U);
    for (std::uint32_t dt : {simd::kF16, simd::kBf16}) {
        std::vector<float> v(all.size());
        std::vector<float> s(all.size());
        ops_->load(dt, reinterpret_cast<const std::byte*>(all.data()), v.data(), all.size());
        scalar_.load(dt, reinterpret_cast<const std::byte*>(all.data()), s.data(), all.size());
        for (std::size_t i = 0; i < all.size(); i++)
            ASSERT_EQ(bits(v[i]), bits(s[i])) << dt << " 0x" << std::hex << all[i];
    }
}

TEST_F(Avx2, NarrowingGivesTheScalarBitsOnTheRoundingSample) {
    for (unsigned low : {13U, 16U}) {
        const std::vector<std::uint32_t> in = rounding_sample(low);
        std::vector<float> f(in.size());
        std::memcpy(f.data(), in.data(), in.size() * sizeof(float));
        for (std::uint32_t dt : {simd::kF32, simd::kF16, simd::kBf16}) {
            const std::size_t es = simd::elem_size(dt);
            std::vector<std::byte> v(f.size() * es);
            std::vector<std::byte> s(f.size() * es);
            // An odd count and an odd start: the tails and unaligned stores.
            ops_->store(dt, f.data() + 1, v.data() + es, f.size() - 2);
            scalar_.store(dt, f.data() + 1, s.data() + es, f.size() - 2);
            ASSERT_EQ(std::memcmp(v.data(), s.data(), v.size()), 0) << dt;
        }
    }
}

TEST_F(Avx2, ElementwiseArithmeticGivesTheScalarBits) {
    std::mt19937 rng(7);
    const std::size_t n = 100'003;
    std::vector<float> x(n);
    std::vector<float> y(n);
    const std::uint32_t specials[] = {0x7fc00000, 0x7f800001, 0xff800000, 0x7f800000,
                                      0x80000000, 0x00000001, 0x7f7fffff, 0x00800000};
    for (std::size_t i = 0; i < n; i++) {
        x[i] = from_bits(i % 97 == 0 ? specials[i % 8] : rng());
        y[i] = from_bits(i % 89 == 0 ? specials[(i / 3) % 8] : rng());
    }
    for (simd::Op op : {simd::Op::add, simd::Op::mul, simd::Op::scale, simd::Op::relu}) {
        std::vector<float> a = x;
        std::vector<float> b = x;
        ops_->arith(op, a.data(), y.data(), 1.5e-3F, n);
        scalar_.arith(op, b.data(), y.data(), 1.5e-3F, n);
        for (std::size_t i = 0; i < n; i++) {
            if (std::isnan(a[i]) || std::isnan(b[i])) {
                ASSERT_TRUE(std::isnan(a[i]) && std::isnan(b[i])) << i;
                continue;
            }
            ASSERT_EQ(bits(a[i]), bits(b[i])) << static_cast<int>(op) << " " << i;
        }
    }
}

TEST_F(Avx2, MatrixMultiplyAgreesWithTheScalarBlockedCodeWithinFp32Accumulation) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> d(-1.0F, 1.0F);
    for (const auto& [m, n, k] : {std::array<std::size_t, 3>{1, 1, 1},
                                  {7, 5, 13},
                                  {33, 17, 300},
                                  {64, 64, 256},
                                  {6, 16, 1}}) {
        std::vector<float> a(m * k);
        std::vector<float> b(k * n);
        for (float& v : a)
            v = d(rng);
        for (float& v : b)
            v = d(rng);
        std::vector<float> cv(m * n, -1.0F);
        std::vector<float> cs(m * n, -1.0F);
        ops_->sgemm(m, n, k, a.data(), k, b.data(), n, cv.data(), n);
        scalar_.sgemm(m, n, k, a.data(), k, b.data(), n, cs.data(), n);
        for (std::size_t i = 0; i < m; i++) {
            for (std::size_t j = 0; j < n; j++) {
                double exact = 0;
                double mag = 0;
                for (std::size_t kk = 0; kk < k; kk++) {
                    exact += static_cast<double>(a[i * k + kk]) * b[kk * n + j];
                    mag += std::fabs(static_cast<double>(a[i * k + kk]) * b[kk * n + j]);
                }
                const double tol = static_cast<double>(k + 1) * std::ldexp(1.0, -24) * mag;
                EXPECT_LE(std::fabs(cv[i * n + j] - exact), tol) << m << "x" << n << "x" << k;
                EXPECT_LE(std::fabs(cs[i * n + j] - exact), tol) << m << "x" << n << "x" << k;
            }
        }
    }
}
} // namespace fp_test
