// SPDX-License-Identifier: GPL-2.0
// The C ABI (rbln.h) against fake sysfs trees.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "fake_sysfs.hpp"
#include "rbln/rbln.h"
#include "testing.h"

extern "C" int rbln_test_count_from_c(const char* root, char* serial);

namespace rbln::test::c_api_test {
namespace {

using ::testing::HasSubstr;

class CApi : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(rbln_set_root(fake.root().c_str()), RBLN_OK); }
    void TearDown() override { rbln_set_root(nullptr); }
    FakeSysfs fake;
};

TEST_F(CApi, DriverNotLoadedReturnsStatusAndMessage) {
    int count = -1;
    EXPECT_EQ(rbln_device_count(&count), RBLN_ERR_DRIVER_NOT_LOADED);
    EXPECT_EQ(count, -1);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("not loaded"));
    EXPECT_STREQ(rbln_status_name(RBLN_ERR_DRIVER_NOT_LOADED), "driver-not-loaded");
}

TEST_F(CApi, CountsCardsAndFillsInfo) {
    fake.load_driver("0.1.0");
    CardSpec a;
    a.minor = 1;
    a.bdf = "0000:00:05.0";
    fake.add_card(a);
    CardSpec b;
    b.minor = 0;
    b.family = "atom";
    b.chiplets = 1;
    b.hbm_per_chiplet = 1ull << 30;
    b.runtime_status = "suspended";
    fake.add_card(b);

    int count = 0;
    ASSERT_EQ(rbln_device_count(&count), RBLN_OK) << rbln_last_error_message();
    EXPECT_EQ(count, 2);
    EXPECT_STREQ(rbln_last_error_message(), "");

    rbln_device_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(rbln_device_get_info(0, &info), RBLN_OK) << rbln_last_error_message();
    EXPECT_EQ(info.accel_minor, 0u);
    EXPECT_EQ(info.family, static_cast<std::uint32_t>(RBLN_DEVICE_FAMILY_ATOM));
    EXPECT_EQ(info.chiplet_count, 1u);
    EXPECT_EQ(info.hbm_total_bytes, 1ull << 30);
    EXPECT_TRUE(info.flags & RBLN_DEVICE_SUSPENDED);
    EXPECT_FALSE(info.flags & RBLN_DEVICE_HAS_TEMPERATURE);
    EXPECT_STREQ(info.accel_node, "/dev/accel/accel0");

    ASSERT_EQ(rbln_device_get_info(1, &info), RBLN_OK);
    EXPECT_EQ(info.index, 1u);
    EXPECT_STREQ(info.pci_bdf, "0000:00:05.0");
    EXPECT_STREQ(info.family_name, "rebel100");
    EXPECT_EQ(info.chiplet_hbm_bytes[3], 256ull << 20);
    EXPECT_TRUE(info.flags & RBLN_DEVICE_HAS_TEMPERATURE);
    EXPECT_EQ(info.temperature_mc, 45000);
    EXPECT_EQ(info.power_uw, 75000000u);
    EXPECT_STREQ(info.state, "ready");

    char version[16];
    ASSERT_EQ(rbln_driver_version(version, sizeof(version)), RBLN_OK);
    EXPECT_STREQ(version, "0.1.0");
    EXPECT_EQ(rbln_driver_version(version, 3), RBLN_ERR_INVALID_ARGUMENT);
}

TEST_F(CApi, IndexOutOfRangeIsNoDevice) {
    fake.load_driver();
    rbln_device_info info{};
    info.struct_size = sizeof(info);
    EXPECT_EQ(rbln_device_get_info(0, &info), RBLN_ERR_NO_DEVICE);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("no card 0 (0 cards present)"));
    EXPECT_EQ(rbln_device_get_info(-1, &info), RBLN_ERR_NO_DEVICE);
}

TEST_F(CApi, OldCallerWithShorterStructGetsOnlyItsPrefix) {
    fake.load_driver();
    fake.add_card(CardSpec{});
    // A caller that knows the struct up to chiplet_hbm_bytes only.
    const std::uint32_t old_size = offsetof(rbln_device_info, temperature_mc);
    rbln_device_info info;
    std::memset(&info, 0xee, sizeof(info));
    info.struct_size = old_size;
    ASSERT_EQ(rbln_device_get_info(0, &info), RBLN_OK);
    EXPECT_EQ(info.struct_size, old_size);
    EXPECT_EQ(info.chiplet_count, 4u);
    const auto* raw = reinterpret_cast<const unsigned char*>(&info);
    for (std::size_t i = old_size; i < sizeof(info); i++)
        ASSERT_EQ(raw[i], 0xee) << "byte " << i << " past the caller's struct was written";
}

