// SPDX-License-Identifier: GPL-2.0
// rbln/graph.hpp on a FakeKernel device: what a capture records (nodes,
// dependencies, boundary directions, the content key), that every
// Definition librbln builds in place in a slot's staging and ships with the
// replay's COPY passes the card's own validator (rbln-emu's check_graph,
// run by the fake on each GRAPH_EXEC it sees, on the bytes the COPY put in
// the device block), and the cost model: one job per replay, one
// caching-allocator block per replay counted in the statistics, and a cold
// replay that allocates and clears nothing a steady one does not.  Results
// of the card are checked in the VM (tests/integration/rbln_graph_vm_test.cpp).

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph.h" // rbln-emu's validator
#include "graph/capture.hpp"
#include "graph/executable.hpp"
#include "ops_card.hpp"
#include "rbln/error.hpp"
#include "rbln/graph.hpp"
#include "rbln/ops.hpp"

namespace rbln::test::graph_test {
namespace {

/// OpsCard whose fake validates every GRAPH_EXEC with rbln-emu's checks.
struct GraphCard : OpsCard {
    GraphCard() {
        k->graph_exec = [this](FakeKernel& fk, const rbln_fw_pkt_graph_exec& p) {
            return validate(fk, p);
        };
    }

    int validate(FakeKernel& fk, const rbln_fw_pkt_graph_exec& p) {
        last_error.reset();
        if (auto e = emu::check_graph_packet(p)) {
            last_error = *e;
            return -EINVAL;
        }
        const std::byte* o = fk.translate(p.definition, sizeof(rbln_fw_graph_obj));
        if (o == nullptr)
            return -EFAULT;
        rbln_fw_graph_obj obj{};
        std::memcpy(&obj, o, sizeof(obj));
        if (auto e = emu::check_graph_object(obj)) {
            last_error = *e;
            return -EINVAL;
        }
        const std::byte* img = fk.translate(p.definition + sizeof(obj), obj.definition_bytes);
        const std::size_t table = p.boundary_count * sizeof(rbln_fw_graph_binding);
        const std::byte* tab = table == 0 ? nullptr : fk.translate(p.boundaries, table);
        if (img == nullptr || (table != 0 && tab == nullptr))
            return -EFAULT;
        if (auto e = emu::check_graph(p, obj, std::span(img, obj.definition_bytes),
                                      std::span(tab, table), plan)) {
            last_error = *e;
            return -EINVAL;
        }
        accepted++;
        return 0;
    }

    StorageView view(std::vector<std::int64_t> sizes, ElementType t = ElementType::Fp32) {
        std::uint64_t n = element_size(t);
        for (const auto s : sizes)
            n *= static_cast<std::uint64_t>(s);
        return StorageView::contiguous(lazy(n, t), std::move(sizes));
    }

    std::optional<emu::GraphError> last_error;
    emu::GraphPlan plan;
    int accepted = 0;
};

StorageView step(Stream& s, GraphCard& c, const StorageView& x, const StorageView& w, float k) {
    auto h = c.view({x.sizes[0], w.sizes[1]});
    ops::matmul(s, h, x, w);
    auto r = c.view(h.sizes);
    ops::relu(s, r, h);
    auto y = c.view(h.sizes);
    ops::scale(s, y, r, k);
    return y;
}

TEST(Graph, ACaptureRecordsWithoutRunningAndItsReplayPassesTheCardsValidator) {
    GraphCard c;
    Stream& s = *c.stream;
    auto x = c.view({4, 8});
    auto w = c.view({8, 3});
    const int submits = c.k->count(KernelOp::Submit);
    s.begin_capture();
    EXPECT_TRUE(s.capturing());
    auto y = step(s, c, x, w, 0.5F);
    Graph g = s.end_capture();
    EXPECT_FALSE(s.capturing());
    EXPECT_EQ(c.k->count(KernelOp::Submit), submits) << "a capture runs nothing";
    EXPECT_FALSE(x.storage->resident()) << "nor gives any storage memory";
    EXPECT_FALSE(y.storage->resident());
    EXPECT_EQ(g.node_count(), 3u);
    EXPECT_EQ(g.output_count(), 1u);
    EXPECT_EQ(g.execution_bytes(), 3u * 256u)
        << "y (the output, 48 B) first, then the intermediates h and r (48 B each), each at a "
           "256-byte aligned offset";
    ASSERT_EQ(g.inputs().size(), 2u);
    EXPECT_EQ(g.inputs()[0], x.storage);
    EXPECT_EQ(g.inputs()[1], w.storage);

    auto outs = g.replay(s);
    s.synchronize();
    EXPECT_EQ(c.k->graph_execs, 1u);
    EXPECT_EQ(c.accepted, 1) << (c.last_error ? c.last_error->why : "");
    EXPECT_EQ(c.plan.level_begin.size(), 4u) << "three levels: a chain";
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0]->nbytes(), y.storage->nbytes());
    EXPECT_EQ(outs[0]->coherence(), Coherence::DeviceLatest);
}

