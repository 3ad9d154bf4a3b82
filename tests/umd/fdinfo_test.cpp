// SPDX-License-Identifier: GPL-2.0
// The fdinfo parser and the /proc scan for DRM clients, against fake trees.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_sysfs.hpp"
#include "rbln/fdinfo.hpp"

namespace rbln::test::fdinfo_test {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;

// ---- sizes

TEST(FdinfoSize, NumberWithoutUnitIsBytes) {
    EXPECT_EQ(parse_fdinfo_size("4096"), 4096u);
    EXPECT_EQ(parse_fdinfo_size("0"), 0u);
    EXPECT_EQ(parse_fdinfo_size("18446744073709551615"), 18446744073709551615ull);
}

TEST(FdinfoSize, BinaryUnitsAreAccepted) {
    EXPECT_EQ(parse_fdinfo_size("4 KiB"), 4 * kKiB);
    EXPECT_EQ(parse_fdinfo_size("2 MiB"), 2 * kMiB);
    EXPECT_EQ(parse_fdinfo_size("3 GiB"), 3ull << 30);
    EXPECT_EQ(parse_fdinfo_size("1 TiB"), 1ull << 40);
    EXPECT_EQ(parse_fdinfo_size("  7 KiB \t"), 7 * kKiB);
    EXPECT_EQ(parse_fdinfo_size("7KiB"), 7 * kKiB);
}

TEST(FdinfoSize, MalformedOrOverflowingSizesAreRejected) {
    for (const char* bad : {"", " ", "KiB", "4 kB", "4 KB", "4 kib", "4 KiB extra", "-1", "1.5 MiB",
                            "0x10", "4 PiB", "16777216 TiB", "18446744073709551616"})
        EXPECT_EQ(parse_fdinfo_size(bad), std::nullopt) << "'" << bad << "'";
}

// ---- one fdinfo file

TEST(FdinfoParse, EveryKnownKeyIsRead) {
    ClientSpec spec;
    spec.client_id = 7;
    spec.hbm = {"2 MiB", "0", "4096", "1 GiB"};
    spec.memory = "64 KiB";
    spec.pinned = "8 KiB";
    spec.asid = 5;
    const FdinfoRecord r = parse_fdinfo(fdinfo_text(spec));
    EXPECT_EQ(r.driver, "rbln");
    EXPECT_EQ(r.pdev, "0000:00:04.0");
    EXPECT_EQ(r.client_id, 7u);
    ASSERT_EQ(r.hbm.size(), 4u);
    EXPECT_EQ(r.hbm[0].total_bytes, 2 * kMiB);
    EXPECT_EQ(r.hbm[0].resident_bytes, 2 * kMiB);
    EXPECT_EQ(r.hbm[0].shared_bytes, 0u);
    EXPECT_EQ(r.hbm[1].total_bytes, 0u);
    EXPECT_EQ(r.hbm[2].total_bytes, 4096u);
    EXPECT_EQ(r.hbm[3].total_bytes, 1ull << 30);
    EXPECT_EQ(r.host.total_bytes, 64 * kKiB);
    EXPECT_EQ(r.host.resident_bytes, 64 * kKiB);
    EXPECT_EQ(r.host.shared_bytes, 0u);
    EXPECT_EQ(r.pinned_bytes, 8 * kKiB);
    EXPECT_EQ(r.asid, 5u);
    EXPECT_EQ(r.mmu_faults, 0u);
}

TEST(FdinfoParse, MissingKeysStayUnknown) {
    const FdinfoRecord r = parse_fdinfo("drm-driver:\trbln\ndrm-total-hbm0:\t2 MiB\n");
    EXPECT_EQ(r.driver, "rbln");
    EXPECT_EQ(r.pdev, "");
    EXPECT_EQ(r.client_id, std::nullopt);
    ASSERT_EQ(r.hbm.size(), 1u);
    EXPECT_EQ(r.hbm[0].total_bytes, 2 * kMiB);
    EXPECT_EQ(r.hbm[0].resident_bytes, std::nullopt);
    EXPECT_EQ(r.hbm[0].shared_bytes, std::nullopt);
    EXPECT_EQ(r.host.total_bytes, std::nullopt);
    EXPECT_EQ(r.pinned_bytes, std::nullopt);
    EXPECT_EQ(r.asid, std::nullopt);
    EXPECT_EQ(r.mmu_faults, std::nullopt);
}

TEST(FdinfoParse, EmptyTextGivesAnEmptyRecord) {
    const FdinfoRecord r = parse_fdinfo("");
    EXPECT_EQ(r.driver, "");
    EXPECT_TRUE(r.hbm.empty());
}

TEST(FdinfoParse, ChipletsWithoutKeysAreHoles) {
    const FdinfoRecord r = parse_fdinfo("drm-total-hbm2:\t4 KiB\n");
    ASSERT_EQ(r.hbm.size(), 3u);
    EXPECT_EQ(r.hbm[0].total_bytes, std::nullopt);
    EXPECT_EQ(r.hbm[1].total_bytes, std::nullopt);
    EXPECT_EQ(r.hbm[2].total_bytes, 4 * kKiB);
}

TEST(FdinfoParse, GarbageLinesAndUnknownKeysAreIgnored) {
    const std::string text = std::string("no colon here\n"
                                         "\n"
                                         ":\t5\n"
                                         "drm-driver:\trbln\n"
                                         "drm-total-hbm0:\tlots\n"  // bad value
                                         "drm-total-hbm1:\t3 MiB\n" // good
                                         "drm-total-hbm99:\t4\n"    // past the chiplet limit
                                         "drm-total-hbm01:\t4\n"    // not a kernel spelling
                                         "drm-total-hbmx:\t4\n"     // no index
                                         "drm-total-:\t4\n"         // no region
                                         "drm-engine-chiplet0:\t123 ns\n"
                                         "drm-purgeable-memory:\t0\n"
                                         "drm-active-hbm1:\t9 MiB\n"
                                         "drm-client-id:\tseven\n"
                                         "rbln-asid:\t-1\n"
                                         "rbln-pinned-memory:\t12 furlongs\n"
                                         "rbln-future-key:\t1\n") +
                             std::string("\xff\xfe:\x01\n", 5) + "drm-pdev:\t0000:00:05.0";
    const FdinfoRecord r = parse_fdinfo(text);
    EXPECT_EQ(r.driver, "rbln");
    EXPECT_EQ(r.pdev, "0000:00:05.0"); // last line without '\n' still counts
    EXPECT_EQ(r.client_id, std::nullopt);
    EXPECT_EQ(r.asid, std::nullopt);
    EXPECT_EQ(r.pinned_bytes, std::nullopt);
    ASSERT_EQ(r.hbm.size(), 2u);
    EXPECT_EQ(r.hbm[0].total_bytes, std::nullopt);
    EXPECT_EQ(r.hbm[1].total_bytes, 3 * kMiB);
    EXPECT_EQ(r.hbm[1].resident_bytes, std::nullopt); // drm-active is not resident
    EXPECT_EQ(r.host.total_bytes, std::nullopt);
}

TEST(FdinfoParse, SpacesCarriageReturnsAndTabsAroundValuesAreTrimmed) {
    const FdinfoRecord r =
        parse_fdinfo("drm-driver:  rbln \r\ndrm-client-id: 12\r\nrbln-mmu-faults:\t\t3\n");
    EXPECT_EQ(r.driver, "rbln");
    EXPECT_EQ(r.client_id, 12u);
    EXPECT_EQ(r.mmu_faults, 3u);
}

// ---- the /proc scan

class FdinfoScan : public ::testing::Test {
protected:
    ClientScan scan() const { return scan_clients(Sysfs(fake.root(), fake.probe())); }
    FakeSysfs fake;
};

TEST_F(FdinfoScan, AbsentProcGivesAnEmptyScan) {
    const ClientScan s = scan();
    EXPECT_TRUE(s.clients.empty());
    EXPECT_EQ(s.processes_denied, 0u);
}

TEST_F(FdinfoScan, ProcessesWithoutAccelFdsGiveNoClients) {
    fake.add_process(1, "init");
    fake.add_process(42, "bash");
    fake.add_fd(42, 0, makedev(136, 0), std::string("pos:\t0\nflags:\t02\n"));
    const ClientScan s = scan();
    EXPECT_TRUE(s.clients.empty());
    EXPECT_EQ(s.processes_denied, 0u);
}

TEST_F(FdinfoScan, ClientCarriesItsProcessNodeAndFigures) {
    fake.add_process(1234, "python3");
    ClientSpec spec;
    spec.client_id = 7;
    spec.hbm = {"2 MiB", "0", "0", "0"};
    fake.add_fd(1234, 5, accel_dev(3), fdinfo_text(spec));
    const ClientScan s = scan();
    ASSERT_EQ(s.clients.size(), 1u);
    const AccelClient& c = s.clients[0];
    EXPECT_EQ(c.pid, 1234);
    EXPECT_EQ(c.comm, "python3");
    EXPECT_EQ(c.accel_minor, 3u);
    EXPECT_EQ(c.info.client_id, 7u);
    EXPECT_EQ(c.info.pdev, "0000:00:04.0");
    ASSERT_EQ(c.info.hbm.size(), 4u);
    EXPECT_EQ(c.info.hbm[0].total_bytes, 2 * kMiB);
    EXPECT_EQ(c.info.host.total_bytes, 64 * kKiB);
    EXPECT_EQ(c.info.asid, 5u);
    EXPECT_THAT(c.holders, ElementsAre(Field(&ClientHolder::pid, 1234)));
}

TEST_F(FdinfoScan, OneClientThroughSeveralFdsAndProcessesIsCountedOnceUnderTheLowestPid) {
    ClientSpec shared;
    shared.client_id = 7;
    ClientSpec own;
    own.client_id = 8;
    // 300 opened the node (fds 3 and 4 are dups) and passed it to 120
    // (SCM_RIGHTS) and to its child 301 (fork); 300 has a second client.
    fake.add_process(300, "parent");
    fake.add_fd(300, 3, accel_dev(0), fdinfo_text(shared));
    fake.add_fd(300, 4, accel_dev(0), fdinfo_text(shared));
    fake.add_fd(300, 9, accel_dev(0), fdinfo_text(own));
    fake.add_process(301, "child");
    fake.add_fd(301, 3, accel_dev(0), fdinfo_text(shared));
    fake.add_process(120, "receiver");
    fake.add_fd(120, 11, accel_dev(0), fdinfo_text(shared));

    const ClientScan s = scan();
    ASSERT_EQ(s.clients.size(), 2u);
    EXPECT_EQ(s.clients[0].pid, 120);
    EXPECT_EQ(s.clients[0].comm, "receiver");
    EXPECT_EQ(s.clients[0].info.client_id, 7u);
    EXPECT_THAT(s.clients[0].holders,
                ElementsAre(Field(&ClientHolder::pid, 120), Field(&ClientHolder::pid, 300),
                            Field(&ClientHolder::pid, 301)));
    EXPECT_EQ(s.clients[0].holders[2].comm, "child");
    EXPECT_EQ(s.clients[1].pid, 300);
    EXPECT_EQ(s.clients[1].info.client_id, 8u);
    EXPECT_THAT(s.clients[1].holders, ElementsAre(Field(&ClientHolder::pid, 300)));
}

TEST_F(FdinfoScan, SameClientIdOnAnotherCardIsAnotherClient) {
    ClientSpec a;
    a.client_id = 7;
    ClientSpec b = a;
    b.pdev = "0000:00:05.0";
    fake.add_process(10, "two-cards");
    fake.add_fd(10, 3, accel_dev(0), fdinfo_text(a));
    fake.add_fd(10, 4, accel_dev(1), fdinfo_text(b));
    const ClientScan s = scan();
    ASSERT_EQ(s.clients.size(), 2u);
    EXPECT_EQ(s.clients[0].info.pdev, "0000:00:04.0");
    EXPECT_EQ(s.clients[0].accel_minor, 0u);
    EXPECT_EQ(s.clients[1].info.pdev, "0000:00:05.0");
    EXPECT_EQ(s.clients[1].accel_minor, 1u);
}

TEST_F(FdinfoScan, FdsWithoutClientIdAreNotMerged) {
    const std::string text = "drm-driver:\trbln\ndrm-pdev:\t0000:00:04.0\n";
    fake.add_process(10, "old");
    fake.add_fd(10, 3, accel_dev(0), text);
    fake.add_fd(10, 4, accel_dev(0), text);
    EXPECT_EQ(scan().clients.size(), 2u);
}

TEST_F(FdinfoScan, FdsThatAreNotAccelNodesAreIgnoredWhateverTheirFdinfoSays) {
    const std::string rbln = fdinfo_text(ClientSpec{});
    fake.add_process(10, "mixed");
    fake.add_fd(10, 3, makedev(226, 128), rbln); // /dev/dri/renderD128 (DRM, not accel)
    fake.add_fd(10, 4, makedev(1, 3), rbln);     // /dev/null
    fake.add_fd(10, 5, std::nullopt, rbln);      // a socket or regular file
    fake.add_fd(10, 6, accel_dev(0), rbln);      // the only client
    const ClientScan s = scan();
    ASSERT_EQ(s.clients.size(), 1u);
    EXPECT_EQ(s.clients[0].accel_minor, 0u);
}

TEST_F(FdinfoScan, AccelFdsOfOtherDriversAreIgnored) {
    ClientSpec other;
    other.driver = "amdxdna";
    fake.add_process(10, "other-npu");
    fake.add_fd(10, 3, accel_dev(0), fdinfo_text(other));
    fake.add_fd(10, 4, accel_dev(1), std::string("drm-pdev:\t0000:00:04.0\n")); // no drm-driver
    EXPECT_TRUE(scan().clients.empty());
    EXPECT_EQ(scan_clients(Sysfs(fake.root(), fake.probe()), "amdxdna").clients.size(), 1u);
}

TEST_F(FdinfoScan, ProcessesWhoseFdsCannotBeInspectedAreCountedOnceEach) {
    const std::string rbln = fdinfo_text(ClientSpec{});
    fake.add_process(10, "mine");
    fake.add_fd(10, 3, accel_dev(0), rbln);
    fake.add_process(20, "theirs");
    fake.add_fd(20, 3, accel_dev(0), fdinfo_text(ClientSpec{.client_id = 2}));
    fake.add_fd(20, 4, accel_dev(0), fdinfo_text(ClientSpec{.client_id = 3}));
    fake.deny_fds(20);
    const ClientScan s = scan();
    EXPECT_EQ(s.processes_denied, 1u);
    ASSERT_EQ(s.clients.size(), 1u);
    EXPECT_EQ(s.clients[0].pid, 10);
}

TEST_F(FdinfoScan, FdThatClosedDuringTheScanIsSkippedNotCounted) {
    fake.add_process(10, "racy");
    fake.add_fd(10, 3, accel_dev(0), std::nullopt); // fdinfo gone: ENOENT
    const ClientScan s = scan();
    EXPECT_TRUE(s.clients.empty());
    EXPECT_EQ(s.processes_denied, 0u);
}

TEST_F(FdinfoScan, EntriesOfProcThatAreNotProcessesAreIgnored) {
    const std::string rbln = fdinfo_text(ClientSpec{});
    fake.add_process(10, "real");
    fake.add_fd(10, 3, accel_dev(0), rbln);
    // /proc/self and friends would list the scanner itself a second time.
    std::filesystem::create_directories(fake.root() / "proc/self/fd");
    fake.write("proc/self/fd/3", "");
    fake.write("proc/self/fdinfo/3", rbln);
    std::filesystem::create_directories(fake.root() / "proc/sys");
    fake.write("proc/uptime", "1.0 1.0");
    fake.write("proc/10/fd/not-a-number", "");
    const ClientScan s = scan();
    ASSERT_EQ(s.clients.size(), 1u);
    EXPECT_EQ(s.clients[0].pid, 10);
}

TEST_F(FdinfoScan, UnreadableCommGivesAnEmptyName) {
    fake.add_process(10, "x");
    fake.remove("proc/10/comm");
    fake.add_fd(10, 3, accel_dev(0), fdinfo_text(ClientSpec{}));
    const ClientScan s = scan();
    ASSERT_EQ(s.clients.size(), 1u);
    EXPECT_EQ(s.clients[0].comm, "");
}

// A process whose fd directory cannot be listed (another user's, as seen
// by a non-root user): real permissions, so as root the scan runs in a
// child that drops to nobody.
TEST_F(FdinfoScan, ProcessWhoseFdDirectoryIsUnreadableIsCounted) {
    fake.add_process(10, "mine");
    fake.add_fd(10, 3, accel_dev(0), fdinfo_text(ClientSpec{}));
    fake.add_process(20, "theirs");
    fake.add_fd(20, 3, accel_dev(0), fdinfo_text(ClientSpec{.client_id = 2}));
    namespace fs = std::filesystem;
    fs::permissions(fake.root(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    fs::permissions(fake.root() / "proc/20/fd", fs::perms::none);

    if (::geteuid() != 0) {
        const ClientScan s = scan();
        EXPECT_EQ(s.processes_denied, 1u);
        ASSERT_EQ(s.clients.size(), 1u);
        EXPECT_EQ(s.clients[0].pid, 10);
        return;
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        int code = 10;
        if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
            const ClientScan s = scan();
            code = (s.processes_denied == 1 && s.clients.size() == 1 && s.clients[0].pid == 10)
                       ? 0
                       : 20 + static_cast<int>(s.processes_denied);
        }
        ::_exit(code);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "10: could not drop to nobody; 20+N: N processes counted instead of 1 (or the "
           "wrong clients)";
}

// The probe that runs on a real machine: stat() of the path.
TEST(CharDeviceProbe, RealProbeReadsTheDeviceNumberOfCharacterDevices) {
    const auto null = stat_char_device("/dev/null");
    ASSERT_TRUE(null.ok()) << null.error().what();
    ASSERT_TRUE(null->has_value());
    EXPECT_EQ(::major(**null), 1u);
    EXPECT_EQ(::minor(**null), 3u);
    const auto dir = stat_char_device("/");
    ASSERT_TRUE(dir.ok());
    EXPECT_FALSE(dir->has_value());
    const auto absent = stat_char_device("/nonexistent/rbln-test");
    ASSERT_FALSE(absent.ok());
    EXPECT_EQ(absent.error().code(), Errc::NotFound);
}

TEST(CharDeviceProbe, SysfsWithoutAProbeStatsBelowItsRoot) {
    const Sysfs sys("/");
    const auto null = sys.char_device("/dev/null");
    ASSERT_TRUE(null.ok());
    ASSERT_TRUE(null->has_value());
    EXPECT_EQ(::major(**null), 1u);
    // Through /proc/self/fd, as the scanner looks at fds: fd 0..2 of the
    // test may be anything, so open /dev/null and look at that fd.
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const auto via_proc = sys.char_device("/proc/self/fd/" + std::to_string(fd));
    ::close(fd);
    ASSERT_TRUE(via_proc.ok()) << via_proc.error().what();
    ASSERT_TRUE(via_proc->has_value());
    EXPECT_EQ(::minor(**via_proc), 3u);
}

} // namespace
} // namespace rbln::test::fdinfo_test
