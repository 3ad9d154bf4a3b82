// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: firmware-iface v1 - identity, boot handshake, reset, admin ring
 * and event ring (firmware-iface/rbln_fw_ctrl.md, rbln_fw_admin.md).
 *
 * Completion state always comes from memory (phase bits and sequence
 * numbers); an interrupt only wakes whoever waits, because interrupts can
 * merge and the ones raised before MSI-X was enabled are lost.
 */
#include <linux/build_bug.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"

/* The contract's layout, as the spec fixes it. */
static_assert(sizeof(struct rbln_fw_ctrl) == 0x1000);
static_assert(offsetof(struct rbln_fw_ctrl, uuid) == 0x020);
static_assert(offsetof(struct rbln_fw_ctrl, serial) == 0x030);
static_assert(offsetof(struct rbln_fw_ctrl, fw_version) == 0x050);
static_assert(offsetof(struct rbln_fw_ctrl, bar_size) == 0x070);
static_assert(offsetof(struct rbln_fw_ctrl, hbm) == 0x078);
static_assert(offsetof(struct rbln_fw_ctrl, fw_state) == 0x0f8);
static_assert(offsetof(struct rbln_fw_ctrl, fault_reason) == 0x100);
static_assert(offsetof(struct rbln_fw_ctrl, host_ack) == 0x140);
static_assert(offsetof(struct rbln_fw_ctrl, heartbeat) == 0x148);
static_assert(offsetof(struct rbln_fw_ctrl, host_ctrl) == 0x150);
static_assert(offsetof(struct rbln_fw_ctrl, admin_sq_addr) == 0x160);
static_assert(offsetof(struct rbln_fw_ctrl, admin_sq_tail) == 0x178);
static_assert(offsetof(struct rbln_fw_ctrl, event_head) == 0x180);
static_assert(sizeof(struct rbln_fw_admin_req) == RBLN_RING_REC_SIZE);
static_assert(sizeof(struct rbln_fw_admin_cpl) == RBLN_RING_REC_SIZE);
static_assert(sizeof(struct rbln_fw_event) == RBLN_RING_REC_SIZE);
/* rbln_ring_peek() finds the phase bit at the same place in both. */
static_assert(offsetof(struct rbln_fw_admin_cpl, flags) == 6);
static_assert(offsetof(struct rbln_fw_event, flags) == 6);
/* A power of two in MIN..MAX (the divisions are non-zero iff in range). */
static_assert(RBLN_RING_ENTRIES / RBLN_FW_RING_MIN_ENTRIES &&
	      RBLN_FW_RING_MAX_ENTRIES / RBLN_RING_ENTRIES &&
	      !(RBLN_RING_ENTRIES & (RBLN_RING_ENTRIES - 1)));

/* While waiting for a completion, memory is re-checked at least this often. */
#define RBLN_ADMIN_POLL_MS	10

/* One admin request and its answer. */
struct rbln_admin_cmd {
	u16 opcode;
	u32 args[10];
	void *data;		/* answer buffer, or NULL */
	u32 data_size;		/* bytes offered to the card (<= PAGE_SIZE) */
	const void *in;		/* if set: data_size bytes the card reads */
	/*
	 * The host frees or reuses memory on the answer (MMU changes): no
	 * signal ends the wait, only the admin timeout or a card fault.
	 */
	bool must_complete;
	/* out */
	u32 data_len;		/* bytes the card wrote */
	u64 result[6];
};

const char *rbln_fw_fault_name(u32 code)
{
	switch (code) {
	case RBLN_FW_FAULT_NONE:
		return "none";
	case RBLN_FW_FAULT_BAD_RING_CONFIG:
		return "bad ring configuration";
	case RBLN_FW_FAULT_BAD_IFACE:
		return "unsupported host interface";
	case RBLN_FW_FAULT_INTERNAL:
		return "firmware internal error";
	case RBLN_FW_FAULT_THERMAL:
		return "thermal shutdown";
	default:
		return "unknown fault";
	}
}

static const char *rbln_fw_status_name(u16 status)
{
	switch (status) {
	case RBLN_FW_ST_OK:
		return "ok";
	case RBLN_FW_ST_BAD_OPCODE:
		return "bad opcode";
	case RBLN_FW_ST_BAD_FIELD:
		return "bad field";
	case RBLN_FW_ST_BAD_ARG:
		return "bad argument";
	case RBLN_FW_ST_BAD_ADDRESS:
		return "bad address";
	case RBLN_FW_ST_SHORT_BUFFER:
		return "short buffer";
	case RBLN_FW_ST_INTERNAL:
		return "firmware internal error";
	case RBLN_FW_ST_MMU_FAULT:
		return "MMU fault";
	default:
		return "unknown status";
	}
}

