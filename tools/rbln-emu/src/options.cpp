// SPDX-License-Identifier: GPL-2.0
#include "options.h"

#include <charconv>
#include <limits>

#include "bar_layout.h"
#include "rbln_fw_ctrl.h"

namespace rbln::emu {

std::optional<Family> parse_family(std::string_view name) {
    if (name == "rebel100")
        return Family::rebel100;
    if (name == "atom")
        return Family::atom;
    return std::nullopt;
}

const char* family_name(Family family) {
    return family == Family::atom ? "atom" : "rebel100";
}

unsigned family_chiplets(Family family) {
    return family == Family::atom ? 1U : 4U;
}

std::uint32_t family_code(Family family) {
    return family == Family::atom ? RBLN_FW_FAMILY_ATOM : RBLN_FW_FAMILY_REBEL100;
}

std::optional<std::uint64_t> parse_u64(std::string_view text) {
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text.remove_prefix(2);
    }
    if (text.empty())
        return std::nullopt;
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value, base);
    if (ec != std::errc() || ptr != end)
        return std::nullopt;
    return value;
}

std::optional<std::int64_t> parse_i64(std::string_view text) {
    if (text.empty())
        return std::nullopt;
    std::int64_t value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
    if (ec != std::errc() || ptr != end)
        return std::nullopt;
    return value;
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
    if (text.empty())
        return std::nullopt;
    unsigned shift = 0;
    switch (text.back()) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift != 0)
        text.remove_suffix(1);
    if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
    auto value = parse_u64(text);
    if (!value)
        return std::nullopt;
    if (shift != 0 && *value > (std::numeric_limits<std::uint64_t>::max() >> shift))
        return std::nullopt;
    return *value << shift;
}

namespace {

// Walks "--name value" and "--name=value" forms.
class ArgCursor {
public:
    explicit ArgCursor(std::span<const std::string_view> args) : args_(args) {}

    [[nodiscard]] bool done() const { return pos_ >= args_.size(); }

    // Splits the next argument into name and inline value.
    std::string_view next_name() {
        std::string_view arg = args_[pos_++];
        inline_value_.reset();
        if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
            inline_value_ = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        return arg;
    }

    std::string_view value(std::string_view name) {
        if (inline_value_)
            return *inline_value_;
        if (done())
            throw UsageError(std::string(name) + ": missing value");
        return args_[pos_++];
    }

    void no_value(std::string_view name) const {
        if (inline_value_)
            throw UsageError(std::string(name) + ": takes no value");
    }

    std::span<const std::string_view> rest() const { return args_.subspan(pos_); }

private:
    std::span<const std::string_view> args_;
    std::size_t pos_ = 0;
    std::optional<std::string_view> inline_value_;
};

std::uint64_t size_value(std::string_view name, std::string_view value) {
    auto size = parse_size(value);
    if (!size)
        throw UsageError(std::string(name) + ": bad size '" + std::string(value) +
                         "' (a number with optional K, M, G or T suffix)");
    return *size;
}

bool valid_serial(std::string_view serial) {
    if (serial.empty() || serial.size() > kMaxSerialLen)
        return false;
    for (char c : serial) {
        if (c <= ' ' || c > '~' || c == '=' || c == ']')
            return false;
    }
    return true;
}

} // namespace

