// SPDX-License-Identifier: GPL-2.0
// Command rings (rbln_fw_cmd.md) driven like the kernel driver drives
// them: RING_SETUP/RING_STOP validation, job order and the completion
// protocol, jobs and their faults, ring stop and chiplet reset, and the
// processors' threads (parallel rings, device-side WAIT, TLB invalidation
// seen by every ring).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "ring_fixture.h"

using namespace rbln::emu;
using namespace rbln::emu::test;
using namespace std::chrono_literals;

namespace cmd_ring_test {

namespace {

constexpr std::uint64_t k4K = RBLN_FW_PAGE_SIZE;

rbln_fw_event expect_one_event(FakeHost& h, std::uint16_t type) {
    rbln_fw_event found{};
    EXPECT_TRUE(eventually([&] {
        for (const rbln_fw_event& ev : h.drain_events()) {
            if (ev.type == type) {
                found = ev;
                return true;
            }
        }
        return false;
    }));
    return found;
}

// --- RING_SETUP and RING_STOP -----------------------------------------------------

class RingSetup : public ::testing::Test {
protected:
    void SetUp() override {
        h.boot(16);
        (void)h.drain_events();
    }
    FakeHost h;
};

TEST_F(RingSetup, ValidRingIsAcceptedAndTheCardInitializesItsControlFields) {
    const RingMemory m = FakeHost::ring_memory(2);
    // Garbage where the card's fields go: it must write them itself.
    auto& c = *reinterpret_cast<rbln_fw_ring_ctrl*>(h.ram(m.ctrl));
    EXPECT_EQ(h.admin(FakeHost::ring_setup_request(2, 8, m)), RBLN_FW_ST_OK);
    EXPECT_TRUE(h.card.ring_up(2));
    EXPECT_FALSE(h.card.ring_up(0));
    EXPECT_EQ(c.job_head, 0U);
    EXPECT_EQ(c.done_seqno, 0U);
    EXPECT_EQ(c.busy_ns, 0U);
    EXPECT_EQ(h.card.stats().rings_up, 1U);
    EXPECT_TRUE(h.drain_events().empty());
}

struct BadSetup {
    const char* name;
    rbln_fw_admin_req req;
    std::uint16_t status;
};

rbln_fw_admin_req setup_with(unsigned ring, std::uint32_t entries, RingMemory m) {
    return FakeHost::ring_setup_request(ring, entries, m);
}

RingMemory shifted(RingMemory m, std::uint64_t jobs, std::uint64_t cpls, std::uint64_t ctrl) {
    m.jobs += jobs;
    m.cpls += cpls;
    m.ctrl += ctrl;
    return m;
}

const RingMemory kM = FakeHost::ring_memory(0);

class RingSetupMalformed : public ::testing::TestWithParam<BadSetup> {};

TEST_P(RingSetupMalformed, IsRejectedWithItsStatusAndABadRequestEvent) {
    FakeHost h;
    h.boot(16);
    (void)h.drain_events();
    const std::uint32_t seq = h.submit(GetParam().req);
    const auto cpl = h.pop_cpl();
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seq, seq);
    EXPECT_EQ(cpl->status, GetParam().status);
    EXPECT_EQ(h.card.stats().rings_up, 0U);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_BAD_REQUEST);
    EXPECT_EQ(evs[0].code, GetParam().status);
    EXPECT_EQ(evs[0].data[1], RBLN_FW_OP_RING_SETUP);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RingSetupMalformed,
    ::testing::Values(
        BadSetup{"RingPastChiplets", setup_with(4, 8, kM), RBLN_FW_ST_BAD_ARG},
        BadSetup{"RingHuge", setup_with(0xffffffff, 8, kM), RBLN_FW_ST_BAD_ARG},
        BadSetup{"EntriesZero", setup_with(0, 0, kM), RBLN_FW_ST_BAD_ARG},
        BadSetup{"EntriesTwo", setup_with(0, 2, kM), RBLN_FW_ST_BAD_ARG},
        BadSetup{"EntriesNotPowerOfTwo", setup_with(0, 12, kM), RBLN_FW_ST_BAD_ARG},
        BadSetup{"EntriesAbove4096", setup_with(0, 8192, kM), RBLN_FW_ST_BAD_ARG},
        BadSetup{"JobsMisaligned", setup_with(0, 8, shifted(kM, 8, 0, 0)), RBLN_FW_ST_BAD_ARG},
        BadSetup{"CplsMisaligned", setup_with(0, 8, shifted(kM, 0, 32, 0)), RBLN_FW_ST_BAD_ARG},
        BadSetup{"CtrlMisaligned", setup_with(0, 8, shifted(kM, 0, 0, 4)), RBLN_FW_ST_BAD_ARG},
        BadSetup{"JobsOutsideRam", setup_with(0, 8, RingMemory{FakeHost::kRamSize, kM.cpls, kM.ctrl}),
                 RBLN_FW_ST_BAD_ADDRESS},
        BadSetup{"CplsEndOutsideRam",
                 setup_with(0, 8, RingMemory{kM.jobs, FakeHost::kRamSize - 256, kM.ctrl}),
                 RBLN_FW_ST_BAD_ADDRESS},
        BadSetup{"CtrlFarAway", setup_with(0, 8, RingMemory{kM.jobs, kM.cpls, 0xffffffffffffffc0ULL}),
                 RBLN_FW_ST_BAD_ADDRESS},
        BadSetup{"CtrlInPciHole", setup_with(0, 8, RingMemory{kM.jobs, kM.cpls, 0xfee00000}),
                 RBLN_FW_ST_BAD_ADDRESS},
        BadSetup{"JobsOverlapCpls", setup_with(0, 8, RingMemory{kM.jobs, kM.jobs + 256, kM.ctrl}),
                 RBLN_FW_ST_BAD_ARG},
        BadSetup{"CtrlInsideCpls", setup_with(0, 8, RingMemory{kM.jobs, kM.cpls, kM.cpls + 64}),
                 RBLN_FW_ST_BAD_ARG},
        BadSetup{"UnusedArgSet",
                 [] {
                     auto r = setup_with(0, 8, kM);
                     r.args[8] = 1;
                     return r;
                 }(),
                 RBLN_FW_ST_BAD_FIELD},
        BadSetup{"FlagsSet",
                 [] {
                     auto r = setup_with(0, 8, kM);
                     r.flags = 1;
                     return r;
                 }(),
                 RBLN_FW_ST_BAD_FIELD},
        BadSetup{"DataBufferGiven",
                 [] {
                     auto r = setup_with(0, 8, kM);
                     r.data_addr = FakeHost::kData;
                     r.data_len = 64;
                     return r;
                 }(),
                 RBLN_FW_ST_BAD_FIELD}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RingSetupVectors, CardWithTwoVectorsRejectsRingSetup) {
    Options opt = test_options();
    opt.vectors = 2;
    FakeHost h(opt);
    h.boot(16);
    EXPECT_EQ(h.setup_ring(0, 8), RBLN_FW_ST_BAD_ARG);
    EXPECT_FALSE(h.card.ring_up(0));
    opt.vectors = 3;
    FakeHost h3(opt);
    h3.boot(16);
    EXPECT_EQ(h3.setup_ring(0, 8), RBLN_FW_ST_OK);
}

TEST_F(RingSetup, RingStopValidatesItsArgsAndStoppingARingThatIsNotUpIsFine) {
    EXPECT_EQ(h.stop_ring(1), RBLN_FW_ST_OK);
    EXPECT_EQ(h.stop_ring(4), RBLN_FW_ST_BAD_ARG);
    rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_RING_STOP);
    req.args[1] = 5;
    EXPECT_EQ(h.admin(req), RBLN_FW_ST_BAD_FIELD);
    ASSERT_EQ(h.setup_ring(1, 8), RBLN_FW_ST_OK);
    EXPECT_EQ(h.stop_ring(1), RBLN_FW_ST_OK);
    EXPECT_FALSE(h.card.ring_up(1));
}

