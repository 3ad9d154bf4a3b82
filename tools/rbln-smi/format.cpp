// SPDX-License-Identifier: GPL-2.0
// format.cpp - the views of rbln-smi.

#include "format.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "json.hpp"
#include "rbln/version.hpp"

namespace rbln::smi {

namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = kKiB * 1024;
constexpr std::uint64_t kGiB = kMiB * 1024;

// n/d rounded half away from zero, for d > 0.
std::int64_t round_div(std::int64_t n, std::int64_t d) {
    return n >= 0 ? (n + d / 2) / d : -((-n + d / 2) / d);
}

// "12.3" from a count of tenths.
std::string tenths(std::int64_t t) {
    const bool negative = t < 0;
    const std::uint64_t a = negative ? static_cast<std::uint64_t>(-(t + 1)) + 1 : t;
    return (negative ? "-" : "") + std::to_string(a / 10) + "." + std::to_string(a % 10);
}

std::string fit(std::string s, std::size_t width) {
    if (s.size() < width)
        s.append(width - s.size(), ' ');
    return s;
}

std::string fit_right(const std::string& s, std::size_t width) {
    if (s.size() >= width)
        return s;
    return std::string(width - s.size(), ' ') + s;
}

std::string state_text(const CardInfo& c) {
    return c.suspended ? c.state + " (suspended)" : c.state;
}

// Utilisation was sampled: the views show it.
bool sampled(const Utilization* util) {
    return util != nullptr && util->sampled;
}

// Chiplet @i of @card in @util, nullptr if none.
const ChipletBusy* chiplet_busy(const Utilization* util, const CardInfo& card, std::size_t i) {
    const CardBusy* c = util != nullptr ? util->card(card.pci_bdf) : nullptr;
    return c != nullptr && i < c->chiplets.size() ? &c->chiplets[i] : nullptr;
}

// "chiplet 0: HBM 2 / 256 MiB, largest free 254 MiB, util 37 %, 42.0 C"
// (util only if @show_util; N/A without a figure).
std::string chiplet_line(const ChipletInfo& ch, const ChipletBusy* busy, bool show_util) {
    std::string s = "chiplet " + std::to_string(ch.index) + ": HBM " +
                    format_used_total(ch.hbm_used_bytes, ch.hbm_total_bytes);
    if (ch.hbm_largest_free_bytes) // rounded down: that much surely fits
        s += ", largest free " + std::to_string(*ch.hbm_largest_free_bytes / kMiB) + " MiB";
    if (show_util)
        s += ", util " + format_percent(busy != nullptr ? busy->percent : std::nullopt);
    if (ch.temperature_mc)
        s += ", " + format_temperature(ch.temperature_mc);
    return s;
}

// A process name for a fixed-width table: bytes that are not printable
// ASCII (control characters, parts of UTF-8 sequences) become '?'.
std::string printable(std::string_view text) {
    std::string s;
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        s += (u < 0x20 || u >= 0x7f) ? '?' : c;
    }
    return s.empty() ? "?" : s;
}

// The chiplet columns of the Processes section: enough for every card and
// every hbm<i> key a client has.
std::size_t process_chiplet_columns(const Discovery& d, const ClientScan& scan) {
    std::size_t n = 1;
    for (const auto& card : d.cards)
        n = std::max(n, card.chiplets.size());
    for (const auto& client : scan.clients)
        n = std::max(n, client.info.hbm.size());
    return n;
}

