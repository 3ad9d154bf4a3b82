// SPDX-License-Identifier: GPL-2.0
// storage.cpp - lazy device storage and its coherence state machine
// (rbln/storage.hpp).

#include "rbln/storage.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "diag/explain_hooks.hpp"
#include "graph/capture.hpp"
#include "kernel/kernel.hpp"
#include "memory/block_memory.hpp"
#include "memory/sub_memory.hpp"
#include "rbln/allocator_stream.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "runtime/process_context.hpp"

namespace rbln {

namespace {

std::atomic<std::uint64_t> g_next_id{1};

struct Totals {
    std::atomic<std::uint64_t> uploads{0};
    std::atomic<std::uint64_t> downloads{0};
    std::atomic<std::uint64_t> upload_bytes{0};
    std::atomic<std::uint64_t> download_bytes{0};
    std::atomic<std::uint64_t> commits{0};
};
Totals g_totals;

// -1: not read yet; else a CommitMode.
std::mutex g_mode_mutex;
std::atomic<int> g_mode{-1};

Error bad_view(const char* operation, std::string message) {
    return Error(Errc::InvalidArgument, operation, "", 0, std::move(message));
}

std::string describe(const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); i++)
        s += (i != 0 ? "," : "") + std::to_string(v[i]);
    return s + "]";
}

} // namespace

std::uint32_t element_size(ElementType type) noexcept {
    switch (type) {
    case ElementType::U8:
        return 1;
    case ElementType::Fp32:
        return 4;
    case ElementType::Fp16:
    case ElementType::Bf16:
        return 2;
    }
    return 0;
}

CommitMode commit_mode_from_environment(const EnvSource& env) {
    const EnvSource& source = env ? env : process_environment();
    const std::optional<std::string> v = source("RBLN_EAGER_MALLOC");
    if (!v || v->empty() || *v == "0")
        return CommitMode::Lazy;
    if (*v == "1")
        return CommitMode::Eager;
    throw Error(Errc::BadConfig, "RBLN_EAGER_MALLOC", "", 0,
                "'" + *v + "' is not 0 or 1 (1: give device storage its memory at creation)");
}

CommitMode process_commit_mode() {
    const int m = g_mode.load(std::memory_order_acquire);
    if (m >= 0)
        return static_cast<CommitMode>(m);
    const EnvSource env = Runtime::process().environment();
    const std::lock_guard<std::mutex> lock(g_mode_mutex);
    if (g_mode.load() < 0)
        g_mode.store(static_cast<int>(commit_mode_from_environment(env)),
                     std::memory_order_release);
    return static_cast<CommitMode>(g_mode.load());
}

void detail::forget_commit_mode() noexcept {
    const std::lock_guard<std::mutex> lock(g_mode_mutex);
    g_mode.store(-1, std::memory_order_release);
}

StorageTransfers storage_transfer_totals() noexcept {
    return {g_totals.uploads.load(), g_totals.downloads.load(), g_totals.upload_bytes.load(),
            g_totals.download_bytes.load(), g_totals.commits.load()};
}

// ---- Storage ------------------------------------------------------------

namespace {

// Errc::InvalidArgument unless @nbytes is whole elements of a known @type.
void check_elements(const std::string& where, std::uint64_t nbytes, ElementType type) {
    const std::uint32_t esize = element_size(type);
    if (esize == 0)
        throw Error(Errc::InvalidArgument, "storage", where, 0,
                    "unknown element type " + std::to_string(static_cast<unsigned>(type)));
    if (nbytes % esize != 0)
        throw Error(Errc::InvalidArgument, "storage", where, 0,
                    std::to_string(nbytes) + " bytes is not a whole number of " +
                        std::to_string(esize) + "-byte elements");
}

} // namespace

std::shared_ptr<Storage> Storage::finish(std::shared_ptr<Storage> s, CommitMode mode) {
    if (s->host_.eligible())
        detail::offload_register(s->host_.scope(), std::shared_ptr<OffloadMember>(
                                                       s, static_cast<OffloadMember*>(s.get())));
    // Made inside a capture: no memory (a replay carves its outputs).
    const bool captured = detail::graph::any_capture() && detail::graph::note_created(s);
    if (!captured && mode == CommitMode::Eager)
        s->commit();
    return s;
}

std::shared_ptr<Storage> Storage::create(std::shared_ptr<Device> device, DeviceAllocator& allocator,
                                         std::uint64_t nbytes, ElementType type,
                                         StorageOptions options) {
    if (!device)
        throw Error(Errc::InvalidArgument, "storage", "", 0, "no device");
    check_elements(device->kernel().path(), nbytes, type);
    const CommitMode mode = options.commit.value_or(process_commit_mode());
    return finish(
        std::make_shared<Storage>(Key{}, std::move(device), allocator, nbytes, type, options),
        mode);
}

