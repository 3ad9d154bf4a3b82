/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: jobs (rbln_job.c): SUBMIT creates, prepares and pushes them onto a
 * queue's scheduler entity; the ring backend (rbln_ring.c) runs and
 * retires them and frees them through rbln_job_free().
 */
#ifndef RBLN_JOB_H
#define RBLN_JOB_H

#include <linux/list.h>
#include <linux/types.h>

#include <drm/gpu_scheduler.h>

struct dma_fence;
struct drm_device;
struct drm_file;
struct drm_gem_object;
struct drm_rbln_submit;
struct rbln_cmd_ring;
struct rbln_queue;
struct rbln_vm;

/* Buffers a job lists without an allocation of their own. */
#define RBLN_JOB_INLINE_BOS	4

struct rbln_job {
	struct drm_sched_job base;
	struct rbln_queue *queue;
	struct rbln_vm *vm;
	struct rbln_cmd_ring *ring;	/* set by run_job */
	u32 asid;
	u32 cmd_size;
	u64 cmd_va;
	u64 hw_seqno;
	struct dma_fence *hw_fence;
	struct list_head ring_link;	/* in ring->pending, under ring->lock */
	struct drm_gem_object *cmd_bo;	/* one of bos[] */
	struct drm_gem_object **bos;	/* inline_bos or allocated */
	unsigned int bo_count;
	struct drm_gem_object *inline_bos[RBLN_JOB_INLINE_BOS];
};

static inline struct rbln_job *to_rbln_job(struct drm_sched_job *job)
{
	return container_of(job, struct rbln_job, base);
}

int rbln_ioctl_submit(struct drm_device *drm, void *data, struct drm_file *file);
int rbln_submit(struct drm_file *file, struct drm_rbln_submit *args,
		struct dma_fence **fence_out);
void rbln_job_free(struct rbln_job *job);

#endif /* RBLN_JOB_H */
