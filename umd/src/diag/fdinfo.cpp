// SPDX-License-Identifier: GPL-2.0
// fdinfo.cpp - DRM clients of rbln cards from /proc/<pid>/fdinfo.

#include "rbln/fdinfo.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>
#include <sys/sysmacros.h>
#include <tuple>
#include <utility>

#include "kernel/kernel.hpp"
#include "kernel/sysfs.hpp"

namespace rbln {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

bool all_digits(std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A plain decimal number (the whole text); nullopt otherwise.
std::optional<std::uint64_t> parse_decimal(std::string_view s) {
    if (!all_digits(s))
        return std::nullopt;
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    if (ec != std::errc() || ptr != s.data() + s.size())
        return std::nullopt;
    return v;
}

// The field of a region that a drm-<stat>-<region> key names.
std::optional<std::uint64_t>* region_field(RegionUsage& r, std::string_view stat) {
    if (stat == "total")
        return &r.total_bytes;
    if (stat == "shared")
        return &r.shared_bytes;
    if (stat == "resident")
        return &r.resident_bytes;
    return nullptr; // drm-active-*, drm-purgeable-*, ...: not used
}

// drm-<stat>-<region>: "memory" is host memory, "hbm<i>" chiplet i.
void parse_region_key(FdinfoRecord& rec, std::string_view stat, std::string_view region,
                      std::string_view value) {
    RegionUsage* r = nullptr;
    if (region == "memory") {
        r = &rec.host;
    } else if (region.starts_with("hbm")) {
        const auto index = parse_decimal(region.substr(3));
        // "hbm01" is not a key of the kernel's; indices past the uAPI's
        // chiplet limit are not either.
        if (!index || *index >= kMaxChiplets || (region.size() > 4 && region[3] == '0'))
            return;
        if (rec.hbm.size() <= *index)
            rec.hbm.resize(*index + 1);
        r = &rec.hbm[*index];
    } else {
        return;
    }
    if (auto* field = region_field(*r, stat)) {
        if (auto bytes = parse_fdinfo_size(value))
            *field = bytes;
    }
}

void parse_line(FdinfoRecord& rec, std::string_view line) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos)
        return;
    const std::string_view key = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));

    if (key == "drm-driver") {
        rec.driver = value;
    } else if (key == "drm-pdev") {
        rec.pdev = value;
    } else if (key == "drm-client-id") {
        if (auto v = parse_decimal(value))
            rec.client_id = v;
    } else if (key == "rbln-pinned-memory") {
        if (auto v = parse_fdinfo_size(value))
            rec.pinned_bytes = v;
    } else if (key == "rbln-asid") {
        if (auto v = parse_decimal(value))
            rec.asid = v;
    } else if (key == "rbln-mmu-faults") {
        if (auto v = parse_decimal(value))
            rec.mmu_faults = v;
    } else if (key.starts_with("drm-")) {
        const std::string_view rest = key.substr(4);
        const auto dash = rest.find('-');
        if (dash != std::string_view::npos)
            parse_region_key(rec, rest.substr(0, dash), rest.substr(dash + 1), value);
    }
}

std::string proc_path(pid_t pid, std::string_view leaf) {
    std::string p = "/proc/" + std::to_string(pid);
    if (!leaf.empty()) {
        p += '/';
        p += leaf;
    }
    return p;
}

bool denied(const Error& e) {
    return e.code() == Errc::PermissionDenied;
}

// Clients are the same if the kernel says so: same driver, card and
// drm-client-id.  Without a client id the fd is its own client.
using ClientKey = std::tuple<std::string, std::string, std::uint64_t, pid_t, std::string>;

ClientKey key_of(const FdinfoRecord& rec, pid_t pid, const std::string& fd) {
    if (rec.client_id)
        return {rec.driver, rec.pdev, *rec.client_id, 0, ""};
    return {rec.driver, rec.pdev, 0, pid, fd};
}

} // namespace

