// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_coherence_test - what the CPU writes into a buffer the card reads at
 * the buffer's device VA, and what the card writes the CPU sees, for host,
 * HBM (every chiplet) and userptr buffers, on every card.
 *
 * The card side is the root-only debugfs file vm_access of the card
 * ("r <asid> <va> <len>" / "w <asid> <va> <len>" + data), which makes the
 * card access the VA through its MMU and the VM's page tables.  Ranges
 * cross 4 KiB pages and, in HBM buffers of several 2 MiB pages, 2 MiB
 * pages.  Also pinned here: the request format of vm_access (malformed
 * requests are -EINVAL and fault nothing) and that it needs CAP_SYS_ADMIN.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
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
#include "rbln_mem_ksft.h"

FIXTURE(coh)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	int vfd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_vm vm[RBLN_MAX_TEST_CARDS];
	long pg;
};

FIXTURE_SETUP(coh)
{
	self->pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++) {
		self->fd[i] = -1;
		self->vfd[i] = -1;
	}
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (self->count && !rbln_require_root(_metadata)) {
		self->count = 0;
		return;
	}
	for (int i = 0; i < self->count; i++) {
		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i]);
		ASSERT_EQ(0, rbln_info_device(self->fd[i], &self->dev[i]));
		ASSERT_EQ(0, rbln_info_vm(self->fd[i], &self->vm[i]));
		self->vfd[i] = rbln_require_vm_access(_metadata,
						      self->nodes[i].bdf);
		if (self->vfd[i] < 0) {
			self->count = 0;
			return;
		}
	}
}

FIXTURE_TEARDOWN(coh)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++) {
		if (self->fd[i] >= 0)
			close(self->fd[i]);
		if (self->vfd[i] >= 0)
			close(self->vfd[i]);
	}
}

/* Ranges (offset, length) inside a buffer of @size that cross pages. */
struct span {
	__u64 off;
	__u32 len;
};

static int crossing_spans(__u64 size, struct span *s)
{
	int n = 0;

	s[n++] = (struct span){ 0, 1 };
	s[n++] = (struct span){ 4096 - 7, 16 };
	s[n++] = (struct span){ 100, 4096 };
	s[n++] = (struct span){ 4095, 2 };
	s[n++] = (struct span){ size - 4096, 4096 };
	s[n++] = (struct span){ size - 1, 1 };
	if (size > 2 * RBLN_SZ_2M) {
		s[n++] = (struct span){ RBLN_SZ_2M - 5, 10 };
		s[n++] = (struct span){ RBLN_SZ_2M - 2048, 4096 };
		s[n++] = (struct span){ 2 * RBLN_SZ_2M - 1, 4096 };
	}
	return n;
}

/*
 * CPU writes the whole buffer through @map; the card reads all of it and
 * the crossing spans; then the card writes the spans with a second
 * pattern and the CPU sees exactly those bytes changed.
 */
static void both_ways(struct __test_metadata *_metadata, int vfd, __u32 asid,
		      __u64 va, unsigned char *map, __u64 size, __u32 seed,
		      const char *what)
{
	struct span sp[16];
	int n = crossing_spans(size, sp);
	__u32 seed2 = seed + 1;

	rbln_pattern_fill(map, size, seed, 0);
	rbln_cpu_flush();
	rbln_expect_card_sees(_metadata, vfd, asid, va, size, seed, 0, what);
	for (int k = 0; k < n; k++)
		rbln_expect_card_sees(_metadata, vfd, asid, va + sp[k].off,
				      sp[k].len, seed, sp[k].off, what);

	for (int k = 0; k < n; k++)
		rbln_card_writes(_metadata, vfd, asid, va + sp[k].off,
				 sp[k].len, seed2, sp[k].off, what);
	/* expected bytes: seed2 inside the spans, seed elsewhere */
	for (__u64 off = 0; off < size; off++) {
		bool in = false;
		unsigned char want;

		for (int k = 0; k < n && !in; k++)
			in = off >= sp[k].off && off < sp[k].off + sp[k].len;
		want = rbln_pattern_byte(in ? seed2 : seed, off);
		if (map[off] != want) {
			EXPECT_EQ(want, map[off])
			TH_LOG("%s: CPU reads 0x%02x at offset 0x%llx after the card wrote",
			       what, map[off], (unsigned long long)off);
			break;
		}
	}
}