static void rbln_fw_read_reason(struct rbln_device *rdev, char *buf, size_t len)
{
	size_t n = min_t(size_t, len - 1,
			 sizeof_field(struct rbln_fw_ctrl, fault_reason));

	memcpy_fromio(buf, rdev->ctrl + rbln_ctrl_off(fault_reason), n);
	buf[n] = '\0';
}

/* ---- identity ----------------------------------------------------------- */

static bool rbln_str_terminated(const char *s, size_t len)
{
	return !!memchr(s, '\0', len);
}

/* Checks the control block fields the spec constrains; NULL if all sane. */
static const char *rbln_fw_bad_ctrl(struct rbln_device *rdev,
				    const struct rbln_fw_ctrl *c)
{
	u64 bar_len = pci_resource_len(rdev->pdev, RBLN_BAR_MEM);
	unsigned int i, j;

	if (c->ctrl_size < sizeof(*c))
		return "control block smaller than firmware-iface 1.0 defines";
	if (c->family != RBLN_FW_FAMILY_REBEL100 &&
	    c->family != RBLN_FW_FAMILY_ATOM)
		return "unknown card family";
	if (c->chiplet_count < 1 || c->chiplet_count > RBLN_FW_MAX_CHIPLETS)
		return "chiplet_count out of range 1..8";
	if (c->num_vectors < RBLN_FW_MIN_VECTORS)
		return "fewer than 2 MSI-X vectors";
	if (c->doorbell_peer_id > 0xffff)
		return "doorbell peer id does not fit 16 bits";
	if (!is_power_of_2(c->bar_size) || c->bar_size > bar_len ||
	    c->bar_size < RBLN_FW_CTRL_REGION_SIZE)
		return "bar_size is not a power of two within BAR2";
	if (!rbln_str_terminated(c->serial, sizeof(c->serial)) ||
	    !rbln_str_terminated(c->fw_version, sizeof(c->fw_version)))
		return "serial or fw_version not NUL-terminated";

	for (i = 0; i < c->chiplet_count; i++) {
		const struct rbln_fw_hbm_region *r = &c->hbm[i];

		if (!r->size || r->size % RBLN_FW_HBM_ALIGN ||
		    r->bar_offset % RBLN_FW_HBM_ALIGN)
			return "HBM region empty or not 2 MiB aligned";
		if (r->bar_offset < RBLN_FW_CTRL_REGION_SIZE ||
		    r->bar_offset > c->bar_size ||
		    r->size > c->bar_size - r->bar_offset)
			return "HBM region outside the BAR";
		for (j = 0; j < i; j++) {
			const struct rbln_fw_hbm_region *o = &c->hbm[j];

			if (r->bar_offset < o->bar_offset + o->size &&
			    o->bar_offset < r->bar_offset + r->size)
				return "HBM regions overlap";
		}
	}
	return NULL;
}

/*
 * Is this a card speaking firmware-iface 1.x?  Refuses anything else with
 * one log line and -ENODEV, before the driver touches the device further.
 */
int rbln_fw_check_identity(struct rbln_device *rdev)
{
	struct device *dev = &rdev->pdev->dev;
	struct rbln_identity *id = &rdev->id;
	struct rbln_fw_ctrl *c;
	const char *bad;
	u32 magic;
	u16 major, minor;
	unsigned int i;
	int ret = 0;

	magic = rbln_ctrl_rd32(rdev, rbln_ctrl_off(magic));
	if (magic != RBLN_FW_MAGIC) {
		dev_info(dev, "not an rbln card: control block magic 0x%08x, expected 0x%08x\n",
			 magic, RBLN_FW_MAGIC);
		return -ENODEV;
	}
	major = ioread16(rdev->ctrl + rbln_ctrl_off(iface_major));
	minor = ioread16(rdev->ctrl + rbln_ctrl_off(iface_minor));
	if (major != RBLN_FW_IFACE_MAJOR) {
		dev_info(dev, "firmware-iface %u.%u not supported (driver speaks %u.x)\n",
			 major, minor, RBLN_FW_IFACE_MAJOR);
		return -ENODEV;
	}
	if (minor < RBLN_FW_IFACE_MINOR_MIN) {
		dev_info(dev, "firmware-iface %u.%u not supported: the driver needs %u.%u or later (device MMU)\n",
			 major, minor, RBLN_FW_IFACE_MAJOR, RBLN_FW_IFACE_MINOR_MIN);
		return -ENODEV;
	}

	c = kmalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	memcpy_fromio(c, rdev->ctrl, sizeof(*c));

	bad = rbln_fw_bad_ctrl(rdev, c);
	if (bad) {
		dev_info(dev, "not an rbln card: bad control block (%s)\n", bad);
		ret = -ENODEV;
		goto out;
	}

	id->family = c->family;
	id->chiplet_count = c->chiplet_count;
	id->iface_major = major;
	id->iface_minor = minor;
	id->num_vectors = c->num_vectors;
	id->doorbell_peer_id = c->doorbell_peer_id;
	id->bar_size = c->bar_size;
	for (i = 0; i < c->chiplet_count; i++) {
		id->hbm_offset[i] = c->hbm[i].bar_offset;
		id->hbm_size[i] = c->hbm[i].size;
	}
	memcpy(id->uuid, c->uuid, sizeof(id->uuid));
	strscpy(id->serial, c->serial, sizeof(id->serial));
	strscpy(id->fw_version, c->fw_version, sizeof(id->fw_version));
out:
	kfree(c);
	return ret;
}

