// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_submit_sync_test - order and synchronisation of jobs.
 *
 * Pins: the jobs of a queue run in submission order (each sees the stores
 * of the one before; seqnos 1, 2, ...); a WAIT packet blocks its ring
 * until a SIGNAL of a job on another queue (another chiplet) or of another
 * client through a shared buffer releases it, the host not waiting in
 * between; a WAIT packet released by the CPU; a WAIT packet's timeout
 * fails its job with -ETIMEDOUT and the queue goes on; binary and timeline
 * syncobjs as out-fences and in-fences order jobs across queues, and
 * RBLN_WAIT_SYNCOBJ, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT and _QUERY see the
 * points; WAIT by seqno and by syncobj report the job's error; WAIT
 * deadlines (-ETIME for a poll, a past and a near deadline, after the
 * deadline and not long after); a job's fence is in its buffers'
 * reservations: the dma-buf of a busy buffer polls busy, and a job of an
 * importing client waits for the exporter's job (implicit sync); a job's
 * card time adds to the chiplet's sysfs busy_ns and to its client's fdinfo
 * drm-engine-chiplet<i>, and nowhere else.
 *
 * Jobs here are held back by WAIT packets on "flags" that the CPU or other
 * jobs release; no job is held longer than ~0.5 s, well below the
 * driver's job timeout, and the teardown releases every flag.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm/rbln_accel.h>
#include <xf86drm.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_sub_ksft.h"

#define HOLD_MS 300	/* how long a test keeps a job blocked */

FIXTURE(sync)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 qa, qb;		/* chiplet 0 and the last chiplet */
	struct rbln_cmdbuf cb;
	struct rbln_buf flags;	/* host: 64-bit flags the CPU releases */
	struct rbln_buf host;	/* 4 MiB host */
	struct rbln_buf hbm;	/* 4 MiB HBM of chiplet 0 */
	__u32 bos[3];
	bool ready;
};

FIXTURE_SETUP(sync)
{
	__u32 last;

	self->fd = -1;
	if (!rbln_require_nodes(_metadata, self->nodes))
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_info_device(self->fd, &self->dev));
	if (!rbln_require_rings(_metadata, self->fd))
		return;
	last = self->dev.chiplet_count - 1;
	self->qa = rbln_new_queue(_metadata, self->fd, 1);
	self->qb = rbln_new_queue(_metadata, self->fd, 1u << last);
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 256 * 1024,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->flags, 4096,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->host, 4 << 20,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->hbm, 4 << 20,
				  RBLN_REGION_HBM, 0));
	memset(self->flags.map, 0, 4096);
	self->bos[0] = self->flags.handle;
	self->bos[1] = self->host.handle;
	self->bos[2] = self->hbm.handle;
	self->ready = true;
}

/* Releases every flag, so no job stays blocked after a failed test. */
static void release_all(FIXTURE_DATA(sync) * self)
{
	__u64 *f = (__u64 *)self->flags.map;

	for (int i = 0; i < 512; i++)
		__atomic_store_n(&f[i], ~0ull, __ATOMIC_SEQ_CST);
}

