// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: io_uring passthrough (IORING_OP_URING_CMD) for SUBMIT and WAIT.
 *
 * The payload in sqe->cmd is the ioctl's struct (so the ring must use
 * SQE128), and the CQE is posted when the job or fence is done, with the
 * seqno in the CQE32 extra (so the ring must use CQE32).  The submit and
 * wait paths are the ioctls' own (rbln_submit(), rbln_wait_fence()).
 *
 * A pending command holds a fence callback (and, for a WAIT with a
 * deadline, an hrtimer).  Exactly one of "fence signalled", "deadline
 * passed" and "ring cancelled" claims the command and completes it; the
 * completion itself runs in the submitter's task context.
 */
#include <linux/dma-fence.h>
#include <linux/hrtimer.h>
#include <linux/io_uring/cmd.h>
#include <linux/ktime.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>

#include "rbln_drv.h"
#include "rbln_job.h"
#include "rbln_queue.h"

struct rbln_uring_req {
	struct kref ref;		/* the arming path + the completion */
	struct io_uring_cmd *cmd;
	struct dma_fence *fence;
	struct dma_fence_cb cb;
	struct hrtimer timer;
	bool has_timer;
	atomic_t claimed;
	int result;
	u64 res2;
};

struct rbln_uring_pdu {
	struct rbln_uring_req *req;
};

static inline struct rbln_uring_pdu *rbln_pdu(struct io_uring_cmd *cmd)
{
	return io_uring_cmd_to_pdu(cmd, struct rbln_uring_pdu);
}

static void rbln_uring_release(struct kref *ref)
{
	struct rbln_uring_req *req = container_of(ref, struct rbln_uring_req, ref);

	if (req->has_timer)
		hrtimer_cancel(&req->timer);
	dma_fence_put(req->fence);
	kfree(req);
}

static void rbln_uring_put(struct rbln_uring_req *req)
{
	kref_put(&req->ref, rbln_uring_release);
}

static void rbln_uring_done(struct io_uring_cmd *cmd, int ret, u64 res2,
			    unsigned int issue_flags)
{
	rbln_io_uring_cmd_done(cmd, ret, res2, issue_flags);
}

static void rbln_uring_task_work(struct io_uring_cmd *cmd,
				 unsigned int issue_flags)
{
	struct rbln_uring_req *req = rbln_pdu(cmd)->req;

	rbln_uring_done(cmd, req->result, req->res2, issue_flags);
	rbln_uring_put(req);
}

/* Claims @req for completion with @result; false if someone else did. */
static bool rbln_uring_claim(struct rbln_uring_req *req, int result)
{
	if (atomic_xchg(&req->claimed, 1))
		return false;
	req->result = result;
	return true;
}

static void rbln_uring_fence_cb(struct dma_fence *fence, struct dma_fence_cb *cb)
{
	struct rbln_uring_req *req = container_of(cb, struct rbln_uring_req, cb);

	/*
	 * Lazy wake-up: on a DEFER_TASKRUN ring the waiting task is woken once
	 * as many completions as it waits for are queued, not for each one.
	 */
	if (rbln_uring_claim(req, fence->error))
		io_uring_cmd_do_in_task_lazy(req->cmd, rbln_uring_task_work);
}

static enum hrtimer_restart rbln_uring_deadline(struct hrtimer *t)
{
	struct rbln_uring_req *req = container_of(t, struct rbln_uring_req, timer);

	if (dma_fence_remove_callback(req->fence, &req->cb) &&
	    rbln_uring_claim(req, -ETIME))
		io_uring_cmd_complete_in_task(req->cmd, rbln_uring_task_work);
	return HRTIMER_NORESTART;
}

/*
 * Ring or task teardown: complete a still pending command now.  The ring's
 * end calls this from a kernel worker (io_ring_exit_work) while the
 * submitter may still live; a ring with deferred task work may post CQEs
 * only from the submitter, so the completion is not deferred to this
 * caller's flush but handed to the submitter as task work (the command
 * leaves the cancelable list at once either way).
 */
static int rbln_uring_cancel(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct rbln_uring_req *req = rbln_pdu(cmd)->req;

	if (!dma_fence_remove_callback(req->fence, &req->cb) ||
	    !rbln_uring_claim(req, -ECANCELED))
		return 0;	/* its completion is on the way */
	rbln_uring_done(cmd, -ECANCELED, req->res2,
			issue_flags & ~IO_URING_F_COMPLETE_DEFER);
	rbln_uring_put(req);
	return 0;
}

