// SPDX-License-Identifier: GPL-2.0
// GRAPH_EXEC on the emulated card (rbln_fw_graph.md): every refusal of the
// validator with its documented code and argument, the card usable after
// it; graphs computing exactly what the same packets compute as eager
// jobs, byte for byte, in fp32, bf16 and fp16; levels spread over the
// chiplets of a Rebel100 card, counted where they ran.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "control.h"
#include "control_reply.h"
#include "fp.h"
#include "graph_builder.h"
#include "ring_fixture.h"
#include "simd.h"

namespace rbln::emu::test {
namespace {

// Host data of ASID 1 (TestCard::kVaHost + offset).
constexpr std::uint64_t kDef = 0x100000;   // Definition objects
constexpr std::uint64_t kTable = 0x1c0000; // boundary table
constexpr std::uint64_t kX = 0x200000;     // boundary tensors, 1 MiB apart
constexpr std::uint64_t kW = 0x300000;
constexpr std::uint64_t kY = 0x400000;
constexpr std::uint64_t kY2 = 0x500000;
constexpr std::uint64_t kEager = 0x800000; // the eager run's intermediates
constexpr std::uint64_t kExecBytes = 0x100000;
constexpr std::uint64_t kKey = 0x5eed'0000'0000'0001ULL;
constexpr std::byte kPoison{0xa5};

std::uint64_t va(std::uint64_t off) {
    return TestCard::kVaHost + off;
}
// The graph's execution storage: chiplet 1's HBM.
const std::uint64_t kExecVa = TestCard::hbm_va(1, 0x100000);

std::size_t es(std::uint32_t dt) {
    return simd::elem_size(dt);
}

const char* dt_name(std::uint32_t dt) {
    return dt == RBLN_FW_DT_FP32 ? "fp32" : dt == RBLN_FW_DT_FP16 ? "fp16" : "bf16";
}

// Contiguous elementwise LAUNCH over `shape` (addresses left zero).
rbln_fw_pkt_launch ew(std::uint32_t kernel, std::uint32_t dt,
                      std::initializer_list<std::uint64_t> shape, float scale = 0) {
    rbln_fw_pkt_launch l{};
    l.kernel = kernel;
    l.dtype_in = dt;
    l.dtype_out = dt;
    l.ndim = static_cast<std::uint32_t>(shape.size());
    unsigned d = 0;
    for (std::uint64_t s : shape)
        l.shape[d++] = s;
    std::int64_t n = 1;
    const bool two = kernel == RBLN_FW_KERNEL_ADD || kernel == RBLN_FW_KERNEL_MUL;
    for (unsigned i = l.ndim; i-- > 0;) {
        l.stride_a[i] = n;
        l.stride_b[i] = two ? n : 0;
        l.stride_out[i] = n;
        n *= static_cast<std::int64_t>(l.shape[i]);
    }
    if (kernel == RBLN_FW_KERNEL_SCALE)
        l.scale = std::bit_cast<std::uint32_t>(scale);
    return l;
}

rbln_fw_pkt_launch mm(std::uint32_t dt, std::uint64_t m, std::uint64_t n, std::uint64_t k) {
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = dt;
    l.dtype_out = dt;
    l.ndim = 2;
    l.shape[0] = m;
    l.shape[1] = n;
    l.shape[2] = k;
    l.stride_a[0] = static_cast<std::int64_t>(k);
    l.stride_a[1] = 1;
    l.stride_b[0] = static_cast<std::int64_t>(n);
    l.stride_b[1] = 1;
    l.stride_out[0] = static_cast<std::int64_t>(n);
    l.stride_out[1] = 1;
    return l;
}

rbln_fw_pkt_launch at(rbln_fw_pkt_launch l, std::uint64_t a, std::uint64_t b, std::uint64_t out) {
    l.a = a;
    l.b = b;
    l.out = out;
    return l;
}

// What a job that never completed reads as.
rbln_fw_job_cpl no_cpl() {
    rbln_fw_job_cpl c{};
    c.status = 0xdead;
    return c;
}

class GraphCard : public ::testing::Test {
protected:
    GraphCard() { t.h.card.set_graph_spread_bytes(0); }

    // n random values of dt, moderate magnitudes (negative ones included:
    // RELU has work to do).
    void random_fill(std::uint64_t off, std::uint32_t dt, std::uint64_t n, unsigned seed) {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> dist(-2.0F, 2.0F);
        for (std::uint64_t i = 0; i < n; i++) {
            const float f = dist(rng);
            std::byte* p = t.host(off + i * es(dt));
            if (dt == RBLN_FW_DT_FP32) {
                std::memcpy(p, &f, 4);
            } else {
                const std::uint16_t h =
                    dt == RBLN_FW_DT_FP16 ? fp::f32_to_f16(f) : fp::f32_to_bf16(f);
                std::memcpy(p, &h, 2);
            }
        }
    }
    void poison(std::uint64_t off, std::uint64_t n) { std::memset(t.host(off), 0xa5, n); }
    std::vector<std::byte> bytes(std::uint64_t off, std::uint64_t n) {
        return {t.host(off), t.host(off) + n};
    }
    bool poisoned(std::uint64_t off, std::uint64_t n) {
        return std::all_of(t.host(off), t.host(off) + n, [](std::byte b) { return b == kPoison; });
    }

