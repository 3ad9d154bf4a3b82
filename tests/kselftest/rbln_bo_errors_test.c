// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_bo_errors_test - every bad input of RBLN_BO_CREATE, RBLN_BO_INFO and
 * DRM_IOCTL_GEM_CLOSE gets the errno of include/uapi/drm/rbln_accel.h and
 * allocates nothing.
 *
 * After each refused request the card's memory figures (RBLN_INFO_MEM:
 * host bytes, pinned bytes, HBM used per chiplet) and the caller's VM
 * (RBLN_INFO_VM.mapped_bytes) are what they were before.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"

FIXTURE(bad)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
};

FIXTURE_SETUP(bad)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->fd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	for (int i = 0; i < self->count; i++) {
		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i]);
		ASSERT_EQ(0, rbln_info_device(self->fd[i], &self->dev[i]));
	}
}

FIXTURE_TEARDOWN(bad)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

struct snapshot {
	struct drm_rbln_info_mem mem;
	struct drm_rbln_info_vm vm;
};

static void take(struct __test_metadata *_metadata, int fd,
		 struct snapshot *s)
{
	ASSERT_EQ(0, rbln_info_mem(fd, &s->mem));
	ASSERT_EQ(0, rbln_info_vm(fd, &s->vm));
}

/* Nothing was allocated or mapped since @before. */
static void expect_unchanged(struct __test_metadata *_metadata, int fd,
			     const struct snapshot *before, const char *what)
{
	struct snapshot now;

	take(_metadata, fd, &now);
	EXPECT_EQ(before->mem.host_bytes, now.mem.host_bytes)
	TH_LOG("%s: host bytes", what);
	EXPECT_EQ(before->mem.pinned_bytes, now.mem.pinned_bytes)
	TH_LOG("%s: pinned bytes", what);
	for (__u32 c = 0; c < now.mem.chiplet_count; c++) {
		EXPECT_EQ(before->mem.chiplet[c].used_bytes,
			  now.mem.chiplet[c].used_bytes)
		TH_LOG("%s: chiplet %u used bytes", what, c);
	}
	EXPECT_EQ(before->vm.mapped_bytes, now.vm.mapped_bytes)
	TH_LOG("%s: VM mapped bytes", what);
}

/* BO_CREATE must fail with @err and leave everything as it was. */
static void expect_create_fails(struct __test_metadata *_metadata, int fd,
				int err, __u64 size, __u32 region,
				__u32 chiplet, __u32 flags)
{
	struct snapshot before;
	struct drm_rbln_bo_create c;
	char what[128];
	int ret;

	snprintf(what, sizeof(what),
		 "BO_CREATE size 0x%llx region %u chiplet %u flags 0x%x",
		 (unsigned long long)size, region, chiplet, flags);
	take(_metadata, fd, &before);
	ret = rbln_bo_create(fd, size, region, chiplet, flags, &c);
	EXPECT_EQ(err, ret)
	TH_LOG("%s: %s, want %s", what, ret ? strerror(-ret) : "success",
	       strerror(-err));
	if (!ret)
		rbln_gem_close(fd, c.handle);
	else
		expect_unchanged(_metadata, fd, &before, what);
}

static const __u32 alloc_regions[] = { RBLN_REGION_HOST, RBLN_REGION_HBM,
				       RBLN_REGION_AUTO };

TEST_F(bad, create_with_unknown_flags_is_einval)
{
	static const __u32 flags[] = { 1u << 1, 1u << 2, 1u << 31, ~0u,
				       RBLN_BO_DEVICE_READ_ONLY | (1u << 7) };

	for (int i = 0; i < self->count; i++)
		for (size_t r = 0; r < ARRAY_SIZE(alloc_regions); r++)
			for (size_t f = 0; f < ARRAY_SIZE(flags); f++)
				expect_create_fails(_metadata, self->fd[i],
						    -EINVAL, 4096,
						    alloc_regions[r], 0,
						    flags[f]);
}

TEST_F(bad, create_in_an_unknown_or_report_only_region_is_einval)
{
	/* USERPTR and IMPORT are reported by BO_INFO, never created */
	static const __u32 regions[] = { RBLN_REGION_USERPTR,
					 RBLN_REGION_IMPORT, 5, 0x80000000u,
					 ~0u };

	for (int i = 0; i < self->count; i++)
		for (size_t r = 0; r < ARRAY_SIZE(regions); r++)
			expect_create_fails(_metadata, self->fd[i], -EINVAL,
					    4096, regions[r], 0, 0);
}

TEST_F(bad, create_of_size_zero_is_einval)
{
	for (int i = 0; i < self->count; i++)
		for (size_t r = 0; r < ARRAY_SIZE(alloc_regions); r++)
			expect_create_fails(_metadata, self->fd[i], -EINVAL, 0,
					    alloc_regions[r], 0, 0);
}

