// SPDX-License-Identifier: GPL-2.0
// rbln_emu_bench: throughput of the emulated card's engines on this host.
//
//  - the DMA engine's copy over spans (dma::copy, what COPY runs) against
//    plain memcpy, 4 KiB .. 256 MiB, one span and 4 KiB scattered spans;
//  - COPY and FILL through a command ring (card time of the job, and the
//    wall time of a batch from the doorbell to the last completion);
//  - MATMUL 256x256x256 and elementwise ADD, AVX2 and generic code;
//  - a 277-node graph: validation, one GRAPH_EXEC against its packets as
//    one job and as 277 jobs.
//
// Figures are printed (GB/s = 10^9 bytes moved per second, GFLOP/s =
// 2*M*N*K / s).  RBLN_EMU_BENCH_QUICK=1 (ctest) runs small sizes only: the
// point there is that the binary keeps working, not the figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "dma.h"
#include "graph.h"
#include "graph_builder.h"
#include "kernels.h"
#include "ring_fixture.h"

using namespace rbln::emu;
using namespace rbln::emu::test;

namespace {

using Clock = std::chrono::steady_clock;

bool quick() {
    const char* q = std::getenv("RBLN_EMU_BENCH_QUICK");
    return q != nullptr && *q != '\0' && *q != '0';
}

std::uint64_t max_size() {
    return quick() ? 16ULL << 20 : 256ULL << 20;
}

std::vector<std::uint64_t> sizes() {
    std::vector<std::uint64_t> s;
    for (std::uint64_t n = 4096; n <= max_size(); n *= 4)
        s.push_back(n);
    return s;
}

// Repeats `f` until at least `min_bytes` moved and 3 runs; seconds per run.
template <typename F> double time_per_run(std::uint64_t bytes, F&& f) {
    const std::uint64_t min_bytes = quick() ? (64ULL << 20) : (2ULL << 30);
    const std::uint64_t runs = std::max<std::uint64_t>(3, min_bytes / bytes);
    f(); // warm: page faults, caches
    const auto t0 = Clock::now();
    for (std::uint64_t i = 0; i < runs; i++)
        f();
    return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(runs);
}

std::string human(std::uint64_t n) {
    char buf[32];
    if (n >= (1ULL << 20))
        std::snprintf(buf, sizeof(buf), "%llu MiB", static_cast<unsigned long long>(n >> 20));
    else
        std::snprintf(buf, sizeof(buf), "%llu KiB", static_cast<unsigned long long>(n >> 10));
    return buf;
}

} // namespace

TEST(Bench, DmaCopyOverSpansAgainstMemcpy) {
    const std::uint64_t max = max_size();
    Mapping src = make_sparse(max);
    Mapping dst = make_sparse(max);
    std::memset(src.data(), 1, max);
    std::memset(dst.data(), 2, max);
    std::printf("\n%-10s %14s %14s %18s\n", "size", "memcpy GB/s", "dma::copy GB/s",
                "4K-scattered GB/s");
    for (std::uint64_t n : sizes()) {
        const double tm = time_per_run(n, [&] { std::memcpy(dst.data(), src.data(), n); });
        const std::vector<HostSpan> s{HostSpan(src.data(), n)};
        const std::vector<HostSpan> d{HostSpan(dst.data(), n)};
        const double td = time_per_run(n, [&] { ASSERT_TRUE(dma::copy(d, s)); });
        // The source as 4 KiB pages in reverse order (a scattered VA range).
        std::vector<HostSpan> scattered;
        for (std::uint64_t p = n / 4096; p-- > 0;)
            scattered.emplace_back(src.data() + p * 4096, 4096);
        const double tsc = time_per_run(n, [&] { ASSERT_TRUE(dma::copy(d, scattered)); });
        std::printf("%-10s %14.2f %14.2f %18.2f\n", human(n).c_str(), n / tm / 1e9, n / td / 1e9,
                    n / tsc / 1e9);
    }
}

