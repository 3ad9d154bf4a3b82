// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_submit_fault_test - jobs that fault, and recovery from faults the
 * emulator injects.
 *
 * MMU faults: a job that reads or writes outside its VM (or writes a
 * read-only buffer) fails with -EFAULT, moves no byte from the faulting
 * packet on, and is reported in RBLN_INFO_VM and fdinfo; the client's
 * later jobs fail too (on every queue of it), while another client runs
 * jobs before, during and after.
 *
 * Injected faults (emulator control port, "fault <kind> chiplet=N"):
 *  - hang: the hung job fails with -ETIMEDOUT after job_timeout_ms, the
 *    chiplet's ring_resets goes up by one with a RBLN_RING_RESET=<chiplet>
 *    uevent, the jobs queued behind it still run, other chiplets run jobs
 *    while the chiplet hangs, and the next job on the chiplet succeeds;
 *  - dma-error: the job fails with -EIO, no ring reset, the next succeeds;
 *  - corrupt-cpl: the job whose completion was corrupted ends (it cannot
 *    be matched) with -ETIMEDOUT through a ring reset, the next succeeds;
 *  - lost-irq: the job's record is written but its interrupt never comes:
 *    the driver's 500 ms poll completes the job (ring_cpls_polled + 1), or
 *    with ring_poll=N the timeout handler finds the record (a warning); no
 *    ring reset either way, and the next job succeeds;
 *  - fw-fault with recovery=Y (the default): the card recovers by itself
 *    (state uevents fault, resetting, ready; card_resets + 1), the job it
 *    lost fails with -EIO, the same file and queue run the next job;
 *  - fw-fault with recovery=N: the card stays faulted, the job in flight
 *    still ends, unbind + bind recovers and a new file runs jobs; a file
 *    closed on the faulted card sends it no VM_UNBIND or TLB invalidation
 *    and logs nothing.
 * The teardown clears faults, sets recovery=Y and ring_poll=Y and binds
 * every card back.
 *
 * job_timeout_ms is read from /sys/module/rbln/parameters; the VM tier
 * loads rbln with job_timeout_ms=2000 so the hang cases take seconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem_ksft.h"
#include "rbln_sub_ksft.h"

#define EMU_TIMEOUT_MS 5000

FIXTURE(flt)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int count;
	int fd;
	struct rbln_cmdbuf cb;
	struct rbln_buf data;
	__u32 timeout_ms;
	char klog[65536];
	bool ready;
};

FIXTURE_SETUP(flt)
{
	self->fd = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count)
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_info_device(self->fd, &self->dev));
	if (!rbln_require_rings(_metadata, self->fd))
		return;
	ASSERT_EQ(0, rbln_job_timeout_ms(&self->timeout_ms));
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 64 * 1024,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->data, 1 << 20,
				  RBLN_REGION_HOST, 0));
	self->ready = true;
}

FIXTURE_TEARDOWN_PARENT(flt)
{
	char log[1024] = "";
	char reply[128];
	int failed;

	rbln_write_file("/sys/module/rbln/parameters/recovery", "Y");
	rbln_write_file("/sys/module/rbln/parameters/ring_poll", "Y");
	for (int i = 0; i < self->count; i++) {
		if (self->nodes[i].card < 0)
			continue;
		rbln_emu_cmd(self->nodes[i].card, "fault clear", reply,
			     sizeof(reply), EMU_TIMEOUT_MS);
		/* a card left in fault is recovered by unbind + bind */
		if (rbln_is_bound(self->nodes[i].bdf)) {
			char path[128], state[32] = "";

			snprintf(path, sizeof(path),
				 "/sys/bus/pci/devices/%s/rbln/state",
				 self->nodes[i].bdf);
			rbln_read_file(path, state, sizeof(state));
			if (strcmp(state, "fault") == 0)
				rbln_unbind(self->nodes[i].bdf);
		}
	}
	failed = rbln_restore_bindings(log, sizeof(log));
	if (log[0])
		TH_LOG("teardown: %s", log);
	EXPECT_EQ(0, failed) TH_LOG("could not bind every card back");
}

/* ---- MMU faults ------------------------------------------------------ */

/* Waits (up to 2 s) until the VM of @fd has recorded @n faults. */
static int wait_faults(int fd, __u64 n)
{
	__s64 deadline = rbln_now_ms() + 2000;
	struct drm_rbln_info_vm vm;

	for (;;) {
		int err = rbln_info_vm(fd, &vm);

		if (err)
			return err;
		if (vm.fault_count >= n)
			return 0;
		if (rbln_now_ms() > deadline)
			return -ETIMEDOUT;
		rbln_sleep_ms(10);
	}
}