TEST_F(RingSetup, CardResetAndNewHandshakeForgetEveryRing) {
    for (unsigned c = 0; c < 4; c++)
        ASSERT_EQ(h.setup_ring(c, 8), RBLN_FW_ST_OK);
    EXPECT_EQ(h.card.stats().rings_up, 4U);
    h.boot(16); // new host_gen while READY: a new handshake
    EXPECT_EQ(h.card.stats().rings_up, 0U);
    ASSERT_EQ(h.setup_ring(0, 8), RBLN_FW_ST_OK);
    h.host_reset();
    EXPECT_EQ(h.card.stats().rings_up, 0U);
    // A job pushed onto the forgotten ring is never taken.
    h.boot(16);
    (void)h.push_job(0, FakeHost::job(1, 0x1000, 8));
    h.ring_doorbell();
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(h.ring_ctrl(0).job_head, 0U);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value());
}

// --- jobs and completions ---------------------------------------------------------

class Jobs : public ::testing::Test {
protected:
    TestCard t;
    FakeHost& h = t.h;
};

TEST_F(Jobs, JobsRunInRingOrderWithOneCompletionEachAndDoneSeqno) {
    // Five jobs queued at once: each SIGNALs its index after checking (by
    // WAIT with value index) that the one before it ran.
    std::vector<std::uint64_t> seqnos;
    for (unsigned i = 0; i < 5; i++) {
        CmdBuf cb;
        cb.wait(TestCard::kVaHost, i).signal(TestCard::kVaHost, i + 1);
        seqnos.push_back(h.push_job(0, t.place(0, cb, TestCard::kAsid, i)));
    }
    h.ring_doorbell(); // one doorbell for the five
    for (unsigned i = 0; i < 5; i++) {
        const auto cpl = h.wait_job_cpl(0);
        ASSERT_TRUE(cpl.has_value()) << i;
        EXPECT_EQ(cpl->seqno, seqnos[i]);
        EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
        EXPECT_EQ(cpl->packet_offset, 0U);
        EXPECT_LE(cpl->start_ns, cpl->end_ns);
    }
    EXPECT_FALSE(h.pop_job_cpl(0).has_value());
    EXPECT_EQ(t.host_u64(0), 5U);
    EXPECT_EQ(h.load(h.ring_ctrl(0).done_seqno), seqnos.back());
    EXPECT_EQ(h.load(h.ring_ctrl(0).job_head), 5U);
    EXPECT_EQ(h.card.stats().jobs, 5U);
}

