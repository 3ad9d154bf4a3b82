// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_submit_kernels_test - the built-in kernels of LAUNCH on every type,
 * checked against a CPU reference computed here.
 *
 * The reference follows rbln_fw_cmd.md: elementwise kernels compute in
 * fp32 and round once to dtype_out, round to nearest even, NaN stays NaN
 * (quiet), beyond the range is Inf, fp16 subnormals are produced and
 * read.  fp16/bf16 conversions are the test's own (rbln_fp.h).
 *
 * What is asserted, per output element:
 *  - fp32 outputs of ADD, MUL, RELU, SCALE and every CAST: bit exact (a
 *    CAST is one rounding of an exact value, so casts to fp16/bf16 are bit
 *    exact too);
 *  - fp16/bf16 outputs of ADD, MUL, SCALE: bit exact when the fp32 result
 *    is exact (then every reading of "compute in fp32, round once" agrees:
 *    this is where a truncating or wrongly rounding card shows), else at
 *    most 1 ulp of the output type from the reference (an implementation
 *    that rounds the exact result once instead of via fp32 differs from
 *    the reference by at most that double rounding); RELU bit exact;
 *    NaN for NaN, Inf exactly when the exact result overflows;
 *  - MATMUL (products accumulated in fp32 in an order the card chooses,
 *    the sum rounded once to dtype_out):
 *      |out - S| <= (K + 1) * 2^-24 * sum_k |a_mk * b_kn| + 1 ulp(S)
 *    with S the exact sum (computed in double) and ulp(S) the spacing of
 *    dtype_out at S: the first term bounds K fp32 roundings of the
 *    accumulation (and of fp32 products), the second the final rounding.
 *
 * Shapes of 1 to 4 dimensions, contiguous, strided (gaps in the output
 * must keep their bytes), broadcast (stride 0) and transposed; inputs with
 * NaN, Inf, signed zeros, fp16 subnormals, overflowing sums and rounding
 * ties.  Also "y = relu(x @ w) * scale" end to end through HBM, and bad
 * LAUNCH packets failing their job with -EINVAL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_fp.h"
#include "rbln_ksft.h"
#include "rbln_sub_ksft.h"

#define GUARD 0xa5
#define ARENA (8u << 20)	/* bytes per tensor arena */

static const char *const dt_name[] = { "?", "fp32", "fp16", "bf16" };
static const char *const k_name[] = { "?",	 "ADD",	   "MUL", "RELU",
				      "SCALE", "MATMUL", "CAST" };

static size_t dt_size(__u32 dt)
{
	return dt == RBLN_FW_DT_FP32 ? 4 : 2;
}

/* The bits of element @i of a tensor of @dt at @p. */
static __u32 get_bits(__u32 dt, const unsigned char *p, __u64 i)
{
	if (dt == RBLN_FW_DT_FP32) {
		__u32 v;

		memcpy(&v, p + 4 * i, 4);
		return v;
	}
	return (__u32)(p[2 * i] | (p[2 * i + 1] << 8));
}

static void put_bits(__u32 dt, unsigned char *p, __u64 i, __u32 v)
{
	if (dt == RBLN_FW_DT_FP32) {
		memcpy(p + 4 * i, &v, 4);
		return;
	}
	p[2 * i] = (unsigned char)v;
	p[2 * i + 1] = (unsigned char)(v >> 8);
}

static float to_f32(__u32 dt, __u32 bits)
{
	switch (dt) {
	case RBLN_FW_DT_FP16:
		return rbln_f16_to_f32((__u16)bits);
	case RBLN_FW_DT_BF16:
		return rbln_bf16_to_f32((__u16)bits);
	default:
		return rbln_bits_f32(bits);
	}
}

static __u32 from_f32(__u32 dt, float f)
{
	switch (dt) {
	case RBLN_FW_DT_FP16:
		return rbln_f32_to_f16(f);
	case RBLN_FW_DT_BF16:
		return rbln_f32_to_bf16(f);
	default:
		return rbln_f32_bits(f);
	}
}

static bool is_nan(__u32 dt, __u32 bits)
{
	switch (dt) {
	case RBLN_FW_DT_FP16:
		return rbln_f16_is_nan((__u16)bits);
	case RBLN_FW_DT_BF16:
		return rbln_bf16_is_nan((__u16)bits);
	default:
		return isnan(rbln_bits_f32(bits));
	}
}

/* NaN with the quiet bit of its type. */
static bool is_quiet_nan(__u32 dt, __u32 bits)
{
	switch (dt) {
	case RBLN_FW_DT_FP16:
		return rbln_f16_is_nan((__u16)bits) && (bits & 0x200);
	case RBLN_FW_DT_BF16:
		return rbln_bf16_is_nan((__u16)bits) && (bits & 0x40);
	default:
		return isnan(rbln_bits_f32(bits)) && (bits & 0x400000);
	}
}

