// SPDX-License-Identifier: GPL-2.0
// fp16 / bf16 <-> fp32 conversions of the built-in kernels
// (rbln_fw_cmd.md): exact widening; narrowing rounds to nearest, ties to
// even, overflows to Inf, keeps NaN a NaN (quiet, with the top payload
// bits), and produces and reads fp16 subnormals.  Scalar reference code;
// the vector paths (simd.h) must give the same bits.
#pragma once

#include <bit>
#include <cstdint>

namespace rbln::emu::fp {

inline constexpr std::uint32_t kF32QuietBit = 0x00400000U;
inline constexpr std::uint16_t kF16QuietBit = 0x0200U;
inline constexpr std::uint16_t kBf16QuietBit = 0x0040U;

constexpr bool f32_bits_nan(std::uint32_t u) {
    return (u & 0x7fffffffU) > 0x7f800000U;
}

// NaN stays NaN, quiet: fp32 results of the kernels go through this.
constexpr std::uint32_t f32_quiet_bits(std::uint32_t u) {
    return f32_bits_nan(u) ? (u | kF32QuietBit) : u;
}

constexpr float f16_to_f32(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fU;
    std::uint32_t mant = h & 0x3ffU;
    std::uint32_t bits = 0;
    if (exp == 0x1f) {
        bits = 0x7f800000U | (mant << 13); // Inf, or NaN with its payload
    } else if (exp != 0) {
        bits = ((exp + 127 - 15) << 23) | (mant << 13);
    } else if (mant != 0) {
        // Subnormal: mant * 2^-24; normalize the mantissa.
        std::uint32_t e = 127 - 15 + 1;
        while ((mant & 0x400U) == 0) {
            mant <<= 1;
            e--;
        }
        bits = (e << 23) | ((mant & 0x3ffU) << 13);
    }
    return std::bit_cast<float>(sign | bits);
}

constexpr std::uint16_t f32_to_f16(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000U);
    const std::uint32_t a = u & 0x7fffffffU;
    if (a > 0x7f800000U) // NaN: quiet, top 10 payload bits kept
        return static_cast<std::uint16_t>(sign | 0x7c00U | kF16QuietBit | ((a >> 13) & 0x3ffU));
    if (a >= 0x477ff000U) // >= 65520 (the tie above 65504 rounds to even: up), or Inf
        return static_cast<std::uint16_t>(sign | 0x7c00U);
    if (a >= 0x38800000U) {                      // normal fp16 result (>= 2^-14 before rounding)
        const std::uint32_t n = a - 0x38000000U; // fp32 exponent rebased to fp16's
        const std::uint32_t r = n + 0xfffU + ((n >> 13) & 1U);
        return static_cast<std::uint16_t>(sign | (r >> 13));
    }
    // Subnormal or zero: the value in units of 2^-24 is m >> shift.
    const std::uint32_t e = a >> 23;
    const std::uint32_t m = (a & 0x7fffffU) | 0x800000U;
    std::uint32_t shift = 126 - e; // >= 14 here
    if (shift > 25)
        shift = 25; // below half the smallest subnormal: rounds to 0
    const std::uint32_t half = 1U << (shift - 1);
    const std::uint32_t q = (m + (half - 1) + ((m >> shift) & 1U)) >> shift;
    return static_cast<std::uint16_t>(sign | q);
}

constexpr float bf16_to_f32(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

constexpr std::uint16_t f32_to_bf16(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if (f32_bits_nan(u))
        return static_cast<std::uint16_t>((u >> 16) | kBf16QuietBit);
    // Never carries past bit 31: the largest non-NaN magnitude is Inf.
    return static_cast<std::uint16_t>((u + 0x7fffU + ((u >> 16) & 1U)) >> 16);
}

} // namespace rbln::emu::fp