TEST(Graph, FanOutAndFanInBecomeEdgesAndLevels) {
    GraphCard c;
    Stream& s = *c.stream;
    auto x = c.view({16});
    s.begin_capture();
    auto t0 = c.view({16});
    ops::relu(s, t0, x); // 0
    auto t1 = c.view({16});
    ops::scale(s, t1, t0, 2.0F); // 1 <- 0
    auto t2 = c.view({16});
    ops::scale(s, t2, t0, 3.0F); // 2 <- 0
    auto y = c.view({16});
    ops::add(s, y, t1, t2); // 3 <- 1, 2
    auto z = c.view({16});
    ops::fill(s, z, 1.0F); // 4: a root
    t0 = t1 = t2 = StorageView{};
    Graph g = s.end_capture();
    const auto& def = *g.state()->def;
    EXPECT_EQ(def.rows, (std::vector<std::uint32_t>{0, 0, 1, 2, 4, 4}));
    EXPECT_EQ(def.prods, (std::vector<std::uint16_t>{0, 0, 1, 2}));
    EXPECT_EQ(def.roots, (std::vector<std::uint16_t>{0, 4}));
    EXPECT_EQ(g.output_count(), 2u) << "y and z";
    g.replay(s);
    s.synchronize();
    EXPECT_EQ(c.accepted, 1) << (c.last_error ? c.last_error->why : "");
    // Levels: {0, 4}, {1, 2}, {3}.
    EXPECT_EQ(c.plan.level_begin, (std::vector<std::uint32_t>{0, 2, 4, 5}));
}

TEST(Graph, ADeadIntermediatesBytesAreReusedAfterItsLastReader) {
    GraphCard c;
    Stream& s = *c.stream;
    auto x = c.view({64}); // 256 B
    s.begin_capture();
    StorageView v = x;
    for (int i = 0; i < 4; i++) { // a, b, c, y: a chain
        auto o = c.view({64});
        ops::scale(s, o, v, 2.0F);
        v = o;
    }
    Graph g = s.end_capture();
    // y (the output), then a and b; c (written by node 2) takes a's bytes,
    // dead after node 1 read it.
    EXPECT_EQ(g.execution_bytes(), 3u * 256u);
    const auto& def = *g.state()->def;
    EXPECT_EQ(def.nodes[2].reloc[2].offset, def.nodes[0].reloc[2].offset) << "c reuses a";
    // Node 2 writes a's old bytes: after node 0 (a's writer) and node 1
    // (its reader); node 3 after node 2.
    EXPECT_EQ(def.rows, (std::vector<std::uint32_t>{0, 0, 1, 3, 4}));
    EXPECT_EQ(def.prods, (std::vector<std::uint16_t>{0, 0, 1, 2}));
    g.replay(s);
    s.synchronize();
    EXPECT_EQ(c.accepted, 1) << (c.last_error ? c.last_error->why : "");
}

TEST(Graph, AStridedCopyRunsAsOneCopyStridedEagerlyAndIsRecordedAsOne) {
    GraphCard c;
    Stream& s = *c.stream;
    auto src = c.view({6, 10});
    std::vector<float> host(60);
    for (std::size_t i = 0; i < host.size(); i++)
        host[i] = static_cast<float>(i);
    ops::from_host(src, std::as_bytes(std::span(host)));
    // Columns 2..6 of src into a [6, 4] tensor.
    StorageView block = src;
    block.offset = 2;
    block.sizes = {6, 4};
    block.strides = {10, 1};
    auto dst = c.view({6, 4});
    ops::copy(s, dst, block);
    std::vector<float> got(24);
    ops::to_host(dst, std::as_writable_bytes(std::span(got)));
    for (std::size_t r = 0; r < 6; r++)
        for (std::size_t k = 0; k < 4; k++)
            EXPECT_EQ(got[r * 4 + k], host[r * 10 + 2 + k]);

    s.begin_capture();
    auto out = c.view({6, 4});
    ops::copy(s, out, block);
    Graph g = s.end_capture();
    const auto& def = *g.state()->def;
    ASSERT_EQ(def.nodes.size(), 1u);
    EXPECT_EQ(def.nodes[0].op, static_cast<std::uint32_t>(RBLN_FW_PKT_COPY_STRIDED));
    EXPECT_EQ(def.nodes[0].reloc[0].offset, 8u) << "src: 2 elements into its storage";
    EXPECT_EQ(def.nodes[0].pkt.copy_strided.src_pitch, 40u);
    EXPECT_EQ(def.nodes[0].pkt.copy_strided.width, 16u);
    g.replay(s);
    s.synchronize();
    EXPECT_EQ(c.accepted, 1) << (c.last_error ? c.last_error->why : "");
    // A gather it cannot do is refused with what to use instead.
    StorageView transposed = src;
    transposed.sizes = {10, 6};
    transposed.strides = {1, 10};
    auto t = c.view({10, 6});
    try {
        ops::copy(s, t, transposed);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("use cast"), std::string::npos) << e.what();
    }
}

