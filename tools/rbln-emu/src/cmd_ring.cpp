// SPDX-License-Identifier: GPL-2.0
// A command processor: jobs, packets and completions of one ring
// (cmd_ring.h, rbln_fw_cmd.md).
#include "cmd_ring.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "data_packets.h"
#include "kernels.h"
#include "rbln_fw_admin.h"

namespace rbln::emu {

static_assert(sizeof(rbln_fw_ring_ctrl) == 64);
static_assert(sizeof(rbln_fw_job) == 64);
static_assert(sizeof(rbln_fw_job_cpl) == 64);
static_assert(offsetof(rbln_fw_job_cpl, flags) == 10);
static_assert(sizeof(rbln_fw_pkt_nop) == 8);
static_assert(sizeof(rbln_fw_pkt_copy) == 32);
static_assert(sizeof(rbln_fw_pkt_copy_strided) == 72);
static_assert(sizeof(rbln_fw_pkt_fill) == 32);
static_assert(sizeof(rbln_fw_pkt_signal) == 24);
static_assert(sizeof(rbln_fw_pkt_wait) == 32);
static_assert(sizeof(rbln_fw_pkt_timestamp) == 16);
static_assert(sizeof(rbln_fw_pkt_launch) == 176);
static_assert(sizeof(rbln_fw_pkt_tlb_invalidate) == 24);
static_assert(sizeof(rbln_fw_pkt_write64) == 24);
static_assert(sizeof(rbln_fw_pkt_graph_exec) == 48);
static_assert(offsetof(rbln_fw_job_cpl, detail) == 48);
static_assert(offsetof(rbln_fw_job_cpl, detail_arg) == 52);

namespace {

constexpr std::size_t kRecord = 64;
constexpr std::size_t kCplFlags = offsetof(rbln_fw_job_cpl, flags);
constexpr std::uint64_t kVaLimit = 1ULL << RBLN_FW_VA_BITS;
constexpr auto kForever = std::chrono::nanoseconds::max();
constexpr auto kFirstBackoff = std::chrono::microseconds(2);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1);

template <typename T> T host_read(T& field) {
    return std::atomic_ref<T>(field).load(std::memory_order_acquire);
}

template <typename T> void card_write(T& field, std::type_identity_t<T> value) {
    std::atomic_ref<T>(field).store(value, std::memory_order_release);
}

std::uint64_t* word_at(const HostSpan& s) {
    return reinterpret_cast<std::uint64_t*>(s.data());
}

std::chrono::nanoseconds next_backoff(std::chrono::nanoseconds d) {
    return std::min<std::chrono::nanoseconds>(d * 2, kMaxBackoff);
}

const char* status_name(std::uint16_t status) {
    switch (status) {
    case RBLN_FW_JOB_OK:
        return "OK";
    case RBLN_FW_JOB_BAD_JOB:
        return "BAD_JOB";
    case RBLN_FW_JOB_BAD_PACKET:
        return "BAD_PACKET";
    case RBLN_FW_JOB_PRIVILEGED:
        return "PRIVILEGED";
    case RBLN_FW_JOB_MMU_FAULT:
        return "MMU_FAULT";
    case RBLN_FW_JOB_DMA_ERROR:
        return "DMA_ERROR";
    case RBLN_FW_JOB_WAIT_TIMEOUT:
        return "WAIT_TIMEOUT";
    case RBLN_FW_JOB_ABORTED:
        return "ABORTED";
    case RBLN_FW_JOB_CANCELLED:
        return "CANCELLED";
    default:
        return "?";
    }
}

PacketResult failed(std::uint16_t status, const char* why) {
    return {status, {}, why, false};
}

} // namespace

// --- SignalHub ------------------------------------------------------------------

void SignalHub::notify() {
    {
        const std::lock_guard<std::mutex> lk(mu_);
        gen_++;
    }
    cv_.notify_all();
}

std::uint64_t SignalHub::generation() {
    const std::lock_guard<std::mutex> lk(mu_);
    return gen_;
}

// --- life ---------------------------------------------------------------------------

