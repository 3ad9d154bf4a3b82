// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: queues, SUBMIT and WAIT (ioctls; rbln_uring.c reuses the same
 * paths for io_uring).
 *
 * A queue is a drm_sched entity over the rings of its chiplet mask: drm_sched
 * keeps an entity on one ring while it has jobs queued and moves an idle
 * entity to the least loaded ring, so a queue's jobs run in order.  Every
 * job's "finished" fence is what user space sees: in the out-syncobj, in
 * the reservation objects of the job's buffers (which is what keeps a
 * buffer mapped while the card uses it, see rbln_vma_put()), and in the
 * queue's table of recent jobs that WAIT by seqno looks up.
 */
#include <linux/dma-fence-chain.h>
#include <linux/dma-resv.h>
#include <linux/ktime.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include "rbln_drv.h"

#define RBLN_MAX_QUEUES		256
#define RBLN_MAX_JOB_BOS	4096
#define RBLN_MAX_IN_SYNCS	64
/* WAIT by seqno finds the last this many jobs of a queue (a power of 2). */
#define RBLN_QUEUE_HISTORY	4096
/* Handles copied on the stack rather than into an allocation. */
#define RBLN_STACK_HANDLES	16

/* The slot of @seqno in q->recent. */
static inline struct dma_fence **rbln_queue_slot(struct rbln_queue *q, u64 seqno)
{
	return &q->recent[seqno & (RBLN_QUEUE_HISTORY - 1)];
}

static void rbln_queue_release(struct kref *ref)
{
	struct rbln_queue *q = container_of(ref, struct rbln_queue, ref);
	unsigned int i;

	for (i = 0; i < RBLN_QUEUE_HISTORY; i++)
		dma_fence_put(q->recent[i]);
	kvfree(q->recent);
	mutex_destroy(&q->lock);
	kfree(q);
}

void rbln_queue_put(struct rbln_queue *q)
{
	kref_put(&q->ref, rbln_queue_release);
}

static struct rbln_queue *rbln_queue_get(struct rbln_file *rf, u32 id)
{
	struct rbln_queue *q;

	xa_lock(&rf->queues);
	q = xa_load(&rf->queues, id);
	if (q)
		kref_get(&q->ref);
	xa_unlock(&rf->queues);
	return q;
}

static void rbln_queue_teardown(struct rbln_queue *q)
{
	/* Jobs already pushed still run; the entity waits for them. */
	drm_sched_entity_destroy(&q->entity);
	rbln_queue_put(q);
}

int rbln_ioctl_queue_create(struct drm_device *drm, void *data,
			    struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln(drm);
	struct rbln_file *rf = to_rbln_file(file);
	struct drm_rbln_queue_create *args = data;
	enum drm_sched_priority prio;
	struct rbln_queue *q;
	unsigned int n = 0, i;
	int ret;

	if (args->flags || !args->chiplet_mask ||
	    args->chiplet_mask >> rdev->id.chiplet_count)
		return -EINVAL;
	switch (args->priority) {
	case RBLN_QUEUE_PRIORITY_LOW:
		prio = DRM_SCHED_PRIORITY_LOW;
		break;
	case RBLN_QUEUE_PRIORITY_NORMAL:
		prio = DRM_SCHED_PRIORITY_NORMAL;
		break;
	case RBLN_QUEUE_PRIORITY_HIGH:
		if (!capable(CAP_SYS_NICE))
			return -EACCES;
		prio = DRM_SCHED_PRIORITY_HIGH;
		break;
	default:
		return -EINVAL;
	}
	if (!rdev->ring_count)
		return -EIO;	/* a card without command rings */
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	q->recent = kvcalloc(RBLN_QUEUE_HISTORY, sizeof(*q->recent), GFP_KERNEL);
	if (!q->recent) {
		kfree(q);
		return -ENOMEM;
	}
	for (i = 0; i < rdev->ring_count; i++)
		if (args->chiplet_mask & BIT(i))
			q->scheds[n++] = &rdev->rings[i].sched;
	kref_init(&q->ref);
	mutex_init(&q->lock);
	q->rf = rf;
	ret = drm_sched_entity_init(&q->entity, prio, q->scheds, n, NULL);
	if (ret)
		goto err;
	ret = xa_alloc(&rf->queues, &q->id, q, XA_LIMIT(1, RBLN_MAX_QUEUES),
		       GFP_KERNEL);
	if (ret) {
		drm_sched_entity_destroy(&q->entity);
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto err;
	}
	args->queue_id = q->id;
	return 0;

err:
	mutex_destroy(&q->lock);
	kvfree(q->recent);
	kfree(q);
	return ret;
}

