/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: the in-fences of a client's jobs (rbln_dep.c).
 *
 * A job that waits for a fence of someone else (an in-syncobj or an
 * implicit fence of a shared buffer, not a job of the same file) waits
 * for a driver fence standing in for it instead.  The stand-in signals
 * when the real fence does, with its error, or with -ECANCELED when the
 * file is released: so the jobs of a released file never wait for a
 * fence that another client, device or driver may never signal.
 */
#ifndef RBLN_DEP_H
#define RBLN_DEP_H

#include <linux/list.h>
#include <linux/spinlock.h>

struct dma_fence;
struct rbln_file;

/* Per file: the stand-ins still waiting for their fence. */
struct rbln_deps {
	/*
	 * Protects list.  Taken inside the fence lock of an in-fence (its
	 * callback), never the other way round; irqsave (fences signal
	 * from interrupt handlers).
	 */
	spinlock_t lock;
	struct list_head list;		/* struct rbln_dep.link */
};

void rbln_deps_init(struct rbln_deps *deps);
struct dma_fence *rbln_dep_wrap(struct rbln_file *rf, struct dma_fence *in);
unsigned int rbln_deps_cancel(struct rbln_deps *deps);

#endif /* RBLN_DEP_H */
