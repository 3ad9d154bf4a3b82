// SPDX-License-Identifier: GPL-2.0
// fw_ctrl.hpp - (internal) user-space reader of the firmware-iface control
// block (firmware-iface/rbln_fw_ctrl.h, spec rbln_fw_ctrl.md): decodes the
// little-endian bytes and checks every rule the host applies before it
// accepts a card.  The decoded value types are public
// (rbln/diagnostics.hpp, which also reads a dump file).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "rbln/diagnostics.hpp"
#include "rbln/error.hpp"

namespace rbln::fw {

/// Decodes and validates a control block: size, magic, major version (a
/// newer minor is accepted), ctrl_size, family, chiplet count 1..8, vectors,
/// BAR size a power of two, every HBM aperture aligned, inside the BAR, past
/// the control region and not overlapping another, and NUL-terminated
/// strings.  Errors are Errc::BadControlBlock with a message saying which
/// rule failed; @source names the bytes in it (e.g. a file name).
Result<ControlBlock> parse_control_block(std::span<const std::byte> bytes,
                                         std::string_view source = "control block");

} // namespace rbln::fw
