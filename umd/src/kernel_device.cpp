// SPDX-License-Identifier: GPL-2.0
// kernel_device.cpp - the only code of librbln that issues ioctls.

#include "rbln/kernel.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <xf86drm.h>

#include "drm/rbln_accel.h"
#include "rbln/detail/unique_fd.hpp"

namespace rbln {

static_assert(kMaxChiplets == RBLN_MAX_CHIPLETS);

namespace {

// The v1 answer sizes: a kernel never answers less than the first version.
constexpr std::uint32_t kDeviceV1Size = sizeof(drm_rbln_info_device);
constexpr std::uint32_t kTelemetryV1Size = sizeof(drm_rbln_info_telemetry);

template <std::size_t N>
std::string fixed_string(const char (&field)[N], const std::string& path, const char* name) {
    const void* nul = std::memchr(field, '\0', N);
    if (nul == nullptr)
        throw Error(Errc::BadValue, "ioctl GET_INFO(DEVICE)", path, 0,
                    std::string("the kernel's ") + name + " is not NUL-terminated");
    return {field, static_cast<const char*>(nul)};
}

template <typename T>
std::uint32_t query(KernelInterface& kernel, std::uint32_t type, T& answer, std::uint32_t min_size,
                    const char* what) {
    std::memset(&answer, 0, sizeof(answer));
    const std::uint32_t full = kernel.get_info(
        type, std::span<std::byte>(reinterpret_cast<std::byte*>(&answer), sizeof(answer)));
    if (full < min_size)
        throw Error(Errc::BadValue, std::string("ioctl GET_INFO(") + what + ")", kernel.path(), 0,
                    "the kernel answered " + std::to_string(full) + " bytes, less than the " +
                        std::to_string(min_size) + " of uAPI v1: rbln.ko and librbln disagree");
    return full;
}

} // namespace

std::string DeviceIdentity::pci_bdf() const {
    std::array<char, 32> buf{};
    std::snprintf(buf.data(), buf.size(), "%04x:%02x:%02x.%x", pci_domain, pci_bus, pci_dev,
                  pci_func);
    return buf.data();
}

DeviceIdentity query_device_identity(KernelInterface& kernel) {
    drm_rbln_info_device raw{};
    DeviceIdentity id;
    id.answer_size = query(kernel, RBLN_INFO_DEVICE, raw, kDeviceV1Size, "DEVICE");
    if (raw.chiplet_count < 1 || raw.chiplet_count > RBLN_MAX_CHIPLETS)
        throw Error(Errc::BadValue, "ioctl GET_INFO(DEVICE)", kernel.path(), 0,
                    "the kernel reports " + std::to_string(raw.chiplet_count) +
                        " chiplets; expected 1.." + std::to_string(RBLN_MAX_CHIPLETS));
    id.family = raw.family;
    id.chiplet_count = raw.chiplet_count;
    id.fw_iface_major = raw.fw_iface_major;
    id.fw_iface_minor = raw.fw_iface_minor;
    id.pci_domain = raw.pci_domain;
    id.pci_bus = raw.pci_bus;
    id.pci_dev = raw.pci_dev;
    id.pci_func = raw.pci_func;
    id.numa_node = raw.numa_node;
    for (unsigned i = 0; i < kMaxChiplets; i++)
        id.hbm_size[i] = raw.hbm_size[i];
    id.fw_version = fixed_string(raw.fw_version, kernel.path(), "fw_version");
    id.serial = fixed_string(raw.serial, kernel.path(), "serial");
    std::memcpy(id.uuid.data(), raw.uuid, id.uuid.size());
    return id;
}

TelemetrySample query_telemetry(KernelInterface& kernel) {
    drm_rbln_info_telemetry raw{};
    query(kernel, RBLN_INFO_TELEMETRY, raw, kTelemetryV1Size, "TELEMETRY");
    if (raw.chiplet_count > RBLN_MAX_CHIPLETS)
        throw Error(Errc::BadValue, "ioctl GET_INFO(TELEMETRY)", kernel.path(), 0,
                    "the kernel reports " + std::to_string(raw.chiplet_count) +
                        " chiplets; at most " + std::to_string(RBLN_MAX_CHIPLETS) + " exist");
    TelemetrySample t;
    t.timestamp_ns = raw.timestamp_ns;
    t.temp_mc = raw.temp_mc;
    t.power_uw = raw.power_uw;
    t.chiplet_count = raw.chiplet_count;
    for (unsigned i = 0; i < raw.chiplet_count; i++) {
        t.chiplet[i].temp_mc = raw.chiplet[i].temp_mc;
        t.chiplet[i].clock_mhz = raw.chiplet[i].clock_mhz;
        t.chiplet[i].mem_clock_mhz = raw.chiplet[i].mem_clock_mhz;
        t.chiplet[i].busy_ns = raw.chiplet[i].busy_ns;
    }
    return t;
}

KernelDevice::KernelDevice(Key /*key*/, detail::UniqueFd fd, std::string path, DrmVersion version)
    : fd_(std::move(fd)), path_(std::move(path)), version_(std::move(version)) {}

KernelDevice::~KernelDevice() = default;

Result<std::unique_ptr<KernelDevice>> KernelDevice::open(const std::string& path) {
    detail::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd)
        return Error::from_errno("open", path, errno);

    const std::unique_ptr<drmVersion, decltype(&drmFreeVersion)> v(drmGetVersion(fd.get()),
                                                                   &drmFreeVersion);
    if (!v)
        return Error::from_errno("ioctl DRM_IOCTL_VERSION", path, errno);
    DrmVersion version;
    version.major = v->version_major;
    version.minor = v->version_minor;
    version.patchlevel = v->version_patchlevel;
    version.name.assign(v->name != nullptr ? v->name : "", v->name_len > 0 ? v->name_len : 0);
    version.date.assign(v->date != nullptr ? v->date : "", v->date_len > 0 ? v->date_len : 0);
    version.desc.assign(v->desc != nullptr ? v->desc : "", v->desc_len > 0 ? v->desc_len : 0);

    if (version.name != "rbln")
        return Error(Errc::WrongDriver, "open", path, 0,
                     "the node is served by driver '" + version.name + "', not 'rbln'");
    return std::make_unique<KernelDevice>(Key{}, std::move(fd), path, std::move(version));
}

std::uint32_t KernelDevice::get_info(std::uint32_t type, std::span<std::byte> out) {
    drm_rbln_get_info args{};
    args.type = type;
    args.size = static_cast<std::uint32_t>(out.size());
    args.ptr = reinterpret_cast<std::uintptr_t>(out.data());
    if (drmIoctl(fd_.get(), DRM_IOCTL_RBLN_GET_INFO, &args) != 0)
        throw Error::from_errno("ioctl GET_INFO(type " + std::to_string(type) + ")", path_, errno);
    return args.size;
}

Result<std::unique_ptr<KernelInterface>> open_kernel_device(const std::string& path) {
    auto dev = KernelDevice::open(path);
    if (!dev)
        return dev.error();
    return std::unique_ptr<KernelInterface>(std::move(dev).value());
}

} // namespace rbln
