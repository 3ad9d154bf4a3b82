// SPDX-License-Identifier: GPL-2.0
// Control-command parsing and its effects on the card.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "control.h"
#include "control_reply.h"
#include "fake_host.h"
#include "page_table_builder.h"

using namespace rbln::emu;
using rbln::emu::test::FakeHost;

namespace control_test {

namespace {

class Control : public ::testing::Test {
protected:
    std::string run(std::string_view line) { return ctl.execute(line); }

    // "ok a=1 b=2" -> {a: 1, b: 2}
    std::map<std::string, std::string> status() { return test::parse_ok_reply(run("status")); }

    static bool is_error(const std::string& reply) { return reply.rfind("error ", 0) == 0; }

    FakeHost h;
    ControlInterface ctl{h.card};
};

} // namespace

TEST_F(Control, StatusReportsEveryDocumentedKey) {
    auto s = status();
    EXPECT_EQ(s["state"], "RESET");
    EXPECT_EQ(s["fault_code"], "0");
    EXPECT_EQ(s["family"], "rebel100");
    EXPECT_EQ(s["chiplets"], "4");
    EXPECT_EQ(s["hbm_per_chiplet"], "268435456");
    EXPECT_EQ(s["temp_mc"], "45000");
    EXPECT_EQ(s["power_uw"], "75000000");
    EXPECT_EQ(s["heartbeat"], "0");
    EXPECT_EQ(s["admin_requests"], "0");
    EXPECT_EQ(s["bad_requests"], "0");
    EXPECT_EQ(s["no_response"], "0");
    h.boot(8);
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    (void)h.submit(FakeHost::request(99));
    h.card.tick();
    s = status();
    EXPECT_EQ(s["state"], "READY");
    EXPECT_EQ(s["heartbeat"], "1");
    EXPECT_EQ(s["admin_requests"], "2");
    EXPECT_EQ(s["bad_requests"], "1");
}

TEST_F(Control, StatusReportsTheMmuCountersAfterTheOlderKeys) {
    auto s = status();
    for (const char* key :
         {"vm_bound", "mmu_faults", "tlb_hits", "tlb_misses", "tlb_invalidations"})
        EXPECT_EQ(s[key], "0") << key;
    // Appended after the keys of v1: serial is no longer last.
    const std::string reply = run("status");
    EXPECT_LT(reply.find(" serial="), reply.find(" vm_bound="));

    h.boot(8);
    rbln::emu::test::PageTableBuilder pt(h.memory(), 0x100000, 0x10000);
    const std::uint64_t va = rbln::emu::test::make_va(0, 0, 0, 1);
    pt.map_4k(va, 0x200000, rbln::emu::test::kPteRw);
    auto req = FakeHost::request(RBLN_FW_OP_VM_BIND);
    req.args[0] = 3;
    req.args[1] = static_cast<std::uint32_t>(pt.root());
    (void)h.submit(req);
    req = FakeHost::request(RBLN_FW_OP_DEBUG_ACCESS, FakeHost::kData, 8);
    req.args[0] = 3;
    req.args[1] = RBLN_FW_ACCESS_READ;
    req.args[2] = static_cast<std::uint32_t>(va);
    (void)h.submit(req); // walks
    (void)h.submit(req); // hits
    req.args[2] += 0x1000;
    (void)h.submit(req); // not mapped
    req = FakeHost::request(RBLN_FW_OP_TLB_INVALIDATE);
    req.args[0] = 3;
    (void)h.submit(req);
    s = status();
    EXPECT_EQ(s["vm_bound"], "1");
    EXPECT_EQ(s["mmu_faults"], "1");
    EXPECT_EQ(s["tlb_hits"], "1");
    EXPECT_EQ(s["tlb_misses"], "2");
    EXPECT_EQ(s["tlb_invalidations"], "1");
    EXPECT_EQ(s["bad_requests"], "0"); // a fault is not a bad request
}

TEST_F(Control, StatusWithArgumentsIsAnError) {
    EXPECT_TRUE(is_error(run("status now")));
}

TEST_F(Control, SetCardTemperatureAndPower) {
    EXPECT_EQ(run("set temp_mc=-12000"), "ok");
    EXPECT_EQ(run("set power_uw=123456789"), "ok");
    EXPECT_EQ(h.card.telemetry().temp_mc, -12000);
    EXPECT_EQ(h.card.telemetry().power_uw, 123456789U);
    EXPECT_EQ(run("set temp_mc=50000 power_uw=5"), "ok");
    auto s = status();
    EXPECT_EQ(s["temp_mc"], "50000");
    EXPECT_EQ(s["power_uw"], "5");
}

TEST_F(Control, SetChipletChangesOnlyTheGivenKeys) {
    EXPECT_EQ(run("set chiplet=2 clock_mhz=700 busy_ns=99"), "ok");
    const ChipletTelemetry c = h.card.telemetry().chiplet[2];
    EXPECT_EQ(c.clock_mhz, 700U);
    EXPECT_EQ(c.busy_ns, 99U);
    EXPECT_EQ(c.temp_mc, 45000);       // 44000 + 2 * 500, unchanged
    EXPECT_EQ(c.mem_clock_mhz, 1600U); // unchanged
    EXPECT_EQ(h.card.telemetry().chiplet[1].clock_mhz, 1000U);
    EXPECT_EQ(run("set temp_mc=1 chiplet=0 mem_clock_mhz=2000"), "ok");
    EXPECT_EQ(h.card.telemetry().chiplet[0].temp_mc, 1);
    EXPECT_EQ(h.card.telemetry().chiplet[0].mem_clock_mhz, 2000U);
    EXPECT_EQ(h.card.telemetry().temp_mc, 45000); // temp_mc was the chiplet's
}

TEST_F(Control, BadSetLinesGiveErrorsAndChangeNothing) {
    for (const char* line :
         {"set", "set temp_mc", "set temp_mc=", "set temp_mc=hot", "set temp_mc=99999999999",
          "set power_uw=-1", "set =5", "set volts=3", "set temp_mc=1 temp_mc=2",
          "set chiplet=4 temp_mc=1", "set chiplet=-1 temp_mc=1", "set chiplet=1",
          "set chiplet=1 power_uw=3", "set chiplet=1 clock_mhz=4294967296",
          "set chiplet=0 temp_mc=5 bogus=1"}) {
        const std::string reply = run(line);
        EXPECT_TRUE(is_error(reply)) << line << " -> " << reply;
    }
    EXPECT_EQ(h.card.telemetry().temp_mc, 45000);
    EXPECT_EQ(h.card.telemetry().power_uw, 75000000U);
    EXPECT_EQ(h.card.telemetry().chiplet[0].temp_mc, 44000);
}

TEST_F(Control, AtomCardHasOnlyChipletZero) {
    FakeHost atom(Family::atom);
    ControlInterface c(atom.card);
    EXPECT_EQ(c.execute("set chiplet=0 temp_mc=1"), "ok");
    EXPECT_TRUE(is_error(c.execute("set chiplet=1 temp_mc=1")));
    EXPECT_NE(c.execute("status").find("family=atom chiplets=1"), std::string::npos);
}

TEST_F(Control, NoResponseStopsCompletionsHandshakeAndHeartbeat) {
    h.boot(8);
    (void)h.drain_events();
    h.card.tick();
    EXPECT_EQ(run("fault no-response"), "ok");
    EXPECT_EQ(status()["no_response"], "1");
    h.irqs.clear();
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    EXPECT_FALSE(h.pop_cpl().has_value());
    EXPECT_EQ(h.ctrl().admin_sq_head, 0U);
    h.card.tick();
    h.card.tick();
    EXPECT_EQ(h.ctrl().heartbeat, 1U);
    h.host_reset(); // reset is a doorbell too: ignored
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    EXPECT_TRUE(h.irqs.empty());
    EXPECT_TRUE(h.drain_events().empty());
}

TEST_F(Control, NoResponseAtStartMeansNoHandshake) {
    h.card.set_no_response(true); // what --fault no-response does
    h.boot(8);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_RESET);
    EXPECT_NE(h.ctrl().host_ack, h.ctrl().host_gen);
}

