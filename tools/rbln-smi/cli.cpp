// SPDX-License-Identifier: GPL-2.0
// cli.cpp - rbln-smi's command line.

#include "cli.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "card_extras.hpp"
#include "format.hpp"
#include "gone.hpp"
#include "query.hpp"
#include "rbln/diagnostics.hpp"
#include "rbln/discovery.hpp"
#include "rbln/fdinfo.hpp"
#include "rbln/version.hpp"
#include "topology.hpp"
#include "utilization.hpp"

namespace rbln::smi {

namespace {

constexpr std::string_view kHelp = R"(Usage: rbln-smi [OPTION]...
Show the rbln NPU cards of this machine: identity, temperature, power,
memory (per chiplet, used / total), utilisation, firmware and state, and
the processes using them with their memory and utilisation (from
/proc/<pid>/fdinfo).  Works without root (other users' processes are then
counted, not shown); never wakes a runtime-suspended card (its telemetry
shows as N/A).

Utilisation is the share of an interval a chiplet's command ring spent
running jobs: sysfs chiplet<i>/busy_ns (per process: fdinfo
drm-engine-chiplet<i>) read twice, INTERVAL ms apart.

  -L, --list                  one line per card (no sampling)
  -j, --json                  JSON (schema_version 2.1; units in the key names)
  -i, --id LIST               only the cards in LIST: NPU indices or PCI
                              addresses, comma-separated (-i 0,2)
  -l, --loop N                a sample every N seconds (1 to 86400) until
                              Ctrl-C (SIGINT) or SIGTERM, which end the
                              loop after the current sample, exit status 0
      --query FIELD,...       the fields of each card as CSV, one line per
                              card (the fields are listed below)
      --format csv[,noheader][,nounits]
                              --query's format: no header line; values
                              without their units (the header keeps them)
      --topo                  the topology: each card's NUMA node, local
                              CPUs, PCI path and chiplets, and how each
                              pair of cards is connected
      --reset                 reset the cards named by -i (root only), through
                              sysfs rbln/reset; refused while processes hold
                              a card
      --force                 with --reset: reset cards that are in use (their
                              jobs on the card fail with EIO)
      --interval-ms N         sample the busy counters N ms apart
                              (default 100; 0 = no utilisation, at most 60000)
      --no-util               no utilisation (as --interval-ms 0)
      --dump-control-block FILE
                              decode and validate a firmware-iface control
                              block dump (with -j: as JSON)
  -V, --version               print the versions of rbln-smi and librbln
  -h, --help                  print this help

Fields of --query:
)";

constexpr std::string_view kHelpExit = R"(
Exit status:
  0  success (also after Ctrl-C ends -l)
  1  other error (message on stderr)
  2  usage error (also an unknown --query field)
  3  the rbln driver is not loaded (/sys/module/rbln is absent)
  4  no device: the driver is loaded but no accel node is bound to rbln,
     or a card named by -i is not there
  5  permission denied: a node that is needed could not be opened, or
     --reset without root
  6  --reset refused: processes hold the card (use --force)
)";

struct Options {
    bool help = false;
    bool version = false;
    bool list = false;
    bool json = false;
    bool timing = false; // hidden: report the time rbln-smi itself took
    unsigned interval_ms = kDefaultIntervalMs;
    std::string root = "/";
    std::optional<std::string> control_block;
    std::vector<std::string> select;      // -i: indices or PCI addresses
    std::optional<unsigned> loop_seconds; // -l
    std::optional<std::vector<const QueryField*>> query;
    std::optional<CsvFormat> format;
    bool topo = false;
    bool reset = false;
    bool force = false;
};

struct UsageError {
    std::string message;
};

std::optional<unsigned> parse_unsigned(const std::string& text, unsigned max) {
    unsigned v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v > max)
        return std::nullopt;
    return v;
}

