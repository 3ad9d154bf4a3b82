// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: stand-ins for the in-fences of a client's jobs.
 *
 * drm_sched waits for every dependency of a job before it runs it or, for
 * a killed entity, before it fails it: a job whose in-fence is never
 * signalled (a foreign syncobj, a buffer shared with a device that hangs)
 * would keep its file's release, and the memory of its buffers, waiting
 * for it.  So rbln_submit() gives the scheduler a stand-in instead of each
 * such fence: one struct rbln_dep, a fence of its own context that
 * signals when the real one does (with its error), or with -ECANCELED
 * when rbln_deps_cancel() runs at the file's release.  The jobs then go on
 * to run_job(), which fails them (the file's address space is closed by
 * then) without waiting.
 *
 * Fences of the file's own jobs are not wrapped: they end anyway once the
 * file's jobs are cancelled, and drm_sched may pipeline them on a ring.
 *
 * Life of a stand-in: one reference for the job (the scheduler's
 * dependency list), one for the armed callback on the real fence, dropped
 * by the callback or by rbln_deps_cancel() when it disarms it.  While the
 * callback is armed the stand-in is on the file's list.
 */
#include <linux/dma-fence.h>
#include <linux/slab.h>

#include <drm/gpu_scheduler.h>

#include "rbln_dep.h"
#include "rbln_drv.h"

struct rbln_dep {
	struct dma_fence base;
	spinlock_t lock;		/* base's fence lock */
	struct dma_fence *in;		/* the fence stood in for (a reference) */
	struct dma_fence_cb cb;		/* on in, while armed */
	struct rbln_deps *deps;		/* the file's list */
	struct list_head link;		/* in deps->list while armed */
};

static const char *rbln_dep_driver_name(struct dma_fence *f)
{
	return RBLN_DRIVER_NAME;
}

static const char *rbln_dep_timeline_name(struct dma_fence *f)
{
	return "in-fence";
}

static void rbln_dep_release(struct dma_fence *f)
{
	struct rbln_dep *d = container_of(f, struct rbln_dep, base);

	dma_fence_put(d->in);
	dma_fence_free(f);
}

static const struct dma_fence_ops rbln_dep_ops = {
	.get_driver_name = rbln_dep_driver_name,
	.get_timeline_name = rbln_dep_timeline_name,
	.release = rbln_dep_release,
};

/* Exactly once: by the callback, or by the cancel that disarmed it. */
static void rbln_dep_signal(struct rbln_dep *d, int error)
{
	if (error)
		dma_fence_set_error(&d->base, error);
	dma_fence_signal(&d->base);
}

/* The real fence signalled (its lock held). */
static void rbln_dep_cb(struct dma_fence *in, struct dma_fence_cb *cb)
{
	struct rbln_dep *d = container_of(cb, struct rbln_dep, cb);
	unsigned long flags;

	spin_lock_irqsave(&d->deps->lock, flags);
	list_del_init(&d->link);
	spin_unlock_irqrestore(&d->deps->lock, flags);
	rbln_dep_signal(d, in->error);
	dma_fence_put(&d->base);	/* the callback's */
}

void rbln_deps_init(struct rbln_deps *deps)
{
	spin_lock_init(&deps->lock);
	INIT_LIST_HEAD(&deps->list);
}

/*
 * What a job of @rf depends on instead of @in (a reference, consumed): a
 * reference to @in itself when it is signalled already or a job of @rf's,
 * else to a new stand-in; an ERR_PTR if none could be allocated.
 */
struct dma_fence *rbln_dep_wrap(struct rbln_file *rf, struct dma_fence *in)
{
	struct rbln_deps *deps = &rf->deps;
	struct drm_sched_fence *s_fence;
	unsigned long flags;
	struct rbln_dep *d;

	/* The file's own jobs' fences have the file as their owner. */
	s_fence = to_drm_sched_fence(in);
	if (dma_fence_is_signaled(in) || (s_fence && s_fence->owner == rf))
		return in;
	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d) {
		dma_fence_put(in);
		return ERR_PTR(-ENOMEM);
	}
	spin_lock_init(&d->lock);
	/* A context each: drm_sched keeps one dependency per context. */
	dma_fence_init(&d->base, &rbln_dep_ops, &d->lock,
		       dma_fence_context_alloc(1), 1);
	d->in = in;
	d->deps = deps;
	dma_fence_get(&d->base);	/* the callback's */
	spin_lock_irqsave(&deps->lock, flags);
	list_add_tail(&d->link, &deps->list);
	spin_unlock_irqrestore(&deps->lock, flags);
	if (dma_fence_add_callback(in, &d->cb, rbln_dep_cb))
		rbln_dep_cb(in, &d->cb);	/* signalled meanwhile */
	return &d->base;
}

/*
 * At release, and when the card is gone: every stand-in still waiting
 * signals -ECANCELED now; returns how many did.  No submit runs on the
 * file any more, and a callback that rbln_deps_cancel() could not disarm
 * has finished (callbacks run under the fence's lock, which
 * dma_fence_remove_callback() takes): after the release nothing touches
 * @deps.
 */
unsigned int rbln_deps_cancel(struct rbln_deps *deps)
{
	unsigned int cancelled = 0;
	unsigned long flags;
	struct rbln_dep *d;

	spin_lock_irqsave(&deps->lock, flags);
	while ((d = list_first_entry_or_null(&deps->list, struct rbln_dep,
					     link))) {
		list_del_init(&d->link);
		/* The callback's reference holds while it is listed. */
		dma_fence_get(&d->base);
		spin_unlock_irqrestore(&deps->lock, flags);
		if (dma_fence_remove_callback(d->in, &d->cb)) {
			rbln_dep_signal(d, -ECANCELED);
			dma_fence_put(&d->base);	/* the callback's */
			cancelled++;
		}
		dma_fence_put(&d->base);
		spin_lock_irqsave(&deps->lock, flags);
	}
	spin_unlock_irqrestore(&deps->lock, flags);
	return cancelled;
}
