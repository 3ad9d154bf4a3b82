// SPDX-License-Identifier: GPL-2.0
// CommandEncoder: packets as firmware-iface lays them out, and the checks.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "exec/command.hpp"
#include "rbln/error.hpp"
#include "rbln_fw_cmd.h"

namespace rbln::test::command_test {
namespace {

using ::testing::HasSubstr;

struct alignas(8) Buffer {
    std::array<std::byte, 512> bytes{};
    std::span<std::byte> span() { return bytes; }
};

template <typename T> T packet_at(const Buffer& b, std::size_t off) {
    T p{};
    std::memcpy(&p, b.bytes.data() + off, sizeof(p));
    return p;
}

TEST(CommandEncoder, WritesPacketsBackToBackInTheFirmwareLayout) {
    Buffer b;
    CommandEncoder e(b.span());
    e.copy(0x1000, 0x2000, 77);
    e.fill(0x3000, 64, 0xabcd, 2);
    e.signal(0x4000, 9, true);
    e.wait(0x4000, 9, 500);
    e.timestamp(0x5008);
    ASSERT_EQ(e.size(), PacketSize::copy + PacketSize::fill + PacketSize::signal +
                            PacketSize::wait + PacketSize::timestamp);

    const auto c = packet_at<rbln_fw_pkt_copy>(b, 0);
    EXPECT_EQ(RBLN_FW_PKT_OP(c.hdr), RBLN_FW_PKT_COPY);
    EXPECT_EQ(RBLN_FW_PKT_BYTES(c.hdr), sizeof(c));
    EXPECT_EQ(c.src, 0x1000u);
    EXPECT_EQ(c.dst, 0x2000u);
    EXPECT_EQ(c.size, 77u);
    const auto f = packet_at<rbln_fw_pkt_fill>(b, 32);
    EXPECT_EQ(RBLN_FW_PKT_OP(f.hdr), RBLN_FW_PKT_FILL);
    EXPECT_EQ(f.pattern_bytes, 2u);
    EXPECT_EQ(f.pattern, 0xabcdu);
    const auto s = packet_at<rbln_fw_pkt_signal>(b, 64);
    EXPECT_EQ(RBLN_FW_PKT_FLAGS(s.hdr), RBLN_FW_SIGNAL_IRQ);
    EXPECT_EQ(s.value, 9u);
    const auto w = packet_at<rbln_fw_pkt_wait>(b, 88);
    EXPECT_EQ(RBLN_FW_PKT_OP(w.hdr), RBLN_FW_PKT_WAIT);
    EXPECT_EQ(w.timeout_ns, 500u);
    const auto t = packet_at<rbln_fw_pkt_timestamp>(b, 120);
    EXPECT_EQ(RBLN_FW_PKT_OP(t.hdr), RBLN_FW_PKT_TIMESTAMP);
    EXPECT_EQ(t.va, 0x5008u);
}

TEST(CommandEncoder, StridedCopyAndLaunchCarryTheirFields) {
    Buffer b;
    CommandEncoder e(b.span());
    StridedCopy sc;
    sc.src = 0x100;
    sc.dst = 0x200;
    sc.width = 16;
    sc.height = 3;
    sc.src_pitch = 32;
    sc.dst_pitch = 16;
    e.copy_strided(sc);
    KernelLaunch l;
    l.kernel = RBLN_FW_KERNEL_SCALE;
    l.dtype_in = l.dtype_out = RBLN_FW_DT_FP32;
    l.scale = 2.0F;
    l.a = 0x1000;
    l.b = 0x9999; // unused by SCALE: must reach the card as 0
    l.out = 0x2000;
    l.shape[0] = 8;
    l.stride_a[0] = l.stride_out[0] = 1;
    e.launch(l);
    const auto c = packet_at<rbln_fw_pkt_copy_strided>(b, 0);
    EXPECT_EQ(c.height, 3u);
    EXPECT_EQ(c.depth, 1u);
    EXPECT_EQ(c.src_pitch, 32u);
    const auto p = packet_at<rbln_fw_pkt_launch>(b, PacketSize::copy_strided);
    EXPECT_EQ(RBLN_FW_PKT_BYTES(p.hdr), sizeof(p));
    EXPECT_EQ(p.scale, 0x40000000u);
    EXPECT_EQ(p.b, 0u);
    EXPECT_EQ(p.stride_b[0], 0);
}

TEST(CommandEncoder, APacketThatDoesNotFitIsNotWrittenAndThrows) {
    Buffer b;
    CommandEncoder e(std::span<std::byte>(b.bytes).first(40));
    e.copy(1, 2, 3);
    EXPECT_FALSE(e.fits(PacketSize::copy));
    try {
        e.copy(1, 2, 3);
        FAIL() << "no error";
    } catch (const Error& err) {
        EXPECT_EQ(err.code(), Errc::InvalidArgument);
        EXPECT_THAT(err.what(), HasSubstr("does not fit"));
    }
    EXPECT_EQ(e.size(), PacketSize::copy);
    e.nop(8);
    EXPECT_EQ(e.remaining(), 0u);
}

TEST(CommandEncoder, RefusesWhatTheCardWouldRefuse) {
    Buffer b;
    CommandEncoder e(b.span());
    auto code_of = [](auto&& f) {
        try {
            f();
        } catch (const Error& err) {
            return err.code();
        }
        return Errc::Internal;
    };
    EXPECT_EQ(code_of([&] { e.fill(0, 8, 0, 3); }), Errc::InvalidArgument);
    EXPECT_EQ(code_of([&] { e.fill(0, 6, 0, 4); }), Errc::InvalidArgument);
    EXPECT_EQ(code_of([&] { e.signal(4, 1); }), Errc::InvalidArgument);
    EXPECT_EQ(code_of([&] { e.wait(12, 1); }), Errc::InvalidArgument);
    EXPECT_EQ(code_of([&] { e.timestamp(1); }), Errc::InvalidArgument);
    EXPECT_EQ(code_of([&] { e.nop(12); }), Errc::InvalidArgument);
    StridedCopy flat;
    flat.height = 0;
    EXPECT_EQ(code_of([&] { e.copy_strided(flat); }), Errc::InvalidArgument);
    KernelLaunch l;
    l.kernel = 99;
    l.dtype_in = l.dtype_out = RBLN_FW_DT_FP32;
    EXPECT_EQ(code_of([&] { e.launch(l); }), Errc::InvalidArgument);
    l.kernel = RBLN_FW_KERNEL_ADD;
    l.dtype_out = RBLN_FW_DT_FP16;
    EXPECT_EQ(code_of([&] { e.launch(l); }), Errc::InvalidArgument);
    EXPECT_TRUE(e.empty()) << "a refused packet wrote nothing";
    alignas(8) std::array<std::byte, 24> odd{};
    EXPECT_EQ(code_of([&] { CommandEncoder bad(std::span<std::byte>(odd).subspan(4)); }),
              Errc::InvalidArgument);
}

} // namespace
} // namespace rbln::test::command_test
