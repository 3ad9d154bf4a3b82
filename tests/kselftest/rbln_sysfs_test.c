// SPDX-License-Identifier: GPL-2.0
/*
 * The sysfs and hwmon ABI of rbln says what GET_INFO says.
 *
 *   /sys/bus/pci/devices/<bdf>/rbln/            the card
 *   /sys/bus/pci/devices/<bdf>/rbln/chiplet<i>/ chiplet i < chiplet_count
 *   /sys/bus/pci/devices/<bdf>/hwmon/hwmon<n>/  name "rbln": temp1 "card",
 *                                               temp<2+i> "chiplet<i>", power1
 *
 * Every file is world-readable and read-only, so tools such as rbln-smi work
 * without access to the accel node; but rbln/reset, which is write-only for
 * root (rbln_fw_fault_test resets cards through it).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"

FIXTURE(sysfs)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int fd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
};

FIXTURE_SETUP(sysfs)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->fd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (!self->count)
		return;
	for (int i = 0; i < self->count; i++) {
		self->fd[i] = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, self->fd[i]);
		ASSERT_EQ(0, rbln_get_info(self->fd[i], RBLN_INFO_DEVICE,
					   &self->dev[i], sizeof(self->dev[i]),
					   NULL));
	}
}

FIXTURE_TEARDOWN(sysfs)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

/* Reads /sys/bus/pci/devices/<bdf>/<rel> into @buf; returns its length or -errno. */
static int read_dev(const char *bdf, const char *rel, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", bdf, rel);
	return rbln_read_file(path, buf, len);
}

static unsigned long long read_dev_u64(const char *bdf, const char *rel,
				       int *err)
{
	char buf[64];
	char *end = NULL;
	unsigned long long v;
	int n = read_dev(bdf, rel, buf, sizeof(buf));

	if (n <= 0) {
		*err = n < 0 ? n : -ENODATA;
		return 0;
	}
	v = strtoull(buf, &end, 10);
	*err = *end ? -EINVAL : 0;
	return v;
}

static long long read_hwmon(const char *dir, const char *file, int *err)
{
	char path[512];
	char buf[64];
	char *end = NULL;
	long long v;
	int n;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	n = rbln_read_file(path, buf, sizeof(buf));
	if (n <= 0) {
		*err = n < 0 ? n : -ENODATA;
		return 0;
	}
	v = strtoll(buf, &end, 10);
	*err = *end ? -EINVAL : 0;
	return v;
}

TEST_F(sysfs, card_attributes_match_get_info)
{
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];
		const char *bdf = self->nodes[i].bdf;
		unsigned long long total = 0;
		char buf[128];
		char want[128];
		int err;

		ASSERT_LT(0, read_dev(bdf, "rbln/family", buf, sizeof(buf)));
		EXPECT_STREQ(d->family == RBLN_FAMILY_REBEL100 ? "rebel100" :
								 "atom",
			     buf);
		EXPECT_EQ(d->chiplet_count,
			  read_dev_u64(bdf, "rbln/chiplet_count", &err));
		EXPECT_EQ(0, err);
		for (unsigned int c = 0; c < d->chiplet_count; c++)
			total += d->hbm_size[c];
		EXPECT_EQ(total,
			  read_dev_u64(bdf, "rbln/hbm_total_bytes", &err));
		EXPECT_EQ(0, err);
		ASSERT_LE(0,
			  read_dev(bdf, "rbln/fw_version", buf, sizeof(buf)));
		EXPECT_STREQ(d->fw_version, buf);
		ASSERT_LE(0, read_dev(bdf, "rbln/serial", buf, sizeof(buf)));
		EXPECT_STREQ(d->serial, buf);
		ASSERT_LT(0, read_dev(bdf, "rbln/fw_iface_version", buf,
				      sizeof(buf)));
		snprintf(want, sizeof(want), "%u.%u", d->fw_iface_major,
			 d->fw_iface_minor);
		EXPECT_STREQ(want, buf);
		ASSERT_LT(0, read_dev(bdf, "rbln/uuid", buf, sizeof(buf)));
		for (int b = 0, o = 0; b < 16; b++) {
			/* %pUb: the 16 bytes in order, dashes after 4, 6, 8, 10 */
			if (b == 4 || b == 6 || b == 8 || b == 10)
				want[o++] = '-';
			o += snprintf(want + o, sizeof(want) - o, "%02x",
				      d->uuid[b]);
		}
		EXPECT_STREQ(want, buf);
		ASSERT_LT(0, read_dev(bdf, "rbln/state", buf, sizeof(buf)));
		EXPECT_STREQ("ready", buf);
		/* no fault has happened since the probe */
		ASSERT_LE(0, read_dev(bdf, "rbln/fault", buf, sizeof(buf)));
		EXPECT_STREQ("", buf);
	}
}

