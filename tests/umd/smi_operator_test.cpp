// SPDX-License-Identifier: GPL-2.0
// rbln-smi for operators, on fake sysfs trees: card selection (-i), the
// CSV query (--query, --format), the topology (--topo, and the JSON keys
// of schema 2.1), the card reset (--reset, --force) and the loop (-l) with
// an injected wait.  The reset attribute of a fake tree is a plain file:
// what rbln-smi writes stays in it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cli.hpp"
#include "fake_sysfs.hpp"
#include "query.hpp"
#include "topology.hpp"

namespace rbln::test::smi_operator_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMs = 1000000; // ns

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

class SmiOperator : public ::testing::Test {
protected:
    void SetUp() override { fake.load_driver("0.1.0"); }

    // NPU 0: Rebel100 at 0000:00:04.0, NPU 1: ATOM at 0000:00:05.0,
    // NPU 2: Rebel100 at 0000:00:06.0.
    void three_cards() {
        CardSpec a;
        a.hbm_used = std::vector<std::uint64_t>{2ull << 20, 0, 0, 300ull << 10};
        a.busy_ns = std::vector<std::uint64_t>{0, 0, 0, 0};
        fake.add_card(a);
        CardSpec b;
        b.minor = 1;
        b.bdf = "0000:00:05.0";
        b.family = "atom";
        b.chiplets = 1;
        b.hbm_per_chiplet = 512ull << 20;
        b.serial = "RBLNEMU-0002";
        b.temp_mc = 38250;
        b.power_uw = 12345678;
        b.busy_ns = std::vector<std::uint64_t>{0};
        fake.add_card(b);
        CardSpec c;
        c.minor = 2;
        c.bdf = "0000:00:06.0";
        c.serial = "RBLNEMU-0003";
        c.card_resets = 4;
        c.open_files = 2;
        fake.add_card(c);
    }
    // A process holding one client of the card at @bdf.
    void holder(pid_t pid, const std::string& comm, const std::string& bdf, unsigned minor) {
        ClientSpec spec;
        spec.pdev = bdf;
        spec.client_id = 100 + static_cast<std::uint64_t>(pid);
        fake.add_process(pid, comm);
        fake.add_fd(pid, 5, accel_dev(minor), fdinfo_text(spec));
    }
    std::string reset_written(const std::string& bdf) {
        return slurp(fake.root() / fake.card_dir(bdf) / "rbln/reset");
    }

    int smi(std::initializer_list<std::string_view> extra) {
        const std::string root = fake.root().string();
        std::vector<std::string_view> args = {"--root", root};
        args.insert(args.end(), extra);
        smi::Environment env;
        env.char_device_probe = fake.probe();
        env.clock = [this] { return now; };
        env.sleep_until = [this](nanoseconds deadline) {
            util_waits++;
            if (between)
                between();
            now = deadline;
        };
        env.wait_next = [this](nanoseconds deadline) {
            deadlines.push_back(deadline);
            if (before_next)
                before_next();
            now = deadline;
            return deadlines.size() < samples;
        };
        env.is_root = [this] { return root_user; };
        std::ostringstream o;
        std::ostringstream e;
        const int rc = smi::run(args, o, e, env);
        out = o.str();
        err = e.str();
        return rc;
    }

    FakeSysfs fake;
    nanoseconds now = milliseconds(5000);
    std::function<void()> between;     ///< between the two utilisation samples
    std::function<void()> before_next; ///< in -l's wait
    std::size_t samples = 1;           ///< -l: the samples before the wait says stop
    std::vector<nanoseconds> deadlines;
    int util_waits = 0;
    bool root_user = true;
    std::string out;
    std::string err;
};

// ---- -i