int rbln_ioctl_queue_destroy(struct drm_device *drm, void *data,
			     struct drm_file *file)
{
	struct rbln_file *rf = to_rbln_file(file);
	struct drm_rbln_queue_destroy *args = data;
	struct rbln_queue *q;

	if (args->pad)
		return -EINVAL;
	q = xa_erase(&rf->queues, args->queue_id);
	if (!q)
		return -ENOENT;
	rbln_queue_teardown(q);
	return 0;
}

/* The finished fence of @q's last job (a reference), NULL if none. */
static struct dma_fence *rbln_queue_last_fence(struct rbln_queue *q)
{
	struct dma_fence *fence = NULL;

	mutex_lock(&q->lock);
	if (q->last_seqno)
		fence = dma_fence_get(*rbln_queue_slot(q, q->last_seqno));
	mutex_unlock(&q->lock);
	return fence;
}

/*
 * At release (the last reference to the file is gone: closed, or its
 * process killed), before the buffers go.  Nobody can wait for the jobs
 * the file left any more; what they write may still be seen elsewhere
 * (shared user pages, exported buffers and syncobjs), so they get
 * release_grace_ms to finish.  Then the file's address space runs
 * nothing more: jobs not yet on the card fail in run_job(), and the card
 * cancels the ones it holds (VM_ABORT, firmware-iface 1.3) at their next
 * packet boundary or inside a WAIT.  Their fences get -ECANCELED.  So a
 * job held by a WAIT that nobody will satisfy neither keeps the file's
 * memory until the job timeout nor costs the other clients of its
 * chiplet a ring reset.  A 1.2 card has no VM_ABORT: what it holds runs
 * on as before.
 */
void rbln_file_quiesce(struct rbln_file *rf)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(rbln_release_grace_ms);
	struct rbln_device *rdev = rf->rdev;
	struct rbln_vm *vm = &rf->vm;
	unsigned int left = 0;
	struct rbln_queue *q;
	unsigned long id;
	int idx, ret = 0;

	xa_for_each(&rf->queues, id, q) {
		struct dma_fence *fence = rbln_queue_last_fence(q);
		long t = (long)(deadline - jiffies);

		if (!fence)
			continue;
		if (!dma_fence_wait_timeout(fence, false, max(t, 0L)))
			left++;
		dma_fence_put(fence);
	}
	if (!left)
		return;
	WRITE_ONCE(vm->closed, true);
	if (rdev->id.iface_minor < 3 || !drm_dev_enter(&rdev->drm, &idx))
		return;
	/* As a recovery takes them: it rebinds (and so un-aborts) VMs. */
	mutex_lock(&rdev->reset_lock);
	mutex_lock(&vm->lock);
	if (vm->bound && rbln_get_state(rdev) == RBLN_STATE_READY)
		ret = rbln_fw_vm_abort(rdev, vm->asid);
	mutex_unlock(&vm->lock);
	mutex_unlock(&rdev->reset_lock);
	drm_dev_exit(idx);
	if (ret)
		drm_warn(&rdev->drm, "VM_ABORT of asid %u failed (%d): its jobs run on\n",
			 vm->asid, ret);
	else
		drm_dbg_driver(&rdev->drm, "asid %u: %u queue(s) busy %u ms after release\n",
			       vm->asid, left, rbln_release_grace_ms);
}

/* At file close, before the VM goes. */
void rbln_queues_fini(struct rbln_file *rf)
{
	struct rbln_queue *q;
	unsigned long id;

	xa_for_each(&rf->queues, id, q) {
		xa_erase(&rf->queues, id);
		rbln_queue_teardown(q);
	}
	xa_destroy(&rf->queues);
}

void rbln_job_put_resources(struct rbln_job *job)
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

/*
 * Host buffers get their pages and entries at their first device use.
 * Also finds the device VA of @cmd (one of the job's buffers) in *@cmd_va.
 */
static int rbln_job_prepare_bos(struct rbln_job *job,
				struct drm_gem_object *cmd, u64 *cmd_va)
{
	struct rbln_vm *vm = job->vm;
	unsigned int i;
	int ret = 0;