    // Runs GRAPH_EXEC of `obj` (at kDef) with `table` (at kTable) on `ring`.
    rbln_fw_job_cpl run_graph(const std::vector<std::byte>& obj,
                              const std::vector<rbln_fw_graph_binding>& table,
                              rbln_fw_pkt_graph_exec p, unsigned ring = 0) {
        std::memcpy(t.host(kDef), obj.data(), obj.size());
        if (!table.empty())
            std::memcpy(t.host(kTable), table.data(), table.size() * sizeof(table[0]));
        CmdBuf cb;
        cb.raw(&p, sizeof(p));
        const auto cpl = t.run(ring, cb);
        return cpl ? *cpl : no_cpl();
    }
    rbln_fw_pkt_graph_exec packet(const GraphBuilder& g, std::uint32_t flags = 0) {
        return graph_exec(va(kDef), va(kTable), g.boundary_count(), kExecVa, kExecBytes, flags);
    }

    TestCard t;
};

// --- y = relu(x @ w) * scale -------------------------------------------------------

constexpr std::uint64_t kM = 24;
constexpr std::uint64_t kK = 40;
constexpr std::uint64_t kN = 32;
constexpr float kScale = 0.75F;

// Boundaries x (IN), w (IN), y (OUT); nodes matmul -> relu -> scale with
// the intermediates in execution storage.
GraphBuilder step_graph(std::uint32_t dt) {
    GraphBuilder g;
    g.boundary(dense(dt, {kM, kK}, RBLN_FW_GRAPH_IN, es(dt)));
    g.boundary(dense(dt, {kK, kN}, RBLN_FW_GRAPH_IN, es(dt)));
    g.boundary(dense(dt, {kM, kN}, RBLN_FW_GRAPH_OUT, es(dt)));
    const std::uint64_t t1 = 0;
    const std::uint64_t t2 = 0x10000;
    g.exec_bytes(0x20000);
    g.launch(mm(dt, kM, kN, kK), bnd(0), bnd(1), exec_at(t1));
    g.launch(ew(RBLN_FW_KERNEL_RELU, dt, {kM, kN}), exec_at(t1), none(), exec_at(t2), {0});
    g.launch(ew(RBLN_FW_KERNEL_SCALE, dt, {kM, kN}, kScale), exec_at(t2), none(), bnd(2), {1});
    return g;
}

class GraphStep : public GraphCard, public ::testing::WithParamInterface<std::uint32_t> {
protected:
    std::uint32_t dt() const { return GetParam(); }
    std::uint64_t y_bytes() const { return kM * kN * es(dt()); }

    void inputs() {
        random_fill(kX, dt(), kM * kK, 1);
        random_fill(kW, dt(), kK * kN, 2);
    }

    // The same three operators as three eager jobs: y's bytes.
    std::vector<std::byte> eager() {
        poison(kY, y_bytes());
        const std::uint64_t t1 = va(kEager);
        const std::uint64_t t2 = va(kEager + 0x10000);
        for (const rbln_fw_pkt_launch& l :
             {at(mm(dt(), kM, kN, kK), va(kX), va(kW), t1),
              at(ew(RBLN_FW_KERNEL_RELU, dt(), {kM, kN}), t1, 0, t2),
              at(ew(RBLN_FW_KERNEL_SCALE, dt(), {kM, kN}, kScale), t2, 0, va(kY))}) {
            CmdBuf cb;
            cb.launch(l);
            EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
        }
        return bytes(kY, y_bytes());
    }

