// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: rbln-emu's validator of graph Definitions
// (tools/rbln-emu/src/graph.h, firmware-iface/rbln_fw_graph.md).
//
// Each input is what a GRAPH_EXEC makes the card copy in, back to back:
// the 48-byte packet, the 32-byte object header, the image (the next
// definition_bytes of the input, zero-padded when the input is shorter),
// then the boundary table (the rest, zero-padded or cut to boundary_count
// entries).  Every copy is a buffer of exactly its size, so ASan sees any
// read past it.  The harness runs the checks in the card's order:
// check_graph_packet, check_graph_object, check_graph.  What must hold:
//   - a refusal names a documented RBLN_FW_GRAPH_E_* code (not NONE, not
//     IN_NODE) and a reason;
//   - an accepted Definition's plan is sound, checked here from the image
//     with code of the harness's own: every node once, levels in order of
//     every fan-in edge, every resolved address inside the region its
//     relocation names (the boundary the table binds, or the execution
//     storage), no node writing an IN boundary;
//   - the same input gives the same answer twice;
//   - and, under ASan/UBSan, no memory error or undefined behaviour.
// RBLN_FUZZ_SEEDS=DIR writes well-formed Definitions (and a few refused
// ones) and exits.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "fuzz_seeds.h"
#include "graph.h"
#include "graph_builder.h"

namespace {

using namespace rbln::emu;
using namespace rbln::emu::test;

constexpr std::uint64_t kDefVa = 0x10'0000'0000ULL;
constexpr std::uint64_t kTableVa = 0x10'0010'0000ULL;
constexpr std::uint64_t kExecVa = 0x20'0000'0000ULL;
constexpr std::uint64_t kTensorVa = 0x30'0000'0000ULL; // boundary i at + i MiB

[[noreturn]] void die(const char* what, std::uint64_t value = 0) {
    std::fprintf(stderr, "emu_graph_fuzz: %s (%llu)\n", what,
                 static_cast<unsigned long long>(value));
    std::abort();
}

template <typename T> T load(const std::vector<std::byte>& b, std::size_t off) {
    T v{};
    std::memcpy(&v, b.data() + off, sizeof(T));
    return v;
}

struct Outcome {
    std::optional<GraphError> error;
    GraphPlan plan;
};

struct Input {
    rbln_fw_pkt_graph_exec pkt{};
    rbln_fw_graph_obj obj{};
    std::vector<std::byte> image;
    std::vector<std::byte> table;
};

Outcome validate(const Input& in) {
    Outcome o;
    if ((o.error = check_graph_packet(in.pkt)))
        return o;
    if ((o.error = check_graph_object(in.obj)))
        return o;
    o.error = check_graph(in.pkt, in.obj, in.image, in.table, o.plan);
    return o;
}

// The accepted plan against the image, independently of the validator.
void check_plan(const Input& in, const GraphPlan& plan) {
    const auto h = load<rbln_fw_graph_image>(in.image, 0);
    const std::uint32_t n = h.node_count;
    if (plan.nodes.size() != n || plan.order.size() != n)
        die("plan size", plan.nodes.size());
    // Every node once, levels ascending.
    std::vector<std::uint32_t> level(n, ~0U);
    for (std::size_t l = 0; l + 1 < plan.level_begin.size(); l++) {
        for (std::uint32_t k = plan.level_begin[l]; k < plan.level_begin[l + 1]; k++) {
            const std::uint16_t i = plan.order.at(k);
            if (i >= n || level[i] != ~0U)
                die("node placed twice or out of range", i);
            level[i] = static_cast<std::uint32_t>(l);
        }
    }
    const std::size_t rows = h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS];
    const std::size_t prods = h.off[RBLN_FW_GRAPH_SEC_FANIN_PRODS];
    for (std::uint32_t i = 0; i < n; i++) {
        if (level[i] == ~0U)
            die("node missing from the plan", i);
        const auto b = load<std::uint32_t>(in.image, rows + i * 4);
        const auto e = load<std::uint32_t>(in.image, rows + (i + 1) * 4);
        for (std::uint32_t k = b; k < e; k++) {
            const auto p = load<std::uint16_t>(in.image, prods + k * 2);
            if (p >= i || level[p] >= level[i])
                die("an edge not ordered by the levels", i);
        }
    }
    // Every resolved address inside its region.
    for (std::uint32_t i = 0; i < n; i++) {
        const auto rec = load<rbln_fw_graph_node>(
            in.image, h.off[RBLN_FW_GRAPH_SEC_NODES] + std::size_t{i} * sizeof(rbln_fw_graph_node));
        std::uint64_t addr[RBLN_FW_GRAPH_OPERANDS] = {};
        std::uint64_t span[RBLN_FW_GRAPH_OPERANDS] = {};
        bool writes[RBLN_FW_GRAPH_OPERANDS] = {};
        const GraphNode& node = plan.nodes[i];
        if (const auto* l = std::get_if<rbln_fw_pkt_launch>(&node.pkt)) {
            addr[0] = l->a, addr[1] = l->b, addr[2] = l->out;
            writes[2] = true;
        } else if (const auto* c = std::get_if<rbln_fw_pkt_copy>(&node.pkt)) {
            addr[0] = c->src, addr[1] = c->dst;
            span[0] = span[1] = c->size;
            writes[1] = true;
        } else if (const auto* s = std::get_if<rbln_fw_pkt_copy_strided>(&node.pkt)) {
            addr[0] = s->src, addr[1] = s->dst;
            span[0] = span[1] = s->width; // at least the first row
            writes[1] = true;
        } else {
            const auto& f = std::get<rbln_fw_pkt_fill>(node.pkt);
            addr[0] = f.dst;
            span[0] = f.size;
            writes[0] = true;
        }
        for (unsigned s = 0; s < RBLN_FW_GRAPH_OPERANDS; s++) {
            const rbln_fw_graph_reloc& r = rec.reloc[s];
            std::uint64_t base = 0;
            std::uint64_t bytes = 0;
            if (r.kind == RBLN_FW_GRAPH_RELOC_NONE) {
                if (addr[s] != 0)
                    die("an address for an operand without a relocation", i);
                continue;
            }
            if (r.kind == RBLN_FW_GRAPH_RELOC_EXEC) {
                base = in.pkt.exec;
                bytes = h.execution_storage_bytes;
            } else {
                const auto bind = load<rbln_fw_graph_binding>(in.table, r.index * 96ULL);
                base = bind.va;
                bytes = bind.tensor.bytes;
                if (writes[s] && bind.tensor.direction == RBLN_FW_GRAPH_IN)
                    die("a node writes an IN boundary", i);
            }
            if (addr[s] != base + r.offset || r.offset > bytes || span[s] > bytes - r.offset)
                die("an operand outside its region", i);
        }
    }
}

