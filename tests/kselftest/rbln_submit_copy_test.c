// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_submit_copy_test - the data-moving packets of a job, checked byte
 * for byte by the CPU.
 *
 * COPY in every direction (host, userptr, HBM of the first and the last
 * chiplet, each to each), 1 byte to 64 MiB at odd offsets, the bytes
 * around the destination untouched; size 0; overlapping ranges as
 * memmove; COPY_STRIDED in 2-D and 3-D with different pitches on each side
 * (the gaps untouched); FILL with 1-, 2-, 4- and 8-byte patterns (little
 * endian, at any offset); SIGNAL stores its 64-bit value; TIMESTAMP stores
 * card time that runs forward within and across jobs and agrees with the
 * card time of RBLN_INFO_TELEMETRY; packets of one job see each other's
 * stores; a command buffer in HBM runs like one in host memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_sub_ksft.h"

#define GUARD 0xa5
#define CMD_BYTES (64 * 1024)

enum kind { HOST, USERPTR, HBM_FIRST, HBM_LAST };

static const char *const kind_name[] = { "host", "userptr", "HBM first",
					 "HBM last" };

/* @len pseudo-random bytes at @p (never GUARD, so a stray byte shows). */
static void fill_random(unsigned char *p, size_t len, __u64 seed)
{
	__u64 st = seed | 1;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		__u64 w = rbln_rand(&st);

		memcpy(p + i, &w, 8);
	}
	for (; i < len; i++)
		p[i] = (unsigned char)rbln_rand(&st);
	for (i = 0; i < len; i++)
		if (p[i] == GUARD)
			p[i] = GUARD ^ 0xff;
}

/* Offset of the first byte of @p[0..len) that is not @c, or -1. */
static long first_not(const unsigned char *p, size_t len, unsigned char c)
{
	__u64 w = 0x0101010101010101ull * c;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		__u64 v;

		memcpy(&v, p + i, 8);
		if (v != w)
			break;
	}
	for (; i < len; i++)
		if (p[i] != c)
			return (long)i;
	return -1;
}

/* Offset of the first byte where @a and @b differ, or -1. */
static long first_diff(const unsigned char *a, const unsigned char *b,
		       size_t len)
{
	if (!memcmp(a, b, len))
		return -1;
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

FIXTURE(copy)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 queue;
	struct rbln_cmdbuf cb;
	bool ready;
};

FIXTURE_VARIANT(copy)
{
	enum kind src;
	enum kind dst;
};

FIXTURE_VARIANT_ADD(copy, host_to_hbm) { .src = HOST, .dst = HBM_FIRST };

FIXTURE_VARIANT_ADD(copy, hbm_to_host) { .src = HBM_FIRST, .dst = HOST };

FIXTURE_VARIANT_ADD(copy, hbm_to_hbm_same_chiplet)
{
	.src = HBM_FIRST, .dst = HBM_FIRST
};

FIXTURE_VARIANT_ADD(copy, hbm_to_hbm_across_chiplets)
{
	.src = HBM_FIRST, .dst = HBM_LAST
};

FIXTURE_VARIANT_ADD(copy, hbm_last_to_hbm_first)
{
	.src = HBM_LAST, .dst = HBM_FIRST
};

FIXTURE_VARIANT_ADD(copy, host_to_host) { .src = HOST, .dst = HOST };

FIXTURE_VARIANT_ADD(copy, userptr_to_hbm) { .src = USERPTR, .dst = HBM_LAST };

FIXTURE_VARIANT_ADD(copy, hbm_to_userptr) { .src = HBM_LAST, .dst = USERPTR };

FIXTURE_VARIANT_ADD(copy, userptr_to_host) { .src = USERPTR, .dst = HOST };

FIXTURE_VARIANT_ADD(copy, host_to_userptr) { .src = HOST, .dst = USERPTR };

FIXTURE_VARIANT_ADD(copy, userptr_to_userptr)
{
	.src = USERPTR, .dst = USERPTR
};

FIXTURE_SETUP(copy)
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
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, CMD_BYTES,
				   RBLN_REGION_HOST, 0));
	self->ready = true;
}

