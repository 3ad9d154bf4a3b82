// SPDX-License-Identifier: GPL-2.0
// rbln-smi's utilisation: delta(busy ns) / delta(wall ns) of the cards'
// sysfs chiplet<i>/busy_ns and the clients' fdinfo drm-engine-chiplet<i>.
// The tests inject the clock and the wait between the two samples, and
// change the counters in that wait: nothing sleeps, nothing is timed.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "cli.hpp"
#include "fake_sysfs.hpp"
#include "utilization.hpp"

namespace rbln::test::smi_util_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr std::uint64_t kMs = 1000000; // ns

// ---- the arithmetic

TEST(UtilizationPercent, IsTheBusyPartOfTheIntervalRoundedToAWholePercent) {
    EXPECT_EQ(smi::utilization_percent(0, 25 * kMs, 100ms), 25u);
    EXPECT_EQ(smi::utilization_percent(7 * kMs, 7 * kMs, 100ms), 0u);
    EXPECT_EQ(smi::utilization_percent(1000, 1000 + 100 * kMs, 100ms), 100u);
    EXPECT_EQ(smi::utilization_percent(0, 400000, 100ms), 0u); // 0.4 %
    EXPECT_EQ(smi::utilization_percent(0, 600000, 100ms), 1u); // 0.6 %
    EXPECT_EQ(smi::utilization_percent(0, 333 * kMs, milliseconds(1000)), 33u);
}

TEST(UtilizationPercent, MoreBusyTimeThanIntervalIsClampedTo100) {
    // The counters grow when a job completes, by its whole run time: a job
    // that started before the first sample counts whole in the second.
    EXPECT_EQ(smi::utilization_percent(0, 150 * kMs, 100ms), 100u);
    EXPECT_EQ(smi::utilization_percent(0, ~0ull, 100ms), 100u);
}

TEST(UtilizationPercent, CounterThatWentBackwardsGivesNoFigure) {
    EXPECT_EQ(smi::utilization_percent(5000 * kMs, 1 * kMs, 100ms), std::nullopt);
    EXPECT_EQ(smi::utilization_percent(1, 0, 100ms), std::nullopt);
}

TEST(UtilizationPercent, AMissingCounterOrNoTimeGivesNoFigure) {
    EXPECT_EQ(smi::utilization_percent(std::nullopt, 5, 100ms), std::nullopt);
    EXPECT_EQ(smi::utilization_percent(5, std::nullopt, 100ms), std::nullopt);
    EXPECT_EQ(smi::utilization_percent(0, 5, nanoseconds(0)), std::nullopt);
    EXPECT_EQ(smi::utilization_percent(0, 5, nanoseconds(-1)), std::nullopt);
}

TEST(EngineKeys, DrmEngineChipletKeysAreReadInNanoseconds) {
    const auto e = parse_engine_ns("drm-driver:\trbln\n"
                                   "drm-engine-chiplet0:\t123 ns\n"
                                   "drm-engine-chiplet2:\t5 ns\n"
                                   "drm-engine-capacity-chiplet1:\t1\n"
                                   "drm-cycles-chiplet1:\t77\n");
    EXPECT_THAT(e, ElementsAre(123u, std::nullopt, 5u));
}

TEST(EngineKeys, MalformedValuesAreIgnored) {
    const auto e = parse_engine_ns("drm-engine-chiplet0:\t12 us\n"
                                   "drm-engine-chiplet1:\t12\n"
                                   "drm-engine-chiplet2:\t-3 ns\n"
                                   "drm-engine-chiplet3:\t ns\n"
                                   "drm-engine-chipletX:\t1 ns\n"
                                   "drm-engine-chiplet99999999999:\t1 ns\n"
                                   "drm-engine-chiplet4:\t42 ns");
    EXPECT_THAT(e, ElementsAre(std::nullopt, std::nullopt, std::nullopt, std::nullopt, 42u));
}

smi::CounterSample sample_at(nanoseconds t, BusyCounters card) {
    smi::CounterSample s;
    s.cards_time = t;
    s.clients_time = t;
    s.cards["0000:00:04.0"] = std::move(card);
    return s;
}