/* ---- handshake and reset ------------------------------------------------ */

/*
 * Polls fw_state until it is @want (and, for READY, host_ack == host_gen)
 * for up to @timeout_ms.  Returns 0, -EIO (FAULT, when waiting for READY;
 * while waiting for RESET a FAULT only means "not yet"), -ENODEV (the BAR
 * reads all ones: the card is gone) or -ETIMEDOUT.
 */
static int rbln_fw_wait_state(struct rbln_device *rdev, u32 want,
			      unsigned int timeout_ms, u32 *last)
{
	ktime_t deadline = ktime_add_ms(ktime_get(), timeout_ms);
	u32 st;

	for (;;) {
		bool late = ktime_after(ktime_get(), deadline);

		st = rbln_ctrl_rd32(rdev, rbln_ctrl_off(fw_state));
		*last = st;
		if (st == want &&
		    (want != RBLN_FW_STATE_READY ||
		     rbln_ctrl_rd32(rdev, rbln_ctrl_off(host_ack)) == rdev->host_gen))
			return 0;
		if (st == RBLN_FW_STATE_FAULT && want == RBLN_FW_STATE_READY)
			return -EIO;
		if (st == U32_MAX)
			return -ENODEV;
		if (late)
			return -ETIMEDOUT;
		usleep_range(500, 1000);
	}
}

/* A card still in FAULT this long after a reset request is asked again. */
#define RBLN_RESET_RETRY_MS	100

/*
 * host_ctrl = 0 + doorbell; the card stops DMA and returns to RESET.  A
 * card that crashed again right after it took the request stays in FAULT,
 * which only a further request clears: while it reads FAULT the request
 * is repeated every RBLN_RESET_RETRY_MS, within @timeout_ms in all.
 */
static int rbln_fw_reset(struct rbln_device *rdev, unsigned int timeout_ms)
{
	ktime_t deadline = ktime_add_ms(ktime_get(), timeout_ms);
	bool ask = true;
	s64 left;
	u32 st;
	int ret;

	for (;;) {
		if (ask) {
			rbln_ctrl_wr32(rdev, rbln_ctrl_off(host_ctrl), 0);
			rbln_doorbell(rdev, RBLN_FW_DB_CTRL);
		}
		left = ktime_ms_delta(deadline, ktime_get());
		ret = rbln_fw_wait_state(rdev, RBLN_FW_STATE_RESET,
					 clamp_t(s64, left, 0, RBLN_RESET_RETRY_MS),
					 &st);
		if (ret != -ETIMEDOUT || left <= RBLN_RESET_RETRY_MS)
			return ret;
		ask = st == RBLN_FW_STATE_FAULT;
	}
}

static void rbln_fw_log_fault(struct rbln_device *rdev, const char *when)
{
	u32 code = rbln_ctrl_rd32(rdev, rbln_ctrl_off(fault_code));
	char reason[64];

	rbln_fw_read_reason(rdev, reason, sizeof(reason));
	drm_err(&rdev->drm, "firmware fault %s: code %u (%s): %s\n", when, code,
		rbln_fw_fault_name(code), reason);
}

