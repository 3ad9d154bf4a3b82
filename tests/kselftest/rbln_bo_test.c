// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_bo_test - the life of a buffer of every kind, on every card.
 *
 * RBLN_BO_CREATE (host, HBM on each chiplet, AUTO) and RBLN_BO_USERPTR
 * return a handle, the rounded size and a device VA inside the VM's range;
 * RBLN_BO_INFO describes the buffer; host buffers are mapped as ordinary
 * cached memory, HBM buffers through the card's BAR; DRM_IOCTL_GEM_CLOSE
 * makes the handle unknown, while a CPU mapping keeps the memory alive;
 * HBM is zero whenever a buffer gets it, also memory another buffer
 * dirtied just before.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"

FIXTURE(bo)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_vm vm[RBLN_MAX_TEST_CARDS];
};

FIXTURE_SETUP(bo)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->fd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	for (int i = 0; i < self->count; i++) {
		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i])
		TH_LOG("open accel%d: %s", self->nodes[i].minor,
		       strerror(-self->fd[i]));
		ASSERT_EQ(0, rbln_info_device(self->fd[i], &self->dev[i]));
		ASSERT_EQ(0, rbln_info_vm(self->fd[i], &self->vm[i]));
		ASSERT_LT(self->vm[i].va_start, self->vm[i].va_end);
		ASSERT_EQ(0, self->vm[i].va_start % RBLN_SZ_4K);
		ASSERT_LE(1, self->dev[i].chiplet_count);
		ASSERT_GE(RBLN_MAX_CHIPLETS, self->dev[i].chiplet_count);
	}
}

FIXTURE_TEARDOWN(bo)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

/* BO_INFO of @handle says what creation said, and the VA is in the VM. */
static void check_bo_info(struct __test_metadata *_metadata, int fd,
			  const struct drm_rbln_info_vm *vm, __u32 handle,
			  __u64 size, __u64 va, __u32 region, __u32 chiplet,
			  __u32 flags)
{
	struct drm_rbln_bo_info info;

	ASSERT_EQ(0, rbln_bo_info(fd, handle, &info)) TH_LOG("handle %u", handle);
	EXPECT_EQ(size, info.size);
	EXPECT_EQ(va, info.device_va);
	EXPECT_EQ(region, info.region);
	EXPECT_EQ(chiplet, info.chiplet);
	EXPECT_EQ(flags, info.flags_out);
	EXPECT_EQ(0, info.pad);
	EXPECT_TRUE(rbln_va_in(va, size, vm->va_start, vm->va_end))
	TH_LOG("VA 0x%llx + 0x%llx outside [0x%llx, 0x%llx)",
	       (unsigned long long)va, (unsigned long long)size,
	       (unsigned long long)vm->va_start,
	       (unsigned long long)vm->va_end);
	EXPECT_EQ(0, va % RBLN_SZ_4K);
	if (region == RBLN_REGION_HBM && size >= RBLN_SZ_2M) {
		/* the card maps it with 2 MiB pages */
		EXPECT_EQ(0, va % RBLN_SZ_2M)
		TH_LOG("%llu-byte HBM buffer at VA 0x%llx",
		       (unsigned long long)size, (unsigned long long)va);
	}
	if (region == RBLN_REGION_USERPTR || region == RBLN_REGION_IMPORT) {
		EXPECT_EQ(0, info.mmap_offset);
	} else {
		EXPECT_NE(0, info.mmap_offset);
		EXPECT_EQ(0, info.mmap_offset % (__u64)getpagesize());
	}
}

static const __u64 odd_sizes[] = {
	1,
	4095,
	4096,
	4097,
	RBLN_SZ_2M - 1,
	RBLN_SZ_2M,
	RBLN_SZ_2M + 1,
	3 * RBLN_SZ_1M + 5,
};

TEST_F(bo, host_size_rounds_to_4k_and_bo_info_describes_it)
{
	for (int i = 0; i < self->count; i++)
		for (size_t s = 0; s < ARRAY_SIZE(odd_sizes); s++) {
			struct drm_rbln_bo_create c;
			__u64 want = rbln_expected_size(odd_sizes[s],
							RBLN_REGION_HOST);

			ASSERT_EQ(0, rbln_bo_create(self->fd[i], odd_sizes[s],
						    RBLN_REGION_HOST, 0, 0, &c))
			TH_LOG("card %d size %llu", i,
			       (unsigned long long)odd_sizes[s]);
			EXPECT_EQ(want, c.size)
			TH_LOG("size %llu", (unsigned long long)odd_sizes[s]);
			EXPECT_EQ(0, c.chiplet);
			EXPECT_NE(0, c.handle);
			check_bo_info(_metadata, self->fd[i], &self->vm[i],
				      c.handle, want, c.device_va,
				      RBLN_REGION_HOST, 0, 0);
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		}
}

