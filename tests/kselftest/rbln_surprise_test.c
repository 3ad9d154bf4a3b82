// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_surprise_test - a card that falls off the bus while it is in use.
 *
 * The emulator's surprise-removal fault: the card stops at once and its
 * control block reads all-ones.  The driver notices (the heartbeat
 * watchdog reads all-ones), fails every job the card held with -ENODEV,
 * wakes every waiter (a WAIT ioctl, io_uring SUBMIT and WAIT commands),
 * unplugs the DRM device (the node goes, sysfs state reads "unplugged",
 * ioctls on open files fail with -ENODEV), and gives everything back when
 * the last file closes (the module's reference count returns to where it
 * was).  Plugging the card back ("fault clear": a fresh card) and
 * rebinding gives a working card.
 *
 * Changes device state: the teardown plugs the card back and binds every
 * card again, even when a test failed half way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"
#include "rbln_sub_ksft.h"

#define EMU_TIMEOUT_MS 5000
/* The watchdog looks every 500 ms; TCG on a loaded host is slow. */
#define GONE_TIMEOUT_MS 10000
#define NODE_TIMEOUT_MS 10000
#define HOLD_MS 300

FIXTURE(gone)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	struct rbln_node target;
	char state_path[128];
	char klog[65536];
	bool ready;
};

FIXTURE_SETUP(gone)
{
	int fd;

	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count || !rbln_require_root(_metadata))
		return;
	self->target = self->nodes[0];
	ASSERT_LE(0, self->target.card);
	snprintf(self->state_path, sizeof(self->state_path),
		 "/sys/bus/pci/devices/%s/rbln/state", self->target.bdf);
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd);
	if (!rbln_require_rings(_metadata, fd)) {
		close(fd);
		return;
	}
	close(fd);
	self->ready = true;
}

/* Runs in the parent, so it also runs when the test's process died. */
FIXTURE_TEARDOWN_PARENT(gone)
{
	char log[1024] = "";
	char reply[256];
	int failed;

	if (self->target.card >= 0 &&
	    rbln_emu_cmd(self->target.card, "status", reply, sizeof(reply),
			 EMU_TIMEOUT_MS) == 0 &&
	    strstr(reply, " removed=1"))
		rbln_emu_cmd(self->target.card, "fault clear", reply,
			     sizeof(reply), EMU_TIMEOUT_MS);
	if (self->target.bdf[0] && rbln_is_bound(self->target.bdf)) {
		char state[32] = "";

		rbln_read_file(self->state_path, state, sizeof(state));
		if (strcmp(state, "ready") != 0)
			rbln_unbind(self->target.bdf);
	}
	failed = rbln_restore_bindings(log, sizeof(log));
	if (log[0])
		TH_LOG("teardown: %s", log);
	EXPECT_EQ(0, failed) TH_LOG("could not bind every card back");
}

struct waiter {
	int fd;
	__u32 q;
	__u64 seqno;
	int ret;		/* WAIT's own result */
	__s32 job_error;
	__s64 done_ms;
};

static void *wait_fn(void *arg)
{
	struct waiter *w = arg;

	w->ret = rbln_wait_job(w->fd, w->q, w->seqno, 60000, &w->job_error);
	w->done_ms = rbln_now_ms();
	return NULL;
}

/* A job held on the flag at @flag_va until it reads 1. */
static void held_job(struct rbln_cmdbuf *cb, __u64 flag_va)
{
	rbln_cmd_reset(cb);
	rbln_cmd_wait(cb, flag_va, 1, 0);
	rbln_cmd_nop(cb, RBLN_PKT_NOP_BYTES);
}

static void queue_cmd(struct __test_metadata *_metadata, struct io_uring *ring,
		      int fd, __u32 op, const void *payload, size_t len,
		      __u64 user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ASSERT_NE(NULL, sqe) TH_LOG("SQ full");
	rbln_prep_uring_cmd(sqe, fd, op, payload, len, user_data, false);
}

