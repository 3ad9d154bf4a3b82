// SPDX-License-Identifier: GPL-2.0
// The real rbln-smi binary, run with --root against fake sysfs trees.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "fake_sysfs.hpp"
#include "rbln_fw_ctrl.h"

extern char** environ;

namespace rbln::test::smi_binary_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
    int status = -1;
    std::string out;
    std::string err;
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// Runs rbln-smi with @args; stdout/stderr go to files in @scratch.
Outcome run_smi(const std::filesystem::path& scratch, std::vector<std::string> args) {
    args.insert(args.begin(), RBLN_SMI_PATH);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto out = scratch / "stdout";
    const auto err = scratch / "stderr";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    Outcome o;
    if (rc != 0) {
        ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << rc;
        return o;
    }
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    o.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    o.out = slurp(out);
    o.err = slurp(err);
    return o;
}

class SmiBinary : public ::testing::Test {
protected:
    void SetUp() override {
        scratch = fake.root() / "scratch";
        std::filesystem::create_directories(scratch);
    }
    Outcome smi(std::vector<std::string> args) {
        args.insert(args.begin(), {"--root", fake.root().string()});
        return run_smi(scratch, std::move(args));
    }
    void two_cards() {
        fake.load_driver("0.1.0");
        CardSpec a;
        a.minor = 0;
        a.serial = "RBLNEMU-0001";
        fake.add_card(a);
        CardSpec b;
        b.minor = 1;
        b.bdf = "0000:00:05.0";
        b.family = "atom";
        b.chiplets = 1;
        b.hbm_per_chiplet = 512ull << 20;
        b.serial = "RBLNEMU-0002";
        b.temp_mc = 38250;
        b.power_uw = 12340000;
        fake.add_card(b);
    }
    FakeSysfs fake;
    std::filesystem::path scratch;
};

TEST_F(SmiBinary, DriverNotLoadedExitsThree) {
    const Outcome o = smi({});
    EXPECT_EQ(o.status, 3);
    EXPECT_THAT(o.err, HasSubstr("rbln-smi: the rbln kernel driver is not loaded"));
    EXPECT_EQ(o.out, "");
}

TEST_F(SmiBinary, NoDeviceExitsFour) {
    fake.load_driver();
    const Outcome o = smi({"-L"});
    EXPECT_EQ(o.status, 4);
    EXPECT_THAT(o.err, HasSubstr("no rbln device found"));
}

TEST_F(SmiBinary, UsageErrorExitsTwo) {
    EXPECT_EQ(smi({"--nope"}).status, 2);
}

TEST_F(SmiBinary, MalformedAttributeExitsOneNamingTheFile) {
    fake.load_driver();
    const auto dev = fake.add_card(CardSpec{});
    fake.write(dev / "rbln/hbm_total_bytes", "lots");
    const Outcome o = smi({});
    EXPECT_EQ(o.status, 1);
    EXPECT_THAT(o.err, HasSubstr("rbln/hbm_total_bytes: expected an unsigned decimal integer"));
}

TEST_F(SmiBinary, ListPrintsOneLinePerCard) {
    two_cards();
    const Outcome o = smi({"-L"});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "NPU 0: Rebel100 (4 chiplets, 1024 MiB HBM) accel0 0000:00:04.0 serial "
                     "RBLNEMU-0001 fw rbln-emu 0.1.0\n"
                     "NPU 1: ATOM (1 chiplet, 512 MiB HBM) accel1 0000:00:05.0 serial "
                     "RBLNEMU-0002 fw rbln-emu 0.1.0\n");
    EXPECT_EQ(o.err, "");
}

