// SPDX-License-Identifier: GPL-2.0
// graph.cpp - Graph, GraphFunction, stream capture entry points and the
// replay of an executable graph (rbln/graph.hpp).

#include "rbln/graph.hpp"

#include <bit>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "diag/explain_hooks.hpp"
#include "graph/capture.hpp"
#include "graph/executable.hpp"
#include "graph/runtime.hpp"
#include "memory/block_memory.hpp"
#include "memory/sub_memory.hpp"
#include "rbln/allocator_stream.hpp"
#include "rbln/error.hpp"
#include "runtime/device_state.hpp"

namespace rbln {

namespace {

[[noreturn]] void bad(const char* what, const std::string& why) {
    throw Error(Errc::InvalidArgument, what, "", 0, why);
}

const detail::graph::Executable& exe(const std::shared_ptr<detail::graph::Executable>& s) {
    if (!s)
        bad("graph", "an empty Graph (default-constructed): make one with Stream::end_capture()");
    return *s;
}

const char* type_name(ElementType t) {
    switch (t) {
    case ElementType::U8:
        return "u8";
    case ElementType::Fp32:
        return "fp32";
    case ElementType::Fp16:
        return "fp16";
    case ElementType::Bf16:
        return "bf16";
    }
    return "?";
}

} // namespace

// ---- replay -------------------------------------------------------------------

namespace detail::graph {

std::vector<std::shared_ptr<Storage>> replay(const Executable& x, Stream& stream,
                                             std::span<const std::shared_ptr<Storage>> inputs) {
    constexpr const char* what = "graph replay";
    if (any_capture() && capture_of(stream))
        bad(what, "the stream is capturing; replay a graph outside a capture (graphs do not "
                  "nest)");
    if (&stream.device().kernel() != &x.device->kernel())
        bad(what, "the graph was captured on rbln:" + std::to_string(x.device->index()) +
                      " and the stream is on rbln:" + std::to_string(stream.device().index()));
    if (inputs.size() != x.inputs.size())
        bad(what, std::to_string(inputs.size()) + " inputs given; the graph was captured with " +
                      std::to_string(x.inputs.size()) + " boundary tensors (Graph::inputs())");
    for (std::size_t i = 0; i < inputs.size(); i++) {
        const auto& s = inputs[i];
        // What the Definition was built for (the captured storage may be
        // gone: a GraphFunction's graphs do not hold their calls' inputs).
        const rbln_fw_graph_tensor& c = x.def->boundaries[i];
        const auto ctype = static_cast<ElementType>(c.dtype);
        if (!s)
            bad(what, "input " + std::to_string(i) + " has no storage");
        if (s->element_type() != ctype || s->nbytes() != c.bytes)
            bad(what, "input " + std::to_string(i) + " is a " + std::to_string(s->nbytes()) +
                          "-byte " + type_name(s->element_type()) +
                          " storage but the graph was captured with a " + std::to_string(c.bytes) +
                          "-byte " + type_name(ctype) +
                          " one: a new profile needs a new capture (GraphFunction does that)");
        if (&s->device()->kernel() != &stream.device().kernel())
            bad(what, "input " + std::to_string(i) +
                          " is on rbln:" + std::to_string(s->device_index()) +
                          " but the stream on rbln:" + std::to_string(stream.device().index()));
        for (std::size_t j = 0; j < i; j++)
            if (inputs[j] == s)
                bad(what, "inputs " + std::to_string(j) + " and " + std::to_string(i) +
                              " are the same storage but the graph was captured with two; "
                              "capture again for this aliasing");
        if (any_capture())
            check_outside_use(what, s->id(), &stream);
    }

    // The boundary tensors' device uses: inputs first, then what it writes.
    BindRequest req;
    req.def = x.def;
    req.bindings.resize(inputs.size());
    req.buffers.reserve(inputs.size() + 1);
    for (const bool writes : {false, true})
        for (std::size_t i = 0; i < inputs.size(); i++) {
            const GraphDirection d = x.directions[i];
            if ((d != GraphDirection::In) != writes)
                continue;
            const DeviceAccess access = d == GraphDirection::In    ? DeviceAccess::Read
                                        : d == GraphDirection::Out ? DeviceAccess::Write
                                                                   : DeviceAccess::ReadWrite;
            const std::shared_ptr<Memory>& m = inputs[i]->device_use(stream, access);
            req.bindings[i].va = m->device_va();
            req.bindings[i].tensor = x.def->boundaries[i];
            req.buffers.push_back(m);
        }

    // One block of the caching allocator: the outputs, then the intermediates.
    Device& device = stream.device();
    if (x.exec_bytes > 0) {
        const std::shared_ptr<DeviceAllocator> alloc = device.allocator_ptr();
        DeviceBlock block = allocate_on(*alloc, x.exec_bytes, stream);
        const unsigned chiplet = block ? alloc->chiplet_of(block.place()) : 0;
        req.exec = std::make_shared<BlockMemory>(device.kernel_ptr(), std::move(block),
                                                 x.exec_bytes, chiplet, alloc);
        req.exec_bytes = x.exec_bytes;
    }
    const std::shared_ptr<Memory> exec = req.exec;
    Runtime& rt = runtime_of(device);
    const GraphStats before = explain_any() ? rt.stats() : GraphStats{};
    rt.replay(stream, std::move(req));
    if (explain_any()) {
        const GraphStats after = rt.stats();
        explain_graph(ExplainGraph{1, 0, after.definitions_uploaded - before.definitions_uploaded,
                                   after.upload_bytes - before.upload_bytes,
                                   after.copies - before.copies, after.spilled - before.spilled});
    }

    std::vector<std::shared_ptr<Storage>> outs;
    outs.reserve(x.outputs.size());
    StorageOptions lazy;
    lazy.commit = CommitMode::Lazy;
    for (const Executable::Output& o : x.outputs) {
        auto s =
            Storage::create(device.shared_from_this(), device.allocator(), o.nbytes, o.type, lazy);
        s->adopt_device_memory(std::make_shared<SubMemory>(exec, o.offset, o.nbytes), stream);
        outs.push_back(std::move(s));
    }
    return outs;
}

} // namespace detail::graph

// ---- Graph --------------------------------------------------------------------

std::size_t Graph::node_count() const {
    return exe(s_).def->nodes.size();
}

std::uint64_t Graph::key() const {
    return exe(s_).def->key;
}

std::uint32_t Graph::definition_bytes() const {
    return exe(s_).def->object_bytes();
}

std::uint64_t Graph::execution_bytes() const {
    return exe(s_).exec_bytes;
}

const std::vector<std::shared_ptr<Storage>>& Graph::inputs() const {
    return exe(s_).inputs;
}

GraphDirection Graph::direction(std::size_t input) const {
    const auto& x = exe(s_);
    if (input >= x.directions.size())
        bad("graph",
            "input " + std::to_string(input) + " of " + std::to_string(x.directions.size()));
    return x.directions[input];
}

std::size_t Graph::output_count() const {
    return exe(s_).outputs.size();
}

std::vector<std::shared_ptr<Storage>> Graph::replay(Stream& stream) const {
    const auto& x = exe(s_);
    for (std::size_t i = 0; i < x.inputs.size(); i++)
        if (!x.inputs[i])
            bad("graph replay", "the graph holds no storage for input " + std::to_string(i) +
                                    " (a GraphFunction's graph keeps none of its calls' "
                                    "inputs): replay it with inputs");
    return detail::graph::replay(x, stream, x.inputs);
}

std::vector<std::shared_ptr<Storage>>
Graph::replay(Stream& stream, std::span<const std::shared_ptr<Storage>> inputs) const {
    return detail::graph::replay(exe(s_), stream, inputs);
}

// ---- Stream capture -------------------------------------------------------------

void Stream::begin_capture() {
    device_->state().check_fork();
    detail::graph::begin(*this);
}

Graph Stream::end_capture() {
    return detail::graph::take(*this)->finish();
}

bool Stream::capturing() const {
    return detail::graph::any_capture() && detail::graph::capturing(s_.get());
}

// ---- GraphFunction ------------------------------------------------------------

namespace detail::graph {

/// What a call's inputs and scalars look like, as the compile cache keys it.
struct Profile {
    struct Input {
        std::uint32_t type = 0;
        std::uint64_t nbytes = 0;
        unsigned device = 0;
        std::uint64_t offset = 0;
        std::vector<std::int64_t> sizes;
        std::vector<std::int64_t> strides;
        std::size_t alias = 0; ///< first input with the same storage
        auto tie() const { return std::tie(type, nbytes, device, offset, sizes, strides, alias); }
        bool operator<(const Input& o) const { return tie() < o.tie(); }
    };
    std::vector<Input> inputs;
    std::vector<std::uint64_t> scalars; ///< bit patterns
    bool operator<(const Profile& o) const {
        return std::tie(inputs, scalars) < std::tie(o.inputs, o.scalars);
    }
};

struct Compiled {
    Graph graph;
    /// Boundary i of the graph: input index of the call, or -1: a storage
    /// the body captured itself (a constant; graph.inputs()[i]).
    std::vector<long> boundary_source;
    /// The body's results: output index of the graph, or -(1 + boundary).
    struct Result {
        long source = 0;
        StorageView view; ///< offset, sizes, strides (storage unused)
    };
    std::vector<Result> results;
};

struct FunctionState {
    GraphFunction::Body body;
    mutable std::mutex mutex;
    std::map<Profile, std::shared_ptr<Compiled>> graphs;
    GraphFunction::Stats stats;
};

namespace {

Profile profile_of(std::span<const StorageView> inputs, std::span<const double> scalars) {
    Profile p;
    p.inputs.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); i++) {
        const StorageView& v = inputs[i];
        if (!v.storage)
            bad("graph function", "input " + std::to_string(i) + " has no storage");
        Profile::Input in;
        in.type = static_cast<std::uint32_t>(v.storage->element_type());
        in.nbytes = v.storage->nbytes();
        in.device = v.storage->device_index();
        in.offset = v.offset;
        in.sizes = v.sizes;
        in.strides = v.strides;
        in.alias = i;
        for (std::size_t j = 0; j < i; j++)
            if (inputs[j].storage == v.storage) {
                in.alias = j;
                break;
            }
        p.inputs.push_back(std::move(in));
    }
    for (const double s : scalars)
        p.scalars.push_back(std::bit_cast<std::uint64_t>(s));
    return p;
}

std::shared_ptr<Compiled> compile(const FunctionState& f, Stream& stream,
                                  std::span<const StorageView> inputs,
                                  std::span<const double> scalars) {
    stream.begin_capture();
    std::vector<StorageView> results;
    try {
        results = f.body(stream, inputs, scalars);
    } catch (...) {
        take(stream)->abandon();
        throw;
    }
    auto c = std::make_shared<Compiled>();
    c->graph = stream.end_capture();
    const Executable& x = *c->graph.state();
    for (const auto& b : x.inputs) {
        long src = -1;
        for (std::size_t i = 0; i < inputs.size(); i++)
            if (inputs[i].storage == b) {
                src = static_cast<long>(i);
                break;
            }
        c->boundary_source.push_back(src);
    }
    for (std::size_t r = 0; r < results.size(); r++) {
        const StorageView& v = results[r];
        if (!v.storage)
            bad("graph function", "result " + std::to_string(r) + " has no storage");
        Compiled::Result res;
        res.view = v;
        res.view.storage = nullptr;
        bool found = false;
        for (std::size_t o = 0; o < x.outputs.size() && !found; o++)
            if (x.outputs[o].id == v.storage->id()) {
                res.source = static_cast<long>(o);
                found = true;
            }
        for (std::size_t b = 0; b < x.inputs.size() && !found; b++)
            if (x.inputs[b] == v.storage) {
                res.source = -1 - static_cast<long>(b);
                found = true;
            }
        if (!found)
            bad("graph function", "result " + std::to_string(r) +
                                      " is a storage the graph neither made nor used; return "
                                      "storages the body created or wrote");
        c->results.push_back(std::move(res));
    }
    // The call's inputs are bound anew at each call: the graph does not
    // keep this call's alive (only what the body captured itself).
    auto held = std::make_shared<Executable>(x);
    for (std::size_t b = 0; b < held->inputs.size(); b++)
        if (c->boundary_source[b] >= 0)
            held->inputs[b] = nullptr;
    c->graph = Graph(std::move(held));
    return c;
}

} // namespace

} // namespace detail::graph

