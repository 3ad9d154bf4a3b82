// SPDX-License-Identifier: GPL-2.0
// c_api_alloc.cpp - rbln_alloc.h over the caching allocators of the
// process's device contexts (process_context.hpp).  Every entry point
// catches everything: no exception crosses into C.

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "capi/c_guard.hpp"
#include "capi/c_handles.hpp"
#include "rbln/allocator.hpp"
#include "rbln/allocator_stream.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/rbln_alloc.h"
#include "runtime/process_context.hpp"

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

unsigned device_index(int device) {
    if (device < 0)
        throw rbln::Error(rbln::Errc::NoDevice, "allocator", "rbln:" + std::to_string(device), 0,
                          "device indices are >= 0");
    return static_cast<unsigned>(device);
}

// The allocator of @device if it was used, else nullptr (nothing opened).
rbln::DeviceAllocator* live(int device) {
    return rbln::detail::ProcessContexts::get().context(device_index(device))->live_allocator();
}

rbln_status bytes_query(int device, uint64_t* bytes,
                        std::uint64_t (rbln::DeviceAllocator::*query)() const) {
    if (bytes == nullptr)
        return invalid("bytes is NULL");
    return guard([&] {
        *bytes = (rbln::process_allocator_stats(device_index(device)).*query)();
        return RBLN_OK;
    });
}

} // namespace

