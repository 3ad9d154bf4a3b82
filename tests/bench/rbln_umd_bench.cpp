// SPDX-License-Identifier: GPL-2.0
// rbln_umd_bench - what librbln adds to job submission (Google Benchmark).
//
// Host part (always; FakeKernel + FakeRing of tests/umd, no card):
//   host/encode_nop             one NOP packet into a command buffer
//   host/fake_kernel/B          the fake kernel's own SUBMIT + WAIT of an
//                               empty job (the floor the next two stand on)
//   host/submitter/B            Submitter::enqueue of B empty jobs, then wait
//   host/stream/B               Stream::enqueue of B empty jobs (encode +
//                               command buffer + batch), then synchronize
//   B = 1, 8, 32, 128 (jobs per batch and per io_uring_enter); per job.
//
// Device part (with an rbln card, i.e. in the VM): empty jobs (one NOP
// packet, no buffers, no syncs) on chiplet 0, batches of 32, one batch in
// flight.  A group's sides take turns batch by batch within one benchmark
// run (the first side rotating every iteration), so drift of the emulated
// card hits them alike; each run is one repetition, and the groups'
// repetitions take turns too (--rounds, default 7).  Per side and
// repetition: the median batch, us per job, wall and this thread's CPU.
//   default-ring    the ring any thread may use:
//                     raw/each-cqe     io_uring RBLN_URING_CMD_SUBMIT x 32,
//                                      a wait for each CQE
//                     raw/wait-all     the same, one wait for all 32 CQEs
//                     librbln/default  Stream::enqueue x 32 + synchronize(),
//                                      librbln as opened by default
//   single-issuer   SINGLE_ISSUER | DEFER_TASKRUN rings:
//                     raw/deferred     32 SUBMITs, one wait for all 32 CQEs
//                     librbln/single-issuer  as librbln/default with
//                                      SubmitterOptions::single_issuer
//                     librbln/default  again, against raw/deferred
// The summary gives librbln / raw per repetition as median (min..max); the
// like-for-like comparison is librbln/single-issuer / raw/deferred (same
// ring flags, one wait per batch), checked against the target (at most
// 1.25).  Nothing is asserted.
//
//   rbln_umd_bench [--card N] [--min-ms MS] [--min-iters N] [--rounds N]
//                  [--host-only] [--benchmark_* flags]

#include <benchmark/benchmark.h>

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "drm/rbln_accel.h"
#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "fake_kernel.hpp"
#include "fake_ring.hpp"
#include "kernel/kernel.hpp"
#include "rbln/device.hpp"
#include "rbln/discovery.hpp"
#include "rbln/stream.hpp"

namespace {

using rbln::CommandEncoder;
using rbln::Device;
using rbln::DeviceOptions;
using rbln::Stream;

constexpr unsigned kBatch = 32;

// ---- host part ---------------------------------------------------------------

void host_encode_nop(benchmark::State& state) {
    std::vector<std::byte> buf(64 * 1024);
    CommandEncoder enc(buf);
    for (auto _ : state) {
        if (!enc.fits(rbln::PacketSize::nop))
            enc.reset();
        enc.nop();
        benchmark::DoNotOptimize(buf.data());
    }
    state.SetItemsProcessed(state.iterations());
}

struct FakeSetup {
    std::shared_ptr<rbln::test::FakeKernel> kernel = std::make_shared<rbln::test::FakeKernel>();

