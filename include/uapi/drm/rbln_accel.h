/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln_accel.h - user-space interface of the rbln DRM accel driver.
 *
 * One PCI function (one card) is one /dev/accel/accelN node.  The chiplets
 * of a Rebel100-class card are fields of this interface, not nodes.
 *
 * Rules that hold for every ioctl here:
 *  - all fields are fixed-width; structs are padded explicitly;
 *  - every flags/pad/reserved field must be zero, else -EINVAL;
 *  - new ioctls and new query types are only appended; existing layouts
 *    never change, they only grow at the end (the size field says how
 *    much the caller knows about);
 *  - after the device is unplugged (unbind, rmmod, surprise removal)
 *    every ioctl on an open file returns -ENODEV.
 */
#ifndef _UAPI_RBLN_ACCEL_H_
#define _UAPI_RBLN_ACCEL_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define RBLN_MAX_CHIPLETS	8

/* Card families, as in drm_rbln_info_device.family. */
#define RBLN_FAMILY_REBEL100	1	/* 4 chiplets with their own HBM */
#define RBLN_FAMILY_ATOM	2	/* 1 NPU, 1 memory region */

/* Query types for DRM_IOCTL_RBLN_GET_INFO. */
#define RBLN_INFO_DEVICE	1	/* struct drm_rbln_info_device */
#define RBLN_INFO_TELEMETRY	2	/* struct drm_rbln_info_telemetry */

/**
 * struct drm_rbln_get_info - an extensible query
 * @type: one of RBLN_INFO_*; anything else is -EINVAL.
 * @size: in: bytes available at @ptr; out: the full size of the answer.
 *	The kernel writes min(in, full) bytes and nothing past them, so a
 *	caller can pass 0 to learn the size, and an old caller with a
 *	shorter struct gets the prefix it knows.
 * @ptr: user pointer to the answer buffer; may be 0 only if @size is 0.
 * @flags: must be 0.
 * @pad: must be 0.
 *
 * Returns 0, or -EINVAL (bad type/flags/pad), -EFAULT (bad @ptr),
 * -EIO (the card did not answer a query that needs it), -ENODEV.
 */
struct drm_rbln_get_info {
	__u32 type;
	__u32 size;
	__u64 ptr;
	__u32 flags;
	__u32 pad;
};

/**
 * struct drm_rbln_info_device - identity of the card (RBLN_INFO_DEVICE)
 * @family: RBLN_FAMILY_*.
 * @chiplet_count: chiplets on the card (Rebel100: 4, ATOM: 1).
 * @fw_iface_major: firmware-iface major version the card speaks.
 * @fw_iface_minor: firmware-iface minor version.
 * @pci_domain: PCI domain of the function.
 * @pci_bus: PCI bus number.
 * @pci_dev: PCI device (slot) number.
 * @pci_func: PCI function number.
 * @pad0: zero.
 * @numa_node: NUMA node of the PCI function, -1 if none.
 * @pad1: zero.
 * @hbm_size: bytes of HBM per chiplet; entries past @chiplet_count are 0.
 * @fw_version: firmware version, NUL-terminated.
 * @serial: serial number, NUL-terminated.
 * @uuid: card UUID.
 */
struct drm_rbln_info_device {
	__u32 family;
	__u32 chiplet_count;
	__u32 fw_iface_major;
	__u32 fw_iface_minor;
	__u32 pci_domain;
	__u8 pci_bus;
	__u8 pci_dev;
	__u8 pci_func;
	__u8 pad0;
	__s32 numa_node;
	__u32 pad1;
	__u64 hbm_size[RBLN_MAX_CHIPLETS];
	char fw_version[32];
	char serial[32];
	__u8 uuid[16];
};

/**
 * struct drm_rbln_chiplet_telemetry - per-chiplet figures
 * @temp_mc: temperature in milli-degrees Celsius.
 * @clock_mhz: core clock in MHz.
 * @mem_clock_mhz: HBM clock in MHz.
 * @pad: zero.
 * @busy_ns: cumulative busy time in nanoseconds.
 */
struct drm_rbln_chiplet_telemetry {
	__s32 temp_mc;
	__u32 clock_mhz;
	__u32 mem_clock_mhz;
	__u32 pad;
	__u64 busy_ns;
};

/**
 * struct drm_rbln_info_telemetry - card telemetry (RBLN_INFO_TELEMETRY)
 * @timestamp_ns: card time at which the figures were sampled.
 * @temp_mc: card temperature (hottest sensor), milli-degrees Celsius.
 * @chiplet_count: valid entries of @chiplet.
 * @power_uw: card power in microwatts.
 * @chiplet: per-chiplet figures.
 *
 * Sampled from the card at the time of the call (an admin round trip).
 */
struct drm_rbln_info_telemetry {
	__u64 timestamp_ns;
	__s32 temp_mc;
	__u32 chiplet_count;
	__u64 power_uw;
	struct drm_rbln_chiplet_telemetry chiplet[RBLN_MAX_CHIPLETS];
};

#define DRM_RBLN_GET_INFO	0x00

#define DRM_IOCTL_RBLN_GET_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_GET_INFO, struct drm_rbln_get_info)

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_RBLN_ACCEL_H_ */
