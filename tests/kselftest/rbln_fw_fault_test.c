// SPDX-License-Identifier: GPL-2.0
/*
 * A firmware fault of a running card: the driver notices it (event), logs
 * the fault once, shows it in sysfs, answers queries that need the card
 * with -EIO while identity queries keep working, and a rebind recovers the
 * card.  Other cards are not affected.
 *
 * Changes device state: the teardown clears the fault and binds every card
 * back, even when a test failed half way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"

#define EMU_TIMEOUT_MS 5000
#define STATE_TIMEOUT_MS 5000
#define NODE_TIMEOUT_MS 10000
#define FAULT_REASON "ksft-runtime-fault"

FIXTURE(fault)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	struct rbln_node target;
	char state_path[128];
	char fault_path[128];
	char klog[65536];
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

TEST_HARNESS_MAIN
