// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: the admin transport (firmware-iface rbln_fw_admin.md) - the record
 * rings in host memory, and the admin ring: one request at a time, its
 * completion found by sequence number.
 *
 * Completion state always comes from memory (phase bits and sequence
 * numbers); an interrupt only wakes whoever waits, because interrupts can
 * merge and the ones raised before MSI-X was enabled are lost.
 */
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/string.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_admin.h"
#include "rbln_fw.h"

/* While waiting for a completion, memory is re-checked at least this often. */
#define RBLN_ADMIN_POLL_MS	10

/* ---- record rings --------------------------------------------------------- */

int rbln_rec_ring_alloc(struct rbln_device *rdev, struct rbln_rec_ring *ring)
{
	size_t size = RBLN_RING_ENTRIES * RBLN_RING_REC_SIZE;

	ring->va = dmam_alloc_coherent(&rdev->pdev->dev, size, &ring->dma,
				       GFP_KERNEL);
	if (!ring->va)
		return -ENOMEM;
	memset(ring->va, 0, size);
	ring->entries = RBLN_RING_ENTRIES;
	ring->idx = 0;
	ring->phase = RBLN_FW_REC_PHASE;
	return 0;
}

static void *rbln_rec_ring_slot(struct rbln_rec_ring *ring)
{
	return ring->va + (size_t)ring->idx * RBLN_RING_REC_SIZE;
}

/* Does the card-written ring hold a record the host has not consumed? */
static bool rbln_rec_ring_pending(struct rbln_rec_ring *ring)
{
	const struct rbln_fw_event *rec = rbln_rec_ring_slot(ring);

	return (READ_ONCE(rec->flags) & RBLN_FW_REC_PHASE) == ring->phase;
}

/* Consumes the next card-written record into @out (64 bytes), if any. */
bool rbln_rec_ring_peek(struct rbln_rec_ring *ring, void *out)
{
	if (!ring->entries || !rbln_rec_ring_pending(ring))
		return false;
	/* The card writes flags last: read the record only after them. */
	dma_rmb();
	memcpy(out, rbln_rec_ring_slot(ring), RBLN_RING_REC_SIZE);
	ring->idx = (ring->idx + 1) & (ring->entries - 1);
	if (!ring->idx)
		ring->phase ^= RBLN_FW_REC_PHASE;
	return true;
}

/* After a card reset: the ring starts empty again. */
void rbln_rec_ring_rewind(struct rbln_rec_ring *ring)
{
	memset(ring->va, 0, RBLN_RING_ENTRIES * RBLN_RING_REC_SIZE);
	ring->idx = 0;
	ring->phase = RBLN_FW_REC_PHASE;
}

/* ---- admin ring --------------------------------------------------------- */

/* MSI-X vector RBLN_FW_IRQ_ADMIN: only wakes the waiter. */
void rbln_admin_irq(struct rbln_device *rdev)
{
	wake_up(&rdev->admin.wq);
}

/* A state change: the waiter looks at the state again. */
void rbln_admin_wake(struct rbln_device *rdev)
{
	wake_up_all(&rdev->admin.wq);
}

/* Consumes completions until the one for @seq; 1 if found, else 0. */
static int rbln_admin_reap(struct rbln_device *rdev, u32 seq,
			   struct rbln_fw_admin_cpl *cpl)
{
	struct rbln_fw_admin_cpl rec;

	while (rbln_rec_ring_peek(&rdev->admin.cq, &rec)) {
		rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_cq_head), rdev->admin.cq.idx);
		if (rec.seq == seq) {
			*cpl = rec;
			return 1;
		}
		/* The answer to a request that timed out, or a corrupt one. */
		rdev->admin.stale++;
		dev_warn_ratelimited(rdev->drm.dev,
				     "discarding admin completion seq %u (waiting for %u)\n",
				     rec.seq, seq);
	}
	return 0;
}

static bool rbln_admin_woken(struct rbln_device *rdev)
{
	return rbln_rec_ring_pending(&rdev->admin.cq) ||
	       rbln_get_state(rdev) != RBLN_STATE_READY;
}

static int rbln_admin_status_errno(u16 status)
{
	switch (status) {
	case RBLN_FW_ST_OK:
		return 0;
	case RBLN_FW_ST_BAD_OPCODE:
		return -EOPNOTSUPP;
	case RBLN_FW_ST_BAD_FIELD:
	case RBLN_FW_ST_BAD_ARG:
		return -EINVAL;
	case RBLN_FW_ST_MMU_FAULT:
		return -EFAULT;
	default:
		return -EIO;
	}
}

