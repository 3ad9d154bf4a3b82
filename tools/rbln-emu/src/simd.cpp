// SPDX-License-Identifier: GPL-2.0
// Vector primitives of the built-in kernels (simd.h).  The AVX2 functions
// carry a target attribute and run only after a CPU check, so the binary
// still runs on any x86-64.
#include "simd.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "fp.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define RBLN_HAVE_AVX2_CODE 1
#define RBLN_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace rbln::emu::simd {

namespace {

// --- scalar ------------------------------------------------------------------

std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v = 0;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

void store_u16(std::byte* p, std::uint16_t v) {
    std::memcpy(p, &v, sizeof(v));
}

void load_scalar(std::uint32_t dtype, const std::byte* src, float* dst, std::size_t n) {
    switch (dtype) {
    case kF32:
        std::memcpy(dst, src, n * sizeof(float));
        return;
    case kF16:
        for (std::size_t i = 0; i < n; i++)
            dst[i] = fp::f16_to_f32(load_u16(src + 2 * i));
        return;
    default:
        for (std::size_t i = 0; i < n; i++)
            dst[i] = fp::bf16_to_f32(load_u16(src + 2 * i));
        return;
    }
}

void store_scalar(std::uint32_t dtype, const float* src, std::byte* dst, std::size_t n) {
    switch (dtype) {
    case kF32:
        for (std::size_t i = 0; i < n; i++) {
            const std::uint32_t u = fp::f32_quiet_bits(std::bit_cast<std::uint32_t>(src[i]));
            std::memcpy(dst + 4 * i, &u, sizeof(u));
        }
        return;
    case kF16:
        for (std::size_t i = 0; i < n; i++)
            store_u16(dst + 2 * i, fp::f32_to_f16(src[i]));
        return;
    default:
        for (std::size_t i = 0; i < n; i++)
            store_u16(dst + 2 * i, fp::f32_to_bf16(src[i]));
        return;
    }
}

float relu1(float x) {
    if (x > 0.0F)
        return x;
    return x != x ? x : 0.0F; // NaN stays (quieted on the store)
}

void arith_scalar(Op op, float* x, const float* y, float s, std::size_t n) {
    switch (op) {
    case Op::add:
        for (std::size_t i = 0; i < n; i++)
            x[i] = x[i] + y[i];
        return;
    case Op::mul:
        for (std::size_t i = 0; i < n; i++)
            x[i] = x[i] * y[i];
        return;
    case Op::scale:
        for (std::size_t i = 0; i < n; i++)
            x[i] = x[i] * s;
        return;
    case Op::relu:
        for (std::size_t i = 0; i < n; i++)
            x[i] = relu1(x[i]);
        return;
    }
}

// Blocking of both matrix multiplies: MR x NR register tiles, KC deep.
constexpr std::size_t kMr = 6;
constexpr std::size_t kNr = 16;
constexpr std::size_t kKc = 256;

// B packed into panels of kNr columns, k-major inside a panel, columns
// beyond n zero: panel p, row kk at bp[(p * k + kk) * kNr].
std::vector<float> pack_b(std::size_t n, std::size_t k, const float* b, std::size_t ldb) {
    const std::size_t panels = (n + kNr - 1) / kNr;
    std::vector<float> bp(panels * k * kNr, 0.0F);
    for (std::size_t p = 0; p < panels; p++) {
        const std::size_t j0 = p * kNr;
        const std::size_t w = std::min(kNr, n - j0);
        for (std::size_t kk = 0; kk < k; kk++)
            std::memcpy(&bp[(p * k + kk) * kNr], b + kk * ldb + j0, w * sizeof(float));
    }
    return bp;
}

// Adds (or, first, stores) an mr x nr piece of a kMr x kNr tile into c.
void tile_out(const float* tile, float* c, std::size_t ldc, std::size_t mr, std::size_t nr,
              bool first) {
    for (std::size_t r = 0; r < mr; r++) {
        float* row = c + r * ldc;
        if (first) {
            std::memcpy(row, tile + r * kNr, nr * sizeof(float));
        } else {
            for (std::size_t j = 0; j < nr; j++)
                row[j] += tile[r * kNr + j];
        }
    }
}

template <typename Micro>
void sgemm_blocked(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                   const float* b, std::size_t ldb, float* c, std::size_t ldc, Micro micro) {
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        for (std::size_t i = 0; i < m; i++)
            std::fill_n(c + i * ldc, n, 0.0F);
        return;
    }
    const std::vector<float> bp = pack_b(n, k, b, ldb);
    const std::size_t panels = (n + kNr - 1) / kNr;
    alignas(32) float tile[kMr * kNr];
    for (std::size_t k0 = 0; k0 < k; k0 += kKc) {
        const std::size_t kc = std::min(kKc, k - k0);
        for (std::size_t i0 = 0; i0 < m; i0 += kMr) {
            const std::size_t mr = std::min(kMr, m - i0);
            for (std::size_t p = 0; p < panels; p++) {
                const std::size_t nr = std::min(kNr, n - p * kNr);
                micro(kc, a + i0 * lda + k0, lda, &bp[(p * k + k0) * kNr], mr, tile);
                tile_out(tile, c + i0 * ldc + p * kNr, ldc, mr, nr, k0 == 0);
            }
        }
    }
}

