// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_release_test - what happens to the jobs of a file that is released
 * (closed by its last holder, or its process killed) while they are not
 * done (kernel/README.md, "Release with jobs in flight").
 *
 * Pins: a job that finishes within release_grace_ms completes normally,
 * and the closing task waits for it; a job held on a device-side WAIT that
 * nobody will satisfy, and the job queued behind it, are cancelled once
 * the grace is over: they never run their stores, the file's memory and
 * its reference to the module are given back, no ring is reset (before
 * firmware-iface 1.3 they ran into the job timeout and a ring reset), and
 * another client's job queued behind them on the same ring runs and
 * succeeds.
 *
 * A job of a released file that waits for another client's fence (an
 * in-syncobj) is cancelled once the grace is over without waiting for
 * that fence, and the release does not wait for it either.  QUEUE_DESTROY
 * returns at once: the queue is gone for SUBMIT and WAIT, its job still
 * runs once its in-fence signals, and its id stays taken until then.
 *
 * The child's job waits on, and stores into, a shared anonymous page
 * that both processes map and the child pins as userptr: the parent sees
 * whether the job ran after the child is gone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_sub_ksft.h"

#define GRACE_PARAM "/sys/module/rbln/parameters/release_grace_ms"

/* Words of the shared page. */
#define GATE	0	/* the child's job WAITs until it is >= 1 */
#define DONE	1	/* its job stores 42 here after the WAIT */
#define BEHIND	2	/* its second job stores 7 here */

/* The card and the other process write these words behind our back. */
static __u64 peek(const __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void poke(__u64 *p, __u64 v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

FIXTURE(rel)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 q;		/* chiplet 0, as the child's */
	struct rbln_cmdbuf cb;
	struct rbln_buf data;
	__u64 *shared;		/* the shared page, as words */
	char grace[32];		/* release_grace_ms before the test */
	bool ready;
};

FIXTURE_SETUP(rel)
{
	__u32 minor = 0;

	self->fd = -1;
	if (!rbln_require_nodes(_metadata, self->nodes))
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_info_device(self->fd, &self->dev));
	if (!rbln_require_rings(_metadata, self->fd))
		return;
	ASSERT_EQ(0, rbln_iface_minor(self->fd, &minor));
	if (minor < 3)
		SKIP(return, "firmware-iface 1.%u: no VM_ABORT (1.3 needed)", minor);
	ASSERT_LT(0, rbln_read_file(GRACE_PARAM, self->grace,
				    sizeof(self->grace)));
	self->q = rbln_new_queue(_metadata, self->fd, 1);
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 64 * 1024,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->data, 1 << 20,
				  RBLN_REGION_HOST, 0));
	memset(self->data.map, 0, 1 << 20);
	self->shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->shared);
	self->ready = true;
}

FIXTURE_TEARDOWN(rel)
{
	if (self->grace[0])
		rbln_write_file(GRACE_PARAM, self->grace);
	if (self->shared && self->shared != MAP_FAILED) {
		poke(&self->shared[GATE], 1);	/* releases a job still held */
		munmap(self->shared, 4096);
	}
	if (self->data.handle)
		rbln_buf_free(self->fd, &self->data);
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

static void set_grace(struct __test_metadata *_metadata, int ms)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", ms);
	ASSERT_EQ(0, rbln_write_file(GRACE_PARAM, v));
}

static __u64 ring_resets(struct __test_metadata *_metadata,
			 FIXTURE_DATA(rel) * self)
{
	__u64 v = ~0ull;

	EXPECT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, 0,
					    "ring_resets", &v));
	return v;
}

/*
 * The child: its own file, a queue on chiplet 0, a 2 MiB host buffer and
 * the shared page pinned as userptr.  Two jobs: WAIT until shared[GATE]
 * >= 1, then shared[DONE] = 42; and shared[BEHIND] = 7.  Then it tells the
 * parent and either closes the file (its mappings gone first, so that the
 * close is the release) and exits 0, or waits to be killed.
 */
