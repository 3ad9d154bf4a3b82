// SPDX-License-Identifier: GPL-2.0
// The built-in kernels of LAUNCH through a command ring: every kernel on
// every type against a scalar reference computed here (fp32 arithmetic,
// one rounding to dtype_out), with contiguous, padded, broadcast,
// transposed, reversed and strided-output tensors in host memory, HBM and
// scattered pages; MATMUL within the fp32-accumulation bound; every
// malformed LAUNCH field; tensors that do not translate.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fp.h"
#include "kernels.h"
#include "ring_fixture.h"

using namespace rbln::emu;
using namespace rbln::emu::test;

namespace kernels_test {

namespace {

constexpr std::uint8_t kGuard = 0xa5;
constexpr std::uint64_t k4K = RBLN_FW_PAGE_SIZE;
constexpr std::uint64_t kVaScatter = 0x50'0000'0000ULL; // 256 pages, reversed
constexpr std::uint64_t kScatterGpaOff = 8ULL << 20;
constexpr unsigned kScatterPages = 256;

const char* dt_name(std::uint32_t dt) {
    return dt == simd::kF32 ? "f32" : dt == simd::kF16 ? "f16" : "bf16";
}

float to_f32(std::uint32_t dt, std::uint32_t b) {
    if (dt == simd::kF32)
        return std::bit_cast<float>(b);
    if (dt == simd::kF16)
        return fp::f16_to_f32(static_cast<std::uint16_t>(b));
    return fp::bf16_to_f32(static_cast<std::uint16_t>(b));
}

std::uint32_t from_f32(std::uint32_t dt, float f) {
    if (dt == simd::kF32)
        return fp::f32_quiet_bits(std::bit_cast<std::uint32_t>(f));
    if (dt == simd::kF16)
        return fp::f32_to_f16(f);
    return fp::f32_to_bf16(f);
}

bool is_nan(std::uint32_t dt, std::uint32_t b) {
    return std::isnan(to_f32(dt, b));
}

bool is_quiet_nan(std::uint32_t dt, std::uint32_t b) {
    const std::uint32_t q = dt == simd::kF32   ? fp::kF32QuietBit
                            : dt == simd::kF16 ? fp::kF16QuietBit
                                               : fp::kBf16QuietBit;
    return is_nan(dt, b) && (b & q) != 0;
}

// Values a kernel must get right: specials, then random ones of moderate
// exponent (fp16 also gets subnormals).
std::uint32_t value(std::uint32_t dt, std::mt19937& rng, std::uint64_t i) {
    static const std::uint32_t f16s[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
                                         0x7c00, 0xfc00, 0x7e00, 0x7d00, 0x0001, 0x03ff,
                                         0x8001, 0x3c01, 0x6400, 0x0400};
    static const std::uint32_t bf16s[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f7f, 0xff7f,
                                          0x7f80, 0xff80, 0x7fc0, 0x7fa0, 0x0001, 0x3f81,
                                          0x4480, 0x0080, 0x3c00, 0xc2f7};
    static const std::uint32_t f32s[] = {0x00000000, 0x80000000, 0x3f800000, 0xbf800000,
                                         0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
                                         0x7fc00000, 0x7fa00000, 0x00000001, 0x3f800001,
                                         0x477fe000, 0x33800000, 0x387fc000, 0x3f801000};
    const std::uint32_t r = rng();
    if (i % 5 == 0) {
        const std::uint32_t k = (r >> 8) % 16;
        return dt == simd::kF32 ? f32s[k] : dt == simd::kF16 ? f16s[k] : bf16s[k];
    }
    const std::uint32_t sign = r & 1;
    const int e = static_cast<int>((r >> 1) % 17) - 8;
    switch (dt) {
    case simd::kF16:
        if ((r >> 6) % 12 == 0)
            return (sign << 15) | ((r >> 10) & 0x3ff); // subnormal
        return (sign << 15) | static_cast<std::uint32_t>(e + 15) << 10 | ((r >> 10) & 0x3ff);
    case simd::kBf16:
        return (sign << 15) | static_cast<std::uint32_t>(e + 127) << 7 | ((r >> 10) & 0x7f);
    default:
        return (sign << 31) | static_cast<std::uint32_t>(e + 127) << 23 | ((r >> 9) & 0x7fffff);
    }
}

// Where a tensor lives: its VA and the host byte behind an offset.
struct Region {
    const char* name;
    std::uint64_t va;
    std::function<std::byte*(std::uint64_t)> at;
};

std::uint32_t get(const Region& r, std::uint32_t dt, std::uint64_t byte) {
    std::uint32_t v = 0;
    std::memcpy(&v, r.at(byte), simd::elem_size(dt));
    return v;
}

void put(const Region& r, std::uint32_t dt, std::uint64_t byte, std::uint32_t v) {
    std::memcpy(r.at(byte), &v, simd::elem_size(dt));
}

void fill_guard(const Region& r, std::uint64_t bytes) {
    for (std::uint64_t o = 0; o < bytes; o++)
        *r.at(o) = std::byte{kGuard};
}

class Kernels : public ::testing::Test {
protected:
    Kernels() {
        for (unsigned i = 0; i < kScatterPages; i++)
            t.pt.map_4k(kVaScatter + i * k4K,
                        TestCard::kHost + kScatterGpaOff + (kScatterPages - 1 - i) * k4K, kPteRw);
        t.h.set_log_level(LogLevel::info);
    }