CommandProcessor::CommandProcessor(const RingDeps& deps, const RingConfig& cfg)
    : deps_(deps), cfg_(cfg) {
    const std::uint64_t bytes = std::uint64_t{cfg.entries} * kRecord;
    jobs_ = deps_.ram.translate(cfg.jobs_addr, bytes);
    cpls_ = deps_.ram.translate(cfg.cpls_addr, bytes);
    ctrl_ = reinterpret_cast<rbln_fw_ring_ctrl*>(
        deps_.ram.translate(cfg.ctrl_addr, sizeof(rbln_fw_ring_ctrl)));
    if (jobs_ == nullptr || cpls_ == nullptr || ctrl_ == nullptr)
        throw std::invalid_argument("ring memory not in guest RAM");
    card_write(ctrl_->job_head, std::uint32_t{0});
    card_write(ctrl_->done_seqno, std::uint64_t{0});
    card_write(ctrl_->busy_ns, std::uint64_t{0});
    thread_ = std::thread([this] { run(); });
}

CommandProcessor::~CommandProcessor() {
    stop(StopMode::silent);
}

void CommandProcessor::kick() {
    {
        const std::lock_guard<std::mutex> lk(mu_);
        kicked_ = true;
    }
    cv_.notify_all();
}

void CommandProcessor::stop(StopMode mode) {
    if (!thread_.joinable())
        return;
    {
        const std::lock_guard<std::mutex> lk(mu_);
        mode_ = mode;
        stop_.store(true, std::memory_order_release);
        cancel_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    deps_.hub.notify(); // a WAIT looks at the stop too
    thread_.join();
}

void CommandProcessor::abort_asid(std::uint32_t asid) {
    {
        const std::lock_guard<std::mutex> lk(mu_);
        if (asid == 0 || running_asid_ != asid)
            return;
        cancel_.store(true, std::memory_order_release);
    }
    deps_.hub.notify(); // a WAIT looks at it too
}

PacketResult CommandProcessor::interrupted() const {
    if (stopping())
        return PacketResult::stopped();
    return failed(RBLN_FW_JOB_CANCELLED,
                  "its address space was aborted (VM_ABORT, or a fault of a FAULT_ABORTS job)");
}

bool CommandProcessor::wait_runnable() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stopping() && (deps_.chiplet.hang.load() || deps_.host.ring_frozen()))
        cv_.wait_for(lk, std::chrono::milliseconds(100));
    return !stopping();
}

bool CommandProcessor::wait_kick(std::chrono::nanoseconds d) {
    std::unique_lock<std::mutex> lk(mu_);
    auto woken = [this] { return kicked_ || stopping(); };
    if (d == kForever)
        cv_.wait(lk, woken);
    else
        cv_.wait_for(lk, d, woken);
    kicked_ = false;
    return !stopping();
}

bool CommandProcessor::idle_with_irq_owed() {
    const std::int64_t holdoff = deps_.irq_holdoff_ns.load(std::memory_order_relaxed);
    if (holdoff <= 0)
        return wait_kick(kForever); // backstop off: as before
    bool kicked = false;
    {
        std::unique_lock<std::mutex> lk(mu_);
        kicked = cv_.wait_for(lk, std::chrono::nanoseconds(holdoff),
                              [this] { return kicked_ || stopping(); });
        // A doorbell stays set for the loop's own read of the tail.
    }
    if (stopping())
        return false;
    if (kicked)
        return true; // new work first; its records may interrupt
    irq_owed_ = false;
    // Every record read: the host needed no interrupt.  Otherwise the one
    // held back was lost on the way (a host whose barrier did not order
    // its cpl_head store before its next read: single-threaded TCG emits
    // no host barrier for the guest's) and is raised now.
    if (host_read(ctrl_->cpl_head) != cpl_tail_) {
        deps_.counters.irqs_backstop++;
        raise_job_irq();
    }
    return true;
}

void CommandProcessor::raise_job_irq() {
    if (deps_.chiplet.lost_irq.exchange(false)) {
        deps_.counters.lost_irqs++;
        deps_.log.info("ring %u: job interrupt lost (injected)", cfg_.index);
        return;
    }
    deps_.host.ring_irq();
}

// --- the job loop -----------------------------------------------------------------