// The lines of the Processes section below its title (without the box).
std::vector<std::string> process_lines(const Discovery& d, const ClientScan& scan,
                                       const Utilization* util) {
    const std::size_t nchip = process_chiplet_columns(d, scan);
    const bool show_util = sampled(util);
    std::vector<std::string> titles = {"PID", "Process name", "NPU"};
    for (std::size_t i = 0; i < nchip; i++)
        titles.push_back("HBM" + std::to_string(i));
    titles.emplace_back("Host memory");
    if (show_util)
        for (std::size_t i = 0; i < nchip; i++)
            titles.push_back("Util" + std::to_string(i));

    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> notes; // "also held by ..." under each row, or ""
    for (const auto& client : scan.clients) {
        const CardInfo* card = card_of(d, client);
        std::vector<std::string> row = {std::to_string(client.pid), printable(client.comm),
                                        card != nullptr ? std::to_string(card->index) : "?"};
        const std::size_t on_card =
            card != nullptr ? card->chiplets.size() : client.info.hbm.size();
        for (std::size_t i = 0; i < nchip; i++) {
            if (i >= on_card && i >= client.info.hbm.size())
                row.emplace_back("-");
            else if (i < client.info.hbm.size())
                row.push_back(format_bytes_or_na(client.info.hbm[i].total_bytes));
            else
                row.emplace_back("N/A");
        }
        row.push_back(format_bytes_or_na(client.info.host.total_bytes));
        if (show_util) {
            const std::vector<ChipletBusy>* busy = util->client(client);
            const std::size_t engines = busy != nullptr ? busy->size() : 0;
            for (std::size_t i = 0; i < nchip; i++) {
                if (i >= on_card && i >= engines)
                    row.emplace_back("-");
                else
                    row.push_back(format_percent(i < engines ? (*busy)[i].percent : std::nullopt));
            }
        }
        rows.push_back(std::move(row));

        std::string note;
        for (std::size_t h = 1; h < client.holders.size(); h++) {
            note += note.empty() ? "also held by PID " : ", ";
            note += std::to_string(client.holders[h].pid) + " (" +
                    printable(client.holders[h].comm) + ")";
        }
        notes.push_back(std::move(note));
    }

    std::vector<std::size_t> width;
    width.reserve(titles.size());
    for (const auto& t : titles)
        width.push_back(t.size());
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); i++)
            width[i] = std::max(width[i], row[i].size());
    auto join = [&](const std::vector<std::string>& cells) {
        std::string s;
        for (std::size_t i = 0; i < cells.size(); i++) {
            if (i != 0)
                s += "  ";
            s += i == 1 ? fit(cells[i], width[i]) : fit_right(cells[i], width[i]);
        }
        return s;
    };

    std::vector<std::string> lines;
    lines.push_back(join(titles));
    if (rows.empty())
        lines.emplace_back("No running processes found");
    for (std::size_t r = 0; r < rows.size(); r++) {
        lines.push_back(join(rows[r]));
        if (!notes[r].empty())
            lines.push_back(std::string(width[0] + 2, ' ') + notes[r]);
    }
    if (scan.processes_denied != 0)
        lines.push_back(std::to_string(scan.processes_denied) +
                        (scan.processes_denied == 1 ? " process" : " processes") +
                        " could not be inspected (permission denied; run as root)");
    return lines;
}

void region_json(JsonWriter& w, const RegionUsage& r) {
    w.member("total_bytes", r.total_bytes);
    w.member("shared_bytes", r.shared_bytes);
    w.member("resident_bytes", r.resident_bytes);
}

