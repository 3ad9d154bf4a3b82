// SPDX-License-Identifier: GPL-2.0
// bo_memory.hpp - (internal) BoMemory: rbln/memory.hpp's Memory over a
// whole kernel buffer (BO_CREATE or BO_USERPTR), closed with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "kernel/kernel.hpp"
#include "rbln/memory.hpp"

namespace rbln {

/// A whole kernel buffer (BO_CREATE or BO_USERPTR); closes it at the end.
class BoMemory final : public Memory {
    struct Key {
        explicit Key() = default;
    };

public:
    /// HBM of @chiplet (nullopt: the kernel picks, RBLN_REGION_AUTO).
    static std::shared_ptr<BoMemory> create_device(std::shared_ptr<KernelInterface> kernel,
                                                   std::uint64_t size,
                                                   std::optional<unsigned> chiplet = {});
    /// A host GEM buffer, mapped for the CPU (pinned as far as the card is
    /// concerned: it DMAs to it directly).
    static std::shared_ptr<BoMemory> create_host(std::shared_ptr<KernelInterface> kernel,
                                                 std::uint64_t size);
    /// Pins the user memory [@data, @data + @size) (page-aligned) for the card.
    /// The caller keeps the memory valid while the BoMemory lives.
    static std::shared_ptr<BoMemory> register_host(std::shared_ptr<KernelInterface> kernel,
                                                   void* data, std::uint64_t size);

    BoMemory(Key key, std::shared_ptr<KernelInterface> kernel, MemoryKind kind, BoHandle bo,
             std::byte* host, std::size_t mapped);
    BoMemory(const BoMemory&) = delete;
    BoMemory& operator=(const BoMemory&) = delete;
    BoMemory(BoMemory&&) = delete;
    BoMemory& operator=(BoMemory&&) = delete;
    ~BoMemory() override;

    MemoryKind kind() const noexcept override { return kind_; }
    const KernelInterface& kernel() const noexcept override { return *kernel_; }
    std::uint32_t handle() const noexcept override { return bo_.handle; }
    std::uint64_t device_va() const noexcept override { return bo_.device_va; }
    std::uint64_t size() const noexcept override { return bo_.size; }
    std::byte* host_data() const noexcept override { return host_; }
    unsigned chiplet() const noexcept override { return bo_.chiplet; }

private:
    std::shared_ptr<KernelInterface> kernel_;
    MemoryKind kind_;
    BoHandle bo_;
    std::byte* host_;
    std::size_t mapped_; ///< bytes mmap()ed at host_ (0: not ours to unmap)
};

} // namespace rbln
