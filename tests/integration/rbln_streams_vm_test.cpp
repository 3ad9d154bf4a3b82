// SPDX-License-Identifier: GPL-2.0
// librbln streams, events and copies against the real rbln.ko and the
// emulated card: runs inside the VM (tools/scripts/test-vm.sh), not under
// host ctest.  Without an rbln card every test skips with a message.
//
//   tools/vm/rbln-vm -q --cards 2 -- build/cmake/tests/integration/rbln_umd_vm_tests

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <spawn.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/stream.hpp"

extern char** environ; // NOLINT(readability-redundant-declaration): posix_spawn wants it

namespace rbln::test {
namespace {

bool have_card() {
    static const bool have = [] {
        try {
            return Runtime::process().device_count() > 0;
        } catch (...) {
            return false;
        }
    }();
    return have;
}

#define REQUIRE_CARD()                                                                             \
    do {                                                                                           \
        if (!have_card())                                                                          \
            GTEST_SKIP() << "no rbln card (run it in the VM: tools/vm/rbln-vm -- <this binary>)";  \
    } while (0)

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; i++)
        v[i] = static_cast<std::uint8_t>(seed + i * 13 + (i >> 10));
    return v;
}

class Pages {
public:
    explicit Pages(std::size_t size) : size_(size) {
        p_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p_ == MAP_FAILED)
            throw std::runtime_error("mmap");
    }
    Pages(const Pages&) = delete;
    Pages& operator=(const Pages&) = delete;
    Pages(Pages&&) = delete;
    Pages& operator=(Pages&&) = delete;
    ~Pages() { ::munmap(p_, size_); }
    std::uint8_t* data() const { return static_cast<std::uint8_t*>(p_); }

private:
    void* p_;
    std::size_t size_;
};

std::vector<std::uint8_t> read_back(Stream& s, const std::shared_ptr<Memory>& m,
                                    std::uint64_t size) {
    std::vector<std::uint8_t> out(size);
    copy(s, CopyEndpoint::of_host(out.data(), size), CopyEndpoint::of(m, 0, size));
    return out;
}

// Runs this binary again with @filter (a DISABLED_ child case); returns the
// pid.  @ready_fd: the write end of a pipe the child signals on.
pid_t spawn_child(const std::string& filter, int ready_fd = -1) {
    const std::string self = "/proc/self/exe";
    std::string f = "--gtest_filter=" + filter;
    std::string d = "--gtest_also_run_disabled_tests";
    std::vector<char*> argv = {const_cast<char*>(self.c_str()), f.data(), d.data(), nullptr};
    if (ready_fd >= 0)
        setenv("RBLN_VM_TEST_READY_FD", std::to_string(ready_fd).c_str(), 1);
    pid_t pid = -1;
    const int err = posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ);
    unsetenv("RBLN_VM_TEST_READY_FD");
    if (err != 0)
        throw std::runtime_error(std::string("posix_spawn: ") + strerror(err));
    return pid;
}

int wait_exit(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

TEST(VmStreams, SubmissionUsesIoUringOnThisKernel) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    EXPECT_EQ(dev->submitter().path(), Submitter::Path::IoUring)
        << dev->submitter().fallback_reason();
}

TEST(VmStreams, WorkOnOneStreamRunsInSubmissionOrder) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    auto m = dev->allocate(1 << 20);
    Stream s(dev);
    // Every fill covers a smaller prefix: only in-order execution leaves
    // the staircase of values below.
    for (unsigned i = 0; i < 64; i++)
        s.fill(m, 0, (64 - i) * 16384, i + 1, 1);
    s.synchronize();
    const auto bytes = read_back(s, m, 1 << 20);
    for (unsigned i = 0; i < 64; i++)
        ASSERT_EQ(bytes[(63 - i) * 16384], i + 1) << "step " << i;
}

TEST(VmStreams, WaitEventHoldsTheOtherStreamOnTheDeviceNotTheHost) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    auto gate = dev->allocate_host(4096); // a word the host releases
    auto x = dev->allocate(4 << 20);
    auto y = dev->allocate(4 << 20);
    auto* word = reinterpret_cast<volatile std::uint64_t*>(gate->host_data());
    *word = 0;
    Stream a(dev);
    Stream b(dev);
    const std::uint64_t gate_va = gate->device_va();
    const std::shared_ptr<Memory> gb[] = {gate};
    a.enqueue(
        PacketSize::wait, [&](CommandEncoder& e) { e.wait(gate_va, 1, 20'000'000'000ull); }, gb);
    a.fill(x, 0, 4 << 20, 0x5a, 1);
    Event e;
    e.record(a);
    b.wait_event(e); // returns at once: the fence is the kernel's
    copy(b, CopyEndpoint::of(y), CopyEndpoint::of(x), true);
    dev->flush();
    EXPECT_FALSE(b.query()) << "b's copy waits for a, which waits for the host's word";
    EXPECT_FALSE(e.query());
    *word = 1;
    b.synchronize();
    EXPECT_TRUE(e.query());
    const auto bytes = read_back(b, y, 4 << 20);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x5a), 4 << 20);
}