unsigned parse_interval(const std::string& text) {
    const auto ms = parse_unsigned(text, kMaxIntervalMs);
    if (!ms)
        throw UsageError{"--interval-ms needs a number of milliseconds from 0 to " +
                         std::to_string(kMaxIntervalMs) + ", got '" + text + "'"};
    return *ms;
}

unsigned parse_loop(const std::string& text) {
    const auto s = parse_unsigned(text, kMaxLoopSeconds);
    if (!s || *s == 0)
        throw UsageError{"-l needs a number of seconds from 1 to " +
                         std::to_string(kMaxLoopSeconds) + ", got '" + text + "'"};
    return *s;
}

bool is_hex(std::string_view s, std::size_t n) {
    return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
           });
}

// "0000:00:04.0", or "00:04.0" with the domain 0000 implied; lower case.
std::optional<std::string> parse_bdf(std::string text) {
    if (text.size() == 7)
        text.insert(0, "0000:");
    const std::string_view s = text;
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' ||
        !is_hex(s.substr(0, 4), 4) || !is_hex(s.substr(5, 2), 2) || !is_hex(s.substr(8, 2), 2) ||
        s[11] < '0' || s[11] > '7')
        return std::nullopt;
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) {
        return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    });
    return text;
}

// -i LIST: each item an NPU index or a PCI address.
void parse_select(const std::string& list, std::vector<std::string>& select) {
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = list.find(',', start);
        const std::string item = list.substr(start, comma - start);
        if (parse_unsigned(item, 9999))
            select.push_back(std::to_string(*parse_unsigned(item, 9999)));
        else if (const auto bdf = parse_bdf(item))
            select.push_back(*bdf);
        else {
            std::string msg = "-i: '";
            msg.append(item).append("' in '").append(list).append(
                "' is neither an NPU index (0, 1, ...) nor a PCI address (0000:00:04.0)");
            throw UsageError{msg};
        }
        if (comma == std::string::npos)
            return;
        start = comma + 1;
    }
}

// The options that pick a view, for the messages about combining them.
void check_combinations(const Options& o) {
    if (o.list && o.json)
        throw UsageError{"-L and -j cannot be combined"};
    if (o.control_block && o.list)
        throw UsageError{"--dump-control-block cannot be combined with -L"};
    if (o.control_block && (o.query || o.topo || o.reset || o.loop_seconds || !o.select.empty()))
        throw UsageError{"--dump-control-block reads a file: it cannot be combined with "
                         "-i, -l, --query, --topo or --reset"};
    if (o.query && (o.list || o.json || o.topo))
        throw UsageError{"--query cannot be combined with -L, -j or --topo"};
    if (o.format && !o.query)
        throw UsageError{"--format applies to --query only"};
    if (o.topo && (o.list || o.json))
        throw UsageError{"--topo cannot be combined with -L or -j (-j has the topology: "
                         "numa_node, local_cpulist, pci_path)"};
    if (o.reset && o.select.empty())
        throw UsageError{"--reset needs -i to name the card(s) to reset"};
    if (o.reset && (o.loop_seconds || o.list || o.json || o.query || o.topo))
        throw UsageError{"--reset cannot be combined with -l, -L, -j, --query or --topo"};
    if (o.force && !o.reset)
        throw UsageError{"--force applies to --reset only"};
}

