// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: command rings (firmware-iface rbln_fw_cmd.h), the jobs' hardware
 * fences, and the drm_sched backend (run_job, timedout_job, free_job): one
 * ring and one scheduler per chiplet.
 *
 * Each chiplet has one hardware ring.  drm_sched resolves a job's
 * dependencies (in-fences, implicit fences of its buffers) and calls
 * run_job() in order; run_job() writes the job descriptor, rings the
 * doorbell and returns the job's hardware fence, which the completion
 * interrupt signals (with the job's error, if any) in ring order.
 *
 * Recovery: a job that exceeds job_timeout_ms (a hung chiplet, a wrong
 * completion) stops the ring's scheduler, RING_STOP aborts what the card
 * still holds, the guilty job's fence gets -ETIMEDOUT, the ring is set up
 * anew and the innocent jobs behind it are written again, in order.  The
 * other rings keep running throughout.
 */
#include <linux/dma-fence.h>
#include <linux/dma-fence-chain.h>
#include <linux/dma-mapping.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/gpu_scheduler.h>

#include "rbln_drv.h"
#include "rbln_job.h"
#include "rbln_queue.h"

static const char *rbln_fence_driver_name(struct dma_fence *f)
{
	return RBLN_DRIVER_NAME;
}

static const char *rbln_fence_timeline_name(struct dma_fence *f)
{
	return "rbln-ring";
}

static const struct dma_fence_ops rbln_hw_fence_ops = {
	.get_driver_name = rbln_fence_driver_name,
	.get_timeline_name = rbln_fence_timeline_name,
};

/*
 * A job's hardware fence.  @base comes first: the default release frees
 * the whole struct through it.  @detail is written before the fence is
 * signalled and never after.
 */
struct rbln_hw_fence {
	struct dma_fence base;
	struct rbln_job_detail detail;
};

static struct rbln_hw_fence *to_rbln_hw_fence(struct dma_fence *f)
{
	BUILD_BUG_ON(offsetof(struct rbln_hw_fence, base) != 0);
	return container_of(f, struct rbln_hw_fence, base);
}

/*
 * The detail of the job behind @fence, once @fence is signalled: a
 * hardware fence, a job's finished fence (what queues and syncobjs hold)
 * or a syncobj timeline point that contains one.  Anything else (another
 * driver's fence, a job that never ran) reads as no detail.
 */
void rbln_fence_detail(struct dma_fence *fence, struct rbln_job_detail *out)
{
	struct drm_sched_fence *s_fence;

	out->detail = 0;
	out->detail_arg = 0;
	if (!fence || !dma_fence_is_signaled(fence))
		return;
	fence = dma_fence_chain_contained(fence);
	s_fence = to_drm_sched_fence(fence);
	if (s_fence) {
		/* Set before run_job's fence can signal the finished one. */
		fence = READ_ONCE(s_fence->parent);
		if (!fence)
			return;
	}
	if (fence->ops != &rbln_hw_fence_ops)
		return;
	*out = to_rbln_hw_fence(fence)->detail;
}

static int rbln_job_status_errno(u16 status)
{
	switch (status) {
	case RBLN_FW_JOB_OK:
		return 0;
	case RBLN_FW_JOB_MMU_FAULT:
		return -EFAULT;
	case RBLN_FW_JOB_BAD_JOB:
	case RBLN_FW_JOB_BAD_PACKET:
		return -EINVAL;
	case RBLN_FW_JOB_PRIVILEGED:
		return -EPERM;
	case RBLN_FW_JOB_WAIT_TIMEOUT:
		return -ETIMEDOUT;
	case RBLN_FW_JOB_CANCELLED:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

static void rbln_ring_write_job(struct rbln_cmd_ring *ring, struct rbln_job *job)
{
	struct rbln_fw_job *d;

	lockdep_assert_held(&ring->lock);
	d = &ring->jobs[ring->tail];
	memset(d, 0, sizeof(*d));
	d->seqno = job->hw_seqno;
	d->asid = job->asid;
	d->flags = RBLN_FW_JOB_IRQ;
	/* A fault stops the client's jobs already on the rings too (1.3). */
	if (job->asid && ring->rdev->id.iface_minor >= 3)
		d->flags |= RBLN_FW_JOB_FAULT_ABORTS;
	d->cmd_addr = job->cmd_va;
	d->cmd_size = job->cmd_size;
	ring->tail = (ring->tail + 1) & (ring->entries - 1);
	/* The descriptor is in memory before the card sees the new tail. */
	dma_wmb();
	WRITE_ONCE(ring->ctrl->job_tail, ring->tail);
}

static struct dma_fence *rbln_run_job(struct drm_sched_job *sched_job)
{
	struct rbln_cmd_ring *ring = container_of(sched_job->sched,
						  struct rbln_cmd_ring, sched);
	struct rbln_job *job = to_rbln_job(sched_job);
	struct rbln_device *rdev = ring->rdev;
	struct rbln_hw_fence *hw;
	struct dma_fence *fence;
	unsigned long flags;
	int idx;

	job->ring = ring;
	/* A dependency failed, or the queue was torn down. */
	if (sched_job->s_fence->finished.error)
		return NULL;
	/* A faulted address space runs nothing more. */
	if (rbln_vm_faulted(job->vm))
		return ERR_PTR(-EFAULT);
	/* Nor does one whose file is gone (rbln_vm_close()). */
	if (rbln_vm_closed(job->vm))
		return ERR_PTR(-ECANCELED);
	/* Nor does a faulted card that no recovery will bring back. */
	if (rbln_get_state(rdev) == RBLN_STATE_FAULT &&
	    !rbln_reset_pending(rdev))
		return ERR_PTR(-EIO);
	if (!drm_dev_enter(&rdev->drm, &idx))
		return ERR_PTR(-ENODEV);

	hw = kzalloc(sizeof(*hw), GFP_KERNEL);
	if (!hw) {
		drm_dev_exit(idx);
		return ERR_PTR(-ENOMEM);
	}
	fence = &hw->base;
	spin_lock_irqsave(&ring->lock, flags);
	job->hw_seqno = ++ring->hw_seqno;
	dma_fence_init(fence, &rbln_hw_fence_ops, &ring->fence_lock,
		       ring->fence_context, job->hw_seqno);
	job->hw_fence = dma_fence_get(fence);
	list_add_tail(&job->ring_link, &ring->pending);
	rbln_ring_write_job(ring, job);
	spin_unlock_irqrestore(&ring->lock, flags);
	rbln_doorbell(rdev, RBLN_FW_DB_RING);
	drm_dev_exit(idx);
	return fence;
}

/* Ring lock held: the oldest pending job is done with @err. */
static void rbln_ring_retire(struct rbln_cmd_ring *ring, struct rbln_job *job,
			     int err, u64 start_ns, u64 end_ns)
{
	lockdep_assert_held(&ring->lock);
	list_del_init(&job->ring_link);
	if (end_ns > start_ns)
		atomic64_add(end_ns - start_ns, &job->queue->rf->busy_ns[ring->index]);
	if (err)
		dma_fence_set_error(job->hw_fence, err);
	dma_fence_signal(job->hw_fence);
}

/*
 * Completion interrupt (and recovery): consume new completions.
 *
 * The card raises the ring vector for a record only if the host had read
 * every earlier one ("Interrupt moderation" in firmware-iface
 * rbln_fw_cmd.md), so the host publishes cpl_head and then looks at the
 * next record once more (a full barrier in between): either it sees the
 * record, or the card sees the new cpl_head and raises the vector.
 * @polled: called by the watchdog's poll, not for an interrupt (the jobs it
 * retires are counted in cpls_polled).
 */
static void __rbln_ring_process(struct rbln_cmd_ring *ring, bool polled)
{
	struct rbln_device *rdev = ring->rdev;
	unsigned long flags;
	bool unpublished = false;
	int err;

	spin_lock_irqsave(&ring->lock, flags);
	while (ring->up) {
		struct rbln_fw_job_cpl *c = &ring->cpls[ring->cpl_head];
		struct rbln_fw_job_cpl cpl;
		struct rbln_job *job;

		if ((READ_ONCE(c->flags) & RBLN_FW_REC_PHASE) !=
		    ring->cpl_phase) {
			if (!unpublished)
				break;
			WRITE_ONCE(ring->ctrl->cpl_head, ring->cpl_head);
			unpublished = false;
			smp_mb();	/* cpl_head out before the phase is read */
			continue;
		}
		/* The record is complete once its phase is. */
		dma_rmb();
		memcpy(&cpl, c, sizeof(cpl));
		ring->cpl_head = (ring->cpl_head + 1) & (ring->entries - 1);
		if (!ring->cpl_head)
			ring->cpl_phase ^= RBLN_FW_REC_PHASE;
		unpublished = true;

		if (cpl.status == RBLN_FW_JOB_ABORTED && ring->recovering)
			continue;	/* written again after the reset */
		job = list_first_entry_or_null(&ring->pending, struct rbln_job,
					       ring_link);
		if (!job || job->hw_seqno != cpl.seqno) {
			ring->bad_cpls++;
			dev_err_ratelimited(rdev->drm.dev,
					    "ring %u: completion for seqno %llu status %u, expected seqno %llu: ignored\n",
					    ring->index, cpl.seqno, cpl.status,
					    job ? job->hw_seqno : 0);
			continue;
		}
		if (cpl.status != RBLN_FW_JOB_OK)
			dev_dbg(rdev->drm.dev, "ring %u: job %llu failed: status %u at packet %u, detail %u/%u\n",
				ring->index, cpl.seqno, cpl.status, cpl.packet_offset,
				cpl.detail, cpl.detail_arg);
		err = rbln_job_status_errno(cpl.status);
		/*
		 * Only a released file's VM is aborted (VM_ABORT); any other
		 * CANCELLED job followed a faulting one (FAULT_ABORTS), maybe
		 * on another ring whose record is not read yet.
		 */
		if (cpl.status == RBLN_FW_JOB_CANCELLED &&
		    !rbln_vm_closed(job->vm))
			err = -EFAULT;
		/* Its later jobs fail too (the event counts the fault). */
		if (err == -EFAULT)
			rbln_vm_set_faulted(job->vm);
		if (polled)	/* counted before a waiter can look */
			ring->cpls_polled++;
		if (err) {	/* firmware before 1.4 leaves them 0 */
			struct rbln_hw_fence *hw = to_rbln_hw_fence(job->hw_fence);

			hw->detail.detail = cpl.detail;
			hw->detail.detail_arg = cpl.detail_arg;
		}
		rbln_ring_retire(ring, job, err, cpl.start_ns, cpl.end_ns);
	}
	if (unpublished)	/* the ring went down meanwhile */
		WRITE_ONCE(ring->ctrl->cpl_head, ring->cpl_head);
	spin_unlock_irqrestore(&ring->lock, flags);
}

static void rbln_ring_process(struct rbln_cmd_ring *ring)
{
	__rbln_ring_process(ring, false);
}

/*
 * Watchdog (every 500 ms, module parameter ring_poll): completions whose
 * interrupt was lost, or is still on its way, are consumed here.  Safe at
 * any time, as the interrupt handler is.
 */
void rbln_rings_poll(struct rbln_device *rdev)
{
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++)
		__rbln_ring_process(&rdev->rings.ring[i], true);
}

/*
 * The card counts the ring's busy time in the control block from each
 * RING_SETUP on; the driver keeps what earlier set-ups counted, so the
 * total never goes back.
 */
static u64 __rbln_ring_busy_ns(struct rbln_cmd_ring *ring)
{
	unsigned long flags;
	u64 busy;

	spin_lock_irqsave(&ring->lock, flags);
	busy = ring->busy_base + READ_ONCE(ring->ctrl->busy_ns);
	spin_unlock_irqrestore(&ring->lock, flags);
	return busy;
}

/* Ring lock held. */
static void rbln_ring_reset_memory(struct rbln_cmd_ring *ring)
{
	ring->busy_base += READ_ONCE(ring->ctrl->busy_ns);
	memset(ring->jobs, 0, ring->entries * sizeof(*ring->jobs));
	memset(ring->cpls, 0, ring->entries * sizeof(*ring->cpls));
	memset(ring->ctrl, 0, sizeof(*ring->ctrl));
	ring->tail = 0;
	ring->cpl_head = 0;
	ring->cpl_phase = RBLN_FW_REC_PHASE;
}

static int rbln_ring_setup_fw(struct rbln_cmd_ring *ring)
{
	return rbln_msg_ring_setup(ring->rdev, ring->index, ring->entries,
				   ring->jobs_dma, ring->cpls_dma, ring->ctrl_dma);
}

/* Fails every job the ring still holds with @err (scheduler stopped). */
static void rbln_ring_fail_pending(struct rbln_cmd_ring *ring, int err)
{
	struct rbln_job *job;
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	while ((job = list_first_entry_or_null(&ring->pending, struct rbln_job,
					       ring_link)))
		rbln_ring_retire(ring, job, err, 0, 0);
	spin_unlock_irqrestore(&ring->lock, flags);
}

/*
 * After a card reset (the card forgot the ring): the jobs it held fail
 * with @err, the ring starts empty and is set up again.
 */
static int rbln_ring_restart(struct rbln_cmd_ring *ring, int err)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&ring->lock, flags);
	ring->up = false;
	spin_unlock_irqrestore(&ring->lock, flags);
	rbln_ring_fail_pending(ring, err);
	spin_lock_irqsave(&ring->lock, flags);
	rbln_ring_reset_memory(ring);
	spin_unlock_irqrestore(&ring->lock, flags);
	ret = rbln_ring_setup_fw(ring);
	if (ret)
		return ret;
	spin_lock_irqsave(&ring->lock, flags);
	ring->up = true;
	spin_unlock_irqrestore(&ring->lock, flags);
	return 0;
}

