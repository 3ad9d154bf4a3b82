/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln firmware interface: graph Definitions (firmware-iface 1.4).
 *
 * A Definition is the topology of a captured step: node records (a
 * built-in kernel, COPY, FILL or strided COPY packet whose tensor
 * addresses are relocations), fan-in adjacency, roots and the signatures
 * of its boundary tensors.  The host uploads it once into device memory
 * as a Definition object and runs it any number of times with the
 * GRAPH_EXEC packet (rbln_fw_cmd.h), which binds the boundary tensors and
 * the execution storage of one run.  The card checks the object's framing
 * and every offset, index and relocation against its bounds before it
 * reads anything an offset points at.  The spec is rbln_fw_graph.md next
 * to this file.
 *
 * All fields are little endian.  Offsets are bytes from the start of the
 * Definition image (the byte after the object header).
 */
#ifndef RBLN_FW_GRAPH_H
#define RBLN_FW_GRAPH_H

#include <linux/types.h>

#include "rbln_fw_cmd.h"

/* "GRAPHEXD" in memory order. */
#define RBLN_FW_GRAPH_MAGIC	0x4458454850415247ull
#define RBLN_FW_GRAPH_VERSION	1	/* rbln_fw_graph_image.version */

/* Limits; a Definition beyond any of them is refused (COUNT). */
#define RBLN_FW_GRAPH_MAX_NODES		4096
#define RBLN_FW_GRAPH_MAX_EDGES		65536
#define RBLN_FW_GRAPH_MAX_BOUNDARIES	256
#define RBLN_FW_GRAPH_MAX_BYTES		(4u << 20)	/* definition_bytes */
/* Object VAs, the image and its sections are aligned to this. */
#define RBLN_FW_GRAPH_ALIGN		16

/*
 * The Definition object: this 32-byte header, then the Definition image
 * (definition_bytes).  The object's VA is 16-byte aligned.  Several
 * objects may be packed back to back in one buffer, each at a 16-byte
 * aligned offset.
 */
struct rbln_fw_graph_obj {
	__u64 magic;		/* RBLN_FW_GRAPH_MAGIC */
	__u64 full_key;		/* must equal the image's */
	__u32 definition_bytes;	/* the image's size: its total_bytes */
	__u32 reserved0;
	__u64 reserved1;
};

/* Sections of an image (rbln_fw_graph_image.off[]). */
#define RBLN_FW_GRAPH_SEC_NODES		0	/* node_count node records */
#define RBLN_FW_GRAPH_SEC_FANIN_ROWS	1	/* node_count + 1 __u32 */
#define RBLN_FW_GRAPH_SEC_FANIN_PRODS	2	/* edge_count __u16 producers */
#define RBLN_FW_GRAPH_SEC_ROOTS		3	/* root_count __u16 nodes */
#define RBLN_FW_GRAPH_SEC_BOUNDARIES	4	/* boundary_count signatures */
#define RBLN_FW_GRAPH_SECTIONS		5

/*
 * The Definition image: this 64-byte header at offset 0, then its
 * sections at the offsets it names (anywhere after the header, each
 * aligned to its element's alignment: node records and signatures 16,
 * rows 4, producers and roots 2; a section with 0 elements still names
 * an offset inside the image).
 */
struct rbln_fw_graph_image {
	__u64 full_key;		/* content identity of the Definition */
	__u32 total_bytes;	/* the image, header included */
	__u32 version;		/* RBLN_FW_GRAPH_VERSION */
	__u32 node_count;	/* 1..RBLN_FW_GRAPH_MAX_NODES */
	__u32 edge_count;	/* 0..RBLN_FW_GRAPH_MAX_EDGES */
	__u32 root_count;	/* 1..node_count */
	__u32 boundary_count;	/* 0..RBLN_FW_GRAPH_MAX_BOUNDARIES */
	__u64 execution_storage_bytes;	/* intermediates of one run */
	__u32 off[RBLN_FW_GRAPH_SECTIONS];	/* RBLN_FW_GRAPH_SEC_* */
	__u32 reserved;
};

/* rbln_fw_graph_reloc.kind */
#define RBLN_FW_GRAPH_RELOC_NONE	0	/* operand unused: all zero */
#define RBLN_FW_GRAPH_RELOC_BOUNDARY	1	/* boundary tensor index + offset */
#define RBLN_FW_GRAPH_RELOC_EXEC	2	/* execution storage + offset */

/*
 * Where a tensor operand lives: its address is the base of the region
 * (the VA GRAPH_EXEC binds for boundary `index`, or the execution
 * storage's VA) plus `offset` bytes.  Every byte the operand's
 * descriptor reaches must lie inside the region (a boundary's signature
 * bytes, or execution_storage_bytes).
 */
struct rbln_fw_graph_reloc {
	__u32 kind;		/* RBLN_FW_GRAPH_RELOC_* */
	__u32 index;		/* BOUNDARY: < boundary_count; else 0 */
	__u64 offset;
};

/* Operand slots of a node (rbln_fw_graph_node.reloc[]). */
#define RBLN_FW_GRAPH_OPERANDS	3	/* LAUNCH a, b, out; COPY src, dst; FILL dst */

/*
 * A node: 256 bytes.  `pkt` is the packet the same operation would be
 * as one eager job -- LAUNCH, COPY, COPY_STRIDED or FILL of rbln_fw_cmd.h,
 * header included (RBLN_FW_PKT_HDR(op, 0, size)) -- with its address
 * fields (a, b, out; src, dst; dst) zero: the relocations give them, in
 * that order.  Slots an operation does not use are NONE; so is LAUNCH's b
 * for RELU, SCALE and CAST.  Bytes of `pkt` past the packet are zero.
 */