TEST_F(flt, mmu_fault_fails_the_job_and_every_later_job_of_the_client)
{
	struct drm_rbln_info_vm vm, vmb;
	struct rbln_cmdbuf cbb;
	struct rbln_buf b;
	__u32 qa, qa2, qb;
	__u64 hole, sb = 0;
	__s32 je;
	int fb;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_info_vm(self->fd, &vm));
	/* far above every buffer of this fresh VM, inside its VA range */
	hole = vm.va_start + (vm.va_end - vm.va_start) / 2;
	hole &= ~0xfffull;
	qa = rbln_new_queue(_metadata, self->fd, 1);

	/*
	 * Client B, with a job held through A's fault on another chiplet (a
	 * held job blocks its ring; with one chiplet B only runs around it).
	 */
	fb = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fb);
	qb = rbln_new_queue(_metadata, fb,
			    1u << (self->dev.chiplet_count - 1));
	ASSERT_EQ(0, rbln_cmd_init(fb, &cbb, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fb, &b, 4096, RBLN_REGION_HOST, 0));
	memset(b.map, 0, 4096);
	rbln_cmd_fill(&cbb, b.va, 1024, 0x11, 1);
	rbln_expect_job_ok(_metadata, fb, qb, &cbb, &b.handle, 1,
			   "B before A's fault");
	rbln_cmd_begin(&cbb);
	if (self->dev.chiplet_count > 1)
		rbln_cmd_wait(&cbb, b.va + 2048, 1, 0);
	rbln_cmd_fill(&cbb, b.va + 1024, 1024, 0x22, 1);
	ASSERT_EQ(0, rbln_submit_job(fb, qb, &cbb, &b.handle, 1, &sb));

	/* A: a packet that runs, a COPY from unmapped memory, one after */
	memset(self->data.map, 0, 8192);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va, 1, 0);
	rbln_cmd_copy(&self->cb, hole + 0x80, self->data.va + 4096, 64);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 2, 0);
	rbln_expect_job(_metadata, self->fd, qa, &self->cb,
			&self->data.handle, 1, -EFAULT, "COPY from a hole");
	EXPECT_EQ(1, ((__u64 *)self->data.map)[0]);
	EXPECT_EQ(0, ((__u64 *)self->data.map)[1]) TH_LOG("ran after the fault");
	EXPECT_TRUE(rbln_all_bytes(self->data.map + 4096, 64, 0))
	TH_LOG("the faulting COPY moved bytes");
	ASSERT_EQ(0, wait_faults(self->fd, 1)) TH_LOG("no fault recorded");
	rbln_expect_fault(_metadata, self->fd, 1, hole + 0x80,
			  RBLN_ACCESS_READ, RBLN_MMU_NOT_MAPPED, "job fault");

	/* every later job of A fails, on this queue and on a new one */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va + 16, 3, 0);
	rbln_expect_job(_metadata, self->fd, qa, &self->cb,
			&self->data.handle, 1, -EFAULT, "A's next job");
	qa2 = rbln_new_queue(_metadata, self->fd,
			     rbln_all_chiplets(self->dev.chiplet_count));
	rbln_expect_job(_metadata, self->fd, qa2, &self->cb,
			&self->data.handle, 1, -EFAULT, "A's job on a new queue");
	EXPECT_EQ(0, ((__u64 *)self->data.map)[2]) TH_LOG("a later job ran");

	/* B is untouched: its held job completes, a new one runs */
	__atomic_store_n((__u64 *)(b.map + 2048), 1, __ATOMIC_SEQ_CST);
	ASSERT_EQ(0, rbln_wait_job(fb, qb, sb, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je);
	EXPECT_TRUE(rbln_all_bytes(b.map + 1024, 1024, 0x22));
	rbln_cmd_reset(&cbb);
	rbln_cmd_fill(&cbb, b.va, 1024, 0x33, 1);
	rbln_expect_job_ok(_metadata, fb, qb, &cbb, &b.handle, 1,
			   "B after A's fault");
	EXPECT_TRUE(rbln_all_bytes(b.map, 1024, 0x33));
	ASSERT_EQ(0, rbln_info_vm(fb, &vmb));
	EXPECT_EQ(0, vmb.flags & RBLN_VM_FAULTED);
	EXPECT_EQ(0, vmb.fault_count);
	rbln_buf_free(fb, &b);
	rbln_cmd_fini(fb, &cbb);
	close(fb);
}

/*
 * Jobs of the client already on the rings when one of them faults fail
 * too (FAULT_ABORTS, firmware-iface 1.3): the one queued behind it on
 * its ring runs no packet, one held in a WAIT on another ring ends there;
 * both -EFAULT.  Another client's job behind them on the same ring runs,
 * and no ring is reset.
 */
