// SPDX-License-Identifier: GPL-2.0
// GRAPH_EXEC: the Definition validator, node runs and chiplet helpers
// (graph.h, rbln_fw_graph.md).
#include "graph.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "cmd_ring.h"
#include "kernels.h"
#include "simd.h"

namespace rbln::emu {

namespace {

using Wide = __int128;

constexpr std::uint64_t kVaLimit = 1ULL << RBLN_FW_VA_BITS;
constexpr std::uint32_t kKnownFlags = RBLN_FW_GRAPH_EXEC_SERIAL | RBLN_FW_GRAPH_EXEC_CHECK_ONLY;
constexpr std::size_t kNode = sizeof(rbln_fw_graph_node);
constexpr std::size_t kTensor = sizeof(rbln_fw_graph_tensor);
constexpr std::size_t kBinding = sizeof(rbln_fw_graph_binding);

// Element size and alignment of each section (RBLN_FW_GRAPH_SEC_*).
constexpr std::array<std::uint32_t, RBLN_FW_GRAPH_SECTIONS> kElem{
    kNode, sizeof(std::uint32_t), sizeof(std::uint16_t), sizeof(std::uint16_t), kTensor};
constexpr std::array<std::uint32_t, RBLN_FW_GRAPH_SECTIONS> kAlign{16, 4, 2, 2, 16};

GraphError err(std::uint32_t code, std::uint32_t arg, const char* why) {
    return {code, arg, why};
}

template <typename T> T load(std::span<const std::byte> b, std::size_t off) {
    T v{};
    std::memcpy(&v, b.data() + off, sizeof(T));
    return v;
}

bool is_dtype(std::uint32_t dt) {
    return dt == RBLN_FW_DT_FP32 || dt == RBLN_FW_DT_FP16 || dt == RBLN_FW_DT_BF16;
}

bool all_zero(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    return std::all_of(b, b + n, [](unsigned char c) { return c == 0; });
}

// A boundary signature (the same checks for the binding's copy of it,
// which must then equal it byte for byte).
const char* check_tensor(const rbln_fw_graph_tensor& t) {
    if (!is_dtype(t.dtype))
        return "unknown dtype";
    if (t.ndim < 1 || t.ndim > RBLN_FW_MAX_DIMS)
        return "ndim not 1..4";
    if (t.direction < RBLN_FW_GRAPH_IN || t.direction > RBLN_FW_GRAPH_INOUT)
        return "unknown direction";
    if (t.bytes == 0 || t.bytes > kVaLimit)
        return "bytes not 1..2^48";
    Wide reach = 0;
    for (unsigned d = 0; d < RBLN_FW_MAX_DIMS; d++) {
        if (d >= t.ndim) {
            if (t.shape[d] != 0 || t.stride[d] != 0)
                return "shape or stride beyond ndim not zero";
            continue;
        }
        if (t.shape[d] == 0 || t.shape[d] > kVaLimit)
            return "shape not 1..2^48";
        if (t.stride[d] < 0 || static_cast<std::uint64_t>(t.stride[d]) > kVaLimit)
            return "stride not 0..2^48";
        reach += static_cast<Wide>(t.shape[d] - 1) * t.stride[d];
    }
    if ((reach + 1) * simd::elem_size(t.dtype) > static_cast<Wide>(t.bytes))
        return "elements reach beyond bytes";
    return nullptr;
}

using Region = GraphRegion;

// What a node's operand slots are: used, written.
struct Slots {
    std::array<bool, RBLN_FW_GRAPH_OPERANDS> used{};
    std::array<bool, RBLN_FW_GRAPH_OPERANDS> written{};
};

Slots slots_of(std::uint32_t op, const rbln_fw_pkt_launch& l) {
    switch (op) {
    case RBLN_FW_PKT_LAUNCH: {
        const bool b = l.kernel == RBLN_FW_KERNEL_ADD || l.kernel == RBLN_FW_KERNEL_MUL ||
                       l.kernel == RBLN_FW_KERNEL_MATMUL;
        return {{true, b, true}, {false, false, true}};
    }
    case RBLN_FW_PKT_COPY:
    case RBLN_FW_PKT_COPY_STRIDED:
        return {{true, true, false}, {false, true, false}};
    default: // FILL
        return {{true, false, false}, {true, false, false}};
    }
}

std::size_t packet_size(std::uint32_t op) {
    switch (op) {
    case RBLN_FW_PKT_LAUNCH:
        return sizeof(rbln_fw_pkt_launch);
    case RBLN_FW_PKT_COPY:
        return sizeof(rbln_fw_pkt_copy);
    case RBLN_FW_PKT_COPY_STRIDED:
        return sizeof(rbln_fw_pkt_copy_strided);
    case RBLN_FW_PKT_FILL:
        return sizeof(rbln_fw_pkt_fill);
    default:
        return 0;
    }
}

// The node's packet with addresses resolved, checked as the packet
// itself would be, and the reach of each operand relative to its address.
struct Resolved {
    GraphNode node;
    std::array<TensorReach, RBLN_FW_GRAPH_OPERANDS> reach{};
};

const char* resolve(std::uint32_t op, const rbln_fw_graph_node& rec,
                    const std::array<std::uint64_t, RBLN_FW_GRAPH_OPERANDS>& addr, Resolved& r) {
    switch (op) {
    case RBLN_FW_PKT_LAUNCH: {
        rbln_fw_pkt_launch p = rec.pkt.launch;
        if (p.a != 0 || p.b != 0 || p.out != 0)
            return "an address field of the packet is not zero";
        p.a = addr[0];
        p.b = addr[1];
        p.out = addr[2];
        if (const char* why = check_launch(p))
            return why;
        const LaunchReach lr = launch_reach(p);
        r.reach = {lr.a, lr.b, lr.out};
        r.node.pkt = p;
        break;
    }
    case RBLN_FW_PKT_COPY: {
        rbln_fw_pkt_copy p = rec.pkt.copy;
        if (p.src != 0 || p.dst != 0)
            return "an address field of the packet is not zero";
        p.src = addr[0];
        p.dst = addr[1];
        if (const char* why = check_copy(p))
            return why;
        r.reach = {TensorReach{0, p.size}, TensorReach{0, p.size}, {}};
        r.node.pkt = p;
        break;
    }
    case RBLN_FW_PKT_COPY_STRIDED: {
        rbln_fw_pkt_copy_strided p = rec.pkt.copy_strided;
        if (p.src != 0 || p.dst != 0)
            return "an address field of the packet is not zero";
        p.src = addr[0];
        p.dst = addr[1];
        if (const char* why = check_copy_strided(p))
            return why;
        auto reach = [&](std::uint64_t pitch, std::uint64_t slice) {
            if (p.width == 0)
                return TensorReach{0, 0};
            return TensorReach{0, Wide{p.depth - 1U} * slice + Wide{p.height - 1U} * pitch +
                                      Wide{p.width}};
        };
        r.reach = {reach(p.src_pitch, p.src_slice), reach(p.dst_pitch, p.dst_slice), {}};
        r.node.pkt = p;
        break;
    }
    default: { // FILL
        rbln_fw_pkt_fill p = rec.pkt.fill;
        if (p.dst != 0)
            return "an address field of the packet is not zero";
        p.dst = addr[0];
        if (const char* why = check_fill(p))
            return why;
        r.reach = {TensorReach{0, p.size}, {}, {}};
        r.node.pkt = p;
        break;
    }
    }
    Wide bytes = 0;
    for (const TensorReach& t : r.reach)
        bytes += t.hi - t.lo;
    r.node.bytes = static_cast<std::uint64_t>(std::min<Wide>(bytes, ~std::uint64_t{0}));
    return nullptr;
}

std::optional<GraphError> check_node(std::uint32_t i, const rbln_fw_graph_node& rec,
                                     const std::vector<Region>& boundaries, const Region& exec,
                                     GraphNode& out) {
    const std::uint32_t op = rec.op;
    const std::size_t size = packet_size(op);
    if (size == 0)
        return err(RBLN_FW_GRAPH_E_NODE, i, "unknown node op");
    if (rec.reserved0 != 0 || rec.reserved1 != 0)
        return err(RBLN_FW_GRAPH_E_NODE, i, "reserved field of the node not zero");
    std::uint32_t hdr = 0;
    std::memcpy(&hdr, rec.pkt.bytes, sizeof(hdr));
    if (hdr != RBLN_FW_PKT_HDR(op, 0, size))
        return err(RBLN_FW_GRAPH_E_NODE, i, "packet header does not match the op");
    if (!all_zero(rec.pkt.bytes + size, sizeof(rec.pkt.bytes) - size))
        return err(RBLN_FW_GRAPH_E_NODE, i, "bytes past the packet not zero");

    const Slots slots = slots_of(op, rec.pkt.launch);
    std::array<const Region*, RBLN_FW_GRAPH_OPERANDS> region{};
    std::array<std::uint64_t, RBLN_FW_GRAPH_OPERANDS> addr{};
    for (unsigned s = 0; s < RBLN_FW_GRAPH_OPERANDS; s++) {
        const rbln_fw_graph_reloc& rl = rec.reloc[s];
        if (!slots.used[s]) {
            if (rl.kind != RBLN_FW_GRAPH_RELOC_NONE || rl.index != 0 || rl.offset != 0)
                return err(RBLN_FW_GRAPH_E_RELOC, i, "relocation for an operand the op lacks");
            continue;
        }
        switch (rl.kind) {
        case RBLN_FW_GRAPH_RELOC_BOUNDARY:
            if (rl.index >= boundaries.size())
                return err(RBLN_FW_GRAPH_E_RELOC, i, "boundary index out of range");
            region[s] = &boundaries[rl.index];
            break;
        case RBLN_FW_GRAPH_RELOC_EXEC:
            if (rl.index != 0)
                return err(RBLN_FW_GRAPH_E_RELOC, i, "index of an execution storage relocation");
            region[s] = &exec;
            break;
        default:
            return err(RBLN_FW_GRAPH_E_RELOC, i, "operand without a relocation, or unknown kind");
        }
        if (rl.offset > region[s]->bytes)
            return err(RBLN_FW_GRAPH_E_RELOC_RANGE, i, "relocation offset beyond its region");
        addr[s] = region[s]->base + rl.offset; // base + bytes <= 2^48: no overflow
    }
    Resolved r;
    if (const char* why = resolve(op, rec, addr, r))
        return err(RBLN_FW_GRAPH_E_NODE, i, why);
    for (unsigned s = 0; s < RBLN_FW_GRAPH_OPERANDS; s++) {
        if (region[s] == nullptr)
            continue;
        const Wide off = rec.reloc[s].offset;
        if (off + r.reach[s].lo < 0 || off + r.reach[s].hi > Wide{region[s]->bytes})
            return err(RBLN_FW_GRAPH_E_RELOC_RANGE, i, "operand reaches outside its region");
        if (slots.written[s] && !region[s]->writable)
            return err(RBLN_FW_GRAPH_E_RELOC_WRITE_IN, i, "node writes an IN boundary");
    }
    out = r.node;
    return std::nullopt;
}

} // namespace

// --- validation ---------------------------------------------------------------------

std::optional<GraphError> check_graph_packet(const rbln_fw_pkt_graph_exec& p) {
    if (RBLN_FW_PKT_FLAGS(p.hdr) != 0 || p.reserved != 0)
        return err(RBLN_FW_GRAPH_E_PACKET, 0, "packet flags or reserved field not zero");
    if ((p.flags & ~kKnownFlags) != 0)
        return err(RBLN_FW_GRAPH_E_PACKET, 0, "unknown GRAPH_EXEC flags");
    if (p.definition % RBLN_FW_GRAPH_ALIGN != 0 || p.boundaries % 8 != 0)
        return err(RBLN_FW_GRAPH_E_PACKET, 0, "definition or boundary table misaligned");
    if (p.exec > kVaLimit || p.exec_bytes > kVaLimit - p.exec)
        return err(RBLN_FW_GRAPH_E_PACKET, 0, "execution storage beyond 48-bit VAs");
    if (p.boundary_count > RBLN_FW_GRAPH_MAX_BOUNDARIES)
        return err(RBLN_FW_GRAPH_E_COUNT, RBLN_FW_GRAPH_SEC_BOUNDARIES,
                   "boundary_count beyond the limit");
    return std::nullopt;
}

std::optional<GraphError> check_graph_object(const rbln_fw_graph_obj& obj) {
    if (obj.magic != RBLN_FW_GRAPH_MAGIC)
        return err(RBLN_FW_GRAPH_E_MAGIC, 0, "not a Definition object (magic)");
    if (obj.reserved0 != 0 || obj.reserved1 != 0)
        return err(RBLN_FW_GRAPH_E_OBJ_BYTES, 0, "reserved field of the object not zero");
    if (obj.definition_bytes < sizeof(rbln_fw_graph_image) ||
        obj.definition_bytes > RBLN_FW_GRAPH_MAX_BYTES ||
        obj.definition_bytes % RBLN_FW_GRAPH_ALIGN != 0)
        return err(RBLN_FW_GRAPH_E_OBJ_BYTES, 0,
                   "definition_bytes not a multiple of 16 in 64..RBLN_FW_GRAPH_MAX_BYTES");
    return std::nullopt;
}

std::optional<GraphError> check_graph(const rbln_fw_pkt_graph_exec& p, const rbln_fw_graph_obj& obj,
                                      std::span<const std::byte> image,
                                      std::span<const std::byte> bindings, GraphPlan& plan) {
    if (image.size() != obj.definition_bytes || image.size() < sizeof(rbln_fw_graph_image))
        return err(RBLN_FW_GRAPH_E_OBJ_BYTES, 0, "image copy of the wrong size");
    const auto h = load<rbln_fw_graph_image>(image, 0);
    // O(1) framing.
    if (h.total_bytes != obj.definition_bytes)
        return err(RBLN_FW_GRAPH_E_TOTAL_BYTES, 0, "total_bytes differs from definition_bytes");
    if (h.full_key != obj.full_key)
        return err(RBLN_FW_GRAPH_E_KEY, 0, "the object frames another Definition (full_key)");
    if (h.version != RBLN_FW_GRAPH_VERSION || h.reserved != 0)
        return err(RBLN_FW_GRAPH_E_VERSION, 0, "unknown image version or reserved not zero");
    // Counts.
    if (h.node_count == 0 || h.node_count > RBLN_FW_GRAPH_MAX_NODES)
        return err(RBLN_FW_GRAPH_E_COUNT, RBLN_FW_GRAPH_SEC_NODES, "node_count not 1..4096");
    if (h.edge_count > RBLN_FW_GRAPH_MAX_EDGES)
        return err(RBLN_FW_GRAPH_E_COUNT, RBLN_FW_GRAPH_SEC_FANIN_PRODS, "edge_count > 65536");
    if (h.root_count == 0 || h.root_count > h.node_count)
        return err(RBLN_FW_GRAPH_E_COUNT, RBLN_FW_GRAPH_SEC_ROOTS, "root_count not 1..node_count");
    if (h.boundary_count > RBLN_FW_GRAPH_MAX_BOUNDARIES)
        return err(RBLN_FW_GRAPH_E_COUNT, RBLN_FW_GRAPH_SEC_BOUNDARIES, "boundary_count > 256");
    if (h.boundary_count != p.boundary_count)
        return err(RBLN_FW_GRAPH_E_BOUNDARY_COUNT, h.boundary_count,
                   "the packet binds another number of boundary tensors");
    if (h.execution_storage_bytes > p.exec_bytes)
        return err(RBLN_FW_GRAPH_E_EXEC_BYTES, 0, "execution storage smaller than the image needs");
    // Sections: inside the image, after its header, aligned.
    const std::array<std::uint64_t, RBLN_FW_GRAPH_SECTIONS> count{
        h.node_count, std::uint64_t{h.node_count} + 1, h.edge_count, h.root_count,
        h.boundary_count};
    for (std::uint32_t s = 0; s < RBLN_FW_GRAPH_SECTIONS; s++) {
        const std::uint64_t off = h.off[s];
        if (off < sizeof(rbln_fw_graph_image) || off > h.total_bytes ||
            count[s] > (h.total_bytes - off) / kElem[s])
            return err(RBLN_FW_GRAPH_E_SECTION, s, "section outside the image");
        if (off % kAlign[s] != 0)
            return err(RBLN_FW_GRAPH_E_ALIGN, s, "section offset misaligned");
    }
    const std::uint32_t n = h.node_count;
    const std::size_t rows = h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS];
    const std::size_t prods = h.off[RBLN_FW_GRAPH_SEC_FANIN_PRODS];
    const std::size_t roots = h.off[RBLN_FW_GRAPH_SEC_ROOTS];
    // Topology: CSR rows from 0 to edge_count, producers below consumers.
    plan.level.assign(n, 0);
    std::uint32_t levels = 1;
    std::uint32_t prev = load<std::uint32_t>(image, rows);
    if (prev != 0)
        return err(RBLN_FW_GRAPH_E_FANIN, 0, "fan-in rows do not start at 0");
    for (std::uint32_t i = 0; i < n; i++) {
        const auto next = load<std::uint32_t>(image, rows + (std::size_t{i} + 1) * 4);
        if (next < prev || next > h.edge_count)
            return err(RBLN_FW_GRAPH_E_FANIN, i, "fan-in rows not monotone within edge_count");
        for (std::uint32_t e = prev; e < next; e++) {
            const auto prod = load<std::uint16_t>(image, prods + std::size_t{e} * 2);
            if (prod >= i)
                return err(RBLN_FW_GRAPH_E_CYCLE, i, "a producer is not below its consumer");
            plan.level[i] = std::max(plan.level[i], plan.level[prod] + 1);
        }
        levels = std::max(levels, plan.level[i] + 1);
        prev = next;
    }
    if (prev != h.edge_count)
        return err(RBLN_FW_GRAPH_E_FANIN, n, "fan-in rows do not end at edge_count");
    // Roots: exactly the nodes without fan-in, ascending.
    std::uint32_t r = 0;
    for (std::uint32_t i = 0; i < n; i++) {
        const auto begin = load<std::uint32_t>(image, rows + std::size_t{i} * 4);
        const auto end = load<std::uint32_t>(image, rows + (std::size_t{i} + 1) * 4);
        if (begin != end)
            continue;
        if (r >= h.root_count || load<std::uint16_t>(image, roots + std::size_t{r} * 2) != i)
            return err(RBLN_FW_GRAPH_E_ROOTS, r, "roots are not the nodes without fan-in");
        r++;
    }
    if (r != h.root_count)
        return err(RBLN_FW_GRAPH_E_ROOTS, r, "roots are not the nodes without fan-in");
    // Boundaries: signatures well formed, bound as they are.
    if (bindings.size() != std::size_t{p.boundary_count} * kBinding)
        return err(RBLN_FW_GRAPH_E_BINDING, 0, "boundary table copy of the wrong size");
    std::vector<Region>& regions = plan.regions;
    regions.resize(h.boundary_count);
    for (std::uint32_t b = 0; b < h.boundary_count; b++) {
        const auto sig = load<rbln_fw_graph_tensor>(image, h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] +
                                                               std::size_t{b} * kTensor);
        if (const char* why = check_tensor(sig))
            return err(RBLN_FW_GRAPH_E_SIGNATURE, b, why);
        const auto bind = load<rbln_fw_graph_binding>(bindings, std::size_t{b} * kBinding);
        if (bind.reserved != 0 || std::memcmp(&bind.tensor, &sig, kTensor) != 0)
            return err(RBLN_FW_GRAPH_E_BINDING, b, "the binding differs from the signature");
        if (bind.va > kVaLimit || sig.bytes > kVaLimit - bind.va)
            return err(RBLN_FW_GRAPH_E_BINDING, b, "bound tensor beyond 48-bit VAs");
        regions[b] = {bind.va, sig.bytes, sig.direction != RBLN_FW_GRAPH_IN};
    }
    // Nodes: records well formed, every operand inside its region.
    const Region exec{p.exec, h.execution_storage_bytes, true};
    plan.nodes.resize(n);
    for (std::uint32_t i = 0; i < n; i++) {
        const auto rec = load<rbln_fw_graph_node>(image, h.off[RBLN_FW_GRAPH_SEC_NODES] +
                                                             std::size_t{i} * kNode);
        if (auto e = check_node(i, rec, regions, exec, plan.nodes[i]))
            return e;
    }
    // Levels, in index order within each (a counting sort).
    plan.level_begin.assign(std::size_t{levels} + 1, 0);
    for (std::uint32_t i = 0; i < n; i++)
        plan.level_begin[plan.level[i] + 1]++;
    for (std::uint32_t l = 0; l < levels; l++)
        plan.level_begin[l + 1] += plan.level_begin[l];
    plan.order.resize(n);
    plan.next.assign(plan.level_begin.begin(), plan.level_begin.end() - 1);
    for (std::uint32_t i = 0; i < n; i++)
        plan.order[plan.next[plan.level[i]]++] = static_cast<std::uint16_t>(i);
    return std::nullopt;
}