/*
 * drm_sched_stop() detached the scheduler from the hardware fences of the
 * jobs it still tracks.  The reset has since failed some of them (their
 * hardware fences carry the error) and written the others to the ring
 * again: give every job its hardware fence back and restart the
 * scheduler, which completes the failed jobs with their error at once and
 * waits for the others.
 */
static void rbln_ring_sched_resume(struct rbln_cmd_ring *ring)
{
	struct drm_sched_job *s_job;

	list_for_each_entry(s_job, &ring->sched.pending_list, list) {
		struct rbln_job *job = to_rbln_job(s_job);

		if (!s_job->s_fence->parent && job->hw_fence)
			s_job->s_fence->parent = dma_fence_get(job->hw_fence);
	}
	drm_sched_start(&ring->sched);
}

/* Ring reset: RING_STOP, @bad fails with -ETIMEDOUT, the rest run again. */
static void rbln_ring_reset(struct rbln_cmd_ring *ring, struct rbln_job *bad)
{
	struct rbln_device *rdev = ring->rdev;
	struct rbln_job *job;
	unsigned long flags;
	int ret;

	drm_warn(&rdev->drm, "ring %u: job %llu did not complete within %u ms: resetting the ring\n",
		 ring->index, bad->hw_seqno, rbln_job_timeout_ms);
	spin_lock_irqsave(&ring->lock, flags);
	ring->recovering = true;
	/* Which side lost track: the card's view next to the host's. */
	drm_warn(&rdev->drm, "ring %u: host tail %u cpl_head %u; card head %u done_seqno %llu; next record %s\n",
		 ring->index, ring->tail, ring->cpl_head,
		 READ_ONCE(ring->ctrl->job_head),
		 READ_ONCE(ring->ctrl->done_seqno),
		 (READ_ONCE(ring->cpls[ring->cpl_head].flags) &
		  RBLN_FW_REC_PHASE) == ring->cpl_phase ?
		 "written, not consumed" : "not written");
	spin_unlock_irqrestore(&ring->lock, flags);
	ret = rbln_msg_ring_stop(rdev, ring->index);
	rbln_ring_process(ring);	/* completions written before the stop */

	spin_lock_irqsave(&ring->lock, flags);
	ring->up = false;
	if (!list_empty(&bad->ring_link))
		rbln_ring_retire(ring, bad, -ETIMEDOUT, 0, 0);
	rbln_ring_reset_memory(ring);
	spin_unlock_irqrestore(&ring->lock, flags);

	if (!ret)
		ret = rbln_ring_setup_fw(ring);

	spin_lock_irqsave(&ring->lock, flags);
	ring->recovering = false;
	if (ret) {
		/* The card is gone or broken: fail everything still pending. */
		while ((job = list_first_entry_or_null(&ring->pending,
						       struct rbln_job, ring_link)))
			rbln_ring_retire(ring, job, -EIO, 0, 0);
	} else {
		ring->up = true;
		list_for_each_entry(job, &ring->pending, ring_link)
			rbln_ring_write_job(ring, job);
	}
	ring->resets++;
	spin_unlock_irqrestore(&ring->lock, flags);
	if (!ret)
		rbln_doorbell(rdev, RBLN_FW_DB_RING);
	else
		drm_err(&rdev->drm, "ring %u: could not be set up again (%d)\n",
			ring->index, ret);
	rbln_sysfs_ring_reset(rdev, ring->index);
}

