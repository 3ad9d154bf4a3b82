// SPDX-License-Identifier: GPL-2.0
// rbln::Error messages, Result, and the Sysfs reader.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_sysfs.hpp"
#include "kernel/sysfs.hpp"
#include "rbln/error.hpp"

namespace rbln::test::error_test {
namespace {

using ::testing::HasSubstr;

TEST(Error, PermissionDeniedOnAccelNodeSaysWhatToDo) {
    const Error e = Error::from_errno("open", "/dev/accel/accel0", EACCES);
    EXPECT_EQ(e.code(), Errc::PermissionDenied);
    EXPECT_EQ(e.sys_errno(), EACCES);
    EXPECT_EQ(e.operation(), "open");
    EXPECT_EQ(e.path(), "/dev/accel/accel0");
    EXPECT_STREQ(e.what(), "open /dev/accel/accel0: permission denied (EACCES): add the user to "
                           "group 'render' or run as root");
}

TEST(Error, ErrnoMapsToCodes) {
    EXPECT_EQ(errc_from_errno(EPERM), Errc::PermissionDenied);
    EXPECT_EQ(errc_from_errno(ENOENT), Errc::NotFound);
    EXPECT_EQ(errc_from_errno(ENODEV), Errc::DeviceGone);
    EXPECT_EQ(errc_from_errno(ENOTTY), Errc::WrongDriver);
    EXPECT_EQ(errc_from_errno(EIO), Errc::Io);
}

TEST(Error, DeviceGoneSaysItWasRemoved) {
    const Error e = Error::from_errno("ioctl GET_INFO(type 1)", "/dev/accel/accel1", ENODEV);
    EXPECT_EQ(e.code(), Errc::DeviceGone);
    EXPECT_THAT(e.what(), HasSubstr("removed or its driver was unbound"));
}

TEST(Error, EinvalFromIoctlBlamesAUapiMismatch) {
    const Error e = Error::from_errno("ioctl GET_INFO(type 1)", "/dev/accel/accel0", EINVAL);
    EXPECT_THAT(e.what(), HasSubstr("disagree on the uAPI"));
}

TEST(Error, CodeNamesAreStable) {
    EXPECT_EQ(errc_name(Errc::PermissionDenied), "permission-denied");
    EXPECT_EQ(errc_name(Errc::DriverNotLoaded), "driver-not-loaded");
    EXPECT_EQ(errc_name(Errc::BadControlBlock), "bad-control-block");
}

TEST(Result, ValueOfAnErrorThrowsIt) {
    Result<int> r = Error(Errc::Io, "op", "p", 0, "broken");
    EXPECT_FALSE(r.ok());
    EXPECT_THROW(r.value(), Error);
    Result<int> good = 5;
    EXPECT_TRUE(good.ok());
    EXPECT_EQ(*good, 5);
}

TEST(Sysfs, ReadStripsTheTrailingNewline) {
    FakeSysfs fake;
    fake.write("sys/x", "hello");
    const Sysfs s(fake.root());
    EXPECT_EQ(s.read("/sys/x"), "hello");
    EXPECT_EQ(s.read_u64_optional("/sys/none"), std::nullopt);
}

TEST(Sysfs, AllReadsStayBelowTheRoot) {
    FakeSysfs fake;
    const Sysfs s(fake.root());
    EXPECT_EQ(s.resolve("/sys/module/rbln"), fake.root() / "sys/module/rbln");
    EXPECT_FALSE(s.exists("/proc/self")); // exists on the host, not in the tree
}

TEST(Sysfs, NumbersMustBeWholeDecimalValues) {
    EXPECT_EQ(Sysfs::parse_u64("18446744073709551615", "f"), 18446744073709551615ull);
    EXPECT_EQ(Sysfs::parse_i64("-5", "f"), -5);
    EXPECT_THROW(Sysfs::parse_u64("18446744073709551616", "f"), Error);
    EXPECT_THROW(Sysfs::parse_u64("0x10", "f"), Error);
    EXPECT_THROW(Sysfs::parse_u64(" 1", "f"), Error);
    EXPECT_THROW(Sysfs::parse_u64("1 ", "f"), Error);
    EXPECT_THROW(Sysfs::parse_i64("", "f"), Error);
}

TEST(Sysfs, ListIsSortedAndFiltered) {
    FakeSysfs fake;
    fake.write("d/b1", "");
    fake.write("d/a2", "");
    fake.write("d/b0", "");
    const Sysfs s(fake.root());
    EXPECT_EQ(s.list("/d", "b"), (std::vector<std::string>{"b0", "b1"}));
    EXPECT_TRUE(s.list("/absent").empty());
}

TEST(Sysfs, ReadingADirectoryIsAnIoError) {
    FakeSysfs fake;
    fake.write("d/f", "x");
    const Sysfs s(fake.root());
    auto r = s.try_read("/d");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::Io);
    EXPECT_THAT(r.error().what(), HasSubstr("EISDIR"));
}

} // namespace
} // namespace rbln::test::error_test