TEST_F(flt, jobs_already_on_the_rings_behind_a_fault_fail_too)
{
	struct drm_rbln_info_vm vm;
	struct rbln_cmdbuf cbb;
	__u64 s1, s2, s3 = 0, sb, hole, resets0, resets1;
	__u32 qa, qa2 = 0, qb, minor = 0;
	__u64 *w = (__u64 *)self->data.map;
	struct rbln_buf b;
	__s32 je;
	int fb;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_iface_minor(self->fd, &minor));
	if (minor < 3)
		SKIP(return, "firmware-iface 1.%u: no FAULT_ABORTS", minor);
	ASSERT_EQ(0, rbln_info_vm(self->fd, &vm));
	hole = (vm.va_start + (vm.va_end - vm.va_start) / 2) & ~0xfffull;
	memset(self->data.map, 0, 8192);
	ASSERT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, 0,
					    "ring_resets", &resets0));
	qa = rbln_new_queue(_metadata, self->fd, 1);

	/* 1: held until the gate at 2048 opens, then faults */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, self->data.va + 2048, 1, 0);
	rbln_cmd_copy(&self->cb, hole, self->data.va + 4096, 64);
	ASSERT_EQ(0, rbln_submit_job(self->fd, qa, &self->cb,
				     &self->data.handle, 1, &s1));
	/* 2: behind it on the same queue and ring */
	rbln_cmd_begin(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 2, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, qa, &self->cb,
				     &self->data.handle, 1, &s2));
	/* 3: held on another chiplet by a gate that never opens */
	if (self->dev.chiplet_count > 1) {
		qa2 = rbln_new_queue(_metadata, self->fd, 2);
		rbln_cmd_begin(&self->cb);
		rbln_cmd_wait(&self->cb, self->data.va + 2056, 1, 0);
		rbln_cmd_signal(&self->cb, self->data.va + 16, 3, 0);
		ASSERT_EQ(0, rbln_submit_job(self->fd, qa2, &self->cb,
					     &self->data.handle, 1, &s3));
	}
	/* another client's job behind them on chiplet 0 */
	fb = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fb);
	qb = rbln_new_queue(_metadata, fb, 1);
	ASSERT_EQ(0, rbln_cmd_init(fb, &cbb, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fb, &b, 4096, RBLN_REGION_HOST, 0));
	memset(b.map, 0, 4096);
	rbln_cmd_signal(&cbb, b.va, 7, 0);
	ASSERT_EQ(0, rbln_submit_job(fb, qb, &cbb, &b.handle, 1, &sb));

	/* the scheduler writes them all to the rings meanwhile */
	rbln_sleep_ms(200);
	__atomic_store_n(&w[256], 1, __ATOMIC_SEQ_CST);	/* gate at 2048 */

	ASSERT_EQ(0, rbln_wait_job(self->fd, qa, s1, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(-EFAULT, je) TH_LOG("the faulting job: %s", strerror(-je));
	ASSERT_EQ(0, rbln_wait_job(self->fd, qa, s2, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(-EFAULT, je) TH_LOG("the job behind it: %s", strerror(-je));
	EXPECT_EQ(0, __atomic_load_n(&w[1], __ATOMIC_SEQ_CST))
	TH_LOG("the job behind the fault ran");
	if (qa2) {
		ASSERT_EQ(0, rbln_wait_job(self->fd, qa2, s3, RBLN_JOB_WAIT_MS,
					   &je));
		EXPECT_EQ(-EFAULT, je)
		TH_LOG("the job held on chiplet 1: %s", strerror(-je));
		EXPECT_EQ(0, __atomic_load_n(&w[2], __ATOMIC_SEQ_CST));
	}
	ASSERT_EQ(0, rbln_wait_job(fb, qb, sb, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je) TH_LOG("the other client's job: %s", strerror(-je));
	EXPECT_EQ(7, __atomic_load_n((__u64 *)b.map, __ATOMIC_SEQ_CST));
	ASSERT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, 0,
					    "ring_resets", &resets1));
	EXPECT_EQ(resets0, resets1) TH_LOG("a ring was reset");

	rbln_buf_free(fb, &b);
	rbln_cmd_fini(fb, &cbb);
	close(fb);
}

/*
 * A fault stops the client's job running on another chiplet inside its
 * long packet (FAULT_ABORTS interrupts it as VM_ABORT would), not only at
 * the next packet boundary: the job is a SIGNAL, a MATMUL of seconds that
 * stores its output only at its end, and a SIGNAL; the fault comes once
 * the first SIGNAL is seen.  The MATMUL's output keeps its pattern and
 * the last SIGNAL never runs; the job is -EFAULT.  (Before, the MATMUL ran
 * to its end and stored its output.)
 */
TEST_F(flt, a_fault_interrupts_a_long_packet_of_the_client_on_another_chiplet)
{
	struct rbln_fw_pkt_launch l = {
		.kernel = RBLN_FW_KERNEL_MATMUL,
		.dtype_in = RBLN_FW_DT_FP32,
		.dtype_out = RBLN_FW_DT_FP32,
		.ndim = 2,
		/* 2 * 4096^3 flops; a, b and every output row broadcast */
		.shape = { 4096, 4096, 4096 },
		.stride_out = { 0, 1 },
	};
	__u64 *w = (__u64 *)self->data.map;
	struct drm_rbln_info_vm vm;
	__u64 s1, s2, hole;
	__u32 qa, qb, minor = 0;
	__s64 deadline;
	__s32 je;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_iface_minor(self->fd, &minor));
	if (minor < 3)
		SKIP(return, "firmware-iface 1.%u: no FAULT_ABORTS", minor);
	if (self->dev.chiplet_count < 2)
		SKIP(return, "one chiplet: no other ring");
	ASSERT_EQ(0, rbln_info_vm(self->fd, &vm));
	hole = (vm.va_start + (vm.va_end - vm.va_start) / 2) & ~0xfffull;
	memset(self->data.map, 0, 8192);
	memset((char *)self->data.map + 65536, 0xff, 4096 * 4);
	l.a = self->data.va + 32768;
	l.b = self->data.va + 32768;
	l.out = self->data.va + 65536;

	/* chiplet 1: started, the long MATMUL, then the word at 24 */
	qb = rbln_new_queue(_metadata, self->fd, 2);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 1, 0);
	rbln_cmd_launch(&self->cb, &l);
	rbln_cmd_signal(&self->cb, self->data.va + 24, 1, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, qb, &self->cb,
				     &self->data.handle, 1, &s2));
	deadline = rbln_now_ms() + RBLN_JOB_WAIT_MS;
	while (!__atomic_load_n(&w[1], __ATOMIC_ACQUIRE) &&
	       rbln_now_ms() < deadline)
		rbln_sleep_ms(1);
	ASSERT_EQ(1, __atomic_load_n(&w[1], __ATOMIC_ACQUIRE));

	/* chiplet 0: a job of the same client that faults */
	qa = rbln_new_queue(_metadata, self->fd, 1);
	rbln_cmd_begin(&self->cb);
	rbln_cmd_copy(&self->cb, hole, self->data.va + 4096, 64);
	ASSERT_EQ(0, rbln_submit_job(self->fd, qa, &self->cb,
				     &self->data.handle, 1, &s1));

	ASSERT_EQ(0, rbln_wait_job(self->fd, qa, s1, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(-EFAULT, je) TH_LOG("the faulting job: %s", strerror(-je));
	ASSERT_EQ(0, rbln_wait_job(self->fd, qb, s2, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(-EFAULT, je) TH_LOG("the job on chiplet 1: %s", strerror(-je));
	EXPECT_TRUE(rbln_all_bytes((char *)self->data.map + 65536, 4096 * 4,
				   0xff))
	TH_LOG("the MATMUL ran to its end");
	EXPECT_EQ(0, __atomic_load_n(&w[3], __ATOMIC_ACQUIRE))
	TH_LOG("the packet after the MATMUL ran");
}

/*
 * A job waiting for another client's job that faulted (an in-syncobj
 * whose fence ends -EFAULT) still runs and succeeds: errors do not travel
 * along fences, and only the faulting client's own jobs fail.
 */
TEST_F(flt, a_job_waiting_for_another_clients_faulted_job_still_runs)
{
	struct drm_rbln_sync in = { 0 };
	__u32 sb = 0, sa = 0, qb, bob;
	struct drm_rbln_info_vm vm;
	struct drm_rbln_submit s;
	struct rbln_cmdbuf cbb;
	struct rbln_buf b;
	__u64 hole, seqno;
	__s32 je = 1;
	__u32 q;
	int fb;

	if (!self->ready)
		return;
	fb = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fb);
	ASSERT_EQ(0, rbln_info_vm(fb, &vm));
	hole = (vm.va_start + (vm.va_end - vm.va_start) / 2) & ~0xfffull;
	qb = rbln_new_queue(_metadata, fb, 1);
	ASSERT_EQ(0, rbln_cmd_init(fb, &cbb, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fb, &b, 4096, RBLN_REGION_HOST, 0));
	bob = b.handle;
	ASSERT_EQ(0, rbln_syncobj_create(fb, &sb));
	rbln_cmd_copy(&cbb, hole, b.va, 64);
	rbln_submit_args(&s, qb, &cbb, &bob, 1);
	s.out_handle = sb;
	ASSERT_EQ(0, rbln_submit_raw(fb, &s));
	seqno = s.seqno;

	ASSERT_EQ(0, rbln_syncobj_share(fb, sb, self->fd, &sa));
	q = rbln_new_queue(_metadata, self->fd, 1);
	memset(self->data.map, 0, 4096);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va, 6, 0);
	rbln_submit_args(&s, q, &self->cb, &self->data.handle, 1);
	in.handle = sa;
	s.in_syncs = (__u64)(uintptr_t)&in;
	s.in_count = 1;
	ASSERT_EQ(0, rbln_submit_raw(self->fd, &s));

	ASSERT_EQ(0, rbln_wait_job(fb, qb, seqno, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(-EFAULT, je) TH_LOG("the faulting job: %s", strerror(-je));
	ASSERT_EQ(0, rbln_wait_job(self->fd, q, s.seqno, RBLN_JOB_WAIT_MS, &je));
	EXPECT_EQ(0, je) TH_LOG("the job behind it: %s", strerror(-je));
	EXPECT_EQ(6, __atomic_load_n((__u64 *)self->data.map, __ATOMIC_ACQUIRE));
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, sa));
	rbln_buf_free(fb, &b);
	rbln_cmd_fini(fb, &cbb);
	close(fb);
}

TEST_F(flt, job_writing_a_read_only_buffer_fails_with_efault)
{
	struct drm_rbln_bo_create ro;
	__u32 q, bos[2];
	void *map;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_bo_create(self->fd, 4096, RBLN_REGION_HBM, 0,
				    RBLN_BO_DEVICE_READ_ONLY, &ro));
	ASSERT_EQ(0, rbln_bo_mmap(self->fd, ro.handle, 4096,
				  PROT_READ | PROT_WRITE, &map));
	memset(map, 0x5e, 4096);
	memset(self->data.map, 0, 4096);
	bos[0] = ro.handle;
	bos[1] = self->data.handle;
	q = rbln_new_queue(_metadata, self->fd, 1);
	/* reading it works */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy(&self->cb, ro.device_va, self->data.va, 4096);
	rbln_expect_job_ok(_metadata, self->fd, q, &self->cb, bos, 2,
			   "read a read-only buffer");
	EXPECT_TRUE(rbln_all_bytes(self->data.map, 4096, 0x5e));
	/* a FILL of it faults at its first byte and changes nothing */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_fill(&self->cb, ro.device_va + 100, 64, 0, 1);
	rbln_expect_job(_metadata, self->fd, q, &self->cb, bos, 2, -EFAULT,
			"FILL of a read-only buffer");
	ASSERT_EQ(0, wait_faults(self->fd, 1));
	rbln_expect_fault(_metadata, self->fd, 1, ro.device_va + 100,
			  RBLN_ACCESS_WRITE, RBLN_MMU_NO_WRITE, "FILL");
	EXPECT_TRUE(rbln_all_bytes(map, 4096, 0x5e));
	munmap(map, 4096);
	rbln_gem_close(self->fd, ro.handle);
}

