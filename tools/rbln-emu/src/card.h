// SPDX-License-Identifier: GPL-2.0
// The card's firmware model (firmware-iface v1.3): control block, boot
// handshake, admin ring, event ring, telemetry and heartbeat, the MMU
// (mmu.h) with its admin requests, and the command rings (cmd_ring.h).
//
// Independent of the transport: it sees the control block (a span of the
// BAR), guest RAM through GuestMemory, and raises MSI-X vectors through a
// callback.  The transport calls doorbell() and tick(); the control
// interface calls the telemetry and fault methods.  Those calls and the
// admin ring run on one thread (the event loop); every command ring runs
// on a thread of its own (a CommandProcessor), which reaches the card only
// through the RingHost calls: card time, events (thread-safe), interrupts
// (the callback is called from ring threads too).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "bar_layout.h"
#include "cmd_ring.h"
#include "guest_memory.h"
#include "log.h"
#include "mmu.h"
#include "options.h"
#include "rbln_fw_admin.h"
#include "rbln_fw_ctrl.h"

namespace rbln::emu {

inline constexpr std::uint32_t kWholeCard = 0xffffffffU;
inline constexpr std::uint32_t kRecordSize = 64;
// A THERMAL event is posted when the card temperature rises to this.
inline constexpr std::int32_t kThermalWarnMc = 90000;

struct CardIdentity {
    Family family = Family::rebel100;
    BarLayout layout;
    std::uint32_t peer_id = 0;
    std::uint32_t num_vectors = 0;
    std::uint16_t iface_minor = RBLN_FW_IFACE_MINOR;
    std::string serial;
    std::array<std::uint8_t, 16> uuid{};
    std::string fw_version;
};

// Builds the identity of a card from the command line (serial derived if
// empty, uuid derived from the serial).
CardIdentity make_identity(const Options& opt, std::uint32_t peer_id);
std::string default_serial();
std::array<std::uint8_t, 16> uuid_from_serial(std::string_view serial);

struct ChipletTelemetry {
    std::int32_t temp_mc = 0;
    std::uint32_t clock_mhz = 0;
    std::uint32_t mem_clock_mhz = 0;
    std::uint64_t busy_ns = 0;
};

struct Telemetry {
    std::int32_t temp_mc = 45000;
    std::uint64_t power_uw = 75000000;
    std::array<ChipletTelemetry, RBLN_FW_MAX_CHIPLETS> chiplet{};
};

Telemetry default_telemetry();

struct CardStats {
    std::uint64_t doorbells = 0;
    std::uint64_t admin_requests = 0; // requests consumed (good and bad)
    std::uint64_t bad_requests = 0;
    std::uint64_t completions = 0;
    std::uint64_t events = 0;         // events written to the ring
    std::uint64_t events_dropped = 0; // events that found the ring full
    std::uint64_t irqs = 0;
    std::uint64_t cq_stalls = 0; // times the completion ring was full
    std::array<std::uint64_t, RBLN_FW_MAX_CHIPLETS> chiplet_resets{};
    // The MMU (from Mmu::stats(), see mmu.h).
    std::uint64_t mmu_faults = 0;
    std::uint64_t tlb_hits = 0;
    std::uint64_t tlb_misses = 0;
    std::uint64_t tlb_invalidations = 0;
    std::uint32_t vm_bound = 0; // ASIDs bound now
    // The command rings (cmd_ring.h).
    std::uint32_t rings_up = 0;        // rings set up now
    std::uint64_t jobs = 0;            // completion records written
    std::uint64_t jobs_failed = 0;     // ... with an error (not ABORTED)
    std::uint64_t jobs_cancelled = 0;  // ... of which CANCELLED (VM_ABORT)
    std::uint64_t jobs_aborted = 0;    // ... ABORTED
    std::uint64_t packets = 0;         // packets run
    std::uint64_t dma_bytes = 0;       // bytes moved by COPY, COPY_STRIDED, FILL
    std::uint64_t ring_cpl_stalls = 0; // times a ring's completion ring was full
    std::uint64_t ring_cpls_dropped = 0;
    std::uint64_t ring_irqs_moderated = 0; // job interrupts the host did not need
    std::uint64_t ring_irqs_backstop = 0;  // held back, then raised after the holdoff
    std::uint64_t ring_bad_tails = 0;
    std::uint64_t injected_hangs = 0;        // `fault hang` commands
    std::uint64_t injected_dma_errors = 0;   // DMA errors that hit a packet
    std::uint64_t injected_corrupt_cpls = 0; // completions corrupted
    std::uint64_t injected_lost_irqs = 0;    // job interrupts lost
    std::uint32_t hung = 0;                  // chiplet bit mask
    std::uint32_t dma_error_armed = 0;       // chiplet bit mask
    std::uint32_t corrupt_cpl_armed = 0;     // chiplet bit mask
    std::uint32_t lost_irq_armed = 0;        // chiplet bit mask
    std::uint32_t boot_faults_armed = 0;     // handshakes that will end in FAULT
    std::uint32_t reset_faults_armed = 0;    // resets the firmware will crash after
    // GRAPH_EXEC (rbln_fw_graph.md).
    std::uint64_t graph_execs = 0;                                 // passed the checks
    std::uint64_t graph_rejected = 0;                              // refused by them
    std::array<std::uint64_t, RBLN_FW_MAX_CHIPLETS> graph_nodes{}; // nodes each chiplet ran
};

class Card : private RingHost {
public:
    using IrqFn = std::function<void(unsigned vector)>;
    using ClockFn = std::function<std::uint64_t()>; // monotonic ns

