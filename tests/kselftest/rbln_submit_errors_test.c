// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_submit_errors_test - every bad input of QUEUE_CREATE, QUEUE_DESTROY,
 * SUBMIT, WAIT and of the io_uring commands gets the errno of the uAPI and
 * changes nothing; bad packets fail their job, privileged ones (0x80..0xff)
 * with -EPERM.
 *
 * "Nothing queued" is checked by the seqno of the next good job: the
 * queue's seqnos count every job it ever took, so a refused SUBMIT that
 * queued something shows as a gap.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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
#include "rbln_sub_ksft.h"

FIXTURE(err)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 q;
	__u64 last;		/* last seqno of q */
	struct rbln_cmdbuf cb;	/* one NOP job */
	struct rbln_buf data;
	__u32 bos[2];
	__u32 spare[4];		/* buffers so handles reach past 4 */
	bool ready;
};

FIXTURE_SETUP(err)
{
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
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 4096,
				   RBLN_REGION_HOST, 0));
	rbln_cmd_nop(&self->cb, 8);
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->data, 4096,
				  RBLN_REGION_HOST, 0));
	for (int i = 0; i < 4; i++) {
		struct drm_rbln_bo_create c;

		ASSERT_EQ(0, rbln_bo_create(self->fd, 4096, RBLN_REGION_HOST,
					    0, 0, &c));
		self->spare[i] = c.handle;
	}
	self->bos[0] = self->data.handle;
	self->bos[1] = self->spare[3];
	self->ready = true;
}

FIXTURE_TEARDOWN(err)
{
	if (self->data.handle)
		rbln_buf_free(self->fd, &self->data);
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

/* The next good job of the queue gets seqno last + 1: nothing was queued. */
static void expect_nothing_queued(struct __test_metadata *_metadata,
				  FIXTURE_DATA(err) * self, const char *what)
{
	__u64 s = 0;
	__s32 je = 1;

	ASSERT_EQ(0, rbln_submit_job(self->fd, self->q, &self->cb, self->bos,
				     2, &s));
	EXPECT_EQ(self->last + 1, s)
	TH_LOG("%s: the refused SUBMIT queued a job", what);
	self->last = s;
	ASSERT_EQ(0, rbln_wait_job(self->fd, self->q, s, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je);
}

static int queue_create_raw(int fd, struct drm_rbln_queue_create *c)
{
	return ioctl(fd, DRM_IOCTL_RBLN_QUEUE_CREATE, c) == 0 ? 0 : -errno;
}

TEST_F(err, queue_create_rejects_bad_masks_priorities_and_flags)
{
	__u32 n;
	const struct {
		__u32 mask, prio, flags;
	} bad[] = {
		{ 0, RBLN_QUEUE_PRIORITY_NORMAL, 0 },
		{ 0, RBLN_QUEUE_PRIORITY_NORMAL, 0 },	/* beyond: below */
		{ 0, RBLN_QUEUE_PRIORITY_NORMAL, 0 },
		{ 1u << 31, RBLN_QUEUE_PRIORITY_NORMAL, 0 },
		{ ~0u, RBLN_QUEUE_PRIORITY_NORMAL, 0 },
		{ 1, 3, 0 },
		{ 1, ~0u, 0 },
		{ 1, RBLN_QUEUE_PRIORITY_NORMAL, 1 },
		{ 1, RBLN_QUEUE_PRIORITY_NORMAL, 1u << 31 },
	};

	if (!self->ready)
		return;
	n = self->dev.chiplet_count;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct drm_rbln_queue_create c = {
			.chiplet_mask = bad[i].mask,
			.priority = bad[i].prio,
			.flags = bad[i].flags,
			.queue_id = 0xdead,
		};

		if (i == 1)
			c.chiplet_mask = 1u << n;
		if (i == 2)
			c.chiplet_mask = rbln_all_chiplets(n) | (1u << n);
		EXPECT_EQ(-EINVAL, queue_create_raw(self->fd, &c))
		TH_LOG("case %zu: mask 0x%x priority %u flags 0x%x", i,
		       c.chiplet_mask, c.priority, c.flags);
	}
	/* every chiplet alone, all of them, every priority (root has CAP_SYS_NICE) */
	for (__u32 i = 0; i < n; i++) {
		__u32 id = 0;

		EXPECT_EQ(0, rbln_queue_create(self->fd, 1u << i,
					       RBLN_QUEUE_PRIORITY_LOW, &id))
		TH_LOG("chiplet %u", i);
		EXPECT_EQ(0, rbln_queue_destroy(self->fd, id));
	}
	for (__u32 p = RBLN_QUEUE_PRIORITY_LOW; p <= RBLN_QUEUE_PRIORITY_HIGH;
	     p++) {
		struct drm_rbln_queue_create c = {
			.chiplet_mask = rbln_all_chiplets(n),
			.priority = p,
			.queue_id = 0xdead,	/* an output: ignored */
		};

		EXPECT_EQ(0, queue_create_raw(self->fd, &c))
		TH_LOG("priority %u", p);
		EXPECT_LE(1, c.queue_id);
		EXPECT_GE(256, c.queue_id);
		EXPECT_NE(self->q, c.queue_id);
		EXPECT_EQ(0, rbln_queue_destroy(self->fd, c.queue_id));
	}
}

TEST_F(err, high_priority_needs_cap_sys_nice)
{
	pid_t pid;
	int status;

	if (!self->ready)
		return;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		__u32 id;

		if (rbln_drop_cap(CAP_SYS_NICE))
			_exit(10);
		if (rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_HIGH,
				      &id) != -EACCES)
			_exit(11);
		if (rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				      &id))
			_exit(12);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
	TH_LOG("10: capset failed, 11: HIGH without CAP_SYS_NICE not -EACCES, 12: NORMAL refused");
}

