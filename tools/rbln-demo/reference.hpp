// SPDX-License-Identifier: GPL-2.0
// reference.hpp - the CPU side of the demo: deterministic inputs, the
// reference y = relu(x @ w) * scale with an error bound per element, and
// the check of the card's y against it.
//
// The bound follows from what firmware-iface promises (rbln_fw_cmd.md,
// "Built-in kernels"): MATMUL widens its inputs to fp32 exactly, accumulates
// the K products in fp32 (in an order of its choosing) and rounds the sum
// once to the output type; RELU is exact; SCALE is one fp32 multiplication
// rounded once to the output type.  With u = 2^-24 (the unit roundoff of
// fp32), g(n) = n u / (1 - n u), S the exact sum and M = sum_k |x_ik w_kj|:
//   |mm - S|        <= E = g(K + 1) M + ulp_t(|S| + g(K + 1) M)
//   |y - relu(S) s| <= |s| E + u Y + ulp_t(Y),   Y = |relu(S) s| + |s| E
// g(K) M is the classic bound of a dot product summed in any order (Higham,
// "Accuracy and Stability of Numerical Algorithms", 3.1); one more term and
// a full ulp_t (the spacing of type t at a value, at least that of its
// smallest normal number) where half would do are margin.  RELU is
// 1-Lipschitz, so it does not grow the error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dtype.hpp"

namespace rbln::demo {

/// y (M x N) = relu(x (M x K) @ w (K x N)) * scale.
struct Shape {
    std::uint64_t m = 256;
    std::uint64_t k = 256;
    std::uint64_t n = 256;
};

/// @count values uniform in [-1, 1), each exactly representable in @t,
/// the same for the same @seed on every machine.
std::vector<float> random_values(DType t, std::size_t count, std::uint64_t seed);

struct Reference {
    std::vector<double> y;     ///< relu(x @ w) * scale, computed in double
    std::vector<double> bound; ///< how far the card's y may be from it
};

/// The reference of inputs @x, @w (values of @t, row-major) for @shape.
Reference reference(DType t, std::span<const float> x, std::span<const float> w, Shape shape,
                    float scale);

struct CheckResult {
    std::uint64_t checked = 0;
    std::uint64_t failed = 0;        ///< elements beyond their bound (NaN/Inf included)
    std::uint64_t first_failed = 0;  ///< index of the first of them (if any)
    double first_failed_got = 0;     ///< the card's value there (NaN if missing)
    double first_failed_want = 0;    ///< the reference there
    double first_failed_bound = 0;   ///< and its bound
    double max_abs_error = 0;        ///< max |y - ref|
    double max_rel_error = 0;        ///< max |y - ref| / |ref| where |ref| >= 2^-10 max|ref|
    double worst_bound_fraction = 0; ///< max |y - ref| / bound
    std::uint64_t worst_index = 0;   ///< element of worst_bound_fraction
    bool pass() const noexcept { return failed == 0 && checked > 0; }
};

/// Compares the card's @got with @ref element by element.
CheckResult check(std::span<const float> got, const Reference& ref);

} // namespace rbln::demo
