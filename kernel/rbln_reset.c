// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: whole-card recovery and the devcoredump that records why.
 *
 * When the card goes to "fault" (its firmware crashed, or it stopped
 * answering admin requests) and the module parameter recovery is on, a
 * work item: takes a devcoredump of the control block and the rings, stops
 * every ring's scheduler, resets the card and does the boot handshake
 * again, binds every VM the card knew again, fails the jobs the card lost
 * with -EIO, sets the rings up again and restarts the schedulers.  Open
 * files, buffers and queues survive; new jobs run.  A card that faults
 * again while it is being recovered (in its reset, its handshake or while
 * it is set up) is reset again, up to RBLN_RECOVERY_ATTEMPTS times in a
 * row, 100 ms after the first failed attempt and 200 ms after the second;
 * a recovery whose attempts all fail leaves the card in "fault" until the
 * driver is rebound.  Each recovery is counted (sysfs card_resets) and
 * announced by the state uevents (fault -> resetting -> ready).  A
 * heartbeat watchdog faults a card whose firmware stopped running.
 *
 * A card that fell off the bus (surprise removal, a dead link) answers
 * every read with all-ones.  The watchdog sees it within its period (a
 * heartbeat of all-ones and a magic of all-ones), and so does a recovery
 * whose reset finds it; neither resets a card that is not there: the card
 * is unplugged as if it had been removed (rbln_unplug()).
 */
#include <linux/delay.h>
#include <linux/devcoredump.h>
#include <linux/io.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/gpu_scheduler.h>

#include "rbln_drv.h"
#include "rbln_reset.h"

#define RBLN_WATCHDOG_PERIOD_MS	500
#define RBLN_RECOVERY_ATTEMPTS	3
#define RBLN_RECOVERY_BACKOFF_MS	100	/* times the attempt that failed */

/* The control block, then the driver's view of each ring. */
static void rbln_devcoredump(struct rbln_device *rdev)
{
	size_t size = sizeof(struct rbln_fw_ctrl) + PAGE_SIZE;
	struct drm_printer p;
	struct drm_print_iterator it;
	char reason[RBLN_FAULT_REASON_LEN];
	char *buf;
	u32 code;

	buf = vzalloc(size);
	if (!buf)
		return;
	rbln_ctrl_copy(rdev, 0, buf, sizeof(struct rbln_fw_ctrl));
	it.data = buf + sizeof(struct rbln_fw_ctrl);
	it.start = 0;
	it.remain = PAGE_SIZE - 1;
	p = drm_coredump_printer(&it);
	code = rbln_get_fault(rdev, reason, sizeof(reason));
	drm_printf(&p, "rbln coredump: fault code %u (%s): %s\n",
		   code, rbln_fw_fault_name(code), reason);
	rbln_rings_dump(rdev, &p);
	dev_coredumpv(rdev->drm.dev, buf, size, GFP_KERNEL);
}

/*
 * The card is no longer on the bus: a PCIe read of a function that is gone
 * returns all-ones, and no control block has a magic of all-ones.
 */
bool rbln_card_gone(struct rbln_device *rdev)
{
	return rbln_ctrl_rd32(rdev, rbln_ctrl_off(magic)) == U32_MAX;
}

static void rbln_gone_work(struct work_struct *work)
{
	struct rbln_device *rdev = container_of(work, struct rbln_device,
						reset.gone_work);

	drm_err(&rdev->drm, "the card is gone (its control block reads all-ones): unplugging it; its jobs fail with -ENODEV\n");
	/* Admin requests waiting for the card give up now. */
	rbln_set_state(rdev, RBLN_STATE_OFFLINE);
	rbln_unplug(rdev);
}

/* The card was found gone: unplug it (once; from any context that may sleep). */
void rbln_reset_card_gone(struct rbln_device *rdev)
{
	if (!xchg(&rdev->reset.gone, true))
		schedule_work(&rdev->reset.gone_work);
}

/* One reset, handshake and set-up of a faulted card; 0 or -errno. */
static int rbln_recover_once(struct rbln_device *rdev)
{
	int ret;

	rbln_set_state(rdev, RBLN_STATE_RESETTING);
	ret = rbln_fw_restart(rdev);
	if (ret)
		return ret;
	rbln_vms_rebind(rdev);
	ret = rbln_rings_restart(rdev, -EIO);
	/* It may have faulted again after its last answer. */
	if (!ret && rbln_get_state(rdev) != RBLN_STATE_READY)
		ret = -EIO;
	return ret;
}

