// SPDX-License-Identifier: GPL-2.0
// Logical devices: visibility, grouping, their errors, planning vs commit,
// the current device per thread, "rbln:N", fork detection (also on the
// hot paths of the process's devices).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/stream.hpp"
#include "testing.hpp"

namespace rbln::test::devices_test {
namespace {

using ::testing::ElementsAre;
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

// A fake environment the tests change at will.
struct FakeEnv {
    std::map<std::string, std::string, std::less<>> vars;
    EnvSource source() {
        return [this](std::string_view name) -> std::optional<std::string> {
            auto it = vars.find(name);
            if (it == vars.end())
                return std::nullopt;
            return it->second;
        };
    }
};

std::vector<CardInfo> cards(Family family, unsigned n) {
    std::vector<CardInfo> out(n);
    for (unsigned i = 0; i < n; i++) {
        out[i].index = i;
        out[i].family = family;
        out[i].family_name = std::string(family_key(family));
    }
    return out;
}

std::vector<std::vector<unsigned>> groups(const DeviceMapping& m) {
    std::vector<std::vector<unsigned>> out;
    for (const auto& d : m.devices)
        out.push_back(d.npus);
    return out;
}

Error plan_error(const std::vector<CardInfo>& c, FakeEnv& env) {
    return catch_error([&] { plan_device_mapping(c, env.source()); });
}

// ---- visibility ------------------------------------------------------------

TEST(DevicePlan, WithoutVariablesEveryCardIsOneDevice) {
    FakeEnv env;
    const auto m = plan_device_mapping(cards(Family::Atom, 3), env.source());
    EXPECT_THAT(m.visible, ElementsAre(0u, 1u, 2u));
    EXPECT_EQ(m.grouping, GroupingSource::None);
    ASSERT_EQ(m.devices.size(), 3u);
    EXPECT_THAT(m.devices[2].npus, ElementsAre(2u));
    EXPECT_TRUE(m.warnings.empty());
}

TEST(DevicePlan, VisibleDevicesSelectsAndOrdersNpus) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "3, 1";
    const auto m = plan_device_mapping(cards(Family::Rebel100, 4), env.source());
    EXPECT_THAT(m.visible, ElementsAre(3u, 1u));
    ASSERT_EQ(m.devices.size(), 2u);
    EXPECT_THAT(m.devices[0].npus, ElementsAre(0u));
    EXPECT_THAT(m.devices[0].physical_ids, ElementsAre(3u));
    EXPECT_THAT(m.devices[1].physical_ids, ElementsAre(1u));
    EXPECT_EQ(m.visible_variable, "RBLN_VISIBLE_DEVICES");
}

TEST(DevicePlan, EmptyVisibleDevicesHidesEveryNpu) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "";
    const auto m = plan_device_mapping(cards(Family::Atom, 2), env.source());
    EXPECT_TRUE(m.visible.empty());
    EXPECT_TRUE(m.devices.empty());
}

TEST(DevicePlan, VisibleDevicesUnknownIdNamesVariableAndRange) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "0,4";
    const Error e = plan_error(cards(Family::Atom, 4), env);
    EXPECT_EQ(e.code(), Errc::BadConfig);
    EXPECT_STREQ(e.what(), "RBLN_VISIBLE_DEVICES: NPU 4 does not exist: the machine has 4 NPUs "
                           "(ids 0..3) (value '0,4')");
}

TEST(DevicePlan, VisibleDevicesDuplicateIsRefused) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "1,0,1";
    const Error e = plan_error(cards(Family::Atom, 4), env);
    EXPECT_EQ(e.code(), Errc::BadConfig);
    EXPECT_THAT(e.what(), HasSubstr("RBLN_VISIBLE_DEVICES: NPU 1 is listed twice"));
}