    Region host(std::uint64_t off) {
        return {"host", TestCard::kVaHost + off,
                [this, off](std::uint64_t o) { return t.host(off + o); }};
    }
    Region hbm(unsigned c, std::uint64_t off) {
        return {"hbm", TestCard::hbm_va(c, off),
                [this, c, off](std::uint64_t o) { return t.hbm(c, off + o); }};
    }
    Region scattered(std::uint64_t off) {
        return {"scattered", kVaScatter + off, [this, off](std::uint64_t o) {
                    const std::uint64_t v = off + o;
                    return t.host(kScatterGpaOff + (kScatterPages - 1 - v / k4K) * k4K + v % k4K);
                }};
    }

    TestCard t;
};

// An elementwise case.
struct Ew {
    std::uint32_t ndim;
    std::array<std::uint64_t, 4> shape;
    std::array<std::int64_t, 4> sa, sb, so;
    const char* what;
};

// Element offsets of a tensor: lowest and highest over the shape.
std::pair<std::int64_t, std::int64_t> bounds(const Ew& c, const std::array<std::int64_t, 4>& s) {
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    for (unsigned d = 0; d < c.ndim; d++) {
        const std::int64_t r = static_cast<std::int64_t>(c.shape[d] - 1) * s[d];
        (r < 0 ? lo : hi) += r;
    }
    return {lo, hi};
}

const Ew kEwCases[] = {
    {1, {1003, 0, 0, 0}, {1}, {1}, {1}, "contiguous 1-D"},
    {2, {7, 33, 0, 0}, {40, 1}, {33, 1}, {50, 1}, "2-D padded rows"},
    {3, {3, 4, 17, 0}, {68, 17, 1}, {0, 17, 0}, {68, 17, 1}, "3-D, b broadcast"},
    {2, {16, 9, 0, 0}, {1, 16}, {-9, 1}, {9, 1}, "a transposed, b rows reversed"},
    {4, {2, 3, 4, 5}, {60, 20, 5, 1}, {0, 0, 0, 0}, {240, 80, 20, 2}, "4-D, scalar b, strided out"},
    {1, {300, 0, 0, 0}, {-1}, {3}, {-2}, "negative strides"},
};

} // namespace

std::string
ew_name(const ::testing::TestParamInfo<std::tuple<std::uint32_t, std::uint32_t>>& info) {
    static const std::array<const char*, 5> k{"", "Add", "Mul", "Relu", "Scale"};
    return std::string(k.at(std::get<0>(info.param))) + "_" + dt_name(std::get<1>(info.param));
}

class KernelsEw : public Kernels,
                  public ::testing::WithParamInterface<std::tuple<std::uint32_t, std::uint32_t>> {};

// Runs `c` with kernel/types on tensors in `ra`, `rb`, `ro`; checks every
// output element and every gap byte of the output.
void run_ew(TestCard& t, std::uint32_t kernel, std::uint32_t din, std::uint32_t dout, const Ew& c,
            const Region& ra, const Region& rb, const Region& ro, unsigned seed) {
    const bool two = kernel == RBLN_FW_KERNEL_ADD || kernel == RBLN_FW_KERNEL_MUL;
    const std::size_t ei = simd::elem_size(din);
    const std::size_t eo = simd::elem_size(dout);
    const float scale = kernel == RBLN_FW_KERNEL_SCALE ? -1.75e-2F : 0.0F;
    const auto [alo, ahi] = bounds(c, c.sa);
    const auto [blo, bhi] = bounds(c, c.sb);
    const auto [olo, ohi] = bounds(c, c.so);
    std::mt19937 rng(seed);
    for (std::int64_t i = 0; i <= ahi - alo; i++)
        put(ra, din, static_cast<std::uint64_t>(i) * ei,
            value(din, rng, static_cast<std::uint64_t>(i)));
    if (two) {
        for (std::int64_t i = 0; i <= bhi - blo; i++)
            put(rb, din, static_cast<std::uint64_t>(i) * ei,
                value(din, rng, static_cast<std::uint64_t>(i) + 3));
    }
    const std::uint64_t out_bytes = static_cast<std::uint64_t>(ohi - olo + 1) * eo;
    fill_guard(ro, out_bytes + 64);

    rbln_fw_pkt_launch l{};
    l.kernel = kernel;
    l.dtype_in = din;
    l.dtype_out = dout;
    l.ndim = c.ndim;
    l.scale = kernel == RBLN_FW_KERNEL_SCALE ? std::bit_cast<std::uint32_t>(scale) : 0;
    // Element 0 of each tensor, so its lowest element is the region start.
    l.a = ra.va + static_cast<std::uint64_t>(-alo) * ei;
    l.b = two ? rb.va + static_cast<std::uint64_t>(-blo) * ei : 0;
    l.out = ro.va + static_cast<std::uint64_t>(-olo) * eo;
    for (unsigned d = 0; d < 4; d++) {
        l.shape[d] = c.shape[d];
        l.stride_a[d] = c.sa[d];
        l.stride_b[d] = two ? c.sb[d] : 0;
        l.stride_out[d] = c.so[d];
    }
    CmdBuf cb;
    cb.launch(l);
    const auto cpl = t.run(0, cb);
    ASSERT_TRUE(cpl.has_value());
    ASSERT_EQ(cpl->status, RBLN_FW_JOB_OK) << c.what;

    std::vector<bool> written(static_cast<std::size_t>(ohi - olo + 1));
    std::uint64_t count = 1;
    for (unsigned d = 0; d < c.ndim; d++)
        count *= c.shape[d];
    unsigned bad = 0;
    for (std::uint64_t flat = 0; flat < count; flat++) {
        std::int64_t oa = -alo;
        std::int64_t ob = -blo;
        std::int64_t oo = -olo;
        std::uint64_t rest = flat;
        for (int d = static_cast<int>(c.ndim) - 1; d >= 0; d--) {
            const auto i = static_cast<std::int64_t>(rest % c.shape[d]);
            rest /= c.shape[d];
            oa += i * c.sa[d];
            ob += i * c.sb[d];
            oo += i * c.so[d];
        }
        const float fa = to_f32(din, get(ra, din, oa * ei));
        const float fb = two ? to_f32(din, get(rb, din, ob * ei)) : 0.0F;
        float r = fa;
        switch (kernel) {
        case RBLN_FW_KERNEL_ADD:
            r = fa + fb;
            break;
        case RBLN_FW_KERNEL_MUL:
            r = fa * fb;
            break;
        case RBLN_FW_KERNEL_RELU:
            r = fa > 0.0F ? fa : (std::isnan(fa) ? fa : 0.0F);
            break;
        case RBLN_FW_KERNEL_SCALE:
            r = fa * scale;
            break;
        default:
            break;
        }
        const std::uint32_t want = from_f32(dout, r);
        const std::uint32_t got = get(ro, dout, static_cast<std::uint64_t>(oo) * eo);
        written[static_cast<std::size_t>(oo)] = true;
        const bool ok = is_nan(dout, want) ? is_quiet_nan(dout, got) : got == want;
        if (!ok && bad++ < 5)
            ADD_FAILURE() << c.what << " " << dt_name(din) << "->" << dt_name(dout) << " element "
                          << flat << ": got 0x" << std::hex << got << " want 0x" << want;
    }
    EXPECT_EQ(bad, 0U) << c.what;
    for (std::size_t e = 0; e < written.size(); e++) {
        if (written[e])
            continue;
        for (std::size_t b = 0; b < eo; b++)
            ASSERT_EQ(std::to_integer<int>(*ro.at(e * eo + b)), kGuard)
                << c.what << ": gap element " << e << " written";
    }
    for (std::size_t b = 0; b < 64; b++)
        ASSERT_EQ(std::to_integer<int>(*ro.at(out_bytes + b)), kGuard) << "past the output";
}

TEST_P(KernelsEw, EveryShapeMatchesTheScalarReferenceBitForBit) {
    const auto [kernel, dt] = GetParam();
    unsigned seed = kernel * 100 + dt;
    for (const Ew& c : kEwCases) {
        run_ew(t, kernel, dt, dt, c, host(0), host(2ULL << 20), hbm(0, 0), seed++);
        run_ew(t, kernel, dt, dt, c, hbm(1, 0), hbm(2, 0), host(4ULL << 20), seed++);
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, KernelsEw,
    ::testing::Combine(::testing::Values(RBLN_FW_KERNEL_ADD, RBLN_FW_KERNEL_MUL,
                                         RBLN_FW_KERNEL_RELU, RBLN_FW_KERNEL_SCALE),
                       ::testing::Values(simd::kF32, simd::kF16, simd::kBf16)),
    ew_name);

class KernelsCast : public Kernels,
                    public ::testing::WithParamInterface<std::tuple<std::uint32_t, std::uint32_t>> {
};

TEST_P(KernelsCast, EveryShapeRoundsOnceToTheOutputType) {
    const auto [din, dout] = GetParam();
    unsigned seed = 900 + din * 10 + dout;
    for (const Ew& c : kEwCases)
        run_ew(t, RBLN_FW_KERNEL_CAST, din, dout, c, host(0), host(2ULL << 20), hbm(3, 0), seed++);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, KernelsCast,
                         ::testing::Combine(::testing::Values(simd::kF32, simd::kF16, simd::kBf16),
                                            ::testing::Values(simd::kF32, simd::kF16, simd::kBf16)),
                         [](const auto& info) {
                             return std::string(dt_name(std::get<0>(info.param))) + "_to_" +
                                    dt_name(std::get<1>(info.param));
                         });

TEST_F(Kernels, TensorsInScatteredPagesAndInPlaceOutputsGiveTheSameResults) {
    const Ew big{2, {300, 260, 0, 0}, {260, 1}, {0, 1}, {270, 1}, "scattered 300x260"};
    for (std::uint32_t dt : {simd::kF32, simd::kF16, simd::kBf16}) {
        // Inputs and output each across many reversed 4K pages.
        run_ew(t, RBLN_FW_KERNEL_ADD, dt, dt, big, scattered(0), host(0), scattered(400 * 1024),
               5 + dt);
        run_ew(t, RBLN_FW_KERNEL_MUL, dt, dt, big, host(0), scattered(1000), hbm(0, 0), 6 + dt);
    }
    // out == a: every element reads its input before the output is written.
    const std::uint64_t n = 5000;
    std::vector<float> a(n);
    for (std::uint64_t i = 0; i < n; i++) {
        a[i] = static_cast<float>(i) * 0.5F;
        std::memcpy(t.host(4 * i), &a[i], 4);
    }
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_ADD;
    l.dtype_in = l.dtype_out = simd::kF32;
    l.ndim = 1;
    l.shape[0] = n;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 1;
    l.a = l.b = l.out = TestCard::kVaHost;
    CmdBuf cb;
    cb.launch(l);
    ASSERT_EQ(t.status(1, cb), RBLN_FW_JOB_OK);
    for (std::uint64_t i = 0; i < n; i++) {
        float v = 0;
        std::memcpy(&v, t.host(4 * i), 4);
        ASSERT_EQ(v, a[i] + a[i]) << i;
    }
}

// --- MATMUL ----------------------------------------------------------------------------

struct Mm {
    std::uint64_t m, n, k;
    std::array<std::int64_t, 2> sa, sb, so;
    const char* what;
};

class KernelsMatmul
    : public Kernels,
      public ::testing::WithParamInterface<std::tuple<std::uint32_t, std::uint32_t>> {
protected:
    // Runs `c`; every element within (K + 1) 2^-24 sum|a b| + 1 ulp of the
    // exact sum (fp32 accumulation in any order, one final rounding).
    void run_mm(const Mm& c, std::uint32_t din, std::uint32_t dout, unsigned seed,
                bool small_ints) {
        const std::size_t ei = simd::elem_size(din);
        const std::size_t eo = simd::elem_size(dout);
        const Region ra = host(0);
        const Region rb = hbm(1, 0);
        const Region ro = hbm(2, 0);
        const std::uint64_t na = (c.m - 1) * c.sa[0] + (c.k - 1) * c.sa[1] + 1;
        const std::uint64_t nb = (c.k - 1) * c.sb[0] + (c.n - 1) * c.sb[1] + 1;
        const std::uint64_t no = (c.m - 1) * c.so[0] + (c.n - 1) * c.so[1] + 1;
        std::mt19937 rng(seed);
        auto v = [&](std::uint64_t i) {
            if (!small_ints) {
                std::uint32_t b = value(din, rng, i + 1);
                while (is_nan(din, b) || std::isinf(to_f32(din, b)) ||
                       std::fabs(to_f32(din, b)) > 4.0F)
                    b = value(din, rng, i + 1);
                return b;
            }
            return from_f32(din, static_cast<float>(static_cast<int>(rng() % 9) - 4));
        };
        for (std::uint64_t i = 0; i < na; i++)
            put(ra, din, i * ei, v(i));
        for (std::uint64_t i = 0; i < nb; i++)
            put(rb, din, i * ei, v(i));
        fill_guard(ro, no * eo + 64);
        rbln_fw_pkt_launch l{};
        l.kernel = RBLN_FW_KERNEL_MATMUL;
        l.dtype_in = din;
        l.dtype_out = dout;
        l.ndim = 2;
        l.a = ra.va;
        l.b = rb.va;
        l.out = ro.va;
        l.shape[0] = c.m;
        l.shape[1] = c.n;
        l.shape[2] = c.k;
        l.stride_a[0] = c.sa[0];
        l.stride_a[1] = c.sa[1];
        l.stride_b[0] = c.sb[0];
        l.stride_b[1] = c.sb[1];
        l.stride_out[0] = c.so[0];
        l.stride_out[1] = c.so[1];
        CmdBuf cb;
        cb.launch(l);
        const auto cpl = t.run(2, cb);
        ASSERT_TRUE(cpl.has_value());
        ASSERT_EQ(cpl->status, RBLN_FW_JOB_OK) << c.what;
        unsigned bad = 0;
        std::vector<bool> written(no);
        for (std::uint64_t i = 0; i < c.m; i++) {
            for (std::uint64_t j = 0; j < c.n; j++) {
                double sum = 0;
                double mag = 0;
                for (std::uint64_t kk = 0; kk < c.k; kk++) {
                    const double p = static_cast<double>(to_f32(
                                         din, get(ra, din, (i * c.sa[0] + kk * c.sa[1]) * ei))) *
                                     to_f32(din, get(rb, din, (kk * c.sb[0] + j * c.sb[1]) * ei));
                    sum += p;
                    mag += std::fabs(p);
                }
                const std::uint64_t at = i * c.so[0] + j * c.so[1];
                written[at] = true;
                const std::uint32_t got_bits = get(ro, dout, at * eo);
                const float got = to_f32(dout, got_bits);
                if (small_ints) {
                    // Exact in fp32 in any order: one rounding of the sum.
                    const std::uint32_t want = from_f32(dout, static_cast<float>(sum));
                    if (got_bits != want && bad++ < 5)
                        ADD_FAILURE()
                            << c.what << " " << dt_name(din) << "->" << dt_name(dout) << " out["
                            << i << "][" << j << "] = " << got << ", exact " << sum;
                    continue;
                }
                const int mant = dout == simd::kF32 ? 23 : dout == simd::kF16 ? 10 : 7;
                const int emin = dout == simd::kF16 ? -14 : -126;
                const int e = sum == 0 ? emin : std::max(std::ilogb(sum), emin);
                const double tol = static_cast<double>(c.k + 1) * std::ldexp(1.0, -24) * mag +
                                   std::ldexp(1.0, e - mant);
                if (std::fabs(static_cast<double>(got) - sum) > tol && bad++ < 5)
                    ADD_FAILURE() << c.what << " " << dt_name(din) << "->" << dt_name(dout)
                                  << " out[" << i << "][" << j << "] = " << got << ", exact " << sum
                                  << ", bound " << tol;
            }
        }
        EXPECT_EQ(bad, 0U);
        for (std::uint64_t e = 0; e < no; e++) {
            if (!written[e]) {
                for (std::size_t b = 0; b < eo; b++)
                    ASSERT_EQ(std::to_integer<int>(*ro.at(e * eo + b)), kGuard)
                        << c.what << ": padding written";
            }
        }
    }
};

TEST_P(KernelsMatmul, ProductsAccumulateInFp32WithinTheBoundAndPaddingIsKept) {
    const auto [din, dout] = GetParam();
    const Mm cases[] = {
        {1, 1, 1, {1, 1}, {1, 1}, {1, 1}, "1x1x1"},
        {7, 5, 13, {13, 1}, {5, 1}, {5, 1}, "row-major"},
        {33, 17, 65, {70, 1}, {1, 65}, {20, 1}, "padded a, b transposed, padded out"},
        {64, 64, 256, {256, 1}, {64, 1}, {64, 1}, "64x256x64"},
        {5, 40, 300, {1, 5}, {40, 1}, {1, 5}, "a and out column-major, K beyond a block"},
        {3, 4, 8, {0, 1}, {4, 1}, {4, 1}, "a broadcast over rows"},
    };
    unsigned seed = 300 + din * 10 + dout;
    for (const Mm& c : cases) {
        run_mm(c, din, dout, seed++, false);
        run_mm(c, din, dout, seed++, true); // small integers: exact in any order
    }
}

INSTANTIATE_TEST_SUITE_P(
    Types, KernelsMatmul,
    ::testing::Values(std::tuple{simd::kF32, simd::kF32}, std::tuple{simd::kF16, simd::kF16},
                      std::tuple{simd::kBf16, simd::kBf16}, std::tuple{simd::kF16, simd::kF32},
                      std::tuple{simd::kBf16, simd::kF32}, std::tuple{simd::kF32, simd::kBf16}),
    [](const auto& info) {
        return std::string(dt_name(std::get<0>(info.param))) + "_to_" +
               dt_name(std::get<1>(info.param));
    });

TEST_F(Kernels, MatmulWhoseOutputOverlapsItsInputReadsTheInputsFirst) {
    // 4x4 identity times A, written over A itself: A stays A.
    const Region ra = host(0);
    const Region ri = host(4096);
    for (unsigned i = 0; i < 16; i++) {
        const float v = static_cast<float>(i + 1);
        std::memcpy(ra.at(4 * i), &v, 4);
        const float id = i % 5 == 0 ? 1.0F : 0.0F;
        std::memcpy(ri.at(4 * i), &id, 4);
    }
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = l.dtype_out = simd::kF32;
    l.ndim = 2;
    l.shape[0] = l.shape[1] = l.shape[2] = 4;
    l.a = ri.va;
    l.b = ra.va;
    l.out = ra.va + 4; // shifted by one element over b
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 4;
    l.stride_a[1] = l.stride_b[1] = l.stride_out[1] = 1;
    CmdBuf cb;
    cb.launch(l);
    ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    for (unsigned i = 0; i < 16; i++) {
        float v = 0;
        std::memcpy(&v, ra.at(4 + 4 * i), 4);
        EXPECT_EQ(v, static_cast<float>(i + 1)) << i;
    }
}

// --- malformed LAUNCH packets, tensors that fault ----------------------------------------

rbln_fw_pkt_launch good_add() {
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_ADD;
    l.dtype_in = l.dtype_out = simd::kF32;
    l.ndim = 1;
    l.shape[0] = 16;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 1;
    l.a = TestCard::kVaHost;
    l.b = TestCard::kVaHost + 64;
    l.out = TestCard::hbm_va(0);
    return l;
}

rbln_fw_pkt_launch good_matmul() {
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = l.dtype_out = simd::kF32;
    l.ndim = 2;
    l.shape[0] = l.shape[1] = l.shape[2] = 4;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 4;
    l.stride_a[1] = l.stride_b[1] = l.stride_out[1] = 1;
    l.a = TestCard::kVaHost;
    l.b = TestCard::kVaHost + 64;
    l.out = TestCard::hbm_va(0);
    return l;
}

struct BadLaunch {
    const char* name;
    rbln_fw_pkt_launch (*base)();
    void (*edit)(rbln_fw_pkt_launch&);
};

class KernelsBadLaunch : public Kernels, public ::testing::WithParamInterface<BadLaunch> {};

TEST_P(KernelsBadLaunch, FailsTheJobWithBadPacketAndWritesNothing) {
    rbln_fw_pkt_launch l = GetParam().base();
    GetParam().edit(l);
    std::memset(t.hbm(0, 0), kGuard, 256);
    CmdBuf cb;
    cb.signal(TestCard::kVaHost + 4096, 1);
    const std::uint32_t at = cb.here();
    cb.launch(l).signal(TestCard::kVaHost + 4104, 2);
    const auto cpl = t.run(0, cb);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_BAD_PACKET);
    EXPECT_EQ(cpl->packet_offset, at);
    EXPECT_EQ(t.host_u64(4096), 1U);
    EXPECT_EQ(t.host_u64(4104), 0U);
    for (unsigned i = 0; i < 256; i++)
        ASSERT_EQ(std::to_integer<int>(*t.hbm(0, i)), kGuard);
    // The unchanged packet runs (the case differs in that field only).
    cb.clear();
    cb.launch(GetParam().base());
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
}

// MATMULs whose every stride is 0: one element of each tensor stands for
// all of it, and the engine's dense fp32 copies are what is too large.
void broadcast_all(rbln_fw_pkt_launch& l, std::uint64_t m, std::uint64_t n, std::uint64_t k) {
    l.shape[0] = m;
    l.shape[1] = n;
    l.shape[2] = k;
    l.stride_a[0] = l.stride_a[1] = l.stride_b[0] = l.stride_b[1] = 0;
    l.stride_out[0] = l.stride_out[1] = 0;
}
// Found by tests/fuzz: 4 TiB of dense A, bad_alloc ended the emulator.
void matmul_2e20_broadcast(rbln_fw_pkt_launch& l) {
    broadcast_all(l, 1ULL << 20, 1, 1ULL << 20);
}
// M*K + K*N + M*N = 2^26 + 1 + 2^26: one past RBLN_FW_MATMUL_MAX_ELEMS.
void matmul_one_past_the_working_set(rbln_fw_pkt_launch& l) {
    broadcast_all(l, 1ULL << 26, 1, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KernelsBadLaunch,
    ::testing::Values(
        BadLaunch{"Kernel0", good_add, [](auto& l) { l.kernel = 0; }},
        BadLaunch{"Kernel7", good_add, [](auto& l) { l.kernel = 7; }},
        BadLaunch{"DtypeIn0", good_add, [](auto& l) { l.dtype_in = l.dtype_out = 0; }},
        BadLaunch{"DtypeIn4", good_add, [](auto& l) { l.dtype_in = l.dtype_out = 4; }},
        BadLaunch{"DtypeOutUnknownForCast", good_add,
                  [](auto& l) {
                      l.kernel = RBLN_FW_KERNEL_CAST;
                      l.b = 0;
                      l.stride_b[0] = 0;
                      l.dtype_out = 9;
                  }},
        BadLaunch{"AddF32ToF16", good_add, [](auto& l) { l.dtype_out = simd::kF16; }},
        BadLaunch{"Ndim0", good_add, [](auto& l) { l.ndim = 0; }},
        BadLaunch{"Ndim5", good_add, [](auto& l) { l.ndim = 5; }},
        BadLaunch{"ShapeZeroInsideNdim", good_add, [](auto& l) { l.shape[0] = 0; }},
        BadLaunch{"ShapeBeyondNdim", good_add, [](auto& l) { l.shape[1] = 2; }},
        BadLaunch{"StrideABeyondNdim", good_add, [](auto& l) { l.stride_a[2] = 1; }},
        BadLaunch{"StrideBBeyondNdim", good_add, [](auto& l) { l.stride_b[3] = 1; }},
        BadLaunch{"StrideOutBeyondNdim", good_add, [](auto& l) { l.stride_out[1] = 1; }},
        BadLaunch{"ReluWithB", good_add,
                  [](auto& l) {
                      l.kernel = RBLN_FW_KERNEL_RELU;
                      l.stride_b[0] = 0;
                  }},
        BadLaunch{"ReluWithStrideB", good_add,
                  [](auto& l) {
                      l.kernel = RBLN_FW_KERNEL_RELU;
                      l.b = 0;
                  }},
        BadLaunch{"AddWithScale", good_add, [](auto& l) { l.scale = 0x40000000; }},
        BadLaunch{"TooManyElements", good_add,
                  [](auto& l) {
                      l.ndim = 4;
                      l.shape[0] = l.shape[1] = l.shape[2] = l.shape[3] = 1ULL << 20;
                      l.stride_a[1] = l.stride_a[2] = l.stride_a[3] = 0;
                      l.stride_b[1] = l.stride_b[2] = l.stride_b[3] = 0;
                      l.stride_out[1] = l.stride_out[2] = l.stride_out[3] = 0;
                  }},
        BadLaunch{"OutBeyondTheAddressSpace", good_add,
                  [](auto& l) { l.stride_out[0] = 1LL << 61; }},
        BadLaunch{"ABelowAddressZero", good_add, [](auto& l) { l.stride_a[0] = -(1LL << 40); }},
        BadLaunch{"MatmulNdim1", good_matmul, [](auto& l) { l.ndim = 1; }},
        BadLaunch{"MatmulNdim3", good_matmul, [](auto& l) { l.ndim = 3; }},
        BadLaunch{"MatmulKZero", good_matmul, [](auto& l) { l.shape[2] = 0; }},
        BadLaunch{"MatmulShape3", good_matmul, [](auto& l) { l.shape[3] = 1; }},
        BadLaunch{"MatmulStride2", good_matmul, [](auto& l) { l.stride_b[2] = 1; }},
        BadLaunch{"MatmulWithScale", good_matmul, [](auto& l) { l.scale = 1; }},
        BadLaunch{"MatmulUnknownDtypeOut", good_matmul, [](auto& l) { l.dtype_out = 0; }},
        BadLaunch{"MatmulBeyondTheWorkingSet", good_matmul, matmul_2e20_broadcast},
        BadLaunch{"MatmulOneElementPastTheWorkingSet", good_matmul,
                  matmul_one_past_the_working_set}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Kernels, LaunchHeaderFlagsAreBadPacket) {
    CmdBuf cb;
    cb.add(RBLN_FW_PKT_LAUNCH, good_add(), 1);
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_BAD_PACKET);
}

TEST_F(Kernels, TensorsThatDoNotTranslateFailWithTheirFaultAndWriteNothing) {
    struct Case {
        const char* what;
        void (*edit)(rbln_fw_pkt_launch&);
        std::uint64_t va;
        std::uint32_t reason;
        std::uint32_t access;
    };
    const Case cases[] = {
        {"a unmapped", [](auto& l) { l.a = 0x61'0000'0000ULL; }, 0x61'0000'0000ULL,
         RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_READ},
        {"b running off the mapping", [](auto& l) { l.b = TestCard::kVaHost + (16ULL << 20) - 32; },
         TestCard::kVaHost + (16ULL << 20), RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_READ},
        {"out read-only", [](auto& l) { l.out = TestCard::kVaRo + 8; }, TestCard::kVaRo + 8,
         RBLN_FW_MMU_NO_WRITE, RBLN_FW_ACCESS_WRITE},
        {"out reversed below its mapping (element 0 at +16, 15 more below)",
         [](auto& l) {
             l.out = TestCard::hbm_va(0, 16);
             l.stride_out[0] = -1;
         },
         TestCard::hbm_va(0, 16) - 60, RBLN_FW_MMU_NOT_MAPPED, RBLN_FW_ACCESS_WRITE},
    };
    for (const Case& c : cases) {
        rbln_fw_pkt_launch l = good_add();
        c.edit(l);
        std::memset(t.hbm(0, 0), kGuard, 256);
        CmdBuf cb;
        cb.launch(l);
        const auto cpl = t.run(3, cb);
        ASSERT_TRUE(cpl.has_value());
        EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT) << c.what;
        EXPECT_EQ(cpl->fault_va, c.va) << c.what;
        EXPECT_EQ(cpl->fault_reason, c.reason) << c.what;
        EXPECT_EQ(cpl->fault_access, c.access) << c.what;
        for (unsigned i = 0; i < 256; i++)
            ASSERT_EQ(std::to_integer<int>(*t.hbm(0, i)), kGuard) << c.what;
    }
}

// --- long LAUNCHes and MMU changes -------------------------------------------------------

// ADD over 2^40 elements broadcast from one each: runs until stopped.
rbln_fw_pkt_launch endless_add() {
    rbln_fw_pkt_launch l = good_add();
    l.shape[0] = 1ULL << 40;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 0;
    return l;
}

// The job on ring 0 has begun its packet.
void wait_running(FakeHost& h, std::uint64_t packets_before) {
    ASSERT_TRUE(eventually([&] { return h.card.stats().packets > packets_before; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // inside, holding the MMU
}

// An MMU change waited for a running packet's hold, and the admin ring --
// RING_STOP, the heartbeat's event loop -- with it: a job that never ends
// wedged the card for every client.
TEST_F(Kernels, TlbInvalidateCompletesWhileALaunchThatNeverEndsRuns) {
    FakeHost& h = t.h;
    const std::uint64_t before = h.card.stats().packets;
    CmdBuf cb;
    cb.launch(endless_add());
    const std::uint64_t s = t.submit(0, cb);
    wait_running(h, before);
    EXPECT_EQ(t.invalidate(TestCard::kAsid, 0, 0), RBLN_FW_ST_OK);
    EXPECT_EQ(t.invalidate(TestCard::kAsid + 1, 0, 0), RBLN_FW_ST_OK);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value()) << "the kernel goes on";
    expect_stop_aborts(h, 0, s);
}

TEST_F(Kernels, ALaunchThatLetsMmuChangesPassComputesEveryElement) {
    // 64 passes over 2^20 fp32 elements in host memory: out = a + b.
    FakeHost& h = t.h;
    constexpr std::uint64_t n = 1ULL << 20;
    for (std::uint64_t i = 0; i < n; i++) {
        const float a = static_cast<float>(i);
        const float b = static_cast<float>(2 * i);
        std::memcpy(t.host(4 * i), &a, 4);
        std::memcpy(t.host(4 * n + 4 * i), &b, 4);
    }
    std::memset(t.hbm(0, 0), 0, 4 * n);
    rbln_fw_pkt_launch l = good_add();
    l.ndim = 2;
    l.shape[0] = 64;
    l.shape[1] = n;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 0;
    l.stride_a[1] = l.stride_b[1] = l.stride_out[1] = 1;
    l.b = TestCard::kVaHost + 4 * n;
    const std::uint64_t before = h.card.stats().packets;
    CmdBuf cb;
    cb.launch(l);
    const std::uint64_t s = t.submit(0, cb);
    wait_running(h, before);
    unsigned passed = 0; // invalidations done while the kernel ran
    while (h.load(h.ring_ctrl(0).done_seqno) < s) {
        ASSERT_EQ(t.invalidate(TestCard::kAsid, 0, 0), RBLN_FW_ST_OK);
        passed += h.load(h.ring_ctrl(0).done_seqno) < s ? 1 : 0;
    }
    const auto cpl = h.pop_job_cpl(0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    EXPECT_GT(passed, 0U) << "no invalidation got through while the kernel ran";
    for (std::uint64_t i = 0; i < n; i++) {
        float o = 0;
        std::memcpy(&o, t.hbm(0, 4 * i), 4);
        ASSERT_EQ(o, static_cast<float>(3 * i)) << i;
    }
}

// 4096 passes of out = a + b over 2^16 fp32 elements; out at kVaMove, 4 KiB
// pages of chiplet 0's HBM, which the host moves to chiplet 1 while the
// kernel runs -- in order (still one span) or reversed (scattered).  The
// last passes must land in the new memory, every element exact.
class KernelsMoved : public Kernels, public ::testing::WithParamInterface<bool> {
protected:
    static constexpr std::uint64_t kVaMove = 0x50'0000'0000ULL;
    static constexpr std::uint64_t kN = 1ULL << 16;
    static constexpr std::uint64_t kPages = 4 * kN / k4K;
    static constexpr std::uint64_t kNewOff = 8ULL << 20; // in chiplet 1's HBM

    std::uint64_t hbm_pa(unsigned c, std::uint64_t off) {
        return t.h.ctrl().hbm[c].bar_offset + off;
    }
    // The new page of output page i.
    [[nodiscard]] std::uint64_t new_page(std::uint64_t i) const {
        return GetParam() ? kPages - 1 - i : i;
    }
};

TEST_P(KernelsMoved, ALaunchWhoseOutputMovesWhileItRunsFinishesInTheNewMemory) {
    FakeHost& h = t.h;
    for (std::uint64_t i = 0; i < kN; i++) {
        const float a = static_cast<float>(i);
        const float b = static_cast<float>(5 * i);
        std::memcpy(t.host(4 * i), &a, 4);
        std::memcpy(t.host(4 * kN + 4 * i), &b, 4);
    }
    for (std::uint64_t i = 0; i < kPages; i++)
        t.pt.map_4k(kVaMove + i * k4K, hbm_pa(0, i * k4K), kPteRw | RBLN_FW_PTE_LOCAL);
    std::memset(t.hbm(1, kNewOff), kGuard, kPages * k4K);
    rbln_fw_pkt_launch l = good_add();
    l.ndim = 2;
    l.shape[0] = 4096;
    l.shape[1] = kN;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 0;
    l.stride_a[1] = l.stride_b[1] = l.stride_out[1] = 1;
    l.b = TestCard::kVaHost + 4 * kN;
    l.out = kVaMove;
    const std::uint64_t before = h.card.stats().packets;
    CmdBuf cb;
    cb.launch(l);
    const std::uint64_t s = t.submit(0, cb);
    wait_running(h, before);
    for (std::uint64_t i = 0; i < kPages; i++)
        t.pt.map_4k(kVaMove + i * k4K, hbm_pa(1, kNewOff + new_page(i) * k4K),
                    kPteRw | RBLN_FW_PTE_LOCAL);
    ASSERT_EQ(t.invalidate(TestCard::kAsid, kVaMove, kPages * k4K), RBLN_FW_ST_OK);
    EXPECT_LT(h.load(h.ring_ctrl(0).done_seqno), s) << "the kernel ended before the move";
    const auto cpl = h.wait_job_cpl(0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    for (std::uint64_t i = 0; i < kN; i++) {
        const std::uint64_t page = new_page(4 * i / k4K);
        float o = 0;
        std::memcpy(&o, t.hbm(1, kNewOff + page * k4K + (4 * i) % k4K), 4);
        ASSERT_EQ(o, static_cast<float>(6 * i)) << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Pages, KernelsMoved, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Scattered" : "InOrder"; });

// --- the computations directly: both implementations agree --------------------------------

TEST(KernelCompute, GenericAndAvx2ElementwiseAndMatmulGiveTheSameResults) {
    const simd::Ops* v = simd::avx2();
    if (v == nullptr)
        GTEST_SKIP() << "no AVX2+FMA";
    std::mt19937 rng(3);
    const std::uint64_t n = 4099;
    for (std::uint32_t dt : {simd::kF32, simd::kF16, simd::kBf16}) {
        const std::size_t es = simd::elem_size(dt);
        std::vector<std::byte> a(n * es);
        std::vector<std::byte> b(n * es);
        for (std::uint64_t i = 0; i < n; i++) {
            const std::uint32_t x = value(dt, rng, i);
            const std::uint32_t y = value(dt, rng, i + 2);
            std::memcpy(&a[i * es], &x, es);
            std::memcpy(&b[i * es], &y, es);
        }
        for (std::uint32_t k : {RBLN_FW_KERNEL_ADD, RBLN_FW_KERNEL_MUL, RBLN_FW_KERNEL_RELU,
                                RBLN_FW_KERNEL_SCALE, RBLN_FW_KERNEL_CAST}) {
            std::vector<std::byte> o1(n * 4);
            std::vector<std::byte> o2(n * 4);
            const std::uint32_t dout = k == RBLN_FW_KERNEL_CAST ? simd::kF32 : dt;
            TensorRef ta{a.data(), {1}};
            TensorRef tb{b.data(), {1}};
            const std::array<std::uint64_t, 4> shape{n, 0, 0, 0};
            ASSERT_TRUE(run_elementwise(k, dt, dout, 1, shape, ta, tb, TensorRef{o1.data(), {1}},
                                        0.25F, nullptr, simd::generic()));
            ASSERT_TRUE(run_elementwise(k, dt, dout, 1, shape, ta, tb, TensorRef{o2.data(), {1}},
                                        0.25F, nullptr, *v));
            for (std::uint64_t i = 0; i < n; i++) {
                std::uint32_t x = 0;
                std::uint32_t y = 0;
                std::memcpy(&x, &o1[i * simd::elem_size(dout)], simd::elem_size(dout));
                std::memcpy(&y, &o2[i * simd::elem_size(dout)], simd::elem_size(dout));
                if (is_nan(dout, x) && is_nan(dout, y))
                    continue;
                ASSERT_EQ(x, y) << "kernel " << k << " " << dt_name(dt) << " element " << i;
            }
        }
    }
}
} // namespace kernels_test