void CommandProcessor::run() {
    Mmu::Port port(deps_.mmu);
    while (wait_runnable()) {
        {
            const std::lock_guard<std::mutex> lk(mu_);
            kicked_ = false; // a doorbell after this read is seen
        }
        const std::uint32_t tail = host_read(ctrl_->job_tail);
        if (tail >= cfg_.entries) {
            if (reported_tail_ != tail + 1) {
                reported_tail_ = tail + 1;
                deps_.counters.bad_tails++;
                deps_.host.ring_bad_tail(cfg_.index, tail);
            }
            if (!wait_kick(kForever))
                break;
            continue;
        }
        reported_tail_ = 0;
        if (tail == head_) {
            if (irq_owed_ ? !idle_with_irq_owed() : !wait_kick(kForever))
                break;
            continue;
        }
        Job job;
        std::memcpy(&job.desc, jobs_ + std::size_t{head_} * kRecord, sizeof(job.desc));
        head_ = (head_ + 1) % cfg_.entries;
        card_write(ctrl_->job_head, head_);
        job.start_ns = deps_.host.card_time_ns();

        if (deps_.chiplet.corrupt_cpl.exchange(false)) {
            // The firmware lost the job: it does not run, its record is
            // garbage (wrong seqno, status 0xffff), and the processor,
            // whose ring state is now wrong, stalls like a hung one until
            // RING_STOP / RESET_CHIPLET (the host's recovery) or clear.
            deps_.counters.corrupt_cpls++;
            deps_.log.info("ring %u: job %llu dropped, its completion corrupted (injected); the "
                           "ring stalls",
                           cfg_.index, static_cast<unsigned long long>(job.desc.seqno));
            Outcome out;
            out.result.status = 0xffff;
            if (!complete(job, out)) {
                finish_stop(&job);
                return;
            }
            deps_.chiplet.hang = true;
            continue;
        }

        const Outcome out = execute(job, port);
        if (out.result.cancelled || stopping()) {
            finish_stop(&job);
            return;
        }
        if (!complete(job, out)) {
            finish_stop(&job);
            return;
        }
    }
    finish_stop(nullptr);
}

CommandProcessor::Outcome CommandProcessor::execute(const Job& job, Mmu::Port& port) {
    const rbln_fw_job& d = job.desc;
    Outcome out;
    auto bad_job = [&out](const char* why) {
        out.result = failed(RBLN_FW_JOB_BAD_JOB, why);
        return out;
    };
    if (d.reserved0 != 0 ||
        std::any_of(std::begin(d.reserved), std::end(d.reserved), [](__u64 r) { return r != 0; }))
        return bad_job("reserved fields not zero");
    const std::uint32_t known =
        RBLN_FW_JOB_IRQ | (deps_.iface_minor >= 3 ? RBLN_FW_JOB_FAULT_ABORTS : 0U);
    if ((d.flags & ~known) != 0)
        return bad_job("unknown job flags");
    if (d.cmd_size == 0 || d.cmd_size % 8 != 0 || d.cmd_size > RBLN_FW_CMD_MAX)
        return bad_job("cmd_size not a multiple of 8 in 8..RBLN_FW_CMD_MAX");
    if (d.cmd_addr % 8 != 0)
        return bad_job("command buffer not 8-byte aligned");
    if (d.asid >= RBLN_FW_MAX_ASID)
        return bad_job("asid out of range");
    {
        // Before the mark is read: an abort_asid() after this sees the
        // ASID; one before it has marked the Mmu already.
        const std::lock_guard<std::mutex> lk(mu_);
        running_asid_ = d.asid;
        cancel_.store(stopping(), std::memory_order_release);
    }
    if (d.asid != 0 && deps_.mmu.aborted(d.asid)) {
        out.result = interrupted();
        return out;
    }

    Memory mem(port, d.asid);
    {
        const Memory::Scope hold(mem);
        if (auto f = mem.translate(d.cmd_addr, d.cmd_size, Access::read, spans_)) {
            out.result = PacketResult::mmu(*f);
        } else {
            cmd_.resize(d.cmd_size);
            std::size_t at = 0;
            for (const HostSpan& s : spans_) {
                std::memcpy(cmd_.data() + at, s.data(), s.size());
                at += s.size();
            }
        }
    }
    if (out.result.status == RBLN_FW_JOB_OK) {
        for (std::uint32_t off = 0; off < d.cmd_size;) {
            // VM_ABORT interrupts through cancel_, a fault elsewhere
            // (FAULT_ABORTS) only marks the ASID: both end the job here.
            if (cancel_.load(std::memory_order_acquire) ||
                (d.asid != 0 && deps_.mmu.aborted(d.asid))) {
                out.result = interrupted();
                out.packet_offset = off;
                if (out.result.cancelled)
                    return out;
                break;
            }
            std::uint32_t hdr = 0;
            std::memcpy(&hdr, cmd_.data() + off, sizeof(hdr));
            const std::uint32_t bytes = RBLN_FW_PKT_BYTES(hdr);
            const auto op = static_cast<std::uint8_t>(RBLN_FW_PKT_OP(hdr));
            deps_.counters.packets++;
            out.packet_offset = off;
            if (bytes == 0) {
                out.result = PacketResult::bad("packet size 0");
                break;
            }
            if (bytes > d.cmd_size - off) {
                out.result = PacketResult::bad("packet runs past the command buffer");
                break;
            }
            if (op >= 0x80 && d.asid != 0) {
                out.result = failed(RBLN_FW_JOB_PRIVILEGED, "privileged packet in a user job");
                break;
            }
            out.result =
                packet(op, static_cast<std::uint8_t>(RBLN_FW_PKT_FLAGS(hdr)), off, bytes, mem);
            if (out.result.status != RBLN_FW_JOB_OK || out.result.cancelled)
                break;
            off += bytes;
        }
        if (out.result.status == RBLN_FW_JOB_OK)
            out.packet_offset = 0;
    }
    if (out.result.status == RBLN_FW_JOB_MMU_FAULT && d.asid != 0 &&
        (d.flags & RBLN_FW_JOB_FAULT_ABORTS) != 0 && deps_.mmu.abort(d.asid)) {
        deps_.log.debug("ring %u: asid %u aborted by its job's MMU fault", cfg_.index, d.asid);
        // Its jobs on the other rings end inside a long packet, at their
        // next packet boundary or in a WAIT, whichever comes first.
        deps_.host.ring_asid_aborted(cfg_.index, d.asid);
        deps_.hub.notify();
    }
    if (out.result.status == RBLN_FW_JOB_MMU_FAULT && out.result.fault)
        deps_.host.ring_mmu_fault(cfg_.index, d.asid, *out.result.fault);
    return out;
}