TEST_F(coh, host_buffer_both_ways)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		void *map;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 7 * RBLN_SZ_4K + 300,
					    RBLN_REGION_HOST, 0, 0, &c));
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, c.size,
					  PROT_READ | PROT_WRITE, &map));
		both_ways(_metadata, self->vfd[i], self->vm[i].asid,
			  c.device_va, map, c.size, 40 + i, "host");
		munmap(map, c.size);
		rbln_expect_no_fault(_metadata, self->fd[i], "host");
	}
}

TEST_F(coh, host_buffer_first_used_by_the_card)
{
	/* the card writes before the CPU ever mapped the buffer */
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		void *map;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 5 * RBLN_SZ_4K,
					    RBLN_REGION_HOST, 0, 0, &c));
		/* fresh host memory is zero for the card too */
		{
			unsigned char z[4096];

			memset(z, 0xee, sizeof(z));
			ASSERT_EQ(0, rbln_vm_read(self->vfd[i],
						  self->vm[i].asid,
						  c.device_va + 4096, z,
						  sizeof(z)));
			EXPECT_EQ(-1, rbln_first_nonzero(z, sizeof(z)));
		}
		rbln_card_writes(_metadata, self->vfd[i], self->vm[i].asid,
				 c.device_va, c.size, 50 + i, 0, "host");
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, c.size,
					  PROT_READ, &map));
		EXPECT_EQ(-1, rbln_pattern_check(map, c.size, 50 + i, 0));
		munmap(map, c.size);
	}
}

TEST_F(coh, hbm_buffer_both_ways_on_every_chiplet)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			struct drm_rbln_bo_create c;
			char what[32];
			void *map;

			snprintf(what, sizeof(what), "HBM chiplet %u", ch);
			ASSERT_EQ(0, rbln_bo_create(self->fd[i],
						    9 * RBLN_SZ_4K,
						    RBLN_REGION_HBM, ch, 0,
						    &c));
			ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle,
						  c.size,
						  PROT_READ | PROT_WRITE,
						  &map));
			both_ways(_metadata, self->vfd[i], self->vm[i].asid,
				  c.device_va, map, c.size, 60 + ch, what);
			munmap(map, c.size);
		}
}

TEST_F_TIMEOUT(coh, hbm_buffer_of_several_2m_pages_both_ways, 300)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			struct drm_rbln_bo_create c;
			char what[32];
			void *map;

			snprintf(what, sizeof(what), "6 MiB HBM chiplet %u", ch);
			ASSERT_EQ(0, rbln_bo_create(self->fd[i],
						    2 * RBLN_SZ_2M + 4096,
						    RBLN_REGION_HBM, ch, 0,
						    &c));
			ASSERT_EQ(3 * RBLN_SZ_2M, c.size);
			ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle,
						  c.size,
						  PROT_READ | PROT_WRITE,
						  &map));
			both_ways(_metadata, self->vfd[i], self->vm[i].asid,
				  c.device_va, map, c.size, 70 + ch, what);
			munmap(map, c.size);
		}
}

TEST_F(coh, new_hbm_is_zero_for_the_card)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 ch = 0; ch < self->dev[i].chiplet_count; ch++) {
			struct drm_rbln_bo_create c;
			unsigned char buf[4096];
			void *map;

			/* dirty, free, allocate again: the card reads zero */
			for (int round = 0; round < 2; round++) {
				ASSERT_EQ(0, rbln_bo_create(self->fd[i],
							    4 * RBLN_SZ_4K,
							    RBLN_REGION_HBM,
							    ch, 0, &c));
				for (int p = 0; p < 4; p++) {
					memset(buf, 0xcc, sizeof(buf));
					ASSERT_EQ(0,
						  rbln_vm_read(self->vfd[i],
							       self->vm[i].asid,
							       c.device_va +
								       p * 4096,
							       buf,
							       sizeof(buf)));
					EXPECT_EQ(-1, rbln_first_nonzero(buf,
									 sizeof(buf)))
					TH_LOG("chiplet %u page %d round %d",
					       ch, p, round);
				}
				ASSERT_EQ(0, rbln_bo_mmap(self->fd[i],
							  c.handle, c.size,
							  PROT_WRITE, &map));
				memset(map, 0x77, c.size);
				munmap(map, c.size);
				ASSERT_EQ(0, rbln_gem_close(self->fd[i],
							    c.handle));
			}
		}
}

TEST_F(coh, userptr_buffer_both_ways)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 6 * self->pg;
		struct drm_rbln_bo_userptr up;
		unsigned char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_NE(MAP_FAILED, mem);
		memset(mem, 0, len);
		ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], mem, len, 0, &up));
		both_ways(_metadata, self->vfd[i], self->vm[i].asid,
			  up.device_va, mem, len, 80 + i, "userptr");
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], up.handle));
		munmap(mem, len);
	}
}

