// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "options.h"

using namespace rbln::emu;

namespace options_test {

namespace {

Options parse(std::vector<std::string_view> args) {
    return parse_options(args);
}

std::string usage_error(std::vector<std::string_view> args) {
    try {
        (void)parse_options(args);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "<no error>";
}

} // namespace

TEST(SizeParse, AcceptsPlainAndBinarySuffixedSizes) {
    EXPECT_EQ(parse_size("0"), 0U);
    EXPECT_EQ(parse_size("4096"), 4096U);
    EXPECT_EQ(parse_size("64K"), 64U << 10);
    EXPECT_EQ(parse_size("64k"), 64U << 10);
    EXPECT_EQ(parse_size("256M"), 256ULL << 20);
    EXPECT_EQ(parse_size("2G"), 2ULL << 30);
    EXPECT_EQ(parse_size("3g"), 3ULL << 30);
    EXPECT_EQ(parse_size("1T"), 1ULL << 40);
}

TEST(SizeParse, RejectsJunkEmptyNegativeAndOverflow) {
    for (const char* bad : {"", "M", "-1", "+5", "1.5G", "12Q", "0x10", "1 M", "M1", "1MB",
                            "18446744073709551616", "17179869184G"})
        EXPECT_FALSE(parse_size(bad).has_value()) << bad;
    EXPECT_EQ(parse_size("16777215T"), 16777215ULL << 40);
}

TEST(NumberParse, StrictDecimalAndHex) {
    EXPECT_EQ(parse_u64("42"), 42U);
    EXPECT_EQ(parse_u64("0x2a"), 42U);
    EXPECT_FALSE(parse_u64("42x").has_value());
    EXPECT_FALSE(parse_u64("0x").has_value());
    EXPECT_FALSE(parse_u64("-1").has_value());
    EXPECT_EQ(parse_i64("-45000"), -45000);
    EXPECT_FALSE(parse_i64("9223372036854775808").has_value());
}

TEST(Options, DefaultsAndControlPathDerivedFromSocket) {
    const Options o = parse({"--socket", "/tmp/x.sock", "--guest-ram", "/dev/shm/r"});
    EXPECT_EQ(o.family, Family::rebel100);
    EXPECT_EQ(o.hbm_per_chiplet, 256ULL << 20);
    EXPECT_EQ(o.vectors, 4U);
    EXPECT_EQ(o.iface_minor, RBLN_FW_IFACE_MINOR);
    EXPECT_EQ(o.control_path, "/tmp/x.sock.ctl");
    EXPECT_EQ(o.log_level, LogLevel::info);
    EXPECT_FALSE(o.fault_no_response);
    EXPECT_FALSE(o.guest_ram_size.has_value());
    EXPECT_FALSE(o.guest_lowmem.has_value());
    EXPECT_TRUE(o.serial.empty());
    EXPECT_FALSE(o.dma_nt_threshold.has_value()); // measured at start-up
}

TEST(Options, EveryOptionParsesInBothForms) {
    const Options o = parse({"--family=atom", "--hbm-per-chiplet", "64M", "--socket=s", "--control",
                             "c", "--guest-ram=r", "--guest-ram-size", "2G", "--guest-lowmem=1G",
                             "--vectors", "8", "--serial=SN-1", "--log-level", "debug",
                             "--fault=no-response", "--dma-nt-threshold", "8M", "--iface-minor=2"});
    EXPECT_EQ(o.family, Family::atom);
    EXPECT_EQ(o.hbm_per_chiplet, 64ULL << 20);
    EXPECT_EQ(o.socket_path, "s");
    EXPECT_EQ(o.control_path, "c");
    EXPECT_EQ(o.guest_ram_path, "r");
    EXPECT_EQ(o.guest_ram_size, 2ULL << 30);
    EXPECT_EQ(o.guest_lowmem, 1ULL << 30);
    EXPECT_EQ(o.vectors, 8U);
    EXPECT_EQ(o.serial, "SN-1");
    EXPECT_EQ(o.log_level, LogLevel::debug);
    EXPECT_TRUE(o.fault_no_response);
    EXPECT_EQ(o.dma_nt_threshold, 8ULL << 20);
    EXPECT_EQ(o.iface_minor, 2);
    EXPECT_FALSE(parse({"--socket=s", "--guest-ram=r", "--dma-nt-threshold=auto"})
                     .dma_nt_threshold.has_value());
}

TEST(Options, HelpNeedsNothingElse) {
    EXPECT_TRUE(parse({"--help"}).help);
}

TEST(Options, BadValuesAreRejectedNamingTheOption) {
    const std::vector<std::string_view> base{"--socket", "s", "--guest-ram", "r"};
    struct Case {
        std::vector<std::string_view> extra;
        const char* option;
    };
    const std::vector<Case> cases{
        {{"--family", "gpu"}, "--family"},
        {{"--hbm-per-chiplet", "3M"}, "--hbm-per-chiplet"},
        {{"--hbm-per-chiplet", "0"}, "--hbm-per-chiplet"},
        {{"--hbm-per-chiplet", "lots"}, "--hbm-per-chiplet"},
        {{"--hbm-per-chiplet", "512G"}, "--hbm-per-chiplet"},
        {{"--vectors", "1"}, "--vectors"},
        {{"--vectors", "65"}, "--vectors"},
        {{"--vectors", "four"}, "--vectors"},
        {{"--iface-minor", "1"}, "--iface-minor"},
        {{"--iface-minor", "5"}, "--iface-minor"},
        {{"--iface-minor", "two"}, "--iface-minor"},
        {{"--guest-ram-size", "1000"}, "--guest-ram-size"},
        {{"--guest-lowmem", "5G"}, "--guest-lowmem"},
        {{"--guest-ram-size", "1G", "--guest-lowmem", "2G"}, "--guest-lowmem"},
        {{"--serial", "has space"}, "--serial"},
        {{"--serial", "0123456789abcdef0123456789abcdef"}, "--serial"},
        {{"--log-level", "loud"}, "--log-level"},
        {{"--fault", "explode"}, "--fault"},
        {{"--dma-nt-threshold", "0"}, "--dma-nt-threshold"},
        {{"--dma-nt-threshold", "fast"}, "--dma-nt-threshold"},
        {{"--frobnicate"}, "--frobnicate"},
        {{"--help=yes"}, "--help"},
        {{"--vectors"}, "--vectors"},
        {{"--control", "s"}, "--control"},
    };
    for (const Case& c : cases) {
        std::vector<std::string_view> args = base;
        args.insert(args.end(), c.extra.begin(), c.extra.end());
        const std::string msg = usage_error(args);
        EXPECT_EQ(msg.rfind(c.option, 0), 0U) << c.option << " -> " << msg;
    }
}

TEST(Options, SocketAndGuestRamAreRequired) {
    EXPECT_EQ(usage_error({"--guest-ram", "r"}), "--socket: required");
    EXPECT_EQ(usage_error({"--socket", "s"}), "--guest-ram: required");
}

TEST(CtlOptions, JoinsCommandWords) {
    const std::vector<std::string_view> args{"--control", "/x.ctl", "set", "chiplet=1",
                                             "temp_mc=5"};
    const CtlOptions o = parse_ctl_options(args);
    EXPECT_EQ(o.control_path, "/x.ctl");
    EXPECT_EQ(o.command, "set chiplet=1 temp_mc=5");
}

TEST(CtlOptions, RequiresControlAndCommand) {
    const std::vector<std::string_view> no_control{"status"};
    const std::vector<std::string_view> no_command{"--control=/x"};
    const std::vector<std::string_view> unknown{"--bogus", "status"};
    EXPECT_THROW(parse_ctl_options(no_control), UsageError);
    EXPECT_THROW(parse_ctl_options(no_command), UsageError);
    EXPECT_THROW(parse_ctl_options(unknown), UsageError);
}
} // namespace options_test