TEST(Bench, CopyAndFillThroughACommandRing) {
    const std::uint64_t max = max_size();
    Options opt = test_options();
    TestCard t(opt, 2 * max, max, 64);
    t.h.set_log_level(LogLevel::info);
    t.h.real_clock = true;
    std::memset(t.host(0), 3, 2 * max);
    std::printf("\n%-10s %-12s %16s %16s\n", "size", "direction", "card-time GB/s",
                "batch wall GB/s");
    struct Dir {
        const char* name;
        std::uint64_t src;
        std::uint64_t dst;
    };
    const Dir dirs[] = {
        {"host->hbm", TestCard::kVaHost, TestCard::hbm_va(0)},
        {"hbm->host", TestCard::hbm_va(1), TestCard::kVaHost + max},
        {"hbm->hbm", TestCard::hbm_va(2), TestCard::hbm_va(3)},
        {"host->host", TestCard::kVaHost, TestCard::kVaHost + max},
        {"fill hbm", 0, TestCard::hbm_va(0)},
    };
    for (std::uint64_t n : sizes()) {
        for (const Dir& d : dirs) {
            CmdBuf cb;
            if (d.src == 0)
                cb.fill(d.dst, n, 0x0102030405060708ULL, 8);
            else
                cb.copy(d.src, d.dst, n);
            const rbln_fw_job j = t.place(0, cb);
            const unsigned batch = n <= (1ULL << 20) ? 32 : 4;
            (void)t.h.run_job(0, j); // warm
            std::uint64_t card_ns = 0;
            const auto t0 = Clock::now();
            for (unsigned i = 0; i < batch; i++)
                (void)t.h.push_job(0, j);
            t.h.ring_doorbell();
            for (unsigned i = 0; i < batch; i++) {
                const auto cpl = t.h.wait_job_cpl(0);
                ASSERT_TRUE(cpl.has_value());
                ASSERT_EQ(cpl->status, RBLN_FW_JOB_OK);
                card_ns += cpl->end_ns - cpl->start_ns;
            }
            const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
            const double bytes = static_cast<double>(n) * batch;
            std::printf("%-10s %-12s %16.2f %16.2f\n", human(n).c_str(), d.name,
                        bytes / static_cast<double>(card_ns), bytes / wall / 1e9);
        }
    }
}

TEST(Bench, MatmulAndElementwiseKernels) {
    const std::uint64_t m = 256;
    const std::uint64_t n = 256;
    const std::uint64_t k = 256;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    std::printf("\n%-28s %10s %10s\n", "kernel", "avx2", "generic");
    for (std::uint32_t dt : {simd::kF32, simd::kF16, simd::kBf16}) {
        const std::size_t es = simd::elem_size(dt);
        std::vector<std::byte> a(m * k * es);
        std::vector<std::byte> b(k * n * es);
        std::vector<std::byte> c(m * n * es);
        std::vector<float> f(m * k);
        for (float& v : f)
            v = dist(rng);
        simd::generic().store(dt, f.data(), a.data(), f.size());
        simd::generic().store(dt, f.data(), b.data(), f.size());
        const TensorRef ta{a.data(), {static_cast<std::int64_t>(k), 1}};
        const TensorRef tb{b.data(), {static_cast<std::int64_t>(n), 1}};
        const TensorRef tc{c.data(), {static_cast<std::int64_t>(n), 1}};
        const double flops = 2.0 * m * n * k;
        double gf[2] = {0, 0};
        const simd::Ops* impls[2] = {simd::avx2(), &simd::generic()};
        for (int i = 0; i < 2; i++) {
            if (impls[i] == nullptr)
                continue;
            const double s = time_per_run(256ULL << 20, [&] {
                ASSERT_TRUE(run_matmul(dt, dt, m, n, k, ta, tb, tc, nullptr, *impls[i]));
            });
            gf[i] = flops / s / 1e9;
        }
        char name[64];
        std::snprintf(name, sizeof(name), "MATMUL 256^3 %s GFLOP/s",
                      dt == simd::kF32   ? "fp32"
                      : dt == simd::kF16 ? "fp16"
                                         : "bf16");
        std::printf("%-28s %10.1f %10.1f\n", name, gf[0], gf[1]);
    }
    const std::uint64_t count = quick() ? (1ULL << 20) : (16ULL << 20);
    for (std::uint32_t dt : {simd::kF32, simd::kF16, simd::kBf16}) {
        const std::size_t es = simd::elem_size(dt);
        std::vector<std::byte> a(count * es, std::byte{0x3c});
        std::vector<std::byte> b(count * es, std::byte{0x3c});
        std::vector<std::byte> o(count * es);
        const std::array<std::uint64_t, 4> shape{count, 0, 0, 0};
        double gb[2] = {0, 0};
        const simd::Ops* impls[2] = {simd::avx2(), &simd::generic()};
        for (int i = 0; i < 2; i++) {
            if (impls[i] == nullptr)
                continue;
            const double bytes = 3.0 * static_cast<double>(count * es);
            const double s = time_per_run(count * es * 3, [&] {
                ASSERT_TRUE(run_elementwise(RBLN_FW_KERNEL_ADD, dt, dt, 1, shape,
                                            TensorRef{a.data(), {1}}, TensorRef{b.data(), {1}},
                                            TensorRef{o.data(), {1}}, 0.0F, nullptr, *impls[i]));
            });
            gb[i] = bytes / s / 1e9;
        }
        char name[64];
        std::snprintf(name, sizeof(name), "ADD %s GB/s (a+b+out)",
                      dt == simd::kF32   ? "fp32"
                      : dt == simd::kF16 ? "fp16"
                                         : "bf16");
        std::printf("%-28s %10.2f %10.2f\n", name, gb[0], gb[1]);
    }
}

