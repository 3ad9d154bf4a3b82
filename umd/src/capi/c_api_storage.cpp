// SPDX-License-Identifier: GPL-2.0
// c_api_storage.cpp - rbln_storage.h over rbln::Storage.  Every entry point
// catches everything: no exception crosses into C.

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "capi/c_guard.hpp"
#include "capi/c_handles.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/ops.hpp"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

// @stream, or (NULL) the default stream of @s's device.
rbln::Stream stream_of(rbln_stream* stream, const rbln::Storage& s) {
    return stream != nullptr ? stream->stream : s.device()->default_stream();
}

// Errc::InvalidArgument unless [@offset, @offset + @size) lies in @s.
void check_range(const char* op, const rbln::Storage& s, std::uint64_t offset, std::uint64_t size) {
    if (offset > s.nbytes() || size > s.nbytes() - offset)
        throw rbln::Error(rbln::Errc::InvalidArgument, op, "", 0,
                          "bytes [" + std::to_string(offset) + ", " +
                              std::to_string(offset + size) + ") are outside the storage of " +
                              std::to_string(s.nbytes()) + " bytes");
}

// Errc::InvalidArgument unless @stream runs on @s's device.
void check_stream(const char* op, const rbln::Stream& stream, const rbln::Storage& s) {
    if (&stream.device().kernel() != &s.device()->kernel())
        throw rbln::Error(rbln::Errc::InvalidArgument, op, "", 0,
                          "the stream is on rbln:" + std::to_string(stream.device().index()) +
                              " but the storage on rbln:" + std::to_string(s.device_index()));
}

// The view of bytes [@offset, @offset + @size) of @s in its elements.
rbln::StorageView byte_view(const char* op, const std::shared_ptr<rbln::Storage>& s,
                            std::uint64_t offset, std::uint64_t size) {
    const std::uint32_t esize = rbln::element_size(s->element_type());
    if (offset % esize != 0 || size % esize != 0)
        throw rbln::Error(rbln::Errc::InvalidArgument, op, "", 0,
                          "offset " + std::to_string(offset) + " and size " + std::to_string(size) +
                              " must be whole numbers of " + std::to_string(esize) +
                              "-byte elements");
    rbln::StorageView v;
    v.storage = s;
    v.offset = offset / esize;
    v.sizes = {static_cast<std::int64_t>(size / esize)};
    v.strides = {1};
    return v;
}

// Waits for the work enqueued on @stream so far (a blocking copy).
void wait_for(rbln::Stream& stream) {
    rbln::Event done(false);
    done.record(stream);
    done.synchronize();
}

} // namespace

