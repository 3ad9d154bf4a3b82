// SPDX-License-Identifier: GPL-2.0
// The admin ring and the event ring against an in-process fake host.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "fake_host.h"
#include "page_table_builder.h"

using namespace rbln::emu;
using rbln::emu::test::FakeHost;
using rbln::emu::test::kPteRw;
using rbln::emu::test::make_va;
using rbln::emu::test::PageTableBuilder;

namespace card_admin_test {

namespace {

class AdminRing : public ::testing::Test {
protected:
    void SetUp() override {
        h.boot(8);
        (void)h.drain_events(); // the STATE event of the handshake
        h.irqs.clear();
    }
    FakeHost h;
};

rbln_fw_admin_cpl expect_cpl(FakeHost& h, std::uint32_t seq, std::uint16_t status) {
    const auto cpl = h.pop_cpl();
    EXPECT_TRUE(cpl.has_value());
    if (!cpl)
        return {};
    EXPECT_EQ(cpl->seq, seq);
    EXPECT_EQ(cpl->status, status);
    return *cpl;
}

} // namespace

TEST_F(AdminRing, IdentifyWritesThePayloadAndItsLength) {
    std::memset(h.ram(FakeHost::kData), 0xee, 4096);
    const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_IDENTIFY, FakeHost::kData, 4096));
    const auto cpl = expect_cpl(h, seq, RBLN_FW_ST_OK);
    EXPECT_EQ(cpl.data_len, sizeof(rbln_fw_identify));
    EXPECT_EQ(cpl.sq_head, 1U);
    EXPECT_EQ(h.ctrl().admin_sq_head, 1U);
    rbln_fw_identify idf{};
    std::memcpy(&idf, h.ram(FakeHost::kData), sizeof(idf));
    EXPECT_EQ(idf.family, RBLN_FW_FAMILY_REBEL100);
    EXPECT_EQ(idf.chiplet_count, 4U);
    EXPECT_EQ(idf.iface_major, 1);
    EXPECT_EQ(idf.iface_minor, 4); // 1.2: command rings; 1.3: VM_ABORT; 1.4: GRAPH_EXEC
    EXPECT_STREQ(idf.serial, "RBLNTEST-0001");
    EXPECT_STREQ(idf.fw_version, "rbln-emu 0.1.0");
    EXPECT_EQ(std::memcmp(idf.uuid, h.ctrl().uuid, 16), 0);
    for (unsigned i = 0; i < 4; i++)
        EXPECT_EQ(idf.hbm_size[i], 256ULL << 20);
    EXPECT_EQ(idf.hbm_size[4], 0U);
    // Nothing past the payload was touched.
    EXPECT_EQ(*h.ram(FakeHost::kData + sizeof(idf)), std::byte{0xee});
    ASSERT_EQ(h.irqs.size(), 1U);
    EXPECT_EQ(h.irqs[0], unsigned{RBLN_FW_IRQ_ADMIN});
    EXPECT_TRUE(h.drain_events().empty());
}

TEST_F(AdminRing, HeartbeatReturnsTheCounterAndUptime) {
    h.card.tick();
    h.card.tick();
    h.clock_ns += 5'000'000;
    const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    const auto cpl = expect_cpl(h, seq, RBLN_FW_ST_OK);
    EXPECT_EQ(cpl.result[0], 2U);
    EXPECT_EQ(cpl.result[1], 5'000'000U);
    EXPECT_EQ(cpl.data_len, 0U);
}

TEST_F(AdminRing, GetTelemetryReportsDefaultsAndSetValuesCardIsHottestSensor) {
    auto seq = h.submit(
        FakeHost::request(RBLN_FW_OP_GET_TELEMETRY, FakeHost::kData, sizeof(rbln_fw_telemetry)));
    auto cpl = expect_cpl(h, seq, RBLN_FW_ST_OK);
    EXPECT_EQ(cpl.data_len, sizeof(rbln_fw_telemetry));
    rbln_fw_telemetry t{};
    std::memcpy(&t, h.ram(FakeHost::kData), sizeof(t));
    EXPECT_EQ(t.temp_mc, 45500); // chiplet 3 (45500) is hotter than the board (45000)
    EXPECT_EQ(t.power_uw, 75000000U);
    EXPECT_EQ(t.chiplet_count, 4U);
    for (unsigned i = 0; i < 4; i++) {
        EXPECT_EQ(t.chiplet[i].temp_mc, 44000 + static_cast<int>(i) * 500);
        EXPECT_EQ(t.chiplet[i].clock_mhz, 1000U);
        EXPECT_EQ(t.chiplet[i].mem_clock_mhz, 1600U);
        EXPECT_EQ(t.chiplet[i].busy_ns, 0U);
    }
    EXPECT_EQ(t.chiplet[4].clock_mhz, 0U);

    h.card.set_card_temp(-5000);
    h.card.set_power(1);
    h.card.set_chiplet(2, {51000, 900, 1200, 777});
    seq = h.submit(FakeHost::request(RBLN_FW_OP_GET_TELEMETRY, FakeHost::kData, 4096));
    (void)expect_cpl(h, seq, RBLN_FW_ST_OK);
    std::memcpy(&t, h.ram(FakeHost::kData), sizeof(t));
    EXPECT_EQ(t.temp_mc, 51000); // the board sensor says -5000, chiplet 2 is hottest
    EXPECT_EQ(t.power_uw, 1U);
    EXPECT_EQ(t.chiplet[2].temp_mc, 51000);
    EXPECT_EQ(t.chiplet[2].clock_mhz, 900U);
    EXPECT_EQ(t.chiplet[2].mem_clock_mhz, 1200U);
    EXPECT_EQ(t.chiplet[2].busy_ns, 777U);
    EXPECT_EQ(t.chiplet[1].temp_mc, 44500);
}

