// SPDX-License-Identifier: GPL-2.0
// rbln/memory.hpp - memory the card can address: device memory (HBM) and
// pinned host memory, as the streams and copies of librbln use it.
//
// Memory is the interface; owners hold it by std::shared_ptr, and so do the
// jobs that use it, so memory stays valid while the card may still touch
// it.  librbln's implementations (internal) are a whole kernel buffer (one
// GEM object) and a block of the caching allocator (a range of a larger
// buffer: handle() is the buffer's, device_va() and host_data() point at
// the block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace rbln {
class KernelInterface; // librbln's own (umd/src), hidden (rbln/export.h)
} // namespace rbln

#pragma GCC visibility push(default) // exported (rbln/export.h)

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

} // namespace rbln

#pragma GCC visibility pop