TEST_F(Jobs, PhaseBitFlipsOnEveryWrapOfTheCompletionRing) {
    // 16 entries, 40 jobs one at a time, then in batches of 15.
    for (unsigned i = 0; i < 40; i++) {
        CmdBuf cb;
        cb.nop();
        const auto cpl = t.run(1, cb);
        ASSERT_TRUE(cpl.has_value());
        EXPECT_EQ(cpl->flags & RBLN_FW_REC_PHASE, (i / 16) % 2 == 0 ? 1 : 0) << i;
    }
    for (unsigned b = 0; b < 3; b++) {
        CmdBuf cb;
        cb.nop();
        const rbln_fw_job j = t.place(1, cb);
        for (unsigned i = 0; i < 15; i++)
            (void)h.push_job(1, j);
        h.ring_doorbell();
        for (unsigned i = 0; i < 15; i++)
            ASSERT_TRUE(h.wait_job_cpl(1).has_value()) << b << " " << i;
    }
    EXPECT_EQ(h.load(h.ring_ctrl(1).done_seqno), 40U + 45U);
}

TEST_F(Jobs, FullCompletionRingHoldsTheNextCompletionUntilTheHostReads) {
    // 16 entries: 15 unread records fill the completion ring.
    CmdBuf cb;
    cb.nop();
    const rbln_fw_job j = t.place(2, cb);
    for (unsigned i = 0; i < 15; i++)
        (void)h.push_job(2, j);
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(2).done_seqno) == 15; }));
    // Two more: the card takes the first and waits for room.
    CmdBuf sig;
    sig.signal(TestCard::kVaHost + 8, 77);
    (void)h.push_job(2, t.place(2, sig, TestCard::kAsid, 1));
    (void)h.push_job(2, j);
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return t.host_u64(8) == 77; })); // the job ran
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(h.load(h.ring_ctrl(2).done_seqno), 15U); // but did not complete
    EXPECT_EQ(h.load(h.ring_ctrl(2).job_head), 0U);    // 16 % 16: it took one, not two
    EXPECT_GE(h.card.stats().ring_cpl_stalls, 1U);
    // Reading frees room: the held records follow, nothing overwritten.
    for (std::uint64_t s = 1; s <= 17; s++) {
        const auto cpl = h.wait_job_cpl(2);
        ASSERT_TRUE(cpl.has_value()) << s;
        EXPECT_EQ(cpl->seqno, s);
    }
    EXPECT_FALSE(h.pop_job_cpl(2).has_value());
}

TEST_F(Jobs, RingInterruptOnlyForJobsThatAskOrSignalsWithTheIrqFlag) {
    CmdBuf cb;
    cb.nop();
    (void)h.submit_job(0, t.place(0, cb, TestCard::kAsid, 0, 0)); // no IRQ flag
    ASSERT_TRUE(h.wait_job_cpl(0).has_value());
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), 0U);
    ASSERT_TRUE(t.run(0, cb).has_value()); // RBLN_FW_JOB_IRQ
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) == 1; }));
    CmdBuf s;
    s.signal(TestCard::kVaHost, 1, RBLN_FW_SIGNAL_IRQ);
    (void)h.submit_job(0, t.place(0, s, TestCard::kAsid, 1, 0));
    ASSERT_TRUE(h.wait_job_cpl(0).has_value());
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) == 2; }));
}

