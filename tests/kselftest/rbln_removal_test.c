// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_removal_test - a card that goes away while it is in use.
 *
 * gone: the emulator's surprise-removal fault.  The card stops at once and
 * its control block reads all-ones; the driver notices (the heartbeat
 * watchdog reads all-ones).
 * hotplug: an orderly hot unplug, QEMU's device_del of the card's PCI
 * function (the guest's ACPI hotplug runs the driver's remove, then ejects
 * the slot), asked of the host through rbln-vm --hotplug
 * ($RBLN_VM_HOTPLUG); then device_add puts a fresh card in the slot.
 *
 * Either way, with a job held on the ring, a thread blocked in WAIT, an
 * io_uring SUBMIT and WAIT pending, a job queued behind and host and HBM
 * buffers mmapped: every job the card held fails with -ENODEV and every
 * waiter wakes, the DRM device is unplugged (the node goes, ioctls on the
 * open file fail with -ENODEV), and closing the last file gives
 * everything back (the module's reference count returns to where it was).
 * Then the card comes back and runs a job.
 *
 * Changes device state: the teardowns plug the card back and bind every
 * card again, even when a test failed half way.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
/* QEMU's device_del waits for the guest's ACPI eject (~1-5 s). */
#define HOTPLUG_TIMEOUT_MS 90000
#define HOLD_MS 300

/* ---- shared: the client that is busy when the card goes ------------------ */

struct waiter {
	int fd;
	__u32 q;
	__u64 seqno;
	int ret;		/* WAIT's own result */
	__s32 job_error;
	__s64 done_ms;
};

struct busy {
	int fd;
	__u64 refs0;		/* module references before the open */
	struct rbln_cmdbuf cb;
	struct rbln_buf data, hbm;
	struct io_uring ring;
	bool have_ring;
	struct waiter w;
	pthread_t thr;
	bool have_thr;
	__u32 bo[2];
};

static void *wait_fn(void *arg)
{
	struct waiter *w = arg;

	w->ret = rbln_wait_job(w->fd, w->q, w->seqno, 60000, &w->job_error);
	w->done_ms = rbln_now_ms();
	return NULL;
}

static void queue_cmd(struct __test_metadata *_metadata, struct io_uring *ring,
		      int fd, __u32 op, const void *payload, size_t len,
		      __u64 user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ASSERT_NE(NULL, sqe) TH_LOG("SQ full");
	rbln_prep_uring_cmd(sqe, fd, op, payload, len, user_data, false);
}

/*
 * Opens accel@minor and keeps it busy: job A held on a flag on the ring, a
 * thread in WAIT for it, an io_uring SUBMIT of job B and a WAIT for A,
 * job C queued behind; host and HBM buffers mmapped.
 */
static void busy_start(struct __test_metadata *_metadata, struct busy *b,
		       int minor)
{
	struct drm_rbln_info_device d;
	struct drm_rbln_submit s;
	struct drm_rbln_wait uw;
	__u64 seq_c = 0, ud = 0, extra = 0;
	__s32 res = 0;

	ASSERT_EQ(0, rbln_module_refs(&b->refs0));
	b->fd = rbln_open_minor(minor);
	ASSERT_LE(0, b->fd);
	ASSERT_EQ(0, rbln_info_device(b->fd, &d));
	b->w.q = rbln_new_queue(_metadata, b->fd, 1);
	ASSERT_EQ(0, rbln_cmd_init(b->fd, &b->cb, 64 * 1024, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(b->fd, &b->data, 1 << 20, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(b->fd, &b->hbm, 2 << 20, RBLN_REGION_HBM, 0));
	memset(b->data.map, 0, 4096);
	memset(b->hbm.map, 0x11, 4096);
	b->bo[0] = b->data.handle;
	b->bo[1] = b->hbm.handle;
	ASSERT_EQ(0, rbln_uring_init(&b->ring, 16, 0));
	b->have_ring = true;

	rbln_cmd_reset(&b->cb);
	rbln_cmd_wait(&b->cb, b->data.va, 1, 0);
	rbln_cmd_nop(&b->cb, RBLN_PKT_NOP_BYTES);
	ASSERT_EQ(0, rbln_submit_job(b->fd, b->w.q, &b->cb, b->bo, 2, &b->w.seqno));
	b->w.fd = b->fd;
	b->w.ret = 1;
	ASSERT_EQ(0, pthread_create(&b->thr, NULL, wait_fn, &b->w));
	b->have_thr = true;
	rbln_submit_args(&s, b->w.q, &b->cb, b->bo, 2);
	queue_cmd(_metadata, &b->ring, b->fd, RBLN_URING_CMD_SUBMIT, &s,
		  sizeof(s), 1);
	memset(&uw, 0, sizeof(uw));
	uw.queue_id = b->w.q;
	uw.seqno = b->w.seqno;
	uw.timeout_ns = 0;	/* no deadline */
	queue_cmd(_metadata, &b->ring, b->fd, RBLN_URING_CMD_WAIT, &uw,
		  sizeof(uw), 2);
	ASSERT_EQ(2, io_uring_submit(&b->ring));
	ASSERT_EQ(0, rbln_submit_job(b->fd, b->w.q, &b->cb, b->bo, 2, &seq_c));
	EXPECT_EQ(-ETIME, rbln_uring_reap(&b->ring, HOLD_MS, &ud, &res, &extra))
	TH_LOG("a CQE before the card went: user_data %llu res %d",
	       (unsigned long long)ud, res);
}

/*
 * The card went at @t0: every waiter wakes with -ENODEV within
 * @timeout_ms, the node goes and the open file answers -ENODEV.
 */
static void busy_expect_gone(struct __test_metadata *_metadata, struct busy *b,
			     int minor, __s64 t0, int timeout_ms)
{
	struct drm_rbln_info_device d;
	int got_submit = 0, got_wait = 0;
	__u64 ud, extra, seq = 0;
	__s32 res;
	int err;

	for (int i = 0; i < 2; i++) {
		err = rbln_uring_reap(&b->ring, timeout_ms, &ud, &res, &extra);
		ASSERT_EQ(0, err)
		TH_LOG("io_uring command %d of 2 did not complete: %s", i + 1,
		       strerror(-err));
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
	ASSERT_EQ(0, pthread_join(b->thr, NULL));
	b->have_thr = false;
	EXPECT_EQ(0, b->w.ret) TH_LOG("WAIT: %s", strerror(-b->w.ret));
	EXPECT_EQ(-ENODEV, b->w.job_error)
	TH_LOG("job A: %d (%s)", b->w.job_error, strerror(-b->w.job_error));
	TH_LOG("WAIT woke %lld ms after the card went",
	       (long long)(b->w.done_ms - t0));
	EXPECT_GT(timeout_ms, b->w.done_ms - t0);

	EXPECT_EQ(0, rbln_wait_node_gone(minor, GONE_TIMEOUT_MS))
	TH_LOG("accel%d still there", minor);
	EXPECT_EQ(-ENODEV, rbln_info_device(b->fd, &d));
	EXPECT_EQ(-ENODEV, rbln_submit_job(b->fd, b->w.q, &b->cb, b->bo, 2, &seq));
}

/* Closes everything; the module reference of the file comes back. */
static void busy_close(struct __test_metadata *_metadata, struct busy *b)
{
	__u64 refs = 0;
	int i;

	if (b->have_thr) {
		/* a failed test: the flag lets a live card's job go */
		__atomic_store_n((__u64 *)b->data.map, 1, __ATOMIC_SEQ_CST);
		pthread_join(b->thr, NULL);
		b->have_thr = false;
	}
	if (b->have_ring)
		io_uring_queue_exit(&b->ring);
	b->have_ring = false;
	munmap(b->hbm.map, b->hbm.size);
	munmap(b->data.map, b->data.size);
	munmap(b->cb.buf.map, b->cb.buf.size);
	EXPECT_EQ(0, close(b->fd));
	for (i = 0; i < 100; i++) {
		ASSERT_EQ(0, rbln_module_refs(&refs));
		if (refs == b->refs0)
			break;
		rbln_sleep_ms(50);
	}
	EXPECT_EQ(b->refs0, refs) TH_LOG("module references left after the last close");
}

/* Binds @bdf (waits for its node) and runs a plain fill on it. */
static void bind_and_run(struct __test_metadata *_metadata, const char *bdf)
{
	struct rbln_cmdbuf cb = { 0 };
	struct rbln_buf data = { 0 };
	char path[128], state[32] = "";
	__u32 q, bo;
	int minor, fd, err;

	err = rbln_bind(bdf);
	/*
	 * After device_add the kernel probes the new function itself
	 * (acpiphp's pci_bus_add_device()): once claim_function() has set the
	 * override, that probe may bind rbln first, and this bind then waits
	 * for it and fails with -EBUSY.  The card is bound either way (seen
	 * once in 3 debug-kernel runs).
	 */
	if (err == -EBUSY && rbln_is_bound(bdf))
		err = 0;
	ASSERT_EQ(0, err) TH_LOG("bind %s: %s", bdf, strerror(-err));
	minor = rbln_wait_node(bdf, NODE_TIMEOUT_MS);
	ASSERT_LE(0, minor);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/rbln/state", bdf);
	rbln_read_file(path, state, sizeof(state));
	EXPECT_STREQ("ready", state);
	fd = rbln_open_minor(minor);
	ASSERT_LE(0, fd);
	q = rbln_new_queue(_metadata, fd, 1);
	ASSERT_EQ(0, rbln_cmd_init(fd, &cb, 64 * 1024, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fd, &data, 1 << 20, RBLN_REGION_HOST, 0));
	memset(data.map, 0, 4096);
	bo = data.handle;
	rbln_cmd_reset(&cb);
	rbln_cmd_fill(&cb, data.va, 4096, 0x5a, 1);
	rbln_expect_job_ok(_metadata, fd, q, &cb, &bo, 1, "fill on the card back");
	EXPECT_TRUE(rbln_all_bytes(data.map, 4096, 0x5a))
	TH_LOG("the fill did not land");
	rbln_buf_free(fd, &data);
	rbln_cmd_fini(fd, &cb);
	close(fd);
}

/* ---- surprise removal ------------------------------------------------------ */

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

	self->target.card = -1;
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

static void surprise_remove(struct __test_metadata *_metadata,
			    FIXTURE_DATA(gone) * self)
{
	char reply[128];
	int err = rbln_emu_cmd(self->target.card, "fault surprise-removal",
			       reply, sizeof(reply), EMU_TIMEOUT_MS);

	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
}

/* Plugs the card back (a fresh card), rebinds it and runs a job. */
static void plug_back_and_run(struct __test_metadata *_metadata,
			      FIXTURE_DATA(gone) * self)
{
	char reply[128];
	int err;

	err = rbln_emu_cmd(self->target.card, "fault clear", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	/* the driver stays bound to the dead function until unbound */
	ASSERT_TRUE(rbln_is_bound(self->target.bdf));
	ASSERT_EQ(0, rbln_unbind(self->target.bdf));
	bind_and_run(_metadata, self->target.bdf);
}

TEST_F_TIMEOUT(gone, surprise_removal_fails_jobs_with_enodev_and_unplugs, 180)
{
	struct busy b = { 0 };
	char state[32] = "";
	__s64 t0;
	int kfd;

	if (!self->ready)
		return;
	busy_start(_metadata, &b, self->target.minor);
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	t0 = rbln_now_ms();
	surprise_remove(_metadata, self);
	busy_expect_gone(_metadata, &b, self->target.minor, t0, GONE_TIMEOUT_MS);
	rbln_read_file(self->state_path, state, sizeof(state));
	EXPECT_STREQ("unplugged", state);
	rbln_sleep_ms(100);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      "the card is gone", "all-ones"))
	TH_LOG("kernel log:\n%s", self->klog);
	busy_close(_metadata, &b);
	plug_back_and_run(_metadata, self);
}

/* An idle card that goes is noticed too; its open file only closes. */
TEST_F_TIMEOUT(gone, surprise_removal_of_an_idle_card_unplugs_it, 120)
{
	struct drm_rbln_info_device d;
	__u64 refs0 = 0, refs = 0;
	int fd, i;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_module_refs(&refs0));
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd);
	surprise_remove(_metadata, self);
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
	__u32 q, bo;
	int fd;

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
	surprise_remove(_metadata, self);
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

/*
 * A job of the card that goes, waiting for a job held on another card
 * (an in-syncobj), fails with -ENODEV at once: it does not wait for the
 * other card's job, which is still held and then runs.  Before, it failed
 * only once the other card's job was done.
 */
TEST_F_TIMEOUT(gone, a_job_waiting_for_another_cards_fence_fails_at_once, 120)
{
	__u32 held = 0, held0 = 0, done0 = 0, done = 0, q0, q1, bo0, bo1;
	struct rbln_cmdbuf cb0 = { 0 }, cb1 = { 0 };
	struct rbln_buf d0 = { 0 }, d1 = { 0 };
	struct drm_rbln_sync in = { 0 };
	struct drm_rbln_submit s;
	__s32 je = 1;
	int f0, f1;

	if (!self->ready)
		return;
	if (self->count < 2)
		SKIP(return, "needs two cards, the VM has %d", self->count);
	f1 = rbln_open_minor(self->nodes[1].minor);
	ASSERT_LE(0, f1);
	q1 = rbln_new_queue(_metadata, f1, 1);
	ASSERT_EQ(0, rbln_cmd_init(f1, &cb1, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(f1, &d1, 4096, RBLN_REGION_HOST, 0));
	memset(d1.map, 0, 4096);
	bo1 = d1.handle;
	ASSERT_EQ(0, rbln_syncobj_create(f1, &held));
	rbln_cmd_wait(&cb1, d1.va, 1, 0);
	rbln_cmd_signal(&cb1, d1.va + 8, 1, 0);
	rbln_submit_args(&s, q1, &cb1, &bo1, 1);
	s.out_handle = held;
	ASSERT_EQ(0, rbln_submit_raw(f1, &s));

	f0 = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, f0);
	q0 = rbln_new_queue(_metadata, f0, 1);
	ASSERT_EQ(0, rbln_cmd_init(f0, &cb0, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(f0, &d0, 4096, RBLN_REGION_HOST, 0));
	bo0 = d0.handle;
	ASSERT_EQ(0, rbln_syncobj_share(f1, held, f0, &held0));
	ASSERT_EQ(0, rbln_syncobj_create(f0, &done0));
	ASSERT_EQ(0, rbln_syncobj_share(f0, done0, f1, &done));
	rbln_cmd_signal(&cb0, d0.va, 1, 0);
	rbln_submit_args(&s, q0, &cb0, &bo0, 1);
	in.handle = held0;
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	s.out_handle = done0;
	ASSERT_EQ(0, rbln_submit_raw(f0, &s));

	surprise_remove(_metadata, self);
	EXPECT_EQ(0, rbln_wait_node_gone(self->target.minor, GONE_TIMEOUT_MS));
	ASSERT_EQ(0, rbln_wait_syncobj(f1, done, 0, GONE_TIMEOUT_MS, &je))
	TH_LOG("the gone card's job waits for the other card's");
	EXPECT_EQ(-ENODEV, je) TH_LOG("its job: %s", strerror(-je));
	EXPECT_EQ(-ETIME, rbln_wait_syncobj(f1, held, 0, 0, &je))
	TH_LOG("the other card's job is not held any more");

	__atomic_store_n((__u64 *)d1.map, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, rbln_wait_syncobj(f1, held, 0, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je) TH_LOG("the other card's job: %s", strerror(-je));
	EXPECT_EQ(1, __atomic_load_n((__u64 *)d1.map + 1, __ATOMIC_ACQUIRE));
	munmap(d0.map, d0.size);
	munmap(cb0.buf.map, cb0.buf.size);
	close(f0);
	rbln_buf_free(f1, &d1);
	rbln_cmd_fini(f1, &cb1);
	close(f1);
	plug_back_and_run(_metadata, self);
}

/* ---- orderly hot unplug (QEMU device_del / device_add) --------------------- */

FIXTURE(hotplug)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct rbln_node target;
	char dev_path[128];
	bool ready;
};

/*
 * Asks the host (rbln-vm --hotplug) to "del N" or "add N" and waits for
 * its answer; 0 on "ok", else -EIO with the answer in @reply.
 */
static int hotplug_request(const char *op, int card, char *reply, size_t len)
{
	const char *dir = getenv("RBLN_VM_HOTPLUG");
	char req[PATH_MAX], tmp[PATH_MAX], done[PATH_MAX], line[32];
	__s64 deadline = rbln_now_ms() + HOTPLUG_TIMEOUT_MS;
	int n, fd;

	reply[0] = '\0';
	if (!dir)
		return -ENOENT;
	snprintf(req, sizeof(req), "%s/req", dir);
	snprintf(tmp, sizeof(tmp), "%s/req.tmp", dir);
	snprintf(done, sizeof(done), "%s/done", dir);
	unlink(done);
	n = snprintf(line, sizeof(line), "%s %d\n", op, card);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, line, n) != n) {
		close(fd);
		return -EIO;
	}
	close(fd);
	if (rename(tmp, req))
		return -errno;
	for (;;) {
		n = rbln_read_file(done, reply, len);
		if (n >= 0) {
			unlink(done);
			return strncmp(reply, "ok", 2) == 0 ? 0 : -EIO;
		}
		if (rbln_now_ms() >= deadline) {
			snprintf(reply, len, "no answer within %d ms",
				 HOTPLUG_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		rbln_sleep_ms(100);
	}
}

static bool function_present(const char *dev_path)
{
	return access(dev_path, F_OK) == 0;
}

/* Waits until the PCI function is there (@want) or gone; 0 or -ETIMEDOUT. */
static int wait_function(const char *dev_path, bool want, int timeout_ms)
{
	__s64 deadline = rbln_now_ms() + timeout_ms;

	while (function_present(dev_path) != want) {
		if (rbln_now_ms() >= deadline)
			return -ETIMEDOUT;
		rbln_sleep_ms(50);
	}
	return 0;
}

/* A function added by device_add has no driver_override: rbln claims it. */
static int claim_function(const char *bdf)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override",
		 bdf);
	return rbln_write_file(path, "rbln");
}

/*
 * The guest kernel can take the function out of its slot: a hotplug driver
 * (acpiphp on the runner's pc machine) registered the slot of @bdf in
 * /sys/bus/pci/slots (its address is @bdf without the function).
 */
static bool slot_hotpluggable(const char *bdf)
{
	DIR *dir = opendir("/sys/bus/pci/slots");
	const char *dot = strrchr(bdf, '.');
	size_t len = dot ? (size_t)(dot - bdf) : strlen(bdf);
	struct dirent *de;
	bool found = false;

	if (!dir)
		return false;
	while (!found && (de = readdir(dir)) != NULL) {
		char path[PATH_MAX], addr[64];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/slots/%s/address",
			 de->d_name);
		found = rbln_read_file(path, addr, sizeof(addr)) >= 0 &&
			strlen(addr) == len && strncmp(addr, bdf, len) == 0;
	}
	closedir(dir);
	return found;
}