TEST(DevicePlan, VisibleDevicesNonNumberAndEmptyEntryAreRefused) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "0,x";
    EXPECT_THAT(plan_error(cards(Family::Atom, 2), env).what(),
                HasSubstr("RBLN_VISIBLE_DEVICES: 'x' is not an NPU id"));
    env.vars["RBLN_VISIBLE_DEVICES"] = "0,,1";
    EXPECT_THAT(plan_error(cards(Family::Atom, 2), env).what(),
                HasSubstr("RBLN_VISIBLE_DEVICES: entry 1 is empty"));
    env.vars["RBLN_VISIBLE_DEVICES"] = "-1";
    EXPECT_EQ(plan_error(cards(Family::Atom, 2), env).code(), Errc::BadConfig);
}

TEST(DevicePlan, DeprecatedRbLnDevicesIsHonouredWithAWarning) {
    FakeEnv env;
    env.vars["RBLN_DEVICES"] = "1";
    const auto m = plan_device_mapping(cards(Family::Atom, 2), env.source());
    EXPECT_THAT(m.visible, ElementsAre(1u));
    EXPECT_EQ(m.visible_variable, "RBLN_DEVICES");
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_THAT(m.warnings[0], HasSubstr("RBLN_DEVICES is deprecated: use RBLN_VISIBLE_DEVICES"));
}

TEST(DevicePlan, DeprecatedAliasErrorsNameTheAlias) {
    FakeEnv env;
    env.vars["RBLN_DEVICES"] = "7";
    EXPECT_THAT(plan_error(cards(Family::Atom, 2), env).what(),
                HasSubstr("RBLN_DEVICES: NPU 7 does not exist"));
}

TEST(DevicePlan, VisibleDevicesTakesPrecedenceOverTheAlias) {
    FakeEnv env;
    env.vars["RBLN_DEVICES"] = "0";
    env.vars["RBLN_VISIBLE_DEVICES"] = "1";
    const auto m = plan_device_mapping(cards(Family::Atom, 2), env.source());
    EXPECT_THAT(m.visible, ElementsAre(1u));
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_THAT(m.warnings[0], HasSubstr("RBLN_DEVICES is ignored"));
}

// ---- grouping --------------------------------------------------------------

TEST(DevicePlan, NpusPerDeviceGroupsConsecutiveVisibleNpus) {
    FakeEnv env;
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    const auto m = plan_device_mapping(cards(Family::Atom, 4), env.source());
    EXPECT_EQ(m.grouping, GroupingSource::NpusPerDevice);
    EXPECT_EQ(groups(m), (std::vector<std::vector<unsigned>>{{0, 1}, {2, 3}}));
}

TEST(DevicePlan, NpusPerDeviceGroupsInVisibleOrder) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "3,2,1,0";
    env.vars["RBLN_NPUS_PER_DEVICE"] = "4";
    const auto m = plan_device_mapping(cards(Family::Atom, 4), env.source());
    ASSERT_EQ(m.devices.size(), 1u);
    EXPECT_THAT(m.devices[0].physical_ids, ElementsAre(3u, 2u, 1u, 0u));
}

TEST(DevicePlan, EveryAllowedGroupSizeIsAccepted) {
    for (unsigned n : kRsdGroupSizes) {
        FakeEnv env;
        env.vars["RBLN_NPUS_PER_DEVICE"] = std::to_string(n);
        const auto m = plan_device_mapping(cards(Family::Atom, 32), env.source());
        EXPECT_EQ(m.devices.size(), 32u / n) << n;
        EXPECT_EQ(m.devices.back().npus.size(), n);
    }
}

