// SPDX-License-Identifier: GPL-2.0
// rbln/memory.hpp - memory the card can address: device memory (HBM) and
// pinned host memory, as the streams and copies of librbln use it.
//
// Memory is the interface; owners hold it by std::shared_ptr, and so do the
// jobs that use it (rbln/submitter.hpp), so memory stays valid while the
// card may still touch it.  BoMemory is the plain kernel buffer behind it
// for now (one GEM object per Memory).  The caching allocator (issue 6)
// slots in as another implementation: a block is a range of a larger BO
// (handle() is the BO's, device_va() and host_data() point at the block),
// and lazy storage reports resident() == false until make_resident().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "rbln/kernel.hpp"

namespace rbln {

enum class MemoryKind {
    Device,         ///< HBM of a chiplet
    HostPinned,     ///< a host GEM buffer (RBLN_REGION_HOST), mapped for the CPU
    HostRegistered, ///< user memory pinned with RBLN_BO_USERPTR
};

class Memory {
public:
    Memory() = default;
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;
    Memory(Memory&&) = delete;
    Memory& operator=(Memory&&) = delete;
    virtual ~Memory() = default;

    virtual MemoryKind kind() const noexcept = 0;
    /// The open file (node) the memory belongs to.
    virtual const KernelInterface& kernel() const noexcept = 0;
    /// GEM handle of the buffer that holds it (listed in the jobs using it).
    virtual std::uint32_t handle() const noexcept = 0;
    /// Device VA of byte 0 in the owner's address space.
    virtual std::uint64_t device_va() const noexcept = 0;
    virtual std::uint64_t size() const noexcept = 0;
    /// CPU address of byte 0 for host kinds; nullptr for device memory.
    virtual std::byte* host_data() const noexcept = 0;
    /// Chiplet of device memory (0 for host kinds).
    virtual unsigned chiplet() const noexcept { return 0; }
    /// Whether the memory has its device storage now (lazy storage: not
    /// before first use).  A copy is asynchronous only into resident memory.
    virtual bool resident() const noexcept { return true; }
    /// Gives it device storage (no-op if resident).
    virtual void make_resident() {}

    bool is_host() const noexcept { return kind() != MemoryKind::Device; }
};

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
