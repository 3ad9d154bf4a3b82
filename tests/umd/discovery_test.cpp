// SPDX-License-Identifier: GPL-2.0
// Discovery against fake sysfs trees.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <memory>

#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "rbln/discovery.hpp"

namespace rbln::test::discovery_test {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::MockFunction;

using OpenResult = Result<std::unique_ptr<KernelInterface>>;

// Nodes in a fake tree do not exist: discovery falls back to sysfs.
DiscoveryOptions sysfs_only(const FakeSysfs& fake) {
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& path) -> OpenResult {
        return Error::from_errno("open", path, ENOENT);
    };
    return o;
}

template <typename F> Error catch_error(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no rbln::Error was thrown";
    return Error(Errc::Internal, "", "", 0, "none");
}

TEST(Discovery, DriverNotLoadedIsATypedError) {
    FakeSysfs fake;
    const Error e = catch_error([&] { discover(sysfs_only(fake)); });
    EXPECT_EQ(e.code(), Errc::DriverNotLoaded);
    EXPECT_THAT(e.what(), HasSubstr("modprobe rbln"));
}

TEST(Discovery, DriverLoadedWithoutCardsGivesAnEmptyList) {
    FakeSysfs fake;
    fake.load_driver("0.1.0");
    const Discovery d = discover(sysfs_only(fake));
    EXPECT_TRUE(d.cards.empty());
    EXPECT_EQ(d.driver.version, "0.1.0");
}

TEST(Discovery, MissingModuleVersionReadsAsUnknown) {
    FakeSysfs fake;
    fake.load_driver("");
    EXPECT_EQ(discover(sysfs_only(fake)).driver.version, "unknown");
}

TEST(Discovery, ReadsIdentityChipletsAndHwmonFromSysfs) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.numa_node = 1;
    fake.add_card(spec);

    const Discovery d = discover(sysfs_only(fake));
    ASSERT_EQ(d.cards.size(), 1u);
    const CardInfo& c = d.cards[0];
    EXPECT_EQ(c.index, 0u);
    EXPECT_EQ(c.accel_name, "accel0");
    EXPECT_EQ(c.accel_node, "/dev/accel/accel0");
    EXPECT_EQ(c.pci_bdf, "0000:00:04.0");
    EXPECT_EQ(c.numa_node, 1);
    EXPECT_EQ(c.family, Family::Rebel100);
    EXPECT_EQ(c.family_name, "rebel100");
    EXPECT_EQ(c.chiplet_count, 4u);
    EXPECT_EQ(c.hbm_total_bytes, 1024ull << 20);
    ASSERT_EQ(c.chiplets.size(), 4u);
    EXPECT_EQ(c.chiplets[3].index, 3u);
    EXPECT_EQ(c.chiplets[3].hbm_total_bytes, 256ull << 20);
    EXPECT_EQ(c.chiplets[0].temperature_mc, 42000); // hwmon temp2_input
    EXPECT_EQ(c.chiplets[3].temperature_mc, 45000); // hwmon temp5_input
    ASSERT_TRUE(c.uuid.has_value());
    EXPECT_EQ((*c.uuid)[0], 0x00);
    EXPECT_EQ((*c.uuid)[1], 0x11);
    EXPECT_EQ((*c.uuid)[15], 0xff);
    EXPECT_EQ(c.fw_version, "rbln-emu 0.1.0");
    EXPECT_EQ(c.fw_iface_major, 1u);
    EXPECT_EQ(c.fw_iface_minor, 0u);
    EXPECT_EQ(c.serial, "RBLNEMU-0001");
    EXPECT_EQ(c.state, "ready");
    EXPECT_EQ(c.runtime_status, "active");
    EXPECT_FALSE(c.suspended);
    // hwmon is chosen by name: the "acpitz" one next to it reads 99000.
    EXPECT_EQ(c.temperature_mc, 45000);
    EXPECT_EQ(c.power_uw, 75000000u);
    EXPECT_TRUE(c.identity_from_sysfs);
    EXPECT_FALSE(c.identity_from_kernel);
    ASSERT_TRUE(c.node_error.has_value());
    EXPECT_EQ(c.node_error->code(), Errc::NotFound);
}

