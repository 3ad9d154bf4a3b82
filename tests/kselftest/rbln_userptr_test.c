// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_userptr_test - RBLN_BO_USERPTR pins exactly what it is asked to,
 * refuses what the uAPI says, is charged to RLIMIT_MEMLOCK and lets go of
 * the pages when the buffer or the process goes away.
 *
 * Pins: unaligned or zero address or size, a wrapping range and unknown
 * flags are -EINVAL; an unmapped, partly unmapped, PROT_NONE or I/O range
 * is -EFAULT, and so is a read-only range without RBLN_USERPTR_READ_ONLY
 * (with it the pin works); RBLN_INFO_MEM.pinned_bytes and fdinfo
 * rbln-pinned-memory go up by the size and back down; without
 * CAP_IPC_LOCK pinning past RLIMIT_MEMLOCK is -ENOMEM and within it works,
 * and closing a buffer gives its share of the limit back; a killed process
 * unpins everything.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"

FIXTURE(userptr)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	long pg;
};

FIXTURE_SETUP(userptr)
{
	self->pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->fd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	for (int i = 0; i < self->count; i++) {
		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i]);
	}
}

FIXTURE_TEARDOWN(userptr)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

/* Anonymous memory, written (so it has its own pages). */
static void *anon(size_t len, int prot)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return p;
	memset(p, 0x3c, len);
	if (prot != (PROT_READ | PROT_WRITE) && mprotect(p, len, prot)) {
		munmap(p, len);
		return MAP_FAILED;
	}
	return p;
}

static __u64 pinned_now(struct __test_metadata *_metadata, int fd)
{
	struct drm_rbln_info_mem m;

	ASSERT_EQ(0, rbln_info_mem(fd, &m));
	return m.pinned_bytes;
}

/* USERPTR must fail with @err and pin nothing. */
static void expect_pin_fails(struct __test_metadata *_metadata, int fd,
			     int err, __u64 addr, __u64 size, __u32 flags,
			     const char *what)
{
	struct drm_rbln_bo_userptr u = { .addr = addr, .size = size,
					 .flags = flags };
	struct drm_rbln_info_vm vm0, vm1;
	__u64 before = pinned_now(_metadata, fd);
	int ret;

	ASSERT_EQ(0, rbln_info_vm(fd, &vm0));
	ret = ioctl(fd, DRM_IOCTL_RBLN_BO_USERPTR, &u) == 0 ? 0 : -errno;
	EXPECT_EQ(err, ret)
	TH_LOG("%s (addr 0x%llx size 0x%llx flags 0x%x): %s, want %s", what,
	       (unsigned long long)addr, (unsigned long long)size, flags,
	       ret ? strerror(-ret) : "success", strerror(-err));
	if (!ret) {
		rbln_gem_close(fd, u.handle);
		return;
	}
	EXPECT_EQ(before, pinned_now(_metadata, fd)) TH_LOG("%s", what);
	ASSERT_EQ(0, rbln_info_vm(fd, &vm1));
	EXPECT_EQ(vm0.mapped_bytes, vm1.mapped_bytes) TH_LOG("%s", what);
}

TEST_F(userptr, misaligned_zero_or_wrapping_ranges_are_einval)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 4 * self->pg;
		char *p = anon(len, PROT_READ | PROT_WRITE);
		__u64 a = (uintptr_t)p;

		ASSERT_NE(MAP_FAILED, p);
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, a + 1,
				 self->pg, 0, "address + 1");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, a + 2048,
				 self->pg, 0, "address + 2048");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, a,
				 self->pg + 1, 0, "size + 1");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, a, 100, 0,
				 "size 100");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, a, 0, 0,
				 "size 0");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, 0, self->pg,
				 0, "address 0");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL,
				 0xfffffffffffff000ull, 2 * self->pg, 0,
				 "range wraps");
		expect_pin_fails(_metadata, self->fd[i], -EINVAL, a,
				 0xfffffffffffff000ull, 0,
				 "range wraps (huge size)");
		munmap(p, len);
	}
}

TEST_F(userptr, unknown_flags_are_einval)
{
	static const __u32 flags[] = { 1u << 1, 1u << 31, ~0u,
				       RBLN_USERPTR_READ_ONLY | (1u << 4) };

	for (int i = 0; i < self->count; i++) {
		char *p = anon(self->pg, PROT_READ | PROT_WRITE);

		ASSERT_NE(MAP_FAILED, p);
		for (size_t f = 0; f < ARRAY_SIZE(flags); f++)
			expect_pin_fails(_metadata, self->fd[i], -EINVAL,
					 (uintptr_t)p, self->pg, flags[f],
					 "unknown flag");
		munmap(p, self->pg);
	}
}