TEST(DevicePlan, NpusPerDeviceOtherSizesAreRefused) {
    for (const char* bad : {"1", "3", "6", "64", "0"}) {
        FakeEnv env;
        env.vars["RBLN_NPUS_PER_DEVICE"] = bad;
        const Error e = plan_error(cards(Family::Atom, 64), env);
        EXPECT_EQ(e.code(), Errc::BadConfig);
        EXPECT_THAT(e.what(), HasSubstr(std::string("RBLN_NPUS_PER_DEVICE: group size ") + bad +
                                        " is not allowed: use 2, 4, 8, 16 or 32"));
    }
    FakeEnv env;
    env.vars["RBLN_NPUS_PER_DEVICE"] = "two";
    EXPECT_THAT(plan_error(cards(Family::Atom, 4), env).what(),
                HasSubstr("RBLN_NPUS_PER_DEVICE: expected a group size"));
}

TEST(DevicePlan, NpusPerDeviceLeftoverNpusAreNamed) {
    FakeEnv env;
    env.vars["RBLN_NPUS_PER_DEVICE"] = "4";
    const Error e = plan_error(cards(Family::Atom, 6), env);
    EXPECT_EQ(e.code(), Errc::BadConfig);
    EXPECT_THAT(e.what(), HasSubstr("RBLN_NPUS_PER_DEVICE: 6 visible NPUs do not divide into "
                                    "groups of 4: NPUs 4, 5 are left over"));
}

TEST(DevicePlan, EmptyGroupingVariableCountsAsUnset) {
    FakeEnv env;
    env.vars["RBLN_NPUS_PER_DEVICE"] = " ";
    env.vars["RBLN_DEVICE_MAP"] = "";
    const auto m = plan_device_mapping(cards(Family::Rebel100, 2), env.source());
    EXPECT_EQ(m.devices.size(), 2u);
}

TEST(DevicePlan, DeviceMapNamesGroupsExplicitly) {
    FakeEnv env;
    env.vars["RBLN_DEVICE_MAP"] = " [0, 3] , [2,1]";
    const auto m = plan_device_mapping(cards(Family::Atom, 4), env.source());
    EXPECT_EQ(m.grouping, GroupingSource::DeviceMap);
    EXPECT_EQ(groups(m), (std::vector<std::vector<unsigned>>{{0, 3}, {2, 1}}));
}

TEST(DevicePlan, DeviceMapTakesPrecedenceOverNpusPerDevice) {
    FakeEnv env;
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    env.vars["RBLN_DEVICE_MAP"] = "[0,1,2,3]";
    const auto m = plan_device_mapping(cards(Family::Atom, 4), env.source());
    ASSERT_EQ(m.devices.size(), 1u);
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_THAT(m.warnings[0], HasSubstr("RBLN_NPUS_PER_DEVICE is ignored"));
}

TEST(DevicePlan, DeviceMapIdsAreIndicesIntoTheVisibleList) {
    FakeEnv env;
    env.vars["RBLN_VISIBLE_DEVICES"] = "4,5";
    env.vars["RBLN_DEVICE_MAP"] = "[1,0]";
    const auto m = plan_device_mapping(cards(Family::Atom, 6), env.source());
    ASSERT_EQ(m.devices.size(), 1u);
    EXPECT_THAT(m.devices[0].physical_ids, ElementsAre(5u, 4u));
    env.vars["RBLN_DEVICE_MAP"] = "[4,5]";
    EXPECT_THAT(plan_error(cards(Family::Atom, 6), env).what(),
                HasSubstr("RBLN_DEVICE_MAP: group 0: NPU 4 does not exist: 2 NPUs are visible "
                          "(ids 0..1)"));
}