TEST(Graph, BoundaryTensorsAreInOutOrInOutByUse) {
    GraphCard c;
    Stream& s = *c.stream;
    auto a = c.view({8});
    auto out = c.view({8});
    auto acc = c.view({8});
    s.begin_capture();
    ops::relu(s, out, a);     // out: overwritten whole, never read first
    ops::add(s, acc, acc, a); // acc: read and written
    Graph g = s.end_capture();
    ASSERT_EQ(g.inputs().size(), 3u);
    EXPECT_EQ(g.direction(0), GraphDirection::In);
    EXPECT_EQ(g.direction(1), GraphDirection::Out);
    EXPECT_EQ(g.direction(2), GraphDirection::InOut);
    EXPECT_EQ(g.output_count(), 0u);
    g.replay(s);
    s.synchronize();
    EXPECT_EQ(c.accepted, 1) << (c.last_error ? c.last_error->why : "");
    EXPECT_EQ(out.storage->coherence(), Coherence::DeviceLatest);
    EXPECT_EQ(acc.storage->coherence(), Coherence::DeviceLatest);
}

TEST(Graph, TheContentKeyFollowsShapesAndScalarsNotStorages) {
    GraphCard c;
    Stream& s = *c.stream;
    auto capture = [&](const StorageView& x, const StorageView& w, float k) {
        s.begin_capture();
        auto y = step(s, c, x, w, k);
        return s.end_capture();
    };
    auto x = c.view({4, 8});
    auto x2 = c.view({4, 8});
    auto x3 = c.view({5, 8});
    auto w = c.view({8, 3});
    const Graph a = capture(x, w, 0.5F);
    const Graph b = capture(x2, w, 0.5F);
    const Graph d = capture(x, w, 0.25F);
    const Graph e = capture(x3, w, 0.5F);
    EXPECT_EQ(a.key(), b.key());
    EXPECT_EQ(a.state()->def, b.state()->def) << "one Definition, shared";
    EXPECT_NE(a.key(), d.key());
    EXPECT_NE(a.key(), e.key());
    const GraphStats st = graph_stats(*c.dev);
    EXPECT_EQ(st.cache_misses, 3u);
    EXPECT_EQ(st.cache_hits, 1u);
    EXPECT_EQ(st.captures, 4u);
}

TEST(Graph, AGraphFunctionKeepsNoneOfItsCallsInputsAlive) {
    GraphCard c;
    Stream& s = *c.stream;
    auto w = c.view({8, 3}); // captured by the body itself: the graph holds it
    GraphFunction f([&c, w](Stream& st, std::span<const StorageView> in, std::span<const double>) {
        return std::vector<StorageView>{step(st, c, in[0], w, 2.0F)};
    });
    std::weak_ptr<Storage> first;
    {
        auto x = c.view({4, 8});
        first = x.storage;
        const StorageView in[] = {x};
        auto y = f(s, in);
        s.synchronize();
        ASSERT_EQ(y.size(), 1u);
    }
    EXPECT_TRUE(first.expired()) << "the compiled graph keeps the first call's input alive";
    auto x2 = c.view({4, 8});
    const StorageView in2[] = {x2};
    auto y2 = f(s, in2);
    s.synchronize();
    EXPECT_EQ(f.stats().replays, 1u);
    EXPECT_EQ(c.accepted, 2) << (c.last_error ? c.last_error->why : "");
    Graph g = f.graph_for(in2);
    ASSERT_TRUE(g.valid());
    ASSERT_EQ(g.inputs().size(), 2u);
    EXPECT_EQ(g.inputs()[0], nullptr);
    EXPECT_EQ(g.inputs()[1], w.storage);
    try {
        g.replay(s);
        ADD_FAILURE() << "a replay without the call's input ran";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("replay it with inputs"), std::string::npos)
            << e.what();
    }
    const std::shared_ptr<Storage> bound[] = {x2.storage, w.storage};
    EXPECT_EQ(g.replay(s, bound).size(), 1u);
    s.synchronize();
    EXPECT_EQ(c.accepted, 3);
}