// --- packets -------------------------------------------------------------------------

PacketResult CommandProcessor::packet(std::uint8_t op, std::uint8_t flags, std::uint32_t offset,
                                      std::uint32_t bytes, Memory& mem) {
    const std::byte* raw = cmd_.data() + offset;
    auto fetch = [&](auto& pkt) {
        if (bytes != sizeof(pkt))
            return false;
        std::memcpy(&pkt, raw, sizeof(pkt));
        return true;
    };
    constexpr const char* kSize = "packet size does not match the opcode";
    constexpr const char* kFlags = "unknown packet flags";
    constexpr const char* kReserved = "reserved field not zero";
    constexpr const char* kAlign = "address not 8-byte aligned";
    auto dma_error = [this]() {
        if (!deps_.chiplet.dma_error.exchange(false))
            return false;
        deps_.counters.dma_errors++;
        deps_.log.info("ring %u: DMA error (injected)", cfg_.index);
        return true;
    };
    // COPY, COPY_STRIDED, FILL: the bytes they moved count; a stop or
    // VM_ABORT ends them as interrupted().
    std::uint64_t moved = 0;
    auto data_result = [&](PacketResult r) {
        deps_.counters.dma_bytes += moved;
        return r.cancelled ? interrupted() : r;
    };
    if (op != RBLN_FW_PKT_SIGNAL && flags != 0)
        return PacketResult::bad(kFlags);

    switch (op) {
    case RBLN_FW_PKT_NOP: {
        std::uint32_t reserved = 0;
        std::memcpy(&reserved, raw + 4, sizeof(reserved));
        if (reserved != 0)
            return PacketResult::bad(kReserved);
        return PacketResult::ok();
    }
    case RBLN_FW_PKT_COPY: {
        rbln_fw_pkt_copy p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (const char* why = check_copy(p))
            return PacketResult::bad(why);
        if (dma_error())
            return failed(RBLN_FW_JOB_DMA_ERROR, "DMA error");
        const Memory::Scope hold(mem);
        return data_result(run_copy(p, mem, dma_, cancel_, moved));
    }
    case RBLN_FW_PKT_COPY_STRIDED: {
        rbln_fw_pkt_copy_strided p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (const char* why = check_copy_strided(p))
            return PacketResult::bad(why);
        if (dma_error())
            return failed(RBLN_FW_JOB_DMA_ERROR, "DMA error");
        const Memory::Scope hold(mem);
        return data_result(run_copy_strided(p, mem, dma_, cancel_, moved));
    }
    case RBLN_FW_PKT_FILL: {
        rbln_fw_pkt_fill p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (const char* why = check_fill(p))
            return PacketResult::bad(why);
        if (dma_error())
            return failed(RBLN_FW_JOB_DMA_ERROR, "DMA error");
        const Memory::Scope hold(mem);
        return data_result(run_fill(p, mem, dma_, cancel_, moved));
    }
    case RBLN_FW_PKT_SIGNAL: {
        rbln_fw_pkt_signal p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if ((flags & ~RBLN_FW_SIGNAL_IRQ) != 0)
            return PacketResult::bad(kFlags);
        if (p.reserved != 0)
            return PacketResult::bad(kReserved);
        if (p.va % 8 != 0)
            return PacketResult::bad(kAlign);
        {
            const Memory::Scope hold(mem);
            if (auto f = mem.translate(p.va, 8, Access::write, spans_))
                return PacketResult::mmu(*f);
            std::atomic_ref<std::uint64_t>(*word_at(spans_[0]))
                .store(p.value, std::memory_order_release);
        }
        deps_.hub.notify();
        if ((flags & RBLN_FW_SIGNAL_IRQ) != 0)
            deps_.host.ring_irq();
        return PacketResult::ok();
    }
    case RBLN_FW_PKT_WAIT: {
        rbln_fw_pkt_wait p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (p.reserved != 0)
            return PacketResult::bad(kReserved);
        if (p.va % 8 != 0)
            return PacketResult::bad(kAlign);
        return wait_packet(p, mem);
    }
    case RBLN_FW_PKT_TIMESTAMP: {
        rbln_fw_pkt_timestamp p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (p.reserved != 0)
            return PacketResult::bad(kReserved);
        if (p.va % 8 != 0)
            return PacketResult::bad(kAlign);
        const Memory::Scope hold(mem);
        if (auto f = mem.translate(p.va, 8, Access::write, spans_))
            return PacketResult::mmu(*f);
        std::atomic_ref<std::uint64_t>(*word_at(spans_[0]))
            .store(deps_.host.card_time_ns(), std::memory_order_release);
        return PacketResult::ok();
    }
    case RBLN_FW_PKT_LAUNCH: {
        rbln_fw_pkt_launch p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (const char* why = check_launch(p))
            return PacketResult::bad(why);
        const Memory::Scope hold(mem);
        PacketResult r = run_launch(p, mem, cancel_);
        if (r.cancelled)
            r = interrupted();
        return r;
    }
    case RBLN_FW_PKT_TLB_INVALIDATE: {
        rbln_fw_pkt_tlb_invalidate p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (p.asid == 0 || p.asid >= RBLN_FW_MAX_ASID)
            return PacketResult::bad("asid out of range");
        if (p.va % RBLN_FW_PAGE_SIZE != 0 || p.size % RBLN_FW_PAGE_SIZE != 0)
            return PacketResult::bad("va or size not 4K aligned");
        if (p.va >= kVaLimit || p.size > kVaLimit - p.va)
            return PacketResult::bad("range beyond 48-bit VAs");
        deps_.mmu.invalidate(p.asid, p.va, p.size); // no hold: it waits for the others'
        return PacketResult::ok();
    }
    case RBLN_FW_PKT_WRITE64: {
        rbln_fw_pkt_write64 p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        if (p.reserved != 0)
            return PacketResult::bad(kReserved);
        if (p.addr % 8 != 0)
            return PacketResult::bad(kAlign);
        std::byte* host = deps_.ram.translate(p.addr, 8);
        if (host == nullptr)
            return PacketResult::mmu(MmuFault{RBLN_FW_MMU_BAD_ADDRESS, p.addr, Access::write});
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(host))
            .store(p.value, std::memory_order_release);
        deps_.hub.notify();
        return PacketResult::ok();
    }
    case RBLN_FW_PKT_GRAPH_EXEC: {
        if (deps_.iface_minor < 4)
            return PacketResult::bad("graph execution packets are not supported");
        rbln_fw_pkt_graph_exec p{};
        if (!fetch(p))
            return PacketResult::bad(kSize);
        return graph_packet(p, mem);
    }
    default:
        if (op >= 0x40 && op <= 0x4f)
            return PacketResult::bad("graph execution packets are not supported");
        return PacketResult::bad("unknown opcode");
    }
}