/*
 * Arms completion of @cmd on @fence (a reference, taken over).  Always
 * ends the issue with -EIOCBQUEUED: the CQE comes from
 * io_uring_cmd_done(), which carries res2.
 */
static int rbln_uring_arm(struct io_uring_cmd *cmd, struct dma_fence *fence,
			  u64 res2, s64 deadline_ns, unsigned int issue_flags)
{
	struct rbln_uring_req *req;
	int ret;

	req = kzalloc(sizeof(*req), GFP_KERNEL);
	if (!req) {
		dma_fence_put(fence);
		return -ENOMEM;
	}
	kref_init(&req->ref);
	kref_get(&req->ref);	/* the completion's */
	INIT_LIST_HEAD(&req->cb.node);
	req->cmd = cmd;
	req->fence = fence;
	req->res2 = res2;
	rbln_pdu(cmd)->req = req;

	io_uring_cmd_mark_cancelable(cmd, issue_flags);
	ret = dma_fence_add_callback(fence, &req->cb, rbln_uring_fence_cb);
	if (ret) {
		/* Signalled already. */
		rbln_uring_claim(req, fence->error);
		rbln_uring_done(cmd, req->result, res2, issue_flags);
		rbln_uring_put(req);
	} else if (deadline_ns) {
		hrtimer_init(&req->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
		req->timer.function = rbln_uring_deadline;
		req->has_timer = true;
		hrtimer_start(&req->timer, ns_to_ktime(deadline_ns),
			      HRTIMER_MODE_ABS);
	}
	rbln_uring_put(req);	/* the arming path's */
	return -EIOCBQUEUED;
}

static int rbln_uring_submit(struct drm_file *file, struct io_uring_cmd *cmd,
			     unsigned int issue_flags)
{
	struct drm_rbln_submit args;
	struct dma_fence *fence;
	int ret;

	memcpy(&args, io_uring_sqe_cmd(cmd->sqe), sizeof(args));
	args.seqno = 0;
	ret = rbln_submit(file, &args, &fence);
	if (ret)
		return ret;
	return rbln_uring_arm(cmd, fence, args.seqno, 0, issue_flags);
}

static int rbln_uring_wait(struct drm_file *file, struct io_uring_cmd *cmd,
			   unsigned int issue_flags)
{
	struct drm_rbln_wait args;
	struct dma_fence *fence;
	u64 res2;

	memcpy(&args, io_uring_sqe_cmd(cmd->sqe), sizeof(args));
	args.job_error = 0;
	args.job_detail = 0;
	args.job_detail_arg = 0;
	fence = rbln_wait_fence(file, &args);
	if (IS_ERR(fence))
		return PTR_ERR(fence);
	res2 = args.flags & RBLN_WAIT_SYNCOBJ ? 0 : args.seqno;
	if (!fence) {
		rbln_uring_done(cmd, 0, res2, issue_flags);
		return -EIOCBQUEUED;
	}
	if (args.timeout_ns && args.timeout_ns <= ktime_get_ns() &&
	    !dma_fence_is_signaled(fence)) {
		dma_fence_put(fence);
		rbln_uring_done(cmd, -ETIME, res2, issue_flags);
		return -EIOCBQUEUED;
	}
	return rbln_uring_arm(cmd, fence, res2, args.timeout_ns, issue_flags);
}

/* file_operations.uring_cmd of the accel node. */
int rbln_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct drm_file *file = cmd->file->private_data;
	struct drm_device *drm = file->minor->dev;
	int idx, ret;

	if (issue_flags & IO_URING_F_CANCEL)
		return rbln_uring_cancel(cmd, issue_flags);

	static_assert(sizeof(struct drm_rbln_submit) <= 80);
	static_assert(sizeof(struct drm_rbln_wait) <= 80);
	/* The payload needs the 128-byte SQE, the seqno the 32-byte CQE. */
	if (!(issue_flags & IO_URING_F_SQE128) || !(issue_flags & IO_URING_F_CQE32))
		return -EINVAL;
	if (cmd->sqe->uring_cmd_flags)
		return -EINVAL;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	switch (cmd->cmd_op) {
	case RBLN_URING_CMD_SUBMIT:
		ret = rbln_uring_submit(file, cmd, issue_flags);
		break;
	case RBLN_URING_CMD_WAIT:
		ret = rbln_uring_wait(file, cmd, issue_flags);
		break;
	default:
		ret = -EOPNOTSUPP;
		break;
	}
	drm_dev_exit(idx);
	return ret;
}
