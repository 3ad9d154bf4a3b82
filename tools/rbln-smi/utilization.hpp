// SPDX-License-Identifier: GPL-2.0
// utilization.hpp - per-chiplet utilisation from two samples of the busy
// counters: the card's sysfs chiplet<i>/busy_ns and each client's fdinfo
// drm-engine-chiplet<i>.
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

#include "rbln/fdinfo.hpp"
#include "rbln/sysfs.hpp"

namespace rbln::smi {

/// Per chiplet i: the counter's value in ns, nullopt if it was not there.
using BusyCounters = std::vector<std::optional<std::uint64_t>>;

/// A DRM client across two scans: its card's PCI BDF (drm-pdev) and its
/// drm-client-id.
using ClientKey = std::pair<std::string, std::uint64_t>;

/// The counters at one moment.
struct CounterSample {
    std::chrono::nanoseconds cards_time{};     ///< when the cards' counters were read
    std::chrono::nanoseconds clients_time{};   ///< when the clients' counters were read
    std::map<std::string, BusyCounters> cards; ///< by PCI BDF: sysfs chiplet<i>/busy_ns
    std::map<ClientKey, BusyCounters> clients; ///< fdinfo drm-engine-chiplet<i>

    /// True if any counter was found (else there is nothing to wait for).
    bool any() const;
};

/// The clock the samples are timed with (monotonic).
using SampleClock = std::function<std::chrono::nanoseconds()>;
/// CLOCK_MONOTONIC (std::chrono::steady_clock): the default SampleClock.
std::chrono::nanoseconds monotonic_now();

/// The drm-engine-chiplet<i> values of one fdinfo text ("<n> ns", the
/// unit of Documentation/gpu/drm-usage-stats.rst); a missing or malformed
/// key is nullopt; the vector ends at the highest index found.
BusyCounters parse_engine_ns(std::string_view fdinfo);

/// Reads chiplet<i>/busy_ns of every card below /sys/class/accel that has
/// the rbln attribute directory (device/rbln/), keyed by its PCI BDF.  An
/// absent or unreadable file is nullopt; a value that is not a number
/// throws Errc::BadValue naming the file.
std::map<std::string, BusyCounters> read_card_busy(const Sysfs& sys);

/// The drm-engine-chiplet<i> counters of every client of @scan (from the
/// fdinfo of one fd of the client in the lowest holder's /proc/<pid>).
/// A client whose fdinfo is gone, or that has no drm-client-id, is absent.
std::map<ClientKey, BusyCounters> read_client_busy(const Sysfs& sys, const ClientScan& scan);

/// Reads the cards' counters and, with @scan, its clients' counters; each
/// group is timed by the middle of its reads on @clock.
CounterSample take_sample(const Sysfs& sys, const ClientScan* scan, const SampleClock& clock);

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
    std::map<ClientKey, std::vector<ChipletBusy>> clients;
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
