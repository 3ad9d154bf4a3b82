// SPDX-License-Identifier: GPL-2.0
// format.hpp - the views of rbln-smi: table, list, JSON, control block dump.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rbln/discovery.hpp"
#include "rbln/fw_ctrl.hpp"

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

/// The default view: a boxed table headed by the driver and library versions.
std::string render_table(const Discovery& discovery);
/// -L: one line per card.
std::string render_list(const Discovery& discovery);
/// -j: the JSON document (schema_version 1).
std::string render_json(const Discovery& discovery);

/// --dump-control-block, as text or JSON.
std::string render_control_block(const fw::ControlBlock& cb);
std::string render_control_block_json(const fw::ControlBlock& cb);

} // namespace rbln::smi
