/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln firmware interface: the admin (mailbox) ring and the event ring.
 *
 * Three rings live in host memory, each of rbln_fw_ctrl.ring_entries
 * 64-byte records: the request ring (host writes), the completion ring
 * and the event ring (card writes).  Card-written records carry a phase
 * bit that flips every time the ring wraps, so the host knows a record is
 * new from memory alone.  The spec is rbln_fw_admin.md next to this file.
 */
#ifndef RBLN_FW_ADMIN_H
#define RBLN_FW_ADMIN_H

#include <linux/types.h>
#include "rbln_fw_ctrl.h"
#include "rbln_fw_mmu.h"

/* Admin opcodes (rbln_fw_admin_req.opcode). */
#define RBLN_FW_OP_IDENTIFY		1	/* data <- struct rbln_fw_identify */
#define RBLN_FW_OP_HEARTBEAT		2	/* result[0] = beat, [1] = uptime ns */
#define RBLN_FW_OP_GET_TELEMETRY	3	/* data <- struct rbln_fw_telemetry */
#define RBLN_FW_OP_RESET_CHIPLET	4	/* args[0] = chiplet index */
/* Since firmware-iface 1.1 (MMU, see rbln_fw_mmu.h and its spec). */
#define RBLN_FW_OP_VM_BIND		5	/* args: asid, root lo, root hi */
#define RBLN_FW_OP_VM_UNBIND		6	/* args: asid */
#define RBLN_FW_OP_TLB_INVALIDATE	7	/* args: asid, va lo/hi, size lo/hi */
#define RBLN_FW_OP_DEBUG_ACCESS		8	/* args: asid, access, va lo/hi */

/* Completion status (rbln_fw_admin_cpl.status). */
#define RBLN_FW_ST_OK			0
#define RBLN_FW_ST_BAD_OPCODE		1	/* opcode unknown */
#define RBLN_FW_ST_BAD_FIELD		2	/* non-zero flags/reserved */
#define RBLN_FW_ST_BAD_ARG		3	/* argument out of range */
#define RBLN_FW_ST_BAD_ADDRESS		4	/* data buffer not in host RAM */
#define RBLN_FW_ST_SHORT_BUFFER		5	/* data_len too small */
#define RBLN_FW_ST_INTERNAL		6	/* firmware error */
#define RBLN_FW_ST_MMU_FAULT		7	/* access faulted; result[0] = VA, [1] = reason */

/* Record flags. */
#define RBLN_FW_REC_PHASE		(1u << 0)

struct rbln_fw_admin_req {
	__u16 opcode;
	__u16 flags;		/* must be 0 */
	__u32 seq;		/* host's sequence number, echoed */
	__u64 data_addr;	/* DMA address of a host buffer, or 0 */
	__u32 data_len;		/* bytes available at data_addr */
	__u32 reserved;		/* must be 0 */
	__u32 args[10];
};

struct rbln_fw_admin_cpl {
	__u32 seq;		/* seq of the request this answers */
	__u16 status;		/* RBLN_FW_ST_* */
	__u16 flags;		/* RBLN_FW_REC_PHASE */
	__u32 data_len;		/* bytes written to data_addr */
	__u32 sq_head;		/* card's request-ring head after this */
	__u64 result[6];
};

/* Event types (rbln_fw_event.type). */
#define RBLN_FW_EV_FAULT	1	/* code = RBLN_FW_FAULT_*, state is FAULT */
#define RBLN_FW_EV_THERMAL	2	/* data[0] = temperature in m°C */
#define RBLN_FW_EV_HEARTBEAT	3	/* data[0] = beat */
#define RBLN_FW_EV_STATE	4	/* data[0] = new RBLN_FW_STATE_* */
#define RBLN_FW_EV_CHIPLET_RESET 5	/* chiplet reset done */
#define RBLN_FW_EV_BAD_REQUEST	6	/* a request was malformed */
#define RBLN_FW_EV_MMU_FAULT	7	/* code = RBLN_FW_MMU_*, data: asid, va, access, source */

struct rbln_fw_event {
	__u32 seq;		/* card's event counter */
	__u16 type;		/* RBLN_FW_EV_* */
	__u16 flags;		/* RBLN_FW_REC_PHASE */
	__u64 timestamp_ns;	/* card time */
	__u32 code;
	__u32 chiplet;		/* or 0xffffffff for the whole card */
	__u64 data[5];
};

/* RBLN_FW_OP_IDENTIFY payload. */
struct rbln_fw_identify {
	__u32 family;
	__u32 chiplet_count;
	__u16 iface_minor;
	__u16 iface_major;
	__u32 reserved;
	__u8  uuid[16];
	char  serial[32];
	char  fw_version[32];
	__u64 hbm_size[RBLN_FW_MAX_CHIPLETS];
};

struct rbln_fw_chiplet_telemetry {
	__s32 temp_mc;		/* milli-degrees Celsius */
	__u32 clock_mhz;	/* core clock */
	__u32 mem_clock_mhz;	/* HBM clock */
	__u32 reserved;
	__u64 busy_ns;		/* cumulative busy time */
};

/* RBLN_FW_OP_GET_TELEMETRY payload. */
struct rbln_fw_telemetry {
	__u64 timestamp_ns;	/* card time at sampling */
	__s32 temp_mc;		/* card (hottest sensor), m°C */
	__u32 chiplet_count;
	__u64 power_uw;		/* card power, microwatts */
	struct rbln_fw_chiplet_telemetry chiplet[RBLN_FW_MAX_CHIPLETS];
};

#endif /* RBLN_FW_ADMIN_H */
