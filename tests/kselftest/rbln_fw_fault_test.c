// SPDX-License-Identifier: GPL-2.0
/*
 * A firmware fault of a running card: the driver notices it (event), logs
 * the fault once, shows it in sysfs, answers queries that need the card
 * with -EIO while identity queries keep working, and a rebind recovers the
 * card (these tests turn the module's own recovery off).  With recovery
 * on (the default) the driver resets and recovers the card by itself:
 * open files keep working, the recovery is counted and a devcoredump
 * records the fault.  Other cards are not affected.  Root resets a card
 * through sysfs rbln/reset: the same recovery, done when the write returns.
 *
 * Changes device state: the teardown clears the fault and binds every card
 * back, even when a test failed half way.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem.h"

#define EMU_TIMEOUT_MS 5000
#define STATE_TIMEOUT_MS 5000
#define NODE_TIMEOUT_MS 10000
#define FAULT_REASON "ksft-runtime-fault"
#define RECOVERY_PARAM "/sys/module/rbln/parameters/recovery"

FIXTURE(fault)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	struct rbln_node target;
	char state_path[128];
	char fault_path[128];
	char klog[65536];
	char recovery[8];	/* the parameter's value before the test */
};

FIXTURE_SETUP(fault)
{
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count || !rbln_require_root(_metadata))
		return;
	self->target = self->nodes[0];
	ASSERT_LE(0, self->target.card);
	snprintf(self->state_path, sizeof(self->state_path),
		 "/sys/bus/pci/devices/%s/rbln/state", self->target.bdf);
	snprintf(self->fault_path, sizeof(self->fault_path),
		 "/sys/bus/pci/devices/%s/rbln/fault", self->target.bdf);
	ASSERT_LT(0, rbln_read_file(RECOVERY_PARAM, self->recovery,
				    sizeof(self->recovery)));
	/* a fault stays until the test recovers it (recovery tests turn it on) */
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "N"));
}

FIXTURE_TEARDOWN_PARENT(fault)
{
	char log[1024] = "";
	int failed;

	/* a faulted card is recovered by unbind + bind */
	if (rbln_is_bound(self->target.bdf)) {
		char state[32] = "";

		rbln_read_file(self->state_path, state, sizeof(state));
		if (strcmp(state, "ready") != 0)
			rbln_unbind(self->target.bdf);
	}
	if (self->recovery[0])
		rbln_write_file(RECOVERY_PARAM, self->recovery);
	failed = rbln_restore_bindings(log, sizeof(log));
	if (log[0])
		TH_LOG("teardown: %s", log);
	EXPECT_EQ(0, failed) TH_LOG("could not bind every card back");
}

/* Waits until sysfs state reads @want; returns 0 or -ETIMEDOUT. */
static int wait_state(const char *path, const char *want, int timeout_ms)
{
	__s64 deadline = rbln_now_ms() + timeout_ms;
	char state[32];

	for (;;) {
		if (rbln_read_file(path, state, sizeof(state)) >= 0 &&
		    strcmp(state, want) == 0)
			return 0;
		if (rbln_now_ms() >= deadline)
			return -ETIMEDOUT;
		rbln_sleep_ms(20);
	}
}

