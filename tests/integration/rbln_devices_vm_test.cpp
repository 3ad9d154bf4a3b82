// SPDX-License-Identifier: GPL-2.0
// librbln logical devices and fork() against the real rbln.ko and emulated
// cards: runs inside the VM (tools/scripts/test-vm.sh, four ATOM cards),
// not under host ctest.  Without a card every test skips; the logical
// device tests also skip unless at least four ATOM NPUs are present.
//
//   tools/vm/rbln-vm -q --cards 4 --family atom --
//       build/cmake/tests/integration/rbln_umd_devices_vm_tests
//
// The process-wide mapping is committed once per process from the real
// environment, so every case that needs its own variables (or a process
// that has not used a device yet) runs in a fresh process: this binary
// again, with a DISABLED_ case as the filter and the variables in its
// environment.  Planning alone is also checked in-process through a
// Runtime with injected variables over the real sysfs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <spawn.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "rbln/allocator.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/discovery.hpp"
#include "rbln/rbln.h"
#include "rbln/rbln_alloc.h"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

extern char** environ; // NOLINT(readability-redundant-declaration): posix_spawn wants it

namespace rbln::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kChildMarker = "RBLN_VM_TEST_CHILD";
constexpr const char* kExpectVar = "RBLN_VM_TEST_EXPECT";

std::vector<CardInfo> cards() {
    try {
        DiscoveryOptions o;
        o.telemetry_fallback = false;
        return discover(o).cards;
    } catch (const Error&) {
        return {};
    }
}

bool have_card() {
    static const bool have = !cards().empty();
    return have;
}

bool have_four_atom_npus() {
    static const bool have = [] {
        const auto c = cards();
        if (c.size() < 4)
            return false;
        for (unsigned i = 0; i < 4; i++)
            if (c[i].family != Family::Atom)
                return false;
        return true;
    }();
    return have;
}

#define REQUIRE_CARD()                                                                             \
    do {                                                                                           \
        if (!have_card())                                                                          \
            GTEST_SKIP() << "no rbln card (run it in the VM: tools/vm/rbln-vm -- <this binary>)";  \
    } while (0)

#define REQUIRE_FOUR_ATOM_NPUS()                                                                   \
    do {                                                                                           \
        if (!have_four_atom_npus())                                                                \
            GTEST_SKIP() << "needs four ATOM NPUs (tools/vm/rbln-vm --cards 4 --family atom)";     \
    } while (0)

// DISABLED_ cases only do something when a parent case started them.
#define REQUIRE_SPAWNED()                                                                          \
    do {                                                                                           \
        if (std::getenv(kChildMarker) == nullptr)                                                  \
            GTEST_SKIP() << "runs only as the child of another case";                              \
    } while (0)

std::optional<std::uint64_t> hbm_used(unsigned physical_id) {
    const auto c = cards();
    if (physical_id >= c.size())
        return std::nullopt;
    return c[physical_id].hbm_used_bytes;
}

// Runs this binary again with only @test (a DISABLED_ case) and the RBLN_*
// variables of @vars (every other inherited RBLN_* variable removed);
// returns the child's wait status.
int run_child(const std::string& test, const std::map<std::string, std::string>& vars) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; e++)
        if (std::string_view(*e).substr(0, 5) != "RBLN_")
            env.emplace_back(*e);
    env.emplace_back(std::string(kChildMarker) + "=1");
    for (const auto& [k, v] : vars) {
        std::string kv = k;
        kv.append("=").append(v);
        env.push_back(std::move(kv));
    }
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (auto& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);

    std::string self = "/proc/self/exe";
    std::string filter = "--gtest_filter=" + test;
    std::string disabled = "--gtest_also_run_disabled_tests";
    std::vector<char*> argv = {self.data(), filter.data(), disabled.data(), nullptr};
    pid_t pid = -1;
    const int err = posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data());
    if (err != 0)
        throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(err));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

std::string describe(int status) {
    if (WIFEXITED(status))
        return "exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return std::string("killed by ") + strsignal(WTERMSIG(status));
    return "status " + std::to_string(status);
}

#define EXPECT_CHILD_PASSES(test, ...)                                                             \
    do {                                                                                           \
        const int st_ = run_child(test, __VA_ARGS__);                                              \
        EXPECT_TRUE(WIFEXITED(st_) && WEXITSTATUS(st_) == 0)                                       \
            << test << ": " << describe(st_) << " (its output is above)";                          \
    } while (0)

