// SPDX-License-Identifier: GPL-2.0
/*
 * Memory helpers of the rbln kselftests (see rbln_mem.h).
 */
#define _GNU_SOURCE
#include "rbln_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int info_full(int fd, __u32 type, void *buf, __u32 size)
{
	__u32 got = 0;
	int err = rbln_get_info(fd, type, buf, size, &got);

	if (err)
		return err;
	return got == size ? 0 : -EPROTO;
}

int rbln_info_device(int fd, struct drm_rbln_info_device *d)
{
	memset(d, 0, sizeof(*d));
	return info_full(fd, RBLN_INFO_DEVICE, d, sizeof(*d));
}

int rbln_info_mem(int fd, struct drm_rbln_info_mem *m)
{
	memset(m, 0, sizeof(*m));
	return info_full(fd, RBLN_INFO_MEM, m, sizeof(*m));
}

int rbln_info_vm(int fd, struct drm_rbln_info_vm *v)
{
	memset(v, 0, sizeof(*v));
	return info_full(fd, RBLN_INFO_VM, v, sizeof(*v));
}

int rbln_bo_create(int fd, __u64 size, __u32 region, __u32 chiplet,
		   __u32 flags, struct drm_rbln_bo_create *bo)
{
	struct drm_rbln_bo_create c = {
		.size = size,
		.region = region,
		.chiplet = chiplet,
		.flags = flags,
	};
	int err = 0;

	if (ioctl(fd, DRM_IOCTL_RBLN_BO_CREATE, &c) != 0)
		err = -errno;
	if (bo)
		*bo = c;
	return err;
}

int rbln_bo_info(int fd, __u32 handle, struct drm_rbln_bo_info *info)
{
	memset(info, 0, sizeof(*info));
	info->handle = handle;
	return ioctl(fd, DRM_IOCTL_RBLN_BO_INFO, info) == 0 ? 0 : -errno;
}

int rbln_bo_userptr(int fd, const void *addr, __u64 size, __u32 flags,
		    struct drm_rbln_bo_userptr *up)
{
	struct drm_rbln_bo_userptr u = {
		.addr = (__u64)(uintptr_t)addr,
		.size = size,
		.flags = flags,
	};
	int err = 0;

	if (ioctl(fd, DRM_IOCTL_RBLN_BO_USERPTR, &u) != 0)
		err = -errno;
	if (up)
		*up = u;
	return err;
}

int rbln_gem_close(int fd, __u32 handle)
{
	struct drm_gem_close c = { .handle = handle };

	return ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c) == 0 ? 0 : -errno;
}

int rbln_bo_mmap(int fd, __u32 handle, size_t size, int prot, void **map)
{
	struct drm_rbln_bo_info info;
	void *p;
	int err;

	*map = MAP_FAILED;
	err = rbln_bo_info(fd, handle, &info);
	if (err)
		return err;
	if (!info.mmap_offset)
		return -ENXIO;
	p = mmap(NULL, size, prot, MAP_SHARED, fd, (off_t)info.mmap_offset);
	if (p == MAP_FAILED)
		return -errno;
	*map = p;
	return 0;
}

int rbln_prime_export(int fd, __u32 handle, int *dmabuf)
{
	struct drm_prime_handle p = {
		.handle = handle,
		.flags = DRM_CLOEXEC | DRM_RDWR,
		.fd = -1,
	};

	*dmabuf = -1;
	if (ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p) != 0)
		return -errno;
	*dmabuf = p.fd;
	return 0;
}

int rbln_prime_import(int fd, int dmabuf, __u32 *handle)
{
	struct drm_prime_handle p = { .fd = dmabuf };

	if (ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p) != 0)
		return -errno;
	*handle = p.handle;
	return 0;
}

int rbln_vm_access_open(const char *bdf)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/vm_access",
		 bdf);
	fd = open(path, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

long rbln_vm_request(int vfd, const void *req, size_t len)
{
	ssize_t n = write(vfd, req, len);

	return n < 0 ? -errno : (long)n;
}

int rbln_vm_read(int vfd, __u32 asid, __u64 va, void *buf, __u32 len)
{
	char hdr[96];
	int hlen = snprintf(hdr, sizeof(hdr), "r %u 0x%llx %u\n", asid,
			    (unsigned long long)va, len);
	long n = rbln_vm_request(vfd, hdr, (size_t)hlen);
	ssize_t got;

	if (n < 0)
		return (int)n;
	if (n != hlen)
		return -EIO;
	got = read(vfd, buf, len);
	if (got < 0)
		return -errno;
	return got == (ssize_t)len ? 0 : -EIO;
}

int rbln_vm_write(int vfd, __u32 asid, __u64 va, const void *buf, __u32 len)
{
	char req[96 + RBLN_VM_ACCESS_MAX];
	int hlen;
	long n;

	if (len > RBLN_VM_ACCESS_MAX)
		return -EINVAL;
	hlen = snprintf(req, 96, "w %u 0x%llx %u\n", asid,
			(unsigned long long)va, len);
	memcpy(req + hlen, buf, len);
	n = rbln_vm_request(vfd, req, (size_t)hlen + len);
	if (n < 0)
		return (int)n;
	return n == hlen + (long)len ? 0 : -EIO;
}

int rbln_vm_read_all(int vfd, __u32 asid, __u64 va, void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		__u32 n = len - off > RBLN_VM_ACCESS_MAX ? RBLN_VM_ACCESS_MAX :
							   (__u32)(len - off);
		int err = rbln_vm_read(vfd, asid, va + off, (char *)buf + off,
				       n);

		if (err)
			return err;
		off += n;
	}
	return 0;
}

