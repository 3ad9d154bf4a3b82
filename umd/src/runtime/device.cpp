// SPDX-License-Identifier: GPL-2.0
// device.cpp - an open logical device (rbln/device.hpp).

#include "rbln/device.hpp"

#include <charconv>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "exec/submitter.hpp"
#include "kernel/kernel.hpp"
#include "memory/block_memory.hpp"
#include "memory/bo_memory.hpp"
#include "rbln/devices.hpp"
#include "runtime/device_state.hpp"
#include "runtime/process_context.hpp"

namespace rbln {

namespace {

// Devices by open file, for device_of().
std::mutex g_by_kernel_mutex;
std::map<const KernelInterface*, std::weak_ptr<Device>> g_by_kernel; // guarded

} // namespace

namespace detail {

Syncobj::~Syncobj() {
    try {
        kernel->syncobj_destroy(handle);
    } catch (...) { // NOLINT(bugprone-empty-catch): closed with the fd at the latest
    }
}

TimestampSlot::~TimestampSlot() {
    if (release)
        release(*this);
}

std::uint64_t TimestampSlot::read() const {
    return *reinterpret_cast<const volatile std::uint64_t*>(page->host_data() + offset);
}

void TimestampSlot::clear() const {
    *reinterpret_cast<volatile std::uint64_t*>(page->host_data() + offset) = 0;
}

std::shared_ptr<TimestampSlot> DeviceState::timestamp_slot() {
    auto pool = timestamps;
    const std::lock_guard<std::mutex> lock(pool->mutex);
    if (pool->free.empty()) {
        auto page = BoMemory::create_host(kernel, 4096);
        const std::size_t index = pool->pages.size();
        pool->pages.push_back(std::move(page));
        for (std::uint32_t off = 4096; off > 0; off -= 8)
            pool->free.emplace_back(index, off - 8);
    }
    const auto [page, offset] = pool->free.back();
    pool->free.pop_back();
    auto slot = std::make_shared<TimestampSlot>();
    slot->page = pool->pages[page];
    slot->offset = offset;
    const std::weak_ptr<TimestampPool> weak = pool;
    slot->release = [weak, page = page](TimestampSlot& s) {
        if (auto p = weak.lock()) {
            try {
                const std::lock_guard<std::mutex> l(p->mutex);
                p->free.emplace_back(page, s.offset);
            } catch (...) { // NOLINT(bugprone-empty-catch): the slot is lost, nothing else
            }
        }
    };
    slot->clear();
    return slot;
}

bool DeviceState::drain_async() {
    std::vector<std::pair<std::weak_ptr<StreamState>, std::uint64_t>> pending;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        pending.swap(pending_async);
    }
    bool any = false;
    for (auto& [weak, n] : pending) {
        auto st = weak.lock();
        if (!st)
            continue; // its stream waited for it when it went away
        if (!submitter->done(st->queue_id, n)) {
            any = true;
            st->wait_job(n);
        }
    }
    return any;
}

void DeviceState::add_async(const std::shared_ptr<StreamState>& stream, std::uint64_t n) {
    const std::lock_guard<std::mutex> lock(mutex);
    // Forget transfers that are done, so the list stays short.
    if (pending_async.size() >= 64)
        std::erase_if(pending_async, [&](const auto& p) {
            auto st = p.first.lock();
            return !st || submitter->done(st->queue_id, p.second);
        });
    pending_async.emplace_back(stream, n);
}

} // namespace detail

std::shared_ptr<Device> Device::open(std::shared_ptr<KernelInterface> kernel, unsigned index,
                                     DeviceOptions options) {
    auto dev = std::make_shared<Device>(Key{}, std::move(kernel), index, std::move(options));
    const std::lock_guard<std::mutex> lock(g_by_kernel_mutex);
    g_by_kernel[dev->s_->kernel.get()] = dev;
    return dev;
}

Device::Device(Key /*key*/, std::shared_ptr<KernelInterface> kernel, unsigned index,
               DeviceOptions options)
    : s_(std::make_unique<detail::DeviceState>()) {
    s_->kernel = std::move(kernel);
    s_->index = index;
    s_->options = std::move(options);
    if (s_->options.command_chunk_bytes < 4096)
        s_->options.command_chunk_bytes = 4096;
    if (s_->options.staging_bytes < 4096)
        s_->options.staging_bytes = 4096;
    const DeviceIdentity id = query_device_identity(*s_->kernel);
    s_->chiplets = id.chiplet_count;
    s_->submitter = std::make_unique<Submitter>(s_->kernel, s_->options.submitter);
}

Device::~Device() {
    {
        const std::lock_guard<std::mutex> lock(g_by_kernel_mutex);
        const auto it = g_by_kernel.find(s_->kernel.get());
        if (it != g_by_kernel.end() && it->second.expired())
            g_by_kernel.erase(it);
    }
    // The default stream first: it waits for its jobs through the submitter.
    s_->default_stream.reset();
    s_->submitter.reset();
}

std::shared_ptr<Device> Device::get(unsigned index) {
    return detail::ProcessContexts::get().device(index);
}

std::shared_ptr<Device> Device::current() {
    return get(Runtime::process().current_device());
}

unsigned Device::index() const noexcept {
    return s_->index;
}

KernelInterface& Device::kernel() const noexcept {
    return *s_->kernel;
}

const std::shared_ptr<KernelInterface>& Device::kernel_ptr() const noexcept {
    return s_->kernel;
}

Submitter& Device::submitter() noexcept {
    return *s_->submitter;
}

const std::string& Device::node_path() const noexcept {
    return s_->kernel->path();
}

const DeviceOptions& Device::options() const noexcept {
    return s_->options;
}

unsigned Device::chiplet_count() const noexcept {
    return s_->chiplets;
}