FIXTURE_TEARDOWN(copy)
{
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

static int new_buf(int fd, const struct drm_rbln_info_device *dev,
		   enum kind k, __u64 size, struct rbln_buf *b)
{
	switch (k) {
	case HOST:
		return rbln_buf_new(fd, b, size, RBLN_REGION_HOST, 0);
	case USERPTR:
		return rbln_buf_userptr(fd, b, size);
	case HBM_FIRST:
		return rbln_buf_new(fd, b, size, RBLN_REGION_HBM, 0);
	default:
		return rbln_buf_new(fd, b, size, RBLN_REGION_HBM,
				    dev->chiplet_count - 1);
	}
}

/*
 * One COPY of @size bytes from @src + @soff to @dst + @doff: the
 * destination holds the source's bytes, everything around them is GUARD.
 */
static void copy_once(struct __test_metadata *_metadata,
		      FIXTURE_DATA(copy) * self, struct rbln_buf *src,
		      struct rbln_buf *dst, __u64 size, __u64 soff, __u64 doff,
		      const char *what)
{
	__u32 bos[2] = { src->handle, dst->handle };
	long bad;

	fill_random(src->map + soff, size, size * 31 + soff);
	memset(dst->map, GUARD, dst->size);
	__sync_synchronize();
	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy(&self->cb, src->va + soff, dst->va + doff, size);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb, bos, 2,
			   what);
	bad = first_diff(dst->map + doff, src->map + soff, size);
	EXPECT_EQ(-1, bad)
	TH_LOG("%s: byte %ld of %llu is 0x%02x, the source has 0x%02x", what,
	       bad, (unsigned long long)size,
	       bad >= 0 ? dst->map[doff + bad] : 0,
	       bad >= 0 ? src->map[soff + bad] : 0);
	bad = first_not(dst->map, doff, GUARD);
	EXPECT_EQ(-1, bad)
	TH_LOG("%s: byte %ld before the destination was written", what, bad);
	bad = first_not(dst->map + doff + size, dst->size - doff - size, GUARD);
	EXPECT_EQ(-1, bad)
	TH_LOG("%s: byte %ld after the destination was written", what, bad);
}

TEST_F_TIMEOUT(copy, sizes_1b_to_64m_at_odd_offsets_byte_exact, 600)
{
	static const __u64 sizes[] = {
		1, 3, 8, 255, 4096, 4097, 65535, (1 << 20) + 3,
		(2 << 20) + 5,
	};
	const __u64 big = 64ull << 20;
	struct rbln_buf src, dst;
	char what[96];

	if (!self->ready)
		return;
	if (variant->src >= HBM_FIRST && variant->dst >= HBM_FIRST &&
	    variant->src != variant->dst && self->dev.chiplet_count < 2)
		SKIP(return, "one chiplet: no copy across chiplets");

	ASSERT_EQ(0, new_buf(self->fd, &self->dev, variant->src, 4ull << 20,
			     &src));
	ASSERT_EQ(0, new_buf(self->fd, &self->dev, variant->dst, 4ull << 20,
			     &dst));
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		__u64 soff = 2 * i + 1;
		__u64 doff = 4095 - 2 * i;

		snprintf(what, sizeof(what), "%s -> %s, %llu bytes +%llu -> +%llu",
			 kind_name[variant->src], kind_name[variant->dst],
			 (unsigned long long)sizes[i],
			 (unsigned long long)soff, (unsigned long long)doff);
		copy_once(_metadata, self, &src, &dst, sizes[i], soff, doff,
			  what);
	}
	rbln_buf_free(self->fd, &src);
	rbln_buf_free(self->fd, &dst);

	/* 64 MiB: crosses 2 MiB pages (HBM) and thousands of 4 KiB ones */
	ASSERT_EQ(0, new_buf(self->fd, &self->dev, variant->src, big + 8192,
			     &src));
	ASSERT_EQ(0, new_buf(self->fd, &self->dev, variant->dst, big + 8192,
			     &dst));
	snprintf(what, sizeof(what), "%s -> %s, 64 MiB +4095 -> +1",
		 kind_name[variant->src], kind_name[variant->dst]);
	copy_once(_metadata, self, &src, &dst, big, 4095, 1, what);
	rbln_buf_free(self->fd, &src);
	rbln_buf_free(self->fd, &dst);
}

