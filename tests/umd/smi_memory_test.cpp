// SPDX-License-Identifier: GPL-2.0
// rbln-smi's memory figures end to end in-process: per-chiplet HBM from a
// fake sysfs, and the Processes section from a fake /proc whose fds the
// fake's probe classifies.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "cli.hpp"
#include "fake_sysfs.hpp"
#include "kernel/kernel.hpp"
#include "rbln/discovery.hpp"

namespace rbln::test::smi_memory_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = 1ull << 20;

using OpenResult = Result<std::unique_ptr<KernelInterface>>;

DiscoveryOptions sysfs_only(const FakeSysfs& fake) {
    DiscoveryOptions o;
    o.root = fake.root();
    o.opener = [](const std::string& path) -> OpenResult {
        return Error::from_errno("open", path, ENOENT);
    };
    return o;
}

// ---- discovery of the chiplets' memory

TEST(ChipletMemory, UsedAndLargestFreeAreReadPerChipletAndUsedIsSummed) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.hbm_used = std::vector<std::uint64_t>{2 * kMiB, 0, 4096, 256 * kMiB};
    fake.add_card(spec);
    const CardInfo c = discover(sysfs_only(fake)).cards.at(0);
    ASSERT_EQ(c.chiplets.size(), 4u);
    EXPECT_EQ(c.chiplets[0].hbm_used_bytes, 2 * kMiB);
    EXPECT_EQ(c.chiplets[0].hbm_largest_free_bytes, 254 * kMiB);
    EXPECT_EQ(c.chiplets[2].hbm_used_bytes, 4096u);
    EXPECT_EQ(c.chiplets[3].hbm_largest_free_bytes, 0u);
    EXPECT_EQ(c.hbm_used_bytes, 258 * kMiB + 4096);
}

TEST(ChipletMemory, OlderModuleWithoutTheFilesGivesUnavailableNotAnError) {
    FakeSysfs fake;
    fake.load_driver();
    fake.add_card(CardSpec{}); // no hbm_used
    const CardInfo c = discover(sysfs_only(fake)).cards.at(0);
    for (const auto& ch : c.chiplets) {
        EXPECT_EQ(ch.hbm_used_bytes, std::nullopt);
        EXPECT_EQ(ch.hbm_largest_free_bytes, std::nullopt);
    }
    EXPECT_EQ(c.hbm_used_bytes, std::nullopt);
}

TEST(ChipletMemory, CardTotalIsUnknownIfOneChipletIsUnknown) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.hbm_used = std::vector<std::uint64_t>{kMiB, kMiB, kMiB}; // chiplet 3 has none
    fake.add_card(spec);
    const CardInfo c = discover(sysfs_only(fake)).cards.at(0);
    EXPECT_EQ(c.chiplets[2].hbm_used_bytes, kMiB);
    EXPECT_EQ(c.chiplets[3].hbm_used_bytes, std::nullopt);
    EXPECT_EQ(c.hbm_used_bytes, std::nullopt);
}

TEST(ChipletMemory, MalformedValueIsAnErrorNamingTheFile) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.hbm_used = std::vector<std::uint64_t>{0, 0, 0, 0};
    const auto dev = fake.add_card(spec);
    fake.write(dev / "rbln/chiplet1/hbm_used_bytes", "2 MiB");
    try {
        discover(sysfs_only(fake));
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::BadValue);
        EXPECT_THAT(e.what(), HasSubstr("rbln/chiplet1/hbm_used_bytes"));
    }
}

TEST(ChipletMemory, SuspendedCardStillShowsTheDriversCounters) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec spec;
    spec.runtime_status = "suspended";
    spec.hbm_used = std::vector<std::uint64_t>{kMiB, 0, 0, 0};
    fake.add_card(spec);
    const CardInfo c = discover(sysfs_only(fake)).cards.at(0);
    EXPECT_TRUE(c.suspended);
    EXPECT_EQ(c.hbm_used_bytes, kMiB);
}

// ---- rbln-smi with a fake sysfs and a fake /proc

class SmiProcesses : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        CardSpec a;
        a.hbm_used = std::vector<std::uint64_t>{2 * kMiB, 0, 0, 0};
        fake.add_card(a);
        CardSpec b;
        b.minor = 1;
        b.bdf = "0000:00:05.0";
        b.family = "atom";
        b.chiplets = 1;
        b.hbm_per_chiplet = 512 * kMiB;
        b.hbm_used = std::vector<std::uint64_t>{64 * kMiB};
        fake.add_card(b);
        fake.add_process(1, "init");
    }
    int smi(std::initializer_list<std::string_view> extra) {
        const std::string root = fake.root().string();
        std::vector<std::string_view> args = {"--root", root};
        args.insert(args.end(), extra);
        smi::Environment env;
        env.char_device_probe = fake.probe();
        std::ostringstream o;
        std::ostringstream e;
        const int rc = smi::run(args, o, e, env);
        out = o.str();
        err = e.str();
        return rc;
    }
    FakeSysfs fake;
    std::string out;
    std::string err;
};

