// SPDX-License-Identifier: GPL-2.0
// soak_ref.hpp - the CPU side of rbln-soak: a portable pseudo-random
// generator (the same draws on every machine and standard library, so a
// printed seed replays a run) and the reference arithmetic of the card's
// built-in kernels (tools/rbln-emu/README.md, "Built-in kernels"): inputs
// widen to fp32 exactly, one fp32 operation, one rounding to the output
// type, to nearest with ties to even, overflow to infinity.  Header-only,
// tested on the host by soak_ref_test.cpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace rbln::soak {

/// SplitMix64: small, fast, and defined bit for bit (std::mt19937's
/// distributions are not portable across standard libraries).
class Rng {
public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, n) (n > 0; the bias of the multiply-shift is below 2^-32 for n < 2^32).
    std::uint64_t below(std::uint64_t n) noexcept {
        return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
    }
    /// Uniform in [lo, hi].
    std::uint64_t range(std::uint64_t lo, std::uint64_t hi) noexcept {
        return lo + below(hi - lo + 1);
    }
    /// True with probability @num / @den.
    bool chance(std::uint64_t num, std::uint64_t den) noexcept { return below(den) < num; }
    /// Log-uniform in [lo, hi] (sizes: small ones as likely as large ones).
    std::uint64_t log_size(std::uint64_t lo, std::uint64_t hi) noexcept {
        const unsigned a = std::bit_width(lo) - 1;
        const unsigned b = std::bit_width(hi) - 1;
        const unsigned e = static_cast<unsigned>(range(a, b));
        const std::uint64_t base = 1ULL << e;
        const std::uint64_t v = base + below(base);
        return v < lo ? lo : (v > hi ? hi : v);
    }
    void fill(std::span<std::byte> out) noexcept {
        std::size_t i = 0;
        for (; i + 8 <= out.size(); i += 8) {
            const std::uint64_t v = next();
            std::memcpy(out.data() + i, &v, 8);
        }
        if (i < out.size()) {
            const std::uint64_t v = next();
            std::memcpy(out.data() + i, &v, out.size() - i);
        }
    }

private:
    std::uint64_t state_;
};

/// An independent stream of draws for (@seed, @tag): the seed of each
/// soak process's round, so one round replays without the ones before.
inline std::uint64_t mix(std::uint64_t seed, std::uint64_t tag) noexcept {
    Rng r(seed ^ (tag * 0xd1342543de82ef95ULL));
    return r.next();
}

// ---- element types --------------------------------------------------------------

/// fp32 -> fp16, round to nearest even; subnormals produced, overflow to
/// +-Inf, NaN stays NaN (quiet).
inline std::uint16_t f32_to_f16(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000U);
    const std::uint32_t ax = x & 0x7fffffffU;
    if (ax > 0x7f800000U) // NaN: quiet, top payload bits kept
        return static_cast<std::uint16_t>(sign | 0x7e00U | ((ax >> 13) & 0x3ffU));
    if (ax >= 0x477ff000U) // >= 65520 rounds to Inf (Inf itself too)
        return static_cast<std::uint16_t>(sign | 0x7c00U);
    if (ax < 0x38800000U) { // below 2^-14: a subnormal (or zero) in units of 2^-24
        // a * 2^24 is exact (a power-of-two scale of a value >= 2^-149);
        // nearbyint rounds ties to even in the default rounding mode.
        const float units = std::nearbyint(std::bit_cast<float>(ax) * 16777216.0F);
        return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(units));
    }
    std::uint32_t h = ((((ax >> 23) - 127U + 15U)) << 10) | ((ax & 0x7fffffU) >> 13);
    const std::uint32_t rest = ax & 0x1fffU;
    if (rest > 0x1000U || (rest == 0x1000U && (h & 1U) != 0))
        h++; // a carry into the exponent is right (up to 65504 -> no Inf here)
    return static_cast<std::uint16_t>(sign | h);
}

/// fp16 -> fp32, exact.
inline float f16_to_f32(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fU;
    const std::uint32_t man = h & 0x3ffU;
    if (exp == 0x1fU)
        return std::bit_cast<float>(sign | 0x7f800000U | (man << 13));
    if (exp == 0) {
        const float v = std::ldexp(static_cast<float>(man), -24);
        return sign != 0 ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp + 112U) << 23) | (man << 13));
}

/// fp32 -> bf16, round to nearest even; NaN stays NaN (quiet).
inline std::uint16_t f32_to_bf16(float f) noexcept {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffU) > 0x7f800000U)
        return static_cast<std::uint16_t>((x >> 16) | 0x40U);
    x += 0x7fffU + ((x >> 16) & 1U);
    return static_cast<std::uint16_t>(x >> 16);
}

inline float bf16_to_f32(std::uint16_t b) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// Element types as rbln::ElementType numbers them (Fp32 1, Fp16 2, Bf16 3).
enum class Type : std::uint32_t { Fp32 = 1, Fp16 = 2, Bf16 = 3 };