TEST_F(AdminRing, ResetChipletCompletesThenPostsChipletResetEvent) {
    auto req = FakeHost::request(RBLN_FW_OP_RESET_CHIPLET);
    req.args[0] = 3;
    const auto seq = h.submit(req);
    (void)expect_cpl(h, seq, RBLN_FW_ST_OK);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_CHIPLET_RESET);
    EXPECT_EQ(evs[0].chiplet, 3U);
    EXPECT_EQ(h.card.stats().chiplet_resets[3], 1U);
    EXPECT_EQ(h.irqs.size(), 2U); // admin and event
}

TEST_F(AdminRing, PhaseBitFlipsOnEveryWrapOverSeveralPasses) {
    // 8 entries, 5 passes one request at a time, then in batches.
    for (int i = 0; i < 40; i++) {
        const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
        const auto cpl = expect_cpl(h, seq, RBLN_FW_ST_OK);
        EXPECT_EQ(cpl.flags & RBLN_FW_REC_PHASE, (i / 8) % 2 == 0 ? 1 : 0) << i;
        EXPECT_EQ(cpl.sq_head, static_cast<std::uint32_t>((i + 1) % 8));
    }
    for (int batch = 0; batch < 6; batch++) {
        std::vector<std::uint32_t> seqs;
        seqs.reserve(5);
        for (int i = 0; i < 5; i++)
            seqs.push_back(h.queue(FakeHost::request(RBLN_FW_OP_HEARTBEAT)));
        h.card.doorbell(RBLN_FW_DB_ADMIN);
        for (std::uint32_t s : seqs)
            (void)expect_cpl(h, s, RBLN_FW_ST_OK);
        EXPECT_FALSE(h.pop_cpl().has_value());
    }
    EXPECT_EQ(h.card.stats().admin_requests, 70U);
}

TEST_F(AdminRing, MergedDoorbellProcessesEverythingPending) {
    std::vector<std::uint32_t> seqs;
    seqs.reserve(7);
    for (int i = 0; i < 7; i++) // a full ring: tail + 1 == head
        seqs.push_back(h.queue(FakeHost::request(RBLN_FW_OP_HEARTBEAT)));
    h.card.doorbell(RBLN_FW_DB_ADMIN); // one signal for seven requests
    for (std::uint32_t s : seqs)
        (void)expect_cpl(h, s, RBLN_FW_ST_OK);
    EXPECT_EQ(h.ctrl().admin_sq_head, 7U);
    EXPECT_EQ(h.irqs.size(), 1U); // one interrupt for the batch
}

TEST_F(AdminRing, FullCompletionRingHoldsBackCompletionsUntilTheHostConsumes) {
    std::vector<std::uint32_t> seqs;
    seqs.reserve(14);
    for (int i = 0; i < 7; i++)
        seqs.push_back(h.queue(FakeHost::request(RBLN_FW_OP_HEARTBEAT)));
    h.card.doorbell(RBLN_FW_DB_ADMIN);
    // The host consumes none; CQ now holds 7 (full).  Seven more requests.
    for (int i = 0; i < 7; i++)
        seqs.push_back(h.queue(FakeHost::request(RBLN_FW_OP_HEARTBEAT)));
    h.card.doorbell(RBLN_FW_DB_ADMIN);
    EXPECT_EQ(h.ctrl().admin_sq_head, 7U); // nothing more taken
    EXPECT_EQ(h.card.stats().completions, 7U);
    EXPECT_EQ(h.card.stats().cq_stalls, 1U);
    // Consume two; the periodic tick resumes without a doorbell.
    (void)expect_cpl(h, seqs[0], RBLN_FW_ST_OK);
    (void)expect_cpl(h, seqs[1], RBLN_FW_ST_OK);
    h.card.tick();
    EXPECT_EQ(h.card.stats().completions, 9U);
    // Consume the rest in order; nothing was overwritten.
    for (std::size_t i = 2; i < 9; i++)
        (void)expect_cpl(h, seqs[i], RBLN_FW_ST_OK);
    h.card.doorbell(RBLN_FW_DB_ADMIN); // a doorbell resumes at once
    for (std::size_t i = 9; i < seqs.size(); i++)
        (void)expect_cpl(h, seqs[i], RBLN_FW_ST_OK);
    EXPECT_FALSE(h.pop_cpl().has_value());
}

struct Malformed {
    const char* name;
    rbln_fw_admin_req req;
    std::uint16_t status;
};

rbln_fw_admin_req make(std::uint16_t op, std::uint64_t addr = 0, std::uint32_t len = 0) {
    return FakeHost::request(op, addr, len);
}

template <typename F> rbln_fw_admin_req make_with(rbln_fw_admin_req req, F&& f) {
    f(req);
    return req;
}

// The MMU requests (rbln_fw_mmu.md), well formed.
rbln_fw_admin_req vm_bind_req(std::uint32_t asid, std::uint64_t root) {
    auto r = make(RBLN_FW_OP_VM_BIND);
    r.args[0] = asid;
    r.args[1] = static_cast<std::uint32_t>(root);
    r.args[2] = static_cast<std::uint32_t>(root >> 32);
    return r;
}

rbln_fw_admin_req vm_unbind_req(std::uint32_t asid) {
    auto r = make(RBLN_FW_OP_VM_UNBIND);
    r.args[0] = asid;
    return r;
}

