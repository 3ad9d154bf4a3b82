// SPDX-License-Identifier: GPL-2.0
// What the engines of a command processor (DMA, built-in kernels) share:
// the memory of the running job and the outcome of a packet.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "mmu.h"
#include "rbln_fw_cmd.h"

namespace rbln::emu {

// The memory a job may touch: device VAs of its ASID through the MMU (host
// DMA addresses for a kernel job).  Spans stay valid for the packet.
class JobMemory {
public:
    JobMemory() = default;
    virtual ~JobMemory() = default;
    JobMemory(const JobMemory&) = delete;
    JobMemory& operator=(const JobMemory&) = delete;
    JobMemory(JobMemory&&) = delete;
    JobMemory& operator=(JobMemory&&) = delete;

    // As Mmu::translate_into: the host memory of [va, va + len) in VA
    // order, or the fault.
    virtual std::optional<MmuFault> translate(std::uint64_t va, std::uint64_t len, Access access,
                                              std::vector<HostSpan>& spans) = 0;

    // A packet that runs long calls this now and then.  If an MMU change
    // (bind, unbind, invalidate, reset) waits for the packet's hold of the
    // MMU, it lets the change happen: drops the hold and takes it again.
    // true if it did: every translation taken before is stale (its pages
    // may be gone) and must be taken again before the next access.
    virtual bool yield() { return false; }
};

// The memory of a job of `asid` (host DMA addresses for a kernel job,
// asid 0) through one engine's port: a Scope holds the MMU for one
// packet's (or one graph node's) translations and data movement.
class PortMemory final : public JobMemory {
public:
    PortMemory(Mmu::Port& port, std::uint32_t asid) : port_(port), asid_(asid) {}

    std::optional<MmuFault> translate(std::uint64_t va, std::uint64_t len, Access access,
                                      std::vector<HostSpan>& spans) override {
        if (asid_ == 0)
            return hold_->translate_dma_into(va, len, access, spans);
        return hold_->translate_into(asid_, va, len, access, spans);
    }

    bool yield() override {
        if (!hold_ || !hold_->change_waiting())
            return false;
        hold_.reset(); // the waiting change goes first: it blocks new holds
        hold_.emplace(port_);
        return true;
    }

    // One packet's hold of the MMU.
    class Scope {
    public:
        explicit Scope(PortMemory& m) : m_(m) { m_.hold_.emplace(m_.port_); }
        ~Scope() { m_.hold_.reset(); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        Scope(Scope&&) = delete;
        Scope& operator=(Scope&&) = delete;

    private:
        PortMemory& m_;
    };

    [[nodiscard]] std::uint32_t asid() const { return asid_; }

private:
    Mmu::Port& port_;
    std::uint32_t asid_;
    std::optional<Mmu::Hold> hold_;
};

// How a packet ended.
struct PacketResult {
    std::uint16_t status = RBLN_FW_JOB_OK; // RBLN_FW_JOB_*
    std::optional<MmuFault> fault;         // status MMU_FAULT
    const char* why = nullptr;             // for the log
    bool cancelled = false;                // the ring was stopped meanwhile
    std::uint32_t detail = 0;              // GRAPH_EXEC: RBLN_FW_GRAPH_E_* (rbln_fw_job_cpl)
    std::uint32_t detail_arg = 0;

    static PacketResult ok() { return {}; }
    static PacketResult bad(const char* why) { return {RBLN_FW_JOB_BAD_PACKET, {}, why, false}; }
    static PacketResult mmu(const MmuFault& f) {
        return {RBLN_FW_JOB_MMU_FAULT, f, nullptr, false};
    }
    static PacketResult stopped() { return {RBLN_FW_JOB_ABORTED, {}, "ring stopped", true}; }
};

// Set when the ring is stopped: long packets look at it now and then.
using Cancel = std::atomic<bool>;

// What a long computation looks at between steps: false means stop now (the
// ring was stopped, or the memory it works on is gone).  Before it returns
// true it may have let an MMU change happen (JobMemory::yield) and pointed
// the computation's tensors at the new translations.
class Checkpoint {
public:
    Checkpoint() = default;
    virtual ~Checkpoint() = default;
    Checkpoint(const Checkpoint&) = delete;
    Checkpoint& operator=(const Checkpoint&) = delete;
    Checkpoint(Checkpoint&&) = delete;
    Checkpoint& operator=(Checkpoint&&) = delete;

    virtual bool proceed() = 0;
};

} // namespace rbln::emu
