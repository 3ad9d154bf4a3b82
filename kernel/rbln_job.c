// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: jobs - SUBMIT (the ioctl, and rbln_uring.c's io_uring command)
 * creates a job, prepares its buffers and pushes it onto its queue's
 * scheduler entity; the ring backend (rbln_ring.c) runs it and frees it
 * with rbln_job_free().
 *
 * rbln_submit() is a sequence of steps, each undone by the error path of
 * the one that called it: the arguments are checked, the job created (its
 * queue and buffers looked up), the syncobjs looked up, the buffers
 * prepared (the VM bound, host buffers given pages), the dependencies
 * added (in-syncobjs, implicit fences of shared buffers), and the job
 * armed and pushed in queue order.
 *
 * Every job's "finished" fence is what user space sees: in the out-syncobj,
 * in the reservation objects of the job's buffers (which is what keeps a
 * buffer mapped while the card uses it, see rbln_vma_put()), and in the
 * queue's table of recent jobs that WAIT by seqno looks up.
 */
#include <linux/dma-fence-chain.h>
#include <linux/dma-resv.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include "rbln_drv.h"
#include "rbln_job.h"
#include "rbln_queue.h"

#define RBLN_MAX_JOB_BOS	4096
#define RBLN_MAX_IN_SYNCS	64
/* Handles copied on the stack rather than into an allocation. */
#define RBLN_STACK_HANDLES	16

/* The in- and out-syncobjs of one SUBMIT. */
struct rbln_submit_syncs {
	struct drm_rbln_sync *in;
	struct drm_syncobj *out;
	struct dma_fence_chain *chain;	/* a timeline point of out */
};

/* Also at the end of a job that ran: drm_sched's free_job. */
void rbln_job_free(struct rbln_job *job)
{
	unsigned int i;

	for (i = 0; i < job->bo_count; i++)
		drm_gem_object_put(job->bos[i]);
	if (job->bos != job->inline_bos)
		kvfree(job->bos);
	dma_fence_put(job->hw_fence);
	if (job->queue)
		rbln_queue_put(job->queue);
	kfree(job);
}

static int rbln_submit_check_args(const struct drm_rbln_submit *args)
{
	if (args->flags & ~RBLN_SUBMIT_NO_IMPLICIT_WAIT || args->out_flags ||
	    args->cmd_size < 8 || args->cmd_size > RBLN_FW_CMD_MAX ||
	    !IS_ALIGNED(args->cmd_size | args->cmd_offset, 8) ||
	    args->bo_count > RBLN_MAX_JOB_BOS || args->in_count > RBLN_MAX_IN_SYNCS ||
	    (args->bo_count && args->bo_elem_size != sizeof(u32)) ||
	    (args->in_count && args->in_elem_size != sizeof(struct drm_rbln_sync)) ||
	    (!args->out_handle && args->out_point))
		return -EINVAL;
	return 0;
}

/* Takes over the reference to @obj; a buffer listed twice is kept once. */
static void rbln_job_add_bo(struct rbln_job *job, struct drm_gem_object *obj)
{
	unsigned int i;

	for (i = 0; i < job->bo_count; i++) {
		if (job->bos[i] == obj) {
			drm_gem_object_put(obj);
			return;
		}
	}
	job->bos[job->bo_count++] = obj;
}

static int rbln_job_lookup_bos(struct drm_file *file, struct rbln_job *job,
			       const struct drm_rbln_submit *args)
{
	u32 stack_handles[RBLN_STACK_HANDLES];
	struct drm_gem_object *obj;
	u32 *handles = stack_handles;
	unsigned int i;
	int ret = 0;

	if (!args->bo_count)
		return 0;
	if (args->bo_count > ARRAY_SIZE(stack_handles)) {
		handles = kvmalloc_array(args->bo_count, sizeof(*handles),
					 GFP_KERNEL);
		if (!handles)
			return -ENOMEM;
	}
	if (copy_from_user(handles, u64_to_user_ptr(args->bo_handles),
			   args->bo_count * sizeof(*handles))) {
		ret = -EFAULT;
		goto out;
	}
	for (i = 0; i < args->bo_count; i++) {
		obj = drm_gem_object_lookup(file, handles[i]);
		if (!obj) {
			ret = -ENOENT;
			break;
		}
		rbln_job_add_bo(job, obj);
	}
out:
	if (handles != stack_handles)
		kvfree(handles);
	return ret;
}

/* One buffer (the common case) needs no acquire context. */
static int rbln_job_lock_resvs(struct rbln_job *job, struct ww_acquire_ctx *ctx)
{
	if (job->bo_count == 1)
		return dma_resv_lock_interruptible(job->bos[0]->resv, NULL);
	return drm_gem_lock_reservations(job->bos, job->bo_count, ctx);
}

