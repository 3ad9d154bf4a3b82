// SPDX-License-Identifier: GPL-2.0
// c_api_alloc.cpp - rbln_alloc.h over rbln::DeviceAllocator, and the
// process-wide allocators behind it.  Every entry point catches
// everything: no exception crosses into C.

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/rbln_alloc.h"

namespace rbln {

namespace {

struct ProcessAllocator {
    std::unique_ptr<DeviceAllocator> allocator;
    std::mutex blocks_mutex;
    std::unordered_map<std::uint64_t, DeviceBlock> blocks; ///< rbln_caching_alloc()'s, by device VA
};

// Never destroyed (see process_allocator()).
struct Registry {
    std::mutex mutex;
    std::map<unsigned, std::unique_ptr<ProcessAllocator>> devices;
    AllocatorFactory factory;
};

Registry& registry() {
    alignas(Registry) static unsigned char storage[sizeof(Registry)];
    static Registry* r = std::construct_at(reinterpret_cast<Registry*>(storage));
    return *r;
}

std::unique_ptr<DeviceAllocator> default_factory(unsigned index) {
    const std::shared_ptr<Device> dev = Device::get(index);
    const LogicalDevice ld = Runtime::process().device(index);
    const unsigned npu = ld.npus.empty() ? 0 : ld.npus.front();
    return DeviceAllocator::for_kernels(index, {{npu, dev->kernel_ptr()}},
                                        AllocatorConfig::from_environment());
}

ProcessAllocator& process_entry(unsigned index) {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.devices.find(index);
    if (it != r.devices.end())
        return *it->second;
    auto entry = std::make_unique<ProcessAllocator>();
    entry->allocator = r.factory ? r.factory(index) : default_factory(index);
    if (!entry->allocator)
        throw Error(Errc::NoDevice, "allocator", device_string(index), 0,
                    "no allocator for this device");
    return *r.devices.emplace(index, std::move(entry)).first->second;
}

} // namespace

DeviceAllocator& process_allocator(unsigned index) {
    return *process_entry(index).allocator;
}

void reset_process_allocators(AllocatorFactory factory) {
    Registry& r = registry();
    std::map<unsigned, std::unique_ptr<ProcessAllocator>> old;
    {
        const std::lock_guard<std::mutex> lock(r.mutex);
        old.swap(r.devices);
        r.factory = std::move(factory);
    }
    for (auto& [index, entry] : old)
        entry->blocks.clear(); // before their allocator
}

} // namespace rbln

namespace {

thread_local std::string g_alloc_error;

template <typename F> rbln_status guard(F&& f) {
    try {
        g_alloc_error.clear();
        return f();
    } catch (const rbln::Error& e) {
        g_alloc_error = e.what();
        return static_cast<rbln_status>(e.code());
    } catch (const std::bad_alloc&) {
        g_alloc_error = "librbln: host memory exhausted";
        return RBLN_ERR_INTERNAL;
    } catch (const std::exception& e) {
        g_alloc_error = std::string("librbln: internal error: ") + e.what();
        return RBLN_ERR_INTERNAL;
    } catch (...) {
        g_alloc_error = "librbln: internal error";
        return RBLN_ERR_INTERNAL;
    }
}

rbln_status invalid(const std::string& message) {
    g_alloc_error = message;
    return RBLN_ERR_INVALID_ARGUMENT;
}

unsigned device_index(int device) {
    if (device < 0)
        throw rbln::Error(rbln::Errc::NoDevice, "allocator", "rbln:" + std::to_string(device), 0,
                          "device indices are >= 0");
    return static_cast<unsigned>(device);
}

rbln_status bytes_query(int device, uint64_t* bytes,
                        std::uint64_t (rbln::DeviceAllocator::*query)() const) {
    if (bytes == nullptr)
        return invalid("bytes is NULL");
    return guard([&] {
        *bytes = (rbln::process_allocator(device_index(device)).*query)();
        return RBLN_OK;
    });
}

} // namespace