TEST_F(err, at_most_256_queues_per_file)
{
	__u32 ids[256];
	bool seen[257] = { false };
	__u32 extra = 0;
	int n = 0, fd2;

	if (!self->ready)
		return;
	seen[self->q] = true;
	/* the fixture's queue is one of the 256 */
	for (n = 0; n < 255; n++) {
		int err = rbln_queue_create(self->fd, 1,
					    RBLN_QUEUE_PRIORITY_NORMAL,
					    &ids[n]);

		ASSERT_EQ(0, err) TH_LOG("queue %d: %s", n + 2, strerror(-err));
		ASSERT_GE(256, ids[n]);
		EXPECT_FALSE(seen[ids[n]]) TH_LOG("id %u twice", ids[n]);
		seen[ids[n]] = true;
	}
	EXPECT_EQ(-ENOSPC, rbln_queue_create(self->fd, 1,
					     RBLN_QUEUE_PRIORITY_NORMAL,
					     &extra));
	/* another file has its own 256 */
	fd2 = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fd2);
	EXPECT_EQ(0, rbln_queue_create(fd2, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &extra));
	close(fd2);
	/* a destroyed queue makes room again */
	EXPECT_EQ(0, rbln_queue_destroy(self->fd, ids[100]));
	EXPECT_EQ(0, rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &ids[100]));
	for (n = 0; n < 255; n++)
		EXPECT_EQ(0, rbln_queue_destroy(self->fd, ids[n]));
	expect_nothing_queued(_metadata, self, "after 256 queues");
}

TEST_F(err, queue_destroy_rejects_unknown_foreign_and_padded_requests)
{
	struct drm_rbln_queue_destroy d = { .queue_id = self->q, .pad = 1 };
	__u32 id = 0, other = 0;
	__s32 je;
	int fd2;

	if (!self->ready)
		return;
	EXPECT_EQ(-EINVAL, ioctl(self->fd, DRM_IOCTL_RBLN_QUEUE_DESTROY, &d) ?
				   -errno : 0);
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(self->fd, 0));
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(self->fd, 257));
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(self->fd, ~0u));
	ASSERT_EQ(0, rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &id));
	/* another client cannot see, destroy, submit to or wait on them */
	fd2 = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fd2);
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(fd2, id));
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(fd2, self->q));
	EXPECT_EQ(-ENOENT, rbln_wait_job(fd2, self->q, 1, 0, &je));
	{
		struct rbln_cmdbuf cb2;
		__u64 s;

		ASSERT_EQ(0, rbln_cmd_init(fd2, &cb2, 4096, RBLN_REGION_HOST,
					   0));
		rbln_cmd_nop(&cb2, 8);
		EXPECT_EQ(-ENOENT, rbln_submit_job(fd2, self->q, &cb2, NULL, 0,
						   &s));
		/* its own first queue gets its own ids: 1 again */
		EXPECT_EQ(0, rbln_queue_create(fd2, 1,
					       RBLN_QUEUE_PRIORITY_NORMAL,
					       &other));
		EXPECT_EQ(1, other);
		rbln_cmd_fini(fd2, &cb2);
	}
	close(fd2);
	/* the padded request destroyed nothing */
	expect_nothing_queued(_metadata, self, "after the padded destroy");
	EXPECT_EQ(0, rbln_queue_destroy(self->fd, id));
	EXPECT_EQ(-ENOENT, rbln_queue_destroy(self->fd, id));
	{
		__u64 s;

		EXPECT_EQ(-ENOENT, rbln_submit_job(self->fd, id, &self->cb,
						   NULL, 0, &s));
		EXPECT_EQ(-ENOENT, rbln_wait_job(self->fd, id, 1, 0, &je));
	}
}

