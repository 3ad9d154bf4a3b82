// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_mmu_fault_test - the card's MMU enforces the buffers' permissions
 * and the VM's layout, and every fault is reported where it belongs.
 *
 * Card accesses go through the root-only debugfs vm_access file.  Pins:
 * a card write to an RBLN_BO_DEVICE_READ_ONLY buffer (host or HBM) or an
 * RBLN_USERPTR_READ_ONLY buffer is -EFAULT, moves no byte and is reported
 * as RBLN_MMU_NO_WRITE / RBLN_ACCESS_WRITE at the first byte; card reads of
 * them work; the VA of a closed buffer, a VA never mapped, the first byte
 * after a buffer and a VA beyond 48 bits fault (NOT_MAPPED, BAD_VA);
 * RBLN_INFO_VM keeps RBLN_VM_FAULTED and the first fault, counts every
 * fault, and fdinfo rbln-mmu-faults says the same; another open file of
 * the card has no fault and keeps working.
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
#include "rbln_mem_ksft.h"

FIXTURE(mmu)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int vfd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
	long pg;
};

FIXTURE_SETUP(mmu)
{
	self->pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->vfd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (self->count && !rbln_require_root(_metadata)) {
		self->count = 0;
		return;
	}
	for (int i = 0; i < self->count; i++) {
		int fd = rbln_open_minor(self->nodes[i].minor);

		ASSERT_LE(0, fd);
		ASSERT_EQ(0, rbln_info_device(fd, &self->dev[i]));
		close(fd);
		self->vfd[i] = rbln_require_vm_access(_metadata,
						      self->nodes[i].bdf);
		if (self->vfd[i] < 0) {
			self->count = 0;
			return;
		}
	}
}

FIXTURE_TEARDOWN(mmu)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->vfd[i] >= 0)
			close(self->vfd[i]);
}

/* A new open file (a new VM) of card @i, with its VM described in @vm. */
static int new_file(struct __test_metadata *_metadata,
		    const struct rbln_node *node, struct drm_rbln_info_vm *vm)
{
	int fd = rbln_open_minor(node->minor);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, rbln_info_vm(fd, vm));
	ASSERT_LE(1, vm->asid);
	ASSERT_GT(4096, vm->asid);
	return fd;
}

/*
 * A read-only buffer at @va, filled by the CPU with @seed: the card reads
 * it, a card write at @va + @off faults NO_WRITE and changes nothing.
 */
static void expect_read_only(struct __test_metadata *_metadata, int fd,
			     int vfd, __u32 asid, __u64 va, size_t size,
			     __u32 seed, size_t off, const char *what)
{
	unsigned char junk[64];

	rbln_expect_card_sees(_metadata, vfd, asid, va, size, seed, 0, what);
	rbln_expect_no_fault(_metadata, fd, what);
	memset(junk, 0xd7, sizeof(junk));
	EXPECT_EQ(-EFAULT, rbln_vm_write(vfd, asid, va + off, junk,
					 sizeof(junk)))
	TH_LOG("%s: card write to a read-only buffer", what);
	EXPECT_EQ(-EFAULT, rbln_vm_write(vfd, asid, va, junk, 1))
	TH_LOG("%s: one-byte card write to a read-only buffer", what);
	rbln_expect_fault(_metadata, fd, 2, va + off, RBLN_ACCESS_WRITE,
			  RBLN_MMU_NO_WRITE, what);
	/* nothing moved; reads still work */
	rbln_expect_card_sees(_metadata, vfd, asid, va, size, seed, 0, what);
}