    std::shared_ptr<Device> device(unsigned batch) {
        DeviceOptions o;
        kernel->rings = rbln::test::fake_ring_factory(*kernel);
        o.submitter.batch = batch;
        o.submitter.warn = [](const std::string&) {};
        o.chiplet_mask = 1;
        return Device::open(kernel, 0, o);
    }
};

void host_fake_kernel(benchmark::State& state) {
    const auto batch = static_cast<unsigned>(state.range(0));
    FakeSetup f;
    const std::uint32_t queue = f.kernel->queue_create(1, rbln::QueuePriority::Normal);
    const rbln::BoHandle cmd =
        f.kernel->bo_create({4096, rbln::Region::Host, 0, rbln::BoFlags::None});
    rbln::SubmitArgs a;
    a.queue_id = queue;
    a.cmd_handle = cmd.handle;
    a.cmd_size = rbln::PacketSize::nop;
    for (auto _ : state) {
        std::uint64_t last = 0;
        for (unsigned i = 0; i < batch; i++)
            last = f.kernel->submit(a);
        benchmark::DoNotOptimize(f.kernel->wait({queue, last, std::nullopt, 0}));
    }
    state.SetItemsProcessed(state.iterations() * batch);
}

void host_submitter(benchmark::State& state) {
    const auto batch = static_cast<unsigned>(state.range(0));
    FakeSetup f;
    auto dev = f.device(batch);
    const std::uint32_t queue = f.kernel->queue_create(1, rbln::QueuePriority::Normal);
    auto cmd = dev->allocate_host(4096);
    CommandEncoder(std::span<std::byte>(cmd->host_data(), 8)).nop();
    rbln::Submitter& sub = dev->submitter();
    for (auto _ : state) {
        std::uint64_t last = 0;
        for (unsigned i = 0; i < batch; i++) {
            rbln::Job j;
            j.queue_id = queue;
            j.cmd_handle = cmd->handle();
            j.cmd_size = rbln::PacketSize::nop;
            last = sub.enqueue(std::move(j));
        }
        sub.wait(queue, last);
    }
    state.SetItemsProcessed(state.iterations() * batch);
}

void empty_jobs(Stream& s, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        s.enqueue(rbln::PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
    s.synchronize();
}

void host_stream(benchmark::State& state) {
    const auto batch = static_cast<unsigned>(state.range(0));
    FakeSetup f;
    auto dev = f.device(batch);
    Stream s(dev);
    for (auto _ : state)
        empty_jobs(s, batch);
    state.SetItemsProcessed(state.iterations() * batch);
}

// ---- device part -------------------------------------------------------------

[[noreturn]] void fail(const std::string& what, int err) {
    throw std::system_error(err, std::generic_category(), what);
}

// A raw SQE128 | CQE32 ring (optionally SINGLE_ISSUER | DEFER_TASKRUN).
class RawRing {
public:
    RawRing(unsigned entries, bool deferred) {
        unsigned flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
        if (deferred)
            flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
        if (const int r = io_uring_queue_init(entries, &ring_, flags); r < 0)
            fail("io_uring_queue_init", -r);
    }
    RawRing(const RawRing&) = delete;
    RawRing& operator=(const RawRing&) = delete;
    RawRing(RawRing&&) = delete;
    RawRing& operator=(RawRing&&) = delete;
    ~RawRing() { io_uring_queue_exit(&ring_); }
    io_uring& get() { return ring_; }

    // One URING_CMD SQE with @payload (<= 80 bytes) as its command.
    void push(int fd, std::uint32_t op, const void* payload, std::size_t size,
              std::uint64_t user_data) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr)
            throw std::runtime_error("io_uring SQ full");
        auto* raw = reinterpret_cast<std::byte*>(sqe);
        std::memset(raw, 0, 2 * sizeof(io_uring_sqe));
        sqe->opcode = IORING_OP_URING_CMD;
        sqe->fd = fd;
        sqe->cmd_op = op;
        sqe->user_data = user_data;
        std::memcpy(raw + offsetof(io_uring_sqe, addr3), payload, std::min<std::size_t>(size, 80));
    }

    int submit() {
        int r = 0;
        do {
            r = io_uring_submit(&ring_);
        } while (r == -EINTR);
        return r;
    }

    // Waits until @n CQEs are there (consumes none).
    void wait_nr(unsigned n) {
        io_uring_cqe* cqe = nullptr;
        int r = 0;
        do {
            r = io_uring_wait_cqe_nr(&ring_, &cqe, n);
        } while (r == -EINTR);
        if (r < 0)
            fail("io_uring_wait_cqe_nr", -r);
    }