TEST_F(err, destroyed_queue_still_runs_its_jobs_and_signals_their_fences)
{
	struct drm_rbln_submit s;
	struct rbln_buf flag;
	__u32 id = 0, so = 0;
	__s32 je = 1;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_buf_new(self->fd, &flag, 4096, RBLN_REGION_HOST, 0));
	memset(flag.map, 0, 4096);
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	ASSERT_EQ(0, rbln_queue_create(self->fd, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &id));
	rbln_cmd_begin(&self->cb);
	rbln_cmd_wait(&self->cb, flag.va, 1, 0);
	rbln_cmd_signal(&self->cb, flag.va + 8, 3, 0);
	rbln_submit_args(&s, id, &self->cb, &flag.handle, 1);
	s.out_handle = so;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	rbln_sleep_ms(100);
	EXPECT_EQ(0, rbln_queue_destroy(self->fd, id));
	EXPECT_EQ(-ENOENT, rbln_wait_job(self->fd, id, s.seqno, 0, &je));
	__atomic_store_n((__u64 *)flag.map, 1, __ATOMIC_SEQ_CST);
	EXPECT_EQ(0, rbln_wait_syncobj(self->fd, so, 0, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je);
	EXPECT_EQ(3, ((__u64 *)flag.map)[1]) TH_LOG("the job did not run");
	rbln_cmd_reset(&self->cb);
	rbln_cmd_nop(&self->cb, 8);
	rbln_syncobj_destroy(self->fd, so);
	rbln_buf_free(self->fd, &flag);
}

/* One bad SUBMIT: a good one changed by @mutate must fail with @want. */
struct bad_submit {
	const char *what;
	int want;
};

