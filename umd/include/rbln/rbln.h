/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln.h - C ABI of librbln.
 *
 * Every entry point returns an rbln_status; on failure a thread-local
 * message (what failed, why, what to do) is available from
 * rbln_last_error_message().  No C++ exception crosses this interface.
 * Structs carry their size in their first field: the caller sets it to
 * sizeof() of the struct it was compiled with, the library writes no more
 * than that, so old callers keep working when a struct grows.
 */
#ifndef RBLN_RBLN_H
#define RBLN_RBLN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values match rbln::Errc. */
typedef enum rbln_status {
    RBLN_OK = 0,
    RBLN_ERR_INVALID_ARGUMENT = 1,
    RBLN_ERR_DRIVER_NOT_LOADED = 2,
    RBLN_ERR_NO_DEVICE = 3,
    RBLN_ERR_PERMISSION_DENIED = 4,
    RBLN_ERR_NOT_FOUND = 5,
    RBLN_ERR_BAD_VALUE = 6,
    RBLN_ERR_WRONG_DRIVER = 7,
    RBLN_ERR_IO = 8,
    RBLN_ERR_DEVICE_GONE = 9,
    RBLN_ERR_BAD_CONTROL_BLOCK = 10,
    RBLN_ERR_INTERNAL = 11,
    RBLN_ERR_BAD_CONFIG = 12,    /* an RBLN_* variable is malformed; the message names it */
    RBLN_ERR_BAD_FORK = 13,      /* fork() child of a process that used a device */
    RBLN_ERR_OUT_OF_MEMORY = 14, /* kernel/device memory or device VA exhausted */
    RBLN_ERR_TIMEOUT = 15,       /* a deadline passed */
} rbln_status;

#define RBLN_DEVICE_FAMILY_UNKNOWN 0
#define RBLN_DEVICE_FAMILY_REBEL100 1
#define RBLN_DEVICE_FAMILY_ATOM 2

#define RBLN_DEVICE_MAX_CHIPLETS 8

/* rbln_device_info.flags */
#define RBLN_DEVICE_HAS_TEMPERATURE (1u << 0)      /* temperature_mc is valid */
#define RBLN_DEVICE_HAS_POWER (1u << 1)            /* power_uw is valid */
#define RBLN_DEVICE_SUSPENDED (1u << 2)            /* runtime-suspended; not woken */
#define RBLN_DEVICE_IDENTITY_FROM_KERNEL (1u << 3) /* GET_INFO answered */

struct rbln_device_info {
    uint32_t struct_size; /* in: sizeof(struct rbln_device_info) */
    uint32_t index;       /* physical NPU id */
    uint32_t accel_minor; /* N of /dev/accel/accelN */
    int32_t numa_node;    /* -1 if none */
    uint32_t family;      /* RBLN_DEVICE_FAMILY_* */
    uint32_t chiplet_count;
    uint32_t fw_iface_major;
    uint32_t fw_iface_minor;
    uint32_t flags; /* RBLN_DEVICE_* */
    uint32_t pad;
    uint64_t hbm_total_bytes;
    uint64_t chiplet_hbm_bytes[RBLN_DEVICE_MAX_CHIPLETS];
    int64_t temperature_mc;
    uint64_t power_uw;
    char accel_node[64];
    char pci_bdf[16];
    char family_name[16];
    char fw_version[32];
    char serial[32];
    char state[32];
};

/* librbln version, "major.minor.patch". */
const char* rbln_version(void);

/* Short name of a status, e.g. "permission-denied". */
const char* rbln_status_name(rbln_status status);

/* Message of the last failure on this thread ("" if none). */
const char* rbln_last_error_message(void);

/* Number of rbln cards (0 is not an error). */
rbln_status rbln_device_count(int* count);

/* Facts about card @index (0 .. count-1); info->struct_size must be set. */
rbln_status rbln_device_get_info(int index, struct rbln_device_info* info);

/* Version of the loaded kernel driver, NUL-terminated into buf. */
rbln_status rbln_driver_version(char* buf, size_t len);

/*
 * Logical devices (see rbln/devices.hpp for the variables RBLN_VISIBLE_DEVICES,
 * RBLN_DEVICES (deprecated), RBLN_NPUS_PER_DEVICE and RBLN_DEVICE_MAP).
 * Queries plan the mapping from the current variables and claim nothing;
 * rbln_commit() (and every later real use: allocation, synchronize,
 * submission) fixes it for the life of the process.
 */

/* Number of logical devices; never fails for a valid pointer: 0 when the
 * driver is absent, nothing is visible or the variables are malformed (a
 * warning on stderr says which). */
rbln_status rbln_logical_device_count(int* count);

/* 1 if at least one logical device is usable, else 0; never fails. */
int rbln_is_available(void);

/* Visible physical NPUs regardless of grouping; RBLN_ERR_BAD_CONFIG (the
 * message names the variable) if the variables are malformed. */
rbln_status rbln_physical_device_count(int* count);

/* The NPU ids (indices into the visible list) of logical device @index:
 * up to @capacity into @npus, their number into *@count. */
rbln_status rbln_logical_device_npus(int index, uint32_t* npus, size_t capacity, size_t* count);

/* Fixes the mapping (the first real use does it implicitly).
 * RBLN_ERR_BAD_CONFIG, RBLN_ERR_BAD_FORK, or a discovery error. */
rbln_status rbln_commit(void);

/* The calling thread's current logical device (0 until set). */
rbln_status rbln_get_device(int* index);

/* Makes @index the calling thread's current device.  Bookkeeping only:
 * checks @index against the plan, does not commit. */
rbln_status rbln_set_device(int index);

/* Parses "rbln:N", "N" or "rbln" (the current device: *index = -1). */
rbln_status rbln_parse_device(const char* text, int* index);

/* RBLN_ERR_BAD_FORK if this process is a fork() child of a process that
 * had used a device (such a child cannot use it: start workers with the
 * spawn start method); RBLN_OK otherwise. */
rbln_status rbln_check_fork(void);

/*
 * Debug/test only: use @root instead of "/" for sysfs and /dev (a fake tree).
 * NULL restores "/".  Affects every thread, and starts the device state
 * (mapping, commit, current devices) afresh.
 */
rbln_status rbln_set_root(const char* root);

#ifdef __cplusplus
}
#endif

#endif /* RBLN_RBLN_H */
