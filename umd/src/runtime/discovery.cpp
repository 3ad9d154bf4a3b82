// SPDX-License-Identifier: GPL-2.0
// discovery.cpp - finding rbln cards through sysfs, hwmon and GET_INFO.

#include "rbln/discovery.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <type_traits>

#include "kernel/kernel.hpp"
#include "kernel/sysfs.hpp"

namespace rbln {

std::string_view family_display_name(Family family) noexcept {
    switch (family) {
    case Family::Rebel100:
        return "Rebel100";
    case Family::Atom:
        return "ATOM";
    case Family::Unknown:
        break;
    }
    return "Unknown";
}

std::string_view family_key(Family family) noexcept {
    switch (family) {
    case Family::Rebel100:
        return "rebel100";
    case Family::Atom:
        return "atom";
    case Family::Unknown:
        break;
    }
    return "unknown";
}

Family family_from_string(std::string_view text) noexcept {
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "rebel100")
        return Family::Rebel100;
    if (lower == "atom")
        return Family::Atom;
    return Family::Unknown;
}

namespace {

constexpr const char* kModuleDir = "/sys/module/rbln";
constexpr const char* kAccelClass = "/sys/class/accel";

Family family_from_uapi(std::uint32_t family) {
    switch (family) {
    case 1: // RBLN_FAMILY_REBEL100
        return Family::Rebel100;
    case 2: // RBLN_FAMILY_ATOM
        return Family::Atom;
    default:
        return Family::Unknown;
    }
}

// "accel12" -> 12; nullopt for anything that is not accel<decimal>.
std::optional<unsigned> accel_minor(std::string_view name) {
    constexpr std::string_view prefix = "accel";
    if (!name.starts_with(prefix) || name.size() == prefix.size() ||
        name.size() > prefix.size() + 6)
        return std::nullopt;
    unsigned minor = 0;
    for (char c : name.substr(prefix.size())) {
        if (c < '0' || c > '9')
            return std::nullopt;
        minor = minor * 10 + static_cast<unsigned>(c - '0');
    }
    return minor;
}

// dddd:bb:dd.f with lowercase or uppercase hex digits.
bool is_pci_bdf(std::string_view s) {
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.')
        return false;
    for (std::size_t i = 0; i < s.size(); i++) {
        if (i == 4 || i == 7 || i == 10)
            continue;
        if (std::isxdigit(static_cast<unsigned char>(s[i])) == 0)
            return false;
    }
    return s[11] >= '0' && s[11] <= '7';
}

void parse_iface_version(const std::string& text, const std::string& file, CardInfo& card) {
    const auto dot = text.find('.');
    if (dot == std::string::npos)
        throw Error(Errc::BadValue, "parse", file, 0,
                    "expected MAJOR.MINOR (e.g. 1.0), got '" + text + "'");
    const std::uint64_t major = Sysfs::parse_u64(text.substr(0, dot), file);
    const std::uint64_t minor = Sysfs::parse_u64(text.substr(dot + 1), file);
    if (major > 0xffff || minor > 0xffff)
        throw Error(Errc::BadValue, "parse", file, 0,
                    "version component out of range in '" + text + "'");
    card.fw_iface_major = static_cast<unsigned>(major);
    card.fw_iface_minor = static_cast<unsigned>(minor);
}

unsigned checked_chiplet_count(std::uint64_t count, const std::string& what) {
    if (count < 1 || count > kMaxChiplets)
        throw Error(Errc::BadValue, "parse", what, 0,
                    "chiplet count " + std::to_string(count) + " is outside 1.." +
                        std::to_string(kMaxChiplets));
    return static_cast<unsigned>(count);
}

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (the kernel's %pUb).
std::array<std::uint8_t, 16> parse_uuid(const std::string& text, const std::string& file) {
    std::array<std::uint8_t, 16> uuid{};
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    };
    std::size_t n = 0;
    bool ok = text.size() == 36;
    for (std::size_t i = 0; ok && i < text.size(); i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            ok = text[i] == '-';
            continue;
        }
        const int hi = nibble(text[i]);
        const int lo = i + 1 < text.size() ? nibble(text[i + 1]) : -1;
        ok = hi >= 0 && lo >= 0;
        if (ok)
            uuid[n++] = static_cast<std::uint8_t>(hi << 4 | lo);
        i++;
    }
    if (!ok || n != uuid.size())
        throw Error(Errc::BadValue, "parse", file, 0,
                    "expected a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), got '" + text + "'");
    return uuid;
}