TEST_F(err, submit_rejects_every_bad_field_and_queues_nothing)
{
	static const struct bad_submit cases[] = {
		{ "flags bit 1 (unknown)", -EINVAL },
		{ "flags bit 31", -EINVAL },
		{ "out_flags 1", -EINVAL },
		{ "cmd_size 0", -EINVAL },
		{ "cmd_size 4", -EINVAL },
		{ "cmd_size 12", -EINVAL },
		{ "cmd_size 1 MiB + 8", -EINVAL },
		{ "cmd_offset 4", -EINVAL },
		{ "bo_count 4097", -EINVAL },
		{ "bo_elem_size 8", -EINVAL },
		{ "bo_elem_size 0", -EINVAL },
		{ "in_count 65", -EINVAL },
		{ "in_elem_size 8", -EINVAL },
		{ "in_elem_size 24", -EINVAL },
		{ "out_point without out_handle", -EINVAL },
		{ "in sync flags 1", -EINVAL },
		{ "queue 0", -ENOENT },
		{ "queue 999", -ENOENT },
		{ "cmd_handle 0", -ENOENT },
		{ "cmd_handle unknown", -ENOENT },
		{ "unknown handle in bo list", -ENOENT },
		{ "unknown in syncobj", -ENOENT },
		{ "unknown out syncobj", -ENOENT },
		{ "cmd_offset + cmd_size past the buffer", -ERANGE },
		{ "cmd_offset = buffer size", -ERANGE },
		{ "cmd_offset 2^62", -ERANGE },
		{ "cmd_offset wrapping", -ERANGE },
		{ "bo_handles unmapped", -EFAULT },
		{ "bo_handles NULL", -EFAULT },
		{ "in_syncs unmapped", -EFAULT },
	};
	struct drm_rbln_sync in = { 0 };
	__u32 so = 0, bogus[2];
	void *hole;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	bogus[0] = self->data.handle;
	bogus[1] = 0x7ffff;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct drm_rbln_submit s;

		rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
		s.seqno = 0x1234;	/* an output: ignored */
		switch (i) {
		case 0:
			s.flags = 2;
			break;
		case 1:
			s.flags = 1u << 31;
			break;
		case 2:
			s.out_flags = 1;
			s.out_handle = so;
			break;
		case 3:
			s.cmd_size = 0;
			break;
		case 4:
			s.cmd_size = 4;
			break;
		case 5:
			s.cmd_size = 12;
			break;
		case 6:
			s.cmd_size = RBLN_FW_CMD_MAX + 8;
			break;
		case 7:
			s.cmd_offset = 4;
			break;
		case 8:
			s.bo_count = 4097;
			break;
		case 9:
			s.bo_elem_size = 8;
			break;
		case 10:
			s.bo_elem_size = 0;
			break;
		case 11:
			s.in_count = 65;
			s.in_syncs = (uintptr_t)&in;
			break;
		case 12:
			s.in_count = 1;
			s.in_elem_size = 8;
			s.in_syncs = (uintptr_t)&in;
			in.handle = so;
			break;
		case 13:
			s.in_count = 1;
			s.in_elem_size = 24;
			s.in_syncs = (uintptr_t)&in;
			break;
		case 14:
			s.out_point = 1;
			break;
		case 15:
			s.in_count = 1;
			s.in_syncs = (uintptr_t)&in;
			in.flags = 1;
			break;
		case 16:
			s.queue_id = 0;
			break;
		case 17:
			s.queue_id = 999;
			break;
		case 18:
			s.cmd_handle = 0;
			break;
		case 19:
			s.cmd_handle = 0x7ffff;
			break;
		case 20:
			s.bo_handles = (uintptr_t)bogus;
			break;
		case 21:
			s.in_count = 1;
			s.in_syncs = (uintptr_t)&in;
			in.handle = 0x7ffff;
			break;
		case 22:
			s.out_handle = 0x7ffff;
			break;
		case 23:
			s.cmd_offset = 4096 - 8;
			s.cmd_size = 16;
			break;
		case 24:
			s.cmd_offset = 4096;
			s.cmd_size = 8;
			break;
		case 25:
			s.cmd_offset = 1ull << 62;
			break;
		case 26:
			s.cmd_offset = ~7ull;
			s.cmd_size = 16;
			break;
		case 27:
			s.bo_handles = (uintptr_t)hole;
			break;
		case 28:
			s.bo_handles = 0;
			break;
		default:
			s.in_count = 1;
			s.in_syncs = (uintptr_t)hole;
			break;
		}
		EXPECT_EQ(cases[i].want, rbln_submit_raw(self->fd, &s))
		TH_LOG("%s", cases[i].what);
		in = (struct drm_rbln_sync){ 0 };
		expect_nothing_queued(_metadata, self, cases[i].what);
	}
	/* a syncobj without a fence is no in-fence either */
	{
		struct drm_rbln_submit s;
		int err;

		rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
		in.handle = so;
		s.in_count = 1;
		s.in_syncs = (uintptr_t)&in;
		err = rbln_submit_raw(self->fd, &s);
		EXPECT_TRUE(err == -ENOENT || err == -EINVAL)
		TH_LOG("in-fence of a syncobj without a fence: %d", err);
		expect_nothing_queued(_metadata, self, "syncobj without fence");
	}
	munmap(hole, 4096);
	rbln_syncobj_destroy(self->fd, so);
}

TEST_F(err, submit_takes_the_largest_counts_and_command_buffer)
{
	struct drm_rbln_sync in[64];
	struct drm_rbln_submit s;
	struct rbln_cmdbuf big;
	__u32 *bos;
	__u32 so = 0;
	__s32 je = 1;

	if (!self->ready)
		return;
	/* 4096 handles (the same few, listed again and again) */
	bos = calloc(4096, sizeof(*bos));
	ASSERT_NE(NULL, bos);
	for (int i = 0; i < 4096; i++)
		bos[i] = i % 2 ? self->data.handle : self->spare[i % 4];
	/* 64 in-fences: one signalled syncobj */
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	ASSERT_EQ(0, rbln_syncobj_signal(self->fd, so, 0));
	for (int i = 0; i < 64; i++)
		in[i] = (struct drm_rbln_sync){ .handle = so };
	/* a 1 MiB command buffer of NOPs (of the largest NOP size) */
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &big, RBLN_FW_CMD_MAX,
				   RBLN_REGION_HOST, 0));
	while (big.len + 65528 <= RBLN_FW_CMD_MAX)
		rbln_cmd_nop(&big, 65528);
	rbln_cmd_nop(&big, RBLN_FW_CMD_MAX - big.len);
	ASSERT_EQ(RBLN_FW_CMD_MAX, big.len);
	ASSERT_FALSE(big.overflow);

	rbln_submit_args(&s, self->q, &big, bos, 4096);
	s.in_syncs = (uintptr_t)in;
	s.in_count = 64;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));
	EXPECT_EQ(self->last + 1, s.seqno);
	self->last = s.seqno;
	ASSERT_EQ(0, rbln_wait_job(self->fd, self->q, s.seqno,
				   RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je) TH_LOG("1 MiB of NOPs");
	rbln_cmd_fini(self->fd, &big);
	rbln_syncobj_destroy(self->fd, so);
	free(bos);
}