TEST_F(SmiOperator, SelectionKeepsOnlyTheNamedCardsWithTheirIndices) {
    three_cards();
    ASSERT_EQ(smi({"-L", "-i", "0,2"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("NPU 0: Rebel100 "));
    EXPECT_THAT(out, Not(HasSubstr("NPU 1: ")));
    EXPECT_THAT(out, HasSubstr("NPU 2: Rebel100 (4 chiplets, 1024 MiB HBM) accel2 0000:00:06.0"));

    ASSERT_EQ(smi({"-L", "--id=0000:00:05.0"}), 0) << err;
    EXPECT_EQ(out, "NPU 1: ATOM (1 chiplet, 512 MiB HBM) accel1 0000:00:05.0 serial "
                   "RBLNEMU-0002 fw rbln-emu 0.1.0\n");
    ASSERT_EQ(smi({"-L", "-i", "00:06.0", "-i", "1"}), 0) << err; // short BDF, -i twice
    EXPECT_THAT(out, HasSubstr("NPU 1: "));
    EXPECT_THAT(out, HasSubstr("NPU 2: "));
    EXPECT_THAT(out, Not(HasSubstr("NPU 0: ")));

    ASSERT_EQ(smi({"-j", "--no-util", "-i", "2"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("\"index\": 2,"));
    EXPECT_THAT(out, Not(HasSubstr("\"index\": 0,\n      \"family\"")));
    EXPECT_THAT(out, Not(HasSubstr("\"pci_bdf\": \"0000:00:04.0\"")));
}

TEST_F(SmiOperator, SelectionShowsOnlyTheProcessesOfTheSelectedCards) {
    three_cards();
    holder(4321, "on-npu0", "0000:00:04.0", 0);
    holder(4400, "on-npu1", "0000:00:05.0", 1);
    ASSERT_EQ(smi({"--no-util", "-i", "1"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("on-npu1"));
    EXPECT_THAT(out, Not(HasSubstr("on-npu0")));
    EXPECT_THAT(out, Not(HasSubstr("0000:00:04.0")));
    ASSERT_EQ(smi({"-j", "--no-util", "-i", "1"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("\"pid\": 4400,"));
    EXPECT_THAT(out, HasSubstr("\"card_index\": 1,"));
    EXPECT_THAT(out, Not(HasSubstr("\"pid\": 4321,")));
}

TEST_F(SmiOperator, SelectingACardThatIsNotThereExitsFourNamingIt) {
    three_cards();
    EXPECT_EQ(smi({"-L", "-i", "0,5"}), 4);
    EXPECT_THAT(err, HasSubstr("-i: no NPU 5: this machine has NPU 0 to 2"));
    EXPECT_EQ(out, "");
    EXPECT_EQ(smi({"-L", "-i", "0000:00:09.0"}), 4);
    EXPECT_THAT(err, HasSubstr("no card at PCI address 0000:00:09.0"));
}

TEST_F(SmiOperator, MalformedSelectionIsAUsageError) {
    three_cards();
    for (const auto list : {"x", "0,", ",1", "0;2", "-1", "0000:00:04", "1.5"}) {
        EXPECT_EQ(smi({"-L", "-i", list}), 2) << list;
        EXPECT_THAT(err, HasSubstr("is neither an NPU index")) << list;
    }
    EXPECT_EQ(smi({"-L", "-i"}), 2);
    EXPECT_THAT(err, HasSubstr("needs an argument"));
}

// ---- --query

TEST_F(SmiOperator, QueryPrintsAHeaderAndOneCsvLinePerCardWithUnits) {
    three_cards();
    between = [this] {
        fake.set_busy_ns("0000:00:04.0", 0, 100 * kMs);
        fake.set_busy_ns("0000:00:05.0", 0, 30 * kMs);
    };
    ASSERT_EQ(smi({"--query=index,name,temperature,power,hbm_used,utilization", "--format=csv"}), 0)
        << err;
    EXPECT_EQ(out, "index,name,temperature [C],power [W],hbm_used [MiB],utilization [%]\n"
                   "0,Rebel100,45.0 C,75.00 W,3 MiB,25 %\n"
                   "1,ATOM,38.3 C,12.35 W,N/A,30 %\n"
                   "2,Rebel100,45.0 C,75.00 W,N/A,N/A\n");
    EXPECT_EQ(util_waits, 1);
    EXPECT_EQ(err, "");
}

TEST_F(SmiOperator, QueryNoheaderAndNounitsDropTheHeaderAndTheUnits) {
    three_cards();
    ASSERT_EQ(smi({"--query", "index, hbm_total,hbm_free ,power", "--format", "csv,nounits"}), 0)
        << err;
    EXPECT_EQ(out, "index,hbm_total [MiB],hbm_free [MiB],power [W]\n"
                   "0,1024,1021,75.00\n"
                   "1,512,N/A,12.35\n"
                   "2,1024,N/A,75.00\n");
    ASSERT_EQ(smi({"--query=index,hbm_total", "--format=csv,noheader"}), 0) << err;
    EXPECT_EQ(out, "0,1024 MiB\n1,512 MiB\n2,1024 MiB\n");
    ASSERT_EQ(smi({"--query=index,hbm_total", "--format=csv,noheader,nounits", "-i", "1"}), 0)
        << err;
    EXPECT_EQ(out, "1,512\n");
    ASSERT_EQ(smi({"--query=index,hbm_total", "--format=csv,nounits,noheader", "-i", "1"}), 0)
        << err;
    EXPECT_EQ(out, "1,512\n");
}

TEST_F(SmiOperator, QueryWithoutUtilizationDoesNotWaitOrScanProcesses) {
    three_cards();
    holder(4321, "train.py", "0000:00:04.0", 0);
    ASSERT_EQ(smi({"--query=index,state"}), 0) << err; // --format defaults to csv
    EXPECT_EQ(util_waits, 0);
    EXPECT_EQ(out, "index,state\n0,ready\n1,ready\n2,ready\n");
}

TEST_F(SmiOperator, QueryFieldsOfTheIdentityAndTheUseOfTheCard) {
    three_cards();
    ASSERT_EQ(smi({"--query=pci_bdf,uuid,serial,family,accel_node,numa_node,chiplet_count,"
                   "fw_version,fw_iface_version,driver_version,open_files,card_resets",
                   "--format=csv,noheader", "-i", "2"}),
              0)
        << err;
    EXPECT_EQ(out, "0000:00:06.0,00112233-4455-6677-8899-aabbccddeeff,RBLNEMU-0003,rebel100,"
                   "/dev/accel/accel2,-1,4,rbln-emu 0.1.0,1.0,0.1.0,2,4\n");
}

TEST_F(SmiOperator, QueryFieldsAnOlderModuleLacksAreNa) {
    CardSpec a;
    a.open_files = std::nullopt;
    a.card_resets = std::nullopt;
    a.hwmon = false;
    fake.add_card(a);
    ASSERT_EQ(smi({"--query=open_files,card_resets,temperature,power,hbm_used,utilization",
                   "--format=csv,noheader"}),
              0)
        << err;
    EXPECT_EQ(out, "N/A,N/A,N/A,N/A,N/A,N/A\n");
}

TEST_F(SmiOperator, QueryValuesWithCommasOrQuotesAreQuoted) {
    CardSpec a;
    a.fw_version = "rbln-emu 0.1.0, \"beta\"";
    fake.add_card(a);
    ASSERT_EQ(smi({"--query=index,fw_version", "--format=csv,noheader"}), 0) << err;
    EXPECT_EQ(out, "0,\"rbln-emu 0.1.0, \"\"beta\"\"\"\n");
}

TEST_F(SmiOperator, QueryTimestampIsUtcIso8601WithMilliseconds) {
    three_cards();
    ASSERT_EQ(smi({"--query=timestamp,index", "--format=csv,noheader", "-i", "0"}), 0) << err;
    EXPECT_TRUE(
        std::regex_match(out, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z,0\n)")))
        << out;
    EXPECT_EQ(smi::format_timestamp(0), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(smi::format_timestamp(1796650455123456789), "2026-12-07T13:34:15.123Z");
}

TEST_F(SmiOperator, UnknownQueryFieldIsAUsageErrorListingTheFields) {
    three_cards();
    EXPECT_EQ(smi({"--query=index,temp", "--format=csv"}), 2);
    EXPECT_THAT(err, HasSubstr("--query: unknown field 'temp'; the fields are: index, name, "));
    EXPECT_THAT(err, HasSubstr("utilization, state"));
    EXPECT_EQ(out, "");
    EXPECT_EQ(smi({"--query=index,,name"}), 2);
    EXPECT_THAT(err, HasSubstr("an empty field name"));
    EXPECT_EQ(smi({"--query="}), 2);
    EXPECT_EQ(smi({"--query=index", "--format=json"}), 2);
    EXPECT_THAT(err, HasSubstr("is not csv[,noheader][,nounits]"));
    EXPECT_EQ(smi({"--query=index", "--format=csv,nohead"}), 2);
    EXPECT_THAT(err, HasSubstr("unknown option 'nohead'"));
    EXPECT_EQ(smi({"--format=csv"}), 2);
    EXPECT_THAT(err, HasSubstr("--format applies to --query only"));
    EXPECT_EQ(smi({"--query=index", "-j"}), 2);
    EXPECT_EQ(smi({"--query=index", "-L"}), 2);
}

TEST_F(SmiOperator, EveryQueryFieldHasAUniqueNameAndHelp) {
    std::set<std::string_view> names;
    for (const auto& f : smi::query_fields()) {
        EXPECT_TRUE(names.insert(f.name).second) << f.name;
        EXPECT_FALSE(f.help.empty()) << f.name;
        EXPECT_EQ(smi::parse_query(f.name).front(), &f);
    }
    EXPECT_GE(names.size(), 6u);
}

// ---- --topo and the JSON keys of schema 2.1

TEST(LinkType, NamesHowTwoCardsReachEachOther) {
    const auto at = [](std::vector<std::string> path, int numa) {
        return CardPlacement{std::move(path), numa, ""};
    };
    const auto a = at({"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, 0);
    EXPECT_EQ(smi::link_type(a, a), "X");
    EXPECT_EQ(smi::link_type(a, at({"pci0000:00", "0000:00:01.0", "0000:01:00.1"}, 0)), "PIX");
    // A switch: upstream port 0000:01:00.0, downstream ports 0000:02:0x.0.
    const auto sw1 =
        at({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:03:00.0"}, 0);
    const auto sw2 =
        at({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:02.0", "0000:04:00.0"}, 0);
    EXPECT_EQ(smi::link_type(sw1, sw2), "PXB");
    EXPECT_EQ(smi::link_type(a, at({"pci0000:00", "0000:00:02.0", "0000:05:00.0"}, 0)), "PHB");
    EXPECT_EQ(smi::link_type(at({"pci0000:00", "0000:00:04.0"}, -1),
                             at({"pci0000:00", "0000:00:05.0"}, -1)),
              "PHB");
    EXPECT_EQ(smi::link_type(a, at({"pci0000:40", "0000:40:01.0", "0000:41:00.0"}, 0)), "NODE");
    EXPECT_EQ(smi::link_type(a, at({"pci0000:80", "0000:80:01.0", "0000:81:00.0"}, 1)), "SYS");
    EXPECT_EQ(smi::link_type(at({"pci0000:00", "0000:00:04.0"}, -1),
                             at({"pci0000:80", "0000:80:04.0"}, -1)),
              "SYS");
}

class SmiTopology : public SmiOperator {
protected:
    void SetUp() override {
        SmiOperator::SetUp();
        CardSpec a; // behind root port 0000:00:01.0
        a.bdf = "0000:01:00.0";
        a.bridges = {"0000:00:01.0"};
        a.numa_node = 0;
        a.local_cpulist = "0-3";
        fake.add_card(a);
        CardSpec b = a; // its sibling
        b.minor = 1;
        b.bdf = "0000:01:00.1";
        b.family = "atom";
        b.chiplets = 1;
        b.hbm_per_chiplet = 512ull << 20;
        fake.add_card(b);
        CardSpec c = a; // the other socket
        c.minor = 2;
        c.bdf = "0000:81:00.0";
        c.pci_root = "pci0000:80";
        c.bridges = {"0000:80:01.0"};
        c.numa_node = 1;
        c.local_cpulist = "4-7";
        fake.add_card(c);
    }
};

TEST_F(SmiTopology, ShowsEachCardsNumaNodeCpusPciPathAndChiplets) {
    ASSERT_EQ(smi({"--topo"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("NPU 0  Rebel100  0000:01:00.0  /dev/accel/accel0\n"
                               "  NUMA node  0\n"
                               "  CPUs       0-3\n"
                               "  PCI path   pci0000:00 > 0000:00:01.0 > 0000:01:00.0\n"
                               "  chiplet 0  HBM 256 MiB\n"
                               "  chiplet 1  HBM 256 MiB\n"
                               "  chiplet 2  HBM 256 MiB\n"
                               "  chiplet 3  HBM 256 MiB\n"
                               "NPU 1  ATOM  0000:01:00.1  /dev/accel/accel1\n"));
    EXPECT_THAT(out, HasSubstr("NPU 2  Rebel100  0000:81:00.0  /dev/accel/accel2\n"
                               "  NUMA node  1\n"
                               "  CPUs       4-7\n"
                               "  PCI path   pci0000:80 > 0000:80:01.0 > 0000:81:00.0\n"));
    EXPECT_THAT(out, HasSubstr("\nConnections:\n"
                               "        NPU0  NPU1  NPU2\n"
                               "  NPU0     X   PIX   SYS\n"
                               "  NPU1   PIX     X   SYS\n"
                               "  NPU2   SYS   SYS     X\n"));
    EXPECT_THAT(out, HasSubstr("  PIX  = behind the same PCIe bridge\n"));
}

TEST_F(SmiTopology, SelectionLimitsTheTopologyAndOneCardHasNoMatrix) {
    ASSERT_EQ(smi({"--topo", "-i", "2"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("NPU 2  Rebel100"));
    EXPECT_THAT(out, Not(HasSubstr("NPU 0 ")));
    EXPECT_THAT(out, Not(HasSubstr("NPU2 ")));
    EXPECT_EQ(smi({"--topo", "-j"}), 2);
    EXPECT_THAT(err, HasSubstr("-j has the topology"));
}

TEST_F(SmiTopology, JsonHasThePlacementAndUseOfEachCardAsSchema21) {
    ASSERT_EQ(smi({"-j", "--no-util", "-i", "0"}), 0) << err;
    EXPECT_THAT(out, testing::StartsWith("{\n  \"schema_version\": 2,\n"
                                         "  \"schema_version_minor\": 1,\n"));
    EXPECT_THAT(out, HasSubstr("\"runtime_status\": \"active\",\n"
                               "      \"pci_path\": [\n"
                               "        \"pci0000:00\",\n"
                               "        \"0000:00:01.0\",\n"
                               "        \"0000:01:00.0\"\n"
                               "      ],\n"
                               "      \"local_cpulist\": \"0-3\",\n"
                               "      \"open_files\": 0,\n"
                               "      \"card_resets\": 0\n"
                               "    }"));
    EXPECT_THAT(out, HasSubstr("\"numa_node\": 0,"));
}

// ---- --reset

TEST_F(SmiOperator, ResetWritesTheResetAttributeOfAnIdleCard) {
    three_cards();
    ASSERT_EQ(smi({"--reset", "-i", "0"}), 0) << err;
    EXPECT_EQ(reset_written("0000:00:04.0"), "1\n");
    EXPECT_EQ(reset_written("0000:00:05.0"), "");
    EXPECT_EQ(reset_written("0000:00:06.0"), "");
    EXPECT_EQ(out, "NPU 0 (0000:00:04.0): reset, card_resets 0\n");
    EXPECT_EQ(err, "");
}

TEST_F(SmiOperator, ResetIsRefusedWhileAProcessHoldsTheCard) {
    three_cards();
    holder(4321, "train.py", "0000:00:04.0", 0);
    fake.add_fd(4321, 6, accel_dev(0), fdinfo_text([] {
                    ClientSpec s;
                    s.client_id = 4421; // the same client as fd 5
                    return s;
                }()));
    holder(4400, "on-npu1", "0000:00:05.0", 1);
    EXPECT_EQ(smi({"--reset", "-i", "0"}), 6);
    EXPECT_EQ(err, "rbln-smi: NPU 0 (0000:00:04.0) is in use: PID 4321 (train.py).  Stop them, "
                   "or reset anyway with --force (their jobs on the card fail with EIO; their "
                   "buffers and queues survive the reset).\n");
    EXPECT_EQ(out, "");
    EXPECT_EQ(reset_written("0000:00:04.0"), "");
}

TEST_F(SmiOperator, ResetWithForceResetsACardInUse) {
    three_cards();
    holder(4321, "train.py", "0000:00:04.0", 0);
    ASSERT_EQ(smi({"--reset", "--force", "-i", "0"}), 0) << err;
    EXPECT_EQ(reset_written("0000:00:04.0"), "1\n");
    EXPECT_THAT(err, HasSubstr("rbln-smi: warning: resetting NPU 0 (0000:00:04.0) although it is "
                               "in use (--force): PID 4321 (train.py)"));
    EXPECT_EQ(out, "NPU 0 (0000:00:04.0): reset, card_resets 0\n");
}

TEST_F(SmiOperator, ResetIsRefusedWhileTheKernelCountsOpenFilesNoProcessShows) {
    three_cards(); // NPU 2: open_files 2, no process
    EXPECT_EQ(smi({"--reset", "-i", "2"}), 6);
    EXPECT_THAT(err, HasSubstr("NPU 2 (0000:00:06.0) is in use: 2 open files of the node that no "
                               "process has among its fds"));
    EXPECT_EQ(reset_written("0000:00:06.0"), "");
}

TEST_F(SmiOperator, ResetIsRefusedWhileSomeProcessesCannotBeInspected) {
    three_cards();
    holder(4321, "someone-else", "0000:00:05.0", 1);
    fake.deny_fds(4321);
    EXPECT_EQ(smi({"--reset", "-i", "0"}), 6);
    EXPECT_THAT(err, HasSubstr("is in use: 1 process could not be inspected"));
    EXPECT_EQ(reset_written("0000:00:04.0"), "");
}

TEST_F(SmiOperator, ResetOfSeveralCardsResetsNoneIfOneIsInUse) {
    three_cards();
    holder(4400, "on-npu1", "0000:00:05.0", 1);
    EXPECT_EQ(smi({"--reset", "-i", "0,1"}), 6);
    EXPECT_THAT(err, HasSubstr("NPU 1 (0000:00:05.0) is in use: PID 4400 (on-npu1)"));
    EXPECT_EQ(reset_written("0000:00:04.0"), "");
    EXPECT_EQ(reset_written("0000:00:05.0"), "");
}

TEST_F(SmiOperator, ResetIsRefusedForNonRoot) {
    three_cards();
    root_user = false;
    EXPECT_EQ(smi({"--reset", "-i", "0"}), 5);
    EXPECT_THAT(err, HasSubstr("--reset needs root"));
    EXPECT_EQ(reset_written("0000:00:04.0"), "");
}

TEST_F(SmiOperator, ResetOnAModuleWithoutTheAttributeSaysSo) {
    CardSpec a;
    a.reset_attr = false;
    fake.add_card(a);
    EXPECT_EQ(smi({"--reset", "-i", "0"}), 1);
    EXPECT_THAT(err, HasSubstr("rbln.ko is older than the reset attribute"));
}

TEST_F(SmiOperator, ResetOptionsThatDoNotGoTogetherAreUsageErrors) {
    three_cards();
    EXPECT_EQ(smi({"--reset"}), 2);
    EXPECT_THAT(err, HasSubstr("--reset needs -i"));
    EXPECT_EQ(smi({"--force", "-i", "0"}), 2);
    EXPECT_THAT(err, HasSubstr("--force applies to --reset only"));
    EXPECT_EQ(smi({"--reset", "-i", "0", "-j"}), 2);
    EXPECT_EQ(smi({"--reset", "-i", "0", "-l", "1"}), 2);
    EXPECT_EQ(smi({"--reset", "-i", "0", "--query=index"}), 2);
    EXPECT_EQ(reset_written("0000:00:04.0"), "");
}

// ---- -l

TEST_F(SmiOperator, LoopTakesASampleEveryPeriodUntilTheWaitSaysStop) {
    three_cards();
    samples = 3;
    ASSERT_EQ(smi({"-l", "2", "--query=index,card_resets", "--format=csv", "-i", "0,1"}), 0) << err;
    // the header once, then a line per card and sample
    EXPECT_EQ(out, "index,card_resets\n0,0\n1,0\n0,0\n1,0\n0,0\n1,0\n");
    ASSERT_EQ(deadlines.size(), 3u);
    EXPECT_EQ(deadlines[0], milliseconds(5000) + seconds(2));
    EXPECT_EQ(deadlines[1], deadlines[0] + seconds(2));
    EXPECT_EQ(deadlines[2], deadlines[1] + seconds(2));
}

TEST_F(SmiOperator, LoopOfTheTableStampsEachSample) {
    three_cards();
    samples = 2;
    ASSERT_EQ(smi({"--loop=5", "--no-util", "-i", "1"}), 0) << err;
    const std::regex stamp(R"(rbln-smi sample at \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\n)");
    EXPECT_EQ(
        std::distance(std::sregex_iterator(out.begin(), out.end(), stamp), std::sregex_iterator()),
        2);
    EXPECT_TRUE(out.starts_with("rbln-smi sample at ")) << out;
}

TEST_F(SmiOperator, LoopGoesOnAfterASampleThatFailedAndExitsZeroWhenStopped) {
    three_cards();
    samples = 3;
    before_next = [this] {
        if (deadlines.size() == 1)
            fake.remove("sys/module/rbln"); // unloaded during the loop
        if (deadlines.size() == 2)
            fake.load_driver("0.1.0");
    };
    ASSERT_EQ(smi({"-l", "1", "--query=index", "--format=csv,noheader", "-i", "0"}), 0);
    EXPECT_EQ(out, "0\n0\n");
    EXPECT_THAT(err, HasSubstr("the rbln kernel driver is not loaded"));
}

TEST_F(SmiOperator, LoopWhoseFirstSampleFailsExitsWithItsStatus) {
    fake.remove("sys/module/rbln");
    samples = 5;
    EXPECT_EQ(smi({"-l", "1", "--query=index"}), 3);
    EXPECT_TRUE(deadlines.empty());
}

TEST_F(SmiOperator, BadLoopPeriodIsAUsageError) {
    three_cards();
    for (const auto n : {"0", "x", "86401", "-1", ""}) {
        EXPECT_EQ(smi({"-L", "-l", n}), 2) << n;
        EXPECT_THAT(err, HasSubstr("-l needs a number of seconds from 1 to 86400")) << n;
    }
    EXPECT_TRUE(deadlines.empty());
}

// ---- a card the driver unplugged (it fell off the bus)

TEST_F(SmiOperator, UnpluggedCardIsReportedAsGone) {
    three_cards();
    // NPU 1's card is gone: no accel node, still bound, state "unplugged".
    fake.remove("sys/class/accel/accel1");
    fake.remove(fake.card_dir("0000:00:05.0") / "accel");
    fake.write(fake.card_dir("0000:00:05.0") / "rbln/state", "unplugged");
    ASSERT_EQ(smi({"-L"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("NPU 0: "));
    EXPECT_THAT(out, HasSubstr("NPU 1: Rebel100 ")); // NPU 2's card is NPU 1 now
    EXPECT_THAT(out, HasSubstr("gone: 0000:00:05.0 (state unplugged: "));
    ASSERT_EQ(smi({"--no-util"}), 0) << err;
    EXPECT_THAT(out, HasSubstr("gone: 0000:00:05.0 (state unplugged: "));
    // Machine-read outputs keep their shape.
    ASSERT_EQ(smi({"-j", "--no-util"}), 0) << err;
    EXPECT_THAT(out, Not(HasSubstr("gone")));
    ASSERT_EQ(smi({"--query=index,name", "--format=csv"}), 0) << err;
    EXPECT_THAT(out, Not(HasSubstr("gone")));
}

TEST_F(SmiOperator, EveryCardGoneExitsFourNamingThem) {
    CardSpec a;
    a.state = "unplugged";
    fake.add_card(a);
    fake.remove("sys/class/accel/accel0");
    fake.remove(fake.card_dir("0000:00:04.0") / "accel");
    EXPECT_EQ(smi({"-L"}), 4);
    EXPECT_THAT(err, HasSubstr("every card bound to rbln is gone"));
    EXPECT_THAT(err, HasSubstr("gone: 0000:00:04.0 (state unplugged: "));
}

TEST_F(SmiOperator, HelpListsEveryQueryFieldWithItsUnit) {
    ASSERT_EQ(smi({"--help"}), 0);
    for (const auto& f : smi::query_fields())
        EXPECT_THAT(out, HasSubstr("  " + std::string(f.name))) << f.name;
    EXPECT_THAT(out, HasSubstr("  temperature [C]  "));
    EXPECT_THAT(out, HasSubstr("6  --reset refused: processes hold the card (use --force)"));
}

} // namespace
} // namespace rbln::test::smi_operator_test
