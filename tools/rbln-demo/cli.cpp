// SPDX-License-Identifier: GPL-2.0
// cli.cpp - rbln-demo's command line, report and exit status.

#include "cli.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <unistd.h>

#include "rbln/devices.hpp"
#include "rbln/discovery.hpp"
#include "rbln/error.hpp"
#include "rbln/fdinfo.hpp"
#include "rbln/identity.hpp"
#include "workload.hpp"

namespace rbln::demo {

namespace {

constexpr std::string_view kHelp = R"(Usage: rbln-demo [OPTION]...
Run a real workload on an rbln card through librbln, as a framework does:
y = relu(x @ w) * scale with the rows of x split over the card's chiplets.
Each chiplet's slice has its own stream and its own storages in that
chiplet's HBM: the stream copies x's rows and w in from pinned host memory,
runs MATMUL (fp32 accumulation), RELU and SCALE (rbln::ops) and copies its
rows of y back, with timing events between the phases.  y is then checked
against a CPU reference within the error bound the firmware interface
allows.

  --size M,K,N       x is M x K, w is K x N, y is M x N (default 256,256,256;
                     each 1..65536)
  --dtype LIST       element type of x, w and y: fp32, bf16 or fp16, a comma-
                     separated list of them, or all (default fp32)
  --chiplet N        only chiplet N: all of x and y in its HBM, one stream
                     (default: every chiplet of the card)
  --device PATH      the node, e.g. /dev/accel/accel1 (default: the first card)
  --scale F          the factor of SCALE (default 0.375)
  --seed N           seed of the pseudo-random inputs (default 1)
  -h, --help         print this help

Exit status:
  0  every run passed
  1  the card's result is wrong (beyond the bound)
  2  usage error
  3  the rbln driver is not loaded
  4  no rbln card (or --device is not one)
  5  permission denied on the node
  6  another error (a kernel call, a job failed on the card, a timeout)
)";

template <typename T> T parse_number(std::string_view text, std::string_view what) {
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
        throw UsageError(std::string(what) + ": '" + std::string(text) + "' is not a number");
    return v;
}

std::vector<DType> parse_dtypes(std::string_view text) {
    if (text == "all")
        return {DType::Fp32, DType::Bf16, DType::Fp16};
    std::vector<DType> out;
    while (true) {
        const std::size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        const auto t = parse_dtype(item);
        if (!t)
            throw UsageError("--dtype: '" + std::string(item) +
                             "' is not one of fp32, bf16, fp16, all");
        out.push_back(*t);
        if (comma == std::string_view::npos)
            return out;
        text.remove_prefix(comma + 1);
    }
}

float parse_scale(std::string_view text) {
    // from_chars for float is not in GCC 12's library everywhere; strtof is.
    const std::string s(text);
    char* end = nullptr;
    const float v = std::strtof(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
        throw UsageError("--scale: '" + s + "' is not a finite number");
    return v;
}

// "12.3 us", "4.56 ms", "1.23 s"
std::string duration(double ns) {
    char buf[32];
    if (ns < 1e3)
        std::snprintf(buf, sizeof(buf), "%.0f ns", ns);
    else if (ns < 1e6)
        std::snprintf(buf, sizeof(buf), "%.1f us", ns / 1e3);
    else if (ns < 1e9)
        std::snprintf(buf, sizeof(buf), "%.2f ms", ns / 1e6);
    else
        std::snprintf(buf, sizeof(buf), "%.2f s", ns / 1e9);
    return buf;
}

std::string bytes(std::uint64_t b) {
    char buf[32];
    if (b < 1024)
        std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
    else if (b < (1ULL << 20))
        std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(b) / 1024);
    else
        std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(b) / (1 << 20));
    return buf;
}

std::string number(double v, const char* fmt = "%.3g") {
    char buf[48];
    std::snprintf(buf, sizeof(buf), fmt, v);
    return buf;
}

std::string dims(std::uint64_t a, std::uint64_t b) {
    return std::to_string(a) + "x" + std::to_string(b);
}