FIXTURE(pkt)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 queue;
	struct rbln_cmdbuf cb;
	struct rbln_buf host;	/* 4 MiB host buffer */
	struct rbln_buf hbm;	/* 4 MiB HBM of the last chiplet */
	__u32 bos[2];
	bool ready;
};

FIXTURE_SETUP(pkt)
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
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, CMD_BYTES,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->host, 4 << 20,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->hbm, 4 << 20,
				  RBLN_REGION_HBM,
				  self->dev.chiplet_count - 1));
	self->bos[0] = self->host.handle;
	self->bos[1] = self->hbm.handle;
	self->ready = true;
}

FIXTURE_TEARDOWN(pkt)
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

TEST_F(pkt, copy_of_zero_bytes_moves_nothing)
{
	if (!self->ready)
		return;
	memset(self->host.map, 0x11, 4096);
	memset(self->hbm.map, GUARD, 4096);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy(&self->cb, self->host.va, self->hbm.va + 3, 0);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, "COPY of 0 bytes");
	EXPECT_EQ(-1, first_not(self->hbm.map, 4096, GUARD));
}

TEST_F(pkt, overlapping_copies_behave_as_memmove)
{
	static const struct {
		__u64 src, dst, size;
	} cases[] = {
		{ 0, 1, 8191 },		/* forward by one byte */
		{ 1, 0, 8191 },		/* backward by one byte */
		{ 100, 4196, 1 << 20 },	/* forward, large overlap */
		{ 4196, 100, 1 << 20 },	/* backward, large overlap */
	};
	static unsigned char want[(1 << 20) + 8192];

	if (!self->ready)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int h = 0; h < 2; h++) {
			struct rbln_buf *b = h ? &self->hbm : &self->host;
			size_t span = cases[i].size + 8192;
			char what[80];
			long bad;

			fill_random(b->map, span, 77 + i);
			memcpy(want, b->map, span);
			memmove(want + cases[i].dst, want + cases[i].src,
				cases[i].size);
			__sync_synchronize();
			rbln_cmd_reset(&self->cb);
			rbln_cmd_copy(&self->cb, b->va + cases[i].src,
				      b->va + cases[i].dst, cases[i].size);
			snprintf(what, sizeof(what),
				 "%s: overlapping COPY %llu -> %llu, %llu bytes",
				 h ? "HBM" : "host",
				 (unsigned long long)cases[i].src,
				 (unsigned long long)cases[i].dst,
				 (unsigned long long)cases[i].size);
			rbln_expect_job_ok(_metadata, self->fd, self->queue,
					   &self->cb, self->bos, 2, what);
			bad = first_diff(b->map, want, span);
			EXPECT_EQ(-1, bad)
			TH_LOG("%s: byte %ld differs from memmove()", what,
			       bad);
		}
	}
}

/*
 * A strided copy of @depth planes of @height rows of @width bytes from the
 * host buffer into HBM and back into the host buffer's second half with
 * other pitches; every byte of the HBM side and of the final copy checked
 * against a CPU model, the gaps included.
 */
static void strided_round_trip(struct __test_metadata *_metadata,
			       FIXTURE_DATA(pkt) * self, __u64 width,
			       __u32 height, __u32 depth, __u64 spitch,
			       __u64 sslice, __u64 dpitch, __u64 dslice,
			       const char *what)
{
	const size_t half = 2 << 20;
	const __u64 soff = 3, doff = 5;
	static unsigned char want[2 << 20];
	unsigned char *src = self->host.map;
	unsigned char *back = self->host.map + half;
	long bad;

	ASSERT_GT(half, (depth - 1) * sslice + (height - 1) * spitch + width +
				soff);
	ASSERT_GT(half, (depth - 1) * dslice + (height - 1) * dpitch + width +
				doff);
	fill_random(src, half, width * height + depth);
	memset(self->hbm.map, GUARD, half);
	memset(back, GUARD, half);
	memset(want, GUARD, half);
	for (__u32 p = 0; p < depth; p++)
		for (__u32 r = 0; r < height; r++)
			memcpy(want + doff + p * dslice + r * dpitch,
			       src + soff + p * sslice + r * spitch, width);
	__sync_synchronize();

	/* there with the destination's pitches, back with the source's */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy_strided(&self->cb, self->host.va + soff,
			      self->hbm.va + doff, width, height, depth, spitch,
			      sslice, dpitch, dslice);
	rbln_cmd_copy_strided(&self->cb, self->hbm.va + doff,
			      self->host.va + half + soff, width, height,
			      depth, dpitch, dslice, spitch, sslice);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, what);
	bad = first_diff(self->hbm.map, want, half);
	EXPECT_EQ(-1, bad)
	TH_LOG("%s: HBM byte %ld is 0x%02x, want 0x%02x", what, bad,
	       bad >= 0 ? self->hbm.map[bad] : 0, bad >= 0 ? want[bad] : 0);
	for (__u32 p = 0; p < depth; p++)
		for (__u32 r = 0; r < height; r++) {
			size_t o = soff + p * sslice + r * spitch;

			bad = first_diff(back + o, src + o, width);
			EXPECT_EQ(-1, bad)
			TH_LOG("%s: back copy, plane %u row %u byte %ld", what,
			       p, r, bad);
			memset(back + o, GUARD, width);
		}
	bad = first_not(back, half, GUARD);
	EXPECT_EQ(-1, bad)
	TH_LOG("%s: back copy wrote byte %ld outside the rows", what, bad);
}