// The rbln attribute group of the PCI device: device/rbln/*.  Returns true
// if every identity attribute is present.
bool read_sysfs_identity(const Sysfs& sys, const std::string& dev, CardInfo& card) {
    const std::string dir = dev + "/rbln";
    bool complete = true;

    if (auto family = sys.read_optional(dir + "/family")) {
        card.family = family_from_string(*family);
        card.family_name = *family;
    } else {
        complete = false;
    }

    if (auto count = sys.read_u64_optional(dir + "/chiplet_count")) {
        card.chiplet_count =
            checked_chiplet_count(*count, sys.resolve(dir + "/chiplet_count").string());
        for (unsigned i = 0; i < card.chiplet_count; i++) {
            const std::string cdir = dir + "/chiplet" + std::to_string(i);
            ChipletInfo chiplet;
            chiplet.index = i;
            if (auto index = sys.read_u64_optional(cdir + "/index"); index && *index != i)
                throw Error(Errc::BadValue, "parse", sys.resolve(cdir + "/index").string(), 0,
                            "says chiplet " + std::to_string(*index) + " in directory chiplet" +
                                std::to_string(i));
            auto hbm = sys.read_u64_optional(cdir + "/hbm_total_bytes");
            if (!hbm)
                complete = false;
            chiplet.hbm_total_bytes = hbm.value_or(0);
            card.chiplets.push_back(chiplet);
        }
    } else {
        complete = false;
    }

    if (auto hbm = sys.read_u64_optional(dir + "/hbm_total_bytes"))
        card.hbm_total_bytes = *hbm;
    else
        complete = false;

    if (auto fw = sys.read_optional(dir + "/fw_version"))
        card.fw_version = *fw;
    else
        complete = false;

    if (auto iface = sys.read_optional(dir + "/fw_iface_version"))
        parse_iface_version(*iface, sys.resolve(dir + "/fw_iface_version").string(), card);
    else
        complete = false;

    if (auto serial = sys.read_optional(dir + "/serial"))
        card.serial = *serial;
    else
        complete = false;

    if (auto uuid = sys.read_optional(dir + "/uuid"))
        card.uuid = parse_uuid(*uuid, sys.resolve(dir + "/uuid").string());

    card.state = sys.read_optional(dir + "/state").value_or("unknown");
    return complete;
}

// A telemetry value (hwmon, memory counters): a failed read (absent, EIO when
// the card does not answer, ENODATA for a sensor without data) is
// "unavailable"; a malformed value throws.
template <typename T> std::optional<T> readable_value(const Sysfs& sys, const std::string& file) {
    auto text = sys.try_read(file);
    if (!text)
        return std::nullopt;
    const std::string where = sys.resolve(file).string();
    if constexpr (std::is_signed_v<T>)
        return Sysfs::parse_i64(*text, where);
    else
        return Sysfs::parse_u64(*text, where);
}

// hwmon of the PCI device whose name is "rbln": temp1 is the card, temp<2+i>
// chiplet i, power1 the card.
void read_hwmon(const Sysfs& sys, const std::string& dev, CardInfo& card) {
    const std::string hwmon = dev + "/hwmon";
    for (const auto& h : sys.list(hwmon, "hwmon")) {
        std::string dir = hwmon;
        dir += '/';
        dir += h;
        if (sys.read_optional(dir + "/name").value_or("") != "rbln")
            continue;
        card.temperature_mc = readable_value<std::int64_t>(sys, dir + "/temp1_input");
        card.power_uw = readable_value<std::uint64_t>(sys, dir + "/power1_input");
        for (auto& chiplet : card.chiplets)
            chiplet.temperature_mc = readable_value<std::int64_t>(
                sys, dir + "/temp" + std::to_string(chiplet.index + 2) + "_input");
        return;
    }
}

// rbln/chiplet<i>/hbm_used_bytes and hbm_largest_free_bytes: the driver's
// own counters (reading them never wakes the card).  An older module has
// neither: they stay unavailable, as does a value that cannot be read; a
// malformed one throws, naming the file.
void read_chiplet_memory(const Sysfs& sys, const std::string& dev, CardInfo& card) {
    for (auto& chiplet : card.chiplets) {
        const std::string cdir = dev + "/rbln/chiplet" + std::to_string(chiplet.index);
        chiplet.hbm_used_bytes = readable_value<std::uint64_t>(sys, cdir + "/hbm_used_bytes");
        chiplet.hbm_largest_free_bytes =
            readable_value<std::uint64_t>(sys, cdir + "/hbm_largest_free_bytes");
    }
}

void sum_used_memory(CardInfo& card) {
    card.hbm_used_bytes.reset();
    if (card.chiplets.empty())
        return;
    std::uint64_t used = 0;
    for (const auto& chiplet : card.chiplets) {
        if (!chiplet.hbm_used_bytes)
            return;
        used += *chiplet.hbm_used_bytes;
    }
    card.hbm_used_bytes = used;
}