rbln_fw_admin_req tlb_invalidate_req(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
    auto r = make(RBLN_FW_OP_TLB_INVALIDATE);
    r.args[0] = asid;
    r.args[1] = static_cast<std::uint32_t>(va);
    r.args[2] = static_cast<std::uint32_t>(va >> 32);
    r.args[3] = static_cast<std::uint32_t>(size);
    r.args[4] = static_cast<std::uint32_t>(size >> 32);
    return r;
}

rbln_fw_admin_req debug_req(std::uint32_t asid, std::uint32_t access, std::uint64_t va,
                            std::uint64_t data, std::uint32_t len) {
    auto r = make(RBLN_FW_OP_DEBUG_ACCESS, data, len);
    r.args[0] = asid;
    r.args[1] = access;
    r.args[2] = static_cast<std::uint32_t>(va);
    r.args[3] = static_cast<std::uint32_t>(va >> 32);
    return r;
}

class AdminRingMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(AdminRingMalformed, MalformedRequestGetsErrorCompletionAndEvent) {
    FakeHost h;
    h.boot(8);
    (void)h.drain_events();
    const Malformed& m = GetParam();
    std::memset(h.ram(FakeHost::kData), 0x5a, 4096);
    const auto seq = h.submit(m.req);
    const auto cpl = expect_cpl(h, seq, m.status);
    EXPECT_EQ(cpl.data_len, 0U);
    EXPECT_EQ(cpl.result[0], 0U);
    EXPECT_EQ(*h.ram(FakeHost::kData), std::byte{0x5a}); // no payload written
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_BAD_REQUEST);
    EXPECT_EQ(evs[0].code, m.status);
    EXPECT_EQ(evs[0].data[0], seq);
    EXPECT_EQ(evs[0].data[1], m.req.opcode);
    EXPECT_EQ(h.card.stats().bad_requests, 1U);
    EXPECT_TRUE(h.logged("rejected"));
    // The card keeps serving.
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    const auto ok = h.submit(make(RBLN_FW_OP_HEARTBEAT));
    (void)expect_cpl(h, ok, RBLN_FW_ST_OK);
}

constexpr std::uint64_t kD = FakeHost::kData;
constexpr std::uint32_t kIdLen = sizeof(rbln_fw_identify);
constexpr std::uint32_t kTeLen = sizeof(rbln_fw_telemetry);
constexpr std::uint64_t kRoot = 0x100000; // a 4 KiB aligned GPA in guest RAM

