// SPDX-License-Identifier: GPL-2.0
/*
 * A card that does not finish the boot handshake is refused with a clear
 * log line, leaves nothing behind, and binds fine once the fault is gone; a
 * card left in FAULT is reset at probe and its fault is reported.
 *
 * The faults are injected through the emulator's control port
 * (/dev/virtio-ports/rbln-emu.<card>).  The driver's handshake timeout is
 * the module parameter boot_timeout_ms; it is lowered for the test when the
 * parameter is writable and restored afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"

#define BOOT_TIMEOUT_PARAM "/sys/module/rbln/parameters/boot_timeout_ms"
#define TEST_BOOT_TIMEOUT_MS 1000
#define NODE_TIMEOUT_MS 10000
#define EMU_TIMEOUT_MS 5000

/*
 * What the probe returns, pinned from the driver (kernel/rbln_fw.c): a card
 * that answers neither the handshake nor the reset is -ETIMEDOUT.
 */
#define NO_RESPONSE_ERRNO ETIMEDOUT

#define FAULT_REASON "ksft-injected-fault"

FIXTURE(probe)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	struct rbln_node target;
	struct drm_rbln_info_device before;
	char orig_timeout[32];
	int timeout_ms;
	bool timeout_changed;
	char klog[65536];
};

FIXTURE_SETUP(probe)
{
	char reply[128];
	int fd;
	int err;

	self->timeout_changed = false;
	self->orig_timeout[0] = '\0';
	self->klog[0] = '\0';
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count || !rbln_require_root(_metadata))
		return;
	self->target = self->nodes[0];
	ASSERT_LE(0, self->target.card)
	TH_LOG("%s is not an emulated card", self->target.bdf);
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, rbln_get_info(fd, RBLN_INFO_DEVICE, &self->before,
				   sizeof(self->before), NULL));
	close(fd);

	/* the control port must work before a fault test means anything */
	err = rbln_emu_cmd(self->target.card, "fault clear", reply,
			   sizeof(reply), EMU_TIMEOUT_MS);
	ASSERT_EQ(0, err)
	TH_LOG("emulator port rbln-emu.%d: %s, reply '%s'", self->target.card,
	       strerror(-err), reply);

	self->timeout_ms = 5000;
	if (rbln_read_file(BOOT_TIMEOUT_PARAM, self->orig_timeout,
			   sizeof(self->orig_timeout)) > 0)
		self->timeout_ms = atoi(self->orig_timeout);
	else
		TH_LOG("%s not readable, assuming 5000 ms", BOOT_TIMEOUT_PARAM);
}

FIXTURE_TEARDOWN_PARENT(probe)
{
	char reply[128];
	char log[1024] = "";
	int failed;

	if (self->target.card >= 0) {
		EXPECT_EQ(0, rbln_emu_cmd(self->target.card, "fault clear",
					  reply, sizeof(reply), EMU_TIMEOUT_MS))
		TH_LOG("fault clear: reply '%s'", reply);
	}
	if (self->timeout_changed) {
		EXPECT_EQ(0, rbln_write_file(BOOT_TIMEOUT_PARAM,
					     self->orig_timeout))
		TH_LOG("restoring boot_timeout_ms=%s", self->orig_timeout);
	}
	failed = rbln_restore_bindings(log, sizeof(log));
	if (log[0])
		TH_LOG("teardown: %s", log);
	EXPECT_EQ(0, failed) TH_LOG("could not bind every card back");
}

static void lower_timeout(struct __test_metadata *_metadata,
			  FIXTURE_DATA(probe) * self)
{
	char val[16];
	int err;

	(void)_metadata;
	snprintf(val, sizeof(val), "%d", TEST_BOOT_TIMEOUT_MS);
	err = rbln_write_file(BOOT_TIMEOUT_PARAM, val);
	if (err) {
		TH_LOG("boot_timeout_ms not writable (%s), living with %d ms",
		       strerror(-err), self->timeout_ms);
		return;
	}
	self->timeout_changed = true;
	self->timeout_ms = TEST_BOOT_TIMEOUT_MS;
}