    rbln_fw_job_cpl graph(const GraphBuilder& g, unsigned ring = 0, std::uint32_t flags = 0) {
        poison(kY, y_bytes());
        return run_graph(g.object(kKey), g.bindings({va(kX), va(kW), va(kY)}), packet(g, flags),
                         ring);
    }
};

TEST_P(GraphStep, ReluOfMatmulTimesScaleEqualsTheEagerPacketsByteForByte) {
    inputs();
    const std::vector<std::byte> want = eager();
    const GraphBuilder g = step_graph(dt());
    const rbln_fw_job_cpl cpl = graph(g);
    ASSERT_EQ(cpl.status, RBLN_FW_JOB_OK) << "detail " << cpl.detail << " arg " << cpl.detail_arg;
    EXPECT_EQ(cpl.detail, 0U);
    EXPECT_EQ(bytes(kY, y_bytes()), want) << dt_name(dt());
    // Not a copy of the eager output: y was poisoned before the graph ran,
    // and RELU made some of it zero, the rest differs from x @ w.
    EXPECT_FALSE(poisoned(kY, y_bytes()));
}

TEST_P(GraphStep, ReplayedOnEveryRingGivesTheSameBytes) {
    inputs();
    const std::vector<std::byte> want = eager();
    const GraphBuilder g = step_graph(dt());
    for (unsigned ring = 0; ring < t.chiplets(); ring++) {
        ASSERT_EQ(graph(g, ring).status, RBLN_FW_JOB_OK) << "ring " << ring;
        EXPECT_EQ(bytes(kY, y_bytes()), want) << "ring " << ring;
    }
    EXPECT_EQ(t.h.card.stats().graph_execs, t.chiplets());
}

TEST_P(GraphStep, CheckOnlyValidatesAndRunsNoNode) {
    inputs();
    const GraphBuilder g = step_graph(dt());
    const rbln_fw_job_cpl cpl = graph(g, 0, RBLN_FW_GRAPH_EXEC_CHECK_ONLY);
    EXPECT_EQ(cpl.status, RBLN_FW_JOB_OK);
    EXPECT_TRUE(poisoned(kY, y_bytes()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GraphStep,
                         ::testing::Values(RBLN_FW_DT_FP32, RBLN_FW_DT_BF16, RBLN_FW_DT_FP16),
                         [](const auto& info) { return std::string(dt_name(info.param)); });

// --- fan-out and fan-in -------------------------------------------------------------

constexpr std::uint64_t kR = 64;
constexpr std::uint64_t kC = 96;

class GraphFan : public GraphCard, public ::testing::WithParamInterface<std::uint32_t> {
protected:
    std::uint32_t dt() const { return GetParam(); }
    std::uint64_t n() const { return kR * kC; }
    std::uint64_t nb() const { return n() * es(dt()); }

    // The operations, as (packet with addresses, where its tensors are):
    //   0 FILL   t0 = 0x3c00 pattern           (root)
    //   1 COPY   t1 = x                        (root)
    //   2 RELU   t2 = relu(t1)          <- 1
    //   3 SCALE  t3 = t1 * 1.5          <- 1
    //   4 MUL    t4 = t1 * t1           <- 1
    //   5 ADD    t5 = t2 + t3           <- 2, 3   (fan-in)
    //   6 MUL    y  = t5 * t4           <- 5, 4
    //   7 ADD    t6 = t0 + y           <- 0, 6
    //   8 STRIDED y2 = every other row of t6   <- 7
    // Nodes 2, 3, 4 (fan-out of 1) and 0, 1 are levels of several nodes.
    void build(GraphBuilder& g, const std::function<rbln_fw_graph_reloc(unsigned)>& rel) const {
        const std::uint32_t d = dt();
        const std::uint64_t pattern = d == RBLN_FW_DT_FP32 ? 0x3f000000 : 0x3c00;
        const std::uint32_t pb = d == RBLN_FW_DT_FP32 ? 4 : 2;
        g.fill(nb(), pattern, pb, rel(0));
        g.copy(nb(), bnd(0), rel(1));
        g.launch(ew(RBLN_FW_KERNEL_RELU, d, {kR, kC}), rel(1), none(), rel(2), {1});
        g.launch(ew(RBLN_FW_KERNEL_SCALE, d, {kR, kC}, 1.5F), rel(1), none(), rel(3), {1});
        g.launch(ew(RBLN_FW_KERNEL_MUL, d, {kR, kC}), rel(1), rel(1), rel(4), {1});
        g.launch(ew(RBLN_FW_KERNEL_ADD, d, {kR, kC}), rel(2), rel(3), rel(5), {2, 3});
        g.launch(ew(RBLN_FW_KERNEL_MUL, d, {kR, kC}), rel(5), rel(4), bnd(1), {5, 4});
        g.launch(ew(RBLN_FW_KERNEL_ADD, d, {kR, kC}), rel(0), bnd(1), rel(6), {0, 6});
        g.strided(strided_pkt(), rel(6), bnd(2), {7});
    }
    rbln_fw_pkt_copy_strided strided_pkt() const {
        rbln_fw_pkt_copy_strided s{};
        s.width = kC * es(dt());
        s.height = kR / 2;
        s.depth = 1;
        s.src_pitch = 2 * kC * es(dt());
        s.dst_pitch = kC * es(dt());
        return s;
    }
    // Intermediate i at i * 64 KiB.
    static std::uint64_t tmp_off(unsigned i) { return std::uint64_t{i} * 0x10000; }

    GraphBuilder graph() const {
        GraphBuilder g;
        g.boundary(dense(dt(), {kR, kC}, RBLN_FW_GRAPH_IN, es(dt())));
        g.boundary(dense(dt(), {kR, kC}, RBLN_FW_GRAPH_INOUT, es(dt())));
        g.boundary(dense(dt(), {kR / 2, kC}, RBLN_FW_GRAPH_OUT, es(dt())));
        g.exec_bytes(7 * 0x10000);
        build(g, [](unsigned i) { return exec_at(tmp_off(i)); });
        return g;
    }

    // Every node's packet as its own eager job, in index order.
    void eager() {
        GraphBuilder g = graph(); // the same records, addresses resolved here
        const std::vector<std::byte> img = g.image(1);
        rbln_fw_graph_image h{};
        std::memcpy(&h, img.data(), sizeof(h));
        const std::uint64_t vas[3] = {va(kX), va(kY), va(kY2)};
        for (std::uint32_t i = 0; i < h.node_count; i++) {
            rbln_fw_graph_node rec{};
            std::memcpy(&rec, img.data() + h.off[RBLN_FW_GRAPH_SEC_NODES] + i * sizeof(rec),
                        sizeof(rec));
            std::uint64_t addr[3] = {};
            for (unsigned s = 0; s < 3; s++) {
                const rbln_fw_graph_reloc& r = rec.reloc[s];
                if (r.kind == RBLN_FW_GRAPH_RELOC_BOUNDARY)
                    addr[s] = vas[r.index] + r.offset;
                else if (r.kind == RBLN_FW_GRAPH_RELOC_EXEC)
                    addr[s] = va(kEager) + r.offset;
            }
            CmdBuf cb;
            switch (rec.op) {
            case RBLN_FW_PKT_LAUNCH:
                cb.launch(at(rec.pkt.launch, addr[0], addr[1], addr[2]));
                break;
            case RBLN_FW_PKT_COPY:
                cb.copy(addr[0], addr[1], rec.pkt.copy.size);
                break;
            case RBLN_FW_PKT_FILL:
                cb.fill(addr[0], rec.pkt.fill.size, rec.pkt.fill.pattern,
                        rec.pkt.fill.pattern_bytes);
                break;
            default: {
                rbln_fw_pkt_copy_strided s = rec.pkt.copy_strided;
                s.src = addr[0];
                s.dst = addr[1];
                cb.add(RBLN_FW_PKT_COPY_STRIDED, s);
            }
            }
            ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK) << "eager node " << i;
        }
    }
};

TEST_P(GraphFan, FanOutAndFanInEqualTheEagerPacketsByteForByte) {
    random_fill(kX, dt(), n(), 7);
    poison(kY, nb());
    poison(kY2, nb() / 2);
    eager();
    const std::vector<std::byte> want_y = bytes(kY, nb());
    const std::vector<std::byte> want_y2 = bytes(kY2, nb() / 2);
    ASSERT_FALSE(poisoned(kY2, nb() / 2));
    poison(kY, nb());
    poison(kY2, nb() / 2);
    const GraphBuilder g = graph();
    const rbln_fw_job_cpl cpl =
        run_graph(g.object(kKey), g.bindings({va(kX), va(kY), va(kY2)}), packet(g));
    ASSERT_EQ(cpl.status, RBLN_FW_JOB_OK) << "detail " << cpl.detail << " arg " << cpl.detail_arg;
    EXPECT_EQ(bytes(kY, nb()), want_y);
    EXPECT_EQ(bytes(kY2, nb() / 2), want_y2);
}

TEST_P(GraphFan, IndependentNodesRunOnSeveralChipletsAndTheCountersSayWhere) {
    random_fill(kX, dt(), n(), 8);
    t.h.real_clock = true; // busy_ns needs a clock that moves
    const GraphBuilder g = graph();
    const CardStats before = t.h.card.stats();
    const Telemetry tel0 = t.h.card.telemetry();
    const unsigned ring = 2;
    ASSERT_EQ(
        run_graph(g.object(kKey), g.bindings({va(kX), va(kY), va(kY2)}), packet(g), ring).status,
        RBLN_FW_JOB_OK);
    const CardStats after = t.h.card.stats();
    const Telemetry tel1 = t.h.card.telemetry();
    std::uint64_t total = 0;
    unsigned used = 0;
    for (unsigned c = 0; c < t.chiplets(); c++) {
        const std::uint64_t d = after.graph_nodes.at(c) - before.graph_nodes.at(c);
        total += d;
        used += d != 0 ? 1 : 0;
        if (d != 0 && c != ring) {
            EXPECT_GT(tel1.chiplet.at(c).busy_ns, tel0.chiplet.at(c).busy_ns) << "chiplet " << c;
        }
    }
    EXPECT_EQ(total, 9U);
    // Levels {0, 1} and {2, 3, 4}: three chiplets at least; the ring's own
    // ran every level's first node.
    EXPECT_GE(used, 3U);
    EXPECT_EQ(after.graph_nodes.at(ring) - before.graph_nodes.at(ring), 6U);
}

TEST_P(GraphFan, StatusReportsTheGraphsAndWhereTheirNodesRan) {
    random_fill(kX, dt(), n(), 10);
    const GraphBuilder g = graph();
    ControlInterface ctl{t.h.card};
    auto s = parse_ok_reply(ctl.execute("status"));
    EXPECT_EQ(s["graph_execs"], "0");
    EXPECT_EQ(s["graph_rejected"], "0");
    EXPECT_EQ(s["graph_nodes"], "0,0,0,0");
    ASSERT_EQ(run_graph(g.object(kKey), g.bindings({va(kX), va(kY), va(kY2)}), packet(g), 3).status,
              RBLN_FW_JOB_OK);
    rbln_fw_pkt_graph_exec bad = packet(g);
    bad.boundary_count = 2;
    EXPECT_EQ(run_graph(g.object(kKey), g.bindings({va(kX), va(kY), va(kY2)}), bad).status,
              RBLN_FW_JOB_BAD_PACKET);
    s = parse_ok_reply(ctl.execute("status"));
    EXPECT_EQ(s["graph_execs"], "1");
    EXPECT_EQ(s["graph_rejected"], "1");
    // Ring 3's chiplet ran the first node of every level (6), chiplets 0
    // and 1 the second and third of the levels that have them.
    EXPECT_EQ(s["graph_nodes"], "2,1,0,6");
}

TEST_P(GraphFan, SerialRunsEveryNodeOnTheRingsChiplet) {
    random_fill(kX, dt(), n(), 9);
    const GraphBuilder g = graph();
    const CardStats before = t.h.card.stats();
    ASSERT_EQ(run_graph(g.object(kKey), g.bindings({va(kX), va(kY), va(kY2)}),
                        packet(g, RBLN_FW_GRAPH_EXEC_SERIAL), 1)
                  .status,
              RBLN_FW_JOB_OK);
    const CardStats after = t.h.card.stats();
    for (unsigned c = 0; c < t.chiplets(); c++)
        EXPECT_EQ(after.graph_nodes.at(c) - before.graph_nodes.at(c), c == 1 ? 9U : 0U) << c;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GraphFan,
                         ::testing::Values(RBLN_FW_DT_FP32, RBLN_FW_DT_BF16, RBLN_FW_DT_FP16),
                         [](const auto& info) { return std::string(dt_name(info.param)); });

// --- refusals -----------------------------------------------------------------------

// What a case changes before the run: the object's bytes, the table, the
// packet.
struct Submission {
    std::vector<std::byte> obj;
    std::vector<rbln_fw_graph_binding> table;
    rbln_fw_pkt_graph_exec pkt{};
    GraphBuilder::Layout layout{};

    rbln_fw_graph_obj header() const {
        rbln_fw_graph_obj o{};
        std::memcpy(&o, obj.data(), sizeof(o));
        return o;
    }
    void set_header(const rbln_fw_graph_obj& o) { std::memcpy(obj.data(), &o, sizeof(o)); }
    rbln_fw_graph_image image() const {
        rbln_fw_graph_image h{};
        std::memcpy(&h, obj.data() + sizeof(rbln_fw_graph_obj), sizeof(h));
        return h;
    }
    void set_image(const rbln_fw_graph_image& h) {
        std::memcpy(obj.data() + sizeof(rbln_fw_graph_obj), &h, sizeof(h));
    }
    std::byte* in_image(std::size_t off) { return obj.data() + sizeof(rbln_fw_graph_obj) + off; }
    rbln_fw_graph_node node(std::uint32_t i) {
        rbln_fw_graph_node n{};
        std::memcpy(&n, in_image(layout.off[RBLN_FW_GRAPH_SEC_NODES] + i * sizeof(n)), sizeof(n));
        return n;
    }
    void set_node(std::uint32_t i, const rbln_fw_graph_node& n) {
        std::memcpy(in_image(layout.off[RBLN_FW_GRAPH_SEC_NODES] + i * sizeof(n)), &n, sizeof(n));
    }
    void set_u16(int section, std::size_t index, std::uint16_t v) {
        std::memcpy(in_image(layout.off[section] + index * 2), &v, 2);
    }
};

struct Refusal {
    const char* name;
    std::function<void(Submission&)> change;
    std::uint32_t detail;
    std::uint32_t arg;
};

void PrintTo(const Refusal& r, std::ostream* os) {
    *os << r.name;
}

class GraphRefusal : public GraphCard, public ::testing::WithParamInterface<Refusal> {};

TEST_P(GraphRefusal, IsBadPacketWithItsDetailRunsNothingAndTheCardRunsTheNextGraph) {
    const std::uint32_t dt = RBLN_FW_DT_FP32;
    random_fill(kX, dt, kM * kK, 3);
    random_fill(kW, dt, kK * kN, 4);
    const std::uint64_t yb = kM * kN * 4;
    const GraphBuilder g = step_graph(dt);
    Submission s;
    s.obj = g.object(kKey, &s.layout);
    s.table = g.bindings({va(kX), va(kW), va(kY)});
    s.pkt = packet(g);
    GetParam().change(s);
    poison(kY, yb);
    const std::uint64_t rejected = t.h.card.stats().graph_rejected;
    const rbln_fw_job_cpl cpl = run_graph(s.obj, s.table, s.pkt);
    EXPECT_EQ(cpl.status, RBLN_FW_JOB_BAD_PACKET);
    EXPECT_EQ(cpl.detail, GetParam().detail);
    EXPECT_EQ(cpl.detail_arg, GetParam().arg);
    EXPECT_EQ(cpl.packet_offset, 0U);
    EXPECT_TRUE(poisoned(kY, yb)) << "a refused graph wrote its output";
    EXPECT_EQ(t.h.card.stats().graph_rejected, rejected + 1);

    // The card runs the well-formed graph next, and its result is right.
    const rbln_fw_job_cpl ok =
        run_graph(g.object(kKey), g.bindings({va(kX), va(kW), va(kY)}), packet(g));
    EXPECT_EQ(ok.status, RBLN_FW_JOB_OK);
    EXPECT_EQ(ok.detail, 0U);
    const std::vector<std::byte> got = bytes(kY, yb);
    CmdBuf cb;
    cb.launch(at(mm(dt, kM, kN, kK), va(kX), va(kW), va(kEager)));
    cb.launch(at(ew(RBLN_FW_KERNEL_RELU, dt, {kM, kN}), va(kEager), 0, va(kEager)));
    cb.launch(at(ew(RBLN_FW_KERNEL_SCALE, dt, {kM, kN}, kScale), va(kEager), 0, va(kY)));
    ASSERT_EQ(t.status(1, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(got, bytes(kY, yb));
}

std::vector<Refusal> refusals() {
    using S = Submission;
    auto node_change = [](std::uint32_t i, const std::function<void(rbln_fw_graph_node&)>& f) {
        return [i, f](S& s) {
            rbln_fw_graph_node n = s.node(i);
            f(n);
            s.set_node(i, n);
        };
    };
    auto image_change = [](const std::function<void(rbln_fw_graph_image&)>& f) {
        return [f](S& s) {
            rbln_fw_graph_image h = s.image();
            f(h);
            s.set_image(h);
        };
    };
    return {
        {"HeaderFramingAnotherGraphsImage",
         [](S& s) {
             rbln_fw_graph_obj o = s.header();
             o.full_key = kKey + 1; // same image bytes, the header of another key
             s.set_header(o);
         },
         RBLN_FW_GRAPH_E_KEY, 0},
        {"BadMagic",
         [](S& s) {
             rbln_fw_graph_obj o = s.header();
             o.magic ^= 1;
             s.set_header(o);
         },
         RBLN_FW_GRAPH_E_MAGIC, 0},
        {"DefinitionBytesSmallerThanTheImage",
         [](S& s) {
             rbln_fw_graph_obj o = s.header();
             o.definition_bytes -= 16;
             s.set_header(o);
         },
         RBLN_FW_GRAPH_E_TOTAL_BYTES, 0},
        {"DefinitionBytesLargerThanTheImage",
         [](S& s) {
             rbln_fw_graph_obj o = s.header();
             o.definition_bytes += 16;
             s.set_header(o);
             s.obj.resize(s.obj.size() + 16);
         },
         RBLN_FW_GRAPH_E_TOTAL_BYTES, 0},
        {"DefinitionBytesBeyondTheLimit",
         [](S& s) {
             rbln_fw_graph_obj o = s.header();
             o.definition_bytes = RBLN_FW_GRAPH_MAX_BYTES + 16;
             s.set_header(o);
         },
         RBLN_FW_GRAPH_E_OBJ_BYTES, 0},
        {"UnknownVersion", image_change([](rbln_fw_graph_image& h) { h.version = 2; }),
         RBLN_FW_GRAPH_E_VERSION, 0},
        {"NodeCountBeyondTheLimit",
         image_change([](rbln_fw_graph_image& h) { h.node_count = RBLN_FW_GRAPH_MAX_NODES + 1; }),
         RBLN_FW_GRAPH_E_COUNT, RBLN_FW_GRAPH_SEC_NODES},
        {"BoundaryCountOtherThanThePacketBinds",
         [](S& s) {
             s.pkt.boundary_count = 2;
             s.table.pop_back();
         },
         RBLN_FW_GRAPH_E_BOUNDARY_COUNT, 3},
        {"ExecutionStorageSmallerThanTheImageNeeds", [](S& s) { s.pkt.exec_bytes = 0x1ffff; },
         RBLN_FW_GRAPH_E_EXEC_BYTES, 0},
        {"NodeSectionRunningPastTheImage",
         [](S& s) {
             rbln_fw_graph_image h = s.image();
             h.off[RBLN_FW_GRAPH_SEC_NODES] = h.total_bytes - 256;
             s.set_image(h);
         },
         RBLN_FW_GRAPH_E_SECTION, RBLN_FW_GRAPH_SEC_NODES},
        {"SectionOffsetBeyondTheImage", image_change([](rbln_fw_graph_image& h) {
             h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] = 1u << 20;
         }),
         RBLN_FW_GRAPH_E_SECTION, RBLN_FW_GRAPH_SEC_BOUNDARIES},
        {"SectionInsideTheHeader",
         image_change([](rbln_fw_graph_image& h) { h.off[RBLN_FW_GRAPH_SEC_ROOTS] = 16; }),
         RBLN_FW_GRAPH_E_SECTION, RBLN_FW_GRAPH_SEC_ROOTS},
        {"MisalignedSection",
         image_change([](rbln_fw_graph_image& h) { h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS] += 2; }),
         RBLN_FW_GRAPH_E_ALIGN, RBLN_FW_GRAPH_SEC_FANIN_ROWS},
        {"MisalignedNodeSection",
         image_change([](rbln_fw_graph_image& h) { h.off[RBLN_FW_GRAPH_SEC_NODES] += 8; }),
         RBLN_FW_GRAPH_E_ALIGN, RBLN_FW_GRAPH_SEC_NODES},
        {"CycleThroughAProducerAboveItsConsumer",
         [](S& s) { s.set_u16(RBLN_FW_GRAPH_SEC_FANIN_PRODS, 0, 2); }, // node 1 after node 2
         RBLN_FW_GRAPH_E_CYCLE, 1},
        {"NodeItsOwnProducer", [](S& s) { s.set_u16(RBLN_FW_GRAPH_SEC_FANIN_PRODS, 1, 2); },
         RBLN_FW_GRAPH_E_CYCLE, 2},
        {"FaninRowsNotEndingAtEdgeCount",
         image_change([](rbln_fw_graph_image& h) { h.edge_count = 1; }), RBLN_FW_GRAPH_E_FANIN, 2},
        {"RootThatHasProducers", [](S& s) { s.set_u16(RBLN_FW_GRAPH_SEC_ROOTS, 0, 1); },
         RBLN_FW_GRAPH_E_ROOTS, 0},
        {"BoundaryShapeOtherThanItsSignature", [](S& s) { s.table[1].tensor.shape[0] += 1; },
         RBLN_FW_GRAPH_E_BINDING, 1},
        {"BoundaryDtypeOtherThanItsSignature",
         [](S& s) { s.table[0].tensor.dtype = RBLN_FW_DT_BF16; }, RBLN_FW_GRAPH_E_BINDING, 0},
        {"BoundaryDirectionOtherThanItsSignature",
         [](S& s) { s.table[2].tensor.direction = RBLN_FW_GRAPH_INOUT; }, RBLN_FW_GRAPH_E_BINDING,
         2},
        {"SignatureWhoseElementsReachPastItsBytes",
         [](S& s) {
             rbln_fw_graph_image h = s.image();
             rbln_fw_graph_tensor sig{};
             std::byte* p = s.in_image(h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] + sizeof(sig));
             std::memcpy(&sig, p, sizeof(sig));
             sig.bytes -= 4;
             std::memcpy(p, &sig, sizeof(sig));
             s.table[1].tensor = sig;
         },
         RBLN_FW_GRAPH_E_SIGNATURE, 1},
        {"UnknownNodeOp", node_change(1, [](rbln_fw_graph_node& n) { n.op = RBLN_FW_PKT_SIGNAL; }),
         RBLN_FW_GRAPH_E_NODE, 1},
        {"NodePacketTheEagerCheckRefuses",
         node_change(2,
                     [](rbln_fw_graph_node& n) {
                         n.pkt.launch.scale = 0;
                         n.pkt.launch.kernel = 9;
                     }),
         RBLN_FW_GRAPH_E_NODE, 2},
        {"NodePacketWithAnAddress",
         node_change(0, [](rbln_fw_graph_node& n) { n.pkt.launch.out = 0x1000; }),
         RBLN_FW_GRAPH_E_NODE, 0},
        {"RelocationBoundaryIndexOutOfRange",
         node_change(0, [](rbln_fw_graph_node& n) { n.reloc[1].index = 3; }), RBLN_FW_GRAPH_E_RELOC,
         0},
        {"RelocationForAnOperandTheKernelLacks",
         node_change(1, [](rbln_fw_graph_node& n) { n.reloc[1] = exec_at(0); }),
         RBLN_FW_GRAPH_E_RELOC, 1},
        {"RelocationReachingPastItsBoundary",
         node_change(0, [](rbln_fw_graph_node& n) { n.reloc[0].offset = 4; }),
         RBLN_FW_GRAPH_E_RELOC_RANGE, 0},
        {"RelocationReachingPastTheExecutionStorage",
         node_change(1, [](rbln_fw_graph_node& n) { n.reloc[2].offset = 0x20000 - 4; }),
         RBLN_FW_GRAPH_E_RELOC_RANGE, 1},
        {"NodeWritingAnInputBoundary",
         [](S& s) {
             for (rbln_fw_graph_binding* b : {&s.table[2]})
                 b->tensor.direction = RBLN_FW_GRAPH_IN;
             rbln_fw_graph_image h = s.image();
             rbln_fw_graph_tensor sig = s.table[2].tensor;
             std::memcpy(s.in_image(h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] + 2 * sizeof(sig)), &sig,
                         sizeof(sig));
         },
         RBLN_FW_GRAPH_E_RELOC_WRITE_IN, 2},
        {"UnknownPacketFlags", [](S& s) { s.pkt.flags = 1u << 7; }, RBLN_FW_GRAPH_E_PACKET, 0},
        {"MisalignedDefinition", [](S& s) { s.pkt.definition += 8; }, RBLN_FW_GRAPH_E_PACKET, 0},
    };
}

INSTANTIATE_TEST_SUITE_P(Cases, GraphRefusal, ::testing::ValuesIn(refusals()),
                         [](const auto& info) { return std::string(info.param.name); });

// --- neighbours in one buffer ---------------------------------------------------------

// Two Definitions back to back in one buffer, as a host's retained block
// holds them.  Neither may reach into the other.
class GraphNeighbours : public GraphCard {
protected:
    static constexpr std::uint32_t kDt = RBLN_FW_DT_FP32;