TEST(DevicePlan, DeviceMapErrorsNameTheProblem) {
    struct Case {
        const char* value;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"[0,1],[1,2],[3,4]", "RBLN_DEVICE_MAP: NPU 1 is in group 0 and in group 1"},
        {"[0,0]", "RBLN_DEVICE_MAP: group 0: NPU 0 is listed twice"},
        {"[0,1,2],[3]", "RBLN_DEVICE_MAP: group 0 has 3 NPUs; a logical device has 2, 4, 8, 16 "
                        "or 32 NPUs"},
        {"[0,1],[2,3]", "RBLN_DEVICE_MAP: NPUs 4, 5 are visible but in no group"},
        {"[0,1],[2,3],[4,5],[]", "RBLN_DEVICE_MAP: group 3 is empty"},
        {"0,1", "RBLN_DEVICE_MAP: expected '[' at offset 0"},
        {"[0,1],[2,3", "RBLN_DEVICE_MAP: group 1 has no closing ']'"},
        {"[0,1] [2,3]", "RBLN_DEVICE_MAP: expected ',' between groups at offset 6"},
        {"[0,1],[2,3],[4,9]", "RBLN_DEVICE_MAP: group 2: NPU 9 does not exist"},
        {"[0,a]", "RBLN_DEVICE_MAP: group 0: 'a' is not an NPU id"},
    };
    for (const auto& c : cases) {
        FakeEnv env;
        env.vars["RBLN_DEVICE_MAP"] = c.value;
        const Error e = plan_error(cards(Family::Atom, 6), env);
        EXPECT_EQ(e.code(), Errc::BadConfig) << c.value;
        EXPECT_THAT(e.what(), HasSubstr(c.message)) << c.value;
        EXPECT_THAT(e.what(), HasSubstr(std::string("(value '") + c.value + "')")) << c.value;
    }
}

TEST(DevicePlan, SingleLeftoverNpuIsNamedInTheSingular) {
    FakeEnv env;
    env.vars["RBLN_DEVICE_MAP"] = "[0,1]";
    EXPECT_THAT(plan_error(cards(Family::Atom, 3), env).what(),
                HasSubstr("NPU 2 is visible but in no group"));
}

TEST(DevicePlan, GroupingOnRebel100SaysWhy) {
    for (const char* var : {"RBLN_NPUS_PER_DEVICE", "RBLN_DEVICE_MAP"}) {
        FakeEnv env;
        env.vars[var] = std::string(var) == "RBLN_DEVICE_MAP" ? "[0,1]" : "2";
        const Error e = plan_error(cards(Family::Rebel100, 2), env);
        EXPECT_EQ(e.code(), Errc::BadConfig);
        EXPECT_THAT(e.what(), HasSubstr(std::string(var) + ": NPU 0 is a Rebel100-class card: "
                                                           "its four chiplets already form the "
                                                           "fixed RSD-4 group"));
        EXPECT_THAT(e.what(), HasSubstr(std::string("unset ") + var));
    }
}

TEST(DevicePlan, GroupingOfAMixedSetNamesTheRebel100Npu) {
    FakeEnv env;
    auto c = cards(Family::Atom, 3);
    c[2].family = Family::Rebel100;
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    EXPECT_THAT(plan_error(c, env).what(), HasSubstr("NPU 2 is a Rebel100-class card"));
    // Hidden, it does not matter.
    env.vars["RBLN_VISIBLE_DEVICES"] = "0,1";
    EXPECT_EQ(plan_device_mapping(c, env.source()).devices.size(), 1u);
}

TEST(DevicePlan, GroupingOfAnUnknownFamilyIsRefused) {
    FakeEnv env;
    auto c = cards(Family::Unknown, 2);
    c[0].family_name = "rebel200";
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    EXPECT_THAT(plan_error(c, env).what(), HasSubstr("NPU 0 is of an unknown family ('rebel200')"));
}

// ---- device strings --------------------------------------------------------

TEST(DeviceString, ParsesRblnIndexForms) {
    EXPECT_EQ(parse_device_string("rbln:0"), 0u);
    EXPECT_EQ(parse_device_string("rbln:12"), 12u);
    EXPECT_EQ(parse_device_string("3"), 3u);
    EXPECT_EQ(parse_device_string("rbln"), std::nullopt);
    EXPECT_EQ(device_string(5), "rbln:5");
}