void micro_scalar(std::size_t kc, const float* a, std::size_t lda, const float* bp, std::size_t mr,
                  float* tile) {
    std::fill_n(tile, kMr * kNr, 0.0F);
    for (std::size_t r = 0; r < mr; r++) {
        float* t = tile + r * kNr;
        const float* ar = a + r * lda;
        for (std::size_t kk = 0; kk < kc; kk++) {
            const float av = ar[kk];
            const float* br = bp + kk * kNr;
            for (std::size_t j = 0; j < kNr; j++)
                t[j] += av * br[j];
        }
    }
}

void sgemm_scalar(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                  const float* b, std::size_t ldb, float* c, std::size_t ldc) {
    sgemm_blocked(m, n, k, a, lda, b, ldb, c, ldc, micro_scalar);
}

const Ops kGeneric{"generic", load_scalar, store_scalar, arith_scalar, sgemm_scalar};

#ifdef RBLN_HAVE_AVX2_CODE

// --- AVX2 ----------------------------------------------------------------------
// Eight lanes at a time; the tails use the scalar code, which computes the
// same bits (the vector code below is the scalar algorithm of fp.h, lane
// by lane).

RBLN_AVX2 __m256 f16x8_to_f32(const std::byte* src) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16);
    const __m256i em = _mm256_and_si256(w, _mm256_set1_epi32(0x7fff));
    const __m256i sh = _mm256_slli_epi32(em, 13);
    // exponent and mantissa moved into fp32 position: times 2^112 rebases
    // the exponent, and makes fp16 subnormals (fp32 denormals here) exact.
    const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(sh), _mm256_set1_ps(0x1p112F));
    const __m256i infnan = _mm256_or_si256(sh, _mm256_set1_epi32(0x7f800000));
    const __m256i is_infnan = _mm256_cmpgt_epi32(em, _mm256_set1_epi32(0x7bff));
    const __m256i bits = _mm256_blendv_epi8(_mm256_castps_si256(scaled), infnan, is_infnan);
    return _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
}

RBLN_AVX2 __m256 bf16x8_to_f32(const std::byte* src) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Eight 32-bit lanes holding 16-bit values -> eight u16 at dst.
RBLN_AVX2 void store_u16x8(std::byte* dst, __m256i v) {
    const __m256i packed = _mm256_packus_epi32(v, v);               // per 128-bit lane
    const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08); // lanes' low halves
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(ordered));
}

RBLN_AVX2 __m256i f32x8_to_f16(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000));
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i one = _mm256_set1_epi32(1);
    // Normal results.
    const __m256i n = _mm256_sub_epi32(a, _mm256_set1_epi32(0x38000000));
    const __m256i rn =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(0xfff)),
                                           _mm256_and_si256(_mm256_srli_epi32(n, 13), one)),
                          13);
    // Subnormal results and zero.
    const __m256i e = _mm256_srli_epi32(a, 23);
    const __m256i m = _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0x7fffff)),
                                      _mm256_set1_epi32(0x800000));
    const __m256i shift =
        _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(126), e), _mm256_set1_epi32(25));
    const __m256i half = _mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one));
    const __m256i lsb = _mm256_and_si256(_mm256_srlv_epi32(m, shift), one);
    const __m256i q = _mm256_srlv_epi32(
        _mm256_add_epi32(_mm256_add_epi32(m, _mm256_sub_epi32(half, one)), lsb), shift);
    // Select by magnitude: subnormal < normal < overflow < NaN.
    __m256i r = _mm256_blendv_epi8(q, rn, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x387fffff)));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7c00),
                           _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x477fefff)));
    const __m256i nan =
        _mm256_or_si256(_mm256_set1_epi32(0x7e00),
                        _mm256_and_si256(_mm256_srli_epi32(a, 13), _mm256_set1_epi32(0x3ff)));
    r = _mm256_blendv_epi8(r, nan, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
    return _mm256_or_si256(r, sign);
}

RBLN_AVX2 __m256i f32x8_to_bf16(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, nan, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
}

RBLN_AVX2 void load_avx2(std::uint32_t dtype, const std::byte* src, float* dst, std::size_t n) {
    std::size_t i = 0;
    switch (dtype) {
    case kF32:
        std::memcpy(dst, src, n * sizeof(float));
        return;
    case kF16:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, f16x8_to_f32(src + 2 * i));
        break;
    default:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, bf16x8_to_f32(src + 2 * i));
        break;
    }
    load_scalar(dtype, src + 2 * i, dst + i, n - i);
}