void processes_json(JsonWriter& w, const Discovery& d, const ClientScan* scan,
                    const Utilization* util) {
    w.key("processes");
    if (scan == nullptr) {
        w.null();
        w.key("processes_not_inspected");
        w.null();
        return;
    }
    w.begin_array();
    for (const auto& client : scan->clients) {
        const CardInfo* card = card_of(d, client);
        w.begin_object();
        w.member("pid", static_cast<std::int64_t>(client.pid));
        w.member("name", client.comm);
        w.key("holders");
        w.begin_array();
        for (const auto& h : client.holders) {
            w.begin_object();
            w.member("pid", static_cast<std::int64_t>(h.pid));
            w.member("name", h.comm);
            w.end_object();
        }
        w.end_array();
        w.member("card_index",
                 card != nullptr ? std::optional<unsigned>(card->index) : std::nullopt);
        w.member("pci_bdf", client.info.pdev);
        w.member("accel_minor", client.accel_minor);
        w.member("client_id", client.info.client_id);
        w.key("hbm");
        w.begin_array();
        const std::size_t card_chiplets = card != nullptr ? card->chiplets.size() : 0;
        const std::size_t n = std::max(card_chiplets, client.info.hbm.size());
        for (std::size_t i = 0; i < n; i++) {
            w.begin_object();
            w.member("chiplet", static_cast<std::uint64_t>(i));
            region_json(w, i < client.info.hbm.size() ? client.info.hbm[i] : RegionUsage{});
            w.end_object();
        }
        w.end_array();
        w.key("engines");
        w.begin_array();
        const std::vector<ChipletBusy>* busy = util != nullptr ? util->client(client) : nullptr;
        const std::size_t engines = busy != nullptr ? busy->size() : 0;
        for (std::size_t i = 0; i < std::max(engines, card_chiplets); i++) {
            const ChipletBusy b = i < engines ? (*busy)[i] : ChipletBusy{};
            w.begin_object();
            w.member("chiplet", static_cast<std::uint64_t>(i));
            w.member("busy_ns", b.busy_ns);
            w.member("utilization_percent", b.percent);
            w.end_object();
        }
        w.end_array();
        w.key("host_memory");
        w.begin_object();
        region_json(w, client.info.host);
        w.end_object();
        w.member("pinned_bytes", client.info.pinned_bytes);
        w.member("asid", client.info.asid);
        w.member("mmu_faults", client.info.mmu_faults);
        w.end_object();
    }
    w.end_array();
    w.member("processes_not_inspected", scan->processes_denied);
}

// The schema 2.1 keys of a card: its placement and use.
void card_extras_json(JsonWriter& w, const CardInfo& c, const ExtrasByBdf* extras) {
    const CardExtras* e = nullptr;
    if (extras != nullptr) {
        const auto it = extras->find(c.pci_bdf);
        e = it == extras->end() ? nullptr : &it->second;
    }
    const CardPlacement* p = e != nullptr && e->placement ? &*e->placement : nullptr;
    w.key("pci_path");
    if (p != nullptr) {
        w.begin_array();
        for (const auto& part : p->pci_path)
            w.value(part);
        w.end_array();
    } else {
        w.null();
    }
    w.key("local_cpulist");
    if (p != nullptr && !p->local_cpulist.empty())
        w.value(p->local_cpulist);
    else
        w.null();
    w.member("open_files", e != nullptr ? e->use.open_files : std::nullopt);
    w.member("card_resets", e != nullptr ? e->use.card_resets : std::nullopt);
}

} // namespace

std::string format_used_total(std::optional<std::uint64_t> used, std::uint64_t total) {
    const std::string t = std::to_string((total + kMiB / 2) / kMiB);
    if (!used)
        return "N/A / " + t + " MiB";
    return std::to_string((*used + kMiB - 1) / kMiB) + " / " + t + " MiB";
}

std::string format_bytes_or_na(std::optional<std::uint64_t> bytes) {
    return bytes ? format_bytes(*bytes) : "N/A";
}

std::string format_percent(std::optional<unsigned> percent) {
    return percent ? std::to_string(*percent) + " %" : "N/A";
}

const CardInfo* card_of(const Discovery& d, const AccelClient& client) {
    auto lower = [](std::string s) {
        std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
            return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        });
        return s;
    };
    if (client.info.pdev.empty())
        return nullptr;
    const std::string pdev = lower(client.info.pdev);
    for (const auto& c : d.cards)
        if (lower(c.pci_bdf) == pdev)
            return &c;
    return nullptr;
}

std::string format_temperature(std::optional<std::int64_t> millidegrees) {
    if (!millidegrees)
        return "N/A";
    return tenths(round_div(*millidegrees, 100)) + " C";
}

std::string format_power(std::optional<std::uint64_t> microwatts) {
    if (!microwatts)
        return "N/A";
    return std::to_string((*microwatts + 50000) / 1000000) + "." +
           std::to_string(((*microwatts + 50000) / 100000) % 10) + " W";
}

std::string format_bytes(std::uint64_t bytes) {
    if (bytes >= 10 * kGiB) {
        const std::uint64_t t = (bytes + kGiB / 20) / (kGiB / 10); // tenths of GiB
        return std::to_string(t / 10) + "." + std::to_string(t % 10) + " GiB";
    }
    if (bytes >= kMiB)
        return std::to_string((bytes + kMiB / 2) / kMiB) + " MiB";
    if (bytes >= kKiB)
        return std::to_string((bytes + kKiB / 2) / kKiB) + " KiB";
    return std::to_string(bytes) + " B";
}