TEST_F(bo, hbm_size_rounds_to_4k_or_2m_on_each_chiplet)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++)
			for (size_t s = 0; s < ARRAY_SIZE(odd_sizes); s++) {
				struct drm_rbln_bo_create c;
				__u64 want = rbln_expected_size(odd_sizes[s],
								RBLN_REGION_HBM);

				ASSERT_EQ(0, rbln_bo_create(self->fd[i],
							    odd_sizes[s],
							    RBLN_REGION_HBM, ch,
							    0, &c))
				TH_LOG("card %d chiplet %u size %llu", i, ch,
				       (unsigned long long)odd_sizes[s]);
				EXPECT_EQ(want, c.size)
				TH_LOG("size %llu",
				       (unsigned long long)odd_sizes[s]);
				EXPECT_EQ(ch, c.chiplet);
				check_bo_info(_metadata, self->fd[i],
					      &self->vm[i], c.handle, want,
					      c.device_va, RBLN_REGION_HBM, ch,
					      0);
				EXPECT_EQ(0,
					  rbln_gem_close(self->fd[i], c.handle));
			}
}

/* The chiplet AUTO must pick: the largest free block, lowest index on a tie. */
static __u32 auto_choice(const struct drm_rbln_info_mem *m, __u64 size)
{
	__u32 best = 0;
	__u64 best_free = 0;

	for (__u32 c = 0; c < m->chiplet_count; c++) {
		if (m->chiplet[c].free_bytes < size)
			continue;
		if (m->chiplet[c].largest_free_bytes > best_free) {
			best_free = m->chiplet[c].largest_free_bytes;
			best = c;
		}
	}
	return best;
}

TEST_F(bo, auto_goes_to_the_chiplet_with_the_largest_free_block)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m;
		struct drm_rbln_bo_create c, big;
		__u32 want;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m));
		want = auto_choice(&m, RBLN_SZ_2M);
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], RBLN_SZ_2M,
					    RBLN_REGION_AUTO, 0, 0, &c));
		EXPECT_EQ(want, c.chiplet);
		EXPECT_EQ(RBLN_SZ_2M, c.size);
		/* BO_INFO reports where it is: HBM of that chiplet */
		check_bo_info(_metadata, self->fd[i], &self->vm[i], c.handle,
			      RBLN_SZ_2M, c.device_va, RBLN_REGION_HBM,
			      c.chiplet, 0);
		EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));

		if (self->dev[i].chiplet_count < 2)
			continue;
		/* take half of chiplet 0: AUTO must move on to chiplet 1 */
		ASSERT_EQ(0, rbln_bo_create(self->fd[i],
					    self->dev[i].hbm_size[0] / 2,
					    RBLN_REGION_HBM, 0, 0, &big));
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m));
		want = auto_choice(&m, RBLN_SZ_2M);
		EXPECT_NE(0, want) TH_LOG("chiplet 0 is half full");
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], RBLN_SZ_2M,
					    RBLN_REGION_AUTO, 0, 0, &c));
		EXPECT_EQ(want, c.chiplet)
		TH_LOG("largest free blocks: %llu %llu ...",
		       (unsigned long long)m.chiplet[0].largest_free_bytes,
		       (unsigned long long)m.chiplet[1].largest_free_bytes);
		EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		EXPECT_EQ(0, rbln_gem_close(self->fd[i], big.handle));
	}
}

struct va_range {
	__u64 va;
	__u64 size;
};

