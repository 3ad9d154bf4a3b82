// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_submit_uring_test - SUBMIT and WAIT through io_uring
 * (IORING_OP_URING_CMD with 128-byte SQEs and 32-byte CQEs).
 *
 * Pins: 10,000 jobs submitted in batches of 1 to 64 (WAITs mixed in)
 * give 10,000 CQEs, each once, res 0 and big_cqe[0] = the job's seqno, and
 * every job's store lands; the CQE of a SUBMIT comes when the job is done,
 * with the job's error; a uring WAIT ends at its deadline with -ETIME or
 * when the job is done, by seqno or by syncobj (big_cqe[0] 0); the
 * pending commands of a task that exits or is killed, on a ring it shares,
 * each complete once (-ECANCELED or their result) and its job runs; closing a
 * ring, or killing a process, with jobs in flight leaks nothing: every
 * buffer is freed, the file is released, the kernel logs no warning;
 * the same holds on an SQPOLL ring, whose kernel thread issues the
 * commands and runs their completions.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
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

#define N_JOBS 10000
#define WAIT_TAG 0x8000000000000000ull	/* user_data of WAIT commands */
#define HOLD_MS 300

FIXTURE(ur)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 q;
	struct rbln_cmdbuf cb;
	struct rbln_buf data;	/* 1 MiB host */
	struct io_uring ring;
	bool have_ring;
	bool ready;
};

FIXTURE_SETUP(ur)
{
	int err;

	self->fd = -1;
	if (!rbln_require_nodes(_metadata, self->nodes))
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_info_device(self->fd, &self->dev));
	if (!rbln_require_rings(_metadata, self->fd))
		return;
	self->q = rbln_new_queue(_metadata, self->fd,
				 rbln_all_chiplets(self->dev.chiplet_count));
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 512 * 1024,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->data, 1 << 20,
				  RBLN_REGION_HOST, 0));
	memset(self->data.map, 0, 1 << 20);
	err = rbln_uring_init(&self->ring, 256, 0);
	ASSERT_EQ(0, err) TH_LOG("io_uring SQE128|CQE32: %s", strerror(-err));
	self->have_ring = true;
	self->ready = true;
}