TEST_F(Jobs, JobInterruptOnlyWhenTheHostHadReadEveryEarlierRecord) {
    h.card.set_irq_holdoff(std::chrono::nanoseconds(0)); // no backstop: counts are exact
    CmdBuf cb;
    cb.nop();
    // Three jobs the host does not read yet: one interrupt, for the first.
    for (unsigned i = 0; i < 3; i++)
        (void)h.push_job(1, t.place(1, cb));
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).done_seqno) == 3; }));
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), 1U);
    EXPECT_EQ(h.card.stats().ring_irqs_moderated, 2U);
    // The host reads them all (cpl_head 3): the next job interrupts again.
    for (unsigned i = 0; i < 3; i++)
        ASSERT_TRUE(h.pop_job_cpl(1).has_value());
    ASSERT_TRUE(t.run(1, cb).has_value());
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) == 2; }));
    // A host that read only some: still no interrupt.
    (void)h.push_job(1, t.place(1, cb));
    (void)h.push_job(1, t.place(1, cb));
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).done_seqno) == 6; }));
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), 3U);
    ASSERT_TRUE(h.pop_job_cpl(1).has_value());
    (void)h.submit_job(1, t.place(1, cb));
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).done_seqno) == 7; }));
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), 3U);
    EXPECT_EQ(h.card.stats().ring_irqs_moderated, 4U);
}

// The host's half of the moderation (publish cpl_head, barrier, look again)
// can fail where its barrier does not order its store before its load for
// the card (single-threaded TCG): a held-back interrupt whose record is still
// unread once the ring is idle for the holdoff is raised anyway, once.
TEST_F(Jobs, HeldBackInterruptIsRaisedWhenItsRecordStaysUnreadPastTheHoldoff) {
    h.card.set_irq_holdoff(std::chrono::milliseconds(20));
    CmdBuf cb;
    cb.nop();
    for (unsigned i = 0; i < 3; i++)
        (void)h.push_job(1, t.place(1, cb));
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).done_seqno) == 3; }));
    // The host reads nothing: one interrupt for the first record, two held
    // back, then one more after the holdoff.
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) == 2; }));
    EXPECT_EQ(h.card.stats().ring_irqs_moderated, 2U);
    EXPECT_EQ(h.card.stats().ring_irqs_backstop, 1U);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), 2U); // once, not again and again
    // A host that read every record in time gets no extra interrupt.
    for (unsigned i = 0; i < 3; i++)
        ASSERT_TRUE(h.pop_job_cpl(1).has_value());
    ASSERT_TRUE(t.run(1, cb).has_value());
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) == 3; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), 3U);
    EXPECT_EQ(h.card.stats().ring_irqs_backstop, 1U);
}

TEST_F(Jobs, BusyTimeOfJobsGoesToTheRingControlAndTheTelemetry) {
    CmdBuf cb;
    cb.wait(TestCard::kVaHost + 64, 1);
    const std::uint64_t start = h.clock_ns.load();
    (void)t.submit(3, cb);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(3).job_head) == 1; }));
    h.clock_ns += 5000;
    t.set_host_u64(64, 1);
    const auto cpl = h.wait_job_cpl(3);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->start_ns, start - 1'000'000); // card time: since the card started
    EXPECT_EQ(cpl->end_ns, cpl->start_ns + 5000);
    EXPECT_EQ(h.load(h.ring_ctrl(3).busy_ns), 5000U);
    EXPECT_EQ(h.card.telemetry().chiplet[3].busy_ns, 5000U);
    EXPECT_EQ(h.card.telemetry().chiplet[0].busy_ns, 0U);
    // GET_TELEMETRY reports it too.
    const auto seq = h.submit(
        FakeHost::request(RBLN_FW_OP_GET_TELEMETRY, FakeHost::kData, sizeof(rbln_fw_telemetry)));
    ASSERT_EQ(h.pop_cpl()->seq, seq);
    rbln_fw_telemetry tel{};
    std::memcpy(&tel, h.ram(FakeHost::kData), sizeof(tel));
    EXPECT_EQ(tel.chiplet[3].busy_ns, 5000U);
}

TEST_F(Jobs, TimestampStoresCardTimeLikeHeartbeatUptime) {
    h.clock_ns = 123'456'789;
    CmdBuf cb;
    cb.timestamp(TestCard::kVaHost + 16).timestamp(TestCard::hbm_va(1, 8));
    ASSERT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(16), 123'456'789U - 1'000'000U);
    std::uint64_t v = 0;
    std::memcpy(&v, t.hbm(1, 8), 8);
    EXPECT_EQ(v, 123'456'789U - 1'000'000U);
    const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    const auto cpl = h.pop_cpl();
    ASSERT_EQ(cpl->seq, seq);
    EXPECT_EQ(cpl->result[1], v);
}

struct BadJobCase {
    const char* name;
    void (*edit)(rbln_fw_job&);
};

class BadJobs : public ::testing::TestWithParam<BadJobCase> {};

