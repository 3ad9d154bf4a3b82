// SPDX-License-Identifier: GPL-2.0
// memory.cpp - plain kernel buffers as librbln Memory (rbln/memory.hpp).

#include "rbln/memory.hpp"
#include "kernel/kernel.hpp"
#include "memory/bo_memory.hpp"

#include <cstdint>
#include <string>

namespace rbln {

BoMemory::BoMemory(Key /*key*/, std::shared_ptr<KernelInterface> kernel, MemoryKind kind,
                   BoHandle bo, std::byte* host, std::size_t mapped)
    : kernel_(std::move(kernel)), kind_(kind), bo_(bo), host_(host), mapped_(mapped) {}

BoMemory::~BoMemory() {
    try {
        if (mapped_ != 0)
            kernel_->munmap(host_, mapped_);
        kernel_->gem_close(bo_.handle);
    } catch (
        ...) { // NOLINT(bugprone-empty-catch): a destructor cannot report; the fd keeps nothing
    }
}

std::shared_ptr<BoMemory> BoMemory::create_device(std::shared_ptr<KernelInterface> kernel,
                                                  std::uint64_t size,
                                                  std::optional<unsigned> chiplet) {
    BoCreateArgs a;
    a.size = size;
    a.region = chiplet ? Region::Hbm : Region::Auto;
    a.chiplet = chiplet.value_or(0);
    const BoHandle bo = kernel->bo_create(a);
    return std::make_shared<BoMemory>(Key{}, std::move(kernel), MemoryKind::Device, bo, nullptr, 0);
}

std::shared_ptr<BoMemory> BoMemory::create_host(std::shared_ptr<KernelInterface> kernel,
                                                std::uint64_t size) {
    BoCreateArgs a;
    a.size = size;
    a.region = Region::Host;
    const BoHandle bo = kernel->bo_create(a);
    void* p = nullptr;
    try {
        const BoDescription d = kernel->bo_info(bo.handle);
        p = kernel->mmap(d.mmap_offset, bo.size);
    } catch (...) {
        try {
            kernel->gem_close(bo.handle);
        } catch (...) { // NOLINT(bugprone-empty-catch): the first error is the one to report
        }
        throw;
    }
    return std::make_shared<BoMemory>(Key{}, std::move(kernel), MemoryKind::HostPinned, bo,
                                      static_cast<std::byte*>(p), bo.size);
}

std::shared_ptr<BoMemory> BoMemory::register_host(std::shared_ptr<KernelInterface> kernel,
                                                  void* data, std::uint64_t size) {
    const BoHandle bo = kernel->bo_userptr(data, size, UserptrFlags::None);
    return std::make_shared<BoMemory>(Key{}, std::move(kernel), MemoryKind::HostRegistered, bo,
                                      static_cast<std::byte*>(data), 0);
}

} // namespace rbln
