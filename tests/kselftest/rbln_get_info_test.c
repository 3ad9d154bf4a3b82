// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_get_info_test - DRM_IOCTL_RBLN_GET_INFO answers what the card is.
 *
 * RBLN_INFO_DEVICE must describe the card the emulator was started with
 * (RBLN_VM_FAMILY, RBLN_VM_HBM, RBLN_VM_CARDS from the VM runner) and the
 * PCI function it sits on; RBLN_INFO_TELEMETRY must return plausible
 * figures that follow the emulator's control interface.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"

static int parse_bdf(const char *bdf, unsigned int *dom, unsigned int *bus,
		     unsigned int *dev, unsigned int *fn)
{
	char tail;

	if (sscanf(bdf, "%x:%x:%x.%x%c", dom, bus, dev, fn, &tail) != 4)
		return -EINVAL;
	return 0;
}

FIXTURE(info)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
};

FIXTURE_SETUP(info)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->fd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count)
		return;
	for (int i = 0; i < self->count; i++) {
		__u32 size = 0;
		int err;

		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i])
		TH_LOG("open accel%d: %s", self->nodes[i].minor,
		       strerror(-self->fd[i]));
		memset(&self->dev[i], 0, sizeof(self->dev[i]));
		err = rbln_get_info(self->fd[i], RBLN_INFO_DEVICE,
				    &self->dev[i], sizeof(self->dev[i]), &size);
		ASSERT_EQ(0, err)
		TH_LOG("GET_INFO(DEVICE) on accel%d: %s", self->nodes[i].minor,
		       strerror(-err));
		ASSERT_EQ(sizeof(self->dev[i]), size);
	}
}

FIXTURE_TEARDOWN(info)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

TEST_F(info, card_count_matches_vm_env)
{
	int want = rbln_env_cards();

	if (want < 0)
		SKIP(return, "RBLN_VM_CARDS not set");
	EXPECT_EQ(want, self->count);
}

TEST_F(info, drm_version_name_is_rbln)
{
	for (int i = 0; i < self->count; i++) {
		char name[64] = { 0 };
		struct drm_version v = { .name = name,
					 .name_len = sizeof(name) - 1 };

		ASSERT_EQ(0, ioctl(self->fd[i], DRM_IOCTL_VERSION, &v))
		TH_LOG("%s", strerror(errno));
		EXPECT_STREQ("rbln", name);
	}
}

TEST_F(info, device_family_and_chiplets_match_vm_env)
{
	unsigned int family = rbln_env_family();

	if (!family && rbln_in_vm()) {
		ASSERT_TRUE(0)
		TH_LOG("RBLN_VM_FAMILY unset or unknown: %s",
		       getenv("RBLN_VM_FAMILY"));
	}
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];

		TH_LOG("accel%d (%s): family %u, %u chiplets, fw %.32s, serial %.32s",
		       self->nodes[i].minor, self->nodes[i].bdf, d->family,
		       d->chiplet_count, d->fw_version, d->serial);
		ASSERT_TRUE(d->family == RBLN_FAMILY_REBEL100 ||
			    d->family == RBLN_FAMILY_ATOM)
		TH_LOG("unknown family %u", d->family);
		EXPECT_TRUE(!family || family == d->family)
		TH_LOG("family %u, RBLN_VM_FAMILY says %u", d->family, family);
		/* Rebel100: an RSD-4 group of 4 chiplets; ATOM: one NPU */
		EXPECT_EQ(d->family == RBLN_FAMILY_REBEL100 ? 4 : 1,
			  d->chiplet_count);
	}
}

TEST_F(info, device_hbm_per_chiplet_matches_vm_env)
{
	unsigned long long hbm = rbln_env_hbm();

	if (!hbm && rbln_in_vm()) {
		ASSERT_TRUE(0)
		TH_LOG("RBLN_VM_HBM unset or bad: %s", getenv("RBLN_VM_HBM"));
	}
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];

		ASSERT_LE(d->chiplet_count, RBLN_MAX_CHIPLETS);
		for (unsigned int c = 0; c < d->chiplet_count; c++) {
			EXPECT_NE(0, d->hbm_size[c])
			TH_LOG("chiplet %u has no HBM", c);
			if (hbm) {
				EXPECT_EQ(hbm, d->hbm_size[c])
				TH_LOG("chiplet %u", c);
			}
		}
	}
}