TEST_F(mmu, card_cannot_write_read_only_host_and_hbm_buffers)
{
	for (int i = 0; i < self->count; i++) {
		for (__u32 k = 0; k <= self->dev[i].chiplet_count; k++) {
			/* k == 0: host; k > 0: HBM of chiplet k - 1 */
			__u32 region = k ? RBLN_REGION_HBM : RBLN_REGION_HOST;
			__u32 ch = k ? k - 1 : 0;
			struct drm_rbln_info_vm vm;
			struct drm_rbln_bo_create c;
			int fd = new_file(_metadata, &self->nodes[i], &vm);
			char what[48];
			void *map;

			snprintf(what, sizeof(what), "card %d %s %u", i,
				 k ? "HBM chiplet" : "host", ch);
			ASSERT_EQ(0, rbln_bo_create(fd, 3 * self->pg, region,
						    ch,
						    RBLN_BO_DEVICE_READ_ONLY,
						    &c));
			ASSERT_EQ(0, rbln_bo_mmap(fd, c.handle, c.size,
						  PROT_READ | PROT_WRITE,
						  &map));
			/* the CPU may write it: only the card may not */
			rbln_pattern_fill(map, c.size, 3 + k, 0);
			rbln_cpu_flush();
			expect_read_only(_metadata, fd, self->vfd[i], vm.asid,
					 c.device_va, c.size, 3 + k,
					 self->pg + 40, what);
			EXPECT_EQ(-1, rbln_pattern_check(map, c.size, 3 + k, 0))
			TH_LOG("%s: the CPU sees a change", what);
			munmap(map, c.size);
			close(fd);
		}
	}
}

TEST_F(mmu, card_cannot_write_read_only_userptr)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 4 * self->pg;
		struct drm_rbln_info_vm vm;
		struct drm_rbln_bo_userptr up;
		int fd = new_file(_metadata, &self->nodes[i], &vm);
		unsigned char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_NE(MAP_FAILED, mem);
		rbln_pattern_fill(mem, len, 9, 0);
		ASSERT_EQ(0, rbln_bo_userptr(fd, mem, len,
					     RBLN_USERPTR_READ_ONLY, &up));
		expect_read_only(_metadata, fd, self->vfd[i], vm.asid,
				 up.device_va, len, 9, 2 * self->pg + 1,
				 "read-only userptr");
		EXPECT_EQ(-1, rbln_pattern_check(mem, len, 9, 0));
		munmap(mem, len);
		close(fd);
	}
}

TEST_F(mmu, va_of_a_closed_buffer_faults_not_mapped)
{
	for (int i = 0; i < self->count; i++) {
		for (__u32 k = 0; k <= self->dev[i].chiplet_count + 1; k++) {
			/* host, HBM of each chiplet, userptr */
			struct drm_rbln_info_vm vm;
			int fd = new_file(_metadata, &self->nodes[i], &vm);
			unsigned char buf[16];
			__u32 handle;
			__u64 va;
			void *mem = NULL;
			char what[48];

			snprintf(what, sizeof(what), "card %d kind %u", i, k);
			if (k <= self->dev[i].chiplet_count) {
				struct drm_rbln_bo_create c;

				ASSERT_EQ(0, rbln_bo_create(fd, 2 * self->pg,
							    k ? RBLN_REGION_HBM :
								RBLN_REGION_HOST,
							    k ? k - 1 : 0, 0,
							    &c));
				handle = c.handle;
				va = c.device_va;
			} else {
				struct drm_rbln_bo_userptr up;

				mem = mmap(NULL, 2 * self->pg,
					   PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS |
						   MAP_POPULATE,
					   -1, 0);
				ASSERT_NE(MAP_FAILED, mem);
				ASSERT_EQ(0, rbln_bo_userptr(fd, mem,
							     2 * self->pg, 0,
							     &up));
				handle = up.handle;
				va = up.device_va;
			}
			/* used by the card, so its translation may be cached */
			ASSERT_EQ(0, rbln_vm_read(self->vfd[i], vm.asid,
						  va + self->pg, buf,
						  sizeof(buf)))
			TH_LOG("%s", what);
			ASSERT_EQ(0, rbln_gem_close(fd, handle));
			EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid,
							va + self->pg, buf,
							sizeof(buf)))
			TH_LOG("%s: card read after GEM_CLOSE", what);
			rbln_expect_fault(_metadata, fd, 1, va + self->pg,
					  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED,
					  what);
			EXPECT_EQ(-EFAULT, rbln_vm_write(self->vfd[i], vm.asid,
							 va, buf, sizeof(buf)))
			TH_LOG("%s: card write after GEM_CLOSE", what);
			rbln_expect_fault(_metadata, fd, 2, va + self->pg,
					  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED,
					  what);
			if (mem)
				munmap(mem, 2 * self->pg);
			close(fd);
		}
	}
}

