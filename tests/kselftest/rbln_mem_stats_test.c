// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_mem_stats_test - the memory figures say what is allocated, and a
 * process that goes away takes its memory with it.
 *
 * Pins: sysfs chiplet<i>/hbm_used_bytes, hbm_total_bytes and
 * hbm_largest_free_bytes equal RBLN_INFO_MEM, which follows every buffer
 * to the byte; the fdinfo keys of an open file (drm-total-hbm<i>,
 * drm-resident-hbm<i>, drm-total-memory, drm-resident-memory,
 * rbln-pinned-memory, rbln-asid, rbln-mmu-faults) are present and count
 * exactly what that file holds; a child that allocates host, HBM and
 * userptr buffers and exits, or is killed, leaves every figure where it
 * was.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"

FIXTURE(stats)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
};

FIXTURE_SETUP(stats)
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

FIXTURE_TEARDOWN(stats)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

/* sysfs of @bdf says what @m says, chiplet by chiplet. */
static void expect_sysfs_matches(struct __test_metadata *_metadata,
				 const char *bdf,
				 const struct drm_rbln_info_mem *m)
{
	__u64 sum = 0, v;

	for (__u32 c = 0; c < m->chiplet_count; c++) {
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c, "hbm_used_bytes",
						    &v))
		TH_LOG("%s chiplet %u", bdf, c);
		EXPECT_EQ(m->chiplet[c].used_bytes, v)
		TH_LOG("chiplet %u hbm_used_bytes", c);
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c, "hbm_total_bytes",
						    &v));
		EXPECT_EQ(m->chiplet[c].total_bytes, v)
		TH_LOG("chiplet %u hbm_total_bytes", c);
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c,
						    "hbm_largest_free_bytes",
						    &v));
		EXPECT_EQ(m->chiplet[c].largest_free_bytes, v)
		TH_LOG("chiplet %u hbm_largest_free_bytes", c);
		sum += m->chiplet[c].total_bytes;
	}
	ASSERT_EQ(0, rbln_sysfs_card_u64(bdf, "hbm_total_bytes", &v));
	EXPECT_EQ(sum, v) TH_LOG("card hbm_total_bytes: all chiplets");
}

/* The MEM figures hold together. */
static void expect_mem_consistent(struct __test_metadata *_metadata,
				  const struct drm_rbln_info_device *d,
				  const struct drm_rbln_info_mem *m)
{
	EXPECT_EQ(d->chiplet_count, m->chiplet_count);
	EXPECT_EQ(0, m->pad);
	for (__u32 c = 0; c < m->chiplet_count; c++) {
		const struct drm_rbln_mem_chiplet *x = &m->chiplet[c];

		EXPECT_EQ(d->hbm_size[c], x->total_bytes) TH_LOG("chiplet %u", c);
		EXPECT_LE(x->used_bytes, x->total_bytes);
		EXPECT_EQ(x->total_bytes - x->used_bytes, x->free_bytes)
		TH_LOG("chiplet %u", c);
		EXPECT_LE(x->largest_free_bytes, x->free_bytes)
		TH_LOG("chiplet %u", c);
	}
	for (__u32 c = m->chiplet_count; c < RBLN_MAX_CHIPLETS; c++) {
		EXPECT_EQ(0, m->chiplet[c].total_bytes) TH_LOG("chiplet %u", c);
		EXPECT_EQ(0, m->chiplet[c].used_bytes) TH_LOG("chiplet %u", c);
	}
}

