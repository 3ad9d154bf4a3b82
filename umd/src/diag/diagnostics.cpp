// SPDX-License-Identifier: GPL-2.0
// diagnostics.cpp - driver presence, busy counters and control-block dumps
// for monitoring tools (rbln/diagnostics.hpp).

#include "rbln/diagnostics.hpp"

#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <filesystem>
#include <system_error>
#include <unistd.h>

#include "kernel/fw_ctrl.hpp"
#include "kernel/sysfs.hpp"
#include "kernel/unique_fd.hpp"
#include "rbln/fdinfo.hpp"

namespace rbln {

namespace {

// More chiplet<i> directories than any card has: a name past this is not one.
constexpr std::size_t kMaxChipletNames = 64;

// The bytes of a control block dump that are read (the block is smaller).
constexpr std::size_t kControlBlockDumpBytes = 4096;

Sysfs sysfs_of(const SystemView& system) {
    return Sysfs(system.root, system.char_device_probe);
}

// i of "<prefix><i>" (digits only: "chiplet_count" is not one), or nullopt.
std::optional<std::size_t> chiplet_index(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix))
        return std::nullopt;
    name.remove_prefix(prefix.size());
    std::size_t i = 0;
    const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), i, 10);
    if (name.empty() || ec != std::errc() || ptr != name.data() + name.size() ||
        i >= kMaxChipletNames)
        return std::nullopt;
    return i;
}

std::optional<std::uint64_t> read_counter(const Sysfs& sys, const std::string& path) {
    auto text = sys.try_read(path);
    if (!text.ok())
        return std::nullopt; // absent (older rbln.ko) or gone with the card
    return Sysfs::parse_u64(text.value(), sys.resolve(path).string());
}

// The first @limit bytes of the file (fewer if it is shorter).
std::vector<std::byte> read_head(const std::string& path, std::size_t limit) {
    const detail::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        throw Error::from_errno("open", path, errno);
    std::vector<std::byte> data(limit);
    std::size_t got = 0;
    while (got < limit) {
        const ssize_t n = ::read(fd.get(), data.data() + got, limit - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw Error::from_errno("read", path, errno);
        }
        if (n == 0)
            break;
        got += static_cast<std::size_t>(n);
    }
    data.resize(got);
    return data;
}

} // namespace

bool driver_loaded(const SystemView& system) {
    return sysfs_of(system).exists("/sys/module/rbln");
}

ClientScan scan_clients(const SystemView& system, std::string_view driver) {
    return scan_clients(sysfs_of(system), driver);
}

BusyCounters parse_engine_ns(std::string_view text) {
    constexpr std::string_view kKey = "drm-engine-chiplet";
    BusyCounters out;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        const std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos)
            continue;
        const auto index = chiplet_index(line.substr(0, colon), kKey);
        if (!index)
            continue;
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
            value.remove_prefix(1);
        std::uint64_t ns = 0;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), ns, 10);
        if (ec != std::errc() || ptr == value.data() ||
            std::string_view(ptr, value.data() + value.size() - ptr) != " ns")
            continue; // malformed: ignored, like every fdinfo line
        if (out.size() <= *index)
            out.resize(*index + 1);
        out[*index] = ns;
    }
    return out;
}

std::map<std::string, BusyCounters> read_card_busy(const SystemView& system) {
    const Sysfs sys = sysfs_of(system);
    std::map<std::string, BusyCounters> cards;
    for (const auto& accel : sys.list("/sys/class/accel", "accel")) {
        const std::string dev = "/sys/class/accel/" + accel + "/device";
        const std::string attrs = dev + "/rbln";
        if (!sys.exists(attrs))
            continue; // not an rbln card
        std::string bdf;
        try {
            bdf = sys.resolved_basename(dev);
        } catch (const Error&) {
            continue; // went away while we looked
        }
        BusyCounters counters;
        for (const auto& name : sys.list(attrs, "chiplet")) {
            const auto i = chiplet_index(name, "chiplet");
            if (!i)
                continue;
            if (counters.size() <= *i)
                counters.resize(*i + 1);
            std::string path = attrs;
            path.append("/").append(name).append("/busy_ns");
            counters[*i] = read_counter(sys, path);
        }
        cards.emplace(std::move(bdf), std::move(counters));
    }
    return cards;
}

