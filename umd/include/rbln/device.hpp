// SPDX-License-Identifier: GPL-2.0
// rbln/device.hpp - an open logical device: its node, its job submission,
// its streams, memory and copies.
//
// Device::get(n) opens logical device n of the process (committing the
// device mapping, rbln/devices.hpp) once and keeps it for the life of the
// process, in the process's one context of that logical device with its
// caching allocator and host allocator; Device::open() wraps any
// KernelInterface (librbln's internal kernel boundary: tests).  A
// logical device of several ATOM NPUs runs its streams on the first NPU of
// the group for now (work across the group arrives with graph execution).
//
// synchronize() waits for the device's pending asynchronous transfers and
// for every stream of the device, then reports the first job failure.
//
// Single issuer (opt-in: DeviceOptions::submitter.single_issuer, or
// RBLN_SINGLE_ISSUER=1 for the devices of Device::get()): the device's
// ring is a SINGLE_ISSUER | DEFER_TASKRUN io_uring, and only the thread
// that opened the device may use it: enqueue work on its streams, query,
// synchronize, copy, record events and destroy its streams.  Another
// thread gets Errc::InvalidArgument naming the owning thread
// (rbln/submitter_options.hpp).  Memory may be allocated and freed from any
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rbln/allocator.hpp"
#include "rbln/copy.hpp"
#include "rbln/devices.hpp"
#include "rbln/export.h"
#include "rbln/memory.hpp"
#include "rbln/stream.hpp"
#include "rbln/submitter_options.hpp"

// librbln's own (umd/src), hidden from librbln.so (rbln/export.h).
namespace rbln {
class KernelInterface;
class Submitter;
namespace detail {
struct DeviceState;
} // namespace detail
} // namespace rbln

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

struct DeviceOptions {
    SubmitterOptions submitter;
    std::size_t command_chunk_bytes = 64 * 1024; ///< command buffer BOs of the streams
    std::size_t staging_bytes = 4u << 20;        ///< pinned bounce buffer of sync copies
    std::uint32_t chiplet_mask = 0;              ///< queues' chiplets; 0: all
};

class Device : public std::enable_shared_from_this<Device> {
    struct Key {
        explicit Key() = default;
    };

public:
    /// A device over @kernel (tests: the kernel interface is internal).
    RBLN_LOCAL static std::shared_ptr<Device> open(std::shared_ptr<KernelInterface> kernel,
                                                   unsigned index = 0, DeviceOptions options = {});
    /// Logical device @index of the process (Runtime::process()); commits
    /// the mapping, checks for a forked child.
    static std::shared_ptr<Device> get(unsigned index);
    /// The calling thread's current device (Runtime::current_device()).
    static std::shared_ptr<Device> current();

    RBLN_LOCAL Device(Key key, std::shared_ptr<KernelInterface> kernel, unsigned index,
                      DeviceOptions options);
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
    Device(Device&&) = delete;
    Device& operator=(Device&&) = delete;
    ~Device();

    unsigned index() const noexcept;
    /// The node (librbln's kernel interface) and its submitter: internal.
    RBLN_LOCAL KernelInterface& kernel() const noexcept;
    RBLN_LOCAL const std::shared_ptr<KernelInterface>& kernel_ptr() const noexcept;
    RBLN_LOCAL Submitter& submitter() noexcept;
    /// The node's path ("/dev/accel/accel0"), for messages.
    const std::string& node_path() const noexcept;
    const DeviceOptions& options() const noexcept;
    unsigned chiplet_count() const noexcept;

    /// The default stream (made at first use).
    Stream default_stream();
    /// Waits for pending async transfers and every stream; throws the
    /// first failure.
    void synchronize();
    /// Hands every enqueued job to the kernel.
    void flush();

    /// The caching allocator of the device's memory (rbln/allocator.hpp):
    /// for a device of get(), the process allocator of the logical device
    /// (process_allocator()); for one of open(), an allocator over its own
    /// node (every chiplet, default configuration), made at first use.
    DeviceAllocator& allocator();
    std::shared_ptr<DeviceAllocator> allocator_ptr();
    /// A block of HBM from allocator() on @chiplet (nullopt: the
    /// allocator's default place), so it shows in memory_stats(); freed to
    /// the cache when the last user (a job keeps it too) drops it.
    /// Errc::OutOfMemory, Errc::BadFork in a forked child.
    std::shared_ptr<Memory> allocate(std::uint64_t size, std::optional<unsigned> chiplet = {});
    /// Pinned host memory (a host GEM buffer, mapped).
    std::shared_ptr<Memory> allocate_host(std::uint64_t size);
    /// Pins user memory (page-aligned address and size) for this device.
    std::shared_ptr<Memory> register_host(void* data, std::uint64_t size);
    /// The live pinned memory of this device holding [@data, @data + @size), if any.
    std::shared_ptr<Memory> find_pinned(const void* data, std::uint64_t size) const;

    CopyStats copy_stats() const;

    detail::DeviceState& state() noexcept { return *s_; }
    const detail::DeviceState& state() const noexcept { return *s_; }

private:
    std::unique_ptr<detail::DeviceState> s_;
};

/// The live Device that owns @memory (found by its open file), or nullptr.
std::shared_ptr<Device> device_of(const Memory& memory);

/// RBLN_SINGLE_ISSUER from @env (empty: the process environment): "1"
/// true, "0" false, unset or empty nullopt; anything else Errc::BadConfig.
/// Device::get() applies it to the devices it opens (over DeviceOptions).
std::optional<bool> single_issuer_from_environment(const EnvSource& env = {});

/// RBLN_URING_SQPOLL from @env (empty: the process environment): a number
/// of milliseconds 0..kMaxSqpollIdleMs (0: off; N: an SQPOLL ring whose
/// kernel thread polls N ms after the last submission, see
/// rbln/submitter_options.hpp), unset or empty nullopt; anything else
/// Errc::BadConfig.  Device::get() applies it to the devices it opens; with
/// single-issuer mode as well it throws Errc::BadConfig.
std::optional<unsigned> sqpoll_from_environment(const EnvSource& env = {});

} // namespace rbln

#pragma GCC visibility pop