/* ---- injected faults ------------------------------------------------- */

static void emu_fault(struct __test_metadata *_metadata,
		      FIXTURE_DATA(flt) * self, const char *cmd)
{
	char reply[256];
	int err;

	ASSERT_LE(0, self->nodes[0].card);
	err = rbln_emu_cmd(self->nodes[0].card, cmd, reply, sizeof(reply),
			   EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator '%s': %s, reply '%s'", cmd,
				 strerror(-err), reply);
}

static __u64 ring_resets(struct __test_metadata *_metadata,
			 FIXTURE_DATA(flt) * self, __u32 chiplet)
{
	__u64 v = ~0ull;

	EXPECT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, chiplet,
					    "ring_resets", &v));
	return v;
}

/* The chiplet a fault is injected into, and another one if there is. */
static __u32 victim(FIXTURE_DATA(flt) * self)
{
	return self->dev.chiplet_count - 1;
}

/*
 * Fault @kind on the victim chiplet: the job it hits ends with @want (after
 * about job_timeout_ms and one ring reset with its uevent if @reset; its
 * later packets did not run unless @ran), the job queued behind it runs
 * exactly once, other chiplets run jobs meanwhile, and the next job on the
 * victim succeeds.
 */
static void injected(struct __test_metadata *_metadata,
		     FIXTURE_DATA(flt) * self, const char *kind, __s32 want,
		     bool reset, bool ran)
{
	__u32 v = victim(self), other = 0;
	__u64 before[RBLN_MAX_CHIPLETS], s1 = 0, s2 = 0, busy0 = 0, busy1 = 0;
	__u32 qv, qo = 0;
	__u64 *d = (__u64 *)self->data.map;
	struct rbln_cmdbuf cbo;
	struct rbln_buf bo;
	int fo = -1;
	char cmd[64], uev[2048] = "", want_uev[32];
	__s64 t0, ms, others_done_ms = -1;
	int ufd, kfd;
	__s32 je = 1;

	for (__u32 c = 0; c < self->dev.chiplet_count; c++)
		before[c] = ring_resets(_metadata, self, c);
	EXPECT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, v, "busy_ns",
					    &busy0));
	qv = rbln_new_queue(_metadata, self->fd, 1u << v);
	/*
	 * The other chiplet's jobs come from another client with buffers of
	 * its own: nothing orders them after the victim's jobs.
	 */
	if (self->dev.chiplet_count > 1) {
		fo = rbln_open_minor(self->nodes[0].minor);
		ASSERT_LE(0, fo);
		qo = rbln_new_queue(_metadata, fo, 1u << other);
		ASSERT_EQ(0, rbln_cmd_init(fo, &cbo, 16384, RBLN_REGION_HOST,
					   0));
		ASSERT_EQ(0, rbln_buf_new(fo, &bo, 4096, RBLN_REGION_HOST, 0));
		memset(bo.map, 0, 4096);
	}
	memset(self->data.map, 0, 1 << 20);
	ufd = rbln_uevent_open();
	ASSERT_LE(0, ufd);
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);

	snprintf(cmd, sizeof(cmd), "fault %s chiplet=%u", kind, v);
	emu_fault(_metadata, self, cmd);
	/* the job the fault hits (a COPY: it uses the DMA engine) ... */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy(&self->cb, self->data.va + 4096, self->data.va + 8192,
		      4096);
	rbln_cmd_signal(&self->cb, self->data.va, 1, 0);
	t0 = rbln_now_ms();
	ASSERT_EQ(0, rbln_submit_job(self->fd, qv, &self->cb,
				     &self->data.handle, 1, &s1));
	/*
	 * ... and an innocent one behind it, which must run exactly once:
	 * it copies A to B and then overwrites A (run twice, B gets the new A)
	 */
	memset(self->data.map + 32768, 0x11, 4096);
	rbln_cmd_begin(&self->cb);
	rbln_cmd_copy(&self->cb, self->data.va + 32768, self->data.va + 40960,
		      4096);
	rbln_cmd_fill(&self->cb, self->data.va + 32768, 4096, 0x22, 1);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 2, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, qv, &self->cb,
				     &self->data.handle, 1, &s2));
	/* the other chiplet works meanwhile */
	for (int i = 0; qo && i < 20; i++) {
		rbln_cmd_begin(&cbo);
		rbln_cmd_signal(&cbo, bo.va + 8 * i, i + 1, 0);
		rbln_expect_job_ok(_metadata, fo, qo, &cbo, &bo.handle, 1,
				   "other chiplet");
	}
	if (qo)
		others_done_ms = rbln_now_ms() - t0;

	ASSERT_EQ(0, rbln_wait_job(self->fd, qv, s1,
				   3 * self->timeout_ms + 10000, &je));
	ms = rbln_now_ms() - t0;
	EXPECT_EQ(want, je) TH_LOG("%s: job error %d (%s)", kind, je,
				   strerror(-je));
	if (!ran)
		EXPECT_EQ(0, d[0]) TH_LOG("%s: the failed job's SIGNAL ran", kind);
	if (reset) {
		EXPECT_LE(self->timeout_ms * 9 / 10, ms)
		TH_LOG("%s: failed after %lld ms, timeout %u", kind, ms,
		       self->timeout_ms);
		EXPECT_GE(self->timeout_ms + 5000, ms)
		TH_LOG("%s: failed after %lld ms, timeout %u", kind, ms,
		       self->timeout_ms);
		if (qo) {
			EXPECT_GT(self->timeout_ms, others_done_ms)
			TH_LOG("%s: the other chiplet waited for the reset (%lld ms)",
			       kind, others_done_ms);
		}
	}
	/* the innocent job runs (after the reset: it is written again) */
	ASSERT_EQ(0, rbln_wait_job(self->fd, qv, s2,
				   3 * self->timeout_ms + 10000, &je));
	EXPECT_EQ(0, je) TH_LOG("%s: the job behind the failed one", kind);
	EXPECT_EQ(2, d[1]);
	EXPECT_TRUE(rbln_all_bytes(self->data.map + 40960, 4096, 0x11))
	TH_LOG("%s: the job behind the failed one ran %s", kind,
	       self->data.map[40960] == 0x22 ? "twice" : "wrongly");
	EXPECT_TRUE(rbln_all_bytes(self->data.map + 32768, 4096, 0x22));
	/* busy time survives the ring reset (and grew by the innocent job) */
	EXPECT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, v, "busy_ns",
					    &busy1));
	EXPECT_LT(busy0, busy1)
	TH_LOG("%s: chiplet %u busy_ns %llu -> %llu", kind, v,
	       (unsigned long long)busy0, (unsigned long long)busy1);

	rbln_sleep_ms(200);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	for (__u32 c = 0; c < self->dev.chiplet_count; c++) {
		__u64 now = ring_resets(_metadata, self, c);

		EXPECT_EQ(before[c] + (reset && c == v), now)
		TH_LOG("%s: chiplet %u ring_resets %llu -> %llu", kind, c,
		       (unsigned long long)before[c], (unsigned long long)now);
	}
	snprintf(want_uev, sizeof(want_uev), "RBLN_RING_RESET=%u", v);
	if (reset) {
		EXPECT_EQ(0, rbln_uevent_wait(ufd, self->nodes[0].bdf,
					      want_uev, NULL, uev, sizeof(uev),
					      2000))
		TH_LOG("%s: no uevent %s", kind, want_uev);
		EXPECT_LE(1, rbln_count_lines(self->klog, "did not complete",
					      NULL, NULL))
		TH_LOG("%s: kernel log:\n%s", kind, self->klog);
	}
	close(ufd);

	/* the chiplet is fine again */
	emu_fault(_metadata, self, "fault clear");
	rbln_cmd_reset(&self->cb);
	rbln_cmd_copy(&self->cb, self->data.va + 4096, self->data.va + 16384,
		      4096);
	rbln_cmd_signal(&self->cb, self->data.va + 16, 3, 0);
	rbln_expect_job_ok(_metadata, self->fd, qv, &self->cb,
			   &self->data.handle, 1, "after recovery");
	EXPECT_EQ(3, d[2]);
	for (int i = 0; qo && i < 20; i++)
		EXPECT_EQ(i + 1, ((__u64 *)bo.map)[i]);
	if (fo >= 0) {
		rbln_buf_free(fo, &bo);
		rbln_cmd_fini(fo, &cbo);
		close(fo);
	}
}

