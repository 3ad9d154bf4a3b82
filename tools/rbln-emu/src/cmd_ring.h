// SPDX-License-Identifier: GPL-2.0
// A chiplet's command processor (rbln_fw_cmd.md): one thread per command
// ring that takes the ring's jobs in order, runs their packets in order
// through the MMU (DMA engine, built-in kernels, fences, timestamps) and
// writes one completion record per job.
//
// The processor knows the card only through RingHost (card time, events,
// interrupts) and shares with the card: the MMU (its own Mmu::Port), the
// chiplet's injected faults and busy time (ChipletEngine), counters, and
// the SignalHub that wakes WAITs when a SIGNAL or a doorbell may have
// changed memory.  The card's thread (the event loop) creates, kicks and
// stops processors; stop() returns only once the thread is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "data_packets.h"
#include "engine.h"
#include "graph.h"
#include "guest_memory.h"
#include "log.h"
#include "mmu.h"
#include "rbln_fw_cmd.h"
#include "rbln_fw_ctrl.h"

namespace rbln::emu {

// A ring's memory, accepted by RING_SETUP (host RAM, validated).
struct RingConfig {
    unsigned index = 0;
    std::uint32_t entries = 0;
    std::uint64_t jobs_addr = 0;
    std::uint64_t cpls_addr = 0;
    std::uint64_t ctrl_addr = 0;
};

// What outlives a chiplet's ring: injected faults and its busy time.
struct ChipletEngine {
    std::atomic<bool> hang{false};        // take no job, write no completion
    std::atomic<bool> dma_error{false};   // the next DMA packet fails
    std::atomic<bool> corrupt_cpl{false}; // the next completion is garbage, then a hang
    std::atomic<bool> lost_irq{false};    // the next job interrupt raised never arrives
    std::atomic<std::uint64_t> busy_ns{0};
    std::atomic<std::uint64_t> graph_nodes{0}; // GRAPH_EXEC nodes this chiplet ran
};

// Card-wide counters of every ring.
struct RingCounters {
    std::atomic<std::uint64_t> jobs{0};           // completion records written
    std::atomic<std::uint64_t> jobs_failed{0};    // ... with an error but ABORTED
    std::atomic<std::uint64_t> jobs_aborted{0};   // ... with ABORTED
    std::atomic<std::uint64_t> jobs_cancelled{0}; // ... with CANCELLED (VM_ABORT)
    std::atomic<std::uint64_t> packets{0};        // packets run (good and bad)
    std::atomic<std::uint64_t> dma_bytes{0};      // bytes COPY/COPY_STRIDED/FILL moved
    std::atomic<std::uint64_t> cpl_stalls{0};     // times a completion ring was full
    std::atomic<std::uint64_t> cpls_dropped{0};   // ABORTED records that found no room
    std::atomic<std::uint64_t> irqs_moderated{0}; // job interrupts not raised: host still reading
    std::atomic<std::uint64_t> irqs_backstop{0};  // held-back interrupts raised after the holdoff
    std::atomic<std::uint64_t> bad_tails{0};      // job_tail >= entries seen
    std::atomic<std::uint64_t> hangs{0};          // injected hangs that held a ring
    std::atomic<std::uint64_t> dma_errors{0};     // injected DMA errors consumed
    std::atomic<std::uint64_t> corrupt_cpls{0};   // injected corruptions consumed
    std::atomic<std::uint64_t> lost_irqs{0};      // injected lost interrupts consumed
    std::atomic<std::uint64_t> graph_execs{0};    // GRAPH_EXEC packets that passed the checks
    std::atomic<std::uint64_t> graph_rejected{0}; // ... refused by them (BAD_PACKET + detail)
};

// Wakes waiters when memory a WAIT watches may have changed.
class SignalHub {
public:
    void notify();
    [[nodiscard]] std::uint64_t generation();
    // Until the generation differs from `seen`, `stop` is true, or `d` passed.
    template <typename Stop> void wait(std::uint64_t seen, std::chrono::nanoseconds d, Stop stop) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_for(lk, d, [&] { return gen_ != seen || stop(); });
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::uint64_t gen_ = 0;
};

// The card, as its command processors see it.  Called from ring threads.
class RingHost {
public:
    RingHost() = default;
    virtual ~RingHost() = default;
    RingHost(const RingHost&) = delete;
    RingHost& operator=(const RingHost&) = delete;
    RingHost(RingHost&&) = delete;
    RingHost& operator=(RingHost&&) = delete;

    // Card time (TIMESTAMP, start_ns/end_ns, telemetry and heartbeat).
    [[nodiscard]] virtual std::uint64_t card_time_ns() const = 0;
    // An access of the ring's job faulted: the MMU_FAULT event.
    virtual void ring_mmu_fault(unsigned ring, std::uint32_t asid, const MmuFault& fault) = 0;
    // The ring's job of `asid` faulted with FAULT_ABORTS and marked the
    // ASID: a job of it running on another ring stops as at VM_ABORT.
    virtual void ring_asid_aborted(unsigned ring, std::uint32_t asid) = 0;
    // RBLN_FW_IRQ_RING.
    virtual void ring_irq() = 0;
    // The host wrote a job_tail >= entries (reported once per value).
    virtual void ring_bad_tail(unsigned ring, std::uint32_t tail) = 0;
    // The firmware hangs (no-response): take no job, write no completion.
    [[nodiscard]] virtual bool ring_frozen() const = 0;
};

struct RingDeps {
    RingHost& host;
    GuestMemory& ram;
    Mmu& mmu;
    Logger& log;
    ChipletEngine& chiplet;
    RingCounters& counters;
    SignalHub& hub;
    // Interrupt holdoff (ns, 0: off): a held-back job interrupt whose
    // records are still unread this long after the ring went idle is
    // raised anyway (see rbln_fw_cmd.md, "Interrupt moderation").
    const std::atomic<std::int64_t>& irq_holdoff_ns;
    // The card's firmware-iface minor version (FAULT_ABORTS from 3 on,
    // GRAPH_EXEC from 4 on).
    std::uint16_t iface_minor = RBLN_FW_IFACE_MINOR;
    // GRAPH_EXEC: every chiplet's helper (nullptr: every node runs on the
    // ring's own chiplet), and the operand bytes a dependency level must
    // reach before its nodes are spread over the chiplets.
    ChipletHelpers* helpers = nullptr;
    const std::atomic<std::uint64_t>* graph_spread_bytes = nullptr;
};

class CommandProcessor {
public:
    enum class StopMode {
        abort_jobs, // RING_STOP: the running job and the queued ones complete ABORTED
        silent,     // card reset, new handshake, firmware fault: write nothing more
    };