inline std::size_t type_size(Type t) noexcept {
    return t == Type::Fp32 ? 4 : 2;
}
inline const char* type_name(Type t) noexcept {
    return t == Type::Fp32 ? "fp32" : (t == Type::Fp16 ? "fp16" : "bf16");
}

/// The bits of @v in @t (the low 16 bits for the 2-byte types).
inline std::uint32_t encode(Type t, float v) noexcept {
    switch (t) {
    case Type::Fp16:
        return f32_to_f16(v);
    case Type::Bf16:
        return f32_to_bf16(v);
    case Type::Fp32:
        break;
    }
    return std::bit_cast<std::uint32_t>(v);
}

inline float decode(Type t, std::uint32_t bits) noexcept {
    switch (t) {
    case Type::Fp16:
        return f16_to_f32(static_cast<std::uint16_t>(bits));
    case Type::Bf16:
        return bf16_to_f32(static_cast<std::uint16_t>(bits));
    case Type::Fp32:
        break;
    }
    return std::bit_cast<float>(bits);
}

/// @v rounded to @t (the value the card stores).
inline float round_to(Type t, float v) noexcept {
    return decode(t, encode(t, v));
}

/// @values as the bytes of a storage of type @t.
inline std::vector<std::byte> to_bytes(Type t, std::span<const float> values) {
    const std::size_t es = type_size(t);
    std::vector<std::byte> out(values.size() * es);
    for (std::size_t i = 0; i < values.size(); i++) {
        const std::uint32_t bits = encode(t, values[i]);
        std::memcpy(out.data() + i * es, &bits, es); // little endian
    }
    return out;
}

/// The bits of element @i of @bytes, a storage of type @t.
inline std::uint32_t bits_at(Type t, std::span<const std::byte> bytes, std::size_t i) noexcept {
    const std::size_t es = type_size(t);
    std::uint32_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * es, es);
    return bits;
}

// ---- views -------------------------------------------------------------------------

/// A strided view in elements (as rbln::StorageView, without the storage).
struct View {
    std::int64_t offset = 0;
    std::vector<std::int64_t> sizes;
    std::vector<std::int64_t> strides;

    std::size_t numel() const noexcept {
        std::size_t n = 1;
        for (const auto s : sizes)
            n *= static_cast<std::size_t>(s);
        return n;
    }
    /// The storage index of every element, in row-major order of @sizes.
    std::vector<std::size_t> indices() const {
        std::vector<std::size_t> out;
        out.reserve(numel());
        std::vector<std::int64_t> at(sizes.size(), 0);
        for (std::size_t n = numel(); n > 0; n--) {
            std::int64_t idx = offset;
            for (std::size_t d = 0; d < sizes.size(); d++)
                idx += at[d] * strides[d];
            out.push_back(static_cast<std::size_t>(idx));
            for (std::size_t d = sizes.size(); d-- > 0;) {
                if (++at[d] < sizes[d])
                    break;
                at[d] = 0;
            }
        }
        return out;
    }
};

/// Row-major strides of @sizes.
inline std::vector<std::int64_t> row_major(const std::vector<std::int64_t>& sizes) {
    std::vector<std::int64_t> st(sizes.size());
    std::int64_t s = 1;
    for (std::size_t d = sizes.size(); d-- > 0;) {
        st[d] = s;
        s *= sizes[d];
    }
    return st;
}

enum class Kernel { Add, Mul, Relu, Scale };

/// One elementwise kernel as the card computes it: out[i] = k(a[i], b[i])
/// in fp32, rounded once to @t.
inline float apply(Kernel k, Type t, float a, float b, float factor) noexcept {
    float r = 0.0F;
    switch (k) {
    case Kernel::Add:
        r = a + b;
        break;
    case Kernel::Mul:
        r = a * b;
        break;
    case Kernel::Relu:
        r = a > 0.0F ? a : (std::isnan(a) ? a : 0.0F);
        break;
    case Kernel::Scale:
        r = a * factor;
        break;
    }
    return round_to(t, r);
}

/// out[m][n] = sum_k a[m][k] * b[k][n] with exact products and sums (the
/// inputs are small integers, so every order of fp32 accumulation gives
/// this), rounded once to @t.  @a, @b are the values in row-major order.
inline std::vector<float> matmul(Type t, std::span<const float> a, std::span<const float> b,
                                 std::size_t m, std::size_t n, std::size_t k) {
    std::vector<float> out(m * n);
    for (std::size_t i = 0; i < m; i++)
        for (std::size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (std::size_t x = 0; x < k; x++)
                s += static_cast<double>(a[i * k + x]) * static_cast<double>(b[x * n + j]);
            out[i * n + j] = round_to(t, static_cast<float>(s));
        }
    return out;
}

/// Whether @v is an integer of magnitude <= @limit (a matmul input whose
/// sums are exact in fp32 whatever the order).
inline bool small_integer(float v, float limit) noexcept {
    return std::fabs(v) <= limit && std::nearbyint(v) == v;
}

} // namespace rbln::soak