TEST_F(userptr, unmapped_ranges_are_efault)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 4 * self->pg;
		char *gone = anon(len, PROT_READ | PROT_WRITE);
		char *hole = anon(len, PROT_READ | PROT_WRITE);
		char *none = anon(len, PROT_NONE);

		ASSERT_NE(MAP_FAILED, gone);
		ASSERT_NE(MAP_FAILED, hole);
		ASSERT_NE(MAP_FAILED, none);
		ASSERT_EQ(0, munmap(gone, len));
		ASSERT_EQ(0, munmap(hole + 2 * self->pg, self->pg));
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)gone, len, 0, "unmapped");
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)gone, len, RBLN_USERPTR_READ_ONLY,
				 "unmapped, read-only pin");
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)hole, len, 0, "hole in the middle");
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)none, len, 0, "PROT_NONE");
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)none, len, RBLN_USERPTR_READ_ONLY,
				 "PROT_NONE, read-only pin");
		/* not user memory at all */
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 0xffff888000000000ull, len, 0,
				 "kernel address");
		munmap(hole, len);
		munmap(none, len);
	}
}

TEST_F(userptr, io_memory_mapping_is_efault)
{
	/* an HBM buffer mapped through the BAR has no pages to pin */
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_create c;
		void *map;

		ASSERT_EQ(0, rbln_bo_create(self->fd[i], 4 * self->pg,
					    RBLN_REGION_HBM, 0, 0, &c));
		ASSERT_EQ(0, rbln_bo_mmap(self->fd[i], c.handle, 4 * self->pg,
					  PROT_READ | PROT_WRITE, &map));
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)map, 4 * self->pg, 0,
				 "HBM mapping");
		munmap(map, 4 * self->pg);
	}
}

TEST_F(userptr, read_only_range_needs_the_read_only_flag)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 8 * self->pg;
		char *ro = anon(len, PROT_READ);
		struct drm_rbln_bo_userptr up;
		__u64 before;

		ASSERT_NE(MAP_FAILED, ro);
		expect_pin_fails(_metadata, self->fd[i], -EFAULT,
				 (uintptr_t)ro, len, 0,
				 "read-only range, writable pin");
		before = pinned_now(_metadata, self->fd[i]);
		ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], ro, len,
					     RBLN_USERPTR_READ_ONLY, &up));
		EXPECT_EQ(before + len, pinned_now(_metadata, self->fd[i]));
		EXPECT_EQ(0, rbln_gem_close(self->fd[i], up.handle));
		EXPECT_EQ(before, pinned_now(_metadata, self->fd[i]));
		munmap(ro, len);
	}
}

TEST_F(userptr, pinned_bytes_go_up_and_back_down)
{
	for (int i = 0; i < self->count; i++) {
		static const int pages[] = { 1, 3, 16, 512, 600 };
		struct drm_rbln_bo_userptr up[ARRAY_SIZE(pages)];
		void *mem[ARRAY_SIZE(pages)];
		__u64 base = pinned_now(_metadata, self->fd[i]);
		__u64 sum = 0, kib;

		ASSERT_EQ(0, rbln_fdinfo_size(self->fd[i], "rbln-pinned-memory",
					      &kib));
		EXPECT_EQ(0, kib);
		for (size_t k = 0; k < ARRAY_SIZE(pages); k++) {
			size_t len = (size_t)pages[k] * self->pg;

			mem[k] = anon(len, PROT_READ | PROT_WRITE);
			ASSERT_NE(MAP_FAILED, mem[k]);
			ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], mem[k], len,
						     0, &up[k]));
			sum += len;
			EXPECT_EQ(base + sum, pinned_now(_metadata, self->fd[i]));
			ASSERT_EQ(0, rbln_fdinfo_size(self->fd[i],
						      "rbln-pinned-memory",
						      &kib));
			EXPECT_EQ(sum, kib);
		}
		for (size_t k = 0; k < ARRAY_SIZE(pages); k++) {
			ASSERT_EQ(0, rbln_gem_close(self->fd[i], up[k].handle));
			sum -= (size_t)pages[k] * self->pg;
			EXPECT_EQ(base + sum, pinned_now(_metadata, self->fd[i]));
			ASSERT_EQ(0, rbln_fdinfo_size(self->fd[i],
						      "rbln-pinned-memory",
						      &kib));
			EXPECT_EQ(sum, kib);
			munmap(mem[k], (size_t)pages[k] * self->pg);
		}
	}
}

