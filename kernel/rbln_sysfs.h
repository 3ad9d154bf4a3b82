/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: sysfs, hwmon and the uevents (rbln_sysfs.c); the ABI is described
 * there and in kernel/README.md.
 */
#ifndef RBLN_SYSFS_H
#define RBLN_SYSFS_H

#include <linux/types.h>

#include "rbln_fw_ctrl.h"

struct device;
struct rbln_device;
struct rbln_sysfs_node;
enum rbln_state;

struct rbln_sysfs {
	/* Set once the directories exist; read by the state uevent. */
	struct rbln_sysfs_node *card;
	struct rbln_sysfs_node *chiplet[RBLN_FW_MAX_CHIPLETS];
	struct device *hwmon;
};

int rbln_sysfs_init(struct rbln_device *rdev);
void rbln_sysfs_fini(struct rbln_device *rdev);
void rbln_sysfs_state_changed(struct rbln_device *rdev, enum rbln_state state,
			      u32 fault_code);
void rbln_sysfs_ring_reset(struct rbln_device *rdev, u32 ring);

#endif /* RBLN_SYSFS_H */
