// SPDX-License-Identifier: GPL-2.0
// buffers.cpp - RAII owners of buffers and queues (see buffers.hpp).

#include "buffers.hpp"

#include "drm/rbln_accel.h"

namespace rbln::demo {

DeviceBuffer::DeviceBuffer(KernelInterface& kernel, std::uint64_t size, std::uint32_t region,
                           std::uint32_t chiplet, std::uint32_t flags, bool map)
    : kernel_(kernel) {
    BoCreateArgs args;
    args.size = size;
    // RBLN_REGION_* / RBLN_BO_* values: librbln's enums carry the uAPI's.
    args.region = static_cast<Region>(region);
    args.chiplet = chiplet;
    args.flags = static_cast<BoFlags>(flags);
    bo_ = kernel_.bo_create(args);
    if (!map)
        return;
    try {
        const BoDescription d = kernel_.bo_info(bo_.handle);
        void* p = kernel_.mmap(d.mmap_offset, bo_.size);
        cpu_ = {static_cast<std::byte*>(p), bo_.size};
    } catch (...) {
        try {
            kernel_.gem_close(bo_.handle);
        } catch (const Error&) { // the first error matters
        }
        throw;
    }
}

DeviceBuffer::~DeviceBuffer() {
    try {
        if (!cpu_.empty())
            kernel_.munmap(cpu_.data(), cpu_.size());
    } catch (const Error&) { // closing the file frees it too
    }
    try {
        kernel_.gem_close(bo_.handle);
    } catch (const Error&) { // closing the file frees it too
    }
}

DeviceQueue::DeviceQueue(KernelInterface& kernel, std::uint32_t chiplet_mask)
    : kernel_(kernel), id_(kernel.queue_create(chiplet_mask, QueuePriority::Normal)) {}

DeviceQueue::~DeviceQueue() {
    try {
        kernel_.queue_destroy(id_);
    } catch (const Error&) { // closing the file frees it too
    }
}

} // namespace rbln::demo
