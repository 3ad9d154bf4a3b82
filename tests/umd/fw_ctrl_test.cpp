// SPDX-License-Identifier: GPL-2.0
// The firmware-iface control-block validator.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel/fw_ctrl.hpp"
#include "rbln_fw_ctrl.h"

namespace rbln::test::fw_ctrl_test {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1ull << 20;

// A block as rbln-emu presents a 4-chiplet card with 256 MiB per chiplet.
rbln_fw_ctrl good_block() {
    rbln_fw_ctrl c{};
    c.magic = RBLN_FW_MAGIC;
    c.iface_major = RBLN_FW_IFACE_MAJOR;
    c.iface_minor = RBLN_FW_IFACE_MINOR;
    c.ctrl_size = sizeof(rbln_fw_ctrl);
    c.family = RBLN_FW_FAMILY_REBEL100;
    c.chiplet_count = 4;
    c.doorbell_peer_id = 7;
    c.num_vectors = 4;
    for (unsigned i = 0; i < 16; i++)
        c.uuid[i] = static_cast<__u8>(0xa0 + i);
    std::strcpy(c.serial, "RBLNEMU-0001");
    std::strcpy(c.fw_version, "rbln-emu 0.1.0");
    c.bar_size = 2048 * kMiB;
    for (unsigned i = 0; i < 4; i++) {
        c.hbm[i].bar_offset = RBLN_FW_CTRL_REGION_SIZE + i * 256 * kMiB;
        c.hbm[i].size = 256 * kMiB;
    }
    c.fw_state = RBLN_FW_STATE_READY;
    c.heartbeat = 42;
    return c;
}

std::vector<std::byte> bytes_of(const rbln_fw_ctrl& c) {
    std::vector<std::byte> b(sizeof(c));
    std::memcpy(b.data(), &c, sizeof(c));
    return b;
}

std::string failure(const rbln_fw_ctrl& c) {
    auto r = fw::parse_control_block(bytes_of(c), "card0");
    if (r.ok())
        return "accepted";
    EXPECT_EQ(r.error().code(), Errc::BadControlBlock);
    return r.error().what();
}

TEST(ControlBlock, GoodBlockIsDecoded) {
    auto r = fw::parse_control_block(bytes_of(good_block()));
    ASSERT_TRUE(r.ok()) << r.error().what();
    EXPECT_EQ(r->iface_major, 1);
    EXPECT_EQ(r->family, static_cast<std::uint32_t>(RBLN_FW_FAMILY_REBEL100));
    EXPECT_EQ(r->chiplet_count, 4u);
    EXPECT_EQ(r->doorbell_peer_id, 7u);
    EXPECT_EQ(r->serial, "RBLNEMU-0001");
    EXPECT_EQ(r->fw_version, "rbln-emu 0.1.0");
    EXPECT_EQ(r->uuid[1], 0xa1);
    ASSERT_EQ(r->hbm.size(), 4u);
    EXPECT_EQ(r->hbm[3].bar_offset, RBLN_FW_CTRL_REGION_SIZE + 768 * kMiB);
    EXPECT_EQ(r->fw_state, static_cast<std::uint32_t>(RBLN_FW_STATE_READY));
    EXPECT_EQ(r->heartbeat, 42u);
    EXPECT_EQ(fw::fw_state_name(r->fw_state), "ready");
}

TEST(ControlBlock, ErrorNamesTheSource) {
    auto c = good_block();
    c.magic = 0;
    EXPECT_THAT(failure(c), HasSubstr("parse card0: bad magic"));
}

TEST(ControlBlock, BadMagicIsRefused) {
    auto c = good_block();
    c.magic = 0x12345678;
    EXPECT_THAT(failure(c), HasSubstr("bad magic 0x12345678 (expected 0x4e4c4252"));
}

TEST(ControlBlock, UnknownMajorIsRefused) {
    auto c = good_block();
    c.iface_major = 2;
    EXPECT_THAT(failure(c), HasSubstr("major version 2 is not supported"));
    c.iface_major = 0;
    EXPECT_THAT(failure(c), HasSubstr("major version 0 is not supported"));
}

TEST(ControlBlock, NewerMinorIsAccepted) {
    auto c = good_block();
    c.iface_minor = 7;
    auto r = fw::parse_control_block(bytes_of(c));
    ASSERT_TRUE(r.ok()) << r.error().what();
    EXPECT_EQ(r->iface_minor, 7);
}

TEST(ControlBlock, ChipletCountZeroIsRefused) {
    auto c = good_block();
    c.chiplet_count = 0;
    EXPECT_THAT(failure(c), HasSubstr("chiplet_count 0 is outside 1..8"));
}

TEST(ControlBlock, ChipletCountNineIsRefused) {
    auto c = good_block();
    c.chiplet_count = 9;
    EXPECT_THAT(failure(c), HasSubstr("chiplet_count 9 is outside 1..8"));
}

TEST(ControlBlock, EightChipletsAreAccepted) {
    auto c = good_block();
    c.chiplet_count = 8;
    for (unsigned i = 0; i < 8; i++) {
        c.hbm[i].bar_offset = RBLN_FW_CTRL_REGION_SIZE + i * 128 * kMiB;
        c.hbm[i].size = 128 * kMiB;
    }
    EXPECT_EQ(failure(c), "accepted");
}

TEST(ControlBlock, HbmRegionEndingPastTheBarIsRefused) {
    auto c = good_block();
    c.bar_size = 1024 * kMiB; // hbm[3] spans 770..1026 MiB
    EXPECT_THAT(failure(c), HasSubstr("hbm[3]"));
    EXPECT_THAT(failure(c), HasSubstr("lies outside the BAR"));
}

TEST(ControlBlock, HbmRegionWhoseEndOverflowsIsRefused) {
    auto c = good_block();
    c.hbm[1].size = 0xffffffffffe00000ull; // aligned; offset + size wraps around
    EXPECT_THAT(failure(c), HasSubstr("hbm[1]"));
    EXPECT_THAT(failure(c), HasSubstr("outside the BAR"));
}

TEST(ControlBlock, HbmRegionInsideTheControlRegionIsRefused) {
    auto c = good_block();
    c.hbm[0].bar_offset = 0;
    EXPECT_THAT(failure(c), HasSubstr("hbm[0] at 0x0 overlaps the control region"));
}

TEST(ControlBlock, OverlappingHbmRegionsAreRefused) {
    auto c = good_block();
    c.hbm[2].bar_offset = c.hbm[1].bar_offset + 128 * kMiB;
    EXPECT_THAT(failure(c), HasSubstr("hbm[2] overlaps hbm[1]"));
}

TEST(ControlBlock, UnalignedOrEmptyHbmRegionIsRefused) {
    auto c = good_block();
    c.hbm[1].size = 0;
    EXPECT_THAT(failure(c), HasSubstr("hbm[1]"));
    c = good_block();
    c.hbm[1].bar_offset += 4096;
    EXPECT_THAT(failure(c), HasSubstr("not 2 MiB aligned"));
}

TEST(ControlBlock, RegionsPastChipletCountAreIgnored) {
    auto c = good_block();
    c.chiplet_count = 1;
    c.family = RBLN_FW_FAMILY_ATOM;
    c.hbm[5].bar_offset = 1; // garbage in an unused slot
    EXPECT_EQ(failure(c), "accepted");
}

TEST(ControlBlock, BarSizeNotAPowerOfTwoIsRefused) {
    auto c = good_block();
    c.bar_size = 1536 * kMiB;
    EXPECT_THAT(failure(c), HasSubstr("not a power of two"));
}

TEST(ControlBlock, UnterminatedSerialIsRefused) {
    auto c = good_block();
    std::memset(c.serial, 'A', sizeof(c.serial));
    EXPECT_THAT(failure(c), HasSubstr("serial is not NUL-terminated"));
}

TEST(ControlBlock, UnterminatedFwVersionIsRefused) {
    auto c = good_block();
    std::memset(c.fw_version, 'v', sizeof(c.fw_version));
    EXPECT_THAT(failure(c), HasSubstr("fw_version is not NUL-terminated"));
}

TEST(ControlBlock, UnterminatedFaultReasonIsRefused) {
    auto c = good_block();
    std::memset(c.fault_reason, 'x', sizeof(c.fault_reason));
    EXPECT_THAT(failure(c), HasSubstr("fault_reason is not NUL-terminated"));
}

TEST(ControlBlock, FullLengthStringWithTerminatorIsAccepted) {
    auto c = good_block();
    std::memset(c.serial, 'S', sizeof(c.serial) - 1);
    c.serial[sizeof(c.serial) - 1] = '\0';
    auto r = fw::parse_control_block(bytes_of(c));
    ASSERT_TRUE(r.ok()) << r.error().what();
    EXPECT_EQ(r->serial.size(), sizeof(c.serial) - 1);
}

TEST(ControlBlock, ShortBufferIsRefused) {
    auto b = bytes_of(good_block());
    b.resize(100);
    auto r = fw::parse_control_block(b);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().what(), HasSubstr("100 bytes, but a control block has 4096"));
}