TEST_F(SmiBinary, JsonDocumentForTwoCards) {
    two_cards();
    const Outcome o = smi({"--json"});
    EXPECT_EQ(o.status, 0) << o.err;
    const std::string expected_card1 = R"({
      "index": 1,
      "family": "atom",
      "accel_node": "/dev/accel/accel1",
      "pci_bdf": "0000:00:05.0",
      "numa_node": -1,
      "chiplet_count": 1,
      "temperature_mc": 38250,
      "power_uw": 12340000,
      "hbm_total_bytes": 536870912,
      "hbm_used_bytes": null,
      "utilization_percent": null,
      "chiplets": [
        {
          "index": 0,
          "hbm_total_bytes": 536870912,
          "temperature_mc": 35250,
          "hbm_used_bytes": null,
          "hbm_largest_free_bytes": null,
          "busy_ns": null,
          "utilization_percent": null
        }
      ],
      "fw_version": "rbln-emu 0.1.0",
      "fw_iface_version": "1.0",
      "serial": "RBLNEMU-0002",
      "uuid": "00112233-4455-6677-8899-aabbccddeeff",
      "state": "ready",
      "runtime_status": "active",
      "pci_path": [
        "pci0000:00",
        "0000:00:05.0"
      ],
      "local_cpulist": null,
      "open_files": 0,
      "card_resets": 0
    })";
    EXPECT_THAT(o.out, HasSubstr(expected_card1));
    EXPECT_THAT(o.out, testing::StartsWith("{\n  \"schema_version\": 2,\n"
                                           "  \"schema_version_minor\": 1,\n  \"driver\": {\n"
                                           "    \"name\": \"rbln\",\n    \"version\": \"0.1.0\""));
    // The fake tree has no /proc: no processes, none hidden.
    EXPECT_THAT(o.out, testing::EndsWith(
                           "  ],\n  \"processes\": [],\n  \"processes_not_inspected\": 0\n}\n"));
}

TEST_F(SmiBinary, TableShowsEveryCardWithUnits) {
    two_cards();
    const Outcome o = smi({});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("Driver (rbln.ko): 0.1.0"));
    EXPECT_THAT(o.out,
                HasSubstr("| Rebel100 | /dev/accel/accel0 | 0000:00:04.0 | 45.0 C | 75.0 W |"));
    EXPECT_THAT(o.out,
                HasSubstr("| ATOM     | /dev/accel/accel1 | 0000:00:05.0 | 38.3 C | 12.3 W |"));
    // This module exports no hbm_used_bytes and no busy_ns: used and
    // utilisation are N/A, total is known.
    EXPECT_THAT(o.out, HasSubstr("|   N/A / 1024 MiB |  N/A |"));
    EXPECT_THAT(o.out, HasSubstr("| chiplet 0: HBM N/A / 256 MiB, util N/A, 42.0 C "));
    EXPECT_THAT(o.out, HasSubstr("| chiplet 3: HBM N/A / 256 MiB, util N/A, 45.0 C "));
    EXPECT_THAT(o.out, HasSubstr("| chiplet 0: HBM N/A / 512 MiB, util N/A, 35.3 C "));
    EXPECT_THAT(o.out, HasSubstr("| No running processes found "));
}

TEST_F(SmiBinary, TableShowsUsedHbmPerChipletWhenTheModuleExportsIt) {
    fake.load_driver("0.1.0");
    CardSpec a;
    a.hbm_used = std::vector<std::uint64_t>{2ull << 20, 0, 0, 300ull << 10};
    fake.add_card(a);
    const Outcome o = smi({});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("|     3 / 1024 MiB |"));
    EXPECT_THAT(o.out, HasSubstr("| chiplet 0: HBM 2 / 256 MiB, largest free 254 MiB, util N/A, "
                                 "42.0 C "));
    EXPECT_THAT(o.out, HasSubstr("| chiplet 3: HBM 1 / 256 MiB, largest free 255 MiB, util N/A, "
                                 "45.0 C "));
}