std::shared_ptr<Storage> Storage::create(unsigned index, std::uint64_t nbytes, ElementType type,
                                         StorageOptions options) {
    check_elements(device_string(index), nbytes, type);
    // Plans only: the context opens its device at the storage's first use.
    auto context = detail::ProcessContexts::get().context(index);
    const CommitMode mode = options.commit.value_or(process_commit_mode());
    return finish(std::make_shared<Storage>(Key{}, std::move(context), nbytes, type, options),
                  mode);
}

Storage::Storage(Key /*key*/, std::shared_ptr<Device> device, DeviceAllocator& allocator,
                 std::uint64_t nbytes, ElementType type, StorageOptions options)
    : device_(std::move(device)), allocator_(&allocator), id_(g_next_id.fetch_add(1)),
      nbytes_(nbytes), type_(type), place_(options.place),
      host_(detail::current_offload_scope(), id_, nbytes) {
    index_ = device_->index();
    bound_.store(true, std::memory_order_release);
}

Storage::Storage(Key /*key*/, std::shared_ptr<detail::DeviceContext> context, std::uint64_t nbytes,
                 ElementType type, StorageOptions options)
    : context_(std::move(context)), id_(g_next_id.fetch_add(1)), nbytes_(nbytes), type_(type),
      place_(options.place), host_(detail::current_offload_scope(), id_, nbytes) {
    index_ = context_->index();
}

void Storage::bind() const {
    std::call_once(bind_once_, [this] {
        std::shared_ptr<Device> device = context_->device();
        allocator_ = &context_->allocator();
        device_ = std::move(device);
        bound_.store(true, std::memory_order_release);
    });
}

const std::shared_ptr<Device>& Storage::device() const {
    if (!bound_.load(std::memory_order_acquire))
        bind();
    return device_;
}

DeviceAllocator& Storage::allocator() const {
    if (!bound_.load(std::memory_order_acquire))
        bind();
    return *allocator_;
}

std::string Storage::where() const {
    if (bound_.load(std::memory_order_acquire))
        return device_->kernel().path();
    return device_string(index_);
}

Storage::~Storage() = default;

bool Storage::host_in_memory() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return host_.in_memory();
}

bool Storage::host_paged_out() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return host_.paged_out();
}

std::uint64_t Storage::offload_write() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return host_.offload_write(state_.load(std::memory_order_relaxed) == Coherence::DeviceLatest);
}

void Storage::offload_finish(std::uint64_t token, bool synced) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    host_.offload_finish(token, synced);
}

StorageTransfers Storage::transfers() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return transfers_;
}

void Storage::commit_locked(StreamId stream) {
    if (resident_.load(std::memory_order_relaxed))
        return;
    DeviceAllocator& allocator = this->allocator();
    DeviceBlock block = allocator.allocate(nbytes_, stream, place_);
    const unsigned chiplet = block ? allocator.chiplet_of(block.place()) : 0;
    // A job using the memory keeps the context (and so the allocator) too.
    memory_ = std::make_shared<detail::BlockMemory>(device()->kernel_ptr(), std::move(block),
                                                    nbytes_, chiplet, context_);
    transfers_.commits++;
    detail::explain_commit(id_, nbytes_);
    g_totals.commits.fetch_add(1, std::memory_order_relaxed);
    resident_.store(true, std::memory_order_release);
}

void Storage::commit() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!resident_.load(std::memory_order_relaxed))
        commit_locked(stream_id(device()->default_stream()));
}

std::uint64_t Storage::data_ptr() {
    commit();
    return memory_->device_va();
}

void Storage::upload_locked(Stream& stream) {
    const detail::ExplainStorageCause why(id_, ExplainCause::DeviceUse);
    const std::byte* host = host_.get(true); // reads it back if offloaded
    if (nbytes_ != 0)
        copy(stream, CopyEndpoint::of(memory_, 0, nbytes_),
             CopyEndpoint::of_host(static_cast<const void*>(host), nbytes_));
    transfers_.uploads++;
    transfers_.upload_bytes += nbytes_;
    g_totals.uploads.fetch_add(1, std::memory_order_relaxed);
    g_totals.upload_bytes.fetch_add(nbytes_, std::memory_order_relaxed);
}