TEST_F(bo, buffers_get_distinct_non_overlapping_vas)
{
	static const __u64 sizes[] = { 4096, 8192, RBLN_SZ_2M, 12288,
				       RBLN_SZ_2M + 4096, 65536 };
	long pg = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < self->count; i++) {
		struct va_range r[64];
		void *user[8];
		__u64 sum = 0;
		int n = 0;
		struct drm_rbln_info_vm vm;

		for (int round = 0; round < 3; round++)
			for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
				__u32 region = (s + round) % 3 == 0 ?
						       RBLN_REGION_HOST :
					       (s + round) % 3 == 1 ?
						       RBLN_REGION_HBM :
						       RBLN_REGION_AUTO;
				__u32 ch = region == RBLN_REGION_HBM ?
						   (__u32)s %
							   self->dev[i].chiplet_count :
						   0;
				struct drm_rbln_bo_create c;

				ASSERT_EQ(0, rbln_bo_create(self->fd[i],
							    sizes[s], region,
							    ch, 0, &c));
				r[n].va = c.device_va;
				r[n++].size = c.size;
				sum += c.size;
			}
		for (int u = 0; u < 8; u++) {
			struct drm_rbln_bo_userptr up;
			size_t len = (size_t)(u + 1) * pg;

			user[u] = mmap(NULL, len, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
				       -1, 0);
			ASSERT_NE(MAP_FAILED, user[u]);
			ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], user[u], len,
						     0, &up));
			r[n].va = up.device_va;
			r[n++].size = len;
			sum += len;
		}
		for (int a = 0; a < n; a++) {
			EXPECT_TRUE(rbln_va_in(r[a].va, r[a].size,
					       self->vm[i].va_start,
					       self->vm[i].va_end))
			TH_LOG("buffer %d at 0x%llx", a,
			       (unsigned long long)r[a].va);
			for (int b = a + 1; b < n; b++) {
				bool apart = r[a].va + r[a].size <= r[b].va ||
					     r[b].va + r[b].size <= r[a].va;

				EXPECT_TRUE(apart)
				TH_LOG("buffers %d [0x%llx +0x%llx), %d [0x%llx +0x%llx)",
				       a, (unsigned long long)r[a].va,
				       (unsigned long long)r[a].size, b,
				       (unsigned long long)r[b].va,
				       (unsigned long long)r[b].size);
			}
		}
		ASSERT_EQ(0, rbln_info_vm(self->fd[i], &vm));
		EXPECT_EQ(self->vm[i].mapped_bytes + sum, vm.mapped_bytes);
	}
}

TEST_F(bo, host_mmap_is_cached_ram_that_keeps_its_data)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		size_t len = 5 * RBLN_SZ_4K + RBLN_SZ_2M;
		char flags[256];
		void *map;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], len, RBLN_REGION_HOST,
					    0, 0, &c));
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, len,
					  PROT_READ | PROT_WRITE, &map));
		/* new host memory reads as zero */
		EXPECT_EQ(-1, rbln_first_nonzero(map, len));
		/* RAM pages, not I/O memory (both are PFN maps in GEM shmem) */
		ASSERT_EQ(0, rbln_vma_flags(map, flags, sizeof(flags)));
		EXPECT_FALSE(rbln_vma_has_flag(flags, "io")) TH_LOG("%s", flags);
		rbln_pattern_fill(map, len, 11 + i, 0);
		ASSERT_EQ(0, munmap(map, len));
		/* a second mapping sees what the first wrote */
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, len,
					  PROT_READ, &map));
		EXPECT_EQ(-1, rbln_pattern_check(map, len, 11 + i, 0));
		ASSERT_EQ(0, munmap(map, len));
		EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
	}
}

