/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Submission helpers of the rbln kselftests: queues, SUBMIT and WAIT,
 * command buffers filled with firmware-iface packets (rbln_fw_cmd.h),
 * buffers with their CPU mapping and device VA, syncobjs, and the io_uring
 * passthrough (a prep function of our own for the 128-byte SQE: Debian's
 * liburing 2.3 has none).
 *
 * Like rbln_util.h and rbln_mem.h: every function returns 0 (or a count)
 * on success and a negative errno on failure, and none of them prints.
 */
#ifndef RBLN_KSFT_SUB_H
#define RBLN_KSFT_SUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include <liburing.h>

#include <drm/rbln_accel.h>
#include <rbln_fw_cmd.h>

#include "rbln_mem.h"

/* Waits of the tests never take longer than this unless they say so. */
#define RBLN_JOB_WAIT_MS 20000

/* Bytes of each packet (the structs of rbln_fw_cmd.h). */
#define RBLN_PKT_NOP_BYTES sizeof(struct rbln_fw_pkt_nop)
#define RBLN_PKT_COPY_BYTES sizeof(struct rbln_fw_pkt_copy)
#define RBLN_PKT_STRIDED_BYTES sizeof(struct rbln_fw_pkt_copy_strided)
#define RBLN_PKT_FILL_BYTES sizeof(struct rbln_fw_pkt_fill)
#define RBLN_PKT_SIGNAL_BYTES sizeof(struct rbln_fw_pkt_signal)
#define RBLN_PKT_WAIT_BYTES sizeof(struct rbln_fw_pkt_wait)
#define RBLN_PKT_TIMESTAMP_BYTES sizeof(struct rbln_fw_pkt_timestamp)
#define RBLN_PKT_LAUNCH_BYTES sizeof(struct rbln_fw_pkt_launch)

/* Monotonic time in ns (the clock of drm_rbln_wait.timeout_ns). */
__s64 rbln_now_ns(void);

/* An absolute deadline @ms milliseconds from now. */
__s64 rbln_deadline_ms(int ms);

/*
 * A buffer of the tests: a GEM buffer (host, HBM) with its CPU mapping, or
 * pinned user memory (userptr) with the memory it pins.
 */
struct rbln_buf {
	__u32 handle;
	__u32 region;		/* RBLN_REGION_HOST, _HBM or _USERPTR */
	__u32 chiplet;
	__u64 va;		/* device VA in the owning file's VM */
	__u64 size;		/* bytes, as allocated */
	unsigned char *map;	/* CPU view (the mmap, or the user memory) */
};

/* A host (@region RBLN_REGION_HOST) or HBM buffer of @size, mmapped. */
int rbln_buf_new(int fd, struct rbln_buf *b, __u64 size, __u32 region,
		 __u32 chiplet);

/* @size bytes (rounded to pages) of anonymous memory, pinned as userptr. */
int rbln_buf_userptr(int fd, struct rbln_buf *b, __u64 size);

/* Unmaps and closes (and for userptr unmaps the user memory). */
void rbln_buf_free(int fd, struct rbln_buf *b);

/*
 * A command buffer: a buffer that holds packets.  Packets are appended at
 * @len; a job is the packets from @start (rbln_cmd_begin()) to @len, so
 * several jobs can sit in one buffer at once.
 */
struct rbln_cmdbuf {
	struct rbln_buf buf;
	__u32 start;
	__u32 len;
	bool overflow;		/* an append did not fit */
};

int rbln_cmd_init(int fd, struct rbln_cmdbuf *cb, __u64 size, __u32 region,
		  __u32 chiplet);
void rbln_cmd_fini(int fd, struct rbln_cmdbuf *cb);

/* Starts a new job at the end of what the buffer holds. */
void rbln_cmd_begin(struct rbln_cmdbuf *cb);

/* Forgets every packet (only when no job of the buffer is in flight). */
void rbln_cmd_reset(struct rbln_cmdbuf *cb);

/* Bytes of the current job. */
static inline __u32 rbln_cmd_job_bytes(const struct rbln_cmdbuf *cb)
{
	return cb->len - cb->start;
}

/*
 * Appends @bytes (a multiple of 8) of zeroes and returns them, or NULL if
 * the buffer is full (then cb->overflow is set).  The packet's header is
 * the caller's.
 */
void *rbln_cmd_append(struct rbln_cmdbuf *cb, __u32 bytes);

/* Appends a raw packet of @bytes from @pkt. */
void rbln_cmd_raw(struct rbln_cmdbuf *cb, const void *pkt, __u32 bytes);

void rbln_cmd_nop(struct rbln_cmdbuf *cb, __u32 bytes);
void rbln_cmd_copy(struct rbln_cmdbuf *cb, __u64 src, __u64 dst, __u64 size);
void rbln_cmd_copy_strided(struct rbln_cmdbuf *cb, __u64 src, __u64 dst,
			   __u64 width, __u32 height, __u32 depth,
			   __u64 src_pitch, __u64 src_slice, __u64 dst_pitch,
			   __u64 dst_slice);
void rbln_cmd_fill(struct rbln_cmdbuf *cb, __u64 dst, __u64 size,
		   __u64 pattern, __u32 pattern_bytes);
void rbln_cmd_signal(struct rbln_cmdbuf *cb, __u64 va, __u64 value,
		     __u32 flags);