FIXTURE_TEARDOWN(sync)
{
	if (self->flags.handle) {
		release_all(self);
		rbln_buf_free(self->fd, &self->flags);
	}
	if (self->host.handle)
		rbln_buf_free(self->fd, &self->host);
	if (self->hbm.handle)
		rbln_buf_free(self->fd, &self->hbm);
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

static __u64 flag_va(FIXTURE_DATA(sync) * self, int i)
{
	return self->flags.va + 8 * (__u64)i;
}

static void set_flag(FIXTURE_DATA(sync) * self, int i, __u64 v)
{
	__atomic_store_n(&((__u64 *)self->flags.map)[i], v, __ATOMIC_SEQ_CST);
}

/* A job is still running: WAIT polls -ETIME. */
static void expect_busy(struct __test_metadata *_metadata, int fd, __u32 q,
			__u64 seqno, const char *what)
{
	__s32 je = 0;

	EXPECT_EQ(-ETIME, rbln_wait_job(fd, q, seqno, 0, &je))
	TH_LOG("%s: seqno %llu already done", what,
	       (unsigned long long)seqno);
}

static void expect_done(struct __test_metadata *_metadata, int fd, __u32 q,
			__u64 seqno, __s32 want, const char *what)
{
	__s32 je = 1;
	int err = rbln_wait_job(fd, q, seqno, RBLN_JOB_WAIT_MS, &je);

	ASSERT_EQ(0, err) TH_LOG("%s: WAIT: %s", what, strerror(-err));
	EXPECT_EQ(want, je) TH_LOG("%s: job error %d, want %d", what, je, want);
}

TEST_F(sync, jobs_of_a_queue_run_in_submission_order)
{
	const int n = 200;
	__u64 *rec = (__u64 *)self->host.map;
	__u64 *ts = rec + 512;
	__u64 counter = self->host.va + 4096 * 2;
	__u32 q;

	if (!self->ready)
		return;
	/* a queue over every chiplet: in flight, its jobs stay on one */
	q = rbln_new_queue(_metadata, self->fd,
			   rbln_all_chiplets(self->dev.chiplet_count));
	memset(self->host.map, 0xff, 3 * 4096);
	memset(self->host.map + 2 * 4096, 0, 8);
	__sync_synchronize();
	rbln_cmd_reset(&self->cb);
	for (int i = 0; i < n; i++) {
		__u64 seqno = 0;
		int err;

		rbln_cmd_begin(&self->cb);
		if (i % 3 == 0)	/* uneven job lengths */
			rbln_cmd_fill(&self->cb, self->hbm.va, (i + 1) * 4096,
				      i, 1);
		rbln_cmd_copy(&self->cb, counter, self->host.va + 8 * i, 8);
		rbln_cmd_signal(&self->cb, counter, i + 1, 0);
		rbln_cmd_timestamp(&self->cb, self->host.va + 4096 + 8 * i);
		err = rbln_submit_job(self->fd, q, &self->cb, self->bos, 3,
				      &seqno);
		ASSERT_EQ(0, err) TH_LOG("job %d: %s", i, strerror(-err));
		ASSERT_EQ(i + 1, seqno) TH_LOG("seqnos count 1, 2, ...");
	}
	expect_done(_metadata, self->fd, q, n, 0, "last job");
	for (int i = 1; i <= n; i++)
		expect_done(_metadata, self->fd, q, i, 0, "every job");
	for (int i = 0; i < n; i++) {
		EXPECT_EQ(i, rec[i]) TH_LOG("job %d ran after job %llu", i,
					    (unsigned long long)rec[i]);
		if (i) {
			EXPECT_LE(ts[i - 1], ts[i])
			TH_LOG("job %d started before job %d ended", i, i - 1);
		}
	}
	EXPECT_EQ(0, rbln_queue_destroy(self->fd, q));
}

TEST_F(sync, wait_packet_is_released_by_a_signal_from_another_queue)
{
	__u64 fl = self->hbm.va + (2 << 20);	/* the flag: in HBM */
	__u64 sa = 0, sb = 0;

	if (!self->ready)
		return;
	if (self->dev.chiplet_count < 2)
		SKIP(return, "one chiplet: a blocked ring blocks every queue");
	memset(self->hbm.map + (2 << 20), 0, 8);
	memset(self->host.map, 0, 8192);
	__sync_synchronize();
	rbln_cmd_reset(&self->cb);
	/* A (chiplet 0): wait for 5, then copy what B filled */
	rbln_cmd_wait(&self->cb, fl, 5, 0);
	rbln_cmd_copy(&self->cb, self->hbm.va, self->host.va, 4096);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb, self->bos,
				     3, &sa));
	rbln_sleep_ms(HOLD_MS);
	expect_busy(_metadata, self->fd, self->qa, sa, "A before B");
	EXPECT_TRUE(rbln_all_bytes(self->host.map, 4096, 0))
	TH_LOG("the packet after the WAIT ran early");

	/* B (last chiplet): fill, then a SIGNAL too small, then the right one */
	rbln_cmd_begin(&self->cb);
	rbln_cmd_fill(&self->cb, self->hbm.va, 4096, 0xc3, 1);
	rbln_cmd_signal(&self->cb, fl, 4, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qb, &self->cb, self->bos,
				     3, &sb));
	expect_done(_metadata, self->fd, self->qb, sb, 0, "B, value 4");
	rbln_sleep_ms(100);
	expect_busy(_metadata, self->fd, self->qa, sa, "A after 4 < 5");
	rbln_cmd_begin(&self->cb);
	rbln_cmd_signal(&self->cb, fl, 5, RBLN_FW_SIGNAL_IRQ);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qb, &self->cb, self->bos,
				     3, &sb));
	/* no host wait for B: A completes on the device's own */
	expect_done(_metadata, self->fd, self->qa, sa, 0, "A");
	EXPECT_TRUE(rbln_all_bytes(self->host.map, 4096, 0xc3))
	TH_LOG("A does not see what B stored before its SIGNAL");
	expect_done(_metadata, self->fd, self->qb, sb, 0, "B");
}