static void rbln_job_unlock_resvs(struct rbln_job *job,
				  struct ww_acquire_ctx *ctx)
{
	if (job->bo_count == 1)
		dma_resv_unlock(job->bos[0]->resv);
	else
		drm_gem_unlock_reservations(job->bos, job->bo_count, ctx);
}

/*
 * A job on the queue @args names, holding a reference to each of its
 * buffers: the listed ones, then the command buffer; once each.
 */
static struct rbln_job *rbln_job_create(struct drm_file *file,
					const struct drm_rbln_submit *args)
{
	struct rbln_file *rf = to_rbln_file(file);
	struct drm_gem_object *cmd;
	struct rbln_queue *q;
	struct rbln_job *job;
	int ret;

	q = rbln_queue_get(rf, args->queue_id);
	if (!q)
		return ERR_PTR(-ENOENT);
	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job) {
		rbln_queue_put(q);
		return ERR_PTR(-ENOMEM);
	}
	job->queue = q;
	job->vm = &rf->vm;
	job->asid = rbln_vm_asid(&rf->vm);
	INIT_LIST_HEAD(&job->ring_link);

	if (args->bo_count + 1 <= ARRAY_SIZE(job->inline_bos)) {
		job->bos = job->inline_bos;
	} else {
		job->bos = kvcalloc(args->bo_count + 1, sizeof(*job->bos),
				    GFP_KERNEL);
		if (!job->bos) {
			ret = -ENOMEM;
			goto err;
		}
	}
	ret = rbln_job_lookup_bos(file, job, args);
	if (ret)
		goto err;
	cmd = drm_gem_object_lookup(file, args->cmd_handle);
	if (!cmd) {
		ret = -ENOENT;
		goto err;
	}
	rbln_job_add_bo(job, cmd);
	job->cmd_bo = cmd;
	if (args->cmd_offset > cmd->size ||
	    args->cmd_size > cmd->size - args->cmd_offset) {
		ret = -ERANGE;
		goto err;
	}
	return job;

err:
	rbln_job_free(job);
	return ERR_PTR(ret);
}

static void rbln_submit_syncs_put(struct rbln_submit_syncs *s)
{
	dma_fence_chain_free(s->chain);
	if (s->out)
		drm_syncobj_put(s->out);
	kvfree(s->in);
}

/* The in-syncobj array (copied) and the out-syncobj (looked up). */
static int rbln_submit_syncs_get(struct drm_file *file,
				 const struct drm_rbln_submit *args,
				 struct rbln_submit_syncs *s)
{
	unsigned int i;

	if (args->in_count) {
		s->in = kvmalloc_array(args->in_count, sizeof(*s->in), GFP_KERNEL);
		if (!s->in)
			return -ENOMEM;
		if (copy_from_user(s->in, u64_to_user_ptr(args->in_syncs),
				   args->in_count * sizeof(*s->in)))
			return -EFAULT;
		for (i = 0; i < args->in_count; i++)
			if (s->in[i].flags)
				return -EINVAL;
	}
	if (args->out_handle) {
		s->out = drm_syncobj_find(file, args->out_handle);
		if (!s->out)
			return -ENOENT;
		if (args->out_point) {
			s->chain = dma_fence_chain_alloc();
			if (!s->chain)
				return -ENOMEM;
		}
	}
	return 0;
}

/*
 * The card learns the job's VM and host buffers get their pages and
 * entries at their first device use; the command's device VA is found.
 */
static int rbln_job_prepare(struct rbln_job *job,
			    const struct drm_rbln_submit *args)
{
	unsigned int i;
	u64 va, cmd_va = 0;
	int ret;

	ret = rbln_vm_bind(job->vm);
	if (ret)
		return ret;
	for (i = 0; i < job->bo_count; i++) {
		ret = rbln_vm_prepare_bo(job->vm, to_rbln_bo(job->bos[i]), &va);
		if (ret)
			return ret;
		if (job->bos[i] == job->cmd_bo)
			cmd_va = va;
	}
	job->cmd_va = cmd_va + args->cmd_offset;
	job->cmd_size = args->cmd_size;
	return 0;
}

/*
 * @fence (a reference, consumed) must signal before @job runs; the
 * scheduler waits for a stand-in the file's release can cancel if the
 * fence is not the file's own (rbln_dep.c).
 */
static int rbln_job_add_dep(struct rbln_job *job, struct dma_fence *fence)
{
	fence = rbln_dep_wrap(job->queue->rf, fence);
	if (IS_ERR(fence))
		return PTR_ERR(fence);
	return drm_sched_job_add_dependency(&job->base, fence);
}

/* Every fence of @obj's reservation (locked): the job writes it. */
static int rbln_job_add_implicit_deps(struct rbln_job *job,
				      struct drm_gem_object *obj)
{
	struct dma_resv_iter cursor;
	struct dma_fence *fence;
	int ret;

