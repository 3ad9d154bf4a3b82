// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: queues and WAIT (ioctls; rbln_uring.c reuses rbln_wait_fence()
 * for io_uring).
 *
 * A queue is a drm_sched entity over the rings of its chiplet mask: drm_sched
 * keeps an entity on one ring while it has jobs queued and moves an idle
 * entity to the least loaded ring, so a queue's jobs run in order.  The
 * queue keeps the finished fences of its last RBLN_QUEUE_HISTORY jobs,
 * which WAIT by seqno looks up.
 *
 * QUEUE_DESTROY does not wait: the queue takes no job any more and is
 * gone for SUBMIT and WAIT, but the jobs it has run on, each once its
 * in-fences signal (their fences signal as usual).  The queue keeps its id
 * and its scheduler entity until its last job is done; the next
 * QUEUE_CREATE or QUEUE_DESTROY of the file frees it then (the reaper),
 * or the file's release does.
 */
#include <linux/dma-fence.h>
#include <linux/ktime.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include "rbln_drv.h"
#include "rbln_queue.h"

#define RBLN_MAX_QUEUES		256
/* WAIT by seqno finds the last this many jobs of a queue (a power of 2). */
#define RBLN_QUEUE_HISTORY	4096

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

struct rbln_queue *rbln_queue_get(struct rbln_file *rf, u32 id)
{
	struct rbln_queue *q;

	xa_lock(&rf->queues);
	q = xa_load(&rf->queues, id);
	if (q && !q->destroyed)
		kref_get(&q->ref);
	else
		q = NULL;
	xa_unlock(&rf->queues);
	return q;
}

/* Out of the file's table already. */
static void rbln_queue_teardown(struct rbln_queue *q)
{
	/* Jobs already pushed still run; the entity waits for them. */
	drm_sched_entity_destroy(&q->entity);
	dma_fence_put(q->idle_fence);
	rbln_queue_put(q);
}

/*
 * Frees the destroyed queues of @rf whose last job is done (their
 * entities are idle: drm_sched_entity_destroy() does not wait).
 */
static void rbln_queues_reap(struct rbln_file *rf)
{
	struct rbln_queue *q, *next;
	unsigned long id;
	LIST_HEAD(done);

	xa_lock(&rf->queues);
	xa_for_each(&rf->queues, id, q) {
		if (!q->destroyed ||
		    (q->idle_fence && !dma_fence_is_signaled(q->idle_fence)))
			continue;
		__xa_erase(&rf->queues, id);
		list_add_tail(&q->reap_link, &done);
	}
	xa_unlock(&rf->queues);
	list_for_each_entry_safe(q, next, &done, reap_link)
		rbln_queue_teardown(q);
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
	if (!rbln_rings_count(rdev))
		return -EIO;	/* a card without command rings */
	rbln_queues_reap(rf);	/* their ids count against the limit */
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	q->recent = kvcalloc(RBLN_QUEUE_HISTORY, sizeof(*q->recent), GFP_KERNEL);
	if (!q->recent) {
		kfree(q);
		return -ENOMEM;
	}
	for (i = 0; i < rbln_rings_count(rdev); i++)
		if (args->chiplet_mask & BIT(i))
			q->scheds[n++] = rbln_ring_sched(rdev, i);
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
	q = rbln_queue_get(rf, args->queue_id);
	if (!q)
		return -ENOENT;
	/* No job is pushed after this (rbln_job.c checks sealed). */
	mutex_lock(&q->lock);
	if (q->sealed) {	/* a concurrent DESTROY got here first */
		mutex_unlock(&q->lock);
		rbln_queue_put(q);
		return -ENOENT;
	}
	q->sealed = true;
	if (q->last_seqno)
		q->idle_fence = dma_fence_get(*rbln_queue_slot(q, q->last_seqno));
	mutex_unlock(&q->lock);
	xa_lock(&rf->queues);
	q->destroyed = true;
	xa_unlock(&rf->queues);
	rbln_queue_put(q);
	/* This queue too, if its last job is done. */
	rbln_queues_reap(rf);
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
 * Under q->lock, as a job is armed: the job's seqno.  Its finished @fence
 * takes the place of the job RBLN_QUEUE_HISTORY before it, whose fence
 * (for the caller to put after unlocking) goes to *@old.
 */
u64 rbln_queue_record_locked(struct rbln_queue *q, struct dma_fence *fence,
			     struct dma_fence **old)
{
	struct dma_fence **slot;
	u64 seqno;

	lockdep_assert_held(&q->lock);
	seqno = ++q->last_seqno;
	slot = rbln_queue_slot(q, seqno);
	*old = *slot;
	*slot = dma_fence_get(fence);
	return seqno;
}

/*
 * At release: waits up to @timeout_ms in all for the last job of each of
 * @rf's queues; returns the number of queues whose last job is not done.
 */
unsigned int rbln_queues_wait(struct rbln_file *rf, unsigned int timeout_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	unsigned int left = 0;
	struct rbln_queue *q;
	unsigned long id;

	xa_for_each(&rf->queues, id, q) {
		struct dma_fence *fence = rbln_queue_last_fence(q);
		long t = (long)(deadline - jiffies);

		if (!fence)
			continue;
		if (!dma_fence_wait_timeout(fence, false, max(t, 0L)))
			left++;
		dma_fence_put(fence);
	}
	return left;
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

/* The fence WAIT waits for; a reference, or an ERR_PTR; NULL = done long ago. */
struct dma_fence *rbln_wait_fence(struct drm_file *file,
				  const struct drm_rbln_wait *args)
{
	struct rbln_file *rf = to_rbln_file(file);
	struct dma_fence *fence = NULL;
	struct rbln_queue *q;
	int ret;

	if (args->flags & ~RBLN_WAIT_SYNCOBJ || args->pad || args->job_error ||
	    args->job_detail || args->job_detail_arg || args->sync.flags)
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
		struct rbln_job_detail detail;

		args->job_error = fence->error;
		rbln_fence_detail(fence, &detail);
		args->job_detail = detail.detail;
		args->job_detail_arg = detail.detail_arg;
		ret = 0;
	} else if (!ret) {
		ret = -ETIME;
	}
	dma_fence_put(fence);
	return ret;
}