    GraphNeighbours() {
        random_fill(kX, kDt, kM * kK, 5);
        random_fill(kW, kDt, kK * kN, 6);
    }
    // Object A at kDef, object B right after it (16-byte aligned).
    void place(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
        std::memcpy(t.host(kDef), a.data(), a.size());
        b_off_ = kDef + a.size();
        std::memcpy(t.host(b_off_), b.data(), b.size());
    }
    rbln_fw_job_cpl exec(std::uint64_t def_off, const GraphBuilder& g, std::uint64_t exec_va,
                         std::uint64_t exec_bytes) {
        const auto table = g.bindings({va(kX), va(kW), va(kY)});
        std::memcpy(t.host(kTable), table.data(), table.size() * sizeof(table[0]));
        CmdBuf cb;
        cb.add(RBLN_FW_PKT_GRAPH_EXEC,
               graph_exec(va(def_off), va(kTable), g.boundary_count(), exec_va, exec_bytes));
        const auto cpl = t.run(0, cb);
        return cpl ? *cpl : no_cpl();
    }
    std::uint64_t b_off_ = 0;
};

TEST_F(GraphNeighbours, ASectionOffsetReachingIntoTheNextObjectIsRefused) {
    GraphBuilder a = step_graph(kDt);
    GraphBuilder b = step_graph(kDt);
    b.exec_bytes(0x30000); // another Definition
    GraphBuilder::Layout la{};
    std::vector<std::byte> oa = a.object(kKey, &la);
    const std::vector<std::byte> ob = b.object(kKey + 1);
    // A's signatures "moved" to where B's image has its own: past A's end.
    rbln_fw_graph_image h{};
    std::memcpy(&h, oa.data() + 32, sizeof(h));
    h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] = la.total + 32 + 64 + 16;
    std::memcpy(oa.data() + 32, &h, sizeof(h));
    place(oa, ob);
    const rbln_fw_job_cpl cpl = exec(kDef, a, kExecVa, kExecBytes);
    EXPECT_EQ(cpl.status, RBLN_FW_JOB_BAD_PACKET);
    EXPECT_EQ(cpl.detail, RBLN_FW_GRAPH_E_SECTION);
    EXPECT_EQ(cpl.detail_arg, RBLN_FW_GRAPH_SEC_BOUNDARIES);
    // B, right behind it, is valid and runs.
    EXPECT_EQ(exec(b_off_, b, kExecVa, kExecBytes).status, RBLN_FW_JOB_OK);
}

