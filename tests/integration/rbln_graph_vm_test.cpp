// SPDX-License-Identifier: GPL-2.0
// librbln graphs (rbln/graph.hpp) on the real rbln.ko and the emulated
// card: captured steps replayed as one GRAPH_EXEC job equal the same
// operators run eagerly byte for byte (fp32, bf16, fp16); Definitions are
// uploaded once per content; a new input profile recompiles; a Definition
// larger than the blocks spills once; a bind on one slot while a replay
// runs from the other; LRU eviction; the C ABI; misuse errors.  Runs
// inside the VM (tools/scripts/test-vm.sh), not under host ctest; without
// an rbln card every test skips with a message.
//
//   tools/vm/rbln-vm -q --cards 2 -- build/cmake/tests/integration/rbln_graph_vm_tests

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/explain.hpp"
#include "rbln/graph.hpp"
#include "rbln/ops.hpp"
#include "rbln/rbln_graph.h"
#include "rbln/storage.hpp"

namespace rbln::test {
namespace {

unsigned card_count() {
    static const unsigned n = [] {
        try {
            return Runtime::process().device_count();
        } catch (...) {
            return 0u;
        }
    }();
    return n;
}

#define REQUIRE_CARDS(n)                                                                           \
    do {                                                                                           \
        if (card_count() < (n))                                                                    \
            GTEST_SKIP() << "needs " << (n) << " rbln card(s) (run it in the VM: "                 \
                         << "tools/vm/rbln-vm --cards 2 -- <this binary>)";                        \
    } while (0)

StorageView tensor(unsigned device, std::vector<std::int64_t> sizes, ElementType t) {
    std::uint64_t n = 1;
    for (const auto s : sizes)
        n *= static_cast<std::uint64_t>(s);
    return StorageView::contiguous(Storage::create(device, n * element_size(t), t),
                                   std::move(sizes));
}

/// Finite values of @t (small magnitudes, both signs), as bytes.
std::vector<std::byte> values(std::size_t n, ElementType t, int seed) {
    std::vector<std::byte> out(n * element_size(t));
    for (std::size_t i = 0; i < n; i++) {
        const float f =
            static_cast<float>(static_cast<int>((i * 7 + seed * 13) % 23) - 11) * 0.125F;
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
        if (t == ElementType::Fp32) {
            std::memcpy(out.data() + i * 4, &bits, 4);
        } else if (t == ElementType::Bf16) {
            const auto h = static_cast<std::uint16_t>(bits >> 16); // exact: few mantissa bits
            std::memcpy(out.data() + i * 2, &h, 2);
        } else { // fp16 of the same value (exact: |f| <= 1.375 in steps of 1/8)
            std::uint16_t h = 0;
            if (f != 0.0F) {
                const std::uint32_t e = ((bits >> 23) & 0xffu) - 127 + 15;
                h = static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | (e << 10) |
                                               ((bits >> 13) & 0x3ffu));
            }
            std::memcpy(out.data() + i * 2, &h, 2);
        }
    }
    return out;
}

StorageView input(unsigned device, std::vector<std::int64_t> sizes, ElementType t, int seed) {
    StorageView v = tensor(device, std::move(sizes), t);
    const auto data = values(v.numel(), t, seed);
    ops::from_host(v, data);
    return v;
}

std::vector<std::byte> bytes_of(const StorageView& v) {
    std::vector<std::byte> out(v.storage->nbytes());
    v.storage->read(0, out);
    return out;
}

bool all_zero(const std::vector<std::byte>& b) {
    for (const std::byte x : b)
        if (x != std::byte{0})
            return false;
    return true;
}

// y = relu(x @ w) * scale
StorageView relu_matmul_scale(Stream& s, const StorageView& x, const StorageView& w, float k) {
    const ElementType t = x.storage->element_type();
    const std::int64_t m = x.sizes[0];
    const std::int64_t n = w.sizes[1];
    auto h = tensor(0, {m, n}, t);
    ops::matmul(s, h, x, w);
    auto r = tensor(0, {m, n}, t);
    ops::relu(s, r, h);
    auto y = tensor(0, {m, n}, t);
    ops::scale(s, y, r, k);
    return y;
}

// A graph with fan-out (t0 feeds two nodes) and fan-in (add of both),
// fills, a cast, a copy and a strided copy.
StorageView fan(Stream& s, const StorageView& x, const StorageView& z) {
    const ElementType t = x.storage->element_type();
    auto t0 = tensor(0, x.sizes, t);
    ops::mul(s, t0, x, z);
    auto t1 = tensor(0, x.sizes, t);
    ops::relu(s, t1, t0);
    auto t2 = tensor(0, x.sizes, t);
    ops::scale(s, t2, t0, 3.0F);
    auto t3 = tensor(0, x.sizes, t);
    ops::add(s, t3, t1, t2);
    auto c = tensor(0, x.sizes, ElementType::Fp32);
    ops::fill(s, c, 0.5F);
    auto f = tensor(0, x.sizes, ElementType::Fp32);
    ops::cast(s, f, t3);
    auto g = tensor(0, x.sizes, ElementType::Fp32);
    ops::add(s, g, f, c);
    auto y = tensor(0, x.sizes, ElementType::Fp32);
    ops::copy(s, y, g);
    // A strided copy: columns 1..17 of y into every other row of a block.
    StorageView cols = y;
    cols.offset = 1;
    cols.sizes = {x.sizes[0], 16};
    cols.strides = {x.sizes[1], 1};
    auto wide = tensor(0, {x.sizes[0] * 2, 16}, ElementType::Fp32);
    ops::fill(s, wide, -1.0F);
    StorageView rows = wide;
    rows.sizes = {x.sizes[0], 16};
    rows.strides = {32, 1};
    ops::copy(s, rows, cols);
    auto sum = tensor(0, {x.sizes[0] * 2, 16}, ElementType::Fp32);
    ops::add(s, sum, wide, wide);
    return sum;
}

class VmGraphTypes : public ::testing::TestWithParam<ElementType> {};

TEST_P(VmGraphTypes, ReluOfMatmulTimesScaleReplayedEqualsEagerByteForByte) {
    REQUIRE_CARDS(1u);
    const ElementType t = GetParam();
    auto dev = Device::get(0);
    Stream s = dev->default_stream();
    auto x = input(0, {24, 40}, t, 1);
    auto w = input(0, {40, 16}, t, 2);
    const auto eager = bytes_of(relu_matmul_scale(s, x, w, 0.75F));

    s.begin_capture();
    auto ycap = relu_matmul_scale(s, x, w, 0.75F);
    Graph g = s.end_capture();
    EXPECT_EQ(g.node_count(), 3u);
    ASSERT_EQ(g.output_count(), 1u) << "y lives on: the output; h and r died: intermediates";
    ASSERT_EQ(g.inputs().size(), 2u);
    EXPECT_EQ(g.direction(0), GraphDirection::In);
    const std::uint64_t jobs = s.last_job();
    auto outs = g.replay(s);
    EXPECT_EQ(s.last_job(), jobs + 1) << "one replay is one GRAPH_EXEC job";
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0]->coherence(), Coherence::DeviceLatest);
    const auto replayed = bytes_of(StorageView::whole(outs[0]));
    EXPECT_FALSE(all_zero(eager));
    EXPECT_EQ(replayed, eager);
    // A second replay with new inputs of the same profile.
    auto x2 = input(0, {24, 40}, t, 5);
    const auto eager2 = bytes_of(relu_matmul_scale(s, x2, w, 0.75F));
    const std::shared_ptr<Storage> in2[] = {x2.storage, w.storage};
    auto outs2 = g.replay(s, in2);
    EXPECT_EQ(bytes_of(StorageView::whole(outs2[0])), eager2);
    EXPECT_NE(eager2, eager);
}