static enum drm_gpu_sched_stat rbln_timedout_job(struct drm_sched_job *sched_job)
{
	struct rbln_job *bad = to_rbln_job(sched_job);
	struct rbln_cmd_ring *ring = bad->ring;
	struct rbln_device *rdev = ring->rdev;
	unsigned long flags;
	bool on_ring;

	rbln_reset_lock(rdev);
	/* Puts @bad back at the head of the scheduler's list. */
	drm_sched_stop(&ring->sched, sched_job);
	/* A job whose record is there but whose interrupt was lost is done. */
	rbln_ring_process(ring);
	spin_lock_irqsave(&ring->lock, flags);
	on_ring = !list_empty(&bad->ring_link);
	spin_unlock_irqrestore(&ring->lock, flags);

	if (!on_ring) {
		/* It completed (interrupt lost), or a card recovery failed it. */
		drm_warn(&rdev->drm, "ring %u: job %llu was done, but no completion interrupt came within %u ms\n",
			 ring->index, bad->hw_seqno, rbln_job_timeout_ms);
	} else if (rbln_get_state(rdev) == RBLN_STATE_READY) {
		rbln_ring_reset(ring, bad);
	} else if (!rbln_reset_pending(rdev)) {
		/* A faulted card nobody recovers completes nothing more. */
		rbln_ring_fail_pending(ring, -EIO);
	}
	/* else the queued card recovery fails the ring's jobs with -EIO */
	rbln_ring_sched_resume(ring);
	rbln_reset_unlock(rdev);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static void rbln_free_job(struct drm_sched_job *sched_job)
{
	struct rbln_job *job = to_rbln_job(sched_job);

	drm_sched_job_cleanup(sched_job);
	rbln_job_free(job);
}

static const struct drm_sched_backend_ops rbln_sched_ops = {
	.run_job = rbln_run_job,
	.timedout_job = rbln_timedout_job,
	.free_job = rbln_free_job,
};

static void rbln_rings_fini(struct drm_device *drm, void *arg)
{
	struct rbln_device *rdev = to_rbln(drm);
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++)
		if (rdev->rings.ring[i].sched_ready)
			drm_sched_fini(&rdev->rings.ring[i].sched);
}

