// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_uapi_errors_test - bad input to the rbln uAPI gets the documented
 * error and touches nothing.
 *
 * Pins the rules of include/uapi/drm/rbln_accel.h for every query type
 * (DEVICE, TELEMETRY, MEM, VM): unknown query types, non-zero flags and
 * pad are -EINVAL; size 0 asks for the size; a short buffer gets exactly
 * its prefix, a long one the answer and nothing past it; a bad pointer is
 * -EFAULT; an unknown driver ioctl is -ENOTTY.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"

#define CANARY 0xc5

FIXTURE(uapi)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd;
};

FIXTURE_SETUP(uapi)
{
	self->fd = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count)
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd)
	TH_LOG("open accel%d: %s", self->nodes[0].minor, strerror(-self->fd));
}

FIXTURE_TEARDOWN(uapi)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* Runs GET_INFO with a raw request; returns 0 or -errno. */
static int get_info_raw(int fd, struct drm_rbln_get_info *q)
{
	return ioctl(fd, DRM_IOCTL_RBLN_GET_INFO, q) == 0 ? 0 : -errno;
}

static const __u32 known_types[] = { RBLN_INFO_DEVICE, RBLN_INFO_TELEMETRY,
				     RBLN_INFO_MEM, RBLN_INFO_VM };
static const __u32 full_sizes[] = { sizeof(struct drm_rbln_info_device),
				    sizeof(struct drm_rbln_info_telemetry),
				    sizeof(struct drm_rbln_info_mem),
				    sizeof(struct drm_rbln_info_vm) };

TEST_F(uapi, unknown_query_type_is_einval)
{
	/* 5: the first type after RBLN_INFO_VM */
	static const __u32 bad[] = { 0, 5, 6, 0x7fffffff, 0xffffffff };
	unsigned char buf[512];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct drm_rbln_get_info q = { .type = bad[i],
					       .size = sizeof(buf),
					       .ptr = (uintptr_t)buf };

		memset(buf, CANARY, sizeof(buf));
		EXPECT_EQ(-EINVAL, get_info_raw(self->fd, &q))
		TH_LOG("type %u", bad[i]);
		EXPECT_TRUE(rbln_all_bytes(buf, sizeof(buf), CANARY))
		TH_LOG("type %u wrote", bad[i]);
	}
}

TEST_F(uapi, nonzero_flags_is_einval)
{
	static const __u32 flags[] = { 1, 0x80000000u, 0xffffffffu };
	unsigned char buf[512];

	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++)
		for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
			struct drm_rbln_get_info q = { .type = known_types[t],
						       .size = sizeof(buf),
						       .ptr = (uintptr_t)buf,
						       .flags = flags[i] };

			memset(buf, CANARY, sizeof(buf));
			EXPECT_EQ(-EINVAL, get_info_raw(self->fd, &q))
			TH_LOG("type %u flags 0x%x", known_types[t], flags[i]);
			EXPECT_TRUE(rbln_all_bytes(buf, sizeof(buf), CANARY));
		}
}

TEST_F(uapi, nonzero_pad_is_einval)
{
	static const __u32 pads[] = { 1, 0x80000000u, 0xffffffffu };
	unsigned char buf[512];

	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++)
		for (size_t i = 0; i < ARRAY_SIZE(pads); i++) {
			struct drm_rbln_get_info q = { .type = known_types[t],
						       .size = sizeof(buf),
						       .ptr = (uintptr_t)buf,
						       .pad = pads[i] };

			memset(buf, CANARY, sizeof(buf));
			EXPECT_EQ(-EINVAL, get_info_raw(self->fd, &q))
			TH_LOG("type %u pad 0x%x", known_types[t], pads[i]);
			EXPECT_TRUE(rbln_all_bytes(buf, sizeof(buf), CANARY));
		}
}

TEST_F(uapi, size_zero_reports_full_size_and_writes_nothing)
{
	unsigned char buf[512];

	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++) {
		struct drm_rbln_get_info q = { .type = known_types[t],
					       .size = 0,
					       .ptr = (uintptr_t)buf };
		struct drm_rbln_get_info q0 = { .type = known_types[t],
						.size = 0,
						.ptr = 0 };

		memset(buf, CANARY, sizeof(buf));
		ASSERT_EQ(0, get_info_raw(self->fd, &q))
		TH_LOG("type %u", known_types[t]);
		EXPECT_EQ(full_sizes[t], q.size);
		EXPECT_TRUE(rbln_all_bytes(buf, sizeof(buf), CANARY))
		TH_LOG("size 0 wrote");
		/* ptr may be 0 when size is 0 */
		ASSERT_EQ(0, get_info_raw(self->fd, &q0))
		TH_LOG("type %u, ptr 0", known_types[t]);
		EXPECT_EQ(full_sizes[t], q0.size);
	}
}

TEST_F(uapi, short_buffer_gets_exact_prefix)
{
	static const __u32 shorts[] = { 1, 4, 8, 13 };
	struct drm_rbln_info_device full;
	struct drm_rbln_info_vm vm;
	unsigned char buf[512];

	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_DEVICE, &full,
				   sizeof(full), NULL));
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_VM, &vm, sizeof(vm),
				   NULL));
	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++)
		for (size_t i = 0; i < ARRAY_SIZE(shorts); i++) {
			__u32 n = shorts[i];
			struct drm_rbln_get_info q = { .type = known_types[t],
						       .size = n,
						       .ptr = (uintptr_t)buf };

			memset(buf, CANARY, sizeof(buf));
			ASSERT_EQ(0, get_info_raw(self->fd, &q))
			TH_LOG("type %u size %u", q.type, n);
			EXPECT_EQ(full_sizes[t], q.size)
			TH_LOG("type %u size %u", known_types[t], n);
			EXPECT_TRUE(rbln_all_bytes(buf + n, sizeof(buf) - n,
						   CANARY))
			TH_LOG("type %u: wrote past %u bytes", known_types[t],
			       n);
			/* the device identity is constant, so the prefix is known */
			if (known_types[t] == RBLN_INFO_DEVICE) {
				EXPECT_EQ(0, memcmp(buf, &full, n))
				TH_LOG("prefix of %u bytes differs", n);
			}
			/* asid, flags, va_start: constant for this file */
			if (known_types[t] == RBLN_INFO_VM) {
				EXPECT_EQ(0, memcmp(buf, &vm, n))
				TH_LOG("VM prefix of %u bytes differs", n);
			}
		}
}

