// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the rbln kselftests (see rbln_util.h).
 */
#define _GNU_SOURCE
#include "rbln_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ACCEL_CLASS "/sys/class/accel"
#define PCI_DEVICES "/sys/bus/pci/devices"
#define RBLN_DRIVER_DIR "/sys/bus/pci/drivers/rbln"
#define EMU_PORT_FMT "/dev/virtio-ports/rbln-emu.%d"

bool rbln_in_vm(void)
{
	const char *v = getenv("RBLN_VM");

	return v && strcmp(v, "1") == 0;
}

__s64 rbln_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__s64)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rbln_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Basename of the target of symlink @path into @out. */
static int link_basename(const char *path, char *out, size_t len)
{
	char target[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	const char *base;

	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (snprintf(out, len, "%s", base) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static int accel_minor_of(const char *name)
{
	char *end = NULL;
	long v;

	if (strncmp(name, "accel", 5) != 0 || !name[5])
		return -1;
	v = strtol(name + 5, &end, 10);
	if (*end || v < 0 || v > INT_MAX)
		return -1;
	return (int)v;
}

static int cmp_node(const void *a, const void *b)
{
	const struct rbln_node *x = a;
	const struct rbln_node *y = b;

	return strcmp(x->bdf, y->bdf);
}

int rbln_find_nodes(struct rbln_node *nodes, int max)
{
	DIR *dir = opendir(ACCEL_CLASS);
	struct dirent *de;
	int count = 0;

	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(dir)) != NULL) {
		char path[PATH_MAX];
		char drv[64];
		struct rbln_node n;
		int minor = accel_minor_of(de->d_name);

		if (minor < 0)
			continue;
		snprintf(path, sizeof(path), ACCEL_CLASS "/%s/device/driver",
			 de->d_name);
		if (link_basename(path, drv, sizeof(drv)) ||
		    strcmp(drv, "rbln") != 0)
			continue;
		snprintf(path, sizeof(path), ACCEL_CLASS "/%s/device",
			 de->d_name);
		if (link_basename(path, n.bdf, sizeof(n.bdf)))
			continue;
		n.minor = minor;
		n.card = rbln_card_index(n.bdf);
		if (count < max)
			nodes[count] = n;
		count++;
	}
	closedir(dir);
	if (count > max)
		return -E2BIG;
	qsort(nodes, (size_t)count, sizeof(*nodes), cmp_node);
	return count;
}

int rbln_node_of_bdf(const char *bdf)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int n = rbln_find_nodes(nodes, RBLN_MAX_TEST_CARDS);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		if (strcmp(nodes[i].bdf, bdf) == 0)
			return nodes[i].minor;
	return -ENOENT;
}

int rbln_wait_node(const char *bdf, int timeout_ms)
{
	__s64 deadline = rbln_now_ms() + timeout_ms;

	for (;;) {
		int minor = rbln_node_of_bdf(bdf);
		char dev[64];

		if (minor >= 0) {
			snprintf(dev, sizeof(dev), "/dev/accel/accel%d", minor);
			if (access(dev, F_OK) == 0)
				return minor;
		}
		if (rbln_now_ms() >= deadline)
			return -ETIMEDOUT;
		rbln_sleep_ms(20);
	}
}

int rbln_wait_node_gone(int minor, int timeout_ms)
{
	__s64 deadline = rbln_now_ms() + timeout_ms;
	char sys[64];
	char dev[64];

	snprintf(sys, sizeof(sys), ACCEL_CLASS "/accel%d", minor);
	snprintf(dev, sizeof(dev), "/dev/accel/accel%d", minor);
	for (;;) {
		if (access(sys, F_OK) != 0 && access(dev, F_OK) != 0)
			return 0;
		if (rbln_now_ms() >= deadline)
			return -ETIMEDOUT;
		rbln_sleep_ms(20);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int rbln_card_index(const char *bdf)
{
	char names[64][RBLN_BDF_LEN];
	DIR *dir = opendir(PCI_DEVICES);
	struct dirent *de;
	int count = 0;

	if (!dir)
		return -errno;
	while ((de = readdir(dir)) != NULL && count < 64) {
		char path[PATH_MAX];
		char vendor[16];
		char device[16];

		if (de->d_name[0] == '.' || strlen(de->d_name) >= RBLN_BDF_LEN)
			continue;
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/vendor",
			 de->d_name);
		if (rbln_read_file(path, vendor, sizeof(vendor)) < 0)
			continue;
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/device",
			 de->d_name);
		if (rbln_read_file(path, device, sizeof(device)) < 0)
			continue;
		if (strcmp(vendor, "0x1af4") != 0 ||
		    strcmp(device, "0x1110") != 0)
			continue;
		snprintf(names[count++], RBLN_BDF_LEN, "%s", de->d_name);
	}
	closedir(dir);
	qsort(names, (size_t)count, sizeof(names[0]), cmp_str);
	for (int i = 0; i < count; i++)
		if (strcmp(names[i], bdf) == 0)
			return i;
	return -ENOENT;
}