TEST(Graph, AReplayIsOneJobAndOneAllocatorBlockCountedInTheStatistics) {
    GraphCard c;
    Stream& s = *c.stream;
    auto x = c.view({4, 8});
    auto w = c.view({8, 3});
    s.begin_capture();
    auto y = step(s, c, x, w, 2.0F);
    Graph g = s.end_capture();
    g.replay(s); // warm: blocks, uploads of x and w
    s.synchronize();
    DeviceAllocator& alloc = c.dev->allocator();
    const auto before = alloc.stats();
    const int submits = c.k->count(KernelOp::Submit);
    const GraphStats g0 = graph_stats(*c.dev);
    auto outs = g.replay(s);
    s.synchronize();
    EXPECT_EQ(c.k->count(KernelOp::Submit) - submits, 1) << "one GRAPH_EXEC job";
    const auto during = alloc.stats();
    EXPECT_EQ(during.allocation[0].current - before.allocation[0].current, 1)
        << "outputs and intermediates in one block";
    EXPECT_GE(during.allocated_bytes[0].current - before.allocated_bytes[0].current,
              static_cast<std::int64_t>(g.execution_bytes()));
    const GraphStats g1 = graph_stats(*c.dev);
    EXPECT_EQ(g1.copies - g0.copies, 0u) << "the slot holds the Definition: nothing to ship";
    EXPECT_EQ(g1.allocations - g0.allocations, 0u);
    outs.clear();
    s.synchronize();
    EXPECT_EQ(alloc.stats().allocation[0].current, before.allocation[0].current)
        << "freed to the cache when the outputs and the job are gone";
}

TEST(Graph, AColdReplayAllocatesAndClearsNothingASteadyOneDoesNot) {
    GraphCard c;
    Stream& s = *c.stream;
    auto x = c.view({4, 8});
    auto w = c.view({8, 3});
    s.begin_capture();
    auto y1 = step(s, c, x, w, 2.0F);
    Graph warm = s.end_capture();
    warm.replay(s); // the process's first bind: the slot's blocks
    s.synchronize();
    s.begin_capture();
    auto y2 = step(s, c, x, w, 3.0F);
    Graph g = s.end_capture();
    const GraphStats g0 = graph_stats(*c.dev);
    const auto a0 = c.dev->allocator().stats();
    const int bo0 = c.k->count(KernelOp::BoCreate);
    g.replay(s); // cold: a new Definition
    s.synchronize();
    const GraphStats g1 = graph_stats(*c.dev);
    const int bo1 = c.k->count(KernelOp::BoCreate);
    g.replay(s); // steady
    s.synchronize();
    const GraphStats g2 = graph_stats(*c.dev);
    EXPECT_EQ(g1.copies - g0.copies, 1u) << "cold: the one copy of its bind";
    EXPECT_EQ(g2.copies - g1.copies, 0u) << "steady: none";
    EXPECT_EQ(g1.allocations - g0.allocations, 0u);
    EXPECT_EQ(g2.allocations - g1.allocations, 0u);
    EXPECT_EQ(bo1, bo0) << "no kernel buffer for the cold replay";
    EXPECT_EQ(c.k->count(KernelOp::BoCreate), bo1);
    EXPECT_EQ(c.dev->allocator().stats().segment[0].current, a0.segment[0].current);
    EXPECT_EQ(g1.spilled, 0u);
}

TEST(Graph, MisuseDuringACaptureIsRefusedWithWhatToDo) {
    GraphCard c;
    Stream& s = *c.stream;
    Stream other(c.dev);
    auto x = c.view({8});
    EXPECT_THROW(s.end_capture(), Error) << "no capture";
    s.begin_capture();
    auto h = c.view({8});
    ops::relu(s, h, x);
    try {
        ops::scale(other, x, h, 2.0F);
        ADD_FAILURE() << "an op of another stream used a capture-made storage";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("end_capture()"), std::string::npos) << e.what();
    }
    const std::byte data[4]{};
    EXPECT_THROW(h.storage->write(0, data), Error);
    auto u8 = c.lazy(8, ElementType::U8);
    EXPECT_THROW(ops::copy(s, StorageView::whole(u8), StorageView::whole(u8)), Error)
        << "U8 storages have no graph signature";
    Graph g = s.end_capture();
    // The low-level replay refuses another profile.
    auto bigger = c.view({16});
    const std::shared_ptr<Storage> in[] = {bigger.storage};
    try {
        g.replay(s, in);
        ADD_FAILURE() << "a replay with another profile";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("input 0 is a 64-byte fp32 storage"),
                  std::string::npos)
            << e.what();
    }
    s.begin_capture();
    EXPECT_THROW(s.end_capture(), Error) << "nothing recorded";
    EXPECT_FALSE(s.capturing()) << "and the capture is closed";
}

