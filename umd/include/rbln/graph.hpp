// SPDX-License-Identifier: GPL-2.0
// rbln/graph.hpp - graphs: a captured sequence of operators, uploaded to
// the card once as a Definition and replayed as one job.
//
// Capture (the choice: stream capture, as CUDA's, rather than a builder, so
// the code that runs a step eagerly is the code that records it):
//
//     stream.begin_capture();
//     auto h = Storage::create(0, bytes, ElementType::Fp32);   // made inside
//     rbln::ops::matmul(stream, view(h), x, w);                // recorded
//     rbln::ops::relu(stream, view(y), view(h));               // recorded
//     rbln::Graph g = stream.end_capture();
//     auto outs = g.replay(stream);                            // one job
//
// Between begin_capture() and end_capture() the rbln::ops calls on that
// stream (add, mul, relu, scale, cast, matmul, copy, fill) are recorded,
// checked as they would be eagerly, and not run: no job is enqueued, no
// storage gets memory or moves data.  Storages created on the capturing
// thread during the capture belong to the capture: those dead at
// end_capture() are its intermediates (execution storage), those alive are
// its outputs (in creation order); their own contents stay unspecified
// (they only give the capture shapes).  Every other storage a recorded op
// names is a boundary tensor (inputs(), in order of first use), read only
// (in), overwritten whole before any read (out) or read and written (inout).
// Misuse is Errc::InvalidArgument naming what to do: a capture-made storage
// used by an op on another stream, read or written by the host, or on
// another device; begin_capture() twice; end_capture() without a capture
// or from another thread; a U8 storage (ops take fp32, fp16, bf16).
//
// Replay.  Graph::replay(stream[, inputs]) is one GRAPH_EXEC job on the
// stream (firmware-iface/rbln_fw_graph.h), in the stream's order like any
// op: the boundary tensors follow the lazy-storage rules (an input that is
// host-latest is uploaded first, an out/inout boundary is device-latest
// afterwards), and the outputs are new storages, device-latest, written by
// the job.  One caching-allocator block per replay holds the outputs and
// the intermediates (memory statistics count it; it is freed to the cache
// when the outputs and the job are gone), so a replay allocates no memory
// of the kernel's once the cache is warm, and nothing is cleared.  inputs
// replaces the boundary tensors: the same count, each on the stream's
// device with the element type and byte size of the one captured, else
// Errc::InvalidArgument naming the input and what differs (the "profile";
// GraphFunction captures again instead).
//
// Upload.  A Definition is keyed by its content (the same operators on the
// same shapes, strides, offsets and scalars give the same key, whatever the
// storages), held in a per-device cache for the life of the process and
// shared by every graph of the same content: capturing the same step again
// uploads nothing new.  Each device keeps 2 (GraphCacheOptions::slots)
// pipeline slots, each one retained device block and one host staging
// block; a Definition is built straight into a slot's staging and reaches
// the device block with one COPY in the replay's own job, only when the
// slot does not hold it yet (0 copies once it does).  A bind that must
// write picks a slot no in-flight replay reads, so it never overwrites what
// a replay still reads.  A Definition larger than the room left is built in
// buffers of its own and copied in (counted as spilled), and the blocks
// grow for the next bind.  The cache holds GraphCacheOptions::capacity
// Definitions and evicts the least recently replayed one that no in-flight
// replay uses.  graph_stats() has the counters.
//
// GraphFunction is the compile cache of a runtime: a body (the step, written
// with rbln::ops) keyed by its input profile -- per input view: element
// type, sizes, strides, offset, storage size, device, which inputs share a
// storage -- and its scalar arguments.  A call with a known profile replays;
// a new profile captures the body and replays it (a "recompile").  The body
// returns views of storages it created (or of inputs); the call returns
// the same views of the replay's new storages.  Explain regions
// (rbln/explain.hpp) count replays, recompiles and the upload counters.
//
// Thread safety: graphs and graph functions may be used from any thread;
// a capture belongs to the thread that began it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "rbln/device.hpp"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

// librbln's own (umd/src), hidden from librbln.so (rbln/export.h).
namespace rbln::detail::graph {
struct Executable;
struct FunctionState;
} // namespace rbln::detail::graph

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// A boundary tensor's use by the graph (firmware-iface RBLN_FW_GRAPH_IN..).
enum class GraphDirection : std::uint8_t { In = 1, Out = 2, InOut = 3 };

/// An executable graph (a handle: copies share it).
class Graph {
public:
    Graph() = default;