int rbln_open_minor(int minor)
{
	char dev[64];
	int fd;

	snprintf(dev, sizeof(dev), "/dev/accel/accel%d", minor);
	fd = open(dev, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int rbln_get_info(int fd, __u32 type, void *buf, __u32 size, __u32 *size_out)
{
	struct drm_rbln_get_info q = {
		.type = type,
		.size = size,
		.ptr = (__u64)(uintptr_t)buf,
	};

	if (ioctl(fd, DRM_IOCTL_RBLN_GET_INFO, &q) != 0)
		return -errno;
	if (size_out)
		*size_out = q.size;
	return 0;
}

int rbln_write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(val);
	ssize_t n;
	int err = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0)
		err = -errno;
	else if ((size_t)n != len)
		err = -EIO;
	close(fd);
	return err;
}

int rbln_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (len == 0)
		return -EINVAL;
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return (int)n;
}

int rbln_unbind(const char *bdf)
{
	return rbln_write_file(RBLN_DRIVER_DIR "/unbind", bdf);
}

/*
 * The probe runs in the task that writes the bind attribute.  Under
 * tests/runner/failslab.sh that task has make-it-fail set, and one failed
 * allocation in 6.12's drm_sysfs_minor_alloc() makes the DRM core's
 * drm_minor_alloc_release() put an ERR_PTR (a general protection fault,
 * kernel/README.md).  So the bind is made with make-it-fail cleared for this
 * thread and set back after it: probe's unwinding under failed allocations
 * is failslab's probe loop's, which skips that one site.
 */
int rbln_bind(const char *bdf)
{
	static const char mif[] = "/proc/thread-self/make-it-fail";
	char was[16] = "";
	bool failing = rbln_read_file(mif, was, sizeof(was)) > 0 &&
		       strcmp(was, "0") != 0 && rbln_write_file(mif, "0") == 0;
	int ret = rbln_write_file(RBLN_DRIVER_DIR "/bind", bdf);

	if (failing)
		rbln_write_file(mif, was);
	return ret;
}

bool rbln_is_bound(const char *bdf)
{
	char path[PATH_MAX];
	char drv[64];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/driver", bdf);
	return link_basename(path, drv, sizeof(drv)) == 0 &&
	       strcmp(drv, "rbln") == 0;
}

int rbln_emu_cmd(int card, const char *cmd, char *reply, size_t reply_len,
		 int timeout_ms)
{
	char port[64];
	char line[256];
	char junk[256];
	size_t have = 0;
	__s64 deadline = rbln_now_ms() + timeout_ms;
	int fd;
	int err = -ETIMEDOUT;

	if (reply_len)
		reply[0] = '\0';
	if (card < 0)
		return -ENOENT;
	snprintf(port, sizeof(port), EMU_PORT_FMT, card);
	fd = open(port, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;

	/* Drop whatever an earlier user left unread. */
	while (read(fd, junk, sizeof(junk)) > 0)
		;

	snprintf(line, sizeof(line), "%s\n", cmd);
	for (size_t off = 0, len = strlen(line); off < len;) {
		ssize_t n = write(fd, line + off, len - off);

		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			err = -errno;
			goto out;
		}
		if (n > 0)
			off += (size_t)n;
		else if (rbln_now_ms() >= deadline)
			goto out;
		else
			rbln_sleep_ms(5);
	}

	while (rbln_now_ms() < deadline) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)(deadline - rbln_now_ms());
		ssize_t n;
		char *nl;

		if (left <= 0)
			break;
		if (poll(&pfd, 1, left) <= 0)
			continue;
		n = read(fd, line + have, sizeof(line) - 1 - have);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			err = -errno;
			goto out;
		}
		if (n == 0) {
			/* host side not connected (yet); do not spin */
			rbln_sleep_ms(10);
			continue;
		}
		have += (size_t)n;
		line[have] = '\0';
		nl = strchr(line, '\n');
		if (!nl && have < sizeof(line) - 1)
			continue;
		if (nl)
			*nl = '\0';
		if (nl && nl > line && nl[-1] == '\r')
			nl[-1] = '\0';
		if (reply_len)
			snprintf(reply, reply_len, "%s", line);
		err = (strcmp(line, "ok") == 0 ||
		       strncmp(line, "ok ", 3) == 0) ?
			      0 :
			      -EPROTO;
		goto out;
	}