TEST_F(userptr, same_pages_pinned_twice_are_two_buffers)
{
	for (int i = 0; i < self->count; i++) {
		size_t len = 4 * self->pg;
		char *p = anon(len, PROT_READ | PROT_WRITE);
		struct drm_rbln_bo_userptr a, b;
		__u64 base = pinned_now(_metadata, self->fd[i]);

		ASSERT_NE(MAP_FAILED, p);
		ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], p, len, 0, &a));
		ASSERT_EQ(0, rbln_bo_userptr(self->fd[i], p + self->pg,
					     2 * self->pg, 0, &b));
		EXPECT_NE(a.handle, b.handle);
		EXPECT_NE(a.device_va, b.device_va);
		EXPECT_EQ(base + len + 2 * self->pg,
			  pinned_now(_metadata, self->fd[i]));
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], a.handle));
		EXPECT_EQ(base + 2 * self->pg,
			  pinned_now(_metadata, self->fd[i]));
		ASSERT_EQ(0, rbln_gem_close(self->fd[i], b.handle));
		EXPECT_EQ(base, pinned_now(_metadata, self->fd[i]));
		munmap(p, len);
	}
}

/* Child exit codes of the RLIMIT_MEMLOCK checks. */
enum {
	LIM_OK = 0,
	LIM_SETUP = 20,
	LIM_WITHIN_FAILED,
	LIM_PAST_NOT_ENOMEM,
	LIM_AFTER_CLOSE_FAILED,
	LIM_ONE_PIN_PAST_NOT_ENOMEM,
	LIM_CAP_PIN_FAILED,
};

#define LIMIT_PAGES 16

/*
 * In a child: RLIMIT_MEMLOCK of LIMIT_PAGES pages and, with @drop_cap,
 * without CAP_IPC_LOCK.
 */
static int memlock_child(int minor, bool drop_cap)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct rlimit rl = { .rlim_cur = LIMIT_PAGES * pg,
			     .rlim_max = LIMIT_PAGES * pg };
	size_t len = 2 * LIMIT_PAGES * pg;
	struct drm_rbln_bo_userptr a, b;
	char *mem = anon(len, PROT_READ | PROT_WRITE);
	int fd = rbln_open_minor(minor);
	int err;

	if (fd < 0 || mem == MAP_FAILED)
		return LIM_SETUP;
	if (drop_cap && rbln_drop_cap(CAP_IPC_LOCK))
		return LIM_SETUP;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return LIM_SETUP;
	if (!drop_cap) {
		/* CAP_IPC_LOCK: the limit does not apply */
		if (rbln_bo_userptr(fd, mem, len, 0, &a))
			return LIM_CAP_PIN_FAILED;
		return LIM_OK;
	}
	/* exactly the limit, in two pieces */
	if (rbln_bo_userptr(fd, mem, (LIMIT_PAGES - 4) * pg, 0, &a))
		return LIM_WITHIN_FAILED;
	if (rbln_bo_userptr(fd, mem + (LIMIT_PAGES - 4) * pg, 4 * pg, 0, &b))
		return LIM_WITHIN_FAILED;
	/* one page more */
	err = rbln_bo_userptr(fd, mem + LIMIT_PAGES * pg, pg, 0, NULL);
	if (err != -ENOMEM)
		return LIM_PAST_NOT_ENOMEM;
	/* closing a buffer gives its pages back to the limit */
	if (rbln_gem_close(fd, b.handle))
		return LIM_SETUP;
	if (rbln_bo_userptr(fd, mem + LIMIT_PAGES * pg, 4 * pg, 0, &b))
		return LIM_AFTER_CLOSE_FAILED;
	if (rbln_gem_close(fd, a.handle) || rbln_gem_close(fd, b.handle))
		return LIM_SETUP;
	/* one buffer larger than the limit */
	err = rbln_bo_userptr(fd, mem, (LIMIT_PAGES + 1) * pg, 0, NULL);
	if (err != -ENOMEM)
		return LIM_ONE_PIN_PAST_NOT_ENOMEM;
	return LIM_OK;
}

static const char *lim_name(int rc)
{
	switch (rc) {
	case LIM_OK:
		return "ok";
	case LIM_SETUP:
		return "setup failed";
	case LIM_WITHIN_FAILED:
		return "a pin within the limit failed";
	case LIM_PAST_NOT_ENOMEM:
		return "a pin past the limit was not -ENOMEM";
	case LIM_AFTER_CLOSE_FAILED:
		return "closing a buffer gave no room back";
	case LIM_ONE_PIN_PAST_NOT_ENOMEM:
		return "one pin larger than the limit was not -ENOMEM";
	case LIM_CAP_PIN_FAILED:
		return "with CAP_IPC_LOCK the pin failed";
	default:
		return "crashed";
	}
}