// The binary classifies fds with the real stat(): files of a fake /proc are
// no accel nodes, whatever their fdinfo says (the fake's probe is only for
// in-process tests).
TEST_F(SmiBinary, RealProbeDoesNotTakeFakeProcFilesForAccelNodes) {
    two_cards();
    fake.add_process(4321, "train.py");
    fake.add_fd(4321, 5, accel_dev(0), fdinfo_text(ClientSpec{}));
    const Outcome o = smi({});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_THAT(o.out, Not(HasSubstr("train.py")));
    EXPECT_THAT(o.out, HasSubstr("| No running processes found "));
}

TEST_F(SmiBinary, SuspendedCardShowsNaAndIsNotWoken) {
    fake.load_driver();
    CardSpec s;
    s.runtime_status = "suspended";
    const auto dev = fake.add_card(s);
    fake.write(dev / "hwmon/hwmon1/temp1_input", "garbage-that-must-not-be-read");
    const Outcome o = smi({"-j"});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("\"temperature_mc\": null"));
    EXPECT_THAT(o.out, HasSubstr("\"runtime_status\": \"suspended\""));
}

TEST_F(SmiBinary, DumpControlBlockDecodesAGoodBlockAndRefusesABadOne) {
    rbln_fw_ctrl c{};
    c.magic = RBLN_FW_MAGIC;
    c.iface_major = 1;
    c.ctrl_size = sizeof(c);
    c.family = RBLN_FW_FAMILY_ATOM;
    c.chiplet_count = 1;
    c.num_vectors = 2;
    c.bar_size = 64ull << 20;
    c.hbm[0].bar_offset = RBLN_FW_CTRL_REGION_SIZE;
    c.hbm[0].size = 32ull << 20;
    c.fw_state = RBLN_FW_STATE_FAULT;
    c.fault_code = RBLN_FW_FAULT_THERMAL;
    std::strcpy(c.fault_reason, "too hot");
    const auto file = scratch / "ctrl.bin";
    {
        std::ofstream f(file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(&c), sizeof(c));
    }
    Outcome o = run_smi(scratch, {"--dump-control-block", file.string()});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("fw_state          fault"));
    EXPECT_THAT(o.out, HasSubstr("fault_code        thermal"));
    EXPECT_THAT(o.out, HasSubstr("fault_reason      too hot"));
    o = run_smi(scratch, {"-j", "--dump-control-block", file.string()});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("\"bar_size_bytes\": 67108864"));

    c.magic = 0xdeadbeef;
    {
        std::ofstream f(file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(&c), sizeof(c));
    }
    o = run_smi(scratch, {"--dump-control-block", file.string()});
    EXPECT_EQ(o.status, 1);
    EXPECT_THAT(o.err, HasSubstr("bad magic 0xdeadbeef"));
    o = run_smi(scratch, {"--dump-control-block", (scratch / "absent").string()});
    EXPECT_EQ(o.status, 1);
    EXPECT_THAT(o.err, HasSubstr("no such file or directory (ENOENT)"));
}