TEST_F(GraphNeighbours, ARelocationPointingIntoTheNextObjectIsRefusedAndWritesNothing) {
    // A's execution storage sits right before B in the same buffer: a
    // relocation past A's storage would land in B's image.
    GraphBuilder a = step_graph(kDt);
    const GraphBuilder b = step_graph(kDt);
    const std::uint64_t storage = a.exec_bytes();
    a.at(1).reloc[2] = exec_at(storage + 32 + 64); // RELU's out: B's first node record
    const std::vector<std::byte> ob = b.object(kKey + 1);
    const std::uint64_t exec_off = kDef;
    b_off_ = kDef + storage;
    std::memcpy(t.host(b_off_), ob.data(), ob.size());
    const std::vector<std::byte> oa = a.object(kKey);
    const std::uint64_t a_off = kDef + 0x40000;
    std::memcpy(t.host(a_off), oa.data(), oa.size());
    const rbln_fw_job_cpl cpl = exec(a_off, a, va(exec_off), storage);
    EXPECT_EQ(cpl.status, RBLN_FW_JOB_BAD_PACKET);
    EXPECT_EQ(cpl.detail, RBLN_FW_GRAPH_E_RELOC_RANGE);
    EXPECT_EQ(cpl.detail_arg, 1U);
    EXPECT_EQ(bytes(b_off_, ob.size()), ob) << "B's bytes changed";
    EXPECT_EQ(exec(b_off_, b, kExecVa, kExecBytes).status, RBLN_FW_JOB_OK);
}

