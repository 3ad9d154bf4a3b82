// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_unplug_test - unbinding a card removes its node, an open file keeps
 * working only as far as close and -ENODEV, and binding again gives a
 * working node.
 *
 * Changes device state: the teardown binds every card back, even when a
 * test failed half way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"

#define GONE_TIMEOUT_MS 5000
#define NODE_TIMEOUT_MS 10000

FIXTURE(unplug)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	struct rbln_node target;
	struct drm_rbln_info_device before;
};

FIXTURE_SETUP(unplug)
{
	int fd;

	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count || !rbln_require_root(_metadata))
		return;
	self->target = self->nodes[0];
	fd = rbln_open_minor(self->target.minor);
	ASSERT_LE(0, fd)
	TH_LOG("open accel%d: %s", self->target.minor, strerror(-fd));
	ASSERT_EQ(0, rbln_get_info(fd, RBLN_INFO_DEVICE, &self->before,
				   sizeof(self->before), NULL));
	close(fd);
}

/* Runs in the parent, so it also runs when the test's process died. */
FIXTURE_TEARDOWN_PARENT(unplug)
{
	char log[1024] = "";
	int failed = rbln_restore_bindings(log, sizeof(log));

	if (log[0])
		TH_LOG("teardown: %s", log);
	EXPECT_EQ(0, failed) TH_LOG("could not bind every card back");
}

/* GET_INFO(DEVICE) on @fd; returns 0 or -errno. */
static int query_device(int fd, struct drm_rbln_info_device *d)
{
	return rbln_get_info(fd, RBLN_INFO_DEVICE, d, sizeof(*d), NULL);
}

/* Unbinds the target and waits until its node is gone. */
static void unbind_target(struct __test_metadata *_metadata,
			  FIXTURE_DATA(unplug) * self)
{
	int err = rbln_unbind(self->target.bdf);

	ASSERT_EQ(0, err)
	TH_LOG("unbind %s: %s", self->target.bdf, strerror(-err));
	EXPECT_FALSE(rbln_is_bound(self->target.bdf));
	err = rbln_wait_node_gone(self->target.minor, GONE_TIMEOUT_MS);
	ASSERT_EQ(0, err)
	TH_LOG("accel%d still there after unbind", self->target.minor);
}

/* Binds the target, waits for its node and checks that it answers as before. */
static int bind_target(struct __test_metadata *_metadata,
		       FIXTURE_DATA(unplug) * self)
{
	struct drm_rbln_info_device d;
	int minor;
	int err = rbln_bind(self->target.bdf);
	int fd;

	EXPECT_EQ(0, err)
	TH_LOG("bind %s: %s", self->target.bdf, strerror(-err));
	if (err)
		return err;
	minor = rbln_wait_node(self->target.bdf, NODE_TIMEOUT_MS);
	EXPECT_LE(0, minor)
	TH_LOG("no accel node for %s after bind", self->target.bdf);
	if (minor < 0)
		return minor;
	fd = rbln_open_minor(minor);
	EXPECT_LE(0, fd) TH_LOG("open accel%d: %s", minor, strerror(-fd));
	if (fd < 0)
		return fd;
	memset(&d, 0, sizeof(d));
	err = query_device(fd, &d);
	EXPECT_EQ(0, err)
	TH_LOG("GET_INFO on the new node: %s", strerror(-err));
	/* the same card: the identity is unchanged */
	EXPECT_EQ(0, memcmp(&d, &self->before, sizeof(d)))
	TH_LOG("identity changed across rebind");
	close(fd);
	self->target.minor = minor;
	return err;
}

TEST_F_TIMEOUT(unplug, unbind_removes_node_and_open_fd_gets_enodev, 120)
{
	struct drm_rbln_info_telemetry t;
	struct drm_rbln_info_device d;
	struct drm_version v;
	char name[32];
	int fd = rbln_open_minor(self->target.minor);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, query_device(fd, &d));

	unbind_target(_metadata, self);

	EXPECT_EQ(-ENODEV, query_device(fd, &d));
	EXPECT_EQ(-ENODEV,
		  rbln_get_info(fd, RBLN_INFO_TELEMETRY, &t, sizeof(t), NULL));
	memset(&v, 0, sizeof(v));
	v.name = name;
	v.name_len = sizeof(name);
	errno = 0;
	EXPECT_EQ(-1, ioctl(fd, DRM_IOCTL_VERSION, &v));
	EXPECT_EQ(ENODEV, errno)
	TH_LOG("DRM_IOCTL_VERSION after unbind: %s", strerror(errno));
	EXPECT_EQ(0, close(fd))
	TH_LOG("close after unbind: %s", strerror(errno));

	ASSERT_EQ(0, bind_target(_metadata, self));
}