    // Consumes one CQE (waiting for it); its res.
    int reap() {
        wait_nr(1);
        io_uring_cqe* cqe = nullptr;
        io_uring_peek_cqe(&ring_, &cqe);
        const int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        return res;
    }

private:
    io_uring ring_{};
};

// The raw jobs' own open file of the node, queue and command buffer, made
// with the uAPI directly (not through librbln).
struct Card {
    std::string node;
    int fd = -1;
    std::uint32_t queue = 0;
    std::uint32_t cmd = 0;
    void* map = nullptr;
};

Card& card() {
    static Card c;
    return c;
}

std::shared_ptr<rbln::KernelDevice> open_node(const std::string& node) {
    auto k = rbln::KernelDevice::open(node);
    if (!k)
        throw k.error();
    return std::shared_ptr<rbln::KernelDevice>(std::move(*k));
}

template <typename T> void raw_ioctl(int fd, unsigned long request, T& args, const char* what) {
    int r = 0;
    do {
        r = ::ioctl(fd, request, &args);
    } while (r != 0 && (errno == EINTR || errno == EAGAIN));
    if (r != 0)
        fail(what, errno);
}

void check_cqe(int res) {
    if (res != 0)
        fail("empty job", -res);
}

// One way of running a batch of kBatch empty jobs to completion.
class Side {
public:
    Side() = default;
    Side(const Side&) = delete;
    Side& operator=(const Side&) = delete;
    Side(Side&&) = delete;
    Side& operator=(Side&&) = delete;
    virtual ~Side() = default;
    virtual void batch() = 0;
};

// Raw io_uring on the card's queue: @deferred: SINGLE_ISSUER |
// DEFER_TASKRUN; @wait_all: one wait for the whole batch, else one per CQE.
class RawSide final : public Side {
public:
    RawSide(bool deferred, bool wait_all) : wait_all_(wait_all), ring_(256, deferred) {
        job_.queue_id = card().queue;
        job_.cmd_handle = card().cmd;
        job_.cmd_size = rbln::PacketSize::nop;
    }
    void batch() override {
        const int fd = card().fd;
        for (unsigned i = 0; i < kBatch; i++)
            ring_.push(fd, RBLN_URING_CMD_SUBMIT, &job_, sizeof(job_), i + 1);
        if (ring_.submit() != static_cast<int>(kBatch))
            fail("io_uring_submit", EIO);
        if (wait_all_)
            ring_.wait_nr(kBatch);
        for (unsigned i = 0; i < kBatch; i++)
            check_cqe(ring_.reap());
    }

private:
    bool wait_all_;
    RawRing ring_;
    drm_rbln_submit job_{};
};

// librbln as a program uses it: a Device of its own (own open file, own
// queue on chiplet 0), Stream::enqueue x kBatch + synchronize().
class LibSide final : public Side {
public:
    explicit LibSide(bool single_issuer) {
        DeviceOptions o;
        o.chiplet_mask = 1; // the raw jobs' chiplet
        o.submitter.batch = kBatch;
        o.submitter.single_issuer = single_issuer;
        dev_ = Device::open(open_node(card().node), 0, o);
        if (dev_->submitter().path() != rbln::Submitter::Path::IoUring)
            throw std::runtime_error("librbln has no io_uring: " +
                                     dev_->submitter().fallback_reason());
        stream_ = std::make_unique<Stream>(dev_);
    }
    void batch() override { empty_jobs(*stream_, kBatch); }

private:
    std::shared_ptr<Device> dev_;
    std::unique_ptr<Stream> stream_;
};

enum class SideKind { RawEachCqe, RawWaitAll, RawDeferred, LibDefault, LibSingleIssuer };

const char* side_name(SideKind k) {
    switch (k) {
    case SideKind::RawEachCqe:
        return "raw/each-cqe";
    case SideKind::RawWaitAll:
        return "raw/wait-all";
    case SideKind::RawDeferred:
        return "raw/deferred";
    case SideKind::LibDefault:
        return "librbln/default";
    case SideKind::LibSingleIssuer:
        return "librbln/single-issuer";
    }
    return "?";
}