TEST(ComputeUtilization, CardFigureIsTheMeanOfItsChipletsEachClampedFirst) {
    const auto a = sample_at(1000ms, {0, 0, 0, 0});
    const auto b = sample_at(1100ms, {100 * kMs, 0, 400 * kMs, 20 * kMs});
    const auto u = smi::compute_utilization(&a, b);
    ASSERT_TRUE(u.sampled);
    EXPECT_EQ(u.interval, 100ms);
    const auto* c = u.card("0000:00:04.0");
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->chiplets.size(), 4u);
    EXPECT_EQ(c->chiplets[0].percent, 100u);
    EXPECT_EQ(c->chiplets[1].percent, 0u);
    EXPECT_EQ(c->chiplets[2].percent, 100u); // not 400
    EXPECT_EQ(c->chiplets[3].percent, 20u);
    EXPECT_EQ(c->chiplets[2].busy_ns, 400 * kMs);
    EXPECT_EQ(c->percent, 55u); // (100 + 0 + 100 + 20) / 4
    EXPECT_TRUE(u.warnings.empty());
}

TEST(ComputeUtilization, CardFigureIsUnknownIfOneChipletIsUnknown) {
    const auto a = sample_at(1000ms, {0, 0});
    auto b = sample_at(1100ms, {50 * kMs, std::nullopt});
    const auto u = smi::compute_utilization(&a, b);
    EXPECT_EQ(u.card("0000:00:04.0")->chiplets[0].percent, 50u);
    EXPECT_EQ(u.card("0000:00:04.0")->chiplets[1].percent, std::nullopt);
    EXPECT_EQ(u.card("0000:00:04.0")->percent, std::nullopt);
}

TEST(ComputeUtilization, CounterThatWentBackIsUnknownAndWarnedAbout) {
    const auto a = sample_at(1000ms, {5000 * kMs, 10 * kMs});
    const auto b = sample_at(1100ms, {2 * kMs, 30 * kMs});
    const auto u = smi::compute_utilization(&a, b);
    const auto* c = u.card("0000:00:04.0");
    EXPECT_EQ(c->chiplets[0].percent, std::nullopt);
    EXPECT_EQ(c->chiplets[0].busy_ns, 2 * kMs); // the counter itself is still shown
    EXPECT_EQ(c->chiplets[1].percent, 20u);
    EXPECT_EQ(c->percent, std::nullopt);
    ASSERT_EQ(u.warnings.size(), 1u);
    EXPECT_THAT(u.warnings[0], HasSubstr("0000:00:04.0 chiplet0/busy_ns went back from "
                                         "5000000000 to 2000000"));
}

TEST(ComputeUtilization, OneSampleGivesTheCountersButNoFigures) {
    const auto b = sample_at(1100ms, {50 * kMs});
    const auto u = smi::compute_utilization(nullptr, b);
    EXPECT_FALSE(u.sampled);
    EXPECT_EQ(u.interval, std::nullopt);
    EXPECT_EQ(u.card("0000:00:04.0")->chiplets[0].busy_ns, 50 * kMs);
    EXPECT_EQ(u.card("0000:00:04.0")->chiplets[0].percent, std::nullopt);
}

TEST(ComputeUtilization, ClientSeenOnlyInTheSecondSampleHasNoFigure) {
    smi::CounterSample a = sample_at(1000ms, {0});
    smi::CounterSample b = sample_at(1100ms, {0});
    a.clients[{"0000:00:04.0", 7}] = {10 * kMs};
    b.clients[{"0000:00:04.0", 7}] = {40 * kMs};
    b.clients[{"0000:00:04.0", 8}] = {40 * kMs};
    b.clients_time = 1200ms; // the clients have their own interval
    const auto u = smi::compute_utilization(&a, b);
    EXPECT_EQ(u.clients.at({"0000:00:04.0", 7})[0].percent, 15u); // 30 ms of 200 ms
    EXPECT_EQ(u.clients.at({"0000:00:04.0", 8})[0].percent, std::nullopt);
    EXPECT_EQ(u.clients.at({"0000:00:04.0", 8})[0].busy_ns, 40 * kMs);
}

