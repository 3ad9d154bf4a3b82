// SPDX-License-Identifier: GPL-2.0
// rbln/diagnostics.hpp - what a monitoring tool (rbln-smi) reads about the
// cards besides discovery (rbln/discovery.hpp) and their clients
// (rbln/fdinfo.hpp): whether the driver is loaded, the chiplets' busy
// counters (the card's sysfs chiplet<i>/busy_ns and each client's fdinfo
// drm-engine-chiplet<i>), where a card sits (PCI path, NUMA node, local
// CPUs), whether it is in use (sysfs open_files), a card reset (sysfs
// reset), and a dump of the firmware control block, decoded and validated.
//
// Everything is read below a SystemView: a directory that plays "/"
// (tests and `rbln-smi --root` use a fake tree) and how an entry of
// /proc/<pid>/fd is classified (a file of a fake tree cannot be a device
// node, so tests say what it "is").  Nothing here opens a node or wakes a
// card; only reset_card() changes anything.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rbln/error.hpp"

#include <sys/types.h>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

struct ClientScan; // rbln/fdinfo.hpp

/// Says what character device a path (already resolved into the root) is:
/// its st_rdev, nullopt if the path is not a character device, or the
/// error of stat() (NotFound, PermissionDenied, ...).  Tests inject one,
/// because a file in a fake tree cannot be a device node.
using CharDeviceProbe =
    std::function<Result<std::optional<dev_t>>(const std::filesystem::path& resolved)>;

/// Where the diagnostics read the machine.
struct SystemView {
    std::filesystem::path root = "/";  ///< the directory that plays "/"
    CharDeviceProbe char_device_probe; ///< empty: stat()
};

/// Whether rbln.ko is loaded (/sys/module/rbln exists).
bool driver_loaded(const SystemView& system);

/// The DRM clients of @driver's cards (rbln/fdinfo.hpp), from /proc below
/// @system's root.
ClientScan scan_clients(const SystemView& system, std::string_view driver = "rbln");

/// Per chiplet i: a busy counter in ns, nullopt if it was not there.
using BusyCounters = std::vector<std::optional<std::uint64_t>>;

/// A DRM client across two scans: its card's PCI BDF (drm-pdev) and its
/// drm-client-id.
using ClientId = std::pair<std::string, std::uint64_t>;

/// The drm-engine-chiplet<i> values of one fdinfo text ("<n> ns", the unit
/// of Documentation/gpu/drm-usage-stats.rst); a missing or malformed key is
/// nullopt; the vector ends at the highest index found.
BusyCounters parse_engine_ns(std::string_view fdinfo);

/// chiplet<i>/busy_ns (the card time the chiplet's command ring spent
/// running jobs) of every card below /sys/class/accel that has the rbln
/// attribute directory (device/rbln/), keyed by its PCI BDF.  An absent or
/// unreadable file is nullopt (an older rbln.ko); a value that is not a
/// number throws Errc::BadValue naming the file.
std::map<std::string, BusyCounters> read_card_busy(const SystemView& system);

/// The drm-engine-chiplet<i> counters of every client of @scan (from the
/// fdinfo of one fd of the client in the lowest holder's /proc/<pid>).
/// A client whose fdinfo is gone, or that has no drm-client-id, is absent.
std::map<ClientId, BusyCounters> read_client_busy(const SystemView& system, const ClientScan& scan);

/// Where a card sits on the machine (for a topology view).
struct CardPlacement {
    /// The PCI path of the function below /sys/devices: its root bus
    /// ("pci0000:00"), every bridge on the way, then the function's BDF.
    std::vector<std::string> pci_path;
    int numa_node = -1;        ///< device/numa_node; -1: none or unknown
    std::string local_cpulist; ///< device/local_cpulist ("0-3,8"), "" if absent
};

/// The placement of the PCI function @pci_bdf (from
/// /sys/bus/pci/devices/<bdf>, resolved).  Throws Errc::NotFound if the
/// function is absent, Errc::BadValue if it does not resolve below
/// /sys/devices or numa_node is not a number.
CardPlacement read_card_placement(const SystemView& system, std::string_view pci_bdf);

/// A card's use and resets, from its sysfs rbln/ directory; nullopt where
/// the module does not export the file (an older rbln.ko) or it cannot be
/// read.
struct CardUse {
    /// rbln/open_files: open files of the accel node, also those that no
    /// process has in its fd table (a mapping made before the fd was
    /// closed, an io_uring registered file, an fd in flight).
    std::optional<std::uint64_t> open_files;
    std::optional<std::uint64_t> card_resets; ///< rbln/card_resets
};

/// The CardUse of the card at @pci_bdf; a value that is not a number
/// throws Errc::BadValue naming the file.
CardUse read_card_use(const SystemView& system, std::string_view pci_bdf);

/// Resets the card at @pci_bdf: writes 1 to its sysfs rbln/reset, which
/// returns once the card is ready again (kernel/README.md).  Processes
/// that hold the card are not asked: callers check first (rbln-smi
/// --reset).  Errors, each saying what to do: Errc::NotFound (the module
/// has no reset attribute, or the card is gone), Errc::PermissionDenied
/// (not root), Errc::NotReady (EBUSY: the card is not ready or a recovery
/// is already on its way), Errc::InvalidArgument (EOPNOTSUPP: the module
/// parameter recovery is off), Errc::Io (EIO: the recovery failed, the
/// card stays in fault), Errc::DeviceGone (ENODEV).
void reset_card(const SystemView& system, std::string_view pci_bdf);

namespace fw {

/// One chiplet's HBM aperture in the card's BAR.
struct HbmRegion {
    std::uint64_t bar_offset = 0;
    std::uint64_t size = 0;
};

/// The decoded identity and state part of the firmware-iface control block
/// (firmware-iface/rbln_fw_ctrl.h, spec rbln_fw_ctrl.md).
struct ControlBlock {
    std::uint16_t iface_major = 0;
    std::uint16_t iface_minor = 0;
    std::uint32_t ctrl_size = 0;
    std::uint32_t family = 0;
    std::uint32_t chiplet_count = 0;
    std::uint32_t doorbell_peer_id = 0;
    std::uint32_t num_vectors = 0;
    std::array<std::uint8_t, 16> uuid{};
    std::string serial;
    std::string fw_version;
    std::uint64_t bar_size = 0;
    std::vector<HbmRegion> hbm; ///< chiplet_count entries
    std::uint32_t fw_state = 0;
    std::uint32_t fault_code = 0;
    std::string fault_reason;
    std::uint32_t host_ack = 0;
    std::uint32_t admin_sq_head = 0;
    std::uint64_t heartbeat = 0;
    std::uint32_t host_ctrl = 0;
    std::uint32_t host_gen = 0;
    std::uint32_t ring_entries = 0;
};

/// "reset", "booting", "ready", "fault", or "unknown(N)".
std::string fw_state_name(std::uint32_t state);
/// "none", "bad-ring-config", "bad-iface", "internal", "thermal", or "unknown(N)".
std::string fault_code_name(std::uint32_t code);

} // namespace fw

/// Decodes and validates the control block at the start of the file @path
/// (a dump of the control block, or of a BAR that starts with one; its
/// first 4 KiB are read): size, magic, major version (a newer minor is
/// accepted), ctrl_size, family, chiplet count, vectors, BAR size, every
/// HBM aperture, NUL-terminated strings.  Errors: the open or read
/// (Errc::NotFound, Errc::PermissionDenied, ...) and Errc::BadControlBlock
/// saying which rule failed.
fw::ControlBlock read_control_block(const std::string& path);

} // namespace rbln

#pragma GCC visibility pop
