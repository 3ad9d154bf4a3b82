// SPDX-License-Identifier: GPL-2.0
// Card state machine: control block, handshake, reset, faults, events,
// telemetry and heartbeat.  Admin requests are in card_admin.cpp, the
// command rings' side of the card in card_rings.cpp.
#include "card.h"

#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

namespace rbln::emu {

// The layout the firmware-iface header promises (offsets in its comments).
static_assert(sizeof(rbln_fw_ctrl) == 0x1000);
static_assert(offsetof(rbln_fw_ctrl, uuid) == 0x020);
static_assert(offsetof(rbln_fw_ctrl, serial) == 0x030);
static_assert(offsetof(rbln_fw_ctrl, fw_version) == 0x050);
static_assert(offsetof(rbln_fw_ctrl, bar_size) == 0x070);
static_assert(offsetof(rbln_fw_ctrl, hbm) == 0x078);
static_assert(offsetof(rbln_fw_ctrl, fw_state) == 0x0f8);
static_assert(offsetof(rbln_fw_ctrl, fault_reason) == 0x100);
static_assert(offsetof(rbln_fw_ctrl, host_ack) == 0x140);
static_assert(offsetof(rbln_fw_ctrl, heartbeat) == 0x148);
static_assert(offsetof(rbln_fw_ctrl, host_ctrl) == 0x150);
static_assert(offsetof(rbln_fw_ctrl, admin_sq_addr) == 0x160);
static_assert(offsetof(rbln_fw_ctrl, admin_sq_tail) == 0x178);
static_assert(offsetof(rbln_fw_ctrl, event_head) == 0x180);
static_assert(sizeof(rbln_fw_admin_req) == kRecordSize);
static_assert(sizeof(rbln_fw_admin_cpl) == kRecordSize);
static_assert(sizeof(rbln_fw_event) == kRecordSize);
// Card-written records publish their flags (phase) last; same offset in both.
static_assert(offsetof(rbln_fw_admin_cpl, flags) == 6);
static_assert(offsetof(rbln_fw_event, flags) == 6);

namespace {

constexpr std::size_t kFlagsOffset = 6;
constexpr const char* kFwVersion = "rbln-emu 0.1.0";

template <std::size_t N> void copy_string(char (&dst)[N], std::string_view src) {
    std::memset(dst, 0, N);
    std::memcpy(dst, src.data(), std::min(src.size(), N - 1));
}

std::uint64_t fnv1a(std::string_view s, std::uint64_t basis) {
    std::uint64_t h = basis;
    for (char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

} // namespace

std::string default_serial() {
    const auto t =
        static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    const std::uint64_t mix = t ^ (static_cast<std::uint64_t>(::getpid()) << 40);
    std::array<char, 32> buf{};
    std::snprintf(buf.data(), buf.size(), "RBLNEMU-%08" PRIx32,
                  static_cast<std::uint32_t>(mix ^ (mix >> 32)));
    return buf.data();
}

std::array<std::uint8_t, 16> uuid_from_serial(std::string_view serial) {
    const std::uint64_t a = fnv1a(serial, 0xcbf29ce484222325ULL);
    const std::uint64_t b = fnv1a(serial, 0x84222325cbf29ce4ULL ^ a);
    std::array<std::uint8_t, 16> u{};
    for (unsigned i = 0; i < 8; i++) {
        u.at(i) = static_cast<std::uint8_t>(a >> (8 * i));
        u.at(8 + i) = static_cast<std::uint8_t>(b >> (8 * i));
    }
    u[6] = static_cast<std::uint8_t>((u[6] & 0x0fU) | 0x80U); // RFC 9562 version 8 (custom)
    u[8] = static_cast<std::uint8_t>((u[8] & 0x3fU) | 0x80U); // RFC 4122 variant
    return u;
}

CardIdentity make_identity(const Options& opt, std::uint32_t peer_id) {
    CardIdentity id;
    id.family = opt.family;
    id.layout = compute_bar_layout(family_chiplets(opt.family), opt.hbm_per_chiplet);
    id.peer_id = peer_id;
    id.num_vectors = opt.vectors;
    id.iface_minor = opt.iface_minor;
    id.serial = opt.serial.empty() ? default_serial() : opt.serial;
    id.uuid = uuid_from_serial(id.serial);
    id.fw_version = kFwVersion;
    return id;
}

Telemetry default_telemetry() {
    Telemetry t;
    for (unsigned i = 0; i < t.chiplet.size(); i++) {
        t.chiplet.at(i).temp_mc = 44000 + static_cast<std::int32_t>(i) * 500;
        t.chiplet.at(i).clock_mhz = 1000;
        t.chiplet.at(i).mem_clock_mhz = 1600;
        t.chiplet.at(i).busy_ns = 0;
    }
    return t;
}

const char* Card::state_name(std::uint32_t state) {
    switch (state) {
    case RBLN_FW_STATE_RESET:
        return "RESET";
    case RBLN_FW_STATE_BOOTING:
        return "BOOTING";
    case RBLN_FW_STATE_READY:
        return "READY";
    case RBLN_FW_STATE_FAULT:
        return "FAULT";
    default:
        return "UNKNOWN";
    }
}

Card::Card(CardIdentity identity, std::span<std::byte> bar, GuestMemory& ram, IrqFn irq,
           Logger& log, ClockFn clock)
    : id_(std::move(identity)), ctrl_(nullptr), ram_(ram), irq_(std::move(irq)), log_(log),
      clock_(std::move(clock)), telemetry_(default_telemetry()), mmu_(ram, bar, id_.layout) {
    if (bar.size() < sizeof(rbln_fw_ctrl))
        throw std::invalid_argument("BAR smaller than the control block");
    if (reinterpret_cast<std::uintptr_t>(bar.data()) % alignof(rbln_fw_ctrl) != 0)
        throw std::invalid_argument("BAR not aligned");
    ctrl_ = reinterpret_cast<rbln_fw_ctrl*>(bar.data());
    start_ns_ = now_ns();
    init_control_block();
    helpers_ = std::make_unique<ChipletHelpers>(
        mmu_, std::span<ChipletEngine>(engines_.data(), id_.layout.chiplets), ring_counters_,
        static_cast<const RingHost&>(*this));
}

Card::~Card() {
    stop_rings(CommandProcessor::StopMode::silent);
}

void Card::shutdown() {
    stop_rings(CommandProcessor::StopMode::silent);
}

CardStats Card::stats() const {
    CardStats s = stats_;
    s.events = events_.load();
    s.events_dropped = events_dropped_.load();
    s.irqs = irqs_.load();
    const RingCounters& r = ring_counters_;
    s.jobs = r.jobs.load();
    s.jobs_failed = r.jobs_failed.load();
    s.jobs_cancelled = r.jobs_cancelled.load();
    s.jobs_aborted = r.jobs_aborted.load();
    s.packets = r.packets.load();
    s.dma_bytes = r.dma_bytes.load();
    s.ring_cpl_stalls = r.cpl_stalls.load();
    s.ring_cpls_dropped = r.cpls_dropped.load();
    s.ring_irqs_moderated = r.irqs_moderated.load();
    s.ring_irqs_backstop = r.irqs_backstop.load();
    s.ring_bad_tails = r.bad_tails.load();
    s.injected_hangs = r.hangs.load();
    s.injected_dma_errors = r.dma_errors.load();
    s.injected_corrupt_cpls = r.corrupt_cpls.load();
    s.injected_lost_irqs = r.lost_irqs.load();
    for (unsigned i = 0; i < id_.layout.chiplets; i++) {
        const ChipletEngine& e = engines_.at(i);
        if (procs_.at(i))
            s.rings_up++;
        s.hung |= e.hang.load() ? 1U << i : 0U;
        s.dma_error_armed |= e.dma_error.load() ? 1U << i : 0U;
        s.corrupt_cpl_armed |= e.corrupt_cpl.load() ? 1U << i : 0U;
        s.lost_irq_armed |= e.lost_irq.load() ? 1U << i : 0U;
    }
    s.graph_execs = r.graph_execs.load();
    s.graph_rejected = r.graph_rejected.load();
    for (unsigned i = 0; i < id_.layout.chiplets; i++)
        s.graph_nodes.at(i) = engines_.at(i).graph_nodes.load();
    s.boot_faults_armed = boot_faults_;
    s.reset_faults_armed = reset_faults_;
    const MmuStats m = mmu_.stats();
    s.mmu_faults = m.faults;
    s.tlb_hits = m.tlb_hits;
    s.tlb_misses = m.tlb_misses;
    s.tlb_invalidations = m.tlb_invalidations;
    s.vm_bound = mmu_.bound_count();
    return s;
}

std::uint64_t Card::now_ns() const {
    if (clock_)
        return clock_();
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

void Card::init_control_block() {
    std::memset(static_cast<void*>(ctrl_), 0, sizeof(*ctrl_));
    ctrl_->iface_minor = id_.iface_minor;
    ctrl_->iface_major = RBLN_FW_IFACE_MAJOR;
    ctrl_->ctrl_size = sizeof(rbln_fw_ctrl);
    ctrl_->family = family_code(id_.family);
    ctrl_->chiplet_count = id_.layout.chiplets;
    ctrl_->doorbell_peer_id = id_.peer_id;
    ctrl_->num_vectors = id_.num_vectors;
    std::memcpy(ctrl_->uuid, id_.uuid.data(), sizeof(ctrl_->uuid));
    copy_string(ctrl_->serial, id_.serial);
    copy_string(ctrl_->fw_version, id_.fw_version);
    ctrl_->bar_size = id_.layout.bar_size;
    for (unsigned i = 0; i < id_.layout.chiplets; i++) {
        ctrl_->hbm[i].bar_offset = id_.layout.hbm.at(i).bar_offset;
        ctrl_->hbm[i].size = id_.layout.hbm.at(i).size;
    }
    ctrl_->fw_state = RBLN_FW_STATE_RESET;
    // The magic goes last: a host that sees it sees a complete identity.
    card_write(ctrl_->magic, RBLN_FW_MAGIC);
}

void Card::set_state(std::uint32_t state) {
    state_ = state;
    card_write(ctrl_->fw_state, state);
}

void Card::doorbell(unsigned vector) {
    stats_.doorbells++;
    if (no_response_) {
        log_.debug("doorbell %u ignored (no-response fault armed)", vector);
        return;
    }
    switch (vector) {
    case RBLN_FW_DB_CTRL:
        handle_ctrl();
        break;
    case RBLN_FW_DB_ADMIN:
        if (state_ == RBLN_FW_STATE_READY)
            process_admin();
        else
            log_.debug("admin doorbell ignored in state %s", state_name(state_));
        break;
    case RBLN_FW_DB_RING:
        // One doorbell for every ring; it may also announce a host store
        // that a WAIT watches.
        hub_.notify();
        kick_rings();
        break;
    default:
        log_.debug("doorbell on unused vector %u ignored", vector);
        break;
    }
    flush_irqs();
}

void Card::handle_ctrl() {
    const std::uint32_t host_ctrl = host_read(ctrl_->host_ctrl);
    if (host_ctrl == 0) {
        reset();
        return;
    }
    const std::uint32_t gen = host_read(ctrl_->host_gen);
    switch (state_) {
    case RBLN_FW_STATE_READY:
        if (gen == acked_gen_) {
            log_.debug("control doorbell: already READY for host_gen %u", gen);
            return;
        }
        log_.info("new handshake (host_gen %u) without a reset; dropping the old rings", gen);
        handshake(host_ctrl, gen);
        return;
    case RBLN_FW_STATE_FAULT:
        log_.warn("HOST_READY ignored in FAULT: the host must reset the card first");
        return;
    default:
        handshake(host_ctrl, gen);
        return;
    }
}

namespace {

bool ranges_overlap(std::uint64_t a, std::uint64_t b, std::uint64_t len) {
    return a < b + len && b < a + len;
}

} // namespace

void Card::handshake(std::uint32_t host_ctrl, std::uint32_t gen) {
    stop_rings(CommandProcessor::StopMode::silent);
    rings_.reset();
    drop_bindings();
    set_state(RBLN_FW_STATE_BOOTING);
    const std::uint16_t major = host_read(ctrl_->host_iface_major);
    const std::uint16_t minor = host_read(ctrl_->host_iface_minor);
    const std::uint32_t entries = host_read(ctrl_->ring_entries);
    struct RingAddr {
        const char* name;
        std::uint64_t addr;
    };
    const std::array<RingAddr, 3> addrs{{
        {"admin_sq_addr", host_read(ctrl_->admin_sq_addr)},
        {"admin_cq_addr", host_read(ctrl_->admin_cq_addr)},
        {"event_ring_addr", host_read(ctrl_->event_ring_addr)},
    }};
    std::array<char, 160> why{};

    if ((host_ctrl & ~RBLN_FW_HOST_READY) != 0) {
        std::snprintf(why.data(), why.size(), "host_ctrl 0x%x has unknown bits", host_ctrl);
        enter_fault(RBLN_FW_FAULT_BAD_IFACE, why.data());
        return;
    }
    if (major != RBLN_FW_IFACE_MAJOR) {
        std::snprintf(why.data(), why.size(), "host interface %u.%u unsupported (card: %u.%u)",
                      major, minor, RBLN_FW_IFACE_MAJOR, RBLN_FW_IFACE_MINOR);
        enter_fault(RBLN_FW_FAULT_BAD_IFACE, why.data());
        return;
    }
    if (!std::has_single_bit(entries) || entries < RBLN_FW_RING_MIN_ENTRIES ||
        entries > RBLN_FW_RING_MAX_ENTRIES) {
        std::snprintf(why.data(), why.size(), "ring_entries %u not a power of two in %u..%u",
                      entries, RBLN_FW_RING_MIN_ENTRIES, RBLN_FW_RING_MAX_ENTRIES);
        enter_fault(RBLN_FW_FAULT_BAD_RING_CONFIG, why.data());
        return;
    }
    const std::uint64_t bytes = std::uint64_t{entries} * kRecordSize;
    for (const RingAddr& r : addrs) {
        if (r.addr % kRecordSize != 0) {
            std::snprintf(why.data(), why.size(), "%s 0x%" PRIx64 " not 64-byte aligned", r.name,
                          r.addr);
            enter_fault(RBLN_FW_FAULT_BAD_RING_CONFIG, why.data());
            return;
        }
        if (!ram_.contains(r.addr, bytes)) {
            std::snprintf(why.data(), why.size(), "%s 0x%" PRIx64 "+0x%" PRIx64 " not in RAM",
                          r.name, r.addr, bytes);
            enter_fault(RBLN_FW_FAULT_BAD_RING_CONFIG, why.data());
            return;
        }
    }
    for (std::size_t i = 0; i < addrs.size(); i++) {
        for (std::size_t j = i + 1; j < addrs.size(); j++) {
            if (ranges_overlap(addrs.at(i).addr, addrs.at(j).addr, bytes)) {
                std::snprintf(why.data(), why.size(), "%s and %s overlap", addrs.at(i).name,
                              addrs.at(j).name);
                enter_fault(RBLN_FW_FAULT_BAD_RING_CONFIG, why.data());
                return;
            }
        }
    }

    Rings r;
    r.entries = entries;
    r.sq_addr = addrs[0].addr;
    r.cq.addr = addrs[1].addr;
    r.ev.addr = addrs[2].addr;
    rings_ = r;
    card_write(ctrl_->admin_sq_head, std::uint32_t{0});
    if (boot_faults_ != 0) {
        boot_faults_--;
        rings_.reset();
        enter_fault(RBLN_FW_FAULT_INTERNAL, "injected boot fault");
        return;
    }
    card_write(ctrl_->host_ack, gen);
    acked_gen_ = gen;
    set_state(RBLN_FW_STATE_READY);
    log_.info("handshake done: host_gen %u, interface %u.%u, %u ring entries, sq 0x%" PRIx64
              " cq 0x%" PRIx64 " events 0x%" PRIx64,
              gen, major, minor, entries, r.sq_addr, r.cq.addr, r.ev.addr);
    const std::array<std::uint64_t, 1> data{RBLN_FW_STATE_READY};
    post_event(RBLN_FW_EV_STATE, 0, kWholeCard, data);
}

void Card::reset() {
    const std::uint32_t old = state_;
    stop_rings(CommandProcessor::StopMode::silent);
    for (ChipletEngine& e : engines_)
        e.hang = false;
    rings_.reset();
    drop_bindings();
    fault_code_ = RBLN_FW_FAULT_NONE;
    fault_reason_.clear();
    card_write(ctrl_->fault_code, std::uint32_t{RBLN_FW_FAULT_NONE});
    std::memset(ctrl_->fault_reason, 0, sizeof(ctrl_->fault_reason));
    card_write(ctrl_->admin_sq_head, std::uint32_t{0});
    set_state(RBLN_FW_STATE_RESET);
    log_.info("reset by the host (was %s)", state_name(old));
    if (reset_faults_ != 0) {
        reset_faults_--;
        enter_fault(RBLN_FW_FAULT_INTERNAL, "injected fault after reset");
    }
}

void Card::drop_bindings() {
    if (mmu_.bound_count() != 0)
        log_.info("MMU: %u address space(s) unbound", mmu_.bound_count());
    mmu_.reset();
}

void Card::enter_fault(std::uint32_t code, std::string_view reason) {
    // The firmware stopped: so do its command processors.
    stop_rings(CommandProcessor::StopMode::silent);
    fault_code_ = code;
    fault_reason_ = reason.substr(0, sizeof(ctrl_->fault_reason) - 1);
    copy_string(ctrl_->fault_reason, fault_reason_);
    card_write(ctrl_->fault_code, code);
    set_state(RBLN_FW_STATE_FAULT);
    log_.warn("FAULT code %u: %s", code, fault_reason_.c_str());
    const std::array<std::uint64_t, 0> none{};
    post_event(RBLN_FW_EV_FAULT, code, kWholeCard, none);
}

bool Card::write_record(ProducerRing& ring, std::uint32_t consumer_head, const void* rec) {
    const std::uint32_t entries = rings_->entries;
    if ((ring.tail + 1) % entries == consumer_head)
        return false;
    std::byte* slot =
        ram_.translate(ring.addr + std::uint64_t{ring.tail} * kRecordSize, kRecordSize);
    if (slot == nullptr)
        return false; // validated at the handshake; cannot happen
    const auto* src = static_cast<const std::byte*>(rec);
    std::uint16_t flags = 0;
    std::memcpy(&flags, src + kFlagsOffset, sizeof(flags));
    std::memcpy(slot, src, kFlagsOffset);
    std::memcpy(slot + kFlagsOffset + 2, src + kFlagsOffset + 2, kRecordSize - kFlagsOffset - 2);
    flags = static_cast<std::uint16_t>((flags & ~RBLN_FW_REC_PHASE) | ring.phase);
    // Release: the host that sees the new phase sees the whole record.
    std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(slot + kFlagsOffset))
        .store(flags, std::memory_order_release);
    ring.tail++;
    if (ring.tail == entries) {
        ring.tail = 0;
        ring.phase ^= RBLN_FW_REC_PHASE;
    }
    return true;
}

void Card::post_event(std::uint16_t type, std::uint32_t code, std::uint32_t chiplet,
                      std::span<const std::uint64_t> data) {
    if (!rings_)
        return;
    const std::lock_guard<std::mutex> lk(event_mu_);
    rbln_fw_event ev{};
    ev.seq = rings_->event_seq++;
    ev.type = type;
    ev.timestamp_ns = now_ns() - start_ns_;
    ev.code = code;
    ev.chiplet = chiplet;
    for (std::size_t i = 0; i < data.size() && i < std::size(ev.data); i++)
        ev.data[i] = data[i];
    if (!write_record(rings_->ev, host_read(ctrl_->event_head), &ev)) {
        events_dropped_++;
        log_.debug("event ring full: event seq %u type %u dropped", ev.seq, type);
        return;
    }
    events_++;
    pending_irqs_ |= 1U << RBLN_FW_IRQ_EVENT;
}

void Card::raise(unsigned vector) {
    irqs_++;
    if (irq_)
        irq_(vector);
}

void Card::flush_irqs() {
    std::uint32_t pending = pending_irqs_.exchange(0);
    for (unsigned v = 0; pending != 0; v++) {
        if ((pending & (1U << v)) == 0)
            continue;
        pending &= ~(1U << v);
        raise(v);
    }
}

void Card::tick() {
    if (no_response_ || state_ != RBLN_FW_STATE_READY)
        return;
    heartbeat_++;
    card_write(ctrl_->heartbeat, heartbeat_);
    if (rings_ && rings_->cq_stalled)
        process_admin();
    kick_rings(); // a ring waiting for room looks again
    flush_irqs();
}

void Card::set_card_temp(std::int32_t temp_mc) {
    const std::int32_t old = telemetry_.temp_mc;
    telemetry_.temp_mc = temp_mc;
    if (old < kThermalWarnMc && temp_mc >= kThermalWarnMc && state_ == RBLN_FW_STATE_READY &&
        !no_response_) {
        log_.warn("card temperature %d m°C crossed the warning threshold", temp_mc);
        const std::array<std::uint64_t, 1> data{static_cast<std::uint64_t>(temp_mc)};
        post_event(RBLN_FW_EV_THERMAL, 0, kWholeCard, data);
        flush_irqs();
    }
}

void Card::set_power(std::uint64_t power_uw) {
    telemetry_.power_uw = power_uw;
}

Telemetry Card::telemetry() const {
    Telemetry t = telemetry_;
    for (unsigned i = 0; i < t.chiplet.size(); i++)
        t.chiplet.at(i).busy_ns = engines_.at(i).busy_ns.load();
    return t;
}

void Card::set_chiplet(unsigned index, const ChipletTelemetry& values, bool with_busy) {
    if (index >= id_.layout.chiplets)
        throw std::out_of_range("chiplet index out of range");
    telemetry_.chiplet.at(index) = values;
    if (with_busy)
        engines_.at(index).busy_ns = values.busy_ns;
}

void Card::set_no_response(bool on) {
    if (on != no_response_)
        log_.info("no-response fault %s", on ? "armed: doorbells are ignored" : "cleared");
    no_response_ = on;
    if (!on)
        kick_rings();
}

void Card::surprise_remove() {
    removed_ = true;
    no_response_ = true; // doorbells, ticks and sensor changes do nothing
    stop_rings(CommandProcessor::StopMode::silent);
    for (ChipletEngine& e : engines_)
        e.hang = false;
    rings_.reset();
    drop_bindings();
    pending_irqs_ = 0;
    std::memset(static_cast<void*>(ctrl_), 0xff, sizeof(*ctrl_));
    log_.info("surprise removal: the card is gone, its control block reads all-ones");
}

void Card::power_cycle() {
    stop_rings(CommandProcessor::StopMode::silent);
    for (ChipletEngine& e : engines_)
        e.hang = false;
    clear_ring_faults();
    clear_start_faults();
    rings_.reset();
    drop_bindings();
    pending_irqs_ = 0;
    state_ = RBLN_FW_STATE_RESET;
    fault_code_ = RBLN_FW_FAULT_NONE;
    fault_reason_.clear();
    acked_gen_ = 0;
    init_control_block();
    removed_ = false;
    no_response_ = false;
    log_.info("power cycle: the firmware starts again in RESET");
}

void Card::inject_boot_faults(std::uint32_t count) {
    boot_faults_ = count;
    log_.info("the next %u boot handshake(s) will end in FAULT", count);
}

void Card::inject_reset_faults(std::uint32_t count) {
    reset_faults_ = count;
    log_.info("the firmware will crash after the next %u reset(s)", count);
}

void Card::clear_start_faults() {
    boot_faults_ = 0;
    reset_faults_ = 0;
}

void Card::inject_fw_fault(std::uint32_t code, std::string_view reason) {
    if (code == RBLN_FW_FAULT_NONE)
        throw std::invalid_argument("fault code 0 is not a fault");
    log_.info("injected firmware fault, code %u", code);
    enter_fault(code, reason);
    flush_irqs();
}

} // namespace rbln::emu
