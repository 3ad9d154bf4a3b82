// SPDX-License-Identifier: GPL-2.0
// Command line of rbln-emu: sizes, families, and the option parser.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "log.h"
#include "rbln_fw_ctrl.h"

namespace rbln::emu {

// A bad command line; the message names the option.  main() exits 2.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class Family { rebel100, atom };

std::optional<Family> parse_family(std::string_view name);
const char* family_name(Family family);
unsigned family_chiplets(Family family);
std::uint32_t family_code(Family family); // RBLN_FW_FAMILY_*

// "4096", "64K", "256M", "2G", "1T" (binary multiples, case-insensitive).
// nullopt on anything else, including overflow.
std::optional<std::uint64_t> parse_size(std::string_view text);

// Strict unsigned decimal (or 0x hex) number; nullopt on junk or overflow.
std::optional<std::uint64_t> parse_u64(std::string_view text);
std::optional<std::int64_t> parse_i64(std::string_view text);

inline constexpr std::uint64_t kDefaultHbmPerChiplet = 256ULL << 20;
inline constexpr unsigned kDefaultVectors = 4;
inline constexpr unsigned kMaxVectors = 64;
inline constexpr std::size_t kMaxSerialLen = 31;

struct Options {
    Family family = Family::rebel100;
    std::uint64_t hbm_per_chiplet = kDefaultHbmPerChiplet;
    std::string socket_path;
    std::string control_path; // filled with "<socket>.ctl" when not given
    std::string guest_ram_path;
    std::optional<std::uint64_t> guest_ram_size;
    std::optional<std::uint64_t> guest_lowmem;
    unsigned vectors = kDefaultVectors;
    // The firmware-iface minor version the card speaks: 3 (default), or 2
    // (no VM_ABORT, no FAULT_ABORTS: a card of the previous firmware).
    std::uint16_t iface_minor = RBLN_FW_IFACE_MINOR;
    std::string serial; // empty: derived at start-up
    LogLevel log_level = LogLevel::info;
    bool fault_no_response = false;
    // QEMU disconnecting (its ivshmem device was unplugged) does not end
    // the emulator: the card is removed, powered off and waits for the
    // next connection, which finds a fresh card (hot unplug and plug).
    bool replug = false;
    // Copies from this size on bypass the CPU caches (dma.h); nullopt:
    // measured at start-up.
    std::optional<std::uint64_t> dma_nt_threshold;
    bool help = false;
};

// Parses the arguments after argv[0].  Throws UsageError.
Options parse_options(std::span<const std::string_view> args);

const char* usage_text();

// Options of "rbln-emu ctl --control PATH COMMAND...".
struct CtlOptions {
    std::string control_path;
    std::string command; // the words joined by single spaces
};

CtlOptions parse_ctl_options(std::span<const std::string_view> args);

} // namespace rbln::emu