TEST_F(CApi, BadArgumentsAreRefusedWithoutThrowing) {
    EXPECT_EQ(rbln_device_count(nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_device_get_info(0, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    rbln_device_info info{};
    info.struct_size = 4;
    EXPECT_EQ(rbln_device_get_info(0, &info), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("struct_size 4 is too small"));
    EXPECT_EQ(rbln_driver_version(nullptr, 0), RBLN_ERR_INVALID_ARGUMENT);
}

TEST_F(CApi, MalformedAttributeBecomesBadValueStatus) {
    fake.load_driver();
    const auto dev = fake.add_card(CardSpec{});
    fake.write(dev / "rbln/chiplet_count", "x");
    int count = 0;
    EXPECT_EQ(rbln_device_count(&count), RBLN_ERR_BAD_VALUE);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("chiplet_count"));
}

TEST_F(CApi, LastErrorMessageIsPerThread) {
    EXPECT_EQ(rbln_device_count(nullptr), RBLN_ERR_INVALID_ARGUMENT);
    std::string other = "unset";
    std::thread t([&] { other = rbln_last_error_message(); });
    t.join();
    EXPECT_EQ(other, "");
    EXPECT_STRNE(rbln_last_error_message(), "");
}

TEST(CApiFromC, HeaderIsValidCAndWorksFromC) {
    FakeSysfs fake;
    char serial[32] = {};
    EXPECT_EQ(rbln_test_count_from_c(fake.root().c_str(), serial), -RBLN_ERR_DRIVER_NOT_LOADED);
    fake.load_driver();
    CardSpec spec;
    spec.serial = "FROM-C";
    fake.add_card(spec);
    EXPECT_EQ(rbln_test_count_from_c(fake.root().c_str(), serial), 1);
    EXPECT_STREQ(serial, "FROM-C");
    rbln_set_root(nullptr);
}

TEST(CApiVersion, VersionAndStatusNames) {
    EXPECT_STREQ(rbln_version(), RBLN_EXPECTED_VERSION);
    EXPECT_STREQ(rbln_status_name(RBLN_OK), "ok");
    EXPECT_STREQ(rbln_status_name(static_cast<rbln_status>(99)), "unknown");
}

} // namespace
} // namespace rbln::test::c_api_test

namespace rbln::test::c_api_test {
namespace {

class CApiDevices : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver();
        for (unsigned i = 0; i < 4; i++) {
            CardSpec s;
            s.minor = i;
            s.bdf = "0000:00:0" + std::to_string(4 + i) + ".0";
            s.family = "atom";
            s.chiplets = 1;
            fake.add_card(s);
        }
        ASSERT_EQ(rbln_set_root(fake.root().c_str()), RBLN_OK);
    }
    void TearDown() override {
        unsetenv("RBLN_NPUS_PER_DEVICE"); // NOLINT(concurrency-mt-unsafe)
        rbln_set_root(nullptr);
    }
    FakeSysfs fake;
};

TEST_F(CApiDevices, CountsPlanFromTheEnvironmentUntilCommit) {
    int count = -1;
    ASSERT_EQ(rbln_logical_device_count(&count), RBLN_OK);
    EXPECT_EQ(count, 4);
    EXPECT_EQ(rbln_is_available(), 1);
    setenv("RBLN_NPUS_PER_DEVICE", "2", 1); // NOLINT(concurrency-mt-unsafe)
    ASSERT_EQ(rbln_logical_device_count(&count), RBLN_OK);
    EXPECT_EQ(count, 2);
    uint32_t npus[4] = {};
    size_t n = 0;
    ASSERT_EQ(rbln_logical_device_npus(1, npus, 4, &n), RBLN_OK);
    EXPECT_EQ(n, 2u);
    EXPECT_EQ(npus[0], 2u);
    EXPECT_EQ(npus[1], 3u);
    ASSERT_EQ(rbln_commit(), RBLN_OK) << rbln_last_error_message();
    setenv("RBLN_NPUS_PER_DEVICE", "4", 1); // NOLINT(concurrency-mt-unsafe)
    ASSERT_EQ(rbln_logical_device_count(&count), RBLN_OK);
    EXPECT_EQ(count, 2);
    ASSERT_EQ(rbln_physical_device_count(&count), RBLN_OK);
    EXPECT_EQ(count, 4);
    EXPECT_EQ(rbln_check_fork(), RBLN_OK);
}

TEST_F(CApiDevices, MalformedVariableIsBadConfigNamingIt) {
    setenv("RBLN_NPUS_PER_DEVICE", "3", 1); // NOLINT(concurrency-mt-unsafe)
    int count = -1;
    EXPECT_EQ(rbln_physical_device_count(&count), RBLN_ERR_BAD_CONFIG);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("RBLN_NPUS_PER_DEVICE: group size 3"));
    EXPECT_STREQ(rbln_status_name(RBLN_ERR_BAD_CONFIG), "bad-config");
    EXPECT_EQ(rbln_commit(), RBLN_ERR_BAD_CONFIG);
    EXPECT_EQ(rbln_is_available(), 0);
}

TEST_F(CApiDevices, SetAndGetDeviceAndParse) {
    int index = -1;
    ASSERT_EQ(rbln_set_device(3), RBLN_OK);
    ASSERT_EQ(rbln_get_device(&index), RBLN_OK);
    EXPECT_EQ(index, 3);
    EXPECT_EQ(rbln_set_device(4), RBLN_ERR_NO_DEVICE);
    EXPECT_EQ(rbln_set_device(-1), RBLN_ERR_NO_DEVICE);
    ASSERT_EQ(rbln_parse_device("rbln:2", &index), RBLN_OK);
    EXPECT_EQ(index, 2);
    ASSERT_EQ(rbln_parse_device("rbln", &index), RBLN_OK);
    EXPECT_EQ(index, -1);
    EXPECT_EQ(rbln_parse_device("cuda:0", &index), RBLN_ERR_INVALID_ARGUMENT);
    std::thread t([] {
        int other = -1;
        rbln_get_device(&other);
        EXPECT_EQ(other, 0);
    });
    t.join();
}

} // namespace
} // namespace rbln::test::c_api_test