TEST_F(sync, wait_packet_is_released_by_another_client_through_a_shared_buffer)
{
	struct drm_rbln_bo_create shared;
	struct rbln_cmdbuf cb2;
	__u64 sa = 0, sb = 0;
	__u32 imported = 0, q2;
	int dmabuf = -1;
	void *map;
	int fd2;

	if (!self->ready)
		return;
	if (self->dev.chiplet_count < 2)
		SKIP(return, "one chiplet: a blocked ring blocks every queue");
	ASSERT_EQ(0, rbln_bo_create(self->fd, 4096, RBLN_REGION_HOST, 0, 0,
				    &shared));
	ASSERT_EQ(0, rbln_bo_mmap(self->fd, shared.handle, 4096,
				  PROT_READ | PROT_WRITE, &map));
	memset(map, 0, 4096);
	ASSERT_EQ(0, rbln_prime_export(self->fd, shared.handle, &dmabuf));
	fd2 = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, rbln_prime_import(fd2, dmabuf, &imported));
	q2 = rbln_new_queue(_metadata, fd2,
			    1u << (self->dev.chiplet_count - 1));
	ASSERT_EQ(0, rbln_cmd_init(fd2, &cb2, 4096, RBLN_REGION_HOST, 0));

	/* client 1 waits at its VA of the buffer ... */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, shared.device_va, 1, 0);
	rbln_cmd_signal(&self->cb, shared.device_va + 8, 77, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb,
				     &shared.handle, 1, &sa));
	rbln_sleep_ms(HOLD_MS);
	expect_busy(_metadata, self->fd, self->qa, sa, "client 1");
	/* ... client 2 signals at its own VA of it */
	{
		struct drm_rbln_bo_info info;

		ASSERT_EQ(0, rbln_bo_info(fd2, imported, &info));
		rbln_cmd_signal(&cb2, info.device_va, 1, 0);
	}
	/*
	 * Its job must not wait for client 1's job implicitly (that job waits
	 * for this one on the device): explicit sync.
	 */
	{
		struct drm_rbln_submit s;

		rbln_submit_args(&s, q2, &cb2, &imported, 1);
		s.flags = RBLN_SUBMIT_NO_IMPLICIT_WAIT;
		ASSERT_EQ(0, rbln_submit_raw(fd2, &s));
		sb = s.seqno;
	}
	expect_done(_metadata, self->fd, self->qa, sa, 0, "client 1");
	expect_done(_metadata, fd2, q2, sb, 0, "client 2");
	EXPECT_EQ(77, ((__u64 *)map)[1]);

	rbln_cmd_fini(fd2, &cb2);
	close(fd2);
	close(dmabuf);
	munmap(map, 4096);
	rbln_gem_close(self->fd, shared.handle);
}

TEST_F(sync, wait_packet_is_released_by_the_cpu)
{
	__u64 s = 0;

	if (!self->ready)
		return;
	memset(self->host.map, 0, 64);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 0), 0x100000000ull, 0);
	rbln_cmd_signal(&self->cb, self->host.va, 9, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb, self->bos,
				     3, &s));
	rbln_sleep_ms(HOLD_MS / 2);
	/* the comparison is 64-bit: a low word that is larger releases nothing */
	set_flag(self, 0, 0xffffffffull);
	rbln_sleep_ms(HOLD_MS / 2);
	expect_busy(_metadata, self->fd, self->qa, s, "flag 0xffffffff");
	EXPECT_EQ(0, ((__u64 *)self->host.map)[0]);
	set_flag(self, 0, 0x100000000ull);
	expect_done(_metadata, self->fd, self->qa, s, 0, "flag 2^32");
	EXPECT_EQ(9, ((__u64 *)self->host.map)[0]);
}