TEST_P(BadJobs, MalformedDescriptorCompletesBadJobAndTheNextJobRuns) {
    TestCard t;
    CmdBuf cb;
    cb.signal(TestCard::kVaHost, 9);
    rbln_fw_job j = t.place(0, cb);
    GetParam().edit(j);
    const std::uint64_t bad = t.h.submit_job(0, j);
    const auto cpl = t.h.wait_job_cpl(0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, bad);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_BAD_JOB);
    EXPECT_EQ(cpl->packet_offset, 0U);
    EXPECT_EQ(t.host_u64(0), 0U); // nothing ran
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 9U);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadJobs,
    ::testing::Values(
        BadJobCase{"Reserved0", [](rbln_fw_job& j) { j.reserved0 = 1; }},
        BadJobCase{"Reserved3", [](rbln_fw_job& j) { j.reserved[3] = 1; }},
        BadJobCase{"UnknownFlag", [](rbln_fw_job& j) { j.flags |= 4; }},
        BadJobCase{"SizeZero", [](rbln_fw_job& j) { j.cmd_size = 0; }},
        BadJobCase{"SizeNotMultipleOf8", [](rbln_fw_job& j) { j.cmd_size = 28; }},
        BadJobCase{"SizeAboveMax", [](rbln_fw_job& j) { j.cmd_size = RBLN_FW_CMD_MAX + 8; }},
        BadJobCase{"BufferMisaligned", [](rbln_fw_job& j) { j.cmd_addr += 4; }},
        BadJobCase{"AsidOutOfRange", [](rbln_fw_job& j) { j.asid = RBLN_FW_MAX_ASID; }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Jobs, CommandBufferThatFaultsFailsTheJobWithItsFaultAndAnEvent) {
    rbln_fw_job j = FakeHost::job(TestCard::kAsid, 0x50'0000'0000ULL + 0x40, 64);
    const std::uint64_t s = h.submit_job(1, j);
    auto cpl = h.wait_job_cpl(1);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, s);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_va, 0x50'0000'0040ULL);
    EXPECT_EQ(cpl->fault_reason, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(cpl->fault_access, RBLN_FW_ACCESS_READ);
    const rbln_fw_event ev = expect_one_event(h, RBLN_FW_EV_MMU_FAULT);
    EXPECT_EQ(ev.code, RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(ev.chiplet, 1U);
    EXPECT_EQ(ev.data[0], TestCard::kAsid);
    EXPECT_EQ(ev.data[1], 0x50'0000'0040ULL);
    EXPECT_EQ(ev.data[2], RBLN_FW_ACCESS_READ);
    EXPECT_EQ(ev.data[3], 2U); // 1 + ring
    // A command buffer that runs off its mapping faults at the first byte
    // past it; an unbound ASID is NO_VM.
    j = FakeHost::job(TestCard::kAsid, TestCard::kVaCmd + 4 * TestCard::kCmdPerRing - 8, 16);
    cpl = h.run_job(1, j);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_va, TestCard::kVaCmd + 4 * TestCard::kCmdPerRing);
    CmdBuf cb;
    cb.nop();
    cpl = h.run_job(1, t.place(1, cb, 7));
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(cpl->fault_reason, RBLN_FW_MMU_NO_VM);
}

// --- ring stop, chiplet reset ---------------------------------------------------------

TEST_F(Jobs, RingStopAbortsTheRunningAndTheQueuedJobsBeforeItCompletes) {
    CmdBuf held;
    held.wait(TestCard::kVaHost + 128, 1).signal(TestCard::kVaHost + 136, 1);
    CmdBuf later;
    later.signal(TestCard::kVaHost + 144, 1);
    const std::uint64_t s1 = h.push_job(0, t.place(0, held));
    const std::uint64_t s2 = h.push_job(0, t.place(0, later, TestCard::kAsid, 1));
    const std::uint64_t s3 = h.push_job(0, t.place(0, later, TestCard::kAsid, 1));
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(0).job_head) == 1; }));
    EXPECT_EQ(h.stop_ring(0), RBLN_FW_ST_OK);
    // The records are there when the admin completion is.
    for (std::uint64_t s : {s1, s2, s3}) {
        const auto cpl = h.pop_job_cpl(0);
        ASSERT_TRUE(cpl.has_value()) << s;
        EXPECT_EQ(cpl->seqno, s);
        EXPECT_EQ(cpl->status, RBLN_FW_JOB_ABORTED);
    }
    EXPECT_EQ(h.load(h.ring_ctrl(0).done_seqno), s3);
    EXPECT_EQ(h.load(h.ring_ctrl(0).job_head), 3U);
    EXPECT_EQ(t.host_u64(136), 0U);
    EXPECT_EQ(t.host_u64(144), 0U);
    EXPECT_FALSE(h.card.ring_up(0));
    EXPECT_EQ(h.card.stats().jobs_aborted, 3U);
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) >= 1; }));
    // The value the WAIT wanted arrives: nothing runs any more.
    t.set_host_u64(128, 1);
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(t.host_u64(136), 0U);
    // Set up again, the ring works.
    ASSERT_EQ(h.setup_ring(0, 16), RBLN_FW_ST_OK);
    EXPECT_EQ(t.status(0, later), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(144), 1U);
}

