// SPDX-License-Identifier: GPL-2.0
#include "control.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace rbln::emu {

namespace {

// A bad command; becomes "error <message>".
class CommandError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct CommandLine {
    std::string_view line;
    std::vector<std::string_view> words;

    // The text of the line from `word` (a view into it) to its end.
    [[nodiscard]] std::string_view rest_from(std::string_view word) const {
        return line.substr(static_cast<std::size_t>(word.data() - line.data()));
    }
};

CommandLine split(std::string_view line) {
    CommandLine cl{line, {}};
    std::size_t pos = 0;
    while (pos < line.size()) {
        const std::size_t start = line.find_first_not_of(" \t", pos);
        if (start == std::string_view::npos)
            break;
        std::size_t end = line.find_first_of(" \t", start);
        if (end == std::string_view::npos)
            end = line.size();
        cl.words.push_back(line.substr(start, end - start));
        pos = end;
    }
    return cl;
}

// Quotes user text in an error message safely (printable, bounded).
std::string shown(std::string_view text) {
    std::string out = "'";
    for (char c : text.substr(0, 64))
        out += (c >= ' ' && c <= '~') ? c : '?';
    if (text.size() > 64)
        out += "...";
    out += "'";
    return out;
}

struct KeyValue {
    std::string_view key;
    std::string_view value;
};

KeyValue split_kv(std::string_view word) {
    const std::size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0)
        throw CommandError("expected key=value, got " + shown(word));
    return {word.substr(0, eq), word.substr(eq + 1)};
}

template <typename T> T number(const KeyValue& kv) {
    if constexpr (std::is_signed_v<T>) {
        auto v = parse_i64(kv.value);
        if (!v || *v < std::numeric_limits<T>::min() || *v > std::numeric_limits<T>::max())
            throw CommandError(std::string(kv.key) + ": bad value " + shown(kv.value));
        return static_cast<T>(*v);
    } else {
        auto v = parse_u64(kv.value);
        if (!v || *v > std::numeric_limits<T>::max())
            throw CommandError(std::string(kv.key) + ": bad value " + shown(kv.value));
        return static_cast<T>(*v);
    }
}

std::string status_reply(const Card& card) {
    const CardStats s = card.stats();
    const CardIdentity& id = card.identity();
    std::string r = "ok state=";
    r += Card::state_name(card.state());
    r += " fault_code=" + std::to_string(card.fault_code());
    r += " family=";
    r += family_name(id.family);
    r += " chiplets=" + std::to_string(id.layout.chiplets);
    r += " hbm_per_chiplet=" + std::to_string(id.layout.hbm[0].size);
    r += " temp_mc=" + std::to_string(card.telemetry().temp_mc);
    r += " power_uw=" + std::to_string(card.telemetry().power_uw);
    r += " heartbeat=" + std::to_string(card.heartbeat());
    r += " admin_requests=" + std::to_string(s.admin_requests);
    r += " bad_requests=" + std::to_string(s.bad_requests);
    r += " no_response=";
    r += card.no_response() ? "1" : "0";
    r += " events=" + std::to_string(s.events);
    r += " events_dropped=" + std::to_string(s.events_dropped);
    r += " serial=" + id.serial;
    r += " vm_bound=" + std::to_string(s.vm_bound);
    r += " mmu_faults=" + std::to_string(s.mmu_faults);
    r += " tlb_hits=" + std::to_string(s.tlb_hits);
    r += " tlb_misses=" + std::to_string(s.tlb_misses);
    r += " tlb_invalidations=" + std::to_string(s.tlb_invalidations);
    // The command rings (firmware-iface 1.2).
    r += " rings_up=" + std::to_string(s.rings_up);
    r += " jobs=" + std::to_string(s.jobs);
    r += " jobs_failed=" + std::to_string(s.jobs_failed);
    r += " jobs_aborted=" + std::to_string(s.jobs_aborted);
    r += " packets=" + std::to_string(s.packets);
    r += " dma_bytes=" + std::to_string(s.dma_bytes);
    r += " ring_cpl_stalls=" + std::to_string(s.ring_cpl_stalls);
    r += " ring_cpls_dropped=" + std::to_string(s.ring_cpls_dropped);
    r += " hung=" + std::to_string(s.hung);
    r += " dma_error_armed=" + std::to_string(s.dma_error_armed);
    r += " corrupt_cpl_armed=" + std::to_string(s.corrupt_cpl_armed);
    r += " injected_hangs=" + std::to_string(s.injected_hangs);
    r += " injected_dma_errors=" + std::to_string(s.injected_dma_errors);
    r += " injected_corrupt_cpls=" + std::to_string(s.injected_corrupt_cpls);
    r += " busy_ns=";
    const Telemetry t = card.telemetry();
    for (unsigned i = 0; i < id.layout.chiplets; i++) {
        if (i != 0)
            r += ',';
        r += std::to_string(t.chiplet.at(i).busy_ns);
    }
    r += " ring_irqs_moderated=" + std::to_string(s.ring_irqs_moderated);
    r += " ring_irqs_backstop=" + std::to_string(s.ring_irqs_backstop);
    r += " lost_irq_armed=" + std::to_string(s.lost_irq_armed);
    r += " injected_lost_irqs=" + std::to_string(s.injected_lost_irqs);
    r += " boot_faults_armed=" + std::to_string(s.boot_faults_armed);
    r += " reset_faults_armed=" + std::to_string(s.reset_faults_armed);
    r += " jobs_cancelled=" + std::to_string(s.jobs_cancelled);
    r += " graph_execs=" + std::to_string(s.graph_execs);
    r += " graph_rejected=" + std::to_string(s.graph_rejected);
    r += " graph_nodes=";
    for (unsigned i = 0; i < id.layout.chiplets; i++) {
        if (i != 0)
            r += ',';
        r += std::to_string(s.graph_nodes.at(i));
    }
    r += " removed=";
    r += card.removed() ? "1" : "0";
    return r;
}

