// SPDX-License-Identifier: GPL-2.0
// ops.cpp - aten operators on the card (TORCH_LIBRARY_IMPL(aten,
// PrivateUse1)) over rbln::ops, copies in every direction, and the CPU
// fallback for everything else.
//
// An operator runs on the card when its tensors are kernel_ready()
// (backend.hpp) and of one dtype; otherwise it takes the CPU fallback
// like any unsupported operator, so a result never depends on the path.

#include "backend.hpp"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>

#include "rbln/copy.hpp"
#include "rbln/device.hpp"

namespace torch_rbln {

// --- the CPU fallback ----------------------------------------------------

namespace {

std::mutex g_fallback_mutex;
std::vector<std::string> g_fallback_ops; // guarded: first-use order
std::set<std::string> g_fallback_seen;   // guarded
std::atomic<std::uint64_t> g_fallback_count{0};

bool fallback_disabled() {
    const char* v = std::getenv("TORCH_RBLN_DISABLE_FALLBACK");
    if (v == nullptr)
        return false;
    const std::string s = std::string(",") + v + ",";
    return s.find(",unsupported_op,") != std::string::npos;
}

bool on_device(const at::Tensor& t) {
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

std::string op_name(const c10::OperatorHandle& op) {
    const auto& n = op.schema().operator_name();
    return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// Device tensors of one operator must share a device.
void check_devices(const std::string& name, const torch::jit::Stack& stack, std::size_t nargs) {
    c10::optional<c10::Device> seen;
    auto visit = [&](const at::Tensor& t) {
        if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1)
            return;
        TORCH_CHECK(!seen || *seen == t.device(),
                    "Expected all tensors to be on the same device, but found at least two "
                    "devices, ",
                    seen->str(), " and ", t.device().str(), "! (when checking arguments of ", name,
                    "; move them with .to(device) first)");
        seen = t.device();
    };
    for (std::size_t i = stack.size() - nargs; i < stack.size(); i++) {
        const c10::IValue& v = stack[i];
        if (v.isTensor())
            visit(v.toTensor());
        else if (v.isTensorList())
            for (const at::Tensor& t : v.toTensorList().vec())
                visit(t);
    }
}

} // namespace

std::function<void(const std::string&)> g_fallback_logger; // declared in backend.hpp

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    const std::string name = op_name(op);
    TORCH_CHECK_NOT_IMPLEMENTED(
        !fallback_disabled(), "The operator '", name,
        "' is not implemented for rbln devices, and TORCH_RBLN_DISABLE_FALLBACK=unsupported_op "
        "forbids running it on the CPU.  Unset it to let torch_rbln run the operator on the CPU "
        "(inputs downloaded, outputs uploaded; explain() counts it), or avoid the operator.");
    check_devices(name, *stack, op.schema().arguments().size());
    bool first = false;
    {
        const std::lock_guard<std::mutex> lock(g_fallback_mutex);
        first = g_fallback_seen.insert(name).second;
        if (first)
            g_fallback_ops.push_back(name);
    }
    g_fallback_count.fetch_add(1, std::memory_order_relaxed);
    if (first && g_fallback_logger)
        g_fallback_logger(name);
    record_fallback(name);
    // PyTorch 1.13's fallback moves Tensor and Tensor[] arguments to the
    // CPU, not Tensor?[] ones (index's indices): those are inputs, moved here.
    const std::size_t nargs = op.schema().arguments().size();
    for (std::size_t i = stack->size() - nargs; i < stack->size(); i++) {
        c10::IValue& v = (*stack)[i];
        if (!v.isOptionalTensorList())
            continue;
        c10::List<c10::optional<at::Tensor>> moved;
        for (const c10::optional<at::Tensor>& t : v.toOptionalTensorList().vec())
            moved.push_back(t && on_device(*t) ? c10::optional<at::Tensor>(t->cpu()) : t);
        v = c10::IValue(moved);
    }
    at::native::cpu_fallback(op, stack);
}

std::vector<std::string> fallback_ops() {
    const std::lock_guard<std::mutex> lock(g_fallback_mutex);
    return g_fallback_ops;
}

std::uint64_t fallback_count() {
    return g_fallback_count.load(std::memory_order_relaxed);
}

namespace {

#define RBLN_FALLBACK(op, ...)                                                                     \
    at::native::call_fallback_fn<&torch_rbln::cpu_fallback, ATEN_OP(op)>::call(__VA_ARGS__)

unsigned index_of(const at::Tensor& t) {
    return static_cast<unsigned>(t.device().index());
}

bool is_device(const at::Tensor& t) {
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// A CPU 0-dim tensor (a Python number PyTorch wrapped) beside a device one.
bool is_host_scalar(const at::Tensor& t) {
    return t.device().is_cpu() && t.dim() == 0;
}

void check_same_device(const char* op, const at::Tensor& a, const at::Tensor& b) {
    if (is_host_scalar(b) || is_host_scalar(a))
        return;
    TORCH_CHECK(a.device() == b.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                a.device().str(), " and ", b.device().str(), "! (when checking arguments of ", op,
                "; move them with .to(device) first)");
}

void refresh(std::initializer_list<const at::Tensor*> ts) {
    for (const at::Tensor* t : ts)
        if (t->defined() && is_device(*t))
            refresh_data_ptr(*t);
}

// A 1-element device tensor holding @value in @dtype (one FILL).
at::Tensor scalar_on_device(const at::Scalar& value, c10::ScalarType dtype, unsigned index);

void fill_device(const at::Tensor& self, const at::Scalar& value);

// Elementwise out = a (op) b on the card; a, b already of out's shape.
enum class Binary { Add, Mul };

void run_binary(Binary kind, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
    rbln_call([&] {
        rbln::Stream s = current_stream(index_of(out));
        if (kind == Binary::Add)
            rbln::ops::add(s, view_of(out), view_of(a), view_of(b));
        else
            rbln::ops::mul(s, view_of(out), view_of(a), view_of(b));
    });
}

void run_scale(const at::Tensor& out, const at::Tensor& a, double factor) {
    rbln_call([&] {
        rbln::Stream s = current_stream(index_of(out));
        rbln::ops::scale(s, view_of(out), view_of(a), static_cast<float>(factor));
    });
}

// Whether out = a (op) b can run on the card; prepares the operands
// (Python numbers become 1-element device tensors, broadcast by stride 0).
bool binary_operands(const at::Tensor& self, const at::Tensor& other, at::Tensor& a, at::Tensor& b,
                     std::vector<std::int64_t>& shape) {
    if (!kernel_ready(self))
        return false;
    at::Tensor o = other;
    if (is_host_scalar(other)) {
        if (!c10::isFloatingType(other.scalar_type()) &&
            !c10::isIntegralType(other.scalar_type(), true))
            return false;
        o = scalar_on_device(other.item(), self.scalar_type(), index_of(self));
    }
    if (o.scalar_type() != self.scalar_type() || !kernel_ready(o))
        return false;
    shape = at::infer_size(self.sizes(), o.sizes());
    a = self.expand(shape);
    b = o.expand(shape);
    return kernel_ready(a) && kernel_ready(b);
}

at::Tensor add_impl(const char* name, const at::Tensor& self, const at::Tensor& other,
                    const at::Scalar& alpha, bool subtract) {
    check_same_device(name, self, other);
    at::Tensor a;
    at::Tensor b;
    std::vector<std::int64_t> shape;
    if (!binary_operands(self, other, a, b, shape))
        return subtract ? RBLN_FALLBACK(sub_Tensor, self, other, alpha)
                        : RBLN_FALLBACK(add_Tensor, self, other, alpha);
    const double k = (subtract ? -1.0 : 1.0) * alpha.toDouble();
    at::Tensor out = empty_device(shape, self.scalar_type(), index_of(self));
    if (k != 1.0) {
        at::Tensor scaled = empty_device(shape, self.scalar_type(), index_of(self));
        run_scale(scaled, b, k);
        b = scaled;
    }
    run_binary(Binary::Add, out, a, b);
    refresh({&out, &self, &other});
    return out;
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    return add_impl("add", self, other, alpha, false);
}

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    return add_impl("sub", self, other, alpha, true);
}

at::Tensor& add_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    check_same_device("add_", self, other);
    at::Tensor a;
    at::Tensor b;
    std::vector<std::int64_t> shape;
    if (!binary_operands(self, other, a, b, shape) || at::IntArrayRef(shape) != self.sizes())
        return RBLN_FALLBACK(add__Tensor, self, other, alpha);
    if (alpha.toDouble() != 1.0) {
        at::Tensor scaled = empty_device(shape, self.scalar_type(), index_of(self));
        run_scale(scaled, b, alpha.toDouble());
        b = scaled;
    }
    run_binary(Binary::Add, self, self, b);
    refresh({&self, &other});
    return self;
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
    check_same_device("mul", self, other);
    if (is_host_scalar(other) && kernel_ready(self)) { // multiplication by a scalar: SCALE
        at::Tensor out = empty_device(self.sizes(), self.scalar_type(), index_of(self));
        run_scale(out, self, other.item().toDouble());
        refresh({&out, &self});
        return out;
    }
    at::Tensor a;
    at::Tensor b;
    std::vector<std::int64_t> shape;
    if (!binary_operands(self, other, a, b, shape))
        return RBLN_FALLBACK(mul_Tensor, self, other);
    at::Tensor out = empty_device(shape, self.scalar_type(), index_of(self));
    run_binary(Binary::Mul, out, a, b);
    refresh({&out, &self, &other});
    return out;
}

at::Tensor& mul_inplace(at::Tensor& self, const at::Tensor& other) {
    check_same_device("mul_", self, other);
    if (is_host_scalar(other) && kernel_ready(self)) {
        run_scale(self, self, other.item().toDouble());
        refresh({&self});
        return self;
    }
    at::Tensor a;
    at::Tensor b;
    std::vector<std::int64_t> shape;
    if (!binary_operands(self, other, a, b, shape) || at::IntArrayRef(shape) != self.sizes())
        return RBLN_FALLBACK(mul__Tensor, self, other);
    run_binary(Binary::Mul, self, self, b);
    refresh({&self, &other});
    return self;
}

at::Tensor relu(const at::Tensor& self) {
    if (!kernel_ready(self))
        return RBLN_FALLBACK(relu, self);
    at::Tensor out = empty_device(self.sizes(), self.scalar_type(), index_of(self));
    rbln_call([&] {
        rbln::Stream s = current_stream(index_of(self));
        rbln::ops::relu(s, view_of(out), view_of(self));
    });
    refresh({&out, &self});
    return out;
}

at::Tensor& relu_inplace(at::Tensor& self) {
    if (!kernel_ready(self))
        return RBLN_FALLBACK(relu_, self);
    rbln_call([&] {
        rbln::Stream s = current_stream(index_of(self));
        rbln::ops::relu(s, view_of(self), view_of(self));
    });
    refresh({&self});
    return self;
}

bool matmul_ready(const at::Tensor& a, const at::Tensor& b) {
    return a.dim() == 2 && b.dim() == 2 && kernel_ready(a) && kernel_ready(b) &&
           a.scalar_type() == b.scalar_type() && a.device() == b.device() && a.size(1) == b.size(0);
}

void run_matmul(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
    rbln_call([&] {
        rbln::Stream s = current_stream(index_of(out));
        rbln::ops::matmul(s, view_of(out), view_of(a), view_of(b));
    });
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
    check_same_device("mm", self, mat2);
    if (!matmul_ready(self, mat2))
        return RBLN_FALLBACK(mm, self, mat2);
    at::Tensor out = empty_device({self.size(0), mat2.size(1)}, self.scalar_type(), index_of(self));
    run_matmul(out, self, mat2);
    refresh({&out, &self, &mat2});
    return out;
}

// beta * bias + alpha * (a @ b): one MATMUL, a SCALE for alpha != 1 and for
// beta != 0, 1, and an ADD of the bias broadcast by stride 0.
at::Tensor addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
    check_same_device("addmm", bias, a);
    check_same_device("addmm", a, b);
    const std::vector<std::int64_t> shape = {a.size(0), b.size(1)};
    if (!matmul_ready(a, b) || !kernel_ready(bias) || bias.scalar_type() != a.scalar_type() ||
        !at::is_expandable_to(bias.sizes(), shape))
        return RBLN_FALLBACK(addmm, bias, a, b, beta, alpha);
    const unsigned index = index_of(a);
    at::Tensor out = empty_device(shape, a.scalar_type(), index);
    run_matmul(out, a, b);
    if (alpha.toDouble() != 1.0)
        run_scale(out, out, alpha.toDouble());
    if (beta.toDouble() != 0.0) {
        at::Tensor c = bias.expand(shape);
        if (beta.toDouble() != 1.0) {
            at::Tensor scaled = empty_device(shape, a.scalar_type(), index);
            run_scale(scaled, c, beta.toDouble());
            c = scaled;
        }
        run_binary(Binary::Add, out, out, c);
    }
    refresh({&out, &bias, &a, &b});
    return out;
}

