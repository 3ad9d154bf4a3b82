/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: the event ring (rbln_event.c, firmware-iface rbln_fw_admin.md):
 * faults, state changes, MMU faults and notices the card posts.
 */
#ifndef RBLN_EVENT_H
#define RBLN_EVENT_H

#include <linux/mutex.h>
#include <linux/types.h>

#include "rbln_admin.h"

struct rbln_device;
struct seq_file;

struct rbln_events {
	/*
	 * Protects everything below and the card's event_head: one
	 * consumer at a time (the IRQ thread, the probe, a restart).
	 */
	struct mutex lock;
	struct rbln_rec_ring ring;	/* entries 0: not consumed */
	bool seq_valid;
	u32 last_seq;
	u64 count;
	u64 lost;
};

int rbln_events_init(struct rbln_device *rdev);
int rbln_events_alloc(struct rbln_device *rdev);
dma_addr_t rbln_events_ring_dma(struct rbln_device *rdev);
void rbln_events_enable(struct rbln_device *rdev);
void rbln_events_disable(struct rbln_device *rdev);
void rbln_events_rewind(struct rbln_device *rdev);
void rbln_events_process(struct rbln_device *rdev);
void rbln_events_show(struct rbln_device *rdev, struct seq_file *m);

#endif /* RBLN_EVENT_H */