TEST_F(Control, FaultClearResumesServiceOnTheNextDoorbell) {
    h.boot(8);
    EXPECT_EQ(run("fault no-response"), "ok");
    const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    EXPECT_FALSE(h.pop_cpl().has_value());
    EXPECT_EQ(run("fault clear"), "ok");
    EXPECT_EQ(status()["no_response"], "0");
    h.card.doorbell(RBLN_FW_DB_ADMIN);
    const auto cpl = h.pop_cpl();
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seq, seq);
}

TEST_F(Control, SurpriseRemovalReadsAllOnesAndAnswersNothingUntilFaultClear) {
    h.boot(8);
    (void)h.drain_events();
    h.card.tick();
    EXPECT_EQ(run("fault surprise-removal"), "ok");
    EXPECT_EQ(status()["removed"], "1");
    EXPECT_EQ(h.ctrl().magic, 0xffffffffU);
    EXPECT_EQ(h.ctrl().fw_state, 0xffffffffU);
    EXPECT_EQ(h.ctrl().heartbeat, ~0ULL);
    h.irqs.clear();
    // Doorbells find nothing to answer and write nothing (the ring
    // addresses in the control block read all-ones too).
    h.card.doorbell(RBLN_FW_DB_ADMIN);
    h.card.doorbell(RBLN_FW_DB_CTRL);
    h.card.doorbell(RBLN_FW_DB_RING);
    h.card.tick();
    EXPECT_EQ(h.ctrl().heartbeat, ~0ULL);
    EXPECT_EQ(h.ctrl().fw_state, 0xffffffffU);
    EXPECT_TRUE(h.irqs.empty());
    EXPECT_TRUE(is_error(run("fault fw-fault")));
    EXPECT_TRUE(is_error(run("fault hang chiplet=0")));

    // Plugged back: a fresh card in RESET that boots and answers.
    EXPECT_EQ(run("fault clear"), "ok");
    EXPECT_EQ(status()["removed"], "0");
    EXPECT_EQ(h.ctrl().magic, RBLN_FW_MAGIC);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_RESET);
    h.boot(8);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    const auto cpl = h.pop_cpl();
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->seq, seq);
}