std::string format_iface(unsigned major, unsigned minor) {
    return std::to_string(major) + "." + std::to_string(minor);
}

std::string format_uuid(const std::array<std::uint8_t, 16>& uuid) {
    static constexpr std::array<char, 17> hex{"0123456789abcdef"};
    std::string s;
    for (std::size_t i = 0; i < uuid.size(); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            s += '-';
        s += hex[uuid[i] >> 4];
        s += hex[uuid[i] & 0xf];
    }
    return s;
}

std::string render_table(const Discovery& d, const ClientScan* clients, const Utilization* util) {
    struct Column {
        std::string title;
        bool right;
    };
    const bool show_util = sampled(util);
    std::vector<Column> columns = {
        {"NPU", true},  {"Family", false}, {"Accel node", false},      {"PCI BDF", false},
        {"Temp", true}, {"Power", true},   {"HBM used / total", true},
    };
    if (show_util)
        columns.push_back({"Util", true});
    columns.push_back({"Firmware", false});
    columns.push_back({"State", false});
    std::vector<std::vector<std::string>> rows;
    rows.reserve(d.cards.size());
    for (const auto& c : d.cards) {
        std::vector<std::string> row = {std::to_string(c.index),
                                        std::string(family_display_name(c.family)),
                                        c.accel_node,
                                        c.pci_bdf,
                                        format_temperature(c.temperature_mc),
                                        format_power(c.power_uw),
                                        format_used_total(c.hbm_used_bytes, c.hbm_total_bytes)};
        if (show_util) {
            const CardBusy* busy = util->card(c.pci_bdf);
            row.push_back(format_percent(busy != nullptr ? busy->percent : std::nullopt));
        }
        row.push_back(c.fw_version);
        row.push_back(state_text(c));
        rows.push_back(std::move(row));
    }

    std::vector<std::size_t> width;
    width.reserve(columns.size());
    for (const auto& col : columns)
        width.push_back(col.title.size());
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); i++)
            width[i] = std::max(width[i], row[i].size());

    const std::vector<std::string> procs =
        clients != nullptr ? process_lines(d, *clients, util) : std::vector<std::string>{};

    // Inner width: cells plus " | " separators; widen the last column when
    // the header, a chiplet line or the Processes section needs more.
    std::size_t inner = 0;
    for (std::size_t w : width)
        inner += w + 3;
    inner -= 3;
    const std::string left = "rbln-smi " + std::string(library_version());
    const std::string mid = "Driver (rbln.ko): " + d.driver.version;
    const std::string right = "librbln: " + std::string(library_version());
    std::size_t needed = left.size() + mid.size() + right.size() + 8;
    for (const auto& c : d.cards)
        for (std::size_t i = 0; i < c.chiplets.size(); i++)
            needed = std::max(
                needed,
                width[0] + 3 +
                    chiplet_line(c.chiplets[i], chiplet_busy(util, c, i), show_util).size());
    for (const auto& p : procs)
        needed = std::max(needed, p.size());
    if (needed > inner) {
        width.back() += needed - inner;
        inner = needed;
    }
    const std::size_t gap = inner - left.size() - mid.size() - right.size();
    const std::string header =
        left + std::string(gap / 2, ' ') + mid + std::string(gap - gap / 2, ' ') + right;

    auto rule = [&](char fill, bool joints) {
        std::string s = "+";
        for (std::size_t i = 0; i < width.size(); i++) {
            s += std::string(width[i] + 2, fill);
            s += (joints || i + 1 == width.size()) ? "+" : std::string(1, fill);
        }
        return s + "\n";
    };
    auto line = [&](const std::vector<std::string>& cells) {
        std::string s = "|";
        for (std::size_t i = 0; i < cells.size(); i++)
            s += " " +
                 (columns[i].right ? fit_right(cells[i], width[i]) : fit(cells[i], width[i])) +
                 " |";
        return s + "\n";
    };
    auto boxed = [&](const std::string& text) { return "| " + fit(text, inner) + " |\n"; };

    std::string out;
    out += rule('-', false);
    out += boxed(header);
    out += rule('-', true);
    std::vector<std::string> titles;
    titles.reserve(columns.size());
    for (const auto& col : columns)
        titles.push_back(col.title);
    out += line(titles);
    out += rule('=', true);
    for (std::size_t r = 0; r < rows.size(); r++) {
        out += line(rows[r]);
        const std::size_t rest = inner - width[0] - 3;
        const CardInfo& card = d.cards[r];
        for (std::size_t i = 0; i < card.chiplets.size(); i++)
            out +=
                "| " + std::string(width[0], ' ') + " | " +
                fit(chiplet_line(card.chiplets[i], chiplet_busy(util, card, i), show_util), rest) +
                " |\n";
        out += rule('-', true);
    }
    if (clients != nullptr) {
        out += "\n";
        out += rule('-', false);
        out += boxed("Processes");
        out += boxed(procs.front());
        out += rule('=', false);
        for (std::size_t i = 1; i < procs.size(); i++)
            out += boxed(procs[i]);
        out += rule('-', false);
    }
    return out;
}