TEST_P(VmGraphTypes, FanOutAndFanInReplayedEqualsEagerByteForByte) {
    REQUIRE_CARDS(1u);
    const ElementType t = GetParam();
    auto dev = Device::get(0);
    Stream s(dev);
    auto x = input(0, {8, 33}, t, 3);
    auto z = input(0, {8, 33}, t, 4);
    const auto eager = bytes_of(fan(s, x, z));
    s.begin_capture();
    const StorageView y = fan(s, x, z);
    Graph g = s.end_capture();
    EXPECT_EQ(g.node_count(), 11u);
    auto outs = g.replay(s);
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_FALSE(all_zero(eager));
    EXPECT_EQ(bytes_of(StorageView::whole(outs[0])), eager);
    s.synchronize();
}

// Intermediates that share execution storage once dead (a region reused
// after its last reader), with independent nodes the card may run on
// several chiplets at once.
StorageView mixed(Stream& s, const StorageView& x, const StorageView& z) {
    const ElementType t = x.storage->element_type();
    StorageView v = x;
    for (int i = 0; i < 6; i++) {
        auto a = tensor(0, x.sizes, t);
        ops::relu(s, a, v);
        auto b = tensor(0, x.sizes, t);
        ops::scale(s, b, v, -0.5F);
        auto c = tensor(0, x.sizes, t);
        ops::add(s, c, a, b);
        auto d = tensor(0, x.sizes, t);
        ops::mul(s, d, c, z);
        v = d;
    }
    return v;
}