Graph capture_scale(GraphCard& c, const StorageView& x, float k) {
    Stream& s = *c.stream;
    s.begin_capture();
    auto y = c.view(x.sizes);
    ops::scale(s, y, x, k);
    return s.end_capture();
}

TEST(Graph, ADefinitionAnUnfinishedReplayUsesIsNotEvicted) {
    GraphCard c;
    GraphCacheOptions o;
    o.capacity = 1;
    set_graph_cache_options(*c.dev, o);
    auto x = c.view({8});
    x.storage->commit();
    Graph a = capture_scale(c, x, 2.0F);
    c.k->hold_jobs = true;
    auto outs = a.replay(*c.stream);
    c.dev->flush();
    ASSERT_EQ(c.k->pending_jobs(), 1u);
    Graph b = capture_scale(c, x, 3.0F); // the cache is full, but a's replay runs
    GraphStats st = graph_stats(*c.dev);
    EXPECT_EQ(st.cache_evictions, 0u);
    EXPECT_EQ(st.cache_entries, 2u) << "over capacity until the replay is done";
    c.k->complete_jobs();
    c.k->hold_jobs = false;
    c.stream->synchronize();
    Graph d = capture_scale(c, x, 4.0F);
    st = graph_stats(*c.dev);
    EXPECT_EQ(st.cache_evictions, 2u) << "a and b, least recently used first";
    EXPECT_EQ(st.cache_entries, 1u);
    a.replay(*c.stream); // evicted: entered again, built and uploaded again
    c.stream->synchronize();
    EXPECT_EQ(graph_stats(*c.dev).cache_misses, 4u);
    EXPECT_EQ(c.accepted, 2) << (c.last_error ? c.last_error->why : "");
}

TEST(Graph, ABindTakesASlotNoUnfinishedReplayReadsAndWaitsOnlyWhenThereIsNone) {
    GraphCard c;
    auto x = c.view({8});
    x.storage->commit();
    Graph a = capture_scale(c, x, 2.0F);
    Graph b = capture_scale(c, x, 3.0F);
    Graph d = capture_scale(c, x, 4.0F);
    c.k->hold_jobs = true;
    auto oa = a.replay(*c.stream);
    c.dev->flush();
    auto ob = b.replay(*c.stream); // a's slot is in flight: the other one
    c.dev->flush();
    GraphStats st = graph_stats(*c.dev);
    EXPECT_EQ(st.overlapped_binds, 1u);
    EXPECT_EQ(st.bind_waits, 0u);
    EXPECT_EQ(c.k->pending_jobs(), 2u);
    auto oa2 = a.replay(*c.stream); // a's slot holds it: reads only, no wait
    EXPECT_EQ(graph_stats(*c.dev).bind_waits, 0u);
    EXPECT_EQ(graph_stats(*c.dev).copies, 2u);
    auto od = d.replay(*c.stream); // both slots' staging still read: a wait
    st = graph_stats(*c.dev);
    EXPECT_EQ(st.bind_waits, 1u);
    c.k->hold_jobs = false;
    c.k->complete_jobs();
    c.stream->synchronize();
    EXPECT_EQ(c.accepted, 4) << (c.last_error ? c.last_error->why : "");
}

TEST(Graph, GraphCacheOptionsAreCheckedAndFixedAtTheFirstReplay) {
    GraphCard c;
    GraphCacheOptions o;
    o.slots = 1;
    EXPECT_THROW(set_graph_cache_options(*c.dev, o), Error);
    o.slots = 3;
    set_graph_cache_options(*c.dev, o);
    Stream& s = *c.stream;
    auto x = c.view({8});
    s.begin_capture();
    auto y = c.view({8});
    ops::relu(s, y, x);
    Graph g = s.end_capture();
    g.replay(s);
    s.synchronize();
    EXPECT_THROW(set_graph_cache_options(*c.dev, o), Error);
}

} // namespace
} // namespace rbln::test::graph_test
