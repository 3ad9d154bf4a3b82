// SPDX-License-Identifier: GPL-2.0
// process_context.cpp - the process's registry of logical devices
// (process_context.hpp) and the test hook that replaces it (testing.hpp).

#include "runtime/process_context.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory/segment_provider.hpp"
#include "runtime/device_state.hpp"
#include "runtime/fork_state.hpp"

namespace rbln::detail {

namespace {

/// A chiplet of a device never used: statistics read it, nothing allocates.
class PlannedProvider final : public SegmentProvider {
public:
    explicit PlannedProvider(std::uint64_t capacity) : capacity_(capacity) {}
    std::optional<Segment> allocate(std::uint64_t /*size*/) override {
        throw Error(Errc::Internal, "allocate", "", 0,
                    "the planned allocator of a device never used makes no memory");
    }
    void release(const Segment& /*segment*/) noexcept override {}
    std::uint64_t capacity() const noexcept override { return capacity_; }

private:
    std::uint64_t capacity_;
};

/// The empty allocator the statistics of logical device @ld read before
/// its first use: the places the live one will have (every chiplet of its
/// first NPU, the node its streams run on), capacities from sysfs.
std::unique_ptr<DeviceAllocator> planned_allocator(const LogicalDevice& ld, const DeviceMapping& m,
                                                   const EnvSource& env) {
    std::vector<AllocatorPlace> places;
    if (!ld.physical_ids.empty() && ld.physical_ids.front() < m.cards.size()) {
        const CardInfo& card = m.cards[ld.physical_ids.front()];
        for (unsigned c = 0; c < card.chiplet_count; c++) {
            std::uint64_t capacity = 0;
            for (const ChipletInfo& ch : card.chiplets)
                if (ch.index == c)
                    capacity = ch.hbm_total_bytes;
            places.push_back(
                AllocatorPlace{ld.npus.front(), c, std::make_unique<PlannedProvider>(capacity)});
        }
    }
    return std::make_unique<DeviceAllocator>(ld.index, std::move(places),
                                             AllocatorConfig::from_environment(env));
}

} // namespace

// ---- DeviceContext ------------------------------------------------------------

DeviceContext::~DeviceContext() {
    c_host_blocks.clear();
    c_blocks.clear();
    host_.reset();
    // The device before its allocator: its streams wait for their jobs,
    // whose buffers free into the allocator.
    device_.reset();
    live_.store(nullptr);
    allocator_.reset();
    planned_.reset();
}

std::shared_ptr<Device> DeviceContext::device() {
    registry_.runtime().commit(); // the fork check; throws the planning errors
    const std::lock_guard<std::mutex> lock(registry_.mutex_);
    return registry_.device_locked(*this);
}

DeviceAllocator& DeviceContext::allocator() {
    if (DeviceAllocator* a = live_allocator())
        return *a;
    if (!registry_.options_.allocator) // (read once more under the mutex below)
        registry_.runtime().commit();
    const std::lock_guard<std::mutex> lock(registry_.mutex_);
    return registry_.allocator_locked(*this);
}

std::shared_ptr<DeviceAllocator> DeviceContext::allocator_ptr() {
    allocator();
    const std::lock_guard<std::mutex> lock(registry_.mutex_);
    return allocator_;
}

const DeviceAllocator& DeviceContext::allocator_for_query() {
    if (const DeviceAllocator* a = live_allocator())
        return *a;
    const std::lock_guard<std::mutex> lock(registry_.mutex_);
    if (allocator_)
        return *allocator_;
    if (registry_.options_.allocator) // a test's allocator stands for the device
        return registry_.allocator_locked(*this);
    if (!planned_) {
        Runtime& rt = registry_.runtime_locked();
        const DeviceMapping m = rt.mapping();
        if (index_ >= m.devices.size())
            throw Error(Errc::NoDevice, "memory statistics", device_string(index_), 0,
                        "no such logical device: " + std::to_string(m.devices.size()) +
                            " are available");
        planned_ = planned_allocator(m.devices[index_], m, rt.environment());
    }
    return *planned_;
}

HostAllocator& DeviceContext::host_allocator() {
    registry_.runtime().commit();
    const std::lock_guard<std::mutex> lock(registry_.mutex_);
    if (!host_)
        host_ = std::make_unique<HostAllocator>(registry_.device_locked(*this));
    return *host_;
}

// ---- ProcessContexts ----------------------------------------------------------

ProcessContexts& ProcessContexts::get() {
    // Never destroyed (see the file comment).
    alignas(ProcessContexts) static unsigned char storage[sizeof(ProcessContexts)];
    static ProcessContexts* registry =
        std::construct_at(reinterpret_cast<ProcessContexts*>(storage));
    return *registry;
}

ProcessContexts::ProcessContexts() = default;

Runtime& ProcessContexts::runtime_locked() {
    if (!runtime_)
        runtime_ = std::make_unique<Runtime>(options_.runtime);
    return *runtime_;
}

Runtime& ProcessContexts::runtime() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return runtime_locked();
}

std::filesystem::path ProcessContexts::root() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return options_.runtime.root;
}