static void child(int minor, __u64 *shared, int wfd, bool close_it)
{
	struct drm_rbln_bo_userptr up;
	struct rbln_cmdbuf cb;
	struct rbln_buf host;
	__u32 q, bos[2];
	__u64 seqno;
	int fd = rbln_open_minor(minor);

	if (fd < 0 || rbln_queue_create(fd, 1, RBLN_QUEUE_PRIORITY_NORMAL, &q) ||
	    rbln_cmd_init(fd, &cb, 64 * 1024, RBLN_REGION_HOST, 0) ||
	    rbln_buf_new(fd, &host, 2 << 20, RBLN_REGION_HOST, 0) ||
	    rbln_bo_userptr(fd, (const void *)shared, 4096, 0, &up))
		_exit(2);
	bos[0] = host.handle;
	bos[1] = up.handle;
	rbln_cmd_begin(&cb);
	rbln_cmd_wait(&cb, up.device_va + GATE * 8, 1, 0);
	rbln_cmd_signal(&cb, up.device_va + DONE * 8, 42, 0);
	if (rbln_submit_job(fd, q, &cb, bos, 2, &seqno))
		_exit(3);
	rbln_cmd_begin(&cb);
	rbln_cmd_signal(&cb, up.device_va + BEHIND * 8, 7, 0);
	if (rbln_submit_job(fd, q, &cb, bos, 2, &seqno))
		_exit(4);
	if (write(wfd, "x", 1) != 1)
		_exit(5);
	if (!close_it) {
		for (;;)
			pause();
	}
	munmap(host.map, host.size);
	munmap(cb.buf.map, cb.buf.size);
	_exit(close(fd) ? 6 : 0);
}

static pid_t start_child(struct __test_metadata *_metadata,
			 FIXTURE_DATA(rel) * self, bool close_it)
{
	int pipefd[2];
	pid_t pid;
	char c;

	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(pipefd[0]);
		child(self->nodes[0].minor, self->shared, pipefd[1], close_it);
	}
	close(pipefd[1]);
	EXPECT_EQ(1, read(pipefd[0], &c, 1)) TH_LOG("the child did not submit");
	close(pipefd[0]);
	return pid;
}

/* Process state of @pid ('R', 'S', 'D', ...; 0 if unknown). */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (rbln_read_file(path, buf, sizeof(buf)) < 0)
		return 0;
	p = strrchr(buf, ')');	/* after "pid (comm)" */
	return p && p[1] == ' ' ? p[2] : 0;
}

TEST_F_TIMEOUT(rel, a_job_done_within_the_grace_completes_and_the_close_waits_for_it,
	       120)
{
	__u64 resets0;
	int status;
	__s64 deadline;
	pid_t pid;
	char st = 0;

	if (!self->ready)
		return;
	set_grace(_metadata, RBLN_JOB_WAIT_MS);
	resets0 = ring_resets(_metadata, self);
	pid = start_child(_metadata, self, true);
	/* The child blocks in close(), waiting for its held job. */
	deadline = rbln_now_ms() + RBLN_JOB_WAIT_MS / 2;
	while (rbln_now_ms() < deadline && (st = proc_state(pid)) != 'D')
		rbln_sleep_ms(20);
	EXPECT_EQ('D', st) TH_LOG("the child's close() did not wait for its job");
	poke(&self->shared[GATE], 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(42, peek(&self->shared[DONE]));
	EXPECT_EQ(7, peek(&self->shared[BEHIND]));
	EXPECT_EQ(resets0, ring_resets(_metadata, self));
}

TEST_F_TIMEOUT(rel, a_killed_process_held_job_is_cancelled_without_a_ring_reset,
	       120)
{
	struct drm_rbln_info_mem before, after;
	__u64 resets0, refs0 = 0, refs = 0, seqno = 0;
	__s32 job_error = 1;
	__s64 deadline;
	int status, err;
	pid_t pid;

	if (!self->ready)
		return;
	set_grace(_metadata, 200);
	resets0 = ring_resets(_metadata, self);
	ASSERT_EQ(0, rbln_info_mem(self->fd, &before));
	ASSERT_EQ(0, rbln_module_refs(&refs0));
	pid = start_child(_metadata, self, false);
	/* This client's job, on the same ring behind the child's. */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va, 5, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->q, &self->cb,
				     &self->data.handle, 1, &seqno));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));

	err = rbln_wait_job(self->fd, self->q, seqno, RBLN_JOB_WAIT_MS,
			    &job_error);
	ASSERT_EQ(0, err) TH_LOG("WAIT: %s", strerror(-err));
	EXPECT_EQ(0, job_error) TH_LOG("the other client's job: %s",
				       strerror(-job_error));
	EXPECT_EQ(5, peek((__u64 *)self->data.map));

	/* Its memory and its file are given back. */
	deadline = rbln_now_ms() + RBLN_JOB_WAIT_MS;
	for (;;) {
		ASSERT_EQ(0, rbln_info_mem(self->fd, &after));
		ASSERT_EQ(0, rbln_module_refs(&refs));
		if ((after.host_bytes == before.host_bytes &&
		     after.pinned_bytes == before.pinned_bytes &&
		     refs == refs0) || rbln_now_ms() > deadline)
			break;
		rbln_sleep_ms(20);
	}
	EXPECT_EQ(before.host_bytes, after.host_bytes);
	EXPECT_EQ(before.pinned_bytes, after.pinned_bytes);
	EXPECT_EQ(refs0, refs) TH_LOG("the child's file is still open");

	/* Cancelled, not timed out: no ring reset, and the jobs never ran on. */
	EXPECT_EQ(resets0, ring_resets(_metadata, self));
	poke(&self->shared[GATE], 1);
	rbln_sleep_ms(100);
	EXPECT_EQ(0, peek(&self->shared[DONE]));
	EXPECT_EQ(0, peek(&self->shared[BEHIND]));
}