TEST_F_TIMEOUT(flt, hung_chiplet_fails_the_job_with_etimedout_and_recovers, 120)
{
	if (!self->ready)
		return;
	injected(_metadata, self, "hang", -ETIMEDOUT, true, false);
}

TEST_F_TIMEOUT(flt, dma_error_fails_the_job_with_eio_and_the_next_runs, 120)
{
	if (!self->ready)
		return;
	injected(_metadata, self, "dma-error", -EIO, false, false);
}

TEST_F_TIMEOUT(flt, corrupt_completion_recovers_through_a_ring_reset, 120)
{
	if (!self->ready)
		return;
	injected(_metadata, self, "corrupt-cpl", -ETIMEDOUT, true, true);
}

static __u64 cpls_polled(struct __test_metadata *_metadata,
			 FIXTURE_DATA(flt) * self, __u32 chiplet)
{
	__u64 v = ~0ull;

	EXPECT_EQ(0, rbln_sysfs_chiplet_u64(self->nodes[0].bdf, chiplet,
					    "ring_cpls_polled", &v));
	return v;
}

/*
 * A job whose completion interrupt is lost: with @poll the driver's poll
 * completes it (ring_cpls_polled + 1, no warning), without it the timeout
 * handler (the warning, ring_cpls_polled unchanged); no ring reset.
 */
