// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_isolation_test - one client of a card cannot reach another's
 * buffers: not by handle, not by mmap offset, not by device VA.
 *
 * Pins: client B gets -ENOENT from BO_INFO and -EINVAL from GEM_CLOSE for a
 * handle of client A, and A's buffer is untouched; mmap of A's offset on
 * B's file is -EACCES (DRM's per-file vma-node check); A's device VA used
 * in B's address space faults in B's VM only; with buffers at the same VA
 * in both VMs each address space reaches its own memory; a child process
 * that opens the card is a client of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
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

FIXTURE(iso)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int a[RBLN_MAX_TEST_CARDS];
	int b[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_vm va[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_vm vb[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
};

FIXTURE_SETUP(iso)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++) {
		self->a[i] = -1;
		self->b[i] = -1;
	}
	self->count = rbln_require_nodes(_metadata, self->nodes);
	for (int i = 0; i < self->count; i++) {
		self->a[i] = rbln_open_minor(self->nodes[i].minor);
		self->b[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->a[i]);
		ASSERT_LE(0, self->b[i]);
		ASSERT_EQ(0, rbln_info_vm(self->a[i], &self->va[i]));
		ASSERT_EQ(0, rbln_info_vm(self->b[i], &self->vb[i]));
		ASSERT_EQ(0, rbln_info_device(self->a[i], &self->dev[i]));
		ASSERT_NE(self->va[i].asid, self->vb[i].asid)
		TH_LOG("two open files share address space %u",
		       self->va[i].asid);
	}
}

FIXTURE_TEARDOWN(iso)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++) {
		if (self->a[i] >= 0)
			close(self->a[i]);
		if (self->b[i] >= 0)
			close(self->b[i]);
	}
}

/* One buffer of each creatable kind in @fd. */
static int make_bufs(struct __test_metadata *_metadata, int fd,
		     const struct drm_rbln_info_device *dev,
		     struct drm_rbln_bo_create *c)
{
	int n = 0;

	ASSERT_EQ(0, rbln_bo_create(fd, 8192, RBLN_REGION_HOST, 0, 0, &c[n]));
	n++;
	for (__u32 ch = 0; ch < dev->chiplet_count; ch++) {
		ASSERT_EQ(0, rbln_bo_create(fd, 8192, RBLN_REGION_HBM, ch, 0,
					    &c[n]));
		n++;
	}
	return n;
}

TEST_F(iso, other_client_cannot_use_a_handle)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c[RBLN_MAX_CHIPLETS + 1];
		int n = make_bufs(_metadata, self->a[i], &self->dev[i], c);

		/* B has no buffer: none of A's handles means anything there */
		for (int k = 0; k < n; k++) {
			struct drm_rbln_bo_info info;

			EXPECT_EQ(-ENOENT, rbln_bo_info(self->b[i], c[k].handle,
							&info))
			TH_LOG("B: BO_INFO of A's handle %u", c[k].handle);
			EXPECT_EQ(-EINVAL,
				  rbln_gem_close(self->b[i], c[k].handle))
			TH_LOG("B: GEM_CLOSE of A's handle %u", c[k].handle);
			ASSERT_EQ(0, rbln_bo_info(self->a[i], c[k].handle,
						  &info))
			TH_LOG("A lost handle %u", c[k].handle);
			EXPECT_EQ(c[k].device_va, info.device_va);
			EXPECT_EQ(c[k].size, info.size);
		}
	}
}

TEST_F(iso, other_client_cannot_mmap_a_buffer_offset)
{
	long pg = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c[RBLN_MAX_CHIPLETS + 1];
		int n = make_bufs(_metadata, self->a[i], &self->dev[i], c);

		for (int k = 0; k < n; k++) {
			struct drm_rbln_bo_info info;
			void *map;

			ASSERT_EQ(0, rbln_bo_info(self->a[i], c[k].handle,
						  &info));
			errno = 0;
			map = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED,
				   self->b[i], (off_t)info.mmap_offset);
			EXPECT_EQ(MAP_FAILED, map)
			TH_LOG("B mapped A's buffer %d", k);
			EXPECT_EQ(EACCES, errno)
			TH_LOG("B: mmap of A's offset: %s", strerror(errno));
			if (map != MAP_FAILED)
				munmap(map, pg);
			/* A itself can */
			map = mmap(NULL, pg, PROT_READ, MAP_SHARED, self->a[i],
				   (off_t)info.mmap_offset);
			EXPECT_NE(MAP_FAILED, map) TH_LOG("%s", strerror(errno));
			if (map != MAP_FAILED)
				munmap(map, pg);
		}
	}
}