struct rbln_fw_graph_node {
	__u32 op;		/* RBLN_FW_PKT_LAUNCH, _COPY, _COPY_STRIDED, _FILL */
	__u32 reserved0;
	__u64 reserved1;
	struct rbln_fw_graph_reloc reloc[RBLN_FW_GRAPH_OPERANDS];
	union {
		struct rbln_fw_pkt_launch launch;
		struct rbln_fw_pkt_copy copy;
		struct rbln_fw_pkt_copy_strided copy_strided;
		struct rbln_fw_pkt_fill fill;
		__u8 bytes[192];
	} pkt;
};

/* rbln_fw_graph_tensor.direction */
#define RBLN_FW_GRAPH_IN	1	/* read only: no node writes it */
#define RBLN_FW_GRAPH_OUT	2
#define RBLN_FW_GRAPH_INOUT	3

/*
 * A boundary tensor: 80 bytes, the same in the image's signatures and in
 * GRAPH_EXEC's bindings.  Element i is at the tensor's VA + sum(idx[d] *
 * stride[d]) * sizeof(dtype), strides in elements (>= 0); `bytes` is the
 * extent nodes may touch, at least the elements' reach.  Unused dims
 * (>= ndim) are zero.
 */
struct rbln_fw_graph_tensor {
	__u32 dtype;		/* RBLN_FW_DT_* */
	__u16 ndim;		/* 1..RBLN_FW_MAX_DIMS */
	__u16 direction;	/* RBLN_FW_GRAPH_IN, _OUT, _INOUT */
	__u64 bytes;		/* 1..2^48 */
	__u64 shape[RBLN_FW_MAX_DIMS];	/* each >= 1 */
	__s64 stride[RBLN_FW_MAX_DIMS];	/* each >= 0 */
};

/*
 * One entry of GRAPH_EXEC's boundary table: 96 bytes, 8-byte aligned,
 * boundary_count of them back to back.  `tensor` must equal the image's
 * signature of the same index, field by field.
 */
struct rbln_fw_graph_binding {
	__u64 va;		/* the tensor's first byte, in the job's ASID */
	__u64 reserved;
	struct rbln_fw_graph_tensor tensor;
};

/*
 * Why a GRAPH_EXEC failed: rbln_fw_job_cpl.detail, with status BAD_PACKET
 * for the checks, which run in this order (the first failing one is
 * reported).  detail_arg: the section (COUNT, SECTION, ALIGN), the node
 * (FANIN, NODE, RELOC*, IN_NODE), the consumer (CYCLE), the root slot
 * (ROOTS), the boundary (SIGNATURE, BINDING), the image's count
 * (BOUNDARY_COUNT), else 0.  rbln_fw_graph.md has the full table.
 */
#define RBLN_FW_GRAPH_E_NONE		0
#define RBLN_FW_GRAPH_E_PACKET		1	/* packet reserved, flags, alignment */
#define RBLN_FW_GRAPH_E_MAGIC		2	/* object magic */
#define RBLN_FW_GRAPH_E_OBJ_BYTES	3	/* definition_bytes out of range */
#define RBLN_FW_GRAPH_E_TOTAL_BYTES	4	/* total_bytes != definition_bytes */
#define RBLN_FW_GRAPH_E_KEY		5	/* image full_key != object's */
#define RBLN_FW_GRAPH_E_VERSION		6	/* image version, reserved */
#define RBLN_FW_GRAPH_E_COUNT		7	/* a count beyond its limit */
#define RBLN_FW_GRAPH_E_BOUNDARY_COUNT	8	/* != the packet's boundary_count */
#define RBLN_FW_GRAPH_E_EXEC_BYTES	9	/* packet's storage too small */
#define RBLN_FW_GRAPH_E_SECTION		10	/* section outside the image */
#define RBLN_FW_GRAPH_E_ALIGN		11	/* section offset misaligned */
#define RBLN_FW_GRAPH_E_FANIN		12	/* CSR rows malformed */
#define RBLN_FW_GRAPH_E_CYCLE		13	/* a producer >= its consumer */
#define RBLN_FW_GRAPH_E_ROOTS		14	/* roots != nodes without fan-in */
#define RBLN_FW_GRAPH_E_SIGNATURE	15	/* boundary signature malformed */
#define RBLN_FW_GRAPH_E_BINDING		16	/* binding != its signature */
#define RBLN_FW_GRAPH_E_NODE		17	/* node record or packet malformed */
#define RBLN_FW_GRAPH_E_RELOC		18	/* relocation kind, index, slot */
#define RBLN_FW_GRAPH_E_RELOC_RANGE	19	/* operand outside its region */
#define RBLN_FW_GRAPH_E_RELOC_WRITE_IN	20	/* a node writes an IN boundary */
/* Not a check: the job's status came from running node detail_arg. */
#define RBLN_FW_GRAPH_E_IN_NODE		0x100

/* Sizes are part of the contract (checked by every C++ user). */
#ifdef __cplusplus
#define RBLN_FW_GRAPH_ASSERT(e) static_assert(e, #e)
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_graph_obj) == 32);
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_graph_image) == 64);
RBLN_FW_GRAPH_ASSERT(__builtin_offsetof(struct rbln_fw_graph_image, off) == 40);
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_graph_reloc) == 16);
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_graph_node) == 256);
RBLN_FW_GRAPH_ASSERT(__builtin_offsetof(struct rbln_fw_graph_node, pkt) == 64);
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_pkt_launch) <= 192);
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_graph_tensor) == 80);
RBLN_FW_GRAPH_ASSERT(sizeof(struct rbln_fw_graph_binding) == 96);
#undef RBLN_FW_GRAPH_ASSERT
#endif

#endif /* RBLN_FW_GRAPH_H */
