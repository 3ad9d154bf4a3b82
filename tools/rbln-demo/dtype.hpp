// SPDX-License-Identifier: GPL-2.0
// dtype.hpp - the element types of the card's built-in kernels (fp32, fp16,
// bf16): names, sizes, firmware-iface codes, and conversions to and from
// fp32 that round the way the card does (round to nearest, ties to even;
// overflow to Inf; fp16 subnormals; NaN stays a quiet NaN).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "rbln/storage.hpp"

namespace rbln::demo {

enum class DType { Fp32, Fp16, Bf16 };

/// "fp32", "fp16", "bf16".
std::string_view dtype_name(DType t) noexcept;
/// The inverse of dtype_name(); nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view text) noexcept;
/// librbln's element type (whose values are firmware-iface's RBLN_FW_DT_*).
ElementType element_type(DType t) noexcept;
/// Bytes per element.
std::size_t dtype_size(DType t) noexcept;
/// Explicit mantissa bits (23, 10, 7).
int mantissa_bits(DType t) noexcept;
/// Exponent of the smallest normal number (-126, -14, -126).
int min_exponent(DType t) noexcept;

std::uint16_t f32_to_f16(float v) noexcept;
float f16_to_f32(std::uint16_t h) noexcept;
std::uint16_t f32_to_bf16(float v) noexcept;
float bf16_to_f32(std::uint16_t h) noexcept;

/// @v rounded to the nearest value of @t (as a float).
float round_to(DType t, float v) noexcept;

/// Element @i of a packed array of @t, widened to fp32 (exact).
float load(DType t, std::span<const std::byte> data, std::size_t i) noexcept;
/// Stores @v, rounded to @t, as element @i of a packed array of @t.
void store(DType t, std::span<std::byte> data, std::size_t i, float v) noexcept;

} // namespace rbln::demo