	dma_resv_for_each_fence(&cursor, obj->resv, dma_resv_usage_rw(true),
				fence) {
		ret = rbln_job_add_dep(job, dma_fence_get(fence));
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The job's dependencies: its in-syncobjs, then the fences of its
 * buffers that are shared with others (implicit sync).  On success the
 * buffers' reservations stay locked, with a fence slot reserved in each.
 */
static int rbln_job_add_deps(struct drm_file *file, struct rbln_job *job,
			     const struct drm_rbln_submit *args,
			     const struct rbln_submit_syncs *s,
			     struct ww_acquire_ctx *ctx)
{
	unsigned int i;
	int ret;

	for (i = 0; i < args->in_count; i++) {
		struct dma_fence *fence;

		ret = drm_syncobj_find_fence(file, s->in[i].handle,
					     s->in[i].point, 0, &fence);
		if (ret)
			return ret == -EINVAL ? -ENOENT : ret;
		ret = rbln_job_add_dep(job, fence);
		if (ret)
			return ret;
	}

	ret = rbln_job_lock_resvs(job, ctx);
	if (ret)
		return ret;
	for (i = 0; i < job->bo_count; i++) {
		struct drm_gem_object *obj = job->bos[i];

		ret = dma_resv_reserve_fences(obj->resv, 1);
		/* Implicit sync is for buffers shared with others only. */
		if (!ret && (obj->dma_buf || obj->import_attach) &&
		    !(args->flags & RBLN_SUBMIT_NO_IMPLICIT_WAIT))
			ret = rbln_job_add_implicit_deps(job, obj);
		if (ret) {
			rbln_job_unlock_resvs(job, ctx);
			return ret;
		}
	}
	return 0;
}

/*
 * Arm and push in queue order; the job may be freed as soon as it is
 * pushed, so everything that needs it happens before.  Unlocks the
 * reservations; returns the job's finished fence (a reference) and its
 * seqno in *@seqno, or -ENOENT if the queue was destroyed meanwhile.
 */
static struct dma_fence *rbln_job_push(struct rbln_job *job,
				       struct ww_acquire_ctx *ctx, u64 *seqno)
{
	struct rbln_queue *q = job->queue;
	struct dma_fence *fence, *old;
	unsigned int i;

	mutex_lock(&q->lock);
	if (q->sealed) {	/* QUEUE_DESTROY came first */
		mutex_unlock(&q->lock);
		rbln_job_unlock_resvs(job, ctx);
		return ERR_PTR(-ENOENT);
	}
	drm_sched_job_arm(&job->base);
	fence = dma_fence_get(&job->base.s_fence->finished);
	*seqno = rbln_queue_record_locked(q, fence, &old);
	for (i = 0; i < job->bo_count; i++)
		dma_resv_add_fence(job->bos[i]->resv, fence, DMA_RESV_USAGE_WRITE);
	rbln_job_unlock_resvs(job, ctx);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&q->lock);
	dma_fence_put(old);
	return fence;
}

/*
 * The submit path shared by the ioctl and io_uring.  On success the job
 * is queued, *fence_out holds a reference to its finished fence and
 * args->seqno is set.
 */
int rbln_submit(struct drm_file *file, struct drm_rbln_submit *args,
		struct dma_fence **fence_out)
{
	struct rbln_submit_syncs syncs = {};
	struct ww_acquire_ctx ctx;
	struct dma_fence *fence;
	struct rbln_job *job;
	int ret;

	ret = rbln_submit_check_args(args);
	if (ret)
		return ret;
	job = rbln_job_create(file, args);
	if (IS_ERR(job))
		return PTR_ERR(job);
	ret = rbln_submit_syncs_get(file, args, &syncs);
	if (!ret)
		ret = rbln_job_prepare(job, args);
	if (!ret)
		ret = rbln_sched_job_init(&job->base, &job->queue->entity,
					  job->queue->rf, file->client_id);
	if (ret)
		goto err_job;
	ret = rbln_job_add_deps(file, job, args, &syncs, &ctx);
	if (ret)
		goto err_sched;

	fence = rbln_job_push(job, &ctx, &args->seqno);
	if (IS_ERR(fence)) {
		ret = PTR_ERR(fence);
		goto err_sched;
	}
	if (syncs.chain) {
		drm_syncobj_add_point(syncs.out, syncs.chain, fence,
				      args->out_point);
		syncs.chain = NULL;	/* the syncobj's now */
	} else if (syncs.out) {
		drm_syncobj_replace_fence(syncs.out, fence);
	}
	rbln_submit_syncs_put(&syncs);
	if (fence_out)
		*fence_out = fence;
	else
		dma_fence_put(fence);
	return 0;

err_sched:
	drm_sched_job_cleanup(&job->base);
err_job:
	rbln_submit_syncs_put(&syncs);
	rbln_job_free(job);
	return ret;
}

int rbln_ioctl_submit(struct drm_device *drm, void *data, struct drm_file *file)
{
	int idx, ret;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	ret = rbln_submit(file, data, NULL);
	drm_dev_exit(idx);
	return ret;
}
