// SPDX-License-Identifier: GPL-2.0
// rbln/discovery.hpp - finding the rbln cards of the machine.
//
// Discovery walks /sys/class/accel/accel* (libdrm does not enumerate
// /dev/accel), keeps the nodes whose PCI device is bound to "rbln", reads
// the card's sysfs attributes and hwmon, opens the node to confirm the
// driver (DRM_IOCTL_VERSION) and to read its identity (GET_INFO), and sorts
// the cards by accel minor.  The index into that list is the physical NPU id.
//
// A runtime-suspended card is never woken: its node is not opened and its
// hwmon is not read; its telemetry is reported as unavailable.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rbln/error.hpp"

namespace rbln {
/// librbln's kernel interface (internal: an open node to the library,
/// a fake in tests); hidden from librbln.so (rbln/export.h).
class KernelInterface;
} // namespace rbln

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// How discovery opens a node (empty: the real node); tests substitute a
/// fake.
using DeviceOpener = std::function<Result<std::unique_ptr<KernelInterface>>(const std::string&)>;

enum class Family { Unknown, Rebel100, Atom };

/// "Rebel100", "ATOM", or "Unknown".
std::string_view family_display_name(Family family) noexcept;
/// "rebel100", "atom" (the sysfs spelling), or "unknown".
std::string_view family_key(Family family) noexcept;
/// Parses the sysfs spelling (case-insensitive); Unknown if not recognised.
Family family_from_string(std::string_view text) noexcept;

struct ChipletInfo {
    unsigned index = 0;
    std::uint64_t hbm_total_bytes = 0;
    std::optional<std::int64_t> temperature_mc; ///< hwmon temp<2+index>_input
    /// rbln/chiplet<i>/hbm_used_bytes and hbm_largest_free_bytes; nullopt
    /// if the module does not export them (older rbln.ko) or the read failed.
    std::optional<std::uint64_t> hbm_used_bytes;
    std::optional<std::uint64_t> hbm_largest_free_bytes;
};

struct CardInfo {
    unsigned index = 0;       ///< physical NPU id (position in the sorted list)
    unsigned accel_minor = 0; ///< N of accelN
    std::string accel_name;   ///< "accel0"
    std::string accel_node;   ///< "/dev/accel/accel0" (system path, without --root)
    std::string pci_bdf;      ///< "0000:00:04.0"
    int numa_node = -1;

    Family family = Family::Unknown;
    std::string family_name; ///< sysfs spelling, e.g. "rebel100"
    unsigned chiplet_count = 0;
    std::uint64_t hbm_total_bytes = 0;
    /// Sum of the chiplets' hbm_used_bytes; nullopt unless every chiplet has it.
    std::optional<std::uint64_t> hbm_used_bytes;
    std::vector<ChipletInfo> chiplets;
    std::string fw_version;
    unsigned fw_iface_major = 0;
    unsigned fw_iface_minor = 0;
    std::string serial;
    std::string state; ///< driver's card state ("ready", ...), "unknown" if not exported
    std::optional<std::array<std::uint8_t, 16>> uuid; ///< rbln/uuid or GET_INFO

    std::string runtime_status; ///< device/power/runtime_status, "" if absent
    bool suspended = false;     ///< runtime_status == "suspended": nothing was woken

    /// hwmon temp1_input (or GET_INFO); unavailable if suspended or the
    /// card does not answer (hwmon read fails with EIO/ENODATA).
    std::optional<std::int64_t> temperature_mc;
    std::optional<std::uint64_t> power_uw; ///< hwmon power1_input (or GET_INFO)

    bool identity_from_kernel = false; ///< GET_INFO answered
    bool identity_from_sysfs = false;  ///< all rbln/ sysfs identity attributes present
    std::optional<Error> node_error;   ///< why the node was not opened/queried, if it was not
};

struct DriverInfo {
    std::string name = "rbln";
    std::string version; ///< /sys/module/rbln/version, "unknown" if absent
};

struct DiscoveryOptions {
    std::filesystem::path root = "/"; ///< fake root for tests / rbln-smi --root
    bool open_nodes = true;           ///< open /dev/accel/accelN (never if suspended)
    /// If hwmon is absent and the node is open, sample GET_INFO(TELEMETRY).
    bool telemetry_fallback = true;
    DeviceOpener opener; ///< empty: the real node
};

struct Discovery {
    DriverInfo driver;
    std::vector<CardInfo> cards; ///< sorted by accel minor; may be empty
};

/// Finds the cards.  Throws Errc::DriverNotLoaded if /sys/module/rbln is
/// absent, Errc::BadValue (naming the file) for a malformed attribute, and
/// the node's open error (e.g. Errc::PermissionDenied) if a card's identity
/// is neither in sysfs nor obtainable from the node.  No cards is not an
/// error here (an empty list); callers decide (rbln-smi exits 4).
Discovery discover(const DiscoveryOptions& options = {});

} // namespace rbln

#pragma GCC visibility pop
