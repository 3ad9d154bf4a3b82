// SPDX-License-Identifier: GPL-2.0
// utilization.cpp - per-chiplet utilisation from two samples of the busy
// counters.

#include "utilization.hpp"

#include <algorithm>
#include <cmath>

namespace rbln::smi {

namespace {

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

CounterSample take_sample(const SystemView& system, const ClientScan* scan,
                          const SampleClock& clock) {
    CounterSample s;
    auto t0 = clock();
    s.cards = read_card_busy(system);
    auto t1 = clock();
    s.cards_time = t0 + (t1 - t0) / 2;
    if (scan != nullptr) {
        t0 = clock();
        s.clients = read_client_busy(system, *scan);
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
    const auto it = clients.find(ClientId{c.info.pdev, *c.info.client_id});
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
