// SPDX-License-Identifier: GPL-2.0
// fake_sysfs.cpp - a fake sysfs tree for tests.

#include "fake_sysfs.hpp"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

namespace rbln::test {

namespace fs = std::filesystem;

FakeSysfs::FakeSysfs() {
    std::string tmpl = (fs::temp_directory_path() / "rbln-fake-sysfs-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
        throw std::system_error(errno, std::generic_category(), "mkdtemp");
    root_ = tmpl;
}

FakeSysfs::~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
}

void FakeSysfs::write(const fs::path& rel, const std::string& content) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream f(p);
    f << content << "\n";
    if (!f)
        throw std::runtime_error("cannot write " + p.string());
}

void FakeSysfs::remove(const fs::path& rel) {
    fs::remove_all(root_ / rel);
}

void FakeSysfs::set_busy_ns(const std::string& bdf, unsigned chiplet, std::uint64_t ns) {
    write(card_dir(bdf) / "rbln" / ("chiplet" + std::to_string(chiplet)) / "busy_ns",
          std::to_string(ns));
}

void FakeSysfs::set_fdinfo(pid_t pid, int fd, const std::string& fdinfo) {
    std::ofstream f(root_ / "proc" / std::to_string(pid) / "fdinfo" / std::to_string(fd));
    f << fdinfo;
    if (!f)
        throw std::runtime_error("cannot write the fdinfo of " + std::to_string(pid));
}

void FakeSysfs::load_driver(const std::string& version) {
    fs::create_directories(root_ / "sys/module/rbln");
    if (!version.empty())
        write("sys/module/rbln/version", version);
}

fs::path FakeSysfs::device_dir(const std::string& bdf) {
    return fs::path("sys/devices/pci0000:00") / bdf;
}

fs::path FakeSysfs::card_dir(const std::string& bdf) const {
    const auto it = card_dirs_.find(bdf);
    return it != card_dirs_.end() ? it->second : device_dir(bdf);
}

fs::path FakeSysfs::add_card(const CardSpec& s) {
    fs::path below = fs::path(s.pci_root); // below sys/devices
    for (const auto& b : s.bridges)
        below /= b;
    below /= s.bdf;
    fs::path dev = fs::path("sys/devices") / below;
    card_dirs_[s.bdf] = dev;
    std::string up; // from dev back to sys/: one step per part of devices/<below>
    for (auto n = std::distance(below.begin(), below.end()) + 1; n > 0; n--)
        up += "../";
    const std::string accel = "accel" + std::to_string(s.minor);
    fs::create_directories(root_ / dev);
    fs::create_directories(root_ / "sys/bus/pci/drivers" / s.driver);
    fs::create_directories(root_ / "sys/bus/pci/devices");
    fs::create_directories(root_ / "sys/class/accel");
    fs::create_symlink(fs::path(up + "bus/pci/drivers") / s.driver, root_ / dev / "driver");
    fs::create_symlink(fs::path("../../../devices") / below, root_ / "sys/bus/pci/devices" / s.bdf);
    if (!s.local_cpulist.empty())
        write(dev / "local_cpulist", s.local_cpulist);

    write(dev / "numa_node", std::to_string(s.numa_node));
    write(dev / "vendor", "0x1af4");
    write(dev / "device", "0x1110");
    if (!s.runtime_status.empty())
        write(dev / "power/runtime_status", s.runtime_status);

    const fs::path node = dev / "accel" / accel;
    write(node / "dev", "261:" + std::to_string(s.minor));
    fs::create_symlink(fs::path("../../../") / s.bdf, root_ / node / "device");
    fs::create_symlink(fs::path("../../devices") / below / "accel" / accel,
                       root_ / "sys/class/accel" / accel);

    if (s.rbln_attrs) {
        const fs::path r = dev / "rbln";
        write(r / "family", s.family);
        write(r / "chiplet_count", std::to_string(s.chiplets));
        write(r / "hbm_total_bytes", std::to_string(s.hbm_per_chiplet * s.chiplets));
        write(r / "fw_version", s.fw_version);
        write(r / "fw_iface_version", s.fw_iface_version);
        write(r / "serial", s.serial);
        write(r / "state", s.state);
        if (!s.uuid.empty())
            write(r / "uuid", s.uuid);
        if (s.open_files)
            write(r / "open_files", std::to_string(*s.open_files));
        if (s.card_resets)
            write(r / "card_resets", std::to_string(*s.card_resets));
        if (s.reset_attr)
            std::ofstream(root_ / r / "reset").flush();
        for (unsigned i = 0; i < s.chiplets; i++) {
            const fs::path c = r / ("chiplet" + std::to_string(i));
            write(c / "index", std::to_string(i));
            write(c / "hbm_total_bytes", std::to_string(s.hbm_per_chiplet));
            if (s.hbm_used && i < s.hbm_used->size()) {
                write(c / "hbm_used_bytes", std::to_string((*s.hbm_used)[i]));
                write(c / "hbm_largest_free_bytes",
                      std::to_string(s.hbm_per_chiplet - (*s.hbm_used)[i]));
            }
            if (s.busy_ns && i < s.busy_ns->size())
                write(c / "busy_ns", std::to_string((*s.busy_ns)[i]));
        }
    }
    if (s.hwmon) {
        // A foreign hwmon first, so discovery must pick by name.
        const fs::path other = dev / "hwmon" / ("hwmon" + std::to_string(2 * s.minor));
        write(other / "name", "acpitz");
        write(other / "temp1_input", "99000");
        const fs::path h = dev / "hwmon" / ("hwmon" + std::to_string(2 * s.minor + 1));
        write(h / "name", "rbln");
        if (s.temp_mc) {
            write(h / "temp1_input", std::to_string(*s.temp_mc));
            for (unsigned i = 0; i < s.chiplets; i++)
                write(h / ("temp" + std::to_string(i + 2) + "_input"),
                      std::to_string(*s.temp_mc - 3000 + 1000 * i));
        }
        if (s.power_uw)
            write(h / "power1_input", std::to_string(*s.power_uw));
    }
    return dev;
}