// --- fill ------------------------------------------------------------------

std::uint64_t pattern_of(const at::Scalar& value, c10::ScalarType dtype) {
    // The value in the dtype's bytes, through a 1-element CPU tensor.
    const at::Tensor t = at::empty({}, at::TensorOptions().dtype(dtype)).fill_(value);
    std::uint64_t p = 0;
    std::memcpy(&p, t.data_ptr(), t.itemsize());
    return p;
}

bool fillable(const at::Tensor& self) {
    const auto n = self.itemsize();
    return is_device(self) && self.is_contiguous() && self.numel() > 0 &&
           (n == 1 || n == 2 || n == 4 || n == 8) && storage_of(self);
}

void fill_device(const at::Tensor& self, const at::Scalar& value) {
    const std::uint64_t pattern = pattern_of(value, self.scalar_type());
    auto st = storage_of(self);
    const std::uint64_t bytes = self.numel() * self.itemsize();
    const std::uint64_t offset = self.storage_offset() * self.itemsize();
    const bool whole = offset == 0 && bytes == st->nbytes();
    rbln_call([&] {
        rbln::Stream s = current_stream(index_of(self));
        const auto& mem =
            st->device_use(s, whole ? rbln::DeviceAccess::Write : rbln::DeviceAccess::ReadWrite);
        s.fill(mem, offset, bytes, pattern, static_cast<unsigned>(self.itemsize()));
    });
    refresh({&self});
}