// 2^64 one-byte rows: the stop must reach the packet while it still checks
// that every row translates, before any byte moves.
TEST_F(Jobs, RingStopEndsAStridedCopyOfEndlessRowsWhileItTranslates) {
    CmdBuf cb;
    cb.strided(TestCard::kVaHost, TestCard::kVaHost + 64, 1, 0xffffffffU, 0xffffffffU, 0, 0, 0, 0);
    const std::uint64_t s = t.submit(0, cb);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(0).job_head) == 1; }));
    expect_stop_aborts(h, 0, s);
}

TEST_F(Jobs, TlbInvalidateCompletesWhileAStridedCopyOfEndlessRowsRuns) {
    CmdBuf cb;
    cb.strided(TestCard::kVaHost, TestCard::kVaHost + 64, 1, 0xffffffffU, 0xffffffffU, 0, 0, 0, 0);
    const std::uint64_t before = h.card.stats().packets;
    const std::uint64_t s = t.submit(0, cb);
    ASSERT_TRUE(eventually([&] { return h.card.stats().packets > before; }));
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(t.invalidate(TestCard::kAsid, 0, 0), RBLN_FW_ST_OK);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value()) << "the copy goes on";
    expect_stop_aborts(h, 0, s);
}

TEST_F(Jobs, RingSetupOfARingThatIsUpAbortsWhatItHeldAndReplacesIt) {
    CmdBuf held;
    held.wait(TestCard::kVaHost, 1);
    const std::uint64_t s = t.submit(2, held);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(2).job_head) == 1; }));
    const RingMemory old = FakeHost::ring_memory(2);
    rbln_fw_job_cpl rec{};
    // Set up anew at the same memory, zeroed by the host only afterwards.
    ASSERT_EQ(h.admin(FakeHost::ring_setup_request(2, 16, old)), RBLN_FW_ST_OK);
    std::memcpy(&rec, h.ram(old.cpls), sizeof(rec));
    EXPECT_EQ(rec.seqno, s);
    EXPECT_EQ(rec.status, RBLN_FW_JOB_ABORTED);
    EXPECT_TRUE(h.card.ring_up(2));
}

TEST_F(Jobs, ResetChipletAbortsItsRingForgetsItAndPostsTheEvent) {
    CmdBuf held;
    held.wait(TestCard::kVaHost, 1);
    const std::uint64_t s = t.submit(3, held);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(3).job_head) == 1; }));
    rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_RESET_CHIPLET);
    req.args[0] = 3;
    EXPECT_EQ(h.admin(req), RBLN_FW_ST_OK);
    const auto cpl = h.pop_job_cpl(3);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, s);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_ABORTED);
    EXPECT_FALSE(h.card.ring_up(3));
    EXPECT_EQ(expect_one_event(h, RBLN_FW_EV_CHIPLET_RESET).chiplet, 3U);
    // The other rings kept theirs.
    CmdBuf cb;
    cb.nop();
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
}

TEST_F(Jobs, FirmwareFaultStopsEveryRingWithoutCompletions) {
    CmdBuf held;
    held.wait(TestCard::kVaHost, 1);
    (void)t.submit(1, held);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).job_head) == 1; }));
    h.card.inject_fw_fault(RBLN_FW_FAULT_INTERNAL, "test");
    EXPECT_EQ(h.card.state(), RBLN_FW_STATE_FAULT);
    EXPECT_EQ(h.card.stats().rings_up, 0U);
    t.set_host_u64(0, 1);
    std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(h.pop_job_cpl(1).has_value());
}

TEST_F(Jobs, NoResponseFreezesTheRingsUntilCleared) {
    CmdBuf held;
    held.wait(TestCard::kVaHost, 1);
    CmdBuf next;
    next.signal(TestCard::kVaHost + 8, 5);
    (void)h.push_job(0, t.place(0, held));
    (void)h.push_job(0, t.place(0, next, TestCard::kAsid, 1));
    h.ring_doorbell();
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(0).job_head) == 1; }));
    h.card.set_no_response(true);
    t.set_host_u64(0, 1); // the running job's packets end: its completion waits
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value());
    EXPECT_EQ(h.load(h.ring_ctrl(0).job_head), 1U); // and nothing more is taken
    EXPECT_EQ(t.host_u64(8), 0U);
    h.card.set_no_response(false);
    ASSERT_TRUE(h.wait_job_cpl(0).has_value());
    ASSERT_TRUE(h.wait_job_cpl(0).has_value());
    EXPECT_EQ(t.host_u64(8), 5U);
}