/* Spacing of @dt's values at magnitude |@v| (normal or subnormal). */
static double ulp_at(__u32 dt, double v)
{
	int mant = dt == RBLN_FW_DT_FP32 ? 23 : dt == RBLN_FW_DT_FP16 ? 10 : 7;
	int emin = dt == RBLN_FW_DT_FP16 ? -14 : -126;
	int e;

	v = fabs(v);
	e = v > 0 ? ilogb(v) : emin;
	if (e < emin)
		e = emin;
	return ldexp(1.0, e - mant);
}

/*
 * Random finite values of @dt: sign, a random mantissa and an exponent of
 * [-@erange, @erange]; fp16 also gets subnormals now and then.
 */
static __u32 rand_value(__u32 dt, __u64 *st, int erange)
{
	__u64 r = rbln_rand(st);
	int e = (int)(r % (2 * erange + 1)) - erange;
	__u32 sign = (r >> 20) & 1;

	switch (dt) {
	case RBLN_FW_DT_FP16:
		if ((r >> 24) % 16 == 0)	/* subnormal */
			return (sign << 15) | ((r >> 32) & 0x3ff) | 1;
		return (sign << 15) | ((__u32)(e + 15) << 10) |
		       ((r >> 32) & 0x3ff);
	case RBLN_FW_DT_BF16:
		return (sign << 15) | ((__u32)(e + 127) << 7) |
		       ((r >> 32) & 0x7f);
	default:
		return (sign << 31) | ((__u32)(e + 127) << 23) |
		       ((r >> 32) & 0x7fffff);
	}
}

/* Values the elementwise kernels must get right beyond random ones. */
static __u32 special_value(__u32 dt, unsigned int i)
{
	static const float f[] = {
		0.0f, 1.0f, -1.0f, 0.5f, 65504.0f, -65504.0f, 3.0e38f,
		-3.0e38f, 1.0009765625f, 2049.0f, 1.00390625f, 257.0f,
	};
	__u32 n = ARRAY_SIZE(f);

	if (i < n)
		return from_f32(dt, f[i]);
	switch (i - n) {
	case 0:
		return from_f32(dt, INFINITY);
	case 1:
		return from_f32(dt, -INFINITY);
	case 2:
		return from_f32(dt, NAN);
	case 3:		/* smallest fp16 subnormal / a small value */
		return dt == RBLN_FW_DT_FP16 ? 0x0001 : from_f32(dt, 0.001f);
	case 4:		/* largest fp16 subnormal */
		return dt == RBLN_FW_DT_FP16 ? 0x03ff : from_f32(dt, -0.002f);
	default:
		return from_f32(dt, -0.0f);
	}
}

#define N_SPECIAL 18

FIXTURE(kern)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 queue;
	struct rbln_cmdbuf cb;
	struct rbln_buf host;	/* inputs (or outputs) in host memory */
	struct rbln_buf hbm;	/* the other side in HBM */
	__u32 bos[2];
	bool ready;
};

FIXTURE_SETUP(kern)
{
	self->fd = -1;
	if (!rbln_require_nodes(_metadata, self->nodes))
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_info_device(self->fd, &self->dev));
	if (!rbln_require_rings(_metadata, self->fd))
		return;
	self->queue = rbln_new_queue(_metadata, self->fd,
				     rbln_all_chiplets(self->dev.chiplet_count));
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 64 * 1024,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->host, 3 * ARENA,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->hbm, 3 * ARENA,
				  RBLN_REGION_HBM, 0));
	self->bos[0] = self->host.handle;
	self->bos[1] = self->hbm.handle;
	self->ready = true;
}