at::Tensor scalar_on_device(const at::Scalar& value, c10::ScalarType dtype, unsigned index) {
    at::Tensor t = empty_device({1}, dtype, index);
    fill_device(t, value);
    return t.view(at::IntArrayRef()); // not view({}): that is view(ScalarType)
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
    if (!fillable(self))
        return RBLN_FALLBACK(fill__Scalar, self, value);
    fill_device(self, value);
    return self;
}

at::Tensor& zero(at::Tensor& self) {
    if (!fillable(self))
        return RBLN_FALLBACK(zero_, self);
    fill_device(self, 0);
    return self;
}

// --- copies ------------------------------------------------------------------

std::span<std::byte> host_bytes(const at::Tensor& t) {
    return {static_cast<std::byte*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
}

std::uint64_t byte_offset(const at::Tensor& t) {
    return t.storage_offset() * t.itemsize();
}

bool flat_resident(const rbln::Storage& s) {
    return s.resident() && s.device_layout().format == rbln::DeviceLayout::kFlat;
}

// Host -> device.  Asynchronous (non_blocking) only for the same shape and
// dtype, both contiguous, a pinned host side and a destination resident as
// one flat region; otherwise the host copy of the lazy storage is written
// (no device memory is committed; uploaded at its first device use).
void copy_to_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
    auto st = storage_of(dst);
    if (!st)
        return; // nothing to copy
    const bool same = src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes();
    if (same && non_blocking && src.is_contiguous() && dst.is_contiguous() && flat_resident(*st)) {
        rbln_call([&] {
            rbln::Stream s = current_stream(index_of(dst));
            const bool whole = byte_offset(dst) == 0 && dst.nbytes() == st->nbytes();
            const auto& mem = st->device_use(s, whole ? rbln::DeviceAccess::Write
                                                      : rbln::DeviceAccess::ReadWrite);
            rbln::copy(s, rbln::CopyEndpoint::of(mem, byte_offset(dst), dst.nbytes()),
                       rbln::CopyEndpoint::of_host(src.data_ptr(), src.nbytes()), true);
        });
        refresh({&dst});
        return;
    }
    if (dst.is_contiguous()) {
        const at::Tensor host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
        rbln_call([&] { st->write(byte_offset(dst), host_bytes(host)); });
        return;
    }
    // A strided destination: the whole storage through the host.
    at::Tensor whole = at::empty({static_cast<std::int64_t>(st->nbytes())}, at::kByte);
    rbln_call([&] { st->read(0, host_bytes(whole)); });
    at::Tensor typed = whole.view(dst.scalar_type());
    typed.as_strided(dst.sizes(), dst.strides(), dst.storage_offset()).copy_(src);
    rbln_call([&] { st->write(0, host_bytes(whole)); });
}

