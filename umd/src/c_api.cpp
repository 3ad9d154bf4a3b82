// SPDX-License-Identifier: GPL-2.0
// c_api.cpp - the C ABI (rbln/rbln.h) over the C++ API.  Every entry point
// catches everything: no exception crosses into C.

#include "rbln/rbln.h"

#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include "rbln/devices.hpp"
#include "rbln/discovery.hpp"
#include "rbln/error.hpp"
#include "rbln/version.hpp"

namespace {

thread_local std::string g_last_error;

std::mutex g_root_mutex;
std::string g_root = "/"; // guarded by g_root_mutex

std::string current_root() {
    const std::lock_guard<std::mutex> lock(g_root_mutex);
    return g_root;
}

rbln_status fail(rbln_status status, std::string message) {
    g_last_error = std::move(message);
    return status;
}

template <typename F> rbln_status guarded(F&& body) {
    try {
        g_last_error.clear();
        return body();
    } catch (const rbln::Error& e) {
        return fail(static_cast<rbln_status>(e.code()), e.what());
    } catch (const std::bad_alloc&) {
        return fail(RBLN_ERR_INTERNAL, "out of memory");
    } catch (const std::exception& e) {
        return fail(RBLN_ERR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return fail(RBLN_ERR_INTERNAL, "internal error: unknown exception");
    }
}

rbln::Discovery discover_now() {
    rbln::DiscoveryOptions options;
    options.root = current_root();
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

extern "C" {

const char* rbln_version(void) {
    return RBLN_VERSION_STRING;
}

const char* rbln_status_name(rbln_status status) {
    if (status == RBLN_OK)
        return "ok";
    if (status < RBLN_ERR_INVALID_ARGUMENT || status > RBLN_ERR_TIMEOUT)
        return "unknown";
    // errc_name returns views of string literals: NUL-terminated.
    return rbln::errc_name(static_cast<rbln::Errc>(status)).data();
}

const char* rbln_last_error_message(void) {
    return g_last_error.c_str();
}

rbln_status rbln_device_count(int* count) {
    return guarded([&] {
        if (count == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_device_count: count is NULL");
        *count = static_cast<int>(discover_now().cards.size());
        return RBLN_OK;
    });
}

rbln_status rbln_device_get_info(int index, struct rbln_device_info* info) {
    return guarded([&] {
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
    return guarded([&] {
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
    return guarded([&] {
        const std::lock_guard<std::mutex> lock(g_root_mutex);
        g_root = (root == nullptr || *root == '\0') ? "/" : root;
        rbln::RuntimeOptions options;
        options.root = g_root;
        rbln::Runtime::reset_process(std::move(options));
        return RBLN_OK;
    });
}

rbln_status rbln_logical_device_count(int* count) {
    return guarded([&] {
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
    return guarded([&] {
        if (count == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_physical_device_count: count is NULL");
        *count = static_cast<int>(rbln::Runtime::process().physical_device_count());
        return RBLN_OK;
    });
}

rbln_status rbln_logical_device_npus(int index, uint32_t* npus, size_t capacity, size_t* count) {
    return guarded([&] {
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
    return guarded([&] {
        rbln::Runtime::process().commit();
        return RBLN_OK;
    });
}

rbln_status rbln_get_device(int* index) {
    return guarded([&] {
        if (index == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_get_device: index is NULL");
        *index = static_cast<int>(rbln::Runtime::process().current_device());
        return RBLN_OK;
    });
}

rbln_status rbln_set_device(int index) {
    return guarded([&] {
        if (index < 0)
            return fail(RBLN_ERR_NO_DEVICE,
                        "rbln_set_device: no logical device " + std::to_string(index));
        rbln::Runtime::process().set_device(static_cast<unsigned>(index));
        return RBLN_OK;
    });
}

rbln_status rbln_parse_device(const char* text, int* index) {
    return guarded([&] {
        if (text == nullptr || index == nullptr)
            return fail(RBLN_ERR_INVALID_ARGUMENT, "rbln_parse_device: text or index is NULL");
        const auto parsed = rbln::parse_device_string(text);
        *index = parsed ? static_cast<int>(*parsed) : -1;
        return RBLN_OK;
    });
}

rbln_status rbln_check_fork(void) {
    return guarded([&] {
        rbln::Runtime::process().check_fork();
        return RBLN_OK;
    });
}

} // extern "C"