TEST_F(mmu, never_mapped_vas_fault_not_mapped)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm vm;
		int fd = new_file(_metadata, &self->nodes[i], &vm);
		const __u64 vas[] = { vm.va_start, vm.va_start + 0x123456,
				      (vm.va_start + vm.va_end) / 2,
				      vm.va_end - 8, 0x1000, 0 };
		unsigned char buf[8];

		for (size_t k = 0; k < ARRAY_SIZE(vas); k++) {
			EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid,
							vas[k], buf,
							sizeof(buf)))
			TH_LOG("VA 0x%llx", (unsigned long long)vas[k]);
		}
		rbln_expect_fault(_metadata, fd, ARRAY_SIZE(vas), vm.va_start,
				  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED,
				  "empty VM");
		close(fd);

		/* a write as the first fault */
		fd = new_file(_metadata, &self->nodes[i], &vm);
		memset(buf, 1, sizeof(buf));
		EXPECT_EQ(-EFAULT, rbln_vm_write(self->vfd[i], vm.asid,
						 vm.va_start + 0x5000, buf,
						 sizeof(buf)));
		rbln_expect_fault(_metadata, fd, 1, vm.va_start + 0x5000,
				  RBLN_ACCESS_WRITE, RBLN_MMU_NOT_MAPPED,
				  "write to an empty VM");
		close(fd);
	}
}

TEST_F(mmu, access_running_off_the_end_of_a_buffer_faults_and_moves_nothing)
{
	for (int i = 0; i < self->count; i++) {
		for (int k = 0; k < 2; k++) {
			struct drm_rbln_info_vm vm;
			struct drm_rbln_bo_create c;
			int fd = new_file(_metadata, &self->nodes[i], &vm);
			unsigned char buf[64];
			__u64 end;

			/* the only buffer of the VM: nothing follows it */
			ASSERT_EQ(0, rbln_bo_create(fd, 2 * self->pg,
						    k ? RBLN_REGION_HBM :
							RBLN_REGION_HOST,
						    0, 0, &c));
			end = c.device_va + c.size;
			rbln_card_writes(_metadata, self->vfd[i], vm.asid,
					 c.device_va, c.size, 12, 0, "fill");
			memset(buf, 0xee, sizeof(buf));
			EXPECT_EQ(-EFAULT, rbln_vm_write(self->vfd[i], vm.asid,
							 end - 32, buf,
							 sizeof(buf)));
			EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid,
							end - 32, buf,
							sizeof(buf)));
			rbln_expect_fault(_metadata, fd, 2, end,
					  RBLN_ACCESS_WRITE,
					  RBLN_MMU_NOT_MAPPED,
					  "write across the end");
			/* the 32 bytes inside were not written */
			rbln_expect_card_sees(_metadata, self->vfd[i], vm.asid,
					      c.device_va, c.size, 12, 0,
					      "after the faulting write");
			close(fd);
		}
	}
}

TEST_F(mmu, fault_count_counts_every_fault_and_the_first_is_kept)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm vm;
		struct drm_rbln_bo_create c;
		int fd = new_file(_metadata, &self->nodes[i], &vm);
		unsigned char buf[16] = { 0 };
		__u64 first = vm.va_end - 4 * RBLN_SZ_2M;

		ASSERT_EQ(0, rbln_bo_create(fd, 4096, RBLN_REGION_HBM, 0,
					    RBLN_BO_DEVICE_READ_ONLY, &c));
		EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid, first,
						buf, sizeof(buf)));
		for (int k = 0; k < 5; k++) {
			EXPECT_EQ(-EFAULT, rbln_vm_write(self->vfd[i], vm.asid,
							 c.device_va + k, buf,
							 sizeof(buf)));
		}
		rbln_expect_fault(_metadata, fd, 6, first, RBLN_ACCESS_READ,
				  RBLN_MMU_NOT_MAPPED, "six faults");
		/* successful accesses later do not clear it */
		ASSERT_EQ(0, rbln_vm_read(self->vfd[i], vm.asid, c.device_va,
					  buf, sizeof(buf)));
		rbln_expect_fault(_metadata, fd, 6, first, RBLN_ACCESS_READ,
				  RBLN_MMU_NOT_MAPPED, "after a good read");
		close(fd);
	}
}

