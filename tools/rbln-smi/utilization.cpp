// SPDX-License-Identifier: GPL-2.0
// utilization.cpp - per-chiplet utilisation from two samples of the busy
// counters.

#include "utilization.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace rbln::smi {

namespace {

// More chiplet<i> directories than any card has: a name past this is not one.
constexpr std::size_t kMaxChiplets = 64;

// i of "chiplet<i>" (digits only: "chiplet_count" is not one), or nullopt.
std::optional<std::size_t> chiplet_index(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix))
        return std::nullopt;
    name.remove_prefix(prefix.size());
    std::size_t i = 0;
    const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), i, 10);
    if (name.empty() || ec != std::errc() || ptr != name.data() + name.size() || i >= kMaxChiplets)
        return std::nullopt;
    return i;
}

std::optional<std::uint64_t> read_counter(const Sysfs& sys, const std::string& path) {
    auto text = sys.try_read(path);
    if (!text.ok())
        return std::nullopt; // absent (older rbln.ko) or gone with the card
    return Sysfs::parse_u64(text.value(), sys.resolve(path).string());
}

// The part of @busy in @wall, clamped to 0..1; nullopt as for
// utilization_percent().
std::optional<double> busy_fraction(std::optional<std::uint64_t> before,
                                    std::optional<std::uint64_t> after,
                                    std::chrono::nanoseconds wall) {
    if (!before || !after || *after < *before || wall.count() <= 0)
        return std::nullopt;
    const double f = static_cast<double>(*after - *before) / static_cast<double>(wall.count());
    return std::min(f, 1.0);
}

unsigned to_percent(double fraction) {
    return static_cast<unsigned>(std::lround(fraction * 100.0)); // half up: fraction >= 0
}

template <typename Key>
const BusyCounters* find(const std::map<Key, BusyCounters>& m, const Key& key) {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
}

std::optional<std::uint64_t> at(const BusyCounters* c, std::size_t i) {
    return c != nullptr && i < c->size() ? (*c)[i] : std::nullopt;
}

std::string went_back(const std::string& what, std::uint64_t before, std::uint64_t after) {
    return what + " went back from " + std::to_string(before) + " to " + std::to_string(after) +
           " ns between the samples (was the driver bound again?): utilisation N/A";
}

// The figures of one set of counters against the earlier one (nullptr:
// not sampled).  @what names counter i in a warning.
template <typename Name>
std::vector<ChipletBusy> chiplets_of(const BusyCounters& after, const BusyCounters* before,
                                     std::chrono::nanoseconds wall,
                                     std::vector<std::string>& warnings, const Name& what,
                                     std::vector<std::optional<double>>& fractions) {
    std::vector<ChipletBusy> out;
    out.reserve(after.size());
    fractions.clear();
    for (std::size_t i = 0; i < after.size(); i++) {
        ChipletBusy ch;
        ch.busy_ns = after[i];
        const auto b = at(before, i);
        const auto f = busy_fraction(b, after[i], wall);
        if (f)
            ch.percent = to_percent(*f);
        if (b && after[i] && *after[i] < *b)
            warnings.push_back(went_back(what(i), *b, *after[i]));
        fractions.push_back(f);
        out.push_back(ch);
    }
    return out;
}

} // namespace

bool CounterSample::any() const {
    auto has = [](const BusyCounters& c) {
        return std::any_of(c.begin(), c.end(), [](const auto& v) { return v.has_value(); });
    };
    return std::any_of(cards.begin(), cards.end(),
                       [&](const auto& kv) { return has(kv.second); }) ||
           std::any_of(clients.begin(), clients.end(),
                       [&](const auto& kv) { return has(kv.second); });
}

std::chrono::nanoseconds monotonic_now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch());
}

BusyCounters parse_engine_ns(std::string_view text) {
    constexpr std::string_view kKey = "drm-engine-chiplet";
    BusyCounters out;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
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

std::map<std::string, BusyCounters> read_card_busy(const Sysfs& sys) {
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

std::map<ClientKey, BusyCounters> read_client_busy(const Sysfs& sys, const ClientScan& scan) {
    std::map<ClientKey, BusyCounters> clients;
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
            clients.emplace(ClientKey{client.info.pdev, *client.info.client_id},
                            parse_engine_ns(text.value()));
            break;
        }
    }
    return clients;
}

CounterSample take_sample(const Sysfs& sys, const ClientScan* scan, const SampleClock& clock) {
    CounterSample s;
    auto t0 = clock();
    s.cards = read_card_busy(sys);
    auto t1 = clock();
    s.cards_time = t0 + (t1 - t0) / 2;
    if (scan != nullptr) {
        t0 = clock();
        s.clients = read_client_busy(sys, *scan);
        t1 = clock();
    }
    s.clients_time = t0 + (t1 - t0) / 2;
    return s;
}

const CardBusy* Utilization::card(const std::string& bdf) const {
    const auto it = cards.find(bdf);
    return it == cards.end() ? nullptr : &it->second;
}

const std::vector<ChipletBusy>* Utilization::client(const AccelClient& c) const {
    if (!c.info.client_id)
        return nullptr;
    const auto it = clients.find(ClientKey{c.info.pdev, *c.info.client_id});
    return it == clients.end() ? nullptr : &it->second;
}

std::optional<unsigned> utilization_percent(std::optional<std::uint64_t> before,
                                            std::optional<std::uint64_t> after,
                                            std::chrono::nanoseconds wall) {
    const auto f = busy_fraction(before, after, wall);
    if (!f)
        return std::nullopt;
    return to_percent(*f);
}

Utilization compute_utilization(const CounterSample* first, const CounterSample& second) {
    Utilization u;
    u.sampled = first != nullptr;
    const auto card_wall =
        first != nullptr ? second.cards_time - first->cards_time : std::chrono::nanoseconds{0};
    const auto client_wall =
        first != nullptr ? second.clients_time - first->clients_time : std::chrono::nanoseconds{0};
    if (first != nullptr)
        u.interval = card_wall;

    std::vector<std::optional<double>> fractions;
    for (const auto& [bdf, after] : second.cards) {
        const BusyCounters* before = first != nullptr ? find(first->cards, bdf) : nullptr;
        CardBusy c;
        c.chiplets = chiplets_of(
            after, before, card_wall, u.warnings,
            [&b = bdf](std::size_t i) { return b + " chiplet" + std::to_string(i) + "/busy_ns"; },
            fractions);
        if (!fractions.empty() &&
            std::all_of(fractions.begin(), fractions.end(), [](const auto& f) { return f; })) {
            double sum = 0;
            for (const auto& f : fractions)
                sum += *f;
            c.percent = to_percent(sum / static_cast<double>(fractions.size()));
        }
        u.cards.emplace(bdf, std::move(c));
    }
    for (const auto& [key, after] : second.clients) {
        const BusyCounters* before = first != nullptr ? find(first->clients, key) : nullptr;
        u.clients.emplace(key, chiplets_of(
                                   after, before, client_wall, u.warnings,
                                   [&k = key](std::size_t i) {
                                       return "client " + std::to_string(k.second) + " of " +
                                              k.first + ": drm-engine-chiplet" + std::to_string(i);
                                   },
                                   fractions));
    }
    return u;
}

} // namespace rbln::smi