TEST_F_TIMEOUT(fault, runtime_fault_is_reported_and_rebind_recovers, 120)
{
	struct drm_rbln_info_telemetry t;
	struct drm_rbln_info_device d;
	char reply[128];
	char text[128];
	char uev[2048] = "";
	int minor;
	int ufd;
	int kfd;
	int err;
	int fd = rbln_open_minor(self->target.minor);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));
	ASSERT_EQ(0,
		  rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));

	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	ufd = rbln_uevent_open();
	ASSERT_LE(0, ufd) TH_LOG("uevent socket: %s", strerror(-ufd));
	err = rbln_emu_cmd(self->target.card,
			   "fault fw-fault code=3 reason=" FAULT_REASON, reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err)
	TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);

	/* the state change is announced: KOBJ_CHANGE of the PCI function */
	err = rbln_uevent_wait(ufd, self->target.bdf, "RBLN_STATE=fault",
			       "RBLN_FAULT_CODE=3", uev, sizeof(uev),
			       STATE_TIMEOUT_MS);
	close(ufd);
	EXPECT_EQ(0, err)
	TH_LOG("no uevent RBLN_STATE=fault RBLN_FAULT_CODE=3");
	EXPECT_TRUE(err || strstr(uev, "ACTION=change"))
	TH_LOG("uevent:\n%s", uev);

	err = wait_state(self->state_path, "fault", STATE_TIMEOUT_MS);
	rbln_sleep_ms(100);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	TH_LOG("kernel log:\n%s", self->klog);
	ASSERT_EQ(0, err) TH_LOG("sysfs state never became 'fault'");

	/* one log line with code and reason, however many requests fail */
	EXPECT_EQ(0, rbln_get_info(fd, RBLN_INFO_DEVICE, &d, sizeof(d), NULL))
	TH_LOG("identity is known without the card");
	for (int i = 0; i < 3; i++) {
		err = rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t),
				    NULL);
		EXPECT_EQ(-EIO, err)
		TH_LOG("telemetry of a faulted card: %s", strerror(-err));
	}
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      FAULT_REASON, "code 3"))
	TH_LOG("want the fault logged once");
	EXPECT_LT(0, rbln_read_file(self->fault_path, text, sizeof(text)));
	EXPECT_NE(NULL, strstr(text, FAULT_REASON))
	TH_LOG("sysfs fault reads '%s'", text);

	/* recovery: unbind resets the card, bind brings it back */
	err = rbln_unbind(self->target.bdf);
	ASSERT_EQ(0, err) TH_LOG("unbind a faulted card: %s", strerror(-err));
	EXPECT_EQ(-ENODEV,
		  rbln_get_info(fd, RBLN_INFO_DEVICE, &d, sizeof(d), NULL));
	EXPECT_EQ(0, close(fd));
	err = rbln_bind(self->target.bdf);
	ASSERT_EQ(0, err) TH_LOG("bind after the fault: %s", strerror(-err));
	minor = rbln_wait_node(self->target.bdf, NODE_TIMEOUT_MS);
	ASSERT_LE(0, minor);
	EXPECT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));
	fd = rbln_open_minor(minor);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0,
		  rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));
	close(fd);
}

TEST_F_TIMEOUT(fault, other_cards_keep_working_when_one_faults, 120)
{
	struct drm_rbln_info_telemetry t;
	char reply[128];
	int fds[RBLN_MAX_TEST_CARDS];
	int err;

	if (self->count < 2)
		SKIP(return, "needs two cards, the VM has %d", self->count);
	for (int i = 1; i < self->count; i++) {
		fds[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, fds[i]);
	}
	err = rbln_emu_cmd(self->target.card,
			   "fault fw-fault code=3 reason=" FAULT_REASON, reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err)
	TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	ASSERT_EQ(0, wait_state(self->state_path, "fault", STATE_TIMEOUT_MS));
	for (int i = 1; i < self->count; i++) {
		char path[128];
		char state[32] = "";

		EXPECT_EQ(0, rbln_get_info(fds[i], RBLN_INFO_TELEMETRY, &t,
					   sizeof(t), NULL))
		TH_LOG("card %s", self->nodes[i].bdf);
		snprintf(path, sizeof(path),
			 "/sys/bus/pci/devices/%s/rbln/state",
			 self->nodes[i].bdf);
		rbln_read_file(path, state, sizeof(state));
		EXPECT_STREQ("ready", state);
		close(fds[i]);
	}
	/* the teardown recovers the faulted card */
}

TEST_F_TIMEOUT(fault, silent_firmware_is_faulted_by_the_heartbeat_watchdog, 120)
{
	static const char *param = "/sys/module/rbln/parameters/heartbeat_timeout_ms";
	char losses_path[128], text[128], old[16] = "", reply[128];
	unsigned long long before, after;
	__s64 t0;
	int err;

	snprintf(losses_path, sizeof(losses_path),
		 "/sys/bus/pci/devices/%s/rbln/heartbeat_losses", self->target.bdf);
	ASSERT_LT(0, rbln_read_file(losses_path, text, sizeof(text)));
	before = strtoull(text, NULL, 10);
	ASSERT_LT(0, rbln_read_file(param, old, sizeof(old)));
	ASSERT_EQ(0, rbln_write_file(param, "1000"));
	ASSERT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));

	/* the firmware stops: no answers, no heartbeat, and no event either */
	err = rbln_emu_cmd(self->target.card, "fault no-response", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	t0 = rbln_now_ms();
	err = wait_state(self->state_path, "fault", 10000);
	TH_LOG("state 'fault' after %lld ms", (long long)(rbln_now_ms() - t0));
	EXPECT_EQ(0, err) TH_LOG("the watchdog did not notice the silent firmware");
	EXPECT_LT(0, rbln_read_file(self->fault_path, text, sizeof(text)));
	EXPECT_NE(NULL, strstr(text, "heartbeat")) TH_LOG("sysfs fault reads '%s'", text);
	ASSERT_LT(0, rbln_read_file(losses_path, text, sizeof(text)));
	after = strtoull(text, NULL, 10);
	EXPECT_EQ(before + 1, after);

	rbln_write_file(param, old);
	/* the teardown rebinds; the card must answer for that */
	EXPECT_EQ(0, rbln_emu_cmd(self->target.card, "fault clear", reply,
				  sizeof(reply), EMU_TIMEOUT_MS));
}

