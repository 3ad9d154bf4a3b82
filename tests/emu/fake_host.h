// SPDX-License-Identifier: GPL-2.0
// An in-process fake host for the firmware model: a control block, guest
// RAM, and the host half of the handshake and of the three rings.
#pragma once

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "card.h"
#include "guest_memory.h"
#include "log.h"
#include "options.h"
#include "unique_fd.h"

namespace rbln::emu::test {

inline Options test_options(Family family = Family::rebel100) {
    Options opt;
    opt.family = family;
    opt.serial = "RBLNTEST-0001";
    opt.socket_path = "unused";
    opt.guest_ram_path = "unused";
    return opt;
}

// The whole memory BAR (control block and HBM) like the emulator's, as
// untouched anonymous memory: only the pages a test uses cost anything.
inline Mapping make_test_bar(Family family) {
    const std::uint64_t size = make_identity(test_options(family), 0).layout.bar_size;
    void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addr == MAP_FAILED)
        throw std::runtime_error("cannot map the test BAR");
    return {addr, size};
}

class FakeHost {
public:
    static constexpr std::uint64_t kRamSize = 8ULL << 20;
    static constexpr std::uint64_t kSq = 0x10000;
    static constexpr std::uint64_t kCq = 0x20000;
    static constexpr std::uint64_t kEv = 0x30000;
    static constexpr std::uint64_t kData = 0x40000; // request data buffers

    explicit FakeHost(Family family = Family::rebel100)
        : bar_(make_test_bar(family)), ram_(kRamSize), mem_(ram_, kRamSize),
          log_(LogLevel::debug,
               [this](LogLevel, std::string_view line) { log_lines.emplace_back(line); }),
          card(
              make_identity(test_options(family), 0),
              std::span<std::byte>(bar_.data(), bar_.size()), mem_,
              [this](unsigned v) { irqs.push_back(v); }, log_, [this] { return clock_ns; }) {}

    rbln_fw_ctrl& ctrl() { return *reinterpret_cast<rbln_fw_ctrl*>(bar_.data()); }
    std::byte* ram(std::uint64_t gpa) { return ram_.data() + gpa; }
    // The memory BAR at `offset` (HBM of chiplet i at ctrl().hbm[i]).
    std::byte* bar(std::uint64_t offset) { return bar_.data() + offset; }
    GuestMemory& memory() { return mem_; }

    // Step 2 of the handshake, without ringing.
    void configure(std::uint32_t entries, std::uint64_t sq = kSq, std::uint64_t cq = kCq,
                   std::uint64_t ev = kEv, std::uint16_t major = RBLN_FW_IFACE_MAJOR) {
        entries_ = entries;
        ctrl().ring_entries = entries;
        ctrl().admin_sq_addr = sq;
        ctrl().admin_cq_addr = cq;
        ctrl().event_ring_addr = ev;
        ctrl().host_iface_major = major;
        ctrl().host_iface_minor = RBLN_FW_IFACE_MINOR;
        ctrl().admin_sq_tail = 0;
        ctrl().admin_cq_head = 0;
        ctrl().event_head = 0;
        sq_tail_ = 0;
        cq_head_ = 0;
        ev_head_ = 0;
        cq_phase_ = RBLN_FW_REC_PHASE;
        ev_phase_ = RBLN_FW_REC_PHASE;
        for (std::uint64_t addr : {sq, cq, ev}) {
            if (entries <= RBLN_FW_RING_MAX_ENTRIES && addr <= kRamSize &&
                64ULL * entries <= kRamSize - addr)
                std::memset(ram(addr), 0, 64ULL * entries);
        }
    }

    void host_ready() {
        ctrl().host_gen++;
        ctrl().host_ctrl = RBLN_FW_HOST_READY;
        card.doorbell(RBLN_FW_DB_CTRL);
    }

    void boot(std::uint32_t entries = 8) {
        configure(entries);
        host_ready();
    }

    void host_reset() {
        ctrl().host_ctrl = 0;
        card.doorbell(RBLN_FW_DB_CTRL);
    }

    // Fills the next request slot (does not ring).  Returns its seq.
    std::uint32_t queue(rbln_fw_admin_req req) {
        req.seq = next_seq_++;
        std::memcpy(ram(ctrl().admin_sq_addr + 64ULL * sq_tail_), &req, sizeof(req));
        sq_tail_ = (sq_tail_ + 1) % entries_;
        ctrl().admin_sq_tail = sq_tail_;
        return req.seq;
    }

    std::uint32_t submit(const rbln_fw_admin_req& req) {
        const std::uint32_t seq = queue(req);
        card.doorbell(RBLN_FW_DB_ADMIN);
        return seq;
    }

    // The next new completion, consumed (admin_cq_head advanced).
    std::optional<rbln_fw_admin_cpl> pop_cpl() {
        rbln_fw_admin_cpl cpl{};
        std::memcpy(&cpl, ram(ctrl().admin_cq_addr + 64ULL * cq_head_), sizeof(cpl));
        if ((cpl.flags & RBLN_FW_REC_PHASE) != cq_phase_)
            return std::nullopt;
        cq_head_ = (cq_head_ + 1) % entries_;
        if (cq_head_ == 0)
            cq_phase_ ^= RBLN_FW_REC_PHASE;
        ctrl().admin_cq_head = cq_head_;
        return cpl;
    }

    std::optional<rbln_fw_event> pop_event() {
        rbln_fw_event ev{};
        std::memcpy(&ev, ram(ctrl().event_ring_addr + 64ULL * ev_head_), sizeof(ev));
        if ((ev.flags & RBLN_FW_REC_PHASE) != ev_phase_)
            return std::nullopt;
        ev_head_ = (ev_head_ + 1) % entries_;
        if (ev_head_ == 0)
            ev_phase_ ^= RBLN_FW_REC_PHASE;
        ctrl().event_head = ev_head_;
        return ev;
    }

    std::vector<rbln_fw_event> drain_events() {
        std::vector<rbln_fw_event> out;
        while (auto ev = pop_event())
            out.push_back(*ev);
        return out;
    }

    bool logged(std::string_view text) const {
        for (const std::string& l : log_lines) {
            if (l.find(text) != std::string::npos)
                return true;
        }
        return false;
    }

    static rbln_fw_admin_req request(std::uint16_t opcode, std::uint64_t data_addr = 0,
                                     std::uint32_t data_len = 0) {
        rbln_fw_admin_req req{};
        req.opcode = opcode;
        req.data_addr = data_addr;
        req.data_len = data_len;
        return req;
    }

private:
    Mapping bar_; // page aligned
    std::vector<std::byte> ram_;
    SpanGuestMemory mem_;
    std::uint32_t entries_ = 0;
    std::uint32_t sq_tail_ = 0;
    std::uint32_t cq_head_ = 0;
    std::uint32_t ev_head_ = 0;
    std::uint16_t cq_phase_ = RBLN_FW_REC_PHASE;
    std::uint16_t ev_phase_ = RBLN_FW_REC_PHASE;
    std::uint32_t next_seq_ = 100;

public:
    std::vector<std::string> log_lines;
    std::vector<unsigned> irqs;
    std::uint64_t clock_ns = 1'000'000;

private:
    Logger log_;

public:
    Card card;
};

} // namespace rbln::emu::test
