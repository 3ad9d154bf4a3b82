/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln firmware interface: the control block and the boot handshake.
 *
 * The control block sits at offset 0 of the card's memory BAR (BAR2 of the
 * ivshmem-doorbell function that rbln-emu serves).  All fields are little
 * endian.  The spec is rbln_fw_ctrl.md next to this file.
 *
 * This header compiles as C in the kernel and as C/C++ in user space: it
 * uses only <linux/types.h> and no libc.
 */
#ifndef RBLN_FW_CTRL_H
#define RBLN_FW_CTRL_H

#include <linux/types.h>

#define RBLN_FW_MAGIC		0x4e4c4252u	/* "RBLN" read as bytes */
#define RBLN_FW_IFACE_MAJOR	1
#define RBLN_FW_IFACE_MINOR	4	/* 1.2: command rings; 1.3: VM_ABORT; 1.4: GRAPH_EXEC */

/* Size of the control region at the start of the BAR; HBM follows it. */
#define RBLN_FW_CTRL_REGION_SIZE	0x200000u	/* 2 MiB */
#define RBLN_FW_MAX_CHIPLETS		8
#define RBLN_FW_HBM_ALIGN		0x200000u	/* 2 MiB */

/* Card families (rbln_fw_ctrl.family). */
#define RBLN_FW_FAMILY_REBEL100	1	/* 4 chiplets, each with its own HBM */
#define RBLN_FW_FAMILY_ATOM	2	/* 1 NPU, 1 memory region */

/* Firmware states (rbln_fw_ctrl.fw_state). */
#define RBLN_FW_STATE_RESET	0	/* waiting for the host */
#define RBLN_FW_STATE_BOOTING	1	/* host-ready seen, setting up rings */
#define RBLN_FW_STATE_READY	2	/* serving the admin ring */
#define RBLN_FW_STATE_FAULT	3	/* stopped; fault_code/fault_reason say why */

/* Fault codes (rbln_fw_ctrl.fault_code). */
#define RBLN_FW_FAULT_NONE		0
#define RBLN_FW_FAULT_BAD_RING_CONFIG	1	/* handshake: ring address/size bad */
#define RBLN_FW_FAULT_BAD_IFACE		2	/* handshake: host major unsupported */
#define RBLN_FW_FAULT_INTERNAL		3	/* firmware crashed */
#define RBLN_FW_FAULT_THERMAL		4	/* thermal shutdown */

/* host_ctrl bits, written by the host. */
#define RBLN_FW_HOST_READY	(1u << 0)

/*
 * Doorbell vectors (host -> card): the host writes
 * (doorbell_peer_id << 16) | vector to the ivshmem Doorbell register
 * (BAR0 + 0x0c).
 */
#define RBLN_FW_DB_CTRL		0	/* host_ctrl changed (handshake, reset) */
#define RBLN_FW_DB_ADMIN	1	/* admin_sq_tail advanced */

/* MSI-X vectors (card -> host).  An interrupt only says "look". */
#define RBLN_FW_IRQ_ADMIN	0	/* admin completion ring has new records */
#define RBLN_FW_IRQ_EVENT	1	/* event ring has new records */
#define RBLN_FW_MIN_VECTORS	2

/* Ring sizes are powers of two within these bounds (entries). */
#define RBLN_FW_RING_MIN_ENTRIES	4
#define RBLN_FW_RING_MAX_ENTRIES	4096

struct rbln_fw_hbm_region {
	__u64 bar_offset;	/* offset of the aperture in the BAR */
	__u64 size;		/* bytes; multiple of RBLN_FW_HBM_ALIGN */
};

/*
 * The control block.  Offsets are fixed by the static asserts in the
 * users; new fields are only ever appended within the reserved tail.
 */
struct rbln_fw_ctrl {
	/* 0x000: identity, written by the card before the host looks */
	__u32 magic;			/* RBLN_FW_MAGIC */
	__u16 iface_minor;		/* RBLN_FW_IFACE_MINOR of the card */
	__u16 iface_major;		/* RBLN_FW_IFACE_MAJOR of the card */
	__u32 ctrl_size;		/* sizeof(struct rbln_fw_ctrl) */
	__u32 family;			/* RBLN_FW_FAMILY_* */
	__u32 chiplet_count;		/* 1..RBLN_FW_MAX_CHIPLETS */
	__u32 doorbell_peer_id;		/* card's ivshmem peer id */
	__u32 num_vectors;		/* MSI-X vectors the card raises */
	__u32 reserved0;
	__u8  uuid[16];			/* 0x020 */
	char  serial[32];		/* 0x030, NUL-terminated */
	char  fw_version[32];		/* 0x050, NUL-terminated */
	__u64 bar_size;			/* 0x070 */
	struct rbln_fw_hbm_region hbm[RBLN_FW_MAX_CHIPLETS]; /* 0x078 */

	/* 0x0f8: state, written by the card */
	__u32 fw_state;			/* RBLN_FW_STATE_* */
	__u32 fault_code;		/* RBLN_FW_FAULT_*, valid in FAULT */
	char  fault_reason[64];		/* 0x100, NUL-terminated */
	__u32 host_ack;			/* 0x140: last host_gen accepted */
	__u32 admin_sq_head;		/* next request the card will read */
	__u64 heartbeat;		/* 0x148: incremented by the card */

	/* 0x150: written by the host */
	__u32 host_ctrl;		/* RBLN_FW_HOST_* */
	__u32 host_gen;			/* incremented at every HOST_READY */
	__u16 host_iface_minor;		/* version the host speaks */
	__u16 host_iface_major;
	__u32 ring_entries;		/* entries of each of the three rings */
	__u64 admin_sq_addr;		/* 0x160: DMA address, request ring */
	__u64 admin_cq_addr;		/* completion ring */
	__u64 event_ring_addr;		/* event ring */
	__u32 admin_sq_tail;		/* 0x178: next slot the host will fill */
	__u32 admin_cq_head;		/* next completion the host will read */
	__u32 event_head;		/* 0x180: next event the host will read */
	__u32 reserved1;
	__u8  reserved[0x1000 - 0x188];	/* pads the block to 4 KiB */
};

#endif /* RBLN_FW_CTRL_H */
