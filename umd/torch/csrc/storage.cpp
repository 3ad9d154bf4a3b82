// SPDX-License-Identifier: GPL-2.0
// storage.cpp - tensor storage on librbln lazy storages, the PrivateUse1
// allocator, device guard and streams (backend.hpp).

#include "backend.hpp"

#include <ATen/EmptyTensor.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <map>
#include <mutex>

#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/explain.hpp"

namespace torch_rbln {

namespace {

// What the next allocation is for (set by empty_device and friends; the
// c10::Allocator interface passes only a byte count).
struct Pending {
    std::optional<rbln::ElementType> type;
    std::optional<unsigned> index;
};
thread_local Pending t_pending;

class PendingScope {
public:
    PendingScope(rbln::ElementType type, unsigned index) : saved_(t_pending) {
        t_pending = {type, index};
    }
    PendingScope(const PendingScope&) = delete;
    PendingScope& operator=(const PendingScope&) = delete;
    PendingScope(PendingScope&&) = delete;
    PendingScope& operator=(PendingScope&&) = delete;
    ~PendingScope() { t_pending = saved_; }

private:
    Pending saved_;
};

struct Holder {
    std::shared_ptr<rbln::Storage> storage;
    std::uint64_t placeholder = 0;
};

void delete_holder(void* p) {
    const std::unique_ptr<Holder> h(static_cast<Holder*>(p));
}

const Holder* holder_of(const c10::Storage& s) {
    const c10::DataPtr& dp = s.data_ptr();
    if (dp.get_deleter() != &delete_holder)
        return nullptr;
    return static_cast<const Holder*>(dp.get_context());
}

class DeviceAllocatorImpl final : public c10::Allocator {
public:
    c10::DataPtr allocate(size_t nbytes) const override {
        const unsigned index = t_pending.index ? *t_pending.index : device_index(c10::nullopt);
        const c10::Device dev(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
        if (nbytes == 0)
            return {nullptr, dev};
        rbln::ElementType type = t_pending.type.value_or(rbln::ElementType::U8);
        if (nbytes % rbln::element_size(type) != 0)
            type = rbln::ElementType::U8;
        auto h = std::make_unique<Holder>();
        h->storage = rbln_call([&] { return rbln::Storage::create(index, nbytes, type); });
        h->placeholder = kPlaceholderTag | (h->storage->id() << 24);
        void* data = reinterpret_cast<void*>(h->placeholder); // NOLINT(performance-no-int-to-ptr)
        return {data, h.release(), &delete_holder, dev};
    }
    c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

DeviceAllocatorImpl g_allocator;

// Sizes/strides with size-1 dimensions dropped and mergeable neighbours
// merged, so that more views fit the card's 4 dimensions.
void collapse(std::vector<std::int64_t>& sizes, std::vector<std::int64_t>& strides) {
    std::vector<std::int64_t> s;
    std::vector<std::int64_t> st;
    for (std::size_t d = 0; d < sizes.size(); d++) {
        if (sizes[d] == 1)
            continue;
        if (!s.empty() && st.back() == strides[d] * sizes[d]) {
            s.back() *= sizes[d];
            st.back() = strides[d];
            continue;
        }
        s.push_back(sizes[d]);
        st.push_back(strides[d]);
    }
    sizes = std::move(s);
    strides = std::move(st);
}

} // namespace

at::Tensor tensor_of(const rbln::StorageView& view, c10::ScalarType dtype, unsigned index) {
    TORCH_CHECK(view.storage, "tensor_of: a view without a storage");
    const auto es = static_cast<std::int64_t>(rbln::element_size(view.storage->element_type()));
    const auto item = static_cast<std::int64_t>(c10::elementSize(dtype));
    TORCH_CHECK(es == item, "tensor_of: a ", c10::toString(dtype),
                " tensor over a storage of elements of ", es, " bytes");
    const c10::Device dev(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
    auto h = std::make_unique<Holder>();
    h->storage = view.storage;
    h->placeholder = kPlaceholderTag | (h->storage->id() << 24);
    const std::uint64_t nbytes = h->storage->nbytes();
    void* data = reinterpret_cast<void*>(h->placeholder); // NOLINT(performance-no-int-to-ptr)
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<std::int64_t>(nbytes),
                         c10::DataPtr(data, h.release(), &delete_holder, dev), &g_allocator,
                         /*resizable=*/false);
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
        caffe2::TypeMeta::fromScalarType(dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(view.sizes, view.strides);
    t.unsafeGetTensorImpl()->set_storage_offset(static_cast<std::int64_t>(view.offset));
    return t;
}

std::string device_name(unsigned index) {
    return c10::DeviceTypeName(c10::DeviceType::PrivateUse1, true) + ":" + std::to_string(index);
}

rbln::ElementType element_type_of(c10::ScalarType t) {
    switch (t) {
    case c10::ScalarType::Float:
        return rbln::ElementType::Fp32;
    case c10::ScalarType::Half:
        return rbln::ElementType::Fp16;
    case c10::ScalarType::BFloat16:
        return rbln::ElementType::Bf16;
    default:
        return rbln::ElementType::U8;
    }
}

void check_dtype(c10::ScalarType t) {
    TORCH_CHECK_TYPE(!c10::isComplexType(t) && !c10::isQIntType(t), "rbln devices do not support ",
                     c10::toString(t),
                     " tensors: the card computes in float32, float16 and bfloat16 and stores "
                     "real types; keep this tensor on the CPU or convert it (e.g. .real, "
                     ".float()) before moving it to the device");
}

unsigned device_index(c10::optional<c10::Device> device) {
    auto& rt = rbln::Runtime::process();
    if (device && device->type() != c10::DeviceType::PrivateUse1)
        TORCH_CHECK(false, "expected an ", c10::DeviceTypeName(c10::DeviceType::PrivateUse1, true),
                    " device, got ", device->str());
    const unsigned index = device && device->has_index() ? static_cast<unsigned>(device->index())
                                                         : rt.current_device();
    const unsigned count = rt.device_count();
    TORCH_CHECK(count > 0, "no rbln device is visible to this process: load rbln.ko (is "
                           "/sys/module/rbln there?), check /dev/accel permissions, and "
                           "RBLN_VISIBLE_DEVICES (\"\" hides every NPU)");
    TORCH_CHECK_INDEX(index < count, "invalid device ordinal: ", device_name(index), " but ", count,
                      " rbln device(s) are visible (device_count()); pick an index below ", count,
                      " or check RBLN_VISIBLE_DEVICES, RBLN_NPUS_PER_DEVICE and "
                      "RBLN_DEVICE_MAP");
    return index;
}

c10::Allocator* device_allocator() {
    return &g_allocator;
}

std::shared_ptr<rbln::Storage> storage_of(const at::Tensor& t) {
    const Holder* h = holder_of(t.storage());
    return h != nullptr ? h->storage : nullptr;
}

bool kernel_ready(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || t.numel() == 0)
        return false;
    const rbln::ElementType type = element_type_of(t.scalar_type());
    if (type == rbln::ElementType::U8)
        return false;
    auto s = storage_of(t);
    if (!s || s->element_type() != type)
        return false;
    std::vector<std::int64_t> sizes(t.sizes().begin(), t.sizes().end());
    std::vector<std::int64_t> strides(t.strides().begin(), t.strides().end());
    collapse(sizes, strides);
    return sizes.size() <= 4;
}

rbln::StorageView view_of(const at::Tensor& t) {
    rbln::StorageView v;
    v.storage = storage_of(t);
    v.offset = static_cast<std::uint64_t>(t.storage_offset());
    v.sizes.assign(t.sizes().begin(), t.sizes().end());
    v.strides.assign(t.strides().begin(), t.strides().end());
    if (v.sizes.size() > 4)
        collapse(v.sizes, v.strides);
    return v;
}

void refresh_data_ptr(const at::Tensor& t) {
    c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    if (impl == nullptr)
        return;
    c10::DataPtr& dp = impl->data_ptr();
    if (dp.get_deleter() != &delete_holder)
        return;
    const auto* h = static_cast<const Holder*>(dp.get_context());
    if (reinterpret_cast<std::uint64_t>(dp.get()) != h->placeholder || !h->storage->resident())
        return;
    const std::uint64_t va = h->storage->data_ptr(); // resident: commits nothing
    const c10::Device dev = dp.device();
    void* ctx = dp.release_context();
    impl->set_data_ptr_noswap(
        c10::DataPtr(reinterpret_cast<void*>(va), // NOLINT(performance-no-int-to-ptr)
                     ctx, &delete_holder, dev));
}

at::Tensor empty_device(at::IntArrayRef sizes, c10::ScalarType dtype, unsigned index) {
    check_dtype(dtype);
    const PendingScope p(element_type_of(dtype), index);
    return at::detail::empty_generic(sizes, &g_allocator,
                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype,
                                     c10::nullopt);
}

// --- aten kernels that make or reshape tensors -----------------------------

namespace {

at::Tensor empty_memory_format(c10::SymIntArrayRef size, c10::optional<c10::ScalarType> dtype,
                               c10::optional<c10::Layout> /*layout*/,
                               c10::optional<c10::Device> device, c10::optional<bool> /*pin*/,
                               c10::optional<c10::MemoryFormat> format) {
    const c10::ScalarType st = dtype.value_or(at::get_default_dtype_as_scalartype());
    check_dtype(st);
    const unsigned index = device_index(device);
    const PendingScope p(element_type_of(st), index);
    return at::detail::empty_generic(c10::asIntArrayRefSlow(size), &g_allocator,
                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st,
                                     format);
}

at::Tensor empty_strided(c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                         c10::optional<c10::ScalarType> dtype,
                         c10::optional<c10::Layout> /*layout*/, c10::optional<c10::Device> device,
                         c10::optional<bool> /*pin*/) {
    const c10::ScalarType st = dtype.value_or(at::get_default_dtype_as_scalartype());
    check_dtype(st);
    const unsigned index = device_index(device);
    const PendingScope p(element_type_of(st), index);
    return at::detail::empty_strided_generic(
        c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride), &g_allocator,
        c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
    return at::native::view(self, c10::asIntArrayRefSlow(size));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      c10::optional<c10::SymInt> offset) {
    c10::optional<std::int64_t> off;
    if (offset)
        off = offset->expect_int();
    return at::native::as_strided_tensorimpl(self, c10::asIntArrayRefSlow(size),
                                             c10::asIntArrayRefSlow(stride), off);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
    return at::native::_reshape_alias(self, c10::asIntArrayRefSlow(size),
                                      c10::asIntArrayRefSlow(stride));
}

// resize_: a larger storage keeps the old bytes (through the host: rare,
// out= operators of the CPU fallback).
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::optional<c10::MemoryFormat> /*format*/) {
    const at::IntArrayRef sizes = c10::asIntArrayRefSlow(size);
    auto* impl = self.unsafeGetTensorImpl();
    impl->set_sizes_contiguous(sizes);
    const std::uint64_t need =
        static_cast<std::uint64_t>(impl->numel() + impl->storage_offset()) * self.itemsize();
    c10::StorageImpl* st = self.storage().unsafeGetStorageImpl();
    if (need <= st->nbytes())
        return self;
    const unsigned index = static_cast<unsigned>(self.device().index());
    std::vector<std::byte> old(st->nbytes());
    if (auto s = storage_of(self))
        rbln_call([&] { s->read(0, old); });
    const PendingScope p(element_type_of(self.scalar_type()), index);
    c10::DataPtr fresh = g_allocator.allocate(need);
    st->set_data_ptr_noswap(std::move(fresh));
    st->set_nbytes(need);
    if (auto s = storage_of(self); s && !old.empty())
        rbln_call([&] { s->write(0, old); });
    return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
    m.impl("empty_strided", TORCH_FN(empty_strided));
    m.impl("view", TORCH_FN(view));
    m.impl("as_strided", TORCH_FN(as_strided));
    m.impl("_reshape_alias", TORCH_FN(reshape_alias));
    m.impl("resize_", TORCH_FN(resize));
}

// --- streams -----------------------------------------------------------------

namespace {

std::mutex g_streams_mutex;
std::map<std::int64_t, rbln::Stream> g_streams; // guarded by g_streams_mutex
std::int64_t g_next_stream = 1;                 // guarded by g_streams_mutex
thread_local std::map<unsigned, std::int64_t> t_current;

} // namespace

std::int64_t current_stream_id(unsigned index) {
    auto it = t_current.find(index);
    return it == t_current.end() ? 0 : it->second;
}

void set_current_stream_id(unsigned index, std::int64_t id) {
    t_current[index] = id;
}

rbln::Stream stream_by_id(unsigned index, std::int64_t id) {
    if (id != 0) {
        const std::lock_guard<std::mutex> lock(g_streams_mutex);
        auto it = g_streams.find(id);
        TORCH_CHECK(it != g_streams.end(), "rbln stream ", id, " was released");
        return it->second;
    }
    return rbln_call([&] { return rbln::Device::get(index)->default_stream(); });
}

rbln::Stream current_stream(unsigned index) {
    return stream_by_id(index, current_stream_id(index));
}

std::int64_t register_stream(const rbln::Stream& s) {
    const std::lock_guard<std::mutex> lock(g_streams_mutex);
    const std::int64_t id = g_next_stream++;
    g_streams.emplace(id, s);
    return id;
}

void release_stream(std::int64_t id) {
    std::optional<rbln::Stream> last;
    {
        const std::lock_guard<std::mutex> lock(g_streams_mutex);
        auto it = g_streams.find(id);
        if (it == g_streams.end())
            return;
        last.emplace(it->second); // destroyed (waits for its work) outside the lock
        g_streams.erase(it);
    }
}

namespace {

// The device guard PyTorch uses for PrivateUse1 (device and stream context).
struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
    c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
    c10::Device exchangeDevice(c10::Device d) const override {
        const c10::Device old = getDevice();
        setDevice(d);
        return old;
    }
    c10::Device getDevice() const override {
        return {c10::DeviceType::PrivateUse1,
                static_cast<c10::DeviceIndex>(rbln::Runtime::process().current_device())};
    }
    void setDevice(c10::Device d) const override {
        const unsigned index = device_index(d);
        rbln_call([&] { rbln::Runtime::process().set_device(index); });
    }
    void uncheckedSetDevice(c10::Device d) const noexcept override {
        try {
            rbln::Runtime::process().set_device(static_cast<unsigned>(d.index()));
        } catch (...) { // NOLINT(bugprone-empty-catch): restoring a device that was valid
        }
    }
    c10::Stream getStream(c10::Device d) const noexcept override {
        const auto index = static_cast<unsigned>(d.index());
        return c10::Stream(c10::Stream::UNSAFE, d, current_stream_id(index));
    }
    c10::Stream getDefaultStream(c10::Device d) const override {
        return c10::Stream(c10::Stream::UNSAFE, d, 0);
    }
    c10::Stream exchangeStream(c10::Stream s) const noexcept override {
        const c10::Stream old = getStream(s.device());
        set_current_stream_id(static_cast<unsigned>(s.device_index()), s.id());
        return old;
    }
    c10::DeviceIndex deviceCount() const noexcept override {
        return static_cast<c10::DeviceIndex>(rbln::Runtime::process().device_count());
    }
    bool queryStream(const c10::Stream& s) const override {
        return rbln_call(
            [&] { return stream_by_id(static_cast<unsigned>(s.device_index()), s.id()).query(); });
    }
    void synchronizeStream(const c10::Stream& s) const override {
        rbln_call(
            [&] { stream_by_id(static_cast<unsigned>(s.device_index()), s.id()).synchronize(); });
    }
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

// --- explain -----------------------------------------------------------------

namespace {
thread_local std::vector<Explain*> t_regions;
} // namespace

Explain::Explain(std::string name, std::string file, std::uint32_t line)
    : region(std::move(name), rbln::ExplainLocation(std::move(file), line)) {
    t_regions.push_back(this);
}

Explain::~Explain() {
    close();
}

void Explain::close() {
    if (!open)
        return;
    open = false;
    region.close();
    std::erase(t_regions, this);
}

std::string Explain::report() const {
    std::string r = region.report();
    if (fallbacks.empty())
        return r;
    // A CPU fallback is a signal too: the header says so, and the line
    // saying the region is clean goes.
    const std::uint64_t signals = region.counts().signals + fallbacks.size();
    const std::string head = "[overhead: " + std::to_string(signals) + " signals]";
    const std::size_t end = r.find(']');
    if (!r.empty() && r[0] == '[' && end != std::string::npos)
        r = head + r.substr(end + 1);
    const std::size_t clean = r.find("\n  clean:");
    if (clean != std::string::npos)
        r.erase(clean, r.find('\n', clean + 1) - clean);
    r += "  cpu_fallback: " + std::to_string(fallbacks.size()) + " (";
    for (std::size_t i = 0; i < fallbacks.size(); i++)
        r += (i != 0 ? ", " : "") + fallbacks[i];
    return r + ")\n";
}

void record_fallback(const std::string& op) {
    for (Explain* e : t_regions)
        e->fallbacks.push_back(op);
}

} // namespace torch_rbln