int rbln_vm_write_all(int vfd, __u32 asid, __u64 va, const void *buf,
		      size_t len)
{
	for (size_t off = 0; off < len;) {
		__u32 n = len - off > RBLN_VM_ACCESS_MAX ? RBLN_VM_ACCESS_MAX :
							   (__u32)(len - off);
		int err = rbln_vm_write(vfd, asid, va + off,
					(const char *)buf + off, n);

		if (err)
			return err;
		off += n;
	}
	return 0;
}

static const char *next_line(const char *p)
{
	p = strchr(p, '\n');
	return p ? p + 1 : NULL;
}

int rbln_fdinfo_str(int fd, const char *key, char *val, size_t len)
{
	char path[64];
	char text[8192];
	size_t klen = strlen(key);
	const char *p;
	int n;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	n = rbln_read_file(path, text, sizeof(text));
	if (n < 0)
		return n;
	for (p = text; p && *p; p = next_line(p)) {
		const char *v;
		size_t vlen;

		if (strncmp(p, key, klen) != 0 || p[klen] != ':')
			continue;
		v = p + klen + 1;
		v += strspn(v, " \t");
		vlen = strcspn(v, "\n");
		if (snprintf(val, len, "%.*s", (int)vlen, v) >= (int)len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

int rbln_fdinfo_size(int fd, const char *key, __u64 *bytes)
{
	char val[64];
	char *end = NULL;
	unsigned long long n;
	int err = rbln_fdinfo_str(fd, key, val, sizeof(val));

	if (err)
		return err;
	errno = 0;
	n = strtoull(val, &end, 10);
	if (errno || end == val)
		return -EPROTO;
	if (*end == '\0')
		*bytes = n;
	else if (strcmp(end, " KiB") == 0)
		*bytes = n << 10;
	else if (strcmp(end, " MiB") == 0)
		*bytes = n << 20;
	else
		return -EPROTO;
	return 0;
}

int rbln_fdinfo_u64(int fd, const char *key, __u64 *v)
{
	char val[64];
	char *end = NULL;
	int err = rbln_fdinfo_str(fd, key, val, sizeof(val));

	if (err)
		return err;
	errno = 0;
	*v = strtoull(val, &end, 10);
	return (errno || end == val || *end) ? -EPROTO : 0;
}

static int read_u64(const char *path, __u64 *v)
{
	char buf[64];
	char *end = NULL;
	int n = rbln_read_file(path, buf, sizeof(buf));

	if (n < 0)
		return n;
	errno = 0;
	*v = strtoull(buf, &end, 0);
	return (errno || end == buf || *end) ? -EPROTO : 0;
}

int rbln_sysfs_chiplet_u64(const char *bdf, unsigned int chiplet,
			   const char *attr, __u64 *v)
{
	char path[256];

	snprintf(path, sizeof(path),
		 "/sys/bus/pci/devices/%s/rbln/chiplet%u/%s", bdf, chiplet,
		 attr);
	return read_u64(path, v);
}

int rbln_sysfs_card_u64(const char *bdf, const char *attr, __u64 *v)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/rbln/%s", bdf,
		 attr);
	return read_u64(path, v);
}

void rbln_pattern_fill(void *buf, size_t len, __u32 seed, size_t base)
{
	unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = rbln_pattern_byte(seed, base + i);
}

long rbln_pattern_check(const void *buf, size_t len, __u32 seed, size_t base)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != rbln_pattern_byte(seed, base + i))
			return (long)i;
	return -1;
}

long rbln_first_nonzero(const void *buf, size_t len)
{
	const unsigned char *b = buf;
	size_t i = 0;

	/* word at a time: this scans whole chiplets */
	for (; i + 8 <= len; i += 8) {
		__u64 w;

		memcpy(&w, b + i, 8);
		if (w)
			break;
	}
	for (; i < len; i++)
		if (b[i])
			return (long)i;
	return -1;
}

int rbln_drop_cap(int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int word = (unsigned int)cap / 32;
	__u32 bit = 1u << ((unsigned int)cap % 32);

	memset(data, 0, sizeof(data));
	if (word >= _LINUX_CAPABILITY_U32S_3)
		return -EINVAL;
	if (syscall(SYS_capget, &hdr, data) != 0)
		return -errno;
	data[word].effective &= ~bit;
	data[word].permitted &= ~bit;
	data[word].inheritable &= ~bit;
	if (syscall(SYS_capset, &hdr, data) != 0)
		return -errno;
	return 0;
}

int rbln_modprobe(const char *name)
{
	char path[128];
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	if (access(path, F_OK) == 0)
		return 0;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		if (devnull >= 0) {
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		execlp("modprobe", "modprobe", "-q", name, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -ENOENT;
	return access(path, F_OK) == 0 ? 0 : -ENOENT;
}

int rbln_vma_flags(const void *addr, char *flags, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false;
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;

		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			in = start == (unsigned long)(uintptr_t)addr;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(flags, len, "%s", line + 8);
			flags[strcspn(flags, "\n")] = '\0';
			err = 0;
			break;
		}
	}
	fclose(f);
	return err;
}

bool rbln_vma_has_flag(const char *flags, const char *flag)
{
	size_t n = strlen(flag);

	for (const char *p = flags; (p = strstr(p, flag)); p += n)
		if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}
