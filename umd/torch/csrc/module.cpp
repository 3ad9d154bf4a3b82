// SPDX-License-Identifier: GPL-2.0
// module.cpp - torch_rbln._C: what the Python package (torch_rbln/) calls.
// Devices, streams (by id, see backend.hpp), events, the caching
// allocator's statistics, pinned and huge host memory, device layouts,
// offload scopes and explain regions.  rbln::Error becomes RuntimeError.

#include "backend.hpp"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <map>

#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/explain.hpp"
#include "rbln/host_allocator.hpp"
#include "rbln/offload.hpp"
#include "rbln/version.hpp"

namespace py = pybind11;

namespace torch_rbln {

// distributed.cpp: the torch.distributed backend's constructor.
void register_distributed(py::module_& m);

namespace {

rbln::Runtime& runtime() {
    return rbln::Runtime::process();
}

unsigned checked(std::int64_t index) {
    return device_index(
        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
}

// Statistics read the planned allocator until the device is used (they
// never commit the mapping); resets need the live one.
const rbln::DeviceAllocator& stats_of(std::int64_t index) {
    return rbln_call([&]() -> const rbln::DeviceAllocator& {
        return rbln::process_allocator_stats(checked(index));
    });
}

py::dict to_dict(const std::map<std::string, std::int64_t, std::less<>>& m) {
    py::dict d;
    for (const auto& [k, v] : m)
        d[py::str(k)] = v;
    return d;
}

// A CPU tensor over pinned host memory whose owner @keep lives as long as
// the tensor.
template <typename Owner>
at::Tensor host_tensor(std::shared_ptr<Owner> keep, std::byte* data,
                       const std::vector<std::int64_t>& sizes, c10::ScalarType dtype) {
    return at::from_blob(
        data, sizes, [keep](void*) mutable { keep.reset(); },
        at::TensorOptions().dtype(dtype).device(at::kCPU));
}

c10::ScalarType dtype_of(const py::object& dtype) {
    TORCH_CHECK_TYPE(THPDtype_Check(dtype.ptr()), "expected a torch.dtype, got ",
                     py::str(py::type::of(dtype)).cast<std::string>());
    return reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
}

std::uint64_t nbytes_of(const std::vector<std::int64_t>& sizes, c10::ScalarType dtype) {
    std::uint64_t n = c10::elementSize(dtype);
    for (const auto s : sizes) {
        TORCH_CHECK(s >= 0, "negative size ", s);
        n *= static_cast<std::uint64_t>(s);
    }
    return n;
}

rbln::StorageView whole_view(const at::Tensor& t, const char* what) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what,
                ": expected a tensor on an rbln device, got one on ", t.device().str());
    rbln::StorageView v;
    v.storage = storage_of(t);
    TORCH_CHECK(v.storage, what, ": the tensor has no storage (0 elements)");
    const std::uint64_t es = rbln::element_size(v.storage->element_type());
    v.offset = t.storage_offset() * t.itemsize() / es;
    const std::uint64_t n = t.numel() * t.itemsize() / es;
    v.sizes = {static_cast<std::int64_t>(n)};
    v.strides = {1};
    TORCH_CHECK(t.is_contiguous(), what,
                ": the tensor is not contiguous; call .contiguous() first");
    return v;
}

py::dict storage_info(const at::Tensor& t) {
    py::dict d;
    auto s = storage_of(t);
    if (!s)
        return d;
    const rbln::StorageTransfers tr = s->transfers();
    d["id"] = s->id();
    d["nbytes"] = s->nbytes();
    d["resident"] = s->resident();
    static const char* const kCoherence[] = {"host-latest", "device-latest", "in-sync"};
    d["coherence"] = kCoherence[static_cast<unsigned>(s->coherence())];
    d["uploads"] = tr.uploads;
    d["downloads"] = tr.downloads;
    d["commits"] = tr.commits;
    d["element_type"] = static_cast<unsigned>(s->element_type());
    d["layout_format"] = s->device_layout().format;
    if (s->resident())
        d["va"] = s->data_ptr(); // resident: commits nothing
    return d;
}

py::dict explain_counts(const Explain& e) {
    const rbln::ExplainCounts c = e.region.counts();
    py::dict d;
    d["pushes"] = c.pushes;
    d["push_bytes"] = c.push_bytes;
    d["downloads"] = c.downloads;
    d["download_bytes"] = c.download_bytes;
    d["async_transfers"] = c.async_transfers;
    d["host_bounces"] = c.host_bounces;
    d["sync_waits"] = c.sync_waits;
    d["lazy_commits"] = c.lazy_commits;
    d["cpu_fallback"] = e.fallbacks.size();
    d["signals"] = c.signals + e.fallbacks.size();
    return d;
}

} // namespace

} // namespace torch_rbln

namespace torch_rbln {
void register_graph(py::module& m); // graph.cpp
} // namespace torch_rbln