std::optional<std::uint64_t> parse_fdinfo_size(std::string_view text) {
    text = trim(text);
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
        digits++;
    const auto number = parse_decimal(text.substr(0, digits));
    if (!number)
        return std::nullopt;
    const std::string_view unit = trim(text.substr(digits));
    static constexpr std::array<std::string_view, 5> kUnits{"", "KiB", "MiB", "GiB", "TiB"};
    for (std::size_t i = 0; i < kUnits.size(); i++) {
        if (unit != kUnits[i])
            continue;
        const unsigned shift = 10 * static_cast<unsigned>(i);
        if (shift != 0 && *number > (std::numeric_limits<std::uint64_t>::max() >> shift))
            return std::nullopt;
        return *number << shift;
    }
    return std::nullopt;
}

FdinfoRecord parse_fdinfo(std::string_view text) {
    FdinfoRecord rec;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        parse_line(rec, text.substr(0, nl));
        if (nl == std::string_view::npos)
            break;
        text.remove_prefix(nl + 1);
    }
    return rec;
}

ClientScan scan_clients(const Sysfs& sys, std::string_view driver) {
    ClientScan scan;
    auto entries = sys.try_list("/proc");
    if (!entries) {
        if (entries.error().code() == Errc::NotFound)
            return scan;
        throw entries.error();
    }
    std::vector<pid_t> pids;
    for (const auto& name : *entries) {
        const auto v = parse_decimal(name);
        if (v && *v > 0 && *v <= static_cast<std::uint64_t>(std::numeric_limits<pid_t>::max()))
            pids.push_back(static_cast<pid_t>(*v));
    }
    std::sort(pids.begin(), pids.end());

    std::map<ClientKey, std::size_t> seen; // key -> index in scan.clients
    for (const pid_t pid : pids) {
        auto fds = sys.try_list(proc_path(pid, "fd"));
        if (!fds) {
            // NotFound: the process exited meanwhile.
            if (denied(fds.error()))
                scan.processes_denied++;
            continue;
        }
        std::vector<std::pair<std::uint64_t, std::string>> numbered;
        for (auto& fd : *fds)
            if (auto n = parse_decimal(fd))
                numbered.emplace_back(*n, std::move(fd));
        std::sort(numbered.begin(), numbered.end());

        bool refused = false;
        std::optional<std::string> comm;
        for (const auto& [n, fd] : numbered) {
            auto dev = sys.char_device(proc_path(pid, "fd/" + fd));
            if (!dev) {
                refused = refused || denied(dev.error());
                continue;
            }
            if (!*dev || ::major(**dev) != kAccelMajor)
                continue;
            auto text = sys.try_read(proc_path(pid, "fdinfo/" + fd));
            if (!text) {
                refused = refused || denied(text.error());
                continue;
            }
            FdinfoRecord rec = parse_fdinfo(*text);
            if (rec.driver != driver)
                continue;
            if (!comm) {
                auto c = sys.try_read(proc_path(pid, "comm"));
                comm = c ? *c : std::string();
            }
            const ClientKey key = key_of(rec, pid, fd);
            if (auto it = seen.find(key); it != seen.end()) {
                auto& holders = scan.clients[it->second].holders;
                if (holders.back().pid != pid)
                    holders.push_back({pid, *comm});
                continue;
            }
            AccelClient client;
            client.pid = pid;
            client.comm = *comm;
            client.holders.push_back({pid, *comm});
            client.accel_minor = ::minor(**dev);
            client.info = std::move(rec);
            seen.emplace(key, scan.clients.size());
            scan.clients.push_back(std::move(client));
        }
        if (refused)
            scan.processes_denied++;
    }
    std::stable_sort(scan.clients.begin(), scan.clients.end(),
                     [](const AccelClient& a, const AccelClient& b) {
                         return std::make_tuple(a.pid, a.info.client_id.value_or(0)) <
                                std::make_tuple(b.pid, b.info.client_id.value_or(0));
                     });
    return scan;
}

} // namespace rbln