FIXTURE_SETUP(hotplug)
{
	int fd;

	self->target.card = -1;
	if (!getenv("RBLN_VM_HOTPLUG"))
		SKIP(return, "needs the VM runner's hot plug (rbln-vm --hotplug)");
	if (!rbln_require_nodes(_metadata, self->nodes) ||
	    !rbln_require_root(_metadata))
		return;
	self->target = self->nodes[0];
	ASSERT_LE(0, self->target.card);
	if (!slot_hotpluggable(self->target.bdf)) {
		self->target.card = -1;
		SKIP(return,
		     "the kernel registered no hotplug slot for %s (CONFIG_HOTPLUG_PCI_ACPI)",
		     self->target.bdf);
	}
	snprintf(self->dev_path, sizeof(self->dev_path),
		 "/sys/bus/pci/devices/%s", self->target.bdf);
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd);
	if (!rbln_require_rings(_metadata, fd)) {
		close(fd);
		return;
	}
	close(fd);
	self->ready = true;
}

FIXTURE_TEARDOWN_PARENT(hotplug)
{
	char log[1024] = "";
	char reply[256];
	int failed;

	if (self->target.card >= 0 && !function_present(self->dev_path)) {
		if (hotplug_request("add", self->target.card, reply,
				    sizeof(reply)))
			TH_LOG("teardown: add %d: %s", self->target.card, reply);
		if (!wait_function(self->dev_path, true, NODE_TIMEOUT_MS))
			claim_function(self->target.bdf);
	}
	failed = rbln_restore_bindings(log, sizeof(log));
	if (log[0])
		TH_LOG("teardown: %s", log);
	EXPECT_EQ(0, failed) TH_LOG("could not bind every card back");
}