std::shared_ptr<DeviceContext> ProcessContexts::context(unsigned index) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = map_.find(index); it != map_.end())
        return it->second;
    // A test's allocator factory decides which devices exist.
    if (!options_.allocator) {
        const unsigned count = static_cast<unsigned>(runtime_locked().mapping().devices.size());
        if (index >= count)
            throw Error(Errc::NoDevice, "device", device_string(index), 0,
                        "no such logical device: " + std::to_string(count) + " are available");
    }
    auto c = std::make_shared<DeviceContext>(*this, index);
    map_.emplace(index, c);
    return c;
}

std::vector<std::shared_ptr<DeviceContext>> ProcessContexts::contexts() {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<DeviceContext>> out;
    out.reserve(map_.size());
    for (const auto& [index, c] : map_)
        out.push_back(c);
    return out;
}

DeviceAllocator& ProcessContexts::allocator(unsigned index) {
    if (!options_.allocator) { // the common case: one lookup
        const std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = map_.find(index); it != map_.end())
            if (DeviceAllocator* a = it->second->live_allocator())
                return *a;
    }
    return context(index)->allocator();
}

std::shared_ptr<Device> ProcessContexts::device_locked(DeviceContext& c) {
    if (c.device_)
        return c.device_;
    Runtime& rt = runtime_locked();
    const DeviceMapping& m = rt.commit(); // done by the caller: returns the mapping
    if (c.index_ >= m.devices.size())
        throw Error(Errc::NoDevice, "device", device_string(c.index_), 0,
                    "no such logical device: " + std::to_string(m.devices.size()) +
                        " are available");
    const LogicalDevice& ld = m.devices[c.index_];
    if (ld.nodes.empty())
        throw Error(Errc::NoDevice, "device", device_string(c.index_), 0, "it has no NPU");
    DeviceOptions options = options_.device;
    const EnvSource env = rt.environment();
    if (const std::optional<bool> single = single_issuer_from_environment(env))
        options.submitter.single_issuer = *single;
    if (const std::optional<unsigned> idle = sqpoll_from_environment(env))
        options.submitter.sqpoll_idle_ms = *idle;
    if (options.submitter.single_issuer && options.submitter.sqpoll_idle_ms > 0)
        throw Error(Errc::BadConfig, "RBLN_URING_SQPOLL", device_string(c.index_), 0,
                    "an SQPOLL ring (RBLN_URING_SQPOLL=" +
                        std::to_string(options.submitter.sqpoll_idle_ms) +
                        ") and single-issuer mode (RBLN_SINGLE_ISSUER=1 or "
                        "DeviceOptions) exclude each other: unset one of them");
    auto opened =
        options_.opener ? options_.opener(ld.nodes.front()) : open_kernel_device(ld.nodes.front());
    std::shared_ptr<KernelInterface> kernel = std::move(opened).value();
    auto dev = Device::open(std::move(kernel), c.index_, std::move(options));
    DeviceState& st = dev->state();
    // After commit(): its atfork handler counts the generations from here.
    st.fork = ForkStamp::now();
    // Device::allocate() takes from this context's allocator.
    const std::weak_ptr<DeviceContext> weak = map_.at(c.index_);
    st.allocator_source = [weak]() -> std::shared_ptr<DeviceAllocator> {
        if (auto ctx = weak.lock())
            return ctx->allocator_ptr();
        throw Error(Errc::NoDevice, "allocate", "", 0,
                    "the device was dropped from the process (a test reset)");
    };
    c.device_ = std::move(dev);
    return c.device_;
}

DeviceAllocator& ProcessContexts::allocator_locked(DeviceContext& c) {
    if (c.allocator_)
        return *c.allocator_;
    std::unique_ptr<DeviceAllocator> made;
    if (options_.allocator) {
        made = options_.allocator(c.index_);
        if (!made)
            throw Error(Errc::NoDevice, "allocator", device_string(c.index_), 0,
                        "no allocator for this device");
    } else {
        const std::shared_ptr<Device> dev = device_locked(c);
        Runtime& rt = runtime_locked();
        const LogicalDevice& ld = rt.commit().devices.at(c.index_);
        const unsigned npu = ld.npus.empty() ? 0 : ld.npus.front();
        made = DeviceAllocator::for_kernels(c.index_, {{npu, dev->kernel_ptr()}},
                                            AllocatorConfig::from_environment(rt.environment()));
    }
    c.allocator_ = std::move(made);
    c.live_.store(c.allocator_.get(), std::memory_order_release);
    return *c.allocator_;
}

void ProcessContexts::reset(ProcessOptions options) {
    std::map<unsigned, std::shared_ptr<DeviceContext>> old;
    std::unique_ptr<Runtime> old_runtime;
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        old.swap(map_);
        options_ = std::move(options);
        old_runtime = std::exchange(runtime_, nullptr);
    }
    forget_commit_mode();
    old.clear(); // outside the mutex: a context's end may free into nothing of ours
}

} // namespace rbln::detail

namespace rbln {

DeviceAllocator& process_allocator(unsigned index) {
    return detail::ProcessContexts::get().allocator(index);
}

const DeviceAllocator& process_allocator_stats(unsigned index) {
    return detail::ProcessContexts::get().context(index)->allocator_for_query();
}

void reset_process_for_tests(ProcessOptions options) {
    detail::ProcessContexts::get().reset(std::move(options));
}

} // namespace rbln