    // `bar` must hold at least the control block; it is initialized here.
    // LOCAL pages of the MMU resolve into the rest of it (HBM); a page
    // beyond `bar` is BAD_ADDRESS.
    Card(CardIdentity identity, std::span<std::byte> bar, GuestMemory& ram, IrqFn irq, Logger& log,
         ClockFn clock = {});
    // Stops every command ring (their threads are gone when it returns).
    ~Card() override;
    Card(const Card&) = delete;
    Card& operator=(const Card&) = delete;
    Card(Card&&) = delete;
    Card& operator=(Card&&) = delete;

    // Transport entry points.
    void doorbell(unsigned vector);
    void tick(); // about every 100 ms: heartbeat, retry a stalled ring
    // Stops the command rings without writing anything (before the
    // transport goes away).
    void shutdown();

    // Queries.
    [[nodiscard]] std::uint32_t state() const { return state_; }
    [[nodiscard]] std::uint32_t fault_code() const { return fault_code_; }
    [[nodiscard]] const std::string& fault_reason() const { return fault_reason_; }
    [[nodiscard]] std::uint64_t heartbeat() const { return heartbeat_; }
    [[nodiscard]] CardStats stats() const;
    [[nodiscard]] const CardIdentity& identity() const { return id_; }
    // A snapshot; busy_ns is the chiplets' time running jobs (settable).
    [[nodiscard]] Telemetry telemetry() const;
    [[nodiscard]] bool no_response() const { return no_response_.load(); }
    [[nodiscard]] bool rings_configured() const { return rings_.has_value(); }
    [[nodiscard]] bool ring_up(unsigned chiplet) const;
    // Card time: ns since the card started (TIMESTAMP, telemetry, events).
    [[nodiscard]] std::uint64_t card_time() const { return now_ns() - start_ns_; }
    // Every card-side access by VA goes through it.  Bindings are dropped
    // by the card's reset and by a new handshake.
    [[nodiscard]] Mmu& mmu() { return mmu_; }
    [[nodiscard]] const Mmu& mmu() const { return mmu_; }