FIXTURE_TEARDOWN(ur)
{
	if (self->data.handle) {
		/* releases any job still held on a flag */
		memset(self->data.map, 0xff, 4096);
		__sync_synchronize();
	}
	if (self->have_ring)
		io_uring_queue_exit(&self->ring);
	if (self->data.handle)
		rbln_buf_free(self->fd, &self->data);
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

/* Queues a SUBMIT of the current job of @cb with the data buffer. */
static void queue_submit(struct __test_metadata *_metadata,
			 struct io_uring *ring, int fd, __u32 q,
			 const struct rbln_cmdbuf *cb, const __u32 *bos,
			 __u32 nbos, __u64 user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct drm_rbln_submit s;

	ASSERT_NE(NULL, sqe) TH_LOG("SQ full");
	rbln_submit_args(&s, q, cb, bos, nbos);
	rbln_prep_uring_cmd(sqe, fd, RBLN_URING_CMD_SUBMIT, &s, sizeof(s),
			    user_data, false);
}

static void queue_wait(struct __test_metadata *_metadata,
		       struct io_uring *ring, const struct drm_rbln_wait *w,
		       int fd, __u64 user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ASSERT_NE(NULL, sqe) TH_LOG("SQ full");
	rbln_prep_uring_cmd(sqe, fd, RBLN_URING_CMD_WAIT, w, sizeof(*w),
			    user_data, false);
}

TEST_F_TIMEOUT(ur, ten_thousand_jobs_in_batches_give_their_cqes_and_seqnos,
	       900)
{
	static const int batches[] = { 1, 8, 32, 64, 3, 17 };
	__u64 *res = (__u64 *)self->data.map + 512;	/* past the flags */
	unsigned char *seen;
	int submitted = 0, reaped = 0, waits = 0, waits_done = 0, b = 0;
	int inflight = 0, bad = 0;
	__u32 bo = self->data.handle;

	if (!self->ready)
		return;
	ASSERT_GE(self->data.size, 4096 + 8 * N_JOBS);
	seen = calloc(N_JOBS, 1);
	ASSERT_NE(NULL, seen);
	while (reaped < N_JOBS || waits_done < waits) {
		int n = batches[b++ % ARRAY_SIZE(batches)];

		if (n > N_JOBS - submitted)
			n = N_JOBS - submitted;
		if (inflight + n + 1 > 256)
			n = 0;	/* reap first */
		for (int i = 0; i < n; i++, submitted++) {
			/* the command buffer is reused ring-wise: 24 bytes a job */
			if (self->cb.len + 24 > self->cb.buf.size)
				self->cb.len = 0;
			rbln_cmd_begin(&self->cb);
			rbln_cmd_signal(&self->cb,
					self->data.va + 4096 + 8 * submitted,
					submitted + 1, 0);
			queue_submit(_metadata, &self->ring, self->fd, self->q,
				     &self->cb, &bo, 1, submitted);
			inflight++;
		}
		/* now and then a WAIT for the job just queued */
		if (n && submitted % 1000 < n) {
			struct drm_rbln_wait w = { .queue_id = self->q,
						   .seqno = submitted };

			queue_wait(_metadata, &self->ring, &w, self->fd,
				   WAIT_TAG | submitted);
			inflight++;
			waits++;
		}
		if (n) {
			int err = io_uring_submit(&self->ring);

			ASSERT_LT(0, err) TH_LOG("io_uring_submit: %s",
						 strerror(-err));
		}
		/* reap what is there; block only when nothing was queued */
		for (;;) {
			__u64 ud = 0, extra = 0;
			__s32 r = 0;
			int err = rbln_uring_reap(&self->ring,
						  n ? 0 : RBLN_JOB_WAIT_MS,
						  &ud, &r, &extra);

			if (err == -ETIME && n)
				break;
			ASSERT_EQ(0, err)
			TH_LOG("no CQE within %d ms: %d reaped of %d submitted",
			       RBLN_JOB_WAIT_MS, reaped, submitted);
			inflight--;
			n = 1;	/* got one: do not block for the next */
			if (ud & WAIT_TAG) {
				EXPECT_EQ(0, r) TH_LOG("WAIT %llu",
						       ud & ~WAIT_TAG);
				EXPECT_EQ(ud & ~WAIT_TAG, extra);
				waits_done++;
				continue;
			}
			ASSERT_GT(N_JOBS, ud);
			if (seen[ud]++ && bad++ < 5)
				TH_LOG("CQE of job %llu twice", ud);
			if ((r || extra != ud + 1) && bad++ < 5)
				TH_LOG("job %llu: res %d seqno %llu", ud, r,
				       extra);
			reaped++;
		}
	}
	EXPECT_EQ(0, bad);
	for (int i = 0, wrong = 0; i < N_JOBS; i++) {
		if (res[i] == (__u64)i + 1)
			continue;
		EXPECT_EQ(0, ++wrong)
		TH_LOG("job %d stored %llu", i, (unsigned long long)res[i]);
		break;
	}
	/* the ioctl sees the same queue: old, last and future seqnos */
	{
		__s32 je = 1;

		EXPECT_EQ(0, rbln_wait_job(self->fd, self->q, 1, 0, &je))
		TH_LOG("seqno 1, long done");
		EXPECT_EQ(0, je);
		EXPECT_EQ(0, rbln_wait_job(self->fd, self->q, N_JOBS, 0, &je));
		EXPECT_EQ(0, je);
		EXPECT_EQ(-ENOENT, rbln_wait_job(self->fd, self->q, N_JOBS + 1,
						 0, &je));
	}
	free(seen);
}

TEST_F(ur, submit_cqe_comes_when_the_job_is_done_with_its_error)
{
	__u32 bo = self->data.handle;
	__u64 ud = 0, extra = 0;
	__s32 r = 1;

	if (!self->ready)
		return;
	/* held on a flag: no CQE until it is released */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, self->data.va, 1, 0);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 5, 0);
	queue_submit(_metadata, &self->ring, self->fd, self->q, &self->cb, &bo,
		     1, 1);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-ETIME, rbln_uring_reap(&self->ring, HOLD_MS, &ud, &r,
					  &extra))
	TH_LOG("CQE of a job that cannot have run");
	__atomic_store_n((__u64 *)self->data.map, 1, __ATOMIC_SEQ_CST);
	ASSERT_EQ(0, rbln_uring_reap(&self->ring, RBLN_JOB_WAIT_MS, &ud, &r,
				     &extra));
	EXPECT_EQ(1, ud);
	EXPECT_EQ(0, r);
	EXPECT_EQ(1, extra);
	EXPECT_EQ(5, ((__u64 *)self->data.map)[1]);

	/* a failing job: res is its error */
	rbln_cmd_begin(&self->cb);
	{
		__u64 bad = RBLN_FW_PKT_HDR(0x3e, 0, 8);

		rbln_cmd_raw(&self->cb, &bad, 8);
	}
	queue_submit(_metadata, &self->ring, self->fd, self->q, &self->cb, &bo,
		     1, 2);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	ASSERT_EQ(0, rbln_uring_reap(&self->ring, RBLN_JOB_WAIT_MS, &ud, &r,
				     &extra));
	EXPECT_EQ(2, ud);
	EXPECT_EQ(-EINVAL, r);
	EXPECT_EQ(2, extra);
	/* and a uring WAIT for it says the same */
	{
		struct drm_rbln_wait w = { .queue_id = self->q, .seqno = 2 };

		queue_wait(_metadata, &self->ring, &w, self->fd, 3);
	}
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	ASSERT_EQ(0, rbln_uring_reap(&self->ring, RBLN_JOB_WAIT_MS, &ud, &r,
				     &extra));
	EXPECT_EQ(3, ud);
	EXPECT_EQ(-EINVAL, r);
	EXPECT_EQ(2, extra);
}

