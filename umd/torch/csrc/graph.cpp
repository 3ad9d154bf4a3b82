// SPDX-License-Identifier: GPL-2.0
// graph.cpp - the C++ side of torch_rbln.compile: a librbln GraphFunction
// (rbln/graph.hpp) whose body is a Python callable over torch tensors.
//
// A call with a known input profile replays that profile's graph as one
// GRAPH_EXEC job; a new profile runs the body once under stream capture
// (the aten kernels of ops.cpp record their rbln::ops on the capturing
// stream, which is made the current stream for the body) and uploads the
// Definition.  The profile is librbln's: per input its element type,
// sizes, strides, offset, storage size, device and aliasing, plus the
// Python scalars.

#include "backend.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <span>
#include <utility>
#include <vector>

#include "rbln/graph.hpp"

namespace py = pybind11;

namespace torch_rbln {

namespace {

c10::ScalarType dtype_of(rbln::ElementType t) {
    switch (t) {
    case rbln::ElementType::Fp32:
        return c10::ScalarType::Float;
    case rbln::ElementType::Fp16:
        return c10::ScalarType::Half;
    case rbln::ElementType::Bf16:
        return c10::ScalarType::BFloat16;
    default:
        return c10::ScalarType::Byte;
    }
}

// The view librbln records for @t: its storage in the storage's elements.
rbln::StorageView view_of(const at::Tensor& t, const std::string& what) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what,
                ": torch_rbln.compile takes tensors on an rbln device, got one on ",
                t.device().str(), "; move it with .to('",
                c10::DeviceTypeName(c10::DeviceType::PrivateUse1, true), "')");
    auto s = storage_of(t);
    TORCH_CHECK(s, what, ": the tensor has no storage (0 elements)");
    TORCH_CHECK(rbln::element_size(s->element_type()) == static_cast<std::size_t>(t.itemsize()),
                what, ": a ", c10::toString(t.scalar_type()),
                " tensor viewing a storage of another element size (a reinterpreting view); "
                "pass .clone() of it");
    rbln::StorageView v;
    v.storage = std::move(s);
    v.offset = static_cast<std::uint64_t>(t.storage_offset());
    v.sizes = t.sizes().vec();
    v.strides = t.strides().vec();
    return v;
}

// Makes the torch current stream of @index the stream the graph function
// captures on, for the body's duration.
class CurrentStreamScope {
public:
    CurrentStreamScope(unsigned index, const rbln::Stream& stream)
        : index_(index), saved_(current_stream_id(index)), id_(register_stream(stream)) {
        set_current_stream_id(index_, id_);
    }
    CurrentStreamScope(const CurrentStreamScope&) = delete;
    CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;
    CurrentStreamScope(CurrentStreamScope&&) = delete;
    CurrentStreamScope& operator=(CurrentStreamScope&&) = delete;
    ~CurrentStreamScope() {
        set_current_stream_id(index_, saved_);
        release_stream(id_);
    }

private:
    unsigned index_;
    std::int64_t saved_;
    std::int64_t id_;
};

class CompiledFunction {
public:
    // @body(tensors: list, scalars: list) -> list of tensors.
    explicit CompiledFunction(py::function body)
        : body_(std::move(body)),
          fn_([this](rbln::Stream& stream, std::span<const rbln::StorageView> views,
                     std::span<const double> scalars) {
              return run_body(stream, views, scalars);
          }) {}

    py::list call(const std::vector<at::Tensor>& inputs, const std::vector<double>& scalars) {
        TORCH_CHECK(!inputs.empty(), "torch_rbln.compile: the function takes no tensor");
        const auto index = static_cast<unsigned>(inputs.front().device().index());
        std::vector<rbln::StorageView> views;
        views.reserve(inputs.size());
        for (std::size_t i = 0; i < inputs.size(); i++) {
            TORCH_CHECK(inputs[i].device() == inputs.front().device(),
                        "torch_rbln.compile: tensor argument ", i, " is on ",
                        inputs[i].device().str(), ", argument 0 on ", inputs.front().device().str(),
                        "; one graph runs on one device");
            views.push_back(view_of(inputs[i], "tensor argument " + std::to_string(i)));
        }
        rbln::Stream stream = current_stream(index);
        inputs_ = &inputs;
        index_ = index;
        std::vector<rbln::StorageView> outs =
            rbln_call([&] { return fn_(stream, views, scalars); });
        inputs_ = nullptr;
        py::list result;
        for (const rbln::StorageView& v : outs)
            result.append(tensor_of(v, dtype_of(v.storage->element_type()), index));
        return result;
    }

    py::dict stats() const {
        const rbln::GraphFunction::Stats s = fn_.stats();
        py::dict d;
        d["calls"] = s.calls;
        d["replays"] = s.replays;
        d["recompiles"] = s.recompiles;
        d["profiles"] = s.profiles;
        return d;
    }

private:
    std::vector<rbln::StorageView> run_body(rbln::Stream& stream,
                                            std::span<const rbln::StorageView> views,
                                            std::span<const double> scalars) {
        TORCH_CHECK(inputs_ != nullptr && views.size() == inputs_->size(),
                    "torch_rbln.compile: the graph body ran outside a call");
        const CurrentStreamScope current(index_, stream);
        py::list tensors;
        for (const at::Tensor& t : *inputs_)
            tensors.append(t);
        py::list values;
        for (const double x : scalars)
            values.append(x);
        const py::object r = body_(tensors, values);
        std::vector<rbln::StorageView> outs;
        std::size_t i = 0;
        for (const py::handle h : r) {
            const auto t = h.cast<at::Tensor>();
            outs.push_back(view_of(t, "output " + std::to_string(i++)));
        }
        return outs;
    }

    py::function body_;
    rbln::GraphFunction fn_;
    const std::vector<at::Tensor>* inputs_ = nullptr;
    unsigned index_ = 0;
};

} // namespace

void register_graph(py::module& m) {
    py::class_<CompiledFunction>(m, "GraphFunction")
        .def(py::init<py::function>(), py::arg("body"))
        .def("__call__", &CompiledFunction::call, py::arg("tensors"), py::arg("scalars"))
        .def("stats", &CompiledFunction::stats);
    m.def("graph_stats", [](std::int64_t index) {
        const rbln::GraphStats s = rbln_call([&] {
            return rbln::graph_stats(current_stream(static_cast<unsigned>(index)).device());
        });
        py::dict d;
        d["captures"] = s.captures;
        d["replays"] = s.replays;
        d["recompiles"] = s.recompiles;
        d["cache_hits"] = s.cache_hits;
        d["cache_misses"] = s.cache_misses;
        d["cache_entries"] = s.cache_entries;
        return d;
    });
}

} // namespace torch_rbln