/* devcoredumps of @bdf; each one found is freed (written to). */
static int count_coredumps(const char *bdf)
{
	struct dirent *de;
	int n = 0;
	DIR *d = opendir("/sys/class/devcoredump");

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[300], target[300];
		ssize_t len;

		if (strncmp(de->d_name, "devcd", 5))
			continue;
		snprintf(path, sizeof(path),
			 "/sys/class/devcoredump/%s/failing_device", de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (!strstr(target, bdf))
			continue;
		n++;
		snprintf(path, sizeof(path), "/sys/class/devcoredump/%s/data",
			 de->d_name);
		rbln_write_file(path, "1");
	}
	closedir(d);
	return n;
}

TEST_F_TIMEOUT(fault, runtime_fault_is_recovered_by_the_driver, 120)
{
	char resets_path[128], text[64], reply[128];
	struct drm_rbln_info_telemetry t;
	unsigned long long before = 0, after = 0;
	int err;
	int fd = rbln_open_minor(self->target.minor);

	struct drm_rbln_info_vm vm;
	struct drm_rbln_bo_create bo;
	unsigned char want[256], got[256];
	int vfd;

	ASSERT_LE(0, fd);
	/* an HBM buffer the card has used: its VM is bound on the card */
	ASSERT_EQ(0, rbln_bo_create(fd, 4096, RBLN_REGION_HBM, 0, 0, &bo));
	ASSERT_EQ(0, rbln_info_vm(fd, &vm));
	vfd = rbln_vm_access_open(self->target.bdf);
	ASSERT_LE(0, vfd);
	rbln_pattern_fill(want, sizeof(want), 7, 0);
	ASSERT_EQ(0, rbln_vm_write(vfd, vm.asid, bo.device_va, want, sizeof(want)));
	snprintf(resets_path, sizeof(resets_path),
		 "/sys/bus/pci/devices/%s/rbln/card_resets", self->target.bdf);
	ASSERT_LT(0, rbln_read_file(resets_path, text, sizeof(text)));
	before = strtoull(text, NULL, 10);
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "Y"));
	/*
	 * Earlier tests' dumps of this card go first: the kernel keeps one
	 * dump per device and drops later ones while it exists, and a dump
	 * of a function that was hot-unplugged and plugged again in the
	 * same slot names the same BDF.
	 */
	count_coredumps(self->target.bdf);

	err = rbln_emu_cmd(self->target.card,
			   "fault fw-fault code=3 reason=" FAULT_REASON, reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err)
	TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);

	/* fault, then resetting, then ready again without a rebind */
	for (int i = 0; i < 100; i++) {
		ASSERT_LT(0, rbln_read_file(resets_path, text, sizeof(text)));
		after = strtoull(text, NULL, 10);
		if (after > before)
			break;
		rbln_sleep_ms(100);
	}
	EXPECT_EQ(before + 1, after) TH_LOG("card_resets did not count the recovery");
	EXPECT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));

	/* the open file survived and the card answers it */
	EXPECT_EQ(0, rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));
	/* the card was told about the VM again: the buffer still translates */
	EXPECT_EQ(0, rbln_vm_read(vfd, vm.asid, bo.device_va, got, sizeof(got)));
	EXPECT_EQ(0, memcmp(want, got, sizeof(got)))
	TH_LOG("the buffer's bytes changed over the recovery");
	close(vfd);
	close(fd);

	/* the devcoredump of the fault, for this card */
	EXPECT_EQ(1, count_coredumps(self->target.bdf))
	TH_LOG("want one devcoredump whose failing_device is %s", self->target.bdf);
}

/* card_resets of the target card. */
static unsigned long long read_card_resets(const char *bdf)
{
	char path[128], text[64] = "";

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/rbln/card_resets",
		 bdf);
	if (rbln_read_file(path, text, sizeof(text)) <= 0)
		return ~0ULL;
	return strtoull(text, NULL, 10);
}

/*
 * With recovery on: arms @start (a boot-fault or reset-fault line), crashes
 * the firmware and waits until the recovery ended (card_resets counted it,
 * or the log says it gave up), with the kernel log since in self->klog.
 */