TEST_F(pkt, strided_2d_copies_rows_and_keeps_the_gaps)
{
	if (!self->ready)
		return;
	strided_round_trip(_metadata, self, 1, 1, 1, 1, 1, 1, 1,
			   "2-D 1x1");
	strided_round_trip(_metadata, self, 13, 7, 1, 64, 0, 29, 0,
			   "2-D 13x7, pitches 64/29");
	strided_round_trip(_metadata, self, 4097, 33, 1, 8192, 0, 4101, 0,
			   "2-D 4097x33 across pages");
	/* pitch equal to width: rows back to back */
	strided_round_trip(_metadata, self, 100, 50, 1, 100, 0, 100, 0,
			   "2-D dense");
}

TEST_F(pkt, strided_3d_copies_planes_and_keeps_the_gaps)
{
	if (!self->ready)
		return;
	strided_round_trip(_metadata, self, 7, 5, 3, 16, 100, 9, 61,
			   "3-D 7x5x3");
	strided_round_trip(_metadata, self, 333, 17, 9, 512, 9000, 401, 7001,
			   "3-D 333x17x9");
	strided_round_trip(_metadata, self, 64, 64, 64, 64, 4096, 64, 4096,
			   "3-D dense 64^3");
}

TEST_F(pkt, strided_copy_with_zero_height_or_depth_fails_the_job)
{
	if (!self->ready)
		return;
	for (int z = 0; z < 2; z++) {
		memset(self->host.map, 0x33, 64);
		memset(self->hbm.map, GUARD, 4096);
		rbln_cmd_reset(&self->cb);
		rbln_cmd_copy_strided(&self->cb, self->host.va, self->hbm.va,
				      8, z ? 1 : 0, z ? 0 : 1, 8, 64, 8, 64);
		rbln_cmd_copy(&self->cb, self->host.va, self->hbm.va + 512, 8);
		rbln_expect_job(_metadata, self->fd, self->queue, &self->cb,
				self->bos, 2, -EINVAL,
				z ? "COPY_STRIDED depth 0" : "COPY_STRIDED height 0");
		/* the job stopped at the bad packet */
		EXPECT_EQ(-1, first_not(self->hbm.map, 4096, GUARD));
	}
}