FIXTURE_TEARDOWN(kern)
{
	if (self->host.handle)
		rbln_buf_free(self->fd, &self->host);
	if (self->hbm.handle)
		rbln_buf_free(self->fd, &self->hbm);
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

/* An elementwise case. */
struct ew {
	__u32 kernel, din, dout, ndim;
	__u64 shape[4];
	__s64 sa[4], sb[4], so[4];
	float scale;
	bool out_in_host;	/* else the inputs are in host memory */
	const char *what;
};

/* Elements spanned by a tensor of @shape and @stride (max offset + 1). */
static __u64 span_of(const struct ew *c, const __s64 *stride)
{
	__u64 m = 0;

	for (__u32 d = 0; d < c->ndim; d++)
		m += (c->shape[d] - 1) * (__u64)stride[d];
	return m + 1;
}

static __u64 count_of(const struct ew *c)
{
	__u64 n = 1;

	for (__u32 d = 0; d < c->ndim; d++)
		n *= c->shape[d];
	return n;
}

/* Element offset of the @flat-th index of @c's shape in @stride. */
static __u64 offset_of(const struct ew *c, __u64 flat, const __s64 *stride)
{
	__u64 off = 0;

	for (int d = (int)c->ndim - 1; d >= 0; d--) {
		off += (flat % c->shape[d]) * (__u64)stride[d];
		flat /= c->shape[d];
	}
	return off;
}

struct ref {
	__u32 bits;	/* the reference in dtype_out */
	bool exact;	/* the fp32 intermediate was exact */
	bool any_zero;	/* RELU of -0: max(-0, 0) may be either zero */
};

static struct ref ew_ref(const struct ew *c, __u32 a, __u32 b)
{
	float fa = to_f32(c->din, a), fb = to_f32(c->din, b), r;
	double x;
	struct ref ref;

	switch (c->kernel) {
	case RBLN_FW_KERNEL_ADD:
		r = fa + fb;
		x = (double)fa + (double)fb;
		break;
	case RBLN_FW_KERNEL_MUL:
		r = fa * fb;
		x = (double)fa * (double)fb;
		break;
	case RBLN_FW_KERNEL_SCALE:
		r = fa * c->scale;
		x = (double)fa * (double)c->scale;
		break;
	case RBLN_FW_KERNEL_RELU:
		r = fa > 0.0f ? fa : (isnan(fa) ? fa : 0.0f);
		x = r;
		break;
	default:		/* CAST */
		r = fa;
		x = r;
		break;
	}
	ref.bits = from_f32(c->dout, r);
	ref.any_zero = c->kernel == RBLN_FW_KERNEL_RELU && fa == 0.0f &&
		       signbit(fa);
	/* inexact: the fp32 result differs from the exact one */
	ref.exact = isnan(r) || isinf(x) || (double)r == x;
	if (isinf(r) && !isinf(x))
		ref.exact = false;	/* fp32 overflow of a finite result */
	return ref;
}

/* 0 if @got is an allowed result for the reference (file comment). */
static int ew_check(const struct ew *c, struct ref want, __u32 got)
{
	if (is_nan(c->dout, want.bits))
		return is_quiet_nan(c->dout, got) ? 0 : -1;
	if (got == want.bits)
		return 0;
	if (want.any_zero && to_f32(c->dout, got) == 0.0f)
		return 0;
	if (c->dout == RBLN_FW_DT_FP32 || want.exact ||
	    c->kernel == RBLN_FW_KERNEL_RELU || c->kernel == RBLN_FW_KERNEL_CAST)
		return -1;
	if (is_nan(c->dout, got))
		return -1;
	return rbln_ulp16((__u16)got, (__u16)want.bits) <= 1 ? 0 : -1;
}

static void run_ew(struct __test_metadata *_metadata, FIXTURE_DATA(kern) * self,
		   const struct ew *c, __u64 seed)
{
	bool two = c->kernel == RBLN_FW_KERNEL_ADD ||
		   c->kernel == RBLN_FW_KERNEL_MUL;
	struct rbln_buf *in = c->out_in_host ? &self->hbm : &self->host;
	struct rbln_buf *out = c->out_in_host ? &self->host : &self->hbm;
	size_t is = dt_size(c->din), os = dt_size(c->dout);
	__u64 na = span_of(c, c->sa), nb = two ? span_of(c, c->sb) : 0;
	__u64 no = span_of(c, c->so), n = count_of(c);
	unsigned char *a = in->map, *b = in->map + ARENA;
	unsigned char *o = out->map + 2 * ARENA;
	unsigned char *written;
	struct rbln_fw_pkt_launch l = { 0 };
	__u64 st = seed, bad = 0;
	char what[128];

	snprintf(what, sizeof(what), "%s %s->%s: %s", k_name[c->kernel],
		 dt_name[c->din], dt_name[c->dout], c->what);
	ASSERT_GE(ARENA, na * is) TH_LOG("%s: a too large", what);
	ASSERT_GE(ARENA, nb * is) TH_LOG("%s: b too large", what);
	ASSERT_GE(ARENA, no * os) TH_LOG("%s: out too large", what);
	for (__u64 i = 0; i < na; i++)
		put_bits(c->din, a, i,
			 i < N_SPECIAL ? special_value(c->din, (unsigned int)i) :
					 rand_value(c->din, &st, 10));
	for (__u64 i = 0; i < nb; i++)
		put_bits(c->din, b, i,
			 i < N_SPECIAL ?
				 special_value(c->din, N_SPECIAL - 1 - (unsigned int)i) :
				 rand_value(c->din, &st, 10));
	memset(o, GUARD, no * os);
	__sync_synchronize();

	l.kernel = c->kernel;
	l.dtype_in = c->din;
	l.dtype_out = c->dout;
	l.ndim = c->ndim;
	l.a = in->va;
	l.b = two ? in->va + ARENA : 0;
	l.out = out->va + 2 * ARENA;
	if (c->kernel == RBLN_FW_KERNEL_SCALE)
		l.scale = rbln_f32_bits(c->scale);
	for (__u32 d = 0; d < c->ndim; d++) {
		l.shape[d] = c->shape[d];
		l.stride_a[d] = c->sa[d];
		l.stride_b[d] = two ? c->sb[d] : 0;
		l.stride_out[d] = c->so[d];
	}
	rbln_cmd_reset(&self->cb);
	rbln_cmd_launch(&self->cb, &l);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, what);

	written = calloc(no, 1);
	ASSERT_NE(NULL, written);
	for (__u64 i = 0; i < n; i++) {
		__u64 oa = offset_of(c, i, c->sa), ob = offset_of(c, i, c->sb);
		__u64 oo = offset_of(c, i, c->so);
		__u32 va = get_bits(c->din, a, oa);
		__u32 vb = two ? get_bits(c->din, b, ob) : 0;
		struct ref ref = ew_ref(c, va, vb);
		__u32 got = get_bits(c->dout, o, oo);

		written[oo] = 1;
		if (ew_check(c, ref, got) == 0)
			continue;
		if (bad++ < 8)
			TH_LOG("%s: element %llu: a 0x%x b 0x%x: got 0x%x, want 0x%x%s",
			       what, (unsigned long long)i, va, vb, got,
			       ref.bits, ref.exact ? " exactly" : " +-1 ulp");
	}
	EXPECT_EQ(0, bad) TH_LOG("%s: %llu of %llu elements wrong", what,
				 (unsigned long long)bad,
				 (unsigned long long)n);
	for (__u64 i = 0, gaps = 0; i < no; i++) {
		if (written[i] || rbln_all_bytes(o + i * os, os, GUARD))
			continue;
		EXPECT_EQ(0, ++gaps)
		TH_LOG("%s: output element %llu is not part of the shape but was written",
		       what, (unsigned long long)i);
		break;
	}
	free(written);
}