PYBIND11_MODULE(_C, m) {
    using namespace torch_rbln;
    m.doc() = "torch_rbln's C++ side over librbln (see umd/torch/README.md)";
    register_graph(m);

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const rbln::Error& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        }
    });

    m.def("librbln_version", [] { return rbln::library_version(); });
    m.def("device_type_name",
          [] { return c10::DeviceTypeName(c10::DeviceType::PrivateUse1, true); });
    m.def("device_count", [] { return runtime().device_count(); });
    m.def("physical_device_count", [] { return runtime().physical_device_count(); });
    m.def("is_available", [] { return runtime().is_available(); });
    m.def("committed", [] { return runtime().committed(); });
    m.def("current_device", [] { return runtime().current_device(); });
    m.def("set_device", [](std::int64_t i) { runtime().set_device(checked(i)); });
    m.def("check_device", [](std::int64_t i) { return checked(i); });
    m.def(
        "synchronize", [](std::int64_t i) { rbln::Device::get(checked(i))->synchronize(); },
        py::call_guard<py::gil_scoped_release>());
    m.def("npus_of", [](std::int64_t i) { return runtime().device(checked(i)).npus; });

    // Streams by id (0: the default stream of the device).
    m.def("stream_new", [](std::int64_t i, int priority) {
        const auto p = priority < 0 ? rbln::StreamPriority::High : rbln::StreamPriority::Normal;
        return register_stream(rbln::Stream(rbln::Device::get(checked(i)), p));
    });
    m.def("stream_release", &release_stream);
    m.def("current_stream", [](std::int64_t i) { return current_stream_id(checked(i)); });
    m.def("set_current_stream",
          [](std::int64_t i, std::int64_t id) { set_current_stream_id(checked(i), id); });
    m.def("stream_query",
          [](std::int64_t i, std::int64_t id) { return stream_by_id(checked(i), id).query(); });
    m.def(
        "stream_synchronize",
        [](std::int64_t i, std::int64_t id) { stream_by_id(checked(i), id).synchronize(); },
        py::call_guard<py::gil_scoped_release>());

    py::class_<rbln::Event>(m, "Event")
        .def(py::init<bool>(), py::arg("timing"))
        .def("record",
             [](rbln::Event& e, std::int64_t i, std::int64_t id) {
                 auto s = stream_by_id(checked(i), id);
                 e.record(s);
             })
        .def("query", &rbln::Event::query)
        .def("synchronize", &rbln::Event::synchronize, py::call_guard<py::gil_scoped_release>())
        .def("recorded", &rbln::Event::recorded)
        .def("wait", [](const rbln::Event& e, std::int64_t i,
                        std::int64_t id) { stream_by_id(checked(i), id).wait_event(e); })
        .def("elapsed_time", [](const rbln::Event& start, const rbln::Event& end) {
            return rbln::Event::elapsed_time(start, end);
        });

    // The caching allocator (PyTorch's keys).
    m.def("memory_stats", [](std::int64_t i) { return to_dict(stats_of(i).memory_stats()); });
    m.def("memory_stats_per_chiplet",
          [](std::int64_t i) { return to_dict(stats_of(i).memory_stats_per_chiplet()); });
    m.def("memory_allocated", [](std::int64_t i) { return stats_of(i).memory_allocated(); });
    m.def("memory_reserved", [](std::int64_t i) { return stats_of(i).memory_reserved(); });
    m.def("max_memory_allocated",
          [](std::int64_t i) { return stats_of(i).max_memory_allocated(); });
    m.def("max_memory_reserved", [](std::int64_t i) { return stats_of(i).max_memory_reserved(); });
    m.def("memory_summary", [](std::int64_t i) {
        rbln::SummaryOptions o;
        o.title_word = "torch_rbln";
        return stats_of(i).memory_summary(o);
    });
    // Resets and empty_cache touch only a device already in use (the
    // planned allocator of an unused one is empty: nothing to reset).
    m.def("reset_peak_memory_stats", [](std::int64_t i) {
        if (runtime().committed())
            rbln::process_allocator(checked(i)).reset_peak_memory_stats();
    });
    m.def("reset_accumulated_memory_stats", [](std::int64_t i) {
        if (runtime().committed())
            rbln::process_allocator(checked(i)).reset_accumulated_memory_stats();
    });
    m.def("empty_cache", [](std::int64_t i) {
        if (runtime().committed())
            rbln::process_allocator(checked(i)).empty_cache();
    });
    m.def("set_per_process_memory_fraction", [](double f, std::int64_t i) {
        auto& a = rbln::process_allocator(checked(i));
        for (unsigned p = 0; p < a.place_count(); p++)
            a.set_memory_fraction(f, p);
    });

    // Storage: layouts, state (tests and bench).
    m.def("bind_device_memory", [](const at::Tensor& t) {
        rbln_call([&] { rbln::bind_device_memory(whole_view(t, "bind_device_memory")); });
        refresh_data_ptr(t);
    });
    m.def("set_device_layout_like", [](const at::Tensor& t, const at::Tensor& ref) {
        rbln_call([&] {
            rbln::set_device_layout_like(whole_view(t, "set_device_layout_like"),
                                         whole_view(ref, "set_device_layout_like"));
        });
    });
    m.def("storage_info", &storage_info);

    // Pinned and huge host memory.
    m.def("empty_pinned", [](const std::vector<std::int64_t>& sizes, const py::object& dtype_obj,
                             std::int64_t i) {
        const c10::ScalarType dtype = dtype_of(dtype_obj);
        const std::uint64_t n = nbytes_of(sizes, dtype);
        auto block = std::make_shared<rbln::HostBlock>(rbln_call([&] {
            return rbln::process_host_allocator(checked(i)).allocate(std::max<std::uint64_t>(n, 1));
        }));
        std::byte* data = block->data();
        return host_tensor(std::move(block), data, sizes, dtype);
    });
    m.def("is_pinned", [](const at::Tensor& t, std::int64_t i) {
        if (!t.device().is_cpu() || t.nbytes() == 0)
            return false;
        return rbln::Device::get(checked(i))->find_pinned(t.data_ptr(), t.nbytes()) != nullptr;
    });
    m.def("huge_host_empty",
          [](const std::vector<std::int64_t>& sizes, const py::object& dtype_obj, std::int64_t i) {
              const c10::ScalarType dtype = dtype_of(dtype_obj);
              const std::uint64_t n = nbytes_of(sizes, dtype);
              auto buf = std::make_shared<rbln::HugeHostBuffer>(rbln_call([&] {
                  return rbln::huge_host_empty(rbln::Device::get(checked(i)),
                                               std::max<std::uint64_t>(n, 1));
              }));
              std::byte* data = buf->data();
              return py::make_tuple(host_tensor(buf, data, sizes, dtype),
                                    rbln::huge_backing_name(buf->backing()));
          });

    py::class_<rbln::OffloadScope>(m, "OffloadScope")
        .def(py::init([](const std::string& directory) {
            rbln::OffloadOptions o;
            o.directory = directory;
            return std::make_unique<rbln::OffloadScope>(o);
        }))
        .def("offload_now", &rbln::OffloadScope::offload_now)
        .def("close", &rbln::OffloadScope::close)
        .def("where", &rbln::OffloadScope::where)
        .def("stats", [](const rbln::OffloadScope& s) {
            const rbln::OffloadStats st = s.stats();
            py::dict d;
            d["writes"] = st.writes;
            d["bytes_offloaded"] = st.bytes_offloaded;
            d["reads"] = st.reads;
            d["bytes_brought_back"] = st.bytes_brought_back;
            d["failures"] = st.failures;
            d["bytes_paged_out"] = st.bytes_paged_out;
            return d;
        });

    py::class_<Explain>(m, "Explain")
        .def(py::init<std::string, std::string, std::uint32_t>())
        .def("close", &Explain::close)
        .def("report", &Explain::report)
        .def("counts", &explain_counts)
        .def_readonly("fallbacks", &Explain::fallbacks);

    // tests/torch/bench_eager.py: librbln's own add on the card, the
    // baseline of torch's eager rate (out = a + b, @iters times, synced).
    m.def(
        "bench_librbln_add",
        [](std::int64_t i, std::int64_t numel, std::int64_t iters) {
            const unsigned index = checked(i);
            const auto bytes = static_cast<std::uint64_t>(numel) * 4;
            auto make = [&] {
                auto s = rbln::Storage::create(index, bytes, rbln::ElementType::Fp32);
                return rbln::StorageView::contiguous(std::move(s), {numel});
            };
            const rbln::StorageView a = make();
            const rbln::StorageView b = make();
            const rbln::StorageView out = make();
            rbln::Stream s = current_stream(index);
            rbln::ops::add(s, out, a, b); // commits and uploads outside the timing
            s.synchronize();
            const auto t0 = std::chrono::steady_clock::now();
            for (std::int64_t n = 0; n < iters; n++)
                rbln::ops::add(s, out, a, b);
            s.synchronize();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        py::call_guard<py::gil_scoped_release>());

    register_distributed(m);

    m.def("fallback_ops", &fallback_ops);
    m.def("fallback_count", &fallback_count);
    m.def("set_fallback_logger", [](py::object logger) {
        if (logger.is_none()) {
            g_fallback_logger = nullptr;
            return;
        }
        auto keep = std::make_shared<py::object>(std::move(logger));
        g_fallback_logger = [keep](const std::string& name) {
            const py::gil_scoped_acquire gil;
            try {
                (*keep)(name);
            } catch (const py::error_already_set&) { // logging must not fail the operator
            }
        };
    });
}