static void lost_interrupt(struct __test_metadata *_metadata,
			   FIXTURE_DATA(flt) * self, bool poll)
{
	__u64 before[RBLN_MAX_CHIPLETS], s = 0, *d, polled0;
	__u32 v, q;
	__s32 je = 1;
	char cmd[64];
	int kfd;

	ASSERT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/ring_poll",
				     poll ? "Y" : "N"));
	v = victim(self);
	polled0 = cpls_polled(_metadata, self, v);
	d = (__u64 *)self->data.map;
	for (__u32 c = 0; c < self->dev.chiplet_count; c++)
		before[c] = ring_resets(_metadata, self, c);
	q = rbln_new_queue(_metadata, self->fd, 1u << v);
	memset(self->data.map, 0, 4096);
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);

	snprintf(cmd, sizeof(cmd), "fault lost-irq chiplet=%u", v);
	emu_fault(_metadata, self, cmd);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va, 1, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, q, &self->cb,
				     &self->data.handle, 1, &s));
	ASSERT_EQ(0, rbln_wait_job(self->fd, q, s, 3 * self->timeout_ms + 10000,
				   &je));
	EXPECT_EQ(0, je) TH_LOG("job error %d (%s)", je, strerror(-je));
	EXPECT_EQ(1, d[0]);
	EXPECT_EQ(polled0 + poll, cpls_polled(_metadata, self, v));

	rbln_sleep_ms(200);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	EXPECT_EQ(!poll, rbln_count_lines(self->klog,
					  "no completion interrupt came", NULL,
					  NULL))
	TH_LOG("kernel log:\n%s", self->klog);
	EXPECT_EQ(0, rbln_count_lines(self->klog, "did not complete", NULL,
				      NULL))
	TH_LOG("kernel log:\n%s", self->klog);
	for (__u32 c = 0; c < self->dev.chiplet_count; c++) {
		__u64 now = ring_resets(_metadata, self, c);

		EXPECT_EQ(before[c], now)
		TH_LOG("chiplet %u: a ring reset for a lost interrupt", c);
	}

	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 2, 0);
	rbln_expect_job_ok(_metadata, self->fd, q, &self->cb,
			   &self->data.handle, 1, "after the lost interrupt");
	EXPECT_EQ(2, d[1]);
	EXPECT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/ring_poll",
				     "Y"));
}

TEST_F_TIMEOUT(flt, lost_interrupt_is_completed_by_the_poll_without_reset, 120)
{
	if (!self->ready)
		return;
	lost_interrupt(_metadata, self, true);
}

TEST_F_TIMEOUT(flt, lost_interrupt_completes_the_job_at_the_timeout_without_reset,
	       120)
{
	if (!self->ready)
		return;
	lost_interrupt(_metadata, self, false);
}

/* Waits up to @ms for sysfs state of @bdf to read @want. */
static int wait_state(const char *bdf, const char *want, int ms)
{
	__s64 deadline = rbln_now_ms() + ms;
	char path[128], state[32];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/rbln/state", bdf);
	for (;;) {
		if (rbln_read_file(path, state, sizeof(state)) >= 0 &&
		    strcmp(state, want) == 0)
			return 0;
		if (rbln_now_ms() > deadline)
			return -ETIMEDOUT;
		rbln_sleep_ms(20);
	}
}