TEST(DeviceString, RejectsOtherDevices) {
    for (const char* bad : {"cuda:0", "rbln:", "rbln:-1", "rbln:x", "", "rbln:1:2"}) {
        const Error e = catch_error([&] { parse_device_string(bad); });
        EXPECT_EQ(e.code(), Errc::InvalidArgument) << bad;
        EXPECT_THAT(e.what(), HasSubstr("expected 'rbln', 'rbln:N' or N")) << bad;
    }
}

// ---- the runtime against fake sysfs ----------------------------------------

class RuntimeTest : public ::testing::Test {
protected:
    void add_cards(const std::string& family, unsigned n) {
        fake.load_driver();
        for (unsigned i = 0; i < n; i++) {
            CardSpec s;
            s.minor = i;
            s.bdf = "0000:00:0" + std::to_string(4 + i) + ".0";
            s.family = family;
            s.chiplets = family == "atom" ? 1 : 4;
            s.serial = "RBLNEMU-" + std::to_string(i);
            fake.add_card(s);
        }
    }
    RuntimeOptions options() {
        RuntimeOptions o;
        o.root = fake.root();
        o.env = env.source();
        o.warn = [this](const std::string& w) { warnings.push_back(w); };
        o.opener = [](const std::string& path) -> Result<std::unique_ptr<KernelInterface>> {
            return Error::from_errno("open", path, ENOENT);
        };
        return o;
    }
    FakeSysfs fake;
    FakeEnv env;
    std::vector<std::string> warnings;
};

TEST_F(RuntimeTest, QueriesPlanFromSysfsFamilies) {
    add_cards("atom", 4);
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    Runtime rt(options());
    EXPECT_EQ(rt.device_count(), 2u);
    EXPECT_EQ(rt.physical_device_count(), 4u);
    EXPECT_TRUE(rt.is_available());
    EXPECT_THAT(rt.device(1).physical_ids, ElementsAre(2u, 3u));
    EXPECT_EQ(rt.device(1).family, Family::Atom);
    EXPECT_FALSE(rt.committed());
}

TEST_F(RuntimeTest, Rebel100CardsRefuseGroupingThroughTheRuntime) {
    add_cards("rebel100", 2);
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    Runtime rt(options());
    EXPECT_THAT(catch_error([&] { rt.mapping(); }).what(), HasSubstr("Rebel100-class"));
    EXPECT_EQ(catch_error([&] { rt.commit(); }).code(), Errc::BadConfig);
    EXPECT_FALSE(rt.committed());
}

TEST_F(RuntimeTest, DeviceCountNeverThrowsAndWarnsOncePerProblem) {
    add_cards("atom", 3);
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    Runtime rt(options());
    EXPECT_EQ(rt.device_count(), 0u);
    EXPECT_EQ(rt.device_count(), 0u);
    EXPECT_FALSE(rt.is_available());
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("RBLN_NPUS_PER_DEVICE: 3 visible NPUs"));
    EXPECT_THAT(warnings[0], HasSubstr("no rbln device is usable"));
    EXPECT_EQ(catch_error([&] { rt.physical_device_count(); }).code(), Errc::BadConfig);
}

TEST_F(RuntimeTest, NoDriverMeansNoDevicesWithoutAWarning) {
    Runtime rt(options());
    EXPECT_EQ(rt.device_count(), 0u);
    EXPECT_FALSE(rt.is_available());
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(catch_error([&] { rt.commit(); }).code(), Errc::DriverNotLoaded);
}

TEST_F(RuntimeTest, DeprecationWarningIsGivenOncePerProcess) {
    add_cards("atom", 2);
    env.vars["RBLN_DEVICES"] = "1";
    Runtime rt(options());
    EXPECT_EQ(rt.device_count(), 1u);
    EXPECT_EQ(rt.physical_device_count(), 1u);
    rt.commit();
    EXPECT_EQ(rt.device_count(), 1u);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("RBLN_DEVICES is deprecated"));
}