TEST_F(Control, FwFaultSetsStateCodeReasonAndPostsFaultEvent) {
    h.boot(8);
    (void)h.drain_events();
    h.irqs.clear();
    EXPECT_EQ(run("fault fw-fault code=4 reason=core  melted down"), "ok");
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_FAULT);
    EXPECT_EQ(h.ctrl().fault_code, RBLN_FW_FAULT_THERMAL);
    EXPECT_STREQ(h.ctrl().fault_reason, "core  melted down");
    auto s = status();
    EXPECT_EQ(s["state"], "FAULT");
    EXPECT_EQ(s["fault_code"], "4");
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_FAULT);
    EXPECT_EQ(evs[0].code, RBLN_FW_FAULT_THERMAL);
    ASSERT_EQ(h.irqs.size(), 1U);
    EXPECT_EQ(h.irqs[0], unsigned{RBLN_FW_IRQ_EVENT});
    // A faulted card answers nothing until the host resets it.
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    EXPECT_FALSE(h.pop_cpl().has_value());
    h.host_reset();
    EXPECT_EQ(status()["state"], "RESET");
    EXPECT_EQ(status()["fault_code"], "0");
}

TEST_F(Control, FwFaultDefaultsToInternalAndAcceptsNames) {
    EXPECT_EQ(run("fault fw-fault"), "ok"); // also without rings: no event, no crash
    EXPECT_EQ(h.ctrl().fault_code, RBLN_FW_FAULT_INTERNAL);
    EXPECT_STRNE(h.ctrl().fault_reason, "");
    EXPECT_TRUE(h.irqs.empty());
    h.host_reset();
    EXPECT_EQ(run("fault fw-fault code=bad-ring-config"), "ok");
    EXPECT_EQ(h.ctrl().fault_code, RBLN_FW_FAULT_BAD_RING_CONFIG);
}

TEST_F(Control, FwFaultReasonIsTruncatedToTheControlBlockField) {
    const std::string line = "fault fw-fault reason=" + std::string(200, 'r');
    EXPECT_EQ(run(line), "ok");
    EXPECT_EQ(std::string(h.ctrl().fault_reason).size(), sizeof(h.ctrl().fault_reason) - 1);
}

TEST_F(Control, BootFaultEndsTheNextHandshakesInFaultThenLetsOneThrough) {
    EXPECT_EQ(run("fault boot-fault count=2"), "ok");
    EXPECT_EQ(status()["boot_faults_armed"], "2");
    for (int i = 0; i < 2; i++) {
        h.boot(8);
        EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_FAULT) << i;
        EXPECT_EQ(h.ctrl().fault_code, RBLN_FW_FAULT_INTERNAL) << i;
        EXPECT_STREQ(h.ctrl().fault_reason, "injected boot fault");
        EXPECT_NE(h.ctrl().host_ack, h.ctrl().host_gen) << "a failed handshake acknowledged";
        h.host_reset();
        EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_RESET) << i;
    }
    EXPECT_EQ(status()["boot_faults_armed"], "0");
    h.boot(8);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    EXPECT_EQ(h.admin(FakeHost::request(RBLN_FW_OP_HEARTBEAT)), RBLN_FW_ST_OK);
}

TEST_F(Control, ResetFaultCrashesTheFirmwareRightAfterTheNextReset) {
    h.boot(8);
    EXPECT_EQ(run("fault reset-fault"), "ok");
    EXPECT_EQ(status()["reset_faults_armed"], "1");
    h.host_reset();
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_FAULT);
    EXPECT_STREQ(h.ctrl().fault_reason, "injected fault after reset");
    // Asking again is what gets the card to RESET: one-shot.
    h.host_reset();
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_RESET);
    EXPECT_EQ(status()["reset_faults_armed"], "0");
    h.boot(8);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
}

TEST_F(Control, FaultClearDisarmsBootAndResetFaults) {
    EXPECT_EQ(run("fault boot-fault count=100"), "ok");
    EXPECT_EQ(run("fault reset-fault count=3"), "ok");
    EXPECT_EQ(run("fault clear"), "ok");
    auto s = status();
    EXPECT_EQ(s["boot_faults_armed"], "0");
    EXPECT_EQ(s["reset_faults_armed"], "0");
    h.host_reset();
    h.boot(8);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
}