std::string cmd_status(Card& card, const CommandLine& cl) {
    if (cl.words.size() != 1)
        throw CommandError("status takes no arguments");
    return status_reply(card);
}

std::string cmd_set(Card& card, const CommandLine& cl) {
    if (cl.words.size() < 2)
        throw CommandError("usage: set temp_mc=N | set power_uw=N | set chiplet=I "
                           "[temp_mc=N] [clock_mhz=N] [mem_clock_mhz=N] [busy_ns=N]");
    std::vector<KeyValue> kvs;
    for (std::size_t i = 1; i < cl.words.size(); i++) {
        KeyValue kv = split_kv(cl.words[i]);
        for (const KeyValue& seen : kvs) {
            if (seen.key == kv.key)
                throw CommandError(shown(kv.key) + ": given twice");
        }
        kvs.push_back(kv);
    }
    const auto chiplet_kv = std::find_if(kvs.begin(), kvs.end(),
                                         [](const KeyValue& kv) { return kv.key == "chiplet"; });
    if (chiplet_kv == kvs.end()) {
        std::optional<std::int32_t> temp;
        std::optional<std::uint64_t> power;
        for (const KeyValue& kv : kvs) {
            if (kv.key == "temp_mc")
                temp = number<std::int32_t>(kv);
            else if (kv.key == "power_uw")
                power = number<std::uint64_t>(kv);
            else
                throw CommandError("set: unknown key " + shown(kv.key) +
                                   " (temp_mc, power_uw, or chiplet=I with chiplet keys)");
        }
        if (temp)
            card.set_card_temp(*temp);
        if (power)
            card.set_power(*power);
        return "ok";
    }
    const auto index = number<std::uint32_t>(*chiplet_kv);
    if (index >= card.identity().layout.chiplets)
        throw CommandError("chiplet: " + std::to_string(index) + " out of range (card has " +
                           std::to_string(card.identity().layout.chiplets) + ")");
    if (kvs.size() == 1)
        throw CommandError("set chiplet=I: no values given");
    ChipletTelemetry t = card.telemetry().chiplet.at(index);
    bool with_busy = false;
    for (const KeyValue& kv : kvs) {
        if (kv.key == "chiplet")
            continue;
        if (kv.key == "temp_mc")
            t.temp_mc = number<std::int32_t>(kv);
        else if (kv.key == "clock_mhz")
            t.clock_mhz = number<std::uint32_t>(kv);
        else if (kv.key == "mem_clock_mhz")
            t.mem_clock_mhz = number<std::uint32_t>(kv);
        else if (kv.key == "busy_ns") {
            t.busy_ns = number<std::uint64_t>(kv);
            with_busy = true;
        } else
            throw CommandError("set chiplet: unknown key " + shown(kv.key) +
                               " (temp_mc, clock_mhz, mem_clock_mhz, busy_ns)");
    }
    card.set_chiplet(index, t, with_busy);
    return "ok";
}