// --- running ------------------------------------------------------------------------

PacketResult run_graph_node(const GraphNode& node, PortMemory& mem, DmaScratch& scratch,
                            const Cancel& cancel, ChipletEngine& chiplet, RingCounters& counters) {
    std::uint64_t moved = 0;
    auto dma_error = [&]() {
        if (!chiplet.dma_error.exchange(false))
            return false;
        counters.dma_errors++;
        return true;
    };
    PacketResult r;
    if (const auto* l = std::get_if<rbln_fw_pkt_launch>(&node.pkt)) {
        const PortMemory::Scope hold(mem);
        r = run_launch(*l, mem, cancel);
    } else if (dma_error()) {
        r = {RBLN_FW_JOB_DMA_ERROR, {}, "DMA error", false};
    } else {
        const PortMemory::Scope hold(mem);
        if (const auto* c = std::get_if<rbln_fw_pkt_copy>(&node.pkt))
            r = run_copy(*c, mem, scratch, cancel, moved);
        else if (const auto* s = std::get_if<rbln_fw_pkt_copy_strided>(&node.pkt))
            r = run_copy_strided(*s, mem, scratch, cancel, moved);
        else
            r = run_fill(std::get<rbln_fw_pkt_fill>(node.pkt), mem, scratch, cancel, moved);
    }
    counters.dma_bytes += moved;
    return r;
}