static int rbln_fw_boot(struct rbln_device *rdev)
{
	unsigned int timeout = rbln_boot_timeout_ms;
	u32 st, gen;
	int ret;

	st = rbln_ctrl_rd32(rdev, rbln_ctrl_off(fw_state));
	if (st != RBLN_FW_STATE_RESET) {
		if (st == RBLN_FW_STATE_FAULT)
			rbln_fw_log_fault(rdev, "left from before this driver instance; resetting");
		else
			drm_info(&rdev->drm, "card is in firmware state %u, not RESET; resetting it\n",
				 st);
		/*
		 * The card holds no ring address of ours yet: a card that does
		 * not reset is refused without a second reset on the way out.
		 */
		ret = rbln_fw_reset(rdev, timeout);
		if (ret) {
			drm_err(&rdev->drm, "firmware did not answer the reset within %u ms\n",
				timeout);
			return ret;
		}
	}

	gen = rbln_ctrl_rd32(rdev, rbln_ctrl_off(host_gen)) + 1;
	if (!gen)
		gen = 1;
	rdev->host_gen = gen;

	rbln_ctrl_wr32(rdev, rbln_ctrl_off(ring_entries), RBLN_RING_ENTRIES);
	writeq(rdev->sq.dma, rdev->ctrl + rbln_ctrl_off(admin_sq_addr));
	writeq(rdev->cq.dma, rdev->ctrl + rbln_ctrl_off(admin_cq_addr));
	writeq(rdev->ev.dma, rdev->ctrl + rbln_ctrl_off(event_ring_addr));
	iowrite16(RBLN_FW_IFACE_MAJOR, rdev->ctrl + rbln_ctrl_off(host_iface_major));
	iowrite16(RBLN_FW_IFACE_MINOR, rdev->ctrl + rbln_ctrl_off(host_iface_minor));
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_sq_tail), 0);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_cq_head), 0);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(event_head), 0);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(host_gen), gen);
	/* Configuration and zeroed rings visible before HOST_READY is. */
	wmb();
	rdev->fw_touched = true;
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(host_ctrl), RBLN_FW_HOST_READY);
	rbln_doorbell(rdev, RBLN_FW_DB_CTRL);

	ret = rbln_fw_wait_state(rdev, RBLN_FW_STATE_READY, timeout, &st);
	switch (ret) {
	case 0:
		return 0;
	case -EIO:
		rbln_fw_log_fault(rdev, "during the boot handshake");
		return -EIO;
	case -ENODEV:
		drm_err(&rdev->drm, "card vanished during the boot handshake\n");
		return -ENODEV;
	default:
		drm_err(&rdev->drm, "firmware did not answer the boot handshake within %u ms (firmware state %u)\n",
			timeout, st);
		return -ETIMEDOUT;
	}
}

/*
 * Leaves the card in RESET so it never writes into memory the host is
 * about to free.  Used by remove and by every failed probe after the card
 * may have seen the ring addresses.  IRQ handlers may still run (the devres
 * path), so the event ring is switched off first.
 */
static void rbln_fw_shutdown(struct rbln_device *rdev)
{
	unsigned int timeout = rbln_boot_timeout_ms;
	int ret;

	if (rdev->fw_down)
		return;
	rdev->fw_down = true;

	mutex_lock(&rdev->event_lock);
	rdev->ev.entries = 0;	/* rbln_fw_process_events() stops here */
	mutex_unlock(&rdev->event_lock);

	if (!rdev->fw_touched)
		return;

	/* A card that failed to answer once gets a shorter second chance. */
	if (rbln_get_state(rdev) != RBLN_STATE_READY)
		timeout = max(timeout / 4, 100U);
	rbln_set_state(rdev, RBLN_STATE_RESETTING);
	ret = rbln_fw_reset(rdev, timeout);
	if (ret == -ENODEV)
		drm_info(&rdev->drm, "card is gone; nothing to reset\n");
	else if (ret)
		drm_err(&rdev->drm, "card did not reset within %u ms; bus mastering turned off\n",
			timeout);
	/* Stops the DMA of a card that did not reset (on real hardware). */
	pci_clear_master(rdev->pdev);
	rbln_set_state(rdev, RBLN_STATE_OFFLINE);
}

static void rbln_fw_shutdown_action(void *arg)
{
	rbln_fw_shutdown(arg);
}

/* Remove path: no handler runs after this, and the card is in RESET. */
void rbln_fw_fini(struct rbln_device *rdev)
{
	rbln_pci_free_irqs(rdev);
	rbln_fw_shutdown(rdev);
}

/* ---- rings -------------------------------------------------------------- */

static int rbln_ring_alloc(struct rbln_device *rdev, struct rbln_ring *ring)
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

static void *rbln_ring_slot(struct rbln_ring *ring)
{
	return ring->va + (size_t)ring->idx * RBLN_RING_REC_SIZE;
}

/* Does the card-written ring hold a record the host has not consumed? */
static bool rbln_ring_pending(struct rbln_ring *ring)
{
	const struct rbln_fw_event *rec = rbln_ring_slot(ring);

	return (READ_ONCE(rec->flags) & RBLN_FW_REC_PHASE) == ring->phase;
}