static void unbind_target(struct __test_metadata *_metadata,
			  FIXTURE_DATA(probe) * self)
{
	int err = rbln_unbind(self->target.bdf);

	ASSERT_EQ(0, err)
	TH_LOG("unbind %s: %s", self->target.bdf, strerror(-err));
	ASSERT_EQ(0, rbln_wait_node_gone(self->target.minor, 5000));
}

static void emu(struct __test_metadata *_metadata, FIXTURE_DATA(probe) * self,
		const char *cmd)
{
	char reply[128];
	int err = rbln_emu_cmd(self->target.card, cmd, reply, sizeof(reply),
			       EMU_TIMEOUT_MS);

	ASSERT_EQ(0, err)
	TH_LOG("emulator '%s': %s, reply '%s'", cmd, strerror(-err), reply);
}

/* The probe failed: no driver, no node, nothing half-bound. */
static void expect_nothing_left(struct __test_metadata *_metadata,
				FIXTURE_DATA(probe) * self)
{
	EXPECT_FALSE(rbln_is_bound(self->target.bdf))
	TH_LOG("bound after a failed probe");
	EXPECT_EQ(-ENOENT, rbln_node_of_bdf(self->target.bdf))
	TH_LOG("accel node after failed probe");
}

/* Binds after the fault is cleared; the card must come back as it was. */
static void expect_recovery(struct __test_metadata *_metadata,
			    FIXTURE_DATA(probe) * self)
{
	struct drm_rbln_info_device d;
	int minor;
	int fd;
	int err;

	emu(_metadata, self, "fault clear");
	err = rbln_bind(self->target.bdf);
	ASSERT_EQ(0, err) TH_LOG("bind after fault clear: %s", strerror(-err));
	minor = rbln_wait_node(self->target.bdf, NODE_TIMEOUT_MS);
	ASSERT_LE(0, minor) TH_LOG("no accel node after recovery");
	fd = rbln_open_minor(minor);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, rbln_get_info(fd, RBLN_INFO_DEVICE, &d, sizeof(d), NULL));
	EXPECT_EQ(0, memcmp(&d, &self->before, sizeof(d)))
	TH_LOG("identity changed");
	close(fd);
	self->target.minor = minor;
}

/* Lines of the captured log that name the target device and one of @any. */
static int count_dev_lines(FIXTURE_DATA(probe) * self, const char *const *any)
{
	int n = 0;

	for (const char *const *a = any; *a; a++)
		n += rbln_count_lines(self->klog, self->target.bdf, *a, NULL);
	return n;
}

/* Binds with the kernel log captured into self->klog; returns -errno. */
static int bind_logged(struct __test_metadata *_metadata,
		       FIXTURE_DATA(probe) * self, __s64 *elapsed_ms)
{
	__s64 t0;
	int kfd = rbln_kmsg_open();
	int err;

	ASSERT_LE(0, kfd) TH_LOG("/dev/kmsg: %s", strerror(-kfd));
	t0 = rbln_now_ms();
	err = rbln_bind(self->target.bdf);
	if (elapsed_ms)
		*elapsed_ms = rbln_now_ms() - t0;
	rbln_sleep_ms(100);
	self->klog[0] = '\0';
	EXPECT_EQ(0, rbln_kmsg_read(kfd, self->klog, sizeof(self->klog)));
	close(kfd);
	TH_LOG("bind %s: %s; kernel log:\n%s", self->target.bdf,
	       err ? strerror(-err) : "ok", self->klog);
	return err;
}

static const char *const timeout_words[] = { "did not answer", "timed out",
					     "timeout", NULL };

