// SPDX-License-Identifier: GPL-2.0
// c_api_host.cpp - rbln_host.h over rbln::HostAllocator and
// rbln::huge_host_empty().  Every entry point catches everything: no
// exception crosses into C.

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "capi/c_guard.hpp"
#include "rbln/device.hpp"
#include "rbln/host_allocator.hpp"
#include "rbln/rbln_host.h"
#include "runtime/process_context.hpp"

struct rbln_huge_host {
    rbln::HugeHostBuffer buffer;
};

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

// The blocks handed out through rbln_host_alloc() live in their device's
// context (process_context.hpp); rbln_host_free() finds the one that has it.
rbln::HostBlock take_block(const void* ptr) {
    for (const auto& ctx : rbln::detail::ProcessContexts::get().contexts()) {
        const std::lock_guard<std::mutex> lock(ctx->c_mutex);
        auto node = ctx->c_host_blocks.extract(ptr);
        if (!node.empty())
            return std::move(node.mapped());
    }
    return {};
}

} // namespace

extern "C" {

rbln_status rbln_host_alloc(int device, size_t size, void** ptr) {
    if (ptr == nullptr)
        return invalid("ptr is NULL");
    if (device < 0)
        return invalid("device " + std::to_string(device) + " is negative");
    if (size == 0)
        return invalid("a block of 0 bytes was asked for");
    return guard([&] {
        const auto ctx =
            rbln::detail::ProcessContexts::get().context(static_cast<unsigned>(device));
        rbln::HostBlock b = ctx->host_allocator().allocate(size);
        void* p = b.data();
        const std::lock_guard<std::mutex> lock(ctx->c_mutex);
        ctx->c_host_blocks.emplace(p, std::move(b));
        *ptr = p;
        return RBLN_OK;
    });
}

rbln_status rbln_host_free(void* ptr) {
    if (ptr == nullptr)
        return RBLN_OK;
    return guard([&] {
        rbln::HostBlock b = take_block(ptr);
        if (!b)
            return invalid("the pointer was not returned by rbln_host_alloc() (or was freed)");
        b.reset();
        return RBLN_OK;
    });
}

rbln_status rbln_host_block_size(const void* ptr, size_t* size) {
    if (ptr == nullptr || size == nullptr)
        return invalid(ptr == nullptr ? "ptr is NULL" : "size is NULL");
    return guard([&] {
        for (const auto& ctx : rbln::detail::ProcessContexts::get().contexts()) {
            const std::lock_guard<std::mutex> lock(ctx->c_mutex);
            const auto it = ctx->c_host_blocks.find(ptr);
            if (it != ctx->c_host_blocks.end()) {
                *size = it->second.size();
                return RBLN_OK;
            }
        }
        return invalid("the pointer was not returned by rbln_host_alloc() (or was freed)");
    });
}

rbln_status rbln_host_empty_cache(int device) {
    if (device < 0)
        return invalid("device " + std::to_string(device) + " is negative");
    return guard([&] {
        rbln::process_host_allocator(static_cast<unsigned>(device)).empty_cache();
        return RBLN_OK;
    });
}

rbln_status rbln_host_memory_stat(int device, const char* key, int64_t* value) {
    if (key == nullptr || value == nullptr)
        return invalid(key == nullptr ? "key is NULL" : "value is NULL");
    if (device < 0)
        return invalid("device " + std::to_string(device) + " is negative");
    return guard([&] {
        const auto m = rbln::process_host_allocator(static_cast<unsigned>(device)).memory_stats();
        const auto it = m.find(key);
        if (it == m.end())
            return invalid(std::string("no host memory statistic is called '") + key + "'");
        *value = it->second;
        return RBLN_OK;
    });
}

rbln_status rbln_huge_host_empty(int device, uint64_t nbytes, rbln_huge_host** buffer,
                                 void** data) {
    if (buffer == nullptr)
        return invalid("buffer is NULL");
    if (device < 0)
        return invalid("device " + std::to_string(device) + " is negative");
    return guard([&] {
        auto b = std::make_unique<rbln_huge_host>();
        b->buffer = rbln::huge_host_empty(rbln::Device::get(static_cast<unsigned>(device)), nbytes);
        if (data != nullptr)
            *data = b->buffer.data();
        *buffer = b.release();
        return RBLN_OK;
    });
}

rbln_status rbln_huge_host_free(rbln_huge_host* buffer) {
    return guard([&] {
        const std::unique_ptr<rbln_huge_host> owned(buffer);
        return RBLN_OK;
    });
}

rbln_status rbln_huge_host_get_info(const rbln_huge_host* buffer,
                                    struct rbln_huge_host_info* info) {
    if (buffer == nullptr || info == nullptr)
        return invalid(buffer == nullptr ? "buffer is NULL" : "info is NULL");
    if (info->struct_size < sizeof(std::uint32_t))
        return invalid("info->struct_size is too small");
    return guard([&] {
        rbln_huge_host_info out{};
        out.struct_size = info->struct_size;
        out.backing = static_cast<std::uint32_t>(buffer->buffer.backing());
        out.size = buffer->buffer.size();
        out.huge_bytes = buffer->buffer.huge_bytes();
        out.data = buffer->buffer.data();
        out.numa_placed = buffer->buffer.numa_placed() ? 1 : 0;
        std::memcpy(info, &out, std::min<std::size_t>(info->struct_size, sizeof(out)));
        return RBLN_OK;
    });
}

} // extern "C"