std::optional<MmuFault> CommandProcessor::read_job(Memory& mem, std::uint64_t va, std::size_t len,
                                                   std::vector<std::byte>& dst) {
    dst.resize(len);
    if (auto f = mem.translate(va, len, Access::read, spans_))
        return f;
    std::size_t at = 0;
    for (const HostSpan& s : spans_) {
        std::memcpy(dst.data() + at, s.data(), s.size());
        at += s.size();
    }
    return std::nullopt;
}

PacketResult CommandProcessor::graph_packet(const rbln_fw_pkt_graph_exec& p, Memory& mem) {
    auto refuse = [this](const GraphError& e) {
        deps_.counters.graph_rejected++;
        PacketResult r = PacketResult::bad(e.why);
        r.detail = e.code;
        r.detail_arg = e.arg;
        return r;
    };
    if (auto e = check_graph_packet(p))
        return refuse(*e);
    // Copies of what the packet points at: the object header, then (its
    // size known and bounded) the image, and the boundary table.  Nothing
    // an offset in them points at is read before check_graph.
    rbln_fw_graph_obj obj{};
    {
        const Memory::Scope hold(mem);
        if (auto f = read_job(mem, p.definition, sizeof(obj), graph_image_))
            return PacketResult::mmu(*f);
        std::memcpy(&obj, graph_image_.data(), sizeof(obj));
        if (auto e = check_graph_object(obj))
            return refuse(*e);
        if (auto f = read_job(mem, p.definition + sizeof(obj), obj.definition_bytes, graph_image_))
            return PacketResult::mmu(*f);
        if (auto f = read_job(mem, p.boundaries,
                              std::size_t{p.boundary_count} * sizeof(rbln_fw_graph_binding),
                              graph_bindings_))
            return PacketResult::mmu(*f);
    }
    if (auto e = check_graph(p, obj, graph_image_, graph_bindings_, plan_))
        return refuse(*e);
    deps_.counters.graph_execs++;
    if ((p.flags & RBLN_FW_GRAPH_EXEC_CHECK_ONLY) != 0)
        return PacketResult::ok();

    const std::uint32_t asid = mem.asid();
    auto in_node = [](PacketResult r, std::uint32_t node) {
        r.detail = RBLN_FW_GRAPH_E_IN_NODE;
        r.detail_arg = node;
        return r;
    };
    auto ended = [&] {
        return cancel_.load(std::memory_order_acquire) || (asid != 0 && deps_.mmu.aborted(asid));
    };
    // The chiplets a level may be spread over: this one first, then every
    // other one that is not hung.
    std::array<unsigned, RBLN_FW_MAX_CHIPLETS> chips{};
    unsigned nchips = 1;
    chips[0] = cfg_.index;
    if (deps_.helpers != nullptr && (p.flags & RBLN_FW_GRAPH_EXEC_SERIAL) == 0) {
        for (unsigned c = 0; c < deps_.helpers->chiplets(); c++) {
            if (c != cfg_.index && !deps_.helpers->chiplet(c).hang.load())
                chips.at(nchips++) = c;
        }
    }
    const std::uint64_t spread_min =
        deps_.graph_spread_bytes != nullptr ? deps_.graph_spread_bytes->load() : 0;
    const GraphPlan& plan = plan_;
    for (std::size_t l = 0; l + 1 < plan.level_begin.size(); l++) {
        const std::uint32_t begin = plan.level_begin[l];
        const std::uint32_t end = plan.level_begin[l + 1];
        std::uint64_t bytes = 0;
        for (std::uint32_t k = begin; k < end; k++)
            bytes += plan.nodes[plan.order[k]].bytes;
        const bool spread = nchips > 1 && end - begin > 1 && bytes >= spread_min;
        if (!spread) {
            for (std::uint32_t k = begin; k < end; k++) {
                const std::uint16_t i = plan.order[k];
                if (ended())
                    return in_node(interrupted(), i);
                PacketResult r = run_graph_node(plan.nodes[i], mem, dma_, cancel_, deps_.chiplet,
                                                deps_.counters);
                deps_.chiplet.graph_nodes++;
                if (r.cancelled)
                    r = interrupted();
                if (r.status != RBLN_FW_JOB_OK || r.cancelled)
                    return in_node(r, i);
            }
            continue;
        }
        if (ended())
            return in_node(interrupted(), plan.order[begin]);
        // Node k of the level runs on chips[k % nchips]: the others' on
        // their helpers, this chiplet's here, then wait for all of them.
        node_results_.assign(end - begin, PacketResult::ok());
        std::ptrdiff_t handed = 0;
        for (std::uint32_t k = begin; k < end; k++)
            handed += chips.at((k - begin) % nchips) != cfg_.index ? 1 : 0;
        std::latch done(handed);
        for (std::uint32_t k = begin; k < end; k++) {
            const unsigned c = chips.at((k - begin) % nchips);
            if (c != cfg_.index)
                deps_.helpers->post(c, {&plan.nodes[plan.order[k]], asid, &cancel_,
                                        &node_results_[k - begin], &done});
        }
        for (std::uint32_t k = begin; k < end; k++) {
            if (chips.at((k - begin) % nchips) != cfg_.index)
                continue;
            node_results_[k - begin] = run_graph_node(plan.nodes[plan.order[k]], mem, dma_, cancel_,
                                                      deps_.chiplet, deps_.counters);
            deps_.chiplet.graph_nodes++;
        }
        done.wait();
        // The first failing node of the level, by index, is the job's.
        for (std::uint32_t k = begin; k < end; k++) {
            PacketResult r = node_results_[k - begin];
            if (r.cancelled)
                r = interrupted();
            if (r.status != RBLN_FW_JOB_OK || r.cancelled)
                return in_node(r, plan.order[k]);
        }
    }
    return PacketResult::ok();
}