/* Binds the target again and runs a plain job on it. */
static void plug_back_and_run(struct __test_metadata *_metadata,
			      FIXTURE_DATA(gone) * self)
{
	struct drm_rbln_info_device d;
	struct rbln_cmdbuf cb = { 0 };
	struct rbln_buf data = { 0 };
	char reply[128];
	char state[32] = "";
	__u32 q, bo;
	int minor, fd, err;

	err = rbln_emu_cmd(self->target.card, "fault clear", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	/* the driver stays bound to the dead function until unbound */
	ASSERT_TRUE(rbln_is_bound(self->target.bdf));
	ASSERT_EQ(0, rbln_unbind(self->target.bdf));
	err = rbln_bind(self->target.bdf);
	ASSERT_EQ(0, err) TH_LOG("bind after plugging back: %s", strerror(-err));
	minor = rbln_wait_node(self->target.bdf, NODE_TIMEOUT_MS);
	ASSERT_LE(0, minor);
	rbln_read_file(self->state_path, state, sizeof(state));
	EXPECT_STREQ("ready", state);
	fd = rbln_open_minor(minor);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, rbln_info_device(fd, &d));
	q = rbln_new_queue(_metadata, fd, 1);
	ASSERT_EQ(0, rbln_cmd_init(fd, &cb, 64 * 1024, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fd, &data, 1 << 20, RBLN_REGION_HOST, 0));
	memset(data.map, 0, 4096);
	bo = data.handle;
	rbln_cmd_reset(&cb);
	rbln_cmd_fill(&cb, data.va, 4096, 0x5a, 1);
	rbln_expect_job_ok(_metadata, fd, q, &cb, &bo, 1, "fill after plug-back");
	EXPECT_TRUE(rbln_all_bytes(data.map, 4096, 0x5a))
	TH_LOG("the fill did not land");
	rbln_buf_free(fd, &data);
	rbln_cmd_fini(fd, &cb);
	close(fd);
}

/*
 * Jobs on the card (held on a flag), a thread blocked in WAIT, io_uring
 * SUBMIT and WAIT commands pending, host and HBM buffers mmapped: the card
 * falls off the bus.  Every waiter wakes with -ENODEV within the
 * watchdog's period, the node goes, the open file answers -ENODEV, and
 * closing it gives everything back.  Then the card comes back.
 */
TEST_F_TIMEOUT(gone, surprise_removal_fails_jobs_with_enodev_and_unplugs, 180)
{
	struct drm_rbln_info_device d;
	struct drm_rbln_submit s;
	struct drm_rbln_wait uw;
	struct rbln_cmdbuf cb = { 0 };
	struct rbln_buf data = { 0 }, hbm = { 0 };
	struct io_uring ring;
	struct waiter w = { 0 };
	pthread_t thr;
	__u64 refs0 = 0, refs = 0, seq_a = 0, seq_c = 0, ud, extra;
	__s64 t0;
	__s32 res;
	__u32 bo[2];
	char reply[256], state[32] = "";
	int got_submit = 0, got_wait = 0;
	int fd, kfd, err, i;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_module_refs(&refs0));
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, rbln_info_device(fd, &d));
	w.q = rbln_new_queue(_metadata, fd, 1);
	ASSERT_EQ(0, rbln_cmd_init(fd, &cb, 64 * 1024, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fd, &data, 1 << 20, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fd, &hbm, 2 << 20, RBLN_REGION_HBM, 0));
	memset(data.map, 0, 4096);
	memset(hbm.map, 0x11, 4096);
	bo[0] = data.handle;
	bo[1] = hbm.handle;
	ASSERT_EQ(0, rbln_uring_init(&ring, 16, 0));

	/* job A on the ring, held; a thread waits for it */
	held_job(&cb, data.va);
	ASSERT_EQ(0, rbln_submit_job(fd, w.q, &cb, bo, 2, &seq_a));
	w.fd = fd;
	w.seqno = seq_a;
	w.ret = 1;
	ASSERT_EQ(0, pthread_create(&thr, NULL, wait_fn, &w));
	/* job B through io_uring, and an io_uring WAIT for A */
	rbln_submit_args(&s, w.q, &cb, bo, 2);
	queue_cmd(_metadata, &ring, fd, RBLN_URING_CMD_SUBMIT, &s, sizeof(s), 1);
	memset(&uw, 0, sizeof(uw));
	uw.queue_id = w.q;
	uw.seqno = seq_a;
	uw.timeout_ns = 0;	/* no deadline */
	queue_cmd(_metadata, &ring, fd, RBLN_URING_CMD_WAIT, &uw, sizeof(uw), 2);
	ASSERT_EQ(2, io_uring_submit(&ring));
	/* job C behind them */
	ASSERT_EQ(0, rbln_submit_job(fd, w.q, &cb, bo, 2, &seq_c));
	EXPECT_EQ(-ETIME, rbln_uring_reap(&ring, HOLD_MS, &ud, &res, &extra))
	TH_LOG("a CQE before the card went: user_data %llu res %d",
	       (unsigned long long)ud, res);

	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	t0 = rbln_now_ms();
	err = rbln_emu_cmd(self->target.card, "fault surprise-removal", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);

	/* every waiter wakes, with -ENODEV */
	for (i = 0; i < 2; i++) {
		err = rbln_uring_reap(&ring, GONE_TIMEOUT_MS, &ud, &res, &extra);
		ASSERT_EQ(0, err) TH_LOG("io_uring command %d of 2 did not complete: %s",
					 i + 1, strerror(-err));
		if (ud == 1)
			got_submit++;
		else if (ud == 2)
			got_wait++;
		EXPECT_EQ(-ENODEV, res)
		TH_LOG("io_uring command %llu: %d (%s)", (unsigned long long)ud,
		       res, strerror(-res));
	}
	EXPECT_EQ(1, got_submit);
	EXPECT_EQ(1, got_wait);
	ASSERT_EQ(0, pthread_join(thr, NULL));
	EXPECT_EQ(0, w.ret) TH_LOG("WAIT: %s", strerror(-w.ret));
	EXPECT_EQ(-ENODEV, w.job_error)
	TH_LOG("job A: %d (%s)", w.job_error, strerror(-w.job_error));
	TH_LOG("WAIT woke %lld ms after the removal", (long long)(w.done_ms - t0));
	EXPECT_GT(GONE_TIMEOUT_MS, w.done_ms - t0);

	/* the device is unplugged: no node, -ENODEV, sysfs says so */
	EXPECT_EQ(0, rbln_wait_node_gone(self->target.minor, GONE_TIMEOUT_MS))
	TH_LOG("accel%d still there", self->target.minor);
	rbln_read_file(self->state_path, state, sizeof(state));
	EXPECT_STREQ("unplugged", state);
	EXPECT_EQ(-ENODEV, rbln_info_device(fd, &d));
	EXPECT_EQ(-ENODEV, rbln_submit_job(fd, w.q, &cb, bo, 2, &seq_c));
	rbln_sleep_ms(100);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      "the card is gone", "all-ones"))
	TH_LOG("kernel log:\n%s", self->klog);

	/* the last close gives everything back */
	io_uring_queue_exit(&ring);
	munmap(hbm.map, hbm.size);
	munmap(data.map, data.size);
	munmap(cb.buf.map, cb.buf.size);
	EXPECT_EQ(0, close(fd));
	for (i = 0; i < 100; i++) {
		ASSERT_EQ(0, rbln_module_refs(&refs));
		if (refs == refs0)
			break;
		rbln_sleep_ms(50);
	}
	EXPECT_EQ(refs0, refs) TH_LOG("module references left after the last close");

	plug_back_and_run(_metadata, self);
}