    // Control interface.
    void set_card_temp(std::int32_t temp_mc);
    void set_power(std::uint64_t power_uw);
    // Throws std::out_of_range for a chiplet index >= chiplet count.  The
    // busy time is set too unless `with_busy` is false.
    void set_chiplet(unsigned index, const ChipletTelemetry& values, bool with_busy = true);
    void set_no_response(bool on);
    // The card falls off the bus (surprise removal): it stops at once and
    // writes nothing more (no completion, event, heartbeat or interrupt;
    // the command rings' threads are gone when it returns), forgets its
    // rings and address spaces, and its control block reads all-ones, as a
    // PCIe read of a function that is gone does.  Host writes to the BAR
    // still land there but nothing reads them.  Until power_cycle().
    void surprise_remove();
    // A card is plugged (again): the firmware starts from scratch in
    // RESET with a fresh control block (identity, no fault), every fault
    // disarmed, no rings, no address spaces.
    void power_cycle();
    [[nodiscard]] bool removed() const { return removed_; }
    // The firmware "crashes": FAULT with `code` (non-zero) and `reason`.
    void inject_fw_fault(std::uint32_t code, std::string_view reason);
    // Command-ring faults of a chiplet (std::out_of_range for a bad index).
    // hang: the ring takes no job and writes no completion until RING_STOP,
    // RESET_CHIPLET, a card reset or clear_ring_faults().  dma_error: the
    // next COPY, COPY_STRIDED or FILL of the ring fails its job with
    // DMA_ERROR.  corrupt_cpl: the next job the ring takes does not run,
    // its completion has seqno ~seqno and status 0xffff, and the ring then
    // stalls as if hung.
    void inject_hang(unsigned chiplet);
    void inject_dma_error(unsigned chiplet);
    void inject_corrupt_cpl(unsigned chiplet);
    // lost_irq: the next job interrupt the chiplet's ring raises (at once
    // or after the holdoff) never reaches the host; the record is written
    // as usual.
    void inject_lost_irq(unsigned chiplet);
    void clear_ring_faults();
    // Faults of the firmware's start, for the host's recovery: the next
    // `count` boot handshakes end in FAULT (INTERNAL, "injected boot
    // fault") instead of READY; the next `count` host resets reach RESET
    // and the firmware then crashes at once (INTERNAL, "injected fault
    // after reset").  clear_start_faults() disarms both.
    void inject_boot_faults(std::uint32_t count);
    void inject_reset_faults(std::uint32_t count);
    void clear_start_faults();
    // Interrupt holdoff of the command rings (0: off; default
    // kDefaultIrqHoldoff): see RingDeps::irq_holdoff_ns.
    void set_irq_holdoff(std::chrono::nanoseconds holdoff) {
        irq_holdoff_ns_.store(holdoff.count(), std::memory_order_relaxed);
    }
    static constexpr std::chrono::microseconds kDefaultIrqHoldoff{200};
    // GRAPH_EXEC spreads a dependency level's nodes over the chiplets once
    // their operands reach this many bytes together (below, the hand-off
    // costs more than it saves); 0 spreads every level of two nodes or more.
    void set_graph_spread_bytes(std::uint64_t bytes) { graph_spread_bytes_.store(bytes); }
    static constexpr std::uint64_t kDefaultGraphSpreadBytes = 256 * 1024;

    static const char* state_name(std::uint32_t state);

private:
    // A ring the card writes (completions, events).
    struct ProducerRing {
        std::uint64_t addr = 0;
        std::uint32_t tail = 0;
        std::uint16_t phase = RBLN_FW_REC_PHASE;
    };

    // The ring configuration accepted at the handshake (a snapshot: later
    // host writes to the control block cannot move the rings).
    struct Rings {
        std::uint32_t entries = 0;
        std::uint64_t sq_addr = 0;
        std::uint32_t sq_head = 0;
        ProducerRing cq;
        ProducerRing ev;
        std::uint32_t event_seq = 0;
        bool cq_stalled = false;
        std::optional<std::uint32_t> reported_bad_tail;
    };

    struct Outcome {
        std::uint16_t status = RBLN_FW_ST_OK;
        std::uint32_t data_len = 0;
        std::array<std::uint64_t, 6> result{};
        std::optional<std::uint32_t> reset_chiplet; // event after the completion
        const char* why = nullptr;                  // for the log on errors
    };

    void init_control_block();
    void handle_ctrl();
    void handshake(std::uint32_t host_ctrl, std::uint32_t host_gen);
    void reset();
    void drop_bindings(); // and the whole TLB
    void enter_fault(std::uint32_t code, std::string_view reason);
    void set_state(std::uint32_t state);
    void process_admin();
    Outcome execute(const rbln_fw_admin_req& req);
    static Outcome failed(std::uint16_t status, const char* why);
    Outcome vm_bind(const rbln_fw_admin_req& req);
    Outcome vm_unbind(const rbln_fw_admin_req& req);
    Outcome vm_abort(const rbln_fw_admin_req& req);
    Outcome tlb_invalidate(const rbln_fw_admin_req& req);
    Outcome debug_access(const rbln_fw_admin_req& req);
    Outcome ring_setup(const rbln_fw_admin_req& req);
    Outcome ring_stop(const rbln_fw_admin_req& req);
    // RING_STOP semantics (ABORTED completions) or silently; clears the hang.
    void stop_ring(unsigned chiplet, CommandProcessor::StopMode mode);
    void stop_rings(CommandProcessor::StopMode mode);
    void kick_rings();