std::string render_list(const Discovery& d) {
    std::string out;
    for (const auto& c : d.cards) {
        out += "NPU " + std::to_string(c.index) + ": " +
               std::string(family_display_name(c.family)) + " (" + std::to_string(c.chiplet_count) +
               (c.chiplet_count == 1 ? " chiplet, " : " chiplets, ") +
               format_bytes(c.hbm_total_bytes) + " HBM) " + c.accel_name + " " + c.pci_bdf +
               " serial " + (c.serial.empty() ? "N/A" : c.serial) + " fw " +
               (c.fw_version.empty() ? "N/A" : c.fw_version) + "\n";
    }
    return out;
}

std::string render_json(const Discovery& d, const ClientScan* clients, const Utilization* util,
                        const ExtrasByBdf* extras) {
    JsonWriter w;
    w.begin_object();
    w.member("schema_version", 2);
    w.member("schema_version_minor", kJsonSchemaMinor);
    w.key("driver");
    w.begin_object();
    w.member("name", d.driver.name);
    w.member("version", d.driver.version);
    w.end_object();
    w.key("library");
    w.begin_object();
    w.member("name", "librbln");
    w.member("version", library_version());
    w.end_object();
    w.key("utilization_sample_ns");
    if (util != nullptr && util->interval)
        w.value(static_cast<std::int64_t>(util->interval->count()));
    else
        w.null();
    w.key("cards");
    w.begin_array();
    for (const auto& c : d.cards) {
        w.begin_object();
        w.member("index", c.index);
        w.member("family", c.family_name);
        w.member("accel_node", c.accel_node);
        w.member("pci_bdf", c.pci_bdf);
        w.member("numa_node", c.numa_node);
        w.member("chiplet_count", c.chiplet_count);
        w.member("temperature_mc", c.temperature_mc);
        w.member("power_uw", c.power_uw);
        w.member("hbm_total_bytes", c.hbm_total_bytes);
        w.member("hbm_used_bytes", c.hbm_used_bytes);
        const CardBusy* busy = util != nullptr ? util->card(c.pci_bdf) : nullptr;
        w.member("utilization_percent", busy != nullptr ? busy->percent : std::nullopt);
        w.key("chiplets");
        w.begin_array();
        for (std::size_t i = 0; i < c.chiplets.size(); i++) {
            const ChipletInfo& ch = c.chiplets[i];
            const ChipletBusy* b = chiplet_busy(util, c, i);
            w.begin_object();
            w.member("index", ch.index);
            w.member("hbm_total_bytes", ch.hbm_total_bytes);
            w.member("temperature_mc", ch.temperature_mc);
            w.member("hbm_used_bytes", ch.hbm_used_bytes);
            w.member("hbm_largest_free_bytes", ch.hbm_largest_free_bytes);
            w.member("busy_ns", b != nullptr ? b->busy_ns : std::nullopt);
            w.member("utilization_percent", b != nullptr ? b->percent : std::nullopt);
            w.end_object();
        }
        w.end_array();
        w.member("fw_version", c.fw_version);
        w.member("fw_iface_version", format_iface(c.fw_iface_major, c.fw_iface_minor));
        w.member("serial", c.serial);
        w.key("uuid");
        if (c.uuid)
            w.value(format_uuid(*c.uuid));
        else
            w.null();
        w.member("state", c.state);
        w.key("runtime_status");
        if (c.runtime_status.empty())
            w.null();
        else
            w.value(c.runtime_status);
        card_extras_json(w, c, extras);
        w.end_object();
    }
    w.end_array();
    processes_json(w, d, clients, util);
    w.end_object();
    return w.finish();
}

