// SPDX-License-Identifier: GPL-2.0
// rbln/fdinfo.hpp - the clients of rbln cards, from /proc/<pid>/fdinfo.
//
// Every open file of /dev/accel/accelN is a DRM client; the kernel prints its
// figures in /proc/<pid>/fdinfo/<fd> as "key:\tvalue" lines (DRM usage stats,
// Documentation/gpu/drm-usage-stats.rst, plus rbln-* keys).  scan_clients()
// (rbln/diagnostics.hpp) walks /proc below a root (tests use a fake tree),
// keeps the fds that are accel character devices (major 261; checked
// through a CharDeviceProbe, so tests can say what a fake file "is") and
// whose fdinfo says drm-driver rbln, and merges the fds and processes that
// share one client (dup, fork, SCM_RIGHTS) by drm-client-id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// Major number of /dev/accel/accelN (DRM's /dev/dri is 226, not this).
inline constexpr unsigned kAccelMajor = 261;

/// One memory region of one client (drm-{total,shared,resident}-<region>);
/// a key the kernel did not print (or printed unreadably) is nullopt.
struct RegionUsage {
    std::optional<std::uint64_t> total_bytes;
    std::optional<std::uint64_t> shared_bytes;
    std::optional<std::uint64_t> resident_bytes;
};

/// What one fdinfo file says.  Unknown keys and malformed lines are ignored.
struct FdinfoRecord {
    std::string driver; ///< drm-driver ("" if absent)
    std::string pdev;   ///< drm-pdev, the card's PCI BDF ("" if absent)
    std::optional<std::uint64_t> client_id;
    std::vector<RegionUsage> hbm;              ///< index = chiplet (drm-*-hbm<i>); holes stay empty
    RegionUsage host;                          ///< drm-*-memory: host RAM, pinned pages, imports
    std::optional<std::uint64_t> pinned_bytes; ///< rbln-pinned-memory
    std::optional<std::uint64_t> asid;         ///< rbln-asid
    std::optional<std::uint64_t> mmu_faults;   ///< rbln-mmu-faults
};

/// A size as drm_print_memory_stats() prints it: a decimal number and an
/// optional unit (" KiB", " MiB", " GiB", " TiB"); nullopt if malformed or
/// out of range.
std::optional<std::uint64_t> parse_fdinfo_size(std::string_view text);

/// Parses the text of one fdinfo file.
FdinfoRecord parse_fdinfo(std::string_view text);

/// A process that holds a client.
struct ClientHolder {
    pid_t pid = 0;
    std::string comm; ///< /proc/<pid>/comm ("" if it could not be read)
};

/// One DRM client of an rbln card, counted once however many fds and
/// processes reach it.
struct AccelClient {
    pid_t pid = 0;                     ///< the lowest PID that holds it
    std::string comm;                  ///< that process's name
    std::vector<ClientHolder> holders; ///< every holder, sorted by PID (holders[0] is pid)
    unsigned accel_minor = 0;          ///< N of the /dev/accel/accelN it is an open file of
    FdinfoRecord info;
};

struct ClientScan {
    /// Sorted by PID, then drm-client-id.
    std::vector<AccelClient> clients;
    /// Processes whose fds or fdinfo could not be read (EACCES/EPERM:
    /// another user's process, unless root).  Their clients are missing.
    unsigned processes_denied = 0;
};

} // namespace rbln

#pragma GCC visibility pop