TEST_F(RuntimeTest, BeforeTheCommitQueriesFollowTheVariables) {
    add_cards("atom", 4);
    Runtime rt(options());
    EXPECT_EQ(rt.device_count(), 4u);
    env.vars["RBLN_NPUS_PER_DEVICE"] = "4";
    EXPECT_EQ(rt.device_count(), 1u);
    env.vars["RBLN_VISIBLE_DEVICES"] = "0,1";
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    EXPECT_EQ(rt.device_count(), 1u);
    EXPECT_EQ(rt.physical_device_count(), 2u);
    EXPECT_FALSE(rt.committed());
}

TEST_F(RuntimeTest, AfterTheCommitVariablesAreIgnored) {
    add_cards("atom", 4);
    env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
    Runtime rt(options());
    const DeviceMapping& m = rt.commit();
    EXPECT_TRUE(rt.committed());
    EXPECT_EQ(m.devices.size(), 2u);
    env.vars["RBLN_NPUS_PER_DEVICE"] = "4";
    env.vars["RBLN_VISIBLE_DEVICES"] = "bogus";
    EXPECT_EQ(rt.device_count(), 2u);
    EXPECT_EQ(rt.physical_device_count(), 4u);
    EXPECT_EQ(rt.commit().devices.size(), 2u);
    EXPECT_TRUE(warnings.empty());
}

TEST_F(RuntimeTest, AfterTheCommitCardChangesAreIgnoredToo) {
    add_cards("atom", 2);
    Runtime rt(options());
    rt.commit();
    CardSpec s;
    s.minor = 7;
    s.bdf = "0000:00:0f.0";
    s.family = "atom";
    s.chiplets = 1;
    fake.add_card(s);
    EXPECT_EQ(rt.device_count(), 2u);
}

TEST_F(RuntimeTest, SetDeviceIsBookkeepingAndDoesNotCommit) {
    add_cards("atom", 3);
    Runtime rt(options());
    EXPECT_EQ(rt.current_device(), 0u);
    rt.set_device(2);
    EXPECT_EQ(rt.current_device(), 2u);
    EXPECT_FALSE(rt.committed());
    const Error e = catch_error([&] { rt.set_device(3); });
    EXPECT_EQ(e.code(), Errc::NoDevice);
    EXPECT_THAT(e.what(), HasSubstr("device rbln:3: no such logical device: 3 are available"));
    EXPECT_EQ(rt.current_device(), 2u);
}

TEST_F(RuntimeTest, CurrentDeviceIsPerThread) {
    add_cards("atom", 3);
    Runtime rt(options());
    rt.set_device(1);
    unsigned seen = 99;
    unsigned after = 99;
    std::thread t([&] {
        seen = rt.current_device();
        rt.set_device(2);
        after = rt.current_device();
    });
    t.join();
    EXPECT_EQ(seen, 0u);
    EXPECT_EQ(after, 2u);
    EXPECT_EQ(rt.current_device(), 1u);
}

TEST_F(RuntimeTest, CurrentDeviceBelongsToItsRuntime) {
    add_cards("atom", 3);
    auto a = std::make_unique<Runtime>(options());
    a->set_device(2);
    Runtime b(options());
    EXPECT_EQ(b.current_device(), 0u);
    a.reset();
    Runtime c(options()); // may reuse a's address
    EXPECT_EQ(c.current_device(), 0u);
}

TEST_F(RuntimeTest, DeviceGuardRestoresThePreviousDevice) {
    add_cards("atom", 3);
    Runtime rt(options());
    rt.set_device(1);
    {
        const DeviceGuard g(rt, 2);
        EXPECT_EQ(rt.current_device(), 2u);
        EXPECT_EQ(g.previous(), 1u);
        {
            const DeviceGuard inner(rt, 0);
            EXPECT_EQ(rt.current_device(), 0u);
        }
        EXPECT_EQ(rt.current_device(), 2u);
    }
    EXPECT_EQ(rt.current_device(), 1u);
}