TEST_F_TIMEOUT(hotplug, hot_unplug_fails_jobs_with_enodev_and_device_add_brings_a_working_card,
	       300)
{
	struct busy b = { 0 };
	char reply[256];
	__s64 t0;
	int err;

	if (!self->ready)
		return;
	busy_start(_metadata, &b, self->target.minor);
	t0 = rbln_now_ms();
	err = hotplug_request("del", self->target.card, reply, sizeof(reply));
	ASSERT_EQ(0, err) TH_LOG("device_del: %s", reply);
	TH_LOG("device_del done after %lld ms", (long long)(rbln_now_ms() - t0));
	EXPECT_FALSE(function_present(self->dev_path));
	busy_expect_gone(_metadata, &b, self->target.minor, t0,
			 HOTPLUG_TIMEOUT_MS);
	busy_close(_metadata, &b);

	err = hotplug_request("add", self->target.card, reply, sizeof(reply));
	ASSERT_EQ(0, err) TH_LOG("device_add: %s", reply);
	ASSERT_EQ(0, wait_function(self->dev_path, true, NODE_TIMEOUT_MS))
	TH_LOG("%s did not come back", self->target.bdf);
	ASSERT_EQ(0, claim_function(self->target.bdf));
	bind_and_run(_metadata, self->target.bdf);
}

