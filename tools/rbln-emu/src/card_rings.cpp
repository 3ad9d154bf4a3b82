// SPDX-License-Identifier: GPL-2.0
// The card's side of the command rings: their processors' life, the
// RingHost calls they make (from their threads), and the injected ring
// faults.  RING_SETUP and RING_STOP are admin requests (card_admin.cpp).
#include <cinttypes>
#include <stdexcept>

#include "card.h"

namespace rbln::emu {

bool Card::ring_up(unsigned chiplet) const {
    return chiplet < procs_.size() && procs_.at(chiplet) != nullptr;
}

void Card::stop_ring(unsigned chiplet, CommandProcessor::StopMode mode) {
    ChipletEngine& e = engines_.at(chiplet);
    e.hang = false;
    std::unique_ptr<CommandProcessor> p;
    {
        const std::lock_guard<std::mutex> lk(procs_mu_);
        p.swap(procs_.at(chiplet));
    }
    if (!p)
        return;
    p->stop(mode);
    p.reset();
    log_.info("ring %u stopped%s", chiplet,
              mode == CommandProcessor::StopMode::silent ? " (forgotten)" : "");
    flush_irqs();
}

void Card::stop_rings(CommandProcessor::StopMode mode) {
    std::array<std::unique_ptr<CommandProcessor>, RBLN_FW_MAX_CHIPLETS> stopping;
    {
        const std::lock_guard<std::mutex> lk(procs_mu_);
        stopping.swap(procs_);
    }
    for (std::unique_ptr<CommandProcessor>& p : stopping) {
        if (!p)
            continue;
        p->stop(mode);
        p.reset();
    }
}

void Card::kick_rings() {
    for (std::unique_ptr<CommandProcessor>& p : procs_) {
        if (p)
            p->kick();
    }
}

// --- RingHost: called from ring threads ---------------------------------------------

void Card::ring_mmu_fault(unsigned ring, std::uint32_t asid, const MmuFault& fault) {
    report_mmu_fault(asid, fault, std::uint64_t{1} + ring, ring);
    flush_irqs();
}

void Card::ring_asid_aborted(unsigned ring, std::uint32_t asid) {
    const std::lock_guard<std::mutex> lk(procs_mu_);
    for (unsigned i = 0; i < procs_.size(); i++) {
        if (i != ring && procs_.at(i))
            procs_.at(i)->abort_asid(asid);
    }
}

void Card::ring_irq() {
    raise(RBLN_FW_IRQ_RING);
}

void Card::ring_bad_tail(unsigned ring, std::uint32_t tail) {
    log_.warn("ring %u: job_tail %u out of range: ignored", ring, tail);
    const std::array<std::uint64_t, 4> data{0, 0, tail, std::uint64_t{1} + ring};
    post_event(RBLN_FW_EV_BAD_REQUEST, RBLN_FW_ST_BAD_FIELD, ring, data);
    flush_irqs();
}

// --- injected faults (control interface) ----------------------------------------------

namespace {

void check_chiplet(unsigned chiplet, unsigned count) {
    if (chiplet >= count)
        throw std::out_of_range("chiplet index out of range");
}

} // namespace

void Card::inject_hang(unsigned chiplet) {
    check_chiplet(chiplet, id_.layout.chiplets);
    engines_.at(chiplet).hang = true;
    ring_counters_.hangs++;
    log_.info("chiplet %u hangs (injected): its ring takes no job and completes nothing", chiplet);
}

void Card::inject_dma_error(unsigned chiplet) {
    check_chiplet(chiplet, id_.layout.chiplets);
    engines_.at(chiplet).dma_error = true;
    log_.info("chiplet %u: the next DMA packet fails (injected)", chiplet);
}

void Card::inject_corrupt_cpl(unsigned chiplet) {
    check_chiplet(chiplet, id_.layout.chiplets);
    engines_.at(chiplet).corrupt_cpl = true;
    log_.info("chiplet %u: the next completion is corrupted (injected)", chiplet);
}

void Card::inject_lost_irq(unsigned chiplet) {
    check_chiplet(chiplet, id_.layout.chiplets);
    engines_.at(chiplet).lost_irq = true;
    log_.info("chiplet %u: the next job interrupt is lost (injected)", chiplet);
}

void Card::clear_ring_faults() {
    for (ChipletEngine& e : engines_) {
        e.hang = false;
        e.dma_error = false;
        e.corrupt_cpl = false;
        e.lost_irq = false;
    }
    kick_rings();
}

} // namespace rbln::emu