TEST_F(sync, wait_packet_timeout_fails_the_job_and_the_queue_goes_on)
{
	__s64 t0, ms;
	__u64 s = 0;

	if (!self->ready)
		return;
	memset(self->host.map, 0, 64);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 1), 1, 100 * 1000 * 1000ull);
	rbln_cmd_signal(&self->cb, self->host.va, 1, 0);
	t0 = rbln_now_ms();
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb, self->bos,
				     3, &s));
	expect_done(_metadata, self->fd, self->qa, s, -ETIMEDOUT,
		    "WAIT with a 100 ms timeout");
	ms = rbln_now_ms() - t0;
	EXPECT_LE(100, ms) TH_LOG("the WAIT gave up after %lld ms", ms);
	EXPECT_EQ(0, ((__u64 *)self->host.map)[0])
	TH_LOG("the packet after the timed-out WAIT ran");
	/* the next job of the queue runs normally */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->host.va + 8, 2, 0);
	rbln_expect_job_ok(_metadata, self->fd, self->qa, &self->cb, self->bos,
			   3, "the job after");
	EXPECT_EQ(2, ((__u64 *)self->host.map)[1]);
}

TEST_F(sync, binary_syncobj_orders_jobs_across_queues)
{
	struct drm_rbln_sync in;
	struct drm_rbln_submit s;
	__u64 sa = 0;
	__u32 so = 0;
	__s32 je = 1;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	memset(self->host.map, 0, 8192);
	__sync_synchronize();
	/* A: held by the CPU, then fills; its fence goes to so */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 2), 1, 0);
	rbln_cmd_fill(&self->cb, self->hbm.va, 4096, 0x5a, 1);
	rbln_submit_args(&s, self->qa, &self->cb, self->bos, 3);
	s.out_handle = so;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	sa = s.seqno;
	/* B (other chiplet if any): waits for so, copies what A filled */
	rbln_cmd_begin(&self->cb);
	rbln_cmd_copy(&self->cb, self->hbm.va, self->host.va, 4096);
	rbln_submit_args(&s, self->qb, &self->cb, self->bos, 3);
	in = (struct drm_rbln_sync){ .handle = so };
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	rbln_sleep_ms(HOLD_MS);
	expect_busy(_metadata, self->fd, self->qb, s.seqno, "B before A");
	EXPECT_EQ(-ETIME, rbln_wait_syncobj(self->fd, so, 0, 0, &je));
	EXPECT_EQ(-ETIME, rbln_syncobj_wait(self->fd, so, 0, 0));
	EXPECT_TRUE(rbln_all_bytes(self->host.map, 4096, 0))
	TH_LOG("B ran before its in-fence signalled");
	set_flag(self, 2, 1);
	expect_done(_metadata, self->fd, self->qb, s.seqno, 0, "B");
	EXPECT_TRUE(rbln_all_bytes(self->host.map, 4096, 0x5a))
	TH_LOG("B did not see A's fill");
	EXPECT_EQ(0, rbln_wait_syncobj(self->fd, so, 0, 0, &je));
	EXPECT_EQ(0, je);
	EXPECT_EQ(0, rbln_syncobj_wait(self->fd, so, 0, 0));
	expect_done(_metadata, self->fd, self->qa, sa, 0, "A");
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, so));
}

