// SPDX-License-Identifier: GPL-2.0
/*
 * Submission helpers of the rbln kselftests (see rbln_sub.h).
 */
#define _GNU_SOURCE
#include "rbln_sub.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static_assert(sizeof(struct drm_rbln_submit) == 80, "submit payload");
static_assert(sizeof(struct drm_rbln_wait) == 56, "wait payload");
static_assert(sizeof(struct rbln_fw_pkt_copy) == 32, "COPY");
static_assert(sizeof(struct rbln_fw_pkt_copy_strided) == 72, "COPY_STRIDED");
static_assert(sizeof(struct rbln_fw_pkt_fill) == 32, "FILL");
static_assert(sizeof(struct rbln_fw_pkt_signal) == 24, "SIGNAL");
static_assert(sizeof(struct rbln_fw_pkt_wait) == 32, "WAIT");
static_assert(sizeof(struct rbln_fw_pkt_timestamp) == 16, "TIMESTAMP");
static_assert(sizeof(struct rbln_fw_pkt_launch) == 176, "LAUNCH");

__s64 rbln_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__s64)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

__s64 rbln_deadline_ms(int ms)
{
	return rbln_now_ns() + (__s64)ms * 1000000ll;
}

int rbln_buf_new(int fd, struct rbln_buf *b, __u64 size, __u32 region,
		 __u32 chiplet)
{
	struct drm_rbln_bo_create c;
	void *map;
	int err;

	memset(b, 0, sizeof(*b));
	err = rbln_bo_create(fd, size, region, chiplet, 0, &c);
	if (err)
		return err;
	err = rbln_bo_mmap(fd, c.handle, c.size, PROT_READ | PROT_WRITE, &map);
	if (err) {
		rbln_gem_close(fd, c.handle);
		return err;
	}
	b->handle = c.handle;
	b->region = region;
	b->chiplet = c.chiplet;
	b->va = c.device_va;
	b->size = c.size;
	b->map = map;
	return 0;
}

int rbln_buf_userptr(int fd, struct rbln_buf *b, __u64 size)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct drm_rbln_bo_userptr up;
	__u64 len = (size + pg - 1) & ~(__u64)(pg - 1);
	void *mem;
	int err;

	memset(b, 0, sizeof(*b));
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED)
		return -errno;
	err = rbln_bo_userptr(fd, mem, len, 0, &up);
	if (err) {
		munmap(mem, len);
		return err;
	}
	b->handle = up.handle;
	b->region = RBLN_REGION_USERPTR;
	b->va = up.device_va;
	b->size = len;
	b->map = mem;
	return 0;
}

void rbln_buf_free(int fd, struct rbln_buf *b)
{
	if (b->map)
		munmap(b->map, b->size);
	if (b->handle)
		rbln_gem_close(fd, b->handle);
	memset(b, 0, sizeof(*b));
}

int rbln_cmd_init(int fd, struct rbln_cmdbuf *cb, __u64 size, __u32 region,
		  __u32 chiplet)
{
	memset(cb, 0, sizeof(*cb));
	return rbln_buf_new(fd, &cb->buf, size, region, chiplet);
}

void rbln_cmd_fini(int fd, struct rbln_cmdbuf *cb)
{
	rbln_buf_free(fd, &cb->buf);
	memset(cb, 0, sizeof(*cb));
}

void rbln_cmd_begin(struct rbln_cmdbuf *cb)
{
	cb->start = cb->len;
}

void rbln_cmd_reset(struct rbln_cmdbuf *cb)
{
	cb->start = 0;
	cb->len = 0;
	cb->overflow = false;
}

void *rbln_cmd_append(struct rbln_cmdbuf *cb, __u32 bytes)
{
	unsigned char *p;

	if (bytes % 8 || bytes > cb->buf.size - cb->len) {
		cb->overflow = true;
		return NULL;
	}
	p = cb->buf.map + cb->len;
	/* HBM command buffers are write-combined: no reads back */
	memset(p, 0, bytes);
	cb->len += bytes;
	return p;
}

