/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln firmware interface: command rings, jobs, completions and command
 * packets (firmware-iface 1.2; VM_ABORT and CANCELLED since 1.3;
 * GRAPH_EXEC and the completion's detail since 1.4).
 *
 * Every chiplet has one command ring in host memory.  The host puts job
 * descriptors on it; a job names an address space (ASID) and a command
 * buffer of packets at a device VA in that address space.  The chiplet's
 * command processor runs the jobs of its ring in order, the packets of a
 * job in order, every address translated by the MMU (rbln_fw_mmu.h), and
 * writes one completion record per job.  The spec is rbln_fw_cmd.md next
 * to this file.
 */
#ifndef RBLN_FW_CMD_H
#define RBLN_FW_CMD_H

#include <linux/types.h>

/* Doorbell (host -> card) and MSI-X vector (card -> host) of the rings. */
#define RBLN_FW_DB_RING		2	/* some ring's tail advanced */
#define RBLN_FW_IRQ_RING	2	/* some ring has new completions */
#define RBLN_FW_RING_VECTORS	3	/* vectors a card with rings needs */

/* Admin requests for rings (rbln_fw_admin.h opcode space). */
#define RBLN_FW_OP_RING_SETUP	9	/* args: ring, entries, jobs lo/hi, cpl lo/hi, ctrl lo/hi */
#define RBLN_FW_OP_RING_STOP	10	/* args: ring; abandons queued jobs */
#define RBLN_FW_OP_VM_ABORT	11	/* args: asid; its jobs end CANCELLED (1.3) */

/*
 * Ring control, 64 bytes in host memory (RING_SETUP args[6..7]).  Each
 * side writes only its own fields.
 */
struct rbln_fw_ring_ctrl {
	__u32 job_tail;		/* host: next job slot it will fill */
	__u32 cpl_head;		/* host: next completion it will read */
	__u32 job_head;		/* card: next job slot it will read */
	__u32 reserved0;
	__u64 done_seqno;	/* card: seqno of the last completed job */
	__u64 busy_ns;		/* card: cumulative time the ring ran jobs */
	__u64 reserved[4];
};

/* rbln_fw_job.flags */
#define RBLN_FW_JOB_IRQ		(1u << 0)	/* IRQ when done; moderated, see .md */
/* An MMU fault in the job aborts its ASID (as VM_ABORT) at once (1.3). */
#define RBLN_FW_JOB_FAULT_ABORTS (1u << 1)

/*
 * A job: 64 bytes in the job ring.  asid 0 is a kernel job: its command
 * buffer is at a host DMA address (no translation) and it may carry the
 * privileged packets; every other job runs in its ASID.
 */
struct rbln_fw_job {
	__u64 seqno;		/* host's number, increasing per ring */
	__u32 asid;
	__u32 flags;		/* RBLN_FW_JOB_* */
	__u64 cmd_addr;		/* command buffer: VA in asid (DMA addr if 0) */
	__u32 cmd_size;		/* bytes, multiple of 8, 8..RBLN_FW_CMD_MAX */
	__u32 reserved0;
	__u64 reserved[4];
};

#define RBLN_FW_CMD_MAX		(1u << 20)	/* largest command buffer */

/* Job status (rbln_fw_job_cpl.status). */
#define RBLN_FW_JOB_OK		0
#define RBLN_FW_JOB_BAD_JOB	1	/* descriptor malformed */
#define RBLN_FW_JOB_BAD_PACKET	2	/* unknown opcode, bad size, bad field */
#define RBLN_FW_JOB_PRIVILEGED	3	/* privileged packet in a user job */
#define RBLN_FW_JOB_MMU_FAULT	4	/* an access faulted (fault_* fields) */
#define RBLN_FW_JOB_DMA_ERROR	5	/* the DMA engine failed */
#define RBLN_FW_JOB_WAIT_TIMEOUT 6	/* a WAIT packet's timeout expired */
#define RBLN_FW_JOB_ABORTED	7	/* ring stopped or chiplet reset */
#define RBLN_FW_JOB_CANCELLED	8	/* its ASID was aborted (VM_ABORT, 1.3) */

/* A completion: 64 bytes in the completion ring, phase bit in flags. */
struct rbln_fw_job_cpl {
	__u64 seqno;
	__u16 status;		/* RBLN_FW_JOB_* */
	__u16 flags;		/* RBLN_FW_REC_PHASE */
	__u32 packet_offset;	/* byte offset of the packet that failed */
	__u64 start_ns;		/* card time the job started */
	__u64 end_ns;		/* card time the job ended */
	__u64 fault_va;		/* MMU_FAULT: first faulting VA */
	__u32 fault_reason;	/* MMU_FAULT: RBLN_FW_MMU_* */
	__u32 fault_access;	/* MMU_FAULT: RBLN_FW_ACCESS_* */
	__u32 detail;		/* GRAPH_EXEC: RBLN_FW_GRAPH_E_* (1.4), else 0 */
	__u32 detail_arg;	/* GRAPH_EXEC: node, section or boundary */
	__u64 reserved;
};

/*
 * Packets.  Each starts with a 32-bit header: opcode in bits 7:0, flags in
 * 15:8, size in bytes / 8 in 31:16 (the whole packet, header included).
 * Every packet is a multiple of 8 bytes and 8-byte aligned in the buffer.
 */
#define RBLN_FW_PKT_HDR(op, flags, bytes) \
	((__u32)(op) | ((__u32)(flags) << 8) | ((__u32)((bytes) / 8) << 16))
#define RBLN_FW_PKT_OP(hdr)	((hdr) & 0xff)
#define RBLN_FW_PKT_FLAGS(hdr)	(((hdr) >> 8) & 0xff)
#define RBLN_FW_PKT_BYTES(hdr)	(((hdr) >> 16) * 8)

#define RBLN_FW_PKT_NOP		0x00	/* any size >= 8 */
#define RBLN_FW_PKT_COPY	0x01
#define RBLN_FW_PKT_COPY_STRIDED 0x02
#define RBLN_FW_PKT_FILL	0x03
#define RBLN_FW_PKT_SIGNAL	0x04
#define RBLN_FW_PKT_WAIT	0x05
#define RBLN_FW_PKT_TIMESTAMP	0x06
#define RBLN_FW_PKT_LAUNCH	0x07
/* 0x40..0x4f: graph execution. */
#define RBLN_FW_PKT_GRAPH_EXEC	0x40	/* 1.4, rbln_fw_graph.h */
/* 0x80..0xff: privileged, kernel jobs (asid 0) only. */
#define RBLN_FW_PKT_TLB_INVALIDATE 0x80
#define RBLN_FW_PKT_WRITE64	0x81	/* store a value at a DMA address */

struct rbln_fw_pkt_nop {
	__u32 hdr;
	__u32 reserved;
};

/* size bytes from src to dst, any alignment, any size (0 allowed). */
struct rbln_fw_pkt_copy {
	__u32 hdr;
	__u32 reserved;
	__u64 src;
	__u64 dst;
	__u64 size;
};

/*
 * depth planes of height rows of width bytes; row r of plane p is at
 * base + p * slice + r * pitch on each side.  2-D: depth 1.
 */
struct rbln_fw_pkt_copy_strided {
	__u32 hdr;
	__u32 reserved;
	__u64 src;
	__u64 dst;
	__u64 width;
	__u32 height;
	__u32 depth;
	__u64 src_pitch;
	__u64 src_slice;
	__u64 dst_pitch;
	__u64 dst_slice;
};

/* size bytes at dst with the low pattern_bytes (1, 2, 4 or 8) of pattern. */
struct rbln_fw_pkt_fill {
	__u32 hdr;
	__u32 pattern_bytes;
	__u64 dst;
	__u64 size;
	__u64 pattern;
};

/* Packet flag of SIGNAL: raise RBLN_FW_IRQ_RING after the store. */
#define RBLN_FW_SIGNAL_IRQ	(1u << 0)

/* Store the 64-bit value at va (8-byte aligned). */
struct rbln_fw_pkt_signal {
	__u32 hdr;
	__u32 reserved;
	__u64 va;
	__u64 value;
};

/*
 * Block the ring until the 64-bit value at va (8-byte aligned) is >=
 * value; fail the job with WAIT_TIMEOUT after timeout_ns (0: no limit).
 */
struct rbln_fw_pkt_wait {
	__u32 hdr;
	__u32 reserved;
	__u64 va;
	__u64 value;
	__u64 timeout_ns;
};

/* Store the card time in ns at va (8-byte aligned). */
struct rbln_fw_pkt_timestamp {
	__u32 hdr;
	__u32 reserved;
	__u64 va;
};

/* Built-in kernels (rbln_fw_pkt_launch.kernel). */
#define RBLN_FW_KERNEL_ADD	1	/* out = a + b */
#define RBLN_FW_KERNEL_MUL	2	/* out = a * b */
#define RBLN_FW_KERNEL_RELU	3	/* out = max(a, 0) */
#define RBLN_FW_KERNEL_SCALE	4	/* out = a * scale */
#define RBLN_FW_KERNEL_MATMUL	5	/* out[m][n] = sum_k a[m][k] * b[k][n] */
#define RBLN_FW_KERNEL_CAST	6	/* out = (dtype_out)a */

/* Element types. */
#define RBLN_FW_DT_FP32		1
#define RBLN_FW_DT_FP16		2
#define RBLN_FW_DT_BF16		3

#define RBLN_FW_MAX_DIMS	4

/*
 * MATMUL's working set: M * K + K * N + M * N elements at most (the
 * engine holds A, B and C in fp32 whatever the strides); larger is
 * BAD_PACKET.  Split larger products into several LAUNCHes.
 */
#define RBLN_FW_MATMUL_MAX_ELEMS	(1ULL << 27)

/*
 * A built-in kernel.  Elementwise kernels run over shape[0..ndim-1];
 * element i of tensor t is at t + sum_d idx[d] * stride_t[d] * elem_size
 * (strides in elements, may be 0 for broadcasting; b unused by RELU,
 * SCALE and CAST).  MATMUL: ndim 2, shape = {M, N, K}, a is M x K with
 * strides stride_a[0] (row) and stride_a[1] (column), b is K x N, out is
 * M x N; products accumulate in fp32 and are rounded once to dtype_out.
 * Inputs are dtype_in, the output dtype_out (equal except for CAST and
 * MATMUL).  Rounding to fp16/bf16 is round-to-nearest-even; NaN stays NaN,
 * overflow gives Inf.
 */
struct rbln_fw_pkt_launch {
	__u32 hdr;
	__u32 kernel;		/* RBLN_FW_KERNEL_* */
	__u32 dtype_in;		/* RBLN_FW_DT_* */
	__u32 dtype_out;
	__u32 ndim;		/* 1..RBLN_FW_MAX_DIMS */
	__u32 scale;		/* SCALE: fp32 bits */
	__u64 a;
	__u64 b;
	__u64 out;
	__u64 shape[RBLN_FW_MAX_DIMS];
	__s64 stride_a[RBLN_FW_MAX_DIMS];
	__s64 stride_b[RBLN_FW_MAX_DIMS];
	__s64 stride_out[RBLN_FW_MAX_DIMS];
};

/* rbln_fw_pkt_graph_exec.flags */
#define RBLN_FW_GRAPH_EXEC_SERIAL	(1u << 0)	/* every node on this ring's chiplet */
#define RBLN_FW_GRAPH_EXEC_CHECK_ONLY	(1u << 1)	/* validate, run no node */

/*
 * Runs a graph Definition (rbln_fw_graph.h, firmware-iface 1.4): the
 * Definition object at `definition` (16-byte aligned), the boundary
 * tensors bound by the table at `boundaries` (8-byte aligned,
 * boundary_count struct rbln_fw_graph_binding), the intermediates in
 * exec_bytes of execution storage at `exec` (0 and 0 when the image
 * needs none).  Validated before any node runs; see rbln_fw_graph.md.
 */
struct rbln_fw_pkt_graph_exec {
	__u32 hdr;
	__u32 boundary_count;
	__u64 definition;
	__u64 boundaries;
	__u64 exec;
	__u64 exec_bytes;
	__u32 flags;		/* RBLN_FW_GRAPH_EXEC_* */
	__u32 reserved;
};

/* Privileged: drop cached translations of [va, va + size) of asid. */
struct rbln_fw_pkt_tlb_invalidate {
	__u32 hdr;
	__u32 asid;
	__u64 va;
	__u64 size;		/* 0: the whole address space */
};

/* Privileged: store value at the host DMA address addr (8-byte aligned). */
struct rbln_fw_pkt_write64 {
	__u32 hdr;
	__u32 reserved;
	__u64 addr;
	__u64 value;
};

#endif /* RBLN_FW_CMD_H */