std::unique_ptr<Side> make_side(SideKind k) {
    switch (k) {
    case SideKind::RawEachCqe:
        return std::make_unique<RawSide>(false, false);
    case SideKind::RawWaitAll:
        return std::make_unique<RawSide>(false, true);
    case SideKind::RawDeferred:
        return std::make_unique<RawSide>(true, true);
    case SideKind::LibDefault:
        return std::make_unique<LibSide>(false);
    case SideKind::LibSingleIssuer:
        return std::make_unique<LibSide>(true);
    }
    return nullptr;
}

// Sides that take turns batch by batch in one benchmark run.
struct Group {
    const char* name;
    std::vector<SideKind> sides;
};

const std::vector<Group>& groups() {
    static const std::vector<Group> g = {
        {"default-ring", {SideKind::RawEachCqe, SideKind::RawWaitAll, SideKind::LibDefault}},
        {"single-issuer", {SideKind::RawDeferred, SideKind::LibSingleIssuer, SideKind::LibDefault}},
    };
    return g;
}

double thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double median_of(std::vector<double> v) {
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 != 0 ? v[h] : (v[h - 1] + v[h]) / 2;
}

bool is_lib(SideKind k) {
    return k == SideKind::LibDefault || k == SideKind::LibSingleIssuer;
}

// The counter of librbln side @lib against raw side @raw.
std::string ratio_key(const char* what, SideKind lib, SideKind raw) {
    return std::string(what) + ":" + side_name(lib) + "|" + side_name(raw);
}

// One repetition of @g, at least @min_ms and @min_iters iterations: every
// iteration runs one batch of each side, the first side rotating, so drift
// of the emulated card and the order within an iteration hit every side
// alike.  Counters, us per job: "wall:<side>" and "cpu:<side>" (this
// thread's CPU), the median batch of the side; "ratio:<lib>|<raw>" and
// "cpuratio:<lib>|<raw>", the median over the iterations of the librbln
// batch over the raw batch of the same iteration (a paired ratio: a slow
// stretch of the card slows both batches of a pair).
void alternate(benchmark::State& state, const Group& g, unsigned min_ms, unsigned min_iters) {
    const std::size_t n = g.sides.size();
    std::vector<std::unique_ptr<Side>> sides;
    try {
        for (const SideKind k : g.sides)
            sides.push_back(make_side(k));
        for (auto& s : sides) // warm-up: command buffers, each queue's first job
            s->batch();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    std::vector<std::vector<double>> wall(n);
    std::vector<std::vector<double>> cpu(n);
    std::size_t turn = 0;
    for (auto _ : state) { // once (Iterations(1)): the loop below sets the length
        const auto start = std::chrono::steady_clock::now();
        const auto min_time = std::chrono::milliseconds(min_ms);
        while (turn < min_iters || std::chrono::steady_clock::now() - start < min_time) {
            for (std::size_t i = 0; i < n; i++) {
                const std::size_t k = (turn + i) % n;
                const double c0 = thread_cpu_ns();
                const auto t0 = std::chrono::steady_clock::now();
                sides[k]->batch();
                const auto t1 = std::chrono::steady_clock::now();
                const double c1 = thread_cpu_ns();
                wall[k].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() /
                                  kBatch);
                cpu[k].push_back((c1 - c0) / 1e3 / kBatch);
            }
            turn++;
        }
    }
    for (std::size_t k = 0; k < n; k++) {
        state.counters[std::string("wall:") + side_name(g.sides[k])] = median_of(wall[k]);
        state.counters[std::string("cpu:") + side_name(g.sides[k])] = median_of(cpu[k]);
    }
    for (std::size_t l = 0; l < n; l++) {
        for (std::size_t r = 0; r < n; r++) {
            if (!is_lib(g.sides[l]) || is_lib(g.sides[r]))
                continue;
            std::vector<double> w(turn);
            std::vector<double> c(turn);
            for (std::size_t i = 0; i < turn; i++) {
                w[i] = wall[l][i] / wall[r][i];
                c[i] = cpu[l][i] / cpu[r][i];
            }
            state.counters[ratio_key("ratio", g.sides[l], g.sides[r])] = median_of(w);
            state.counters[ratio_key("cpuratio", g.sides[l], g.sides[r])] = median_of(c);
        }
    }
    state.counters["iterations"] = static_cast<double>(turn);
    state.SetItemsProcessed(static_cast<std::int64_t>(turn * kBatch * n));
}