TEST_F(sync, timeline_syncobj_points_order_jobs_and_signal_in_order)
{
	struct drm_rbln_sync in;
	struct drm_rbln_submit s;
	__u64 s1, s2, v = 0;
	__u32 tl = 0;
	__s32 je = 1;

	if (!self->ready)
		return;
	if (self->dev.chiplet_count < 2)
		SKIP(return, "one chiplet: the two held jobs share a ring");
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &tl));
	memset(self->host.map, 0, 64);
	__sync_synchronize();
	/* point 1 on queue A, point 2 on queue B, each held by a flag */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 3), 1, 0);
	rbln_cmd_signal(&self->cb, self->host.va, 1, 0);
	rbln_submit_args(&s, self->qa, &self->cb, self->bos, 3);
	s.out_handle = tl;
	s.out_point = 1;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	s1 = s.seqno;
	rbln_cmd_begin(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 4), 1, 0);
	rbln_cmd_signal(&self->cb, self->host.va + 8, 2, 0);
	rbln_submit_args(&s, self->qb, &self->cb, self->bos, 3);
	s.out_handle = tl;
	s.out_point = 2;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	s2 = s.seqno;
	/* a job that waits for point 2, on queue A behind point 1 */
	rbln_cmd_begin(&self->cb);
	rbln_cmd_copy(&self->cb, self->host.va + 8, self->host.va + 16, 8);
	rbln_submit_args(&s, self->qa, &self->cb, self->bos, 3);
	in = (struct drm_rbln_sync){ .handle = tl, .point = 2 };
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));

	/* point 2's job finishes first: the timeline is still at 0 */
	set_flag(self, 4, 1);
	expect_done(_metadata, self->fd, self->qb, s2, 0, "point 2's job");
	ASSERT_EQ(0, rbln_syncobj_query(self->fd, tl, &v));
	EXPECT_EQ(0, v) TH_LOG("a timeline signals its points in order");
	EXPECT_EQ(-ETIME, rbln_wait_syncobj(self->fd, tl, 2, 0, &je));
	EXPECT_EQ(-ETIME, rbln_wait_syncobj(self->fd, tl, 1, 0, &je));
	expect_busy(_metadata, self->fd, self->qa, s.seqno, "waiter of 2");

	set_flag(self, 3, 1);
	expect_done(_metadata, self->fd, self->qa, s1, 0, "point 1's job");
	EXPECT_EQ(0, rbln_wait_syncobj(self->fd, tl, 1, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, rbln_wait_syncobj(self->fd, tl, 2, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je);
	EXPECT_EQ(0, rbln_syncobj_wait(self->fd, tl, 2, RBLN_JOB_WAIT_MS));
	ASSERT_EQ(0, rbln_syncobj_query(self->fd, tl, &v));
	EXPECT_EQ(2, v);
	expect_done(_metadata, self->fd, self->qa, s.seqno, 0, "waiter of 2");
	EXPECT_EQ(2, ((__u64 *)self->host.map)[2]);
	/* a point never submitted: no fence to wait for */
	EXPECT_EQ(-ENOENT, rbln_wait_syncobj(self->fd, tl, 3, 0, &je));
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, tl));
}

/* libdrm's drmSyncobj* calls (what other user space uses) on job fences */
TEST_F(sync, libdrm_syncobj_calls_work_on_job_fences)
{
	__u64 *h = (__u64 *)self->host.map;
	struct drm_rbln_sync in;
	struct drm_rbln_submit s;
	__u32 tl = 0, bin = 0, first = 0;
	uint64_t pt = 1, v = 9;
	__u64 sa, sb;

	if (!self->ready)
		return;
	if (self->dev.chiplet_count < 2)
		SKIP(return, "one chiplet: the held job blocks the other queue");
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &tl));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &bin));
	memset(self->host.map, 0, 64);
	__sync_synchronize();
	/* A: held by flag 5, stores 7, signals point 1 of the timeline */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 5), 1, 0);
	rbln_cmd_signal(&self->cb, self->host.va + 24, 7, 0);
	rbln_submit_args(&s, self->qa, &self->cb, self->bos, 3);
	s.out_handle = tl;
	s.out_point = 1;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	sa = s.seqno;

	/* the point has a fence at once (WAIT_AVAILABLE), not signalled */
	EXPECT_EQ(0, drmSyncobjTimelineWait(self->fd, &tl, &pt, 1,
					    rbln_deadline_ms(RBLN_JOB_WAIT_MS),
					    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE,
					    &first));
	EXPECT_EQ(-ETIME, drmSyncobjTimelineWait(self->fd, &tl, &pt, 1,
						 rbln_deadline_ms(50), 0,
						 &first));
	ASSERT_EQ(0, drmSyncobjQuery(self->fd, &tl, &v, 1));
	EXPECT_EQ(0, v);

	/* point 1 moved into a binary syncobj orders B (another queue) */
	ASSERT_EQ(0, drmSyncobjTransfer(self->fd, bin, 0, tl, 1, 0));
	rbln_cmd_begin(&self->cb);
	rbln_cmd_copy(&self->cb, self->host.va + 24, self->host.va + 32, 8);
	rbln_submit_args(&s, self->qb, &self->cb, self->bos, 3);
	in = (struct drm_rbln_sync){ .handle = bin };
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	sb = s.seqno;
	rbln_sleep_ms(HOLD_MS);
	expect_busy(_metadata, self->fd, self->qb, sb, "B before A");

	set_flag(self, 5, 1);
	EXPECT_EQ(0, drmSyncobjTimelineWait(self->fd, &tl, &pt, 1,
					    rbln_deadline_ms(RBLN_JOB_WAIT_MS),
					    0, &first));
	EXPECT_EQ(0, drmSyncobjWait(self->fd, &bin, 1,
				    rbln_deadline_ms(RBLN_JOB_WAIT_MS), 0,
				    &first));
	ASSERT_EQ(0, drmSyncobjQuery(self->fd, &tl, &v, 1));
	EXPECT_EQ(1, v);
	expect_done(_metadata, self->fd, self->qa, sa, 0, "A");
	expect_done(_metadata, self->fd, self->qb, sb, 0, "B");
	EXPECT_EQ(7, h[4]) TH_LOG("B ran before A's store");

	/* the CPU signals a later point; the timeline follows */
	pt = 3;
	ASSERT_EQ(0, drmSyncobjTimelineSignal(self->fd, &tl, &pt, 1));
	ASSERT_EQ(0, drmSyncobjQuery(self->fd, &tl, &v, 1));
	EXPECT_EQ(3, v);
	EXPECT_EQ(0, drmSyncobjDestroy(self->fd, bin));
	EXPECT_EQ(0, drmSyncobjDestroy(self->fd, tl));
}