// --- chiplet helpers ------------------------------------------------------------------

ChipletHelpers::ChipletHelpers(Mmu& mmu, std::span<ChipletEngine> chiplets, RingCounters& counters,
                               const RingHost& clock)
    : mmu_(mmu), chiplets_(chiplets), counters_(counters), clock_(clock) {
    for (std::size_t c = 0; c < chiplets.size(); c++)
        helpers_.push_back(std::make_unique<Helper>());
}

ChipletHelpers::~ChipletHelpers() {
    for (auto& h : helpers_) {
        const std::lock_guard<std::mutex> lk(h->mu);
        stop_ = true;
    }
    for (auto& h : helpers_) {
        h->cv.notify_all();
        if (h->thread.joinable())
            h->thread.join();
    }
}

ChipletEngine& ChipletHelpers::chiplet(unsigned c) {
    return chiplets_[c];
}

void ChipletHelpers::post(unsigned c, const Task& t) {
    Helper& h = *helpers_.at(c);
    {
        const std::lock_guard<std::mutex> lk(h.mu);
        h.queue.push_back(t);
        if (!h.thread.joinable())
            h.thread = std::thread([this, c] { run(c); });
    }
    h.cv.notify_one();
}

void ChipletHelpers::run(unsigned c) {
    Helper& h = *helpers_[c];
    Mmu::Port port(mmu_);
    DmaScratch scratch;
    ChipletEngine& chiplet = chiplets_[c];
    while (true) {
        Task t;
        {
            std::unique_lock<std::mutex> lk(h.mu);
            h.cv.wait(lk, [&] { return stop_ || !h.queue.empty(); });
            if (h.queue.empty())
                return; // stopped with nothing queued
            t = h.queue.front();
            h.queue.pop_front();
        }
        if (t.cancel->load(std::memory_order_acquire)) {
            *t.result = PacketResult::stopped();
        } else {
            PortMemory mem(port, t.asid);
            const std::uint64_t t0 = clock_.card_time_ns();
            *t.result = run_graph_node(*t.node, mem, scratch, *t.cancel, chiplet, counters_);
            const std::uint64_t t1 = clock_.card_time_ns();
            chiplet.busy_ns += t1 > t0 ? t1 - t0 : 0;
            chiplet.graph_nodes++;
        }
        t.done->count_down();
    }
}

} // namespace rbln::emu