TEST_F(bad, create_of_a_size_that_overflows_when_rounded_is_einval)
{
	/* rounding up to 4 KiB (every region) overflows */
	static const __u64 sizes_4k[] = { ~0ull, ~0ull - 4094,
					  0xfffffffffffff001ull };
	/* rounding up to 2 MiB (HBM, AUTO) overflows */
	static const __u64 sizes_2m[] = { 0xffffffffffe00001ull,
					  0xfffffffffff00000ull };

	for (int i = 0; i < self->count; i++) {
		for (size_t r = 0; r < ARRAY_SIZE(alloc_regions); r++)
			for (size_t s = 0; s < ARRAY_SIZE(sizes_4k); s++)
				expect_create_fails(_metadata, self->fd[i],
						    -EINVAL, sizes_4k[s],
						    alloc_regions[r], 0, 0);
		for (size_t s = 0; s < ARRAY_SIZE(sizes_2m); s++) {
			expect_create_fails(_metadata, self->fd[i], -EINVAL,
					    sizes_2m[s], RBLN_REGION_HBM, 0, 0);
			expect_create_fails(_metadata, self->fd[i], -EINVAL,
					    sizes_2m[s], RBLN_REGION_AUTO, 0, 0);
		}
	}
}

TEST_F(bad, hbm_larger_than_the_chiplet_is_e2big)
{
	for (int i = 0; i < self->count; i++) {
		__u64 largest = 0;

		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			__u64 hbm = self->dev[i].hbm_size[ch];
			const __u64 sizes[] = { hbm + 4096, hbm + RBLN_SZ_2M,
						2 * hbm, 1ull << 40,
						1ull << 62 };

			if (hbm > largest)
				largest = hbm;
			for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
				expect_create_fails(_metadata, self->fd[i],
						    -E2BIG, sizes[s],
						    RBLN_REGION_HBM, ch, 0);
		}
		/* AUTO: larger than every chiplet */
		expect_create_fails(_metadata, self->fd[i], -E2BIG,
				    largest + 4096, RBLN_REGION_AUTO, 0, 0);
		expect_create_fails(_metadata, self->fd[i], -E2BIG,
				    1ull << 62, RBLN_REGION_AUTO, 0, 0);
	}
}

TEST_F(bad, host_buffer_beyond_memory_is_enomem)
{
	/*
	 * Sizes that round to 4 KiB without overflow but that no machine
	 * has: host memory (or device VA) is exhausted.
	 */
	static const __u64 sizes[] = { 1ull << 50, 1ull << 62,
				       0xffffffffffff0000ull };

	for (int i = 0; i < self->count; i++)
		for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
			expect_create_fails(_metadata, self->fd[i], -ENOMEM,
					    sizes[s], RBLN_REGION_HOST, 0, 0);
}

TEST_F(bad, host_buffer_larger_than_ram_or_1_tib_is_enomem_at_once)
{
	/*
	 * Within the device VA span, but never backable while the card uses
	 * it (every page resident): refused at creation, not at first use.
	 */
	static const __u64 sizes[] = { 1ull << 40, 4ull << 40 };

	for (int i = 0; i < self->count; i++)
		for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
			expect_create_fails(_metadata, self->fd[i], -ENOMEM,
					    sizes[s], RBLN_REGION_HOST, 0, 0);
}

TEST_F(bad, whole_chiplet_sized_hbm_buffer_fits_an_empty_chiplet)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			struct drm_rbln_info_mem m;
			struct drm_rbln_bo_create c;

			ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m));
			if (m.chiplet[ch].used_bytes) {
				TH_LOG("chiplet %u in use (%llu bytes): not checked",
				       ch,
				       (unsigned long long)m.chiplet[ch].used_bytes);
				continue;
			}
			ASSERT_EQ(0, rbln_bo_create(self->fd[i],
						    m.chiplet[ch].total_bytes,
						    RBLN_REGION_HBM, ch, 0, &c))
			TH_LOG("chiplet %u: %llu bytes", ch,
			       (unsigned long long)m.chiplet[ch].total_bytes);
			EXPECT_EQ(m.chiplet[ch].total_bytes, c.size);
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		}
}

TEST_F(bad, chiplet_not_on_the_card_is_einval)
{
	for (int i = 0; i < self->count; i++) {
		const __u32 chiplets[] = { self->dev[i].chiplet_count,
					   RBLN_MAX_CHIPLETS, 0x80000000u,
					   ~0u };

		for (size_t c = 0; c < ARRAY_SIZE(chiplets); c++)
			expect_create_fails(_metadata, self->fd[i], -EINVAL,
					    4096, RBLN_REGION_HBM, chiplets[c],
					    0);
	}
}