TEST_F(stats, sysfs_hbm_figures_equal_mem_info_and_follow_buffers)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m0, m1, m2;
		__u32 h[RBLN_MAX_CHIPLETS];
		__u64 sz[RBLN_MAX_CHIPLETS];
		const char *bdf = self->nodes[i].bdf;
		__u32 n = self->dev[i].chiplet_count;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		expect_mem_consistent(_metadata, &self->dev[i], &m0);
		expect_sysfs_matches(_metadata, bdf, &m0);

		/* a different amount on every chiplet */
		for (__u32 c = 0; c < n; c++) {
			struct drm_rbln_bo_create bo;

			ASSERT_EQ(0, rbln_bo_create(self->fd[i],
						    (c + 1) * RBLN_SZ_2M + 4096,
						    RBLN_REGION_HBM, c, 0, &bo));
			h[c] = bo.handle;
			sz[c] = bo.size;
		}
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m1));
		expect_mem_consistent(_metadata, &self->dev[i], &m1);
		expect_sysfs_matches(_metadata, bdf, &m1);
		for (__u32 c = 0; c < n; c++) {
			EXPECT_EQ(m0.chiplet[c].used_bytes + sz[c],
				  m1.chiplet[c].used_bytes)
			TH_LOG("chiplet %u", c);
		}
		for (__u32 c = 0; c < n; c++)
			ASSERT_EQ(0, rbln_gem_close(self->fd[i], h[c]));
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m2));
		expect_sysfs_matches(_metadata, bdf, &m2);
		for (__u32 c = 0; c < n; c++) {
			EXPECT_EQ(m0.chiplet[c].used_bytes,
				  m2.chiplet[c].used_bytes)
			TH_LOG("chiplet %u", c);
			EXPECT_EQ(m0.chiplet[c].largest_free_bytes,
				  m2.chiplet[c].largest_free_bytes)
			TH_LOG("chiplet %u: freeing merges the blocks again", c);
		}
	}
}

TEST_F(stats, mem_info_host_bytes_follow_host_buffers)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m0, m1, m2;
		struct drm_rbln_bo_create a, b;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 5000, RBLN_REGION_HOST,
					    0, 0, &a));
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 3 * RBLN_SZ_1M,
					    RBLN_REGION_HOST, 0, 0, &b));
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m1));
		/* counted from creation on, pages or not */
		EXPECT_EQ(m0.host_bytes + a.size + b.size, m1.host_bytes);
		for (__u32 c = 0; c < m1.chiplet_count; c++) {
			EXPECT_EQ(m0.chiplet[c].used_bytes,
				  m1.chiplet[c].used_bytes)
			TH_LOG("host buffers took HBM of chiplet %u", c);
		}
		EXPECT_EQ(m0.pinned_bytes, m1.pinned_bytes);
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], a.handle));
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], b.handle));
		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m2));
		EXPECT_EQ(m0.host_bytes, m2.host_bytes);
	}
}

TEST_F(stats, fdinfo_has_every_memory_key)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm vm;
		char key[64], val[128];
		__u64 v;

		ASSERT_EQ(0, rbln_info_vm(self->fd[i], &vm));
		ASSERT_EQ(0, rbln_fdinfo_str(self->fd[i], "drm-driver", val,
					     sizeof(val)));
		EXPECT_STREQ("rbln", val);
		ASSERT_EQ(0, rbln_fdinfo_str(self->fd[i], "drm-pdev", val,
					     sizeof(val)));
		EXPECT_STREQ(self->nodes[i].bdf, val);
		EXPECT_EQ(0, rbln_fdinfo_u64(self->fd[i], "drm-client-id", &v));
		for (__u32 c = 0; c < self->dev[i].chiplet_count; c++) {
			snprintf(key, sizeof(key), "drm-total-hbm%u", c);
			EXPECT_EQ(0, rbln_fdinfo_size(self->fd[i], key, &v))
			TH_LOG("%s", key);
			snprintf(key, sizeof(key), "drm-resident-hbm%u", c);
			EXPECT_EQ(0, rbln_fdinfo_size(self->fd[i], key, &v))
			TH_LOG("%s", key);
		}
		/* no key for a chiplet the card does not have */
		snprintf(key, sizeof(key), "drm-total-hbm%u",
			 self->dev[i].chiplet_count);
		EXPECT_EQ(-ENOENT, rbln_fdinfo_size(self->fd[i], key, &v))
		TH_LOG("%s", key);
		EXPECT_EQ(0, rbln_fdinfo_size(self->fd[i], "drm-total-memory",
					      &v));
		EXPECT_EQ(0, rbln_fdinfo_size(self->fd[i],
					      "drm-resident-memory", &v));
		EXPECT_EQ(0, rbln_fdinfo_size(self->fd[i],
					      "rbln-pinned-memory", &v));
		ASSERT_EQ(0, rbln_fdinfo_u64(self->fd[i], "rbln-asid", &v));
		EXPECT_EQ(vm.asid, v);
		ASSERT_EQ(0,
			  rbln_fdinfo_u64(self->fd[i], "rbln-mmu-faults", &v));
		EXPECT_EQ(vm.fault_count, v);
		EXPECT_EQ(0, v) TH_LOG("a new file has no MMU fault");
	}
}