static const __u32 all_dt[] = { RBLN_FW_DT_FP32, RBLN_FW_DT_FP16,
				 RBLN_FW_DT_BF16 };

/* The shapes every elementwise kernel runs on. */
static void shapes_for(struct __test_metadata *_metadata,
		       FIXTURE_DATA(kern) * self, __u32 kernel, __u32 din,
		       __u32 dout, float scale, __u64 seed)
{
	struct ew cases[] = {
		{ .ndim = 1, .shape = { 4099 }, .sa = { 1 }, .sb = { 1 },
		  .so = { 1 }, .what = "1-D contiguous" },
		{ .ndim = 2, .shape = { 37, 53 }, .sa = { 53, 1 },
		  .sb = { 0, 1 }, .so = { 60, 1 }, .out_in_host = true,
		  .what = "2-D, b broadcast over rows, padded out rows" },
		{ .ndim = 3, .shape = { 5, 7, 9 }, .sa = { 63, 9, 1 },
		  .sb = { 1, 5, 35 }, .so = { 1, 5, 35 },
		  .what = "3-D, b and out transposed" },
		{ .ndim = 4, .shape = { 3, 4, 5, 6 }, .sa = { 240, 60, 12, 2 },
		  .sb = { 0, 0, 0, 1 }, .so = { 360, 90, 18, 3 },
		  .out_in_host = true,
		  .what = "4-D strided, b broadcast to every row" },
		{ .ndim = 1, .shape = { 1 }, .sa = { 1 }, .sb = { 1 },
		  .so = { 1 }, .what = "one element" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cases[i].kernel = kernel;
		cases[i].din = din;
		cases[i].dout = dout;
		cases[i].scale = scale;
		run_ew(_metadata, self, &cases[i], seed + i);
	}
}

TEST_F_TIMEOUT(kern, add_on_every_type, 300)
{
	if (!self->ready)
		return;
	for (size_t t = 0; t < 3; t++)
		shapes_for(_metadata, self, RBLN_FW_KERNEL_ADD, all_dt[t],
			   all_dt[t], 0, 100 + t);
}

TEST_F_TIMEOUT(kern, mul_on_every_type, 300)
{
	if (!self->ready)
		return;
	for (size_t t = 0; t < 3; t++)
		shapes_for(_metadata, self, RBLN_FW_KERNEL_MUL, all_dt[t],
			   all_dt[t], 0, 200 + t);
}

TEST_F_TIMEOUT(kern, relu_on_every_type, 300)
{
	if (!self->ready)
		return;
	for (size_t t = 0; t < 3; t++)
		shapes_for(_metadata, self, RBLN_FW_KERNEL_RELU, all_dt[t],
			   all_dt[t], 0, 300 + t);
}

TEST_F_TIMEOUT(kern, scale_on_every_type, 300)
{
	static const float scales[] = { 0.5f, -3.0f, 1.1f, 65536.0f };

	if (!self->ready)
		return;
	for (size_t t = 0; t < 3; t++)
		for (size_t s = 0; s < ARRAY_SIZE(scales); s++)
			shapes_for(_metadata, self, RBLN_FW_KERNEL_SCALE,
				   all_dt[t], all_dt[t], scales[s],
				   400 + 10 * t + s);
}

TEST_F_TIMEOUT(kern, cast_between_every_pair_of_types, 300)
{
	if (!self->ready)
		return;
	for (size_t i = 0; i < 3; i++)
		for (size_t o = 0; o < 3; o++) {
			if (i == o)
				continue;
			shapes_for(_metadata, self, RBLN_FW_KERNEL_CAST,
				   all_dt[i], all_dt[o], 0, 500 + 3 * i + o);
		}
}

/* Rounding ties and overflow of fp32 -> fp16/bf16, one element each. */
TEST_F(kern, casts_round_ties_to_even_and_overflow_to_inf)
{
	static const struct {
		__u32 in;	/* fp32 bits */
		__u32 dout;
		__u32 want;
	} cases[] = {
		{ 0x3f801000, RBLN_FW_DT_FP16, 0x3c00 },  /* 1 + 2^-11: tie, even down */
		{ 0x3f803000, RBLN_FW_DT_FP16, 0x3c02 },  /* 1 + 3*2^-11: tie, even up */
		{ 0x3f801001, RBLN_FW_DT_FP16, 0x3c01 },  /* just above the tie */
		{ 0x477ff000, RBLN_FW_DT_FP16, 0x7c00 },  /* 65520: rounds to Inf */
		{ 0x477fefff, RBLN_FW_DT_FP16, 0x7bff },  /* just below: 65504 */
		{ 0x33000000, RBLN_FW_DT_FP16, 0x0000 },  /* 2^-25: tie, to 0 */
		{ 0x33000001, RBLN_FW_DT_FP16, 0x0001 },  /* above it: 2^-24 */
		{ 0x33c00000, RBLN_FW_DT_FP16, 0x0002 },  /* 1.5 * 2^-24: tie, up */
		{ 0x387fc000, RBLN_FW_DT_FP16, 0x03ff },  /* largest subnormal */
		{ 0x387fe000, RBLN_FW_DT_FP16, 0x0400 },  /* tie, up to the smallest normal */
		{ 0xb3800001, RBLN_FW_DT_FP16, 0x8001 },  /* -2^-24 (1 + 2^-23) */
		{ 0x3f808000, RBLN_FW_DT_BF16, 0x3f80 },  /* tie, even down */
		{ 0x3f818000, RBLN_FW_DT_BF16, 0x3f82 },  /* tie, even up */
		{ 0x7f7fffff, RBLN_FW_DT_BF16, 0x7f80 },  /* FLT_MAX: Inf */
		{ 0xff7f7fff, RBLN_FW_DT_BF16, 0xff7f },  /* stays finite */
		{ 0x80000000, RBLN_FW_DT_BF16, 0x8000 },  /* -0 */
		{ 0x80000000, RBLN_FW_DT_FP16, 0x8000 },  /* -0 */
	};
	__u32 *in = (__u32 *)self->host.map;
	unsigned char *out = self->hbm.map;
	struct rbln_fw_pkt_launch l = { 0 };

	if (!self->ready)
		return;
	rbln_cmd_reset(&self->cb);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		in[i] = cases[i].in;
		/* our own conversion agrees with the table */
		EXPECT_EQ(cases[i].want,
			  from_f32(cases[i].dout, rbln_bits_f32(cases[i].in)))
		TH_LOG("reference conversion of case %zu", i);
		memset(l.shape, 0, sizeof(l.shape));
		l.kernel = RBLN_FW_KERNEL_CAST;
		l.dtype_in = RBLN_FW_DT_FP32;
		l.dtype_out = cases[i].dout;
		l.ndim = 1;
		l.a = self->host.va + 4 * i;
		l.out = self->hbm.va + 2 * i;
		l.shape[0] = 1;
		l.stride_a[0] = 1;
		l.stride_out[0] = 1;
		rbln_cmd_launch(&self->cb, &l);
	}
	memset(out, GUARD, 2 * ARRAY_SIZE(cases));
	__sync_synchronize();
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, "cast ties");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		EXPECT_EQ(cases[i].want, get_bits(RBLN_FW_DT_FP16, out, i))
		TH_LOG("fp32 0x%08x -> %s", cases[i].in,
		       dt_name[cases[i].dout]);
	}
}