TEST_F(info, device_hbm_entries_past_chiplet_count_are_zero)
{
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];

		for (unsigned int c = d->chiplet_count; c < RBLN_MAX_CHIPLETS;
		     c++) {
			EXPECT_EQ(0, d->hbm_size[c]) TH_LOG("hbm_size[%u]", c);
		}
	}
}

TEST_F(info, device_fw_iface_is_v1)
{
	for (int i = 0; i < self->count; i++) {
		EXPECT_EQ(1, self->dev[i].fw_iface_major);
		/* any minor of v1 is acceptable: minors only append */
	}
}

TEST_F(info, device_pci_address_matches_sysfs)
{
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];
		unsigned int dom, bus, dev, fn;
		char path[128];
		char numa[16];
		int want_numa = -1;

		ASSERT_EQ(0,
			  parse_bdf(self->nodes[i].bdf, &dom, &bus, &dev, &fn))
		TH_LOG("bad BDF %s", self->nodes[i].bdf);
		EXPECT_EQ(dom, d->pci_domain);
		EXPECT_EQ(bus, d->pci_bus);
		EXPECT_EQ(dev, d->pci_dev);
		EXPECT_EQ(fn, d->pci_func);
		snprintf(path, sizeof(path),
			 "/sys/bus/pci/devices/%s/numa_node",
			 self->nodes[i].bdf);
		if (rbln_read_file(path, numa, sizeof(numa)) > 0)
			want_numa = atoi(numa);
		EXPECT_EQ(want_numa, d->numa_node);
	}
}

TEST_F(info, device_pads_are_zero)
{
	for (int i = 0; i < self->count; i++) {
		EXPECT_EQ(0, self->dev[i].pad0);
		EXPECT_EQ(0, self->dev[i].pad1);
	}
}

TEST_F(info, device_strings_terminated_and_uuid_set)
{
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];
		size_t fw = strnlen(d->fw_version, sizeof(d->fw_version));
		size_t sn = strnlen(d->serial, sizeof(d->serial));

		EXPECT_LT(fw, sizeof(d->fw_version))
		TH_LOG("fw_version not NUL-terminated");
		EXPECT_LT(sn, sizeof(d->serial))
		TH_LOG("serial not NUL-terminated");
		EXPECT_LT(0, fw) TH_LOG("empty fw_version");
		EXPECT_LT(0, sn) TH_LOG("empty serial");
		EXPECT_FALSE(rbln_all_bytes(d->uuid, sizeof(d->uuid), 0))
		TH_LOG("uuid is all zero");
		for (int j = 0; j < i; j++) {
			EXPECT_NE(0, memcmp(d->uuid, self->dev[j].uuid,
					    sizeof(d->uuid)))
			TH_LOG("cards %d and %d share a uuid", j, i);
			EXPECT_STRNE(self->dev[j].serial, d->serial);
		}
	}
}

TEST_F(info, device_answer_is_stable)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_device again;
		__u32 size = 0;

		memset(&again, 0xa5, sizeof(again));
		ASSERT_EQ(0, rbln_get_info(self->fd[i], RBLN_INFO_DEVICE,
					   &again, sizeof(again), &size));
		EXPECT_EQ(sizeof(again), size);
		EXPECT_EQ(0, memcmp(&again, &self->dev[i], sizeof(again)));
	}
}

TEST_F(info, larger_buffer_gets_full_size_and_nothing_past_it)
{
	struct {
		struct drm_rbln_info_device d;
		unsigned char tail[64];
	} buf;
	struct {
		struct drm_rbln_info_telemetry t;
		unsigned char tail[64];
	} tbuf;
	__u32 size = 0;

	memset(&buf, 0x5a, sizeof(buf));
	ASSERT_EQ(0, rbln_get_info(self->fd[0], RBLN_INFO_DEVICE, &buf,
				   sizeof(buf), &size));
	EXPECT_EQ(sizeof(buf.d), size);
	EXPECT_EQ(0, memcmp(&buf.d, &self->dev[0], sizeof(buf.d)));
	EXPECT_TRUE(rbln_all_bytes(buf.tail, sizeof(buf.tail), 0x5a))
	TH_LOG("wrote past the answer");

	memset(&tbuf, 0x5a, sizeof(tbuf));
	ASSERT_EQ(0, rbln_get_info(self->fd[0], RBLN_INFO_TELEMETRY, &tbuf,
				   sizeof(tbuf), &size));
	EXPECT_EQ(sizeof(tbuf.t), size);
	EXPECT_TRUE(rbln_all_bytes(tbuf.tail, sizeof(tbuf.tail), 0x5a))
	TH_LOG("wrote past the answer");
}

