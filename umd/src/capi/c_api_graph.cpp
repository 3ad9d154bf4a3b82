// SPDX-License-Identifier: GPL-2.0
// c_api_graph.cpp - rbln_graph.h over rbln/graph.hpp.  Every entry point
// catches everything: no exception crosses into C.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capi/c_guard.hpp"
#include "capi/c_handles.hpp"
#include "rbln/graph.hpp"
#include "rbln/rbln_graph.h"

struct rbln_graph {
    rbln::Graph graph;
};
struct rbln_graph_fn {
    std::unique_ptr<rbln::GraphFunction> fn;
};

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

rbln::Error bad(const std::string& why) {
    return rbln::Error(rbln::Errc::InvalidArgument, "rbln_graph", "", 0, why);
}

rbln::StorageView view_of(const rbln_view& v, const char* name, std::size_t i) {
    if (v.struct_size < sizeof(rbln_view) || v.storage == nullptr || v.ndim > RBLN_VIEW_MAX_DIMS)
        throw bad(std::string(name) + "[" + std::to_string(i) +
                  "] needs struct_size = sizeof(struct rbln_view), a storage and at most " +
                  std::to_string(RBLN_VIEW_MAX_DIMS) + " dimensions");
    rbln::StorageView out;
    out.storage = v.storage->storage;
    out.offset = v.offset;
    out.sizes.assign(v.sizes, v.sizes + v.ndim);
    out.strides.assign(v.strides, v.strides + v.ndim);
    return out;
}

// @v as an rbln_view holding a new handle of its storage.
rbln_view to_c(const rbln::StorageView& v) {
    rbln_view out{};
    out.struct_size = sizeof(rbln_view);
    out.ndim = static_cast<std::uint32_t>(v.sizes.size());
    auto h = std::make_unique<rbln_storage>();
    h->storage = v.storage;
    out.storage = h.release();
    out.offset = v.offset;
    for (std::size_t d = 0; d < v.sizes.size(); d++) {
        out.sizes[d] = v.sizes[d];
        out.strides[d] = v.strides[d];
    }
    return out;
}

} // namespace

