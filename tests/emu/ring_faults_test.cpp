// SPDX-License-Identifier: GPL-2.0
// Ring faults injected through the control interface (hang, dma-error,
// corrupt-cpl, lost-irq, clear) and the ring counters of `status`, seen from the
// host side of the rings.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "control.h"
#include "control_reply.h"
#include "ring_fixture.h"

using namespace rbln::emu;
using namespace rbln::emu::test;
using namespace std::chrono_literals;

namespace ring_faults_test {

namespace {

class RingFaults : public ::testing::Test {
protected:
    std::string run(std::string_view line) { return ctl.execute(line); }

    std::map<std::string, std::string> status() { return parse_ok_reply(run("status")); }

    TestCard t;
    FakeHost& h = t.h;
    ControlInterface ctl{h.card};
};

} // namespace

TEST_F(RingFaults, HungChipletTakesNoJobUntilRingStopAbortsThemAndClearsTheHang) {
    EXPECT_EQ(run("fault hang chiplet=2"), "ok");
    EXPECT_EQ(status()["hung"], "4");
    const std::uint64_t s1 = t.submit(2, signal_job(0, 1));
    const std::uint64_t s2 = h.submit_job(2, t.place(2, signal_job(8, 2), TestCard::kAsid, 1));
    // The other chiplets run meanwhile.
    EXPECT_EQ(t.status(1, signal_job(16, 3)), RBLN_FW_JOB_OK);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(h.load(h.ring_ctrl(2).job_head), 0U);
    EXPECT_EQ(t.host_u64(0), 0U);
    EXPECT_FALSE(h.pop_job_cpl(2).has_value());
    // The driver's recovery: RING_STOP, then the ring again.
    EXPECT_EQ(h.stop_ring(2), RBLN_FW_ST_OK);
    for (std::uint64_t s : {s1, s2}) {
        const auto cpl = h.pop_job_cpl(2);
        ASSERT_TRUE(cpl.has_value());
        EXPECT_EQ(cpl->seqno, s);
        EXPECT_EQ(cpl->status, RBLN_FW_JOB_ABORTED);
    }
    EXPECT_EQ(t.host_u64(0), 0U); // the hung jobs never ran
    EXPECT_EQ(status()["hung"], "0");
    ASSERT_EQ(h.setup_ring(2, 16), RBLN_FW_ST_OK);
    EXPECT_EQ(t.status(2, signal_job(8, 2)), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(8), 2U);
    EXPECT_EQ(status()["injected_hangs"], "1");
}

TEST_F(RingFaults, FaultClearReleasesAHungRingAndItsJobsRunInOrder) {
    EXPECT_EQ(run("fault hang chiplet=0"), "ok");
    CmdBuf first;
    first.wait(TestCard::kVaHost, 0).signal(TestCard::kVaHost, 1);
    CmdBuf second;
    second.wait(TestCard::kVaHost, 1).signal(TestCard::kVaHost, 2);
    const std::uint64_t s1 = t.submit(0, first);
    const std::uint64_t s2 = h.submit_job(0, t.place(0, second, TestCard::kAsid, 1));
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value());
    EXPECT_EQ(run("fault clear"), "ok");
    for (std::uint64_t s : {s1, s2}) {
        const auto cpl = h.wait_job_cpl(0);
        ASSERT_TRUE(cpl.has_value());
        EXPECT_EQ(cpl->seqno, s);
        EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    }
    EXPECT_EQ(t.host_u64(0), 2U);
}

TEST_F(RingFaults, HangDuringAJobWithholdsItsCompletionAndResetChipletAbortsIt) {
    CmdBuf held;
    held.wait(TestCard::kVaHost, 1).signal(TestCard::kVaHost + 8, 1);
    const std::uint64_t s = t.submit(3, held);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(3).job_head) == 1; }));
    EXPECT_EQ(run("fault hang chiplet=3"), "ok");
    t.set_host_u64(0, 1);
    ASSERT_TRUE(eventually([&] { return t.host_u64(8) == 1; })); // its packets ran
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(h.pop_job_cpl(3).has_value()); // its completion did not come
    rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_RESET_CHIPLET);
    req.args[0] = 3;
    EXPECT_EQ(h.admin(req), RBLN_FW_ST_OK);
    const auto cpl = h.pop_job_cpl(3);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, s);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_ABORTED);
    EXPECT_EQ(status()["hung"], "0");
}