Options parse(std::span<const std::string_view> args) {
    Options o;
    for (std::size_t i = 0; i < args.size(); i++) {
        const std::string_view a = args[i];
        auto operand = [&](std::string_view name) -> std::string {
            const std::string prefix = std::string(name) + "=";
            if (a.starts_with(prefix))
                return std::string(a.substr(prefix.size()));
            if (i + 1 >= args.size())
                throw UsageError{"option '" + std::string(name) + "' needs an argument"};
            return std::string(args[++i]);
        };
        auto is = [&](std::string_view name) {
            return a == name || a.starts_with(std::string(name) + "=");
        };
        if (a == "-h" || a == "--help") {
            o.help = true;
        } else if (a == "-V" || a == "--version") {
            o.version = true;
        } else if (a == "-L" || a == "--list") {
            o.list = true;
        } else if (a == "-j" || a == "--json") {
            o.json = true;
        } else if (a == "-i" || is("--id")) {
            parse_select(operand(a == "-i" ? "-i" : "--id"), o.select);
        } else if (a == "-l" || is("--loop")) {
            o.loop_seconds = parse_loop(operand(a == "-l" ? "-l" : "--loop"));
        } else if (is("--query")) {
            try {
                o.query = parse_query(operand("--query"));
            } catch (const QueryError& e) {
                throw UsageError{e.message};
            }
        } else if (is("--format")) {
            try {
                o.format = parse_format(operand("--format"));
            } catch (const QueryError& e) {
                throw UsageError{e.message};
            }
        } else if (a == "--topo") {
            o.topo = true;
        } else if (a == "--reset") {
            o.reset = true;
        } else if (a == "--force") {
            o.force = true;
        } else if (is("--interval-ms")) {
            o.interval_ms = parse_interval(operand("--interval-ms"));
        } else if (a == "--no-util") {
            o.interval_ms = 0;
        } else if (a == "--debug-timing") {
            o.timing = true;
        } else if (is("--root")) {
            o.root = operand("--root");
            if (o.root.empty())
                throw UsageError{"--root needs a non-empty path"};
        } else if (is("--dump-control-block")) {
            o.control_block = operand("--dump-control-block");
        } else if (a.starts_with("-")) {
            throw UsageError{"unknown option '" + std::string(a) + "'"};
        } else {
            throw UsageError{"unexpected argument '" + std::string(a) + "'"};
        }
    }
    check_combinations(o);
    return o;
}

std::string help_text() {
    std::string s(kHelp);
    std::size_t width = 0;
    for (const auto& f : query_fields())
        width = std::max(width, f.name.size() + (f.unit.empty() ? 0 : f.unit.size() + 3));
    for (const auto& f : query_fields()) {
        std::string name(f.name);
        if (!f.unit.empty())
            name += " [" + std::string(f.unit) + "]";
        s += "  " + name + std::string(width + 2 - name.size(), ' ') + std::string(f.help) + "\n";
    }
    s += kHelpExit;
    return s;
}

int dump_control_block(const Options& o, std::ostream& out) {
    const fw::ControlBlock cb = read_control_block(*o.control_block);
    out << (o.json ? render_control_block_json(cb) : render_control_block(cb));
    return kExitOk;
}

// Node problems worth a warning (an absent node or missing permission is
// expected when sysfs suffices; a suspended card is not opened on purpose).
bool worth_warning(const CardInfo& c) {
    if (!c.node_error || c.suspended)
        return false;
    switch (c.node_error->code()) {
    case Errc::NotFound:
    case Errc::PermissionDenied:
    case Errc::InvalidArgument:
        return false;
    default:
        return true;
    }
}

// The first sample of the busy counters, with its own scan of the clients
// if @with_clients (a scan that fails here is reported by the second one).
CounterSample first_sample(const SystemView& sys, const SampleClock& clock, bool with_clients) {
    std::optional<ClientScan> scan;
    if (with_clients) {
        try {
            scan = scan_clients(sys);
        } catch (const Error&) {
            scan.reset();
        }
    }
    return take_sample(sys, scan ? &*scan : nullptr, clock);
}

void wait_until(const Environment& env, const SampleClock& clock,
                std::chrono::nanoseconds deadline) {
    if (env.sleep_until) {
        env.sleep_until(deadline);
        return;
    }
    for (auto now = clock(); now < deadline; now = clock())
        std::this_thread::sleep_for(deadline - now);
}

