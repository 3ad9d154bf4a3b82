// SPDX-License-Identifier: GPL-2.0
// block_memory.hpp - a block of the caching allocator as librbln Memory
// (private to librbln: storage.cpp, device.cpp).
#pragma once

#include <memory>
#include <utility>

#include "rbln/allocator.hpp"
#include "rbln/memory.hpp"

namespace rbln::detail {

/// Device memory the copies and jobs can use, carved from a segment of a
/// DeviceAllocator: a job lists the segment's handle and addresses the
/// block's device VA.  Holds the block (freed to the cache when the last
/// user goes) and, if given, whatever keeps its allocator alive.
class BlockMemory final : public Memory {
public:
    BlockMemory(std::shared_ptr<KernelInterface> kernel, DeviceBlock block, std::uint64_t size,
                unsigned chiplet, std::shared_ptr<const void> keep_allocator = {})
        : keep_(std::move(keep_allocator)), kernel_(std::move(kernel)), block_(std::move(block)),
          size_(size), chiplet_(chiplet) {}

    MemoryKind kind() const noexcept override { return MemoryKind::Device; }
    const KernelInterface& kernel() const noexcept override { return *kernel_; }
    std::uint32_t handle() const noexcept override { return block_ ? block_.handle() : 0; }
    std::uint64_t device_va() const noexcept override { return block_ ? block_.device_va() : 0; }
    std::uint64_t size() const noexcept override { return size_; }
    std::byte* host_data() const noexcept override { return nullptr; }
    unsigned chiplet() const noexcept override { return chiplet_; }
    const DeviceBlock& block() const noexcept { return block_; }

private:
    std::shared_ptr<const void> keep_; ///< destroyed after block_ (declared before it)
    std::shared_ptr<KernelInterface> kernel_;
    DeviceBlock block_;
    std::uint64_t size_;
    unsigned chiplet_;
};

} // namespace rbln::detail