// "chiplet 3", "chiplets 0-3", "chiplets 0, 2"
std::string chiplet_list(const std::vector<Slice>& slices) {
    if (slices.size() == 1)
        return "chiplet " + std::to_string(slices.front().chiplet);
    bool run = true;
    for (std::size_t i = 1; i < slices.size(); i++)
        run = run && slices[i].chiplet == slices[i - 1].chiplet + 1;
    if (run)
        return "chiplets " + std::to_string(slices.front().chiplet) + "-" +
               std::to_string(slices.back().chiplet);
    std::string out = "chiplets ";
    for (std::size_t i = 0; i < slices.size(); i++)
        out += (i > 0 ? ", " : "") + std::to_string(slices[i].chiplet);
    return out;
}

// "64 rows of x each", "64 or 65 rows of x each"
std::string rows_each(const std::vector<Slice>& slices) {
    std::uint64_t lo = slices.front().rows;
    std::uint64_t hi = lo;
    for (const Slice& s : slices) {
        lo = std::min(lo, s.rows);
        hi = std::max(hi, s.rows);
    }
    return (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)) +
           (hi == 1 ? " row" : " rows") + " of x each";
}

// "2.9 ms on chiplet 0, 3.0 ms on chiplet 1": the growth of each chiplet's
// counter between @before and @after; "" if nothing is known.
std::string ring_use(const BusyCounters& before, const BusyCounters& after) {
    std::string out;
    for (std::size_t i = 0; i < after.size(); i++) {
        const auto b = i < before.size() ? before[i] : std::nullopt;
        if (!b || !after[i] || *after[i] <= *b)
            continue;
        out += (out.empty() ? "" : ", ") + duration(static_cast<double>(*after[i] - *b)) +
               " on chiplet " + std::to_string(i);
    }
    return out;
}

void report(std::ostream& out, const Options& o, DType t, const WorkloadResult& r,
            const std::string& rings) {
    const Shape& s = o.shape;
    out << "== " << dtype_name(t) << ": x " << dims(s.m, s.k) << ", w " << dims(s.k, s.n) << ", y "
        << dims(s.m, s.n) << "; ";
    if (r.slices.size() == 1)
        out << "all on " << chiplet_list(r.slices) << "\n";
    else
        out << "x's rows split over " << chiplet_list(r.slices) << " (" << rows_each(r.slices)
            << ")\n";
    out << "  memory      pinned host " << bytes(r.host_bytes) << " (x, w, y); HBM "
        << bytes(r.hbm_bytes) << " of storages ("
        << (r.slices.size() == 1 ? "x, w, x@w, relu, y"
                                 : "per chiplet: its rows of x, x@w, relu, y, and w")
        << ")\n";
    std::uint64_t jobs = 0;
    for (const Slice& sl : r.slices)
        jobs += sl.jobs;
    out << "  streams     " << r.slices.size()
        << (r.slices.size() == 1 ? " stream" : " streams, one per chiplet,") << " ran " << jobs
        << " jobs (copies, MATMUL, RELU, SCALE, timing events)\n";
    for (std::size_t i = 0; i < r.slices.size(); i++) {
        const Slice& sl = r.slices[i];
        const CardTimes& c = sl.card;
        if (i == 0)
            out << "  card time   per slice, between its events (the card's clock; a gap while "
                   "the ring waited for the next job counts too):\n";
        out << "              on chiplet " << sl.chiplet << ": ";
        if (c.total_ns == 0) {
            out << "n/a (the events stored no time)\n";
            continue;
        }
        const double flops = 2.0 * static_cast<double>(sl.rows) * static_cast<double>(s.k) *
                             static_cast<double>(s.n);
        out << "copy in " << duration(static_cast<double>(c.copy_in_ns)) << ", matmul "
            << duration(static_cast<double>(c.matmul_ns));
        if (c.matmul_ns > 0)
            out << " (" << number(flops / static_cast<double>(c.matmul_ns)) << " GFLOP/s)";
        out << ", relu+scale " << duration(static_cast<double>(c.relu_scale_ns)) << ", copy out "
            << duration(static_cast<double>(c.copy_out_ns)) << "; "
            << duration(static_cast<double>(c.total_ns)) << "\n";
    }
    if (!rings.empty())
        out << "  rings       busy " << rings
            << " (this process's jobs, as the kernel counts them)\n";
    out << "  host time   enqueue to done "
        << duration(static_cast<double>(r.enqueue_to_done.count()))
        << "; CPU reference (double, one thread) "
        << duration(static_cast<double>(r.cpu_reference.count())) << "\n";
    const CheckResult& k = r.check;
    out << "  error       max abs " << number(k.max_abs_error) << ", max rel "
        << number(k.max_rel_error) << "; worst element at "
        << number(100 * k.worst_bound_fraction, "%.1f") << "% of its bound (y["
        << k.worst_index / s.n << "][" << k.worst_index % s.n << "])\n";
    if (k.pass()) {
        out << "  PASS        "
            << (k.checked == 1 ? "the only element"
                               : "all " + std::to_string(k.checked) + " elements")
            << " within the bound of " << dtype_name(t)
            << " with fp32 accumulation over K = " << s.k << "\n";
        return;
    }
    out << "  FAIL        " << k.failed << " of " << s.m * s.n
        << " elements beyond their bound; first y[" << k.first_failed / s.n << "]["
        << k.first_failed % s.n << "] = " << number(k.first_failed_got, "%.9g") << ", expected "
        << number(k.first_failed_want, "%.9g") << " +- " << number(k.first_failed_bound) << "\n";
}

