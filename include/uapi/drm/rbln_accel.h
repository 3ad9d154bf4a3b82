/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln_accel.h - user-space interface of the rbln DRM accel driver.
 *
 * One PCI function (one card) is one /dev/accel/accelN node.  The chiplets
 * of a Rebel100-class card are fields of this interface, not nodes.
 *
 * Rules that hold for every ioctl here:
 *  - all fields are fixed-width; structs are padded explicitly;
 *  - every flags/pad/reserved field must be zero, else -EINVAL;
 *  - new ioctls and new query types are only appended; existing layouts
 *    never change, they only grow at the end (the size field says how
 *    much the caller knows about);
 *  - after the device is unplugged (unbind, rmmod, surprise removal)
 *    every ioctl on an open file returns -ENODEV.
 *
 * Memory.  Buffers are GEM objects: RBLN_BO_CREATE (host RAM or HBM of a
 * chiplet) and RBLN_BO_USERPTR (pinned user pages) return a handle and
 * the buffer's device VA; DRM_IOCTL_GEM_CLOSE frees a handle; mmap() at
 * the offset RBLN_BO_INFO returns maps it for the CPU;
 * DRM_IOCTL_PRIME_HANDLE_TO_FD / _FD_TO_HANDLE export and import dma-bufs
 * (an imported buffer gets a device VA in the importer's VM).  Host
 * buffers export their pages to any importer; HBM buffers export the
 * card's BAR range, which only peer-to-peer capable importers can attach
 * to (others get -EOPNOTSUPP), and come back as the same buffer when
 * imported on the same card; userptr buffers cannot be exported (-EINVAL).
 * Each open file is its own device address space (VM); RBLN_INFO_VM
 * describes it and its MMU faults, RBLN_INFO_MEM the card's memory.  A
 * buffer the card still uses stays mapped until the card is done with it,
 * even after its last handle is closed.
 */
#ifndef _UAPI_RBLN_ACCEL_H_
#define _UAPI_RBLN_ACCEL_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define RBLN_MAX_CHIPLETS	8

/* Card families, as in drm_rbln_info_device.family. */
#define RBLN_FAMILY_REBEL100	1	/* 4 chiplets with their own HBM */
#define RBLN_FAMILY_ATOM	2	/* 1 NPU, 1 memory region */

/* Query types for DRM_IOCTL_RBLN_GET_INFO. */
#define RBLN_INFO_DEVICE	1	/* struct drm_rbln_info_device */
#define RBLN_INFO_TELEMETRY	2	/* struct drm_rbln_info_telemetry */
#define RBLN_INFO_MEM		3	/* struct drm_rbln_info_mem */
#define RBLN_INFO_VM		4	/* struct drm_rbln_info_vm */

/**
 * struct drm_rbln_get_info - an extensible query
 * @type: one of RBLN_INFO_*; anything else is -EINVAL.
 * @size: in: bytes available at @ptr; out: the full size of the answer.
 *	The kernel writes min(in, full) bytes and nothing past them, so a
 *	caller can pass 0 to learn the size, and an old caller with a
 *	shorter struct gets the prefix it knows.
 * @ptr: user pointer to the answer buffer; may be 0 only if @size is 0.
 * @flags: must be 0.
 * @pad: must be 0.
 *
 * Returns 0, or -EINVAL (bad type/flags/pad), -EFAULT (bad @ptr),
 * -EIO (the card did not answer a query that needs it), -ENODEV.
 */
struct drm_rbln_get_info {
	__u32 type;
	__u32 size;
	__u64 ptr;
	__u32 flags;
	__u32 pad;
};

/**
 * struct drm_rbln_info_device - identity of the card (RBLN_INFO_DEVICE)
 * @family: RBLN_FAMILY_*.
 * @chiplet_count: chiplets on the card (Rebel100: 4, ATOM: 1).
 * @fw_iface_major: firmware-iface major version the card speaks.
 * @fw_iface_minor: firmware-iface minor version.
 * @pci_domain: PCI domain of the function.
 * @pci_bus: PCI bus number.
 * @pci_dev: PCI device (slot) number.
 * @pci_func: PCI function number.
 * @pad0: zero.
 * @numa_node: NUMA node of the PCI function, -1 if none.
 * @pad1: zero.
 * @hbm_size: bytes of HBM per chiplet; entries past @chiplet_count are 0.
 * @fw_version: firmware version, NUL-terminated.
 * @serial: serial number, NUL-terminated.
 * @uuid: card UUID.
 */
struct drm_rbln_info_device {
	__u32 family;
	__u32 chiplet_count;
	__u32 fw_iface_major;
	__u32 fw_iface_minor;
	__u32 pci_domain;
	__u8 pci_bus;
	__u8 pci_dev;
	__u8 pci_func;
	__u8 pad0;
	__s32 numa_node;
	__u32 pad1;
	__u64 hbm_size[RBLN_MAX_CHIPLETS];
	char fw_version[32];
	char serial[32];
	__u8 uuid[16];
};

/**
 * struct drm_rbln_chiplet_telemetry - per-chiplet figures
 * @temp_mc: temperature in milli-degrees Celsius.
 * @clock_mhz: core clock in MHz.
 * @mem_clock_mhz: HBM clock in MHz.
 * @pad: zero.
 * @busy_ns: cumulative busy time in nanoseconds.
 */
struct drm_rbln_chiplet_telemetry {
	__s32 temp_mc;
	__u32 clock_mhz;
	__u32 mem_clock_mhz;
	__u32 pad;
	__u64 busy_ns;
};

/**
 * struct drm_rbln_info_telemetry - card telemetry (RBLN_INFO_TELEMETRY)
 * @timestamp_ns: card time at which the figures were sampled.
 * @temp_mc: card temperature (hottest sensor), milli-degrees Celsius.
 * @chiplet_count: valid entries of @chiplet.
 * @power_uw: card power in microwatts.
 * @chiplet: per-chiplet figures.
 *
 * Sampled from the card at the time of the call (an admin round trip).
 */
struct drm_rbln_info_telemetry {
	__u64 timestamp_ns;
	__s32 temp_mc;
	__u32 chiplet_count;
	__u64 power_uw;
	struct drm_rbln_chiplet_telemetry chiplet[RBLN_MAX_CHIPLETS];
};

/**
 * struct drm_rbln_mem_chiplet - HBM figures of one chiplet
 * @total_bytes: size of the chiplet's HBM that buffers can use.
 * @used_bytes: bytes held by buffers of all clients.
 * @free_bytes: @total_bytes - @used_bytes.
 * @largest_free_bytes: the largest contiguous free block, a fragmentation
 *	figure: buffers are made of several blocks, so up to @free_bytes can
 *	still be allocated (in 2 MiB pieces for buffers of 2 MiB and more,
 *	4 KiB pieces below).
 */
struct drm_rbln_mem_chiplet {
	__u64 total_bytes;
	__u64 used_bytes;
	__u64 free_bytes;
	__u64 largest_free_bytes;
};

/**
 * struct drm_rbln_info_mem - memory of the card (RBLN_INFO_MEM)
 * @chiplet_count: valid entries of @chiplet.
 * @pad: zero.
 * @host_bytes: bytes of host buffers (RBLN_REGION_HOST) of all clients.
 * @pinned_bytes: bytes of user memory pinned by RBLN_BO_USERPTR, all
 *	clients.
 * @chiplet: per-chiplet HBM figures.
 *
 * Device-wide figures, the same for every client.  A framework tells "one
 * chiplet is full" (its @largest_free_bytes is small) from "the card is
 * full" (all are).  Per-client figures are in fdinfo.
 */
struct drm_rbln_info_mem {
	__u32 chiplet_count;
	__u32 pad;
	__u64 host_bytes;
	__u64 pinned_bytes;
	struct drm_rbln_mem_chiplet chiplet[RBLN_MAX_CHIPLETS];
};

/* drm_rbln_info_vm.flags */
#define RBLN_VM_FAULTED		(1u << 0)	/* an access in this VM faulted */

/* Access types of an MMU fault (drm_rbln_info_vm.fault_access). */
#define RBLN_ACCESS_READ	1
#define RBLN_ACCESS_WRITE	2

/* MMU fault reasons (drm_rbln_info_vm.fault_reason). */
#define RBLN_MMU_NOT_MAPPED	1	/* nothing mapped at the address */
#define RBLN_MMU_NO_WRITE	2	/* write to a read-only mapping */
#define RBLN_MMU_NO_READ	3	/* read of a write-only mapping */
#define RBLN_MMU_BAD_ENTRY	4	/* malformed page table (driver bug) */
#define RBLN_MMU_BAD_ADDRESS	5	/* mapping to memory the card lacks */
#define RBLN_MMU_NO_VM		6	/* the address space was not bound */
#define RBLN_MMU_BAD_VA		7	/* address beyond 48 bits */

/**
 * struct drm_rbln_info_vm - the caller's device address space (RBLN_INFO_VM)
 * @asid: address-space id the card knows this VM by (1..4095).
 * @flags: RBLN_VM_FAULTED once any access in this VM faulted; it stays set
 *	for the life of the open file (a faulted context is not trusted
 *	again; open the device anew).
 * @va_start: first device VA buffers are placed at.
 * @va_end: end (exclusive) of the VA range buffers are placed in.
 * @mapped_bytes: bytes of buffers with a device VA in this VM.
 * @fault_count: MMU faults of this VM.
 * @fault_va: address of the first fault (0 if none).
 * @fault_access: RBLN_ACCESS_* of the first fault.
 * @fault_reason: RBLN_MMU_* of the first fault.
 *
 * Every open file of the device has its own VM: a device VA of one client
 * means nothing in another, and an access there faults in the accessing
 * client's VM only.
 */
struct drm_rbln_info_vm {
	__u32 asid;
	__u32 flags;
	__u64 va_start;
	__u64 va_end;
	__u64 mapped_bytes;
	__u64 fault_count;
	__u64 fault_va;
	__u32 fault_access;
	__u32 fault_reason;
};

/* Regions (drm_rbln_bo_create.region, drm_rbln_bo_info.region). */
#define RBLN_REGION_HOST	0	/* host RAM (GEM shmem), CPU cached */
#define RBLN_REGION_HBM		1	/* HBM of drm_rbln_bo_create.chiplet */
#define RBLN_REGION_AUTO	2	/* HBM, the driver picks the chiplet */
#define RBLN_REGION_USERPTR	3	/* reported only: pinned user pages */
#define RBLN_REGION_IMPORT	4	/* reported only: a foreign dma-buf */

/* drm_rbln_bo_create.flags, drm_rbln_bo_info.flags_out */
#define RBLN_BO_DEVICE_READ_ONLY (1u << 0)	/* the card may only read it */

/**
 * struct drm_rbln_bo_create - allocate a buffer (DRM_IOCTL_RBLN_BO_CREATE)
 * @size: in: bytes (> 0); out: the size allocated, @size rounded up to
 *	4 KiB (HBM: to 2 MiB if @size is at least 2 MiB, so the card can
 *	use 2 MiB pages).
 * @region: RBLN_REGION_HOST, RBLN_REGION_HBM or RBLN_REGION_AUTO.
 * @chiplet: in: the chiplet for RBLN_REGION_HBM, 0 otherwise; out: the
 *	chiplet the buffer was placed on (0 for host buffers).
 * @flags: RBLN_BO_* flags.
 * @handle: out: GEM handle (close with DRM_IOCTL_GEM_CLOSE).
 * @device_va: out: device VA of the buffer in the caller's VM.
 *
 * Host buffers get their pages on first use, by the CPU (mmap) or the card
 * (then they are also DMA-mapped); their page-table entries are written
 * at that first device use.  HBM buffers are taken from the chiplet's
 * buddy allocator at once, zeroed, and mapped; the CPU maps them through
 * the card's BAR, write-combined.  RBLN_REGION_AUTO places the buffer on
 * the chiplet with the largest free block (the lowest index on a tie).
 *
 * Errors: -EINVAL (size 0 or overflowing when rounded, unknown region or
 * flags, chiplet index not on the card or given with HOST/AUTO, pad),
 * -E2BIG (larger than the chiplet's HBM: it can never fit), -ENOSPC (the
 * chiplet, or for AUTO every chiplet, has no free block that large right
 * now), -ENOMEM (host memory or device VA exhausted; for host buffers also
 * a size above the machine's RAM or 1 TiB, which could never be backed
 * while the card uses it), -EIO (card not ready), -ENODEV.  On error
 * nothing is allocated.
 */
struct drm_rbln_bo_create {
	__u64 size;
	__u32 region;
	__u32 chiplet;
	__u32 flags;
	__u32 handle;
	__u64 device_va;
};

/**
 * struct drm_rbln_bo_info - describe a buffer (DRM_IOCTL_RBLN_BO_INFO)
 * @handle: in: GEM handle of the caller.
 * @flags: in: must be 0.
 * @mmap_offset: out: offset to mmap() the buffer at on this file; 0 for
 *	userptr buffers (the caller has the memory already) and imported
 *	buffers (mmap the dma-buf itself).
 * @size: out: bytes.
 * @device_va: out: device VA in the caller's VM.
 * @region: out: RBLN_REGION_HOST, _HBM, _USERPTR or _IMPORT.
 * @chiplet: out: chiplet of an HBM buffer, else 0.
 * @flags_out: out: RBLN_BO_* flags of the buffer.
 * @pad: zero.
 *
 * Errors: -ENOENT (no such handle in this file: handles of other clients
 * are not visible), -EINVAL (flags, pad), -ENODEV.
 */
struct drm_rbln_bo_info {
	__u32 handle;
	__u32 flags;
	__u64 mmap_offset;
	__u64 size;
	__u64 device_va;
	__u32 region;
	__u32 chiplet;
	__u32 flags_out;
	__u32 pad;
};

/* drm_rbln_bo_userptr.flags */
#define RBLN_USERPTR_READ_ONLY	(1u << 0)	/* pin for reading; card cannot write */

/**
 * struct drm_rbln_bo_userptr - pin user memory (DRM_IOCTL_RBLN_BO_USERPTR)
 * @addr: in: page-aligned user address.
 * @size: in: page-aligned bytes (> 0).
 * @flags: in: RBLN_USERPTR_* flags.
 * @handle: out: GEM handle.
 * @device_va: out: device VA in the caller's VM.
 *
 * The pages are pinned (FOLL_LONGTERM, and FOLL_WRITE unless READ_ONLY)
 * until the buffer is freed (its last handle closed, also at process
 * exit) and charged to the caller's RLIMIT_MEMLOCK.  Userptr buffers can
 * not be exported with PRIME.
 *
 * Errors: -EINVAL (address or size 0 or not page aligned, range wraps,
 * unknown flags), -EFAULT (the range is not mapped in the caller's address
 * space, or not writable without READ_ONLY), -ENOMEM (past RLIMIT_MEMLOCK
 * without CAP_IPC_LOCK, larger than the machine's RAM or 1 TiB - checked
 * before anything is pinned or charged - or out of memory), -ENODEV.
 */
struct drm_rbln_bo_userptr {
	__u64 addr;
	__u64 size;
	__u32 flags;
	__u32 handle;
	__u64 device_va;
};

/* Queue priorities (drm_rbln_queue_create.priority). */
#define RBLN_QUEUE_PRIORITY_LOW		0
#define RBLN_QUEUE_PRIORITY_NORMAL	1
#define RBLN_QUEUE_PRIORITY_HIGH	2	/* needs CAP_SYS_NICE */

/**
 * struct drm_rbln_queue_create - make a queue (DRM_IOCTL_RBLN_QUEUE_CREATE)
 * @chiplet_mask: in: chiplets whose command rings may run the queue's
 *	jobs (bit i = chiplet i; at least one, none beyond the card).  The
 *	jobs of one queue run in submission order, one after another: while
 *	the queue has work in flight its jobs stay on one chiplet; an idle
 *	queue moves to the least loaded chiplet of the mask.
 * @priority: in: RBLN_QUEUE_PRIORITY_*.
 * @flags: in: must be 0.
 * @queue_id: out: the queue's id in this file (1..).
 *
 * Errors: -EINVAL (mask empty or beyond the card, priority, flags),
 * -EACCES (HIGH without CAP_SYS_NICE), -ENOSPC (more than 256 queues in
 * the file), -ENOMEM, -ENODEV.
 */
struct drm_rbln_queue_create {
	__u32 chiplet_mask;
	__u32 priority;
	__u32 flags;
	__u32 queue_id;
};

/**
 * struct drm_rbln_queue_destroy - (DRM_IOCTL_RBLN_QUEUE_DESTROY)
 * @queue_id: in: a queue of this file.
 * @pad: zero.
 *
 * Returns at once, without waiting for the queue's jobs (as
 * cudaStreamDestroy does).  From then on the queue is gone for this
 * file: SUBMIT, WAIT by its seqnos and another QUEUE_DESTROY get -ENOENT
 * (a SUBMIT racing with the destroy either lands before it or gets
 * -ENOENT).  Jobs already submitted still run, in order, each once its
 * in-fences have signalled, and their fences signal as usual: wait for
 * them through their out-syncobjs or buffers.  The queue's id stays
 * taken, and counts against the limit of 256 queues per file, until its
 * last job is done; the file's release cancels such jobs like any other
 * (see drm_rbln_wait.job_error).
 * Errors: -ENOENT (no such queue in this file), -EINVAL (pad).
 */
struct drm_rbln_queue_destroy {
	__u32 queue_id;
	__u32 pad;
};

/**
 * struct drm_rbln_sync - a syncobj and a point on it
 * @handle: syncobj handle of the caller (DRM_IOCTL_SYNCOBJ_CREATE).
 * @flags: must be 0.
 * @point: timeline point; 0 for a binary syncobj.
 */
struct drm_rbln_sync {
	__u32 handle;
	__u32 flags;
	__u64 point;
};

/**
 * struct drm_rbln_submit - run a command buffer (DRM_IOCTL_RBLN_SUBMIT)
 * @queue_id: in: a queue of this file.
 * @flags: in: RBLN_SUBMIT_* flags.
 * @cmd_handle: in: GEM handle of the buffer that holds the packets
 *	(firmware-iface rbln_fw_cmd.h); the card reads it at its device VA.
 * @cmd_size: in: bytes of packets, a multiple of 8, 8..1 MiB.
 * @cmd_offset: in: where they start in the buffer, a multiple of 8.
 * @bo_handles: in: user pointer to @bo_count __u32 GEM handles of the
 *	buffers the job uses (the command buffer need not be listed).  They
 *	stay alive and mapped until the job is done, and the job's fence is
 *	added to their reservation objects (as a write), so dma-buf poll,
 *	the buffers' unmapping and other clients see it.  Implicit sync:
 *	the job waits for the fences of the listed buffers that are shared
 *	(exported or imported dma-bufs) unless RBLN_SUBMIT_NO_IMPLICIT_WAIT
 *	is set; buffers private to this file are never waited for: order
 *	jobs of one client with queues, syncobjs or WAIT packets.
 * @bo_count: in: entries at @bo_handles, at most 4096.
 * @bo_elem_size: in: sizeof(__u32).
 * @in_syncs: in: user pointer to @in_count struct drm_rbln_sync the job
 *	waits for before it runs.
 * @in_count: in: entries at @in_syncs, at most 64.
 * @in_elem_size: in: sizeof(struct drm_rbln_sync).
 * @out_handle: in: syncobj that gets the job's fence, 0 for none.
 * @out_flags: in: must be 0.
 * @out_point: in: timeline point for @out_handle, 0 for binary.
 * @seqno: out: the job's sequence number in its queue (1, 2, ...).
 *
 * Everything is checked before the job is queued; on error nothing was
 * queued.  The job's own errors (MMU fault, bad packet, timeout) arrive
 * later, in its fence: DRM_IOCTL_RBLN_WAIT reports them.
 * Errors: -EINVAL (flags, sizes, alignment, elem sizes, counts),
 * -ENOENT (unknown queue, GEM handle or syncobj of this file), -ERANGE
 * (cmd_offset + cmd_size beyond the buffer), -EFAULT, -ENOMEM, -EIO (the
 * card is not usable), -ENODEV.
 *
 * The same struct is the payload of the io_uring command
 * RBLN_URING_CMD_SUBMIT (below), so it is exactly 80 bytes.
 */
/*
 * drm_rbln_submit.flags: the job does not wait for the fences of shared
 * buffers either (explicit sync, e.g. clients that order their jobs with
 * WAIT packets on a shared buffer: implicit sync would deadlock them).
 */
#define RBLN_SUBMIT_NO_IMPLICIT_WAIT	(1u << 0)

struct drm_rbln_submit {
	__u32 queue_id;
	__u32 flags;
	__u32 cmd_handle;
	__u32 cmd_size;
	__u64 cmd_offset;
	__u64 bo_handles;
	__u32 bo_count;
	__u32 bo_elem_size;
	__u64 in_syncs;
	__u32 in_count;
	__u32 in_elem_size;
	__u32 out_handle;
	__u32 out_flags;
	__u64 out_point;
	__u64 seqno;
};

/* drm_rbln_wait.flags */
#define RBLN_WAIT_SYNCOBJ	(1u << 0)	/* wait for @sync, not @queue_id + @seqno */

/**
 * struct drm_rbln_wait - wait for a job (DRM_IOCTL_RBLN_WAIT)
 * @flags: in: RBLN_WAIT_* flags.
 * @queue_id: in: the queue (without RBLN_WAIT_SYNCOBJ), else 0.
 * @seqno: in: a seqno SUBMIT returned for @queue_id, else 0.
 * @sync: in: with RBLN_WAIT_SYNCOBJ, the syncobj and point, else zero.
 * @timeout_ns: in: absolute CLOCK_MONOTONIC deadline in ns; 0 polls.
 * @job_error: out: 0 if the job succeeded, else its -errno (-EFAULT MMU
 *	fault of this job or of an earlier job of the same file: a file
 *	whose job faulted runs nothing more, -EINVAL bad packet, -EPERM
 *	privileged packet, -EIO DMA error, lost in a card reset or on a
 *	faulted card, -ETIMEDOUT timeout/hang, -ENODEV the card went away
 *	(unbound, unplugged or removed) before the job was done,
 *	-ECANCELED cancelled because its file was released (closed by its
 *	last holder, or its process killed) and the job was still not done
 *	after the release_grace_ms module parameter (1 s by default); a
 *	job then still waiting for an in-fence of someone else (another
 *	file's job, a foreign syncobj or shared buffer) does not wait for
 *	it any more, and the release does not either, or -ESRCH if its
 *	process was killed before the scheduler took the job).  Only those
 *	who share its out-syncobj or buffers can see the last two.  A
 *	failed in-fence does not fail the job: it runs once that fence has
 *	signalled, whatever its error (a job of the same file that failed
 *	with -EFAULT fails this one anyway, see above).
 * @job_detail: out: why the card failed the job, beyond @job_error: the
 *	completion's detail of firmware-iface 1.4 (rbln_fw_graph.h
 *	RBLN_FW_GRAPH_E_*: which check refused a GRAPH_EXEC's Definition or
 *	binding, or RBLN_FW_GRAPH_E_IN_NODE: a node failed while running);
 *	0 if the job succeeded, failed without a detail or never ran.  Set
 *	for this driver's jobs (by queue + seqno, or a syncobj holding one
 *	of its jobs' fences), 0 for any other fence.  In: zero.
 * @job_detail_arg: out: where: the section, node, root slot or boundary
 *	@job_detail names (rbln_fw_graph.md), else 0.  In: zero.
 * @pad: zero.
 *
 * Interruptible.  Returns 0 once the job is done (whatever its outcome:
 * see @job_error), -ETIME if the deadline passed first, -ENOENT for an
 * unknown queue or syncobj, a syncobj (point) that has no fence yet, or a
 * seqno not yet submitted, -EINVAL for bad
 * flags or non-zero unused fields, -EINTR/-ERESTARTSYS on a signal.
 * The payload of RBLN_URING_CMD_WAIT too.
 */
struct drm_rbln_wait {
	__u32 flags;
	__u32 queue_id;
	__u64 seqno;
	struct drm_rbln_sync sync;
	__s64 timeout_ns;
	__s32 job_error;
	__u32 job_detail;
	__u32 job_detail_arg;
	__u32 pad;
};

/*
 * io_uring passthrough (IORING_OP_URING_CMD on the open accel fd).  The
 * ring must use IORING_SETUP_SQE128 (the payload is the 80-byte struct in
 * sqe->cmd) and IORING_SETUP_CQE32; anything else fails the command with
 * -EINVAL.  cmd_op is one of:
 *
 *   RBLN_URING_CMD_SUBMIT  payload struct drm_rbln_submit (@seqno unused);
 *       the CQE is posted when the job is done: res = 0 or the job's
 *       -errno (as drm_rbln_wait.job_error), or the submit error;
 *       big_cqe[0] = the job's seqno.
 *   RBLN_URING_CMD_WAIT    payload struct drm_rbln_wait (@job_error,
 *       @job_detail and @job_detail_arg unused); the CQE is posted when
 *       the job or fence is done: res = its job error, -ETIME at the
 *       deadline (0 = no deadline here), -ENOENT; big_cqe[0] = the seqno
 *       waited for (0 for a syncobj).
 *
 * A CQE has no room for a failed job's detail: DRM_IOCTL_RBLN_WAIT on the
 * job's queue and seqno reads it (while the job is among its queue's last
 * 4096), without waiting as the job is done.
 *
 * Pending commands complete with -ECANCELED when the ring or the process
 * goes away.  The plain ioctls stay complete for hosts with io_uring off.
 * Any ring setup with SQE128 and CQE32 works, IORING_SETUP_SQPOLL too:
 * the ring's polling thread then issues the commands and takes their
 * completions, and the submitting thread only fills SQEs and reaps CQEs.
 */
#define RBLN_URING_CMD_SUBMIT	0x01
#define RBLN_URING_CMD_WAIT	0x02

#define DRM_RBLN_GET_INFO	0x00
#define DRM_RBLN_BO_CREATE	0x01
#define DRM_RBLN_BO_INFO	0x02
#define DRM_RBLN_BO_USERPTR	0x03
#define DRM_RBLN_QUEUE_CREATE	0x04
#define DRM_RBLN_QUEUE_DESTROY	0x05
#define DRM_RBLN_SUBMIT		0x06
#define DRM_RBLN_WAIT		0x07

#define DRM_IOCTL_RBLN_GET_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_GET_INFO, struct drm_rbln_get_info)
#define DRM_IOCTL_RBLN_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_CREATE, struct drm_rbln_bo_create)
#define DRM_IOCTL_RBLN_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_INFO, struct drm_rbln_bo_info)
#define DRM_IOCTL_RBLN_BO_USERPTR \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_USERPTR, struct drm_rbln_bo_userptr)
#define DRM_IOCTL_RBLN_QUEUE_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_QUEUE_CREATE, struct drm_rbln_queue_create)
#define DRM_IOCTL_RBLN_QUEUE_DESTROY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_RBLN_QUEUE_DESTROY, struct drm_rbln_queue_destroy)
#define DRM_IOCTL_RBLN_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_SUBMIT, struct drm_rbln_submit)
#define DRM_IOCTL_RBLN_WAIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_WAIT, struct drm_rbln_wait)

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_RBLN_ACCEL_H_ */