/* Consumes the next card-written record into @out (64 bytes), if any. */
static bool rbln_ring_peek(struct rbln_ring *ring, void *out)
{
	if (!ring->entries || !rbln_ring_pending(ring))
		return false;
	/* The card writes flags last: read the record only after them. */
	dma_rmb();
	memcpy(out, rbln_ring_slot(ring), RBLN_RING_REC_SIZE);
	ring->idx = (ring->idx + 1) & (ring->entries - 1);
	if (!ring->idx)
		ring->phase ^= RBLN_FW_REC_PHASE;
	return true;
}

/* ---- admin ring --------------------------------------------------------- */

void rbln_fw_admin_irq(struct rbln_device *rdev)
{
	wake_up(&rdev->admin_wq);
}

/* Consumes completions until the one for @seq; 1 if found, else 0. */
static int rbln_admin_reap(struct rbln_device *rdev, u32 seq,
			   struct rbln_fw_admin_cpl *cpl)
{
	struct rbln_fw_admin_cpl rec;

	while (rbln_ring_peek(&rdev->cq, &rec)) {
		rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_cq_head), rdev->cq.idx);
		if (rec.seq == seq) {
			*cpl = rec;
			return 1;
		}
		/* The answer to a request that timed out, or a corrupt one. */
		rdev->admin_stale++;
		dev_warn_ratelimited(rdev->drm.dev,
				     "discarding admin completion seq %u (waiting for %u)\n",
				     rec.seq, seq);
	}
	return 0;
}

static bool rbln_admin_wake(struct rbln_device *rdev)
{
	return rbln_ring_pending(&rdev->cq) ||
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

	rdev->admin_timeouts++;
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

static int __rbln_admin_exec(struct rbln_device *rdev, struct rbln_admin_cmd *cmd)
{
	struct rbln_ring *sq = &rdev->sq;
	struct rbln_fw_admin_req *req;
	struct rbln_fw_admin_cpl cpl;
	unsigned long deadline;
	u32 head, next, seq;
	int ret;

	lockdep_assert_held(&rdev->admin_lock);

	if (rbln_get_state(rdev) != RBLN_STATE_READY)
		return -EIO;
	if (cmd->data_size > PAGE_SIZE)
		return -EINVAL;

	/* Completions of earlier, timed-out requests. */
	rbln_admin_reap(rdev, 0, &cpl);

	head = rbln_ctrl_rd32(rdev, rbln_ctrl_off(admin_sq_head));
	next = (sq->idx + 1) & (sq->entries - 1);
	if (head >= sq->entries || next == head) {
		drm_err_ratelimited(&rdev->drm,
				    "admin request ring is full or broken (card head %u, host tail %u)\n",
				    head, sq->idx);
		return -EIO;
	}

	seq = ++rdev->admin_seq;
	if (!seq)
		seq = ++rdev->admin_seq;

	req = rbln_ring_slot(sq);
	memset(req, 0, sizeof(*req));
	req->opcode = cmd->opcode;
	req->seq = seq;
	if (cmd->data_size) {
		if (cmd->in)
			memcpy(rdev->admin_buf, cmd->in, cmd->data_size);
		else
			memset(rdev->admin_buf, 0, cmd->data_size);
		req->data_addr = rdev->admin_buf_dma;
		req->data_len = cmd->data_size;
	}
	memcpy(req->args, cmd->args, sizeof(req->args));
	sq->idx = next;
	/* The request is in memory before the card can see the new tail. */
	wmb();
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_sq_tail), next);
	rbln_doorbell(rdev, RBLN_FW_DB_ADMIN);

	deadline = jiffies + msecs_to_jiffies(rbln_admin_timeout_ms);
	for (;;) {
		bool late = time_after(jiffies, deadline);

		if (rbln_admin_reap(rdev, seq, &cpl))
			break;
		if (rbln_get_state(rdev) != RBLN_STATE_READY)
			return -EIO;
		if (late) {
			rbln_admin_timed_out(rdev, seq, cmd->opcode);
			return -ETIMEDOUT;
		}
		if (cmd->must_complete) {
			wait_event_timeout(rdev->admin_wq, rbln_admin_wake(rdev),
					   msecs_to_jiffies(RBLN_ADMIN_POLL_MS));
			continue;
		}
		/*
		 * A killed waiter leaves the request behind; its completion
		 * is dropped later by sequence number.
		 */
		if (wait_event_killable_timeout(rdev->admin_wq,
						rbln_admin_wake(rdev),
						msecs_to_jiffies(RBLN_ADMIN_POLL_MS)) < 0)
			return -EINTR;
	}

	ret = rbln_admin_status_errno(cpl.status);
	memcpy(cmd->result, cpl.result, sizeof(cmd->result));
	if (cpl.status == RBLN_FW_ST_MMU_FAULT)
		return ret;	/* reported by the MMU fault event */
	if (ret) {
		drm_err_ratelimited(&rdev->drm, "admin opcode %u failed: status %u (%s)\n",
				    cmd->opcode, cpl.status,
				    rbln_fw_status_name(cpl.status));
		return ret;
	}
	if (cpl.data_len > cmd->data_size) {
		drm_err_ratelimited(&rdev->drm,
				    "admin opcode %u: card claims %u bytes written into a %u-byte buffer\n",
				    cmd->opcode, cpl.data_len, cmd->data_size);
		return -EIO;
	}
	cmd->data_len = cpl.data_len;
	if (cpl.data_len && !cmd->in) {
		/* The card wrote the data before it wrote the completion. */
		dma_rmb();
		memcpy(cmd->data, rdev->admin_buf, cpl.data_len);
	}
	return 0;
}