TEST_F(pkt, fills_repeat_1_2_4_8_byte_patterns_little_endian)
{
	static const __u32 widths[] = { 1, 2, 4, 8 };
	const __u64 pattern = 0x8877665544332211ull;

	if (!self->ready)
		return;
	for (int h = 0; h < 2; h++) {
		struct rbln_buf *b = h ? &self->hbm : &self->host;

		for (size_t w = 0; w < 4; w++) {
			__u32 pb = widths[w];
			/* odd start offsets, lengths from 1 pattern to > 2 MiB */
			const __u64 offs[] = { 0, 1, 3, 4093 };
			const __u64 lens[] = { pb, pb * 3, pb * 1001,
					       (__u64)pb << 18 };

			for (size_t i = 0; i < 4; i++) {
				__u64 off = offs[i], len = lens[i];
				char what[80];
				long bad = -1;

				memset(b->map, GUARD, off + len + 64);
				__sync_synchronize();
				rbln_cmd_reset(&self->cb);
				rbln_cmd_fill(&self->cb, b->va + off, len,
					      pattern, pb);
				snprintf(what, sizeof(what),
					 "%s FILL %u-byte pattern, %llu bytes at +%llu",
					 h ? "HBM" : "host", pb,
					 (unsigned long long)len,
					 (unsigned long long)off);
				rbln_expect_job_ok(_metadata, self->fd,
						   self->queue, &self->cb,
						   self->bos, 2, what);
				for (__u64 k = 0; k < len && bad < 0; k++)
					if (b->map[off + k] !=
					    (unsigned char)(pattern >>
							    (8 * (k % pb))))
						bad = (long)k;
				EXPECT_EQ(-1, bad)
				TH_LOG("%s: byte %ld is 0x%02x", what, bad,
				       bad >= 0 ? b->map[off + bad] : 0);
				EXPECT_EQ(-1, first_not(b->map, off, GUARD))
				TH_LOG("%s: wrote before dst", what);
				EXPECT_EQ(-1, first_not(b->map + off + len, 64,
							GUARD))
				TH_LOG("%s: wrote past the end", what);
			}
		}
	}
}

TEST_F(pkt, bad_fills_fail_the_job_at_the_packet)
{
	static const struct {
		__u32 pattern_bytes;
		__u64 size;
		const char *what;
	} bad[] = {
		{ 0, 8, "pattern_bytes 0" },
		{ 3, 9, "pattern_bytes 3" },
		{ 16, 16, "pattern_bytes 16" },
		{ 4, 6, "size not a multiple of 4" },
		{ 8, 12, "size not a multiple of 8" },
	};

	if (!self->ready)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(self->host.map, GUARD, 4096);
		__sync_synchronize();
		rbln_cmd_reset(&self->cb);
		/* this one runs, the bad one fails, the last one does not run */
		rbln_cmd_fill(&self->cb, self->host.va, 8, 0x77, 1);
		rbln_cmd_fill(&self->cb, self->host.va + 64, bad[i].size, 0x99,
			      bad[i].pattern_bytes);
		rbln_cmd_fill(&self->cb, self->host.va + 128, 8, 0x55, 1);
		rbln_expect_job(_metadata, self->fd, self->queue, &self->cb,
				self->bos, 2, -EINVAL, bad[i].what);
		EXPECT_EQ(-1, first_not(self->host.map, 8, 0x77))
		TH_LOG("%s: the packet before did not run", bad[i].what);
		EXPECT_EQ(-1, first_not(self->host.map + 8, 4096 - 8, GUARD))
		TH_LOG("%s: a packet at or after the bad one ran", bad[i].what);
	}
}

TEST_F(pkt, signal_stores_64_bit_values_and_packets_see_earlier_stores)
{
	static const __u64 values[] = { 0, 1, 0xffffffffull, 1ull << 32,
					0xfedcba9876543210ull, ~0ull };
	__u64 *h = (__u64 *)self->host.map;

	if (!self->ready)
		return;
	memset(self->host.map, GUARD, 4096);
	memset(self->hbm.map, GUARD, 4096);
	__sync_synchronize();
	rbln_cmd_reset(&self->cb);
	for (size_t i = 0; i < 6; i++)
		rbln_cmd_signal(&self->cb, self->hbm.va + 8 * i, values[i], 0);
	/* a later packet of the job reads what the SIGNALs stored */
	rbln_cmd_copy(&self->cb, self->hbm.va, self->host.va + 8, 48);
	/* the IRQ flag changes nothing in what is stored */
	rbln_cmd_signal(&self->cb, self->host.va + 64, 42, RBLN_FW_SIGNAL_IRQ);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, "SIGNALs");
	for (size_t i = 0; i < 6; i++) {
		__u64 v;

		memcpy(&v, self->hbm.map + 8 * i, 8);
		EXPECT_EQ(values[i], v) TH_LOG("SIGNAL %zu in HBM", i);
		EXPECT_EQ(values[i], h[1 + i]) TH_LOG("copied SIGNAL %zu", i);
	}
	EXPECT_EQ(42, h[8]);
	EXPECT_EQ(-1, first_not(self->host.map, 8, GUARD));
	EXPECT_EQ(-1, first_not(self->host.map + 72, 4096 - 72, GUARD));
	EXPECT_EQ(-1, first_not(self->hbm.map + 48, 4096 - 48, GUARD));
}