TEST(ControlBlock, SmallCtrlSizeIsRefused) {
    auto c = good_block();
    c.ctrl_size = 0x100;
    EXPECT_THAT(failure(c), HasSubstr("ctrl_size 256 is smaller"));
}

TEST(ControlBlock, UnknownFamilyIsRefused) {
    auto c = good_block();
    c.family = 3;
    EXPECT_THAT(failure(c), HasSubstr("unknown family 3"));
}

TEST(ControlBlock, TooFewVectorsAreRefused) {
    auto c = good_block();
    c.num_vectors = 1;
    EXPECT_THAT(failure(c), HasSubstr("num_vectors 1"));
}

TEST(ControlBlock, FieldsAreReadLittleEndian) {
    auto b = bytes_of(good_block());
    // heartbeat at 0x148: write 0x0102 byte by byte.
    for (int i = 0; i < 8; i++)
        b[0x148 + i] = std::byte{0};
    b[0x148] = std::byte{0x02};
    b[0x149] = std::byte{0x01};
    auto r = fw::parse_control_block(b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->heartbeat, 0x0102u);
}

TEST(ControlBlock, StateAndFaultNames) {
    EXPECT_EQ(fw::fw_state_name(RBLN_FW_STATE_FAULT), "fault");
    EXPECT_EQ(fw::fw_state_name(9), "unknown(9)");
    EXPECT_EQ(fw::fault_code_name(RBLN_FW_FAULT_THERMAL), "thermal");
    EXPECT_EQ(fw::fault_code_name(77), "unknown(77)");
}

} // namespace
} // namespace rbln::test::fw_ctrl_test