void rbln_cmd_raw(struct rbln_cmdbuf *cb, const void *pkt, __u32 bytes)
{
	void *p = rbln_cmd_append(cb, bytes);

	if (p)
		memcpy(p, pkt, bytes);
}

void rbln_cmd_nop(struct rbln_cmdbuf *cb, __u32 bytes)
{
	struct rbln_fw_pkt_nop hdr = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, bytes),
	};
	void *p = rbln_cmd_append(cb, bytes);

	if (p)
		memcpy(p, &hdr, sizeof(hdr));
}

void rbln_cmd_copy(struct rbln_cmdbuf *cb, __u64 src, __u64 dst, __u64 size)
{
	struct rbln_fw_pkt_copy p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, sizeof(p)),
		.src = src,
		.dst = dst,
		.size = size,
	};

	rbln_cmd_raw(cb, &p, sizeof(p));
}

void rbln_cmd_copy_strided(struct rbln_cmdbuf *cb, __u64 src, __u64 dst,
			   __u64 width, __u32 height, __u32 depth,
			   __u64 src_pitch, __u64 src_slice, __u64 dst_pitch,
			   __u64 dst_slice)
{
	struct rbln_fw_pkt_copy_strided p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY_STRIDED, 0, sizeof(p)),
		.src = src,
		.dst = dst,
		.width = width,
		.height = height,
		.depth = depth,
		.src_pitch = src_pitch,
		.src_slice = src_slice,
		.dst_pitch = dst_pitch,
		.dst_slice = dst_slice,
	};

	rbln_cmd_raw(cb, &p, sizeof(p));
}

void rbln_cmd_fill(struct rbln_cmdbuf *cb, __u64 dst, __u64 size,
		   __u64 pattern, __u32 pattern_bytes)
{
	struct rbln_fw_pkt_fill p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_FILL, 0, sizeof(p)),
		.pattern_bytes = pattern_bytes,
		.dst = dst,
		.size = size,
		.pattern = pattern,
	};

	rbln_cmd_raw(cb, &p, sizeof(p));
}

void rbln_cmd_signal(struct rbln_cmdbuf *cb, __u64 va, __u64 value,
		     __u32 flags)
{
	struct rbln_fw_pkt_signal p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_SIGNAL, flags, sizeof(p)),
		.va = va,
		.value = value,
	};

	rbln_cmd_raw(cb, &p, sizeof(p));
}

void rbln_cmd_wait(struct rbln_cmdbuf *cb, __u64 va, __u64 value,
		   __u64 timeout_ns)
{
	struct rbln_fw_pkt_wait p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_WAIT, 0, sizeof(p)),
		.va = va,
		.value = value,
		.timeout_ns = timeout_ns,
	};

	rbln_cmd_raw(cb, &p, sizeof(p));
}

void rbln_cmd_timestamp(struct rbln_cmdbuf *cb, __u64 va)
{
	struct rbln_fw_pkt_timestamp p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_TIMESTAMP, 0, sizeof(p)),
		.va = va,
	};

	rbln_cmd_raw(cb, &p, sizeof(p));
}

void rbln_cmd_launch(struct rbln_cmdbuf *cb,
		     const struct rbln_fw_pkt_launch *l)
{
	struct rbln_fw_pkt_launch p = *l;

	p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_LAUNCH, 0, sizeof(p));
	rbln_cmd_raw(cb, &p, sizeof(p));
}

int rbln_queue_create(int fd, __u32 chiplet_mask, __u32 priority,
		      __u32 *queue_id)
{
	struct drm_rbln_queue_create q = {
		.chiplet_mask = chiplet_mask,
		.priority = priority,
	};

	if (ioctl(fd, DRM_IOCTL_RBLN_QUEUE_CREATE, &q) != 0)
		return -errno;
	if (queue_id)
		*queue_id = q.queue_id;
	return 0;
}

