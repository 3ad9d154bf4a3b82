// SPDX-License-Identifier: GPL-2.0
// fake_sysfs.hpp - builds a fake sysfs tree (as rbln.ko lays it out) in a
// temporary directory, for discovery and rbln-smi tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <vector>

#include "kernel/sysfs.hpp"

namespace rbln::test {

struct CardSpec {
    unsigned minor = 0;
    std::string bdf = "0000:00:04.0";
    std::string driver = "rbln";
    std::string family = "rebel100";
    unsigned chiplets = 4;
    std::uint64_t hbm_per_chiplet = 256ull << 20;
    std::string fw_version = "rbln-emu 0.1.0";
    std::string fw_iface_version = "1.0";
    std::string serial = "RBLNEMU-0001";
    std::string state = "ready";
    std::string uuid = "00112233-4455-6677-8899-aabbccddeeff"; ///< empty: no rbln/uuid
    std::string runtime_status = "active";
    std::optional<std::int64_t> temp_mc = 45000; ///< chiplet i: temp_mc - 3000 + 1000 * i
    std::optional<std::uint64_t> power_uw = 75000000;
    int numa_node = -1;
    bool rbln_attrs = true; ///< the device/rbln/ attribute group
    bool hwmon = true;
    /// rbln/chiplet<i>/hbm_used_bytes (and hbm_largest_free_bytes = the
    /// rest of the chiplet); nullopt: neither file, as with an older rbln.ko.
    std::optional<std::vector<std::uint64_t>> hbm_used;
    /// rbln/chiplet<i>/busy_ns for i < size(); nullopt: none, as with an
    /// older rbln.ko.
    std::optional<std::vector<std::uint64_t>> busy_ns{};
    /// The PCI path: the root bus, then the bridges above the function
    /// (sys/devices/<pci_root>/<bridges...>/<bdf>).
    std::string pci_root = "pci0000:00";
    std::vector<std::string> bridges{};
    std::string local_cpulist{}; ///< device/local_cpulist; empty: no file
    /// rbln/open_files and rbln/card_resets; nullopt: no file (older rbln.ko).
    std::optional<std::uint64_t> open_files = 0;
    std::optional<std::uint64_t> card_resets = 0;
    bool reset_attr = true; ///< an empty rbln/reset (what rbln-smi writes stays in it)
};

/// What the kernel prints in the fdinfo of an open /dev/accel/accelN.
struct ClientSpec {
    std::string driver = "rbln";
    std::string pdev = "0000:00:04.0";
    std::uint64_t client_id = 1;
    std::vector<std::string> hbm = {"2 MiB", "0", "0", "0"}; ///< drm-total/resident-hbm<i>
    std::string memory = "64 KiB";                           ///< drm-total-memory
    std::string pinned = "0";                                ///< rbln-pinned-memory
    unsigned asid = 5;
    /// drm-engine-chiplet<i> values as printed ("1000 ns"); empty: no lines.
    std::vector<std::string> engine{};
};

/// The fdinfo text for @spec, with the VFS lines (pos, flags, ...) first.
std::string fdinfo_text(const ClientSpec& spec);

/// Device numbers for FakeSysfs::add_fd.
inline dev_t accel_dev(unsigned minor) {
    return makedev(261, minor);
}

class FakeSysfs {
public:
    FakeSysfs();
    FakeSysfs(const FakeSysfs&) = delete;
    FakeSysfs& operator=(const FakeSysfs&) = delete;
    FakeSysfs(FakeSysfs&&) = delete;
    FakeSysfs& operator=(FakeSysfs&&) = delete;
    ~FakeSysfs();

    const std::filesystem::path& root() const { return root_; }

    /// /sys/module/rbln (with version, unless empty).
    void load_driver(const std::string& version = "0.1.0");
    /// Adds a PCI device with its accel node; returns the device directory.
    std::filesystem::path add_card(const CardSpec& spec);
    /// Writes @content (plus a newline) to root/@rel, creating directories.
    void write(const std::filesystem::path& rel, const std::string& content);
    /// Removes root/@rel.
    void remove(const std::filesystem::path& rel);
    /// Sets rbln/chiplet<@chiplet>/busy_ns of the card at @bdf.
    void set_busy_ns(const std::string& bdf, unsigned chiplet, std::uint64_t ns);
    /// Replaces /proc/<pid>/fdinfo/<fd> (the kernel's figures changed).
    void set_fdinfo(pid_t pid, int fd, const std::string& fdinfo);

    /// /proc/<pid> with comm @comm and an empty fd/ and fdinfo/.
    void add_process(pid_t pid, const std::string& comm);
    /// fd @fd of @pid: /proc/<pid>/fd/<fd>, which probe() says is the
    /// character device @rdev (nullopt: not a device, e.g. a socket), and,
    /// unless @fdinfo is nullopt, /proc/<pid>/fdinfo/<fd>.
    void add_fd(pid_t pid, int fd, std::optional<dev_t> rdev,
                const std::optional<std::string>& fdinfo);
    /// From now on probe() answers EACCES for the fds @pid has, as for
    /// another user's process.
    void deny_fds(pid_t pid);
    /// The CharDeviceProbe of this tree (for Sysfs and rbln-smi's run()):
    /// the fds added with add_fd are what they were added as; any other
    /// path is stat()ed.
    CharDeviceProbe probe() const;

    /// "sys/devices/pci0000:00/<bdf>" (a card without bridges)
    static std::filesystem::path device_dir(const std::string& bdf);
    /// The device directory of the card added at @bdf (with its bridges).
    std::filesystem::path card_dir(const std::string& bdf) const;

private:
    struct FdEntry {
        std::optional<dev_t> rdev;
        bool denied = false;
    };
    std::filesystem::path root_;
    std::map<std::string, std::filesystem::path> card_dirs_; ///< by BDF
    /// resolved /proc/<pid>/fd/<fd> -> what it is; shared with probe()s.
    std::shared_ptr<std::map<std::string, FdEntry>> fds_ =
        std::make_shared<std::map<std::string, FdEntry>>();
};

} // namespace rbln::test