TEST(Discovery, HwmonReadFailureMeansUnavailableNotAnError) {
    FakeSysfs fake;
    fake.load_driver();
    const auto dev = fake.add_card(CardSpec{});
    // The kernel answers EIO when the card does not answer; a directory in
    // place of the file makes read() fail the same way (EISDIR).
    fake.remove(dev / "hwmon/hwmon1/temp1_input");
    fake.write(dev / "hwmon/hwmon1/temp1_input/x", "");
    const CardInfo c = discover(sysfs_only(fake)).cards.at(0);
    EXPECT_FALSE(c.temperature_mc.has_value());
    EXPECT_EQ(c.power_uw, 75000000u);
}

TEST(Discovery, KernelIdentityKeepsTheChipletTemperaturesOfHwmon) {
    FakeSysfs fake;
    fake.load_driver();
    fake.add_card(CardSpec{});
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& p) -> OpenResult {
        return std::unique_ptr<KernelInterface>(std::make_unique<FakeKernel>(p));
    };
    const CardInfo c = discover(o).cards.at(0);
    ASSERT_EQ(c.chiplets.size(), 4u);
    EXPECT_EQ(c.chiplets[1].temperature_mc, 43000);
    EXPECT_EQ(c.chiplets[1].hbm_total_bytes, 512ull << 20);
}

TEST(Discovery, CardsAreSortedByAccelMinorNotByName) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec a;
    a.minor = 10;
    a.bdf = "0000:00:05.0";
    a.serial = "TEN";
    fake.add_card(a);
    CardSpec b;
    b.minor = 2;
    b.bdf = "0000:00:06.0";
    b.serial = "TWO";
    fake.add_card(b);

    const Discovery d = discover(sysfs_only(fake));
    ASSERT_EQ(d.cards.size(), 2u);
    EXPECT_EQ(d.cards[0].accel_minor, 2u);
    EXPECT_EQ(d.cards[0].serial, "TWO");
    EXPECT_EQ(d.cards[0].index, 0u);
    EXPECT_EQ(d.cards[1].accel_minor, 10u);
    EXPECT_EQ(d.cards[1].serial, "TEN");
    EXPECT_EQ(d.cards[1].index, 1u);
}

TEST(Discovery, AccelNodeOfAnotherDriverIsIgnored) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec other;
    other.minor = 0;
    other.bdf = "0000:00:03.0";
    other.driver = "ivpu";
    fake.add_card(other);
    CardSpec ours;
    ours.minor = 1;
    fake.add_card(ours);

    const Discovery d = discover(sysfs_only(fake));
    ASSERT_EQ(d.cards.size(), 1u);
    EXPECT_EQ(d.cards[0].accel_name, "accel1");
    EXPECT_EQ(d.cards[0].index, 0u);
}

TEST(Discovery, OnlyForeignAccelNodesMeansNoDevice) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec other;
    other.driver = "amdxdna";
    fake.add_card(other);
    EXPECT_TRUE(discover(sysfs_only(fake)).cards.empty());
}

TEST(Discovery, SuspendedCardIsNotWokenNeitherHwmonNorNode) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.runtime_status = "suspended";
    const auto dev = fake.add_card(spec);
    // Reading these would throw Errc::BadValue: they must not be read.
    fake.write(dev / "hwmon/hwmon1/temp1_input", "not-a-number");
    fake.write(dev / "hwmon/hwmon1/power1_input", "not-a-number");

    MockFunction<OpenResult(const std::string&)> opener;
    EXPECT_CALL(opener, Call(_)).Times(0);
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = opener.AsStdFunction();

    const Discovery d = discover(o);
    ASSERT_EQ(d.cards.size(), 1u);
    const CardInfo& c = d.cards[0];
    EXPECT_TRUE(c.suspended);
    EXPECT_FALSE(c.temperature_mc.has_value());
    EXPECT_FALSE(c.power_uw.has_value());
    EXPECT_EQ(c.serial, "RBLNEMU-0001"); // sysfs identity is still shown
}

TEST(Discovery, ActiveCardIsOpenedAtItsDevPathUnderTheRoot) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.minor = 3;
    fake.add_card(spec);
    MockFunction<OpenResult(const std::string&)> opener;
    EXPECT_CALL(opener, Call((fake.root() / "dev/accel/accel3").string()))
        .WillOnce([](const std::string& p) -> OpenResult {
            return Error::from_errno("open", p, ENOENT);
        });
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = opener.AsStdFunction();
    EXPECT_EQ(discover(o).cards.size(), 1u);
}