/* An idle card with an open file: unplugged, closed, plugged, used. */
TEST_F_TIMEOUT(hotplug, hot_unplug_of_an_idle_card_and_plug_back_twice, 300)
{
	struct drm_rbln_info_device d;
	char reply[256];
	int cycle, fd, err;

	if (!self->ready)
		return;
	for (cycle = 0; cycle < 2; cycle++) {
		int minor = rbln_wait_node(self->target.bdf, NODE_TIMEOUT_MS);

		ASSERT_LE(0, minor);
		fd = rbln_open_minor(minor);
		ASSERT_LE(0, fd);
		err = hotplug_request("del", self->target.card, reply,
				      sizeof(reply));
		ASSERT_EQ(0, err) TH_LOG("cycle %d: device_del: %s", cycle, reply);
		EXPECT_FALSE(function_present(self->dev_path));
		EXPECT_EQ(-ENODEV, rbln_info_device(fd, &d));
		EXPECT_EQ(0, close(fd));
		err = hotplug_request("add", self->target.card, reply,
				      sizeof(reply));
		ASSERT_EQ(0, err) TH_LOG("cycle %d: device_add: %s", cycle, reply);
		ASSERT_EQ(0, wait_function(self->dev_path, true, NODE_TIMEOUT_MS));
		ASSERT_EQ(0, claim_function(self->target.bdf));
		bind_and_run(_metadata, self->target.bdf);
	}
}

TEST_HARNESS_MAIN