// Runs @fn in a fork() child of this process; returns its verdict ("" is a
// pass), or what happened to the child.
std::string in_fork(const std::function<std::string()>& fn) {
    int fds[2];
    if (::pipe(fds) != 0)
        return std::string("pipe: ") + std::strerror(errno);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0)
        return std::string("fork: ") + std::strerror(errno);
    if (pid == 0) {
        ::close(fds[0]);
        std::string verdict;
        try {
            verdict = fn();
        } catch (const std::exception& e) {
            verdict = std::string("unexpected exception: ") + e.what();
        }
        const char* p = verdict.data();
        std::size_t left = verdict.size();
        while (left > 0) {
            const ssize_t n = ::write(fds[1], p, left);
            if (n <= 0)
                break;
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        // No destructors, no atexit handlers: the parent's state is not ours.
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string verdict;
    char buf[512];
    ssize_t n = 0;
    while ((n = ::read(fds[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            verdict.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        verdict += "; the forked child ended with " + describe(status);
    return verdict;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; i++)
        v[i] = static_cast<std::uint8_t>(seed + i * 7 + (i >> 12));
    return v;
}

// Host -> @m -> host through a stream of @dev; "" if the bytes came back.
std::string round_trip(const std::shared_ptr<Device>& dev, const std::shared_ptr<Memory>& m,
                       std::uint8_t seed) {
    Stream s(dev);
    const auto in = pattern(m->size(), seed);
    std::vector<std::uint8_t> out(m->size());
    copy(s, CopyEndpoint::of(m), CopyEndpoint::of_host(in.data(), in.size()));
    copy(s, CopyEndpoint::of_host(out.data(), out.size()), CopyEndpoint::of(m));
    if (out != in)
        return "device " + std::to_string(dev->index()) + ": the bytes did not come back";
    return "";
}

std::string npu_list(const std::vector<unsigned>& v) {
    std::string s;
    for (const unsigned n : v)
        s += (s.empty() ? "" : ",") + std::to_string(n);
    return s;
}

// ---- planning over the real cards, variables injected ----------------------

struct Planner {
    std::map<std::string, std::string> vars;
    std::vector<std::string> warnings;

    std::unique_ptr<Runtime> runtime() {
        RuntimeOptions o;
        o.env = [this](std::string_view name) -> std::optional<std::string> {
            const auto it = vars.find(std::string(name));
            if (it == vars.end())
                return std::nullopt;
            return it->second;
        };
        o.warn = [this](const std::string& w) { warnings.push_back(w); };
        return std::make_unique<Runtime>(std::move(o));
    }
};

TEST(VmLogicalDevices, NpusPerDeviceTwoGroupsFourAtomNpusIntoTwoDevices) {
    REQUIRE_FOUR_ATOM_NPUS();
    const auto c = cards();
    Planner p;
    p.vars = {{"RBLN_VISIBLE_DEVICES", "0,1,2,3"}, {"RBLN_NPUS_PER_DEVICE", "2"}};
    const auto rt = p.runtime();
    EXPECT_EQ(rt->physical_device_count(), 4u);
    ASSERT_EQ(rt->device_count(), 2u);
    const LogicalDevice d0 = rt->device(0);
    const LogicalDevice d1 = rt->device(1);
    EXPECT_THAT(d0.npus, ElementsAre(0u, 1u));
    EXPECT_THAT(d1.npus, ElementsAre(2u, 3u));
    EXPECT_THAT(d0.nodes, ElementsAre(c[0].accel_node, c[1].accel_node));
    EXPECT_THAT(d1.nodes, ElementsAre(c[2].accel_node, c[3].accel_node));
    EXPECT_EQ(d0.family, Family::Atom);
    EXPECT_FALSE(rt->committed()) << "queries must only plan";
    EXPECT_TRUE(p.warnings.empty());
}

TEST(VmLogicalDevices, DeviceMapTakesPrecedenceOverNpusPerDevice) {
    REQUIRE_FOUR_ATOM_NPUS();
    const auto c = cards();
    Planner p;
    p.vars = {{"RBLN_VISIBLE_DEVICES", "0,1,2,3"},
              {"RBLN_NPUS_PER_DEVICE", "4"},
              {"RBLN_DEVICE_MAP", "[3,0],[1,2]"}};
    const auto rt = p.runtime();
    ASSERT_EQ(rt->device_count(), 2u) << "RBLN_NPUS_PER_DEVICE=4 alone would make one device";
    EXPECT_THAT(rt->device(0).npus, ElementsAre(3u, 0u));
    EXPECT_THAT(rt->device(1).npus, ElementsAre(1u, 2u));
    EXPECT_THAT(rt->device(0).nodes, ElementsAre(c[3].accel_node, c[0].accel_node));
    ASSERT_EQ(p.warnings.size(), 1u);
    EXPECT_THAT(p.warnings[0], HasSubstr("RBLN_NPUS_PER_DEVICE is ignored"));
}

TEST(VmLogicalDevices, BadDeviceMapNamesTheVariableAndTheProblem) {
    REQUIRE_FOUR_ATOM_NPUS();
    struct Case {
        const char* map;
        const char* problem;
    };
    for (const Case& k :
         {Case{"[0,1],[1,2]", "RBLN_DEVICE_MAP: NPU 1 is in group 0 and in group 1"},
          Case{"[0,1]", "RBLN_DEVICE_MAP: NPUs 2, 3 are visible but in no group"},
          Case{"[0,1,2],[3]", "RBLN_DEVICE_MAP: group 0 has 3 NPUs"}}) {
        Planner p;
        p.vars = {{"RBLN_VISIBLE_DEVICES", "0,1,2,3"}, {"RBLN_DEVICE_MAP", k.map}};
        const auto rt = p.runtime();
        EXPECT_EQ(rt->device_count(), 0u) << k.map;
        ASSERT_EQ(p.warnings.size(), 1u) << k.map;
        EXPECT_THAT(p.warnings[0], HasSubstr(k.problem));
        try {
            rt->commit();
            ADD_FAILURE() << k.map << ": commit() accepted it";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::BadConfig) << k.map;
            EXPECT_THAT(e.what(), HasSubstr(k.problem));
            EXPECT_THAT(e.what(), HasSubstr(std::string("(value '") + k.map + "')"));
        }
        EXPECT_FALSE(rt->committed()) << k.map;
    }
}

// ---- the process's own mapping, from its environment -----------------------

TEST(VmLogicalDevices, TwoDevicesFromNpusPerDeviceAllocateAndCopyOnTheirOwnNpus) {
    REQUIRE_FOUR_ATOM_NPUS();
    EXPECT_CHILD_PASSES("VmDevicesChild.DISABLED_UseTheExpectedLogicalDevices",
                        {{"RBLN_VISIBLE_DEVICES", "0,1,2,3"},
                         {"RBLN_NPUS_PER_DEVICE", "2"},
                         {kExpectVar, "0,1;2,3"}});
}

TEST(VmLogicalDevices, DeviceMapFromTheEnvironmentWinsAndPlacesWorkOnItsFirstNpu) {
    REQUIRE_FOUR_ATOM_NPUS();
    EXPECT_CHILD_PASSES("VmDevicesChild.DISABLED_UseTheExpectedLogicalDevices",
                        {{"RBLN_VISIBLE_DEVICES", "0,1,2,3"},
                         {"RBLN_NPUS_PER_DEVICE", "4"},
                         {"RBLN_DEVICE_MAP", "[3,0],[1,2]"},
                         {kExpectVar, "3,0;1,2"}});
}

TEST(VmLogicalDevices, BadDeviceMapFromTheEnvironmentFailsTheFirstUse) {
    REQUIRE_FOUR_ATOM_NPUS();
    EXPECT_CHILD_PASSES("VmDevicesChild.DISABLED_BadMapFailsFirstUse",
                        {{"RBLN_VISIBLE_DEVICES", "0,1,2,3"}, {"RBLN_DEVICE_MAP", "[0,1],[1,2]"}});
}

// Checks the logical devices against RBLN_VM_TEST_EXPECT ("a,b;c,d": the
// visible NPU ids of each device), then on each device: its node is its
// first NPU's, an allocation there lands in that card's HBM and nowhere
// else, the bytes survive a round trip, and a copy to the other logical
// device arrives (through the host).
TEST(VmDevicesChild, DISABLED_UseTheExpectedLogicalDevices) {
    REQUIRE_SPAWNED();
    const char* expect = std::getenv(kExpectVar);
    ASSERT_NE(expect, nullptr);
    std::vector<std::string> groups;
    for (std::string_view rest = expect; !rest.empty();) {
        const auto semi = rest.find(';');
        groups.emplace_back(rest.substr(0, semi));
        rest = semi == std::string_view::npos ? "" : rest.substr(semi + 1);
    }
    Runtime& rt = Runtime::process();
    ASSERT_EQ(rt.device_count(), groups.size());
    EXPECT_FALSE(rt.committed());
    const auto c = cards();
    std::vector<std::shared_ptr<Device>> devs;
    std::vector<LogicalDevice> lds;
    for (unsigned i = 0; i < groups.size(); i++) {
        lds.push_back(rt.device(i));
        EXPECT_EQ(npu_list(lds[i].npus), groups[i]) << "rbln:" << i;
        devs.push_back(Device::get(i));
        EXPECT_TRUE(rt.committed());
        EXPECT_EQ(devs[i]->node_path(), c[lds[i].physical_ids[0]].accel_node)
            << "rbln:" << i << " runs on the first NPU of its group";
        // Opening the device makes its command and staging buffers:
        // settle them before the HBM baseline below.
        auto warm = devs[i]->allocate(4096);
        EXPECT_EQ(round_trip(devs[i], warm, 1), "");
    }

    constexpr std::uint64_t kSize = 8u << 20;
    std::vector<std::shared_ptr<Memory>> mems;
    for (unsigned i = 0; i < devs.size(); i++) {
        std::map<unsigned, std::optional<std::uint64_t>> before;
        for (unsigned id = 0; id < c.size(); id++)
            before[id] = hbm_used(id);
        mems.push_back(devs[i]->allocate(kSize));
        EXPECT_EQ(round_trip(devs[i], mems[i], static_cast<std::uint8_t>(10 + i)), "");
        const unsigned home = lds[i].physical_ids[0];
        for (unsigned id = 0; id < c.size(); id++) {
            const auto after = hbm_used(id);
            ASSERT_TRUE(before[id] && after) << "card " << id << " exports no hbm_used_bytes";
            if (id == home)
                EXPECT_GE(*after, *before[id] + kSize) << "rbln:" << i << " on NPU " << id;
            else
                EXPECT_EQ(*after, *before[id]) << "rbln:" << i << " touched card " << id;
        }
    }

    // rbln:0 -> rbln:1, run by rbln:1's stream.
    ASSERT_GE(devs.size(), 2u);
    const auto src = pattern(kSize, 77);
    Stream s0(devs[0]);
    copy(s0, CopyEndpoint::of(mems[0]), CopyEndpoint::of_host(src.data(), src.size()));
    const std::uint64_t via_host = devs[1]->copy_stats().cross_device_via_host;
    Stream s1(devs[1]);
    copy(s1, CopyEndpoint::of(mems[1]), CopyEndpoint::of(mems[0]));
    std::vector<std::uint8_t> out(kSize);
    copy(s1, CopyEndpoint::of_host(out.data(), out.size()), CopyEndpoint::of(mems[1]));
    EXPECT_TRUE(out == src) << "the copy between logical devices did not arrive";
    EXPECT_EQ(devs[1]->copy_stats().cross_device_via_host, via_host + 1);
    for (const auto& d : devs)
        d->synchronize();
}

TEST(VmDevicesChild, DISABLED_BadMapFailsFirstUse) {
    REQUIRE_SPAWNED();
    EXPECT_EQ(Runtime::process().device_count(), 0u);
    EXPECT_EQ(rbln_is_available(), 0);
    try {
        Device::get(0);
        ADD_FAILURE() << "Device::get accepted a bad RBLN_DEVICE_MAP";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::BadConfig);
        EXPECT_THAT(e.what(), HasSubstr("RBLN_DEVICE_MAP: NPU 1 is in group 0 and in group 1"));
    }
    EXPECT_EQ(rbln_commit(), RBLN_ERR_BAD_CONFIG);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("RBLN_DEVICE_MAP"));
    EXPECT_FALSE(Runtime::process().committed());
}

// ---- fork() -----------------------------------------------------------------

TEST(VmFork, ChildForkedAfterUseGetsTheSpawnError) {
    REQUIRE_CARD();
    EXPECT_CHILD_PASSES("VmDevicesChild.DISABLED_ForkAfterUse", {});
}

TEST(VmFork, ChildForkedBeforeUseUsesADeviceOnItsOwn) {
    REQUIRE_CARD();
    std::map<std::string, std::string> vars;
    if (have_four_atom_npus())
        vars[kExpectVar] = "group"; // the child groups the NPUs on its own
    EXPECT_CHILD_PASSES("VmDevicesChild.DISABLED_ForkBeforeUse", vars);
}

// Queries plan, they do not commit: a process that only read memory
// statistics and made a lazy storage has claimed no device, so its fork()
// child uses one (and, on four ATOM NPUs, groups them on its own).
TEST(VmFork, ChildForkedAfterOnlyStatisticsUsesADeviceOnItsOwn) {
    REQUIRE_CARD();
    std::map<std::string, std::string> vars;
    if (have_four_atom_npus())
        vars[kExpectVar] = "group";
    EXPECT_CHILD_PASSES("VmDevicesChild.DISABLED_ForkAfterStatistics", vars);
}

std::string expect_bad_fork(const std::function<void()>& use, const char* what) {
    try {
        use();
    } catch (const Error& e) {
        if (e.code() != Errc::BadFork)
            return std::string(what) + ": " + e.what() + " (not BadFork)";
        if (std::string_view(e.what()).find("spawn start method") == std::string_view::npos)
            return std::string(what) +
                   ": the message does not name the spawn start method: " + e.what();
        return "";
    }
    return std::string(what) + " worked in a child forked after use";
}

TEST(VmDevicesChild, DISABLED_ForkAfterUse) {
    REQUIRE_SPAWNED();
    auto dev = Device::get(0);
    auto m = dev->allocate(1u << 20);
    ASSERT_EQ(round_trip(dev, m, 3), "");
    Stream parent_stream(dev);
    std::vector<std::uint8_t> host(4096);

    const std::string verdict = in_fork([&]() -> std::string {
        std::string v;
        v += expect_bad_fork([] { Device::get(0); }, "Device::get");
        v += expect_bad_fork([&] { Stream s(dev); }, "a new stream on the parent's device");
        v += expect_bad_fork(
            [&] {
                copy(parent_stream, CopyEndpoint::of(m, 0, host.size()),
                     CopyEndpoint::of_host(host.data(), host.size()));
            },
            "a copy on the parent's stream");
        v += expect_bad_fork([&] { parent_stream.synchronize(); },
                             "the parent's stream's synchronize");
        v += expect_bad_fork([&] { dev->synchronize(); }, "the device's synchronize");
        v += expect_bad_fork([&] { (void)dev->allocate(4096); }, "an allocation on the device");
        v += expect_bad_fork([&] { (void)dev->allocate_host(4096); }, "a pinned host allocation");
        v += expect_bad_fork([&] { dev->flush(); }, "the device's flush");
        v += expect_bad_fork([&] { parent_stream.fill(m, 0, 4096, 0x5a, 1); },
                             "a fill on the parent's stream");
        v += expect_bad_fork([&] { (void)parent_stream.query(); }, "the parent's stream's query");
        if (rbln_check_fork() != RBLN_ERR_BAD_FORK)
            v += "rbln_check_fork did not report RBLN_ERR_BAD_FORK; ";
        if (rbln_commit() != RBLN_ERR_BAD_FORK)
            v += "rbln_commit did not report RBLN_ERR_BAD_FORK; ";
        return v;
    });
    EXPECT_EQ(verdict, "");
    // The parent keeps its device.
    EXPECT_EQ(round_trip(dev, m, 4), "");
    EXPECT_EQ(rbln_check_fork(), RBLN_OK);
}

TEST(VmDevicesChild, DISABLED_ForkBeforeUse) {
    REQUIRE_SPAWNED();
    const bool group = std::getenv(kExpectVar) != nullptr;
    Runtime& rt = Runtime::process();
    const unsigned planned = rt.device_count(); // planning only: claims nothing
    ASSERT_GT(planned, 0u);
    ASSERT_FALSE(rt.committed());

    const std::string verdict = in_fork([&]() -> std::string {
        if (group) {
            ::setenv("RBLN_VISIBLE_DEVICES", "0,1,2,3", 1);
            ::setenv("RBLN_NPUS_PER_DEVICE", "2", 1);
        }
        const unsigned want = group ? 2u : planned;
        if (Runtime::process().device_count() != want)
            return "the child plans " + std::to_string(Runtime::process().device_count()) +
                   " devices, not " + std::to_string(want);
        auto dev = Device::get(want - 1);
        auto m = dev->allocate(1u << 20);
        std::string v = round_trip(dev, m, 5);
        dev->synchronize();
        if (rbln_check_fork() != RBLN_OK)
            v += "; rbln_check_fork refused the child's own commit";
        return v;
    });
    EXPECT_EQ(verdict, "");
    // The parent's variables are its own; it commits after the child.
    EXPECT_EQ(rt.device_count(), planned);
    auto dev = Device::get(0);
    auto m = dev->allocate(1u << 20);
    EXPECT_EQ(round_trip(dev, m, 6), "");
}

TEST(VmDevicesChild, DISABLED_ForkAfterStatistics) {
    REQUIRE_SPAWNED();
    const bool group = std::getenv(kExpectVar) != nullptr;
    Runtime& rt = Runtime::process();
    const unsigned planned = rt.device_count();
    ASSERT_GT(planned, 0u);
    std::uint64_t bytes = 1;
    ASSERT_EQ(rbln_memory_allocated(0, &bytes), RBLN_OK) << rbln_last_error_message();
    EXPECT_EQ(bytes, 0u);
    std::size_t count = 0;
    ASSERT_EQ(rbln_memory_stats(0, 1, nullptr, 0, &count), RBLN_OK);
    EXPECT_GT(count, 0u);
    EXPECT_EQ(process_allocator_stats(0).memory_stats().at("reserved_bytes.all.current"), 0);
    auto lazy = Storage::create(0, 1u << 20);
    rbln_storage* c_lazy = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 4096, RBLN_STORAGE_U8, &c_lazy), RBLN_OK);
    const auto in = pattern(lazy->nbytes(), 9);
    lazy->write(0, std::as_bytes(std::span(in)));
    ASSERT_FALSE(rt.committed()) << "statistics and a lazy storage claimed the mapping";

    const std::string verdict = in_fork([&]() -> std::string {
        if (group) {
            ::setenv("RBLN_VISIBLE_DEVICES", "0,1,2,3", 1);
            ::setenv("RBLN_NPUS_PER_DEVICE", "2", 1);
        }
        const unsigned want = group ? 2u : planned;
        if (Runtime::process().device_count() != want)
            return "the child plans " + std::to_string(Runtime::process().device_count()) +
                   " devices, not " + std::to_string(want);
        auto dev = Device::get(0);
        auto m = dev->allocate(1u << 20);
        std::string v = round_trip(dev, m, 11);
        // The parent's lazy storage, committed and used by the child.
        Stream s = dev->default_stream();
        const std::shared_ptr<Memory> on_card = lazy->device_use(s, DeviceAccess::Read);
        std::vector<std::uint8_t> back(lazy->nbytes());
        copy(s, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(on_card));
        if (back != in)
            v += "; the lazy storage's data did not reach the card";
        std::uint64_t allocated = 0;
        if (rbln_memory_allocated(0, &allocated) != RBLN_OK || allocated < (2u << 20))
            v += "; the child's allocations are not in its statistics";
        dev->synchronize();
        if (rbln_check_fork() != RBLN_OK)
            v += "; rbln_check_fork refused the child's own commit";
        if (group && Runtime::process().device(0).npus.size() != 2)
            v += "; the child's rbln:0 is not a group of two NPUs";
        return v;
    });
    EXPECT_EQ(verdict, "");
    EXPECT_FALSE(rt.committed()) << "the child's commit is its own";
    // The parent commits with its own variables, after the child.
    EXPECT_EQ(rt.device_count(), planned);
    auto dev = Device::get(0);
    auto m = dev->allocate(1u << 20);
    EXPECT_EQ(round_trip(dev, m, 12), "");
    ASSERT_EQ(rbln_storage_destroy(c_lazy), RBLN_OK);
}

} // namespace
} // namespace rbln::test