struct client_fig {
	__u64 total_hbm[RBLN_MAX_CHIPLETS];
	__u64 resident_hbm[RBLN_MAX_CHIPLETS];
	__u64 total_mem;
	__u64 resident_mem;
	__u64 pinned;
};

static void read_client(struct __test_metadata *_metadata, int fd,
			__u32 chiplets, struct client_fig *f)
{
	char key[64];

	memset(f, 0, sizeof(*f));
	for (__u32 c = 0; c < chiplets; c++) {
		snprintf(key, sizeof(key), "drm-total-hbm%u", c);
		ASSERT_EQ(0, rbln_fdinfo_size(fd, key, &f->total_hbm[c]))
		TH_LOG("%s", key);
		snprintf(key, sizeof(key), "drm-resident-hbm%u", c);
		ASSERT_EQ(0, rbln_fdinfo_size(fd, key, &f->resident_hbm[c]))
		TH_LOG("%s", key);
	}
	ASSERT_EQ(0, rbln_fdinfo_size(fd, "drm-total-memory", &f->total_mem));
	ASSERT_EQ(0,
		  rbln_fdinfo_size(fd, "drm-resident-memory", &f->resident_mem));
	ASSERT_EQ(0, rbln_fdinfo_size(fd, "rbln-pinned-memory", &f->pinned));
}

static void expect_client(struct __test_metadata *_metadata, int fd,
			  __u32 chiplets, const struct client_fig *want,
			  const char *what)
{
	struct client_fig got;

	read_client(_metadata, fd, chiplets, &got);
	for (__u32 c = 0; c < chiplets; c++) {
		EXPECT_EQ(want->total_hbm[c], got.total_hbm[c])
		TH_LOG("%s: drm-total-hbm%u", what, c);
		EXPECT_EQ(want->resident_hbm[c], got.resident_hbm[c])
		TH_LOG("%s: drm-resident-hbm%u", what, c);
	}
	EXPECT_EQ(want->total_mem, got.total_mem)
	TH_LOG("%s: drm-total-memory", what);
	EXPECT_EQ(want->resident_mem, got.resident_mem)
	TH_LOG("%s: drm-resident-memory", what);
	EXPECT_EQ(want->pinned, got.pinned)
	TH_LOG("%s: rbln-pinned-memory", what);
}

TEST_F(stats, fdinfo_counts_exactly_what_the_file_holds)
{
	long pg = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < self->count; i++) {
		__u32 n = self->dev[i].chiplet_count;
		struct client_fig want = { 0 }, zero = { 0 };
		struct drm_rbln_bo_create host, hbm[RBLN_MAX_CHIPLETS];
		struct drm_rbln_bo_userptr up;
		size_t ulen = 16 * pg;
		int other = rbln_open_minor(self->nodes[i].minor);
		void *user, *map;

		ASSERT_LE(0, other);
		expect_client(_metadata, self->fd[i], n, &zero, "new file");

		for (__u32 c = 0; c < n; c++) {
			ASSERT_EQ(0, rbln_bo_create(self->fd[i],
						    (c + 1) * RBLN_SZ_2M,
						    RBLN_REGION_HBM, c, 0,
						    &hbm[c]));
			want.total_hbm[c] = hbm[c].size;
			want.resident_hbm[c] = hbm[c].size;
		}
		expect_client(_metadata, self->fd[i], n, &want, "HBM buffers");

		/* a host buffer is resident once it has pages */
		ASSERT_EQ(0, rbln_bo_create(self->fd[i], RBLN_SZ_1M,
					    RBLN_REGION_HOST, 0, 0, &host));
		want.total_mem += host.size;
		expect_client(_metadata, self->fd[i], n, &want,
			      "host buffer, no pages");
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], host.handle, host.size,
					  PROT_READ | PROT_WRITE, &map));
		memset(map, 1, host.size);
		want.resident_mem += host.size;
		expect_client(_metadata, self->fd[i], n, &want,
			      "host buffer, written");

		user = mmap(NULL, ulen, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		ASSERT_NE(MAP_FAILED, user);
		ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], user, ulen, 0, &up));
		want.total_mem += ulen;
		want.resident_mem += ulen;
		want.pinned += ulen;
		expect_client(_metadata, self->fd[i], n, &want, "userptr");

		/* another client of the card holds nothing */
		expect_client(_metadata, other, n, &zero, "other file");

		ASSERT_EQ(0, rbln_gem_close(self->fd[i], up.handle));
		want.total_mem -= ulen;
		want.resident_mem -= ulen;
		want.pinned = 0;
		expect_client(_metadata, self->fd[i], n, &want,
			      "userptr closed");
		for (__u32 c = 0; c < n; c++) {
			ASSERT_EQ(0, rbln_gem_close(self->fd[i],
						    hbm[c].handle));
			want.total_hbm[c] = 0;
			want.resident_hbm[c] = 0;
		}
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], host.handle));
		/* the mapping keeps the buffer, but not in the file's handles */
		expect_client(_metadata, self->fd[i], n, &zero, "all closed");
		munmap(map, host.size);
		munmap(user, ulen);
		close(other);
	}
}

