// SPDX-License-Identifier: GPL-2.0
// device_state.hpp - the state behind Device, Stream and Event (private to
// librbln: device.cpp, stream.cpp, copy.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "kernel/kernel.hpp"
#include "rbln/allocator.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/memory.hpp"
#include "rbln/stream.hpp"
#include "runtime/fork_state.hpp"

namespace rbln::detail {

namespace graph {
class Runtime;
} // namespace graph

/// A syncobj of one open file, destroyed with its last owner.
struct Syncobj {
    Syncobj(std::shared_ptr<KernelInterface> k, std::uint32_t h)
        : kernel(std::move(k)), handle(h) {}
    Syncobj(const Syncobj&) = delete;
    Syncobj& operator=(const Syncobj&) = delete;
    Syncobj(Syncobj&&) = delete;
    Syncobj& operator=(Syncobj&&) = delete;
    ~Syncobj();
    std::shared_ptr<KernelInterface> kernel;
    std::uint32_t handle;
};

/// 8 bytes of pinned host memory a TIMESTAMP packet writes.
struct TimestampSlot {
    std::shared_ptr<Memory> page;
    std::uint32_t offset = 0;
    std::function<void(TimestampSlot&)> release;
    TimestampSlot() = default;
    TimestampSlot(const TimestampSlot&) = delete;
    TimestampSlot& operator=(const TimestampSlot&) = delete;
    TimestampSlot(TimestampSlot&&) = delete;
    TimestampSlot& operator=(TimestampSlot&&) = delete;
    ~TimestampSlot();
    std::uint64_t va() const { return page->device_va() + offset; }
    std::uint64_t read() const;
    void clear() const;
};

struct TimestampPool {
    std::mutex mutex;
    std::vector<std::shared_ptr<Memory>> pages;
    std::vector<std::pair<std::size_t, std::uint32_t>> free; // (page, offset)
};

struct StreamState {
    StreamState(Device& device, StreamPriority priority);
    StreamState(const StreamState&) = delete;
    StreamState& operator=(const StreamState&) = delete;
    StreamState(StreamState&&) = delete;
    StreamState& operator=(StreamState&&) = delete;
    /// Waits for the stream's work, then destroys its queue.
    ~StreamState();

    /// One job (stream mutex held).
    std::uint64_t enqueue_locked(std::size_t max_bytes,
                                 const std::function<void(CommandEncoder&)>& encode,
                                 std::span<const std::shared_ptr<Memory>> buffers,
                                 std::optional<SyncPoint> out = {},
                                 std::shared_ptr<const void> extra_keep = {});
    /// Blocks until job @n is done (no failure check).
    void wait_job(std::uint64_t n);
    /// Synchronize: wait, then throw the stream's first failure.
    void synchronize();
    /// The stream's timeline syncobj (made at first use; mutex held).
    const std::shared_ptr<Syncobj>& timeline_locked();

    Device& device;
    std::uint32_t queue_id = 0;
    std::mutex mutex;
    std::uint64_t last_job = 0;
    std::vector<SyncPoint> pending_waits; ///< in-fences of the next job
    std::vector<std::shared_ptr<const void>> pending_keep;
    std::vector<std::shared_ptr<Memory>> chunks; ///< command buffers
    std::vector<std::uint64_t> chunk_last_job;   ///< the last job using each chunk
    std::size_t current_chunk = 0;
    std::size_t chunk_used = 0;
    std::shared_ptr<Syncobj> timeline;
};

struct EventState {
    explicit EventState(bool t) : timing(t) {}
    bool timing;
    mutable std::mutex mutex;
    std::shared_ptr<Device> device; // of the mark (null: never recorded)
    std::weak_ptr<StreamState> stream;
    std::uint32_t queue_id = 0;
    std::uint64_t job = 0;
    std::shared_ptr<Syncobj> timeline;
    std::uint64_t point = 0;
    std::shared_ptr<TimestampSlot> slot;
};

struct DeviceState {
    std::shared_ptr<KernelInterface> kernel;
    unsigned index = 0;
    DeviceOptions options;
    unsigned chiplets = 1;
    ForkStamp fork; ///< armed by the process registry (Device::get()): a child is refused
    std::unique_ptr<Submitter> submitter;

    mutable std::mutex mutex;
    std::shared_ptr<StreamState> default_stream;
    std::vector<std::weak_ptr<StreamState>> streams;
    std::map<std::uintptr_t, std::weak_ptr<Memory>> pinned; ///< by host address
    std::vector<std::pair<std::weak_ptr<StreamState>, std::uint64_t>> pending_async;
    CopyStats stats;

    std::mutex staging_mutex; ///< one sync copy at a time uses the staging buffer
    std::shared_ptr<Memory> staging;

    std::shared_ptr<TimestampPool> timestamps = std::make_shared<TimestampPool>();

    /// The caching allocator of allocate() (guarded by mutex): the process
    /// registry's for Device::get()'s devices (through allocator_source),
    /// else one over the device's node, made at first use.
    std::shared_ptr<DeviceAllocator> allocator;
    std::function<std::shared_ptr<DeviceAllocator>()> allocator_source;

    /// The graph runtime (graph/runtime.hpp), made at first use (guarded by
    /// mutex); declared last, so it goes first, while the kernel is open.
    std::shared_ptr<graph::Runtime> graph_runtime;

    /// A free timestamp slot (pinned host memory of this device).
    std::shared_ptr<TimestampSlot> timestamp_slot();
    /// Waits for every pending async transfer; true if there was one.
    bool drain_async();
    /// Notes an async transfer (job @n of @stream).
    void add_async(const std::shared_ptr<StreamState>& stream, std::uint64_t n);
    /// Throws Errc::BadFork in a forked child (devices of Device::get()):
    /// one atomic load (fork_state.hpp), no system call.
    void check_fork() const { fork.check(); }
};

} // namespace rbln::detail