/* ShmemHugePages of /proc/meminfo in KiB, or -1. */
static long shmem_huge_kib(void)
{
	char line[128];
	long kib = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "ShmemHugePages: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Huge pages of host buffers grown by first-touching @len bytes of one. */
static long huge_kib_of_a_touched_buffer(int fd, size_t len)
{
	struct drm_rbln_bo_create c;
	long before, after;
	void *map;

	before = shmem_huge_kib();
	if (rbln_bo_create(fd, len, RBLN_REGION_HOST, 0, 0, &c))
		return -1;
	if (rbln_bo_mmap(fd, c.handle, len, PROT_READ | PROT_WRITE, &map)) {
		rbln_gem_close(fd, c.handle);
		return -1;
	}
	memset(map, 0x5a, len);
	after = shmem_huge_kib();
	munmap(map, len);
	rbln_gem_close(fd, c.handle);
	return before < 0 || after < 0 ? -1 : after - before;
}

TEST_F(bo, host_buffers_from_2m_up_get_huge_pages_when_the_kernel_has_them)
{
	char thp[16] = "", shmem[128] = "";

	if (rbln_read_file("/sys/module/rbln/parameters/host_thp", thp,
			   sizeof(thp)) < 0 || thp[0] != 'Y')
		SKIP(return, "rbln host_thp is off");
	if (rbln_read_file("/sys/kernel/mm/transparent_hugepage/shmem_enabled",
			   shmem, sizeof(shmem)) < 0 || strstr(shmem, "[deny]"))
		SKIP(return, "no transparent huge pages for tmpfs here");
	ASSERT_LE(0, shmem_huge_kib());
	for (int i = 0; i < self->count; i++) {
		/* 8 MiB: four 2 MiB pieces; one may fall back to 4 KiB pages */
		EXPECT_LE(3 * 2048,
			  huge_kib_of_a_touched_buffer(self->fd[i], 4 * RBLN_SZ_2M));
		/* under 2 MiB: plain pages */
		EXPECT_EQ(0, huge_kib_of_a_touched_buffer(self->fd[i],
							  RBLN_SZ_2M - RBLN_SZ_4K));
	}
}

TEST_F(bo, hbm_mmap_is_io_memory_of_the_bar_that_keeps_its_data)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			struct drm_rbln_bo_create c;
			size_t len = RBLN_SZ_2M + RBLN_SZ_4K;
			char flags[256];
			void *map;

			ASSERT_EQ(0, rbln_bo_create(self->fd[i], len,
						    RBLN_REGION_HBM, ch, 0,
						    &c));
			len = c.size;
			ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, len,
						  PROT_READ | PROT_WRITE,
						  &map));
			EXPECT_EQ(-1, rbln_first_nonzero(map, len))
			TH_LOG("card %d chiplet %u: new HBM not zero", i, ch);
			ASSERT_EQ(0, rbln_vma_flags(map, flags, sizeof(flags)));
			/* PFN map of device memory, not pages */
			EXPECT_TRUE(rbln_vma_has_flag(flags, "io"))
			TH_LOG("%s", flags);
			EXPECT_TRUE(rbln_vma_has_flag(flags, "pf"))
			TH_LOG("%s", flags);
			rbln_pattern_fill(map, len, 21 + ch, 0);
			EXPECT_EQ(-1, rbln_pattern_check(map, len, 21 + ch, 0));
			ASSERT_EQ(0, munmap(map, len));
			ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, len,
						  PROT_READ, &map));
			EXPECT_EQ(-1, rbln_pattern_check(map, len, 21 + ch, 0));
			ASSERT_EQ(0, munmap(map, len));
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		}
}

TEST_F(bo, mmap_larger_than_the_buffer_fails)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		void *map;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 8192, RBLN_REGION_HBM,
					    0, 0, &c));
		EXPECT_GT(0, rbln_bo_mmap(self->fd[i], c.handle, 3 * 4096,
					  PROT_READ, &map));
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 8192, RBLN_REGION_HOST,
					    0, 0, &c));
		EXPECT_GT(0, rbln_bo_mmap(self->fd[i], c.handle, 3 * 4096,
					  PROT_READ, &map));
	}
}

/* Creates one buffer of each kind on card @i into @h (and @user). */
static int make_all_kinds(struct __test_metadata *_metadata, int fd,
			  const struct drm_rbln_info_device *dev, __u32 *h,
			  __u64 *off, void **user)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct drm_rbln_bo_create c;
	struct drm_rbln_bo_userptr up;
	struct drm_rbln_bo_info info;
	int n = 0;

	ASSERT_EQ(0, rbln_bo_create(fd, 3 * pg, RBLN_REGION_HOST, 0, 0, &c));
	h[n++] = c.handle;
	for (__u32 ch = 0; ch < dev->chiplet_count; ch++) {
		ASSERT_EQ(0, rbln_bo_create(fd, 3 * pg, RBLN_REGION_HBM, ch, 0,
					    &c));
		h[n++] = c.handle;
	}
	ASSERT_EQ(0, rbln_bo_create(fd, 3 * pg, RBLN_REGION_AUTO, 0, 0, &c));
	h[n++] = c.handle;
	*user = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, *user);
	ASSERT_EQ(0, rbln_bo_userptr(fd, *user, 3 * pg, 0, &up));
	h[n++] = up.handle;
	for (int k = 0; k < n; k++) {
		ASSERT_EQ(0, rbln_bo_info(fd, h[k], &info));
		off[k] = info.mmap_offset;
	}
	return n;
}

