// SPDX-License-Identifier: GPL-2.0
// rbln/kernel.hpp - the one narrow interface through which librbln talks to
// rbln.ko.  KernelDevice is the only code that issues ioctls; tests put a
// fake behind KernelInterface.  Later issues add buffers, queues and submit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "rbln/detail/unique_fd.hpp"
#include "rbln/error.hpp"

namespace rbln {

/// The answer of DRM_IOCTL_VERSION.
struct DrmVersion {
    int major = 0;
    int minor = 0;
    int patchlevel = 0;
    std::string name;
    std::string date;
    std::string desc;
};

/// Maximum chiplets per card (RBLN_MAX_CHIPLETS of the uAPI).
inline constexpr unsigned kMaxChiplets = 8;

/// RBLN_INFO_DEVICE, decoded and validated.
struct DeviceIdentity {
    std::uint32_t family = 0; ///< RBLN_FAMILY_*
    std::uint32_t chiplet_count = 0;
    std::uint32_t fw_iface_major = 0;
    std::uint32_t fw_iface_minor = 0;
    std::uint32_t pci_domain = 0;
    std::uint8_t pci_bus = 0;
    std::uint8_t pci_dev = 0;
    std::uint8_t pci_func = 0;
    std::int32_t numa_node = -1;
    std::array<std::uint64_t, kMaxChiplets> hbm_size{}; ///< bytes per chiplet
    std::string fw_version;
    std::string serial;
    std::array<std::uint8_t, 16> uuid{};
    std::uint32_t answer_size = 0; ///< full size the kernel reported

    /// "dddd:bb:dd.f"
    std::string pci_bdf() const;
};

/// One chiplet of RBLN_INFO_TELEMETRY.
struct ChipletTelemetry {
    std::int32_t temp_mc = 0;
    std::uint32_t clock_mhz = 0;
    std::uint32_t mem_clock_mhz = 0;
    std::uint64_t busy_ns = 0;
};

/// RBLN_INFO_TELEMETRY, decoded and validated.
struct TelemetrySample {
    std::uint64_t timestamp_ns = 0;
    std::int32_t temp_mc = 0;
    std::uint64_t power_uw = 0;
    std::uint32_t chiplet_count = 0;
    std::array<ChipletTelemetry, kMaxChiplets> chiplet{};
};

/// What an open rbln node can do.  Implementations: KernelDevice (the real
/// node) and fakes in tests.
class KernelInterface {
public:
    KernelInterface() = default;
    KernelInterface(const KernelInterface&) = delete;
    KernelInterface& operator=(const KernelInterface&) = delete;
    KernelInterface(KernelInterface&&) = delete;
    KernelInterface& operator=(KernelInterface&&) = delete;
    virtual ~KernelInterface() = default;

    /// The node's path (for messages).
    virtual const std::string& path() const = 0;
    /// DRM_IOCTL_VERSION as read at open time.
    virtual const DrmVersion& drm_version() const = 0;
    /// DRM_IOCTL_RBLN_GET_INFO: the kernel writes min(out.size(), full)
    /// bytes into @out; returns the full size of the answer.  Throws Error.
    virtual std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) = 0;
};

/// GET_INFO(RBLN_INFO_DEVICE) with the size protocol; validates the answer
/// (chiplet count, NUL-terminated strings) and throws Errc::BadValue if not.
DeviceIdentity query_device_identity(KernelInterface& kernel);

/// GET_INFO(RBLN_INFO_TELEMETRY); an admin round trip to the card.
TelemetrySample query_telemetry(KernelInterface& kernel);

/// The real /dev/accel/accelN.
class KernelDevice final : public KernelInterface {
    struct Key {
        explicit Key() = default;
    };

public:
    /// open(O_RDWR | O_CLOEXEC) and DRM_IOCTL_VERSION; fails with
    /// Errc::WrongDriver unless the node is served by "rbln".
    static Result<std::unique_ptr<KernelDevice>> open(const std::string& path);

    KernelDevice(Key key, detail::UniqueFd fd, std::string path, DrmVersion version);
    ~KernelDevice() override;

    const std::string& path() const override { return path_; }
    const DrmVersion& drm_version() const override { return version_; }
    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override;

    int fd() const noexcept { return fd_.get(); }

private:
    detail::UniqueFd fd_;
    std::string path_;
    DrmVersion version_;
};

/// How discovery opens a node; tests substitute a fake.
using DeviceOpener = std::function<Result<std::unique_ptr<KernelInterface>>(const std::string&)>;

/// The default opener: KernelDevice::open.
Result<std::unique_ptr<KernelInterface>> open_kernel_device(const std::string& path);

} // namespace rbln