std::string now_timestamp() {
    return format_timestamp(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
}

// Keeps the cards -i names, in the order of their index.  Throws
// Errc::NoDevice naming an item that matches no card.
void select_cards(Discovery& d, const std::vector<std::string>& select) {
    if (select.empty())
        return;
    std::vector<bool> keep(d.cards.size(), false);
    for (const auto& item : select) {
        bool found = false;
        for (std::size_t i = 0; i < d.cards.size(); i++) {
            const CardInfo& c = d.cards[i];
            if (item == std::to_string(c.index) || item == c.pci_bdf) {
                keep[i] = true;
                found = true;
            }
        }
        if (!found) {
            const std::string what = item.find(':') == std::string::npos
                                         ? "no NPU " + item
                                         : "no card at PCI address " + item;
            throw Error(Errc::NoDevice, "", "", 0,
                        "-i: " + what + ": this machine has NPU 0 to " +
                            std::to_string(d.cards.size() - 1) + " ('rbln-smi -L' lists them)");
        }
    }
    std::vector<CardInfo> kept;
    for (std::size_t i = 0; i < d.cards.size(); i++)
        if (keep[i])
            kept.push_back(std::move(d.cards[i]));
    d.cards = std::move(kept);
}

// The cards, found and selected; nullopt after reporting that there are
// none (exit 4).
std::optional<Discovery> find_cards(const Options& o, bool open_nodes, std::ostream& err) {
    DiscoveryOptions options;
    options.root = o.root;
    options.open_nodes = open_nodes;
    Discovery d = discover(options);
    if (d.cards.empty()) {
        const auto gone = find_gone_cards(SystemView{o.root, {}});
        if (gone.empty())
            err << "rbln-smi: no rbln device found: the driver is loaded but no accel node "
                   "is bound to rbln (see 'dmesg | grep rbln')\n";
        else
            err << "rbln-smi: no rbln device found: every card bound to rbln is gone\n"
                << render_gone(gone);
        return std::nullopt;
    }
    select_cards(d, o.select);
    for (const auto& c : d.cards)
        if (worth_warning(c))
            err << "rbln-smi: warning: NPU " << c.index << ": " << c.node_error->what() << "\n";
    return d;
}

// One sample: discovery, the counters, the view, written in one piece.
// @first: the first sample (of -l, or the only one): the CSV header.
int one_sample(const Options& o, const Environment& env, const SystemView& sys, std::ostream& out,
               std::ostream& err, bool first) {
    const auto t0 = std::chrono::steady_clock::now();
    const SampleClock clock = env.clock ? env.clock : SampleClock(monotonic_now);
    const bool view = !o.list && !o.topo; // a view with the busy counters
    const bool processes = view && !o.query;
    const bool util = view && o.interval_ms > 0 && (!o.query || needs_utilization(*o.query));
    // The first sample before discovery, so the interval overlaps it.
    std::optional<CounterSample> first_counters;
    if (util && driver_loaded(sys))
        first_counters = first_sample(sys, clock, processes);

    auto found = find_cards(o, true, err);
    if (!found)
        return kExitNoDevice;
    const Discovery& d = *found;
    std::string text;
    if (o.list) {
        text = render_list(d);
    } else if (o.topo) {
        text = render_topology(d, read_extras(sys, d));
    } else {
        // After discovery, which has closed the nodes it opened, so
        // rbln-smi never lists itself.
        // Nothing to wait for if the first sample found no counter
        // (an older rbln.ko): every figure is N/A anyway.
        if (first_counters && first_counters->any())
            wait_until(env, clock,
                       first_counters->cards_time + std::chrono::milliseconds(o.interval_ms));
        std::optional<ClientScan> clients;
        if (processes) {
            try {
                clients = scan_clients(sys);
            } catch (const Error& e) {
                err << "rbln-smi: warning: processes not shown: " << e.what() << "\n";
            }
        }
        if (clients && !o.select.empty())
            std::erase_if(clients->clients,
                          [&](const AccelClient& c) { return card_of(d, c) == nullptr; });
        const ClientScan* c = clients ? &*clients : nullptr;
        std::optional<Utilization> figures;
        if (!o.query || util) {
            const CounterSample second = take_sample(sys, c, clock);
            figures = compute_utilization(first_counters ? &*first_counters : nullptr, second);
            for (const auto& w : figures->warnings)
                err << "rbln-smi: warning: " << w << "\n";
            if (o.timing && figures->interval)
                err << "rbln-smi: utilisation sampled over "
                    << std::chrono::duration_cast<std::chrono::microseconds>(*figures->interval)
                           .count()
                    << " us\n";
        }
        const Utilization* u = figures ? &*figures : nullptr;
        if (o.query) {
            const CsvFormat format = o.format.value_or(CsvFormat{});
            if (first && format.header)
                text = render_csv_header(*o.query);
            text += render_csv_rows(d, *o.query, format, u, read_extras(sys, d), now_timestamp());
        } else if (o.json) {
            const ExtrasByBdf extras = read_extras(sys, d);
            text = render_json(d, c, u, &extras);
        } else {
            text = render_table(d, c, u);
        }
    }
    // Cards the driver unplugged are named after the text views.
    if (!o.json && !o.query && o.select.empty())
        text += render_gone(find_gone_cards(sys));
    if (o.loop_seconds && !o.json && !o.query)
        text.insert(0, "rbln-smi sample at " + now_timestamp() + "\n");
    out << text;
    out.flush();
    if (o.timing) {
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - t0);
        err << "rbln-smi: discovery, sampling and output took " << us.count() << " us\n";
    }
    return kExitOk;
}