TEST_F(coh, read_only_userptr_is_read_by_the_card)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 3 * self->pg;
		struct drm_rbln_bo_userptr up;
		unsigned char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_NE(MAP_FAILED, mem);
		rbln_pattern_fill(mem, len, 90 + i, 0);
		ASSERT_EQ(0, mprotect(mem, len, PROT_READ));
		ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], mem, len,
					     RBLN_USERPTR_READ_ONLY, &up));
		rbln_expect_card_sees(_metadata, self->vfd[i], self->vm[i].asid,
				      up.device_va, len, 90 + i, 0,
				      "read-only userptr");
		rbln_expect_card_sees(_metadata, self->vfd[i], self->vm[i].asid,
				      up.device_va + self->pg - 3, 7, 90 + i,
				      self->pg - 3, "read-only userptr");
		munmap(mem, len);
	}
}

TEST_F(coh, buffers_next_to_each_other_keep_their_own_bytes)
{
	/* many small buffers: every one reads its own pattern */
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c[24];

		for (int k = 0; k < 24; k++) {
			__u32 region = k % 2 ? RBLN_REGION_HOST :
					       RBLN_REGION_HBM;
			__u32 ch = region == RBLN_REGION_HBM ?
					   (__u32)k % self->dev[i].chiplet_count :
					   0;

			ASSERT_EQ(0, rbln_bo_create(self->fd[i], 4096, region,
						    ch, 0, &c[k]));
			rbln_card_writes(_metadata, self->vfd[i],
					 self->vm[i].asid, c[k].device_va, 4096,
					 100 + k, 0, "small buffer");
		}
		for (int k = 0; k < 24; k++)
			rbln_expect_card_sees(_metadata, self->vfd[i],
					      self->vm[i].asid, c[k].device_va,
					      4096, 100 + k, 0, "small buffer");
		rbln_expect_no_fault(_metadata, self->fd[i], "small buffers");
	}
}

/* ---- the vm_access request format ---------------------------------------- */

TEST_F(coh, malformed_requests_are_einval_and_fault_nothing)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		char req[8192];
		const char *bad[8];
		int nbad = 0;
		__u32 a = self->vm[i].asid;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 8192, RBLN_REGION_HBM,
					    0, 0, &c));
		snprintf(req, sizeof(req), "r %u 0x%llx 4", a,
			 (unsigned long long)c.device_va);
		/* header lines that must be refused */
		bad[nbad++] = "x 1 0x100000000 4\n";
		bad[nbad++] = "r\n";
		bad[nbad++] = "r 1 0x100000000\n";
		bad[nbad++] = "r one 0x100000000 4\n";
		bad[nbad++] = "\n";
		for (int k = 0; k < nbad; k++) {
			EXPECT_EQ(-EINVAL, rbln_vm_request(self->vfd[i], bad[k],
							   strlen(bad[k])))
			TH_LOG("request \"%s\"", bad[k]);
		}
		/* no newline */
		EXPECT_EQ(-EINVAL,
			  rbln_vm_request(self->vfd[i], req, strlen(req)));
		/* len 0 and len past 4096 */
		snprintf(req, sizeof(req), "r %u 0x%llx 0\n", a,
			 (unsigned long long)c.device_va);
		EXPECT_EQ(-EINVAL,
			  rbln_vm_request(self->vfd[i], req, strlen(req)));
		snprintf(req, sizeof(req), "r %u 0x%llx 4097\n", a,
			 (unsigned long long)c.device_va);
		EXPECT_EQ(-EINVAL,
			  rbln_vm_request(self->vfd[i], req, strlen(req)));
		/* a read with data after the header */
		snprintf(req, sizeof(req), "r %u 0x%llx 4\nabcd", a,
			 (unsigned long long)c.device_va);
		EXPECT_EQ(-EINVAL,
			  rbln_vm_request(self->vfd[i], req, strlen(req)));
		/* a write with fewer and with more bytes than announced */
		snprintf(req, sizeof(req), "w %u 0x%llx 8\nabcd", a,
			 (unsigned long long)c.device_va);
		EXPECT_EQ(-EINVAL,
			  rbln_vm_request(self->vfd[i], req, strlen(req)));
		snprintf(req, sizeof(req), "w %u 0x%llx 2\nabcd", a,
			 (unsigned long long)c.device_va);
		EXPECT_EQ(-EINVAL,
			  rbln_vm_request(self->vfd[i], req, strlen(req)));
		snprintf(req, sizeof(req), "w %u 0x%llx 4097\n", a,
			 (unsigned long long)c.device_va);
		memset(req + strlen(req), 'z', 4097);
		EXPECT_EQ(-EINVAL, rbln_vm_request(self->vfd[i], req,
						   strlen(req) + 4097));
		/* none of that reached the card or wrote the buffer */
		rbln_expect_no_fault(_metadata, self->fd[i], "malformed");
		{
			unsigned char z[8192];

			memset(z, 1, sizeof(z));
			ASSERT_EQ(0, rbln_vm_read_all(self->vfd[i], a,
						      c.device_va, z,
						      sizeof(z)));
			EXPECT_EQ(-1, rbln_first_nonzero(z, sizeof(z)));
		}
	}
}