TEST_P(VmGraphTypes, IntermediatesSharingBytesReplayedEqualEagerByteForByte) {
    REQUIRE_CARDS(1u);
    const ElementType t = GetParam();
    auto dev = Device::get(0);
    Stream s(dev);
    auto x = input(0, {12, 40}, t, 6);
    auto z = input(0, {12, 40}, t, 7);
    const auto eager = bytes_of(mixed(s, x, z));
    s.begin_capture();
    const StorageView y = mixed(s, x, z);
    Graph g = s.end_capture();
    EXPECT_EQ(g.node_count(), 24u);
    const std::uint64_t region = (12 * 40 * element_size(t) + 255) / 256 * 256;
    EXPECT_LT(g.execution_bytes(), 23 * region) << "dead intermediates' bytes are reused";
    for (int i = 0; i < 3; i++) {
        auto outs = g.replay(s);
        EXPECT_EQ(bytes_of(StorageView::whole(outs[0])), eager) << "replay " << i;
    }
    EXPECT_FALSE(all_zero(eager));
}

INSTANTIATE_TEST_SUITE_P(Types, VmGraphTypes,
                         ::testing::Values(ElementType::Fp32, ElementType::Bf16, ElementType::Fp16),
                         [](const auto& info) {
                             return info.param == ElementType::Fp32   ? std::string("fp32")
                                    : info.param == ElementType::Bf16 ? std::string("bf16")
                                                                      : std::string("fp16");
                         });

TEST(VmGraph, TwoGraphsOfTheSameContentUploadOneDefinition) {
    REQUIRE_CARDS(1u);
    auto dev = Device::get(0);
    Stream s = dev->default_stream();
    auto x = input(0, {16, 12}, ElementType::Fp32, 7);
    auto w = input(0, {12, 20}, ElementType::Fp32, 8);
    auto x2 = input(0, {16, 12}, ElementType::Fp32, 9);
    const GraphStats before = graph_stats(*dev);
    s.begin_capture();
    relu_matmul_scale(s, x, w, 1.5F);
    Graph a = s.end_capture();
    s.begin_capture();
    relu_matmul_scale(s, x2, w, 1.5F); // other storages, same content
    Graph b = s.end_capture();
    EXPECT_EQ(a.key(), b.key());
    a.replay(s);
    const GraphStats first = graph_stats(*dev);
    b.replay(s);
    b.replay(s);
    s.synchronize();
    const GraphStats after = graph_stats(*dev);
    EXPECT_EQ(after.allocations, first.allocations) << "no kernel buffer per replay";
    EXPECT_EQ(after.cache_misses - before.cache_misses, 1u);
    EXPECT_EQ(after.cache_hits - before.cache_hits, 1u);
    EXPECT_EQ(after.definitions_uploaded - before.definitions_uploaded, 1u);
    EXPECT_EQ(after.copies - before.copies, 1u) << "one copy for the first bind, 0 after";
    EXPECT_EQ(after.replays - before.replays, 3u);
}

