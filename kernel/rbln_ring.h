/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: command rings (rbln_ring.c), one hardware ring and one drm_sched
 * scheduler per chiplet.  A ring's fields are rbln_ring.c's own; the other
 * files use the functions below.
 */
#ifndef RBLN_RING_H
#define RBLN_RING_H

#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>

#include <drm/gpu_scheduler.h>

#include "rbln_fw_cmd.h"
#include "rbln_fw_ctrl.h"

struct dma_fence;
struct drm_printer;
struct rbln_device;

/* Entries of each command ring. */
#define RBLN_CMD_RING_ENTRIES	256

/* A chiplet's command ring. */
struct rbln_cmd_ring {
	struct rbln_device *rdev;
	u32 index;
	u32 entries;
	struct rbln_fw_job *jobs;
	dma_addr_t jobs_dma;
	struct rbln_fw_job_cpl *cpls;
	dma_addr_t cpls_dma;
	struct rbln_fw_ring_ctrl *ctrl;
	dma_addr_t ctrl_dma;

	/*
	 * Protects the host side of the ring: everything below up to
	 * sched, and each pending job's ring_link.  Taken in hard-irq
	 * context (the completion interrupt).
	 */
	spinlock_t lock;
	/* Protects the hardware fences' state (their dma_fence lock). */
	spinlock_t fence_lock;
	u32 tail;
	u32 cpl_head;
	u32 cpl_phase;
	u64 hw_seqno;
	u64 fence_context;
	struct list_head pending;	/* struct rbln_job, in ring order */
	bool up;			/* RING_SETUP done */
	bool recovering;
	u64 resets;
	u64 bad_cpls;
	u64 cpls_polled;		/* jobs retired by the watchdog's poll */
	u64 busy_base;			/* busy_ns of the ring's earlier set-ups */

	struct drm_gpu_scheduler sched;
	bool sched_ready;
};

/* The command rings of a card. */
struct rbln_rings {
	struct rbln_cmd_ring ring[RBLN_FW_MAX_CHIPLETS];
	u32 count;			/* 0: the card has no command rings */
};

/*
 * Why the card failed a job, beyond its errno (firmware-iface 1.4): the
 * completion's detail and detail_arg (for a GRAPH_EXEC, which check
 * refused the Definition and where; RBLN_FW_GRAPH_E_*).  Both are 0 for a
 * job that succeeded, failed without a detail, or never reached the card.
 */
struct rbln_job_detail {
	u32 detail;
	u32 detail_arg;
};

void rbln_fence_detail(struct dma_fence *fence, struct rbln_job_detail *out);

int rbln_rings_init(struct rbln_device *rdev);
void rbln_rings_irq(struct rbln_device *rdev);
void rbln_rings_poll(struct rbln_device *rdev);

u32 rbln_rings_count(struct rbln_device *rdev);
struct drm_gpu_scheduler *rbln_ring_sched(struct rbln_device *rdev, u32 chiplet);
u64 rbln_ring_busy_ns(struct rbln_device *rdev, u32 chiplet);
u64 rbln_ring_resets(struct rbln_device *rdev, u32 chiplet);
u64 rbln_ring_cpls_polled(struct rbln_device *rdev, u32 chiplet);

/* Card recovery (rbln_reset.c), under reset_lock. */
void rbln_rings_stop(struct rbln_device *rdev);
int rbln_rings_restart(struct rbln_device *rdev, int err);
void rbln_rings_fail_pending(struct rbln_device *rdev, int err);
void rbln_rings_resume(struct rbln_device *rdev);
void rbln_rings_dump(struct rbln_device *rdev, struct drm_printer *p);

#endif /* RBLN_RING_H */