	/* Set once; a card recovery binds it again with the rings stopped. */
	if (!READ_ONCE(vm->bound)) {
		mutex_lock(&vm->lock);
		ret = rbln_vm_bind_locked(vm);
		mutex_unlock(&vm->lock);
		if (ret)
			return ret;
	}
	for (i = 0; i < job->bo_count; i++) {
		struct rbln_bo *bo = to_rbln_bo(job->bos[i]);
		struct rbln_vma *vma;

		/*
		 * The lock keeps the vma against a concurrent GEM close,
		 * which takes it off the buffer's list (under this lock)
		 * before it unmaps it: one seen mapped here stays mapped.
		 */
		mutex_lock(&bo->lock);
		vma = rbln_vma_find(bo, vm);
		if (!vma)
			ret = -ENOENT;
		else if (!vma->mapped)
			ret = rbln_vma_populate_locked(vma);
		if (!ret && job->bos[i] == cmd)
			*cmd_va = vma->node.start;
		mutex_unlock(&bo->lock);
		if (ret)
			return ret;
	}
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
 * The submit path shared by the ioctl and io_uring.  On success the job
 * is queued, *fence_out holds a reference to its finished fence and
 * args->seqno is set.
 */
int rbln_submit(struct drm_file *file, struct drm_rbln_submit *args,
		struct dma_fence **fence_out)
{
	struct rbln_file *rf = to_rbln_file(file);
	struct drm_rbln_sync *in = NULL;
	struct drm_syncobj *out = NULL;
	struct dma_fence_chain *chain = NULL;
	struct ww_acquire_ctx ctx;
	struct drm_gem_object *cmd;
	struct dma_fence *fence, *old, **slot;
	struct rbln_queue *q;
	struct rbln_job *job;
	unsigned int i;
	u64 cmd_va = 0;
	int ret;

	if (args->flags & ~RBLN_SUBMIT_NO_IMPLICIT_WAIT || args->out_flags ||
	    args->cmd_size < 8 || args->cmd_size > RBLN_FW_CMD_MAX ||
	    !IS_ALIGNED(args->cmd_size | args->cmd_offset, 8) ||
	    args->bo_count > RBLN_MAX_JOB_BOS || args->in_count > RBLN_MAX_IN_SYNCS ||
	    (args->bo_count && args->bo_elem_size != sizeof(u32)) ||
	    (args->in_count && args->in_elem_size != sizeof(struct drm_rbln_sync)) ||
	    (!args->out_handle && args->out_point))
		return -EINVAL;

	q = rbln_queue_get(rf, args->queue_id);
	if (!q)
		return -ENOENT;
	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job) {
		rbln_queue_put(q);
		return -ENOMEM;
	}
	job->queue = q;
	job->vm = &rf->vm;
	job->asid = rf->vm.asid;
	INIT_LIST_HEAD(&job->ring_link);

	/* The buffers: the listed ones, then the command buffer; once each. */
	if (args->bo_count + 1 <= ARRAY_SIZE(job->inline_bos)) {
		job->bos = job->inline_bos;
	} else {
		job->bos = kvcalloc(args->bo_count + 1, sizeof(*job->bos),
				    GFP_KERNEL);
		if (!job->bos) {
			ret = -ENOMEM;
			goto err_job;
		}
	}
	ret = rbln_job_lookup_bos(file, job, args);
	if (ret)
		goto err_job;
	cmd = drm_gem_object_lookup(file, args->cmd_handle);
	if (!cmd) {
		ret = -ENOENT;
		goto err_job;
	}
	rbln_job_add_bo(job, cmd);
	if (args->cmd_offset > cmd->size ||
	    args->cmd_size > cmd->size - args->cmd_offset) {
		ret = -ERANGE;
		goto err_job;
	}

	if (args->in_count) {
		in = kvmalloc_array(args->in_count, sizeof(*in), GFP_KERNEL);
		if (!in) {
			ret = -ENOMEM;
			goto err_job;
		}
		if (copy_from_user(in, u64_to_user_ptr(args->in_syncs),
				   args->in_count * sizeof(*in))) {
			ret = -EFAULT;
			goto err_in;
		}
		for (i = 0; i < args->in_count; i++)
			if (in[i].flags) {
				ret = -EINVAL;
				goto err_in;
			}
	}
	if (args->out_handle) {
		out = drm_syncobj_find(file, args->out_handle);
		if (!out) {
			ret = -ENOENT;
			goto err_in;
		}
		if (args->out_point) {
			chain = dma_fence_chain_alloc();
			if (!chain) {
				ret = -ENOMEM;
				goto err_out;
			}
		}
	}

	ret = rbln_job_prepare_bos(job, cmd, &cmd_va);
	if (ret)
		goto err_out;
	job->cmd_va = cmd_va + args->cmd_offset;
	job->cmd_size = args->cmd_size;

	ret = rbln_sched_job_init(&job->base, &q->entity, file->client_id);
	if (ret)
		goto err_out;
	for (i = 0; i < args->in_count; i++) {
		ret = drm_sched_job_add_syncobj_dependency(&job->base, file,
							   in[i].handle,
							   in[i].point);
		if (ret) {
			ret = ret == -EINVAL ? -ENOENT : ret;
			goto err_sched;
		}
	}

