/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_storage.h - C ABI of librbln's lazy device storage
 * (rbln/storage.hpp): create, first device use, host read and write, bind.
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
 * failure the message is available from rbln_storage_last_error_message()
 * (thread-local, this header's entry points only).  Structs carry their
 * size first.  No C++ exception crosses this interface.
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

/* Message of the last failure of an rbln_storage.h call on this thread. */
const char* rbln_storage_last_error_message(void);

/* A storage of @nbytes (a whole number of @element_type elements) on
 * logical device @device.  Lazy unless RBLN_EAGER_MALLOC=1; then
 * RBLN_ERR_OUT_OF_MEMORY can come from here. */
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