TEST_F(bad, chiplet_given_with_host_or_auto_is_einval)
{
	static const __u32 chiplets[] = { 1, 3, ~0u };

	for (int i = 0; i < self->count; i++)
		for (size_t c = 0; c < ARRAY_SIZE(chiplets); c++) {
			expect_create_fails(_metadata, self->fd[i], -EINVAL,
					    4096, RBLN_REGION_HOST, chiplets[c],
					    0);
			expect_create_fails(_metadata, self->fd[i], -EINVAL,
					    4096, RBLN_REGION_AUTO, chiplets[c],
					    0);
		}
}

TEST_F(bad, create_ignores_the_output_fields_on_input)
{
	/* handle and device_va are outputs: garbage in them is not an error */
	for (int i = 0; i < self->count; i++)
		for (size_t r = 0; r < ARRAY_SIZE(alloc_regions); r++) {
			struct drm_rbln_bo_create c = {
				.size = 4096,
				.region = alloc_regions[r],
				.handle = 0xdeadbeef,
				.device_va = 0xfeedfacecafe0000ull,
			};
			struct drm_rbln_bo_info info;

			ASSERT_EQ(0, ioctl(self->fd[i],
					   DRM_IOCTL_RBLN_BO_CREATE, &c))
			TH_LOG("region %u: %s", alloc_regions[r],
			       strerror(errno));
			EXPECT_NE(0xdeadbeef, c.handle);
			EXPECT_NE(0xfeedfacecafe0000ull, c.device_va);
			ASSERT_EQ(0, rbln_bo_info(self->fd[i], c.handle, &info));
			EXPECT_EQ(c.device_va, info.device_va);
			EXPECT_EQ(0, rbln_gem_close(self->fd[i], c.handle));
		}
}

static int bo_info_raw(int fd, struct drm_rbln_bo_info *info)
{
	return ioctl(fd, DRM_IOCTL_RBLN_BO_INFO, info) == 0 ? 0 : -errno;
}

TEST_F(bad, bo_info_with_flags_or_pad_is_einval)
{
	static const __u32 vals[] = { 1, 0x80000000u, ~0u };

	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 4096, RBLN_REGION_HOST,
					    0, 0, &c));
		for (size_t v = 0; v < ARRAY_SIZE(vals); v++) {
			struct drm_rbln_bo_info a = { .handle = c.handle,
						      .flags = vals[v] };
			struct drm_rbln_bo_info b = { .handle = c.handle,
						      .pad = vals[v] };

			EXPECT_EQ(-EINVAL, bo_info_raw(self->fd[i], &a))
			TH_LOG("flags 0x%x", vals[v]);
			EXPECT_EQ(-EINVAL, bo_info_raw(self->fd[i], &b))
			TH_LOG("pad 0x%x", vals[v]);
		}
		/* the buffer is still there */
		{
			struct drm_rbln_bo_info ok;

			EXPECT_EQ(0, rbln_bo_info(self->fd[i], c.handle, &ok));
			EXPECT_EQ(c.device_va, ok.device_va);
		}
	}
}

TEST_F(bad, bo_info_of_an_unknown_handle_is_enoent)
{
	static const __u32 handles[] = { 0, 1, 77, 0x7fffffff, ~0u };

	for (int i = 0; i < self->count; i++)
		for (size_t h = 0; h < ARRAY_SIZE(handles); h++) {
			struct drm_rbln_bo_info info;

			EXPECT_EQ(-ENOENT,
				  rbln_bo_info(self->fd[i], handles[h], &info))
			TH_LOG("handle %u", handles[h]);
		}
}

TEST_F(bad, gem_close_of_an_unknown_handle_is_einval)
{
	static const __u32 handles[] = { 0, 1, 77, ~0u };

	for (int i = 0; i < self->count; i++)
		for (size_t h = 0; h < ARRAY_SIZE(handles); h++) {
			EXPECT_EQ(-EINVAL,
				  rbln_gem_close(self->fd[i], handles[h]))
			TH_LOG("handle %u", handles[h]);
		}
}

TEST_F(bad, many_failures_leak_nothing)
{
	/* a thousand refused requests of every kind, then the same figures */
	for (int i = 0; i < self->count; i++) {
		struct snapshot before;

		take(_metadata, self->fd[i], &before);
		for (int k = 0; k < 1000; k++) {
			__u32 region = alloc_regions[k % 3];

			rbln_bo_create(self->fd[i], 0, region, 0, 0, NULL);
			rbln_bo_create(self->fd[i], 4096, region, 0, 2, NULL);
			rbln_bo_create(self->fd[i], ~0ull, region, 0, 0, NULL);
			rbln_bo_create(self->fd[i],
				       self->dev[i].hbm_size[0] + 4096,
				       RBLN_REGION_HBM, 0, 0, NULL);
		}
		expect_unchanged(_metadata, self->fd[i], &before,
				 "1000 refused creates");
	}
}

TEST_HARNESS_MAIN
