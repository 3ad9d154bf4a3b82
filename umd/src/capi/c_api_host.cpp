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

#include "rbln/device.hpp"
#include "rbln/host_allocator.hpp"
#include "rbln/rbln_host.h"

struct rbln_huge_host {
    rbln::HugeHostBuffer buffer;
};

namespace {

thread_local std::string g_host_error;

// The blocks handed out through rbln_host_alloc(), by address.
std::mutex g_blocks_mutex;
std::map<const void*, rbln::HostBlock>& blocks() {
    // Never destroyed: a block freed at exit must not touch a dead map.
    alignas(std::map<const void*, rbln::HostBlock>) static unsigned char
        storage[sizeof(std::map<const void*, rbln::HostBlock>)];
    static auto* m =
        std::construct_at(reinterpret_cast<std::map<const void*, rbln::HostBlock>*>(storage));
    return *m;
}

template <typename F> rbln_status guard(F&& f) {
    try {
        g_host_error.clear();
        return f();
    } catch (const rbln::Error& e) {
        g_host_error = e.what();
        return static_cast<rbln_status>(e.code());
    } catch (const std::bad_alloc&) {
        g_host_error = "librbln: host memory exhausted";
        return RBLN_ERR_INTERNAL;
    } catch (const std::exception& e) {
        g_host_error = std::string("librbln: internal error: ") + e.what();
        return RBLN_ERR_INTERNAL;
    } catch (...) {
        g_host_error = "librbln: internal error";
        return RBLN_ERR_INTERNAL;
    }
}

rbln_status invalid(const std::string& message) {
    g_host_error = message;
    return RBLN_ERR_INVALID_ARGUMENT;
}

} // namespace

extern "C" {

const char* rbln_host_last_error_message(void) {
    return g_host_error.c_str();
}

rbln_status rbln_host_alloc(int device, size_t size, void** ptr) {
    if (ptr == nullptr)
        return invalid("ptr is NULL");
    if (device < 0)
        return invalid("device " + std::to_string(device) + " is negative");
    if (size == 0)
        return invalid("a block of 0 bytes was asked for");
    return guard([&] {
        rbln::HostBlock b =
            rbln::process_host_allocator(static_cast<unsigned>(device)).allocate(size);
        void* p = b.data();
        const std::lock_guard<std::mutex> lock(g_blocks_mutex);
        blocks().emplace(p, std::move(b));
        *ptr = p;
        return RBLN_OK;
    });
}

rbln_status rbln_host_free(void* ptr) {
    if (ptr == nullptr)
        return RBLN_OK;
    return guard([&] {
        rbln::HostBlock b;
        {
            const std::lock_guard<std::mutex> lock(g_blocks_mutex);
            auto node = blocks().extract(ptr);
            if (node.empty())
                return invalid("the pointer was not returned by rbln_host_alloc() (or was freed)");
            b = std::move(node.mapped());
        }
        b.reset();
        return RBLN_OK;
    });
}

rbln_status rbln_host_block_size(const void* ptr, size_t* size) {
    if (ptr == nullptr || size == nullptr)
        return invalid(ptr == nullptr ? "ptr is NULL" : "size is NULL");
    return guard([&] {
        const std::lock_guard<std::mutex> lock(g_blocks_mutex);
        const auto it = blocks().find(ptr);
        if (it == blocks().end())
            return invalid("the pointer was not returned by rbln_host_alloc() (or was freed)");
        *size = it->second.size();
        return RBLN_OK;
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
