// SPDX-License-Identifier: GPL-2.0
// c_api_storage.cpp - rbln_storage.h over rbln::Storage.  Every entry point
// catches everything: no exception crosses into C.

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "rbln/device.hpp"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"

struct rbln_storage {
    std::shared_ptr<rbln::Storage> storage;
};

namespace {

thread_local std::string g_storage_error;

template <typename F> rbln_status guard(F&& f) {
    try {
        g_storage_error.clear();
        return f();
    } catch (const rbln::Error& e) {
        g_storage_error = e.what();
        return static_cast<rbln_status>(e.code());
    } catch (const std::bad_alloc&) {
        g_storage_error = "librbln: host memory exhausted";
        return RBLN_ERR_INTERNAL;
    } catch (const std::exception& e) {
        g_storage_error = std::string("librbln: internal error: ") + e.what();
        return RBLN_ERR_INTERNAL;
    } catch (...) {
        g_storage_error = "librbln: internal error";
        return RBLN_ERR_INTERNAL;
    }
}

rbln_status invalid(const std::string& message) {
    g_storage_error = message;
    return RBLN_ERR_INVALID_ARGUMENT;
}

} // namespace

extern "C" {

const char* rbln_storage_last_error_message(void) {
    return g_storage_error.c_str();
}

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
