// SPDX-License-Identifier: GPL-2.0
// A booted card with command rings set up on every chiplet and one
// address space (ASID 1) mapping host memory, HBM of every chiplet and the
// command buffers: the way the driver prepares a card before jobs run.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <utility>

#include "cmd_builder.h"
#include "fake_host.h"
#include "page_table_builder.h"

namespace rbln::emu::test {

class TestCard {
public:
    // Guest RAM layout.
    static constexpr std::uint64_t kTables = 0x100000; // page-table pool
    static constexpr std::uint64_t kTablesSize = 0x100000;
    static constexpr std::uint64_t kCmd = 0x200000; // command buffers, 256 KiB per ring
    static constexpr std::uint64_t kCmdPerRing = 0x40000;
    static constexpr std::uint64_t kHost = 0x800000; // host data (2 MiB aligned)
    // Device VAs of ASID 1.
    static constexpr std::uint32_t kAsid = 1;
    static constexpr std::uint64_t kVaHost = 0x10'0000'0000ULL; // host data, 2 MiB pages
    static constexpr std::uint64_t kVaHbm = 0x20'0000'0000ULL;  // chiplet c at + c GiB
    static constexpr std::uint64_t kVaCmd = 0x30'0000'0000ULL;  // command buffers, read only
    static constexpr std::uint64_t kVaRo = 0x40'0000'0000ULL;   // host data, read only (4K)

    explicit TestCard(const Options& opt = test_options(), std::uint64_t host_bytes = 16ULL << 20,
                      std::uint64_t hbm_bytes = 16ULL << 20, std::uint32_t entries = 16)
        : h(opt, kHost + host_bytes), host_bytes_(host_bytes), hbm_bytes_(hbm_bytes),
          pt(h.memory(), kTables, kTablesSize) {
        h.boot(64);
        (void)h.drain_events();
        for (std::uint64_t off = 0; off < host_bytes; off += RBLN_FW_HUGE_SIZE)
            pt.map_2m(kVaHost + off, kHost + off, kPteRw);
        for (unsigned c = 0; c < chiplets(); c++) {
            for (std::uint64_t off = 0; off < hbm_bytes; off += RBLN_FW_HUGE_SIZE)
                pt.map_2m(hbm_va(c, off), h.ctrl().hbm[c].bar_offset + off,
                          kPteRw | RBLN_FW_PTE_LOCAL);
        }
        for (std::uint64_t off = 0; off < kCmdPerRing * chiplets(); off += RBLN_FW_PAGE_SIZE)
            pt.map_4k(kVaCmd + off, kCmd + off, RBLN_FW_PTE_READ);
        for (std::uint64_t off = 0; off < 16 * RBLN_FW_PAGE_SIZE; off += RBLN_FW_PAGE_SIZE)
            pt.map_4k(kVaRo + off, kHost + off, RBLN_FW_PTE_READ);
        bind(kAsid, pt.root());
        for (unsigned c = 0; c < chiplets(); c++)
            EXPECT_EQ(h.setup_ring(c, entries), RBLN_FW_ST_OK);
        (void)h.drain_events();
    }