// SIGINT and SIGTERM blocked while -l runs, and waited for between the
// samples: a signal never cuts a sample or its output short.
class StopSignals {
public:
    StopSignals() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
    }
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;
    StopSignals(StopSignals&&) = delete;
    StopSignals& operator=(StopSignals&&) = delete;
    ~StopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

    // True once @clock reaches @deadline; false as soon as a signal is
    // pending (also one that arrived before the call).
    bool wait_until(const SampleClock& clock, std::chrono::nanoseconds deadline) const {
        for (;;) {
            const auto left = std::max(deadline - clock(), std::chrono::nanoseconds{0});
            const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
            timespec ts{};
            ts.tv_sec = static_cast<time_t>(secs.count());
            ts.tv_nsec = static_cast<long>((left - secs).count());
            if (sigtimedwait(&set_, nullptr, &ts) > 0)
                return false;
            if (errno != EAGAIN && errno != EINTR)
                return false; // cannot wait: stop rather than spin
            if (left.count() == 0 || clock() >= deadline)
                return true;
        }
    }

private:
    sigset_t set_{};
    sigset_t old_{};
};

// -l: a sample every N seconds until a signal (or the injected wait) says
// stop.  A sample that fails is reported and the loop goes on (the card
// may be back next time), unless it is the first.
int loop(const Options& o, const Environment& env, const SystemView& sys, std::ostream& out,
         std::ostream& err) {
    const SampleClock clock = env.clock ? env.clock : SampleClock(monotonic_now);
    std::optional<StopSignals> signals;
    if (!env.wait_next)
        signals.emplace();
    const auto period = std::chrono::seconds(*o.loop_seconds);
    for (bool first = true;; first = false) {
        const auto start = clock();
        int rc = kExitOk;
        try {
            rc = one_sample(o, env, sys, out, err, first);
        } catch (const Error& e) {
            err << "rbln-smi: " << e.what() << "\n";
            rc = exit_code_for(e);
        }
        if (first && rc != kExitOk)
            return rc; // nothing to monitor
        const bool more = env.wait_next ? env.wait_next(start + period)
                                        : signals->wait_until(clock, start + period);
        if (!more)
            return kExitOk;
    }
}