// Device -> host: asynchronous under the same rule (source resident, flat,
// not host-latest), else the storage's read (downloading if device-latest).
void copy_to_host(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
    if (!src.is_contiguous()) {
        copy_to_host(src.contiguous(), dst, non_blocking); // gathered on the card
        return;
    }
    auto st = storage_of(src);
    if (!st)
        return;
    const bool same = src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes();
    if (same && non_blocking && dst.is_contiguous() && flat_resident(*st) &&
        st->coherence() != rbln::Coherence::HostLatest) {
        rbln_call([&] {
            rbln::Stream s = current_stream(index_of(src));
            const auto& mem = st->device_use(s, rbln::DeviceAccess::Read);
            rbln::copy(s, rbln::CopyEndpoint::of_host(dst.data_ptr(), dst.nbytes()),
                       rbln::CopyEndpoint::of(mem, byte_offset(src), src.nbytes()), true);
        });
        return;
    }
    if (same && dst.is_contiguous()) {
        rbln_call([&] { st->read(byte_offset(src), host_bytes(dst)); });
        return;
    }
    at::Tensor tmp = at::empty(src.sizes(), at::TensorOptions().dtype(src.scalar_type()));
    rbln_call([&] { st->read(byte_offset(src), host_bytes(tmp)); });
    dst.copy_(tmp);
}