    // `cfg` is validated (host RAM, aligned).  Writes the card's fields of
    // the ring control (job_head, done_seqno, busy_ns = 0), then starts.
    CommandProcessor(const RingDeps& deps, const RingConfig& cfg);
    ~CommandProcessor(); // stop(silent)
    CommandProcessor(const CommandProcessor&) = delete;
    CommandProcessor& operator=(const CommandProcessor&) = delete;
    CommandProcessor(CommandProcessor&&) = delete;
    CommandProcessor& operator=(CommandProcessor&&) = delete;

    // Look again: the doorbell, the tick, a fault cleared.
    void kick();
    // Stops the thread (interrupting a WAIT or a long packet) and joins it.
    void stop(StopMode mode);
    // VM_ABORT (the Mmu already marks `asid`): if the running job is of
    // `asid`, interrupts it where a stop would; it then ends CANCELLED.
    // Queued jobs of `asid` see the mark when they are taken.
    void abort_asid(std::uint32_t asid);
    [[nodiscard]] const RingConfig& config() const { return cfg_; }

private:
    struct Job {
        rbln_fw_job desc{};
        std::uint64_t start_ns = 0;
    };
    struct Outcome {
        PacketResult result;
        std::uint32_t packet_offset = 0;
    };
    using Memory = PortMemory;

    void run();
    // Waits until neither hung nor frozen; false when stopped.
    bool wait_runnable();
    // Waits for a kick or `d`; false when stopped.
    bool wait_kick(std::chrono::nanoseconds d);
    // Idle with an interrupt owed: waits up to the holdoff for a doorbell;
    // if none came and records are still unread, raises the interrupt.
    // false when stopped.
    bool idle_with_irq_owed();
    // Raises the ring's job interrupt (unless an injected fault loses it).
    void raise_job_irq();
    [[nodiscard]] bool stopping() const { return stop_.load(std::memory_order_acquire); }
    // What an interrupted packet ends with: ABORTED (stopped) or CANCELLED.
    [[nodiscard]] PacketResult interrupted() const;
    Outcome execute(const Job& job, Mmu::Port& port);
    PacketResult packet(std::uint8_t op, std::uint8_t flags, std::uint32_t offset,
                        std::uint32_t bytes, Memory& mem);
    PacketResult wait_packet(const rbln_fw_pkt_wait& w, Memory& mem);
    PacketResult graph_packet(const rbln_fw_pkt_graph_exec& p, Memory& mem);
    // Reads [va, va + len) of the job's memory into `dst` (resized).
    std::optional<MmuFault> read_job(Memory& mem, std::uint64_t va, std::size_t len,
                                     std::vector<std::byte>& dst);
    // false when stopped before the record could be written.
    bool complete(const Job& job, const Outcome& out);
    void write_record(const rbln_fw_job_cpl& cpl);
    [[nodiscard]] bool cpl_room() const;
    // The stop: ABORTED for `running` (if any) and every queued job.
    void finish_stop(const Job* running);
    void account_busy(std::uint64_t start_ns, std::uint64_t end_ns);

    RingDeps deps_;
    RingConfig cfg_;
    std::byte* jobs_ = nullptr;
    std::byte* cpls_ = nullptr;
    rbln_fw_ring_ctrl* ctrl_ = nullptr;

    // Thread state.
    std::uint32_t head_ = 0;
    std::uint32_t cpl_tail_ = 0;
    bool irq_owed_ = false; // a job interrupt was held back and not raised since
    std::uint16_t phase_ = 1;
    std::uint64_t busy_ns_ = 0;
    std::uint32_t reported_tail_ = 0; // a bad tail reported (0: none)
    std::vector<std::byte> cmd_;      // the running job's command buffer
    std::vector<HostSpan> spans_;
    DmaScratch dma_;
    // GRAPH_EXEC: copies of the object's image and the boundary table, the
    // plan, and each node's result when a level is spread.
    std::vector<std::byte> graph_image_;
    std::vector<std::byte> graph_bindings_;
    GraphPlan plan_;
    std::vector<PacketResult> node_results_;

    std::mutex mu_;
    std::condition_variable cv_;
    bool kicked_ = false;
    StopMode mode_ = StopMode::silent;
    std::atomic<bool> stop_{false};
    // Long packets and WAITs look at it: set by stop() and by abort_asid()
    // for the running job's ASID; cleared (unless stopping) as a job starts.
    std::atomic<bool> cancel_{false};
    std::uint32_t running_asid_ = 0; // under mu_
    std::thread thread_;             // last: starts once everything above exists
};

} // namespace rbln::emu