extern "C" {

rbln_status rbln_caching_alloc(int device, uint64_t size, uint64_t stream, int place,
                               uint64_t* device_va) {
    if (device_va == nullptr)
        return invalid("device_va is NULL");
    if (place < RBLN_PLACE_DEFAULT)
        return invalid("place " + std::to_string(place) + " is not a place");
    return guard([&] {
        const auto ctx = rbln::detail::ProcessContexts::get().context(device_index(device));
        rbln::DeviceAllocator& a = ctx->allocator();
        *device_va = 0;
        std::optional<unsigned> where;
        if (place != RBLN_PLACE_DEFAULT)
            where = static_cast<unsigned>(place);
        rbln::DeviceBlock block = a.allocate(size, stream, where);
        if (!block)
            return RBLN_OK;
        const std::uint64_t va = block.device_va();
        {
            const std::lock_guard<std::mutex> lock(ctx->c_mutex);
            ctx->c_blocks.emplace(va, std::move(block));
        }
        *device_va = va;
        return RBLN_OK;
    });
}

rbln_status rbln_caching_free(int device, uint64_t device_va) {
    if (device_va == 0)
        return RBLN_OK;
    return guard([&] {
        const auto ctx = rbln::detail::ProcessContexts::get().context(device_index(device));
        rbln::DeviceBlock block;
        {
            const std::lock_guard<std::mutex> lock(ctx->c_mutex);
            auto it = ctx->c_blocks.find(device_va);
            if (it == ctx->c_blocks.end())
                return invalid("rbln_caching_free: no live block of rbln:" +
                               std::to_string(device) + " starts at device VA 0x" + [&] {
                                   char buf[32];
                                   std::snprintf(buf, sizeof(buf), "%llx",
                                                 static_cast<unsigned long long>(device_va));
                                   return std::string(buf);
                               }());
            block = std::move(it->second);
            ctx->c_blocks.erase(it);
        }
        block.reset(); // outside c_mutex
        return RBLN_OK;
    });
}

rbln_status rbln_alloc_block_get_info(int device, uint64_t device_va,
                                      struct rbln_alloc_block_info* info) {
    if (info == nullptr || info->struct_size == 0)
        return invalid("info is NULL or its struct_size is 0");
    return guard([&] {
        const auto ctx = rbln::detail::ProcessContexts::get().context(device_index(device));
        struct rbln_alloc_block_info out {};
        {
            const std::lock_guard<std::mutex> lock(ctx->c_mutex);
            auto it = ctx->c_blocks.find(device_va);
            if (it == ctx->c_blocks.end())
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

rbln_status rbln_alloc_stream_id(const rbln_stream* stream, uint64_t* id) {
    if (stream == nullptr || id == nullptr)
        return invalid(stream == nullptr ? "stream is NULL" : "id is NULL");
    *id = rbln::stream_id(stream->stream);
    rbln::capi::last_error().clear();
    return RBLN_OK;
}

rbln_status rbln_caching_record_stream(int device, uint64_t device_va, rbln_stream* stream) {
    if (stream == nullptr)
        return invalid("stream is NULL");
    return guard([&] {
        const auto ctx = rbln::detail::ProcessContexts::get().context(device_index(device));
        rbln::DeviceAllocator& a = ctx->allocator();
        const auto fence = rbln::stream_fence_source(stream->stream);
        const std::lock_guard<std::mutex> lock(ctx->c_mutex);
        const auto it = ctx->c_blocks.find(device_va);
        if (it == ctx->c_blocks.end())
            return invalid("rbln_caching_record_stream: no live block of rbln:" +
                           std::to_string(device) + " starts at that device VA");
        a.record_stream(it->second, fence);
        return RBLN_OK;
    });
}

rbln_status rbln_set_default_place(int device, int place) {
    if (place < 0)
        return invalid("place " + std::to_string(place) + " is not a place");
    return guard([&] {
        rbln::process_allocator(device_index(device))
            .set_default_place(static_cast<unsigned>(place));
        return RBLN_OK;
    });
}

rbln_status rbln_get_default_place(int device, int* place) {
    if (place == nullptr)
        return invalid("place is NULL");
    return guard([&] {
        *place =
            static_cast<int>(rbln::process_allocator_stats(device_index(device)).default_place());
        return RBLN_OK;
    });
}

rbln_status rbln_set_memory_fraction(int device, double fraction, int place) {
    if (place < RBLN_PLACE_ALL)
        return invalid("place " + std::to_string(place) + " is not a place");
    if (place == RBLN_PLACE_DEFAULT)
        return invalid("place RBLN_PLACE_DEFAULT: name a chiplet, or RBLN_PLACE_ALL");
    return guard([&] {
        rbln::DeviceAllocator& a = rbln::process_allocator(device_index(device));
        if (place != RBLN_PLACE_ALL) {
            a.set_memory_fraction(fraction, static_cast<unsigned>(place));
            return RBLN_OK;
        }
        for (unsigned p = 0; p < a.place_count(); p++)
            a.set_memory_fraction(fraction, p);
        return RBLN_OK;
    });
}

rbln_status rbln_empty_cache(int device) {
    return guard([&] {
        // A device never used has nothing cached or counted: nothing to open.
        if (rbln::DeviceAllocator* a = live(device))
            a->empty_cache();
        return RBLN_OK;
    });
}

rbln_status rbln_memory_stat(int device, const char* key, int64_t* value) {
    if (key == nullptr || value == nullptr)
        return invalid("key or value is NULL");
    return guard([&] {
        const rbln::DeviceAllocator& a = rbln::process_allocator_stats(device_index(device));
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
        const rbln::DeviceAllocator& a = rbln::process_allocator_stats(device_index(device));
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
        // A device never used has nothing cached or counted: nothing to open.
        if (rbln::DeviceAllocator* a = live(device))
            a->reset_peak_memory_stats();
        return RBLN_OK;
    });
}

rbln_status rbln_reset_accumulated_memory_stats(int device) {
    return guard([&] {
        // A device never used has nothing cached or counted: nothing to open.
        if (rbln::DeviceAllocator* a = live(device))
            a->reset_accumulated_memory_stats();
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
        const std::string s = rbln::process_allocator_stats(device_index(device)).memory_summary(o);
        if (needed != nullptr)
            *needed = s.size();
        if (buf == nullptr || s.size() + 1 > len) // (buf is NULL only with len 0)
            return invalid("rbln_memory_summary: the buffer holds " + std::to_string(len) +
                           " bytes, the summary needs " + std::to_string(s.size() + 1));
        std::memcpy(buf, s.c_str(), s.size() + 1);
        return RBLN_OK;
    });
}

} // extern "C"