// ---- reading the counters from a fake tree

TEST(CardBusy, IsReadPerChipletAndKeyedByPciAddress) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec a;
    a.busy_ns = std::vector<std::uint64_t>{1, 2, 3}; // chiplet 3 has none
    fake.add_card(a);
    CardSpec b;
    b.minor = 1;
    b.bdf = "0000:00:05.0";
    b.chiplets = 1;
    b.busy_ns = std::vector<std::uint64_t>{99};
    fake.add_card(b);
    const auto cards = read_card_busy(SystemView{fake.root(), {}});
    ASSERT_EQ(cards.size(), 2u);
    // chiplet_count, the sibling of the chiplet<i> directories, is not one.
    EXPECT_THAT(cards.at("0000:00:04.0"), ElementsAre(1u, 2u, 3u, std::nullopt));
    EXPECT_THAT(cards.at("0000:00:05.0"), ElementsAre(99u));
}

TEST(CardBusy, MalformedValueIsAnErrorNamingTheFile) {
    FakeSysfs fake;
    fake.load_driver();
    CardSpec a;
    a.busy_ns = std::vector<std::uint64_t>{1, 2, 3, 4};
    fake.add_card(a);
    fake.write(FakeSysfs::device_dir(a.bdf) / "rbln/chiplet2/busy_ns", "12 ns");
    try {
        read_card_busy(SystemView{fake.root(), {}});
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::BadValue);
        EXPECT_THAT(e.what(), HasSubstr("rbln/chiplet2/busy_ns"));
    }
}

// ---- rbln-smi with a fake tree, a fake clock and a hook between the samples

class SmiUtil : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        fake.add_process(1, "init");
    }
    // One Rebel100 card at 0000:00:04.0 with @busy per chiplet (nullopt:
    // no busy_ns files), one ATOM card at 0000:00:05.0 with @atom_busy.
    void cards(std::optional<std::vector<std::uint64_t>> busy,
               std::optional<std::vector<std::uint64_t>> atom_busy = std::nullopt) {
        CardSpec a;
        a.hbm_used = std::vector<std::uint64_t>{0, 0, 0, 0};
        a.busy_ns = std::move(busy);
        fake.add_card(a);
        CardSpec b;
        b.minor = 1;
        b.bdf = "0000:00:05.0";
        b.family = "atom";
        b.chiplets = 1;
        b.busy_ns = std::move(atom_busy);
        fake.add_card(b);
    }
    int smi(std::initializer_list<std::string_view> extra) {
        const std::string root = fake.root().string();
        std::vector<std::string_view> args = {"--root", root};
        args.insert(args.end(), extra);
        smi::Environment env;
        env.char_device_probe = fake.probe();
        env.clock = [this] { return now; };
        env.sleep_until = [this](nanoseconds deadline) {
            waits++;
            waited = deadline - now;
            if (between)
                between();
            now = deadline;
        };
        std::ostringstream o;
        std::ostringstream e;
        const int rc = smi::run(args, o, e, env);
        out = o.str();
        err = e.str();
        return rc;
    }
    FakeSysfs fake;
    nanoseconds now = milliseconds(5000);
    std::function<void()> between; ///< runs between the two samples
    int waits = 0;
    nanoseconds waited{0};
    std::string out;
    std::string err;
};