TEST_F(uapi, long_buffer_gets_the_answer_and_nothing_past_it)
{
	unsigned char buf[1024];

	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++) {
		struct drm_rbln_get_info q = { .type = known_types[t],
					       .size = sizeof(buf),
					       .ptr = (uintptr_t)buf };

		memset(buf, CANARY, sizeof(buf));
		ASSERT_EQ(0, get_info_raw(self->fd, &q))
		TH_LOG("type %u", known_types[t]);
		EXPECT_EQ(full_sizes[t], q.size);
		ASSERT_GT(sizeof(buf), full_sizes[t]);
		EXPECT_TRUE(rbln_all_bytes(buf + full_sizes[t],
					   sizeof(buf) - full_sizes[t], CANARY))
		TH_LOG("type %u wrote past its %u bytes", known_types[t],
		       full_sizes[t]);
	}
}

TEST_F(uapi, short_buffer_8_bytes_on_a_page_edge)
{
	/* 8 bytes just before an inaccessible page: any overrun would fault */
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *map = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct drm_rbln_info_device full;

	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, mprotect(map + pg, pg, PROT_NONE));
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_DEVICE, &full,
				   sizeof(full), NULL));
	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++) {
		unsigned char *edge = map + pg - 8;
		struct drm_rbln_get_info q = { .type = known_types[t],
					       .size = 8,
					       .ptr = (uintptr_t)edge };

		memset(map, CANARY, pg);
		EXPECT_EQ(0, get_info_raw(self->fd, &q))
		TH_LOG("type %u", known_types[t]);
		EXPECT_EQ(full_sizes[t], q.size);
		EXPECT_TRUE(rbln_all_bytes(map, pg - 8, CANARY))
		TH_LOG("wrote before the buffer");
		if (known_types[t] == RBLN_INFO_DEVICE) {
			EXPECT_EQ(0, memcmp(edge, &full, 8))
			TH_LOG("the 8 bytes are not the answer's prefix");
		}
	}
	munmap(map, 2 * pg);
}

TEST_F(uapi, bad_pointer_is_efault)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *gone = mmap(NULL, pg, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *ro =
		mmap(NULL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const __u64 ptrs[] = { 0,
			       1,
			       (uintptr_t)gone,
			       (uintptr_t)ro,
			       0xffff800000000000ull,
			       0xfffffffffffff000ull };

	ASSERT_NE(MAP_FAILED, gone);
	ASSERT_NE(MAP_FAILED, ro);
	ASSERT_EQ(0, munmap(gone, pg));
	for (size_t t = 0; t < ARRAY_SIZE(known_types); t++)
		for (size_t i = 0; i < ARRAY_SIZE(ptrs); i++) {
			struct drm_rbln_get_info q = { .type = known_types[t],
						       .size = full_sizes[t],
						       .ptr = ptrs[i] };

			EXPECT_EQ(-EFAULT, get_info_raw(self->fd, &q))
			TH_LOG("type %u ptr 0x%llx", known_types[t],
			       (unsigned long long)ptrs[i]);
		}
	munmap(ro, pg);
}

TEST_F(uapi, unknown_driver_ioctl_is_enotty)
{
	/* the top of the driver range: new ioctls are appended from 0x00 up */
	static const unsigned int nrs[] = { 0x3f, 0x5f };
	unsigned char buf[64];

	for (size_t i = 0; i < ARRAY_SIZE(nrs); i++) {
		unsigned long cmd = DRM_IOWR(DRM_COMMAND_BASE + nrs[i],
					     struct drm_rbln_get_info);

		memset(buf, 0, sizeof(buf));
		errno = 0;
		EXPECT_EQ(-1, ioctl(self->fd, cmd, buf))
		TH_LOG("nr 0x%x", DRM_COMMAND_BASE + nrs[i]);
		EXPECT_EQ(ENOTTY, errno)
		TH_LOG("nr 0x%x: %s", DRM_COMMAND_BASE + nrs[i],
		       strerror(errno));
	}
}

TEST_F(uapi, foreign_ioctl_type_is_enotty)
{
	unsigned char buf[64] = { 0 };

	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd,
			    _IOWR('x', 0x40, struct drm_rbln_get_info), buf));
	EXPECT_EQ(ENOTTY, errno) TH_LOG("%s", strerror(errno));
}

TEST_F(uapi, open_close_many_times)
{
	/* every open gets its own file; closing them leaks nothing visible */
	for (int i = 0; i < 64; i++) {
		int fd = rbln_open_minor(self->nodes[0].minor);
		struct drm_rbln_info_device d;

		ASSERT_LE(0, fd) TH_LOG("open #%d: %s", i, strerror(-fd));
		EXPECT_EQ(0, rbln_get_info(fd, RBLN_INFO_DEVICE, &d, sizeof(d),
					   NULL));
		EXPECT_EQ(0, close(fd));
	}
}

TEST_HARNESS_MAIN