/* The value of @key in /proc/self/fdinfo/@fd, into @val. */
static int fdinfo_value(int fd, const char *key, char *val, size_t len)
{
	char path[64];
	char text[4096];
	const char *p;
	size_t klen = strlen(key);
	int n;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	n = rbln_read_file(path, text, sizeof(text));
	if (n < 0)
		return n;
	for (p = text; p && *p;
	     p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			const char *v = p + klen + 1;
			size_t vlen;

			v += strspn(v, " \t");
			vlen = strcspn(v, "\n");
			snprintf(val, len, "%.*s", (int)vlen, v);
			return 0;
		}
	}
	return -ENOENT;
}

TEST_F(info, fdinfo_names_driver_device_and_client)
{
	for (int i = 0; i < self->count; i++) {
		char a[64], b[64];
		int fd2;

		ASSERT_EQ(0, fdinfo_value(self->fd[i], "drm-driver", a,
					  sizeof(a)));
		EXPECT_STREQ("rbln", a);
		ASSERT_EQ(0,
			  fdinfo_value(self->fd[i], "drm-pdev", a, sizeof(a)));
		EXPECT_STREQ(self->nodes[i].bdf, a);
		/* every open file is its own client */
		fd2 = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, fd2);
		ASSERT_EQ(0, fdinfo_value(self->fd[i], "drm-client-id", a,
					  sizeof(a)));
		ASSERT_EQ(0, fdinfo_value(fd2, "drm-client-id", b, sizeof(b)));
		EXPECT_STRNE(a, b);
		close(fd2);
	}
}

/* Plausible figures for a card in a lab: 0..110 degrees C. */
#define TEMP_MIN_MC 0
#define TEMP_MAX_MC 110000

TEST_F(info, telemetry_values_plausible)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_telemetry t;
		__u32 size = 0;
		__s32 hottest = INT32_MIN;

		memset(&t, 0xa5, sizeof(t));
		ASSERT_EQ(0, rbln_get_info(self->fd[i], RBLN_INFO_TELEMETRY, &t,
					   sizeof(t), &size));
		EXPECT_EQ(sizeof(t), size);
		TH_LOG("accel%d: ts %llu ns, %d mC, %llu uW, %u chiplets",
		       self->nodes[i].minor, (unsigned long long)t.timestamp_ns,
		       t.temp_mc, (unsigned long long)t.power_uw,
		       t.chiplet_count);
		EXPECT_NE(0, t.timestamp_ns);
		EXPECT_LT(TEMP_MIN_MC, t.temp_mc);
		EXPECT_GE(TEMP_MAX_MC, t.temp_mc);
		EXPECT_LT(0, t.power_uw);
		EXPECT_GT(2000000000ULL, t.power_uw) TH_LOG("more than 2 kW");
		ASSERT_EQ(self->dev[i].chiplet_count, t.chiplet_count);
		for (unsigned int c = 0; c < t.chiplet_count; c++) {
			const struct drm_rbln_chiplet_telemetry *ct =
				&t.chiplet[c];

			EXPECT_LT(TEMP_MIN_MC, ct->temp_mc)
			TH_LOG("chiplet %u", c);
			EXPECT_GE(TEMP_MAX_MC, ct->temp_mc)
			TH_LOG("chiplet %u", c);
			EXPECT_LT(0, ct->clock_mhz) TH_LOG("chiplet %u", c);
			EXPECT_GT(100000, ct->clock_mhz)
			TH_LOG("chiplet %u", c);
			EXPECT_LT(0, ct->mem_clock_mhz) TH_LOG("chiplet %u", c);
			EXPECT_GT(100000, ct->mem_clock_mhz)
			TH_LOG("chiplet %u", c);
			EXPECT_EQ(0, ct->pad) TH_LOG("chiplet %u", c);
			if (ct->temp_mc > hottest)
				hottest = ct->temp_mc;
		}
		/* the card figure is the hottest sensor, so no chiplet is hotter */
		EXPECT_GE(t.temp_mc, hottest);
		for (unsigned int c = t.chiplet_count; c < RBLN_MAX_CHIPLETS;
		     c++) {
			EXPECT_TRUE(rbln_all_bytes(&t.chiplet[c],
						   sizeof(t.chiplet[c]), 0))
			TH_LOG("chiplet entry %u past chiplet_count is not zero",
			       c);
		}
	}
}