TEST_F(iso, va_of_one_client_faults_in_the_other_clients_vm_only)
{
	if (self->count && !rbln_require_root(_metadata))
		return;
	for (int i = 0; i < self->count; i++) {
		int vfd = rbln_require_vm_access(_metadata, self->nodes[i].bdf);
		struct drm_rbln_bo_create c[RBLN_MAX_CHIPLETS + 1];
		unsigned char buf[16];
		int n;

		if (vfd < 0)
			return;
		n = make_bufs(_metadata, self->a[i], &self->dev[i], c);
		for (int k = 0; k < n; k++) {
			rbln_card_writes(_metadata, vfd, self->va[i].asid,
					 c[k].device_va, c[k].size, 20 + k, 0,
					 "A");
			EXPECT_EQ(-EFAULT, rbln_vm_read(vfd, self->vb[i].asid,
							c[k].device_va, buf,
							sizeof(buf)))
			TH_LOG("A's VA 0x%llx in B's asid",
			       (unsigned long long)c[k].device_va);
		}
		rbln_expect_fault(_metadata, self->b[i], n, c[0].device_va,
				  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED, "B");
		rbln_expect_no_fault(_metadata, self->a[i], "A");
		for (int k = 0; k < n; k++)
			rbln_expect_card_sees(_metadata, vfd, self->va[i].asid,
					      c[k].device_va, c[k].size, 20 + k,
					      0, "A after B faulted");
		close(vfd);
	}
}

TEST_F(iso, same_va_in_two_vms_reaches_two_buffers)
{
	if (self->count && !rbln_require_root(_metadata))
		return;
	for (int i = 0; i < self->count; i++) {
		int vfd = rbln_require_vm_access(_metadata, self->nodes[i].bdf);
		struct drm_rbln_bo_create ca[RBLN_MAX_CHIPLETS + 1];
		struct drm_rbln_bo_create cb[RBLN_MAX_CHIPLETS + 1];
		int same = 0, n;

		if (vfd < 0)
			return;
		/* the same requests in two empty VMs */
		n = make_bufs(_metadata, self->a[i], &self->dev[i], ca);
		make_bufs(_metadata, self->b[i], &self->dev[i], cb);
		for (int k = 0; k < n; k++) {
			rbln_card_writes(_metadata, vfd, self->va[i].asid,
					 ca[k].device_va, ca[k].size, 30 + k, 0,
					 "A");
			rbln_card_writes(_metadata, vfd, self->vb[i].asid,
					 cb[k].device_va, cb[k].size, 130 + k,
					 0, "B");
			same += ca[k].device_va == cb[k].device_va;
		}
		TH_LOG("card %d: %d of %d buffers at the same VA in A and B", i,
		       same, n);
		for (int k = 0; k < n; k++) {
			rbln_expect_card_sees(_metadata, vfd, self->va[i].asid,
					      ca[k].device_va, ca[k].size,
					      30 + k, 0, "A");
			rbln_expect_card_sees(_metadata, vfd, self->vb[i].asid,
					      cb[k].device_va, cb[k].size,
					      130 + k, 0, "B");
		}
		rbln_expect_no_fault(_metadata, self->a[i], "A");
		rbln_expect_no_fault(_metadata, self->b[i], "B");
		close(vfd);
	}
}

TEST_F(iso, child_process_is_a_client_of_its_own)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		int status;
		pid_t pid;

		ASSERT_EQ(0, rbln_bo_create(self->a[i], 4096, RBLN_REGION_HBM,
					    0, 0, &c));
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			struct drm_rbln_bo_info info;
			struct drm_rbln_info_vm vm;
			int fd = rbln_open_minor(self->nodes[i].minor);

			if (fd < 0 || rbln_info_vm(fd, &vm))
				_exit(1);
			if (vm.asid == self->va[i].asid ||
			    vm.asid == self->vb[i].asid)
				_exit(2);
			if (rbln_bo_info(fd, c.handle, &info) != -ENOENT)
				_exit(3);
			_exit(0);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("child status 0x%x", status);
	}
}

TEST_HARNESS_MAIN