TEST_F_TIMEOUT(probe, no_response_fails_probe_with_one_timeout_line, 180)
{
	__s64 elapsed;
	int err;

	unbind_target(_metadata, self);
	lower_timeout(_metadata, self);
	emu(_metadata, self, "fault no-response");

	err = bind_logged(_metadata, self, &elapsed);
	EXPECT_EQ(-NO_RESPONSE_ERRNO, err);
	/* it waited for the handshake, and not forever */
	EXPECT_LE(self->timeout_ms - 50, elapsed);
	EXPECT_GE(3 * self->timeout_ms + 15000, elapsed);
	expect_nothing_left(_metadata, self);
	/* the timeout is said once, not once per poll or per retry */
	EXPECT_EQ(1, count_dev_lines(self, timeout_words))
	TH_LOG("want one line about the handshake timeout");
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      "boot handshake", NULL))
	TH_LOG("the line names the boot handshake");

	expect_recovery(_metadata, self);
}

/*
 * A card left in FAULT by an earlier driver instance is reset at probe
 * (firmware-iface handshake step 1): the probe succeeds and the log names
 * the fault it found.
 */
TEST_F_TIMEOUT(probe, fault_left_from_before_is_reported_and_reset, 180)
{
	char state[32];
	char path[128];
	int err;

	unbind_target(_metadata, self);
	emu(_metadata, self, "fault fw-fault code=3 reason=" FAULT_REASON);

	err = bind_logged(_metadata, self, NULL);
	ASSERT_EQ(0, err);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      FAULT_REASON, "code 3"))
	TH_LOG("want one line with the fault's code and reason");
	ASSERT_LE(0, rbln_wait_node(self->target.bdf, NODE_TIMEOUT_MS));
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/rbln/state",
		 self->target.bdf);
	EXPECT_LT(0, rbln_read_file(path, state, sizeof(state)));
	EXPECT_STREQ("ready", state);
	/* unbind again so that expect_recovery() binds a clean card */
	unbind_target(_metadata, self);
	expect_recovery(_metadata, self);
}

/*
 * A card in FAULT that does not answer the reset either: the probe fails,
 * and the log says what the card reported before it went silent.
 */
TEST_F_TIMEOUT(probe, silent_faulted_card_fails_probe_with_the_reason, 180)
{
	__s64 elapsed;
	int err;

	unbind_target(_metadata, self);
	lower_timeout(_metadata, self);
	emu(_metadata, self, "fault fw-fault code=3 reason=" FAULT_REASON);
	emu(_metadata, self, "fault no-response");

	err = bind_logged(_metadata, self, &elapsed);
	EXPECT_EQ(-NO_RESPONSE_ERRNO, err);
	/* it gave the reset the whole timeout, FAULT is not an answer */
	EXPECT_LE(self->timeout_ms - 50, elapsed);
	EXPECT_GE(3 * self->timeout_ms + 15000, elapsed);
	expect_nothing_left(_metadata, self);
	EXPECT_EQ(1, rbln_count_lines(self->klog, self->target.bdf,
				      FAULT_REASON, "code 3"))
	TH_LOG("want one line with the fault's code and reason");
	EXPECT_LE(1, count_dev_lines(self, timeout_words))
	TH_LOG("want a line saying the card did not answer");

	/* "fault clear" lifts no-response only: the card is still in FAULT */
	expect_recovery(_metadata, self);
}

TEST_F_TIMEOUT(probe, two_failed_probes_then_a_clean_one, 240)
{
	int err;

	/* failed probes in a row must not leave state that breaks the next */
	unbind_target(_metadata, self);
	lower_timeout(_metadata, self);
	emu(_metadata, self, "fault no-response");
	err = rbln_bind(self->target.bdf);
	EXPECT_EQ(-NO_RESPONSE_ERRNO, err);
	expect_nothing_left(_metadata, self);
	emu(_metadata, self, "fault fw-fault code=3 reason=" FAULT_REASON);
	err = rbln_bind(self->target.bdf);
	EXPECT_EQ(-NO_RESPONSE_ERRNO, err);
	expect_nothing_left(_metadata, self);
	expect_recovery(_metadata, self);
}

TEST_HARNESS_MAIN