/* A MATMUL case: M x K times K x N, with strides. */
struct mm {
	__u32 din, dout;
	__u64 m, n, k;
	__s64 sa[2], sb[2], so[2];
	const char *what;
};

static double mm_tol(__u32 dout, __u64 k, double sum, double sumabs)
{
	return (double)(k + 1) * ldexp(1.0, -24) * sumabs + ulp_at(dout, sum);
}

static void run_mm(struct __test_metadata *_metadata, FIXTURE_DATA(kern) * self,
		   const struct mm *c, __u64 seed)
{
	size_t is = dt_size(c->din), os = dt_size(c->dout);
	unsigned char *a = self->host.map, *b = self->host.map + ARENA;
	unsigned char *o = self->hbm.map + 2 * ARENA;
	__u64 na = (c->m - 1) * c->sa[0] + (c->k - 1) * c->sa[1] + 1;
	__u64 nb = (c->k - 1) * c->sb[0] + (c->n - 1) * c->sb[1] + 1;
	__u64 no = (c->m - 1) * c->so[0] + (c->n - 1) * c->so[1] + 1;
	struct rbln_fw_pkt_launch l = { 0 };
	__u64 st = seed, bad = 0;
	double worst = 0;
	char what[128];

	snprintf(what, sizeof(what), "MATMUL %s->%s %llux%llux%llu: %s",
		 dt_name[c->din], dt_name[c->dout], (unsigned long long)c->m,
		 (unsigned long long)c->k, (unsigned long long)c->n, c->what);
	ASSERT_GE(ARENA, na * is);
	ASSERT_GE(ARENA, nb * is);
	ASSERT_GE(ARENA, no * os);
	for (__u64 i = 0; i < na; i++)
		put_bits(c->din, a, i, rand_value(c->din, &st, 2));
	for (__u64 i = 0; i < nb; i++)
		put_bits(c->din, b, i, rand_value(c->din, &st, 2));
	memset(o, GUARD, no * os);
	__sync_synchronize();

	l.kernel = RBLN_FW_KERNEL_MATMUL;
	l.dtype_in = c->din;
	l.dtype_out = c->dout;
	l.ndim = 2;
	l.a = self->host.va;
	l.b = self->host.va + ARENA;
	l.out = self->hbm.va + 2 * ARENA;
	l.shape[0] = c->m;
	l.shape[1] = c->n;
	l.shape[2] = c->k;
	memcpy(l.stride_a, c->sa, sizeof(c->sa));
	memcpy(l.stride_b, c->sb, sizeof(c->sb));
	memcpy(l.stride_out, c->so, sizeof(c->so));
	rbln_cmd_reset(&self->cb);
	rbln_cmd_launch(&self->cb, &l);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, what);

	for (__u64 i = 0; i < c->m; i++)
		for (__u64 j = 0; j < c->n; j++) {
			double sum = 0, sumabs = 0, got, tol;
			__u32 bits;

			for (__u64 k = 0; k < c->k; k++) {
				double p = (double)to_f32(c->din, get_bits(c->din, a,
						i * c->sa[0] + k * c->sa[1])) *
					   (double)to_f32(c->din, get_bits(c->din, b,
						k * c->sb[0] + j * c->sb[1]));
				sum += p;
				sumabs += fabs(p);
			}
			bits = get_bits(c->dout, o, i * c->so[0] + j * c->so[1]);
			got = to_f32(c->dout, bits);
			tol = mm_tol(c->dout, c->k, sum, sumabs);
			if (fabs(got - sum) / tol > worst)
				worst = fabs(got - sum) / tol;
			if (fabs(got - sum) <= tol)
				continue;
			if (bad++ < 8)
				TH_LOG("%s: out[%llu][%llu] = %.9g (0x%x), exact %.9g, bound %.3g",
				       what, (unsigned long long)i,
				       (unsigned long long)j, got, bits, sum,
				       tol);
		}
	EXPECT_EQ(0, bad) TH_LOG("%s: %llu elements beyond the bound", what,
				 (unsigned long long)bad);
	/* the gaps of a padded output keep their bytes */
	for (__u64 i = 0; i < c->m && c->so[1] == 1; i++)
		for (__u64 g = c->n; g < (__u64)c->so[0] && i + 1 < c->m; g++)
			if (!rbln_all_bytes(o + (i * c->so[0] + g) * os, os,
					    GUARD)) {
				EXPECT_TRUE(0)
				TH_LOG("%s: padding of row %llu written", what,
				       (unsigned long long)i);
				return;
			}
	if (worst > 0.5)
		TH_LOG("%s: worst error %.2f of the bound", what, worst);
}

