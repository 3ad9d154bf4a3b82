// SPDX-License-Identifier: GPL-2.0
// KernelInterface queries (size protocol, validation) and KernelDevice::open
// against nodes that are not rbln.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_kernel.hpp"
#include "rbln/kernel.hpp"

namespace rbln::test {
namespace {

using ::testing::HasSubstr;

template <typename F> Error catch_error(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no rbln::Error was thrown";
    return Error(Errc::Internal, "", "", 0, "none");
}

TEST(KernelQuery, DeviceIdentityIsDecoded) {
    FakeKernel k;
    k.device.pci_domain = 1;
    k.device.pci_bus = 0x3b;
    k.device.pci_dev = 0x1f;
    k.device.pci_func = 7;
    k.device.numa_node = 1;
    const DeviceIdentity id = query_device_identity(k);
    EXPECT_EQ(id.family, static_cast<std::uint32_t>(RBLN_FAMILY_REBEL100));
    EXPECT_EQ(id.chiplet_count, 4u);
    EXPECT_EQ(id.hbm_size[3], 512ull << 20);
    EXPECT_EQ(id.hbm_size[4], 0u);
    EXPECT_EQ(id.fw_version, "rbln-emu 0.2.0");
    EXPECT_EQ(id.serial, "RBLNEMU-KERNEL");
    EXPECT_EQ(id.numa_node, 1);
    EXPECT_EQ(id.pci_bdf(), "0001:3b:1f.7");
    EXPECT_EQ(id.answer_size, sizeof(drm_rbln_info_device));
    EXPECT_EQ(k.calls, 1);
}

TEST(KernelQuery, NewerKernelWithLongerAnswerIsAccepted) {
    FakeKernel k;
    k.device_size = sizeof(drm_rbln_info_device) + 64;
    const DeviceIdentity id = query_device_identity(k);
    EXPECT_EQ(id.answer_size, sizeof(drm_rbln_info_device) + 64);
    EXPECT_EQ(id.serial, "RBLNEMU-KERNEL");
}

TEST(KernelQuery, AnswerShorterThanUapiV1IsRefused) {
    FakeKernel k;
    k.device_size = 16;
    const Error e = catch_error([&] { query_device_identity(k); });
    EXPECT_EQ(e.code(), Errc::BadValue);
    EXPECT_THAT(e.what(), HasSubstr("answered 16 bytes"));
}

TEST(KernelQuery, UnterminatedSerialFromKernelIsRefused) {
    FakeKernel k;
    std::memset(k.device.serial, 'Z', sizeof(k.device.serial));
    const Error e = catch_error([&] { query_device_identity(k); });
    EXPECT_EQ(e.code(), Errc::BadValue);
    EXPECT_THAT(e.what(), HasSubstr("serial is not NUL-terminated"));
}

TEST(KernelQuery, ChipletCountOutsideOneToEightIsRefused) {
    FakeKernel k;
    k.device.chiplet_count = 0;
    EXPECT_EQ(catch_error([&] { query_device_identity(k); }).code(), Errc::BadValue);
    k.device.chiplet_count = 9;
    EXPECT_EQ(catch_error([&] { query_device_identity(k); }).code(), Errc::BadValue);
}

TEST(KernelQuery, TelemetryIsDecoded) {
    FakeKernel k;
    k.telemetry.chiplet[2].clock_mhz = 1500;
    const TelemetrySample t = query_telemetry(k);
    EXPECT_EQ(t.temp_mc, 51234);
    EXPECT_EQ(t.power_uw, 12345678u);
    EXPECT_EQ(t.chiplet_count, 4u);
    EXPECT_EQ(t.chiplet[2].clock_mhz, 1500u);
}

TEST(KernelQuery, TelemetryIoErrorPropagatesWithHint) {
    FakeKernel k;
    k.telemetry_errno = EIO;
    const Error e = catch_error([&] { query_telemetry(k); });
    EXPECT_EQ(e.code(), Errc::Io);
    EXPECT_THAT(e.what(), HasSubstr("the card did not answer"));
}

TEST(KernelDeviceOpen, MissingNodeIsNotFound) {
    auto r = KernelDevice::open("/nonexistent/dev/accel/accel99");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::NotFound);
    EXPECT_THAT(r.error().what(), HasSubstr("no such device node (ENOENT)"));
}

TEST(KernelDeviceOpen, NonDrmNodeIsRefused) {
    // /dev/null opens read-write but answers no DRM ioctl.
    auto r = KernelDevice::open("/dev/null");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::WrongDriver);
    EXPECT_THAT(r.error().what(), HasSubstr("DRM_IOCTL_VERSION /dev/null"));
}

TEST(KernelDeviceOpen, DefaultOpenerReturnsTheSameError) {
    auto r = open_kernel_device("/dev/null");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::WrongDriver);
}

} // namespace
} // namespace rbln::test