TEST(VmGraph, ANewInputProfileRecompilesAndUploadsANewDefinition) {
    REQUIRE_CARDS(1u);
    auto dev = Device::get(0);
    Stream s = dev->default_stream();
    GraphFunction step([](Stream& st, std::span<const StorageView> in, std::span<const double> k) {
        return std::vector<StorageView>{
            relu_matmul_scale(st, in[0], in[1], static_cast<float>(k[0]))};
    });
    auto w = input(0, {10, 6}, ElementType::Fp32, 1);
    auto x1 = input(0, {4, 10}, ElementType::Fp32, 2);
    auto x2 = input(0, {4, 10}, ElementType::Fp32, 3);
    auto x3 = input(0, {5, 10}, ElementType::Fp32, 4);
    const double k[] = {2.0};
    const GraphStats before = graph_stats(*dev);
    auto region = explain("graph step");
    const StorageView in1[] = {x1, w};
    auto y1 = step(s, in1, k);
    const StorageView in2[] = {x2, w};
    auto y2 = step(s, in2, k);
    const StorageView in3[] = {x3, w};
    auto y3 = step(s, in3, k);
    region.close();
    const auto st = step.stats();
    EXPECT_EQ(st.calls, 3u);
    EXPECT_EQ(st.recompiles, 2u);
    EXPECT_EQ(st.replays, 1u);
    const GraphStats after = graph_stats(*dev);
    EXPECT_EQ(after.cache_misses - before.cache_misses, 2u);
    EXPECT_EQ(after.recompiles - before.recompiles, 2u);
    EXPECT_EQ(after.definitions_uploaded - before.definitions_uploaded, 2u);
    ASSERT_EQ(y3.size(), 1u);
    EXPECT_EQ(y3[0].sizes, (std::vector<std::int64_t>{5, 6}));
    EXPECT_EQ(bytes_of(y1[0]), bytes_of(relu_matmul_scale(s, x1, w, 2.0F)));
    EXPECT_EQ(bytes_of(y2[0]), bytes_of(relu_matmul_scale(s, x2, w, 2.0F)));
    EXPECT_EQ(bytes_of(y3[0]), bytes_of(relu_matmul_scale(s, x3, w, 2.0F)));
    const ExplainCounts c = region.counts();
    EXPECT_EQ(c.graph_replays, 3u);
    EXPECT_EQ(c.graph_recompiles, 2u);
    EXPECT_EQ(c.graph_defs, 2u);
    const std::string report = region.report();
    EXPECT_NE(report.find("graphs: 3 replays, 2 recompiles"), std::string::npos) << report;
    EXPECT_NE(report.find("graph_upload defs=2 bytes="), std::string::npos) << report;
}

// Device 1 gets small blocks and a small cache (before its first replay).
Device& small_cache_device() {
    static const std::shared_ptr<Device> dev = [] {
        auto d = Device::get(1);
        GraphCacheOptions o;
        o.block_bytes = 4096;
        o.capacity = 2;
        set_graph_cache_options(*d, o);
        return d;
    }();
    return *dev;
}

StorageView chain(Stream& s, const StorageView& x, int n, float k) {
    StorageView v = x;
    for (int i = 0; i < n; i++) {
        auto o = StorageView::contiguous(
            Storage::create(1, x.storage->nbytes(), x.storage->element_type()), x.sizes);
        ops::scale(s, o, v, k);
        v = o;
    }
    return v;
}

