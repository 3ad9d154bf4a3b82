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
// Device part (with an rbln card, i.e. in the VM), empty jobs (one NOP
// packet, no buffers, no syncs) on a queue of chiplet 0, batches of 32, one
// batch in flight, the same jobs through each path in the same run:
//   raw/uring        io_uring RBLN_URING_CMD_SUBMIT x 32, wait for each CQE
//   raw/uring-waitall  the same, waiting for all 32 CQEs at once
//   raw/deferred     the same on a SINGLE_ISSUER | DEFER_TASKRUN ring that
//                    waits for all 32 CQEs at once (one wake-up)
//   librbln/stream   Stream::enqueue x 32 + synchronize(), librbln as is
//   librbln/waitall  librbln over a default ring whose wait is for every
//                    outstanding CQE
//   librbln/deferred-wait1    librbln over a DEFER_TASKRUN ring that waits
//                    for one CQE at a time (what CommandRing asks for)
//   librbln/deferred-waitall  librbln over a DEFER_TASKRUN ring that waits
//                    for every outstanding CQE (what the Submitter could
//                    ask for when the waiter needs them all)
// The paths take turns for --rounds rounds (the emulated card drifts); the
// summary compares medians: librbln's time per job over raw io_uring's at
// batch 32 (target: at most 1.25).  Nothing is asserted.
//
//   rbln_umd_bench [--card N] [--min-ms MS] [--min-iters N] [--rounds N]
//                  [--host-only] [--benchmark_* flags]

#include <benchmark/benchmark.h>

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "drm/rbln_accel.h"
#include "fake_kernel.hpp"
#include "fake_ring.hpp"
#include "rbln/command.hpp"
#include "rbln/device.hpp"
#include "rbln/discovery.hpp"
#include "rbln/kernel.hpp"
#include "rbln/stream.hpp"
#include "rbln/submitter.hpp"

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
        o.submitter.ring_factory = rbln::test::fake_ring_factory(*kernel);
        o.submitter.batch = batch;
        o.submitter.warn = [](const std::string&) {};
        o.chiplet_mask = 1;
        return Device::open(kernel, 0, o);
    }
};

