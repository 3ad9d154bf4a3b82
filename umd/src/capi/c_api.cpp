// SPDX-License-Identifier: GPL-2.0
// c_api.cpp - the C ABI (rbln/rbln.h) over the C++ API.  Every entry point
// catches everything: no exception crosses into C.

#include "rbln/rbln.h"

#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include "capi/c_guard.hpp"
#include "capi/c_handles.hpp"
#include "exec/submitter.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/discovery.hpp"
#include "rbln/error.hpp"
#include "rbln/version.hpp"
#include "runtime/process_context.hpp"
#include "testing.h"
#include "testing.hpp"

namespace rbln::capi {

std::string& last_error() noexcept {
    thread_local std::string message;
    return message;
}

} // namespace rbln::capi

namespace {

using rbln::capi::fail;
using rbln::capi::guard;

rbln::Discovery discover_now() {
    rbln::DiscoveryOptions options;
    options.root = rbln::detail::ProcessContexts::get().root();
    return rbln::discover(options);
}

template <std::size_t N> void copy_string(char (&dst)[N], const std::string& src) {
    const std::size_t n = src.size() < N - 1 ? src.size() : N - 1;
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

std::uint32_t family_code(rbln::Family family) {
    switch (family) {
    case rbln::Family::Rebel100:
        return RBLN_DEVICE_FAMILY_REBEL100;
    case rbln::Family::Atom:
        return RBLN_DEVICE_FAMILY_ATOM;
    case rbln::Family::Unknown:
        break;
    }
    return RBLN_DEVICE_FAMILY_UNKNOWN;
}

} // namespace

namespace {

std::shared_ptr<rbln::Device> device_at(int index) {
    if (index == -1)
        return rbln::Device::current();
    if (index < 0)
        throw rbln::Error(rbln::Errc::NoDevice, "device", std::to_string(index), 0,
                          "no such logical device");
    return rbln::Device::get(static_cast<unsigned>(index));
}

rbln::Stream stream_for(rbln_stream* stream, rbln::Device& device) {
    return stream != nullptr ? stream->stream : device.default_stream();
}

rbln_status not_null(const void* p, const char* what) {
    if (p == nullptr)
        return fail(RBLN_ERR_INVALID_ARGUMENT, std::string(what) + " is NULL");
    return RBLN_OK;
}

template <typename T> rbln_status hand_out(std::unique_ptr<T> object, T** out) {
    *out = object.release();
    return RBLN_OK;
}

} // namespace

extern "C" {

const char* rbln_version(void) {
    return RBLN_VERSION_STRING;
}

const char* rbln_status_name(rbln_status status) {
    if (status == RBLN_OK)
        return "ok";
    if (status < RBLN_ERR_INVALID_ARGUMENT || status > RBLN_ERR_NOT_READY)
        return "unknown";
    // errc_name returns views of string literals: NUL-terminated.
    return rbln::errc_name(static_cast<rbln::Errc>(status)).data();
}

const char* rbln_last_error_message(void) {
    return rbln::capi::last_error().c_str();
}

rbln_status rbln_device_count(int* count) {
    return guard([&] {
        if (count == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_device_count: count is NULL");
        *count = static_cast<int>(discover_now().cards.size());
        return RBLN_OK;
    });
}

rbln_status rbln_device_get_info(int index, struct rbln_device_info* info) {
    return guard([&] {
        if (info == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_device_get_info: info is NULL");
        const std::uint32_t caller_size = info->struct_size;
        if (caller_size < offsetof(rbln_device_info, hbm_total_bytes))
            return fail(RBLN_ERR_INVALID_ARGUMENT,
                        "rbln_device_get_info: info->struct_size " + std::to_string(caller_size) +
                            " is too small; set it to sizeof(struct rbln_device_info)");
        const rbln::Discovery d = discover_now();
        if (index < 0 || static_cast<std::size_t>(index) >= d.cards.size())
            return fail(RBLN_ERR_NO_DEVICE, "rbln_device_get_info: no card " +
                                                std::to_string(index) + " (" +
                                                std::to_string(d.cards.size()) + " cards present)");
        const rbln::CardInfo& c = d.cards[static_cast<std::size_t>(index)];

        rbln_device_info out{};
        out.struct_size = sizeof(out) < caller_size ? sizeof(out) : caller_size;
        out.index = c.index;
        out.accel_minor = c.accel_minor;
        out.numa_node = c.numa_node;
        out.family = family_code(c.family);
        out.chiplet_count = c.chiplet_count;
        out.fw_iface_major = c.fw_iface_major;
        out.fw_iface_minor = c.fw_iface_minor;
        out.hbm_total_bytes = c.hbm_total_bytes;
        for (const auto& ch : c.chiplets)
            if (ch.index < RBLN_DEVICE_MAX_CHIPLETS)
                out.chiplet_hbm_bytes[ch.index] = ch.hbm_total_bytes;
        if (c.temperature_mc) {
            out.flags |= RBLN_DEVICE_HAS_TEMPERATURE;
            out.temperature_mc = *c.temperature_mc;
        }
        if (c.power_uw) {
            out.flags |= RBLN_DEVICE_HAS_POWER;
            out.power_uw = *c.power_uw;
        }
        if (c.suspended)
            out.flags |= RBLN_DEVICE_SUSPENDED;
        if (c.identity_from_kernel)
            out.flags |= RBLN_DEVICE_IDENTITY_FROM_KERNEL;
        copy_string(out.accel_node, c.accel_node);
        copy_string(out.pci_bdf, c.pci_bdf);
        copy_string(out.family_name, c.family_name);
        copy_string(out.fw_version, c.fw_version);
        copy_string(out.serial, c.serial);
        copy_string(out.state, c.state);
        std::memcpy(info, &out, out.struct_size);
        return RBLN_OK;
    });
}

rbln_status rbln_driver_version(char* buf, size_t len) {
    return guard([&] {
        if (buf == nullptr || len == 0)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_driver_version: empty buffer");
        const std::string v = discover_now().driver.version;
        if (v.size() >= len)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_driver_version: buffer of " +
                                                       std::to_string(len) +
                                                       " bytes is too small for '" + v + "'");
        std::memcpy(buf, v.c_str(), v.size() + 1);
        return RBLN_OK;
    });
}

rbln_status rbln_set_root(const char* root) {
    return guard([&] {
        rbln::ProcessOptions options;
        options.runtime.root = (root == nullptr || *root == '\0') ? "/" : root;
        rbln::reset_process_for_tests(std::move(options));
        return RBLN_OK;
    });
}

rbln_status rbln_logical_device_count(int* count) {
    return guard([&] {
        if (count == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_logical_device_count: count is NULL");
        *count = static_cast<int>(rbln::Runtime::process().device_count());
        return RBLN_OK;
    });
}

int rbln_is_available(void) {
    try {
        return rbln::Runtime::process().is_available() ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

rbln_status rbln_physical_device_count(int* count) {
    return guard([&] {
        if (count == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_physical_device_count: count is NULL");
        *count = static_cast<int>(rbln::Runtime::process().physical_device_count());
        return RBLN_OK;
    });
}

rbln_status rbln_logical_device_npus(int index, uint32_t* npus, size_t capacity, size_t* count) {
    return guard([&] {
        if (count == nullptr || (npus == nullptr && capacity != 0))
            return fail(RBLN_ERR_INVALID_ARGUMENT,
                        "rbln_logical_device_npus: count is NULL or npus is NULL with a capacity");
        if (index < 0)
            return fail(RBLN_ERR_NO_DEVICE,
                        "rbln_logical_device_npus: no logical device " + std::to_string(index));
        const rbln::LogicalDevice d = rbln::Runtime::process().device(static_cast<unsigned>(index));
        *count = d.npus.size();
        for (std::size_t i = 0; i < d.npus.size() && i < capacity; i++)
            npus[i] = d.npus[i];
        return RBLN_OK;
    });
}

rbln_status rbln_commit(void) {
    return guard([&] {
        rbln::Runtime::process().commit();
        return RBLN_OK;
    });
}

rbln_status rbln_get_device(int* index) {
    return guard([&] {
        if (index == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_get_device: index is NULL");
        *index = static_cast<int>(rbln::Runtime::process().current_device());
        return RBLN_OK;
    });
}

rbln_status rbln_set_device(int index) {
    return guard([&] {
        if (index < 0)
            return fail(RBLN_ERR_NO_DEVICE,
                        "rbln_set_device: no logical device " + std::to_string(index));
        rbln::Runtime::process().set_device(static_cast<unsigned>(index));
        return RBLN_OK;
    });
}

rbln_status rbln_parse_device(const char* text, int* index) {
    return guard([&] {
        if (text == nullptr || index == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_parse_device: text or index is NULL");
        const auto parsed = rbln::parse_device_string(text);
        *index = parsed ? static_cast<int>(*parsed) : -1;
        return RBLN_OK;
    });
}

rbln_status rbln_check_fork(void) {
    return guard([&] {
        rbln::Runtime::process().check_fork();
        return RBLN_OK;
    });
}

rbln_status rbln_stream_create(int device, rbln_stream** stream) {
    return guard([&] {
        if (stream == nullptr)
            return not_null(stream, "rbln_stream_create: stream");
        auto dev = device_at(device);
        return hand_out(std::make_unique<rbln_stream>(rbln_stream{rbln::Stream(dev)}), stream);
    });
}

rbln_status rbln_stream_destroy(rbln_stream* stream) {
    return guard([&] {
        const std::unique_ptr<rbln_stream> owned(stream);
        return RBLN_OK;
    });
}

rbln_status rbln_stream_query(rbln_stream* stream) {
    return guard([&] {
        rbln::Stream s =
            stream != nullptr ? stream->stream : rbln::Device::current()->default_stream();
        return s.query() ? RBLN_OK : RBLN_ERR_NOT_READY;
    });
}

rbln_status rbln_stream_synchronize(rbln_stream* stream) {
    return guard([&] {
        rbln::Stream s =
            stream != nullptr ? stream->stream : rbln::Device::current()->default_stream();
        s.synchronize();
        return RBLN_OK;
    });
}

rbln_status rbln_stream_wait_event(rbln_stream* stream, rbln_event* event) {
    return guard([&] {
        if (event == nullptr)
            return not_null(event, "rbln_stream_wait_event: event");
        rbln::Stream s =
            stream != nullptr ? stream->stream : rbln::Device::current()->default_stream();
        s.wait_event(event->event);
        return RBLN_OK;
    });
}

rbln_status rbln_event_create(rbln_event** event, uint32_t flags) {
    return guard([&] {
        if (event == nullptr)
            return not_null(event, "rbln_event_create: event");
        if ((flags & ~RBLN_EVENT_DISABLE_TIMING) != 0)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_event_create: unknown flags");
        const bool timing = (flags & RBLN_EVENT_DISABLE_TIMING) == 0;
        return hand_out(std::make_unique<rbln_event>(rbln_event{rbln::Event(timing)}), event);
    });
}

rbln_status rbln_event_destroy(rbln_event* event) {
    return guard([&] {
        const std::unique_ptr<rbln_event> owned(event);
        return RBLN_OK;
    });
}

rbln_status rbln_event_record(rbln_event* event, rbln_stream* stream) {
    return guard([&] {
        if (event == nullptr)
            return not_null(event, "rbln_event_record: event");
        rbln::Stream s =
            stream != nullptr ? stream->stream : rbln::Device::current()->default_stream();
        event->event.record(s);
        return RBLN_OK;
    });
}

rbln_status rbln_event_query(rbln_event* event) {
    return guard([&] {
        if (event == nullptr)
            return not_null(event, "rbln_event_query: event");
        return event->event.query() ? RBLN_OK : RBLN_ERR_NOT_READY;
    });
}

rbln_status rbln_event_synchronize(rbln_event* event) {
    return guard([&] {
        if (event == nullptr)
            return not_null(event, "rbln_event_synchronize: event");
        event->event.synchronize();
        return RBLN_OK;
    });
}

rbln_status rbln_event_elapsed_time(float* ms, rbln_event* start, rbln_event* end) {
    return guard([&] {
        if (ms == nullptr || start == nullptr || end == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT,
                        "rbln_event_elapsed_time: ms, start or end is NULL");
        *ms = static_cast<float>(rbln::Event::elapsed_time(start->event, end->event));
        return RBLN_OK;
    });
}

rbln_status rbln_device_synchronize(int device) {
    return guard([&] {
        device_at(device)->synchronize();
        return RBLN_OK;
    });
}

rbln_status rbln_device_submit_path(int device, int* io_uring) {
    return guard([&] {
        if (io_uring == nullptr)
            return not_null(io_uring, "rbln_device_submit_path: io_uring");
        *io_uring = device_at(device)->submitter().path() == rbln::Submitter::Path::IoUring;
        return RBLN_OK;
    });
}

rbln_status rbln_malloc(int device, size_t size, rbln_buffer** buffer) {
    return guard([&] {
        if (buffer == nullptr)
            return not_null(buffer, "rbln_malloc: buffer");
        auto dev = device_at(device);
        auto mem = dev->allocate(size);
        return hand_out(std::make_unique<rbln_buffer>(rbln_buffer{dev, std::move(mem)}), buffer);
    });
}

rbln_status rbln_malloc_host(int device, size_t size, rbln_buffer** buffer, void** host) {
    return guard([&] {
        if (buffer == nullptr || host == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_malloc_host: buffer or host is NULL");
        auto dev = device_at(device);
        auto mem = dev->allocate_host(size);
        *host = mem->host_data();
        return hand_out(std::make_unique<rbln_buffer>(rbln_buffer{dev, std::move(mem)}), buffer);
    });
}

rbln_status rbln_host_register(int device, void* data, size_t size, rbln_buffer** buffer) {
    return guard([&] {
        if (buffer == nullptr || data == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_host_register: data or buffer is NULL");
        auto dev = device_at(device);
        auto mem = dev->register_host(data, size);
        return hand_out(std::make_unique<rbln_buffer>(rbln_buffer{dev, std::move(mem)}), buffer);
    });
}

rbln_status rbln_buffer_free(rbln_buffer* buffer) {
    return guard([&] {
        const std::unique_ptr<rbln_buffer> owned(buffer);
        return RBLN_OK;
    });
}

rbln_status rbln_memcpy_htod(rbln_buffer* dst, size_t dst_offset, const void* src, size_t size,
                             rbln_stream* stream, int non_blocking) {
    return guard([&] {
        if (dst == nullptr)
            return not_null(dst, "rbln_memcpy_htod: dst");
        rbln::Stream s = stream_for(stream, *dst->device);
        rbln::copy(s, rbln::CopyEndpoint::of(dst->memory, dst_offset, size),
                   rbln::CopyEndpoint::of_host(src, size), non_blocking != 0);
        return RBLN_OK;
    });
}

rbln_status rbln_memcpy_dtoh(void* dst, rbln_buffer* src, size_t src_offset, size_t size,
                             rbln_stream* stream, int non_blocking) {
    return guard([&] {
        if (src == nullptr)
            return not_null(src, "rbln_memcpy_dtoh: src");
        rbln::Stream s = stream_for(stream, *src->device);
        rbln::copy(s, rbln::CopyEndpoint::of_host(dst, size),
                   rbln::CopyEndpoint::of(src->memory, src_offset, size), non_blocking != 0);
        return RBLN_OK;
    });
}

rbln_status rbln_memcpy_dtod(rbln_buffer* dst, size_t dst_offset, rbln_buffer* src,
                             size_t src_offset, size_t size, rbln_stream* stream,
                             int non_blocking) {
    return guard([&] {
        if (dst == nullptr || src == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_memcpy_dtod: dst or src is NULL");
        rbln::Stream s = stream_for(stream, *dst->device);
        rbln::copy(s, rbln::CopyEndpoint::of(dst->memory, dst_offset, size),
                   rbln::CopyEndpoint::of(src->memory, src_offset, size), non_blocking != 0);
        return RBLN_OK;
    });
}

rbln_status rbln_memset(rbln_buffer* buffer, size_t offset, int value, size_t size,
                        rbln_stream* stream) {
    return guard([&] {
        if (buffer == nullptr)
            return not_null(buffer, "rbln_memset: buffer");
        if (buffer->memory->is_host()) {
            if (offset > buffer->memory->size() || size > buffer->memory->size() - offset)
                return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_memset: range outside the buffer");
            std::memset(buffer->memory->host_data() + offset, value, size);
            return RBLN_OK;
        }
        rbln::Stream s = stream_for(stream, *buffer->device);
        s.fill(buffer->memory, offset, size, static_cast<std::uint8_t>(value), 1);
        return RBLN_OK;
    });
}

rbln_status rbln_device_copy_stats(int device, struct rbln_copy_stats* stats) {
    return guard([&] {
        if (stats == nullptr)
            return not_null(stats, "rbln_device_copy_stats: stats");
        const std::uint32_t caller = stats->struct_size;
        if (caller < 8)
            return fail(RBLN_ERR_INVALID_ARGUMENT,
                        "rbln_device_copy_stats: set stats->struct_size");
        const rbln::CopyStats c = device_at(device)->copy_stats();
        rbln_copy_stats out{};
        out.struct_size = sizeof(out) < caller ? sizeof(out) : caller;
        out.async_h2d = c.async_h2d;
        out.async_d2h = c.async_d2h;
        out.async_d2d = c.async_d2d;
        out.sync_h2d = c.sync_h2d;
        out.sync_d2h = c.sync_d2h;
        out.sync_d2d = c.sync_d2d;
        out.host_to_host = c.host_to_host;
        out.cross_device_via_host = c.cross_device_via_host;
        out.cross_device_card_to_card = c.cross_device_card_to_card;
        out.drains = c.drains;
        out.bytes_async = c.bytes_async;
        out.bytes_sync = c.bytes_sync;
        std::memcpy(stats, &out, out.struct_size);
        return RBLN_OK;
    });
}

} // extern "C"