extern "C" {

rbln_status rbln_stream_begin_capture(rbln_stream* stream) {
    if (stream == nullptr)
        return invalid("stream is NULL");
    return guard([&] {
        stream->stream.begin_capture();
        return RBLN_OK;
    });
}

rbln_status rbln_stream_end_capture(rbln_stream* stream, rbln_graph** graph) {
    if (stream == nullptr || graph == nullptr)
        return invalid(stream == nullptr ? "stream is NULL" : "graph is NULL");
    return guard([&] {
        auto g = std::make_unique<rbln_graph>();
        g->graph = stream->stream.end_capture();
        *graph = g.release();
        return RBLN_OK;
    });
}

rbln_status rbln_graph_destroy(rbln_graph* graph) {
    return guard([&] {
        const std::unique_ptr<rbln_graph> owned(graph);
        return RBLN_OK;
    });
}

rbln_status rbln_graph_info(const rbln_graph* graph, size_t* nodes, size_t* inputs,
                            size_t* outputs) {
    if (graph == nullptr)
        return invalid("graph is NULL");
    return guard([&] {
        if (nodes != nullptr)
            *nodes = graph->graph.node_count();
        if (inputs != nullptr)
            *inputs = graph->graph.inputs().size();
        if (outputs != nullptr)
            *outputs = graph->graph.output_count();
        return RBLN_OK;
    });
}

rbln_status rbln_graph_replay(rbln_graph* graph, rbln_stream* stream, rbln_storage* const* inputs,
                              size_t n_inputs, rbln_storage** outputs, size_t n_outputs) {
    if (graph == nullptr || stream == nullptr)
        return invalid(graph == nullptr ? "graph is NULL" : "stream is NULL");
    if (n_inputs > 0 && inputs == nullptr)
        return invalid("inputs is NULL with n_inputs > 0");
    return guard([&] {
        if (n_outputs != graph->graph.output_count() || (n_outputs > 0 && outputs == nullptr))
            throw bad("outputs has room for " + std::to_string(n_outputs) +
                      " storages; the graph has " + std::to_string(graph->graph.output_count()) +
                      " outputs");
        std::vector<std::shared_ptr<rbln::Storage>> outs;
        if (inputs == nullptr) {
            outs = graph->graph.replay(stream->stream);
        } else {
            std::vector<std::shared_ptr<rbln::Storage>> in(n_inputs);
            for (std::size_t i = 0; i < n_inputs; i++) {
                if (inputs[i] == nullptr)
                    throw bad("inputs[" + std::to_string(i) + "] is NULL");
                in[i] = inputs[i]->storage;
            }
            outs = graph->graph.replay(stream->stream, in);
        }
        for (std::size_t i = 0; i < outs.size(); i++) {
            auto h = std::make_unique<rbln_storage>();
            h->storage = std::move(outs[i]);
            outputs[i] = h.release();
        }
        return RBLN_OK;
    });
}

rbln_status rbln_graph_fn_create(rbln_graph_body body, void* user, rbln_graph_fn** fn) {
    if (body == nullptr || fn == nullptr)
        return invalid(body == nullptr ? "body is NULL" : "fn is NULL");
    return guard([&] {
        auto f = std::make_unique<rbln_graph_fn>();
        f->fn = std::make_unique<rbln::GraphFunction>(
            [body, user](rbln::Stream& stream, std::span<const rbln::StorageView> in,
                         std::span<const double> scalars) {
                rbln_stream s{stream};
                std::vector<rbln_view> cin;
                cin.reserve(in.size());
                for (const auto& v : in)
                    cin.push_back(to_c(v));
                std::vector<rbln_view> res(64);
                std::size_t n = res.size();
                const rbln_status st = body(user, &s, cin.data(), cin.size(), scalars.data(),
                                            scalars.size(), res.data(), &n);
                for (auto& v : cin)
                    rbln_storage_destroy(v.storage);
                std::vector<rbln::StorageView> out;
                if (st == RBLN_OK && n <= res.size())
                    for (std::size_t i = 0; i < n; i++)
                        out.push_back(view_of(res[i], "results", i));
                for (std::size_t i = 0; i < n && i < res.size(); i++)
                    rbln_storage_destroy(res[i].storage);
                if (st != RBLN_OK)
                    throw rbln::Error(static_cast<rbln::Errc>(st), "rbln_graph_fn body", "", 0,
                                      "the body failed: " + std::string(rbln_last_error_message()));
                if (n > res.size())
                    throw bad("the body wrote more than 64 results");
                return out;
            });
        *fn = f.release();
        return RBLN_OK;
    });
}

rbln_status rbln_graph_fn_destroy(rbln_graph_fn* fn) {
    return guard([&] {
        const std::unique_ptr<rbln_graph_fn> owned(fn);
        return RBLN_OK;
    });
}

rbln_status rbln_graph_fn_call(rbln_graph_fn* fn, rbln_stream* stream,
                               const struct rbln_view* inputs, size_t n_inputs,
                               const double* scalars, size_t n_scalars, struct rbln_view* results,
                               size_t* n_results) {
    if (fn == nullptr || stream == nullptr || n_results == nullptr)
        return invalid(fn == nullptr       ? "fn is NULL"
                       : stream == nullptr ? "stream is NULL"
                                           : "n_results is NULL");
    if ((n_inputs > 0 && inputs == nullptr) || (n_scalars > 0 && scalars == nullptr))
        return invalid("inputs or scalars is NULL with a count > 0");
    return guard([&] {
        std::vector<rbln::StorageView> in;
        for (std::size_t i = 0; i < n_inputs; i++)
            in.push_back(view_of(inputs[i], "inputs", i));
        const auto out = (*fn->fn)(stream->stream, in, std::span<const double>(scalars, n_scalars));
        if (out.size() > *n_results || (!out.empty() && results == nullptr))
            throw bad("results has room for " + std::to_string(*n_results) +
                      " views; the graph "
                      "has " +
                      std::to_string(out.size()) + " results");
        for (std::size_t i = 0; i < out.size(); i++)
            results[i] = to_c(out[i]);
        *n_results = out.size();
        return RBLN_OK;
    });
}

rbln_status rbln_graph_fn_stats(const rbln_graph_fn* fn, struct rbln_graph_fn_stats* stats) {
    if (fn == nullptr || stats == nullptr)
        return invalid(fn == nullptr ? "fn is NULL" : "stats is NULL");
    if (stats->struct_size < sizeof(*stats))
        return invalid("stats->struct_size: set it to sizeof(struct rbln_graph_fn_stats)");
    return guard([&] {
        const auto s = fn->fn->stats();
        stats->calls = s.calls;
        stats->replays = s.replays;
        stats->recompiles = s.recompiles;
        stats->profiles = s.profiles;
        return RBLN_OK;
    });
}

rbln_status rbln_graph_stats(int device, struct rbln_graph_stats* stats) {
    if (device < 0 || stats == nullptr)
        return invalid(stats == nullptr ? "stats is NULL" : "device indices are >= 0");
    if (stats->struct_size < sizeof(*stats))
        return invalid("stats->struct_size: set it to sizeof(struct rbln_graph_stats)");
    return guard([&] {
        const rbln::GraphStats s =
            rbln::graph_stats(*rbln::Device::get(static_cast<unsigned>(device)));
        stats->captures = s.captures;
        stats->replays = s.replays;
        stats->recompiles = s.recompiles;
        stats->cache_hits = s.cache_hits;
        stats->cache_misses = s.cache_misses;
        stats->cache_evictions = s.cache_evictions;
        stats->cache_entries = s.cache_entries;
        stats->definitions_uploaded = s.definitions_uploaded;
        stats->upload_bytes = s.upload_bytes;
        stats->copies = s.copies;
        stats->spilled = s.spilled;
        stats->allocations = s.allocations;
        stats->bind_waits = s.bind_waits;
        stats->overlapped_binds = s.overlapped_binds;
        return RBLN_OK;
    });
}

} // extern "C"