std::map<ClientId, BusyCounters> read_client_busy(const SystemView& system,
                                                  const ClientScan& scan) {
    const Sysfs sys = sysfs_of(system);
    std::map<ClientId, BusyCounters> clients;
    for (const auto& client : scan.clients) {
        if (!client.info.client_id)
            continue;
        const std::string dir = "/proc/" + std::to_string(client.pid) + "/fdinfo";
        auto names = sys.try_list(dir);
        if (!names.ok())
            continue; // the process is gone
        for (const auto& name : names.value()) {
            std::string path = dir;
            path.append("/").append(name);
            auto text = sys.try_read(path);
            if (!text.ok())
                continue;
            const FdinfoRecord r = parse_fdinfo(text.value());
            if (r.client_id != client.info.client_id || r.pdev != client.info.pdev)
                continue;
            clients.emplace(ClientId{client.info.pdev, *client.info.client_id},
                            parse_engine_ns(text.value()));
            break;
        }
    }
    return clients;
}

CardPlacement read_card_placement(const SystemView& system, std::string_view pci_bdf) {
    const Sysfs sys = sysfs_of(system);
    const std::string dev = "/sys/bus/pci/devices/" + std::string(pci_bdf);
    const std::filesystem::path link = sys.resolve(dev);
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::canonical(link, ec);
    if (ec)
        throw Error(errc_from_errno(ec.value()), "resolve", link.string(), ec.value(),
                    "the PCI function is not there (" + ec.message() + ")");
    const std::filesystem::path devices =
        std::filesystem::canonical(sys.resolve("/sys/devices"), ec);
    const std::filesystem::path rel =
        ec ? std::filesystem::path{} : target.lexically_relative(devices);
    if (rel.empty() || *rel.begin() == "..")
        throw Error(Errc::BadValue, "resolve", link.string(), 0,
                    "leads to " + target.string() + ", which is not below /sys/devices");
    CardPlacement p;
    for (const auto& part : rel)
        p.pci_path.push_back(part.string());
    p.numa_node = static_cast<int>(sys.read_i64_optional(dev + "/numa_node").value_or(-1));
    p.local_cpulist = sys.read_optional(dev + "/local_cpulist").value_or("");
    return p;
}

CardUse read_card_use(const SystemView& system, std::string_view pci_bdf) {
    const Sysfs sys = sysfs_of(system);
    const std::string attrs = "/sys/bus/pci/devices/" + std::string(pci_bdf) + "/rbln/";
    return CardUse{read_counter(sys, attrs + "open_files"),
                   read_counter(sys, attrs + "card_resets")};
}

void reset_card(const SystemView& system, std::string_view pci_bdf) {
    const Sysfs sys = sysfs_of(system);
    const std::string path =
        sys.resolve("/sys/bus/pci/devices/" + std::string(pci_bdf) + "/rbln/reset").string();
    const detail::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    int err = 0;
    if (!fd) {
        err = errno;
    } else {
        static constexpr std::string_view kOne = "1\n";
        ssize_t n = 0;
        do
            n = ::write(fd.get(), kOne.data(), kOne.size());
        while (n < 0 && errno == EINTR);
        if (n < 0)
            err = errno;
        else if (static_cast<std::size_t>(n) != kOne.size())
            err = EIO;
    }
    switch (err) {
    case 0:
        return;
    case ENOENT:
        throw Error(Errc::NotFound, "reset", path, err,
                    "no such attribute: the card is gone, or rbln.ko is older than the reset "
                    "attribute (reload a newer module, or rebind the card to reset it)");
    case EACCES:
    case EPERM:
        throw Error(Errc::PermissionDenied, "reset", path, err,
                    "permission denied: resetting a card needs root (CAP_SYS_ADMIN)");
    case EBUSY:
        throw Error(Errc::NotReady, "reset", path, err,
                    "the card is busy (EBUSY): it is not ready or a recovery is already on its "
                    "way; see its state, wait and retry, or rebind the driver if its recovery "
                    "failed");
    case EOPNOTSUPP:
        throw Error(Errc::InvalidArgument, "reset", path, err,
                    "not supported (EOPNOTSUPP): the module parameter recovery is off; "
                    "'echo Y > /sys/module/rbln/parameters/recovery' enables resets");
    case EIO:
        throw Error(Errc::Io, "reset", path, err,
                    "the card did not come back (EIO): it stays in fault; see 'dmesg | grep rbln' "
                    "and rebind the driver to retry");
    default:
        throw Error::from_errno("reset", path, err);
    }
}

fw::ControlBlock read_control_block(const std::string& path) {
    const auto bytes = read_head(path, kControlBlockDumpBytes);
    return fw::parse_control_block(bytes, path).value();
}

} // namespace rbln
