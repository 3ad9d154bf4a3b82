// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_hbm_full_test - a full chiplet is told from a full card, and from a
 * request that can never fit.
 *
 * Pins: HBM allocated on chiplet 0 until -ENOSPC leaves RBLN_INFO_MEM with
 * chiplet 0 used == total, free and largest free block 0, and the other
 * chiplets exactly as they were; a 4 KiB buffer there is -ENOSPC, one
 * larger than the chiplet -E2BIG; AUTO still places a buffer on another
 * chiplet (Rebel100) and is -ENOSPC only when every chiplet is full;
 * memory free only in 2 MiB holes still serves one buffer of all of it
 * (buffers are made of several blocks); freeing everything brings used
 * bytes and the largest free block back, and sysfs says the same as
 * RBLN_INFO_MEM all along.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"

#define MAX_BUFS 8192

FIXTURE(full)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
	__u32 *h;
	int n;
};

FIXTURE_SETUP(full)
{
	self->h = calloc(MAX_BUFS, sizeof(*self->h));
	ASSERT_NE(NULL, self->h);
	self->n = 0;
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->fd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	for (int i = 0; i < self->count; i++) {
		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i]);
		ASSERT_EQ(0, rbln_info_device(self->fd[i], &self->dev[i]));
	}
}

FIXTURE_TEARDOWN(full)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	free(self->h);
}

/*
 * Allocates pieces of @chunk (then smaller ones, down to 4 KiB) on @ch
 * until -ENOSPC; handles appended to @h at *@n.
 */
static void fill(struct __test_metadata *_metadata, int fd, __u32 ch,
		 __u64 chunk, __u32 *h, int *n)
{
	for (__u64 size = chunk; size >= RBLN_SZ_4K; size /= 2) {
		for (;;) {
			struct drm_rbln_bo_create c;
			int err = rbln_bo_create(fd, size, RBLN_REGION_HBM, ch,
						 0, &c);

			if (err == -ENOSPC)
				break;
			ASSERT_EQ(0, err)
			TH_LOG("chiplet %u, %llu bytes: %s", ch,
			       (unsigned long long)size, strerror(-err));
			ASSERT_GT(MAX_BUFS, *n);
			h[(*n)++] = c.handle;
		}
	}
}

static void free_all(struct __test_metadata *_metadata, int fd, __u32 *h,
		     int *n)
{
	for (int k = 0; k < *n; k++) {
		if (!h[k])
			continue;
		ASSERT_EQ(0, rbln_gem_close(fd, h[k]));
		h[k] = 0;
	}
	*n = 0;
}

/* sysfs chiplet figures equal @m. */
static void expect_sysfs(struct __test_metadata *_metadata, const char *bdf,
			 const struct drm_rbln_info_mem *m, const char *what)
{
	for (__u32 c = 0; c < m->chiplet_count; c++) {
		__u64 used, total, largest;

		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c, "hbm_used_bytes",
						    &used));
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c, "hbm_total_bytes",
						    &total));
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c,
						    "hbm_largest_free_bytes",
						    &largest));
		EXPECT_EQ(m->chiplet[c].used_bytes, used)
		TH_LOG("%s: chiplet %u", what, c);
		EXPECT_EQ(m->chiplet[c].total_bytes, total)
		TH_LOG("%s: chiplet %u", what, c);
		EXPECT_EQ(m->chiplet[c].largest_free_bytes, largest)
		TH_LOG("%s: chiplet %u", what, c);
	}
}

/* Used bytes and largest free blocks of every chiplet equal @m0. */
static void expect_back(struct __test_metadata *_metadata, int fd,
			const char *bdf, const struct drm_rbln_info_mem *m0)
{
	struct drm_rbln_info_mem m;

	ASSERT_EQ(0, rbln_info_mem(fd, &m));
	for (__u32 c = 0; c < m.chiplet_count; c++) {
		EXPECT_EQ(m0->chiplet[c].used_bytes, m.chiplet[c].used_bytes)
		TH_LOG("chiplet %u after freeing everything", c);
		EXPECT_EQ(m0->chiplet[c].largest_free_bytes,
			  m.chiplet[c].largest_free_bytes)
		TH_LOG("chiplet %u after freeing everything", c);
	}
	expect_sysfs(_metadata, bdf, &m, "after freeing everything");
}

