// SPDX-License-Identifier: GPL-2.0
// cli.cpp - rbln-smi's command line.

#include "cli.hpp"

#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "format.hpp"
#include "rbln/diagnostics.hpp"
#include "rbln/discovery.hpp"
#include "rbln/fdinfo.hpp"
#include "rbln/version.hpp"
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
  -j, --json                  JSON (schema_version 2; units in the key names)
      --interval-ms N         sample the busy counters N ms apart
                              (default 100; 0 = no utilisation, at most 60000)
      --no-util               no utilisation (as --interval-ms 0)
      --dump-control-block FILE
                              decode and validate a firmware-iface control
                              block dump (with -j: as JSON)
  -V, --version               print the versions of rbln-smi and librbln
  -h, --help                  print this help

Exit status:
  0  success
  1  other error (message on stderr)
  2  usage error
  3  the rbln driver is not loaded (/sys/module/rbln is absent)
  4  no device: the driver is loaded but no accel node is bound to rbln
  5  permission denied: a node that is needed could not be opened
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
};

struct UsageError {
    std::string message;
};

unsigned parse_interval(const std::string& text) {
    unsigned ms = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), ms, 10);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
        ms > kMaxIntervalMs)
        throw UsageError{"--interval-ms needs a number of milliseconds from 0 to " +
                         std::to_string(kMaxIntervalMs) + ", got '" + text + "'"};
    return ms;
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
        if (a == "-h" || a == "--help") {
            o.help = true;
        } else if (a == "-V" || a == "--version") {
            o.version = true;
        } else if (a == "-L" || a == "--list") {
            o.list = true;
        } else if (a == "-j" || a == "--json") {
            o.json = true;
        } else if (a == "--interval-ms" || a.starts_with("--interval-ms=")) {
            o.interval_ms = parse_interval(operand("--interval-ms"));
        } else if (a == "--no-util") {
            o.interval_ms = 0;
        } else if (a == "--debug-timing") {
            o.timing = true;
        } else if (a == "--root" || a.starts_with("--root=")) {
            o.root = operand("--root");
            if (o.root.empty())
                throw UsageError{"--root needs a non-empty path"};
        } else if (a == "--dump-control-block" || a.starts_with("--dump-control-block=")) {
            o.control_block = operand("--dump-control-block");
        } else if (a.starts_with("-")) {
            throw UsageError{"unknown option '" + std::string(a) + "'"};
        } else {
            throw UsageError{"unexpected argument '" + std::string(a) + "'"};
        }
    }
    if (o.list && o.json)
        throw UsageError{"-L and -j cannot be combined"};
    if (o.control_block && o.list)
        throw UsageError{"--dump-control-block cannot be combined with -L"};
    return o;
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
// (a scan that fails here is reported by the second one).
CounterSample first_sample(const SystemView& sys, const SampleClock& clock) {
    std::optional<ClientScan> scan;
    try {
        scan = scan_clients(sys);
    } catch (const Error&) {
        scan.reset();
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
        out << kHelp;
        return kExitOk;
    }
    if (o.version) {
        out << "rbln-smi " << library_version() << " (librbln " << library_version() << ")\n";
        return kExitOk;
    }

    try {
        if (o.control_block)
            return dump_control_block(o, out);

        const auto t0 = std::chrono::steady_clock::now();
        const SystemView sys{o.root, env.char_device_probe};
        const SampleClock clock = env.clock ? env.clock : SampleClock(monotonic_now);
        // The first sample before discovery, so the interval overlaps it.
        std::optional<CounterSample> first;
        if (!o.list && o.interval_ms > 0 && driver_loaded(sys))
            first = first_sample(sys, clock);

        DiscoveryOptions options;
        options.root = o.root;
        const Discovery d = discover(options);
        for (const auto& c : d.cards)
            if (worth_warning(c))
                err << "rbln-smi: warning: NPU " << c.index << ": " << c.node_error->what() << "\n";
        if (d.cards.empty()) {
            err << "rbln-smi: no rbln device found: the driver is loaded but no accel node "
                   "is bound to rbln (see 'dmesg | grep rbln')\n";
            return kExitNoDevice;
        }
        if (o.list) {
            out << render_list(d);
        } else {
            // After discovery, which has closed the nodes it opened, so
            // rbln-smi never lists itself.
            // Nothing to wait for if the first sample found no counter
            // (an older rbln.ko): every figure is N/A anyway.
            if (first && first->any())
                wait_until(env, clock,
                           first->cards_time + std::chrono::milliseconds(o.interval_ms));
            std::optional<ClientScan> clients;
            try {
                clients = scan_clients(sys);
            } catch (const Error& e) {
                err << "rbln-smi: warning: processes not shown: " << e.what() << "\n";
            }
            const ClientScan* c = clients ? &*clients : nullptr;
            const CounterSample second = take_sample(sys, c, clock);
            const Utilization util = compute_utilization(first ? &*first : nullptr, second);
            for (const auto& w : util.warnings)
                err << "rbln-smi: warning: " << w << "\n";
            out << (o.json ? render_json(d, c, &util) : render_table(d, c, &util));
            if (o.timing && util.interval)
                err << "rbln-smi: utilisation sampled over "
                    << std::chrono::duration_cast<std::chrono::microseconds>(*util.interval).count()
                    << " us\n";
        }
        if (o.timing) {
            const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - t0);
            err << "rbln-smi: discovery, sampling and output took " << us.count() << " us\n";
        }
        return kExitOk;
    } catch (const Error& e) {
        err << "rbln-smi: " << e.what() << "\n";
        return exit_code_for(e);
    } catch (const std::exception& e) {
        err << "rbln-smi: internal error: " << e.what() << "\n";
        return kExitError;
    }
}

} // namespace rbln::smi
