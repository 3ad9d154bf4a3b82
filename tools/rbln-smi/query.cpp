// SPDX-License-Identifier: GPL-2.0
// query.cpp - rbln-smi --query: named per-card fields as CSV.

#include "query.hpp"

#include <algorithm>
#include <array>
#include <ctime>

#include "format.hpp"

namespace rbln::smi {

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

// The order of this table is the order of --help and README.md; names and
// units never change (scripts parse them), new fields go anywhere.
constexpr std::array kFields = {
    QueryField{"index", "", "the NPU index (as -i and the other views number the cards)"},
    QueryField{"name", "", "the product family as shown to people: Rebel100, ATOM"},
    QueryField{"family", "", "the family as sysfs spells it: rebel100, atom"},
    QueryField{"pci_bdf", "", "the PCI address, 0000:00:04.0"},
    QueryField{"uuid", "", "the card's UUID"},
    QueryField{"serial", "", "the card's serial number"},
    QueryField{"accel_node", "", "the device node, /dev/accel/accel0"},
    QueryField{"numa_node", "", "the NUMA node of the PCI function, -1 if none"},
    QueryField{"chiplet_count", "", "the number of chiplets"},
    QueryField{"temperature", "C", "the hottest sensor of the card, one decimal"},
    QueryField{"power", "W", "the card's power draw, two decimals"},
    QueryField{"hbm_total", "MiB", "HBM of all chiplets"},
    QueryField{"hbm_used", "MiB", "HBM held by buffers of all clients, rounded up"},
    QueryField{"hbm_free", "MiB", "hbm_total - hbm_used, rounded down"},
    QueryField{"utilization", "%", "the card's utilisation over --interval-ms, chiplets' mean"},
    QueryField{"state", "", "the driver's card state: ready, fault, resetting, ..."},
    QueryField{"fw_version", "", "the firmware version"},
    QueryField{"fw_iface_version", "", "the firmware-iface version the card speaks, 1.2"},
    QueryField{"driver_version", "", "the version of rbln.ko"},
    QueryField{"open_files", "", "open files of the accel node (sysfs open_files)"},
    QueryField{"card_resets", "", "whole-card resets since the driver bound the card"},
    QueryField{"timestamp", "", "when the sample was taken, UTC, 2026-12-07T13:44:15.123Z"},
};

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

// Splits @list at commas (empty parts kept).
std::vector<std::string_view> split(std::string_view list) {
    std::vector<std::string_view> parts;
    for (;;) {
        const std::size_t comma = list.find(',');
        parts.push_back(list.substr(0, comma));
        if (comma == std::string_view::npos)
            return parts;
        list.remove_prefix(comma + 1);
    }
}

std::string field_names() {
    std::string s;
    for (const auto& f : kFields) {
        if (!s.empty())
            s += ", ";
        s += f.name;
    }
    return s;
}

// A number with its unit, or the number alone (nounits).
std::string with_unit(const std::string& number, const QueryField& f, const CsvFormat& format) {
    return format.units && !f.unit.empty() ? number + " " + std::string(f.unit) : number;
}

std::string fixed(std::uint64_t value, std::uint64_t scale, int decimals) {
    std::uint64_t div = 1;
    for (int i = 0; i < decimals; i++)
        div *= 10;
    const std::uint64_t step = scale / div;
    const std::uint64_t n = (value + step / 2) / step; // in units of 10^-decimals
    std::string s = std::to_string(n / div);
    if (decimals > 0) {
        std::string frac = std::to_string(n % div);
        frac.insert(0, static_cast<std::size_t>(decimals) - frac.size(), '0');
        s += "." + frac;
    }
    return s;
}

std::string temperature(std::int64_t mc) {
    // tenths of a degree, rounded half away from zero
    const std::int64_t t = mc >= 0 ? (mc + 50) / 100 : -((-mc + 50) / 100);
    const std::uint64_t a = t < 0 ? static_cast<std::uint64_t>(-t) : static_cast<std::uint64_t>(t);
    return (t < 0 ? "-" : "") + std::to_string(a / 10) + "." + std::to_string(a % 10);
}

struct RowContext {
    const Discovery& d;
    const CardInfo& c;
    const Utilization* util;
    const CardExtras* extras;
    const std::string& timestamp;
};

// The value of @f for one card; nullopt: N/A.
std::optional<std::string> value_of(const QueryField& f, const RowContext& r) {
    const CardInfo& c = r.c;
    const std::string_view n = f.name;
    auto number = [](auto v) { return std::optional<std::string>(std::to_string(v)); };
    if (n == "index")
        return number(c.index);
    if (n == "name")
        return std::string(family_display_name(c.family));
    if (n == "family")
        return c.family_name;
    if (n == "pci_bdf")
        return c.pci_bdf;
    if (n == "uuid")
        return c.uuid ? std::optional(format_uuid(*c.uuid)) : std::nullopt;
    if (n == "serial")
        return c.serial.empty() ? std::nullopt : std::optional(c.serial);
    if (n == "accel_node")
        return c.accel_node;
    if (n == "numa_node")
        return number(c.numa_node);
    if (n == "chiplet_count")
        return number(c.chiplet_count);
    if (n == "temperature")
        return c.temperature_mc ? std::optional(temperature(*c.temperature_mc)) : std::nullopt;
    if (n == "power")
        return c.power_uw ? std::optional(fixed(*c.power_uw, 1000000, 2)) : std::nullopt;
    if (n == "hbm_total")
        return number((c.hbm_total_bytes + kMiB / 2) / kMiB);
    if (n == "hbm_used")
        return c.hbm_used_bytes ? number((*c.hbm_used_bytes + kMiB - 1) / kMiB) : std::nullopt;
    if (n == "hbm_free") {
        if (!c.hbm_used_bytes)
            return std::nullopt;
        const std::uint64_t used = std::min(*c.hbm_used_bytes, c.hbm_total_bytes);
        return number((c.hbm_total_bytes - used) / kMiB);
    }
    if (n == "utilization") {
        const CardBusy* busy = r.util != nullptr ? r.util->card(c.pci_bdf) : nullptr;
        return busy != nullptr && busy->percent ? number(*busy->percent) : std::nullopt;
    }
    if (n == "state")
        return c.state;
    if (n == "fw_version")
        return c.fw_version.empty() ? std::nullopt : std::optional(c.fw_version);
    if (n == "fw_iface_version")
        return format_iface(c.fw_iface_major, c.fw_iface_minor);
    if (n == "driver_version")
        return r.d.driver.version;
    if (n == "open_files")
        return r.extras != nullptr && r.extras->use.open_files ? number(*r.extras->use.open_files)
                                                               : std::nullopt;
    if (n == "card_resets")
        return r.extras != nullptr && r.extras->use.card_resets ? number(*r.extras->use.card_resets)
                                                                : std::nullopt;
    if (n == "timestamp")
        return r.timestamp;
    return std::nullopt; // not reached: parse_query() accepts only kFields
}

} // namespace