TEST_F(sysfs, one_directory_per_chiplet)
{
	for (int i = 0; i < self->count; i++) {
		const struct drm_rbln_info_device *d = &self->dev[i];
		const char *bdf = self->nodes[i].bdf;
		char rel[64];
		char buf[64];
		int err;

		for (unsigned int c = 0; c < d->chiplet_count; c++) {
			snprintf(rel, sizeof(rel), "rbln/chiplet%u/index", c);
			EXPECT_EQ(c, read_dev_u64(bdf, rel, &err));
			EXPECT_EQ(0, err) TH_LOG("%s: %s", rel, strerror(-err));
			snprintf(rel, sizeof(rel),
				 "rbln/chiplet%u/hbm_total_bytes", c);
			EXPECT_EQ(d->hbm_size[c], read_dev_u64(bdf, rel, &err));
			EXPECT_EQ(0, err) TH_LOG("%s: %s", rel, strerror(-err));
		}
		snprintf(rel, sizeof(rel), "rbln/chiplet%u/index",
			 d->chiplet_count);
		EXPECT_EQ(-ENOENT, read_dev(bdf, rel, buf, sizeof(buf)))
		TH_LOG("%s exists", rel);
	}
}

/*
 * Every regular file under @dir (one level of subdirectories) is 0444, but
 * "reset", which is 0200.
 */
static int check_modes(struct __test_metadata *_metadata, const char *dir,
		       int depth)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int files = 0;

	EXPECT_NE(NULL, d) TH_LOG("%s: %s", dir, strerror(errno));
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		char path[512];
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth > 0) {
			files += check_modes(_metadata, path, depth - 1);
			continue;
		}
		if (!S_ISREG(st.st_mode) || !strcmp(de->d_name, "uevent"))
			continue;
		if (!strcmp(de->d_name, "reset")) {
			EXPECT_EQ(0200, st.st_mode & 0777)
			TH_LOG("%s has mode %o", path, st.st_mode & 0777);
			continue;
		}
		EXPECT_EQ(0444, st.st_mode & 0777)
		TH_LOG("%s has mode %o", path, st.st_mode & 0777);
		files++;
	}
	closedir(d);
	return files;
}

TEST_F(sysfs, files_are_world_readable_and_read_only)
{
	for (int i = 0; i < self->count; i++) {
		char dir[256];
		int n;

		snprintf(dir, sizeof(dir), "/sys/bus/pci/devices/%s/rbln",
			 self->nodes[i].bdf);
		n = check_modes(_metadata, dir, 1);
		EXPECT_LE(8 + 2 * (int)self->dev[i].chiplet_count, n);
		ASSERT_EQ(0, rbln_find_hwmon(self->nodes[i].bdf, dir,
					     sizeof(dir)));
		/* hwmon: the sensor files, not the subsystem's own entries */
		for (unsigned int c = 0; c <= self->dev[i].chiplet_count; c++) {
			char path[512];
			struct stat st;

			snprintf(path, sizeof(path), "%s/temp%u_input", dir,
				 c + 1);
			ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
			EXPECT_EQ(0444, st.st_mode & 0777) TH_LOG("%s", path);
		}
	}
}