TEST_F(err, handles_and_syncobjs_of_another_client_are_unknown)
{
	struct drm_rbln_sync in = { 0 };
	struct drm_rbln_submit s;
	struct rbln_cmdbuf cb2;
	__u32 so = 0, q2 = 0, theirs;
	__s32 je;
	int fd2;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	ASSERT_EQ(0, rbln_syncobj_signal(self->fd, so, 0));
	fd2 = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, rbln_cmd_init(fd2, &cb2, 4096, RBLN_REGION_HOST, 0));
	rbln_cmd_nop(&cb2, 8);
	ASSERT_EQ(0, rbln_queue_create(fd2, 1, RBLN_QUEUE_PRIORITY_NORMAL,
				       &q2));
	/* client 2 has one buffer (handle 1 or so); ours go higher */
	theirs = self->spare[3];
	ASSERT_LT(cb2.buf.handle, theirs);

	rbln_submit_args(&s, q2, &cb2, &theirs, 1);
	EXPECT_EQ(-ENOENT, rbln_submit_raw(fd2, &s)) TH_LOG("our buffer");
	rbln_submit_args(&s, q2, &cb2, NULL, 0);
	s.cmd_handle = theirs;
	EXPECT_EQ(-ENOENT, rbln_submit_raw(fd2, &s))
	TH_LOG("our command buffer");
	rbln_submit_args(&s, q2, &cb2, NULL, 0);
	in.handle = so;
	s.in_syncs = (uintptr_t)&in;
	s.in_count = 1;
	EXPECT_EQ(-ENOENT, rbln_submit_raw(fd2, &s)) TH_LOG("our syncobj in");
	rbln_submit_args(&s, q2, &cb2, NULL, 0);
	s.out_handle = so;
	EXPECT_EQ(-ENOENT, rbln_submit_raw(fd2, &s)) TH_LOG("our syncobj out");
	EXPECT_EQ(-ENOENT, rbln_wait_syncobj(fd2, so, 0, 0, &je));
	/* and its own first job is seqno 1 of its queue */
	rbln_submit_args(&s, q2, &cb2, NULL, 0);
	EXPECT_EQ(0, rbln_submit_raw(fd2, &s));
	EXPECT_EQ(1, s.seqno);
	EXPECT_EQ(0, rbln_wait_job(fd2, q2, 1, RBLN_JOB_WAIT_MS, &je));
	rbln_cmd_fini(fd2, &cb2);
	close(fd2);
	expect_nothing_queued(_metadata, self, "client 2's attempts");
	rbln_syncobj_destroy(self->fd, so);
}

TEST_F(err, wait_rejects_bad_fields)
{
	static const char *const what[] = {
		"flags 2",		"flags bit 31",
		"pad",			"sync.flags",
		"SYNCOBJ + queue_id",	"SYNCOBJ + seqno",
		"sync.handle without SYNCOBJ", "sync.point without SYNCOBJ",
		"unknown queue",	"queue 0",
		"seqno 0",		"seqno not yet submitted",
		"unknown syncobj",	"syncobj handle 0",
		"syncobj without a fence",
	};
	static const int want[] = {
		-EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL,
		-EINVAL, -ENOENT, -ENOENT, -ENOENT, -ENOENT, -ENOENT, -ENOENT,
		-ENOENT,
	};
	__u32 so = 0, empty = 0;

	if (!self->ready)
		return;
	expect_nothing_queued(_metadata, self, "first job");
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	ASSERT_EQ(0, rbln_syncobj_signal(self->fd, so, 0));
	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &empty));
	for (size_t i = 0; i < ARRAY_SIZE(what); i++) {
		struct drm_rbln_wait w = {
			.queue_id = self->q,
			.seqno = self->last,
		};

		switch (i) {
		case 0:
			w.flags = 2;
			break;
		case 1:
			w.flags = 1u << 31;
			break;
		case 2:
			w.pad = 1;
			break;
		case 3:
			w.sync.flags = 1;
			break;
		case 4:
			w.flags = RBLN_WAIT_SYNCOBJ;
			w.seqno = 0;
			w.sync.handle = so;
			break;
		case 5:
			w.flags = RBLN_WAIT_SYNCOBJ;
			w.queue_id = 0;
			w.sync.handle = so;
			break;
		case 6:
			w.sync.handle = so;
			break;
		case 7:
			w.sync.point = 1;
			break;
		case 8:
			w.queue_id = 999;
			break;
		case 9:
			w.queue_id = 0;
			break;
		case 10:
			w.seqno = 0;
			break;
		case 11:
			w.seqno = self->last + 1;
			break;
		case 12:
			w = (struct drm_rbln_wait){
				.flags = RBLN_WAIT_SYNCOBJ,
				.sync.handle = 0x7ffff,
			};
			break;
		case 13:
			w = (struct drm_rbln_wait){ .flags = RBLN_WAIT_SYNCOBJ };
			break;
		default:
			w = (struct drm_rbln_wait){
				.flags = RBLN_WAIT_SYNCOBJ,
				.sync.handle = empty,
			};
			break;
		}
		EXPECT_EQ(want[i], rbln_wait_raw(self->fd, &w))
		TH_LOG("%s", what[i]);
	}
	/* the well-formed ones of both kinds */
	{
		__s32 je = 1;

		EXPECT_EQ(0, rbln_wait_job(self->fd, self->q, self->last, 0,
					   &je));
		EXPECT_EQ(0, je);
		je = 1;
		EXPECT_EQ(0, rbln_wait_syncobj(self->fd, so, 0, 0, &je));
		EXPECT_EQ(0, je);
	}
	rbln_syncobj_destroy(self->fd, so);
	rbln_syncobj_destroy(self->fd, empty);
}

