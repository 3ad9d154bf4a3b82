// SPDX-License-Identifier: GPL-2.0
// buffers.hpp - owners of the kernel objects the demo makes through
// librbln's KernelInterface: a GEM buffer (host RAM or HBM) with its
// optional CPU mapping, and a queue.  Both free what they hold in their
// destructors (errors there are ignored: the file's close frees it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rbln/kernel.hpp"

namespace rbln::demo {

class DeviceBuffer {
public:
    /// BO_CREATE of @size bytes in @region (RBLN_REGION_*) on @chiplet; with
    /// @map, BO_INFO and mmap() give the CPU a view of it.  Throws rbln::Error.
    DeviceBuffer(KernelInterface& kernel, std::uint64_t size, std::uint32_t region,
                 std::uint32_t chiplet, std::uint32_t flags, bool map);
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&&) = delete;
    DeviceBuffer& operator=(DeviceBuffer&&) = delete;
    ~DeviceBuffer();

    std::uint32_t handle() const noexcept { return bo_.handle; }
    std::uint64_t va() const noexcept { return bo_.device_va; }
    std::uint64_t size() const noexcept { return bo_.size; }
    std::uint32_t chiplet() const noexcept { return bo_.chiplet; }
    /// The CPU view (empty unless mapped).
    std::span<std::byte> cpu() const noexcept { return cpu_; }

private:
    KernelInterface& kernel_;
    BoHandle bo_;
    std::span<std::byte> cpu_;
};

class DeviceQueue {
public:
    /// QUEUE_CREATE on the chiplets of @chiplet_mask, normal priority.
    DeviceQueue(KernelInterface& kernel, std::uint32_t chiplet_mask);
    DeviceQueue(const DeviceQueue&) = delete;
    DeviceQueue& operator=(const DeviceQueue&) = delete;
    DeviceQueue(DeviceQueue&&) = delete;
    DeviceQueue& operator=(DeviceQueue&&) = delete;
    ~DeviceQueue();

    std::uint32_t id() const noexcept { return id_; }

private:
    KernelInterface& kernel_;
    std::uint32_t id_;
};

} // namespace rbln::demo
