// SPDX-License-Identifier: GPL-2.0
// VM_ABORT (firmware-iface 1.3): the jobs of an aborted ASID end CANCELLED
// (the running one interrupted, queued ones without running) while the
// jobs of other ASIDs on the same rings run; its argument checks; and the
// mark's end at VM_BIND / VM_UNBIND.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "control.h"
#include "control_reply.h"
#include "ring_fixture.h"

using namespace rbln::emu;
using namespace rbln::emu::test;
using namespace std::chrono_literals;

namespace vm_abort_test {

namespace {

constexpr std::uint32_t kOther = 2; // a second ASID over the same tables

class VmAbort : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(t.bind(kOther, t.pt.root()), RBLN_FW_ST_OK); }

    std::uint16_t abort_asid(std::uint32_t asid, std::uint32_t extra = 0) {
        rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_VM_ABORT);
        req.args[0] = asid;
        req.args[1] = extra;
        return h.admin(req);
    }

    std::map<std::string, std::string> status() { return parse_ok_reply(ctl.execute("status")); }

    // WAIT for host word `gate` >= 1, then store `value` at `off`.
    static CmdBuf held_job(std::uint64_t gate, std::uint64_t off, std::uint64_t value) {
        CmdBuf cb;
        cb.wait(TestCard::kVaHost + gate, 1).signal(TestCard::kVaHost + off, value);
        return cb;
    }

    TestCard t;
    FakeHost& h = t.h;
    ControlInterface ctl{h.card};
};

} // namespace

TEST_F(VmAbort, CancelsTheRunningAndQueuedJobsOfItsAsidAndNoOtherJob) {
    // Ring 0: a job of kOther held by a WAIT nobody satisfies, then one of
    // ASID 1, then one more of kOther.  Ring 1: another held kOther job.
    const std::uint64_t a = t.submit(0, held_job(0, 8, 1), kOther, 0);
    const std::uint64_t b = t.submit(0, signal_job(16, 7), TestCard::kAsid, 1);
    const std::uint64_t c = t.submit(0, signal_job(24, 9), kOther, 2);
    const std::uint64_t d = t.submit(1, held_job(0, 32, 1), kOther, 0);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(0).job_head) == 1; }));
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).job_head) == 1; }));
    std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(h.pop_job_cpl(0).has_value()); // held

    EXPECT_EQ(abort_asid(kOther), RBLN_FW_ST_OK);
    expect_cpls(h, 0,
                {{a, RBLN_FW_JOB_CANCELLED}, {b, RBLN_FW_JOB_OK}, {c, RBLN_FW_JOB_CANCELLED}});
    expect_cpls(h, 1, {{d, RBLN_FW_JOB_CANCELLED}});
    EXPECT_EQ(t.host_u64(8), 0U);  // the held job stopped in its WAIT
    EXPECT_EQ(t.host_u64(16), 7U); // ASID 1's job ran
    EXPECT_EQ(t.host_u64(24), 0U); // the queued kOther job ran no packet
    EXPECT_EQ(t.host_u64(32), 0U);
    EXPECT_EQ(status()["jobs_cancelled"], "3");
    EXPECT_EQ(status()["rings_up"], "4"); // no ring stopped
    // The rings go on, for ASID 1 and (still marked) not for kOther.
    EXPECT_EQ(t.status(0, signal_job(40, 5)), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(40), 5U);
    EXPECT_EQ(t.status(0, signal_job(48, 5), kOther), RBLN_FW_JOB_CANCELLED);
    EXPECT_EQ(t.host_u64(48), 0U);
}

TEST_F(VmAbort, BindingTheAsidAgainOrUnbindingItEndsTheMark) {
    EXPECT_EQ(abort_asid(kOther), RBLN_FW_ST_OK);
    EXPECT_EQ(t.status(2, signal_job(0, 1), kOther), RBLN_FW_JOB_CANCELLED);
    EXPECT_EQ(t.bind(kOther, t.pt.root()), RBLN_FW_ST_OK);
    EXPECT_EQ(t.status(2, signal_job(0, 2), kOther), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 2U);

    EXPECT_EQ(abort_asid(kOther), RBLN_FW_ST_OK);
    rbln_fw_admin_req unbind = FakeHost::request(RBLN_FW_OP_VM_UNBIND);
    unbind.args[0] = kOther;
    EXPECT_EQ(h.admin(unbind), RBLN_FW_ST_OK);
    EXPECT_EQ(t.bind(kOther, t.pt.root()), RBLN_FW_ST_OK);
    EXPECT_EQ(t.status(2, signal_job(0, 3), kOther), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(0), 3U);
}

