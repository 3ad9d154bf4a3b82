// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: the event ring (firmware-iface rbln_fw_admin.md).  The card posts
 * faults, state changes, MMU faults and notices; the event IRQ thread
 * consumes them, and so do the probe and a restart once the card has
 * taken the ring (events posted before MSI-X was live raised no
 * interrupt).  While the ring is disabled (entries 0) nothing consumes it.
 */
#include <linux/sched.h>
#include <linux/seq_file.h>

#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_event.h"
#include "rbln_fw.h"

static void rbln_events_handle(struct rbln_device *rdev,
			       const struct rbln_fw_event *ev)
{
	char reason[64];

	if (rdev->events.seq_valid && ev->seq != rdev->events.last_seq + 1) {
		u32 lost = ev->seq - rdev->events.last_seq - 1;

		rdev->events.lost += lost;
		dev_warn_ratelimited(rdev->drm.dev, "%u event(s) lost (event ring full)\n",
				     lost);
	}
	rdev->events.seq_valid = true;
	rdev->events.last_seq = ev->seq;
	rdev->events.count++;

	switch (ev->type) {
	case RBLN_FW_EV_FAULT:
		rbln_fw_read_reason(rdev, reason, sizeof(reason));
		rbln_set_fault(rdev, ev->code, reason);
		break;
	case RBLN_FW_EV_STATE:
		if (ev->data[0] == RBLN_FW_STATE_READY)
			break;
		if (ev->data[0] == RBLN_FW_STATE_FAULT) {
			rbln_fw_read_reason(rdev, reason, sizeof(reason));
			rbln_set_fault(rdev,
				       rbln_ctrl_rd32(rdev, rbln_ctrl_off(fault_code)),
				       reason);
			break;
		}
		snprintf(reason, sizeof(reason),
			 "firmware left READY unasked (state %llu)", ev->data[0]);
		rbln_set_fault(rdev, RBLN_FW_FAULT_INTERNAL, reason);
		break;
	case RBLN_FW_EV_THERMAL:
		dev_warn_ratelimited(rdev->drm.dev,
				     "temperature %lld m°C crossed the warning threshold\n",
				     (s64)ev->data[0]);
		break;
	case RBLN_FW_EV_HEARTBEAT:
		/* The watchdog reads the control block's counter instead. */
		break;
	case RBLN_FW_EV_CHIPLET_RESET:
		drm_info(&rdev->drm, "chiplet %u was reset\n", ev->chiplet);
		break;
	case RBLN_FW_EV_MMU_FAULT:
		rbln_vm_mmu_fault(rdev, (u32)ev->data[0], ev->data[1],
				  (u32)ev->data[2], ev->code);
		break;
	case RBLN_FW_EV_BAD_REQUEST:
		drm_err_ratelimited(&rdev->drm,
				    "card rejected admin request seq %llu (opcode %llu): status %u (%s)\n",
				    ev->data[0], ev->data[1], ev->code,
				    rbln_fw_status_name(ev->code));
		break;
	default:
		drm_dbg_driver(&rdev->drm, "ignoring event type %u\n", ev->type);
		break;
	}
}

/* Event IRQ thread (and once after the handshake): consume all new events. */
void rbln_events_process(struct rbln_device *rdev)
{
	struct rbln_events *events = &rdev->events;
	struct rbln_fw_event ev;
	unsigned int n = 0;

	mutex_lock(&events->lock);
	while (rbln_rec_ring_peek(&events->ring, &ev)) {
		rbln_ctrl_wr32(rdev, rbln_ctrl_off(event_head), events->ring.idx);
		rbln_events_handle(rdev, &ev);
		if (!(++n % 64))
			cond_resched();
	}
	mutex_unlock(&events->lock);
}

/* Probe, before the IRQs: the lock. */
int rbln_events_init(struct rbln_device *rdev)
{
	return drmm_mutex_init(&rdev->drm, &rdev->events.lock);
}

/* Probe, with the DMA mask set: the ring, disabled until the card took it. */
int rbln_events_alloc(struct rbln_device *rdev)
{
	int ret;

	ret = rbln_rec_ring_alloc(rdev, &rdev->events.ring);
	if (ret)
		return ret;
	rdev->events.ring.entries = 0;
	return 0;
}

/* The address the boot handshake gives the card. */
dma_addr_t rbln_events_ring_dma(struct rbln_device *rdev)
{
	return rdev->events.ring.dma;
}

/* The card has taken the ring: its events are consumed from now on. */
void rbln_events_enable(struct rbln_device *rdev)
{
	mutex_lock(&rdev->events.lock);
	rdev->events.ring.entries = RBLN_RING_ENTRIES;
	mutex_unlock(&rdev->events.lock);
}

/* Shutdown, restart: rbln_events_process() stops here until enabled. */
void rbln_events_disable(struct rbln_device *rdev)
{
	mutex_lock(&rdev->events.lock);
	rdev->events.ring.entries = 0;
	mutex_unlock(&rdev->events.lock);
}

/* Disabled, after the card was reset: the ring starts empty again. */
void rbln_events_rewind(struct rbln_device *rdev)
{
	struct rbln_events *events = &rdev->events;

	mutex_lock(&events->lock);
	rbln_rec_ring_rewind(&events->ring);
	events->seq_valid = false;
	mutex_unlock(&events->lock);
}

/* debugfs control_block: the driver's view of the event ring. */
void rbln_events_show(struct rbln_device *rdev, struct seq_file *m)
{
	struct rbln_events *events = &rdev->events;

	mutex_lock(&events->lock);
	seq_printf(m, "%-18s %u/%u phase %u\n", "event_ring", events->ring.idx,
		   events->ring.entries, events->ring.phase);
	seq_printf(m, "%-18s %llu\n", "events", events->count);
	seq_printf(m, "%-18s %llu\n", "events_lost", events->lost);
	mutex_unlock(&events->lock);
}