// ---- faults: one entry per fault kind; add new ones to kFaults ----

using FaultFn = std::function<std::string(Card&, const CommandLine&)>;

struct FaultKind {
    std::string_view name;
    std::string_view usage;
    FaultFn run;
};

void no_args(const CommandLine& cl, std::string_view what) {
    if (cl.words.size() != 2)
        throw CommandError(std::string(what) + " takes no arguments");
}

std::string fault_no_response(Card& card, const CommandLine& cl) {
    no_args(cl, "fault no-response");
    card.set_no_response(true);
    return "ok";
}

std::string fault_surprise_removal(Card& card, const CommandLine& cl) {
    no_args(cl, "fault surprise-removal");
    card.surprise_remove();
    return "ok";
}

std::string fault_clear(Card& card, const CommandLine& cl) {
    no_args(cl, "fault clear");
    if (card.removed()) {
        card.power_cycle(); // plugged back: a fresh card in RESET
        return "ok";
    }
    card.set_no_response(false);
    card.clear_ring_faults();
    card.clear_start_faults();
    return "ok";
}

// `fault <kind> chiplet=N`: the chiplet of a ring fault.
unsigned fault_chiplet(const Card& card, const CommandLine& cl) {
    const std::string what = "fault " + std::string(cl.words[1]);
    if (cl.words.size() != 3)
        throw CommandError("usage: " + what + " chiplet=N");
    const KeyValue kv = split_kv(cl.words[2]);
    if (kv.key != "chiplet")
        throw CommandError(what + ": unknown key " + shown(kv.key) + " (chiplet)");
    const auto index = number<std::uint32_t>(kv);
    if (index >= card.identity().layout.chiplets)
        throw CommandError("chiplet: " + std::to_string(index) + " out of range (card has " +
                           std::to_string(card.identity().layout.chiplets) + ")");
    return index;
}

std::string fault_hang(Card& card, const CommandLine& cl) {
    card.inject_hang(fault_chiplet(card, cl));
    return "ok";
}

std::string fault_dma_error(Card& card, const CommandLine& cl) {
    card.inject_dma_error(fault_chiplet(card, cl));
    return "ok";
}

std::string fault_corrupt_cpl(Card& card, const CommandLine& cl) {
    card.inject_corrupt_cpl(fault_chiplet(card, cl));
    return "ok";
}

std::string fault_lost_irq(Card& card, const CommandLine& cl) {
    card.inject_lost_irq(fault_chiplet(card, cl));
    return "ok";
}

// `fault boot-fault|reset-fault [count=N]`: how many (1..100, default 1).
std::uint32_t fault_count(const CommandLine& cl) {
    const std::string what = "fault " + std::string(cl.words[1]);
    if (cl.words.size() == 2)
        return 1;
    if (cl.words.size() != 3)
        throw CommandError("usage: " + what + " [count=N]");
    const KeyValue kv = split_kv(cl.words[2]);
    if (kv.key != "count")
        throw CommandError(what + ": unknown key " + shown(kv.key) + " (count)");
    const auto count = number<std::uint32_t>(kv);
    if (count == 0 || count > 100)
        throw CommandError("count: " + std::to_string(count) + " out of range (1..100)");
    return count;
}

std::string fault_boot_fault(Card& card, const CommandLine& cl) {
    card.inject_boot_faults(fault_count(cl));
    return "ok";
}