out:
	close(fd);
	return err;
}

int rbln_kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (lseek(fd, 0, SEEK_END) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int rbln_kmsg_read(int fd, char *buf, size_t len)
{
	size_t used = strnlen(buf, len);
	char rec[8192];

	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		char *msg;
		char *end;
		size_t mlen;

		if (n < 0) {
			if (errno == EPIPE || errno == EINTR)
				continue; /* records were overwritten; go on */
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		if (n == 0)
			return 0;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		end = strchr(msg, '\n');
		mlen = end ? (size_t)(end - msg) : strlen(msg);
		if (used + mlen + 2 > len)
			return -ENOSPC;
		memcpy(buf + used, msg, mlen);
		used += mlen;
		buf[used++] = '\n';
		buf[used] = '\0';
	}
}

static bool line_has(const char *line, const char *needle)
{
	return !needle || strstr(line, needle);
}

int rbln_count_lines(const char *text, const char *a, const char *b,
		     const char *c)
{
	int count = 0;

	while (text && *text) {
		const char *end = strchr(text, '\n');
		size_t len = end ? (size_t)(end - text) : strlen(text);
		char line[1024];

		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, text, len);
		line[len] = '\0';
		if (line_has(line, a) && line_has(line, b) && line_has(line, c))
			count++;
		text = end ? end + 1 : NULL;
	}
	return count;
}

int rbln_restore_bindings(char *log, size_t len)
{
	DIR *dir = opendir(PCI_DEVICES);
	struct dirent *de;
	int failed = 0;

	if (!dir)
		return 1;
	while ((de = readdir(dir)) != NULL) {
		char path[PATH_MAX];
		char over[64];
		char reply[128];
		size_t used = log ? strnlen(log, len) : 0;
		int card;
		int err;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= RBLN_BDF_LEN)
			continue;
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/driver_override",
			 de->d_name);
		if (rbln_read_file(path, over, sizeof(over)) < 0 ||
		    strcmp(over, "rbln") != 0)
			continue;
		if (rbln_is_bound(de->d_name))
			continue;
		card = rbln_card_index(de->d_name);
		if (card >= 0)
			rbln_emu_cmd(card, "fault clear", reply, sizeof(reply),
				     5000);
		err = rbln_bind(de->d_name);
		if (err)
			failed++;
		if (log && used < len)
			snprintf(log + used, len - used,
				 "rebound %s (card %d): %s; ", de->d_name, card,
				 err ? strerror(-err) : "ok");
	}
	closedir(dir);
	return failed;
}

int rbln_uevent_open(void)
{
	struct sockaddr_nl addr = {
		.nl_family = AF_NETLINK,
		.nl_groups = 1, /* the kernel's own broadcast, not udev's */
	};
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_KOBJECT_UEVENT);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int rbln_uevent_wait(int fd, const char *a, const char *b, const char *c,
		     char *buf, size_t len, int timeout_ms)
{
	__s64 deadline = rbln_now_ms() + timeout_ms;
	char msg[8192];

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)(deadline - rbln_now_ms());
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left) <= 0)
			continue;
		n = recv(fd, msg, sizeof(msg) - 1, 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR ||
			    errno == ENOBUFS)
				continue;
			return -errno;
		}
		for (ssize_t i = 0; i < n; i++)
			if (msg[i] == '\0')
				msg[i] = '\n';
		msg[n] = '\0';
		if (line_has(msg, a) && line_has(msg, b) && line_has(msg, c)) {
			if (len)
				snprintf(buf, len, "%s", msg);
			return 0;
		}
	}
}

/* The hwmon directory named "rbln" of @bdf, into @dir. */
int rbln_find_hwmon(const char *bdf, char *dir, size_t len)
{
	char path[256];
	struct dirent *de;
	DIR *d;
	int ret = -ENOENT;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/hwmon", bdf);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		char name[64];
		char p[600];

		if (strncmp(de->d_name, "hwmon", 5) != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s/name", path, de->d_name);
		if (rbln_read_file(p, name, sizeof(name)) > 0 &&
		    strcmp(name, "rbln") == 0) {
			snprintf(dir, len, "%s/%s", path, de->d_name);
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

int rbln_module_refs(__u64 *refs)
{
	char buf[32];
	char *end = NULL;
	int n = rbln_read_file("/sys/module/rbln/refcnt", buf, sizeof(buf));

	if (n < 0)
		return n;
	*refs = strtoull(buf, &end, 10);
	return end == buf || *end ? -EPROTO : 0;
}
