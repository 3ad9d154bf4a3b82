/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: whole-card recovery and the heartbeat watchdog (rbln_reset.c).
 */
#ifndef RBLN_RESET_H
#define RBLN_RESET_H

#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/workqueue.h>

struct rbln_device;

struct rbln_reset {
	/*
	 * Protects the card's and the rings' set-up against each other: a
	 * ring reset, a card recovery, and the VM changes a recovery must
	 * not interleave with (VM_UNBIND at file close, VM_ABORT at
	 * release).  Taken through rbln_reset_lock().
	 */
	struct mutex lock;
	struct work_struct recover_work;
	bool recover_failed;		/* under lock; read by schedule */
	bool recover_queued;		/* a recovery will run */
	u64 card_resets;		/* under lock */
	/* The watchdog's own (one work item at a time): */
	struct delayed_work watchdog;
	unsigned long wd_stamp;		/* jiffies the heartbeat last moved */
	u64 wd_beat;
	u64 heartbeat_losses;
	/*
	 * The card fell off the bus (its control block reads all-ones):
	 * gone_work unplugs it (rbln_unplug()).  gone is set once, by
	 * whoever saw it first (xchg).
	 */
	struct work_struct gone_work;
	bool gone;
};

int rbln_reset_init(struct rbln_device *rdev);
void rbln_reset_stop(struct rbln_device *rdev);
void rbln_reset_fini(struct rbln_device *rdev);
bool rbln_card_gone(struct rbln_device *rdev);
void rbln_reset_card_gone(struct rbln_device *rdev);
void rbln_reset_schedule(struct rbln_device *rdev);
void rbln_watchdog_start(struct rbln_device *rdev);
void rbln_reset_lock(struct rbln_device *rdev);
void rbln_reset_unlock(struct rbln_device *rdev);
bool rbln_reset_pending(struct rbln_device *rdev);
u64 rbln_reset_card_resets(struct rbln_device *rdev);
u64 rbln_reset_heartbeat_losses(struct rbln_device *rdev);

#endif /* RBLN_RESET_H */