    bool valid() const noexcept { return s_ != nullptr; }
    std::size_t node_count() const;
    /// The Definition's content key (equal for equal content).
    std::uint64_t key() const;
    /// Bytes of the Definition object (header + image).
    std::uint32_t definition_bytes() const;
    /// Bytes of one replay's block: the outputs and the intermediates.
    std::uint64_t execution_bytes() const;
    /// The boundary tensors captured, in order of first use; nullptr for
    /// those a GraphFunction's graph does not hold (its calls' inputs).
    const std::vector<std::shared_ptr<Storage>>& inputs() const;
    GraphDirection direction(std::size_t input) const;
    std::size_t output_count() const;

    /// Replays on @stream with the captured boundary tensors; returns the
    /// new outputs.  InvalidArgument if inputs() holds a nullptr.
    std::vector<std::shared_ptr<Storage>> replay(Stream& stream) const;
    /// Replays with @inputs in place of inputs() (see the top of the header).
    std::vector<std::shared_ptr<Storage>>
    replay(Stream& stream, std::span<const std::shared_ptr<Storage>> inputs) const;

    /// librbln internals.
    RBLN_LOCAL explicit Graph(std::shared_ptr<detail::graph::Executable> s) : s_(std::move(s)) {}
    RBLN_LOCAL const std::shared_ptr<detail::graph::Executable>& state() const noexcept {
        return s_;
    }

private:
    std::shared_ptr<detail::graph::Executable> s_;
};

/// The compile cache: see the top of the header.
class GraphFunction {
public:
    using Body = std::function<std::vector<StorageView>(
        Stream& stream, std::span<const StorageView> inputs, std::span<const double> scalars)>;

    struct Stats {
        std::uint64_t calls = 0;
        std::uint64_t replays = 0;    ///< calls whose profile was known
        std::uint64_t recompiles = 0; ///< calls that captured a new profile
        std::uint64_t profiles = 0;   ///< graphs held
    };

    explicit GraphFunction(Body body);

    /// Runs the body's graph for @inputs and @scalars on @stream.
    std::vector<StorageView> operator()(Stream& stream, std::span<const StorageView> inputs,
                                        std::span<const double> scalars = {}) const;
    Stats stats() const;
    /// The graph of the profile of @inputs and @scalars, if captured.  It
    /// holds none of the calls' inputs (inputs() has nullptr there, filled
    /// from @inputs at each call): replay it with inputs.
    Graph graph_for(std::span<const StorageView> inputs,
                    std::span<const double> scalars = {}) const;

private:
    std::shared_ptr<detail::graph::FunctionState> s_;
};

/// Counters of a device's graph runtime (the life of the process).
struct GraphStats {
    std::uint64_t captures = 0;             ///< end_capture() calls that made a graph
    std::uint64_t replays = 0;              ///< GRAPH_EXEC jobs
    std::uint64_t recompiles = 0;           ///< GraphFunction captures of a new profile
    std::uint64_t cache_hits = 0;           ///< a graph's Definition found in the cache
    std::uint64_t cache_misses = 0;         ///< ... not found: a new Definition
    std::uint64_t cache_evictions = 0;      ///< Definitions dropped for room
    std::uint64_t cache_entries = 0;        ///< Definitions held now
    std::uint64_t binds = 0;                ///< = replays
    std::uint64_t definitions_uploaded = 0; ///< Definitions built into a block ("defs=")
    std::uint64_t upload_bytes = 0;         ///< bytes the binds copied to the device ("bytes=")
    std::uint64_t table_bytes = 0;          ///< boundary tables the replays' jobs carried
    std::uint64_t copies = 0;               ///< COPY packets of the binds ("copies=")
    std::uint64_t spilled = 0;              ///< Definitions built outside the blocks ("spilled=")
    std::uint64_t allocations = 0;          ///< kernel buffers the binds made (blocks, spills)
    std::uint64_t bind_waits = 0;           ///< binds that blocked the host for a slot
    std::uint64_t overlapped_binds = 0; ///< binds that wrote a slot while another slot's replay ran
    std::uint64_t build_ns = 0;         ///< host time building Definition objects
    std::uint64_t block_bytes = 0;      ///< the size of a slot's blocks now
};

/// The graph runtime's settings of a device (see the top of the header).
struct GraphCacheOptions {
    unsigned slots = 2;                   ///< pipeline slots (>= 2)
    std::size_t capacity = 64;            ///< Definitions cached
    std::uint64_t block_bytes = 1u << 20; ///< first size of a slot's blocks
};

GraphStats graph_stats(Device& device);
/// Changes the settings; only before the device's first replay (else
/// Errc::InvalidArgument).  Errc::InvalidArgument for slots < 2 or
/// capacity 0.
void set_graph_cache_options(Device& device, const GraphCacheOptions& options);

} // namespace rbln

#pragma GCC visibility pop