// --- running -----------------------------------------------------------------------------

TEST_F(GraphCard, ANodeThatFaultsFailsTheJobWithTheFaultAndNamesTheNode) {
    const std::uint32_t dt = RBLN_FW_DT_FP32;
    const GraphBuilder g = step_graph(dt);
    // y bound at the read-only window: the last node's store faults.
    const rbln_fw_job_cpl cpl =
        run_graph(g.object(kKey), g.bindings({va(kX), va(kW), TestCard::kVaRo}), packet(g));
    EXPECT_EQ(cpl.status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl.fault_reason, RBLN_FW_MMU_NO_WRITE);
    EXPECT_EQ(cpl.fault_va, TestCard::kVaRo);
    EXPECT_EQ(cpl.detail, RBLN_FW_GRAPH_E_IN_NODE);
    EXPECT_EQ(cpl.detail_arg, 2U);
}

TEST_F(GraphCard, ADefinitionThatDoesNotTranslateIsAnMmuFault) {
    const GraphBuilder g = step_graph(RBLN_FW_DT_FP32);
    CmdBuf cb;
    cb.add(RBLN_FW_PKT_GRAPH_EXEC,
           graph_exec(0x7000'0000'0000ULL, va(kTable), 3, kExecVa, kExecBytes));
    const auto cpl = t.run(0, cb);
    ASSERT_TRUE(cpl);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_va, 0x7000'0000'0000ULL);
}