int rbln_queue_destroy(int fd, __u32 queue_id)
{
	struct drm_rbln_queue_destroy q = { .queue_id = queue_id };

	return ioctl(fd, DRM_IOCTL_RBLN_QUEUE_DESTROY, &q) == 0 ? 0 : -errno;
}

int rbln_submit_raw(int fd, struct drm_rbln_submit *s)
{
	return ioctl(fd, DRM_IOCTL_RBLN_SUBMIT, s) == 0 ? 0 : -errno;
}

int rbln_wait_raw(int fd, struct drm_rbln_wait *w)
{
	int ret;

	do {
		ret = ioctl(fd, DRM_IOCTL_RBLN_WAIT, w);
	} while (ret != 0 && errno == EINTR);
	return ret == 0 ? 0 : -errno;
}

void rbln_submit_args(struct drm_rbln_submit *s, __u32 queue_id,
		      const struct rbln_cmdbuf *cb, const __u32 *bos,
		      __u32 nbos)
{
	memset(s, 0, sizeof(*s));
	s->queue_id = queue_id;
	s->cmd_handle = cb->buf.handle;
	s->cmd_offset = cb->start;
	s->cmd_size = rbln_cmd_job_bytes(cb);
	s->bo_handles = (__u64)(uintptr_t)bos;
	s->bo_count = nbos;
	s->bo_elem_size = sizeof(__u32);
	s->in_elem_size = sizeof(struct drm_rbln_sync);
}

int rbln_submit_job(int fd, __u32 queue_id, const struct rbln_cmdbuf *cb,
		    const __u32 *bos, __u32 nbos, __u64 *seqno)
{
	struct drm_rbln_submit s;
	int err;

	if (cb->overflow)
		return -ENOSPC;
	rbln_submit_args(&s, queue_id, cb, bos, nbos);
	err = rbln_submit_raw(fd, &s);
	if (!err && seqno)
		*seqno = s.seqno;
	return err;
}

static __s64 deadline_of(int timeout_ms)
{
	return timeout_ms ? rbln_deadline_ms(timeout_ms) : 0;
}

int rbln_wait_job(int fd, __u32 queue_id, __u64 seqno, int timeout_ms,
		  __s32 *job_error)
{
	struct drm_rbln_wait w = {
		.queue_id = queue_id,
		.seqno = seqno,
		.timeout_ns = deadline_of(timeout_ms),
	};
	int err = rbln_wait_raw(fd, &w);

	if (job_error)
		*job_error = err ? 0 : w.job_error;
	return err;
}

int rbln_wait_syncobj(int fd, __u32 handle, __u64 point, int timeout_ms,
		      __s32 *job_error)
{
	struct drm_rbln_wait w = {
		.flags = RBLN_WAIT_SYNCOBJ,
		.sync = { .handle = handle, .point = point },
		.timeout_ns = deadline_of(timeout_ms),
	};
	int err = rbln_wait_raw(fd, &w);

	if (job_error)
		*job_error = err ? 0 : w.job_error;
	return err;
}

int rbln_run_job(int fd, __u32 queue_id, const struct rbln_cmdbuf *cb,
		 const __u32 *bos, __u32 nbos, __s32 *job_error)
{
	__u64 seqno = 0;
	int err = rbln_submit_job(fd, queue_id, cb, bos, nbos, &seqno);

	if (err)
		return err;
	return rbln_wait_job(fd, queue_id, seqno, RBLN_JOB_WAIT_MS, job_error);
}

int rbln_syncobj_create(int fd, __u32 *handle)
{
	struct drm_syncobj_create c = { 0 };

	if (ioctl(fd, DRM_IOCTL_SYNCOBJ_CREATE, &c) != 0)
		return -errno;
	*handle = c.handle;
	return 0;
}

int rbln_syncobj_share(int from, __u32 handle, int to, __u32 *out)
{
	struct drm_syncobj_handle h = { .handle = handle };
	int ret;

	if (ioctl(from, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &h))
		return -errno;
	h.handle = 0;
	ret = ioctl(to, DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &h) ? -errno : 0;
	close(h.fd);
	*out = h.handle;
	return ret;
}