/*
 * A job held on the device by the word at data + 0 (until it is >= 1),
 * on @q of this file; its fence goes to syncobj @out.
 */
static void submit_held(struct __test_metadata *_metadata,
			FIXTURE_DATA(rel) * self, __u32 out)
{
	struct drm_rbln_submit s;

	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, self->data.va, 1, 0);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 1, 0);
	rbln_submit_args(&s, self->q, &self->cb, &self->data.handle, 1);
	s.out_handle = out;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
}

/*
 * Client A (its own file) submits a job that waits for client B's held
 * job (B's syncobj, shared with A) and has an out-syncobj B shares.  A
 * closes its file: the close does not wait for B's job, and A's job ends
 * -ECANCELED (without running) after the grace, while B's job is still
 * held.  Before, the release waited for B's fence, however long.
 */
TEST_F_TIMEOUT(rel, a_released_file_job_waiting_for_a_foreign_fence_is_cancelled_at_once,
	       120)
{
	__u32 held = 0, held_a = 0, done_a = 0, done = 0, qa = 0;
	struct drm_rbln_sync in = { 0 };
	struct drm_rbln_submit s;
	struct rbln_cmdbuf cba;
	struct rbln_buf bufa;
	__u64 refs0 = 0, refs = 0;
	__s32 je = 1;
	__s64 t0;
	int fa;

	if (!self->ready)
		return;
	set_grace(_metadata, 200);
	ASSERT_EQ(0, rbln_module_refs(&refs0));
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &held));
	submit_held(_metadata, self, held);

	fa = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fa);
	ASSERT_EQ(0, rbln_queue_create(fa, 1, RBLN_QUEUE_PRIORITY_NORMAL, &qa));
	ASSERT_EQ(0, rbln_cmd_init(fa, &cba, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fa, &bufa, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_syncobj_share(self->fd, held, fa, &held_a));
	ASSERT_EQ(0, rbln_syncobj_create(fa, &done_a));
	ASSERT_EQ(0, rbln_syncobj_share(fa, done_a, self->fd, &done));
	rbln_cmd_signal(&cba, bufa.va, 3, 0);
	rbln_submit_args(&s, qa, &cba, &bufa.handle, 1);
	in.handle = held_a;
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	s.out_handle = done_a;
	ASSERT_EQ(0, rbln_submit_raw(fa, &s));
	rbln_sleep_ms(100);
	EXPECT_EQ(-ETIME, rbln_wait_syncobj(self->fd, done, 0, 0, &je))
	TH_LOG("A's job did not wait for B's");

	/* The mappings first, so that close() is the release. */
	munmap(bufa.map, bufa.size);
	munmap(cba.buf.map, cba.buf.size);
	t0 = rbln_now_ms();
	EXPECT_EQ(0, close(fa));
	TH_LOG("close() took %lld ms (grace 200 ms)",
	       (long long)(rbln_now_ms() - t0));
	ASSERT_EQ(0, rbln_wait_syncobj(self->fd, done, 0, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(-ECANCELED, je) TH_LOG("A's job: %s", strerror(-je));
	EXPECT_EQ(0, rbln_module_refs(&refs));
	EXPECT_EQ(refs0, refs) TH_LOG("A's file is still open");
	EXPECT_EQ(0, peek(&self->shared[DONE]));
	EXPECT_EQ(0, ((__u64 *)self->data.map)[1]) TH_LOG("B's job ran early");

	/* B's job goes on as before. */
	__atomic_store_n((__u64 *)self->data.map, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, rbln_wait_syncobj(self->fd, held, 0, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je) TH_LOG("B's job: %s", strerror(-je));
	EXPECT_EQ(1, __atomic_load_n((__u64 *)self->data.map + 1,
				     __ATOMIC_ACQUIRE));
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, done));
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, held));
}