extern "C" {

rbln_status rbln_storage_create(int device, uint64_t nbytes, uint32_t element_type,
                                rbln_storage** storage) {
    if (storage == nullptr)
        return invalid("storage is NULL");
    if (device < 0)
        return invalid("device " + std::to_string(device) + ": device indices are >= 0");
    if (element_type > RBLN_STORAGE_BF16)
        return invalid("unknown element type " + std::to_string(element_type));
    return guard([&] {
        auto s = std::make_unique<rbln_storage>();
        s->storage = rbln::Storage::create(static_cast<unsigned>(device), nbytes,
                                           static_cast<rbln::ElementType>(element_type));
        *storage = s.release();
        return RBLN_OK;
    });
}

rbln_status rbln_storage_destroy(rbln_storage* storage) {
    return guard([&] {
        const std::unique_ptr<rbln_storage> owned(storage);
        return RBLN_OK;
    });
}

rbln_status rbln_storage_device_use(rbln_storage* storage, uint32_t access, uint64_t* device_va,
                                    uint32_t* handle) {
    if (storage == nullptr)
        return invalid("storage is NULL");
    if (access > RBLN_STORAGE_READ_WRITE)
        return invalid("unknown access " + std::to_string(access));
    return guard([&] {
        rbln::Stream stream = storage->storage->device()->default_stream();
        const std::shared_ptr<rbln::Memory>& m =
            storage->storage->device_use(stream, static_cast<rbln::DeviceAccess>(access));
        if (device_va != nullptr)
            *device_va = m->device_va();
        if (handle != nullptr)
            *handle = m->handle();
        return RBLN_OK;
    });
}

rbln_status rbln_storage_data_ptr(rbln_storage* storage, uint64_t* device_va) {
    if (storage == nullptr || device_va == nullptr)
        return invalid(storage == nullptr ? "storage is NULL" : "device_va is NULL");
    return guard([&] {
        *device_va = storage->storage->data_ptr();
        return RBLN_OK;
    });
}

rbln_status rbln_storage_read(rbln_storage* storage, uint64_t offset, void* data, size_t size) {
    if (storage == nullptr || (data == nullptr && size != 0))
        return invalid(storage == nullptr ? "storage is NULL" : "data is NULL");
    return guard([&] {
        storage->storage->read(offset, std::span<std::byte>(static_cast<std::byte*>(data), size));
        return RBLN_OK;
    });
}

rbln_status rbln_storage_write(rbln_storage* storage, uint64_t offset, const void* data,
                               size_t size) {
    if (storage == nullptr || (data == nullptr && size != 0))
        return invalid(storage == nullptr ? "storage is NULL" : "data is NULL");
    return guard([&] {
        storage->storage->write(
            offset, std::span<const std::byte>(static_cast<const std::byte*>(data), size));
        return RBLN_OK;
    });
}

rbln_status rbln_storage_bind_device_memory(rbln_storage* storage, uint64_t offset, uint64_t size) {
    if (storage == nullptr)
        return invalid("storage is NULL");
    return guard([&] {
        const std::uint32_t esize = rbln::element_size(storage->storage->element_type());
        if (offset % esize != 0 || size % esize != 0)
            return invalid("bind_device_memory: offset " + std::to_string(offset) + " and size " +
                           std::to_string(size) + " must be whole numbers of " +
                           std::to_string(esize) + "-byte elements");
        rbln::StorageView v;
        v.storage = storage->storage;
        v.offset = offset / esize;
        v.sizes = {static_cast<std::int64_t>(size / esize)};
        v.strides = {1};
        rbln::bind_device_memory(v);
        return RBLN_OK;
    });
}

rbln_status rbln_storage_copy_from_host(rbln_storage* dst, uint64_t offset, const void* src,
                                        size_t size, rbln_stream* stream, int non_blocking) {
    if (dst == nullptr || (src == nullptr && size != 0))
        return invalid(dst == nullptr ? "dst is NULL" : "src is NULL");
    return guard([&] {
        rbln::Storage& d = *dst->storage;
        check_range("rbln_storage_copy_from_host", d, offset, size);
        rbln::Stream s = stream_of(stream, d);
        check_stream("rbln_storage_copy_from_host", s, d);
        const bool whole = offset == 0 && size == d.nbytes();
        const std::shared_ptr<rbln::Memory>& m =
            d.device_use(s, whole ? rbln::DeviceAccess::Write : rbln::DeviceAccess::ReadWrite);
        if (size != 0)
            rbln::copy(s, rbln::CopyEndpoint::of(m, offset, size),
                       rbln::CopyEndpoint::of_host(src, size), non_blocking != 0);
        return RBLN_OK;
    });
}

rbln_status rbln_storage_copy_to_host(void* dst, rbln_storage* src, uint64_t offset, size_t size,
                                      rbln_stream* stream, int non_blocking) {
    if (src == nullptr || (dst == nullptr && size != 0))
        return invalid(src == nullptr ? "src is NULL" : "dst is NULL");
    return guard([&] {
        rbln::Storage& from = *src->storage;
        check_range("rbln_storage_copy_to_host", from, offset, size);
        rbln::Stream s = stream_of(stream, from);
        check_stream("rbln_storage_copy_to_host", s, from);
        const std::shared_ptr<rbln::Memory>& m = from.device_use(s, rbln::DeviceAccess::Read);
        if (size != 0)
            rbln::copy(s, rbln::CopyEndpoint::of_host(dst, size),
                       rbln::CopyEndpoint::of(m, offset, size), non_blocking != 0);
        return RBLN_OK;
    });
}

rbln_status rbln_storage_copy(rbln_storage* dst, uint64_t dst_offset, rbln_storage* src,
                              uint64_t src_offset, uint64_t size, rbln_stream* stream,
                              int non_blocking) {
    if (dst == nullptr || src == nullptr)
        return invalid(dst == nullptr ? "dst is NULL" : "src is NULL");
    return guard([&] {
        constexpr const char* op = "rbln_storage_copy";
        check_range(op, *dst->storage, dst_offset, size);
        check_range(op, *src->storage, src_offset, size);
        if (size == 0)
            return RBLN_OK;
        rbln::Stream s = stream_of(stream, *dst->storage);
        rbln::ops::copy(s, byte_view(op, dst->storage, dst_offset, size),
                        byte_view(op, src->storage, src_offset, size));
        if (non_blocking == 0)
            wait_for(s);
        return RBLN_OK;
    });
}

rbln_status rbln_storage_record_stream(rbln_storage* storage, rbln_stream* stream) {
    if (storage == nullptr || stream == nullptr)
        return invalid(storage == nullptr ? "storage is NULL" : "stream is NULL");
    return guard([&] {
        storage->storage->record_stream(stream->stream);
        return RBLN_OK;
    });
}

rbln_status rbln_storage_get_info(const rbln_storage* storage, struct rbln_storage_info* info) {
    if (storage == nullptr || info == nullptr)
        return invalid(storage == nullptr ? "storage is NULL" : "info is NULL");
    if (info->struct_size < sizeof(std::uint32_t))
        return invalid("info->struct_size is too small");
    return guard([&] {
        const rbln::Storage& s = *storage->storage;
        const rbln::StorageTransfers t = s.transfers();
        rbln_storage_info out{};
        out.struct_size = info->struct_size;
        out.element_type = static_cast<std::uint32_t>(s.element_type());
        out.id = s.id();
        out.nbytes = s.nbytes();
        out.resident = s.resident() ? 1 : 0;
        out.coherence = static_cast<std::uint32_t>(s.coherence());
        out.uploads = t.uploads;
        out.downloads = t.downloads;
        out.upload_bytes = t.upload_bytes;
        out.download_bytes = t.download_bytes;
        out.commits = t.commits;
        std::memcpy(info, &out, std::min<std::size_t>(info->struct_size, sizeof(out)));
        return RBLN_OK;
    });
}

} // extern "C"