/*
 * Submits one admin request and waits for its completion (by sequence
 * number, for up to admin_timeout_ms).  Serialised by admin_lock; fails
 * with -ENODEV once the device is unplugged.
 */
static int rbln_admin_exec(struct rbln_device *rdev, struct rbln_admin_cmd *cmd)
{
	int idx, ret;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return -ENODEV;
	mutex_lock(&rdev->admin_lock);
	ret = __rbln_admin_exec(rdev, cmd);
	mutex_unlock(&rdev->admin_lock);
	drm_dev_exit(idx);
	return ret;
}

int rbln_fw_get_telemetry(struct rbln_device *rdev, struct rbln_fw_telemetry *t)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_GET_TELEMETRY,
		.data = t,
		.data_size = sizeof(*t),
	};
	int ret;

	ret = rbln_admin_exec(rdev, &cmd);
	if (ret)
		return ret;
	if (cmd.data_len != sizeof(*t)) {
		drm_err_ratelimited(&rdev->drm, "GET_TELEMETRY answered %u bytes, expected %zu\n",
				    cmd.data_len, sizeof(*t));
		return -EIO;
	}
	t->chiplet_count = min(t->chiplet_count, rdev->id.chiplet_count);
	return 0;
}

/* ---- recovery -------------------------------------------------------------- */

static int rbln_fw_identify(struct rbln_device *rdev);

static void rbln_ring_rewind(struct rbln_ring *ring)
{
	memset(ring->va, 0, RBLN_RING_ENTRIES * RBLN_RING_REC_SIZE);
	ring->idx = 0;
	ring->phase = RBLN_FW_REC_PHASE;
}

/*
 * Whole-card recovery: resets the card and does the boot handshake again
 * with rewound admin and event rings.  The card forgets everything (VMs,
 * command rings); the caller sets those up again.
 */
int rbln_fw_restart(struct rbln_device *rdev)
{
	int ret;

	mutex_lock(&rdev->admin_lock);
	mutex_lock(&rdev->event_lock);
	rdev->ev.entries = 0;	/* no event processing while rewinding */
	mutex_unlock(&rdev->event_lock);

	ret = rbln_fw_reset(rdev, rbln_boot_timeout_ms);
	if (!ret) {
		rbln_ring_rewind(&rdev->sq);
		rbln_ring_rewind(&rdev->cq);
		rbln_ring_rewind(&rdev->ev);
		rdev->ev_seq_valid = false;
		ret = rbln_fw_boot(rdev);
	}
	mutex_unlock(&rdev->admin_lock);

	mutex_lock(&rdev->event_lock);
	rdev->ev.entries = RBLN_RING_ENTRIES;
	mutex_unlock(&rdev->event_lock);
	if (ret)
		return ret;
	rbln_set_state(rdev, RBLN_STATE_READY);
	rbln_fw_process_events(rdev);
	return rbln_fw_identify(rdev);
}

/* ---- memory management (rbln_fw_mmu.md) -------------------------------- */

int rbln_fw_vm_bind(struct rbln_device *rdev, u32 asid, dma_addr_t root)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_VM_BIND,
		.must_complete = true,
		.args = { asid, lower_32_bits(root), upper_32_bits(root) },
	};

	return rbln_admin_exec(rdev, &cmd);
}

int rbln_fw_vm_unbind(struct rbln_device *rdev, u32 asid)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_VM_UNBIND,
		.must_complete = true,
		.args = { asid },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/* Firmware-iface 1.3: the card cancels every job of @asid (CANCELLED). */
int rbln_fw_vm_abort(struct rbln_device *rdev, u32 asid)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_VM_ABORT,
		.args = { asid },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/* size 0: the whole address space. */