TEST_F(ur, uring_wait_ends_at_its_deadline_or_when_the_job_is_done)
{
	struct drm_rbln_submit s;
	struct drm_rbln_wait w;
	__u32 bo = self->data.handle, so = 0;
	__u64 ud = 0, extra = 1;
	__s64 t0, ms;
	__s32 r = 1;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, self->data.va + 16, 1, 0);
	rbln_submit_args(&s, self->q, &self->cb, &bo, 1);
	s.out_handle = so;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));

	/* a deadline 150 ms away */
	w = (struct drm_rbln_wait){ .queue_id = self->q, .seqno = s.seqno,
				    .timeout_ns = rbln_deadline_ms(150) };
	t0 = rbln_now_ms();
	queue_wait(_metadata, &self->ring, &w, self->fd, 10);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	ASSERT_EQ(0, rbln_uring_reap(&self->ring, 5000, &ud, &r, &extra));
	ms = rbln_now_ms() - t0;
	EXPECT_EQ(10, ud);
	EXPECT_EQ(-ETIME, r);
	EXPECT_EQ(s.seqno, extra);
	EXPECT_LE(140, ms) TH_LOG("-ETIME after %lld ms", ms);
	EXPECT_GT(1000, ms) TH_LOG("-ETIME after %lld ms", ms);
	/* a deadline in the past: -ETIME at once */
	w.timeout_ns = rbln_now_ns() - 1;
	queue_wait(_metadata, &self->ring, &w, self->fd, 11);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	ASSERT_EQ(0, rbln_uring_reap(&self->ring, 1000, &ud, &r, &extra));
	EXPECT_EQ(11, ud);
	EXPECT_EQ(-ETIME, r);

	/* no deadline (0 means none here), by seqno and by syncobj */
	w.timeout_ns = 0;
	queue_wait(_metadata, &self->ring, &w, self->fd, 12);
	w = (struct drm_rbln_wait){ .flags = RBLN_WAIT_SYNCOBJ,
				    .sync.handle = so };
	queue_wait(_metadata, &self->ring, &w, self->fd, 13);
	ASSERT_EQ(2, io_uring_submit(&self->ring));
	EXPECT_EQ(-ETIME, rbln_uring_reap(&self->ring, HOLD_MS, &ud, &r,
					  &extra))
	TH_LOG("a WAIT without deadline ended early: ud %llu res %d", ud, r);
	__atomic_store_n((__u64 *)(self->data.map + 16), 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, rbln_uring_reap(&self->ring, RBLN_JOB_WAIT_MS, &ud,
					     &r, &extra));
		EXPECT_EQ(0, r);
		if (ud == 12) {
			EXPECT_EQ(s.seqno, extra);
		} else {
			EXPECT_EQ(13, ud);
			EXPECT_EQ(0, extra) TH_LOG("syncobj WAIT: big_cqe[0] 0");
		}
	}
	rbln_syncobj_destroy(self->fd, so);
}