TEST_F(SmiProcesses, TableShowsChipletMemoryAndNoProcesses) {
    ASSERT_EQ(smi({}), 0) << err;
    EXPECT_THAT(out, HasSubstr("|     2 / 1024 MiB |"));
    EXPECT_THAT(out, HasSubstr("|     64 / 512 MiB |"));
    EXPECT_THAT(out, HasSubstr("| chiplet 0: HBM 2 / 256 MiB, largest free 254 MiB, util N/A, "
                               "42.0 C "));
    EXPECT_THAT(out, HasSubstr("| chiplet 0: HBM 64 / 512 MiB, largest free 448 MiB, util N/A, "
                               "42.0 C "));
    EXPECT_THAT(out, HasSubstr("| Processes "));
    EXPECT_THAT(out, HasSubstr("| No running processes found "));
    EXPECT_EQ(err, "");
}

TEST_F(SmiProcesses, TableListsEachClientOnceUnderTheLowestPid) {
    ClientSpec train;
    train.client_id = 7;
    train.hbm = {"2 MiB", "0", "0"}; // the kernel printed no hbm3 line
    fake.add_process(4321, "train.py");
    fake.add_fd(4321, 5, accel_dev(0), fdinfo_text(train));
    fake.add_fd(4321, 6, accel_dev(0), fdinfo_text(train));      // dup
    fake.add_fd(4321, 7, makedev(226, 128), fdinfo_text(train)); // /dev/dri: not accel
    fake.add_process(4400, "loader");
    fake.add_fd(4400, 3, accel_dev(0), fdinfo_text(train)); // inherited by fork
    ClientSpec atom;
    atom.pdev = "0000:00:05.0";
    atom.client_id = 8;
    atom.hbm = {"64 MiB"};
    atom.memory = "4096";
    fake.add_fd(4400, 4, accel_dev(1), fdinfo_text(atom));

    ASSERT_EQ(smi({}), 0) << err;
    const auto at = out.find("| Processes ");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string p = out.substr(at);
    EXPECT_THAT(p, HasSubstr("|  PID  Process name  NPU    HBM0  HBM1  HBM2  HBM3  Host memory "));
    EXPECT_THAT(p, HasSubstr("| 4321  train.py        0   2 MiB   0 B   0 B   N/A       64 KiB "));
    EXPECT_THAT(p, HasSubstr("|       also held by PID 4400 (loader) "));
    EXPECT_THAT(p, HasSubstr("| 4400  loader          1  64 MiB     -     -     -        4 KiB "));
    EXPECT_THAT(p, Not(HasSubstr("No running processes found")));
    EXPECT_THAT(p, Not(HasSubstr("could not be inspected")));
}

TEST_F(SmiProcesses, ProcessesThatCannotBeInspectedAreReportedNotHidden) {
    fake.add_process(500, "someone-else");
    fake.add_fd(500, 3, accel_dev(0), fdinfo_text(ClientSpec{}));
    fake.deny_fds(500);
    fake.add_process(501, "another");
    fake.add_fd(501, 3, accel_dev(0), fdinfo_text(ClientSpec{.client_id = 2}));
    fake.deny_fds(501);
    ASSERT_EQ(smi({}), 0) << err;
    EXPECT_THAT(out, HasSubstr("| No running processes found "));
    EXPECT_THAT(
        out, HasSubstr("| 2 processes could not be inspected (permission denied; run as root) "));

    ASSERT_EQ(smi({"-j"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("\"processes\": [],\n  \"processes_not_inspected\": 2\n}"));
}

TEST_F(SmiProcesses, JsonHasSchemaTwoMemoryKeysAndProcesses) {
    ClientSpec c;
    c.client_id = 7;
    c.hbm = {"2 MiB", "0", "0", "0"};
    c.pinned = "8 KiB";
    c.asid = 3;
    fake.add_process(4321, "train.py");
    fake.add_fd(4321, 5, accel_dev(0), fdinfo_text(c));
    ASSERT_EQ(smi({"-j"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("\"schema_version\": 2,"));
    EXPECT_THAT(out,
                HasSubstr("\"hbm_total_bytes\": 1073741824,\n      \"hbm_used_bytes\": 2097152,"));
    EXPECT_THAT(out, HasSubstr("\"hbm_used_bytes\": 67108864,\n          "
                               "\"hbm_largest_free_bytes\": 469762048"));
    EXPECT_THAT(out, HasSubstr(R"("processes": [
    {
      "pid": 4321,
      "name": "train.py",
      "holders": [
        {
          "pid": 4321,
          "name": "train.py"
        }
      ],
      "card_index": 0,
      "pci_bdf": "0000:00:04.0",
      "accel_minor": 0,
      "client_id": 7,
      "hbm": [
        {
          "chiplet": 0,
          "total_bytes": 2097152,
          "shared_bytes": 0,
          "resident_bytes": 2097152
        },)"));
    EXPECT_THAT(out, HasSubstr(R"("host_memory": {
        "total_bytes": 65536,
        "shared_bytes": 0,
        "resident_bytes": 65536
      },
      "pinned_bytes": 8192,
      "asid": 3,
      "mmu_faults": 0
    }
  ],
  "processes_not_inspected": 0
})"));
}

TEST_F(SmiProcesses, ListViewDoesNotScanProcesses) {
    fake.add_process(4321, "train.py");
    fake.add_fd(4321, 5, accel_dev(0), fdinfo_text(ClientSpec{}));
    ASSERT_EQ(smi({"-L"}), 0) << err;
    EXPECT_THAT(out, Not(HasSubstr("train.py")));
    EXPECT_THAT(out, Not(HasSubstr("Processes")));
}

} // namespace
} // namespace rbln::test::smi_memory_test