// Two nodes that never end (strided copies of 2^62 one-byte rows over one
// byte), one level: spread over two chiplets.
GraphBuilder endless_graph() {
    GraphBuilder g;
    g.exec_bytes(64);
    rbln_fw_pkt_copy_strided s{};
    s.width = 1;
    s.height = 0x80000000U;
    s.depth = 0x80000000U;
    g.strided(s, exec_at(0), exec_at(8));
    g.strided(s, exec_at(16), exec_at(24));
    return g;
}

TEST_F(GraphCard, RingStopEndsAGraphWhoseNodesRunOnOtherChipletsAndTheyRunAgainAfter) {
    const GraphBuilder g = endless_graph();
    std::memcpy(t.host(kDef), g.object(kKey).data(), g.object(kKey).size());
    CmdBuf cb;
    cb.add(RBLN_FW_PKT_GRAPH_EXEC, graph_exec(va(kDef), va(kTable), 0, kExecVa, 64));
    const std::uint64_t seqno = t.submit(0, cb);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(t.h.pop_job_cpl(0).has_value()) << "an endless graph completed";
    expect_stop_aborts(t.h, 0, seqno);
    // The helper of chiplet 1 let go of its node: the next graph runs there.
    ASSERT_EQ(t.h.setup_ring(0, 16), RBLN_FW_ST_OK);
    const std::uint64_t before = t.h.card.stats().graph_nodes.at(1);
    {
        GraphBuilder two;
        two.exec_bytes(64);
        two.fill(8, 1, 1, exec_at(0));
        two.fill(8, 2, 1, exec_at(8));
        std::memcpy(t.host(kDef), two.object(kKey).data(), two.object(kKey).size());
        CmdBuf ok;
        ok.add(RBLN_FW_PKT_GRAPH_EXEC, graph_exec(va(kDef), va(kTable), 0, kExecVa, 64));
        EXPECT_EQ(t.status(0, ok), RBLN_FW_JOB_OK);
    }
    EXPECT_EQ(t.h.card.stats().graph_nodes.at(1), before + 1);
}