/*
 * The task that issued the commands exits or is killed; the ring (shared
 * with the parent) stays.  io_uring does not cancel a dead task's
 * untracked requests while the ring lives (only the ring's end cancels
 * them), so each pending command completes either with -ECANCELED or,
 * once its job is done, with its result: none is lost or completed twice,
 * and the job itself runs.
 */
static void exiting_task(struct __test_metadata *_metadata,
			 FIXTURE_DATA(ur) * self, bool kill_it)
{
	__u32 bo = self->data.handle;
	bool got[2] = { false, false };
	__u64 ud, extra;
	int status;
	pid_t pid;
	__s32 r;

	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, self->data.va + 24, 1, 0);
	rbln_cmd_signal(&self->cb, self->data.va + 32, 9, 0);
	__atomic_store_n((__u64 *)(self->data.map + 24), 0, __ATOMIC_SEQ_CST);
	((__u64 *)self->data.map)[4] = 0;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct drm_rbln_wait w = { .queue_id = self->q, .seqno = 1 };
		struct io_uring_sqe *sqe = io_uring_get_sqe(&self->ring);
		struct drm_rbln_submit s;

		rbln_submit_args(&s, self->q, &self->cb, &bo, 1);
		rbln_prep_uring_cmd(sqe, self->fd, RBLN_URING_CMD_SUBMIT, &s,
				    sizeof(s), 100, false);
		/* the queue is new: the job above is its seqno 1 */
		sqe = io_uring_get_sqe(&self->ring);
		rbln_prep_uring_cmd(sqe, self->fd, RBLN_URING_CMD_WAIT, &w,
				    sizeof(w), 101, false);
		if (io_uring_submit(&self->ring) != 2)
			_exit(3);
		if (kill_it)
			pause();
		_exit(0);
	}
	if (kill_it) {
		rbln_sleep_ms(HOLD_MS);
		kill(pid, SIGKILL);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (!kill_it) {
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(0, WEXITSTATUS(status));
	}
	rbln_sleep_ms(HOLD_MS);
	/* the job still runs once released */
	__atomic_store_n((__u64 *)(self->data.map + 24), 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, rbln_uring_reap(&self->ring, RBLN_JOB_WAIT_MS, &ud,
					     &r, &extra))
		TH_LOG("the %s task's command %d was lost",
		       kill_it ? "killed" : "exited", i);
		ASSERT_TRUE(ud == 100 || ud == 101) TH_LOG("user_data %llu", ud);
		EXPECT_FALSE(got[ud - 100]) TH_LOG("two CQEs for %llu", ud);
		got[ud - 100] = true;
		EXPECT_TRUE(r == 0 || r == -ECANCELED)
		TH_LOG("command %llu: res %d", ud, r);
		if (r == 0)
			EXPECT_EQ(1, extra) TH_LOG("command %llu: seqno", ud);
	}
	EXPECT_EQ(-ETIME, rbln_uring_reap(&self->ring, 100, &ud, &r, &extra))
	TH_LOG("a third CQE: %llu res %d", ud, r);
	{
		__s32 je = 1;

		EXPECT_EQ(0, rbln_wait_job(self->fd, self->q, 1,
					   RBLN_JOB_WAIT_MS, &je));
		EXPECT_EQ(0, je);
		EXPECT_EQ(9, ((__u64 *)self->data.map)[4])
		TH_LOG("the job did not run");
	}
}

