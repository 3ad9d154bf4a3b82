/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the rbln kselftests.
 *
 * The tests run inside the VM started by tools/vm/rbln-vm: every card is an
 * ivshmem-doorbell PCI function (1af4:1110) bound to rbln through
 * driver_override, and the control socket of the emulator that plays card N
 * is the virtio port /dev/virtio-ports/rbln-emu.N.  Card N is the N-th such
 * PCI function in PCI address order.
 *
 * All functions return 0 (or a count) on success and a negative errno on
 * failure; none of them prints, so the tests decide what a failure means.
 */
#ifndef RBLN_KSFT_UTIL_H
#define RBLN_KSFT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include <drm/rbln_accel.h>

#define RBLN_MAX_TEST_CARDS 16
#define RBLN_BDF_LEN 32

/* One rbln accel node. */
struct rbln_node {
	int minor; /* N of /dev/accel/accelN */
	char bdf[RBLN_BDF_LEN]; /* PCI address, e.g. 0000:00:04.0 */
	int card; /* index of the emulated card (port rbln-emu.<card>) */
};

/* True when running inside the rbln VM (RBLN_VM=1). */
bool rbln_in_vm(void);

/*
 * Fills @nodes with the accel nodes whose device is bound to driver rbln,
 * sorted by PCI address.  Returns the count (0 if none) or -errno.
 */
int rbln_find_nodes(struct rbln_node *nodes, int max);

/* Finds the accel node of PCI function @bdf; returns its minor or -ENOENT. */
int rbln_node_of_bdf(const char *bdf);

/* Waits up to @timeout_ms for the accel node of @bdf; returns its minor or -ETIMEDOUT. */
int rbln_wait_node(const char *bdf, int timeout_ms);

/* Waits up to @timeout_ms until accel minor @minor is gone from sysfs and /dev. */
int rbln_wait_node_gone(int minor, int timeout_ms);

/* Index of @bdf among the ivshmem (1af4:1110) PCI functions, or -ENOENT. */
int rbln_card_index(const char *bdf);

/* Opens /dev/accel/accel<minor> read-write; returns the fd or -errno. */
int rbln_open_minor(int minor);

/* DRM_IOCTL_RBLN_GET_INFO; on success @size_out gets the reported size. */
int rbln_get_info(int fd, __u32 type, void *buf, __u32 size, __u32 *size_out);

/* Writes @val to the sysfs (or other) file @path in one write(). */
int rbln_write_file(const char *path, const char *val);

/* Reads up to @len - 1 bytes of @path into @buf, NUL-terminated, trailing newline cut. */
int rbln_read_file(const char *path, char *buf, size_t len);

/* Unbinds @bdf from rbln. */
int rbln_unbind(const char *bdf);

/*
 * Binds @bdf to rbln; the probe's error comes back as -errno.  The probe
 * never sees injected allocation failures of this thread's make-it-fail
 * (see rbln_util.c).
 */
int rbln_bind(const char *bdf);

/* The hwmon directory of @bdf whose name is "rbln", into @dir. */
int rbln_find_hwmon(const char *bdf, char *dir, size_t len);

/* True when @bdf is currently bound to driver rbln. */
bool rbln_is_bound(const char *bdf);

/*
 * Puts every card back: each ivshmem function whose driver_override is
 * "rbln" but that is not bound gets "fault clear" sent to its emulator and
 * is bound again.  Returns how many could not be bound (0 = all fine); a
 * description of what was done is appended to @log.
 */
int rbln_restore_bindings(char *log, size_t len);

/*
 * Sends one command line (without newline) to the emulator of card @card and
 * reads one reply line into @reply (newline cut).  Returns 0 if the reply is
 * "ok" or starts with "ok ", -EPROTO for any other reply, -ETIMEDOUT if no
 * line came within @timeout_ms, or another -errno.
 */
int rbln_emu_cmd(int card, const char *cmd, char *reply, size_t reply_len,
		 int timeout_ms);

/*
 * Kernel log capture: rbln_kmsg_open() opens /dev/kmsg positioned at its
 * end; rbln_kmsg_read() appends the text of every record logged since then
 * (one line per record, without the prefix) to @buf.
 */
int rbln_kmsg_open(void);
int rbln_kmsg_read(int fd, char *buf, size_t len);

/* Counts the lines of @text that contain @a and @b and @c (NULL: not checked). */
int rbln_count_lines(const char *text, const char *a, const char *b,
		     const char *c);

/*
 * Kernel uevents: rbln_uevent_open() subscribes to the kernel's uevent
 * broadcast; rbln_uevent_wait() waits up to @timeout_ms for one whose text
 * (KEY=VALUE lines, NULs turned into newlines) contains @a, @b and @c
 * (NULL: not checked), and copies it into @buf.
 */
int rbln_uevent_open(void);
int rbln_uevent_wait(int fd, const char *a, const char *b, const char *c,
		     char *buf, size_t len, int timeout_ms);

/* Monotonic time in milliseconds. */
__s64 rbln_now_ms(void);

/* Sleeps @ms milliseconds. */
void rbln_sleep_ms(int ms);

/*
 * References to the rbln module (/sys/module/rbln/refcnt): every open file
 * of a card holds one, so a file that is never released shows here.
 */
int rbln_module_refs(__u64 *refs);

#endif /* RBLN_KSFT_UTIL_H */