extern "C" {

const char* rbln_alloc_last_error_message(void) {
    return g_alloc_error.c_str();
}

rbln_status rbln_caching_alloc(int device, uint64_t size, uint64_t stream, int place,
                               uint64_t* device_va) {
    if (device_va == nullptr)
        return invalid("device_va is NULL");
    if (place < RBLN_PLACE_DEFAULT)
        return invalid("place " + std::to_string(place) + " is not a place");
    return guard([&] {
        rbln::ProcessAllocator& p = rbln::process_entry(device_index(device));
        *device_va = 0;
        std::optional<unsigned> where;
        if (place != RBLN_PLACE_DEFAULT)
            where = static_cast<unsigned>(place);
        rbln::DeviceBlock block = p.allocator->allocate(size, stream, where);
        if (!block)
            return RBLN_OK;
        const std::uint64_t va = block.device_va();
        {
            const std::lock_guard<std::mutex> lock(p.blocks_mutex);
            p.blocks.emplace(va, std::move(block));
        }
        *device_va = va;
        return RBLN_OK;
    });
}

rbln_status rbln_caching_free(int device, uint64_t device_va) {
    if (device_va == 0)
        return RBLN_OK;
    return guard([&] {
        rbln::ProcessAllocator& p = rbln::process_entry(device_index(device));
        rbln::DeviceBlock block;
        {
            const std::lock_guard<std::mutex> lock(p.blocks_mutex);
            auto it = p.blocks.find(device_va);
            if (it == p.blocks.end())
                return invalid("rbln_caching_free: no live block of rbln:" +
                               std::to_string(device) + " starts at device VA 0x" + [&] {
                                   char buf[32];
                                   std::snprintf(buf, sizeof(buf), "%llx",
                                                 static_cast<unsigned long long>(device_va));
                                   return std::string(buf);
                               }());
            block = std::move(it->second);
            p.blocks.erase(it);
        }
        block.reset(); // outside blocks_mutex
        return RBLN_OK;
    });
}

rbln_status rbln_alloc_block_get_info(int device, uint64_t device_va,
                                      struct rbln_alloc_block_info* info) {
    if (info == nullptr || info->struct_size == 0)
        return invalid("info is NULL or its struct_size is 0");
    return guard([&] {
        rbln::ProcessAllocator& p = rbln::process_entry(device_index(device));
        struct rbln_alloc_block_info out {};
        {
            const std::lock_guard<std::mutex> lock(p.blocks_mutex);
            auto it = p.blocks.find(device_va);
            if (it == p.blocks.end())
                return invalid("rbln_alloc_block_get_info: no live block at that device VA");
            const rbln::DeviceBlock& b = it->second;
            out.handle = b.handle();
            out.size = b.size();
            out.requested_size = b.requested_size();
            out.segment_offset = b.segment_offset();
            out.place = b.place();
        }
        const std::size_t n = std::min<std::size_t>(info->struct_size, sizeof(out));
        out.struct_size = static_cast<uint32_t>(n);
        std::memcpy(info, &out, n);
        return RBLN_OK;
    });
}

rbln_status rbln_empty_cache(int device) {
    return guard([&] {
        rbln::process_allocator(device_index(device)).empty_cache();
        return RBLN_OK;
    });
}

rbln_status rbln_memory_stat(int device, const char* key, int64_t* value) {
    if (key == nullptr || value == nullptr)
        return invalid("key or value is NULL");
    return guard([&] {
        const rbln::DeviceAllocator& a = rbln::process_allocator(device_index(device));
        const std::string_view k(key);
        const rbln::MemoryStats s =
            k.starts_with("npu.") ? a.memory_stats_per_chiplet() : a.memory_stats();
        auto it = s.find(k);
        if (it == s.end())
            return invalid(std::string("no memory statistic '") + key + "'");
        *value = it->second;
        return RBLN_OK;
    });
}

rbln_status rbln_memory_stats(int device, int per_chiplet, struct rbln_memory_stat_entry* entries,
                              size_t capacity, size_t* count) {
    if (count == nullptr || (capacity > 0 && entries == nullptr))
        return invalid("count is NULL, or entries is NULL with a capacity");
    return guard([&] {
        const rbln::DeviceAllocator& a = rbln::process_allocator(device_index(device));
        const rbln::MemoryStats s = per_chiplet ? a.memory_stats_per_chiplet() : a.memory_stats();
        std::size_t i = 0;
        for (const auto& [k, v] : s) {
            if (i < capacity) {
                struct rbln_memory_stat_entry& e = entries[i];
                std::memset(e.key, 0, sizeof(e.key));
                std::memcpy(e.key, k.data(), std::min(k.size(), sizeof(e.key) - 1));
                e.value = v;
            }
            i++;
        }
        *count = i;
        return RBLN_OK;
    });
}

rbln_status rbln_memory_allocated(int device, uint64_t* bytes) {
    return bytes_query(device, bytes, &rbln::DeviceAllocator::memory_allocated);
}
rbln_status rbln_memory_reserved(int device, uint64_t* bytes) {
    return bytes_query(device, bytes, &rbln::DeviceAllocator::memory_reserved);
}
rbln_status rbln_max_memory_allocated(int device, uint64_t* bytes) {
    return bytes_query(device, bytes, &rbln::DeviceAllocator::max_memory_allocated);
}
rbln_status rbln_max_memory_reserved(int device, uint64_t* bytes) {
    return bytes_query(device, bytes, &rbln::DeviceAllocator::max_memory_reserved);
}

rbln_status rbln_reset_peak_memory_stats(int device) {
    return guard([&] {
        rbln::process_allocator(device_index(device)).reset_peak_memory_stats();
        return RBLN_OK;
    });
}

rbln_status rbln_reset_accumulated_memory_stats(int device) {
    return guard([&] {
        rbln::process_allocator(device_index(device)).reset_accumulated_memory_stats();
        return RBLN_OK;
    });
}

rbln_status rbln_memory_summary(int device, const char* title_word, char* buf, size_t len,
                                size_t* needed) {
    if (buf == nullptr && len > 0)
        return invalid("buf is NULL with a length");
    return guard([&] {
        rbln::SummaryOptions o;
        if (title_word != nullptr)
            o.title_word = title_word;
        const std::string s = rbln::process_allocator(device_index(device)).memory_summary(o);
        if (needed != nullptr)
            *needed = s.size();
        if (s.size() + 1 > len)
            return invalid("rbln_memory_summary: the buffer holds " + std::to_string(len) +
                           " bytes, the summary needs " + std::to_string(s.size() + 1));
        std::memcpy(buf, s.c_str(), s.size() + 1);
        return RBLN_OK;
    });
}

} // extern "C"