TEST_F(ur, pending_commands_of_an_exiting_task_are_not_lost)
{
	if (!self->ready)
		return;
	exiting_task(_metadata, self, false);
}

TEST_F(ur, pending_commands_of_a_killed_task_are_not_lost)
{
	if (!self->ready)
		return;
	exiting_task(_metadata, self, true);
}

/* Open file descriptors of all processes on accel nodes (/proc/<pid>/fd). */
static int accel_fds(void)
{
	DIR *proc = opendir("/proc");
	struct dirent *p, *f;
	int n = 0;

	if (!proc)
		return -errno;
	while ((p = readdir(proc))) {
		char dir[272], path[544], target[64];
		DIR *fds;

		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", p->d_name);
		fds = opendir(dir);
		if (!fds)
			continue;	/* gone, or a kernel thread */
		while ((f = readdir(fds))) {
			ssize_t len;

			snprintf(path, sizeof(path), "%s/%s", dir, f->d_name);
			len = readlink(path, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			n += !strncmp(target, "/dev/accel/", 11);
		}
		closedir(fds);
	}
	closedir(proc);
	return n;
}

/*
 * Waits (at most RBLN_JOB_WAIT_MS) until no file of a card is held open by
 * anything but a descriptor: a process that was killed while a job of its
 * own waited on the device leaves its file to that job, which holds it
 * until it ends (at its timeout), and the file's buffers with it.  A leak
 * check whose "before" figures include such a file would see them go.
 * Files kept by mappings or dma-bufs alone also count, so this is only a
 * bounded wait, never a failure.  Returns how long it waited (ms).
 */
static int wait_for_orphans(void)
{
	__s64 start = rbln_now_ms();
	__u64 refs;
	int fds;

	while (rbln_now_ms() - start < RBLN_JOB_WAIT_MS) {
		fds = accel_fds();
		if (rbln_module_refs(&refs) || fds < 0 || refs <= (__u64)fds)
			break;
		rbln_sleep_ms(50);
	}
	return (int)(rbln_now_ms() - start);
}

/* Kernel log lines that mean a bug (warnings, BUGs, refcount, KASAN). */
static int splats(const char *log)
{
	return rbln_count_lines(log, "WARNING:", NULL, NULL) +
	       rbln_count_lines(log, "BUG:", NULL, NULL) +
	       rbln_count_lines(log, "refcount_t:", NULL, NULL) +
	       rbln_count_lines(log, "Oops", NULL, NULL) +
	       rbln_count_lines(log, "list_del corruption", NULL, NULL);
}

/*
 * A child with its own file, buffers (host and userptr) and ring queues
 * 100 jobs (the first held 300 ms by a WAIT packet timeout) and then
 * closes the ring (@kill_it false) or is SIGKILLed: afterwards the card's
 * memory figures are back where they were, the child's file is released
 * (the module's reference count is back) and the kernel logged nothing
 * bad.
 */
static void in_flight_teardown(struct __test_metadata *_metadata,
			       FIXTURE_DATA(ur) * self, bool kill_it,
			       unsigned int ring_flags)
{
	struct drm_rbln_info_mem before, after;
	static char klog[65536];
	int status, kfd, pipefd[2];
	__u64 refs0 = 0, refs = 0;
	__s64 deadline;
	char c = 0;
	pid_t pid;
	int waited = wait_for_orphans();

	if (waited > 100)
		TH_LOG("waited %d ms for files of gone processes to be released",
		       waited);
	ASSERT_EQ(0, rbln_info_mem(self->fd, &before));
	ASSERT_EQ(0, rbln_module_refs(&refs0));
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rbln_buf host, up;
		struct rbln_cmdbuf cb;
		struct io_uring ring;
		__u32 bos[2], q;
		int n, fd = rbln_open_minor(self->nodes[0].minor);

		if (fd < 0 || rbln_queue_create(fd, 1, 1, &q) ||
		    rbln_cmd_init(fd, &cb, 64 * 1024, RBLN_REGION_HOST, 0) ||
		    rbln_buf_new(fd, &host, 2 << 20, RBLN_REGION_HOST, 0) ||
		    rbln_buf_userptr(fd, &up, 2 << 20) ||
		    rbln_uring_init(&ring, 128, ring_flags))
			_exit(2);
		memset(host.map, 0, 4096);
		bos[0] = host.handle;
		bos[1] = up.handle;
		for (int i = 0; i < 100; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			struct drm_rbln_submit s;

			rbln_cmd_begin(&cb);
			if (i == 0)
				rbln_cmd_wait(&cb, host.va, 1,
					      HOLD_MS * 1000000ull);
			rbln_cmd_copy(&cb, host.va + 4096, up.va, 65536);
			rbln_submit_args(&s, q, &cb, bos, 2);
			rbln_prep_uring_cmd(sqe, fd, RBLN_URING_CMD_SUBMIT, &s,
					    sizeof(s), i, false);
		}
		/*
		 * On an SQPOLL ring liburing counts what the polling thread
		 * has not taken yet: anything from 0 to 100.
		 */
		n = io_uring_submit(&ring);
		if (ring_flags & IORING_SETUP_SQPOLL ? n < 0 : n != 100)
			_exit(3);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(4);
		if (kill_it)
			pause();
		/* close the ring with everything in flight, then the file */
		io_uring_queue_exit(&ring);
		/*
		 * A deferred-task-run ring's end cancels the pending commands
		 * from a kernel worker: with the submitter still alive, their
		 * completions must still be posted from its own context.
		 */
		if (ring_flags & IORING_SETUP_DEFER_TASKRUN)
			rbln_sleep_ms(2 * HOLD_MS);
		close(fd);
		_exit(0);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1)) TH_LOG("child did not submit");
	close(pipefd[0]);
	if (kill_it)
		kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (!kill_it) {
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status));
	}

	/* the jobs finish on their own; then everything is given back */
	deadline = rbln_now_ms() + RBLN_JOB_WAIT_MS;
	for (;;) {
		ASSERT_EQ(0, rbln_info_mem(self->fd, &after));
		ASSERT_EQ(0, rbln_module_refs(&refs));
		if (after.host_bytes == before.host_bytes &&
		    after.pinned_bytes == before.pinned_bytes && refs == refs0)
			break;
		if (rbln_now_ms() > deadline)
			break;
		rbln_sleep_ms(50);
	}
	EXPECT_EQ(before.host_bytes, after.host_bytes)
	TH_LOG("host buffers of the child still allocated");
	EXPECT_EQ(before.pinned_bytes, after.pinned_bytes)
	TH_LOG("user pages of the child still pinned");
	EXPECT_EQ(refs0, refs) TH_LOG("the child's file is still open");
	rbln_sleep_ms(100);
	klog[0] = '\0';
	EXPECT_EQ(0, rbln_kmsg_read(kfd, klog, sizeof(klog)));
	close(kfd);
	EXPECT_EQ(0, splats(klog)) TH_LOG("kernel log:\n%s", klog);

	/* the card still runs jobs */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va + 40, 1, 0);
	rbln_expect_job_ok(_metadata, self->fd, self->q, &self->cb,
			   &self->data.handle, 1, "after the child");
}

