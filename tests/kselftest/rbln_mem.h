/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Memory helpers of the rbln kselftests: buffer ioctls, the MEM and VM
 * queries, the root-only debugfs vm_access file, fdinfo and the per-chiplet
 * sysfs figures.
 *
 * Like rbln_util.h: every function returns 0 (or a count) on success and a
 * negative errno on failure, and none of them prints.
 */
#ifndef RBLN_KSFT_MEM_H
#define RBLN_KSFT_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include <drm/rbln_accel.h>

#include "rbln_util.h"

#define RBLN_SZ_4K 0x1000ull
#define RBLN_SZ_2M 0x200000ull
#define RBLN_SZ_1M 0x100000ull
/* One vm_access request moves at most this many bytes. */
#define RBLN_VM_ACCESS_MAX 4096u

/* GET_INFO of the full answer; -EPROTO if the kernel reports another size. */
int rbln_info_device(int fd, struct drm_rbln_info_device *d);
int rbln_info_mem(int fd, struct drm_rbln_info_mem *m);
int rbln_info_vm(int fd, struct drm_rbln_info_vm *v);

/*
 * RBLN_BO_CREATE; @bo gets the kernel's answer (also on failure: the input
 * as passed).  @bo may be NULL when only the errno matters.
 */
int rbln_bo_create(int fd, __u64 size, __u32 region, __u32 chiplet,
		   __u32 flags, struct drm_rbln_bo_create *bo);

/* RBLN_BO_INFO of @handle into @info. */
int rbln_bo_info(int fd, __u32 handle, struct drm_rbln_bo_info *info);

/* RBLN_BO_USERPTR of [@addr, @addr + @size). */
int rbln_bo_userptr(int fd, const void *addr, __u64 size, __u32 flags,
		    struct drm_rbln_bo_userptr *up);

/* DRM_IOCTL_GEM_CLOSE. */
int rbln_gem_close(int fd, __u32 handle);

/*
 * mmap()s @size bytes of the buffer @handle of @fd (at the offset BO_INFO
 * returns) into *@map.  Returns 0 or -errno (of BO_INFO or mmap).
 */
int rbln_bo_mmap(int fd, __u32 handle, size_t size, int prot, void **map);

/* PRIME export (DRM_CLOEXEC | DRM_RDWR) into *@dmabuf, and import. */
int rbln_prime_export(int fd, __u32 handle, int *dmabuf);
int rbln_prime_import(int fd, int dmabuf, __u32 *handle);

/*
 * /sys/kernel/debug/accel/<bdf>/vm_access: open it (fd or -errno), and one
 * card read or write of 1..4096 bytes at device VA @va of address space
 * @asid.  rbln_vm_write() sends the header and the data in one write().
 */
int rbln_vm_access_open(const char *bdf);
int rbln_vm_read(int vfd, __u32 asid, __u64 va, void *buf, __u32 len);
int rbln_vm_write(int vfd, __u32 asid, __u64 va, const void *buf, __u32 len);

/* The same for any length, in requests of at most 4096 bytes. */
int rbln_vm_read_all(int vfd, __u32 asid, __u64 va, void *buf, size_t len);
int rbln_vm_write_all(int vfd, __u32 asid, __u64 va, const void *buf,
		      size_t len);

/* Raw request: writes @len bytes of @req in one write(); returns its result. */
long rbln_vm_request(int vfd, const void *req, size_t len);

/* The text of key @key in /proc/self/fdinfo/@fd into @val. */
int rbln_fdinfo_str(int fd, const char *key, char *val, size_t len);

/*
 * A size of fdinfo ("<n>", "<n> KiB" or "<n> MiB", as printed by
 * drm_print_memory_stats()) in bytes; -EPROTO for anything else.
 */
int rbln_fdinfo_size(int fd, const char *key, __u64 *bytes);

/* An unsigned number of fdinfo. */
int rbln_fdinfo_u64(int fd, const char *key, __u64 *v);

/* /sys/bus/pci/devices/<bdf>/rbln/chiplet<c>/<attr> as a number. */
int rbln_sysfs_chiplet_u64(const char *bdf, unsigned int chiplet,
			   const char *attr, __u64 *v);

/* /sys/bus/pci/devices/<bdf>/rbln/<attr> as a number. */
int rbln_sysfs_card_u64(const char *bdf, const char *attr, __u64 *v);

/*
 * Test patterns: byte @i of a buffer filled with seed @seed.  Bytes are
 * never 0, and two seeds that differ modulo 255 give different bytes at
 * every offset, so a pattern is told from zeroes and from another pattern;
 * the offset is mixed in, so it is also told from a shifted copy of itself.
 */
static inline unsigned char rbln_pattern_byte(__u32 seed, size_t i)
{
	__u32 x = (__u32)i * 2654435761u;

	x ^= x >> 15;
	x ^= (__u32)(i >> 32);
	return (unsigned char)(1 + ((x >> 8) % 255 + seed % 255) % 255);
}

void rbln_pattern_fill(void *buf, size_t len, __u32 seed, size_t base);

/* Offset of the first byte that differs from the pattern, or -1. */
long rbln_pattern_check(const void *buf, size_t len, __u32 seed, size_t base);

/* Offset of the first non-zero byte, or -1. */
long rbln_first_nonzero(const void *buf, size_t len);

/*
 * Drops capability @cap from the effective, permitted and inheritable sets
 * of the calling process (capset(2); the VM runs the tests as root).
 */
int rbln_drop_cap(int cap);

/*
 * The VmFlags of the mapping that starts at @addr (/proc/self/smaps), e.g.
 * "rd wr sh mr mw me ms io pf dc de dd", and whether they hold @flag.
 */
int rbln_vma_flags(const void *addr, char *flags, size_t len);
bool rbln_vma_has_flag(const char *flags, const char *flag);

/* Loads kernel module @name with modprobe (0 if it is loaded afterwards). */
int rbln_modprobe(const char *name);

/* True if @va..@va+@len lies in [@start, @end). */
static inline bool rbln_va_in(__u64 va, __u64 len, __u64 start, __u64 end)
{
	return va >= start && va < end && len <= end - va;
}

/* The size the uAPI promises for a buffer of @size in @region. */
static inline __u64 rbln_expected_size(__u64 size, __u32 region)
{
	__u64 s = (size + RBLN_SZ_4K - 1) & ~(RBLN_SZ_4K - 1);

	if (region != RBLN_REGION_HOST && s >= RBLN_SZ_2M)
		s = (s + RBLN_SZ_2M - 1) & ~(RBLN_SZ_2M - 1);
	return s;
}

#endif /* RBLN_KSFT_MEM_H */