TEST_F_TIMEOUT(kern, matmul_on_every_type_within_the_documented_bound, 300)
{
	static const __u32 types[][2] = {
		{ RBLN_FW_DT_FP32, RBLN_FW_DT_FP32 },
		{ RBLN_FW_DT_FP16, RBLN_FW_DT_FP16 },
		{ RBLN_FW_DT_BF16, RBLN_FW_DT_BF16 },
		{ RBLN_FW_DT_FP16, RBLN_FW_DT_FP32 },
		{ RBLN_FW_DT_BF16, RBLN_FW_DT_FP32 },
	};

	if (!self->ready)
		return;
	for (size_t t = 0; t < ARRAY_SIZE(types); t++) {
		struct mm cases[] = {
			{ .m = 1, .n = 1, .k = 1, .sa = { 1, 1 },
			  .sb = { 1, 1 }, .so = { 1, 1 }, .what = "1x1x1" },
			{ .m = 7, .n = 5, .k = 13, .sa = { 13, 1 },
			  .sb = { 5, 1 }, .so = { 5, 1 },
			  .what = "row-major" },
			{ .m = 33, .n = 17, .k = 65, .sa = { 70, 1 },
			  .sb = { 1, 65 }, .so = { 20, 1 },
			  .what = "padded a rows, b transposed, padded out" },
			{ .m = 64, .n = 64, .k = 256, .sa = { 256, 1 },
			  .sb = { 64, 1 }, .so = { 64, 1 },
			  .what = "64x256x64" },
		};

		for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
			cases[i].din = types[t][0];
			cases[i].dout = types[t][1];
			run_mm(_metadata, self, &cases[i], 900 + 10 * t + i);
		}
	}
}