static void rbln_admin_timed_out(struct rbln_device *rdev, u32 seq, u16 opcode)
{
	u32 st = rbln_ctrl_rd32(rdev, rbln_ctrl_off(fw_state));

	char reason[64];

	rdev->admin.timeouts++;
	if (st == RBLN_FW_STATE_FAULT) {
		rbln_fw_read_reason(rdev, reason, sizeof(reason));
		rbln_set_fault(rdev, rbln_ctrl_rd32(rdev, rbln_ctrl_off(fault_code)),
			       reason);
		return;
	}
	drm_err(&rdev->drm,
		"admin request seq %u (opcode %u) got no completion within %u ms (firmware state %u)\n",
		seq, opcode, rbln_admin_timeout_ms, st);
	/*
	 * Firmware that lets an admin request sit for admin_timeout_ms is hung:
	 * the card goes to "fault" so later requests fail at once instead of
	 * each waiting out the timeout.  Rebinding (which resets the card)
	 * recovers.
	 */
	rbln_set_fault(rdev, RBLN_FW_FAULT_INTERNAL,
		       "firmware stopped answering admin requests");
}

/* Writes @cmd into the request ring (its seq to *@seq), rings the doorbell. */
static int rbln_admin_post(struct rbln_device *rdev, struct rbln_admin_cmd *cmd,
			   u32 *seq)
{
	struct rbln_rec_ring *sq = &rdev->admin.sq;
	struct rbln_fw_admin_req *req;
	u32 head, next;

	head = rbln_ctrl_rd32(rdev, rbln_ctrl_off(admin_sq_head));
	next = (sq->idx + 1) & (sq->entries - 1);
	if (head >= sq->entries || next == head) {
		drm_err_ratelimited(&rdev->drm,
				    "admin request ring is full or broken (card head %u, host tail %u)\n",
				    head, sq->idx);
		return -EIO;
	}

	*seq = ++rdev->admin.seq;
	if (!*seq)
		*seq = ++rdev->admin.seq;

	req = rbln_rec_ring_slot(sq);
	memset(req, 0, sizeof(*req));
	req->opcode = cmd->opcode;
	req->seq = *seq;
	if (cmd->data_size) {
		if (cmd->in)
			memcpy(rdev->admin.buf, cmd->in, cmd->data_size);
		else
			memset(rdev->admin.buf, 0, cmd->data_size);
		req->data_addr = rdev->admin.buf_dma;
		req->data_len = cmd->data_size;
	}
	memcpy(req->args, cmd->args, sizeof(req->args));
	sq->idx = next;
	/* The request is in memory before the card can see the new tail. */
	wmb();
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_sq_tail), next);
	rbln_doorbell(rdev, RBLN_FW_DB_ADMIN);
	return 0;
}

/* Waits for the completion of request @seq into *@cpl; 0 or -errno. */
static int rbln_admin_wait(struct rbln_device *rdev, struct rbln_admin_cmd *cmd,
			   u32 seq, struct rbln_fw_admin_cpl *cpl)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(rbln_admin_timeout_ms);

	for (;;) {
		bool late = time_after(jiffies, deadline);

		if (rbln_admin_reap(rdev, seq, cpl))
			return 0;
		if (rbln_get_state(rdev) != RBLN_STATE_READY)
			return -EIO;
		if (late) {
			rbln_admin_timed_out(rdev, seq, cmd->opcode);
			return -ETIMEDOUT;
		}
		if (cmd->must_complete) {
			wait_event_timeout(rdev->admin.wq, rbln_admin_woken(rdev),
					   msecs_to_jiffies(RBLN_ADMIN_POLL_MS));
			continue;
		}
		/*
		 * A killed waiter leaves the request behind; its completion
		 * is dropped later by sequence number.
		 */
		if (wait_event_killable_timeout(rdev->admin.wq,
						rbln_admin_woken(rdev),
						msecs_to_jiffies(RBLN_ADMIN_POLL_MS)) < 0)
			return -EINTR;
	}
}