    // RingHost (ring threads).
    [[nodiscard]] std::uint64_t card_time_ns() const override { return card_time(); }
    void ring_mmu_fault(unsigned ring, std::uint32_t asid, const MmuFault& fault) override;
    void ring_asid_aborted(unsigned ring, std::uint32_t asid) override;
    void ring_irq() override;
    void ring_bad_tail(unsigned ring, std::uint32_t tail) override;
    [[nodiscard]] bool ring_frozen() const override { return no_response_.load(); }
    // An MMU fault of the debug access: the event, before the completion.
    void report_mmu_fault(std::uint32_t asid, const MmuFault& fault, std::uint64_t source,
                          std::uint32_t chiplet);
    void post_event(std::uint16_t type, std::uint32_t code, std::uint32_t chiplet,
                    std::span<const std::uint64_t> data);
    bool write_record(ProducerRing& ring, std::uint32_t consumer_head, const void* rec);
    void flush_irqs();           // any thread
    void raise(unsigned vector); // any thread
    [[nodiscard]] std::uint64_t now_ns() const;

    // Host-written control-block fields are read with acquire, card-written
    // ones published with release (the host polls them).
    template <typename T> static T host_read(T& field) {
        return std::atomic_ref<T>(field).load(std::memory_order_acquire);
    }
    template <typename T> static void card_write(T& field, std::type_identity_t<T> value) {
        std::atomic_ref<T>(field).store(value, std::memory_order_release);
    }

    CardIdentity id_;
    rbln_fw_ctrl* ctrl_;
    GuestMemory& ram_;
    IrqFn irq_;
    Logger& log_;
    ClockFn clock_;
    std::uint64_t start_ns_ = 0;

    std::uint32_t state_ = RBLN_FW_STATE_RESET;
    std::uint32_t fault_code_ = RBLN_FW_FAULT_NONE;
    std::string fault_reason_;
    std::uint64_t heartbeat_ = 0;
    std::uint32_t acked_gen_ = 0;
    std::uint32_t boot_faults_ = 0;  // armed start faults (control and doorbells
    std::uint32_t reset_faults_ = 0; // run on the event loop alone)
    std::atomic<std::uint32_t> pending_irqs_{0};
    std::atomic<bool> no_response_{false};
    bool removed_ = false; // surprise_remove() until power_cycle()
    std::optional<Rings> rings_;
    Telemetry telemetry_;
    CardStats stats_;
    // Written from ring threads too.
    std::mutex event_mu_; // the event ring: its tail, phase and seq
    std::atomic<std::uint64_t> events_{0};
    std::atomic<std::uint64_t> events_dropped_{0};
    std::atomic<std::uint64_t> irqs_{0};
    Mmu mmu_;
    // The command rings: one processor per chiplet that has a ring.
    SignalHub hub_;
    RingCounters ring_counters_;
    std::atomic<std::int64_t> irq_holdoff_ns_{std::chrono::nanoseconds(kDefaultIrqHoldoff).count()};
    std::array<ChipletEngine, RBLN_FW_MAX_CHIPLETS> engines_;
    std::atomic<std::uint64_t> graph_spread_bytes_{kDefaultGraphSpreadBytes};
    // Outlives the processors that hand it nodes (declared before them).
    std::unique_ptr<ChipletHelpers> helpers_;
    // Changed by the admin thread only; ring threads read the slots under
    // procs_mu_ (ring_asid_aborted()), so a slot changes under it too.  A
    // processor is stopped after it left its slot, never under the lock.
    std::mutex procs_mu_;
    std::array<std::unique_ptr<CommandProcessor>, RBLN_FW_MAX_CHIPLETS> procs_;
};

} // namespace rbln::emu
