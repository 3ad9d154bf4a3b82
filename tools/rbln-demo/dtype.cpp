// SPDX-License-Identifier: GPL-2.0
// dtype.cpp - element types and their conversions (see dtype.hpp).

#include "dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>

namespace rbln::demo {

std::string_view dtype_name(DType t) noexcept {
    switch (t) {
    case DType::Fp32:
        return "fp32";
    case DType::Fp16:
        return "fp16";
    case DType::Bf16:
        return "bf16";
    }
    return "?";
}

std::optional<DType> parse_dtype(std::string_view text) noexcept {
    for (DType t : {DType::Fp32, DType::Fp16, DType::Bf16})
        if (text == dtype_name(t))
            return t;
    return std::nullopt;
}

ElementType element_type(DType t) noexcept {
    switch (t) {
    case DType::Fp32:
        return ElementType::Fp32;
    case DType::Fp16:
        return ElementType::Fp16;
    case DType::Bf16:
        return ElementType::Bf16;
    }
    return ElementType::Fp32;
}

std::size_t dtype_size(DType t) noexcept {
    return t == DType::Fp32 ? 4 : 2;
}

int mantissa_bits(DType t) noexcept {
    switch (t) {
    case DType::Fp32:
        return 23;
    case DType::Fp16:
        return 10;
    case DType::Bf16:
        return 7;
    }
    return 0;
}

int min_exponent(DType t) noexcept {
    return t == DType::Fp16 ? -14 : -126;
}

namespace {

// Drops the low @shift bits of @v, rounding to nearest with ties to even.
std::uint32_t shift_round_even(std::uint32_t v, unsigned shift) noexcept {
    const std::uint32_t kept = v >> shift;
    const std::uint32_t rest = v & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    return kept + ((rest > half || (rest == half && (kept & 1u) != 0)) ? 1u : 0u);
}

} // namespace

std::uint16_t f32_to_f16(float v) noexcept {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t mag = bits & 0x7fffffffu;
    if (mag > 0x7f800000u) // NaN: quiet, top payload bits kept
        return static_cast<std::uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
    // 65520 (halfway between 65504 and 2^16) and above round to Inf.
    if (mag >= 0x477ff000u)
        return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (mag >= 0x38800000u) { // normal in fp16 (>= 2^-14)
        // Re-bias the exponent (127 -> 15) and round the mantissa; a carry
        // out of the mantissa correctly bumps the exponent.
        return static_cast<std::uint16_t>(sign | shift_round_even(mag - (112u << 23), 13));
    }
    // Subnormal or zero in fp16: count units of 2^-24.
    if (mag <= 0x33000000u) // <= 2^-25: rounds to zero (2^-25 is a tie to even 0)
        return sign;
    const std::uint32_t exp = mag >> 23;
    const std::uint32_t mant = (mag & 0x7fffffu) | 0x800000u;
    // value = mant * 2^(exp - 150) = (mant >> (126 - exp)) units of 2^-24
    return static_cast<std::uint16_t>(sign | shift_round_even(mant, 126u - exp));
}

float f16_to_f32(std::uint16_t h) noexcept {
    const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    const std::uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        const float m = std::ldexp(static_cast<float>(mant), -24);
        return sign != 0 ? -m : m;
    }
    if (exp == 31)
        return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

std::uint16_t f32_to_bf16(float v) noexcept {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: quiet, top payload bits kept
        return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
    // Rounding may carry into the exponent, and from the largest finite
    // value into Inf, as it should.
    return static_cast<std::uint16_t>(shift_round_even(bits & 0x7fffffffu, 16) |
                                      ((bits >> 16) & 0x8000u));
}

float bf16_to_f32(std::uint16_t h) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

float round_to(DType t, float v) noexcept {
    switch (t) {
    case DType::Fp32:
        return v;
    case DType::Fp16:
        return f16_to_f32(f32_to_f16(v));
    case DType::Bf16:
        return bf16_to_f32(f32_to_bf16(v));
    }
    return v;
}

float load(DType t, std::span<const std::byte> data, std::size_t i) noexcept {
    if (t == DType::Fp32) {
        float v = 0;
        std::memcpy(&v, data.data() + i * 4, 4);
        return v;
    }
    std::uint16_t h = 0;
    std::memcpy(&h, data.data() + i * 2, 2);
    return t == DType::Fp16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void store(DType t, std::span<std::byte> data, std::size_t i, float v) noexcept {
    if (t == DType::Fp32) {
        std::memcpy(data.data() + i * 4, &v, 4);
        return;
    }
    const std::uint16_t h = t == DType::Fp16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(data.data() + i * 2, &h, 2);
}

} // namespace rbln::demo