TEST_F(err, bad_packets_fail_the_job_and_privileged_ones_with_eperm)
{
	static const struct {
		__u32 hdr;
		__u32 bytes;
		int want;
		const char *what;
	} cases[] = {
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 0), 8, -EINVAL,
		  "size 0 in the header" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 1, 8), 8, -EINVAL,
		  "NOP with a flag" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, 40), 40, -EINVAL,
		  "COPY of 40 bytes" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, 24), 24, -EINVAL,
		  "COPY of 24 bytes" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0x80, 32), 32, -EINVAL,
		  "COPY with a flag" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_SIGNAL, 2, 24), 24, -EINVAL,
		  "SIGNAL with an unknown flag" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, 32), 8, -EINVAL,
		  "COPY running past the job" },
		{ RBLN_FW_PKT_HDR(0x08, 0, 8), 8, -EINVAL, "opcode 0x08" },
		{ RBLN_FW_PKT_HDR(0x40, 0, 8), 8, -EINVAL,
		  "opcode 0x40 (graph, reserved)" },
		{ RBLN_FW_PKT_HDR(0x7f, 0, 8), 8, -EINVAL, "opcode 0x7f" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_TLB_INVALIDATE, 0, 24), 24,
		  -EPERM, "TLB_INVALIDATE" },
		{ RBLN_FW_PKT_HDR(RBLN_FW_PKT_WRITE64, 0, 24), 24, -EPERM,
		  "WRITE64" },
		{ RBLN_FW_PKT_HDR(0x82, 0, 8), 8, -EPERM, "opcode 0x82" },
		{ RBLN_FW_PKT_HDR(0xc0, 0, 16), 16, -EPERM, "opcode 0xc0" },
		{ RBLN_FW_PKT_HDR(0xff, 0, 8), 8, -EPERM, "opcode 0xff" },
	};
	__u64 *d = (__u64 *)self->data.map;

	if (!self->ready)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		bool past_end = cases[i].bytes == 8 &&
				cases[i].hdr ==
					RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, 32);
		unsigned char pkt[64] = { 0 };
		struct rbln_cmdbuf cb;

		ASSERT_EQ(0, rbln_cmd_init(self->fd, &cb, 4096,
					   RBLN_REGION_HOST, 0));
		memset(self->data.map, 0, 64);
		memcpy(pkt, &cases[i].hdr, 4);
		if (cases[i].hdr == RBLN_FW_PKT_HDR(RBLN_FW_PKT_WRITE64, 0, 24)) {
			/* at our own buffer's VA: nothing may be stored */
			__u64 addr = self->data.va + 16, value = 0xbad;

			memcpy(pkt + 8, &addr, 8);
			memcpy(pkt + 16, &value, 8);
		}
		/* runs, then the bad packet, then one that must not run */
		rbln_cmd_signal(&cb, self->data.va, 1, 0);
		rbln_cmd_raw(&cb, pkt, cases[i].bytes);
		/* (a COPY header as the job's last 8 bytes runs past it) */
		if (!past_end)
			rbln_cmd_signal(&cb, self->data.va + 8, 2, 0);
		rbln_expect_job(_metadata, self->fd, self->q, &cb, self->bos,
				2, cases[i].want, cases[i].what);
		self->last++;
		EXPECT_EQ(1, d[0]) TH_LOG("%s: the packet before", cases[i].what);
		EXPECT_EQ(0, d[1]) TH_LOG("%s: the packet after ran",
					  cases[i].what);
		EXPECT_EQ(0, d[2]) TH_LOG("%s: WRITE64 stored", cases[i].what);
		rbln_cmd_fini(self->fd, &cb);
	}
	/* a failed job does not fail the next one */
	expect_nothing_queued(_metadata, self, "after the bad packets");
}