int rbln_syncobj_destroy(int fd, __u32 handle)
{
	struct drm_syncobj_destroy d = { .handle = handle };

	return ioctl(fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d) == 0 ? 0 : -errno;
}

int rbln_syncobj_query(int fd, __u32 handle, __u64 *point)
{
	struct drm_syncobj_timeline_array a = {
		.handles = (__u64)(uintptr_t)&handle,
		.points = (__u64)(uintptr_t)point,
		.count_handles = 1,
	};

	*point = 0;
	return ioctl(fd, DRM_IOCTL_SYNCOBJ_QUERY, &a) == 0 ? 0 : -errno;
}

int rbln_syncobj_signal(int fd, __u32 handle, __u64 point)
{
	struct drm_syncobj_timeline_array a = {
		.handles = (__u64)(uintptr_t)&handle,
		.points = (__u64)(uintptr_t)&point,
		.count_handles = 1,
	};
	struct drm_syncobj_array b = {
		.handles = (__u64)(uintptr_t)&handle,
		.count_handles = 1,
	};

	if (point)
		return ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &a) == 0 ?
			       0 :
			       -errno;
	return ioctl(fd, DRM_IOCTL_SYNCOBJ_SIGNAL, &b) == 0 ? 0 : -errno;
}

int rbln_syncobj_wait(int fd, __u32 handle, __u64 point, int timeout_ms)
{
	struct drm_syncobj_timeline_wait w = {
		.handles = (__u64)(uintptr_t)&handle,
		.points = (__u64)(uintptr_t)&point,
		.timeout_nsec = rbln_deadline_ms(timeout_ms),
		.count_handles = 1,
	};
	int ret;

	do {
		ret = ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
	} while (ret != 0 && errno == EINTR);
	return ret == 0 ? 0 : -errno;
}

int rbln_uring_init(struct io_uring *ring, unsigned int entries,
		    unsigned int flags)
{
	return io_uring_queue_init(entries, ring,
				   IORING_SETUP_SQE128 | IORING_SETUP_CQE32 |
					   flags);
}

void rbln_prep_uring_cmd(struct io_uring_sqe *sqe, int fd, __u32 cmd_op,
			 const void *payload, size_t len, __u64 user_data,
			 bool sqe64)
{
	size_t room = sqe64 ? 16 : 80;

	memset(sqe, 0, sqe64 ? 64 : 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	sqe->user_data = user_data;
	memcpy(sqe->cmd, payload, len < room ? len : room);
}

int rbln_uring_reap(struct io_uring *ring, int timeout_ms, __u64 *user_data,
		    __s32 *res, __u64 *extra)
{
	struct __kernel_timespec ts = {
		.tv_sec = timeout_ms / 1000,
		.tv_nsec = (long long)(timeout_ms % 1000) * 1000000ll,
	};
	struct io_uring_cqe *cqe = NULL;
	int err;

	do {
		err = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
	} while (err == -EINTR);
	if (err)
		return err;
	if (user_data)
		*user_data = cqe->user_data;
	if (res)
		*res = cqe->res;
	if (extra)
		*extra = (ring->flags & IORING_SETUP_CQE32) ? cqe->big_cqe[0] :
							       0;
	io_uring_cqe_seen(ring, cqe);
	return 0;
}

int rbln_iface_minor(int fd, __u32 *minor)
{
	struct drm_rbln_info_device d;
	int err = rbln_info_device(fd, &d);

	if (!err)
		*minor = d.fw_iface_minor;
	return err;
}

int rbln_job_timeout_ms(__u32 *ms)
{
	char buf[32];
	char *end = NULL;
	unsigned long v;
	int n = rbln_read_file("/sys/module/rbln/parameters/job_timeout_ms",
			       buf, sizeof(buf));

	if (n < 0)
		return n;
	v = strtoul(buf, &end, 10);
	if (end == buf || *end)
		return -EPROTO;
	*ms = (__u32)v;
	return 0;
}