TEST_F(VmAbort, AFaultInAJobWithFaultAbortsCancelsTheLaterJobsOfItsAsidOnly) {
    // Ring 1 holds a kOther job in a WAIT; ring 0 runs a kOther job that
    // faults (FAULT_ABORTS), then one of kOther and one of ASID 1.
    const std::uint64_t held = t.submit(1, held_job(0, 8, 1), kOther, 0);
    ASSERT_TRUE(eventually([&] { return h.load(h.ring_ctrl(1).job_head) == 1; }));
    CmdBuf bad;
    bad.signal(TestCard::kVaHost + 16, 1).signal(0x7000'0000'0000ULL, 1); // unmapped
    const auto flags = RBLN_FW_JOB_IRQ | RBLN_FW_JOB_FAULT_ABORTS;
    const std::uint64_t a = t.submit(0, bad, kOther, 0, flags);
    const std::uint64_t b = t.submit(0, signal_job(24, 9), kOther, 1);
    const std::uint64_t c = t.submit(0, signal_job(32, 5), TestCard::kAsid, 2, flags);
    expect_cpls(h, 0,
                {{a, RBLN_FW_JOB_MMU_FAULT}, {b, RBLN_FW_JOB_CANCELLED}, {c, RBLN_FW_JOB_OK}});
    expect_cpls(h, 1, {{held, RBLN_FW_JOB_CANCELLED}});
    EXPECT_EQ(t.host_u64(16), 1U); // the faulting job ran up to its fault
    EXPECT_EQ(t.host_u64(24), 0U);
    EXPECT_EQ(t.host_u64(32), 5U);
    EXPECT_EQ(t.host_u64(8), 0U);
    // Without the flag a fault leaves the ASID alone (1.2 behaviour).
    CmdBuf bad1;
    bad1.signal(0x7000'0000'0000ULL, 1);
    EXPECT_EQ(t.status(2, bad1), RBLN_FW_JOB_MMU_FAULT);
    EXPECT_EQ(t.status(2, signal_job(40, 3)), RBLN_FW_JOB_OK);
    EXPECT_EQ(t.host_u64(40), 3U);
}

// A MATMUL of a few seconds that stores only at its end: a, b and the
// output broadcast (stride 0), so its operands take a few bytes.
rbln_fw_pkt_launch long_matmul(std::uint64_t a, std::uint64_t out) {
    constexpr std::uint64_t kDim = 4096; // 2 * 4096^3 flops
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = RBLN_FW_DT_FP32;
    l.dtype_out = RBLN_FW_DT_FP32;
    l.ndim = 2;
    l.shape[0] = kDim;
    l.shape[1] = kDim;
    l.shape[2] = kDim;
    l.a = a;
    l.b = a;
    l.out = out;
    l.stride_out[1] = 1; // every row on the same kDim elements
    return l;
}

TEST_F(VmAbort, AFaultWithFaultAbortsInterruptsALongPacketOfItsAsidOnAnotherRing) {
    // Ring 1: a kOther job marks it started, runs a long MATMUL (its
    // 16 KiB output at 4096 keeps a pattern until the MATMUL's end), then
    // stores 1 at 16.  Ring 0: a kOther job that faults once it started.
    std::memset(t.host(4096), 0xff, 4096 * 4);
    CmdBuf held;
    held.signal(TestCard::kVaHost + 8, 1)
        .launch(long_matmul(TestCard::kVaHost + 0x10000, TestCard::kVaHost + 4096))
        .signal(TestCard::kVaHost + 16, 1);
    const auto flags = RBLN_FW_JOB_IRQ | RBLN_FW_JOB_FAULT_ABORTS;
    const std::uint64_t l = t.submit(1, held, kOther, 0, flags);
    ASSERT_TRUE(eventually([&] { return t.host_u64(8) == 1; }));
    CmdBuf bad;
    bad.signal(0x7000'0000'0000ULL, 1); // unmapped
    const std::uint64_t f = t.submit(0, bad, kOther, 0, flags);
    expect_cpls(h, 0, {{f, RBLN_FW_JOB_MMU_FAULT}});
    const auto cpl = h.wait_job_cpl(1);
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seqno, l);
    EXPECT_EQ(cpl->status, RBLN_FW_JOB_CANCELLED);
    // Stopped inside the MATMUL (the packet after the first SIGNAL), which
    // stored nothing, and the SIGNAL behind it never ran.
    EXPECT_EQ(cpl->packet_offset, sizeof(rbln_fw_pkt_signal));
    EXPECT_EQ(t.host_u64(4096), ~0ULL);
    EXPECT_EQ(t.host_u64(16), 0U);
}

// A card of the previous firmware (rbln-emu --iface-minor 2).
TEST(VmAbortOnAnIface12Card, IsAnUnknownOpcodeAndFaultAbortsAnUnknownJobFlag) {
    Options opt = test_options();
    opt.iface_minor = 2;
    TestCard t(opt);
    EXPECT_EQ(t.h.ctrl().iface_minor, 2);
    rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_VM_ABORT);
    req.args[0] = TestCard::kAsid;
    EXPECT_EQ(t.h.admin(req), RBLN_FW_ST_BAD_OPCODE);
    EXPECT_EQ(t.status(0, signal_job(0, 1)), RBLN_FW_JOB_OK); // nothing was marked
    const std::uint64_t s = t.submit(0, signal_job(8, 2), TestCard::kAsid, 0,
                                     RBLN_FW_JOB_IRQ | RBLN_FW_JOB_FAULT_ABORTS);
    expect_cpls(t.h, 0, {{s, RBLN_FW_JOB_BAD_JOB}});
    EXPECT_EQ(t.host_u64(8), 0U);
}

TEST_F(VmAbort, RejectsAsidZeroOutOfRangeUnboundAndExtraArguments) {
    EXPECT_EQ(abort_asid(0), RBLN_FW_ST_BAD_ARG); // kernel jobs cannot be aborted
    EXPECT_EQ(abort_asid(RBLN_FW_MAX_ASID), RBLN_FW_ST_BAD_ARG);
    EXPECT_EQ(abort_asid(3), RBLN_FW_ST_BAD_ARG); // not bound
    EXPECT_EQ(abort_asid(kOther, 1), RBLN_FW_ST_BAD_FIELD);
    // None of them marked anything.
    EXPECT_EQ(t.status(0, signal_job(0, 4), kOther), RBLN_FW_JOB_OK);
    EXPECT_EQ(status()["jobs_cancelled"], "0");
}

} // namespace vm_abort_test