/* An idle card that goes is noticed too; its open file only closes. */
TEST_F_TIMEOUT(gone, surprise_removal_of_an_idle_card_unplugs_it, 120)
{
	struct drm_rbln_info_device d;
	char reply[128];
	__u64 refs0 = 0, refs = 0;
	int fd, err, i;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_module_refs(&refs0));
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd);
	err = rbln_emu_cmd(self->target.card, "fault surprise-removal", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	EXPECT_EQ(0, rbln_wait_node_gone(self->target.minor, GONE_TIMEOUT_MS));
	EXPECT_EQ(-ENODEV, rbln_info_device(fd, &d));
	EXPECT_EQ(0, close(fd));
	for (i = 0; i < 100; i++) {
		ASSERT_EQ(0, rbln_module_refs(&refs));
		if (refs == refs0)
			break;
		rbln_sleep_ms(50);
	}
	EXPECT_EQ(refs0, refs);
	plug_back_and_run(_metadata, self);
}

/* The other cards do not notice. */
TEST_F_TIMEOUT(gone, other_cards_keep_working_when_one_is_gone, 120)
{
	struct rbln_cmdbuf cb = { 0 };
	struct rbln_buf data = { 0 };
	char reply[128];
	__u32 q, bo;
	int fd, err;

	if (!self->ready)
		return;
	if (self->count < 2)
		SKIP(return, "needs two cards, the VM has %d", self->count);
	fd = rbln_open_minor(self->nodes[1].minor);
	ASSERT_LE(0, fd);
	q = rbln_new_queue(_metadata, fd, 1);
	ASSERT_EQ(0, rbln_cmd_init(fd, &cb, 64 * 1024, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fd, &data, 1 << 20, RBLN_REGION_HOST, 0));
	bo = data.handle;
	err = rbln_emu_cmd(self->target.card, "fault surprise-removal", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	EXPECT_EQ(0, rbln_wait_node_gone(self->target.minor, GONE_TIMEOUT_MS));
	rbln_cmd_reset(&cb);
	rbln_cmd_fill(&cb, data.va, 4096, 0x77, 1);
	rbln_expect_job_ok(_metadata, fd, q, &cb, &bo, 1, "job on the other card");
	EXPECT_TRUE(rbln_all_bytes(data.map, 4096, 0x77));
	rbln_buf_free(fd, &data);
	rbln_cmd_fini(fd, &cb);
	close(fd);
	plug_back_and_run(_metadata, self);
}

TEST_HARNESS_MAIN
