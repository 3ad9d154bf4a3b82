// SPDX-License-Identifier: GPL-2.0
// The vector primitives of the built-in kernels: contiguous rows converted
// between fp32/fp16/bf16 and fp32, fp32 arithmetic on rows, and an fp32
// matrix multiply.  Two implementations with bit-identical results (for
// the conversions and the elementwise arithmetic): AVX2+FMA when the CPU
// has it, and plain C++ (fp.h) everywhere.  The matrix multiply of both
// accumulates in fp32 in its own blocked order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rbln::emu::simd {

// Element types, numbered as RBLN_FW_DT_*.
inline constexpr std::uint32_t kF32 = 1;
inline constexpr std::uint32_t kF16 = 2;
inline constexpr std::uint32_t kBf16 = 3;

inline constexpr std::size_t elem_size(std::uint32_t dtype) {
    return dtype == kF32 ? 4 : 2;
}

enum class Op : std::uint8_t {
    add,   // x = x + y
    mul,   // x = x * y
    scale, // x = x * s
    relu,  // x = x > 0 ? x : (NaN ? x : +0)
};

struct Ops {
    const char* name;
    // n contiguous elements of `dtype` at src (any alignment) -> fp32.
    void (*load)(std::uint32_t dtype, const std::byte* src, float* dst, std::size_t n);
    // n fp32 -> contiguous `dtype` at dst (any alignment), rounded to
    // nearest even; NaN quiet (fp32 too).
    void (*store)(std::uint32_t dtype, const float* src, std::byte* dst, std::size_t n);
    // x[i] = op(x[i], y[i]) in fp32 (y unused by scale and relu).
    void (*arith)(Op op, float* x, const float* y, float s, std::size_t n);
    // c[i][j] = sum_k a[i][k] * b[k][j]; dense row-major with leading
    // dimensions; c does not overlap a or b.
    void (*sgemm)(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                  const float* b, std::size_t ldb, float* c, std::size_t ldc);
};

const Ops& generic();
// nullptr when the CPU lacks AVX2 or FMA.
const Ops* avx2();
// The fastest of the two this CPU runs.
const Ops& best();

} // namespace rbln::emu::simd