TEST_F(Control, BadFaultLinesGiveErrors) {
    for (const char* line :
         {"fault", "fault explode", "fault fw-fault code=0", "fault fw-fault code=x",
          "fault fw-fault code=1 code=2", "fault fw-fault severity=3", "fault no-response now",
          "fault clear all", "fault fw-fault code=4294967296", "fault boot-fault count=0",
          "fault boot-fault count=101", "fault boot-fault times=2", "fault reset-fault 1",
          "fault reset-fault count=1 count=2"}) {
        const std::string reply = run(line);
        EXPECT_TRUE(is_error(reply)) << line << " -> " << reply;
    }
    EXPECT_EQ(h.card.state(), RBLN_FW_STATE_RESET);
    EXPECT_FALSE(h.card.no_response());
}

TEST_F(Control, UnknownCommandEmptyLineAndJunkGiveErrors) {
    EXPECT_TRUE(is_error(run("")));
    EXPECT_TRUE(is_error(run("   \t ")));
    EXPECT_TRUE(is_error(run("reboot")));
    const std::string junk = run(std::string("\x01\xff\x7f stuff", 9));
    EXPECT_TRUE(is_error(junk));
    for (char c : junk)
        EXPECT_TRUE(c >= ' ' && c <= '~') << static_cast<int>(c);
}

// Found by tests/fuzz's emu_control: a key given twice came back raw, NUL
// and control bytes included, in the one-line reply.
TEST_F(Control, RepliesQuoteEveryByteOfTheInputTheyRepeat) {
    for (const std::string& line :
         {std::string("set k\0\r=1 k\0\r=1", 15), std::string("set \x01=1 \x01=1"),
          std::string("fault fw-fault \x02=1"), std::string("memcpy-bench \x7f=1")}) {
        const std::string reply = run(line);
        EXPECT_TRUE(is_error(reply)) << reply;
        for (char c : reply)
            EXPECT_TRUE(c >= ' ' && c <= '~') << static_cast<int>(c) << " in " << reply;
    }
}

TEST_F(Control, TrailingCarriageReturnAndExtraSpacesAreAccepted) {
    EXPECT_EQ(run("  set   temp_mc=1\r"), "ok");
    EXPECT_EQ(h.card.telemetry().temp_mc, 1);
}

TEST_F(Control, HelpListsCommandsAndFaults) {
    const std::string reply = run("help");
    EXPECT_EQ(reply.rfind("ok ", 0), 0U);
    for (const char* word : {"status", "set", "fault", "no-response", "fw-fault", "clear"})
        EXPECT_NE(reply.find(word), std::string::npos) << word;
}

TEST_F(Control, RisingCardTemperaturePostsOneThermalEvent) {
    h.boot(8);
    (void)h.drain_events();
    EXPECT_EQ(run("set temp_mc=89999"), "ok");
    EXPECT_TRUE(h.drain_events().empty());
    EXPECT_EQ(run("set temp_mc=95000"), "ok");
    EXPECT_EQ(run("set temp_mc=96000"), "ok"); // still above: no second event
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_THERMAL);
    EXPECT_EQ(evs[0].data[0], 95000U);
}

TEST_F(Control, MemcpyBenchTimesTheEmulatorsOwnMemcpy) {
    const std::string reply = run("memcpy-bench size=1048576");
    ASSERT_EQ(reply.rfind("ok ", 0), 0U) << reply;
    std::map<std::string, std::string> kv;
    std::istringstream in(reply.substr(3));
    std::string word;
    while (in >> word)
        kv[word.substr(0, word.find('='))] = word.substr(word.find('=') + 1);
    EXPECT_EQ(kv["size"], "1048576");
    EXPECT_GE(std::stoull(kv["copies"]), 3U);
    EXPECT_GT(std::stoull(kv["ns"]), 0U);
    EXPECT_GT(std::stod(kv["gbps"]), 0.0);
    EXPECT_LE(std::stoull(kv["best_ns"]), std::stoull(kv["ns"]));
    EXPECT_GE(std::stod(kv["best_gbps"]), std::stod(kv["gbps"]));
    EXPECT_NE(run("help").find("memcpy-bench"), std::string::npos);
}

TEST_F(Control, MemcpyBenchRejectsBadSizes) {
    for (const char* line :
         {"memcpy-bench", "memcpy-bench size=0", "memcpy-bench size=1073741825",
          "memcpy-bench bytes=4096", "memcpy-bench size=x", "memcpy-bench size=4096 size=4096"})
        EXPECT_TRUE(is_error(run(line))) << line;
}
} // namespace control_test
