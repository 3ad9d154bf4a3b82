/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_ops.h - C ABI of librbln's operators on lazy storages
 * (rbln/ops.hpp): the card's built-in kernels on views of storages
 * (rbln_storage.h), each one job enqueued on a stream.
 *
 * Every operator is asynchronous (one job on @stream; NULL: the default
 * stream of out's device) and a device use of each storage it names, so
 * the lazy-storage rules hold: each input is read (committed at its first
 * use, uploaded once if host-latest), the output is written (without
 * reading it when the view covers its whole storage and is not an input's
 * storage).  All storages must be on the stream's device.  Element types:
 * RBLN_STORAGE_FP32, _FP16 and _BF16.  Failures of the job on the card
 * come from the next synchronize of the stream or device (rbln.h).
 *
 * Conventions are rbln.h's: every entry point returns an rbln_status; on
 * failure the message (naming the operator and the operand) is available
 * from rbln_last_error_message(), the one thread-local error channel of
 * every C header.  Structs carry their size first.  No C++ exception
 * crosses this interface.
 */
#ifndef RBLN_RBLN_OPS_H
#define RBLN_RBLN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"
#include "rbln/rbln_storage.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

#define RBLN_VIEW_MAX_DIMS 4

/* A storage as a tensor sees it (rbln::StorageView): @ndim sizes and
 * strides in elements (0 dimensions: one element), from element @offset.
 * Strides may be 0 (broadcast); every element the view reaches must lie
 * inside the storage. */
struct rbln_view {
    uint32_t struct_size; /* in: sizeof(struct rbln_view) */
    uint32_t ndim;        /* 0..RBLN_VIEW_MAX_DIMS */
    rbln_storage* storage;
    uint64_t offset;
    int64_t sizes[RBLN_VIEW_MAX_DIMS];
    int64_t strides[RBLN_VIEW_MAX_DIMS];
};

/* Fills *@view with the row-major view of @ndim @sizes over @storage from
 * element 0 (ndim 0 with sizes NULL: the whole storage, 1-D). */
rbln_status rbln_view_contiguous(rbln_storage* storage, uint32_t ndim, const int64_t* sizes,
                                 struct rbln_view* view);

/* out = a + b and out = a * b, elementwise (equal sizes, one element type). */
rbln_status rbln_op_add(rbln_stream* stream, const struct rbln_view* out, const struct rbln_view* a,
                        const struct rbln_view* b);
rbln_status rbln_op_mul(rbln_stream* stream, const struct rbln_view* out, const struct rbln_view* a,
                        const struct rbln_view* b);
/* out = max(a, 0). */
rbln_status rbln_op_relu(rbln_stream* stream, const struct rbln_view* out,
                         const struct rbln_view* a);
/* out = a * factor. */
rbln_status rbln_op_scale(rbln_stream* stream, const struct rbln_view* out,
                          const struct rbln_view* a, float factor);
/* out = a converted to out's element type (fp32, fp16, bf16; round to
 * nearest even); of one element type, a strided gather of any view of a
 * into any view of out in one job. */
rbln_status rbln_op_cast(rbln_stream* stream, const struct rbln_view* out,
                         const struct rbln_view* a);
/* out[M][N] = sum_k a[M][K] * b[K][N]: a and b 2-D of one element type,
 * out 2-D of that type or FP32 (products accumulate in fp32 on the card). */
rbln_status rbln_op_matmul(rbln_stream* stream, const struct rbln_view* out,
                           const struct rbln_view* a, const struct rbln_view* b);
/* The bytes of contiguous @src into contiguous @dst (the same number of
 * bytes), on the device: one copy in @stream's order when both are on its
 * device, else through host memory between the two logical devices. */
rbln_status rbln_op_copy(rbln_stream* stream, const struct rbln_view* dst,
                         const struct rbln_view* src);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_OPS_H */