// ---- options, summary ----------------------------------------------------------

struct Options {
    unsigned card = 0;
    unsigned min_ms = 300;
    unsigned min_iters = 20; // device part: iterations per repetition, at least
    unsigned rounds = 7;     // repetitions of each group
    bool host_only = false;
};

bool parse_uint(std::string_view s, unsigned& out) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

// Takes this binary's options out of argv (the rest goes to benchmark).
Options parse(int& argc, char** argv) {
    Options o;
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const std::string_view a = argv[i];
        unsigned v = 0;
        const bool value = i + 1 < argc && parse_uint(argv[i + 1], v);
        if (a == "--card" && value) {
            o.card = v;
        } else if (a == "--min-ms" && value) {
            o.min_ms = v;
        } else if (a == "--min-iters" && value) {
            // the host part: benchmark picks its iterations
            o.min_iters = std::max(o.min_iters, v);
        } else if (a == "--rounds" && value && v > 0) {
            o.rounds = v;
        } else if (a == "--host-only") {
            o.host_only = true;
            continue;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        i++;
    }
    argc = out;
    return o;
}

// Keeps the time per job of every host run (by benchmark name) and the
// counters of every device repetition (by group, in round order).
class Collector : public benchmark::ConsoleReporter {
public:
    // Colours only on a terminal (run.sh keeps the output in files).
    Collector() : ConsoleReporter(::isatty(STDOUT_FILENO) != 0 ? OO_ColorTabular : OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs) {
            if (r.error_occurred || r.run_type != Run::RT_Iteration)
                continue;
            std::string name = r.run_name.function_name;
            // "single-issuer/round:2" -> the group's repetition 2
            if (const auto at = name.find("/round:"); at != std::string::npos) {
                name.resize(at);
                std::map<std::string, double> rep;
                for (const auto& [k, c] : r.counters)
                    rep[k] = c.value;
                reps[name].push_back(std::move(rep));
                continue;
            }
            const auto it = r.counters.find("items_per_second");
            if (it == r.counters.end() || it->second.value <= 0)
                continue;
            // "host/stream" + "32" -> "host/stream/32"
            if (!r.run_name.args.empty())
                name += "/" + r.run_name.args;
            ns_per_job[name].push_back(1e9 / it->second.value);
        }
    }

    double median(const std::string& name) const {
        const auto it = ns_per_job.find(name);
        return it == ns_per_job.end() ? 0 : median_of(it->second);
    }

    std::map<std::string, std::vector<double>> ns_per_job;
    std::map<std::string, std::vector<std::map<std::string, double>>> reps;
};

double counter(const std::map<std::string, double>& rep, const std::string& key) {
    const auto it = rep.find(key);
    return it == rep.end() ? 0 : it->second;
}

// A librbln side against a raw side of the same group, per repetition.
struct Ratio {
    std::vector<double> wall; // per repetition: median paired librbln / raw batch
    std::vector<double> cpu;  // the same of this thread's CPU time
    double median() const { return median_of(wall); }
    double lo() const { return wall.empty() ? 0 : *std::min_element(wall.begin(), wall.end()); }
    double hi() const { return wall.empty() ? 0 : *std::max_element(wall.begin(), wall.end()); }
};

Ratio ratio(const Collector& c, const std::string& group, SideKind lib, SideKind raw) {
    Ratio out;
    const auto it = c.reps.find(group);
    if (it == c.reps.end())
        return out;
    for (const auto& rep : it->second) {
        if (const double w = counter(rep, ratio_key("ratio", lib, raw)); w > 0)
            out.wall.push_back(w);
        if (const double cp = counter(rep, ratio_key("cpuratio", lib, raw)); cp > 0)
            out.cpu.push_back(cp);
    }
    return out;
}