TEST_F(GraphCard, VmAbortCancelsAGraphWhoseNodesRunOnOtherChiplets) {
    const GraphBuilder g = endless_graph();
    std::memcpy(t.host(kDef), g.object(kKey).data(), g.object(kKey).size());
    CmdBuf cb;
    cb.add(RBLN_FW_PKT_GRAPH_EXEC, graph_exec(va(kDef), va(kTable), 0, kExecVa, 64));
    (void)t.submit(2, cb);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_VM_ABORT);
    req.args[0] = TestCard::kAsid;
    ASSERT_EQ(t.h.admin(req), RBLN_FW_ST_OK);
    const auto cpl = t.h.wait_job_cpl(2);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_CANCELLED);
    EXPECT_EQ(cpl->detail, RBLN_FW_GRAPH_E_IN_NODE);
    EXPECT_EQ(cpl->detail_arg, 0U);
}

TEST(GraphCardMinor3, GraphExecIsBadPacketOnAFirmwareWithoutIt) {
    Options opt = test_options();
    opt.iface_minor = 3;
    TestCard t(opt);
    CmdBuf cb;
    cb.add(RBLN_FW_PKT_GRAPH_EXEC, graph_exec(TestCard::kVaHost, TestCard::kVaHost, 0, 0, 0));
    const auto cpl = t.run(0, cb);
    ASSERT_TRUE(cpl);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_BAD_PACKET);
    EXPECT_EQ(cpl->detail, 0U);
}

} // namespace
} // namespace rbln::emu::test