Input split(const std::uint8_t* data, std::size_t size) {
    Input in;
    std::size_t at = 0;
    auto take = [&](void* dst, std::size_t n) {
        const std::size_t k = std::min(n, size - at);
        if (k != 0)
            std::memcpy(dst, data + at, k);
        at += k;
    };
    take(&in.pkt, sizeof(in.pkt));
    take(&in.obj, sizeof(in.obj));
    if (in.obj.definition_bytes <= RBLN_FW_GRAPH_MAX_BYTES) {
        in.image.resize(in.obj.definition_bytes);
        take(in.image.data(), in.image.size());
    }
    if (in.pkt.boundary_count <= RBLN_FW_GRAPH_MAX_BOUNDARIES) {
        in.table.resize(std::size_t{in.pkt.boundary_count} * sizeof(rbln_fw_graph_binding));
        take(in.table.data(), in.table.size());
    }
    return in;
}

class Harness {
public:
    Harness() = default;
    Harness(const Harness&) = delete;
    Harness& operator=(const Harness&) = delete;
    Harness(Harness&&) = delete;
    Harness& operator=(Harness&&) = delete;
    // How far inputs got, printed when the process ends.
    ~Harness() {
        std::fprintf(stderr, "emu_graph_fuzz: %llu inputs, %llu accepted; refused by code:",
                     static_cast<unsigned long long>(inputs_),
                     static_cast<unsigned long long>(accepted_));
        for (std::size_t c = 1; c < refused_.size(); c++)
            std::fprintf(stderr, " %zu=%llu", c, static_cast<unsigned long long>(refused_[c]));
        std::fprintf(stderr, "\n");
    }

    void run(const std::uint8_t* data, std::size_t size) {
        const Input in = split(data, size);
        const Outcome a = validate(in);
        inputs_++;
        if (a.error && a.error->code < refused_.size())
            refused_[a.error->code]++;
        if (!a.error)
            accepted_++;
        if (a.error) {
            if (a.error->code == RBLN_FW_GRAPH_E_NONE || a.error->code >= RBLN_FW_GRAPH_E_IN_NODE ||
                a.error->why == nullptr)
                die("refusal without a documented code", a.error->code);
        } else {
            check_plan(in, a.plan);
        }
        const Outcome b = validate(in);
        if (a.error.has_value() != b.error.has_value() ||
            (a.error && (a.error->code != b.error->code || a.error->arg != b.error->arg)))
            die("two answers to one input");
    }

private:
    std::uint64_t inputs_ = 0;
    std::uint64_t accepted_ = 0;
    std::array<std::uint64_t, RBLN_FW_GRAPH_E_RELOC_WRITE_IN + 1> refused_{};
};