int rbln_fw_tlb_invalidate(struct rbln_device *rdev, u32 asid, u64 va, u64 size)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_TLB_INVALIDATE,
		.must_complete = true,
		.args = { asid, lower_32_bits(va), upper_32_bits(va),
			  lower_32_bits(size), upper_32_bits(size) },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/*
 * The card reads or writes @len (1..PAGE_SIZE) bytes at @va of @asid.
 * -EFAULT if its MMU faulted (no byte moved; the fault event follows).
 */
int rbln_fw_debug_access(struct rbln_device *rdev, u32 asid, bool write,
			 u64 va, void *buf, u32 len)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_DEBUG_ACCESS,
		.args = { asid, write ? RBLN_FW_ACCESS_WRITE : RBLN_FW_ACCESS_READ,
			  lower_32_bits(va), upper_32_bits(va) },
		.data = buf,
		.data_size = len,
		.in = write ? buf : NULL,
	};
	int ret;

	if (!len || len > PAGE_SIZE)
		return -EINVAL;
	ret = rbln_admin_exec(rdev, &cmd);
	if (ret)
		return ret;
	if (!write && cmd.data_len != len) {
		drm_err_ratelimited(&rdev->drm, "DEBUG_ACCESS read %u of %u bytes\n",
				    cmd.data_len, len);
		return -EIO;
	}
	return 0;
}

/* ---- command rings (rbln_fw_cmd.md) -------------------------------------- */

int rbln_fw_ring_setup(struct rbln_device *rdev, u32 ring, u32 entries,
		       dma_addr_t jobs, dma_addr_t cpls, dma_addr_t ctrl)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_RING_SETUP,
		.args = { ring, entries, lower_32_bits(jobs), upper_32_bits(jobs),
			  lower_32_bits(cpls), upper_32_bits(cpls),
			  lower_32_bits(ctrl), upper_32_bits(ctrl) },
	};

	return rbln_admin_exec(rdev, &cmd);
}

int rbln_fw_ring_stop(struct rbln_device *rdev, u32 ring)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_RING_STOP,
		.args = { ring },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/* IDENTIFY must tell what the control block told. */
static int rbln_fw_identify(struct rbln_device *rdev)
{
	const struct rbln_identity *id = &rdev->id;
	struct rbln_fw_identify *idn;
	struct rbln_admin_cmd cmd = { .opcode = RBLN_FW_OP_IDENTIFY };
	const char *bad = NULL;
	unsigned int i;
	int ret;

	idn = kzalloc(sizeof(*idn), GFP_KERNEL);
	if (!idn)
		return -ENOMEM;
	cmd.data = idn;
	cmd.data_size = sizeof(*idn);
	ret = rbln_admin_exec(rdev, &cmd);
	if (ret) {
		drm_err(&rdev->drm, "IDENTIFY failed: %d\n", ret);
		goto out;
	}

	if (cmd.data_len != sizeof(*idn))
		bad = "answer size";
	else if (idn->family != id->family)
		bad = "family";
	else if (idn->chiplet_count != id->chiplet_count)
		bad = "chiplet_count";
	else if (idn->iface_major != id->iface_major ||
		 idn->iface_minor != id->iface_minor)
		bad = "interface version";
	else if (memcmp(idn->uuid, id->uuid, sizeof(id->uuid)))
		bad = "uuid";
	else if (strncmp(idn->serial, id->serial, sizeof(idn->serial)))
		bad = "serial";
	else if (strncmp(idn->fw_version, id->fw_version, sizeof(idn->fw_version)))
		bad = "fw_version";
	for (i = 0; !bad && i < id->chiplet_count; i++)
		if (idn->hbm_size[i] != id->hbm_size[i])
			bad = "HBM size";
	if (bad) {
		drm_err(&rdev->drm, "IDENTIFY disagrees with the control block: %s\n",
			bad);
		ret = -EIO;
	}
out:
	kfree(idn);
	return ret;
}

static int rbln_fw_heartbeat(struct rbln_device *rdev)
{
	struct rbln_admin_cmd cmd = { .opcode = RBLN_FW_OP_HEARTBEAT };
	int ret;

	ret = rbln_admin_exec(rdev, &cmd);
	if (ret) {
		drm_err(&rdev->drm, "HEARTBEAT failed: %d\n", ret);
		return ret;
	}
	drm_dbg_driver(&rdev->drm, "heartbeat %llu, firmware uptime %llu ns\n",
		       cmd.result[0], cmd.result[1]);
	return 0;
}

/* ---- event ring --------------------------------------------------------- */