TEST_F(bo, gem_close_makes_the_handle_unknown_for_every_kind)
{
	long pg = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < self->count; i++) {
		__u32 h[RBLN_MAX_CHIPLETS + 3];
		__u64 off[RBLN_MAX_CHIPLETS + 3];
		struct drm_rbln_info_vm vm;
		void *user;
		int n = make_all_kinds(_metadata, self->fd[i], &self->dev[i], h,
				       off, &user);

		for (int k = 0; k < n; k++) {
			struct drm_rbln_bo_info info;
			void *map;

			ASSERT_EQ(0, rbln_gem_close(self->fd[i], h[k]))
			TH_LOG("buffer %d", k);
			EXPECT_EQ(-ENOENT, rbln_bo_info(self->fd[i], h[k],
							&info))
			TH_LOG("buffer %d: BO_INFO after GEM_CLOSE", k);
			/* DRM: closing a handle that does not exist */
			EXPECT_EQ(-EINVAL, rbln_gem_close(self->fd[i], h[k]))
			TH_LOG("buffer %d: second GEM_CLOSE", k);
			if (!off[k])
				continue;
			map = mmap(NULL, pg, PROT_READ, MAP_SHARED, self->fd[i],
				   (off_t)off[k]);
			EXPECT_EQ(MAP_FAILED, map)
			TH_LOG("buffer %d: mmap of a freed buffer's offset", k);
			if (map != MAP_FAILED)
				munmap(map, pg);
		}
		ASSERT_EQ(0, rbln_info_vm(self->fd[i], &vm));
		EXPECT_EQ(self->vm[i].mapped_bytes, vm.mapped_bytes);
		munmap(user, 3 * pg);
	}
}

TEST_F(bo, cpu_mapping_keeps_hbm_alive_after_gem_close)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem before, held, after;
		struct drm_rbln_bo_create c;
		size_t len = 4 * RBLN_SZ_2M;
		void *map;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &before));
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], len, RBLN_REGION_HBM,
					    0, 0, &c));
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, len,
					  PROT_READ | PROT_WRITE, &map));
		rbln_pattern_fill(map, len, 7, 0);
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		/* the mapping still holds the memory and its bytes */
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &held));
		EXPECT_EQ(before.chiplet[0].used_bytes + len,
			  held.chiplet[0].used_bytes);
		EXPECT_EQ(-1, rbln_pattern_check(map, len, 7, 0));
		ASSERT_EQ(0, munmap(map, len));
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &after));
		EXPECT_EQ(before.chiplet[0].used_bytes,
			  after.chiplet[0].used_bytes);
	}
}

TEST_F(bo, userptr_bo_info_describes_the_pinned_range)
{
	long pg = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < self->count; i++) {
		static const __u32 flags[] = { 0, RBLN_USERPTR_READ_ONLY };

		for (size_t f = 0; f < ARRAY_SIZE(flags); f++) {
			size_t len = 5 * pg;
			void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			struct drm_rbln_bo_userptr up;

			ASSERT_NE(MAP_FAILED, p);
			memset(p, 0x5a, len);
			ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], p, len,
						     flags[f], &up));
			EXPECT_NE(0, up.handle);
			check_bo_info(_metadata, self->fd[i], &self->vm[i],
				      up.handle, len, up.device_va,
				      RBLN_REGION_USERPTR, 0,
				      flags[f] ? RBLN_BO_DEVICE_READ_ONLY : 0);
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], up.handle));
			/* the memory is the process's again, untouched */
			EXPECT_TRUE(rbln_all_bytes(p, len, 0x5a));
			munmap(p, len);
		}
	}
}

TEST_F(bo, device_read_only_flag_is_reported)
{
	for (int i = 0; i < self->count; i++) {
		static const __u32 regions[] = { RBLN_REGION_HOST,
						 RBLN_REGION_HBM,
						 RBLN_REGION_AUTO };

		for (size_t r = 0; r < ARRAY_SIZE(regions); r++) {
			struct drm_rbln_bo_create c;
			struct drm_rbln_bo_info info;

			ASSERT_EQ(0, rbln_bo_create(self->fd[i], 4096,
						    regions[r], 0,
						    RBLN_BO_DEVICE_READ_ONLY,
						    &c));
			ASSERT_EQ(0, rbln_bo_info(self->fd[i], c.handle,
						  &info));
			EXPECT_EQ(RBLN_BO_DEVICE_READ_ONLY, info.flags_out);
		}
	}
}