TEST_F(SmiUtil, ChipletUtilisationIsTheBusyDeltaOverTheDefaultInterval) {
    cards(std::vector<std::uint64_t>{0, 1000, 0, 5000 * kMs}, std::vector<std::uint64_t>{0});
    between = [this] {
        fake.set_busy_ns("0000:00:04.0", 0, 25 * kMs);
        fake.set_busy_ns("0000:00:04.0", 2, 150 * kMs); // a long job completed: clamped
        fake.set_busy_ns("0000:00:04.0", 3, 5050 * kMs);
        fake.set_busy_ns("0000:00:05.0", 0, 100 * kMs);
    };
    ASSERT_EQ(smi({}), 0) << err;
    EXPECT_EQ(waits, 1);
    EXPECT_EQ(waited, milliseconds(smi::kDefaultIntervalMs));
    EXPECT_THAT(out, HasSubstr("| HBM used / total |  Util | Firmware "));
    EXPECT_THAT(out, HasSubstr("|     0 / 1024 MiB |  44 % | rbln-emu 0.1.0 |")); // 175 / 4
    EXPECT_THAT(out, HasSubstr("| chiplet 0: HBM 0 / 256 MiB, largest free 256 MiB, util 25 %, "
                               "42.0 C "));
    EXPECT_THAT(out, HasSubstr("| chiplet 1: HBM 0 / 256 MiB, largest free 256 MiB, util 0 %, "));
    EXPECT_THAT(out, HasSubstr("| chiplet 2: HBM 0 / 256 MiB, largest free 256 MiB, util 100 %, "));
    EXPECT_THAT(out, HasSubstr("| chiplet 3: HBM 0 / 256 MiB, largest free 256 MiB, util 50 %, "));
    EXPECT_THAT(out, HasSubstr("|    N/A / 256 MiB | 100 % |"));
    EXPECT_THAT(out, HasSubstr("| chiplet 0: HBM N/A / 256 MiB, util 100 %, 42.0 C "));
    EXPECT_EQ(err, "");

    for (unsigned i = 0; i < 4; i++) // as before the first run
        fake.set_busy_ns("0000:00:04.0", i, i == 1 ? 1000 : i == 3 ? 5000 * kMs : 0);
    fake.set_busy_ns("0000:00:05.0", 0, 0);
    ASSERT_EQ(smi({"-j"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("\"utilization_sample_ns\": 100000000,\n  \"cards\": ["));
    EXPECT_THAT(out, HasSubstr("\"hbm_used_bytes\": 0,\n      \"utilization_percent\": 44,"));
    EXPECT_THAT(out, HasSubstr("\"hbm_largest_free_bytes\": 268435456,\n"
                               "          \"busy_ns\": 5050000000,\n"
                               "          \"utilization_percent\": 50\n"));
}

TEST_F(SmiUtil, IntervalMsSetsTheTimeBetweenTheSamples) {
    cards(std::vector<std::uint64_t>{0, 0, 0, 0});
    between = [this] { fake.set_busy_ns("0000:00:04.0", 1, 100 * kMs); };
    ASSERT_EQ(smi({"--interval-ms", "400"}), 0) << err;
    EXPECT_EQ(waited, milliseconds(400));
    EXPECT_THAT(out, HasSubstr("chiplet 1: HBM 0 / 256 MiB, largest free 256 MiB, util 25 %, "));
    ASSERT_EQ(smi({"--interval-ms=1000", "-j"}), 0) << err;
    EXPECT_EQ(waited, milliseconds(1000));
    EXPECT_THAT(out, HasSubstr("\"utilization_sample_ns\": 1000000000,"));
}

TEST_F(SmiUtil, CounterThatWentBackwardsShowsNaAndAWarning) {
    cards(std::vector<std::uint64_t>{5000 * kMs, 0, 0, 0});
    between = [this] {
        fake.set_busy_ns("0000:00:04.0", 0, 3 * kMs); // the driver was bound again
        fake.set_busy_ns("0000:00:04.0", 1, 10 * kMs);
    };
    ASSERT_EQ(smi({}), 0) << err;
    EXPECT_THAT(out, HasSubstr("| chiplet 0: HBM 0 / 256 MiB, largest free 256 MiB, util N/A, "));
    EXPECT_THAT(out, HasSubstr("| chiplet 1: HBM 0 / 256 MiB, largest free 256 MiB, util 10 %, "));
    EXPECT_THAT(out, HasSubstr("|     0 / 1024 MiB |  N/A |"));
    EXPECT_THAT(err, HasSubstr("rbln-smi: warning: 0000:00:04.0 chiplet0/busy_ns went back from "
                               "5000000000 to 3000000 ns"));
    EXPECT_THAT(err, HasSubstr("utilisation N/A"));
}

TEST_F(SmiUtil, ChipletWithoutBusyNsShowsNa) {
    // chiplet 3 has no busy_ns (an older card); the ATOM card has none at all.
    cards(std::vector<std::uint64_t>{0, 0, 0});
    between = [this] { fake.set_busy_ns("0000:00:04.0", 0, 60 * kMs); };
    ASSERT_EQ(smi({}), 0) << err;
    EXPECT_THAT(out, HasSubstr("chiplet 0: HBM 0 / 256 MiB, largest free 256 MiB, util 60 %, "));
    EXPECT_THAT(out, HasSubstr("chiplet 3: HBM 0 / 256 MiB, largest free 256 MiB, util N/A, "));
    EXPECT_THAT(out, HasSubstr("|     0 / 1024 MiB |  N/A |"));
    EXPECT_THAT(out, HasSubstr("| chiplet 0: HBM N/A / 256 MiB, util N/A, 42.0 C "));
    EXPECT_EQ(err, "");
    ASSERT_EQ(smi({"-j"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("\"hbm_largest_free_bytes\": null,\n"
                               "          \"busy_ns\": null,\n"
                               "          \"utilization_percent\": null\n"));
}

TEST_F(SmiUtil, ModuleWithoutAnyBusyCounterIsNotWaitedFor) {
    cards(std::nullopt);
    ASSERT_EQ(smi({}), 0) << err;
    EXPECT_EQ(waits, 0);
    EXPECT_THAT(out, HasSubstr("|     0 / 1024 MiB |  N/A |"));
    EXPECT_THAT(out, HasSubstr("util N/A"));
    EXPECT_THAT(out, Not(HasSubstr(" %")));
}

TEST_F(SmiUtil, NoUtilAndIntervalZeroSkipTheSecondSampleButShowTheCounters) {
    cards(std::vector<std::uint64_t>{7, 0, 0, 0});
    for (const auto* option : {"--no-util", "--interval-ms=0"}) {
        waits = 0;
        ASSERT_EQ(smi({option}), 0) << err;
        EXPECT_EQ(waits, 0) << option;
        EXPECT_THAT(out, Not(HasSubstr("Util"))) << option;
        EXPECT_THAT(out, Not(HasSubstr("util"))) << option;
        ASSERT_EQ(smi({option, "-j"}), 0) << err;
        EXPECT_EQ(waits, 0) << option;
        EXPECT_THAT(out, HasSubstr("\"utilization_sample_ns\": null,")) << option;
        EXPECT_THAT(out, HasSubstr("\"busy_ns\": 7,\n          \"utilization_percent\": null\n"))
            << option;
        EXPECT_THAT(out, HasSubstr("\"hbm_used_bytes\": 0,\n      \"utilization_percent\": null,"))
            << option;
    }
}

TEST_F(SmiUtil, ListViewDoesNotSample) {
    cards(std::vector<std::uint64_t>{0, 0, 0, 0});
    ASSERT_EQ(smi({"-L"}), 0) << err;
    EXPECT_EQ(waits, 0);
}

TEST_F(SmiUtil, BadIntervalIsAUsageError) {
    cards(std::vector<std::uint64_t>{0, 0, 0, 0});
    for (auto bad : {"abc", "-1", "60001", "", "10ms", "99999999999999999999"}) {
        const std::string opt = std::string("--interval-ms=") + bad;
        EXPECT_EQ(smi({opt}), 2) << opt;
        EXPECT_THAT(err, HasSubstr("--interval-ms needs a number of milliseconds from 0 to 60000"))
            << opt;
    }
    EXPECT_EQ(smi({"--interval-ms"}), 2);
    EXPECT_THAT(err, HasSubstr("needs an argument"));
    EXPECT_EQ(waits, 0);
    EXPECT_EQ(smi({"--interval-ms", "60000"}), 0) << err;
}

TEST_F(SmiUtil, ProcessUtilisationIsTheDeltaOfItsFdinfoEngineTime) {
    cards(std::vector<std::uint64_t>{0, 0, 0, 0}, std::vector<std::uint64_t>{0});
    ClientSpec train;
    train.client_id = 7;
    train.engine = {"0 ns", "0 ns", "0 ns", "900000000 ns"};
    fake.add_process(4321, "train.py");
    fake.add_fd(4321, 5, accel_dev(0), fdinfo_text(train));
    fake.add_fd(4321, 6, accel_dev(0), fdinfo_text(train)); // dup: one client
    ClientSpec old;                                         // an older module: no engine keys
    old.client_id = 8;
    fake.add_process(4400, "old");
    fake.add_fd(4400, 3, accel_dev(0), fdinfo_text(old));
    ClientSpec atom;
    atom.pdev = "0000:00:05.0";
    atom.client_id = 9;
    atom.hbm = {"0"};
    atom.engine = {"5000000000 ns"};
    fake.add_process(4500, "atom");
    fake.add_fd(4500, 3, accel_dev(1), fdinfo_text(atom));
    between = [&] {
        train.engine = {"50000000 ns", "0 ns", "0 ns", "910000000 ns"};
        fake.set_fdinfo(4321, 5, fdinfo_text(train));
        fake.set_fdinfo(4321, 6, fdinfo_text(train));
        atom.engine = {"1000 ns"}; // went back: no figure
        fake.set_fdinfo(4500, 3, fdinfo_text(atom));
        // A client that opened between the samples: no figure either.
        ClientSpec late;
        late.client_id = 10;
        late.engine = {"20000000 ns", "0 ns", "0 ns", "0 ns"};
        fake.add_process(4600, "late");
        fake.add_fd(4600, 3, accel_dev(0), fdinfo_text(late));
    };
    ASSERT_EQ(smi({}), 0) << err;
    const auto at = out.find("| Processes ");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string p = out.substr(at);
    EXPECT_THAT(p, HasSubstr("|  PID  Process name  NPU   HBM0  HBM1  HBM2  HBM3  Host memory  "
                             "Util0  Util1  Util2  Util3 "));
    EXPECT_THAT(p, HasSubstr("| 4321  train.py        0  2 MiB   0 B   0 B   0 B       64 KiB   "
                             "50 %    0 %    0 %   10 % "));
    EXPECT_THAT(p, HasSubstr("| 4400  old             0  2 MiB   0 B   0 B   0 B       64 KiB    "
                             "N/A    N/A    N/A    N/A "));
    EXPECT_THAT(p, HasSubstr("| 4500  atom            1    0 B     -     -     -       64 KiB    "
                             "N/A      -      -      - "));
    EXPECT_THAT(p, HasSubstr("| 4600  late            0  2 MiB   0 B   0 B   0 B       64 KiB    "
                             "N/A    N/A    N/A    N/A "));
    EXPECT_THAT(err, HasSubstr("client 9 of 0000:00:05.0: drm-engine-chiplet0 went back"));

    // The JSON (after the same change again: the figures are as before).
    now += milliseconds(1);
    train.engine = {"0 ns", "0 ns", "0 ns", "900000000 ns"};
    fake.set_fdinfo(4321, 5, fdinfo_text(train));
    fake.set_fdinfo(4321, 6, fdinfo_text(train));
    ASSERT_EQ(smi({"-j"}), 0) << err;
    EXPECT_THAT(out, HasSubstr(R"("engines": [
        {
          "chiplet": 0,
          "busy_ns": 50000000,
          "utilization_percent": 50
        },
        {
          "chiplet": 1,
          "busy_ns": 0,
          "utilization_percent": 0
        },
        {
          "chiplet": 2,
          "busy_ns": 0,
          "utilization_percent": 0
        },
        {
          "chiplet": 3,
          "busy_ns": 910000000,
          "utilization_percent": 10
        }
      ],
      "host_memory": {)"));
    // An older module's client: one entry per chiplet of its card, all null.
    EXPECT_THAT(out, HasSubstr(R"("client_id": 8,)"));
    EXPECT_THAT(out, HasSubstr(R"("engines": [
        {
          "chiplet": 0,
          "busy_ns": null,
          "utilization_percent": null
        },)"));
}

} // namespace
} // namespace rbln::test::smi_util_test