static int rbln_ring_init(struct rbln_device *rdev, struct rbln_cmd_ring *ring,
			  u32 index)
{
	struct device *dev = rdev->drm.dev;
	char *name;
	int ret;

	ring->rdev = rdev;
	ring->index = index;
	ring->entries = RBLN_CMD_RING_ENTRIES;
	spin_lock_init(&ring->lock);
	spin_lock_init(&ring->fence_lock);
	INIT_LIST_HEAD(&ring->pending);
	ring->fence_context = dma_fence_context_alloc(1);
	ring->jobs = dmam_alloc_coherent(dev, ring->entries * sizeof(*ring->jobs),
					 &ring->jobs_dma, GFP_KERNEL);
	ring->cpls = dmam_alloc_coherent(dev, ring->entries * sizeof(*ring->cpls),
					 &ring->cpls_dma, GFP_KERNEL);
	ring->ctrl = dmam_alloc_coherent(dev, sizeof(*ring->ctrl),
					 &ring->ctrl_dma, GFP_KERNEL);
	if (!ring->jobs || !ring->cpls || !ring->ctrl)
		return -ENOMEM;
	rbln_ring_reset_memory(ring);

	name = devm_kasprintf(dev, GFP_KERNEL, "rbln-ring%u@%s", index,
			      pci_name(rdev->pdev));
	if (!name)
		return -ENOMEM;
	ret = rbln_sched_init(&ring->sched, &rbln_sched_ops,
			      ring->entries - 1,
			      msecs_to_jiffies(rbln_job_timeout_ms), name, dev);
	if (ret) {
		drm_err(&rdev->drm, "ring %u: scheduler: %d\n", index, ret);
		return ret;
	}
	ring->sched_ready = true;

	ret = rbln_ring_setup_fw(ring);
	if (ret) {
		drm_err(&rdev->drm, "ring %u: RING_SETUP failed: %d\n", index, ret);
		return ret;
	}
	ring->up = true;
	return 0;
}