Stream Device::default_stream() {
    std::shared_ptr<detail::StreamState> st;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        st = s_->default_stream;
    }
    if (!st) {
        auto made = std::make_shared<detail::StreamState>(*this, StreamPriority::Normal);
        const std::lock_guard<std::mutex> lock(s_->mutex);
        if (!s_->default_stream) {
            s_->default_stream = made;
            s_->streams.push_back(made);
        }
        st = s_->default_stream;
    }
    return Stream(shared_from_this(), st);
}

void Device::flush() {
    s_->check_fork();
    s_->submitter->flush();
}

void Device::synchronize() {
    s_->fork.check_strict(); // also a child of a raw clone() (no atfork handlers)
    s_->drain_async();
    std::vector<std::shared_ptr<detail::StreamState>> live;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        std::erase_if(s_->streams, [](const auto& w) { return w.expired(); });
        for (const auto& w : s_->streams)
            if (auto st = w.lock())
                live.push_back(std::move(st));
    }
    std::optional<Error> first;
    for (const auto& st : live) {
        try {
            st->synchronize();
        } catch (const Error& e) {
            if (!first)
                first = e;
        }
    }
    if (first)
        throw *first;
}

DeviceAllocator& Device::allocator() {
    return *allocator_ptr();
}

std::shared_ptr<DeviceAllocator> Device::allocator_ptr() {
    std::function<std::shared_ptr<DeviceAllocator>()> source;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        if (s_->allocator)
            return s_->allocator;
        source = s_->allocator_source;
    }
    // Outside the device mutex: the registry's source takes its own.
    std::shared_ptr<DeviceAllocator> made =
        source ? source()
               : std::shared_ptr<DeviceAllocator>(
                     DeviceAllocator::for_kernels(s_->index, {{0, s_->kernel}}));
    const std::lock_guard<std::mutex> lock(s_->mutex);
    if (!s_->allocator)
        s_->allocator = std::move(made);
    return s_->allocator;
}

std::shared_ptr<Memory> Device::allocate(std::uint64_t size, std::optional<unsigned> chiplet) {
    s_->check_fork();
    std::shared_ptr<DeviceAllocator> a = allocator_ptr();
    const unsigned place = chiplet ? a->find_place(a->npu_of(0), *chiplet) : a->default_place();
    DeviceBlock block = a->allocate(size, kDefaultStream, place);
    const unsigned on = a->chiplet_of(place);
    return std::make_shared<detail::BlockMemory>(s_->kernel, std::move(block), size, on,
                                                 std::move(a));
}

std::shared_ptr<Memory> Device::allocate_host(std::uint64_t size) {
    s_->check_fork();
    std::shared_ptr<Memory> m = BoMemory::create_host(s_->kernel, size);
    const std::lock_guard<std::mutex> lock(s_->mutex);
    s_->pinned[reinterpret_cast<std::uintptr_t>(m->host_data())] = m;
    return m;
}

std::shared_ptr<Memory> Device::register_host(void* data, std::uint64_t size) {
    s_->check_fork();
    std::shared_ptr<Memory> m = BoMemory::register_host(s_->kernel, data, size);
    const std::lock_guard<std::mutex> lock(s_->mutex);
    s_->pinned[reinterpret_cast<std::uintptr_t>(data)] = m;
    return m;
}

std::shared_ptr<Memory> Device::find_pinned(const void* data, std::uint64_t size) const {
    const auto p = reinterpret_cast<std::uintptr_t>(data);
    const std::lock_guard<std::mutex> lock(s_->mutex);
    auto it = s_->pinned.upper_bound(p);
    while (it != s_->pinned.begin()) {
        --it;
        auto m = it->second.lock();
        if (!m) {
            it = s_->pinned.erase(it);
            continue;
        }
        if (p >= it->first && p + size <= it->first + m->size() && p + size >= p)
            return m;
        return nullptr; // the closest range below does not cover it
    }
    return nullptr;
}

CopyStats Device::copy_stats() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->stats;
}

std::optional<bool> single_issuer_from_environment(const EnvSource& env) {
    const EnvSource& source = env ? env : process_environment();
    const std::optional<std::string> v = source("RBLN_SINGLE_ISSUER");
    if (!v || v->empty())
        return std::nullopt;
    if (*v == "0")
        return false;
    if (*v == "1")
        return true;
    throw Error(Errc::BadConfig, "RBLN_SINGLE_ISSUER", "", 0,
                "'" + *v +
                    "' is not 0 or 1 (1: each device submits from the thread that opened it "
                    "only, over a single-issuer io_uring)");
}

std::optional<unsigned> sqpoll_from_environment(const EnvSource& env) {
    const EnvSource& source = env ? env : process_environment();
    const std::optional<std::string> v = source("RBLN_URING_SQPOLL");
    if (!v || v->empty())
        return std::nullopt;
    unsigned ms = 0;
    const char* end = v->data() + v->size();
    const auto [p, ec] = std::from_chars(v->data(), end, ms);
    if (ec != std::errc() || p != end || ms > kMaxSqpollIdleMs)
        throw Error(Errc::BadConfig, "RBLN_URING_SQPOLL", "", 0,
                    "'" + *v + "' is not a number of milliseconds from 0 to " +
                        std::to_string(kMaxSqpollIdleMs) +
                        " (0: off; N: an io_uring kernel thread submits the jobs and polls N "
                        "ms after the last before it sleeps)");
    return ms;
}

std::shared_ptr<Device> device_of(const Memory& memory) {
    const std::lock_guard<std::mutex> lock(g_by_kernel_mutex);
    const auto it = g_by_kernel.find(&memory.kernel());
    return it == g_by_kernel.end() ? nullptr : it->second.lock();
}

} // namespace rbln