// --reset: refuses cards in use (unless --force), then resets each.
int reset(const Options& o, const Environment& env, const SystemView& sys, std::ostream& out,
          std::ostream& err) {
    if (!(env.is_root ? env.is_root() : ::geteuid() == 0)) {
        err << "rbln-smi: --reset needs root: the card's reset attribute is writable by root "
               "(CAP_SYS_ADMIN) only\n";
        return kExitPermission;
    }
    // The nodes are not opened: rbln-smi must not hold the card itself.
    auto found = find_cards(o, false, err);
    if (!found)
        return kExitNoDevice;
    const Discovery& d = *found;
    const ClientScan scan = scan_clients(sys);
    bool refused = false;
    for (const auto& c : d.cards) {
        std::string holders;
        std::uint64_t clients = 0;
        for (const auto& client : scan.clients) {
            if (card_of(d, client) != &c)
                continue;
            clients++;
            for (const auto& h : client.holders)
                holders += (holders.empty() ? "PID " : ", PID ") + std::to_string(h.pid) + " (" +
                           h.comm + ")";
        }
        const CardUse use = read_card_use(sys, c.pci_bdf);
        const std::uint64_t files = use.open_files.value_or(0);
        std::string why = holders;
        if (files > clients)
            why += (why.empty() ? "" : "; ") + std::to_string(files - clients) +
                   (files - clients == 1 ? " open file" : " open files") +
                   " of the node that no process has among its fds (a buffer mapping, an "
                   "io_uring registered file, an fd in flight)";
        if (scan.processes_denied != 0)
            why += (why.empty() ? "" : "; ") + std::to_string(scan.processes_denied) +
                   (scan.processes_denied == 1 ? " process" : " processes") +
                   " could not be inspected";
        if (why.empty())
            continue;
        const std::string card = "NPU " + std::to_string(c.index) + " (" + c.pci_bdf + ")";
        if (o.force) {
            err << "rbln-smi: warning: resetting " << card
                << " although it is in use (--force): " << why << "\n";
        } else {
            err << "rbln-smi: " << card << " is in use: " << why
                << ".  Stop them, or reset anyway with --force (their jobs on the card fail "
                   "with EIO; their buffers and queues survive the reset).\n";
            refused = true;
        }
    }
    if (refused)
        return kExitCardInUse;
    for (const auto& c : d.cards) {
        reset_card(sys, c.pci_bdf);
        const auto resets = read_card_use(sys, c.pci_bdf).card_resets;
        out << "NPU " << c.index << " (" << c.pci_bdf << "): reset, "
            << (resets ? "card_resets " + std::to_string(*resets) : std::string("ready")) << "\n";
    }
    return kExitOk;
}

} // namespace

int exit_code_for(const Error& error) noexcept {
    return tools::exit_status_for(error.code(), kExitError);
}

int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
        const Environment& env) {
    Options o;
    try {
        o = parse(args);
    } catch (const UsageError& e) {
        err << "rbln-smi: " << e.message << "\nTry 'rbln-smi --help'.\n";
        return kExitUsage;
    }
    if (o.help) {
        out << help_text();
        return kExitOk;
    }
    if (o.version) {
        out << "rbln-smi " << library_version() << " (librbln " << library_version() << ")\n";
        return kExitOk;
    }

    try {
        if (o.control_block)
            return dump_control_block(o, out);
        const SystemView sys{o.root, env.char_device_probe};
        if (o.reset)
            return reset(o, env, sys, out, err);
        if (o.loop_seconds)
            return loop(o, env, sys, out, err);
        return one_sample(o, env, sys, out, err, true);
    } catch (const Error& e) {
        err << "rbln-smi: " << e.what() << "\n";
        return exit_code_for(e);
    } catch (const std::exception& e) {
        err << "rbln-smi: internal error: " << e.what() << "\n";
        return kExitError;
    }
}

} // namespace rbln::smi