std::string fault_reset_fault(Card& card, const CommandLine& cl) {
    card.inject_reset_faults(fault_count(cl));
    return "ok";
}

std::uint32_t fault_code_value(std::string_view v) {
    struct Named {
        std::string_view name;
        std::uint32_t code;
    };
    static constexpr std::array<Named, 4> kNames{{
        {"bad-ring-config", RBLN_FW_FAULT_BAD_RING_CONFIG},
        {"bad-iface", RBLN_FW_FAULT_BAD_IFACE},
        {"internal", RBLN_FW_FAULT_INTERNAL},
        {"thermal", RBLN_FW_FAULT_THERMAL},
    }};
    for (const Named& n : kNames) {
        if (n.name == v)
            return n.code;
    }
    auto code = parse_u64(v);
    if (!code || *code == 0 || *code > 0xffffffffULL)
        throw CommandError("code: bad value " + shown(v) +
                           " (non-zero number, or internal, thermal, bad-ring-config, bad-iface)");
    return static_cast<std::uint32_t>(*code);
}

std::string fault_fw_fault(Card& card, const CommandLine& cl) {
    std::uint32_t code = RBLN_FW_FAULT_INTERNAL;
    std::string reason = "injected firmware fault";
    bool have_code = false;
    for (std::size_t i = 2; i < cl.words.size(); i++) {
        const std::string_view w = cl.words[i];
        if (w.starts_with("reason=")) {
            // The reason is the rest of the line, spaces included.
            const std::string_view text = cl.rest_from(w).substr(7);
            for (char c : text) {
                if (c < ' ' || c > '~')
                    throw CommandError("reason: only printable ASCII");
            }
            if (!text.empty())
                reason = text;
            break;
        }
        const KeyValue kv = split_kv(w);
        if (kv.key != "code")
            throw CommandError("fault fw-fault: unknown key " + shown(kv.key) + " (code, reason)");
        if (have_code)
            throw CommandError("code: given twice");
        code = fault_code_value(kv.value);
        have_code = true;
    }
    card.inject_fw_fault(code, reason);
    return "ok";
}

const std::array<FaultKind, 10>& faults() {
    static const std::array<FaultKind, 10> kFaults{{
        {"no-response", "fault no-response", fault_no_response},
        {"fw-fault", "fault fw-fault [code=N] [reason=TEXT...]", fault_fw_fault},
        {"clear", "fault clear", fault_clear},
        {"hang", "fault hang chiplet=N", fault_hang},
        {"dma-error", "fault dma-error chiplet=N", fault_dma_error},
        {"corrupt-cpl", "fault corrupt-cpl chiplet=N", fault_corrupt_cpl},
        {"lost-irq", "fault lost-irq chiplet=N", fault_lost_irq},
        {"boot-fault", "fault boot-fault [count=N]", fault_boot_fault},
        {"reset-fault", "fault reset-fault [count=N]", fault_reset_fault},
        {"surprise-removal", "fault surprise-removal", fault_surprise_removal},
    }};
    return kFaults;
}

std::string fault_names() {
    std::string names;
    for (const FaultKind& f : faults()) {
        if (!names.empty())
            names += ',';
        names += f.name;
    }
    return names;
}

std::string cmd_fault(Card& card, const CommandLine& cl) {
    if (cl.words.size() < 2)
        throw CommandError("usage: fault " + fault_names());
    for (const FaultKind& f : faults()) {
        if (f.name != cl.words[1])
            continue;
        if (card.removed() && f.name != "clear")
            throw CommandError(
                "the card is removed (surprise-removal); 'fault clear' plugs it back");
        return f.run(card, cl);
    }
    throw CommandError("fault: unknown fault " + shown(cl.words[1]) + " (" + fault_names() + ")");
}