std::string render_control_block(const fw::ControlBlock& cb) {
    std::string out;
    auto row = [&out](const std::string& k, const std::string& v) { out += fit(k, 18) + v + "\n"; };
    auto hex = [](std::uint64_t v) {
        std::array<char, 24> buf{};
        std::snprintf(buf.data(), buf.size(), "0x%llx", static_cast<unsigned long long>(v));
        return std::string(buf.data());
    };
    row("iface_version", format_iface(cb.iface_major, cb.iface_minor));
    row("ctrl_size", std::to_string(cb.ctrl_size));
    row("family", cb.family == 1 ? "Rebel100" : "ATOM");
    row("chiplet_count", std::to_string(cb.chiplet_count));
    row("doorbell_peer_id", std::to_string(cb.doorbell_peer_id));
    row("num_vectors", std::to_string(cb.num_vectors));
    row("uuid", format_uuid(cb.uuid));
    row("serial", cb.serial);
    row("fw_version", cb.fw_version);
    row("bar_size", hex(cb.bar_size) + " (" + format_bytes(cb.bar_size) + ")");
    for (std::size_t i = 0; i < cb.hbm.size(); i++)
        row("hbm[" + std::to_string(i) + "]", "offset " + hex(cb.hbm[i].bar_offset) + " size " +
                                                  hex(cb.hbm[i].size) + " (" +
                                                  format_bytes(cb.hbm[i].size) + ")");
    row("fw_state", fw::fw_state_name(cb.fw_state));
    row("fault_code", fw::fault_code_name(cb.fault_code));
    row("fault_reason", cb.fault_reason);
    row("host_ctrl", hex(cb.host_ctrl));
    row("host_gen", std::to_string(cb.host_gen));
    row("host_ack", std::to_string(cb.host_ack));
    row("ring_entries", std::to_string(cb.ring_entries));
    row("admin_sq_head", std::to_string(cb.admin_sq_head));
    row("heartbeat", std::to_string(cb.heartbeat));
    return out;
}

std::string render_control_block_json(const fw::ControlBlock& cb) {
    JsonWriter w;
    w.begin_object();
    w.member("iface_version", format_iface(cb.iface_major, cb.iface_minor));
    w.member("ctrl_size_bytes", cb.ctrl_size);
    w.member("family", cb.family == 1 ? "rebel100" : "atom");
    w.member("chiplet_count", cb.chiplet_count);
    w.member("doorbell_peer_id", cb.doorbell_peer_id);
    w.member("num_vectors", cb.num_vectors);
    w.member("uuid", format_uuid(cb.uuid));
    w.member("serial", cb.serial);
    w.member("fw_version", cb.fw_version);
    w.member("bar_size_bytes", cb.bar_size);
    w.key("hbm");
    w.begin_array();
    for (const auto& h : cb.hbm) {
        w.begin_object();
        w.member("bar_offset_bytes", h.bar_offset);
        w.member("size_bytes", h.size);
        w.end_object();
    }
    w.end_array();
    w.member("fw_state", fw::fw_state_name(cb.fw_state));
    w.member("fault_code", fw::fault_code_name(cb.fault_code));
    w.member("fault_reason", cb.fault_reason);
    w.member("host_gen", cb.host_gen);
    w.member("host_ack", cb.host_ack);
    w.member("heartbeat", cb.heartbeat);
    w.end_object();
    return w.finish();
}

} // namespace rbln::smi