TEST_F(Jobs, JobTailOutOfRangeIsReportedOnceAndIgnored) {
    std::atomic_ref<std::uint32_t>(h.ring_ctrl(1).job_tail).store(99);
    h.ring_doorbell();
    const rbln_fw_event ev = expect_one_event(h, RBLN_FW_EV_BAD_REQUEST);
    EXPECT_EQ(ev.code, RBLN_FW_ST_BAD_FIELD);
    EXPECT_EQ(ev.chiplet, 1U);
    EXPECT_EQ(ev.data[2], 99U);
    EXPECT_EQ(ev.data[3], 2U);
    h.ring_doorbell();
    std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(h.drain_events().empty());
    EXPECT_EQ(h.card.stats().ring_bad_tails, 1U);
    std::atomic_ref<std::uint32_t>(h.ring_ctrl(1).job_tail).store(0);
    CmdBuf cb;
    cb.nop();
    EXPECT_EQ(t.status(1, cb), RBLN_FW_JOB_OK);
}

// --- threads ------------------------------------------------------------------------

TEST_F(Jobs, WaitIsSatisfiedByAnotherRingsSignalOnTheDevice) {
    // Ring 1 waits on an HBM word that only ring 0 stores.
    CmdBuf waiter;
    waiter.wait(TestCard::hbm_va(2, 0), 3).signal(TestCard::kVaHost, 1);
    const std::uint64_t s = t.submit(1, waiter);
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(h.pop_job_cpl(1).has_value());
    EXPECT_EQ(t.host_u64(0), 0U);
    CmdBuf signaller;
    signaller.signal(TestCard::hbm_va(2, 0), 2); // not enough
    ASSERT_EQ(t.status(0, signaller), RBLN_FW_JOB_OK);
    std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(h.pop_job_cpl(1).has_value());
    signaller.clear();
    signaller.signal(TestCard::hbm_va(2, 0), 3);
    ASSERT_EQ(t.status(0, signaller), RBLN_FW_JOB_OK);
    const auto cpl = h.wait_job_cpl(1);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, s);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 1U);
}

TEST_F(Jobs, WaitTimesOutAfterTimeoutNsOfCardTime) {
    CmdBuf cb;
    cb.wait(TestCard::kVaHost, 1, 1000).signal(TestCard::kVaHost + 8, 1);
    (void)t.submit(0, cb);
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value()); // card time has not moved
    h.clock_ns += 999;
    std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value());
    h.clock_ns += 1;
    const auto cpl = h.wait_job_cpl(0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_WAIT_TIMEOUT);
    EXPECT_EQ(cpl->packet_offset, 0U);
    EXPECT_EQ(t.host_u64(8), 0U);
}

TEST_F(Jobs, WaitingRingSleepsInsteadOfSpinning) {
    CmdBuf cb;
    cb.wait(TestCard::kVaHost, 1);
    (void)t.submit(0, cb);
    (void)t.submit(1, cb);
    std::this_thread::sleep_for(20ms);
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    std::this_thread::sleep_for(300ms);
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    auto us = [](const rusage& r) {
        return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1'000'000L + r.ru_utime.tv_usec +
               r.ru_stime.tv_usec;
    };
    // Two rings waiting 300 ms: well under a tenth of one core.
    EXPECT_LT(us(after) - us(before), 30'000L);
    t.set_host_u64(0, 1); // a host store, no doorbell: the backoff finds it
    EXPECT_TRUE(h.wait_job_cpl(0).has_value());
    EXPECT_TRUE(h.wait_job_cpl(1).has_value());
}

TEST_F(Jobs, RingsRunInParallelWhileOneIsBlocked) {
    CmdBuf held;
    held.wait(TestCard::kVaHost, 1);
    (void)t.submit(0, held);
    CmdBuf cb;
    cb.fill(TestCard::hbm_va(1), 1 << 20, 0x5a, 1);
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(t.status(1, cb), RBLN_FW_JOB_OK);
    // The event loop stays responsive: admin requests are answered.
    EXPECT_EQ(h.admin(FakeHost::request(RBLN_FW_OP_HEARTBEAT)), RBLN_FW_ST_OK);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value());
    t.set_host_u64(0, 1);
    EXPECT_TRUE(h.wait_job_cpl(0).has_value());
}