std::span<const QueryField> query_fields() {
    return kFields;
}

std::vector<const QueryField*> parse_query(std::string_view list) {
    std::vector<const QueryField*> fields;
    if (trim(list).empty())
        throw QueryError{"--query needs a comma-separated list of fields, e.g. "
                         "--query=index,name,temperature; the fields are: " +
                         field_names()};
    for (const std::string_view part : split(list)) {
        const std::string_view name = trim(part);
        if (name.empty())
            throw QueryError{"--query: an empty field name in '" + std::string(list) +
                             "' (a comma too many?)"};
        const auto it = std::find_if(kFields.begin(), kFields.end(),
                                     [&](const QueryField& f) { return f.name == name; });
        if (it == kFields.end())
            throw QueryError{"--query: unknown field '" + std::string(name) +
                             "'; the fields are: " + field_names()};
        fields.push_back(&*it);
    }
    return fields;
}

CsvFormat parse_format(std::string_view text) {
    const auto parts = split(text);
    if (trim(parts.front()) != "csv")
        throw QueryError{"--format: '" + std::string(text) +
                         "' is not csv[,noheader][,nounits] (csv is the only format)"};
    CsvFormat f;
    for (std::size_t i = 1; i < parts.size(); i++) {
        const std::string_view p = trim(parts[i]);
        if (p == "noheader")
            f.header = false;
        else if (p == "nounits")
            f.units = false;
        else
            throw QueryError{"--format: unknown option '" + std::string(p) +
                             "' (the options of csv are noheader and nounits)"};
    }
    return f;
}

bool needs_utilization(std::span<const QueryField* const> fields) {
    return std::any_of(fields.begin(), fields.end(),
                       [](const QueryField* f) { return f->name == "utilization"; });
}

std::string csv_field(std::string_view text) {
    if (text.find_first_of(",\"\r\n") == std::string_view::npos)
        return std::string(text);
    std::string s = "\"";
    for (const char c : text) {
        if (c == '"')
            s += '"';
        s += c;
    }
    return s + "\"";
}

std::string render_csv_header(std::span<const QueryField* const> fields) {
    std::string line;
    for (std::size_t i = 0; i < fields.size(); i++) {
        if (i != 0)
            line += ',';
        std::string title(fields[i]->name);
        if (!fields[i]->unit.empty())
            title += " [" + std::string(fields[i]->unit) + "]";
        line += csv_field(title);
    }
    return line + "\n";
}

std::string render_csv_rows(const Discovery& d, std::span<const QueryField* const> fields,
                            const CsvFormat& format, const Utilization* util,
                            const ExtrasByBdf& extras, const std::string& timestamp) {
    std::string out;
    for (const auto& c : d.cards) {
        const auto e = extras.find(c.pci_bdf);
        const RowContext r{d, c, util, e == extras.end() ? nullptr : &e->second, timestamp};
        for (std::size_t i = 0; i < fields.size(); i++) {
            if (i != 0)
                out += ',';
            const auto v = value_of(*fields[i], r);
            out += v ? csv_field(with_unit(*v, *fields[i], format)) : "N/A";
        }
        out += '\n';
    }
    return out;
}

std::string format_timestamp(std::int64_t unix_ns) {
    const std::int64_t s = unix_ns >= 0 ? unix_ns / 1000000000 : (unix_ns + 1) / 1000000000 - 1;
    const auto ms = static_cast<int>((unix_ns - s * 1000000000) / 1000000);
    const auto t = static_cast<std::time_t>(s);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::array<char, 64> buf{};
    const std::size_t n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
    std::string millis = std::to_string(ms);
    millis.insert(0, 3 - millis.size(), '0');
    return std::string(buf.data(), n) + "." + millis + "Z";
}

} // namespace rbln::smi