static void crash_during_recovery(struct __test_metadata *_metadata,
				  FIXTURE_DATA(fault) * self, const char *start,
				  unsigned long long *resets_before)
{
	char reply[128];
	int kfd, err;

	*resets_before = read_card_resets(self->target.bdf);
	ASSERT_NE(~0ULL, *resets_before);
	ASSERT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "Y"));
	kfd = rbln_kmsg_open();
	ASSERT_LE(0, kfd);
	err = rbln_emu_cmd(self->target.card, start, reply, sizeof(reply),
			   EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	err = rbln_emu_cmd(self->target.card,
			   "fault fw-fault reason=" FAULT_REASON, reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err) TH_LOG("emulator: %s, reply '%s'", strerror(-err), reply);
	self->klog[0] = '\0';
	for (int i = 0; i < 300; i++) {
		EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
		if (read_card_resets(self->target.bdf) != *resets_before ||
		    strstr(self->klog, "card recovery failed"))
			break;
		rbln_sleep_ms(100);
	}
	close(kfd);
}

/*
 * The recovery @start lets through (crash_during_recovery()) ended well:
 * counted once, the card ready, no failure logged, and the file @fd opened
 * before the fault still answered by the card.
 */
static void expect_recovered(struct __test_metadata *_metadata,
			     FIXTURE_DATA(fault) * self, const char *start,
			     int fd)
{
	struct drm_rbln_info_telemetry t;
	unsigned long long before;

	crash_during_recovery(_metadata, self, start, &before);
	EXPECT_EQ(before + 1, read_card_resets(self->target.bdf))
	TH_LOG("kernel log:\n%s", self->klog);
	EXPECT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));
	EXPECT_EQ(NULL, strstr(self->klog, "recovery failed"));
	EXPECT_EQ(0, rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));
}

TEST_F_TIMEOUT(fault, a_crash_right_after_the_recovery_reset_is_reset_again, 120)
{
	int fd = rbln_open_minor(self->target.minor);

	ASSERT_LE(0, fd);
	expect_recovered(_metadata, self, "fault reset-fault", fd);
	/* asked again within the attempt: no second attempt */
	EXPECT_EQ(NULL, strstr(self->klog, "recovery attempt"));
	close(fd);
}

TEST_F_TIMEOUT(fault, a_crash_in_the_recovery_handshake_is_retried, 120)
{
	int fd = rbln_open_minor(self->target.minor);

	ASSERT_LE(0, fd);
	expect_recovered(_metadata, self, "fault boot-fault count=2", fd);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      "recovery attempt 1 of 3 failed", ""));
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      "recovery attempt 2 of 3 failed", ""));
	close(fd);
}

TEST_F_TIMEOUT(fault, recovery_gives_up_after_three_failed_attempts, 120)
{
	struct drm_rbln_info_telemetry t;
	unsigned long long before;
	char reply[128];
	int fd = rbln_open_minor(self->target.minor);

	ASSERT_LE(0, fd);
	crash_during_recovery(_metadata, self, "fault boot-fault count=3",
			      &before);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      "card recovery failed 3 times", ""))
	TH_LOG("kernel log:\n%s", self->klog);
	EXPECT_EQ(before, read_card_resets(self->target.bdf));
	EXPECT_EQ(0, wait_state(self->state_path, "fault", STATE_TIMEOUT_MS));
	EXPECT_EQ(-EIO,
		  rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));
	/* no recovery starts by itself any more; the teardown rebinds */
	rbln_sleep_ms(500);
	EXPECT_EQ(before, read_card_resets(self->target.bdf));
	EXPECT_EQ(0, rbln_emu_cmd(self->target.card, "fault clear", reply,
				  sizeof(reply), EMU_TIMEOUT_MS));
	close(fd);
}

/* rbln/<rel> of the target card. */
static void target_path(FIXTURE_DATA(fault) * self, const char *rel,
			char *path, size_t len)
{
	snprintf(path, len, "/sys/bus/pci/devices/%s/rbln/%s",
		 self->target.bdf, rel);
}