// The busy counters of this process's clients of the card at @pdev, summed
// per chiplet (fdinfo drm-engine-chiplet<i>).
BusyCounters own_ring_ns(const std::string& pdev) {
    const SystemView system;
    ClientScan scan = scan_clients(system);
    const pid_t self = getpid();
    std::erase_if(scan.clients, [&](const AccelClient& c) {
        return c.info.pdev != pdev ||
               std::none_of(c.holders.begin(), c.holders.end(),
                            [&](const ClientHolder& h) { return h.pid == self; });
    });
    BusyCounters sum;
    for (const auto& [id, counters] : read_client_busy(system, scan)) {
        if (sum.size() < counters.size())
            sum.resize(counters.size());
        for (std::size_t i = 0; i < counters.size(); i++)
            if (counters[i])
                sum[i] = sum[i].value_or(0) + *counters[i];
    }
    return sum;
}

} // namespace

Shape parse_shape(std::string_view text) {
    const std::string whole(text);
    Shape s;
    const std::array<std::uint64_t*, 3> dst = {&s.m, &s.k, &s.n};
    for (unsigned i = 0; i < 3; i++) {
        const std::size_t comma = text.find(',');
        if ((i < 2) != (comma != std::string_view::npos))
            throw UsageError("--size: expected M,K,N (three numbers), got '" + whole + "'");
        const auto v = parse_number<std::uint64_t>(text.substr(0, comma), "--size");
        if (v < 1 || v > 65536)
            throw UsageError("--size: each of M, K, N must be 1..65536");
        *dst[i] = v;
        if (comma != std::string_view::npos)
            text.remove_prefix(comma + 1);
    }
    return s;
}