TEST_F(RingFaults, DmaErrorFailsTheNextDmaPacketOfThatRingOnce) {
    EXPECT_EQ(run("fault dma-error chiplet=1"), "ok");
    EXPECT_EQ(status()["dma_error_armed"], "2");
    // Not a DMA packet: the error stays armed; another ring: not armed.
    EXPECT_EQ(t.status(1, signal_job(0, 1)), RBLN_FW_JOB_OK);
    CmdBuf other;
    other.fill(TestCard::kVaHost + 4096, 64, 0x33, 1);
    EXPECT_EQ(t.status(0, other), RBLN_FW_JOB_OK);
    std::memset(t.host(8192), 0x11, 128);
    CmdBuf cb;
    cb.signal(TestCard::kVaHost + 16, 7);
    const std::uint32_t at = cb.here();
    cb.fill(TestCard::kVaHost + 8192, 64, 0x22, 1).signal(TestCard::kVaHost + 24, 8);
    const auto cpl = t.run(1, cb);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_DMA_ERROR);
    EXPECT_EQ(cpl->packet_offset, at);
    EXPECT_EQ(t.host_u64(16), 7U);
    EXPECT_EQ(t.host_u64(24), 0U);
    EXPECT_EQ(std::to_integer<int>(*t.host(8192)), 0x11); // the FILL moved nothing
    EXPECT_EQ(status()["dma_error_armed"], "0");
    EXPECT_EQ(status()["injected_dma_errors"], "1");
    EXPECT_EQ(t.status(1, cb), RBLN_FW_JOB_OK); // once only
    EXPECT_EQ(std::to_integer<int>(*t.host(8192)), 0x22);
}

TEST_F(RingFaults, CorruptCplWritesOneGarbageRecordForAJobThatDidNotRunThenTheRingStalls) {
    EXPECT_EQ(run("fault corrupt-cpl chiplet=0"), "ok");
    EXPECT_EQ(status()["corrupt_cpl_armed"], "1");
    const std::uint64_t s = t.submit(0, signal_job(0, 5));
    const std::uint64_t behind = h.submit_job(0, t.place(0, signal_job(8, 6), TestCard::kAsid, 1));
    auto cpl = h.wait_job_cpl(0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, ~s);
    EXPECT_EQ(cpl->status, 0xffff);
    EXPECT_EQ(t.host_u64(0), 0U);
    EXPECT_EQ(h.load(h.ring_ctrl(0).done_seqno), 0U); // no job is done
    EXPECT_EQ(status()["injected_corrupt_cpls"], "1");
    EXPECT_EQ(status()["corrupt_cpl_armed"], "0");
    // The job behind it is not taken: the ring stalls...
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(h.load(h.ring_ctrl(0).job_head), 1U);
    EXPECT_EQ(status()["hung"], "1");
    EXPECT_EQ(t.host_u64(8), 0U);
    // ... until the driver's ring reset, which aborts it (to be run again).
    EXPECT_EQ(h.stop_ring(0), RBLN_FW_ST_OK);
    cpl = h.pop_job_cpl(0);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, behind);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_ABORTED);
    EXPECT_EQ(t.host_u64(8), 0U);
    ASSERT_EQ(h.setup_ring(0, 16), RBLN_FW_ST_OK);
    cpl = t.run(0, signal_job(8, 6));
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(8), 6U);
}

TEST_F(RingFaults, FaultClearLetsTheJobsBehindACorruptedCompletionRun) {
    EXPECT_EQ(run("fault corrupt-cpl chiplet=1"), "ok");
    (void)t.submit(1, signal_job(0, 1));
    const std::uint64_t behind = h.submit_job(1, t.place(1, signal_job(8, 2), TestCard::kAsid, 1));
    ASSERT_TRUE(h.wait_job_cpl(1).has_value()); // the garbage one
    EXPECT_EQ(run("fault clear"), "ok");
    const auto cpl = h.wait_job_cpl(1);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, behind);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 0U);
    EXPECT_EQ(t.host_u64(8), 2U);
}

TEST_F(RingFaults, LostIrqWritesTheRecordButRaisesNoInterruptForIt) {
    EXPECT_EQ(run("fault lost-irq chiplet=2"), "ok");
    EXPECT_EQ(status()["lost_irq_armed"], "4");
    const std::uint64_t irqs = h.irq_count(RBLN_FW_IRQ_RING);
    const std::uint64_t s = t.submit(2, signal_job(0, 7));
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(2).done_seqno) == s; }));
    // Not at once, and not after the holdoff either.
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(h.irq_count(RBLN_FW_IRQ_RING), irqs);
    EXPECT_EQ(t.host_u64(0), 7U);
    auto s2 = status();
    EXPECT_EQ(s2["injected_lost_irqs"], "1");
    EXPECT_EQ(s2["lost_irq_armed"], "0");
    // The record is there for a host that looks; the next job interrupts.
    const auto cpl = h.pop_job_cpl(2);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, s);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_OK);
    EXPECT_EQ(t.status(2, signal_job(8, 8)), RBLN_FW_JOB_OK);
    EXPECT_TRUE(eventually([&] { return h.irq_count(RBLN_FW_IRQ_RING) == irqs + 1; }));
}