PacketResult CommandProcessor::wait_packet(const rbln_fw_pkt_wait& w, Memory& mem) {
    // Stopped, VM_ABORT, or the ASID aborted by a fault on another ring.
    const auto ended = [this, asid = mem.asid()] {
        return cancel_.load(std::memory_order_acquire) || (asid != 0 && deps_.mmu.aborted(asid));
    };
    const std::uint64_t t0 = deps_.host.card_time_ns();
    std::chrono::nanoseconds backoff = kFirstBackoff;
    while (true) {
        const std::uint64_t gen = deps_.hub.generation();
        std::uint64_t value = 0;
        {
            const Memory::Scope hold(mem);
            if (auto f = mem.translate(w.va, 8, Access::read, spans_))
                return PacketResult::mmu(*f);
            value =
                std::atomic_ref<std::uint64_t>(*word_at(spans_[0])).load(std::memory_order_acquire);
        }
        if (value >= w.value)
            return PacketResult::ok();
        if (w.timeout_ns != 0 && deps_.host.card_time_ns() - t0 >= w.timeout_ns)
            return failed(RBLN_FW_JOB_WAIT_TIMEOUT, "WAIT timed out");
        if (ended())
            return interrupted();
        // Sleep until a SIGNAL (or a doorbell) or the backoff: the host may
        // store the value without telling.
        deps_.hub.wait(gen, backoff, ended);
        backoff = deps_.hub.generation() != gen ? kFirstBackoff : next_backoff(backoff);
    }
}