TEST(Bench, MatmulThroughACommandRingInHbm) {
    TestCard t;
    t.h.set_log_level(LogLevel::info);
    t.h.real_clock = true;
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = l.dtype_out = simd::kF32;
    l.ndim = 2;
    l.shape[0] = l.shape[1] = l.shape[2] = 256;
    l.stride_a[0] = l.stride_b[0] = l.stride_out[0] = 256;
    l.stride_a[1] = l.stride_b[1] = l.stride_out[1] = 1;
    l.a = TestCard::hbm_va(0, 0);
    l.b = TestCard::hbm_va(0, 1ULL << 20);
    l.out = TestCard::hbm_va(0, 2ULL << 20);
    CmdBuf cb;
    cb.launch(l);
    std::uint64_t best = ~0ULL;
    for (int i = 0; i < (quick() ? 3 : 20); i++) {
        const auto cpl = t.run(0, cb);
        ASSERT_TRUE(cpl.has_value());
        ASSERT_EQ(cpl->status, RBLN_FW_JOB_OK);
        best = std::min<std::uint64_t>(best, cpl->end_ns - cpl->start_ns);
    }
    std::printf("\nLAUNCH MATMUL 256^3 fp32 in HBM: %.1f GFLOP/s (best card time %.3f ms)\n",
                2.0 * 256 * 256 * 256 / static_cast<double>(best), best / 1e6);
}