static int run_memlock_child(int minor, bool drop_cap)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(memlock_child(minor, drop_cap));
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(userptr, pinning_past_rlimit_memlock_is_enomem_without_cap_ipc_lock)
{
	for (int i = 0; i < self->count; i++) {
		__u64 base = pinned_now(_metadata, self->fd[i]);
		int rc = run_memlock_child(self->nodes[i].minor, true);

		EXPECT_EQ(LIM_OK, rc)
		TH_LOG("child: %s (exit %d)", lim_name(rc), rc);
		EXPECT_EQ(base, pinned_now(_metadata, self->fd[i]));
	}
}

TEST_F(userptr, cap_ipc_lock_pins_past_rlimit_memlock)
{
	for (int i = 0; i < self->count; i++) {
		int rc = run_memlock_child(self->nodes[i].minor, false);

		EXPECT_EQ(LIM_OK, rc) TH_LOG("child: %s", lim_name(rc));
	}
}

/*
 * An unprivileged process whose RLIMIT_MEMLOCK is unlimited (containers,
 * HPC) asks to pin 1 TiB: more than the machine's RAM and than one page
 * array may hold.  The driver refuses it with -ENOMEM before it allocates
 * or charges anything - no kvmalloc() warning, which would panic a machine
 * running with panic_on_warn.
 */
enum {
	HUGE_OK = 0,
	HUGE_SETUP = 20,
	HUGE_STILL_PRIVILEGED,
	HUGE_NOT_ENOMEM,
};

static int huge_pin_child(int minor)
{
	const size_t len = 1ull << 40;
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	int fd = rbln_open_minor(minor);
	void *mem;
	int err;

	if (fd < 0 || setrlimit(RLIMIT_MEMLOCK, &rl))
		return HUGE_SETUP;
	/* nobody: no capabilities left, the unlimited limit stays */
	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return HUGE_SETUP;
	if (geteuid() == 0)
		return HUGE_STILL_PRIVILEGED;
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		return HUGE_SETUP;
	err = rbln_bo_userptr(fd, mem, len, 0, NULL);
	return err == -ENOMEM ? HUGE_OK : HUGE_NOT_ENOMEM;
}

TEST_F(userptr, unprivileged_1tib_pin_with_unlimited_memlock_is_enomem_without_a_warning)
{
	static char klog[65536];
	int kfd = rbln_kmsg_open();

	ASSERT_LE(0, kfd);
	for (int i = 0; i < self->count; i++) {
		__u64 base = pinned_now(_metadata, self->fd[i]);
		int status;
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (pid == 0)
			_exit(huge_pin_child(self->nodes[i].minor));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(HUGE_OK, WEXITSTATUS(status))
		TH_LOG("child exit %d (21: still privileged, 22: not -ENOMEM)",
		       WEXITSTATUS(status));
		EXPECT_EQ(base, pinned_now(_metadata, self->fd[i]));
	}
	klog[0] = '\0';
	EXPECT_EQ(0, rbln_kmsg_read(kfd, klog, sizeof(klog)));
	close(kfd);
	EXPECT_EQ(0, rbln_count_lines(klog, "WARNING:", NULL, NULL))
	TH_LOG("kernel log:\n%s", klog);
}

TEST_F(userptr, killed_process_unpins_its_pages)
{
	for (int i = 0; i < self->count; i++) {
		__u64 base = pinned_now(_metadata, self->fd[i]);
		int pipefd[2], status;
		char c;
		pid_t pid;

		ASSERT_EQ(0, pipe(pipefd));
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			size_t len = 256 * self->pg;
			char *mem = anon(len, PROT_READ | PROT_WRITE);
			int fd = rbln_open_minor(self->nodes[i].minor);

			if (fd < 0 || mem == MAP_FAILED)
				_exit(1);
			for (int k = 0; k < 4; k++)
				if (rbln_bo_userptr(fd, mem + k * 64 * self->pg,
						    64 * self->pg, 0, NULL))
					_exit(2);
			if (write(pipefd[1], "p", 1) != 1)
				_exit(3);
			for (;;)
				pause();
		}
		close(pipefd[1]);
		ASSERT_EQ(1, read(pipefd[0], &c, 1)) TH_LOG("child failed");
		close(pipefd[0]);
		EXPECT_EQ(base + 256 * self->pg,
			  pinned_now(_metadata, self->fd[i]));
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_EQ(base, pinned_now(_metadata, self->fd[i]));
	}
}

TEST_HARNESS_MAIN
