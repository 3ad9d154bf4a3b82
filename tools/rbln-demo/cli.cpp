// SPDX-License-Identifier: GPL-2.0
// cli.cpp - rbln-demo's command line, report and exit status.

#include "cli.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "drm/rbln_accel.h"
#include "rbln/discovery.hpp"
#include "rbln/error.hpp"
#include "workload.hpp"

namespace rbln::demo {

namespace {

constexpr std::string_view kHelp = R"(Usage: rbln-demo [OPTION]...
Run a real workload on an rbln card: y = relu(x @ w) * scale, as one job of
firmware-iface packets (COPY x and w to HBM, LAUNCH MATMUL with fp32
accumulation, LAUNCH RELU, LAUNCH SCALE, COPY y back, TIMESTAMPs between the
phases), and check y against a CPU reference within the error bound the
firmware interface allows.

  --size M,K,N       x is M x K, w is K x N, y is M x N (default 256,256,256;
                     each 1..65536)
  --dtype LIST       element type of x, w and y: fp32, bf16 or fp16, a comma-
                     separated list of them, or all (default fp32)
  --chiplet N        the chiplet whose HBM and command ring are used (default 0)
  --device PATH      the node, e.g. /dev/accel/accel1 (default: the first card)
  --scale F          the factor of SCALE (default 0.375)
  --seed N           seed of the pseudo-random inputs (default 1)
  -h, --help         print this help

Exit status:
  0  every run passed
  1  the card's result is wrong (beyond the bound)
  2  usage error
  3  the rbln driver is not loaded
  4  no rbln card
  5  permission denied on the node
  6  another error (a kernel call, the job failed on the card, a timeout)
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

int exit_for(const Error& e) {
    switch (e.code()) {
    case Errc::DriverNotLoaded:
        return kExitDriverNotLoaded;
    case Errc::NoDevice:
        return kExitNoDevice;
    case Errc::PermissionDenied:
        return kExitPermission;
    default:
        return kExitError;
    }
}

std::unique_ptr<KernelInterface> open_card(const Options& o, const DeviceOpener& opener) {
    std::string path;
    if (o.device) {
        path = *o.device;
    } else {
        DiscoveryOptions d;
        d.opener = opener;
        const Discovery found = discover(d);
        if (found.cards.empty())
            throw Error(Errc::NoDevice, "discovery", "/sys/class/accel", 0,
                        "the rbln driver is loaded but no card is bound to it");
        path = found.cards.front().accel_node;
    }
    auto k = opener ? opener(path) : open_kernel_device(path);
    return std::move(k).value(); // throws the open's Error
}

std::string_view family_name(std::uint32_t family) {
    switch (family) {
    case RBLN_FAMILY_REBEL100:
        return family_display_name(Family::Rebel100);
    case RBLN_FAMILY_ATOM:
        return family_display_name(Family::Atom);
    default:
        return family_display_name(Family::Unknown);
    }
}

void report(std::ostream& out, const Options& o, DType t, const WorkloadResult& r) {
    const Shape& s = o.shape;
    const CardTimes& c = r.card;
    const double flops =
        2.0 * static_cast<double>(s.m) * static_cast<double>(s.k) * static_cast<double>(s.n);
    out << "== " << dtype_name(t) << ": x " << dims(s.m, s.k) << ", w " << dims(s.k, s.n) << ", y "
        << dims(s.m, s.n) << ", chiplet " << o.chiplet << "\n";
    out << "  buffers     host " << bytes(r.host_bytes) << " (x, w, y, timestamps, commands), HBM "
        << bytes(r.hbm_bytes) << " (x, w, x@w, relu, y)\n";
    out << "  job         " << r.packets << " packets, " << r.cmd_bytes << " bytes; queue "
        << r.queue_id << ", seqno " << r.seqno << "\n";
    if (c.total_ns == 0) {
        out << "  card time   n/a (the TIMESTAMP packets stored no time)\n";
    } else {
        out << "  card time   copy in " << duration(static_cast<double>(c.copy_in_ns))
            << ", matmul " << duration(static_cast<double>(c.matmul_ns));
        if (c.matmul_ns > 0)
            out << " (" << number(flops / static_cast<double>(c.matmul_ns)) << " GFLOP/s)";
        out << ", relu+scale " << duration(static_cast<double>(c.relu_scale_ns)) << ", copy out "
            << duration(static_cast<double>(c.copy_out_ns)) << "; job "
            << duration(static_cast<double>(c.total_ns)) << "\n";
    }
    out << "  host time   SUBMIT to WAIT done "
        << duration(static_cast<double>(r.submit_to_done.count()))
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
            if (o.chiplet >= RBLN_MAX_CHIPLETS)
                throw UsageError("--chiplet: at most " + std::to_string(RBLN_MAX_CHIPLETS - 1));
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

int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
        const DeviceOpener& opener) {
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
        const auto kernel = open_card(o, opener);
        const DeviceIdentity id = query_device_identity(*kernel);
        out << "rbln-demo: y = relu(x @ w) * " << number(o.scale, "%g") << " on " << kernel->path()
            << " (" << family_name(id.family) << ", " << id.chiplet_count
            << (id.chiplet_count == 1 ? " chiplet" : " chiplets") << ", firmware " << id.fw_version
            << ", firmware-iface " << id.fw_iface_major << "." << id.fw_iface_minor << ")\n";
        int status = kExitPass;
        for (DType t : o.dtypes) {
            WorkloadOptions w;
            w.shape = o.shape;
            w.dtype = t;
            w.chiplet = o.chiplet;
            w.scale = o.scale;
            w.seed = o.seed;
            const WorkloadResult r = run_workload(*kernel, w);
            report(out, o, t, r);
            if (!r.check.pass())
                status = kExitWrongResult;
        }
        out << (status == kExitPass ? "rbln-demo: PASS\n" : "rbln-demo: FAIL\n");
        return status;
    } catch (const Error& e) {
        out.flush();
        err << "rbln-demo: " << e.what() << " [" << errc_name(e.code()) << "]\n";
        return exit_for(e);
    }
}

} // namespace rbln::demo