TEST(Discovery, KernelIdentityFromGetInfoTakesPrecedenceOverSysfs) {
    FakeSysfs fake;
    fake.load_driver();
    fake.add_card(CardSpec{});
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& p) -> OpenResult {
        return std::unique_ptr<KernelInterface>(std::make_unique<FakeKernel>(p));
    };
    const Discovery d = discover(o);
    ASSERT_EQ(d.cards.size(), 1u);
    const CardInfo& c = d.cards[0];
    EXPECT_TRUE(c.identity_from_kernel);
    EXPECT_FALSE(c.node_error.has_value());
    EXPECT_EQ(c.serial, "RBLNEMU-KERNEL");
    EXPECT_EQ(c.fw_version, "rbln-emu 0.2.0");
    EXPECT_EQ(c.hbm_total_bytes, 2048ull << 20);
    ASSERT_EQ(c.chiplets.size(), 4u);
    EXPECT_EQ(c.chiplets[0].hbm_total_bytes, 512ull << 20);
    ASSERT_TRUE(c.uuid.has_value());
    EXPECT_EQ((*c.uuid)[15], 15);
    // hwmon was present, so no telemetry round trip was needed.
    EXPECT_EQ(c.temperature_mc, 45000);
}

TEST(Discovery, WithoutHwmonTelemetryComesFromGetInfo) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.hwmon = false;
    fake.add_card(spec);
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& p) -> OpenResult {
        return std::unique_ptr<KernelInterface>(std::make_unique<FakeKernel>(p));
    };
    const CardInfo c = discover(o).cards.at(0);
    EXPECT_EQ(c.temperature_mc, 51234);
    EXPECT_EQ(c.power_uw, 12345678u);
}

TEST(Discovery, FailedTelemetryQueryLeavesTelemetryUnavailable) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.hwmon = false;
    fake.add_card(spec);
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& p) -> OpenResult {
        auto k = std::make_unique<FakeKernel>(p);
        k->telemetry_errno = EIO;
        return std::unique_ptr<KernelInterface>(std::move(k));
    };
    const CardInfo c = discover(o).cards.at(0);
    EXPECT_TRUE(c.identity_from_kernel);
    EXPECT_FALSE(c.temperature_mc.has_value());
    EXPECT_FALSE(c.power_uw.has_value());
}

TEST(Discovery, PermissionDeniedOnNodeIsFineWhenSysfsHasTheIdentity) {
    FakeSysfs fake;
    fake.load_driver();
    fake.add_card(CardSpec{});
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& p) -> OpenResult {
        return Error::from_errno("open", p, EACCES);
    };
    const CardInfo c = discover(o).cards.at(0);
    EXPECT_TRUE(c.identity_from_sysfs);
    ASSERT_TRUE(c.node_error.has_value());
    EXPECT_EQ(c.node_error->code(), Errc::PermissionDenied);
}

TEST(Discovery, PermissionDeniedOnNodeIsFatalWhenSysfsLacksTheIdentity) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.rbln_attrs = false;
    fake.add_card(spec);
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string&) -> OpenResult {
        return Error::from_errno("open", "/dev/accel/accel0", EACCES);
    };
    const Error e = catch_error([&] { discover(o); });
    EXPECT_EQ(e.code(), Errc::PermissionDenied);
    EXPECT_EQ(e.sys_errno(), EACCES);
    EXPECT_STREQ(e.what(), "open /dev/accel/accel0: permission denied (EACCES): add the user "
                           "to group 'render' or run as root");
}

TEST(Discovery, SuspendedCardWithoutSysfsIdentityIsNotWokenToGetIt) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.rbln_attrs = false;
    spec.runtime_status = "suspended";
    fake.add_card(spec);
    MockFunction<OpenResult(const std::string&)> opener;
    EXPECT_CALL(opener, Call(_)).Times(0);
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = opener.AsStdFunction();
    const Error e = catch_error([&] { discover(o); });
    EXPECT_EQ(e.code(), Errc::NotFound);
    EXPECT_THAT(e.what(), HasSubstr("runtime-suspended"));
}

