// SPDX-License-Identifier: GPL-2.0
// The control block and the boot handshake state machine.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "fake_host.h"

using namespace rbln::emu;
using rbln::emu::test::FakeHost;

namespace card_handshake_test {

namespace {

std::string reason(FakeHost& h) {
    return {h.ctrl().fault_reason, strnlen(h.ctrl().fault_reason, sizeof(h.ctrl().fault_reason))};
}

void expect_fault(FakeHost& h, std::uint32_t code, const char* reason_part) {
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_FAULT);
    EXPECT_EQ(h.card.state(), RBLN_FW_STATE_FAULT);
    EXPECT_EQ(h.ctrl().fault_code, code);
    EXPECT_NE(reason(h).find(reason_part), std::string::npos) << reason(h);
    EXPECT_EQ(h.ctrl().fault_reason[sizeof(h.ctrl().fault_reason) - 1], '\0');
    EXPECT_NE(h.ctrl().host_ack, h.ctrl().host_gen);
    EXPECT_TRUE(h.logged("FAULT"));
}

} // namespace

TEST(ControlBlock, IdentityIsPublishedBeforeTheHostLooks) {
    FakeHost h;
    const rbln_fw_ctrl& c = h.ctrl();
    EXPECT_EQ(c.magic, RBLN_FW_MAGIC);
    EXPECT_EQ(c.iface_major, 1);
    EXPECT_EQ(c.iface_minor, 4);
    EXPECT_EQ(c.ctrl_size, sizeof(rbln_fw_ctrl));
    EXPECT_EQ(c.family, RBLN_FW_FAMILY_REBEL100);
    EXPECT_EQ(c.chiplet_count, 4U);
    EXPECT_EQ(c.doorbell_peer_id, 0U);
    EXPECT_EQ(c.num_vectors, 4U);
    EXPECT_STREQ(c.serial, "RBLNTEST-0001");
    EXPECT_STREQ(c.fw_version, "rbln-emu 0.1.0");
    EXPECT_EQ(c.bar_size, 2ULL << 30);
    for (unsigned i = 0; i < 4; i++) {
        EXPECT_EQ(c.hbm[i].bar_offset, (2ULL << 20) + i * (256ULL << 20));
        EXPECT_EQ(c.hbm[i].size, 256ULL << 20);
    }
    EXPECT_EQ(c.hbm[4].size, 0U);
    EXPECT_EQ(c.fw_state, RBLN_FW_STATE_RESET);
    EXPECT_EQ(c.fault_code, 0U);
    EXPECT_EQ(c.heartbeat, 0U);
    const auto uuid = uuid_from_serial("RBLNTEST-0001");
    EXPECT_EQ(std::memcmp(c.uuid, uuid.data(), 16), 0);
    EXPECT_EQ(c.uuid[6] >> 4, 8); // version nibble
}

TEST(ControlBlock, AtomHasOneChipletAndItsFamily) {
    FakeHost h(Family::atom);
    EXPECT_EQ(h.ctrl().family, RBLN_FW_FAMILY_ATOM);
    EXPECT_EQ(h.ctrl().chiplet_count, 1U);
    EXPECT_EQ(h.ctrl().hbm[1].size, 0U);
}

TEST(ControlBlock, UuidIsStablePerSerialAndDiffersBetweenSerials) {
    EXPECT_EQ(uuid_from_serial("A"), uuid_from_serial("A"));
    EXPECT_NE(uuid_from_serial("A"), uuid_from_serial("B"));
    EXPECT_EQ(default_serial().rfind("RBLNEMU-", 0), 0U);
}

TEST(Handshake, GoodConfigReachesReadyAcksHostGenAndPostsStateEvent) {
    FakeHost h;
    h.boot(8);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    EXPECT_EQ(h.ctrl().host_ack, h.ctrl().host_gen);
    EXPECT_EQ(h.ctrl().admin_sq_head, 0U);
    EXPECT_EQ(h.ctrl().fault_code, 0U);
    const auto evs = h.drain_events();
    ASSERT_EQ(evs.size(), 1U);
    EXPECT_EQ(evs[0].type, RBLN_FW_EV_STATE);
    EXPECT_EQ(evs[0].data[0], RBLN_FW_STATE_READY);
    EXPECT_EQ(evs[0].seq, 0U);
    EXPECT_EQ(evs[0].chiplet, kWholeCard);
    ASSERT_EQ(h.irqs.size(), 1U);
    EXPECT_EQ(h.irqs[0], unsigned{RBLN_FW_IRQ_EVENT});
}