TEST_F(sysfs, open_files_counts_the_open_files_of_the_node)
{
	for (int i = 0; i < self->count; i++) {
		const char *bdf = self->nodes[i].bdf;
		unsigned long long before, now;
		int err, fd, dup_fd;

		/* the fixture holds one */
		before = read_dev_u64(bdf, "rbln/open_files", &err);
		ASSERT_EQ(0, err);
		EXPECT_LE(1ULL, before);
		fd = rbln_open_minor(self->nodes[i].minor);
		ASSERT_LE(0, fd);
		now = read_dev_u64(bdf, "rbln/open_files", &err);
		EXPECT_EQ(before + 1, now);
		/* a dup() shares the open file: not counted again */
		dup_fd = dup(fd);
		ASSERT_LE(0, dup_fd);
		EXPECT_EQ(before + 1, read_dev_u64(bdf, "rbln/open_files", &err));
		close(fd);
		EXPECT_EQ(before + 1, read_dev_u64(bdf, "rbln/open_files", &err));
		close(dup_fd);
		EXPECT_EQ(before, read_dev_u64(bdf, "rbln/open_files", &err));
	}
}

TEST_F(sysfs, hwmon_has_card_and_chiplet_sensors)
{
	for (int i = 0; i < self->count; i++) {
		unsigned int count = self->dev[i].chiplet_count;
		char dir[256];
		char path[512];
		char buf[64];
		int err;

		ASSERT_EQ(0,
			  rbln_find_hwmon(self->nodes[i].bdf, dir, sizeof(dir)))
		TH_LOG("%s has no hwmon named rbln", self->nodes[i].bdf);
		snprintf(path, sizeof(path), "%s/temp1_label", dir);
		ASSERT_LT(0, rbln_read_file(path, buf, sizeof(buf)));
		EXPECT_STREQ("card", buf);
		for (unsigned int c = 0; c < count; c++) {
			char want[24];

			snprintf(path, sizeof(path), "%s/temp%u_label", dir,
				 c + 2);
			snprintf(want, sizeof(want), "chiplet%u", c);
			ASSERT_LT(0, rbln_read_file(path, buf, sizeof(buf)));
			EXPECT_STREQ(want, buf);
		}
		/* no sensor for a chiplet the card does not have */
		snprintf(path, sizeof(path), "%s/temp%u_input", dir, count + 2);
		EXPECT_NE(0, access(path, F_OK)) TH_LOG("%s exists", path);
		read_hwmon(dir, "power1_input", &err);
		EXPECT_EQ(0, err) TH_LOG("power1_input: %s", strerror(-err));
	}
}

TEST_F(sysfs, hwmon_agrees_with_telemetry)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_info_telemetry t;
		char dir[256];
		int err;

		ASSERT_EQ(0, rbln_find_hwmon(self->nodes[i].bdf, dir,
					     sizeof(dir)));
		ASSERT_EQ(0, rbln_get_info(self->fd[i], RBLN_INFO_TELEMETRY, &t,
					   sizeof(t), NULL));
		EXPECT_EQ(t.temp_mc, read_hwmon(dir, "temp1_input", &err));
		EXPECT_EQ(0, err);
		EXPECT_EQ((long long)t.power_uw,
			  read_hwmon(dir, "power1_input", &err));
		EXPECT_EQ(0, err);
		for (unsigned int c = 0; c < t.chiplet_count; c++) {
			char file[32];

			snprintf(file, sizeof(file), "temp%u_input", c + 2);
			EXPECT_EQ(t.chiplet[c].temp_mc,
				  read_hwmon(dir, file, &err))
			TH_LOG("%s", file);
			EXPECT_EQ(0, err);
		}
	}
}

TEST_HARNESS_MAIN