TEST_F(info, telemetry_timestamp_and_busy_time_never_go_back)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_telemetry a, b;

		ASSERT_EQ(0, rbln_get_info(self->fd[i], RBLN_INFO_TELEMETRY, &a,
					   sizeof(a), NULL));
		rbln_sleep_ms(20);
		ASSERT_EQ(0, rbln_get_info(self->fd[i], RBLN_INFO_TELEMETRY, &b,
					   sizeof(b), NULL));
		EXPECT_LT(a.timestamp_ns, b.timestamp_ns)
		TH_LOG("card time did not advance");
		for (unsigned int c = 0;
		     c < a.chiplet_count && c < RBLN_MAX_CHIPLETS; c++) {
			EXPECT_LE(a.chiplet[c].busy_ns, b.chiplet[c].busy_ns)
			TH_LOG("chiplet %u", c);
		}
	}
}

/* Telemetry is sampled from the card: it must follow the emulator's setting. */
FIXTURE(emu_temp)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd;
	int card;
	__s32 orig_mc;
	int changed;
};

FIXTURE_SETUP(emu_temp)
{
	struct drm_rbln_info_telemetry t;

	self->fd = -1;
	self->changed = 0;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count || !rbln_require_root(_metadata))
		return;
	self->card = self->nodes[0].card;
	ASSERT_LE(0, self->card)
	TH_LOG("%s is not an emulated card", self->nodes[0].bdf);
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_TELEMETRY, &t, sizeof(t),
				   NULL));
	self->orig_mc = t.temp_mc;
}

FIXTURE_TEARDOWN(emu_temp)
{
	if (self->changed) {
		char cmd[64];
		char reply[128];
		int err;

		snprintf(cmd, sizeof(cmd), "set temp_mc=%d", self->orig_mc);
		err = rbln_emu_cmd(self->card, cmd, reply, sizeof(reply), 5000);
		EXPECT_EQ(0, err)
		TH_LOG("restoring the temperature: %s (%s)", strerror(-err),
		       reply);
	}
	if (self->fd >= 0)
		close(self->fd);
}

static void set_temp(struct __test_metadata *_metadata,
		     FIXTURE_DATA(emu_temp) * self, int mc)
{
	char cmd[64];
	char reply[128];
	int err;

	snprintf(cmd, sizeof(cmd), "set temp_mc=%d", mc);
	err = rbln_emu_cmd(self->card, cmd, reply, sizeof(reply), 5000);
	ASSERT_EQ(0, err)
	TH_LOG("emulator port rbln-emu.%d, '%s': %s, reply '%s'", self->card,
	       cmd, strerror(-err), reply);
	self->changed = 1;
}

TEST_F(emu_temp, telemetry_follows_emulator_temperature)
{
	struct drm_rbln_info_telemetry t;
	int want = self->orig_mc == 61000 ? 62000 : 61000;

	set_temp(_metadata, self, want);
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_TELEMETRY, &t, sizeof(t),
				   NULL));
	EXPECT_EQ(want, t.temp_mc);

	want = want == 61000 ? 47500 : 61000;
	set_temp(_metadata, self, want);
	ASSERT_EQ(0, rbln_get_info(self->fd, RBLN_INFO_TELEMETRY, &t, sizeof(t),
				   NULL));
	EXPECT_EQ(want, t.temp_mc);
}

TEST_F(emu_temp, emulator_rejects_unknown_command)
{
	char reply[128];
	int err = rbln_emu_cmd(self->card, "no-such-command", reply,
			       sizeof(reply), 5000);

	/* a clear error line, not "ok" and not silence */
	EXPECT_EQ(-EPROTO, err) TH_LOG("%s, reply '%s'", strerror(-err), reply);
	EXPECT_LT(0, strlen(reply));
}

TEST_F(emu_temp, hwmon_follows_emulator_temperature)
{
	int want = self->orig_mc == 61000 ? 62000 : 61000;
	char dir[256];
	char path[512];
	char buf[32];

	ASSERT_EQ(0, rbln_find_hwmon(self->nodes[0].bdf, dir, sizeof(dir)));
	snprintf(path, sizeof(path), "%s/temp1_input", dir);
	set_temp(_metadata, self, want);
	/* hwmon may answer from a cache of at most 100 ms */
	rbln_sleep_ms(250);
	ASSERT_LT(0, rbln_read_file(path, buf, sizeof(buf)));
	EXPECT_EQ(want, atoi(buf));
}

TEST_HARNESS_MAIN