TEST(VmStreams, EventsTimeTheWorkBetweenThem) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    auto m = dev->allocate(32 << 20);
    Stream s(dev);
    Event e0;
    Event e1;
    Event e2;
    e0.record(s);
    s.fill(m, 0, 32 << 20, 1, 1);
    e1.record(s);
    for (int i = 0; i < 4; i++)
        s.fill(m, 0, 32 << 20, 2, 1);
    e2.record(s);
    e2.synchronize();
    const double t01 = Event::elapsed_time(e0, e1);
    const double t02 = Event::elapsed_time(e0, e2);
    std::printf("elapsed: 1 fill of 32 MiB %.3f ms, 5 fills %.3f ms (ratio %.2f)\n", t01, t02,
                t02 / t01);
    EXPECT_GT(t01, 0.0);
    EXPECT_GT(t02, t01);
}

TEST(VmStreams, CopiesOfEveryKindArriveByteForByte) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    const std::size_t n = 10 << 20; // > the 4 MiB staging buffer
    const auto src = pattern(n, 1);
    auto d = dev->allocate(n);
    auto d2 = dev->allocate(n);
    Stream s(dev);
    const CopyStats before = dev->copy_stats();

    // Pageable -> device (sync, chunked), device -> pageable (sync).
    copy(s, CopyEndpoint::of(d, 0, n), CopyEndpoint::of_host(src.data(), n), true);
    EXPECT_EQ(read_back(s, d, n), src);

    // Pinned host GEM buffer -> device -> pinned (async both ways).
    auto pin_in = dev->allocate_host(n);
    auto pin_out = dev->allocate_host(n);
    const auto src2 = pattern(n, 77);
    std::memcpy(pin_in->host_data(), src2.data(), n);
    copy(s, CopyEndpoint::of(d, 0, n), CopyEndpoint::of(pin_in, 0, n), true);
    copy(s, CopyEndpoint::of(d2, 0, n), CopyEndpoint::of(d, 0, n), true); // device to device
    copy(s, CopyEndpoint::of(pin_out, 0, n), CopyEndpoint::of(d2, 0, n), true);
    s.synchronize();
    EXPECT_EQ(std::memcmp(pin_out->host_data(), src2.data(), n), 0);

    // Registered user memory: a plain pointer inside it is pinned (async).
    const Pages pages(n);
    auto reg = dev->register_host(pages.data(), n);
    copy(s, CopyEndpoint::of_host(pages.data() + 4096, 8192), CopyEndpoint::of(d, 0, 8192));
    EXPECT_EQ(std::memcmp(pages.data() + 4096, src2.data(), 8192), 0);

    // Strided on both sides (sync): 300 rows of 1000 bytes.
    const auto host = pattern(300 * 4096, 9);
    copy(s, CopyEndpoint::of(d, 0, 300000).strided(1000, 2048),
         CopyEndpoint::of_host(host.data(), 300000).strided(1000, 4096));
    std::vector<std::uint8_t> back(300000);
    copy(s, CopyEndpoint::of_host(back.data(), back.size()),
         CopyEndpoint::of(d, 0, 300000).strided(1000, 2048));
    for (int r = 0; r < 300; r++)
        ASSERT_EQ(std::memcmp(back.data() + r * 1000, host.data() + r * 4096, 1000), 0) << r;

    // Broadcast: a 16-byte source repeated over 1 MiB.
    const auto unit = pattern(16, 200);
    copy(s, CopyEndpoint::of(d, 0, 1 << 20), CopyEndpoint::of_host(unit.data(), 16));
    const auto rep = read_back(s, d, 1 << 20);
    for (std::size_t i = 0; i < rep.size(); i += 4099)
        ASSERT_EQ(rep[i], unit[i % 16]) << i;

    const CopyStats after = dev->copy_stats();
    EXPECT_EQ(after.async_h2d - before.async_h2d, 1u);
    EXPECT_EQ(after.async_d2d - before.async_d2d, 1u);
    EXPECT_EQ(after.async_d2h - before.async_d2h, 2u);
    EXPECT_GE(after.sync_h2d - before.sync_h2d, 3u);
}