TEST_F_TIMEOUT(ur, closing_the_ring_with_jobs_in_flight_leaks_nothing, 120)
{
	if (!self->ready)
		return;
	in_flight_teardown(_metadata, self, false, 0);
}

TEST_F_TIMEOUT(ur, killing_a_process_with_jobs_in_flight_leaks_nothing, 120)
{
	if (!self->ready)
		return;
	in_flight_teardown(_metadata, self, true, 0);
}

/* The ring librbln makes: single issuer, task work deferred to its waits. */
#define DEFERRED_RING (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)

TEST_F_TIMEOUT(ur, closing_a_deferred_ring_with_jobs_in_flight_leaks_nothing,
	       120)
{
	if (!self->ready)
		return;
	in_flight_teardown(_metadata, self, false, DEFERRED_RING);
}

TEST_F_TIMEOUT(ur, killing_a_process_with_a_deferred_ring_leaks_nothing, 120)
{
	if (!self->ready)
		return;
	in_flight_teardown(_metadata, self, true, DEFERRED_RING);
}

/*
 * With IORING_SETUP_SQPOLL a kernel thread of the process (iou-sqp-<pid>)
 * issues the commands and runs their completions: the driver must not
 * depend on the submitting task.  One batch of SUBMITs and a WAIT at a
 * time (the submitter never enters the kernel to submit unless the
 * thread sleeps): every CQE once, res 0, big_cqe[0] the seqno, every
 * store landed, and the ioctl WAIT sees the same queue.
 */
