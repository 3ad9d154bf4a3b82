/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: the card's firmware through its control block (rbln_fw.c) -
 * identity check, boot handshake, reset, shutdown and restart.
 */
#ifndef RBLN_FW_H
#define RBLN_FW_H

#include <linux/types.h>

struct rbln_device;

/* The boot handshake's state; rbln_fw.c's own. */
struct rbln_fw {
	bool touched;		/* the card may hold our ring addresses */
	bool down;		/* shut down: the card is left in RESET */
	u32 host_gen;		/* this handshake's generation */
};

int rbln_fw_check_identity(struct rbln_device *rdev);
int rbln_fw_init(struct rbln_device *rdev);
void rbln_fw_fini(struct rbln_device *rdev);
int rbln_fw_restart(struct rbln_device *rdev);

const char *rbln_fw_fault_name(u32 code);
const char *rbln_fw_status_name(u16 status);
void rbln_fw_read_reason(struct rbln_device *rdev, char *buf, size_t len);

#endif /* RBLN_FW_H */