/* A job held on a flag of the data buffer, submitted on a new queue. */
static __u64 held_job(struct __test_metadata *_metadata,
		      FIXTURE_DATA(flt) * self, __u32 *q)
{
	__u64 s = 0;

	*q = rbln_new_queue(_metadata, self->fd, 1);
	memset(self->data.map, 0, 4096);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_wait(&self->cb, self->data.va, 1, 0);
	rbln_cmd_signal(&self->cb, self->data.va + 8, 1, 0);
	ASSERT_EQ(0, rbln_submit_job(self->fd, *q, &self->cb,
				     &self->data.handle, 1, &s));
	rbln_sleep_ms(100);
	return s;
}

TEST_F_TIMEOUT(flt, firmware_fault_fails_lost_jobs_with_eio_and_the_card_recovers,
	       180)
{
	const char *bdf = self->nodes[0].bdf;
	char uev[2048];
	__u64 resets0 = 0, resets1 = 0, s;
	__s32 je = 1;
	int ufd, err;
	__u32 q;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/recovery",
				     "Y"));
	ASSERT_EQ(0, rbln_sysfs_card_u64(bdf, "card_resets", &resets0));
	s = held_job(_metadata, self, &q);
	ufd = rbln_uevent_open();
	ASSERT_LE(0, ufd);
	emu_fault(_metadata, self, "fault fw-fault code=3 reason=ksft-jobs");
	/* fault -> resetting -> ready, announced */
	EXPECT_EQ(0, rbln_uevent_wait(ufd, bdf, "RBLN_STATE=fault", NULL, uev,
				      sizeof(uev), 5000));
	EXPECT_EQ(0, rbln_uevent_wait(ufd, bdf, "RBLN_STATE=resetting", NULL,
				      uev, sizeof(uev), 5000));
	EXPECT_EQ(0, rbln_uevent_wait(ufd, bdf, "RBLN_STATE=ready", NULL, uev,
				      sizeof(uev), 30000));
	close(ufd);
	ASSERT_EQ(0, wait_state(bdf, "ready", 30000));
	/* the job the card lost: -EIO, and it did not run */
	err = rbln_wait_job(self->fd, q, s, RBLN_JOB_WAIT_MS, &je);
	ASSERT_EQ(0, err) TH_LOG("the lost job never ended");
	EXPECT_EQ(-EIO, je) TH_LOG("lost job: %d (%s)", je, strerror(-je));
	EXPECT_EQ(0, ((__u64 *)self->data.map)[1]);
	ASSERT_EQ(0, rbln_sysfs_card_u64(bdf, "card_resets", &resets1));
	EXPECT_EQ(resets0 + 1, resets1);
	/* the same file, buffers and queue go on */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_fill(&self->cb, self->data.va + 4096, 4096, 0x4d, 1);
	rbln_expect_job_ok(_metadata, self->fd, q, &self->cb,
			   &self->data.handle, 1, "same queue after recovery");
	EXPECT_TRUE(rbln_all_bytes(self->data.map + 4096, 4096, 0x4d));
	rbln_expect_no_fault(_metadata, self->fd, "after recovery");
}

TEST_F_TIMEOUT(flt, firmware_fault_without_recovery_needs_a_rebind, 180)
{
	char bdf[RBLN_BDF_LEN];
	__u64 s;
	__s32 je = 1;
	__u32 q;
	int err, minor;

	if (!self->ready)
		return;
	snprintf(bdf, sizeof(bdf), "%s", self->nodes[0].bdf);
	ASSERT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/recovery",
				     "N"));
	s = held_job(_metadata, self, &q);
	emu_fault(_metadata, self, "fault fw-fault code=3 reason=ksft-jobs");
	ASSERT_EQ(0, wait_state(bdf, "fault", 5000));
	/* the job in flight ends (at the latest by the ring's timeout) */
	err = rbln_wait_job(self->fd, q, s, 3 * self->timeout_ms + 10000, &je);
	ASSERT_EQ(0, err) TH_LOG("the job in flight never ended");
	EXPECT_TRUE(je == -EIO || je == -ECANCELED || je == -ETIMEDOUT)
	TH_LOG("job in flight at the firmware fault: %d (%s)", je,
	       strerror(-je));
	rbln_sleep_ms(500);
	EXPECT_EQ(0, wait_state(bdf, "fault", 100)) TH_LOG("recovered anyway");

	/* unbind + bind recovers; the old file is dead, a new one works */
	rbln_cmd_fini(self->fd, &self->cb);
	rbln_buf_free(self->fd, &self->data);
	ASSERT_EQ(0, rbln_unbind(bdf));
	EXPECT_EQ(-ENODEV, rbln_queue_create(self->fd, 1, 1, &q));
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/recovery",
				     "Y"));
	emu_fault(_metadata, self, "fault clear");
	ASSERT_EQ(0, rbln_bind(bdf));
	minor = rbln_wait_node(bdf, 10000);
	ASSERT_LE(0, minor);
	self->fd = rbln_open_minor(minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 4096,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->data, 4096,
				  RBLN_REGION_HOST, 0));
	q = rbln_new_queue(_metadata, self->fd, 1);
	rbln_cmd_signal(&self->cb, self->data.va, 7, 0);
	rbln_expect_job_ok(_metadata, self->fd, q, &self->cb,
			   &self->data.handle, 1, "after the rebind");
	EXPECT_EQ(7, ((__u64 *)self->data.map)[0]);
}

/*
 * self->klog holds no card rejection of a driver request and no failed
 * VM_UNBIND or TLB invalidation.
 */
static void expect_no_mmu_request_errors(struct __test_metadata *_metadata,
					 FIXTURE_DATA(flt) * self)
{
	static const char *const errors[] = {
		"card rejected", "VM_UNBIND", "TLB invalidation",
	};

	for (size_t i = 0; i < ARRAY_SIZE(errors); i++) {
		const char *e = errors[i];

		EXPECT_EQ(0, rbln_count_lines(self->klog, e, NULL, NULL))
		TH_LOG("'%s' in the kernel log: %s", e, self->klog);
	}
}