TEST_F(RingFaults, FaultClearDisarmsPendingDmaErrorsAndCorruptions) {
    EXPECT_EQ(run("fault dma-error chiplet=0"), "ok");
    EXPECT_EQ(run("fault corrupt-cpl chiplet=1"), "ok");
    EXPECT_EQ(run("fault lost-irq chiplet=2"), "ok");
    EXPECT_EQ(run("fault clear"), "ok");
    EXPECT_EQ(status()["lost_irq_armed"], "0");
    CmdBuf cb;
    cb.fill(TestCard::kVaHost, 8, 1, 1);
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.status(1, cb), RBLN_FW_JOB_OK);
}

TEST_F(RingFaults, RingFaultCommandsValidateTheirChiplet) {
    for (const char* line :
         {"fault hang", "fault hang chiplet=4", "fault hang chiplet=x", "fault hang chip=1",
          "fault hang chiplet=-1", "fault dma-error chiplet=1 extra=2", "fault corrupt-cpl 1",
          "fault dma-error", "fault lost-irq", "fault lost-irq chiplet=9"}) {
        const std::string reply = run(line);
        EXPECT_EQ(reply.rfind("error ", 0), 0U) << line << " -> " << reply;
    }
    const auto s = status();
    EXPECT_EQ(s.at("hung"), "0");
    EXPECT_EQ(s.at("dma_error_armed"), "0");
    EXPECT_EQ(s.at("corrupt_cpl_armed"), "0");
    EXPECT_EQ(s.at("lost_irq_armed"), "0");
}

TEST_F(RingFaults, HelpNamesTheRingFaultsAndTheirArguments) {
    const std::string reply = run("help");
    for (const char* word : {"hang", "dma-error", "corrupt-cpl", "lost-irq", "lost-irq:chiplet=N",
                             "fault_args=", "hang:chiplet=N", "dma-error:chiplet=N",
                             "corrupt-cpl:chiplet=N", "fw-fault:[code=N]:[reason=TEXT...]"})
        EXPECT_NE(reply.find(word), std::string::npos) << word << " in " << reply;
}

TEST_F(RingFaults, StatusCountsRingsJobsPacketsBytesAndBusyTime) {
    auto s = status();
    EXPECT_EQ(s.at("rings_up"), "4");
    EXPECT_EQ(s.at("jobs"), "0");
    EXPECT_EQ(s.at("busy_ns"), "0,0,0,0");
    CmdBuf cb;
    cb.fill(TestCard::kVaHost, 1000, 7, 1).copy(TestCard::kVaHost, TestCard::hbm_va(0), 24);
    EXPECT_EQ(t.status(0, cb), RBLN_FW_JOB_OK);
    CmdBuf bad;
    bad.raw("\x09\x00\x01\x00\x00\x00\x00\x00", 8); // unknown opcode 9
    EXPECT_EQ(t.status(0, bad), RBLN_FW_JOB_BAD_PACKET);
    CmdBuf held;
    held.wait(TestCard::kVaHost + 2048, 1);
    (void)t.submit(1, held);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).job_head) == 1; }));
    h.clock_ns += 700;
    t.set_host_u64(2048, 1);
    ASSERT_TRUE(h.wait_job_cpl(1).has_value());
    EXPECT_EQ(h.stop_ring(3), RBLN_FW_ST_OK);
    s = status();
    EXPECT_EQ(s.at("rings_up"), "3");
    EXPECT_EQ(s.at("jobs"), "3");
    EXPECT_EQ(s.at("jobs_failed"), "1");
    EXPECT_EQ(s.at("jobs_aborted"), "0");
    EXPECT_EQ(s.at("packets"), "4");
    EXPECT_EQ(s.at("dma_bytes"), "1024");
    EXPECT_EQ(s.at("busy_ns"), "0,700,0,0");
    // The old keys are all still there.
    for (const char* key : {"state", "fault_code", "heartbeat", "admin_requests", "events",
                            "serial", "vm_bound", "mmu_faults", "tlb_invalidations"})
        EXPECT_TRUE(s.count(key) == 1) << key;
}
} // namespace ring_faults_test