/* The answer @cpl to @cmd: its status as an errno, its result and data. */
static int rbln_admin_answer(struct rbln_device *rdev, struct rbln_admin_cmd *cmd,
			     const struct rbln_fw_admin_cpl *cpl)
{
	int ret;

	ret = rbln_admin_status_errno(cpl->status);
	memcpy(cmd->result, cpl->result, sizeof(cmd->result));
	if (cpl->status == RBLN_FW_ST_MMU_FAULT)
		return ret;	/* reported by the MMU fault event */
	if (ret) {
		drm_err_ratelimited(&rdev->drm, "admin opcode %u failed: status %u (%s)\n",
				    cmd->opcode, cpl->status,
				    rbln_fw_status_name(cpl->status));
		return ret;
	}
	if (cpl->data_len > cmd->data_size) {
		drm_err_ratelimited(&rdev->drm,
				    "admin opcode %u: card claims %u bytes written into a %u-byte buffer\n",
				    cmd->opcode, cpl->data_len, cmd->data_size);
		return -EIO;
	}
	cmd->data_len = cpl->data_len;
	if (cpl->data_len && !cmd->in) {
		/* The card wrote the data before it wrote the completion. */
		dma_rmb();
		memcpy(cmd->data, rdev->admin.buf, cpl->data_len);
	}
	return 0;
}

static int __rbln_admin_exec(struct rbln_device *rdev, struct rbln_admin_cmd *cmd)
{
	struct rbln_fw_admin_cpl cpl;
	u32 seq;
	int ret;

	lockdep_assert_held(&rdev->admin.lock);

	if (rbln_get_state(rdev) != RBLN_STATE_READY)
		return -EIO;
	if (cmd->data_size > PAGE_SIZE)
		return -EINVAL;

	/* Completions of earlier, timed-out requests. */
	rbln_admin_reap(rdev, 0, &cpl);

	ret = rbln_admin_post(rdev, cmd, &seq);
	if (ret)
		return ret;
	ret = rbln_admin_wait(rdev, cmd, seq, &cpl);
	if (ret)
		return ret;
	return rbln_admin_answer(rdev, cmd, &cpl);
}

/*
 * Submits one admin request and waits for its completion (by sequence
 * number, for up to admin_timeout_ms).  Serialised by admin_lock; fails
 * with -ENODEV once the device is unplugged.
 */
int rbln_admin_exec(struct rbln_device *rdev, struct rbln_admin_cmd *cmd)
{
	int idx, ret;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return -ENODEV;
	mutex_lock(&rdev->admin.lock);
	ret = __rbln_admin_exec(rdev, cmd);
	mutex_unlock(&rdev->admin.lock);
	drm_dev_exit(idx);
	return ret;
}

/* Probe, before the IRQs: the lock and the wait queue. */
int rbln_admin_init(struct rbln_device *rdev)
{
	init_waitqueue_head(&rdev->admin.wq);
	return drmm_mutex_init(&rdev->drm, &rdev->admin.lock);
}

/* Probe, with the DMA mask set: the admin rings and the data page. */
int rbln_admin_alloc(struct rbln_device *rdev)
{
	struct rbln_admin *admin = &rdev->admin;
	int ret;

	ret = rbln_rec_ring_alloc(rdev, &admin->sq);
	if (!ret)
		ret = rbln_rec_ring_alloc(rdev, &admin->cq);
	if (ret)
		return ret;
	admin->buf = dmam_alloc_coherent(&rdev->pdev->dev, PAGE_SIZE,
					 &admin->buf_dma, GFP_KERNEL);
	return admin->buf ? 0 : -ENOMEM;
}

/* The addresses the boot handshake gives the card. */
void rbln_admin_ring_dma(struct rbln_device *rdev, dma_addr_t *sq,
			 dma_addr_t *cq)
{
	*sq = rdev->admin.sq.dma;
	*cq = rdev->admin.cq.dma;
}

/* A card restart: no admin request goes to the card until unblocked. */
void rbln_admin_block(struct rbln_device *rdev)
{
	mutex_lock(&rdev->admin.lock);
}

void rbln_admin_unblock(struct rbln_device *rdev)
{
	mutex_unlock(&rdev->admin.lock);
}

/* Blocked, after the card was reset: both admin rings start empty. */
void rbln_admin_rewind(struct rbln_device *rdev)
{
	lockdep_assert_held(&rdev->admin.lock);
	rbln_rec_ring_rewind(&rdev->admin.sq);
	rbln_rec_ring_rewind(&rdev->admin.cq);
}

/* debugfs control_block: the driver's view of the admin ring. */
void rbln_admin_show(struct rbln_device *rdev, struct seq_file *m)
{
	struct rbln_admin *admin = &rdev->admin;

	mutex_lock(&admin->lock);
	seq_printf(m, "%-18s %u\n", "admin_seq", admin->seq);
	seq_printf(m, "%-18s %u/%u phase %u\n", "admin_cq", admin->cq.idx,
		   admin->cq.entries, admin->cq.phase);
	seq_printf(m, "%-18s %llu\n", "admin_timeouts", admin->timeouts);
	seq_printf(m, "%-18s %llu\n", "admin_stale", admin->stale);
	mutex_unlock(&admin->lock);
}
