/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: queues (rbln_queue.c), a client's scheduler entities over the
 * rings of a chiplet mask, and WAIT on their jobs.
 */
#ifndef RBLN_QUEUE_H
#define RBLN_QUEUE_H

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include <drm/gpu_scheduler.h>

#include "rbln_fw_ctrl.h"

struct dma_fence;
struct drm_device;
struct drm_file;
struct drm_rbln_wait;
struct rbln_file;

/* A queue: a scheduler entity over some rings. */
struct rbln_queue {
	struct kref ref;
	struct rbln_file *rf;
	u32 id;
	struct drm_sched_entity entity;
	/* The entity keeps a pointer to this list: it lives as long. */
	struct drm_gpu_scheduler *scheds[RBLN_FW_MAX_CHIPLETS];
	/*
	 * Protects last_seqno, recent and sealed, and keeps arm + push of
	 * the queue's jobs in seqno order (rbln_job.c).
	 */
	struct mutex lock;
	u64 last_seqno;
	/* Finished fences of the last RBLN_QUEUE_HISTORY jobs, by seqno. */
	struct dma_fence **recent;
	/* QUEUE_DESTROY: no job is pushed any more. */
	bool sealed;
	/*
	 * QUEUE_DESTROY is done: rbln_queue_get() finds the queue no more.
	 * Under the file's queues xa_lock.
	 */
	bool destroyed;
	/* Once sealed: the last job's finished fence (a reference) or NULL. */
	struct dma_fence *idle_fence;
	struct list_head reap_link;	/* on the reaper's list (its own) */
};

int rbln_ioctl_queue_create(struct drm_device *drm, void *data,
			    struct drm_file *file);
int rbln_ioctl_queue_destroy(struct drm_device *drm, void *data,
			     struct drm_file *file);
int rbln_ioctl_wait(struct drm_device *drm, void *data, struct drm_file *file);
struct dma_fence *rbln_wait_fence(struct drm_file *file,
				  const struct drm_rbln_wait *args);

struct rbln_queue *rbln_queue_get(struct rbln_file *rf, u32 id);
void rbln_queue_put(struct rbln_queue *q);
u64 rbln_queue_record_locked(struct rbln_queue *q, struct dma_fence *fence,
			     struct dma_fence **old);
unsigned int rbln_queues_wait(struct rbln_file *rf, unsigned int timeout_ms);
void rbln_queues_fini(struct rbln_file *rf);

#endif /* RBLN_QUEUE_H */