static void rbln_recover_work(struct work_struct *work)
{
	struct rbln_device *rdev = container_of(work, struct rbln_device,
						reset.recover_work);
	char reason[RBLN_FAULT_REASON_LEN];
	unsigned int attempt;
	int idx, ret;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	mutex_lock(&rdev->reset.lock);
	WRITE_ONCE(rdev->reset.recover_queued, false);
	/* Queued by a fault during a recovery that gave up since. */
	if (rbln_get_state(rdev) != RBLN_STATE_FAULT || rdev->reset.recover_failed)
		goto out;
	/* Nothing to reset: the card is gone. */
	if (rbln_card_gone(rdev)) {
		rbln_reset_card_gone(rdev);
		goto out;
	}

	rbln_devcoredump(rdev);
	rbln_get_fault(rdev, reason, sizeof(reason));
	drm_warn(&rdev->drm, "recovering the card from its fault (%s)\n", reason);
	rbln_rings_stop(rdev);

	for (attempt = 1;; attempt++) {
		ret = rbln_recover_once(rdev);
		if (!ret || attempt == RBLN_RECOVERY_ATTEMPTS)
			break;
		if (ret == -ENODEV && rbln_card_gone(rdev))
			break;
		drm_warn(&rdev->drm, "recovery attempt %u of %u failed (%d): resetting the card again in %u ms\n",
			 attempt, RBLN_RECOVERY_ATTEMPTS, ret,
			 attempt * RBLN_RECOVERY_BACKOFF_MS);
		/* Not into the same burst of crashes again. */
		msleep(attempt * RBLN_RECOVERY_BACKOFF_MS);
	}
	if (ret == -ENODEV && rbln_card_gone(rdev)) {
		/* Its jobs fail with -ENODEV there. */
		rbln_reset_card_gone(rdev);
	} else if (ret) {
		rdev->reset.recover_failed = true;
		rbln_rings_fail_pending(rdev, -EIO);
		rbln_set_fault(rdev, RBLN_FW_FAULT_INTERNAL, "recovery failed");
		drm_err(&rdev->drm, "card recovery failed %u times (%d): rebind the driver to retry\n",
			RBLN_RECOVERY_ATTEMPTS, ret);
	} else {
		rdev->reset.card_resets++;
		drm_info(&rdev->drm, "card recovered (recovery %llu)\n",
			 rdev->reset.card_resets);
	}
	rbln_rings_resume(rdev);
out:
	mutex_unlock(&rdev->reset.lock);
	drm_dev_exit(idx);
}

/*
 * The heartbeat watchdog: the firmware increments the control block's
 * heartbeat counter while it runs (about every 100 ms); a ready card whose
 * counter stands still for heartbeat_timeout_ms has hung, and is faulted
 * (which starts the recovery).
 */
static void rbln_watchdog_work(struct work_struct *work)
{
	struct rbln_device *rdev = container_of(to_delayed_work(work),
						struct rbln_device, reset.watchdog);
	unsigned long now = jiffies;
	u64 beat;
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	beat = rbln_ctrl_rd64(rdev, rbln_ctrl_off(heartbeat));
	if (beat == U64_MAX && rbln_card_gone(rdev)) {
		/* Not armed again: rbln_unplug() stops the watchdog. */
		rbln_reset_card_gone(rdev);
		drm_dev_exit(idx);
		return;
	}
	if (rbln_get_state(rdev) != RBLN_STATE_READY || beat != rdev->reset.wd_beat ||
	    !rbln_heartbeat_timeout_ms) {
		rdev->reset.wd_beat = beat;
		rdev->reset.wd_stamp = now;
	} else if (time_after(now, rdev->reset.wd_stamp +
			      msecs_to_jiffies(rbln_heartbeat_timeout_ms))) {
		rdev->reset.heartbeat_losses++;
		rbln_set_fault(rdev, RBLN_FW_FAULT_INTERNAL,
			       "firmware heartbeat stopped");
		rdev->reset.wd_stamp = now;
	}
	if (READ_ONCE(rbln_ring_poll))
		rbln_rings_poll(rdev);
	schedule_delayed_work(&rdev->reset.watchdog,
			      msecs_to_jiffies(RBLN_WATCHDOG_PERIOD_MS));
	drm_dev_exit(idx);
}

int rbln_reset_init(struct rbln_device *rdev)
{
	INIT_WORK(&rdev->reset.recover_work, rbln_recover_work);
	INIT_DELAYED_WORK(&rdev->reset.watchdog, rbln_watchdog_work);
	INIT_WORK(&rdev->reset.gone_work, rbln_gone_work);
	return drmm_mutex_init(&rdev->drm, &rdev->reset.lock);
}

/* After probe: the card is ready and announced. */
void rbln_watchdog_start(struct rbln_device *rdev)
{
	rdev->reset.wd_stamp = jiffies;
	rdev->reset.wd_beat = rbln_ctrl_rd64(rdev, rbln_ctrl_off(heartbeat));
	schedule_delayed_work(&rdev->reset.watchdog,
			      msecs_to_jiffies(RBLN_WATCHDOG_PERIOD_MS));
}

/* From rbln_set_fault(): the card just went to "fault". */
void rbln_reset_schedule(struct rbln_device *rdev)
{
	if (rbln_recovery && !rdev->reset.recover_failed) {
		WRITE_ONCE(rdev->reset.recover_queued, true);
		schedule_work(&rdev->reset.recover_work);
	}
}

/* reset.lock: see struct rbln_reset. */
void rbln_reset_lock(struct rbln_device *rdev)
{
	mutex_lock(&rdev->reset.lock);
}

void rbln_reset_unlock(struct rbln_device *rdev)
{
	mutex_unlock(&rdev->reset.lock);
}

/* A recovery is queued: a faulted card will be brought back. */
bool rbln_reset_pending(struct rbln_device *rdev)
{
	return READ_ONCE(rdev->reset.recover_queued);
}

/* sysfs card_resets */
u64 rbln_reset_card_resets(struct rbln_device *rdev)
{
	return READ_ONCE(rdev->reset.card_resets);
}

/* sysfs heartbeat_losses */
u64 rbln_reset_heartbeat_losses(struct rbln_device *rdev)
{
	return READ_ONCE(rdev->reset.heartbeat_losses);
}

/* Unplug: no watchdog or recovery runs after this (gone_work may). */
void rbln_reset_stop(struct rbln_device *rdev)
{
	cancel_delayed_work_sync(&rdev->reset.watchdog);
	cancel_work_sync(&rdev->reset.recover_work);
}

/* Remove, after rbln_unplug(): no work item of this file runs any more. */
void rbln_reset_fini(struct rbln_device *rdev)
{
	rbln_reset_stop(rdev);
	cancel_work_sync(&rdev->reset.gone_work);
}