GraphFunction::GraphFunction(Body body) : s_(std::make_shared<detail::graph::FunctionState>()) {
    if (!body)
        bad("graph function", "no body");
    s_->body = std::move(body);
}

std::vector<StorageView> GraphFunction::operator()(Stream& stream,
                                                   std::span<const StorageView> inputs,
                                                   std::span<const double> scalars) const {
    using namespace detail::graph;
    Profile p = profile_of(inputs, scalars);
    std::shared_ptr<Compiled> c;
    bool recompiled = false;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        s_->stats.calls++;
        if (auto it = s_->graphs.find(p); it != s_->graphs.end())
            c = it->second;
    }
    if (!c) {
        c = compile(*s_, stream, inputs, scalars);
        runtime_of(stream.device()).count_recompile();
        if (detail::explain_any())
            detail::explain_graph(detail::ExplainGraph{0, 1, 0, 0, 0, 0});
        recompiled = true;
        const std::lock_guard<std::mutex> lock(s_->mutex);
        s_->graphs[std::move(p)] = c;
        s_->stats.profiles = s_->graphs.size();
    }
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        (recompiled ? s_->stats.recompiles : s_->stats.replays)++;
    }
    const Executable& x = *c->graph.state();
    std::vector<std::shared_ptr<Storage>> bound(x.inputs.size());
    for (std::size_t b = 0; b < bound.size(); b++)
        bound[b] = c->boundary_source[b] >= 0
                       ? inputs[static_cast<std::size_t>(c->boundary_source[b])].storage
                       : x.inputs[b];
    const std::vector<std::shared_ptr<Storage>> outs = replay(x, stream, bound);
    std::vector<StorageView> results;
    results.reserve(c->results.size());
    for (const Compiled::Result& r : c->results) {
        StorageView v = r.view;
        v.storage = r.source >= 0 ? outs[static_cast<std::size_t>(r.source)]
                                  : bound[static_cast<std::size_t>(-1 - r.source)];
        results.push_back(std::move(v));
    }
    return results;
}

GraphFunction::Stats GraphFunction::stats() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->stats;
}

Graph GraphFunction::graph_for(std::span<const StorageView> inputs,
                               std::span<const double> scalars) const {
    const detail::graph::Profile p = detail::graph::profile_of(inputs, scalars);
    const std::lock_guard<std::mutex> lock(s_->mutex);
    auto it = s_->graphs.find(p);
    return it == s_->graphs.end() ? Graph() : it->second->graph;
}

// ---- statistics -------------------------------------------------------------------

GraphStats graph_stats(Device& device) {
    return detail::graph::runtime_of(device).stats();
}

void set_graph_cache_options(Device& device, const GraphCacheOptions& options) {
    detail::graph::runtime_of(device).set_options(options);
}

} // namespace rbln
