// SPDX-License-Identifier: GPL-2.0
// sub_memory.hpp - (internal) a range of another Memory as Memory: the
// output storages of a graph replay, carved from the replay's one block
// (graph/graph.cpp).  Holds the parent, so the block lives while any part
// of it does.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "rbln/memory.hpp"

namespace rbln::detail {

class SubMemory final : public Memory {
public:
    SubMemory(std::shared_ptr<Memory> parent, std::uint64_t offset, std::uint64_t size)
        : parent_(std::move(parent)), offset_(offset), size_(size) {}

    MemoryKind kind() const noexcept override { return parent_->kind(); }
    const KernelInterface& kernel() const noexcept override { return parent_->kernel(); }
    std::uint32_t handle() const noexcept override { return parent_->handle(); }
    std::uint64_t device_va() const noexcept override { return parent_->device_va() + offset_; }
    std::uint64_t size() const noexcept override { return size_; }
    std::byte* host_data() const noexcept override {
        return parent_->host_data() != nullptr ? parent_->host_data() + offset_ : nullptr;
    }
    unsigned chiplet() const noexcept override { return parent_->chiplet(); }
    const std::shared_ptr<Memory>& parent() const noexcept { return parent_; }

private:
    std::shared_ptr<Memory> parent_;
    std::uint64_t offset_;
    std::uint64_t size_;
};

} // namespace rbln::detail
