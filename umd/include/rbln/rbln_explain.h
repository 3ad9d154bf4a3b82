/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_explain.h - C ABI of librbln's explain regions
 * (rbln/explain.hpp): what librbln did with the host behind the caller's
 * back while a region was open.
 *
 * A region is per thread: it records what librbln does on the thread that
 * opened it until rbln_explain_end(), which must run on that thread;
 * regions nest (every open region of the thread records).  The report
 * starts with "[clean]" when only the expected uploads and downloads
 * happened (see rbln/explain.hpp for what is expected) and with
 * "[overhead: N signals]" otherwise, followed by the counts and a table of
 * the signals.  Clean means no hidden host round trip, not fast.
 *
 * Conventions are rbln.h's: every entry point returns an rbln_status; on
 * failure the message is available from rbln_last_error_message(), the one
 * thread-local error channel of every C header.  Structs carry their size
 * first.  No C++ exception crosses this interface.
 */
#ifndef RBLN_RBLN_EXPLAIN_H
#define RBLN_RBLN_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rbln_explain rbln_explain; /* opaque */

/* Opens a region on this thread named @name (may be NULL), opened at
 * @file:@line (@file may be NULL: no location).  Pass __FILE__, __LINE__. */
rbln_status rbln_explain_begin(const char* name, const char* file, uint32_t line,
                               rbln_explain** region);
/* Stops recording (the records stay); on the opening thread only
 * (RBLN_ERR_INVALID_ARGUMENT elsewhere).  Idempotent. */
rbln_status rbln_explain_end(rbln_explain* region);
/* Ends it if open (on the opening thread) and frees it.  NULL is a no-op. */
rbln_status rbln_explain_destroy(rbln_explain* region);

struct rbln_explain_counts {
    uint32_t struct_size; /* in: sizeof(struct rbln_explain_counts) */
    uint32_t clean;       /* 1 when there is no signal */
    uint64_t signals;
    uint64_t pushes, push_bytes, pushes_expected;
    uint64_t downloads, download_bytes, downloads_expected;
    uint64_t async_transfers, async_bytes;
    uint64_t host_bounces, host_bounce_bytes;
    uint64_t sync_waits;
    uint64_t lazy_commits, commit_bytes;
};

rbln_status rbln_explain_get_counts(const rbln_explain* region, struct rbln_explain_counts* counts);

/* The report, NUL-terminated, into @buf of @size bytes (truncated if it
 * does not fit); *@needed (may be NULL) gets its length + 1.  @buf may be
 * NULL when @size is 0 (to ask for the length). */
rbln_status rbln_explain_report(const rbln_explain* region, char* buf, size_t size, size_t* needed);

/* Until rbln_explain_site_pop(), records of this thread carry @file:@line
 * (@file is copied); sites nest, innermost wins. */
rbln_status rbln_explain_site_push(const char* file, uint32_t line);
/* Ends the innermost site of this thread pushed by rbln_explain_site_push();
 * RBLN_ERR_INVALID_ARGUMENT if there is none. */
rbln_status rbln_explain_site_pop(void);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_EXPLAIN_H */