std::string fdinfo_text(const ClientSpec& c) {
    std::string t = "pos:\t0\nflags:\t02100002\nmnt_id:\t25\nino:\t1043\n";
    t += "drm-driver:\t" + c.driver + "\n";
    t += "drm-pdev:\t" + c.pdev + "\n";
    t += "drm-client-id:\t" + std::to_string(c.client_id) + "\n";
    for (std::size_t i = 0; i < c.hbm.size(); i++) {
        const std::string n = std::to_string(i);
        t += "drm-total-hbm" + n + ":\t" + c.hbm[i] + "\n";
        t += "drm-shared-hbm" + n + ":\t0\n";
        t += "drm-resident-hbm" + n + ":\t" + c.hbm[i] + "\n";
    }
    t += "drm-total-memory:\t" + c.memory + "\n";
    t += "drm-shared-memory:\t0\n";
    t += "drm-resident-memory:\t" + c.memory + "\n";
    t += "rbln-pinned-memory:\t" + c.pinned + "\n";
    t += "rbln-asid:\t" + std::to_string(c.asid) + "\n";
    t += "rbln-mmu-faults:\t0\n";
    for (std::size_t i = 0; i < c.engine.size(); i++)
        t += "drm-engine-chiplet" + std::to_string(i) + ":\t" + c.engine[i] + "\n";
    return t;
}

void FakeSysfs::add_process(pid_t pid, const std::string& comm) {
    const fs::path p = fs::path("proc") / std::to_string(pid);
    fs::create_directories(root_ / p / "fd");
    fs::create_directories(root_ / p / "fdinfo");
    write(p / "comm", comm);
}

void FakeSysfs::add_fd(pid_t pid, int fd, std::optional<dev_t> rdev,
                       const std::optional<std::string>& fdinfo) {
    const fs::path p = fs::path("proc") / std::to_string(pid);
    // In /proc this is a magic link; here a file that only probe() knows.
    write(p / "fd" / std::to_string(fd), "");
    if (fdinfo) {
        const fs::path info = root_ / p / "fdinfo" / std::to_string(fd);
        fs::create_directories(info.parent_path());
        std::ofstream f(info);
        f << *fdinfo; // as the kernel prints it: every line ends in '\n'
    }
    (*fds_)[(root_ / p / "fd" / std::to_string(fd)).string()] = FdEntry{rdev, false};
}

void FakeSysfs::deny_fds(pid_t pid) {
    const std::string prefix = (root_ / "proc" / std::to_string(pid) / "fd").string() + "/";
    for (auto& [path, entry] : *fds_)
        if (path.starts_with(prefix))
            entry.denied = true;
}

CharDeviceProbe FakeSysfs::probe() const {
    return [fds = fds_](const fs::path& resolved) -> Result<std::optional<dev_t>> {
        const auto it = fds->find(resolved.string());
        if (it == fds->end())
            return stat_char_device(resolved);
        if (it->second.denied)
            return Error::from_errno("stat", resolved.string(), EACCES);
        return it->second.rdev;
    };
}

} // namespace rbln::test