TEST(Handshake, SmallestAndLargestRingsAreAccepted) {
    for (std::uint32_t entries : {4U, 4096U}) {
        FakeHost h;
        // 4096 entries x 64 bytes = 256 KiB per ring.
        h.configure(entries, 0x00000, 0x40000, 0x80000);
        h.host_ready();
        EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY) << entries;
    }
}

class HandshakeBadEntries : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(HandshakeBadEntries, RingEntriesNotPow2In4To4096FaultWithReason) {
    FakeHost h;
    h.configure(GetParam());
    h.host_ready();
    expect_fault(h, RBLN_FW_FAULT_BAD_RING_CONFIG, "ring_entries");
    EXPECT_TRUE(h.irqs.empty()); // no rings: nothing to report through
}

INSTANTIATE_TEST_SUITE_P(Entries, HandshakeBadEntries,
                         ::testing::Values(0U, 1U, 2U, 3U, 12U, 8192U, 0x80000000U));

struct BadRing {
    const char* name;
    std::uint64_t sq, cq, ev;
    const char* reason;
};

class HandshakeBadRing : public ::testing::TestWithParam<BadRing> {};

TEST_P(HandshakeBadRing, BadRingAddressFaultsWithReason) {
    const BadRing& p = GetParam();
    FakeHost h;
    h.configure(8, p.sq, p.cq, p.ev);
    h.host_ready();
    expect_fault(h, RBLN_FW_FAULT_BAD_RING_CONFIG, p.reason);
}

INSTANTIATE_TEST_SUITE_P(
    Rings, HandshakeBadRing,
    ::testing::Values(
        BadRing{"SqMisaligned", FakeHost::kSq + 8, FakeHost::kCq, FakeHost::kEv, "admin_sq_addr"},
        BadRing{"CqMisaligned", FakeHost::kSq, FakeHost::kCq + 32, FakeHost::kEv, "admin_cq_addr"},
        BadRing{"EvMisaligned", FakeHost::kSq, FakeHost::kCq, FakeHost::kEv + 1, "event_ring_addr"},
        BadRing{"SqOutsideRam", FakeHost::kRamSize, FakeHost::kCq, FakeHost::kEv, "admin_sq_addr"},
        BadRing{"CqEndsOutsideRam", FakeHost::kSq, FakeHost::kRamSize - 64 * 4, FakeHost::kEv,
                "admin_cq_addr"},
        BadRing{"EvFarAway", FakeHost::kSq, FakeHost::kCq, 0xffffffffffffffc0ULL,
                "event_ring_addr"},
        BadRing{"SqAndCqOverlap", FakeHost::kSq, FakeHost::kSq + 64, FakeHost::kEv, "overlap"},
        BadRing{"CqAndEvSame", FakeHost::kSq, FakeHost::kCq, FakeHost::kCq, "overlap"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Handshake, UnsupportedHostMajorFaultsWithBadIface) {
    FakeHost h;
    h.configure(8, FakeHost::kSq, FakeHost::kCq, FakeHost::kEv, 2);
    h.host_ready();
    expect_fault(h, RBLN_FW_FAULT_BAD_IFACE, "host interface 2." /* any minor */);
}

TEST(Handshake, UnknownHostCtrlBitsFaultWithBadIface) {
    FakeHost h;
    h.configure(8);
    h.ctrl().host_gen++;
    h.ctrl().host_ctrl = RBLN_FW_HOST_READY | 0x80U;
    h.card.doorbell(RBLN_FW_DB_CTRL);
    expect_fault(h, RBLN_FW_FAULT_BAD_IFACE, "host_ctrl");
}

TEST(Handshake, ResetClearsFaultAndReturnsToReset) {
    FakeHost h;
    h.configure(3);
    h.host_ready();
    ASSERT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_FAULT);
    h.host_reset();
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_RESET);
    EXPECT_EQ(h.ctrl().fault_code, 0U);
    EXPECT_EQ(h.ctrl().fault_reason[0], '\0');
    EXPECT_TRUE(h.card.fault_reason().empty());
    h.boot(8); // and a good handshake works afterwards
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
}