// `memcpy-bench size=N`: the emulator's own memcpy of N bytes between two
// buffers of its own, the baseline of the card's COPY bandwidth.  One
// warm-up copy, then copies until >= 50 ms and >= 3 copies; the median.
// It runs on the control thread (which waits meanwhile, at most about a
// second for 1 GiB).
std::string cmd_memcpy_bench(Card& /*card*/, const CommandLine& cl) {
    constexpr std::uint64_t kMax = 1ULL << 30;
    if (cl.words.size() != 2)
        throw CommandError("usage: memcpy-bench size=N (1 .. 1 GiB)");
    const KeyValue kv = split_kv(cl.words[1]);
    if (kv.key != "size")
        throw CommandError("memcpy-bench: unknown key " + shown(kv.key) + " (size)");
    const auto size = number<std::uint64_t>(kv);
    if (size == 0 || size > kMax)
        throw CommandError("size: " + std::to_string(size) + " out of range (1 .. 1 GiB)");
    const auto n = static_cast<std::size_t>(size);
    auto src = std::make_unique<std::byte[]>(n); // value-initialised: touched
    auto dst = std::make_unique<std::byte[]>(n);
    std::memset(src.get(), 0x5a, n);
    using Clock = std::chrono::steady_clock;
    std::memcpy(dst.get(), src.get(), n);
    std::vector<std::int64_t> ns;
    const auto start = Clock::now();
    while (ns.size() < 3 || Clock::now() - start < std::chrono::milliseconds(50)) {
        const auto t0 = Clock::now();
        std::memcpy(dst.get(), src.get(), n);
        ns.push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
        src[ns.size() % n] = dst[0]; // a dependency: the copies are not elided
    }
    std::sort(ns.begin(), ns.end());
    const std::int64_t median = std::max<std::int64_t>(ns[ns.size() / 2], 1);
    const std::int64_t best = std::max<std::int64_t>(ns.front(), 1);
    auto gbps = [size](std::int64_t t) {
        std::array<char, 32> b{};
        std::snprintf(b.data(), b.size(), "%.3f",
                      static_cast<double>(size) / static_cast<double>(t));
        return std::string(b.data());
    };
    return "ok size=" + std::to_string(size) + " copies=" + std::to_string(ns.size()) +
           " ns=" + std::to_string(median) + " gbps=" + gbps(median) +
           " best_ns=" + std::to_string(best) + " best_gbps=" + gbps(best);
}

using CommandFn = std::string (*)(Card&, const CommandLine&);

struct Command {
    std::string_view name;
    CommandFn run;
};

std::string cmd_help(Card& card, const CommandLine& cl);

constexpr std::array<Command, 5> kCommands{{
    {"status", cmd_status},
    {"set", cmd_set},
    {"fault", cmd_fault},
    {"memcpy-bench", cmd_memcpy_bench},
    {"help", cmd_help},
}};

std::string cmd_help(Card& /*card*/, const CommandLine& /*cl*/) {
    std::string r = "ok commands=";
    for (std::size_t i = 0; i < kCommands.size(); i++) {
        if (i != 0)
            r += ',';
        r += kCommands.at(i).name;
    }
    r += " faults=" + fault_names();
    // The arguments of the faults that take any, e.g. hang:chiplet=N.
    r += " fault_args=";
    bool first = true;
    for (const FaultKind& f : faults()) {
        const std::string prefix = "fault " + std::string(f.name);
        if (f.usage.size() <= prefix.size())
            continue;
        std::string args(f.usage.substr(prefix.size() + 1));
        std::replace(args.begin(), args.end(), ' ', ':');
        r += first ? "" : ",";
        r += std::string(f.name) + ":" + args;
        first = false;
    }
    r += " set_keys=temp_mc,power_uw,chiplet,clock_mhz,mem_clock_mhz,busy_ns";
    return r;
}

} // namespace

std::string ControlInterface::execute(std::string_view line) {
    if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
    const CommandLine cl = split(line);
    if (cl.words.empty())
        return "error empty command (try help)";
    try {
        for (const Command& c : kCommands) {
            if (c.name == cl.words[0])
                return c.run(card_, cl);
        }
        return "error unknown command " + shown(cl.words[0]) + " (try help)";
    } catch (const CommandError& e) {
        return std::string("error ") + e.what();
    } catch (const std::exception& e) {
        return std::string("error internal: ") + e.what();
    }
}

} // namespace rbln::emu