/*
 * y = relu(x @ w) * scale: x and w uploaded from host memory into HBM,
 * the three kernels and the download in one job.  The card's matmul
 * result (read back from HBM) is within the MATMUL bound of the exact
 * product, and relu + scale of it is exactly what the CPU computes from
 * it; y agrees with the CPU's relu(x @ w) * scale within the bound scaled.
 */
static void relu_matmul_scale(struct __test_metadata *_metadata,
			      FIXTURE_DATA(kern) * self, __u32 dt)
{
	const __u64 m = 48, k = 96, n = 40;
	const float scale = 0.375f;
	size_t es = dt_size(dt);
	unsigned char *x = self->host.map, *w = self->host.map + ARENA;
	unsigned char *y = self->host.map + 2 * ARENA;
	__u64 hx = self->hbm.va, hw = self->hbm.va + ARENA;
	__u64 hmm = self->hbm.va + 2 * ARENA;
	__u64 hr = hmm + m * n * es, hy = hr + m * n * es;
	unsigned char *mm = self->hbm.map + 2 * ARENA;
	struct rbln_fw_pkt_launch l = { 0 };
	__u64 st = 4242 + dt, bad = 0;
	char what[64];

	snprintf(what, sizeof(what), "y = relu(x @ w) * scale, %s",
		 dt_name[dt]);
	for (__u64 i = 0; i < m * k; i++)
		put_bits(dt, x, i, rand_value(dt, &st, 2));
	for (__u64 i = 0; i < k * n; i++)
		put_bits(dt, w, i, rand_value(dt, &st, 2));
	memset(y, GUARD, m * n * es);
	memset(self->hbm.map, 0, 3 * ARENA);
	__sync_synchronize();

	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy(&self->cb, self->host.va, hx, m * k * es);
	rbln_cmd_copy(&self->cb, self->host.va + ARENA, hw, k * n * es);
	l.dtype_in = dt;
	l.dtype_out = dt;
	l.kernel = RBLN_FW_KERNEL_MATMUL;
	l.ndim = 2;
	l.a = hx;
	l.b = hw;
	l.out = hmm;
	l.shape[0] = m;
	l.shape[1] = n;
	l.shape[2] = k;
	l.stride_a[0] = (__s64)k;
	l.stride_a[1] = 1;
	l.stride_b[0] = (__s64)n;
	l.stride_b[1] = 1;
	l.stride_out[0] = (__s64)n;
	l.stride_out[1] = 1;
	rbln_cmd_launch(&self->cb, &l);
	memset(&l, 0, sizeof(l));
	l.dtype_in = dt;
	l.dtype_out = dt;
	l.kernel = RBLN_FW_KERNEL_RELU;
	l.ndim = 1;
	l.a = hmm;
	l.out = hr;
	l.shape[0] = m * n;
	l.stride_a[0] = 1;
	l.stride_out[0] = 1;
	rbln_cmd_launch(&self->cb, &l);
	l.kernel = RBLN_FW_KERNEL_SCALE;
	l.scale = rbln_f32_bits(scale);
	l.a = hr;
	l.out = hy;
	rbln_cmd_launch(&self->cb, &l);
	rbln_cmd_copy(&self->cb, hy, self->host.va + 2 * ARENA, m * n * es);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, what);

	for (__u64 i = 0; i < m; i++)
		for (__u64 j = 0; j < n; j++) {
			double sum = 0, sumabs = 0, tol;
			__u32 mbits = get_bits(dt, mm, i * n + j);
			__u32 ybits = get_bits(dt, y, i * n + j);
			float dm = to_f32(dt, mbits);
			__u32 want = from_f32(dt, (dm > 0 ? dm : 0.0f) * scale);

			for (__u64 q = 0; q < k; q++) {
				double p = (double)to_f32(dt, get_bits(dt, x, i * k + q)) *
					   (double)to_f32(dt, get_bits(dt, w, q * n + j));
				sum += p;
				sumabs += fabs(p);
			}
			tol = mm_tol(dt, k, sum, sumabs);
			if (fabs(dm - sum) > tol) {
				if (bad++ < 8)
					TH_LOG("%s: (x @ w)[%llu][%llu] = %.9g, exact %.9g",
					       what, (unsigned long long)i,
					       (unsigned long long)j, dm, sum);
				continue;
			}
			/*
			 * relu is exact and x * 0.375 is exact in fp32, so y
			 * is one rounding: bit exact (either zero for -0)
			 */
			if (ybits != want &&
			    !(to_f32(dt, want) == 0.0f &&
			      to_f32(dt, ybits) == 0.0f)) {
				if (bad++ < 8)
					TH_LOG("%s: y[%llu][%llu] = 0x%x, want 0x%x (card's x @ w)",
					       what, (unsigned long long)i,
					       (unsigned long long)j, ybits,
					       want);
				continue;
			}
			/* and against the CPU's own product, end to end */
			if (fabs(to_f32(dt, ybits) -
				 (sum > 0 ? sum : 0) * scale) >
			    scale * tol + ulp_at(dt, sum * scale)) {
				if (bad++ < 8)
					TH_LOG("%s: y[%llu][%llu] = %.9g, CPU %.9g",
					       what, (unsigned long long)i,
					       (unsigned long long)j,
					       to_f32(dt, ybits),
					       (sum > 0 ? sum : 0) * scale);
			}
		}
	EXPECT_EQ(0, bad) TH_LOG("%s: %llu wrong elements", what,
				 (unsigned long long)bad);
}