TEST(Handshake, HostReadyIsIgnoredInFaultUntilTheHostResets) {
    FakeHost h;
    h.configure(3);
    h.host_ready();
    h.configure(8); // fixed config, but no reset
    h.host_ready();
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_FAULT);
    EXPECT_TRUE(h.logged("must reset"));
}

TEST(Handshake, ResetStopsAdminServiceAndForgetsTheRings) {
    FakeHost h;
    h.boot(8);
    (void)h.drain_events();
    h.host_reset();
    EXPECT_FALSE(h.card.rings_configured());
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_RESET);
    // A request queued after the reset is never answered and never written.
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    EXPECT_FALSE(h.pop_cpl().has_value());
    EXPECT_EQ(h.card.stats().admin_requests, 0U);
    EXPECT_TRUE(h.drain_events().empty());
}

TEST(Handshake, RingConfigIsSnapshotAtHandshake) {
    FakeHost h;
    h.boot(8);
    (void)h.drain_events();
    // The host scribbles over the ring address after READY; the card keeps
    // using the rings it accepted.
    h.ctrl().admin_cq_addr = 0xdead0000;
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    h.ctrl().admin_cq_addr = FakeHost::kCq;
    EXPECT_TRUE(h.pop_cpl().has_value());
}

TEST(Handshake, NewHostGenerationWhileReadyRestartsTheRings) {
    FakeHost h;
    h.boot(8);
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    ASSERT_TRUE(h.pop_cpl().has_value());
    h.boot(4); // new generation, new rings, zeroed
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    EXPECT_EQ(h.ctrl().host_ack, h.ctrl().host_gen);
    EXPECT_EQ(h.ctrl().admin_sq_head, 0U);
    (void)h.submit(FakeHost::request(RBLN_FW_OP_HEARTBEAT));
    const auto cpl = h.pop_cpl(); // written at slot 0 with phase 1 again
    ASSERT_TRUE(cpl.has_value());
    EXPECT_EQ(cpl->sq_head, 1U);
}

TEST(Handshake, RepeatedControlDoorbellWithoutChangeIsHarmless) {
    FakeHost h;
    h.boot(8);
    const std::size_t irqs = h.irqs.size();
    h.card.doorbell(RBLN_FW_DB_CTRL);
    h.card.doorbell(RBLN_FW_DB_CTRL);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
    EXPECT_EQ(h.drain_events().size(), 1U); // still only the first STATE event
    EXPECT_EQ(h.irqs.size(), irqs);
}

TEST(Handshake, UnusedDoorbellVectorsAreIgnored) {
    FakeHost h;
    h.boot(8);
    h.card.doorbell(2);
    h.card.doorbell(3);
    h.card.doorbell(1000);
    EXPECT_EQ(h.ctrl().fw_state, RBLN_FW_STATE_READY);
}

TEST(Heartbeat, CountsOnlyWhileReady) {
    FakeHost h;
    h.card.tick();
    EXPECT_EQ(h.ctrl().heartbeat, 0U);
    h.boot(8);
    h.card.tick();
    h.card.tick();
    h.card.tick();
    EXPECT_EQ(h.ctrl().heartbeat, 3U);
    EXPECT_EQ(h.card.heartbeat(), 3U);
    h.host_reset();
    h.card.tick();
    EXPECT_EQ(h.ctrl().heartbeat, 3U);
}

TEST(Heartbeat, StopsInFault) {
    FakeHost h;
    h.boot(8);
    h.card.tick();
    h.card.inject_fw_fault(RBLN_FW_FAULT_INTERNAL, "x");
    h.card.tick();
    EXPECT_EQ(h.ctrl().heartbeat, 1U);
}
} // namespace card_handshake_test