#define SQPOLL_JOBS 256

TEST_F_TIMEOUT(ur, jobs_submitted_by_an_sqpoll_thread_give_their_cqes, 300)
{
	__u64 *res = (__u64 *)self->data.map + 512;
	struct drm_rbln_wait w = { .queue_id = self->q };
	bool seen[SQPOLL_JOBS] = { false };
	__u32 bo = self->data.handle;
	struct io_uring ring;
	int err, bad = 0;

	if (!self->ready)
		return;
	err = rbln_uring_init(&ring, 64, IORING_SETUP_SQPOLL);
	ASSERT_EQ(0, err) TH_LOG("io_uring SQPOLL: %s", strerror(-err));
	for (int base = 0; base < SQPOLL_JOBS; base += 32) {
		for (int i = base; i < base + 32; i++) {
			rbln_cmd_begin(&self->cb);
			rbln_cmd_signal(&self->cb, self->data.va + 4096 + 8 * i,
					i + 1, 0);
			queue_submit(_metadata, &ring, self->fd, self->q,
				     &self->cb, &bo, 1, i);
		}
		w.seqno = base + 32;
		queue_wait(_metadata, &ring, &w, self->fd, WAIT_TAG | w.seqno);
		/* the SQEs the polling thread has not taken yet: 0..33 */
		err = io_uring_submit(&ring);
		ASSERT_LE(0, err) TH_LOG("io_uring_submit: %s", strerror(-err));
		for (int k = 0; k < 33; k++) {
			__u64 ud = 0, extra = 0;
			__s32 r = 0;

			ASSERT_EQ(0, rbln_uring_reap(&ring, RBLN_JOB_WAIT_MS,
						     &ud, &r, &extra))
			TH_LOG("batch at %d: CQE %d of 33 missing", base, k);
			if (ud & WAIT_TAG) {
				EXPECT_EQ(0, r);
				EXPECT_EQ(ud & ~WAIT_TAG, extra);
				continue;
			}
			ASSERT_GT(SQPOLL_JOBS, ud);
			if (seen[ud] && bad++ < 5)
				TH_LOG("CQE of job %llu twice", ud);
			seen[ud] = true;
			if ((r || extra != ud + 1) && bad++ < 5)
				TH_LOG("job %llu: res %d seqno %llu", ud, r,
				       extra);
		}
	}
	io_uring_queue_exit(&ring);
	EXPECT_EQ(0, bad);
	for (int i = 0; i < SQPOLL_JOBS; i++) {
		EXPECT_TRUE(seen[i]) TH_LOG("no CQE for job %d", i);
		EXPECT_EQ((__u64)i + 1, res[i]) TH_LOG("job %d's store", i);
		if (!seen[i] || res[i] != (__u64)i + 1)
			break;
	}
	{
		__s32 je = 1;

		EXPECT_EQ(0, rbln_wait_job(self->fd, self->q, SQPOLL_JOBS, 0,
					   &je));
		EXPECT_EQ(0, je);
	}
}

TEST_F_TIMEOUT(ur, closing_an_sqpoll_ring_with_jobs_in_flight_leaks_nothing,
	       120)
{
	if (!self->ready)
		return;
	in_flight_teardown(_metadata, self, false, IORING_SETUP_SQPOLL);
}

TEST_F_TIMEOUT(ur, killing_a_process_with_an_sqpoll_ring_leaks_nothing, 120)
{
	if (!self->ready)
		return;
	in_flight_teardown(_metadata, self, true, IORING_SETUP_SQPOLL);
}

TEST_HARNESS_MAIN
