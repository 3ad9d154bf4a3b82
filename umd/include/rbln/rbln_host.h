/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_host.h - C ABI of librbln's pinned host memory
 * (rbln/host_allocator.hpp): the caching pinned host allocator and
 * huge_host_empty().
 *
 * rbln_host_alloc() hands out page-aligned blocks (the request rounded up
 * to a power of two, at least 4 KiB) of host memory placed on the card's
 * NUMA node, mlock()ed where allowed, and registered with the kernel as
 * pinned user pages: copies between them and the card (rbln_memcpy_htod /
 * _dtoh with a plain pointer inside the block) are asynchronous and the
 * card DMAs them directly.  rbln_host_free() keeps the block cached for the
 * next request of its size; it is reused only once no copy or job of the
 * card still uses it.  rbln_host_empty_cache() returns cached blocks to the
 * system.
 *
 * rbln_huge_host_empty() makes one 2 MiB-aligned, prefaulted, NUMA-local,
 * pinned buffer backed by huge pages where possible (info.backing says
 * which).
 *
 * Conventions are rbln.h's: every entry point returns an rbln_status; on
 * failure the message is available from rbln_last_error_message(), the one
 * thread-local error channel of every C header.  Structs carry their size
 * first.  No C++ exception crosses this interface.
 */
#ifndef RBLN_RBLN_HOST_H
#define RBLN_RBLN_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/* A pinned block of at least @size bytes (> 0) for logical device @device;
 * its address in *@ptr.  RBLN_ERR_OUT_OF_MEMORY if it cannot be pinned
 * (RLIMIT_MEMLOCK) even after the cache was emptied. */
rbln_status rbln_host_alloc(int device, size_t size, void** ptr);
/* Returns a block of rbln_host_alloc() to its cache.  NULL is a no-op;
 * any other pointer not from rbln_host_alloc() is RBLN_ERR_INVALID_ARGUMENT. */
rbln_status rbln_host_free(void* ptr);
/* The size class of the block at @ptr (as rbln_host_alloc() returned it). */
rbln_status rbln_host_block_size(const void* ptr, size_t* size);
/* Returns the cached blocks of @device's allocator whose card work is done
 * to the system (the next allocation maps and pins again). */
rbln_status rbln_host_empty_cache(int device);
/* One statistic of @device's pinned host allocator by its key
 * ("allocated_bytes.current", "num_host_alloc", ...; see
 * rbln/host_allocator.hpp); RBLN_ERR_INVALID_ARGUMENT for an unknown key. */
rbln_status rbln_host_memory_stat(int device, const char* key, int64_t* value);

typedef struct rbln_huge_host rbln_huge_host; /* opaque */

/* What backs a huge host buffer (rbln::HugeBacking). */
#define RBLN_HUGE_HOST_HUGETLB 0u     /* hugetlbfs pages (MAP_HUGETLB) */
#define RBLN_HUGE_HOST_THP 1u         /* transparent huge pages (MADV_HUGEPAGE) */
#define RBLN_HUGE_HOST_SMALL_PAGES 2u /* neither was available */

/* A buffer of @nbytes (> 0) rounded up to 2 MiB for @device; its address in
 * *@data (may be NULL). */
rbln_status rbln_huge_host_empty(int device, uint64_t nbytes, rbln_huge_host** buffer, void** data);
/* Unregisters and unmaps it (copies still running keep the pages pinned
 * until done).  NULL is a no-op. */
rbln_status rbln_huge_host_free(rbln_huge_host* buffer);

struct rbln_huge_host_info {
    uint32_t struct_size; /* in: sizeof(struct rbln_huge_host_info) */
    uint32_t backing;     /* RBLN_HUGE_HOST_* */
    uint64_t size;        /* bytes (a multiple of 2 MiB) */
    uint64_t huge_bytes;  /* bytes the kernel backs with huge pages now */
    void* data;
    uint32_t numa_placed; /* 1 if placed on the card's NUMA node */
    uint32_t reserved;
};

rbln_status rbln_huge_host_get_info(const rbln_huge_host* buffer, struct rbln_huge_host_info* info);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_HOST_H */
