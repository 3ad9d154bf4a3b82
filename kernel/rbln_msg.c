// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: the typed admin requests (firmware-iface rbln_fw_admin.h) - one
 * function per opcode, each built on rbln_admin_exec().  GET_TELEMETRY is
 * in rbln_telemetry.c, beside its cache.
 */
#include <linux/slab.h>
#include <linux/string.h>

#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_admin.h"

/* ---- memory management (rbln_fw_mmu.md) -------------------------------- */

int rbln_msg_vm_bind(struct rbln_device *rdev, u32 asid, dma_addr_t root)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_VM_BIND,
		.must_complete = true,
		.args = { asid, lower_32_bits(root), upper_32_bits(root) },
	};

	return rbln_admin_exec(rdev, &cmd);
}

int rbln_msg_vm_unbind(struct rbln_device *rdev, u32 asid)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_VM_UNBIND,
		.must_complete = true,
		.args = { asid },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/* Firmware-iface 1.3: the card cancels every job of @asid (CANCELLED). */
int rbln_msg_vm_abort(struct rbln_device *rdev, u32 asid)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_VM_ABORT,
		.args = { asid },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/* size 0: the whole address space. */
int rbln_msg_tlb_invalidate(struct rbln_device *rdev, u32 asid, u64 va,
			    u64 size)
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
int rbln_msg_debug_access(struct rbln_device *rdev, u32 asid, bool write,
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

int rbln_msg_ring_setup(struct rbln_device *rdev, u32 ring, u32 entries,
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

int rbln_msg_ring_stop(struct rbln_device *rdev, u32 ring)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_RING_STOP,
		.args = { ring },
	};

	return rbln_admin_exec(rdev, &cmd);
}

/* ---- identity and liveness --------------------------------------------- */

/* IDENTIFY must tell what the control block told. */
int rbln_msg_identify(struct rbln_device *rdev)
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

int rbln_msg_heartbeat(struct rbln_device *rdev)
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

