/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_alloc.h - C ABI of librbln's caching allocator of device memory
 * (rbln/allocator.hpp): allocate, free, record_stream, placement, the
 * per-process memory fraction, statistics under PyTorch's key names, the
 * memory summary and empty_cache.
 *
 * Each logical device has one process-wide allocator over the HBM of its
 * chiplets, made at its first real use (rbln_caching_alloc(): it commits
 * the device mapping like rbln_commit(), opens the device and reads
 * RBLN_ALLOC_CONF then).  Queries plan, they do not commit: the statistics
 * (rbln_memory_stat(s), rbln_memory_allocated() and the other byte
 * counts, rbln_memory_summary()) of a device never used read an empty
 * allocator planned from sysfs, and rbln_empty_cache() and the
 * rbln_reset_*_memory_stats() of such a device do nothing; none of them
 * opens an NPU or fixes the mapping, so a process that only read them may
 * fork() workers that use the device.  Conventions are rbln.h's: every entry point
 * returns an rbln_status; on failure the message is available from
 * rbln_last_error_message(), the one thread-local error channel of every C
 * header.  No C++ exception crosses this interface.
 */
#ifndef RBLN_RBLN_ALLOC_H
#define RBLN_RBLN_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/* rbln_caching_alloc(place): the allocator's default chiplet (place 0, the first
 * chiplet of the first NPU, unless changed). */
#define RBLN_PLACE_DEFAULT (-1)

/* rbln_set_memory_fraction(place): every chiplet of the device. */
#define RBLN_PLACE_ALL (-2)

/* The allocator's id of @stream (rbln.h), for rbln_caching_alloc(@stream):
 * blocks are reused only by requests of the stream that allocated them. */
rbln_status rbln_alloc_stream_id(const rbln_stream* stream, uint64_t* id);

/* A block of at least @size bytes on logical device @device, place @place
 * (index of the chiplet in the device: NPU-major, chiplet-minor; or
 * RBLN_PLACE_DEFAULT), reusable by stream @stream (any stable value, 0 for
 * none); its device VA into *@device_va.  RBLN_ERR_OUT_OF_MEMORY names the
 * NPU, the chiplet and its figures.  @size 0 gives *@device_va = 0. */
rbln_status rbln_caching_alloc(int device, uint64_t size, uint64_t stream, int place,
                               uint64_t* device_va);

/* Returns a block of rbln_caching_alloc() to the cache (0 is a no-op). */
rbln_status rbln_caching_free(int device, uint64_t device_va);

struct rbln_alloc_block_info {
    uint32_t struct_size; /* in: sizeof(struct rbln_alloc_block_info) */
    uint32_t handle;      /* GEM handle of the segment (list it in jobs) */
    uint64_t size;        /* block size (rounded) */
    uint64_t requested_size;
    uint64_t segment_offset; /* offset of the block in the segment */
    uint32_t place;
    uint32_t pad;
};

/* Facts about the live block at @device_va. */
rbln_status rbln_alloc_block_get_info(int device, uint64_t device_va,
                                      struct rbln_alloc_block_info* info);

/* The live block at @device_va is also used by @stream (a stream other
 * than the one it was allocated for): when freed, it returns to the cache
 * only after the work enqueued on @stream until then (record_stream). */
rbln_status rbln_caching_record_stream(int device, uint64_t device_va, rbln_stream* stream);

/* Placement: allocations without a place (RBLN_PLACE_DEFAULT, and every
 * storage and rbln_malloc() buffer without one) go to the device's default
 * place, place 0 (the first chiplet of the first NPU) unless set, so that
 * a single-chiplet workload stays on one chiplet.  Setting it is a use of
 * the device (it commits the mapping and opens the device); reading it of
 * a device never used gives 0 and opens nothing.  RBLN_ERR_INVALID_ARGUMENT
 * for a place the device does not have. */
rbln_status rbln_set_default_place(int device, int place);
rbln_status rbln_get_default_place(int device, int* place);

/* Caps chiplet @place of @device (RBLN_PLACE_ALL: each of its chiplets) at
 * @fraction (0..1) of its HBM for this process, as PyTorch's
 * set_per_process_memory_fraction: an allocation beyond it is
 * RBLN_ERR_OUT_OF_MEMORY (after freeing cache), and it is the base of the
 * garbage_collection_threshold of RBLN_ALLOC_CONF.  A use of the device. */
rbln_status rbln_set_memory_fraction(int device, double fraction, int place);

/* Gives every unused cached segment back to the kernel. */
rbln_status rbln_empty_cache(int device);

/* One statistic by its PyTorch name ("allocated_bytes.all.peak", ...) or,
 * with the "npu.<n>.chiplet.<c>." prefix, of one chiplet.  Device-wide
 * peaks are the exact peaks of the sums. */
rbln_status rbln_memory_stat(int device, const char* key, int64_t* value);

struct rbln_memory_stat_entry {
    char key[96];
    int64_t value;
};

/* Every statistic, sorted by key (@per_chiplet: the prefixed per-chiplet
 * keys instead): up to @capacity into @entries, the total number into
 * *@count (call with capacity 0 to size the array). */
rbln_status rbln_memory_stats(int device, int per_chiplet, struct rbln_memory_stat_entry* entries,
                              size_t capacity, size_t* count);

/* memory_allocated / memory_reserved / max_memory_allocated / max_memory_reserved. */
rbln_status rbln_memory_allocated(int device, uint64_t* bytes);
rbln_status rbln_memory_reserved(int device, uint64_t* bytes);
rbln_status rbln_max_memory_allocated(int device, uint64_t* bytes);
rbln_status rbln_max_memory_reserved(int device, uint64_t* bytes);
rbln_status rbln_reset_peak_memory_stats(int device);
rbln_status rbln_reset_accumulated_memory_stats(int device);

/* The memory summary table, NUL-terminated into @buf (@len bytes); its
 * length without the NUL into *@needed (may be NULL).  RBLN_ERR_INVALID_ARGUMENT
 * if it does not fit (*@needed says how much is needed).  @title_word: the
 * title's first word (NULL: "rbln"). */
rbln_status rbln_memory_summary(int device, const char* title_word, char* buf, size_t len,
                                size_t* needed);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_ALLOC_H */