TEST(Discovery, NodeServedByAnotherDrmDriverIsRecorded) {
    FakeSysfs fake;
    fake.load_driver();
    fake.add_card(CardSpec{});
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& p) -> OpenResult {
        return Error(Errc::WrongDriver, "open", p, 0, "served by 'ivpu'");
    };
    const CardInfo c = discover(o).cards.at(0);
    ASSERT_TRUE(c.node_error.has_value());
    EXPECT_EQ(c.node_error->code(), Errc::WrongDriver);
    EXPECT_FALSE(c.identity_from_kernel);
}

struct Malformed {
    const char* file; // below the device directory
    const char* value;
    const char* message;
};

class MalformedAttribute : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedAttribute, GivesBadValueNamingTheFile) {
    FakeSysfs fake;
    fake.load_driver();
    const auto dev = fake.add_card(CardSpec{});
    fake.write(dev / GetParam().file, GetParam().value);
    const Error e = catch_error([&] { discover(sysfs_only(fake)); });
    EXPECT_EQ(e.code(), Errc::BadValue);
    EXPECT_EQ(e.path(), (fake.root() / "sys/class/accel/accel0/device" / GetParam().file).string());
    EXPECT_THAT(e.what(), HasSubstr(GetParam().file));
    EXPECT_THAT(e.what(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Discovery, MalformedAttribute,
    ::testing::Values(
        Malformed{"rbln/chiplet_count", "four", "expected an unsigned decimal integer, got 'four'"},
        Malformed{"rbln/chiplet_count", "0", "chiplet count 0 is outside 1..8"},
        Malformed{"rbln/chiplet_count", "9", "chiplet count 9 is outside 1..8"},
        Malformed{"rbln/hbm_total_bytes", "1024 MiB", "got '1024 MiB'"},
        Malformed{"rbln/hbm_total_bytes", "99999999999999999999999", "out of range"},
        Malformed{"rbln/chiplet2/hbm_total_bytes", "-1", "expected an unsigned"},
        Malformed{"rbln/chiplet1/index", "2", "says chiplet 2 in directory chiplet1"},
        Malformed{"rbln/fw_iface_version", "1", "expected MAJOR.MINOR"},
        Malformed{"rbln/fw_iface_version", "1.x", "got 'x'"},
        Malformed{"hwmon/hwmon1/temp1_input", "45.0", "expected a decimal integer, got '45.0'"},
        Malformed{"hwmon/hwmon1/power1_input", "", "got ''"},
        Malformed{"numa_node", "node0", "got 'node0'"},
        Malformed{"rbln/uuid", "00112233-4455-6677-8899-aabbccddeeZZ", "expected a UUID"},
        Malformed{"rbln/uuid", "0011223344556677", "expected a UUID"}),
    [](const ::testing::TestParamInfo<Malformed>& info) {
        std::string name = std::to_string(info.index) + "_" + info.param.file;
        for (char& c : name)
            if (std::isalnum(static_cast<unsigned char>(c)) == 0)
                c = '_';
        return name;
    });

TEST(Discovery, DeviceLinkThatIsNotPciGivesBadValue) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.bdf = "platform-npu";
    fake.add_card(spec);
    const Error e = catch_error([&] { discover(sysfs_only(fake)); });
    EXPECT_EQ(e.code(), Errc::BadValue);
    EXPECT_THAT(e.what(), HasSubstr("not a PCI device"));
}

TEST(Discovery, UnknownFamilyStringIsKeptVerbatim) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.family = "rebel200";
    fake.add_card(spec);
    const CardInfo c = discover(sysfs_only(fake)).cards.at(0);
    EXPECT_EQ(c.family, Family::Unknown);
    EXPECT_EQ(c.family_name, "rebel200");
}

TEST(Discovery, AtomFamilyIsRecognisedCaseInsensitively) {
    EXPECT_EQ(family_from_string("ATOM"), Family::Atom);
    EXPECT_EQ(family_from_string("Rebel100"), Family::Rebel100);
    EXPECT_EQ(family_from_string("rebel"), Family::Unknown);
    EXPECT_EQ(family_display_name(Family::Atom), "ATOM");
}

} // namespace
} // namespace rbln::test::discovery_test