TEST_F_TIMEOUT(full, full_chiplet_is_enospc_and_the_others_are_untouched, 300)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m0, m1, m2;
		struct drm_rbln_bo_create c;
		__u64 total = self->dev[i].hbm_size[0];
		int err;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		fill(_metadata, self->fd[i], 0, 16 * RBLN_SZ_1M, self->h,
		     &self->n);
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m1));
		TH_LOG("card %d: chiplet 0 full with %d buffers", i, self->n);
		EXPECT_EQ(m1.chiplet[0].total_bytes, m1.chiplet[0].used_bytes);
		EXPECT_EQ(0, m1.chiplet[0].free_bytes);
		EXPECT_EQ(0, m1.chiplet[0].largest_free_bytes);
		for (__u32 ch = 1; ch < m1.chiplet_count; ch++) {
			EXPECT_EQ(m0.chiplet[ch].used_bytes,
				  m1.chiplet[ch].used_bytes)
			TH_LOG("chiplet %u", ch);
			EXPECT_EQ(m0.chiplet[ch].largest_free_bytes,
				  m1.chiplet[ch].largest_free_bytes)
			TH_LOG("chiplet %u", ch);
		}
		expect_sysfs(_metadata, self->nodes[i].bdf, &m1,
			     "chiplet 0 full");

		EXPECT_EQ(-ENOSPC, rbln_bo_create(self->fd[i], 4096,
						  RBLN_REGION_HBM, 0, 0, NULL));
		/* never fits, full or not */
		EXPECT_EQ(-E2BIG, rbln_bo_create(self->fd[i], total + 4096,
						 RBLN_REGION_HBM, 0, 0, NULL));
		err = rbln_bo_create(self->fd[i], RBLN_SZ_2M, RBLN_REGION_AUTO,
				     0, 0, &c);
		if (self->dev[i].chiplet_count > 1) {
			ASSERT_EQ(0, err)
			TH_LOG("AUTO with chiplet 0 full: %s", strerror(-err));
			EXPECT_NE(0, c.chiplet);
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		} else {
			EXPECT_EQ(-ENOSPC, err)
			TH_LOG("AUTO with the only chiplet full");
		}
		/* nothing leaked by the refused requests */
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m2));
		for (__u32 ch = 0; ch < m2.chiplet_count; ch++) {
			EXPECT_EQ(m1.chiplet[ch].used_bytes,
				  m2.chiplet[ch].used_bytes)
			TH_LOG("chiplet %u", ch);
		}
		free_all(_metadata, self->fd[i], self->h, &self->n);
		expect_back(_metadata, self->fd[i], self->nodes[i].bdf, &m0);
	}
}

TEST_F_TIMEOUT(full, auto_is_enospc_only_when_every_chiplet_is_full, 600)
{
	for (int i = 0; i < self->count; i++) {
		__u32 n = self->dev[i].chiplet_count;
		struct drm_rbln_info_mem m0, m1;
		__u64 largest = 0;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		for (__u32 ch = 0; ch < n; ch++) {
			struct drm_rbln_bo_create c;
			int err;

			if (self->dev[i].hbm_size[ch] > largest)
				largest = self->dev[i].hbm_size[ch];
			err = rbln_bo_create(self->fd[i], 4096,
					     RBLN_REGION_AUTO, 0, 0, &c);
			ASSERT_EQ(0, err)
			TH_LOG("AUTO with %u of %u chiplets full: %s", ch, n,
			       strerror(-err));
			/* not one of the full chiplets */
			EXPECT_LE(ch, c.chiplet);
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
			fill(_metadata, self->fd[i], ch, 16 * RBLN_SZ_1M,
			     self->h, &self->n);
		}
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m1));
		for (__u32 ch = 0; ch < n; ch++) {
			EXPECT_EQ(0, m1.chiplet[ch].free_bytes)
			TH_LOG("chiplet %u", ch);
		}
		EXPECT_EQ(-ENOSPC, rbln_bo_create(self->fd[i], 4096,
						  RBLN_REGION_AUTO, 0, 0, NULL));
		EXPECT_EQ(-E2BIG, rbln_bo_create(self->fd[i], largest + 4096,
						 RBLN_REGION_AUTO, 0, 0, NULL));
		free_all(_metadata, self->fd[i], self->h, &self->n);
		expect_back(_metadata, self->fd[i], self->nodes[i].bdf, &m0);
	}
}

TEST_F_TIMEOUT(full, memory_free_in_2m_holes_still_serves_one_large_buffer, 300)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m0, m1, m2;
		struct drm_rbln_bo_create c;
		__u64 freed = 0;
		int err;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		fill(_metadata, self->fd[i], 0, RBLN_SZ_2M, self->h, &self->n);
		/* every other 2 MiB piece back: no two free pieces are buddies */
		for (int k = 1; k < self->n; k += 2) {
			ASSERT_EQ(0, rbln_gem_close(self->fd[i], self->h[k]));
			self->h[k] = 0;
			freed += RBLN_SZ_2M;
		}
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m1));
		EXPECT_EQ(freed, m1.chiplet[0].free_bytes);
		EXPECT_EQ(RBLN_SZ_2M, m1.chiplet[0].largest_free_bytes)
		TH_LOG("largest free block with 2 MiB holes: %llu",
		       (unsigned long long)m1.chiplet[0].largest_free_bytes);
		expect_sysfs(_metadata, self->nodes[i].bdf, &m1, "2 MiB holes");

		/* all of the free memory in one buffer of 2 MiB pieces */
		err = rbln_bo_create(self->fd[i], freed, RBLN_REGION_HBM, 0, 0,
				     &c);
		ASSERT_EQ(0, err)
		TH_LOG("%llu bytes in 2 MiB holes: %s",
		       (unsigned long long)freed, strerror(-err));
		EXPECT_EQ(freed, c.size);
		ASSERT_GT(MAX_BUFS, self->n);
		self->h[self->n++] = c.handle;
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m2));
		EXPECT_EQ(0, m2.chiplet[0].free_bytes);
		EXPECT_EQ(-ENOSPC, rbln_bo_create(self->fd[i], 4096,
						  RBLN_REGION_HBM, 0, 0, NULL));
		free_all(_metadata, self->fd[i], self->h, &self->n);
		expect_back(_metadata, self->fd[i], self->nodes[i].bdf, &m0);
	}
}

TEST_HARNESS_MAIN