static void rbln_fw_handle_event(struct rbln_device *rdev,
				 const struct rbln_fw_event *ev)
{
	char reason[64];

	if (rdev->ev_seq_valid && ev->seq != rdev->ev_last_seq + 1) {
		u32 lost = ev->seq - rdev->ev_last_seq - 1;

		rdev->ev_lost += lost;
		dev_warn_ratelimited(rdev->drm.dev, "%u event(s) lost (event ring full)\n",
				     lost);
	}
	rdev->ev_seq_valid = true;
	rdev->ev_last_seq = ev->seq;
	rdev->ev_count++;

	switch (ev->type) {
	case RBLN_FW_EV_FAULT:
		rbln_fw_read_reason(rdev, reason, sizeof(reason));
		rbln_set_fault(rdev, ev->code, reason);
		break;
	case RBLN_FW_EV_STATE:
		if (ev->data[0] == RBLN_FW_STATE_READY)
			break;
		if (ev->data[0] == RBLN_FW_STATE_FAULT) {
			rbln_fw_read_reason(rdev, reason, sizeof(reason));
			rbln_set_fault(rdev,
				       rbln_ctrl_rd32(rdev, rbln_ctrl_off(fault_code)),
				       reason);
			break;
		}
		snprintf(reason, sizeof(reason),
			 "firmware left READY unasked (state %llu)", ev->data[0]);
		rbln_set_fault(rdev, RBLN_FW_FAULT_INTERNAL, reason);
		break;
	case RBLN_FW_EV_THERMAL:
		dev_warn_ratelimited(rdev->drm.dev,
				     "temperature %lld m°C crossed the warning threshold\n",
				     (s64)ev->data[0]);
		break;
	case RBLN_FW_EV_HEARTBEAT:
		rdev->last_heartbeat = ev->data[0];
		break;
	case RBLN_FW_EV_CHIPLET_RESET:
		drm_info(&rdev->drm, "chiplet %u was reset\n", ev->chiplet);
		break;
	case RBLN_FW_EV_MMU_FAULT:
		rbln_vm_mmu_fault(rdev, (u32)ev->data[0], ev->data[1],
				  (u32)ev->data[2], ev->code);
		break;
	case RBLN_FW_EV_BAD_REQUEST:
		drm_err_ratelimited(&rdev->drm,
				    "card rejected admin request seq %llu (opcode %llu): status %u (%s)\n",
				    ev->data[0], ev->data[1], ev->code,
				    rbln_fw_status_name(ev->code));
		break;
	default:
		drm_dbg_driver(&rdev->drm, "ignoring event type %u\n", ev->type);
		break;
	}
}

/* Event IRQ thread (and once after the handshake): consume all new events. */
void rbln_fw_process_events(struct rbln_device *rdev)
{
	struct rbln_fw_event ev;
	unsigned int n = 0;

	mutex_lock(&rdev->event_lock);
	while (rbln_ring_peek(&rdev->ev, &ev)) {
		rbln_ctrl_wr32(rdev, rbln_ctrl_off(event_head), rdev->ev.idx);
		rbln_fw_handle_event(rdev, &ev);
		if (!(++n % 64))
			cond_resched();
	}
	mutex_unlock(&rdev->event_lock);
}

/* ---- bring-up ----------------------------------------------------------- */

int rbln_fw_init(struct rbln_device *rdev)
{
	struct device *dev = &rdev->pdev->dev;
	u32 ev_entries;
	int ret;

	ret = rbln_ring_alloc(rdev, &rdev->sq);
	if (!ret)
		ret = rbln_ring_alloc(rdev, &rdev->cq);
	if (!ret)
		ret = rbln_ring_alloc(rdev, &rdev->ev);
	if (ret)
		return ret;
	rdev->admin_buf = dmam_alloc_coherent(dev, PAGE_SIZE,
					      &rdev->admin_buf_dma, GFP_KERNEL);
	if (!rdev->admin_buf)
		return -ENOMEM;

	/* Events are consumed only once the card has taken the rings. */
	ev_entries = rdev->ev.entries;
	rdev->ev.entries = 0;

	/* Runs before the rings are freed, on remove and on failed probes. */
	ret = devm_add_action_or_reset(dev, rbln_fw_shutdown_action, rdev);
	if (ret)
		return ret;

	ret = rbln_fw_boot(rdev);
	if (ret)
		return ret;

	mutex_lock(&rdev->event_lock);
	rdev->ev.entries = ev_entries;
	mutex_unlock(&rdev->event_lock);
	rbln_set_state(rdev, RBLN_STATE_READY);
	/* Events posted before MSI-X was live raised no interrupt. */
	rbln_fw_process_events(rdev);

	ret = rbln_fw_identify(rdev);
	if (ret)
		return ret;
	return rbln_fw_heartbeat(rdev);
}