INSTANTIATE_TEST_SUITE_P(
    Cases, AdminRingMalformed,
    ::testing::Values(
        Malformed{"UnknownOpcode", make(0), RBLN_FW_ST_BAD_OPCODE},
        Malformed{"UnknownOpcode12", make(12, kD, 4096), RBLN_FW_ST_BAD_OPCODE},
        Malformed{"UnknownOpcodeFFFF", make(0xffff), RBLN_FW_ST_BAD_OPCODE},
        Malformed{"IdentifyFlags",
                  make_with(make(RBLN_FW_OP_IDENTIFY, kD, kIdLen), [](auto& r) { r.flags = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"IdentifyReserved",
                  make_with(make(RBLN_FW_OP_IDENTIFY, kD, kIdLen), [](auto& r) { r.reserved = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"IdentifyArgs",
                  make_with(make(RBLN_FW_OP_IDENTIFY, kD, kIdLen), [](auto& r) { r.args[9] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"IdentifyNoBuffer", make(RBLN_FW_OP_IDENTIFY, 0, kIdLen), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"IdentifyShortBuffer", make(RBLN_FW_OP_IDENTIFY, kD, kIdLen - 1),
                  RBLN_FW_ST_SHORT_BUFFER},
        Malformed{"IdentifyBufferOutsideRam",
                  make(RBLN_FW_OP_IDENTIFY, FakeHost::kRamSize - 8, kIdLen),
                  RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"IdentifyBufferWrapsAddressSpace",
                  make(RBLN_FW_OP_IDENTIFY, 0xfffffffffffffff0ULL, kIdLen), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"HeartbeatFlags",
                  make_with(make(RBLN_FW_OP_HEARTBEAT), [](auto& r) { r.flags = 0x8000; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"HeartbeatArgs",
                  make_with(make(RBLN_FW_OP_HEARTBEAT), [](auto& r) { r.args[0] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"HeartbeatDataBuffer", make(RBLN_FW_OP_HEARTBEAT, kD, 64), RBLN_FW_ST_BAD_FIELD},
        Malformed{
            "TelemetryReserved",
            make_with(make(RBLN_FW_OP_GET_TELEMETRY, kD, kTeLen), [](auto& r) { r.reserved = 7; }),
            RBLN_FW_ST_BAD_FIELD},
        Malformed{
            "TelemetryArgs",
            make_with(make(RBLN_FW_OP_GET_TELEMETRY, kD, kTeLen), [](auto& r) { r.args[4] = 2; }),
            RBLN_FW_ST_BAD_FIELD},
        Malformed{"TelemetryNoBuffer", make(RBLN_FW_OP_GET_TELEMETRY), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"TelemetryShortBuffer", make(RBLN_FW_OP_GET_TELEMETRY, kD, 16),
                  RBLN_FW_ST_SHORT_BUFFER},
        Malformed{"TelemetryBufferInPciHole", make(RBLN_FW_OP_GET_TELEMETRY, 0xfee00000, kTeLen),
                  RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"ResetChipletOutOfRange",
                  make_with(make(RBLN_FW_OP_RESET_CHIPLET), [](auto& r) { r.args[0] = 4; }),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{
            "ResetChipletHugeIndex",
            make_with(make(RBLN_FW_OP_RESET_CHIPLET), [](auto& r) { r.args[0] = 0xffffffff; }),
            RBLN_FW_ST_BAD_ARG},
        Malformed{"ResetChipletUnusedArgs",
                  make_with(make(RBLN_FW_OP_RESET_CHIPLET), [](auto& r) { r.args[1] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"ResetChipletDataBuffer", make(RBLN_FW_OP_RESET_CHIPLET, kD, 0),
                  RBLN_FW_ST_BAD_FIELD},
        // VM_BIND
        Malformed{"VmBindAsidZero", vm_bind_req(0, kRoot), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmBindAsidMax", vm_bind_req(RBLN_FW_MAX_ASID, kRoot), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmBindAsidHuge", vm_bind_req(0xffffffff, kRoot), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmBindRootMisaligned", vm_bind_req(1, kRoot + 8), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmBindRootMisalignedOutsideRam", vm_bind_req(1, FakeHost::kRamSize + 0x800),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"VmBindRootPastRam", vm_bind_req(1, FakeHost::kRamSize), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"VmBindRootInPciHole", vm_bind_req(1, 0xfee00000), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"VmBindRootHighBits", vm_bind_req(1, kRoot | 1ULL << 40), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"VmBindUnusedArgs",
                  make_with(vm_bind_req(1, kRoot), [](auto& r) { r.args[3] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"VmBindFlags", make_with(vm_bind_req(1, kRoot), [](auto& r) { r.flags = 2; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"VmBindReserved",
                  make_with(vm_bind_req(1, kRoot), [](auto& r) { r.reserved = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"VmBindDataBuffer",
                  make_with(vm_bind_req(1, kRoot),
                            [](auto& r) {
                                r.data_addr = kD;
                                r.data_len = 64;
                            }),
                  RBLN_FW_ST_BAD_FIELD},
        // VM_UNBIND
        Malformed{"VmUnbindNotBound", vm_unbind_req(1), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmUnbindAsidZero", vm_unbind_req(0), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmUnbindAsidMax", vm_unbind_req(RBLN_FW_MAX_ASID), RBLN_FW_ST_BAD_ARG},
        Malformed{"VmUnbindUnusedArgs", make_with(vm_unbind_req(1), [](auto& r) { r.args[1] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"VmUnbindDataBuffer",
                  make_with(vm_unbind_req(1), [](auto& r) { r.data_addr = kD; }),
                  RBLN_FW_ST_BAD_FIELD},
        // TLB_INVALIDATE
        Malformed{"TlbInvalidateVaMisaligned", tlb_invalidate_req(1, 0x1800, 0x1000),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateSizeMisaligned", tlb_invalidate_req(1, 0x1000, 0x10),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateWholeAsidVaMisaligned", tlb_invalidate_req(1, 0x10, 0),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateAsidZero", tlb_invalidate_req(0, 0, 0), RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateAsidMax", tlb_invalidate_req(RBLN_FW_MAX_ASID, 0, 0),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateVaBeyond48Bits", tlb_invalidate_req(1, 1ULL << 48, 0x1000),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateRangeBeyond48Bits",
                  tlb_invalidate_req(1, (1ULL << 48) - 0x1000, 0x2000), RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateRangeWraps", tlb_invalidate_req(1, 0x1000, ~0xfffULL),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"TlbInvalidateUnusedArgs",
                  make_with(tlb_invalidate_req(1, 0, 0), [](auto& r) { r.args[5] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"TlbInvalidateDataBuffer",
                  make_with(tlb_invalidate_req(1, 0, 0), [](auto& r) { r.data_len = 8; }),
                  RBLN_FW_ST_BAD_FIELD},
        // DEBUG_ACCESS
        Malformed{"DebugAccessAccessZero", debug_req(1, 0, 0x1000, kD, 8), RBLN_FW_ST_BAD_ARG},
        Malformed{"DebugAccessAccessThree", debug_req(1, 3, 0x1000, kD, 8), RBLN_FW_ST_BAD_ARG},
        Malformed{"DebugAccessLengthZero", debug_req(1, 1, 0x1000, kD, 0), RBLN_FW_ST_BAD_ARG},
        Malformed{"DebugAccessLength4097", debug_req(1, 1, 0x1000, kD, 4097), RBLN_FW_ST_BAD_ARG},
        Malformed{"DebugAccessLengthHuge", debug_req(1, 2, 0x1000, kD, 0xffffffff),
                  RBLN_FW_ST_BAD_ARG},
        Malformed{"DebugAccessNoBuffer", debug_req(1, 1, 0x1000, 0, 8), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"DebugAccessBufferOutsideRam", debug_req(1, 2, 0x1000, FakeHost::kRamSize, 8),
                  RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"DebugAccessBufferEndsOutsideRam",
                  debug_req(1, 1, 0x1000, FakeHost::kRamSize - 100, 200), RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"DebugAccessBufferInPciHole", debug_req(1, 1, 0x1000, 0xfee00000, 8),
                  RBLN_FW_ST_BAD_ADDRESS},
        Malformed{"DebugAccessUnusedArgs",
                  make_with(debug_req(1, 1, 0x1000, kD, 8), [](auto& r) { r.args[4] = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"DebugAccessFlags",
                  make_with(debug_req(1, 1, 0x1000, kD, 8), [](auto& r) { r.flags = 1; }),
                  RBLN_FW_ST_BAD_FIELD},
        Malformed{"DebugAccessReserved",
                  make_with(debug_req(1, 1, 0x1000, kD, 8), [](auto& r) { r.reserved = 1; }),
                  RBLN_FW_ST_BAD_FIELD}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(AdminRingAtom, ResetChipletBeyondTheOnlyChipletIsBadArg) {
    FakeHost h(Family::atom);
    h.boot(8);
    auto req = FakeHost::request(RBLN_FW_OP_RESET_CHIPLET);
    req.args[0] = 1;
    const auto seq = h.submit(req);
    (void)expect_cpl(h, seq, RBLN_FW_ST_BAD_ARG);
}

TEST_F(AdminRing, OutOfRangeTailIsReportedOnceAndIgnored) {
    h.ctrl().admin_sq_tail = 8; // == ring_entries: a malformed host write
    h.card.doorbell(RBLN_FW_DB_ADMIN);
    h.card.doorbell(RBLN_FW_DB_ADMIN);
    EXPECT_FALSE(h.pop_cpl().has_value());
    EXPECT_EQ(h.ctrl().admin_sq_head, 0U);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_BAD_REQUEST);
    EXPECT_EQ(evs[0].code, RBLN_FW_ST_BAD_FIELD);
    EXPECT_EQ(evs[0].data[2], 8U);
    EXPECT_TRUE(h.logged("admin_sq_tail 8 out of range"));
    // A sane tail again: service resumes.
    h.ctrl().admin_sq_tail = 0;
    const auto seq = h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    (void)expect_cpl(h, seq, RBLN_FW_ST_OK);
}

TEST_F(AdminRing, FullEventRingDropsAndCountsEventsAndSeqShowsTheGap) {
    // Seven unconsumed events fill an 8-entry ring (one was consumed in SetUp).
    auto bad = FakeHost::request(0x77);
    for (int i = 0; i < 9; i++) {
        const auto seq = h.submit(bad);
        (void)expect_cpl(h, seq, RBLN_FW_ST_BAD_OPCODE);
    }
    EXPECT_EQ(h.card.stats().events_dropped, 2U);
    auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 7U);
    EXPECT_EQ(evs.front().seq, 1U); // seq 0 was the STATE event
    EXPECT_EQ(evs.back().seq, 7U);
    const auto seq = h.submit(bad);
    (void)expect_cpl(h, seq, RBLN_FW_ST_BAD_OPCODE);
    evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].seq, 10U); // 8 and 9 were dropped
}

TEST_F(AdminRing, AdminDoorbellBeforeReadyIsIgnored) {
    FakeHost fresh;
    fresh.configure(8);
    (void)fresh.queue(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    fresh.card.doorbell(RBLN_FW_DB_ADMIN);
    EXPECT_EQ(fresh.card.stats().admin_requests, 0U);
    EXPECT_FALSE(fresh.pop_cpl().has_value());
}

TEST(AdminRingRobustness, RandomRequestsAlwaysGetExactlyOneCompletionEach) {
    FakeHost h;
    h.boot(16);
    std::mt19937_64 rng(12345);
    std::uint64_t ok = 0;
    for (int i = 0; i < 2000; i++) {
        rbln_fw_admin_req req{};
        auto* bytes = reinterpret_cast<unsigned char*>(&req);
        for (std::size_t b = 0; b < sizeof(req); b++)
            bytes[b] = static_cast<unsigned char>(rng());
        // Keep some requests plausible so every path is reached.
        if (i % 3 == 0) {
            req.opcode = static_cast<std::uint16_t>(1 + rng() % 8);
            req.flags = 0;
            req.reserved = 0;
            std::memset(req.args, 0, sizeof(req.args));
            req.args[0] = static_cast<std::uint32_t>(rng() % 6);
            req.data_addr = (rng() % 2) != 0 ? FakeHost::kData : 0;
            req.data_len = (rng() % 2) != 0 ? 4096 : 0;
        }
        const auto seq = h.submit(req);
        const auto cpl = h.pop_cpl();
        ASSERT_TRUE(cpl.has_value()) << i;
        EXPECT_EQ(cpl->seq, seq);
        EXPECT_LE(cpl->status, RBLN_FW_ST_MMU_FAULT);
        ok += cpl->status == RBLN_FW_ST_OK ? 1 : 0;
        (void)h.drain_events();
    }
    EXPECT_GT(ok, 0U);
    EXPECT_EQ(h.card.stats().admin_requests, 2000U);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
}

// --- the MMU requests (firmware-iface 1.1) ----------------------------------

namespace {

constexpr std::uint64_t k4K = RBLN_FW_PAGE_SIZE;
constexpr std::uint64_t k2M = RBLN_FW_HUGE_SIZE;
constexpr std::uint64_t kTables = 0x100000; // 1 MiB of page tables
constexpr std::uint64_t kPages = 0x200000;  // 4 KiB data pages
constexpr std::uint64_t kHuge = 0x400000;   // 2 MiB data pages at 4 and 6 MiB
constexpr std::uint64_t kOut = 0x50000;     // a second host buffer
constexpr std::uint32_t kAsid = 7;
constexpr std::uint64_t kVa = make_va(1, 2, 3, 4);

class AdminMmu : public ::testing::Test {
protected:
    void SetUp() override {
        h.boot(16);
        (void)h.drain_events();
        ASSERT_EQ(submit(vm_bind_req(kAsid, pt.root())).status, RBLN_FW_ST_OK);
        h.irqs.clear();
    }

    rbln_fw_admin_cpl submit(const rbln_fw_admin_req& req) {
        const auto seq = h.submit(req);
        const auto cpl = h.pop_cpl();
        EXPECT_TRUE(cpl.has_value());
        if (!cpl)
            return {};
        EXPECT_EQ(cpl->seq, seq);
        return *cpl;
    }

    rbln_fw_admin_cpl debug_read(std::uint64_t va, std::uint32_t len, std::uint64_t buf = kD,
                                 std::uint32_t asid = kAsid) {
        return submit(debug_req(asid, RBLN_FW_ACCESS_READ, va, buf, len));
    }
    rbln_fw_admin_cpl debug_write(std::uint64_t va, std::uint32_t len, std::uint64_t buf = kD,
                                  std::uint32_t asid = kAsid) {
        return submit(debug_req(asid, RBLN_FW_ACCESS_WRITE, va, buf, len));
    }

    void fill(std::byte* p, std::size_t len, unsigned seed) {
        for (std::size_t i = 0; i < len; i++)
            p[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
    }

    FakeHost h;
    PageTableBuilder pt{h.memory(), kTables, 1ULL << 20};
};

} // namespace

TEST_F(AdminMmu, DebugAccessReadCopiesTheBytesAtTheVaIntoTheHostBuffer) {
    pt.map_4k(kVa, kPages + 2 * k4K, kPteRw);
    fill(h.ram(kPages + 2 * k4K), k4K, 1);
    std::memset(h.ram(kD), 0, 2 * k4K);
    const auto cpl = debug_read(kVa + 0x10, 64);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_OK);
    EXPECT_EQ(cpl.data_len, 64U);
    EXPECT_EQ(std::memcmp(h.ram(kD), h.ram(kPages + 2 * k4K + 0x10), 64), 0);
    EXPECT_EQ(*h.ram(kD + 64), std::byte{0}); // not one byte more
    EXPECT_TRUE(h.drain_events().empty());
    ASSERT_EQ(h.irqs.size(), 1U);
    EXPECT_EQ(h.irqs[0], unsigned{RBLN_FW_IRQ_ADMIN});
    EXPECT_EQ(h.card.stats().vm_bound, 1U);
}

TEST_F(AdminMmu, DebugAccessWriteThenReadRoundTripsAcrossAnHbmAndAHostPage) {
    // VA page 0 -> chiplet 3's HBM (LOCAL), page 1 -> a host page.
    const std::uint64_t hbm = h.ctrl().hbm[3].bar_offset + 10 * k4K;
    pt.map_4k(kVa, hbm, kPteRw | RBLN_FW_PTE_LOCAL);
    pt.map_4k(kVa + k4K, kPages, kPteRw);
    fill(h.ram(kD), 4096, 9);
    auto cpl = debug_write(kVa + 0x800, 4096);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_OK);
    EXPECT_EQ(cpl.data_len, 0U); // nothing written to the host buffer
    EXPECT_EQ(std::memcmp(h.bar(hbm + 0x800), h.ram(kD), 0x800), 0);
    EXPECT_EQ(std::memcmp(h.ram(kPages), h.ram(kD + 0x800), 0x800), 0);
    std::memset(h.ram(kOut), 0, 4096);
    cpl = debug_read(kVa + 0x800, 4096, kOut);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_OK);
    EXPECT_EQ(cpl.data_len, 4096U);
    EXPECT_EQ(std::memcmp(h.ram(kOut), h.ram(kD), 4096), 0);
}

TEST_F(AdminMmu, DebugAccessReachesLocalPagesOfEveryChiplet) {
    for (unsigned i = 0; i < h.ctrl().chiplet_count; i++) {
        const std::uint64_t va = make_va(3, i, 1, 0);
        const std::uint64_t hbm = h.ctrl().hbm[i].bar_offset + h.ctrl().hbm[i].size - k2M;
        pt.map_2m(va, hbm, kPteRw | RBLN_FW_PTE_LOCAL);
        const std::uint64_t value = 0x1111111111111111ULL * (i + 1);
        std::memcpy(h.ram(kD), &value, sizeof(value));
        EXPECT_EQ(debug_write(va + k2M - 8, 8).status, RBLN_FW_ST_OK) << i;
        std::uint64_t in_hbm = 0;
        std::memcpy(&in_hbm, h.bar(hbm + k2M - 8), sizeof(in_hbm));
        EXPECT_EQ(in_hbm, value) << i;
    }
}

TEST_F(AdminMmu, DebugAccessFaultCompletesWithMmuFaultAndPostsTheEventMovingNoByte) {
    pt.map_4k(kVa, kPages, kPteRw);
    pt.map_4k(kVa + k4K, kPages + k4K, RBLN_FW_PTE_READ);
    std::memset(h.ram(kPages), 0x11, 2 * k4K);
    std::memset(h.ram(kD), 0xee, 4096);
    const auto cpl = debug_write(kVa + 0x100, 4096);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_MMU_FAULT);
    EXPECT_EQ(cpl.result[0], kVa + k4K);
    EXPECT_EQ(cpl.result[1], RBLN_FW_MMU_NO_WRITE);
    EXPECT_EQ(cpl.data_len, 0U);
    for (std::uint64_t i = 0; i < 2 * k4K; i++) // not even the writable page changed
        ASSERT_EQ(*h.ram(kPages + i), std::byte{0x11}) << i;
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U); // no BAD_REQUEST: a fault is not a malformed request
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_MMU_FAULT);
    EXPECT_EQ(evs[0].code, RBLN_FW_MMU_NO_WRITE);
    EXPECT_EQ(evs[0].chiplet, 0xffffffffU);
    EXPECT_EQ(evs[0].data[0], kAsid);
    EXPECT_EQ(evs[0].data[1], kVa + k4K);
    EXPECT_EQ(evs[0].data[2], RBLN_FW_ACCESS_WRITE);
    EXPECT_EQ(evs[0].data[3], RBLN_FW_SOURCE_DEBUG);
    EXPECT_EQ(evs[0].data[4], 0U);
    ASSERT_EQ(h.irqs.size(), 2U);
    EXPECT_EQ(h.irqs[0], unsigned{RBLN_FW_IRQ_ADMIN});
    EXPECT_EQ(h.irqs[1], unsigned{RBLN_FW_IRQ_EVENT});
    EXPECT_EQ(h.card.stats().bad_requests, 0U);
    EXPECT_EQ(h.card.stats().mmu_faults, 1U);
    EXPECT_TRUE(h.logged("MMU fault: asid 7 write"));
    EXPECT_FALSE(h.logged("rejected"));
}

TEST_F(AdminMmu, FaultingDebugReadWritesNothingToTheHostBuffer) {
    pt.map_4k(kVa, kPages, kPteRw); // the next page is not mapped
    std::memset(h.ram(kD), 0x5a, 4096);
    const auto cpl = debug_read(kVa + k4K - 16, 32);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_MMU_FAULT);
    EXPECT_EQ(cpl.result[0], kVa + k4K);
    EXPECT_EQ(cpl.result[1], RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(cpl.data_len, 0U);
    for (std::uint64_t i = 0; i < 32; i++)
        ASSERT_EQ(*h.ram(kD + i), std::byte{0x5a});
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].data[2], RBLN_FW_ACCESS_READ);
}

struct AdminFault {
    const char* name;
    std::uint32_t asid;
    std::uint64_t va;
    std::uint32_t access;
    std::uint32_t reason;
};

void PrintTo(const AdminFault& f, std::ostream* os) {
    *os << f.name;
}

class AdminMmuFault : public AdminMmu, public ::testing::WithParamInterface<AdminFault> {};

TEST_P(AdminMmuFault, DebugAccessReportsTheReasonInTheCompletionAndTheEvent) {
    const AdminFault& f = GetParam();
    pt.map_4k(kVa, kPages, RBLN_FW_PTE_READ);                // read-only
    pt.map_4k(kVa + k4K, kPages + k4K, RBLN_FW_PTE_WRITE);   // write-only
    pt.map_4k(kVa + 2 * k4K, kPages | 1ULL << 60, kPteRw);   // reserved bit
    pt.map_4k(kVa + 3 * k4K, FakeHost::kRamSize, kPteRw);    // outside RAM
    pt.map_4k(kVa + 4 * k4K, 0, kPteRw | RBLN_FW_PTE_LOCAL); // control region
    const auto cpl = submit(debug_req(f.asid, f.access, f.va, kD, 16));
    EXPECT_EQ(cpl.status, RBLN_FW_ST_MMU_FAULT);
    EXPECT_EQ(cpl.result[0], f.va);
    EXPECT_EQ(cpl.result[1], f.reason);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_MMU_FAULT);
    EXPECT_EQ(evs[0].code, f.reason);
    EXPECT_EQ(evs[0].data[0], f.asid);
    EXPECT_EQ(evs[0].data[1], f.va);
    EXPECT_EQ(evs[0].data[2], f.access);
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, AdminMmuFault,
    ::testing::Values(
        AdminFault{"NotMapped", kAsid, kVa + 5 * k4K, RBLN_FW_ACCESS_READ, RBLN_FW_MMU_NOT_MAPPED},
        AdminFault{"NoWrite", kAsid, kVa, RBLN_FW_ACCESS_WRITE, RBLN_FW_MMU_NO_WRITE},
        AdminFault{"NoRead", kAsid, kVa + k4K, RBLN_FW_ACCESS_READ, RBLN_FW_MMU_NO_READ},
        AdminFault{"BadEntry", kAsid, kVa + 2 * k4K, RBLN_FW_ACCESS_READ, RBLN_FW_MMU_BAD_ENTRY},
        AdminFault{"BadAddressHost", kAsid, kVa + 3 * k4K, RBLN_FW_ACCESS_WRITE,
                   RBLN_FW_MMU_BAD_ADDRESS},
        AdminFault{"BadAddressLocal", kAsid, kVa + 4 * k4K, RBLN_FW_ACCESS_READ,
                   RBLN_FW_MMU_BAD_ADDRESS},
        AdminFault{"NoVmUnbound", kAsid + 1, kVa, RBLN_FW_ACCESS_READ, RBLN_FW_MMU_NO_VM},
        AdminFault{"NoVmAsidZero", 0, kVa, RBLN_FW_ACCESS_READ, RBLN_FW_MMU_NO_VM},
        AdminFault{"NoVmAsidOutOfRange", RBLN_FW_MAX_ASID, kVa, RBLN_FW_ACCESS_WRITE,
                   RBLN_FW_MMU_NO_VM},
        AdminFault{"BadVa", kAsid, 1ULL << 48 | kVa, RBLN_FW_ACCESS_READ, RBLN_FW_MMU_BAD_VA}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(AdminMmu, VmUnbindThenDebugAccessIsNoVmAndASecondUnbindIsBadArg) {
    pt.map_4k(kVa, kPages, kPteRw);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(submit(vm_unbind_req(kAsid)).status, RBLN_FW_ST_OK);
    EXPECT_EQ(h.card.stats().vm_bound, 0U);
    const auto cpl = debug_read(kVa, 8);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_MMU_FAULT);
    EXPECT_EQ(cpl.result[1], RBLN_FW_MMU_NO_VM);
    (void)h.drain_events();
    EXPECT_EQ(submit(vm_unbind_req(kAsid)).status, RBLN_FW_ST_BAD_ARG);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_BAD_REQUEST);
}

TEST_F(AdminMmu, VmBindOfABoundAsidReplacesTheRoot) {
    pt.map_4k(kVa, kPages, kPteRw);
    std::memset(h.ram(kPages), 0xaa, 8);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK); // cached now
    EXPECT_EQ(*h.ram(kD), std::byte{0xaa});
    PageTableBuilder other(h.memory(), kTables + (512ULL << 10), 512ULL << 10);
    other.map_4k(kVa, kPages + k4K, kPteRw);
    std::memset(h.ram(kPages + k4K), 0xbb, 8);
    EXPECT_EQ(submit(vm_bind_req(kAsid, other.root())).status, RBLN_FW_ST_OK);
    EXPECT_EQ(h.card.stats().vm_bound, 1U);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(*h.ram(kD), std::byte{0xbb});
}

TEST_F(AdminMmu, StaleTranslationUntilTlbInvalidateThenFresh) {
    pt.map_4k(kVa, kPages, kPteRw);
    std::memset(h.ram(kPages), 0xaa, k4K);
    std::memset(h.ram(kPages + k4K), 0xbb, k4K);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(*h.ram(kD), std::byte{0xaa});
    pt.map_4k(kVa, kPages + k4K, kPteRw); // remapped, not invalidated: stale
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(*h.ram(kD), std::byte{0xaa});
    EXPECT_EQ(submit(tlb_invalidate_req(kAsid, kVa, k4K)).status, RBLN_FW_ST_OK);
    EXPECT_EQ(h.card.stats().tlb_invalidations, 1U);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(*h.ram(kD), std::byte{0xbb});
}

TEST_F(AdminMmu, WholeAsidTlbInvalidateEndsEveryStaleTranslation) {
    const std::uint64_t far = make_va(200, 0, 1, 0);
    pt.map_4k(kVa, kPages, kPteRw);
    pt.map_2m(far, kHuge, kPteRw);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(debug_read(far, 8).status, RBLN_FW_ST_OK);
    pt.clear(kVa, 0);
    pt.clear(far, 1);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK); // stale
    EXPECT_EQ(debug_read(far, 8).status, RBLN_FW_ST_OK); // stale
    EXPECT_EQ(submit(tlb_invalidate_req(kAsid, 0, 0)).status, RBLN_FW_ST_OK);
    EXPECT_EQ(debug_read(kVa, 8).result[1], RBLN_FW_MMU_NOT_MAPPED);
    EXPECT_EQ(debug_read(far, 8).result[1], RBLN_FW_MMU_NOT_MAPPED);
}

TEST_F(AdminMmu, TlbInvalidateOfAnUnboundAsidIsANoOp) {
    EXPECT_EQ(submit(tlb_invalidate_req(kAsid + 1, 0, 0)).status, RBLN_FW_ST_OK);
    EXPECT_EQ(submit(tlb_invalidate_req(kAsid + 1, kVa, 16 * k4K)).status, RBLN_FW_ST_OK);
    EXPECT_TRUE(h.drain_events().empty());
}

TEST_F(AdminMmu, HostResetDropsEveryBinding) {
    ASSERT_EQ(submit(vm_bind_req(kAsid + 1, pt.root())).status, RBLN_FW_ST_OK);
    pt.map_4k(kVa, kPages, kPteRw);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(h.card.stats().vm_bound, 2U);
    h.host_reset();
    EXPECT_EQ(h.card.stats().vm_bound, 0U);
    h.boot(16);
    (void)h.drain_events();
    for (std::uint32_t asid : {kAsid, kAsid + 1}) {
        const auto cpl = debug_read(kVa, 8, kD, asid);
        EXPECT_EQ(cpl.status, RBLN_FW_ST_MMU_FAULT);
        EXPECT_EQ(cpl.result[1], RBLN_FW_MMU_NO_VM);
    }
    // VM_UNBIND of a dropped binding is BAD_ARG, as for any unbound ASID.
    EXPECT_EQ(submit(vm_unbind_req(kAsid)).status, RBLN_FW_ST_BAD_ARG);
}

TEST_F(AdminMmu, NewHandshakeWithoutResetDropsEveryBinding) {
    pt.map_4k(kVa, kPages, kPteRw);
    EXPECT_EQ(debug_read(kVa, 8).status, RBLN_FW_ST_OK);
    h.boot(16); // a new host_gen while READY
    (void)h.drain_events();
    EXPECT_EQ(h.card.stats().vm_bound, 0U);
    EXPECT_EQ(debug_read(kVa, 8).result[1], RBLN_FW_MMU_NO_VM);
}

TEST_F(AdminMmu, RepeatedDebugAccessHitsTheTlb) {
    pt.map_4k(kVa, kPages, kPteRw);
    const auto misses = h.card.stats().tlb_misses;
    for (int i = 0; i < 5; i++)
        EXPECT_EQ(debug_read(kVa + 8 * i, 8).status, RBLN_FW_ST_OK);
    EXPECT_EQ(h.card.stats().tlb_misses, misses + 1);
    EXPECT_EQ(h.card.stats().tlb_hits, 4U);
}
} // namespace card_admin_test
