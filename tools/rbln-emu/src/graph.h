// SPDX-License-Identifier: GPL-2.0
// GRAPH_EXEC (rbln_fw_graph.md): the validator of a Definition against the
// packet that runs it, the plan it produces (nodes with their addresses
// resolved, grouped in dependency levels), and the per-chiplet helpers
// that run a level's nodes on the other chiplets of a Rebel100 card.
//
// The validator is pure: it sees the packet, the object header and copies
// of the image and of the boundary table (the card copies them in first,
// so later host writes cannot change what was checked), and reads nothing
// an offset points at before the offset is checked.  The fuzz target
// tests/fuzz/emu_graph_fuzz.cpp drives it directly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <variant>
#include <vector>

#include "data_packets.h"
#include "engine.h"
#include "rbln_fw_graph.h"

namespace rbln::emu {

struct ChipletEngine;
struct RingCounters;
class RingHost;

// A refusal: RBLN_FW_GRAPH_E_* and its argument (node, section, boundary).
struct GraphError {
    std::uint32_t code = RBLN_FW_GRAPH_E_NONE;
    std::uint32_t arg = 0;
    const char* why = nullptr;
};

// A node ready to run: its packet with every address resolved.
struct GraphNode {
    std::variant<rbln_fw_pkt_launch, rbln_fw_pkt_copy, rbln_fw_pkt_copy_strided, rbln_fw_pkt_fill>
        pkt;
    std::uint64_t bytes = 0; // what its operands reach (the cost of a hand-off is worth it)
};

// A region relocations point into: a bound boundary tensor or the
// execution storage.
struct GraphRegion {
    std::uint64_t base = 0;
    std::uint64_t bytes = 0;
    bool writable = true;
};

struct GraphPlan {
    std::vector<GraphNode> nodes;
    // Nodes grouped by level (a node's level is one more than its highest
    // producer's; roots are level 0), ascending index within a level:
    // level L is order[level_begin[L] .. level_begin[L + 1]).
    std::vector<std::uint16_t> order;
    std::vector<std::uint32_t> level_begin;
    // Scratch of the validator, kept so that steady replays do not allocate.
    std::vector<std::uint32_t> level; // each node's level
    std::vector<std::uint32_t> next;  // counting sort: next slot of each level
    std::vector<GraphRegion> regions; // each boundary's
};

// The packet's own fields (no memory read yet).
std::optional<GraphError> check_graph_packet(const rbln_fw_pkt_graph_exec& p);
// The object header (32 bytes at p.definition): magic and
// definition_bytes; on success the image is definition_bytes long.
std::optional<GraphError> check_graph_object(const rbln_fw_graph_obj& obj);
// The image (definition_bytes, as copied from p.definition + 32) and the
// boundary table (p.boundary_count bindings, as copied from
// p.boundaries) against each other and the packet.  Fills `plan` (its
// vectors' capacity is reused) when it returns nullopt.
std::optional<GraphError> check_graph(const rbln_fw_pkt_graph_exec& p, const rbln_fw_graph_obj& obj,
                                      std::span<const std::byte> image,
                                      std::span<const std::byte> bindings, GraphPlan& plan);

// Runs one node on `mem` (which the caller does not hold; the node holds
// it while it translates and moves).  An injected DMA error of `chiplet`
// fails a COPY, COPY_STRIDED or FILL as it would the packet.  `cancelled`
// in the result when `cancel` was set meanwhile.
PacketResult run_graph_node(const GraphNode& node, PortMemory& mem, DmaScratch& scratch,
                            const Cancel& cancel, ChipletEngine& chiplet, RingCounters& counters);

// One helper thread per chiplet, each with its own MMU port, that runs
// nodes a command processor hands it: the chiplet's engines working for a
// graph that runs on another chiplet's ring.  Started at the first node;
// the destructor joins them (no ring may still hand nodes over).
class ChipletHelpers {
public:
    struct Task {
        const GraphNode* node = nullptr;
        std::uint32_t asid = 0;
        const Cancel* cancel = nullptr;
        PacketResult* result = nullptr;
        std::latch* done = nullptr;
    };

    ChipletHelpers(Mmu& mmu, std::span<ChipletEngine> chiplets, RingCounters& counters,
                   const RingHost& clock);
    ~ChipletHelpers();
    ChipletHelpers(const ChipletHelpers&) = delete;
    ChipletHelpers& operator=(const ChipletHelpers&) = delete;
    ChipletHelpers(ChipletHelpers&&) = delete;
    ChipletHelpers& operator=(ChipletHelpers&&) = delete;

    // Queues `t` on chiplet `c`'s helper: it runs the node, adds its time
    // to the chiplet's busy_ns and graph_nodes, stores the result and
    // counts `done` down.  A task whose cancel is set when taken does not
    // run (result: stopped).
    void post(unsigned c, const Task& t);
    [[nodiscard]] unsigned chiplets() const { return static_cast<unsigned>(chiplets_.size()); }
    [[nodiscard]] ChipletEngine& chiplet(unsigned c);

private:
    struct Helper {
        std::mutex mu;
        std::condition_variable cv;
        std::deque<Task> queue;
        std::thread thread;
    };
    void run(unsigned c);

    Mmu& mmu_;
    std::span<ChipletEngine> chiplets_;
    RingCounters& counters_;
    const RingHost& clock_;
    bool stop_ = false; // under each helper's mu (set under all of them)
    std::vector<std::unique_ptr<Helper>> helpers_;
};

} // namespace rbln::emu