TEST_F(sync, wait_by_seqno_and_by_syncobj_report_the_job_error)
{
	static const struct {
		__u32 op;
		__s32 want;
		const char *what;
	} cases[] = {
		{ 0x3f, -EINVAL, "unknown opcode" },
		{ RBLN_FW_PKT_WRITE64, -EPERM, "privileged WRITE64" },
		{ RBLN_FW_PKT_TLB_INVALIDATE, -EPERM,
		  "privileged TLB_INVALIDATE" },
		{ RBLN_FW_PKT_WAIT, -ETIMEDOUT, "WAIT timeout" },
		{ RBLN_FW_PKT_NOP, 0, "a good job" },
	};

	if (!self->ready)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct drm_rbln_submit s;
		__u32 so = 0;
		__s32 je = 1;

		ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
		rbln_cmd_reset(&self->cb);
		if (cases[i].op == RBLN_FW_PKT_WAIT) {
			rbln_cmd_wait(&self->cb, flag_va(self, 5), 1, 1000000);
		} else if (cases[i].op == RBLN_FW_PKT_WRITE64) {
			struct rbln_fw_pkt_write64 p = {
				.hdr = RBLN_FW_PKT_HDR(cases[i].op, 0,
						       sizeof(p)),
				.addr = 0x1000,
				.value = 1,
			};
			rbln_cmd_raw(&self->cb, &p, sizeof(p));
		} else if (cases[i].op == RBLN_FW_PKT_TLB_INVALIDATE) {
			struct rbln_fw_pkt_tlb_invalidate p = {
				.hdr = RBLN_FW_PKT_HDR(cases[i].op, 0,
						       sizeof(p)),
			};
			rbln_cmd_raw(&self->cb, &p, sizeof(p));
		} else if (cases[i].op == RBLN_FW_PKT_NOP) {
			rbln_cmd_nop(&self->cb, 8);
		} else {
			__u64 p = RBLN_FW_PKT_HDR(cases[i].op, 0, 8);

			rbln_cmd_raw(&self->cb, &p, 8);
		}
		rbln_submit_args(&s, self->qa, &self->cb, self->bos, 3);
		s.out_handle = so;
		ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
		expect_done(_metadata, self->fd, self->qa, s.seqno,
			    cases[i].want, cases[i].what);
		EXPECT_EQ(0, rbln_wait_syncobj(self->fd, so, 0,
					       RBLN_JOB_WAIT_MS, &je));
		EXPECT_EQ(cases[i].want, je)
		TH_LOG("%s: by syncobj", cases[i].what);
		/* asking again gives the same answer */
		expect_done(_metadata, self->fd, self->qa, s.seqno,
			    cases[i].want, cases[i].what);
		EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, so));
	}
}