TEST(VmGraph, ADefinitionLargerThanTheBlocksSpillsOnItsFirstBindOnly) {
    REQUIRE_CARDS(2u);
    Device& dev = small_cache_device();
    Stream s(dev.shared_from_this());
    auto x = StorageView::contiguous(Storage::create(1, 64 * 4, ElementType::Fp32), {64});
    ops::from_host(x, values(64, ElementType::Fp32, 3));
    s.begin_capture();
    const StorageView y = chain(s, x, 24, 1.0F); // 24 nodes: ~6 KiB of node records > 4 KiB blocks
    Graph g = s.end_capture();
    ASSERT_EQ(g.output_count(), 1u);
    ASSERT_GT(g.definition_bytes(), 4096u);
    const GraphStats s0 = graph_stats(dev);
    auto o1 = g.replay(s);
    const GraphStats s1 = graph_stats(dev);
    EXPECT_EQ(s1.spilled - s0.spilled, 1u) << "the first bind spills";
    EXPECT_GT(s1.block_bytes, 4096u) << "and the blocks grow for the next bind";
    auto o2 = g.replay(s);
    auto o3 = g.replay(s);
    s.synchronize();
    const GraphStats s3 = graph_stats(dev);
    EXPECT_EQ(s3.spilled - s1.spilled, 0u) << "no later bind spills";
    EXPECT_EQ(s3.copies - s1.copies, 1u) << "one copy into the grown block, then none";
    const auto want = bytes_of(x);
    EXPECT_EQ(bytes_of(StorageView::whole(o1[0])), want);
    EXPECT_EQ(bytes_of(StorageView::whole(o3[0])), want);
}

TEST(VmGraph, TheLeastRecentlyUsedDefinitionIsEvictedAndComesBackOnReplay) {
    REQUIRE_CARDS(2u);
    Device& dev = small_cache_device();
    Stream s(dev.shared_from_this());
    auto x = StorageView::contiguous(Storage::create(1, 32 * 4, ElementType::Fp32), {32});
    ops::from_host(x, values(32, ElementType::Fp32, 5));
    std::vector<Graph> gs;
    const GraphStats s0 = graph_stats(dev);
    for (const float k : {2.0F, 4.0F, 8.0F}) {
        s.begin_capture();
        const StorageView y = chain(s, x, 1, k);
        gs.push_back(s.end_capture());
        ASSERT_EQ(gs.back().output_count(), 1u);
        gs.back().replay(s);
        s.synchronize();
    }
    const GraphStats s1 = graph_stats(dev);
    EXPECT_GE(s1.cache_evictions - s0.cache_evictions, 1u);
    EXPECT_LE(s1.cache_entries, 2u);
    auto out = gs[0].replay(s); // evicted: entered and uploaded again
    const GraphStats s2 = graph_stats(dev);
    EXPECT_EQ(s2.cache_misses - s1.cache_misses, 1u);
    std::vector<float> got(32);
    out[0]->read(0, std::as_writable_bytes(std::span(got)));
    const auto in = values(32, ElementType::Fp32, 5);
    for (std::size_t i = 0; i < 32; i++) {
        float v = 0;
        std::memcpy(&v, in.data() + i * 4, 4);
        EXPECT_EQ(got[i], v * 2.0F);
    }
}