void rbln_cmd_wait(struct rbln_cmdbuf *cb, __u64 va, __u64 value,
		   __u64 timeout_ns);
void rbln_cmd_timestamp(struct rbln_cmdbuf *cb, __u64 va);

/* Appends @l with its header (opcode LAUNCH, flags 0) filled in. */
void rbln_cmd_launch(struct rbln_cmdbuf *cb,
		     const struct rbln_fw_pkt_launch *l);

/* QUEUE_CREATE (@queue_id gets the id) and QUEUE_DESTROY. */
int rbln_queue_create(int fd, __u32 chiplet_mask, __u32 priority,
		      __u32 *queue_id);
int rbln_queue_destroy(int fd, __u32 queue_id);

/* Raw SUBMIT and WAIT; @s / @w are updated as the kernel left them. */
int rbln_submit_raw(int fd, struct drm_rbln_submit *s);
int rbln_wait_raw(int fd, struct drm_rbln_wait *w);

/* A submit of the current job of @cb with @bos, no syncs. */
void rbln_submit_args(struct drm_rbln_submit *s, __u32 queue_id,
		      const struct rbln_cmdbuf *cb, const __u32 *bos,
		      __u32 nbos);

/* Submits the current job of @cb on @queue_id; *@seqno gets its seqno. */
int rbln_submit_job(int fd, __u32 queue_id, const struct rbln_cmdbuf *cb,
		    const __u32 *bos, __u32 nbos, __u64 *seqno);

/*
 * WAIT for @seqno of @queue_id up to @timeout_ms (0 polls); the job's
 * error goes to *@job_error.  Returns WAIT's own result (0, -ETIME, ...).
 */
int rbln_wait_job(int fd, __u32 queue_id, __u64 seqno, int timeout_ms,
		  __s32 *job_error);

/* WAIT (RBLN_WAIT_SYNCOBJ) for @point of syncobj @handle. */
int rbln_wait_syncobj(int fd, __u32 handle, __u64 point, int timeout_ms,
		      __s32 *job_error);

/*
 * Submits the current job of @cb, waits for it (RBLN_JOB_WAIT_MS) and
 * returns the submit's or the wait's error, else 0 with the job's error
 * in *@job_error.
 */
int rbln_run_job(int fd, __u32 queue_id, const struct rbln_cmdbuf *cb,
		 const __u32 *bos, __u32 nbos, __s32 *job_error);

/* Syncobjs through the DRM core's DRM_IOCTL_SYNCOBJ_* ioctls. */
int rbln_syncobj_create(int fd, __u32 *handle);
int rbln_syncobj_destroy(int fd, __u32 handle);
/*
 * Syncobj @handle of file @from as a handle of file @to (the same syncobj,
 * through its fd; the files may be of different devices).
 */
int rbln_syncobj_share(int from, __u32 handle, int to, __u32 *out);
/* Current value (last signalled point) of a timeline syncobj. */
int rbln_syncobj_query(int fd, __u32 handle, __u64 *point);
/* Signals @point (timeline) or the syncobj (binary, @point 0) from the CPU. */
int rbln_syncobj_signal(int fd, __u32 handle, __u64 point);
/*
 * DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT for @point (0: binary) up to
 * @timeout_ms; -ETIME at the deadline, -EINVAL if nothing was submitted
 * for the point (no WAIT_FOR_SUBMIT).
 */
int rbln_syncobj_wait(int fd, __u32 handle, __u64 point, int timeout_ms);

/*
 * io_uring with 128-byte SQEs and 32-byte CQEs (what the rbln commands
 * need); @flags are further IORING_SETUP_* flags, @entries the SQ size.
 */
int rbln_uring_init(struct io_uring *ring, unsigned int entries,
		    unsigned int flags);

/*
 * Fills @sqe (of a ring with 128-byte SQEs) as IORING_OP_URING_CMD on
 * @fd with @cmd_op and the @len bytes of @payload at sqe->cmd: all 128
 * bytes are zeroed first, so __pad1 and uring_cmd_flags are 0.  With
 * @sqe64 the ring has 64-byte SQEs and only 16 payload bytes fit: the
 * payload is cut there (for the test of such rings).
 */
void rbln_prep_uring_cmd(struct io_uring_sqe *sqe, int fd, __u32 cmd_op,
			 const void *payload, size_t len, __u64 user_data,
			 bool sqe64);

/* The seqno the rbln command puts in the CQE32 extra (big_cqe[0]). */
static inline __u64 rbln_cqe_seqno(const struct io_uring_cqe *cqe)
{
	return cqe->big_cqe[0];
}

/*
 * Waits up to @timeout_ms (0: only what is there) for one CQE, hands out
 * its user_data, res and big_cqe[0] (0 on a ring without CQE32) and marks
 * it seen.  Returns 0, -ETIME, or another -errno.
 */
int rbln_uring_reap(struct io_uring *ring, int timeout_ms, __u64 *user_data,
		    __s32 *res, __u64 *extra);

/* Tiny deterministic PRNG of the tests (xorshift64*). */
static inline __u64 rbln_rand(__u64 *state)
{
	__u64 x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 2685821657736338717ull;
}

/* The card's firmware-iface minor through GET_INFO(DEVICE). */
int rbln_iface_minor(int fd, __u32 *minor);

/* /sys/module/rbln/parameters/job_timeout_ms (ms). */
int rbln_job_timeout_ms(__u32 *ms);

#endif /* RBLN_KSFT_SUB_H */
