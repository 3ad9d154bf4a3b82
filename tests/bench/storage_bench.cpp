// SPDX-License-Identifier: GPL-2.0
// storage_bench - the host cost of lazy storage's state check and of the
// explain hooks (Google Benchmark, FakeKernel: no card).
//
// Figures:
//   - Storage::device_use on a resident storage that needs nothing (in
//     sync and read, or device-latest and written again by its last
//     writer): the lazy-state check every device operation pays
//     (target, issue 6: under 10 ns);
//   - the same with an explain region open on this thread (the hook
//     records nothing but looks the storage up) and on another thread;
//   - an explain hook (explain_hooks.hpp) alone: with no region open in
//     the process (one relaxed load and a branch), and with a region open
//     on another thread (also a thread-local read);
//   - an ExplainSite (what every op of rbln/ops.hpp opens) with no region.
// The summary prints the state check against its target and the hook's
// share of it, in CPU time per call (on a loaded machine the wall time also
// counts the benchmark thread's preemption); nothing is asserted.
//
//   build/cmake/tests/bench/rbln_storage_bench [--benchmark_min_time=0.5]

#include <benchmark/benchmark.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "diag/explain_hooks.hpp"
#include "fake_kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/explain.hpp"
#include "rbln/storage.hpp"

namespace {

using rbln::DeviceAccess;

/// A device, its allocator and two storages over one FakeKernel.
struct Bench {
    Bench() : k(std::make_shared<rbln::test::FakeKernel>()) {
        alloc = rbln::DeviceAllocator::for_kernels(0, {{0, k}});
        rbln::DeviceOptions o;
        o.submitter.warn = [](const std::string&) {};
        o.submitter.use_io_uring = false;
        dev = rbln::Device::open(k, 0, o);
        stream.emplace(dev->default_stream());
        const rbln::StorageOptions lazy{rbln::CommitMode::Lazy, {}};
        in = rbln::Storage::create(dev, *alloc, 4096, rbln::ElementType::U8, lazy);
        out = rbln::Storage::create(dev, *alloc, 4096, rbln::ElementType::U8, lazy);
        in->device_use(*stream, DeviceAccess::Read);   // resident, in sync
        out->device_use(*stream, DeviceAccess::Write); // resident, device-latest
    }
    ~Bench() {
        in.reset();
        out.reset();
        stream.reset();
        dev.reset();
    }
    Bench(const Bench&) = delete;
    Bench& operator=(const Bench&) = delete;
    Bench(Bench&&) = delete;
    Bench& operator=(Bench&&) = delete;

    std::shared_ptr<rbln::test::FakeKernel> k;
    std::unique_ptr<rbln::DeviceAllocator> alloc;
    std::shared_ptr<rbln::Device> dev;
    std::optional<rbln::Stream> stream;
    std::shared_ptr<rbln::Storage> in;
    std::shared_ptr<rbln::Storage> out;
};

Bench& bench() {
    static Bench b;
    return b;
}

/// Keeps an explain region open on another thread while it lives.
class RegionElsewhere {
public:
    RegionElsewhere()
        : t_([this] {
              auto region = rbln::explain("elsewhere");
              std::unique_lock<std::mutex> lock(m_);
              open_ = true;
              cv_.notify_all();
              cv_.wait(lock, [this] { return stop_; });
          }) {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return open_; });
    }
    RegionElsewhere(const RegionElsewhere&) = delete;
    RegionElsewhere& operator=(const RegionElsewhere&) = delete;
    RegionElsewhere(RegionElsewhere&&) = delete;
    RegionElsewhere& operator=(RegionElsewhere&&) = delete;
    ~RegionElsewhere() {
        {
            const std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        cv_.notify_all();
        t_.join();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool open_ = false;
    bool stop_ = false;
    std::thread t_;
};

void device_use_read_in_sync(benchmark::State& state) {
    Bench& b = bench();
    for (auto _ : state)
        benchmark::DoNotOptimize(b.in->device_use(*b.stream, DeviceAccess::Read).get());
}

void device_use_rewrite_by_last_writer(benchmark::State& state) {
    Bench& b = bench();
    for (auto _ : state)
        benchmark::DoNotOptimize(b.out->device_use(*b.stream, DeviceAccess::Write).get());
}

void device_use_region_here(benchmark::State& state) {
    Bench& b = bench();
    const auto region = rbln::explain("bench");
    for (auto _ : state)
        benchmark::DoNotOptimize(b.in->device_use(*b.stream, DeviceAccess::Read).get());
}

void device_use_region_elsewhere(benchmark::State& state) {
    Bench& b = bench();
    const RegionElsewhere other;
    for (auto _ : state)
        benchmark::DoNotOptimize(b.in->device_use(*b.stream, DeviceAccess::Read).get());
}

void hook_no_region(benchmark::State& state) {
    std::uint64_t id = 1;
    for (auto _ : state) {
        rbln::detail::explain_device_use(id, true);
        benchmark::DoNotOptimize(id);
    }
}

void hook_region_elsewhere(benchmark::State& state) {
    const RegionElsewhere other;
    std::uint64_t id = 1;
    for (auto _ : state) {
        rbln::detail::explain_device_use(id, true);
        benchmark::DoNotOptimize(id);
    }
}

void site_no_region(benchmark::State& state) {
    for (auto _ : state) {
        const rbln::ExplainSite site;
        benchmark::ClobberMemory();
    }
}

BENCHMARK(device_use_read_in_sync);
BENCHMARK(device_use_rewrite_by_last_writer);
BENCHMARK(device_use_region_here);
BENCHMARK(device_use_region_elsewhere);
BENCHMARK(hook_no_region);
BENCHMARK(hook_region_elsewhere);
BENCHMARK(site_no_region);

/// Remembers each benchmark's time per iteration (ns).
class Collect final : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs)
            if (r.run_type == Run::RT_Iteration)
                ns[r.benchmark_name()] = r.GetAdjustedCPUTime();
    }
    std::map<std::string, double> ns; ///< CPU time: a shared machine's preemption left out
};

} // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    Collect reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    auto get = [&](const char* name) {
        auto it = reporter.ns.find(name);
        return it == reporter.ns.end() ? 0.0 : it->second;
    };
    const double check = get("device_use_read_in_sync");
    const double rewrite = get("device_use_rewrite_by_last_writer");
    const double hook = get("hook_no_region");
    std::printf("\nsummary (CPU ns per call)\n");
    std::printf("  lazy-state check, read in sync:        %6.2f  target < 10: %s\n", check,
                check < 10 ? "met" : "NOT met");
    std::printf("  lazy-state check, rewrite by writer:   %6.2f  target < 10: %s\n", rewrite,
                rewrite < 10 ? "met" : "NOT met");
    std::printf("  explain hook, no region open:          %6.2f  (%.0f%% of the check)\n", hook,
                check > 0 ? 100.0 * hook / check : 0.0);
    std::printf("  explain hook, region on another thread: %5.2f\n", get("hook_region_elsewhere"));
    std::printf("  check with a region on this thread:    %6.2f  (%.1fx)\n",
                get("device_use_region_here"),
                check > 0 ? get("device_use_region_here") / check : 0.0);
    std::printf("  check with a region on another thread: %6.2f  (%.1fx)\n",
                get("device_use_region_elsewhere"),
                check > 0 ? get("device_use_region_elsewhere") / check : 0.0);
    std::printf("  ExplainSite, no region open:           %6.2f\n", get("site_no_region"));
    return 0;
}