TEST(VmStreams, ACopyKeepsItsBuffersAfterTheCallerDropsThem) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    const std::size_t n = 8 << 20;
    auto d = dev->allocate(n);
    auto pin = dev->allocate_host(n);
    std::memset(pin->host_data(), 0x3c, n);
    Stream s(dev);
    copy(s, CopyEndpoint::of(d), CopyEndpoint::of(pin), true);
    const std::weak_ptr<Memory> watch = pin;
    pin.reset(); // the job still holds it
    s.synchronize();
    EXPECT_TRUE(watch.expired());
    const auto bytes = read_back(s, d, n);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x3c), static_cast<long>(n));
}

TEST(VmStreams, CopiesBetweenTwoLogicalDevicesGoThroughHostMemory) {
    REQUIRE_CARD();
    if (Runtime::process().device_count() < 2)
        GTEST_SKIP() << "needs two logical devices (rbln-vm --cards 2)";
    auto a = Device::get(0);
    auto b = Device::get(1);
    const std::size_t n = 6 << 20;
    const auto src = pattern(n, 42);
    auto da = a->allocate(n);
    auto db = b->allocate(n);
    Stream sa = a->default_stream();
    Stream sb = b->default_stream();
    copy(sa, CopyEndpoint::of(da, 0, n), CopyEndpoint::of_host(src.data(), n));
    copy(sb, CopyEndpoint::of(db, 0, n), CopyEndpoint::of(da, 0, n));
    EXPECT_EQ(read_back(sb, db, n), src);
    EXPECT_GE(b->copy_stats().cross_device_via_host, 1u);
    EXPECT_EQ(b->copy_stats().cross_device_card_to_card, 0u);
}

TEST(VmStreams, AProcessKilledMidStreamLeavesTheCardUsable) {
    REQUIRE_CARD();
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = spawn_child("VmChild.DISABLED_BusyUntilKilled", fds[1]);
    close(fds[1]);
    char c = 0;
    ASSERT_EQ(read(fds[0], &c, 1), 1) << "the child did not get its work going";
    close(fds[0]);
    kill(child, SIGKILL);
    const int st = wait_exit(child);
    EXPECT_TRUE(WIFSIGNALED(st));
    // The next process (and this one) use the card as before.
    const pid_t next = spawn_child("VmChild.DISABLED_RoundTrip");
    const int st2 = wait_exit(next);
    EXPECT_TRUE(WIFEXITED(st2) && WEXITSTATUS(st2) == 0) << "status " << st2;
    auto dev = Device::get(0);
    auto m = dev->allocate(1 << 20);
    Stream s(dev);
    s.fill(m, 0, 1 << 20, 0x99, 1);
    const auto bytes = read_back(s, m, 1 << 20);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x99), 1 << 20);
}