// Device -> device of one dtype into a contiguous destination with the
// strided-copy engine: the source as rows of bytes @pitch apart
// (COPY_STRIDED through rbln::copy), one copy per slab of its outer
// dimensions.  False if the source does not have that shape.
bool strided_copy(const at::Tensor& src, const at::Tensor& dst) {
    if (!dst.is_contiguous() || src.scalar_type() != dst.scalar_type() ||
        src.sizes() != dst.sizes() || src.device() != dst.device() || !storage_of(src) ||
        !storage_of(dst))
        return false;
    std::vector<std::int64_t> sizes;
    std::vector<std::int64_t> strides;
    for (std::int64_t d = 0; d < src.dim(); d++)
        if (src.size(d) != 1) {
            sizes.push_back(src.size(d));
            strides.push_back(src.stride(d));
        }
    const auto es = static_cast<std::int64_t>(src.itemsize());
    std::int64_t row = es; // bytes per row
    std::int64_t rows = 1;
    std::int64_t pitch = es;
    std::size_t outer = 0; // dimensions looped over
    if (sizes.empty()) {
        rows = 1;
    } else if (strides.back() == 1) {
        row = sizes.back() * es;
        outer = sizes.size() >= 2 ? sizes.size() - 2 : 0;
        rows = sizes.size() >= 2 ? sizes[sizes.size() - 2] : 1;
        pitch = sizes.size() >= 2 ? strides[sizes.size() - 2] * es : row;
    } else {
        outer = sizes.size() - 1;
        rows = sizes.back();
        pitch = strides.back() * es;
    }
    std::int64_t slabs = 1;
    for (std::size_t d = 0; d < outer; d++)
        slabs *= sizes[d];
    if (pitch < row || slabs > 4096)
        return false;
    auto ss = storage_of(src);
    auto ds = storage_of(dst);
    rbln_call([&] {
        rbln::Stream st = current_stream(index_of(dst));
        const auto& smem = ss->device_use(st, rbln::DeviceAccess::Read);
        const bool whole = byte_offset(dst) == 0 && dst.nbytes() == ds->nbytes();
        const auto& dmem =
            ds->device_use(st, whole ? rbln::DeviceAccess::Write : rbln::DeviceAccess::ReadWrite);
        const auto bytes = static_cast<std::uint64_t>(rows * row);
        for (std::int64_t slab = 0; slab < slabs; slab++) {
            std::int64_t rest = slab;
            auto off = static_cast<std::int64_t>(byte_offset(src));
            for (std::size_t d = outer; d-- > 0;) {
                off += (rest % sizes[d]) * strides[d] * es;
                rest /= sizes[d];
            }
            const rbln::CopyEndpoint from =
                rbln::CopyEndpoint::of(smem, static_cast<std::uint64_t>(off), bytes)
                    .strided(static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(pitch));
            rbln::copy(st, rbln::CopyEndpoint::of(dmem, byte_offset(dst) + slab * bytes, bytes),
                       rows == 1
                           ? rbln::CopyEndpoint::of(smem, static_cast<std::uint64_t>(off), bytes)
                           : from);
        }
    });
    refresh({&dst, &src});
    return true;
}

