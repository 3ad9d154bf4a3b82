// SPDX-License-Identifier: GPL-2.0
// fake_sysfs.hpp - builds a fake sysfs tree (as rbln.ko lays it out) in a
// temporary directory, for discovery and rbln-smi tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

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
};

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

    /// "sys/devices/pci0000:00/<bdf>"
    static std::filesystem::path device_dir(const std::string& bdf);

private:
    std::filesystem::path root_;
};

} // namespace rbln::test