TEST_F_TIMEOUT(fault, sysfs_reset_resets_the_card_before_the_write_returns, 120)
{
	char reset_path[128], text[128];
	struct drm_rbln_info_telemetry t;
	struct drm_rbln_info_vm vm;
	struct drm_rbln_bo_create bo;
	unsigned char want[256], got[256];
	unsigned long long before;
	int fd = rbln_open_minor(self->target.minor);
	int vfd;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));
	ASSERT_EQ(0, rbln_bo_create(fd, 4096, RBLN_REGION_HBM, 0, 0, &bo));
	ASSERT_EQ(0, rbln_info_vm(fd, &vm));
	vfd = rbln_vm_access_open(self->target.bdf);
	ASSERT_LE(0, vfd);
	rbln_pattern_fill(want, sizeof(want), 11, 0);
	ASSERT_EQ(0, rbln_vm_write(vfd, vm.asid, bo.device_va, want, sizeof(want)));
	before = read_card_resets(self->target.bdf);
	ASSERT_NE(~0ULL, before);
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "Y"));
	target_path(self, "reset", reset_path, sizeof(reset_path));
	count_coredumps(self->target.bdf); /* frees those of earlier tests */

	ASSERT_EQ(0, rbln_write_file(reset_path, "1"));
	/* no waiting: the write returned once the card was back */
	EXPECT_EQ(before + 1, read_card_resets(self->target.bdf));
	ASSERT_LT(0, rbln_read_file(self->state_path, text, sizeof(text)));
	EXPECT_STREQ("ready", text);
	ASSERT_LT(0, rbln_read_file(self->fault_path, text, sizeof(text)));
	EXPECT_STREQ("none: reset requested through sysfs", text);
	/* the open file and its buffer survived */
	EXPECT_EQ(0, rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));
	EXPECT_EQ(0, rbln_vm_read(vfd, vm.asid, bo.device_va, got, sizeof(got)));
	EXPECT_EQ(0, memcmp(want, got, sizeof(got)));
	/* "y" is a true boolean as well */
	ASSERT_EQ(0, rbln_write_file(reset_path, "y\n"));
	EXPECT_EQ(before + 2, read_card_resets(self->target.bdf));
	/* like every recovery it left a devcoredump (one per card at a time) */
	EXPECT_EQ(1, count_coredumps(self->target.bdf));
	close(vfd);
	close(fd);
}

/* In a child without CAP_SYS_ADMIN: -errno of writing 1 to @path. */
static int write_without_cap_sys_admin(const char *path)
{
	int status = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct __user_cap_header_struct h = {
			.version = _LINUX_CAPABILITY_VERSION_3,
		};
		struct __user_cap_data_struct d[2];

		if (syscall(SYS_capget, &h, d))
			_exit(100);
		d[CAP_SYS_ADMIN / 32].effective &= ~(1U << (CAP_SYS_ADMIN % 32));
		if (syscall(SYS_capset, &h, d))
			_exit(101);
		_exit(-rbln_write_file(path, "1"));
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -ECHILD;
	return -WEXITSTATUS(status);
}

TEST_F_TIMEOUT(fault, sysfs_reset_refuses_what_it_cannot_do, 120)
{
	char reset_path[128], reply[128];
	unsigned long long before = read_card_resets(self->target.bdf);

	ASSERT_NE(~0ULL, before);
	ASSERT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));
	target_path(self, "reset", reset_path, sizeof(reset_path));
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "Y"));
	EXPECT_EQ(-EINVAL, rbln_write_file(reset_path, "0"));
	EXPECT_EQ(-EINVAL, rbln_write_file(reset_path, "x"));
	/* root without CAP_SYS_ADMIN (the mode lets it open the file) */
	EXPECT_EQ(-EPERM, write_without_cap_sys_admin(reset_path));
	/* nothing would bring the card back */
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "N"));
	EXPECT_EQ(-EOPNOTSUPP, rbln_write_file(reset_path, "1"));
	EXPECT_EQ(before, read_card_resets(self->target.bdf));
	EXPECT_EQ(0, wait_state(self->state_path, "ready", STATE_TIMEOUT_MS));

	/* a card in fault is not reset again (recovery is off: it stays) */
	ASSERT_EQ(0, rbln_emu_cmd(self->target.card,
				  "fault fw-fault code=3 reason=" FAULT_REASON,
				  reply, sizeof(reply), EMU_TIMEOUT_MS));
	ASSERT_EQ(0, wait_state(self->state_path, "fault", STATE_TIMEOUT_MS));
	ASSERT_EQ(0, rbln_write_file(RECOVERY_PARAM, "Y"));
	EXPECT_EQ(-EBUSY, rbln_write_file(reset_path, "1"));
	EXPECT_EQ(before, read_card_resets(self->target.bdf));
	EXPECT_EQ(0, rbln_emu_cmd(self->target.card, "fault clear", reply,
				  sizeof(reply), EMU_TIMEOUT_MS));
	/* the teardown rebinds the faulted card */
}

TEST_HARNESS_MAIN
