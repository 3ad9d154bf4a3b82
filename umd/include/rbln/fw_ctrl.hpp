// SPDX-License-Identifier: GPL-2.0
// rbln/fw_ctrl.hpp - user-space reader of the firmware-iface control block
// (firmware-iface/rbln_fw_ctrl.h, spec rbln_fw_ctrl.md): decodes the
// little-endian bytes and checks every rule the host applies before it
// accepts a card.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rbln/error.hpp"

namespace rbln::fw {

struct HbmRegion {
    std::uint64_t bar_offset = 0;
    std::uint64_t size = 0;
};

/// The decoded identity and state part of struct rbln_fw_ctrl.
struct ControlBlock {
    std::uint16_t iface_major = 0;
    std::uint16_t iface_minor = 0;
    std::uint32_t ctrl_size = 0;
    std::uint32_t family = 0;
    std::uint32_t chiplet_count = 0;
    std::uint32_t doorbell_peer_id = 0;
    std::uint32_t num_vectors = 0;
    std::array<std::uint8_t, 16> uuid{};
    std::string serial;
    std::string fw_version;
    std::uint64_t bar_size = 0;
    std::vector<HbmRegion> hbm; ///< chiplet_count entries
    std::uint32_t fw_state = 0;
    std::uint32_t fault_code = 0;
    std::string fault_reason;
    std::uint32_t host_ack = 0;
    std::uint32_t admin_sq_head = 0;
    std::uint64_t heartbeat = 0;
    std::uint32_t host_ctrl = 0;
    std::uint32_t host_gen = 0;
    std::uint32_t ring_entries = 0;
};

/// Decodes and validates a control block: size, magic, major version (a
/// newer minor is accepted), ctrl_size, family, chiplet count 1..8, vectors,
/// BAR size a power of two, every HBM aperture aligned, inside the BAR, past
/// the control region and not overlapping another, and NUL-terminated
/// strings.  Errors are Errc::BadControlBlock with a message saying which
/// rule failed; @source names the bytes in it (e.g. a file name).
Result<ControlBlock> parse_control_block(std::span<const std::byte> bytes,
                                         std::string_view source = "control block");

/// "reset", "booting", "ready", "fault", or "unknown(N)".
std::string fw_state_name(std::uint32_t state);
/// "none", "bad-ring-config", "bad-iface", "internal", "thermal", or "unknown(N)".
std::string fault_code_name(std::uint32_t code);

} // namespace rbln::fw