/* One ring per chiplet, once the admin ring works. */
int rbln_rings_init(struct rbln_device *rdev)
{
	unsigned int i;
	int ret;

	if (!rbln_pci_has_ring_irq(rdev)) {
		drm_info(&rdev->drm, "the card has no command rings (firmware-iface %u.%u, %u vectors): no jobs\n",
			 rdev->id.iface_major, rdev->id.iface_minor,
			 rdev->id.num_vectors);
		return 0;
	}
	ret = drmm_add_action(&rdev->drm, rbln_rings_fini, NULL);
	if (ret)
		return ret;
	for (i = 0; i < rdev->id.chiplet_count; i++) {
		ret = rbln_ring_init(rdev, &rdev->rings.ring[i], i);
		rdev->rings.count = i + 1;
		if (ret)
			return ret;
	}
	return 0;
}

/* Ring interrupt (hard-irq context). */
void rbln_rings_irq(struct rbln_device *rdev)
{
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++)
		rbln_ring_process(&rdev->rings.ring[i]);
}

/* ---- for the other files ------------------------------------------------ */

/* Number of command rings: one per chiplet, 0 on a card without them. */
u32 rbln_rings_count(struct rbln_device *rdev)
{
	return rdev->rings.count;
}

/* The scheduler of @chiplet's ring (chiplet < rbln_rings_count()). */
struct drm_gpu_scheduler *rbln_ring_sched(struct rbln_device *rdev, u32 chiplet)
{
	return &rdev->rings.ring[chiplet].sched;
}