Options parse_options(std::span<const std::string_view> args) {
    Options opt;
    ArgCursor cur(args);
    while (!cur.done()) {
        const std::string_view name = cur.next_name();
        if (name == "--help" || name == "-h") {
            cur.no_value(name);
            opt.help = true;
        } else if (name == "--family") {
            const std::string_view v = cur.value(name);
            auto family = parse_family(v);
            if (!family)
                throw UsageError("--family: unknown family '" + std::string(v) +
                                 "' (rebel100 or atom)");
            opt.family = *family;
        } else if (name == "--hbm-per-chiplet") {
            opt.hbm_per_chiplet = size_value(name, cur.value(name));
            if (opt.hbm_per_chiplet == 0 || opt.hbm_per_chiplet % RBLN_FW_HBM_ALIGN != 0)
                throw UsageError("--hbm-per-chiplet: must be a non-zero multiple of 2M");
        } else if (name == "--socket") {
            opt.socket_path = cur.value(name);
        } else if (name == "--control") {
            opt.control_path = cur.value(name);
        } else if (name == "--guest-ram") {
            opt.guest_ram_path = cur.value(name);
        } else if (name == "--guest-ram-size") {
            opt.guest_ram_size = size_value(name, cur.value(name));
            if (*opt.guest_ram_size == 0 || *opt.guest_ram_size % 4096 != 0)
                throw UsageError("--guest-ram-size: must be a non-zero multiple of 4K");
        } else if (name == "--guest-lowmem") {
            opt.guest_lowmem = size_value(name, cur.value(name));
            if (*opt.guest_lowmem > (4ULL << 30))
                throw UsageError("--guest-lowmem: must be at most 4G");
        } else if (name == "--vectors") {
            const std::string_view v = cur.value(name);
            auto n = parse_u64(v);
            if (!n || *n < RBLN_FW_MIN_VECTORS || *n > kMaxVectors)
                throw UsageError("--vectors: bad value '" + std::string(v) + "' (" +
                                 std::to_string(RBLN_FW_MIN_VECTORS) + ".." +
                                 std::to_string(kMaxVectors) + ")");
            opt.vectors = static_cast<unsigned>(*n);
        } else if (name == "--iface-minor") {
            const std::string_view v = cur.value(name);
            auto n = parse_u64(v);
            if (!n || *n < 2 || *n > RBLN_FW_IFACE_MINOR)
                throw UsageError("--iface-minor: bad value '" + std::string(v) + "' (2.." +
                                 std::to_string(RBLN_FW_IFACE_MINOR) + ")");
            opt.iface_minor = static_cast<std::uint16_t>(*n);
        } else if (name == "--serial") {
            const std::string_view v = cur.value(name);
            if (!valid_serial(v))
                throw UsageError("--serial: '" + std::string(v) +
                                 "' is not 1..31 printable characters without spaces");
            opt.serial = v;
        } else if (name == "--log-level") {
            const std::string_view v = cur.value(name);
            auto level = parse_log_level(v);
            if (!level)
                throw UsageError("--log-level: unknown level '" + std::string(v) +
                                 "' (error, warn, info or debug)");
            opt.log_level = *level;
        } else if (name == "--dma-nt-threshold") {
            const std::string_view v = cur.value(name);
            if (v != "auto") {
                opt.dma_nt_threshold = size_value(name, v);
                if (*opt.dma_nt_threshold == 0)
                    throw UsageError("--dma-nt-threshold: must be at least 1 (or auto)");
            }
        } else if (name == "--replug") {
            cur.no_value(name);
            opt.replug = true;
        } else if (name == "--fault") {
            const std::string_view v = cur.value(name);
            if (v != "no-response")
                throw UsageError("--fault: unknown fault '" + std::string(v) + "' (no-response)");
            opt.fault_no_response = true;
        } else {
            throw UsageError(std::string(name) + ": unknown option");
        }
    }
    if (opt.help)
        return opt;
    if (opt.socket_path.empty())
        throw UsageError("--socket: required");
    if (opt.guest_ram_path.empty())
        throw UsageError("--guest-ram: required");
    if (opt.control_path.empty())
        opt.control_path = opt.socket_path + ".ctl";
    if (opt.control_path == opt.socket_path)
        throw UsageError("--control: must differ from --socket");
    if (opt.guest_ram_size && opt.guest_lowmem && *opt.guest_lowmem > *opt.guest_ram_size)
        throw UsageError("--guest-lowmem: larger than --guest-ram-size");
    // The BAR must be representable; reject absurd HBM sizes here, by name.
    try {
        (void)compute_bar_layout(family_chiplets(opt.family), opt.hbm_per_chiplet);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--hbm-per-chiplet: ") + e.what());
    }
    return opt;
}

CtlOptions parse_ctl_options(std::span<const std::string_view> args) {
    CtlOptions opt;
    ArgCursor cur(args);
    while (!cur.done()) {
        auto rest = cur.rest();
        if (!rest.front().starts_with("--"))
            break;
        const std::string_view name = cur.next_name();
        if (name == "--control")
            opt.control_path = cur.value(name);
        else
            throw UsageError(std::string(name) + ": unknown option of 'ctl'");
    }
    if (opt.control_path.empty())
        throw UsageError("--control: required for 'ctl'");
    for (std::string_view word : cur.rest()) {
        if (!opt.command.empty())
            opt.command += ' ';
        opt.command += word;
    }
    if (opt.command.empty())
        throw UsageError("ctl: missing COMMAND");
    if (opt.command.find('\n') != std::string::npos)
        throw UsageError("ctl: COMMAND must not contain a newline");
    return opt;
}

const char* usage_text() {
    return "usage: rbln-emu --socket PATH --guest-ram PATH [options]\n"
           "       rbln-emu ctl --control PATH COMMAND...\n"
           "\n"
           "Emulates one rbln card behind QEMU's ivshmem-doorbell device.\n"
           "\n"
           "  --family rebel100|atom    card family (default rebel100: 4 chiplets; atom: 1)\n"
           "  --hbm-per-chiplet SIZE    HBM per chiplet, multiple of 2M (default 256M)\n"
           "  --socket PATH             ivshmem server socket QEMU connects to (required)\n"
           "  --control PATH            control socket (default <socket>.ctl)\n"
           "  --guest-ram PATH          QEMU memory-backend-file of the guest RAM (required)\n"
           "  --guest-ram-size SIZE     size when the RAM file has to be created\n"
           "  --guest-lowmem SIZE       guest RAM below 4G (default: QEMU pc rule)\n"
           "  --vectors N               MSI-X vectors, equal to QEMU's vectors= (default 4)\n"
           "  --iface-minor N           speak firmware-iface 1.N, 2..4 (default 4; 3: no\n"
           "                            GRAPH_EXEC; 2: nor VM_ABORT, FAULT_ABORTS)\n"
           "  --serial STR              card serial (default RBLNEMU-<hex>)\n"
           "  --log-level LEVEL         error|warn|info|debug (default info)\n"
           "  --fault no-response       start with the no-response fault armed\n"
           "  --replug                  outlive QEMU's disconnect (device_del): the card\n"
           "                            is unplugged and the next connection finds a\n"
           "                            fresh one (default: exit)\n"
           "  --dma-nt-threshold SIZE   DMA copies from SIZE on bypass the CPU caches\n"
           "                            (default auto: measured at start-up)\n"
           "  --help                    this text\n"
           "\n"
           "Control commands: status | set KEY=N... | fault KIND [ARGS] | memcpy-bench size=N | "
           "help\n"
           "(help lists the fault kinds and their arguments)\n";
}

} // namespace rbln::emu
