/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Harness-level memory helpers of the rbln kselftests: the debugfs
 * vm_access file of a card and checks of what the card sees.
 *
 * Include after kselftest_harness.h and rbln_ksft.h.
 */
#ifndef RBLN_MEM_KSFT_H
#define RBLN_MEM_KSFT_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_mem.h"

/*
 * Opens vm_access of @bdf and returns the fd.  Outside the VM a file that
 * cannot be opened (no debugfs, not root) skips the test and -1 is
 * returned; inside the VM (RBLN_VM=1) it must open.
 */
static inline int rbln_require_vm_access(struct __test_metadata *_metadata,
					 const char *bdf)
{
	int vfd = rbln_vm_access_open(bdf);

	if (vfd < 0 && !rbln_in_vm())
		SKIP(return -1, "no vm_access for %s: %s", bdf,
		     strerror(-vfd));
	ASSERT_LE(0, vfd)
	TH_LOG("open /sys/kernel/debug/accel/%s/vm_access: %s", bdf,
	       strerror(-vfd));
	return vfd;
}

/*
 * The card reads @len bytes at @va of @asid and finds pattern @seed (byte
 * offset @base of the pattern at @va).
 */
static inline void rbln_expect_card_sees(struct __test_metadata *_metadata,
					 int vfd, __u32 asid, __u64 va,
					 size_t len, __u32 seed, size_t base,
					 const char *what)
{
	unsigned char *buf = malloc(len);
	long bad;
	int err;

	ASSERT_NE(NULL, buf);
	memset(buf, 0, len);
	err = rbln_vm_read_all(vfd, asid, va, buf, len);
	EXPECT_EQ(0, err)
	TH_LOG("%s: card read of %zu bytes at 0x%llx (asid %u): %s", what, len,
	       (unsigned long long)va, asid, strerror(-err));
	if (!err) {
		bad = rbln_pattern_check(buf, len, seed, base);
		EXPECT_EQ(-1, bad)
		TH_LOG("%s: card read 0x%02x at VA 0x%llx, the CPU wrote 0x%02x",
		       what, bad >= 0 ? buf[bad] : 0,
		       (unsigned long long)va + (bad >= 0 ? bad : 0),
		       bad >= 0 ? rbln_pattern_byte(seed, base + bad) : 0);
	}
	free(buf);
}

/* The card writes pattern @seed (from offset @base) at @va of @asid. */
static inline void rbln_card_writes(struct __test_metadata *_metadata, int vfd,
				    __u32 asid, __u64 va, size_t len,
				    __u32 seed, size_t base, const char *what)
{
	unsigned char *buf = malloc(len);
	int err;

	ASSERT_NE(NULL, buf);
	rbln_pattern_fill(buf, len, seed, base);
	err = rbln_vm_write_all(vfd, asid, va, buf, len);
	free(buf);
	ASSERT_EQ(0, err)
	TH_LOG("%s: card write of %zu bytes at 0x%llx (asid %u): %s", what,
	       len, (unsigned long long)va, asid, strerror(-err));
}

/* The VM of @fd has no fault. */
static inline void rbln_expect_no_fault(struct __test_metadata *_metadata,
					int fd, const char *what)
{
	struct drm_rbln_info_vm vm;
	__u64 n;

	ASSERT_EQ(0, rbln_info_vm(fd, &vm));
	EXPECT_EQ(0, vm.flags & RBLN_VM_FAULTED) TH_LOG("%s", what);
	EXPECT_EQ(0, vm.fault_count) TH_LOG("%s", what);
	EXPECT_EQ(0, vm.fault_va) TH_LOG("%s", what);
	ASSERT_EQ(0, rbln_fdinfo_u64(fd, "rbln-mmu-faults", &n));
	EXPECT_EQ(0, n) TH_LOG("%s: fdinfo rbln-mmu-faults", what);
}

/* The VM of @fd has @count faults, the first at @va with @access/@reason. */
static inline void rbln_expect_fault(struct __test_metadata *_metadata, int fd,
				     __u64 count, __u64 va, __u32 access,
				     __u32 reason, const char *what)
{
	struct drm_rbln_info_vm vm;
	__u64 n;

	ASSERT_EQ(0, rbln_info_vm(fd, &vm));
	EXPECT_EQ(RBLN_VM_FAULTED, vm.flags & RBLN_VM_FAULTED)
	TH_LOG("%s: RBLN_VM_FAULTED not set (flags 0x%x)", what, vm.flags);
	EXPECT_EQ(count, vm.fault_count) TH_LOG("%s: fault_count", what);
	EXPECT_EQ(va, vm.fault_va)
	TH_LOG("%s: fault_va 0x%llx, want 0x%llx", what,
	       (unsigned long long)vm.fault_va, (unsigned long long)va);
	EXPECT_EQ(access, vm.fault_access) TH_LOG("%s: fault_access", what);
	EXPECT_EQ(reason, vm.fault_reason) TH_LOG("%s: fault_reason", what);
	ASSERT_EQ(0, rbln_fdinfo_u64(fd, "rbln-mmu-faults", &n));
	EXPECT_EQ(count, n) TH_LOG("%s: fdinfo rbln-mmu-faults", what);
}

/* Orders CPU stores (also write-combined ones) before asking the card. */
static inline void rbln_cpu_flush(void)
{
	__sync_synchronize();
}

#endif /* RBLN_MEM_KSFT_H */