    [[nodiscard]] unsigned chiplets() { return h.ctrl().chiplet_count; }
    static std::uint64_t hbm_va(unsigned chiplet, std::uint64_t off = 0) {
        return kVaHbm + (std::uint64_t{chiplet} << 30) + off;
    }
    std::byte* host(std::uint64_t off) { return h.ram(kHost + off); }
    std::byte* hbm(unsigned chiplet, std::uint64_t off) {
        return h.bar(h.ctrl().hbm[chiplet].bar_offset + off);
    }
    std::uint64_t host_u64(std::uint64_t off) {
        return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(host(off)))
            .load(std::memory_order_acquire);
    }
    void set_host_u64(std::uint64_t off, std::uint64_t v) {
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(host(off)))
            .store(v, std::memory_order_release);
    }

    std::uint16_t bind(std::uint32_t asid, std::uint64_t root) {
        rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_VM_BIND);
        req.args[0] = asid;
        req.args[1] = static_cast<std::uint32_t>(root);
        req.args[2] = static_cast<std::uint32_t>(root >> 32);
        return h.admin(req);
    }

    std::uint16_t invalidate(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
        rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_TLB_INVALIDATE);
        req.args[0] = asid;
        req.args[1] = static_cast<std::uint32_t>(va);
        req.args[2] = static_cast<std::uint32_t>(va >> 32);
        req.args[3] = static_cast<std::uint32_t>(size);
        req.args[4] = static_cast<std::uint32_t>(size >> 32);
        return h.admin(req);
    }

    // The job descriptor of `cb` placed in ring `ring`'s command area at
    // `slot` (64 KiB each): a VA of ASID 1, or its GPA for a kernel job.
    rbln_fw_job place(unsigned ring, const CmdBuf& cb, std::uint32_t asid = kAsid,
                      unsigned slot = 0, std::uint32_t flags = RBLN_FW_JOB_IRQ) {
        const std::uint64_t off = ring * kCmdPerRing + slot * 0x10000ULL;
        cb.put(h.memory(), kCmd + off);
        return FakeHost::job(asid, asid == 0 ? kCmd + off : kVaCmd + off, cb.size(), flags);
    }

    std::uint64_t submit(unsigned ring, const CmdBuf& cb, std::uint32_t asid = kAsid,
                         unsigned slot = 0, std::uint32_t flags = RBLN_FW_JOB_IRQ) {
        return h.submit_job(ring, place(ring, cb, asid, slot, flags));
    }

    // Runs one job and returns its completion (nullopt: none came).
    std::optional<rbln_fw_job_cpl> run(unsigned ring, const CmdBuf& cb,
                                       std::uint32_t asid = kAsid) {
        const std::uint64_t seqno = submit(ring, cb, asid);
        auto cpl = h.wait_job_cpl(ring);
        EXPECT_TRUE(cpl.has_value()) << "no completion on ring " << ring;
        if (cpl) {
            EXPECT_EQ(cpl->seqno, seqno);
        }
        return cpl;
    }

    // The status of one job (0xdead when no completion came).
    std::uint16_t status(unsigned ring, const CmdBuf& cb, std::uint32_t asid = kAsid) {
        const auto cpl = run(ring, cb, asid);
        return cpl ? cpl->status : 0xdead;
    }

    FakeHost h;
    std::uint64_t host_bytes_;
    std::uint64_t hbm_bytes_;
    PageTableBuilder pt;
};

// A job storing `value` at byte `off` of the host data (ASID 1's VA).
inline CmdBuf signal_job(std::uint64_t off, std::uint64_t value) {
    CmdBuf cb;
    cb.signal(TestCard::kVaHost + off, value);
    return cb;
}

// The next completions of `ring` are these jobs' (seqno, status), in order.
inline void expect_cpls(FakeHost& h, unsigned ring,
                        std::initializer_list<std::pair<std::uint64_t, std::uint16_t>> jobs) {
    for (const auto& [seqno, status] : jobs) {
        const auto cpl = h.wait_job_cpl(ring);
        ASSERT_TRUE(cpl.has_value()) << "no completion on ring " << ring << " for " << seqno;
        EXPECT_EQ(cpl->seqno, seqno);
        EXPECT_EQ(cpl->status, status) << "job " << seqno;
    }
}

// RING_STOP of a ring still running job `seqno`: the job completes ABORTED.
inline void expect_stop_aborts(FakeHost& h, unsigned ring, std::uint64_t seqno) {
    EXPECT_EQ(h.stop_ring(ring), RBLN_FW_ST_OK);
    const auto cpl = h.pop_job_cpl(ring);
    ASSERT_TRUE(cpl.has_value()) << "no completion on ring " << ring;
    EXPECT_EQ(cpl->seqno, seqno);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_ABORTED);
}

// Waits up to `timeout` for `pred`.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

} // namespace rbln::emu::test
