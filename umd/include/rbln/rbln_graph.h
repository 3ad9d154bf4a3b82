/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln_graph.h - C ABI of librbln's graphs (rbln/graph.hpp): stream
 * capture of the operators of rbln_ops.h into a graph uploaded once and
 * replayed as one job, and the graph function (the compile cache a
 * framework's compile() drives: a body keyed by its input profile).
 *
 * Capture: between rbln_stream_begin_capture() and rbln_stream_end_capture()
 * the rbln_op_* calls on that stream are recorded, not run.  Storages
 * created on the capturing thread during the capture belong to it: those
 * destroyed before the end are intermediates, those alive are the graph's
 * outputs (in creation order; their own contents stay unspecified);
 * every other storage a recorded op names is a boundary tensor.
 *
 * Graph function: @body is called (on the calling thread, inside a capture
 * of @stream) when a call's profile -- per input view: element type, sizes,
 * strides, offset, storage size, device, shared storages; and the scalars --
 * is new; it runs rbln_op_* calls on the stream it is given, destroys the
 * storages it made that are not results, and writes at most *n_results
 * result views (then sets *n_results).  librbln destroys the result views'
 * storage handles after the capture.  Every call (new profile or not)
 * replays the graph and writes views of new output storages to @results:
 * handles the caller destroys with rbln_storage_destroy().
 *
 * Conventions are rbln.h's: every entry point returns an rbln_status; the
 * message is in rbln_last_error_message(); structs carry their size first;
 * no C++ exception crosses this interface.
 */
#ifndef RBLN_RBLN_GRAPH_H
#define RBLN_RBLN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"
#include "rbln/rbln_ops.h"
#include "rbln/rbln_storage.h"

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rbln_graph rbln_graph;
typedef struct rbln_graph_fn rbln_graph_fn;

rbln_status rbln_stream_begin_capture(rbln_stream* stream);
/* Ends the capture: *@graph is the executable graph (rbln_graph_destroy). */
rbln_status rbln_stream_end_capture(rbln_stream* stream, rbln_graph** graph);
rbln_status rbln_graph_destroy(rbln_graph* graph);
/* Nodes, boundary tensors and outputs of @graph (any pointer may be NULL). */
rbln_status rbln_graph_info(const rbln_graph* graph, size_t* nodes, size_t* inputs,
                            size_t* outputs);
/* One replay on @stream: @inputs replace the captured boundary tensors
 * (NULL and 0: the captured ones); the @n_outputs (= the graph's output
 * count) new output storages go to @outputs (rbln_storage_destroy them). */
rbln_status rbln_graph_replay(rbln_graph* graph, rbln_stream* stream, rbln_storage* const* inputs,
                              size_t n_inputs, rbln_storage** outputs, size_t n_outputs);

typedef rbln_status (*rbln_graph_body)(void* user, rbln_stream* stream,
                                       const struct rbln_view* inputs, size_t n_inputs,
                                       const double* scalars, size_t n_scalars,
                                       struct rbln_view* results, size_t* n_results);

rbln_status rbln_graph_fn_create(rbln_graph_body body, void* user, rbln_graph_fn** fn);
rbln_status rbln_graph_fn_destroy(rbln_graph_fn* fn);
/* Runs the body's graph for @inputs and @scalars on @stream; *@n_results: in
 * the room of @results, out the count written. */
rbln_status rbln_graph_fn_call(rbln_graph_fn* fn, rbln_stream* stream,
                               const struct rbln_view* inputs, size_t n_inputs,
                               const double* scalars, size_t n_scalars, struct rbln_view* results,
                               size_t* n_results);

/* rbln::GraphFunction::Stats */
struct rbln_graph_fn_stats {
    uint32_t struct_size; /* in: sizeof(struct rbln_graph_fn_stats) */
    uint32_t reserved;
    uint64_t calls;
    uint64_t replays;
    uint64_t recompiles;
    uint64_t profiles;
};
rbln_status rbln_graph_fn_stats(const rbln_graph_fn* fn, struct rbln_graph_fn_stats* stats);

/* rbln::GraphStats of logical device @device (the life of the process). */
struct rbln_graph_stats {
    uint32_t struct_size; /* in: sizeof(struct rbln_graph_stats) */
    uint32_t reserved;
    uint64_t captures;
    uint64_t replays;
    uint64_t recompiles;
    uint64_t cache_hits;
    uint64_t cache_misses;
    uint64_t cache_evictions;
    uint64_t cache_entries;
    uint64_t definitions_uploaded;
    uint64_t upload_bytes;
    uint64_t copies;
    uint64_t spilled;
    uint64_t allocations;
    uint64_t bind_waits;
    uint64_t overlapped_binds;
};
rbln_status rbln_graph_stats(int device, struct rbln_graph_stats* stats);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_GRAPH_H */