// Device -> device.  Float dtypes: one CAST job (any strides on both sides;
// a dtype change converts); contiguous bytes of one dtype: one COPY; a
// strided source of one dtype: the strided-copy engine; anything else
// through the host.
void copy_on_device(const at::Tensor& src, const at::Tensor& dst) {
    const bool float_pair = kernel_ready(dst) && kernel_ready(src) && src.device() == dst.device();
    if (float_pair) {
        const at::Tensor s = src.sizes() == dst.sizes() ? src : src.expand(dst.sizes());
        if (kernel_ready(s)) {
            rbln_call([&] {
                rbln::Stream st = current_stream(index_of(dst));
                rbln::ops::cast(st, view_of(dst), view_of(s));
            });
            refresh({&dst, &src});
            return;
        }
    }
    if (src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() &&
        src.is_contiguous() && dst.is_contiguous() && storage_of(src) && storage_of(dst)) {
        rbln::StorageView d = rbln::StorageView::whole(storage_of(dst));
        rbln::StorageView s = rbln::StorageView::whole(storage_of(src));
        const std::uint64_t es = rbln::element_size(s.storage->element_type());
        const std::uint64_t ed = rbln::element_size(d.storage->element_type());
        s.offset = byte_offset(src) / es;
        s.sizes = {static_cast<std::int64_t>(src.nbytes() / es)};
        d.offset = byte_offset(dst) / ed;
        d.sizes = {static_cast<std::int64_t>(dst.nbytes() / ed)};
        if (byte_offset(src) % es == 0 && byte_offset(dst) % ed == 0 && src.nbytes() % es == 0 &&
            dst.nbytes() % ed == 0) {
            rbln_call([&] {
                rbln::Stream st = current_stream(index_of(dst));
                rbln::ops::copy(st, d, s);
            });
            refresh({&dst, &src});
            return;
        }
    }
    if (strided_copy(src, dst))
        return;
    copy_to_device(src.to(at::kCPU), dst, false);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
    if (self.numel() == 0 || dst.numel() == 0)
        return dst;
    if (is_device(dst))
        check_dtype(dst.scalar_type());
    if (is_device(self) && is_device(dst))
        copy_on_device(self, dst);
    else if (is_device(dst))
        copy_to_device(self, dst, non_blocking);
    else
        copy_to_host(self, dst, non_blocking);
    return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
    if (dst.sizes() != self.sizes())
        dst.resize_(self.sizes());
    return copy_from(self, dst, false);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("add.Tensor", TORCH_FN(add));
    m.impl("add_.Tensor", TORCH_FN(add_inplace));
    m.impl("sub.Tensor", TORCH_FN(sub));
    m.impl("mul.Tensor", TORCH_FN(mul));
    m.impl("mul_.Tensor", TORCH_FN(mul_inplace));
    m.impl("relu", TORCH_FN(relu));
    m.impl("relu_", TORCH_FN(relu_inplace));
    m.impl("mm", TORCH_FN(mm));
    m.impl("addmm", TORCH_FN(addmm));
    m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
    m.impl("zero_", TORCH_FN(zero));
    m.impl("_copy_from", TORCH_FN(copy_from));
    m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

} // namespace torch_rbln
