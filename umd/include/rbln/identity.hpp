// SPDX-License-Identifier: GPL-2.0
// rbln/identity.hpp - what a card says about itself through GET_INFO:
// its identity (RBLN_INFO_DEVICE) and a telemetry sample
// (RBLN_INFO_TELEMETRY), decoded and validated.  Plain values: a tool or a
// framework may keep and compare them without the kernel interface.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

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

} // namespace rbln

#pragma GCC visibility pop