/*
 * A card in FAULT forgets every address space and translation when it is
 * restarted: a file closed meanwhile sends it no VM_UNBIND and no TLB
 * invalidation (which a faulted card refuses) and leaves nothing in the
 * kernel log.
 */
TEST_F_TIMEOUT(flt, file_closed_on_a_faulted_card_sends_no_unbind, 120)
{
	const char *bdf = self->nodes[0].bdf;
	struct rbln_cmdbuf cbo;
	struct rbln_buf bo;
	int fo, kfd;
	__u32 qo;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/recovery",
				     "N"));
	/* a second client, whose address space the card has bound */
	fo = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, fo);
	ASSERT_EQ(0, rbln_cmd_init(fo, &cbo, 4096, RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(fo, &bo, 4096, RBLN_REGION_HOST, 0));
	qo = rbln_new_queue(_metadata, fo, 1);
	rbln_cmd_signal(&cbo, bo.va, 3, 0);
	rbln_expect_job_ok(_metadata, fo, qo, &cbo, &bo.handle, 1,
			   "before the fault");

	emu_fault(_metadata, self, "fault fw-fault code=3 reason=ksft-close");
	ASSERT_EQ(0, wait_state(bdf, "fault", 5000));
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	/* unmapped first: a mapping would keep the file open */
	rbln_cmd_fini(fo, &cbo);
	rbln_buf_free(fo, &bo);
	close(fo);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	expect_no_mmu_request_errors(_metadata, self);
	/* the teardown unbinds the faulted card and binds it back */
}

/*
 * One client's life, over and over until @until_ms: open, a buffer and a
 * command buffer, one job (which binds the address space on the card),
 * close.  Jobs the card loses fail; nothing may hang.  Exit status: 0, or
 * the step that failed unexpectedly.
 */
static int churn_client(int minor, __s64 until_ms)
{
	struct rbln_cmdbuf cb;
	struct rbln_buf b;
	__s32 je;
	__u64 s;
	__u32 q;
	int fd;

	while (rbln_now_ms() < until_ms) {
		fd = rbln_open_minor(minor);
		if (fd < 0)
			return 1;
		if (rbln_cmd_init(fd, &cb, 4096, RBLN_REGION_HOST, 0) ||
		    rbln_buf_new(fd, &b, 4096, RBLN_REGION_HOST, 0))
			return 2;
		if (rbln_queue_create(fd, 1, RBLN_QUEUE_PRIORITY_NORMAL, &q))
			return 3;
		rbln_cmd_signal(&cb, b.va, 1, 0);
		/* -EIO while the card is faulted; the job fails if it is lost */
		if (!rbln_submit_job(fd, q, &cb, &b.handle, 1, &s) &&
		    rbln_wait_job(fd, q, s, RBLN_JOB_WAIT_MS, &je))
			return 4;
		rbln_cmd_fini(fd, &cb);
		rbln_buf_free(fd, &b);
		close(fd);
	}
	return 0;
}

/*
 * Clients that come and go while the card faults and recovers, five
 * times: files closed before, during and after each recovery.  The card
 * rejects no request of the driver and the driver logs no failed
 * VM_UNBIND or TLB invalidation (a recovery binds again only the address
 * spaces still open, and one closing meanwhile must not unbind a card
 * that has forgotten it), every client's calls return, and the card runs
 * jobs afterwards.
 */
TEST_F_TIMEOUT(flt, clients_closing_while_the_card_recovers_leave_no_errors,
	       240)
{
	const char *bdf = self->nodes[0].bdf;
	enum { CLIENTS = 4, ROUNDS = 5 };
	pid_t pids[CLIENTS];
	__s64 until;
	int kfd, status;
	__u32 q;

	if (!self->ready)
		return;
	ASSERT_EQ(0, rbln_write_file("/sys/module/rbln/parameters/recovery",
				     "Y"));
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	until = rbln_now_ms() + 60000;
	for (int i = 0; i < CLIENTS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (pids[i] == 0)
			_exit(churn_client(self->nodes[0].minor, until));
	}
	for (int r = 0; r < ROUNDS; r++) {
		__u64 resets0 = 0, resets = 0;
		__s64 deadline = rbln_now_ms() + 30000;

		ASSERT_EQ(0, rbln_sysfs_card_u64(bdf, "card_resets", &resets0));
		rbln_sleep_ms(300);
		emu_fault(_metadata, self, "fault fw-fault code=3 reason=ksft-churn");
		/* fault, resetting, ready: too quick to see each state */
		while (!rbln_sysfs_card_u64(bdf, "card_resets", &resets) &&
		       resets == resets0 && rbln_now_ms() < deadline)
			rbln_sleep_ms(20);
		EXPECT_EQ(resets0 + 1, resets) TH_LOG("round %d: no recovery", r);
		EXPECT_EQ(0, wait_state(bdf, "ready", 30000))
		TH_LOG("round %d: the card did not recover", r);
	}
	/* the clients end wherever they are: their files close at exit */
	for (int i = 0; i < CLIENTS; i++) {
		kill(pids[i], SIGTERM);
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFSIGNALED(status) ||
			    (WIFEXITED(status) && WEXITSTATUS(status) == 0))
		TH_LOG("client %d: exit %d", i, WEXITSTATUS(status));
	}
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	expect_no_mmu_request_errors(_metadata, self);
	/* and the card works */
	q = rbln_new_queue(_metadata, self->fd, 1);
	rbln_cmd_reset(&self->cb);
	rbln_cmd_signal(&self->cb, self->data.va, 9, 0);
	rbln_expect_job_ok(_metadata, self->fd, q, &self->cb,
			   &self->data.handle, 1, "after the recoveries");
	EXPECT_EQ(9, ((__u64 *)self->data.map)[0]);
}

TEST_HARNESS_MAIN