// Inputs: packet, object (header + image), table.
void put(const std::filesystem::path& dir, const char* name, const GraphBuilder& g,
         std::uint64_t key, std::uint32_t flags = 0) {
    std::vector<std::uint64_t> vas;
    for (std::uint32_t i = 0; i < g.boundary_count(); i++)
        vas.push_back(kTensorVa + (std::uint64_t{i} << 20));
    const auto table = g.bindings(vas);
    const auto obj = g.object(key);
    const auto pkt = graph_exec(kDefVa, kTableVa, g.boundary_count(), kExecVa, 1ULL << 20, flags);
    std::ofstream f(dir / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(&pkt), sizeof(pkt));
    f.write(reinterpret_cast<const char*>(obj.data()), static_cast<std::streamsize>(obj.size()));
    f.write(reinterpret_cast<const char*>(table.data()),
            static_cast<std::streamsize>(table.size() * sizeof(table[0])));
}

rbln_fw_pkt_launch ew(std::uint32_t kernel, std::uint32_t dt, std::uint64_t n) {
    rbln_fw_pkt_launch l{};
    l.kernel = kernel;
    l.dtype_in = l.dtype_out = dt;
    l.ndim = 1;
    l.shape[0] = n;
    l.stride_a[0] = l.stride_out[0] = 1;
    l.stride_b[0] = kernel == RBLN_FW_KERNEL_ADD || kernel == RBLN_FW_KERNEL_MUL ? 1 : 0;
    if (kernel == RBLN_FW_KERNEL_SCALE)
        l.scale = 0x3f400000; // 0.75
    return l;
}

void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    // y = relu(x @ w) * scale, bf16.
    GraphBuilder step;
    step.boundary(dense(RBLN_FW_DT_BF16, {8, 16}, RBLN_FW_GRAPH_IN, 2));
    step.boundary(dense(RBLN_FW_DT_BF16, {16, 4}, RBLN_FW_GRAPH_IN, 2));
    step.boundary(dense(RBLN_FW_DT_BF16, {8, 4}, RBLN_FW_GRAPH_OUT, 2));
    step.exec_bytes(0x1000);
    rbln_fw_pkt_launch m{};
    m.kernel = RBLN_FW_KERNEL_MATMUL;
    m.dtype_in = m.dtype_out = RBLN_FW_DT_BF16;
    m.ndim = 2;
    m.shape[0] = 8, m.shape[1] = 4, m.shape[2] = 16;
    m.stride_a[0] = 16, m.stride_a[1] = 1, m.stride_b[0] = 4, m.stride_b[1] = 1;
    m.stride_out[0] = 4, m.stride_out[1] = 1;
    step.launch(m, bnd(0), bnd(1), exec_at(0));
    step.launch(ew(RBLN_FW_KERNEL_RELU, RBLN_FW_DT_BF16, 32), exec_at(0), none(), exec_at(0x800),
                {0});
    step.launch(ew(RBLN_FW_KERNEL_SCALE, RBLN_FW_DT_BF16, 32), exec_at(0x800), none(), bnd(2), {1});
    put(dir, "step", step, 1);
    put(dir, "step_serial", step, 1, RBLN_FW_GRAPH_EXEC_SERIAL);

    // Fan-out and fan-in with every node kind, fp32.
    GraphBuilder fan;
    fan.boundary(dense(RBLN_FW_DT_FP32, {64}, RBLN_FW_GRAPH_IN, 4));
    fan.boundary(dense(RBLN_FW_DT_FP32, {64}, RBLN_FW_GRAPH_INOUT, 4));
    fan.exec_bytes(0x1000);
    fan.fill(256, 0x3f800000, 4, exec_at(0));
    fan.copy(256, bnd(0), exec_at(0x100));
    fan.launch(ew(RBLN_FW_KERNEL_RELU, RBLN_FW_DT_FP32, 64), exec_at(0x100), none(), exec_at(0x200),
               {1});
    fan.launch(ew(RBLN_FW_KERNEL_MUL, RBLN_FW_DT_FP32, 64), exec_at(0x100), exec_at(0x100),
               exec_at(0x300), {1});
    fan.launch(ew(RBLN_FW_KERNEL_ADD, RBLN_FW_DT_FP32, 64), exec_at(0x200), exec_at(0x300),
               exec_at(0x400), {2, 3});
    rbln_fw_pkt_copy_strided s{};
    s.width = 16, s.height = 8, s.depth = 2, s.src_pitch = 16, s.src_slice = 128;
    s.dst_pitch = 16, s.dst_slice = 128;
    fan.strided(s, exec_at(0x400), bnd(1), {4, 0});
    put(dir, "fan", fan, 2);

    // Refused ones the validator must get to the end of.
    GraphBuilder cyc = fan;
    cyc.fanin(3) = {3};
    put(dir, "cycle", cyc, 3);
    GraphBuilder out = fan;
    out.at(5).reloc[1].offset = 8;
    put(dir, "reloc_range", out, 4);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    rbln::fuzz::write_seeds_if_asked(write_seeds);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return rbln::fuzz::run_input<Harness>(data, size);
}