TEST_F(sync, wait_deadlines_give_etime_at_the_deadline)
{
	struct drm_rbln_wait w;
	__u64 s = 0;
	__s64 t0, ms;
	__s32 je = 0;

	if (!self->ready)
		return;
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 6), 1, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb, self->bos,
				     3, &s));
	/* timeout 0 polls */
	t0 = rbln_now_ms();
	EXPECT_EQ(-ETIME, rbln_wait_job(self->fd, self->qa, s, 0, &je));
	/* a deadline in the past */
	w = (struct drm_rbln_wait){ .queue_id = self->qa, .seqno = s,
				    .timeout_ns = rbln_now_ns() - 1000000 };
	EXPECT_EQ(-ETIME, rbln_wait_raw(self->fd, &w));
	EXPECT_GT(50, rbln_now_ms() - t0) TH_LOG("polls did not return at once");
	/* a near one: not before it, not long after */
	t0 = rbln_now_ms();
	EXPECT_EQ(-ETIME, rbln_wait_job(self->fd, self->qa, s, 150, &je));
	ms = rbln_now_ms() - t0;
	EXPECT_LE(150, ms) TH_LOG("returned after %lld ms", ms);
	EXPECT_GT(1000, ms) TH_LOG("returned after %lld ms", ms);
	set_flag(self, 6, 1);
	expect_done(_metadata, self->fd, self->qa, s, 0, "released");
	/* a done job with a deadline in the past: done */
	w = (struct drm_rbln_wait){ .queue_id = self->qa, .seqno = s,
				    .timeout_ns = 1 };
	EXPECT_EQ(0, rbln_wait_raw(self->fd, &w));
	EXPECT_EQ(0, w.job_error);
}

TEST_F(sync, busy_buffer_dma_buf_polls_busy_until_the_job_is_done)
{
	struct pollfd p;
	int dmabuf = -1;
	__u64 s = 0;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_prime_export(self->fd, self->host.handle, &dmabuf));
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 7), 1, 0);
	rbln_cmd_fill(&self->cb, self->host.va, 64, 1, 1);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb, self->bos,
				     3, &s));
	/* the job writes the buffer: readers and writers must wait */
	p = (struct pollfd){ .fd = dmabuf, .events = POLLIN };
	EXPECT_EQ(0, poll(&p, 1, HOLD_MS)) TH_LOG("dma-buf idle while in use");
	set_flag(self, 7, 1);
	p = (struct pollfd){ .fd = dmabuf, .events = POLLOUT };
	EXPECT_EQ(1, poll(&p, 1, RBLN_JOB_WAIT_MS));
	EXPECT_TRUE(p.revents & POLLOUT);
	expect_done(_metadata, self->fd, self->qa, s, 0, "the job");
	close(dmabuf);
}

TEST_F(sync, importer_job_waits_for_the_exporter_job_implicitly)
{
	struct drm_rbln_bo_info info;
	struct rbln_buf mine;
	struct rbln_cmdbuf cb2;
	__u32 imported = 0, q2, bos2[2];
	__u64 sa = 0, sb = 0;
	int dmabuf = -1;
	int fd2;

	if (!self->ready)
		return;
	memset(self->host.map, 0, 4096);
	ASSERT_EQ(0, rbln_prime_export(self->fd, self->host.handle, &dmabuf));
	fd2 = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, rbln_prime_import(fd2, dmabuf, &imported));
	ASSERT_EQ(0, rbln_bo_info(fd2, imported, &info));
	ASSERT_EQ(0, rbln_buf_new(fd2, &mine, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_cmd_init(fd2, &cb2, 4096, RBLN_REGION_HOST, 0));
	q2 = rbln_new_queue(_metadata, fd2,
			    1u << (self->dev.chiplet_count - 1));
	bos2[0] = imported;
	bos2[1] = mine.handle;

	/* the exporter's job: held, then fills the shared buffer */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, flag_va(self, 8), 1, 0);
	rbln_cmd_fill(&self->cb, self->host.va, 4096, 0x6b, 1);
	ASSERT_EQ(0, rbln_submit_job(self->fd, self->qa, &self->cb, self->bos,
				     3, &sa));
	/* the importer's job lists the buffer: it waits for that job */
	memset(mine.map, 0, 4096);
	rbln_cmd_copy(&cb2, info.device_va, mine.va, 4096);
	ASSERT_EQ(0, rbln_submit_job(fd2, q2, &cb2, bos2, 2, &sb));
	rbln_sleep_ms(HOLD_MS);
	expect_busy(_metadata, fd2, q2, sb, "importer before the exporter");
	set_flag(self, 8, 1);
	expect_done(_metadata, fd2, q2, sb, 0, "importer");
	EXPECT_TRUE(rbln_all_bytes(mine.map, 4096, 0x6b))
	TH_LOG("the importer's job ran before the exporter's");
	expect_done(_metadata, self->fd, self->qa, sa, 0, "exporter");

	rbln_cmd_fini(fd2, &cb2);
	rbln_buf_free(fd2, &mine);
	close(fd2);
	close(dmabuf);
}