void host_fake_kernel(benchmark::State& state) {
    const auto batch = static_cast<unsigned>(state.range(0));
    FakeSetup f;
    const std::uint32_t queue = f.kernel->queue_create(1, RBLN_QUEUE_PRIORITY_NORMAL);
    const rbln::BoHandle cmd = f.kernel->bo_create({4096, RBLN_REGION_HOST, 0, 0});
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
    const std::uint32_t queue = f.kernel->queue_create(1, RBLN_QUEUE_PRIORITY_NORMAL);
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

// A CommandRing for librbln's Submitter with the ring's flags and the
// wait of the benchmark's choice.  @deferred: SINGLE_ISSUER | DEFER_TASKRUN
// (benchmark only: the Submitter is thread-safe and may be entered from any
// thread, a SINGLE_ISSUER ring from one).  @wait_all: wait_for_completion()
// waits for every CQE still to come instead of one.
class BenchRing final : public rbln::CommandRing {
public:
    BenchRing(int fd, unsigned entries, bool deferred, bool wait_all)
        : fd_(fd), wait_all_(wait_all), ring_(entries, deferred) {}

    unsigned space() const override { return io_uring_sq_space_left(&ring_.get()); }
    void push(std::uint32_t cmd_op, std::span<const std::byte> payload,
              std::uint64_t user_data) override {
        ring_.push(fd_, cmd_op, payload.data(), payload.size(), user_data);
        pushed_++;
    }
    int submit() override { return ring_.submit(); }
    std::size_t drain(std::span<rbln::RingCompletion> out) override {
        std::size_t n = 0;
        io_uring_cqe* cqe = nullptr;
        while (n < out.size() && io_uring_peek_cqe(&ring_.get(), &cqe) == 0 && cqe != nullptr) {
            out[n++] = {cqe->user_data, cqe->res, cqe->big_cqe[0]};
            io_uring_cqe_seen(&ring_.get(), cqe);
        }
        reaped_ += n;
        return n;
    }
    int wait_for_completion() override {
        const auto want =
            static_cast<unsigned>(wait_all_ ? std::max<std::uint64_t>(pushed_ - reaped_, 1) : 1);
        const int r = io_uring_enter(ring_.get().ring_fd, 0, want, IORING_ENTER_GETEVENTS, nullptr);
        return r < 0 && errno != EINTR ? -errno : 0;
    }

private:
    int fd_;
    bool wait_all_;
    mutable RawRing ring_;
    std::uint64_t pushed_ = 0;
    std::uint64_t reaped_ = 0;
};

struct Card {
    std::string node;
    std::shared_ptr<rbln::KernelDevice> kernel; // raw jobs: queue + command buffer
    std::uint32_t queue = 0;
    rbln::BoHandle cmd{};
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

drm_rbln_submit raw_job() {
    drm_rbln_submit s{};
    s.queue_id = card().queue;
    s.cmd_handle = card().cmd.handle;
    s.cmd_size = rbln::PacketSize::nop;
    return s;
}

void check_cqe(int res) {
    if (res != 0)
        fail("empty job", -res);
}

void raw_uring(benchmark::State& state) {
    RawRing ring(256, false);
    const int fd = card().kernel->fd();
    const drm_rbln_submit s = raw_job();
    for (auto _ : state) {
        for (unsigned i = 0; i < kBatch; i++)
            ring.push(fd, RBLN_URING_CMD_SUBMIT, &s, sizeof(s), i + 1);
        if (ring.submit() != static_cast<int>(kBatch))
            fail("io_uring_submit", EIO);
        for (unsigned i = 0; i < kBatch; i++)
            check_cqe(ring.reap());
    }
    state.SetItemsProcessed(state.iterations() * kBatch);
}

// One batch: submit, wait for all of it at once (@deferred: on a
// DEFER_TASKRUN ring, woken once; else on the default ring).
void raw_waitall(benchmark::State& state, bool deferred) {
    RawRing ring(256, deferred);
    const int fd = card().kernel->fd();
    const drm_rbln_submit s = raw_job();
    for (auto _ : state) {
        for (unsigned i = 0; i < kBatch; i++)
            ring.push(fd, RBLN_URING_CMD_SUBMIT, &s, sizeof(s), i + 1);
        if (ring.submit() != static_cast<int>(kBatch))
            fail("io_uring_submit", EIO);
        ring.wait_nr(kBatch);
        for (unsigned i = 0; i < kBatch; i++)
            check_cqe(ring.reap());
    }
    state.SetItemsProcessed(state.iterations() * kBatch);
}

enum class LibRing { Default, WaitAll, DeferredWait1, DeferredWaitAll };

void librbln(benchmark::State& state, LibRing kind) {
    DeviceOptions o;
    o.chiplet_mask = 1; // the raw jobs' chiplet
    o.submitter.batch = kBatch;
    if (kind != LibRing::Default) {
        const bool all = kind == LibRing::WaitAll || kind == LibRing::DeferredWaitAll;
        const bool deferred = kind != LibRing::WaitAll;
        o.submitter.ring_factory =
            [all, deferred](rbln::KernelInterface& k,
                            unsigned entries) -> rbln::Result<std::unique_ptr<rbln::CommandRing>> {
            const int fd = dynamic_cast<rbln::KernelDevice&>(k).fd();
            return std::unique_ptr<rbln::CommandRing>(
                std::make_unique<BenchRing>(fd, entries, deferred, all));
        };
    }
    auto dev = Device::open(open_node(card().node), 0, o);
    if (dev->submitter().path() != rbln::Submitter::Path::IoUring) {
        state.SkipWithError(("no io_uring: " + dev->submitter().fallback_reason()).c_str());
        return;
    }
    Stream s(dev);
    empty_jobs(s, kBatch); // the command buffer, the queue's first job
    for (auto _ : state)
        empty_jobs(s, kBatch);
    state.SetItemsProcessed(state.iterations() * kBatch);
}

// ---- options, summary ----------------------------------------------------------

struct Options {
    unsigned card = 0;
    unsigned min_ms = 300;
    unsigned rounds = 3;
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
            // rounds of the other binaries; benchmark picks its iterations
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

// Keeps the time per job of every run, by benchmark name without the
// round suffix.
class Collector : public benchmark::ConsoleReporter {
public:
    // Colours only on a terminal (run.sh keeps the output in files).
    Collector() : ConsoleReporter(::isatty(STDOUT_FILENO) != 0 ? OO_ColorTabular : OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs) {
            if (r.error_occurred || r.run_type != Run::RT_Iteration)
                continue;
            const auto it = r.counters.find("items_per_second");
            if (it == r.counters.end() || it->second.value <= 0)
                continue;
            // "raw/uring/round:2" -> "raw/uring", "host/stream" + "32" -> "host/stream/32"
            std::string name = r.run_name.function_name;
            if (const auto at = name.find("/round:"); at != std::string::npos)
                name.resize(at);
            if (!r.run_name.args.empty())
                name += "/" + r.run_name.args;
            ns_per_job[name].push_back(1e9 / it->second.value);
        }
    }

    double median(const std::string& name) const {
        const auto it = ns_per_job.find(name);
        if (it == ns_per_job.end() || it->second.empty())
            return 0;
        std::vector<double> v = it->second;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }

    std::map<std::string, std::vector<double>> ns_per_job;
};

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
    const double raw = c.median("raw/uring");
    const double deferred = c.median("raw/deferred");
    const double best_raw = std::min(raw, deferred);
    std::printf("\nempty jobs on the card, batch %u, median of the rounds, us per job:\n", kBatch);
    for (const char* n :
         {"raw/uring", "raw/uring-waitall", "raw/deferred", "librbln/stream", "librbln/waitall",
          "librbln/deferred-wait1", "librbln/deferred-waitall"}) {
        const double v = c.median(n);
        std::printf("  %-26s %9.2f   x%.3f of raw/uring   x%.3f of the better raw\n", n, v / 1e3,
                    raw > 0 ? v / raw : 0, best_raw > 0 ? v / best_raw : 0);
    }
    const double lib = c.median("librbln/stream");
    const double ratio = raw > 0 ? lib / raw : 0;
    std::printf("target: librbln / raw io_uring per job at batch %u = %.3f (<= 1.25: %s)\n", kBatch,
                ratio, ratio > 0 && ratio <= 1.25 ? "met" : "NOT met");
    std::printf("target against the better raw (%s): %.3f (<= 1.25: %s)\n",
                deferred < raw ? "raw/deferred" : "raw/uring", best_raw > 0 ? lib / best_raw : 0,
                best_raw > 0 && lib / best_raw <= 1.25 ? "met" : "NOT met");
    std::printf("of librbln as is: waiting for all CQEs %.3f; DEFER_TASKRUN waiting for one %.3f, "
                "for all %.3f\n",
                lib > 0 ? c.median("librbln/waitall") / lib : 0,
                lib > 0 ? c.median("librbln/deferred-wait1") / lib : 0,
                lib > 0 ? c.median("librbln/deferred-waitall") / lib : 0);
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
        c.kernel = open_node(c.node);
        c.queue = c.kernel->queue_create(1, RBLN_QUEUE_PRIORITY_NORMAL);
        c.cmd = c.kernel->bo_create({4096, RBLN_REGION_HOST, 0, 0});
        const rbln::BoDescription info = c.kernel->bo_info(c.cmd.handle);
        c.map = c.kernel->mmap(info.mmap_offset, 4096);
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
        std::printf("# rbln_umd_bench: %s, empty jobs on chiplet 0, batch %u, %u rounds\n",
                    card().node.c_str(), kBatch, o.rounds);
        for (unsigned r = 0; r < o.rounds; r++) {
            const std::string sfx = "/round:" + std::to_string(r);
            auto reg = [&](const std::string& name, auto fn) {
                benchmark::RegisterBenchmark((name + sfx).c_str(), fn)
                    ->MinTime(min_s)
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
            };
            reg("raw/uring", raw_uring);
            reg("librbln/stream", [](benchmark::State& s) { librbln(s, LibRing::Default); });
            reg("raw/uring-waitall", [](benchmark::State& s) { raw_waitall(s, false); });
            reg("librbln/waitall", [](benchmark::State& s) { librbln(s, LibRing::WaitAll); });
            reg("raw/deferred", [](benchmark::State& s) { raw_waitall(s, true); });
            reg("librbln/deferred-wait1",
                [](benchmark::State& s) { librbln(s, LibRing::DeferredWait1); });
            reg("librbln/deferred-waitall",
                [](benchmark::State& s) { librbln(s, LibRing::DeferredWaitAll); });
        }
    } else {
        std::printf("# rbln_umd_bench: no rbln card: host part only\n");
    }
    Collector collector;
    benchmark::RunSpecifiedBenchmarks(&collector);
    summary(collector, device);
    benchmark::Shutdown();
    return 0;
}