/*
 * QUEUE_DESTROY of a queue whose job waits for an in-fence (this file's
 * held job on another queue) returns at once (before, it blocked until
 * the fence signalled); the queue is gone for SUBMIT, WAIT and DESTROY,
 * its id stays taken while the job is pending, the job runs once the
 * fence signals (its out-syncobj reports it), and then the id is free.
 */
TEST_F_TIMEOUT(rel, queue_destroy_returns_at_once_and_its_job_runs_when_its_fence_signals,
	       120)
{
	__u32 held = 0, done = 0, qd = 0, q2 = 0, q3 = 0;
	struct drm_rbln_sync in = { 0 };
	struct drm_rbln_submit s;
	__u64 *w = (__u64 *)self->data.map;
	__s32 je = 1;
	__u64 seqno;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &held));
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &done));
	submit_held(_metadata, self, held);
	ASSERT_EQ(0, rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &qd));
	rbln_cmd_begin(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va + 16, 9, 0);
	rbln_submit_args(&s, qd, &self->cb, &self->data.handle, 1);
	in.handle = held;
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	s.out_handle = done;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	seqno = s.seqno;

	ASSERT_EQ(0, rbln_queue_destroy(self->fd, qd));
	EXPECT_EQ(-ENOENT, rbln_wait_job(self->fd, qd, seqno, 0, &je));
	EXPECT_EQ(-ENOENT, rbln_submit_job(self->fd, qd, &self->cb,
					   &self->data.handle, 1, &seqno));
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(self->fd, qd));
	ASSERT_EQ(0, rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &q2));
	EXPECT_NE(qd, q2) TH_LOG("the id of a queue with a pending job was reused");
	rbln_sleep_ms(100);
	EXPECT_EQ(0, __atomic_load_n(&w[2], __ATOMIC_ACQUIRE))
	TH_LOG("the job ran before its in-fence signalled");

	__atomic_store_n(&w[0], 1, __ATOMIC_RELEASE);	/* the held job goes */
	ASSERT_EQ(0, rbln_wait_syncobj(self->fd, done, 0, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je) TH_LOG("the destroyed queue's job: %s", strerror(-je));
	EXPECT_EQ(9, __atomic_load_n(&w[2], __ATOMIC_ACQUIRE));
	/* Its id is free again now (the lowest free id is taken first). */
	ASSERT_EQ(0, rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &q3));
	EXPECT_EQ(qd, q3) TH_LOG("the destroyed queue's id stayed taken");
	EXPECT_EQ(0, rbln_queue_destroy(self->fd, q3));
	EXPECT_EQ(0, rbln_queue_destroy(self->fd, q2));
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, done));
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, held));
}

TEST_HARNESS_MAIN