// --- completions --------------------------------------------------------------------

bool CommandProcessor::cpl_room() const {
    return (cpl_tail_ + 1) % cfg_.entries != host_read(ctrl_->cpl_head);
}

void CommandProcessor::write_record(const rbln_fw_job_cpl& rec) {
    std::byte* slot = cpls_ + std::size_t{cpl_tail_} * kRecord;
    const auto* src = reinterpret_cast<const std::byte*>(&rec);
    std::memcpy(slot, src, kCplFlags);
    std::memcpy(slot + kCplFlags + 2, src + kCplFlags + 2, kRecord - kCplFlags - 2);
    const auto flags = static_cast<std::uint16_t>((rec.flags & ~RBLN_FW_REC_PHASE) | phase_);
    // Release: a host that sees the phase sees the whole record.
    std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(slot + kCplFlags))
        .store(flags, std::memory_order_release);
    cpl_tail_++;
    if (cpl_tail_ == cfg_.entries) {
        cpl_tail_ = 0;
        phase_ ^= RBLN_FW_REC_PHASE;
    }
}

void CommandProcessor::account_busy(std::uint64_t start_ns, std::uint64_t end_ns) {
    const std::uint64_t d = end_ns > start_ns ? end_ns - start_ns : 0;
    busy_ns_ += d;
    card_write(ctrl_->busy_ns, busy_ns_);
    deps_.chiplet.busy_ns += d;
}