void merge_kernel_identity(const DeviceIdentity& id, CardInfo& card) {
    card.family = family_from_uapi(id.family);
    if (card.family != Family::Unknown)
        card.family_name = family_key(card.family);
    else if (card.family_name.empty())
        card.family_name = "unknown(" + std::to_string(id.family) + ")";
    card.chiplet_count = id.chiplet_count;
    std::vector<ChipletInfo> chiplets;
    for (unsigned i = 0; i < id.chiplet_count; i++) {
        ChipletInfo c{i, id.hbm_size[i], std::nullopt, std::nullopt, std::nullopt};
        if (i < card.chiplets.size()) { // from hwmon and sysfs
            c.temperature_mc = card.chiplets[i].temperature_mc;
            c.hbm_used_bytes = card.chiplets[i].hbm_used_bytes;
            c.hbm_largest_free_bytes = card.chiplets[i].hbm_largest_free_bytes;
        }
        chiplets.push_back(c);
    }
    card.chiplets = std::move(chiplets);
    card.hbm_total_bytes = std::accumulate(
        card.chiplets.begin(), card.chiplets.end(), std::uint64_t{0},
        [](std::uint64_t sum, const ChipletInfo& c) { return sum + c.hbm_total_bytes; });
    card.fw_version = id.fw_version;
    card.fw_iface_major = id.fw_iface_major;
    card.fw_iface_minor = id.fw_iface_minor;
    card.serial = id.serial;
    card.numa_node = id.numa_node;
    card.uuid = id.uuid;
    card.identity_from_kernel = true;
}

void query_node(const DiscoveryOptions& options, const Sysfs& sys, CardInfo& card) {
    if (card.suspended) {
        card.node_error = Error(Errc::Io, "open", card.accel_node, 0,
                                "not opened: the card is runtime-suspended and a query "
                                "must not wake it");
        return;
    }
    if (!options.open_nodes) {
        card.node_error =
            Error(Errc::InvalidArgument, "open", card.accel_node, 0, "not opened (disabled)");
        return;
    }
    const std::string path = sys.resolve(card.accel_node).string();
    auto opened = options.opener ? options.opener(path) : open_kernel_device(path);
    if (!opened) {
        card.node_error = opened.error();
        return;
    }
    KernelInterface& kernel = **opened;
    try {
        merge_kernel_identity(query_device_identity(kernel), card);
    } catch (const Error& e) {
        card.node_error = e;
        return;
    }
    if (options.telemetry_fallback && !card.temperature_mc && !card.power_uw) {
        try {
            const TelemetrySample t = query_telemetry(kernel);
            card.temperature_mc = t.temp_mc;
            card.power_uw = t.power_uw;
        } catch (const Error&) {
            // Telemetry stays unavailable; identity is what discovery needs.
        }
    }
}

CardInfo read_card(const DiscoveryOptions& options, const Sysfs& sys, const std::string& name,
                   unsigned minor) {
    CardInfo card;
    card.accel_minor = minor;
    card.accel_name = name;
    card.accel_node = "/dev/accel/" + name;

    const std::string dev = std::string(kAccelClass) + "/" + name + "/device";
    card.pci_bdf = sys.resolved_basename(dev);
    if (!is_pci_bdf(card.pci_bdf))
        throw Error(Errc::BadValue, "resolve", sys.resolve(dev).string(), 0,
                    "leads to '" + card.pci_bdf + "', which is not a PCI device (dddd:bb:dd.f)");
    card.numa_node = static_cast<int>(sys.read_i64_optional(dev + "/numa_node").value_or(-1));
    card.runtime_status = sys.read_optional(dev + "/power/runtime_status").value_or("");
    card.suspended = card.runtime_status == "suspended" || card.runtime_status == "suspending";

    card.identity_from_sysfs = read_sysfs_identity(sys, dev, card);
    read_chiplet_memory(sys, dev, card);
    if (!card.suspended)
        read_hwmon(sys, dev, card);
    query_node(options, sys, card);
    sum_used_memory(card);

    if (!card.identity_from_sysfs && !card.identity_from_kernel) {
        if (card.node_error && !card.suspended)
            throw *card.node_error;
        std::string why = "the card's identity attributes are missing and the node ";
        why += card.accel_node;
        why += card.suspended ? " is not opened while the card is runtime-suspended"
                              : " was not opened";
        why += ": is rbln.ko older than librbln?";
        throw Error(Errc::NotFound, "discover", sys.resolve(dev + "/rbln").string(), 0,
                    std::move(why));
    }
    return card;
}

} // namespace

Discovery discover(const DiscoveryOptions& options) {
    const Sysfs sys(options.root);
    if (!sys.exists(kModuleDir))
        throw Error(Errc::DriverNotLoaded, "", "", 0,
                    "the rbln kernel driver is not loaded (" + sys.resolve(kModuleDir).string() +
                        " is absent): load it with 'modprobe rbln'");

    Discovery result;
    result.driver.version =
        sys.read_optional(std::string(kModuleDir) + "/version").value_or("unknown");

    for (const auto& name : sys.list(kAccelClass, "accel")) {
        const auto minor = accel_minor(name);
        if (!minor)
            continue;
        const std::string base = std::string(kAccelClass) + "/" + name;
        if (sys.link_basename(base + "/device/driver").value_or("") != "rbln")
            continue;
        result.cards.push_back(read_card(options, sys, name, *minor));
    }
    std::sort(result.cards.begin(), result.cards.end(),
              [](const CardInfo& a, const CardInfo& b) { return a.accel_minor < b.accel_minor; });
    for (unsigned i = 0; i < result.cards.size(); i++)
        result.cards[i].index = i;
    return result;
}

} // namespace rbln