TEST_F(RuntimeTest, DeviceGuardWithABadIndexThrowsAndChangesNothing) {
    add_cards("atom", 2);
    Runtime rt(options());
    rt.set_device(1);
    EXPECT_EQ(catch_error([&] { const DeviceGuard g(rt, 5); }).code(), Errc::NoDevice);
    EXPECT_EQ(rt.current_device(), 1u);
}

// ---- fork ------------------------------------------------------------------

// Runs @child in a fork() child; returns its exit status (0..255).
template <typename F> int in_child(F&& child) {
    const pid_t pid = fork();
    if (pid == 0) {
        int code = 0;
        try {
            code = child();
        } catch (...) {
            code = 100;
        }
        _exit(code);
    }
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

TEST_F(RuntimeTest, ChildForkedAfterUseGetsTheSpawnError) {
    add_cards("atom", 2);
    Runtime rt(options());
    rt.commit();
    const int code = in_child([&] {
        try {
            rt.commit();
        } catch (const Error& e) {
            if (e.code() != Errc::BadFork)
                return 2;
            const std::string what = e.what();
            if (what.find("fork() child") == std::string::npos ||
                what.find("spawn start method") == std::string::npos)
                return 3;
            // Queries refuse as well; device_count() says 0.
            if (rt.device_count() != 0)
                return 4;
            try {
                rt.check_fork();
            } catch (const Error&) {
                return 0;
            }
            return 5;
        }
        return 1; // no error
    });
    EXPECT_EQ(code, 0);
    // The parent is unaffected.
    EXPECT_NO_THROW(rt.check_fork());
    EXPECT_EQ(rt.commit().devices.size(), 2u);
}

TEST_F(RuntimeTest, ChildForkedBeforeUseCanUseADevice) {
    add_cards("atom", 4);
    Runtime rt(options());
    EXPECT_EQ(rt.device_count(), 4u); // planning claims nothing
    const int code = in_child([&] {
        env.vars["RBLN_NPUS_PER_DEVICE"] = "2";
        const auto& m = rt.commit();
        rt.check_fork();
        return m.devices.size() == 2 ? 0 : 1;
    });
    EXPECT_EQ(code, 0);
    EXPECT_FALSE(rt.committed());
    EXPECT_EQ(rt.commit().devices.size(), 4u);
}

TEST_F(RuntimeTest, GrandchildOfAChildThatCommittedIsRefusedToo) {
    add_cards("atom", 2);
    Runtime rt(options());
    const int code = in_child([&] {
        rt.commit();
        return in_child([&] {
            try {
                rt.commit();
            } catch (const Error& e) {
                return e.code() == Errc::BadFork ? 0 : 2;
            }
            return 1;
        });
    });
    EXPECT_EQ(code, 0);
}

// The process's devices over fake sysfs and a FakeKernel (Device::get()),
// put back as they were at the end.
class ProcessDevicesOverFakes {
public:
    explicit ProcessDevicesOverFakes(RuntimeOptions options) {
        ProcessOptions p;
        p.runtime = std::move(options);
        p.device.submitter.warn = [](const std::string&) {};
        p.opener = [](const std::string&) -> Result<std::unique_ptr<KernelInterface>> {
            auto k = std::make_unique<FakeKernel>();
            return std::unique_ptr<KernelInterface>(std::move(k));
        };
        reset_process_for_tests(std::move(p));
    }
    ProcessDevicesOverFakes(const ProcessDevicesOverFakes&) = delete;
    ProcessDevicesOverFakes& operator=(const ProcessDevicesOverFakes&) = delete;
    ProcessDevicesOverFakes(ProcessDevicesOverFakes&&) = delete;
    ProcessDevicesOverFakes& operator=(ProcessDevicesOverFakes&&) = delete;
    ~ProcessDevicesOverFakes() { reset_process_for_tests(); }
};

// 0 if @use throws the spawn error (Errc::BadFork, saying what to do), else
// a code saying what happened instead.
template <typename F> int spawn_error_of(F&& use) {
    try {
        use();
    } catch (const Error& e) {
        if (e.code() != Errc::BadFork)
            return 2;
        const std::string what = e.what();
        if (what.find("fork() child") == std::string::npos ||
            what.find("spawn start method") == std::string::npos)
            return 3;
        return 0;
    } catch (...) {
        return 4;
    }
    return 1; // it worked
}

TEST_F(RuntimeTest, ChildForkedAfterUseGetsTheSpawnErrorFromTheDevicesHotPaths) {
    add_cards("atom", 1);
    const ProcessDevicesOverFakes process(options());
    const std::shared_ptr<Device> dev = Device::get(0);
    Stream stream(dev);
    stream.enqueue(PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
    stream.synchronize();
    // Not through Runtime::check_fork: the device's own checks (one load of
    // the atfork generation) on the way to the Submitter.
    EXPECT_EQ(in_child([&] {
                  return spawn_error_of([&] {
                      stream.enqueue(PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
                  });
              }),
              0)
        << "Stream::enqueue";
    EXPECT_EQ(in_child([&] { return spawn_error_of([&] { stream.query(); }); }), 0)
        << "Stream::query";
    EXPECT_EQ(in_child([&] { return spawn_error_of([&] { stream.synchronize(); }); }), 0)
        << "Stream::synchronize";
    EXPECT_EQ(in_child([&] { return spawn_error_of([&] { dev->flush(); }); }), 0)
        << "Device::flush";
    EXPECT_EQ(in_child([&] { return spawn_error_of([&] { dev->allocate_host(4096); }); }), 0)
        << "Device::allocate_host";
    EXPECT_EQ(in_child([&] { return spawn_error_of([&] { Stream other(dev); }); }), 0)
        << "a new Stream";
    // The parent goes on as before.
    const std::uint64_t jobs = stream.last_job();
    stream.enqueue(PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
    stream.synchronize();
    EXPECT_EQ(stream.last_job(), jobs + 1);
    EXPECT_TRUE(stream.query());
}

// Device::get() reads RBLN_SINGLE_ISSUER and RBLN_URING_SQPOLL where the
// runtime reads its variables.
TEST_F(RuntimeTest, DeviceGetRefusesAnSqpollRingWithSingleIssuerModeNamingBoth) {
    add_cards("atom", 1);
    env.vars["RBLN_URING_SQPOLL"] = "20";
    env.vars["RBLN_SINGLE_ISSUER"] = "1";
    const ProcessDevicesOverFakes process(options());
    const Error e = catch_error([] { Device::get(0); });
    EXPECT_EQ(e.code(), Errc::BadConfig);
    EXPECT_THAT(e.what(), HasSubstr("RBLN_URING_SQPOLL=20"));
    EXPECT_THAT(e.what(), HasSubstr("RBLN_SINGLE_ISSUER=1"));
}

TEST_F(RuntimeTest, DeviceGetRefusesAMalformedSqpollTime) {
    add_cards("atom", 1);
    env.vars["RBLN_URING_SQPOLL"] = "fast";
    const ProcessDevicesOverFakes process(options());
    const Error e = catch_error([] { Device::get(0); });
    EXPECT_EQ(e.code(), Errc::BadConfig);
    EXPECT_THAT(e.what(), HasSubstr("'fast'"));
}

TEST_F(RuntimeTest, DeviceGetWithSqpollZeroOpensAsByDefault) {
    add_cards("atom", 1);
    env.vars["RBLN_URING_SQPOLL"] = "0";
    const ProcessDevicesOverFakes process(options());
    const std::shared_ptr<Device> dev = Device::get(0);
    EXPECT_FALSE(dev->submitter().sqpoll());
    EXPECT_FALSE(dev->submitter().single_issuer());
}

} // namespace
} // namespace rbln::test::devices_test
