// SPDX-License-Identifier: GPL-2.0
// reference.cpp - inputs, reference and check (see reference.hpp).

#include "reference.hpp"

#include <algorithm>
#include <cmath>

namespace rbln::demo {

namespace {

constexpr double kU32 = 0x1p-24; // unit roundoff of fp32
constexpr double kU64 = 0x1p-53; // of double (the reference's own sums)

// splitmix64: a small, well-mixed, portable generator.
std::uint64_t next_random(std::uint64_t& state) noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// The spacing of @t at |v| (never below that at its smallest normal).
double ulp(DType t, double v) noexcept {
    const int e = v == 0 ? min_exponent(t) : std::max(std::ilogb(v), min_exponent(t));
    return std::ldexp(1.0, e - mantissa_bits(t));
}

// g(n) of Higham: n u / (1 - n u).
double gamma(double n, double u) noexcept {
    return n * u / (1 - n * u);
}

} // namespace

std::vector<float> random_values(DType t, std::size_t count, std::uint64_t seed) {
    std::vector<float> v(count);
    std::uint64_t state = seed;
    for (float& e : v) {
        // 24 random bits -> [0, 1) exactly in fp32, then [-1, 1).
        const auto r = static_cast<float>(next_random(state) >> 40) * 0x1p-24F;
        e = round_to(t, 2 * r - 1);
    }
    return v;
}

Reference reference(DType t, std::span<const float> x, std::span<const float> w, Shape shape,
                    float scale) {
    const std::size_t m = shape.m;
    const std::size_t k = shape.k;
    const std::size_t n = shape.n;
    Reference ref;
    ref.y.resize(m * n);
    ref.bound.resize(m * n);
    const double g = gamma(static_cast<double>(k + 1), kU32);
    const double g64 = gamma(static_cast<double>(k), kU64);
    const double s = std::fabs(static_cast<double>(scale));
    std::vector<double> sum(n);
    std::vector<double> mag(n);
    for (std::size_t i = 0; i < m; i++) {
        std::fill(sum.begin(), sum.end(), 0.0);
        std::fill(mag.begin(), mag.end(), 0.0);
        // Row i of x times w, a row of w at a time (contiguous, vectorisable).
        for (std::size_t q = 0; q < k; q++) {
            const double a = x[i * k + q];
            const float* row = w.data() + q * n;
            for (std::size_t j = 0; j < n; j++) {
                const double p = a * static_cast<double>(row[j]); // exact in double
                sum[j] += p;
                mag[j] += std::fabs(p);
            }
        }
        for (std::size_t j = 0; j < n; j++) {
            const double mm_err = g * mag[j] + ulp(t, std::fabs(sum[j]) + g * mag[j]);
            const double y = std::max(sum[j], 0.0) * static_cast<double>(scale);
            const double big = std::fabs(y) + s * mm_err;
            ref.y[i * n + j] = y;
            ref.bound[i * n + j] = s * mm_err + kU32 * big + ulp(t, big) + g64 * s * mag[j];
        }
    }
    return ref;
}

CheckResult check(std::span<const float> got, const Reference& ref) {
    CheckResult r;
    double max_ref = 0;
    for (double v : ref.y)
        max_ref = std::max(max_ref, std::fabs(v));
    const double rel_floor = std::ldexp(max_ref, -10);
    const std::size_t count = std::min(got.size(), ref.y.size());
    for (std::size_t i = 0; i < count; i++) {
        const double err = std::fabs(static_cast<double>(got[i]) - ref.y[i]);
        r.checked++;
        // NaN and Inf are never within a bound.
        if (!(err <= ref.bound[i])) {
            if (r.failed == 0) {
                r.first_failed = i;
                r.first_failed_got = got[i];
                r.first_failed_want = ref.y[i];
                r.first_failed_bound = ref.bound[i];
            }
            r.failed++;
        }
        if (std::isnan(err)) {
            r.max_abs_error = err; // and stays NaN: std::max keeps its first argument
            continue;
        }
        r.max_abs_error = std::max(r.max_abs_error, err);
        if (std::fabs(ref.y[i]) >= rel_floor && ref.y[i] != 0)
            r.max_rel_error = std::max(r.max_rel_error, err / std::fabs(ref.y[i]));
        const double frac = ref.bound[i] > 0 ? err / ref.bound[i] : 0;
        if (frac > r.worst_bound_fraction) {
            r.worst_bound_fraction = frac;
            r.worst_index = i;
        }
    }
    // Elements the card did not hand back count as failed.
    if (got.size() != ref.y.size()) {
        if (r.failed == 0) {
            r.first_failed = count;
            r.first_failed_got = std::nan("");
            r.first_failed_want = count < ref.y.size() ? ref.y[count] : 0;
            r.first_failed_bound = count < ref.y.size() ? ref.bound[count] : 0;
        }
        r.failed += std::max(got.size(), ref.y.size()) - count;
    }
    return r;
}

} // namespace rbln::demo