TEST_F(mmu, fault_stays_in_its_vm_and_other_files_keep_working)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm va, vb;
		struct drm_rbln_bo_create ca, cb;
		int a = new_file(_metadata, &self->nodes[i], &va);
		int b = new_file(_metadata, &self->nodes[i], &vb);
		unsigned char buf[8] = { 0 };

		EXPECT_NE(va.asid, vb.asid);
		ASSERT_EQ(0, rbln_bo_create(a, 8192, RBLN_REGION_HBM, 0, 0,
					    &ca));
		ASSERT_EQ(0, rbln_bo_create(b, 8192, RBLN_REGION_HBM, 0, 0,
					    &cb));
		EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], va.asid,
						ca.device_va + ca.size, buf,
						sizeof(buf)));
		rbln_expect_fault(_metadata, a, 1, ca.device_va + ca.size,
				  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED, "A");
		rbln_expect_no_fault(_metadata, b, "B, after A faulted");
		rbln_card_writes(_metadata, self->vfd[i], vb.asid, cb.device_va,
				 cb.size, 33, 0, "B");
		rbln_expect_card_sees(_metadata, self->vfd[i], vb.asid,
				      cb.device_va, cb.size, 33, 0, "B");
		rbln_expect_no_fault(_metadata, b, "B, after its accesses");
		close(a);
		close(b);
	}
}

TEST_F(mmu, address_space_of_a_closed_file_is_gone_from_the_card)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm va, vb;
		struct drm_rbln_bo_create c;
		int a = new_file(_metadata, &self->nodes[i], &va);
		int b = new_file(_metadata, &self->nodes[i], &vb);
		unsigned char buf[8];

		ASSERT_EQ(0, rbln_bo_create(a, 4096, RBLN_REGION_HBM, 0, 0,
					    &c));
		ASSERT_EQ(0, rbln_vm_read(self->vfd[i], va.asid, c.device_va,
					  buf, sizeof(buf)));
		close(a);
		/* the card no longer knows A's asid (or A's pages) */
		EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], va.asid,
						c.device_va, buf, sizeof(buf)))
		TH_LOG("asid %u of a closed file", va.asid);
		rbln_expect_no_fault(_metadata, b, "B");
		close(b);
	}
}

/*
 * A range that runs past va_end must fault like any unmapped range (the
 * driver must not take the end of its VA allocator for a buffer).  Last in
 * this file, so that if the kernel dies here the other results are out.
 */
TEST_F(mmu, range_running_past_the_end_of_the_va_space_faults)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm vm;
		int fd = new_file(_metadata, &self->nodes[i], &vm);
		unsigned char buf[8];

		EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid,
						vm.va_end - 4, buf,
						sizeof(buf)));
		rbln_expect_fault(_metadata, fd, 1, vm.va_end - 4,
				  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED,
				  "across va_end");
		close(fd);
	}
}

TEST_F(mmu, va_beyond_48_bits_faults_bad_va)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_vm vm;
		int fd = new_file(_metadata, &self->nodes[i], &vm);
		unsigned char buf[8];

		EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid,
						1ull << 48, buf, sizeof(buf)));
		EXPECT_EQ(-EFAULT, rbln_vm_read(self->vfd[i], vm.asid,
						0xffff800000001000ull, buf,
						sizeof(buf)));
		rbln_expect_fault(_metadata, fd, 2, 1ull << 48,
				  RBLN_ACCESS_READ, RBLN_MMU_BAD_VA,
				  "VA bit 48");
		close(fd);
	}
}

TEST_HARNESS_MAIN