/* What a child allocates before it dies. */
static int child_allocate(int minor, __u32 chiplets, int ready_fd)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct drm_rbln_bo_create c;
	size_t ulen = 64 * pg;
	void *map, *user;
	int fd = rbln_open_minor(minor);

	if (fd < 0)
		return 10;
	if (rbln_bo_create(fd, 4 * RBLN_SZ_1M, RBLN_REGION_HOST, 0, 0, &c))
		return 11;
	if (rbln_bo_mmap(fd, c.handle, c.size, PROT_READ | PROT_WRITE, &map))
		return 12;
	memset(map, 3, c.size);
	for (__u32 ch = 0; ch < chiplets; ch++) {
		if (rbln_bo_create(fd, 6 * RBLN_SZ_1M, RBLN_REGION_HBM, ch, 0,
				   &c))
			return 13;
		/* one of them also stays mapped */
		if (ch == 0 && rbln_bo_mmap(fd, c.handle, c.size, PROT_READ,
					    &map))
			return 14;
	}
	if (rbln_bo_create(fd, 40960, RBLN_REGION_AUTO, 0, 0, &c))
		return 15;
	user = mmap(NULL, ulen, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (user == MAP_FAILED || rbln_bo_userptr(fd, user, ulen, 0, NULL))
		return 16;
	if (write(ready_fd, "r", 1) != 1)
		return 17;
	return 0;
}

/* Runs the child; @kill: SIGKILL it while it holds everything. */
static void run_child(struct __test_metadata *_metadata, int minor,
		      __u32 chiplets, bool kill_it)
{
	int pipefd[2];
	char c;
	int status;
	pid_t pid;

	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int rc;

		close(pipefd[0]);
		rc = child_allocate(minor, chiplets, pipefd[1]);
		if (rc || !kill_it)
			_exit(rc);
		for (;;)
			pause();
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1)) TH_LOG("the child failed early");
	close(pipefd[0]);
	if (kill_it)
		ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (kill_it) {
		EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	} else {
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("child status 0x%x", status);
	}
}

static void expect_back_to(struct __test_metadata *_metadata, int fd,
			   const struct drm_rbln_info_mem *m0, const char *what)
{
	struct drm_rbln_info_mem m;

	ASSERT_EQ(0, rbln_info_mem(fd, &m));
	EXPECT_EQ(m0->host_bytes, m.host_bytes) TH_LOG("%s: host bytes", what);
	EXPECT_EQ(m0->pinned_bytes, m.pinned_bytes)
	TH_LOG("%s: pinned bytes", what);
	for (__u32 c = 0; c < m.chiplet_count; c++) {
		EXPECT_EQ(m0->chiplet[c].used_bytes, m.chiplet[c].used_bytes)
		TH_LOG("%s: chiplet %u used", what, c);
	}
}

TEST_F(stats, exiting_process_frees_all_its_buffers)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m0;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		for (int k = 0; k < 3; k++) {
			run_child(_metadata, self->nodes[i].minor,
				  self->dev[i].chiplet_count, false);
			expect_back_to(_metadata, self->fd[i], &m0,
				       "after exit");
		}
	}
}

TEST_F(stats, killed_process_frees_all_its_buffers)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_mem m0;

		ASSERT_EQ(0, rbln_info_mem(self->fd[i], &m0));
		for (int k = 0; k < 3; k++) {
			run_child(_metadata, self->nodes[i].minor,
				  self->dev[i].chiplet_count, true);
			expect_back_to(_metadata, self->fd[i], &m0,
				       "after SIGKILL");
		}
	}
}

TEST_HARNESS_MAIN