TEST(VmGraph, ABindOnOneSlotDoesNotWaitForAReplayRunningFromTheOther) {
    REQUIRE_CARDS(1u);
    auto dev = Device::get(0);
    Stream s1(dev);
    Stream s2(dev);
    // A slow graph (eight 128x128x128 matmuls) and another one.
    auto a = input(0, {128, 128}, ElementType::Fp32, 1);
    auto b = input(0, {128, 128}, ElementType::Fp32, 2);
    s1.begin_capture();
    StorageView v = a;
    for (int i = 0; i < 8; i++) {
        auto o = tensor(0, {128, 128}, ElementType::Fp32);
        ops::matmul(s1, o, v, b);
        v = o;
    }
    Graph slow = s1.end_capture();
    auto c = input(0, {16, 16}, ElementType::Fp32, 3);
    auto d = input(0, {16, 16}, ElementType::Fp32, 4);
    s2.begin_capture();
    const StorageView r1 = relu_matmul_scale(s2, c, d, 0.25F);
    const StorageView r2 = relu_matmul_scale(s2, d, c, 0.5F);
    Graph other = s2.end_capture();
    ASSERT_EQ(slow.output_count(), 1u);
    ASSERT_EQ(other.output_count(), 2u);
    // The second graph's inputs on the device now: their uploads are
    // synchronous copies, which would let the first replay finish first.
    c.storage->device_use(s2, DeviceAccess::Read);
    d.storage->device_use(s2, DeviceAccess::Read);
    s2.synchronize();
    const GraphStats g0 = graph_stats(*dev);
    auto o1 = slow.replay(s1);
    auto o2 = other.replay(s2); // must be bound while the slow one runs
    const GraphStats g1 = graph_stats(*dev);
    EXPECT_EQ(g1.bind_waits - g0.bind_waits, 0u);
    EXPECT_EQ(g1.overlapped_binds - g0.overlapped_binds, 1u)
        << "the second bind wrote a slot while the first replay was still running";
    s1.synchronize();
    s2.synchronize();
    EXPECT_FALSE(all_zero(bytes_of(StorageView::whole(o1[0]))));
    EXPECT_EQ(bytes_of(StorageView::whole(o2[0])), bytes_of(relu_matmul_scale(s2, c, d, 0.25F)));
    EXPECT_EQ(bytes_of(StorageView::whole(o2[1])), bytes_of(relu_matmul_scale(s2, d, c, 0.5F)));
}

// The C ABI: capture, replay, graph function, statistics.
rbln_status c_body(void* /*user*/, rbln_stream* stream, const rbln_view* in, size_t n_in,
                   const double* k, size_t n_k, rbln_view* results, size_t* n_results) {
    if (n_in != 1 || n_k != 1 || *n_results < 1)
        return RBLN_ERR_INVALID_ARGUMENT;
    rbln_storage* out = nullptr;
    rbln_status st = rbln_storage_create(0, 16 * 4, RBLN_STORAGE_FP32, &out);
    if (st != RBLN_OK)
        return st;
    rbln_view v{};
    st = rbln_view_contiguous(out, in[0].ndim, in[0].sizes, &v);
    if (st == RBLN_OK)
        st = rbln_op_scale(stream, &v, &in[0], static_cast<float>(k[0]));
    results[0] = v;
    *n_results = 1;
    return st;
}