	ret = rbln_job_lock_resvs(job, &ctx);
	if (ret)
		goto err_sched;
	for (i = 0; i < job->bo_count; i++) {
		struct drm_gem_object *obj = job->bos[i];

		ret = dma_resv_reserve_fences(obj->resv, 1);
		/* Implicit sync is for buffers shared with others only. */
		if (!ret && (obj->dma_buf || obj->import_attach) &&
		    !(args->flags & RBLN_SUBMIT_NO_IMPLICIT_WAIT))
			ret = drm_sched_job_add_implicit_dependencies(&job->base,
								      obj, true);
		if (ret)
			goto err_unlock;
	}

	/*
	 * Arm and push in queue order; the job may be freed as soon as it
	 * is pushed, so everything that needs it happens before.
	 */
	mutex_lock(&q->lock);
	drm_sched_job_arm(&job->base);
	fence = dma_fence_get(&job->base.s_fence->finished);
	args->seqno = ++q->last_seqno;
	job->queue_seqno = args->seqno;
	/* Takes the place of the job RBLN_QUEUE_HISTORY before it. */
	slot = rbln_queue_slot(q, args->seqno);
	old = *slot;
	*slot = dma_fence_get(fence);
	for (i = 0; i < job->bo_count; i++)
		dma_resv_add_fence(job->bos[i]->resv, fence, DMA_RESV_USAGE_WRITE);
	rbln_job_unlock_resvs(job, &ctx);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&q->lock);
	dma_fence_put(old);

	if (out) {
		if (chain)
			drm_syncobj_add_point(out, chain, fence, args->out_point);
		else
			drm_syncobj_replace_fence(out, fence);
		drm_syncobj_put(out);
	}
	kvfree(in);
	if (fence_out)
		*fence_out = fence;
	else
		dma_fence_put(fence);
	return 0;

err_unlock:
	rbln_job_unlock_resvs(job, &ctx);
err_sched:
	drm_sched_job_cleanup(&job->base);
err_out:
	dma_fence_chain_free(chain);
	if (out)
		drm_syncobj_put(out);
err_in:
	kvfree(in);
err_job:
	rbln_job_put_resources(job);
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

/* The fence WAIT waits for; a reference, or an ERR_PTR; NULL = done long ago. */
struct dma_fence *rbln_wait_fence(struct drm_file *file,
				  const struct drm_rbln_wait *args)
{
	struct rbln_file *rf = to_rbln_file(file);
	struct dma_fence *fence = NULL;
	struct rbln_queue *q;
	int ret;

	if (args->flags & ~RBLN_WAIT_SYNCOBJ || args->pad || args->job_error ||
	    args->sync.flags)
		return ERR_PTR(-EINVAL);
	if (args->flags & RBLN_WAIT_SYNCOBJ) {
		if (args->queue_id || args->seqno)
			return ERR_PTR(-EINVAL);
		ret = drm_syncobj_find_fence(file, args->sync.handle,
					     args->sync.point, 0, &fence);
		return ret ? ERR_PTR(-ENOENT) : fence;
	}
	if (args->sync.handle || args->sync.point)
		return ERR_PTR(-EINVAL);
	q = rbln_queue_get(rf, args->queue_id);
	if (!q)
		return ERR_PTR(-ENOENT);
	mutex_lock(&q->lock);
	if (!args->seqno || args->seqno > q->last_seqno)
		fence = ERR_PTR(-ENOENT);
	else if (q->last_seqno - args->seqno < RBLN_QUEUE_HISTORY)
		fence = dma_fence_get(*rbln_queue_slot(q, args->seqno));
	mutex_unlock(&q->lock);
	rbln_queue_put(q);
	return fence;
}

int rbln_ioctl_wait(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_rbln_wait *args = data;
	struct dma_fence *fence;
	long timeout = 0;
	s64 now;
	long ret;

	fence = rbln_wait_fence(file, args);
	if (IS_ERR(fence))
		return PTR_ERR(fence);
	args->job_error = 0;
	if (!fence)
		return 0;

	now = ktime_get_ns();
	if (args->timeout_ns > now)
		timeout = nsecs_to_jiffies(args->timeout_ns - now) + 1;
	if (timeout)
		ret = dma_fence_wait_timeout(fence, true, timeout);
	else
		ret = dma_fence_is_signaled(fence) ? 1 : 0;
	if (ret > 0) {
		args->job_error = fence->error;
		ret = 0;
	} else if (!ret) {
		ret = -ETIME;
	}
	dma_fence_put(fence);
	return ret;
}