TEST(VmStreams, WithIoUringDisabledTheIoctlsDoTheSameWork) {
    REQUIRE_CARD();
    const char* knob = "/proc/sys/kernel/io_uring_disabled";
    std::string old;
    {
        std::ifstream in(knob);
        if (!(in >> old))
            GTEST_SKIP() << "no " << knob << " on this kernel";
    }
    {
        std::ofstream out(knob);
        out << "2";
        if (!out.flush())
            GTEST_SKIP() << "cannot write " << knob << " (not root?)";
    }
    const pid_t child = spawn_child("VmChild.DISABLED_RoundTripOverIoctls");
    const int st = wait_exit(child);
    std::ofstream(knob) << old;
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

TEST(VmStreams, AnSqpollRingDoesTheSameWork) {
    REQUIRE_CARD();
    setenv("RBLN_URING_SQPOLL", "20", 1);
    const pid_t child = spawn_child("VmChild.DISABLED_ManyJobsOverSqpoll");
    unsetenv("RBLN_URING_SQPOLL");
    const int st = wait_exit(child);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

TEST(VmStreams, TheSqpollRingsOfTwoDevicesShareOnePollingThread) {
    REQUIRE_CARD();
    if (Runtime::process().device_count() < 2)
        GTEST_SKIP() << "needs two logical devices (rbln-vm --cards 2)";
    setenv("RBLN_URING_SQPOLL", "20", 1);
    const pid_t child = spawn_child("VmChild.DISABLED_TwoDevicesOverSqpoll");
    unsetenv("RBLN_URING_SQPOLL");
    const int st = wait_exit(child);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

// ---- child processes (run by the tests above) ---------------------------------------

void round_trip(Submitter::Path expected) {
    auto dev = Device::get(0);
    ASSERT_EQ(dev->submitter().path(), expected) << dev->submitter().fallback_reason();
    const std::size_t n = 3 << 20;
    const auto src = pattern(n, 5);
    auto d = dev->allocate(n);
    auto pin = dev->allocate_host(n);
    std::memcpy(pin->host_data(), src.data(), n);
    Stream s(dev);
    Event e0;
    Event e1;
    e0.record(s);
    copy(s, CopyEndpoint::of(d, 0, n), CopyEndpoint::of(pin, 0, n), true);
    e1.record(s);
    EXPECT_EQ(read_back(s, d, n), src);
    EXPECT_GT(Event::elapsed_time(e0, e1), 0.0);
}

TEST(VmChild, DISABLED_RoundTrip) {
    round_trip(Submitter::Path::IoUring);
}

TEST(VmChild, DISABLED_RoundTripOverIoctls) {
    round_trip(Submitter::Path::Ioctl);
}

// More jobs than the ring has SQEs, enqueued at once: the submitter waits
// for the polling thread to take SQEs instead of failing on a full ring.
TEST(VmChild, DISABLED_ManyJobsOverSqpoll) {
    auto dev = Device::get(0);
    ASSERT_EQ(dev->submitter().path(), Submitter::Path::IoUring)
        << dev->submitter().fallback_reason();
    ASSERT_TRUE(dev->submitter().sqpoll()) << "RBLN_URING_SQPOLL=20 gave no SQPOLL ring";
    constexpr unsigned kJobs = 700;
    auto m = dev->allocate(kJobs * 64);
    Stream s(dev);
    for (unsigned i = 0; i < kJobs; i++)
        s.fill(m, i * 64, 64, (i % 251) + 1, 1);
    s.synchronize();
    const auto bytes = read_back(s, m, kJobs * 64);
    for (unsigned i = 0; i < kJobs; i++)
        ASSERT_EQ(bytes[(i * 64) + 63], (i % 251) + 1) << "job " << i;
    EXPECT_GE(dev->submitter().stats().completions, kJobs);
    round_trip(Submitter::Path::IoUring);
}

// This process's io_uring SQPOLL threads (named iou-sqp-<pid>).
int sqpoll_threads() {
    int n = 0;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream comm(t.path() / "comm");
        std::string name;
        if (std::getline(comm, name) && name.rfind("iou-sqp", 0) == 0)
            n++;
    }
    return n;
}

TEST(VmChild, DISABLED_TwoDevicesOverSqpoll) {
    auto a = Device::get(0);
    auto b = Device::get(1);
    ASSERT_TRUE(a->submitter().sqpoll() && b->submitter().sqpoll());
    EXPECT_EQ(sqpoll_threads(), 1) << "each device polls with a thread of its own";
    for (const auto& dev : {a, b}) {
        auto m = dev->allocate(4096);
        Stream s(dev);
        s.fill(m, 0, 4096, 0x5a, 1);
        const auto bytes = read_back(s, m, 4096);
        EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x5a), 4096);
    }
}

TEST(VmChild, DISABLED_BusyUntilKilled) {
    auto dev = Device::get(0);
    auto m = dev->allocate(64 << 20);
    auto gate = dev->allocate_host(4096); // never released: the ring stays held
    const std::uint64_t va = gate->device_va();
    const std::shared_ptr<Memory> gb[] = {gate};
    Stream s(dev);
    Stream t(dev);
    for (int i = 0; i < 16; i++)
        s.fill(m, 0, 64 << 20, static_cast<std::uint64_t>(i), 1);
    t.enqueue(
        PacketSize::wait, [&](CommandEncoder& e) { e.wait(va, 1); }, gb);
    for (int i = 0; i < 16; i++)
        t.fill(m, 0, 1 << 20, 1, 1);
    dev->flush();
    const char* fd = std::getenv("RBLN_VM_TEST_READY_FD");
    ASSERT_NE(fd, nullptr);
    const char c = 'r';
    ASSERT_EQ(write(static_cast<int>(std::strtol(fd, nullptr, 10)), &c, 1), 1);
    for (;;)
        pause();
}

} // namespace
} // namespace rbln::test
