// SPDX-License-Identifier: GPL-2.0
// utilization.hpp - per-chiplet utilisation from two samples of the busy
// counters: the card's sysfs chiplet<i>/busy_ns and each client's fdinfo
// drm-engine-chiplet<i>, as librbln reads them (rbln/diagnostics.hpp).
//
// Utilisation over an interval is delta(busy ns) / delta(wall ns), rounded
// to a whole percent and clamped to 0..100.  A counter that is absent in
// either sample (an older rbln.ko, a client that opened during the
// interval) or that went backwards (the driver was bound again between the
// samples) gives no figure: the views show N/A, the JSON null.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rbln/diagnostics.hpp"
#include "rbln/fdinfo.hpp"

namespace rbln::smi {

/// The counters at one moment.
struct CounterSample {
    std::chrono::nanoseconds cards_time{};     ///< when the cards' counters were read
    std::chrono::nanoseconds clients_time{};   ///< when the clients' counters were read
    std::map<std::string, BusyCounters> cards; ///< by PCI BDF: sysfs chiplet<i>/busy_ns
    std::map<ClientId, BusyCounters> clients;  ///< fdinfo drm-engine-chiplet<i>

    /// True if any counter was found (else there is nothing to wait for).
    bool any() const;
};

/// The clock the samples are timed with (monotonic).
using SampleClock = std::function<std::chrono::nanoseconds()>;
/// CLOCK_MONOTONIC (std::chrono::steady_clock): the default SampleClock.
std::chrono::nanoseconds monotonic_now();

/// Reads the cards' counters and, with @scan, its clients' counters; each
/// group is timed by the middle of its reads on @clock.
CounterSample take_sample(const SystemView& system, const ClientScan* scan,
                          const SampleClock& clock);

/// One chiplet's figures for the views.
struct ChipletBusy {
    std::optional<std::uint64_t> busy_ns; ///< the counter at the second sample
    std::optional<unsigned> percent;      ///< nullopt: see the top of this file
};

struct CardBusy {
    std::vector<ChipletBusy> chiplets;
    /// The mean over the chiplets (each clamped first); nullopt unless
    /// every chiplet has a figure.
    std::optional<unsigned> percent;
};

/// What the views show.
struct Utilization {
    /// Two samples were taken (false with --no-util / --interval-ms 0:
    /// only the counters, no percentages).
    bool sampled = false;
    /// The measured interval between the cards' samples (if sampled).
    std::optional<std::chrono::nanoseconds> interval;
    std::map<std::string, CardBusy> cards;
    std::map<ClientId, std::vector<ChipletBusy>> clients;
    /// Counters that went backwards, one sentence each (for stderr).
    std::vector<std::string> warnings;

    /// The figures of the card with PCI BDF @bdf, nullptr if none.
    const CardBusy* card(const std::string& bdf) const;
    /// The figures of @client, nullptr if none.
    const std::vector<ChipletBusy>* client(const AccelClient& client) const;
};

/// delta(busy) / @wall in percent, rounded half up and clamped to 0..100;
/// nullopt if either value is absent, @after < @before, or @wall <= 0.
std::optional<unsigned> utilization_percent(std::optional<std::uint64_t> before,
                                            std::optional<std::uint64_t> after,
                                            std::chrono::nanoseconds wall);

/// The figures from @first (nullptr: not sampled, only @second's counters)
/// and @second.
Utilization compute_utilization(const CounterSample* first, const CounterSample& second);

} // namespace rbln::smi