TEST_F(Jobs, AdminTlbInvalidateReachesEveryRingsTlbBeforeItCompletes) {
    // Every ring reads VA -> page A and caches the translation.
    const std::uint64_t va = 0x60'0000'0000ULL;
    t.pt.map_4k(va, TestCard::kHost + 0x100000, kPteRw);
    std::memset(t.host(0x100000), 0xaa, k4K);
    std::memset(t.host(0x101000), 0xbb, k4K);
    CmdBuf cb;
    cb.copy(va, TestCard::kVaHost + 0x200000, 8);
    std::vector<std::uint8_t> got;
    auto read_byte = [&](unsigned ring) {
        std::memset(t.host(0x200000), 0, 8);
        EXPECT_EQ(t.status(ring, cb), RBLN_FW_JOB_OK);
        return std::to_integer<std::uint8_t>(*t.host(0x200000));
    };
    for (unsigned r = 0; r < 4; r++)
        EXPECT_EQ(read_byte(r), 0xaa);
    // The host changes the valid entry to page B: cached translations stay.
    t.pt.map_4k(va, TestCard::kHost + 0x101000, kPteRw);
    for (unsigned r = 0; r < 4; r++)
        EXPECT_EQ(read_byte(r), 0xaa) << "ring " << r << " walked without invalidation";
    ASSERT_EQ(t.invalidate(TestCard::kAsid, va, k4K), RBLN_FW_ST_OK);
    for (unsigned r = 0; r < 4; r++)
        EXPECT_EQ(read_byte(r), 0xbb) << "ring " << r << " kept a dropped translation";
}

TEST_F(Jobs, FaultsOfFourRingsAndAdminEventsShareTheEventRingWithoutLosingAny) {
    CmdBuf bad;
    bad.copy(0x70'0000'0000ULL, TestCard::kVaHost, 8);
    int failed = 0;
    // 4 rings x 10 faulting jobs while the admin side posts BAD_REQUESTs.
    for (unsigned r = 0; r < 4; r++) {
        const rbln_fw_job j = t.place(r, bad);
        for (int i = 0; i < 10; i++)
            (void)h.push_job(r, j);
    }
    h.ring_doorbell();
    for (int i = 0; i < 10; i++)
        (void)h.admin(FakeHost::request(0x77));
    unsigned mmu = 0;
    unsigned badreq = 0;
    std::uint32_t last_seq = 0;
    bool first = true;
    ASSERT_TRUE(eventually([&] {
        for (const rbln_fw_event& ev : h.drain_events()) {
            if (!first && ev.seq != last_seq + 1)
                failed++;
            first = false;
            last_seq = ev.seq;
            mmu += ev.type == RBLN_FW_EV_MMU_FAULT ? 1 : 0;
            badreq += ev.type == RBLN_FW_EV_BAD_REQUEST ? 1 : 0;
        }
        return mmu == 40 && badreq == 10;
    })) << mmu
        << " " << badreq;
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(h.card.stats().events_dropped, 0U);
    for (unsigned r = 0; r < 4; r++) {
        for (int i = 0; i < 10; i++) {
            const auto cpl = h.wait_job_cpl(r);
            ASSERT_TRUE(cpl.has_value());
            EXPECT_EQ(cpl->status, RBLN_FW_JOB_MMU_FAULT);
        }
    }
}

TEST_F(Jobs, MmuChangesWhileFourRingsCopyKeepEveryCopyRight) {
    // The rings copy through ASID 1 while the admin side binds, invalidates
    // and unbinds other ASIDs and invalidates ASID 1: no copy is wrong.
    for (unsigned r = 0; r < 4; r++)
        std::memset(t.host(0x300000 + r * 0x10000), static_cast<int>(0x11 * (r + 1)), 0x10000);
    for (int round = 0; round < 30; round++) {
        for (unsigned r = 0; r < 4; r++) {
            CmdBuf cb;
            cb.copy(TestCard::kVaHost + 0x300000 + r * 0x10000, TestCard::hbm_va(r, 0x100000),
                    0x10000);
            (void)h.push_job(r, t.place(r, cb));
        }
        h.ring_doorbell();
        EXPECT_EQ(t.invalidate(TestCard::kAsid, 0, 0), RBLN_FW_ST_OK);
        EXPECT_EQ(t.bind(9, t.pt.root()), RBLN_FW_ST_OK);
        EXPECT_EQ(t.invalidate(9, TestCard::kVaHost, 0x200000), RBLN_FW_ST_OK);
        rbln_fw_admin_req un = FakeHost::request(RBLN_FW_OP_VM_UNBIND);
        un.args[0] = 9;
        EXPECT_EQ(h.admin(un), RBLN_FW_ST_OK);
        for (unsigned r = 0; r < 4; r++) {
            const auto cpl = h.wait_job_cpl(r);
            ASSERT_TRUE(cpl.has_value());
            ASSERT_EQ(cpl->status, RBLN_FW_JOB_OK);
            ASSERT_EQ(std::memcmp(t.hbm(r, 0x100000), t.host(0x300000 + r * 0x10000), 0x10000), 0);
        }
    }
    EXPECT_GE(h.card.stats().tlb_invalidations, 60U);
}

} // namespace
} // namespace cmd_ring_test