bool CommandProcessor::complete(const Job& job, const Outcome& out) {
    const bool corrupt = out.result.status == 0xffff;
    rbln_fw_job_cpl cpl{};
    cpl.seqno = corrupt ? ~job.desc.seqno : job.desc.seqno;
    cpl.status = out.result.status;
    cpl.packet_offset = out.packet_offset;
    cpl.start_ns = job.start_ns;
    cpl.end_ns = deps_.host.card_time_ns();
    cpl.detail = out.result.detail;
    cpl.detail_arg = out.result.detail_arg;
    if (out.result.fault) {
        cpl.fault_va = out.result.fault->va;
        cpl.fault_reason = out.result.fault->reason;
        cpl.fault_access = static_cast<std::uint32_t>(out.result.fault->access);
    }
    // Never over a record the host has not read: wait for it.
    std::chrono::nanoseconds backoff = kFirstBackoff * 8;
    bool stalled = false;
    while (true) {
        if (!wait_runnable())
            return false;
        if (cpl_room())
            break;
        if (!stalled) {
            stalled = true;
            deps_.counters.cpl_stalls++;
            deps_.log.debug("ring %u: completion ring full: waiting for the host", cfg_.index);
            if (irq_owed_) {
                // A host that lost the held-back interrupt never makes room.
                irq_owed_ = false;
                deps_.counters.irqs_backstop++;
                raise_job_irq();
            }
        }
        if (!wait_kick(backoff))
            return false;
        backoff = next_backoff(backoff);
    }
    const std::uint32_t slot = cpl_tail_;
    account_busy(cpl.start_ns, cpl.end_ns);
    write_record(cpl);
    if (!corrupt)
        card_write(ctrl_->done_seqno, std::uint64_t{job.desc.seqno});
    deps_.counters.jobs++;
    if (out.result.status != RBLN_FW_JOB_OK) {
        deps_.counters.jobs_failed++;
        if (out.result.status == RBLN_FW_JOB_CANCELLED)
            deps_.counters.jobs_cancelled++;
        if (!corrupt)
            deps_.log.debug("ring %u: job %llu (asid %u) failed at packet offset %u: %s%s%s",
                            cfg_.index, static_cast<unsigned long long>(job.desc.seqno),
                            job.desc.asid, out.packet_offset, status_name(out.result.status),
                            out.result.why != nullptr ? ": " : "",
                            out.result.why != nullptr ? out.result.why : "");
    }
    // Interrupt moderation: a host still reading earlier records reads this
    // one too (it looks again after publishing cpl_head).  The fence orders
    // the record before the cpl_head read, against the host's own barrier.
    if ((job.desc.flags & RBLN_FW_JOB_IRQ) != 0) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (host_read(ctrl_->cpl_head) == slot) {
            irq_owed_ = false;
            raise_job_irq();
        } else {
            irq_owed_ = true;
            deps_.counters.irqs_moderated++;
        }
    }
    return true;
}

void CommandProcessor::finish_stop(const Job* running) {
    StopMode mode = StopMode::silent;
    {
        const std::lock_guard<std::mutex> lk(mu_);
        mode = mode_;
    }
    if (mode != StopMode::abort_jobs)
        return;
    bool irq = false;
    unsigned aborted = 0;
    auto abort_job = [&](const rbln_fw_job& d, std::uint64_t start_ns) {
        rbln_fw_job_cpl cpl{};
        cpl.seqno = d.seqno;
        cpl.status = RBLN_FW_JOB_ABORTED;
        cpl.start_ns = start_ns;
        cpl.end_ns = deps_.host.card_time_ns();
        aborted++;
        // The ring is forgotten next: a full ring cannot wait for the host.
        if (!cpl_room()) {
            deps_.counters.cpls_dropped++;
            return;
        }
        account_busy(cpl.start_ns, cpl.end_ns);
        write_record(cpl);
        card_write(ctrl_->done_seqno, std::uint64_t{d.seqno});
        deps_.counters.jobs++;
        deps_.counters.jobs_aborted++;
        irq = irq || (d.flags & RBLN_FW_JOB_IRQ) != 0;
    };
    if (running != nullptr)
        abort_job(running->desc, running->start_ns);
    const std::uint32_t tail = host_read(ctrl_->job_tail);
    if (tail < cfg_.entries) {
        while (head_ != tail) {
            rbln_fw_job d{};
            std::memcpy(&d, jobs_ + std::size_t{head_} * kRecord, sizeof(d));
            head_ = (head_ + 1) % cfg_.entries;
            const std::uint64_t now = deps_.host.card_time_ns();
            abort_job(d, now);
        }
        card_write(ctrl_->job_head, head_);
    }
    if (aborted != 0)
        deps_.log.info("ring %u: stopped, %u job(s) aborted", cfg_.index, aborted);
    if (irq)
        deps_.host.ring_irq();
}

} // namespace rbln::emu