/* fdinfo drm-engine-chiplet<c> of @fd in ns. */
static int engine_ns(int fd, __u32 c, __u64 *ns)
{
	char key[32], val[64];
	char *end = NULL;
	int err;

	snprintf(key, sizeof(key), "drm-engine-chiplet%u", c);
	err = rbln_fdinfo_str(fd, key, val, sizeof(val));
	if (err)
		return err;
	*ns = strtoull(val, &end, 10);
	return end != val && strcmp(end, " ns") == 0 ? 0 : -EPROTO;
}

TEST_F(sync, busy_time_grows_in_sysfs_and_in_the_client_fdinfo)
{
	__u64 sys0[RBLN_MAX_CHIPLETS], sys1[RBLN_MAX_CHIPLETS];
	__u64 mine0[RBLN_MAX_CHIPLETS], mine1[RBLN_MAX_CHIPLETS];
	__u64 other[RBLN_MAX_CHIPLETS], ts[2], v;
	const char *bdf = self->nodes[0].bdf;
	__u32 n;
	int fd2;

	if (!self->ready)
		return;
	n = self->dev.chiplet_count;
	fd2 = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fd2);
	rbln_sleep_ms(50);
	for (__u32 c = 0; c < n; c++) {
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c, "busy_ns", &sys0[c]));
		ASSERT_EQ(0, engine_ns(self->fd, c, &mine0[c]));
		ASSERT_EQ(0, engine_ns(fd2, c, &other[c]));
		EXPECT_EQ(0, mine0[c]) TH_LOG("a new file has run nothing");
		EXPECT_EQ(0, other[c]);
	}
	{
		char key[32], val[64];

		snprintf(key, sizeof(key), "drm-engine-chiplet%u", n);
		EXPECT_EQ(-ENOENT, rbln_fdinfo_str(self->fd, key, val,
						   sizeof(val)))
		TH_LOG("an engine key past the chiplets");
	}
	/* one job on chiplet 0 that takes a while, stamped at both ends */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_timestamp(&self->cb, self->host.va);
	for (int i = 0; i < 8; i++)
		rbln_cmd_fill(&self->cb, self->hbm.va, 4 << 20, i, 8);
	rbln_cmd_timestamp(&self->cb, self->host.va + 8);
	rbln_expect_job_ok(_metadata, self->fd, self->qa, &self->cb, self->bos,
			   3, "busy job");
	memcpy(ts, self->host.map, sizeof(ts));
	ASSERT_LT(ts[0], ts[1]);
	rbln_sleep_ms(100);
	for (__u32 c = 0; c < n; c++) {
		ASSERT_EQ(0, rbln_sysfs_chiplet_u64(bdf, c, "busy_ns", &sys1[c]));
		ASSERT_EQ(0, engine_ns(self->fd, c, &mine1[c]));
		ASSERT_EQ(0, engine_ns(fd2, c, &v));
		EXPECT_EQ(other[c], v) TH_LOG("chiplet %u: another client", c);
	}
	EXPECT_LE(ts[1] - ts[0], sys1[0] - sys0[0])
	TH_LOG("sysfs busy_ns grew %llu ns, the job took %llu",
	       (unsigned long long)(sys1[0] - sys0[0]),
	       (unsigned long long)(ts[1] - ts[0]));
	EXPECT_LE(ts[1] - ts[0], mine1[0] - mine0[0])
	TH_LOG("fdinfo grew %llu ns, the job took %llu",
	       (unsigned long long)(mine1[0] - mine0[0]),
	       (unsigned long long)(ts[1] - ts[0]));
	/* one job ran on the card: the two are the same sum */
	EXPECT_EQ(sys1[0] - sys0[0], mine1[0] - mine0[0]);
	for (__u32 c = 1; c < n; c++) {
		EXPECT_EQ(sys0[c], sys1[c]) TH_LOG("idle chiplet %u", c);
		EXPECT_EQ(mine0[c], mine1[c]) TH_LOG("idle chiplet %u", c);
	}
	close(fd2);
}

TEST_HARNESS_MAIN