/* Fresh HBM reads zero through the BAR and through the card. */
static void expect_zero_hbm(struct __test_metadata *_metadata, int fd,
			    __u32 handle, size_t len, const char *what)
{
	void *map;
	long nz;

	ASSERT_EQ(0, rbln_bo_mmap(fd, handle, len, PROT_READ, &map));
	nz = rbln_first_nonzero(map, len);
	EXPECT_EQ(-1, nz)
	TH_LOG("%s: byte %ld of a new buffer is 0x%02x", what, nz,
	       nz >= 0 ? ((unsigned char *)map)[nz] : 0);
	munmap(map, len);
}

/* One buffer of @size on @ch: zero when new, then dirtied and freed. */
static void zero_then_dirty(struct __test_metadata *_metadata, int fd, int card,
			    __u32 ch, __u64 size, int round)
{
	struct drm_rbln_bo_create c;
	char what[64];
	void *map;

	ASSERT_EQ(0, rbln_bo_create(fd, size, RBLN_REGION_HBM, ch, 0, &c));
	snprintf(what, sizeof(what), "card %d chiplet %u %llu B #%d", card, ch,
		 (unsigned long long)size, round);
	expect_zero_hbm(_metadata, fd, c.handle, c.size, what);
	ASSERT_EQ(0, rbln_bo_mmap(fd, c.handle, c.size, PROT_WRITE, &map));
	memset(map, 0xa5, c.size);
	munmap(map, c.size);
	ASSERT_EQ(0, rbln_gem_close(fd, c.handle));
}

TEST_F(bo, hbm_is_zeroed_when_freed_memory_is_reused)
{
	static const __u64 sizes[] = { 4096, 65536, RBLN_SZ_2M,
				       3 * RBLN_SZ_2M };

	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++)
			for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
				for (int round = 0; round < 4; round++)
					zero_then_dirty(_metadata, self->fd[i],
							i, ch, sizes[s], round);
}

#define MAX_FILL 4096

/*
 * Allocates buffers on @ch until it is full (16 MiB, then 2 MiB, then
 * 4 KiB pieces).  @check: expect every byte zero; else write 0x5a over
 * every byte.  Returns the count, handles in @h.
 */
static int fill_chiplet(struct __test_metadata *_metadata, int fd, int card,
			__u32 ch, bool check, __u32 *h)
{
	static const __u64 chunks[] = { 16 * RBLN_SZ_1M, RBLN_SZ_2M,
					RBLN_SZ_4K };
	int n = 0;

	for (size_t k = 0; k < ARRAY_SIZE(chunks); k++) {
		for (;;) {
			struct drm_rbln_bo_create c;
			char what[64];
			void *map;
			int err;

			ASSERT_GT(MAX_FILL, n);
			err = rbln_bo_create(fd, chunks[k], RBLN_REGION_HBM, ch,
					     0, &c);
			if (err == -ENOSPC)
				break;
			ASSERT_EQ(0, err)
			TH_LOG("chiplet %u: %s", ch, strerror(-err));
			h[n++] = c.handle;
			if (check) {
				snprintf(what, sizeof(what),
					 "card %d chiplet %u buffer %d", card,
					 ch, n - 1);
				expect_zero_hbm(_metadata, fd, c.handle, c.size,
						what);
				continue;
			}
			ASSERT_EQ(0, rbln_bo_mmap(fd, c.handle, c.size,
						  PROT_WRITE, &map));
			memset(map, 0x5a, c.size);
			munmap(map, c.size);
		}
	}
	return n;
}

/*
 * Every free byte of a chiplet dirtied by one set of buffers, all freed,
 * then the same memory allocated again: reuse is certain, and every byte
 * must read zero.
 */
TEST_F_TIMEOUT(bo, hbm_is_zeroed_after_the_whole_chiplet_was_dirtied, 600)
{
	static __u32 h[MAX_FILL];

	for (int i = 0; i < self->count; i++) {
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			for (int pass = 0; pass < 2; pass++) {
				struct drm_rbln_info_mem m;
				int n = fill_chiplet(_metadata, self->fd[i], i,
						     ch, pass == 1, h);

				ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m));
				TH_LOG("card %d chiplet %u pass %d: %d buffers",
				       i, ch, pass, n);
				EXPECT_EQ(0, m.chiplet[ch].free_bytes);
				for (int k = 0; k < n; k++)
					ASSERT_EQ(0, rbln_gem_close(self->fd[i],
								    h[k]));
			}
		}
	}
}

TEST_HARNESS_MAIN