/* One uring command on a ring set up with @flags; its CQE's res. */
static int uring_once(int fd, unsigned int flags, __u32 op, const void *pl,
		      size_t len, __u64 *extra)
{
	bool sqe64 = !(flags & IORING_SETUP_SQE128);
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	__u64 ud = 0;
	__s32 res = 0;
	int err;

	err = io_uring_queue_init(8, &ring, flags);
	if (err)
		return err == -EINVAL ? -EOPNOTSUPP : err;
	sqe = io_uring_get_sqe(&ring);
	rbln_prep_uring_cmd(sqe, fd, op, pl, len, 7, sqe64);
	err = io_uring_submit(&ring);
	if (err != 1) {
		io_uring_queue_exit(&ring);
		return err < 0 ? err : -EIO;
	}
	err = rbln_uring_reap(&ring, RBLN_JOB_WAIT_MS, &ud, &res, extra);
	io_uring_queue_exit(&ring);
	if (err)
		return -ETIMEDOUT;	/* no CQE: distinct from any res */
	return ud == 7 ? res : -EPROTO;
}

/* A thread that closes and re-creates a buffer handle in a loop. */
struct churn {
	int fd;
	bool stop;		/* __atomic */
	__u32 handle;		/* __atomic: the newest handle */
	int rounds;
	int errors;
};