TEST(VmGraph, TheCAbiCapturesReplaysAndRunsAGraphFunction) {
    REQUIRE_CARDS(1u);
    rbln_stream* s = nullptr;
    ASSERT_EQ(rbln_stream_create(0, &s), RBLN_OK) << rbln_last_error_message();
    rbln_storage* x = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 16 * 4, RBLN_STORAGE_FP32, &x), RBLN_OK);
    float host[16];
    for (int i = 0; i < 16; i++)
        host[i] = static_cast<float>(i - 8);
    ASSERT_EQ(rbln_storage_write(x, 0, host, sizeof(host)), RBLN_OK) << rbln_last_error_message();
    rbln_view vx{};
    ASSERT_EQ(rbln_view_contiguous(x, 0, nullptr, &vx), RBLN_OK);

    ASSERT_EQ(rbln_stream_begin_capture(s), RBLN_OK) << rbln_last_error_message();
    rbln_storage* y = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 16 * 4, RBLN_STORAGE_FP32, &y), RBLN_OK);
    rbln_view vy{};
    ASSERT_EQ(rbln_view_contiguous(y, 0, nullptr, &vy), RBLN_OK);
    ASSERT_EQ(rbln_op_relu(s, &vy, &vx), RBLN_OK) << rbln_last_error_message();
    rbln_graph* g = nullptr;
    ASSERT_EQ(rbln_stream_end_capture(s, &g), RBLN_OK) << rbln_last_error_message();
    size_t nodes = 0;
    size_t ins = 0;
    size_t outs = 0;
    ASSERT_EQ(rbln_graph_info(g, &nodes, &ins, &outs), RBLN_OK);
    EXPECT_EQ(nodes, 1u);
    EXPECT_EQ(ins, 1u);
    EXPECT_EQ(outs, 1u);
    rbln_storage* out = nullptr;
    ASSERT_EQ(rbln_graph_replay(g, s, nullptr, 0, &out, 1), RBLN_OK) << rbln_last_error_message();
    float got[16];
    ASSERT_EQ(rbln_storage_read(out, 0, got, sizeof(got)), RBLN_OK) << rbln_last_error_message();
    for (int i = 0; i < 16; i++)
        EXPECT_EQ(got[i], host[i] > 0 ? host[i] : 0.0F);
    EXPECT_EQ(rbln_graph_replay(g, s, nullptr, 0, &out, 2), RBLN_ERR_INVALID_ARGUMENT);

    rbln_graph_fn* fn = nullptr;
    ASSERT_EQ(rbln_graph_fn_create(c_body, nullptr, &fn), RBLN_OK);
    const double k[] = {3.0};
    rbln_view res[2];
    size_t n = 2;
    ASSERT_EQ(rbln_graph_fn_call(fn, s, &vx, 1, k, 1, res, &n), RBLN_OK)
        << rbln_last_error_message();
    ASSERT_EQ(n, 1u);
    n = 2;
    rbln_view res2[2];
    ASSERT_EQ(rbln_graph_fn_call(fn, s, &vx, 1, k, 1, res2, &n), RBLN_OK)
        << rbln_last_error_message();
    ASSERT_EQ(rbln_storage_read(res2[0].storage, 0, got, sizeof(got)), RBLN_OK);
    for (int i = 0; i < 16; i++)
        EXPECT_EQ(got[i], host[i] * 3.0F);
    struct rbln_graph_fn_stats fs {};
    fs.struct_size = sizeof(fs);
    ASSERT_EQ(rbln_graph_fn_stats(fn, &fs), RBLN_OK);
    EXPECT_EQ(fs.calls, 2u);
    EXPECT_EQ(fs.recompiles, 1u);
    EXPECT_EQ(fs.replays, 1u);
    struct rbln_graph_stats gs {};
    gs.struct_size = sizeof(gs);
    ASSERT_EQ(rbln_graph_stats(0, &gs), RBLN_OK);
    EXPECT_GE(gs.replays, 3u);

    rbln_storage_destroy(res[0].storage);
    rbln_storage_destroy(res2[0].storage);
    rbln_graph_fn_destroy(fn);
    rbln_storage_destroy(out);
    rbln_graph_destroy(g);
    rbln_storage_destroy(y);
    rbln_storage_destroy(x);
    rbln_stream_destroy(s);
}

TEST(VmGraph, MisuseIsATypedErrorSayingWhatToDo) {
    REQUIRE_CARDS(1u);
    auto dev = Device::get(0);
    Stream s(dev);
    Stream other(dev);
    auto x = input(0, {4, 4}, ElementType::Fp32, 1);
    s.begin_capture();
    EXPECT_THROW(s.begin_capture(), Error);
    auto h = tensor(0, {4, 4}, ElementType::Fp32);
    ops::relu(s, h, x);
    try {
        ops::relu(other, x, h); // another stream uses a capture-made storage
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("another stream"), std::string::npos) << e.what();
    }
    std::vector<std::byte> buf(64);
    EXPECT_THROW(h.storage->read(0, buf), Error) << "a capture-made storage holds no data";
    EXPECT_THROW(s.fill(x.storage->device_use(other, DeviceAccess::Read), 0, 4, 0, 1), Error)
        << "low-level work on a capturing stream";
    Graph g = s.end_capture();
    EXPECT_THROW(s.end_capture(), Error);
    auto wrong = input(0, {4, 8}, ElementType::Fp32, 2);
    const std::shared_ptr<Storage> bad[] = {wrong.storage};
    try {
        g.replay(s, bad);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("new profile"), std::string::npos) << e.what();
    }
    other.synchronize();
}

} // namespace
} // namespace rbln::test