TEST_F(pkt, misaligned_signal_fails_the_job)
{
	if (!self->ready)
		return;
	memset(self->host.map, GUARD, 64);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->host.va + 4, 1, 0);
	rbln_expect_job(_metadata, self->fd, self->queue, &self->cb, self->bos,
			2, -EINVAL, "SIGNAL at VA % 8 == 4");
	EXPECT_EQ(-1, first_not(self->host.map, 64, GUARD));
}

TEST_F(pkt, timestamps_are_card_time_and_run_forward)
{
	struct drm_rbln_info_telemetry t0, t1;
	__u64 *ts = (__u64 *)self->host.map;
	__u64 last = 0;

	if (!self->ready)
		return;
	memset(self->host.map, 0, 4096);
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_TELEMETRY, &t0,
				   sizeof(t0), NULL));
	for (int j = 0; j < 4; j++) {
		rbln_cmd_reset(&self->cb);
		rbln_cmd_timestamp(&self->cb, self->host.va + 16 * j);
		/* some work between the two stamps of a job */
		rbln_cmd_fill(&self->cb, self->hbm.va, 1 << 20, j, 1);
		rbln_cmd_timestamp(&self->cb, self->host.va + 16 * j + 8);
		rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
				   self->bos, 2, "TIMESTAMP");
	}
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_TELEMETRY, &t1,
				   sizeof(t1), NULL));
	for (int i = 0; i < 8; i++) {
		EXPECT_LE(last, ts[i]) TH_LOG("stamp %d went back", i);
		if (i % 2) {
			EXPECT_LT(ts[i - 1], ts[i])
			TH_LOG("job %d: the fill took no time", i / 2);
		}
		last = ts[i];
	}
	EXPECT_LE(t0.timestamp_ns, ts[0])
	TH_LOG("first stamp %llu before the telemetry sample %llu",
	       (unsigned long long)ts[0], (unsigned long long)t0.timestamp_ns);
	EXPECT_GE(t1.timestamp_ns, ts[7])
	TH_LOG("last stamp %llu after the telemetry sample %llu",
	       (unsigned long long)ts[7], (unsigned long long)t1.timestamp_ns);
}

TEST_F(pkt, command_buffer_in_hbm_runs_like_one_in_host_memory)
{
	struct rbln_cmdbuf hcb;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &hcb, CMD_BYTES, RBLN_REGION_HBM,
				   0));
	memset(self->host.map, GUARD, 8192);
	rbln_cmd_fill(&hcb, self->host.va, 4096, 0x3c, 1);
	rbln_cmd_copy(&hcb, self->host.va, self->host.va + 4096 + 1, 100);
	/* the command buffer is not listed: the kernel adds it */
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &hcb, self->bos,
			   2, "command buffer in HBM chiplet 0");
	EXPECT_EQ(-1, first_not(self->host.map, 4096, 0x3c));
	EXPECT_EQ(GUARD, self->host.map[4096]);
	EXPECT_EQ(-1, first_not(self->host.map + 4097, 100, 0x3c));
	EXPECT_EQ(-1, first_not(self->host.map + 4197, 8192 - 4197, GUARD));
	rbln_cmd_fini(self->fd, &hcb);
}

TEST_F(pkt, job_at_an_offset_of_the_command_buffer_runs_only_its_packets)
{
	if (!self->ready)
		return;
	memset(self->host.map, GUARD, 64);
	rbln_cmd_reset(&self->cb);
	/* a first "job" that is never submitted */
	rbln_cmd_fill(&self->cb, self->host.va, 8, 0x01, 1);
	rbln_cmd_begin(&self->cb);
	rbln_cmd_fill(&self->cb, self->host.va + 8, 8, 0x02, 1);
	rbln_expect_job_ok(_metadata, self->fd, self->queue, &self->cb,
			   self->bos, 2, "job at cmd_offset 32");
	EXPECT_EQ(-1, first_not(self->host.map, 8, GUARD));
	EXPECT_EQ(-1, first_not(self->host.map + 8, 8, 0x02));
	EXPECT_EQ(-1, first_not(self->host.map + 16, 48, GUARD));
}

TEST_HARNESS_MAIN