void Storage::download_locked() {
    std::byte* host = host_.get(false); // overwritten: nothing to read back
    host_.modified();
    Stream stream = writer_ ? *writer_ : device()->default_stream();
    if (nbytes_ != 0)
        copy(stream, CopyEndpoint::of_host(static_cast<void*>(host), nbytes_),
             CopyEndpoint::of(memory_, 0, nbytes_));
    transfers_.downloads++;
    transfers_.download_bytes += nbytes_;
    g_totals.downloads.fetch_add(1, std::memory_order_relaxed);
    g_totals.download_bytes.fetch_add(nbytes_, std::memory_order_relaxed);
}

const std::shared_ptr<Memory>& Storage::device_use(Stream& stream, DeviceAccess access) {
    detail::explain_device_use(id_, access != DeviceAccess::Write);
    // The common case changes nothing: resident, nothing to upload, and
    // either a read or another write by the last writer.
    if (resident_.load(std::memory_order_acquire)) {
        const Coherence st = state_.load(std::memory_order_acquire);
        if (st != Coherence::HostLatest &&
            (access == DeviceAccess::Read ||
             (st == Coherence::DeviceLatest &&
              writer_id_.load(std::memory_order_relaxed) == stream_id(stream))))
            return memory_;
    }
    return device_use_slow(stream, access);
}

const std::shared_ptr<Memory>& Storage::device_use_slow(Stream& stream, DeviceAccess access) {
    const std::lock_guard<std::mutex> lock(mutex_);
    commit_locked(stream_id(stream));
    const Coherence st = state_.load(std::memory_order_relaxed);
    if (st == Coherence::HostLatest && access != DeviceAccess::Write) {
        upload_locked(stream);
        state_.store(Coherence::InSync, std::memory_order_release);
    }
    if (access != DeviceAccess::Read) {
        writer_ = stream;
        writer_id_.store(stream_id(stream), std::memory_order_relaxed);
        state_.store(Coherence::DeviceLatest, std::memory_order_release);
    }
    return memory_;
}

void Storage::check_range(const char* operation, std::uint64_t offset, std::uint64_t size) const {
    if (offset > nbytes_ || size > nbytes_ - offset)
        throw Error(Errc::InvalidArgument, operation, where(), 0,
                    "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                        ") are outside the storage of " + std::to_string(nbytes_) + " bytes");
}

void Storage::read(std::uint64_t offset, std::span<std::byte> out) {
    check_range("storage read", offset, out.size());
    if (detail::graph::any_capture())
        detail::graph::check_outside_use("storage read", id_, nullptr);
    const detail::ExplainStorageCause why(id_, ExplainCause::HostRead);
    const std::lock_guard<std::mutex> lock(mutex_);
    if (state_.load(std::memory_order_relaxed) == Coherence::DeviceLatest) {
        download_locked();
        state_.store(Coherence::InSync, std::memory_order_release);
    }
    const std::byte* host = host_.get(true);
    if (!out.empty())
        std::memcpy(out.data(), host + offset, out.size());
}

void Storage::write(std::uint64_t offset, std::span<const std::byte> data) {
    check_range("storage write", offset, data.size());
    if (detail::graph::any_capture())
        detail::graph::check_outside_use("storage write", id_, nullptr);
    const detail::ExplainStorageCause why(id_, ExplainCause::HostWrite);
    const std::lock_guard<std::mutex> lock(mutex_);
    const bool whole = offset == 0 && data.size() == nbytes_;
    if (state_.load(std::memory_order_relaxed) == Coherence::DeviceLatest && !whole) {
        download_locked();
        state_.store(Coherence::InSync, std::memory_order_release);
    }
    std::byte* host = host_.get(!whole);
    host_.modified();
    if (!data.empty())
        std::memcpy(host + offset, data.data(), data.size());
    state_.store(Coherence::HostLatest, std::memory_order_release);
}

void Storage::record_stream(const Stream& stream) {
    commit();
    // The block of the allocator behind the memory (a graph replay's output
    // is a range of the replay's block).
    const Memory* m = memory_.get();
    if (const auto* sub = dynamic_cast<const detail::SubMemory*>(m))
        m = sub->parent().get();
    const auto* bm = dynamic_cast<const detail::BlockMemory*>(m);
    if (bm != nullptr && bm->block())
        allocator().record_stream(bm->block(), stream_fence_source(stream));
}

void Storage::adopt_device_memory(std::shared_ptr<Memory> memory, Stream& writer) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (resident_.load(std::memory_order_relaxed))
        throw Error(Errc::InvalidArgument, "adopt_device_memory", where(), 0,
                    "the storage has device memory already");
    memory_ = std::move(memory);
    writer_ = writer;
    writer_id_.store(stream_id(writer), std::memory_order_relaxed);
    state_.store(Coherence::DeviceLatest, std::memory_order_release);
    resident_.store(true, std::memory_order_release);
}

