/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_offload.h - C ABI of librbln's offload scopes
 * (rbln/offload.hpp): the host copies of storages created on this thread
 * while a scope is open are written to an unnamed file (io_uring) at
 * rbln_offload_now() and at rbln_offload_end(), their memory freed, and
 * read back transparently when the host or an upload needs them.
 *
 * Scopes are per thread and nest (a storage belongs to the innermost scope
 * open at its creation); a scope is ended on the thread that began it.
 * Data is never lost: a write that fails (ENOSPC, EIO, a short write)
 * leaves the host copy in memory and is counted and kept
 * (rbln_offload_failure_message()); rbln_offload_now() then returns
 * RBLN_ERR_IO with the first failure's message, rbln_offload_end() returns
 * RBLN_OK (check the stats' failures).
 *
 * Conventions are rbln.h's: every entry point returns an rbln_status; on
 * failure the message is available from rbln_last_error_message(), the one
 * thread-local error channel of every C header.  Structs carry their size
 * first.  No C++ exception crosses this interface.
 */
#ifndef RBLN_RBLN_OFFLOAD_H
#define RBLN_RBLN_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rbln_offload rbln_offload; /* opaque */

struct rbln_offload_options {
    uint32_t struct_size; /* in: sizeof(struct rbln_offload_options) */
    uint32_t pad;         /* must be 0 */
    /* The file's directory; NULL or "": $RBLN_OFFLOAD_DIR, else $TMPDIR,
     * else /var/tmp. */
    const char* directory;
    /* An existing file to use instead (never truncated nor unlinked);
     * NULL or "": an unnamed temporary file in the directory. */
    const char* file;
    uint64_t min_bytes; /* storages of fewer bytes stay in memory */
};

struct rbln_offload_stats {
    uint32_t struct_size; /* in: sizeof(struct rbln_offload_stats) */
    uint32_t pad;
    uint64_t writes, bytes_offloaded;   /* host copies written out (memory freed) */
    uint64_t reads, bytes_brought_back; /* host copies read back */
    uint64_t failures;                  /* failed writes/reads (data kept) */
    uint64_t bytes_dropped;             /* freed without a write (stale or already in the file) */
    uint64_t bytes_paged_out;           /* now: host copies held by the file only */
};

/* Opens a scope on this thread and makes its file (@options may be NULL:
 * the defaults).  RBLN_ERR_NOT_FOUND / RBLN_ERR_PERMISSION_DENIED /
 * RBLN_ERR_IO name the directory. */
rbln_status rbln_offload_begin(const struct rbln_offload_options* options, rbln_offload** scope);
/* Writes out the scope's host copies now; RBLN_ERR_IO (first failure) if
 * some could not be written: those stay in memory. */
rbln_status rbln_offload_now(rbln_offload* scope);
/* Offloads (failures recorded, not returned) and closes; on the opening
 * thread only (RBLN_ERR_INVALID_ARGUMENT elsewhere).  Idempotent. */
rbln_status rbln_offload_end(rbln_offload* scope);
/* Ends it if open, then frees it (the file lives while storages need it).
 * On another thread than the opening one while open:
 * RBLN_ERR_INVALID_ARGUMENT and nothing is freed.  NULL is a no-op. */
rbln_status rbln_offload_destroy(rbln_offload* scope);

/* The scope's figures, or the process's (@scope NULL). */
rbln_status rbln_offload_get_stats(const rbln_offload* scope, struct rbln_offload_stats* stats);
/* The message of failure @index (0: the first), NUL-terminated, into @buf
 * of @size bytes (truncated if it does not fit); *@needed (may be NULL)
 * gets its length + 1.  RBLN_ERR_NOT_FOUND past the last failure. */
rbln_status rbln_offload_failure_message(const rbln_offload* scope, size_t index, char* buf,
                                         size_t size, size_t* needed);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_OFFLOAD_H */
