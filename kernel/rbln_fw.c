// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: the card's firmware through its control block
 * (firmware-iface/rbln_fw_ctrl.md) - identity check, boot handshake,
 * reset, shutdown, restart after a fault, and bring-up.  The admin and
 * event rings are in rbln_admin.c and rbln_event.c.
 */
#include <linux/build_bug.h>
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_admin.h"
#include "rbln_event.h"
#include "rbln_fw.h"

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
/* rbln_rec_ring_peek() finds the phase bit at the same place in both. */
static_assert(offsetof(struct rbln_fw_admin_cpl, flags) == 6);
static_assert(offsetof(struct rbln_fw_event, flags) == 6);
/* A power of two in MIN..MAX (the divisions are non-zero iff in range). */
static_assert(RBLN_RING_ENTRIES / RBLN_FW_RING_MIN_ENTRIES &&
	      RBLN_FW_RING_MAX_ENTRIES / RBLN_RING_ENTRIES &&
	      !(RBLN_RING_ENTRIES & (RBLN_RING_ENTRIES - 1)));

/* ---- names and the fault record ---------------------------------------- */

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

const char *rbln_fw_status_name(u16 status)
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

/* The control block's fault_reason, NUL-terminated, into @buf. */
void rbln_fw_read_reason(struct rbln_device *rdev, char *buf, size_t len)
{
	size_t n = min_t(size_t, len - 1,
			 sizeof_field(struct rbln_fw_ctrl, fault_reason));

	rbln_ctrl_copy(rdev, rbln_ctrl_off(fault_reason), buf, n);
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
	major = rbln_ctrl_rd16(rdev, rbln_ctrl_off(iface_major));
	minor = rbln_ctrl_rd16(rdev, rbln_ctrl_off(iface_minor));
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
	rbln_ctrl_copy(rdev, 0, c, sizeof(*c));

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
		     rbln_ctrl_rd32(rdev, rbln_ctrl_off(host_ack)) == rdev->fw.host_gen))
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
	dma_addr_t sq, cq;
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
	rdev->fw.host_gen = gen;

	rbln_ctrl_wr32(rdev, rbln_ctrl_off(ring_entries), RBLN_RING_ENTRIES);
	rbln_admin_ring_dma(rdev, &sq, &cq);
	rbln_ctrl_wr64(rdev, rbln_ctrl_off(admin_sq_addr), sq);
	rbln_ctrl_wr64(rdev, rbln_ctrl_off(admin_cq_addr), cq);
	rbln_ctrl_wr64(rdev, rbln_ctrl_off(event_ring_addr),
		       rbln_events_ring_dma(rdev));
	rbln_ctrl_wr16(rdev, rbln_ctrl_off(host_iface_major), RBLN_FW_IFACE_MAJOR);
	rbln_ctrl_wr16(rdev, rbln_ctrl_off(host_iface_minor), RBLN_FW_IFACE_MINOR);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_sq_tail), 0);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(admin_cq_head), 0);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(event_head), 0);
	rbln_ctrl_wr32(rdev, rbln_ctrl_off(host_gen), gen);
	/* Configuration and zeroed rings visible before HOST_READY is. */
	wmb();
	rdev->fw.touched = true;
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

	if (rdev->fw.down)
		return;
	rdev->fw.down = true;

	rbln_events_disable(rdev);

	if (!rdev->fw.touched)
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

/* ---- recovery ----------------------------------------------------------- */

/*
 * Whole-card recovery: resets the card and does the boot handshake again
 * with rewound admin and event rings.  The card forgets everything (VMs,
 * command rings); the caller sets those up again.
 */
int rbln_fw_restart(struct rbln_device *rdev)
{
	int ret;

	rbln_admin_block(rdev);
	rbln_events_disable(rdev);	/* no event processing while rewinding */
	ret = rbln_fw_reset(rdev, rbln_boot_timeout_ms);
	if (!ret) {
		rbln_admin_rewind(rdev);
		rbln_events_rewind(rdev);
		ret = rbln_fw_boot(rdev);
	}
	rbln_admin_unblock(rdev);
	rbln_events_enable(rdev);
	if (ret)
		return ret;
	rbln_set_state(rdev, RBLN_STATE_READY);
	rbln_events_process(rdev);
	return rbln_msg_identify(rdev);
}

/* ---- bring-up ----------------------------------------------------------- */

int rbln_fw_init(struct rbln_device *rdev)
{
	struct device *dev = &rdev->pdev->dev;
	int ret;

	ret = rbln_admin_alloc(rdev);
	if (!ret)
		ret = rbln_events_alloc(rdev);
	if (ret)
		return ret;

	/* Runs before the rings are freed, on remove and on failed probes. */
	ret = devm_add_action_or_reset(dev, rbln_fw_shutdown_action, rdev);
	if (ret)
		return ret;

	ret = rbln_fw_boot(rdev);
	if (ret)
		return ret;

	/* Events are consumed only once the card has taken the rings. */
	rbln_events_enable(rdev);
	rbln_set_state(rdev, RBLN_STATE_READY);
	/* Events posted before MSI-X was live raised no interrupt. */
	rbln_events_process(rdev);

	ret = rbln_msg_identify(rdev);
	if (ret)
		return ret;
	return rbln_msg_heartbeat(rdev);
}