/* Card time @chiplet's ring spent running jobs, ns; 0 without the ring. */
u64 rbln_ring_busy_ns(struct rbln_device *rdev, u32 chiplet)
{
	if (chiplet >= rdev->rings.count)
		return 0;
	return __rbln_ring_busy_ns(&rdev->rings.ring[chiplet]);
}

/* Ring resets of @chiplet's ring (hung jobs); 0 without the ring. */
u64 rbln_ring_resets(struct rbln_device *rdev, u32 chiplet)
{
	if (chiplet >= rdev->rings.count)
		return 0;
	return READ_ONCE(rdev->rings.ring[chiplet].resets);
}

/* Jobs of @chiplet's ring the watchdog's poll retired; 0 without the ring. */
u64 rbln_ring_cpls_polled(struct rbln_device *rdev, u32 chiplet)
{
	if (chiplet >= rdev->rings.count)
		return 0;
	return READ_ONCE(rdev->rings.ring[chiplet].cpls_polled);
}

/* Card recovery, under reset_lock: every ring's scheduler stops. */
void rbln_rings_stop(struct rbln_device *rdev)
{
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++)
		drm_sched_stop(&rdev->rings.ring[i].sched, NULL);
}

/*
 * Card recovery, after the card was reset: every ring fails the jobs the
 * card held with @err and is set up again.  Stops at the first ring that
 * cannot be set up; 0 or its error.
 */
int rbln_rings_restart(struct rbln_device *rdev, int err)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < rdev->rings.count && !ret; i++)
		ret = rbln_ring_restart(&rdev->rings.ring[i], err);
	return ret;
}

/* Card recovery gave up: every job still on a ring fails with @err. */
void rbln_rings_fail_pending(struct rbln_device *rdev, int err)
{
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++)
		rbln_ring_fail_pending(&rdev->rings.ring[i], err);
}

/* End of a card recovery: the schedulers run again. */
void rbln_rings_resume(struct rbln_device *rdev)
{
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++)
		rbln_ring_sched_resume(&rdev->rings.ring[i]);
}

/* The driver's view of each ring next to the card's, for a devcoredump. */
void rbln_rings_dump(struct rbln_device *rdev, struct drm_printer *p)
{
	unsigned int i;

	for (i = 0; i < rdev->rings.count; i++) {
		struct rbln_cmd_ring *r = &rdev->rings.ring[i];

		drm_printf(p, "ring %u: up %d tail %u cpl_head %u hw_seqno %llu\n",
			   i, r->up, r->tail, r->cpl_head, r->hw_seqno);
		drm_printf(p, "ring %u: job_head %u done_seqno %llu resets %llu bad_cpls %llu\n",
			   i, READ_ONCE(r->ctrl->job_head),
			   READ_ONCE(r->ctrl->done_seqno), r->resets, r->bad_cpls);
	}
}
