// SPDX-License-Identifier: GPL-2.0
// The admin ring: reading requests, validating them, answering them.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstring>

#include "card.h"

namespace rbln::emu {

namespace {

bool args_zero(const rbln_fw_admin_req& req, std::size_t from) {
    return std::all_of(std::begin(req.args) + static_cast<std::ptrdiff_t>(from), std::end(req.args),
                       [](std::uint32_t a) { return a == 0; });
}

struct Reject {
    std::uint16_t status;
    const char* why;
};

// Checks shared by every request: flags, reserved, unused args, and the
// data buffer (needed: `payload` bytes; not needed: address and length 0).
// flags, reserved and unused args.
std::optional<Reject> check_fields(const rbln_fw_admin_req& req, std::size_t used_args) {
    if (req.flags != 0)
        return Reject{RBLN_FW_ST_BAD_FIELD, "flags not zero"};
    if (req.reserved != 0)
        return Reject{RBLN_FW_ST_BAD_FIELD, "reserved not zero"};
    if (!args_zero(req, used_args))
        return Reject{RBLN_FW_ST_BAD_FIELD, "unused args not zero"};
    return std::nullopt;
}

std::optional<Reject> check_common(const rbln_fw_admin_req& req, std::size_t used_args,
                                   std::size_t payload, GuestMemory& ram) {
    if (auto rej = check_fields(req, used_args))
        return rej;
    if (payload == 0) {
        if (req.data_addr != 0 || req.data_len != 0)
            return Reject{RBLN_FW_ST_BAD_FIELD, "data buffer given to a request without data"};
        return std::nullopt;
    }
    if (req.data_addr == 0)
        return Reject{RBLN_FW_ST_BAD_ADDRESS, "no data buffer"};
    if (req.data_len < payload)
        return Reject{RBLN_FW_ST_SHORT_BUFFER, "data buffer too small"};
    if (!ram.contains(req.data_addr, payload))
        return Reject{RBLN_FW_ST_BAD_ADDRESS, "data buffer not in guest RAM"};
    return std::nullopt;
}

std::uint64_t arg64(const rbln_fw_admin_req& req, std::size_t lo) {
    return std::uint64_t{req.args[lo]} | std::uint64_t{req.args[lo + 1]} << 32;
}

bool asid_in_range(std::uint32_t asid) {
    return asid != 0 && asid < RBLN_FW_MAX_ASID;
}

const char* mmu_reason_name(std::uint32_t reason) {
    switch (reason) {
    case RBLN_FW_MMU_NOT_MAPPED:
        return "NOT_MAPPED";
    case RBLN_FW_MMU_NO_WRITE:
        return "NO_WRITE";
    case RBLN_FW_MMU_NO_READ:
        return "NO_READ";
    case RBLN_FW_MMU_BAD_ENTRY:
        return "BAD_ENTRY";
    case RBLN_FW_MMU_BAD_ADDRESS:
        return "BAD_ADDRESS";
    case RBLN_FW_MMU_NO_VM:
        return "NO_VM";
    case RBLN_FW_MMU_BAD_VA:
        return "BAD_VA";
    default:
        return "?";
    }
}

const char* opcode_name(std::uint16_t op) {
    switch (op) {
    case RBLN_FW_OP_IDENTIFY:
        return "IDENTIFY";
    case RBLN_FW_OP_HEARTBEAT:
        return "HEARTBEAT";
    case RBLN_FW_OP_GET_TELEMETRY:
        return "GET_TELEMETRY";
    case RBLN_FW_OP_RESET_CHIPLET:
        return "RESET_CHIPLET";
    case RBLN_FW_OP_VM_BIND:
        return "VM_BIND";
    case RBLN_FW_OP_VM_UNBIND:
        return "VM_UNBIND";
    case RBLN_FW_OP_TLB_INVALIDATE:
        return "TLB_INVALIDATE";
    case RBLN_FW_OP_DEBUG_ACCESS:
        return "DEBUG_ACCESS";
    case RBLN_FW_OP_RING_SETUP:
        return "RING_SETUP";
    case RBLN_FW_OP_RING_STOP:
        return "RING_STOP";
    case RBLN_FW_OP_VM_ABORT:
        return "VM_ABORT";
    default:
        return "unknown";
    }
}

} // namespace

void Card::process_admin() {
    Rings& r = *rings_;
    bool completed = false;
    // Doorbells merge: take everything the host published, re-reading the
    // tail until it stops moving.
    while (state_ == RBLN_FW_STATE_READY) {
        const std::uint32_t tail = host_read(ctrl_->admin_sq_tail);
        if (tail >= r.entries) {
            if (r.reported_bad_tail != tail) {
                r.reported_bad_tail = tail;
                stats_.bad_requests++;
                log_.warn("admin_sq_tail %u out of range (%u entries): ignored", tail, r.entries);
                const std::array<std::uint64_t, 3> data{0, 0, tail};
                post_event(RBLN_FW_EV_BAD_REQUEST, RBLN_FW_ST_BAD_FIELD, kWholeCard, data);
            }
            break;
        }
        r.reported_bad_tail.reset();
        if (r.sq_head == tail)
            break;
        // Never overwrite a completion the host has not consumed.
        if ((r.cq.tail + 1) % r.entries == host_read(ctrl_->admin_cq_head)) {
            if (!r.cq_stalled) {
                stats_.cq_stalls++;
                log_.debug("completion ring full: waiting for the host");
            }
            r.cq_stalled = true;
            break;
        }
        r.cq_stalled = false;

        rbln_fw_admin_req req{};
        if (!ram_.read(r.sq_addr + std::uint64_t{r.sq_head} * kRecordSize, &req, sizeof(req))) {
            enter_fault(RBLN_FW_FAULT_INTERNAL, "request ring not readable");
            break;
        }
        stats_.admin_requests++;
        const Outcome out = execute(req);
        r.sq_head = (r.sq_head + 1) % r.entries;

        rbln_fw_admin_cpl cpl{};
        cpl.seq = req.seq;
        cpl.status = out.status;
        cpl.data_len = out.data_len;
        cpl.sq_head = r.sq_head;
        std::copy(out.result.begin(), out.result.end(), std::begin(cpl.result));
        (void)write_record(r.cq, host_read(ctrl_->admin_cq_head), &cpl); // space checked above
        stats_.completions++;
        card_write(ctrl_->admin_sq_head, r.sq_head);
        completed = true;

        if (out.status == RBLN_FW_ST_MMU_FAULT) {
            // Not a malformed request: its MMU_FAULT event is already out.
            log_.debug("request seq %u %s faulted", req.seq, opcode_name(req.opcode));
        } else if (out.status != RBLN_FW_ST_OK) {
            stats_.bad_requests++;
            log_.warn("request seq %u opcode %u (%s) rejected, status %u: %s", req.seq, req.opcode,
                      opcode_name(req.opcode), out.status, out.why != nullptr ? out.why : "?");
            const std::array<std::uint64_t, 2> data{req.seq, req.opcode};
            post_event(RBLN_FW_EV_BAD_REQUEST, out.status, kWholeCard, data);
        } else {
            log_.debug("request seq %u %s done", req.seq, opcode_name(req.opcode));
        }
        if (out.reset_chiplet) {
            const std::array<std::uint64_t, 0> none{};
            post_event(RBLN_FW_EV_CHIPLET_RESET, 0, *out.reset_chiplet, none);
        }
    }
    if (completed)
        pending_irqs_ |= 1U << RBLN_FW_IRQ_ADMIN;
}

Card::Outcome Card::execute(const rbln_fw_admin_req& req) {
    Outcome out;
    auto reject = [&out](const Reject& rej) {
        out.status = rej.status;
        out.why = rej.why;
        return out;
    };
    switch (req.opcode) {
    case RBLN_FW_OP_IDENTIFY: {
        if (auto rej = check_common(req, 0, sizeof(rbln_fw_identify), ram_))
            return reject(*rej);
        rbln_fw_identify idf{};
        idf.family = family_code(id_.family);
        idf.chiplet_count = id_.layout.chiplets;
        idf.iface_minor = id_.iface_minor;
        idf.iface_major = RBLN_FW_IFACE_MAJOR;
        std::memcpy(idf.uuid, id_.uuid.data(), sizeof(idf.uuid));
        // From the card's own copy: the host can scribble over the BAR.
        std::memcpy(idf.serial, id_.serial.data(),
                    std::min(id_.serial.size(), sizeof(idf.serial) - 1));
        std::memcpy(idf.fw_version, id_.fw_version.data(),
                    std::min(id_.fw_version.size(), sizeof(idf.fw_version) - 1));
        for (unsigned i = 0; i < id_.layout.chiplets; i++)
            idf.hbm_size[i] = id_.layout.hbm.at(i).size;
        (void)ram_.write(req.data_addr, &idf, sizeof(idf));
        out.data_len = sizeof(idf);
        return out;
    }
    case RBLN_FW_OP_HEARTBEAT:
        if (auto rej = check_common(req, 0, 0, ram_))
            return reject(*rej);
        out.result[0] = heartbeat_;
        out.result[1] = now_ns() - start_ns_;
        return out;
    case RBLN_FW_OP_GET_TELEMETRY: {
        if (auto rej = check_common(req, 0, sizeof(rbln_fw_telemetry), ram_))
            return reject(*rej);
        rbln_fw_telemetry t{};
        t.timestamp_ns = now_ns() - start_ns_;
        t.temp_mc = telemetry_.temp_mc;
        t.chiplet_count = id_.layout.chiplets;
        t.power_uw = telemetry_.power_uw;
        for (unsigned i = 0; i < id_.layout.chiplets; i++) {
            const ChipletTelemetry& c = telemetry_.chiplet.at(i);
            t.chiplet[i].temp_mc = c.temp_mc;
            t.chiplet[i].clock_mhz = c.clock_mhz;
            t.chiplet[i].mem_clock_mhz = c.mem_clock_mhz;
            t.chiplet[i].busy_ns = engines_.at(i).busy_ns.load();
            // The card figure is its hottest sensor (firmware-iface).
            t.temp_mc = std::max(t.temp_mc, c.temp_mc);
        }
        (void)ram_.write(req.data_addr, &t, sizeof(t));
        out.data_len = sizeof(t);
        return out;
    }
    case RBLN_FW_OP_RESET_CHIPLET:
        if (auto rej = check_common(req, 1, 0, ram_))
            return reject(*rej);
        if (req.args[0] >= id_.layout.chiplets)
            return reject({RBLN_FW_ST_BAD_ARG, "chiplet index out of range"});
        stats_.chiplet_resets.at(req.args[0])++;
        // Its command ring stops like RING_STOP (ABORTED for what it held)
        // and is forgotten: the host sets it up again.
        stop_ring(req.args[0], CommandProcessor::StopMode::abort_jobs);
        log_.info("chiplet %u reset", req.args[0]);
        out.reset_chiplet = req.args[0];
        return out;
    case RBLN_FW_OP_VM_BIND:
        return vm_bind(req);
    case RBLN_FW_OP_VM_UNBIND:
        return vm_unbind(req);
    case RBLN_FW_OP_TLB_INVALIDATE:
        return tlb_invalidate(req);
    case RBLN_FW_OP_DEBUG_ACCESS:
        return debug_access(req);
    case RBLN_FW_OP_RING_SETUP:
        return ring_setup(req);
    case RBLN_FW_OP_RING_STOP:
        return ring_stop(req);
    case RBLN_FW_OP_VM_ABORT:
        if (id_.iface_minor < 3)
            return reject({RBLN_FW_ST_BAD_OPCODE, "unknown opcode (a firmware-iface 1.2 card)"});
        return vm_abort(req);
    default:
        return reject({RBLN_FW_ST_BAD_OPCODE, "unknown opcode"});
    }
}

Card::Outcome Card::failed(std::uint16_t status, const char* why) {
    Outcome out;
    out.status = status;
    out.why = why;
    return out;
}

Card::Outcome Card::vm_bind(const rbln_fw_admin_req& req) {
    if (auto rej = check_common(req, 3, 0, ram_))
        return failed(rej->status, rej->why);
    const std::uint32_t asid = req.args[0];
    const std::uint64_t root = arg64(req, 1);
    if (!asid_in_range(asid))
        return failed(RBLN_FW_ST_BAD_ARG, "ASID out of range");
    if (root % RBLN_FW_PAGE_SIZE != 0)
        return failed(RBLN_FW_ST_BAD_ARG, "root table not 4K aligned");
    if (!ram_.contains(root, RBLN_FW_PAGE_SIZE))
        return failed(RBLN_FW_ST_BAD_ADDRESS, "root table not in guest RAM");
    const bool rebind = mmu_.bound(asid);
    if (!mmu_.bind(asid, root))
        return failed(RBLN_FW_ST_INTERNAL, "bind refused a checked root");
    log_.debug("MMU: asid %u %s root 0x%" PRIx64, asid, rebind ? "rebound," : "bound,", root);
    return {};
}

// The mark first, then the running jobs: a job taken meanwhile sees the mark.
Card::Outcome Card::vm_abort(const rbln_fw_admin_req& req) {
    if (auto rej = check_common(req, 1, 0, ram_))
        return failed(rej->status, rej->why);
    const std::uint32_t asid = req.args[0];
    if (!asid_in_range(asid))
        return failed(RBLN_FW_ST_BAD_ARG, "ASID out of range");
    if (!mmu_.abort(asid))
        return failed(RBLN_FW_ST_BAD_ARG, "ASID not bound");
    for (const std::unique_ptr<CommandProcessor>& p : procs_) {
        if (p)
            p->abort_asid(asid);
    }
    log_.info("MMU: asid %u aborted: its jobs end CANCELLED", asid);
    return {};
}

Card::Outcome Card::vm_unbind(const rbln_fw_admin_req& req) {
    if (auto rej = check_common(req, 1, 0, ram_))
        return failed(rej->status, rej->why);
    const std::uint32_t asid = req.args[0];
    if (!asid_in_range(asid))
        return failed(RBLN_FW_ST_BAD_ARG, "ASID out of range");
    if (!mmu_.unbind(asid))
        return failed(RBLN_FW_ST_BAD_ARG, "ASID not bound");
    log_.debug("MMU: asid %u unbound", asid);
    return {};
}

Card::Outcome Card::tlb_invalidate(const rbln_fw_admin_req& req) {
    if (auto rej = check_common(req, 5, 0, ram_))
        return failed(rej->status, rej->why);
    const std::uint32_t asid = req.args[0];
    const std::uint64_t va = arg64(req, 1);
    const std::uint64_t size = arg64(req, 3);
    constexpr std::uint64_t kVaLimit = 1ULL << RBLN_FW_VA_BITS;
    if (!asid_in_range(asid))
        return failed(RBLN_FW_ST_BAD_ARG, "ASID out of range");
    if (va % RBLN_FW_PAGE_SIZE != 0 || size % RBLN_FW_PAGE_SIZE != 0)
        return failed(RBLN_FW_ST_BAD_ARG, "VA or size not 4K aligned");
    if (va >= kVaLimit || size > kVaLimit - va)
        return failed(RBLN_FW_ST_BAD_ARG, "range beyond 48-bit VAs");
    mmu_.invalidate(asid, va, size); // unbound: nothing cached, a no-op
    return {};
}

void Card::report_mmu_fault(std::uint32_t asid, const MmuFault& fault, std::uint64_t source,
                            std::uint32_t chiplet) {
    log_.info("MMU fault: asid %u %s at 0x%" PRIx64 ": %s (source %" PRIu64 ")", asid,
              fault.access == Access::write ? "write" : "read", fault.va,
              mmu_reason_name(fault.reason), source);
    const std::array<std::uint64_t, 4> data{asid, fault.va,
                                            static_cast<std::uint64_t>(fault.access), source};
    post_event(RBLN_FW_EV_MMU_FAULT, fault.reason, chiplet, data);
}

Card::Outcome Card::debug_access(const rbln_fw_admin_req& req) {
    if (auto rej = check_fields(req, 4))
        return failed(rej->status, rej->why);
    const std::uint32_t asid = req.args[0];
    const std::uint32_t access = req.args[1];
    const std::uint64_t va = arg64(req, 2);
    if (access != RBLN_FW_ACCESS_READ && access != RBLN_FW_ACCESS_WRITE)
        return failed(RBLN_FW_ST_BAD_ARG, "access neither read nor write");
    if (req.data_len == 0 || req.data_len > RBLN_FW_PAGE_SIZE)
        return failed(RBLN_FW_ST_BAD_ARG, "data_len not 1..4096");
    if (req.data_addr == 0)
        return failed(RBLN_FW_ST_BAD_ADDRESS, "no data buffer");
    std::byte* buf = ram_.translate(req.data_addr, req.data_len);
    if (buf == nullptr)
        return failed(RBLN_FW_ST_BAD_ADDRESS, "data buffer not in guest RAM");

    const std::optional<MmuFault> fault = access == RBLN_FW_ACCESS_READ
                                              ? mmu_.read(asid, va, buf, req.data_len)
                                              : mmu_.write(asid, va, buf, req.data_len);
    Outcome out;
    if (fault) {
        report_mmu_fault(asid, *fault, RBLN_FW_SOURCE_DEBUG, kWholeCard);
        out.status = RBLN_FW_ST_MMU_FAULT;
        out.result[0] = fault->va;
        out.result[1] = fault->reason;
        return out;
    }
    out.data_len = access == RBLN_FW_ACCESS_READ ? req.data_len : 0;
    return out;
}

Card::Outcome Card::ring_setup(const rbln_fw_admin_req& req) {
    if (auto rej = check_common(req, 8, 0, ram_))
        return failed(rej->status, rej->why);
    RingConfig cfg;
    cfg.index = req.args[0];
    cfg.entries = req.args[1];
    cfg.jobs_addr = arg64(req, 2);
    cfg.cpls_addr = arg64(req, 4);
    cfg.ctrl_addr = arg64(req, 6);
    if (id_.num_vectors < RBLN_FW_RING_VECTORS)
        return failed(RBLN_FW_ST_BAD_ARG, "the card has fewer than 3 MSI-X vectors: no rings");
    if (cfg.index >= id_.layout.chiplets)
        return failed(RBLN_FW_ST_BAD_ARG, "ring index out of range");
    if (!std::has_single_bit(cfg.entries) || cfg.entries < RBLN_FW_RING_MIN_ENTRIES ||
        cfg.entries > RBLN_FW_RING_MAX_ENTRIES)
        return failed(RBLN_FW_ST_BAD_ARG, "entries not a power of two in 4..4096");
    if (cfg.jobs_addr % kRecordSize != 0 || cfg.cpls_addr % kRecordSize != 0 ||
        cfg.ctrl_addr % kRecordSize != 0)
        return failed(RBLN_FW_ST_BAD_ARG, "ring memory not 64-byte aligned");
    const std::uint64_t bytes = std::uint64_t{cfg.entries} * kRecordSize;
    if (!ram_.contains(cfg.jobs_addr, bytes) || !ram_.contains(cfg.cpls_addr, bytes) ||
        !ram_.contains(cfg.ctrl_addr, sizeof(rbln_fw_ring_ctrl)))
        return failed(RBLN_FW_ST_BAD_ADDRESS, "ring memory not in guest RAM");
    auto overlap = [](std::uint64_t a, std::uint64_t alen, std::uint64_t b, std::uint64_t blen) {
        return a < b + blen && b < a + alen;
    };
    if (overlap(cfg.jobs_addr, bytes, cfg.cpls_addr, bytes) ||
        overlap(cfg.jobs_addr, bytes, cfg.ctrl_addr, sizeof(rbln_fw_ring_ctrl)) ||
        overlap(cfg.cpls_addr, bytes, cfg.ctrl_addr, sizeof(rbln_fw_ring_ctrl)))
        return failed(RBLN_FW_ST_BAD_ARG, "job ring, completion ring and ring control overlap");
    // A ring that is set up is replaced: RING_STOP first.
    stop_ring(cfg.index, CommandProcessor::StopMode::abort_jobs);
    const RingDeps deps{*this,
                        ram_,
                        mmu_,
                        log_,
                        engines_.at(cfg.index),
                        ring_counters_,
                        hub_,
                        irq_holdoff_ns_,
                        id_.iface_minor,
                        id_.layout.chiplets > 1 ? helpers_.get() : nullptr,
                        &graph_spread_bytes_};
    auto proc = std::make_unique<CommandProcessor>(deps, cfg);
    {
        const std::lock_guard<std::mutex> lk(procs_mu_);
        procs_.at(cfg.index) = std::move(proc);
    }
    log_.info("ring %u set up: %u entries, jobs 0x%" PRIx64 " completions 0x%" PRIx64
              " control 0x%" PRIx64,
              cfg.index, cfg.entries, cfg.jobs_addr, cfg.cpls_addr, cfg.ctrl_addr);
    return {};
}

Card::Outcome Card::ring_stop(const rbln_fw_admin_req& req) {
    if (auto rej = check_common(req, 1, 0, ram_))
        return failed(rej->status, rej->why);
    if (req.args[0] >= id_.layout.chiplets)
        return failed(RBLN_FW_ST_BAD_ARG, "ring index out of range");
    // A ring that is not set up: nothing to stop (not an error).
    stop_ring(req.args[0], CommandProcessor::StopMode::abort_jobs);
    return {};
}

} // namespace rbln::emu