DeviceLayout Storage::device_layout() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return layout_;
}

void Storage::set_device_layout(DeviceLayout layout) {
    const std::lock_guard<std::mutex> lock(mutex_);
    layout_ = std::move(layout);
}

// ---- views --------------------------------------------------------------

StorageView StorageView::whole(std::shared_ptr<Storage> storage) {
    const std::uint64_t n = storage ? storage->nbytes() / element_size(storage->element_type()) : 0;
    return contiguous(std::move(storage), {static_cast<std::int64_t>(n)});
}

StorageView StorageView::contiguous(std::shared_ptr<Storage> storage,
                                    std::vector<std::int64_t> sizes) {
    StorageView v;
    v.storage = std::move(storage);
    v.strides.resize(sizes.size());
    std::int64_t stride = 1;
    for (std::size_t i = sizes.size(); i-- > 0;) {
        v.strides[i] = stride;
        stride *= sizes[i];
    }
    v.sizes = std::move(sizes);
    return v;
}

std::uint64_t StorageView::numel() const noexcept {
    std::uint64_t n = 1;
    for (const std::int64_t s : sizes)
        n *= s > 0 ? static_cast<std::uint64_t>(s) : 0;
    return n;
}

bool StorageView::is_contiguous() const noexcept {
    if (strides.size() != sizes.size())
        return false;
    std::int64_t expected = 1;
    for (std::size_t i = sizes.size(); i-- > 0;) {
        if (sizes[i] != 1 && strides[i] != expected)
            return false;
        expected *= sizes[i];
    }
    return true;
}

bool StorageView::covers_whole_storage() const noexcept {
    return storage && offset == 0 && is_contiguous() &&
           numel() * element_size(storage->element_type()) == storage->nbytes();
}

namespace {

/// Why @v is not contiguous over its whole storage from offset 0 ("" if it is).
std::string whole_storage_problem(const StorageView& v) {
    if (!v.is_contiguous())
        return "is not contiguous (sizes " + describe(v.sizes) + ", strides " +
               describe(v.strides) + ")";
    if (v.offset != 0)
        return "starts at element " + std::to_string(v.offset) + ", not at offset 0";
    const std::uint64_t bytes = v.numel() * element_size(v.storage->element_type());
    if (bytes != v.storage->nbytes())
        return "covers " + std::to_string(bytes) + " of the storage's " +
               std::to_string(v.storage->nbytes()) + " bytes";
    return {};
}

} // namespace

void bind_device_memory(const StorageView& view) {
    constexpr const char* op = "bind_device_memory";
    if (!view.storage)
        throw bad_view(op, "the view has no storage");
    const std::string problem = whole_storage_problem(view);
    if (!problem.empty())
        throw bad_view(op, "needs a contiguous storage covering its whole allocation at "
                           "offset 0; this view " +
                               problem);
    view.storage->commit();
    view.storage->set_device_layout(DeviceLayout{DeviceLayout::kFlat, view.sizes});
}

void set_device_layout_like(const StorageView& target, const StorageView& ref) {
    constexpr const char* op = "set_device_layout_like";
    if (!target.storage || !ref.storage)
        throw bad_view(op, std::string(target.storage ? "ref" : "target") + " has no storage");
    if (target.storage->device() != ref.storage->device() ||
        &target.storage->allocator() != &ref.storage->allocator())
        throw bad_view(op,
                       "target is on rbln:" + std::to_string(target.storage->device()->index()) +
                           " and ref on rbln:" + std::to_string(ref.storage->device()->index()) +
                           "; both must be on the same device");
    if (target.storage->element_type() != ref.storage->element_type())
        throw bad_view(
            op, "target's element type (" +
                    std::to_string(static_cast<unsigned>(target.storage->element_type())) +
                    ") differs from ref's (" +
                    std::to_string(static_cast<unsigned>(ref.storage->element_type())) + ")");
    using Named = std::pair<const char*, const StorageView*>;
    for (const auto& [name, v] : {Named{"target", &target}, Named{"ref", &ref}}) {
        const std::string problem = whole_storage_problem(*v);
        if (!problem.empty())
            throw bad_view(op, std::string(name) + " must cover its whole storage; it " + problem);
    }
    if (target.sizes != ref.sizes)
        throw bad_view(op, "target's sizes " + describe(target.sizes) + " differ from ref's " +
                               describe(ref.sizes));
    if (!ref.storage->resident())
        throw bad_view(op, "ref has no device memory yet (a lazy storage before its first device "
                           "use); use it on the device or bind_device_memory() it first");
    target.storage->set_device_layout(ref.storage->device_layout());
}

} // namespace rbln