// A step of the published decoder layer's size (277 nodes) as one
// GRAPH_EXEC against the same packets as 277 jobs and as one job of 277
// packets: wall time from the doorbell to the completion, and the card's
// validation of the Definition alone (host CPU, median).
TEST(Bench, GraphOfADecoderLayerAgainstItsPacketsAsJobs) {
    constexpr unsigned kNodes = 277;
    constexpr std::uint64_t kDim = 64;
    constexpr std::uint64_t kBytes = kDim * kDim * 4;
    Options opt = test_options();
    TestCard t(opt, 16ULL << 20, 16ULL << 20, 512);
    t.h.real_clock = true;
    GraphBuilder g;
    g.boundary(dense(RBLN_FW_DT_FP32, {kDim, kDim}, RBLN_FW_GRAPH_IN, 4));
    g.boundary(dense(RBLN_FW_DT_FP32, {kDim, kDim}, RBLN_FW_GRAPH_OUT, 4));
    g.exec_bytes(8 * kBytes);
    auto slot = [&](unsigned i) { return exec_at((i % 8) * kBytes); };
    g.copy(kBytes, bnd(0), slot(0));
    const std::uint32_t kernels[] = {RBLN_FW_KERNEL_ADD, RBLN_FW_KERNEL_RELU, RBLN_FW_KERNEL_MUL,
                                     RBLN_FW_KERNEL_SCALE};
    for (unsigned i = 1; i + 1 < kNodes; i++) {
        rbln_fw_pkt_launch l{};
        l.kernel = kernels[i % 4];
        l.dtype_in = l.dtype_out = RBLN_FW_DT_FP32;
        l.ndim = 1;
        l.shape[0] = kDim * kDim;
        l.stride_a[0] = l.stride_out[0] = 1;
        const bool two = l.kernel == RBLN_FW_KERNEL_ADD || l.kernel == RBLN_FW_KERNEL_MUL;
        l.stride_b[0] = two ? 1 : 0;
        l.scale = l.kernel == RBLN_FW_KERNEL_SCALE ? 0x3f000000U : 0U;
        // b: two nodes back (fan-in), the output replaces i - 2's slot
        // only after both of its readers ran (they are producers).
        const auto p1 = static_cast<std::uint16_t>(i - 1);
        if (two && i >= 2)
            g.launch(l, slot(i - 1), slot(i - 2), slot(i), {p1, static_cast<std::uint16_t>(i - 2)});
        else
            g.launch(l, slot(i - 1), two ? slot(i - 1) : none(), slot(i), {p1});
    }
    g.copy(kBytes, slot(kNodes - 2), bnd(1), {static_cast<std::uint16_t>(kNodes - 2)});
    const std::vector<std::byte> obj = g.object(42);
    const auto table = g.bindings({TestCard::kVaHost, TestCard::kVaHost + kBytes});
    const std::uint64_t def = 0x100000;
    const std::uint64_t tab = 0x1c0000;
    std::memcpy(t.host(def), obj.data(), obj.size());
    std::memcpy(t.host(tab), table.data(), table.size() * sizeof(table[0]));
    const rbln_fw_pkt_graph_exec p = graph_exec(TestCard::kVaHost + def, TestCard::kVaHost + tab, 2,
                                                TestCard::hbm_va(0), 8 * kBytes);

    // The validator alone.
    rbln_fw_graph_obj o{};
    std::memcpy(&o, obj.data(), sizeof(o));
    const std::span<const std::byte> image(obj.data() + sizeof(o), obj.size() - sizeof(o));
    const std::span<const std::byte> tb(reinterpret_cast<const std::byte*>(table.data()),
                                        table.size() * sizeof(table[0]));
    GraphPlan plan;
    std::vector<double> us;
    for (int r = 0; r < (quick() ? 20 : 400); r++) {
        const auto t0 = Clock::now();
        ASSERT_FALSE(check_graph(p, o, image, tb, plan).has_value());
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());

    // The same packets, addresses resolved by the plan.
    CmdBuf all;
    std::vector<CmdBuf> each(kNodes);
    for (unsigned i = 0; i < kNodes; i++) {
        std::visit(
            [&](const auto& pk) {
                using P = std::decay_t<decltype(pk)>;
                std::uint8_t op = RBLN_FW_PKT_LAUNCH;
                if constexpr (std::is_same_v<P, rbln_fw_pkt_copy>)
                    op = RBLN_FW_PKT_COPY;
                else if constexpr (std::is_same_v<P, rbln_fw_pkt_copy_strided>)
                    op = RBLN_FW_PKT_COPY_STRIDED;
                else if constexpr (std::is_same_v<P, rbln_fw_pkt_fill>)
                    op = RBLN_FW_PKT_FILL;
                all.add(op, pk);
                each[i].add(op, pk);
            },
            plan.nodes[i].pkt);
    }
    CmdBuf graph;
    graph.add(RBLN_FW_PKT_GRAPH_EXEC, p);
    auto median_wall = [&](auto&& run) {
        std::vector<double> ms;
        for (int r = 0; r < (quick() ? 3 : 15); r++) {
            const auto t0 = Clock::now();
            run();
            ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        return ms[ms.size() / 2];
    };
    const double g_ms = median_wall([&] { ASSERT_EQ(t.status(0, graph), RBLN_FW_JOB_OK); });
    const std::vector<std::byte> y(t.host(kBytes), t.host(kBytes) + kBytes);
    const double one_ms = median_wall([&] { ASSERT_EQ(t.status(0, all), RBLN_FW_JOB_OK); });
    EXPECT_EQ(std::memcmp(t.host(kBytes), y.data(), kBytes), 0);
    const double jobs_ms = median_wall([&] {
        // Each job's buffer at its own 256 bytes: all are queued at once.
        for (unsigned i = 0; i < kNodes; i++) {
            const std::uint64_t off = std::uint64_t{i} * 256;
            each[i].put(t.h.memory(), TestCard::kCmd + off);
            (void)t.h.push_job(0, FakeHost::job(TestCard::kAsid, TestCard::kVaCmd + off,
                                                each[i].size(), RBLN_FW_JOB_IRQ));
        }
        t.h.ring_doorbell();
        for (unsigned i = 0; i < kNodes; i++) {
            const auto cpl = t.h.wait_job_cpl(0);
            ASSERT_TRUE(cpl.has_value());
            ASSERT_EQ(cpl->status, RBLN_FW_JOB_OK);
        }
    });
    std::printf("\n%u nodes, image %zu bytes: validation %.1f us (median; min %.1f), "
                "GRAPH_EXEC job %.3f ms, one job of %u packets %.3f ms, %u jobs %.3f ms\n",
                kNodes, image.size(), us[us.size() / 2], us.front(), g_ms, kNodes, one_ms, kNodes,
                jobs_ms);
}