void print_group(const Collector& c, const Group& g) {
    const auto it = c.reps.find(g.name);
    if (it == c.reps.end() || it->second.empty()) {
        std::printf("\n%s: no repetition ran\n", g.name);
        return;
    }
    std::vector<std::pair<SideKind, SideKind>> pairs;
    for (const SideKind l : g.sides)
        for (const SideKind r : g.sides)
            if (is_lib(l) && !is_lib(r))
                pairs.emplace_back(l, r);
    std::printf("\n%s: us per job, the median batch of each side (this thread's CPU); "
                "librbln / raw, the median of the paired batches\n  rep iters",
                g.name);
    for (const SideKind k : g.sides)
        std::printf(" %22s", side_name(k));
    for (const auto& [l, r] : pairs)
        std::printf("  %s / %s", side_name(l), side_name(r));
    std::printf("\n");
    for (std::size_t i = 0; i < it->second.size(); i++) {
        const auto& rep = it->second[i];
        std::printf("  %3zu %5.0f", i, counter(rep, "iterations"));
        for (const SideKind k : g.sides) {
            const std::string n = side_name(k);
            std::printf("     %7.1f (%7.1f)", counter(rep, "wall:" + n), counter(rep, "cpu:" + n));
        }
        for (const auto& [l, r] : pairs) {
            const int width =
                static_cast<int>(std::strlen(side_name(l)) + std::strlen(side_name(r)));
            std::printf("  %*.3f", width + 3, counter(rep, ratio_key("ratio", l, r)));
        }
        std::printf("\n");
    }
}

void print_ratio(const char* label, const Ratio& r) {
    if (r.wall.empty()) {
        std::printf("  %-44s n/a\n", label);
        return;
    }
    std::printf("  %-44s %6.3f  (%.3f..%.3f over %zu)   CPU %6.3f\n", label, r.median(), r.lo(),
                r.hi(), r.wall.size(), median_of(r.cpu));
}

void summary(const Collector& c, bool device) {
    std::printf("\nhost cost per enqueued command (FakeKernel + FakeRing), ns per job:\n");
    std::printf("%6s %12s %12s %12s %14s\n", "batch", "fake kernel", "submitter", "stream",
                "librbln adds");
    for (const unsigned b : {1u, 8u, 32u, 128u}) {
        const std::string sfx = "/" + std::to_string(b);
        const double k = c.median("host/fake_kernel" + sfx);
        const double st = c.median("host/stream" + sfx);
        std::printf("%6u %12.0f %12.0f %12.0f %14.0f\n", b, k, c.median("host/submitter" + sfx), st,
                    st - k);
    }
    std::printf("encode one NOP: %.1f ns\n", c.median("host/encode_nop"));
    if (!device)
        return;
    std::printf("\nempty jobs on the card, batch %u, the sides of a group alternating batch by "
                "batch:\n",
                kBatch);
    for (const Group& g : groups())
        print_group(c, g);
    using K = SideKind;
    const Ratio def_each = ratio(c, "default-ring", K::LibDefault, K::RawEachCqe);
    const Ratio def_all = ratio(c, "default-ring", K::LibDefault, K::RawWaitAll);
    const Ratio si = ratio(c, "single-issuer", K::LibSingleIssuer, K::RawDeferred);
    const Ratio def_deferred = ratio(c, "single-issuer", K::LibDefault, K::RawDeferred);
    std::printf("\nlibrbln / raw, time per job: the median over the repetitions of their paired "
                "ratios (min..max); CPU: the same of the submitting thread's CPU time\n");
    std::printf(" default ring (any thread; librbln waits for one CQE at a time):\n");
    print_ratio("librbln/default / raw/each-cqe", def_each);
    print_ratio("librbln/default / raw/wait-all", def_all);
    std::printf(" single issuer (SINGLE_ISSUER | DEFER_TASKRUN; one wait for the batch):\n");
    print_ratio("librbln/single-issuer / raw/deferred", si);
    print_ratio("librbln/default / raw/deferred (not alike)", def_deferred);
    const double m = si.median();
    std::printf("target (issue 5): librbln adds at most 25%% over raw io_uring at batch %u; "
                "like-for-like: librbln/single-issuer / raw/deferred (same ring flags, one wait "
                "per batch) = %.3f (<= 1.25: %s; spread %.3f..%.3f)\n",
                kBatch, m, m > 0 && m <= 1.25 ? "met" : "NOT met", si.lo(), si.hi());
    const double d = def_each.median();
    std::printf("  default ring against raw on the same ring flags (librbln/default / "
                "raw/each-cqe) = %.3f (<= 1.25: %s)\n",
                d, d > 0 && d <= 1.25 ? "met" : "NOT met");
}