/* Sends @req (a read of 8 bytes at offset 16); true if it read them. */
static bool read_req_works(struct __test_metadata *_metadata, int vfd,
			   const char *req)
{
	unsigned char buf[8];
	long n = rbln_vm_request(vfd, req, strlen(req));

	TH_LOG("\"%.*s\": %s", (int)strlen(req) - 1, req,
	       n < 0 ? strerror((int)-n) : "ok");
	if (n != (long)strlen(req))
		return false;
	return read(vfd, buf, sizeof(buf)) == 8 &&
	       rbln_pattern_check(buf, 8, 5, 16) == -1;
}

TEST_F(coh, numbers_in_c_notation_are_accepted_in_every_field)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		unsigned long long va;
		__u32 asid = self->vm[i].asid;
		char req[128];

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 4096, RBLN_REGION_HBM,
					    0, 0, &c));
		va = c.device_va + 16;
		rbln_card_writes(_metadata, self->vfd[i], asid, c.device_va,
				 4096, 5, 0, "numbers");
		snprintf(req, sizeof(req), "r %u 0x%llx 8\n", asid, va);
		EXPECT_TRUE(read_req_works(_metadata, self->vfd[i], req));
		snprintf(req, sizeof(req), "r %u %llu 8\n", asid, va);
		EXPECT_TRUE(read_req_works(_metadata, self->vfd[i], req));
		snprintf(req, sizeof(req), "r %u 0%llo 8\n", asid, va);
		EXPECT_TRUE(read_req_works(_metadata, self->vfd[i], req));
		snprintf(req, sizeof(req), "r %u 0x%llx 0x8\n", asid, va);
		EXPECT_TRUE(read_req_works(_metadata, self->vfd[i], req))
		TH_LOG("length in hex");
		snprintf(req, sizeof(req), "r 0x%x 0x%llx 8\n", asid, va);
		EXPECT_TRUE(read_req_works(_metadata, self->vfd[i], req))
		TH_LOG("asid in hex");
	}
}

TEST_F(coh, read_returns_the_bytes_of_the_last_read_request_only)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		unsigned char buf[64];
		char req[128];
		int n;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 4096, RBLN_REGION_HBM,
					    0, 0, &c));
		/* nothing asked yet: nothing to read */
		EXPECT_EQ(0, read(self->vfd[i], buf, sizeof(buf)));
		rbln_card_writes(_metadata, self->vfd[i], self->vm[i].asid,
				 c.device_va, 64, 6, 0, "read");
		/* a write leaves nothing to read */
		EXPECT_EQ(0, read(self->vfd[i], buf, sizeof(buf)));
		n = snprintf(req, sizeof(req), "r %u 0x%llx 32\n",
			     self->vm[i].asid, (unsigned long long)c.device_va);
		ASSERT_EQ(n, rbln_vm_request(self->vfd[i], req, n));
		/* up to len: a larger read() gets 32 bytes */
		EXPECT_EQ(32, read(self->vfd[i], buf, sizeof(buf)));
		EXPECT_EQ(-1, rbln_pattern_check(buf, 32, 6, 0));
	}
}

TEST_F(coh, vm_access_needs_cap_sys_admin)
{
	for (int i = 0; i < self->count; i++) {
		int status;
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (pid == 0) {
			int fd;

			if (rbln_drop_cap(CAP_SYS_ADMIN))
				_exit(2);
			fd = rbln_vm_access_open(self->nodes[i].bdf);
			_exit(fd == -EPERM ? 0 : 1);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("open without CAP_SYS_ADMIN was not -EPERM (status 0x%x)",
		       status);
	}
}

TEST_HARNESS_MAIN