TEST_F_TIMEOUT(unplug, old_fd_stays_dead_after_rebind, 120)
{
	struct drm_rbln_info_device d;
	int fd = rbln_open_minor(self->target.minor);

	ASSERT_LE(0, fd);
	unbind_target(_metadata, self);
	ASSERT_EQ(0, bind_target(_metadata, self));
	/* the file belongs to the removed device, not to the new one */
	EXPECT_EQ(-ENODEV, query_device(fd, &d));
	EXPECT_EQ(0, close(fd));
}

TEST_F_TIMEOUT(unplug, repeated_unbind_bind_cycles_work, 300)
{
	for (int i = 0; i < 5; i++) {
		TH_LOG("cycle %d", i);
		unbind_target(_metadata, self);
		ASSERT_EQ(0, bind_target(_metadata, self));
	}
}

TEST_F_TIMEOUT(unplug, unbind_twice_and_bind_twice_are_refused, 120)
{
	int err;

	unbind_target(_metadata, self);
	err = rbln_unbind(self->target.bdf);
	EXPECT_EQ(-ENODEV, err) TH_LOG("second unbind: %s", strerror(-err));
	ASSERT_EQ(0, bind_target(_metadata, self));
	err = rbln_bind(self->target.bdf);
	EXPECT_EQ(-EBUSY, err) TH_LOG("second bind: %s", strerror(-err));
}

struct hammer {
	int fd;
	int stop; /* __atomic */
	long ok;
	long enodev;
	long other;
	int other_err;
};

static void *hammer_fn(void *arg)
{
	struct hammer *h = arg;

	while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
		struct drm_rbln_info_telemetry t;
		int err = rbln_get_info(h->fd, RBLN_INFO_TELEMETRY, &t,
					sizeof(t), NULL);

		if (err == 0) {
			h->ok++;
		} else if (err == -ENODEV) {
			h->enodev++;
		} else {
			h->other++;
			h->other_err = err;
		}
		if (h->enodev > 100)
			break;
	}
	return NULL;
}

TEST_F_TIMEOUT(unplug, unbind_during_queries_gives_only_success_or_enodev, 120)
{
	struct hammer h = { .fd = rbln_open_minor(self->target.minor) };
	pthread_t th;

	ASSERT_LE(0, h.fd);
	ASSERT_EQ(0, pthread_create(&th, NULL, hammer_fn, &h));
	rbln_sleep_ms(200);
	unbind_target(_metadata, self);
	rbln_sleep_ms(100);
	__atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	TH_LOG("queries: %ld ok, %ld ENODEV, %ld other", h.ok, h.enodev,
	       h.other);
	EXPECT_LT(0, h.ok);
	EXPECT_LT(0, h.enodev);
	EXPECT_EQ(0, h.other)
	TH_LOG("last other error: %s", strerror(-h.other_err));
	EXPECT_EQ(0, close(h.fd));
	ASSERT_EQ(0, bind_target(_metadata, self));
}

TEST_F_TIMEOUT(unplug, other_cards_keep_working_while_one_is_unbound, 120)
{
	int fds[RBLN_MAX_TEST_CARDS];

	if (self->count < 2)
		SKIP(return, "needs two cards, the VM has %d", self->count);
	for (int i = 1; i < self->count; i++) {
		fds[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, fds[i]);
	}
	unbind_target(_metadata, self);
	for (int i = 1; i < self->count; i++) {
		struct drm_rbln_info_telemetry t;
		struct drm_rbln_info_device d;

		EXPECT_EQ(0, query_device(fds[i], &d))
		TH_LOG("card %s", self->nodes[i].bdf);
		EXPECT_EQ(0, rbln_get_info(fds[i], RBLN_INFO_TELEMETRY, &t,
					   sizeof(t), NULL));
		EXPECT_LE(0, rbln_node_of_bdf(self->nodes[i].bdf));
	}
	ASSERT_EQ(0, bind_target(_metadata, self));
	for (int i = 1; i < self->count; i++) {
		struct drm_rbln_info_device d;

		EXPECT_EQ(0, query_device(fds[i], &d));
		close(fds[i]);
	}
}

TEST_HARNESS_MAIN