static void *churn_fn(void *arg)
{
	struct churn *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		struct drm_rbln_bo_create b;

		if (rbln_bo_create(c->fd, 8192, RBLN_REGION_HOST, 0, 0, &b)) {
			c->errors++;
			continue;
		}
		__atomic_store_n(&c->handle, b.handle, __ATOMIC_RELEASE);
		/* the submitter takes it meanwhile, or races its close */
		sched_yield();
		if (rbln_gem_close(c->fd, b.handle))
			c->errors++;
		__atomic_add_fetch(&c->rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * Jobs listing a handle that another thread closes and re-creates meanwhile:
 * each SUBMIT either takes the buffer (0) or finds no such handle
 * (-ENOENT); nothing else, and the kernel stays sound (the VM run fails on
 * any splat).
 */
TEST_F_TIMEOUT(err, submit_races_a_gem_close_of_its_buffers_safely, 120)
{
	struct churn c = { .fd = self->fd };
	int ok = 0, enoent = 0, other = 0;
	pthread_t th;

	if (!self->ready)
		return;
	ASSERT_EQ(0, pthread_create(&th, NULL, churn_fn, &c));
	for (int ms = 0; !__atomic_load_n(&c.handle, __ATOMIC_ACQUIRE) &&
	     ms < 10000; ms++)
		rbln_sleep_ms(1);
	/*
	 * Until the handle went round 100 times and some SUBMITs took it.
	 * Bounded by time, not by a count of SUBMITs: on a loaded host the
	 * churn thread may get far fewer turns than the submitter.
	 */
	for (__s64 end = rbln_now_ms() + 60000; rbln_now_ms() < end &&
	     (__atomic_load_n(&c.rounds, __ATOMIC_RELAXED) < 100 || !ok);) {
		__u32 h[2] = { self->data.handle,
			       __atomic_load_n(&c.handle, __ATOMIC_ACQUIRE) };
		__u64 seqno;
		int err;

		if (!h[1])
			continue;
		err = rbln_submit_job(self->fd, self->q, &self->cb, h, 2,
				      &seqno);
		if (!err)
			ok++;
		else if (err == -ENOENT)
			enoent++;
		else
			other++;
		if (err)
			sched_yield();	/* let the other thread go on */
	}
	__atomic_store_n(&c.stop, true, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(th, NULL));
	TH_LOG("%d submitted, %d ENOENT, %d churn rounds", ok, enoent,
	       c.rounds);
	EXPECT_EQ(0, other);
	EXPECT_EQ(0, c.errors);
	EXPECT_LT(0, ok);
	EXPECT_LE(100, c.rounds);
	rbln_expect_job_ok(_metadata, self->fd, self->q, &self->cb,
			   &self->data.handle, 1, "after the race");
}

TEST_F(err, uring_commands_need_sqe128_and_cqe32)
{
	static const unsigned int rings[] = {
		0, IORING_SETUP_SQE128, IORING_SETUP_CQE32,
	};
	static const char *const names[] = { "64-byte SQE, 16-byte CQE",
					     "SQE128 without CQE32",
					     "CQE32 without SQE128" };
	struct drm_rbln_submit s;
	__u64 extra = 0;

	if (!self->ready)
		return;
	rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
	for (size_t i = 0; i < ARRAY_SIZE(rings); i++) {
		EXPECT_EQ(-EINVAL, uring_once(self->fd, rings[i],
					      RBLN_URING_CMD_SUBMIT, &s,
					      sizeof(s), &extra))
		TH_LOG("SUBMIT on a ring with %s", names[i]);
		expect_nothing_queued(_metadata, self, names[i]);
	}
	{
		struct drm_rbln_wait w = { .queue_id = self->q,
					   .seqno = self->last };

		EXPECT_EQ(-EINVAL, uring_once(self->fd, IORING_SETUP_SQE128,
					      RBLN_URING_CMD_WAIT, &w,
					      sizeof(w), &extra))
		TH_LOG("WAIT on a ring without CQE32");
	}
	/* the same command on a proper ring works */
	EXPECT_EQ(0, uring_once(self->fd,
				IORING_SETUP_SQE128 | IORING_SETUP_CQE32,
				RBLN_URING_CMD_SUBMIT, &s, sizeof(s), &extra));
	EXPECT_EQ(self->last + 1, extra) TH_LOG("big_cqe[0] is the seqno");
	self->last++;
}

TEST_F(err, uring_commands_reject_bad_payloads_like_the_ioctls)
{
	const unsigned int ok = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
	struct drm_rbln_submit s;
	struct drm_rbln_wait w;
	__u64 extra = 0;
	int res;

	if (!self->ready)
		return;
	rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
	s.flags = 2;
	EXPECT_EQ(-EINVAL, uring_once(self->fd, ok, RBLN_URING_CMD_SUBMIT, &s,
				      sizeof(s), &extra));
	rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
	s.queue_id = 999;
	EXPECT_EQ(-ENOENT, uring_once(self->fd, ok, RBLN_URING_CMD_SUBMIT, &s,
				      sizeof(s), &extra));
	rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
	s.cmd_offset = 4096;
	EXPECT_EQ(-ERANGE, uring_once(self->fd, ok, RBLN_URING_CMD_SUBMIT, &s,
				      sizeof(s), &extra));
	rbln_submit_args(&s, self->q, &self->cb, self->bos, 2);
	s.bo_handles = 8;
	EXPECT_EQ(-EFAULT, uring_once(self->fd, ok, RBLN_URING_CMD_SUBMIT, &s,
				      sizeof(s), &extra));
	expect_nothing_queued(_metadata, self, "refused uring SUBMITs");

	w = (struct drm_rbln_wait){ .queue_id = self->q, .seqno = self->last,
				    .pad = 1 };
	EXPECT_EQ(-EINVAL, uring_once(self->fd, ok, RBLN_URING_CMD_WAIT, &w,
				      sizeof(w), &extra));
	w = (struct drm_rbln_wait){ .queue_id = self->q,
				    .seqno = self->last + 1 };
	EXPECT_EQ(-ENOENT, uring_once(self->fd, ok, RBLN_URING_CMD_WAIT, &w,
				      sizeof(w), &extra));
	w = (struct drm_rbln_wait){ .flags = RBLN_WAIT_SYNCOBJ,
				    .sync.handle = 0x7ffff };
	EXPECT_EQ(-ENOENT, uring_once(self->fd, ok, RBLN_URING_CMD_WAIT, &w,
				      sizeof(w), &extra));
	w = (struct drm_rbln_wait){ .queue_id = self->q, .seqno = self->last };
	EXPECT_EQ(0, uring_once(self->fd, ok, RBLN_URING_CMD_WAIT, &w,
				sizeof(w), &extra));
	EXPECT_EQ(self->last, extra);
	/* an unknown command is refused */
	res = uring_once(self->fd, ok, 3, &w, sizeof(w), &extra);
	EXPECT_GT(0, res) TH_LOG("cmd_op 3: res %d", res);
	EXPECT_NE(-ETIMEDOUT, res) TH_LOG("cmd_op 3: no CQE");
}

TEST_HARNESS_MAIN