bool find_card(const Options& o) {
    try {
        rbln::DiscoveryOptions d;
        d.telemetry_fallback = false;
        const auto cards = rbln::discover(d).cards;
        if (o.card >= cards.size())
            return false;
        Card& c = card();
        c.node = cards[o.card].accel_node;
        c.fd = ::open(c.node.c_str(), O_RDWR | O_CLOEXEC);
        if (c.fd < 0)
            fail("open " + c.node, errno);
        drm_rbln_queue_create q{};
        q.chiplet_mask = 1;
        q.priority = RBLN_QUEUE_PRIORITY_NORMAL;
        raw_ioctl(c.fd, DRM_IOCTL_RBLN_QUEUE_CREATE, q, "QUEUE_CREATE");
        c.queue = q.queue_id;
        drm_rbln_bo_create bo{};
        bo.size = 4096;
        bo.region = RBLN_REGION_HOST;
        raw_ioctl(c.fd, DRM_IOCTL_RBLN_BO_CREATE, bo, "BO_CREATE");
        c.cmd = bo.handle;
        drm_rbln_bo_info info{};
        info.handle = bo.handle;
        raw_ioctl(c.fd, DRM_IOCTL_RBLN_BO_INFO, info, "BO_INFO");
        c.map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd,
                       static_cast<off_t>(info.mmap_offset));
        if (c.map == MAP_FAILED)
            fail("mmap", errno);
        CommandEncoder(std::span<std::byte>(static_cast<std::byte*>(c.map), 8)).nop();
        return true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rbln_umd_bench: no card: %s\n", e.what());
        return false;
    }
}

} // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 2;
    const double min_s = o.min_ms / 1000.0;

    benchmark::RegisterBenchmark("host/encode_nop", host_encode_nop)->MinTime(min_s);
    for (const int b : {1, 8, 32, 128}) {
        benchmark::RegisterBenchmark("host/fake_kernel", host_fake_kernel)->Arg(b)->MinTime(min_s);
        benchmark::RegisterBenchmark("host/submitter", host_submitter)->Arg(b)->MinTime(min_s);
        benchmark::RegisterBenchmark("host/stream", host_stream)->Arg(b)->MinTime(min_s);
    }
    const bool device = !o.host_only && find_card(o);
    if (device) {
        std::printf("# rbln_umd_bench: %s, empty jobs on chiplet 0, batch %u, %u repetitions\n",
                    card().node.c_str(), kBatch, o.rounds);
        // The groups take turns too (round 0 of each, then round 1, ...).
        for (unsigned r = 0; r < o.rounds; r++)
            for (const Group& g : groups())
                benchmark::RegisterBenchmark(
                    (std::string(g.name) + "/round:" + std::to_string(r)).c_str(),
                    [&g, &o](benchmark::State& s) { alternate(s, g, o.min_ms, o.min_iters); })
                    ->Iterations(1)
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
    } else {
        std::printf("# rbln_umd_bench: no rbln card: host part only\n");
    }
    Collector collector;
    benchmark::RunSpecifiedBenchmarks(&collector);
    summary(collector, device);
    benchmark::Shutdown();
    return 0;
}
