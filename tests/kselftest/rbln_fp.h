/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fp16 and bf16 of the rbln kselftests, written here (not taken from a
 * compiler's _Float16 or a library) so the reference the card is checked
 * against is independent of it:
 *
 *  - fp32 -> fp16 and fp32 -> bf16 round to nearest, ties to even; values
 *    beyond the range become +-Inf; NaN stays NaN with the quiet bit set;
 *    fp16 subnormals are produced (and gradual underflow rounds like the
 *    rest); -0 stays -0;
 *  - fp16 -> fp32 and bf16 -> fp32 are exact (every fp16/bf16 value is an
 *    fp32 value), fp16 subnormals included.
 *
 * Also: ulp distances in the 16-bit formats, for the documented error
 * bounds of the kernel tests.
 */
#ifndef RBLN_KSFT_FP_H
#define RBLN_KSFT_FP_H

#include <stdbool.h>
#include <string.h>

#include <linux/types.h>

static inline __u32 rbln_f32_bits(float f)
{
	__u32 u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float rbln_bits_f32(__u32 u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Shifts @m right by @shift (1..63), rounding to nearest, ties to even. */
static inline __u64 rbln_shift_rne(__u64 m, unsigned int shift)
{
	__u64 r = m >> shift;
	__u64 rem = m & ((1ull << shift) - 1);
	__u64 half = 1ull << (shift - 1);

	if (rem > half || (rem == half && (r & 1)))
		r++;
	return r;
}

static inline __u16 rbln_f32_to_f16(float f)
{
	__u32 x = rbln_f32_bits(f);
	__u16 sign = (__u16)((x >> 16) & 0x8000);
	int exp = (int)((x >> 23) & 0xff);
	__u32 man = x & 0x7fffff;
	int e = exp - 127 + 15;
	unsigned int shift;

	if (exp == 0xff) {
		if (!man)
			return sign | 0x7c00;
		/* quiet NaN, the top payload bits kept */
		return sign | 0x7e00 | (__u16)(man >> 13);
	}
	if (exp == 0)
		return sign;	/* fp32 zero or subnormal: below fp16's range */
	if (e >= 31)
		return sign | 0x7c00;
	if (e >= 1) {
		/* normal: 23 -> 10 mantissa bits; a carry may reach Inf */
		__u32 r = (__u32)rbln_shift_rne(((__u32)e << 23) | man, 13);

		return sign | (__u16)r;
	}
	/* subnormal result: value = m * 2^(exp - 150), unit 2^-24 */
	shift = (unsigned int)(126 - exp);
	if (shift > 25)
		return sign;
	return sign | (__u16)rbln_shift_rne(man | 0x800000, shift);
}

static inline float rbln_f16_to_f32(__u16 h)
{
	__u32 sign = (__u32)(h & 0x8000) << 16;
	__u32 exp = (h >> 10) & 0x1f;
	__u32 man = h & 0x3ff;

	if (exp == 0x1f)
		return rbln_bits_f32(sign | 0x7f800000 | (man << 13));
	if (exp == 0) {
		/* zero or subnormal: man * 2^-24, exact in fp32 */
		float v = (float)man * (1.0f / 16777216.0f);

		return sign ? -v : v;
	}
	return rbln_bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

static inline __u16 rbln_f32_to_bf16(float f)
{
	__u32 x = rbln_f32_bits(f);

	if ((x & 0x7f800000) == 0x7f800000 && (x & 0x7fffff))
		return (__u16)((x >> 16) | 0x40);	/* quiet NaN */
	/* the carry of the rounding runs into the exponent, up to Inf */
	return (__u16)rbln_shift_rne(x, 16) |
	       (__u16)((x >> 16) & 0x8000);
}

static inline float rbln_bf16_to_f32(__u16 b)
{
	return rbln_bits_f32((__u32)b << 16);
}

static inline bool rbln_f16_is_nan(__u16 h)
{
	return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static inline bool rbln_bf16_is_nan(__u16 b)
{
	return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

/*
 * 16-bit patterns on one ordered integer line (-0 and +0 meet at 0), so
 * the distance of two finite values is their distance in ulps.
 */
static inline int rbln_ord16(__u16 v)
{
	return (v & 0x8000) ? -(int)(v & 0x7fff) : (int)v;
}

static inline int rbln_ulp16(__u16 a, __u16 b)
{
	int d = rbln_ord16(a) - rbln_ord16(b);

	return d < 0 ? -d : d;
}

#endif /* RBLN_KSFT_FP_H */
