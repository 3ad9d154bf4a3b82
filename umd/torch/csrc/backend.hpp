// SPDX-License-Identifier: GPL-2.0
// backend.hpp - torch_rbln's C++ side: PyTorch's PrivateUse1 device over
// librbln's public API (umd/include/rbln, nothing from umd/src).
//
// Tensor storage.  A device tensor's storage is a librbln lazy Storage
// (rbln/storage.hpp) on the caching allocator of its logical device, held
// by the DataPtr's context.  A fresh storage commits no device memory; its
// DataPtr holds a placeholder address (kPlaceholderTag | id) until a device
// operation commits it, after which the DataPtr is the device VA
// (refresh_data_ptr(), called after every device operation).  PyTorch 1.13
// does not dispatch data_ptr(), so reading it cannot be the commit point.
//
// Streams.  Each thread has a current stream per device (stream id 0: the
// device's default stream); ids of other streams index a process registry
// of rbln::Streams (register_stream()).  The guard (C10_REGISTER_GUARD_IMPL)
// exposes both to PyTorch.
//
// Errors.  rbln::Error becomes c10::Error (Python RuntimeError) with
// librbln's message, which says what to do (rbln_call()).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <torch/library.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rbln/error.hpp"
#include "rbln/explain.hpp"
#include "rbln/ops.hpp"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

namespace torch_rbln {

/// A placeholder data pointer has these top bits (never a device VA).
inline constexpr std::uint64_t kPlaceholderTag = 0xfff0000000000000ULL;

/// Runs @f, turning an rbln::Error into a c10::Error with its message.
template <typename F> auto rbln_call(F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const rbln::Error& e) {
        TORCH_CHECK(false, e.what());
    }
}

/// The device name PyTorch shows ("privateuseone" in 1.13, "rbln" once
/// renamed) and "<name>:<index>".
std::string device_name(unsigned index);

/// The element type librbln gives a dtype's storage (U8 for non-floats).
rbln::ElementType element_type_of(c10::ScalarType t);
/// Refuses dtypes the card cannot hold (float64, complex), saying what to do.
void check_dtype(c10::ScalarType t);
/// The logical device @device names (nullopt or no index: the current one);
/// checks it is in range.
unsigned device_index(c10::optional<c10::Device> device);

c10::Allocator* device_allocator();

/// The librbln storage of a device tensor (nullptr for an empty one).
std::shared_ptr<rbln::Storage> storage_of(const at::Tensor& t);
/// A tensor of @dtype (whose element size is the storage's) over @view on
/// device @index, sharing the storage.
at::Tensor tensor_of(const rbln::StorageView& view, c10::ScalarType dtype, unsigned index);
/// Whether the card's kernels can take @t as it is: a float dtype whose
/// storage has that element type, at most 4 dimensions once collapsed.
bool kernel_ready(const at::Tensor& t);
/// @t as a StorageView (kernel_ready(t) must hold).
rbln::StorageView view_of(const at::Tensor& t);
/// Replaces a placeholder data pointer by the device VA once resident.
void refresh_data_ptr(const at::Tensor& t);

/// An empty device tensor of @sizes (contiguous) like at::empty.
at::Tensor empty_device(at::IntArrayRef sizes, c10::ScalarType dtype, unsigned index);

/// The calling thread's current stream of logical device @index.
rbln::Stream current_stream(unsigned index);
std::int64_t current_stream_id(unsigned index);
void set_current_stream_id(unsigned index, std::int64_t id);
/// A stream by id (0: the device's default stream).
rbln::Stream stream_by_id(unsigned index, std::int64_t id);
/// Registers @s, returns its id (> 0).
std::int64_t register_stream(const rbln::Stream& s);
void release_stream(std::int64_t id);

/// Explain regions of torch_rbln: librbln's region plus the CPU fallbacks.
struct Explain {
    Explain(std::string name, std::string file, std::uint32_t line);
    Explain(const Explain&) = delete;
    Explain& operator=(const Explain&) = delete;
    Explain(Explain&&) = delete;
    Explain& operator=(Explain&&) = delete;
    ~Explain();
    void close();
    std::string report() const;
    rbln::ExplainRegion region;
    std::vector<std::string> fallbacks; ///< operator names, in order
    bool open = true;
};
/// Records a CPU fallback of @op in every open region of the thread.
void record_fallback(const std::string& op);

/// Called with an operator's name the first time it falls back (the
/// Python package logs it at INFO).
extern std::function<void(const std::string&)> g_fallback_logger;

/// Ops registered for PrivateUse1 (ops.cpp) call this for a CPU fallback.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
/// The names of the operators that fell back, in first-use order.
std::vector<std::string> fallback_ops();
std::uint64_t fallback_count();

} // namespace torch_rbln