RBLN_AVX2 void store_avx2(std::uint32_t dtype, const float* src, std::byte* dst, std::size_t n) {
    std::size_t i = 0;
    switch (dtype) {
    case kF32: {
        const __m256i quiet = _mm256_set1_epi32(static_cast<int>(fp::kF32QuietBit));
        for (; i + 8 <= n; i += 8) {
            const __m256 x = _mm256_loadu_ps(src + i);
            const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            const __m256i u = _mm256_or_si256(_mm256_castps_si256(x), _mm256_and_si256(nan, quiet));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 4 * i), u);
        }
        store_scalar(dtype, src + i, dst + 4 * i, n - i);
        return;
    }
    case kF16:
        for (; i + 8 <= n; i += 8)
            store_u16x8(dst + 2 * i, f32x8_to_f16(_mm256_loadu_ps(src + i)));
        break;
    default:
        for (; i + 8 <= n; i += 8)
            store_u16x8(dst + 2 * i, f32x8_to_bf16(_mm256_loadu_ps(src + i)));
        break;
    }
    store_scalar(dtype, src + i, dst + 2 * i, n - i);
}

RBLN_AVX2 void arith_avx2(Op op, float* x, const float* y, float s, std::size_t n) {
    std::size_t i = 0;
    switch (op) {
    case Op::add:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        break;
    case Op::mul:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        break;
    case Op::scale: {
        const __m256 sv = _mm256_set1_ps(s);
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
        break;
    }
    case Op::relu: {
        const __m256 zero = _mm256_setzero_ps();
        for (; i + 8 <= n; i += 8) {
            const __m256 v = _mm256_loadu_ps(x + i);
            const __m256 keep =
                _mm256_or_ps(_mm256_cmp_ps(v, zero, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            _mm256_storeu_ps(x + i, _mm256_and_ps(v, keep));
        }
        break;
    }
    }
    arith_scalar(op, x + i, y == nullptr ? nullptr : y + i, s, n - i);
}

// The register tile: up to kMr rows x 16 columns in 2 * MR accumulators.
template <std::size_t MR>
RBLN_AVX2 void micro_avx2_rows(std::size_t kc, const float* a, std::size_t lda, const float* bp,
                               float* tile) {
    __m256 c0[MR];
    __m256 c1[MR];
#pragma GCC unroll 6
    for (std::size_t r = 0; r < MR; r++) {
        c0[r] = _mm256_setzero_ps();
        c1[r] = _mm256_setzero_ps();
    }
    for (std::size_t kk = 0; kk < kc; kk++) {
        const __m256 b0 = _mm256_loadu_ps(bp + kk * kNr);
        const __m256 b1 = _mm256_loadu_ps(bp + kk * kNr + 8);
#pragma GCC unroll 6
        for (std::size_t r = 0; r < MR; r++) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
            c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (std::size_t r = 0; r < MR; r++) {
        _mm256_storeu_ps(tile + r * kNr, c0[r]);
        _mm256_storeu_ps(tile + r * kNr + 8, c1[r]);
    }
}

RBLN_AVX2 void micro_avx2(std::size_t kc, const float* a, std::size_t lda, const float* bp,
                          std::size_t mr, float* tile) {
    static_assert(kMr == 6);
    switch (mr) {
    case 1:
        micro_avx2_rows<1>(kc, a, lda, bp, tile);
        return;
    case 2:
        micro_avx2_rows<2>(kc, a, lda, bp, tile);
        return;
    case 3:
        micro_avx2_rows<3>(kc, a, lda, bp, tile);
        return;
    case 4:
        micro_avx2_rows<4>(kc, a, lda, bp, tile);
        return;
    case 5:
        micro_avx2_rows<5>(kc, a, lda, bp, tile);
        return;
    default:
        micro_avx2_rows<kMr>(kc, a, lda, bp, tile);
        return;
    }
}

RBLN_AVX2 void sgemm_avx2(std::size_t m, std::size_t n, std::size_t k, const float* a,
                          std::size_t lda, const float* b, std::size_t ldb, float* c,
                          std::size_t ldc) {
    sgemm_blocked(m, n, k, a, lda, b, ldb, c, ldc, micro_avx2);
}

const Ops kAvx2{"avx2", load_avx2, store_avx2, arith_avx2, sgemm_avx2};

bool cpu_has_avx2() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#endif

} // namespace

const Ops& generic() {
    return kGeneric;
}

const Ops* avx2() {
#ifdef RBLN_HAVE_AVX2_CODE
    static const bool have = cpu_has_avx2();
    return have ? &kAvx2 : nullptr;
#else
    return nullptr;
#endif
}

const Ops& best() {
    static const Ops* const ops = avx2() != nullptr ? avx2() : &kGeneric;
    return *ops;
}

} // namespace rbln::emu::simd
