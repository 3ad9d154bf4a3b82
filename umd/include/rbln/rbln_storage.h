/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_storage.h - C ABI of librbln's lazy device storage
 * (rbln/storage.hpp): create, first device use, host read and write, bind,
 * copies into and out of a storage on a stream, record_stream.  Operators
 * on storages are in rbln_ops.h.
 *
 * A storage gets an identity at creation and device memory (from the
 * process allocator of its logical device, rbln_alloc.h) at its first
 * device use, unless RBLN_EAGER_MALLOC=1 (read once, at the first storage
 * of the process) commits it at creation.  Data moves only when the latest
 * data is on the other side: one upload when a device use reads a
 * host-latest storage, one download when the host reads a device-latest
 * one.  The device VA (data_ptr) is an address for the card: the CPU must
 * never dereference it.
 *
 * Conventions are rbln.h's: every entry point returns an rbln_status; on
 * failure the message is available from rbln_last_error_message(), the one
 * thread-local error channel of every C header.  Structs carry their size
 * first.  No C++ exception crosses this interface.
 */
#ifndef RBLN_RBLN_STORAGE_H
#define RBLN_RBLN_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rbln_storage rbln_storage; /* opaque */

/* Element types (rbln::ElementType). */
#define RBLN_STORAGE_U8 0u
#define RBLN_STORAGE_FP32 1u
#define RBLN_STORAGE_FP16 2u
#define RBLN_STORAGE_BF16 3u

/* Coherence states (rbln::Coherence). */
#define RBLN_STORAGE_HOST_LATEST 0u
#define RBLN_STORAGE_DEVICE_LATEST 1u
#define RBLN_STORAGE_IN_SYNC 2u

/* What a device use does with the storage (rbln::DeviceAccess). */
#define RBLN_STORAGE_READ 0u       /* reads it */
#define RBLN_STORAGE_WRITE 1u      /* overwrites all of it without reading */
#define RBLN_STORAGE_READ_WRITE 2u /* reads it, or writes part of it */

/* A storage of @nbytes (a whole number of @element_type elements) on
 * logical device @device.  Lazy unless RBLN_EAGER_MALLOC=1; then
 * RBLN_ERR_OUT_OF_MEMORY can come from here.  A lazy storage plans only:
 * it opens no NPU and fixes no device mapping (RBLN_ERR_NO_DEVICE if
 * @device is not in the plan); host reads and writes keep it so, and its
 * first device use commits. */
rbln_status rbln_storage_create(int device, uint64_t nbytes, uint32_t element_type,
                                rbln_storage** storage);
/* Drops the storage; device work using its memory keeps it until done.
 * NULL is a no-op. */
rbln_status rbln_storage_destroy(rbln_storage* storage);

/* Before a device operation on the device's default stream that uses the
 * storage as @access (RBLN_STORAGE_READ, ...): commits it (the first use;
 * RBLN_ERR_OUT_OF_MEMORY names the NPU, chiplet and figures), uploads if
 * needed.  The memory's device VA into *@device_va and the GEM handle to
 * list in the job into *@handle (either may be NULL). */
rbln_status rbln_storage_device_use(rbln_storage* storage, uint32_t access, uint64_t* device_va,
                                    uint32_t* handle);
/* The device VA (commits a lazy storage; moves no data).  Not a CPU
 * address. */
rbln_status rbln_storage_data_ptr(rbln_storage* storage, uint64_t* device_va);

/* Host access: @size bytes at @offset (downloads first if device-latest). */
rbln_status rbln_storage_read(rbln_storage* storage, uint64_t offset, void* data, size_t size);
/* Makes it host-latest; downloads first only when device-latest and the
 * write does not cover the whole storage. */
rbln_status rbln_storage_write(rbln_storage* storage, uint64_t offset, const void* data,
                               size_t size);

/* bind_device_memory of the contiguous byte range [@offset, @offset +
 * @size): device memory now, one flat region.  The range must be the whole
 * storage (offset 0, size nbytes), else RBLN_ERR_INVALID_ARGUMENT. */
rbln_status rbln_storage_bind_device_memory(rbln_storage* storage, uint64_t offset, uint64_t size);

/*
 * Copies on a stream (@stream NULL: the default stream of the storage's
 * device; a stream of another device is RBLN_ERR_INVALID_ARGUMENT).  Each
 * is a device use of the storage (it commits a lazy one): a copy into a
 * storage writes its device memory (as a framework's copy_ into a device
 * tensor; rbln_storage_write is the host-side write) and leaves it
 * device-latest, after uploading the rest first if it was host-latest and
 * the copy covers only part of it; a copy out of a storage reads its device
 * memory (uploading first if host-latest).
 *
 * With @non_blocking, a copy between a storage and host memory is
 * asynchronous (the call returns once it is enqueued) when the host side
 * is pinned memory of the storage's device (rbln_host_alloc,
 * rbln_malloc_host, rbln_host_register, rbln_huge_host_empty); the caller
 * keeps that memory unchanged (a source) or unread (a destination) until
 * the stream reaches the copy (rbln_stream_synchronize, an event).
 * Otherwise, and without @non_blocking, the copy is synchronous.  Between
 * two storages the copy is one device copy in @stream's order on one
 * device, through host memory between two logical devices (rbln.h's
 * rules); without @non_blocking the call waits for it.
 */
rbln_status rbln_storage_copy_from_host(rbln_storage* dst, uint64_t offset, const void* src,
                                        size_t size, rbln_stream* stream, int non_blocking);
rbln_status rbln_storage_copy_to_host(void* dst, rbln_storage* src, uint64_t offset, size_t size,
                                      rbln_stream* stream, int non_blocking);
/* Byte offsets and @size in whole elements of each storage. */
rbln_status rbln_storage_copy(rbln_storage* dst, uint64_t dst_offset, rbln_storage* src,
                              uint64_t src_offset, uint64_t size, rbln_stream* stream,
                              int non_blocking);

/* The storage is also used on @stream (a stream other than the one that
 * first used it): when the storage goes, its device memory returns to the
 * cache only after the work enqueued on @stream until then (the caching
 * allocator's record_stream; commits a lazy storage). */
rbln_status rbln_storage_record_stream(rbln_storage* storage, rbln_stream* stream);

struct rbln_storage_info {
    uint32_t struct_size; /* in: sizeof(struct rbln_storage_info) */
    uint32_t element_type;
    uint64_t id; /* the storage's identity, unique in the process */
    uint64_t nbytes;
    uint32_t resident;  /* 1 once it has device memory */
    uint32_t coherence; /* RBLN_STORAGE_HOST_LATEST, ... */
    uint64_t uploads, downloads, upload_bytes, download_bytes;
    uint64_t commits;
};

rbln_status rbln_storage_get_info(const rbln_storage* storage, struct rbln_storage_info* info);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_STORAGE_H */