// Cards without busy counters (an older module) have nothing to sample:
// rbln-smi does not wait out the interval (a minute here; the figure it
// reports is the time between its two reads, which did not wait).
TEST_F(SmiBinary, WithoutBusyCountersDoesNotWaitOutTheInterval) {
    two_cards();
    const Outcome o =
        run_smi(scratch, {"--root", fake.root().string(), "-j", "--interval-ms", "60000"});
    ASSERT_EQ(o.status, 0) << o.err;
    const std::string key = "\"utilization_sample_ns\": ";
    const auto at = o.out.find(key);
    ASSERT_NE(at, std::string::npos) << o.out;
    const std::string value = o.out.substr(at + key.size(), o.out.find(',', at) - at - key.size());
    if (value != "null") {
        EXPECT_LT(std::stoull(value), 60'000'000'000ULL) << "it waited the whole interval";
    }
    EXPECT_THAT(o.out, Not(HasSubstr("\"utilization_percent\": 0")));
}

// -l until a signal: SIGINT (Ctrl-C) and SIGTERM end the loop with exit
// status 0 at once, not at the end of the period, and after whole samples
// only: every line of the CSV is complete.
class SmiLoopSignal : public SmiBinary, public ::testing::WithParamInterface<int> {};

TEST_P(SmiLoopSignal, EndsTheLoopWithStatusZeroAfterWholeSamples) {
    two_cards();
    std::vector<std::string> args = {RBLN_SMI_PATH, "--root", fake.root().string(),
                                     "-l",          "60",     "--query=index,name,hbm_total",
                                     "--format=csv"};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto out = scratch / "loop.out";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    const std::string first = "index,name,hbm_total [MiB]\n0,Rebel100,1024 MiB\n1,ATOM,512 MiB\n";
    const auto t0 = std::chrono::steady_clock::now();
    while (slurp(out).size() < first.size() &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
        usleep(10000);
    ASSERT_EQ(slurp(out), first);
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_EQ(kill(pid, GetParam()), 0);
    int wstatus = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &wstatus, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() - sent < std::chrono::seconds(20))
        usleep(10000);
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
        FAIL() << "rbln-smi -l 60 did not end within 20 s of signal " << GetParam();
    }
    EXPECT_TRUE(WIFEXITED(wstatus)) << "killed by signal " << WTERMSIG(wstatus);
    EXPECT_EQ(WEXITSTATUS(wstatus), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(10))
        << "the signal did not cut the wait short";
    EXPECT_EQ(slurp(out), first);
}

// Whether @pid blocks @sig (/proc/<pid>/status SigBlk).
bool blocks(pid_t pid, int sig) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.starts_with("SigBlk:"))
            return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1) & 1) != 0;
    return false;
}

// A signal that arrives during a sample (here: while it waits out a long
// utilisation interval) lets that sample finish and print whole.
TEST_P(SmiLoopSignal, DuringASampleLetsTheSampleFinishFirst) {
    fake.load_driver("0.1.0");
    CardSpec a;
    a.busy_ns = std::vector<std::uint64_t>{0, 0, 0, 0};
    fake.add_card(a);
    std::vector<std::string> args = {RBLN_SMI_PATH,
                                     "--root",
                                     fake.root().string(),
                                     "-l",
                                     "60",
                                     "--interval-ms",
                                     "1500",
                                     "--query=index,utilization",
                                     "--format=csv,noheader"};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& arg : args)
        argv.push_back(arg.data());
    argv.push_back(nullptr);
    const auto out = scratch / "sample.out";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    const auto t0 = std::chrono::steady_clock::now();
    while (!blocks(pid, GetParam()) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
        usleep(1000);
    ASSERT_TRUE(blocks(pid, GetParam())) << "rbln-smi -l never blocked the signal";
    ASSERT_EQ(kill(pid, GetParam()), 0);
    int wstatus = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &wstatus, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
        usleep(10000);
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
        FAIL() << "rbln-smi -l 60 did not end within 30 s";
    }
    EXPECT_TRUE(WIFEXITED(wstatus)) << "killed by signal " << WTERMSIG(wstatus);
    EXPECT_EQ(WEXITSTATUS(wstatus), 0);
    EXPECT_EQ(slurp(out), "0,0 %\n"); // the sample the signal came in, whole
}

INSTANTIATE_TEST_SUITE_P(Signals, SmiLoopSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) {
                             return std::string(info.param == SIGINT ? "Sigint" : "Sigterm");
                         });

TEST_F(SmiBinary, UnknownQueryFieldExitsTwo) {
    two_cards();
    const Outcome o = smi({"--query=index,bogus", "--format=csv"});
    EXPECT_EQ(o.status, 2);
    EXPECT_THAT(o.err, HasSubstr("unknown field 'bogus'"));
    EXPECT_EQ(o.out, "");
}

} // namespace
} // namespace rbln::test::smi_binary_test