Options parse_options(std::span<const std::string_view> args) {
    Options o;
    for (std::size_t i = 0; i < args.size(); i++) {
        const std::string_view a = args[i];
        auto operand = [&](std::string_view name) -> std::string_view {
            if (a.size() > name.size() && a.starts_with(name) && a[name.size()] == '=')
                return a.substr(name.size() + 1);
            if (i + 1 >= args.size())
                throw UsageError("option '" + std::string(name) + "' needs an argument");
            return args[++i];
        };
        const auto is = [&](std::string_view name) {
            return a == name ||
                   (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=');
        };
        if (a == "-h" || a == "--help") {
            o.help = true;
        } else if (is("--size")) {
            o.shape = parse_shape(operand("--size"));
        } else if (is("--dtype")) {
            o.dtypes = parse_dtypes(operand("--dtype"));
        } else if (is("--chiplet")) {
            o.chiplet = parse_number<unsigned>(operand("--chiplet"), "--chiplet");
            if (*o.chiplet >= kMaxChiplets)
                throw UsageError("--chiplet: at most " + std::to_string(kMaxChiplets - 1));
        } else if (is("--device")) {
            o.device = std::string(operand("--device"));
        } else if (is("--scale")) {
            o.scale = parse_scale(operand("--scale"));
        } else if (is("--seed")) {
            o.seed = parse_number<std::uint64_t>(operand("--seed"), "--seed");
        } else {
            throw UsageError("unknown option '" + std::string(a) + "'");
        }
    }
    return o;
}

Card open_process_card(const std::optional<std::string>& node) {
    const Discovery found = discover(); // Errc::DriverNotLoaded
    if (found.cards.empty())
        throw Error(Errc::NoDevice, "discovery", "/sys/class/accel", 0,
                    "the rbln driver is loaded but no card is bound to it");
    const DeviceMapping mapping = Runtime::process().mapping();
    const LogicalDevice* chosen = nullptr;
    std::string visible;
    for (const LogicalDevice& d : mapping.devices) {
        if (!node || d.nodes.front() == *node) {
            chosen = &d;
            break;
        }
        visible += (visible.empty() ? "" : ", ") + d.nodes.front();
    }
    if (chosen == nullptr)
        throw Error(Errc::NoDevice, "--device", node.value_or(""), 0,
                    mapping.devices.empty()
                        ? "no card is visible to this process (RBLN_VISIBLE_DEVICES hides them)"
                        : "not a card this process can use; the visible ones: " + visible);
    const LogicalDevice& d = *chosen;
    const CardInfo& info = found.cards.at(d.physical_ids.front());
    Card c;
    c.device = Device::get(d.index);
    c.allocator = &process_allocator(d.index);
    c.node = d.nodes.front();
    c.description = std::string(family_display_name(info.family)) + ", " +
                    std::to_string(info.chiplet_count) +
                    (info.chiplet_count == 1 ? " chiplet" : " chiplets") + ", firmware " +
                    info.fw_version + ", firmware-iface " + std::to_string(info.fw_iface_major) +
                    "." + std::to_string(info.fw_iface_minor);
    c.ring_ns = [pdev = info.pci_bdf] { return own_ring_ns(pdev); };
    return c;
}

int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
        const CardOpener& opener) {
    Options o;
    try {
        o = parse_options(args);
    } catch (const UsageError& e) {
        err << "rbln-demo: " << e.what() << "\nTry 'rbln-demo --help'.\n";
        return kExitUsage;
    }
    if (o.help) {
        out << kHelp;
        return kExitPass;
    }
    try {
        const Card card = opener ? opener(o.device) : open_process_card(o.device);
        out << "rbln-demo: y = relu(x @ w) * " << number(o.scale, "%g") << " on " << card.node
            << " (" << card.description << ")\n";
        WorkloadOptions w;
        w.shape = o.shape;
        w.scale = o.scale;
        w.seed = o.seed;
        w.chiplets.clear();
        if (o.chiplet)
            w.chiplets.push_back(*o.chiplet);
        else
            for (unsigned c = 0; c < card.device->chiplet_count(); c++)
                w.chiplets.push_back(c);
        int status = kExitPass;
        for (DType t : o.dtypes) {
            w.dtype = t;
            const BusyCounters before = card.ring_ns ? card.ring_ns() : BusyCounters{};
            const WorkloadResult r = run_workload(card.device, *card.allocator, w);
            const BusyCounters after = card.ring_ns ? card.ring_ns() : BusyCounters{};
            report(out, o, t, r, ring_use(before, after));
            if (!r.check.pass())
                status = kExitWrongResult;
        }
        out << (status == kExitPass ? "rbln-demo: PASS\n" : "rbln-demo: FAIL\n");
        return status;
    } catch (const Error& e) {
        out.flush();
        err << "rbln-demo: " << e.what() << " [" << errc_name(e.code()) << "]\n";
        return tools::exit_status_for(e.code(), kExitError);
    }
}

} // namespace rbln::demo