TEST_F(kern, relu_matmul_scale_end_to_end)
{
	if (!self->ready)
		return;
	relu_matmul_scale(_metadata, self, RBLN_FW_DT_FP32);
	relu_matmul_scale(_metadata, self, RBLN_FW_DT_BF16);
	relu_matmul_scale(_metadata, self, RBLN_FW_DT_FP16);
}

TEST_F(kern, bad_launch_packets_fail_the_job_and_stop_it)
{
	struct rbln_fw_pkt_launch good = {
		.kernel = RBLN_FW_KERNEL_ADD,
		.dtype_in = RBLN_FW_DT_FP32,
		.dtype_out = RBLN_FW_DT_FP32,
		.ndim = 1,
		.shape = { 16 },
		.stride_a = { 1 },
		.stride_b = { 1 },
		.stride_out = { 1 },
	};
	static const char *const what[] = {
		"kernel 0",	       "kernel 7",
		"dtype 0",	       "dtype 4",
		"ndim 0",	       "ndim 5",
		"ADD fp32 -> fp16",    "MATMUL with ndim 1",
		"RELU with b set",     "ADD with scale set",
		"shape past ndim set", "stride past ndim set",
		"MATMUL 2^20 x 1 x 2^20 broadcast (beyond its working set)",
	};

	if (!self->ready)
		return;
	good.a = self->host.va;
	good.b = self->host.va + 64;
	good.out = self->hbm.va;
	for (size_t i = 0; i < ARRAY_SIZE(what); i++) {
		struct rbln_fw_pkt_launch l = good;

		switch (i) {
		case 0:
			l.kernel = 0;
			break;
		case 1:
			l.kernel = 7;
			break;
		case 2:
			l.dtype_in = 0;
			l.dtype_out = 0;
			break;
		case 3:
			l.dtype_in = 4;
			l.dtype_out = 4;
			break;
		case 4:
			l.ndim = 0;
			break;
		case 5:
			l.ndim = 5;
			break;
		case 6:
			l.dtype_out = RBLN_FW_DT_FP16;
			break;
		case 7:
			l.kernel = RBLN_FW_KERNEL_MATMUL;
			break;
		case 8:
			l.kernel = RBLN_FW_KERNEL_RELU;
			break;
		case 9:
			l.scale = rbln_f32_bits(2.0f);
			break;
		case 10:
			l.shape[1] = 2;
			break;
		case 11:
			l.stride_a[2] = 1;
			break;
		default:
			/* Used to take the card down (4 TiB of dense fp32 A). */
			l.kernel = RBLN_FW_KERNEL_MATMUL;
			l.ndim = 2;
			l.shape[0] = 1ULL << 20;
			l.shape[1] = 1;
			l.shape[2] = 1ULL << 20;
			memset(l.stride_a, 0, sizeof(l.stride_a));
			memset(l.stride_b, 0, sizeof(l.stride_b));
			memset(l.stride_out, 0, sizeof(l.stride_out));
			break;
		}
		memset(self->host.map, 0, 128);
		memset(self->hbm.map, GUARD, 256);
		__sync_synchronize();
		rbln_cmd_reset(&self->cb);
		rbln_cmd_launch(&self->cb, &l);
		/* must not run: the job ends at the bad packet */
		rbln_cmd_fill(&self->cb, self->hbm.va + 128, 8, 0, 1);
		rbln_expect_job(_metadata, self->fd, self->queue, &self->cb,
				self->bos, 2, -EINVAL, what[i]);
		EXPECT_TRUE(rbln_all_bytes(self->hbm.map, 256, GUARD))
		TH_LOG("%s: the job wrote its output", what[i]);
	}
	/* the good packet itself runs: the cases differ in one field only */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_launch(&self->cb, &good);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, "the good ADD");
	EXPECT_TRUE(rbln_all_bytes(self->hbm.map, 64, 0));
}

TEST_HARNESS_MAIN
