// SPDX-License-Identifier: GPL-2.0
// format.hpp - the views of rbln-smi: table, list, JSON, control block dump.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "card_extras.hpp"
#include "rbln/diagnostics.hpp"
#include "rbln/discovery.hpp"
#include "rbln/fdinfo.hpp"
#include "utilization.hpp"

namespace rbln::smi {

/// "45.0 C" from milli-degrees (rounded to one decimal); "N/A" if absent.
std::string format_temperature(std::optional<std::int64_t> millidegrees);
/// "75.0 W" from microwatts (rounded to one decimal); "N/A" if absent.
std::string format_power(std::optional<std::uint64_t> microwatts);
/// "256 MiB" below 10 GiB, "16.0 GiB" from there; "512 KiB" / "0 B" below 1 MiB.
std::string format_bytes(std::uint64_t bytes);
/// "1.0"
std::string format_iface(unsigned major, unsigned minor);
/// "01234567-89ab-cdef-0123-456789abcdef"
std::string format_uuid(const std::array<std::uint8_t, 16>& uuid);

/// "2 / 256 MiB": used (rounded up, so memory in use never shows as 0) and
/// total in MiB; "N/A / 256 MiB" if used is unknown.
std::string format_used_total(std::optional<std::uint64_t> used, std::uint64_t total);
/// format_bytes(), or "N/A".
std::string format_bytes_or_na(std::optional<std::uint64_t> bytes);
/// "37 %", or "N/A".
std::string format_percent(std::optional<unsigned> percent);

/// The card a client belongs to (its drm-pdev is the card's PCI BDF),
/// nullptr if it is none of @discovery's cards.
const CardInfo* card_of(const Discovery& discovery, const AccelClient& client);

/// The default view: a boxed table headed by the driver and library
/// versions; with @clients, followed by the Processes section.  With
/// @util sampled, a Util column per card, "util N %" per chiplet and a
/// Util<i> column per chiplet in the Processes section.
std::string render_table(const Discovery& discovery, const ClientScan* clients = nullptr,
                         const Utilization* util = nullptr);
/// -L: one line per card.
std::string render_list(const Discovery& discovery);
/// The minor version of the JSON schema: compatible additions within
/// schema_version 2 (README.md says which).
inline constexpr int kJsonSchemaMinor = 1;

/// -j: the JSON document (schema_version 2); without @clients,
/// "processes" and "processes_not_inspected" are null; the busy counters
/// and utilisation figures are null where @util (or it) has none; the
/// placement and use of a card are null where @extras (or it) has none.
std::string render_json(const Discovery& discovery, const ClientScan* clients = nullptr,
                        const Utilization* util = nullptr, const ExtrasByBdf* extras = nullptr);

/// --dump-control-block, as text or JSON.
std::string render_control_block(const fw::ControlBlock& cb);
std::string render_control_block_json(const fw::ControlBlock& cb);

} // namespace rbln::smi
