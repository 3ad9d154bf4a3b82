// SPDX-License-Identifier: GPL-2.0
// Offload scopes (rbln/offload.hpp) on real files and real io_uring: the
// host copies of storages made in a scope go to an unnamed file at the
// scope's offload points and come back exactly when read, written or
// uploaded (storages on a Device over a FakeKernel that runs its packets);
// ENOSPC (/dev/full), a short write (RLIMIT_FSIZE, in a child process) and
// a failed read back keep the data and say so.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "device_fixture.hpp"
#include "fake_kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/offload.hpp"
#include "rbln/storage.hpp"

namespace rbln::test::offload_test {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1024 * 1024;

/// A device, its allocator and a stream over one FakeKernel.
struct Card {
    Card() : k(std::make_shared<FakeKernel>()) {
        alloc = DeviceAllocator::for_kernels(0, {{0, k}});
        dev = fake_device(k, Path::Ioctl);
        stream.emplace(dev->default_stream());
    }
    ~Card() {
        stream.reset();
        dev.reset();
    }
    Card(const Card&) = delete;
    Card& operator=(const Card&) = delete;
    Card(Card&&) = delete;
    Card& operator=(Card&&) = delete;

    std::shared_ptr<Storage> lazy(std::uint64_t n) {
        return Storage::create(dev, *alloc, n, ElementType::U8,
                               StorageOptions{CommitMode::Lazy, {}});
    }
    std::vector<std::byte> on_card(Storage& s) {
        const std::byte* p = k->translate(s.data_ptr(), s.nbytes());
        return p == nullptr ? std::vector<std::byte>{} : std::vector<std::byte>(p, p + s.nbytes());
    }
    void device_fill(Storage& s, std::uint8_t value) {
        const auto& m = s.device_use(*stream, DeviceAccess::Write);
        stream->fill(m, 0, s.nbytes(), value);
        stream->synchronize();
    }

    std::shared_ptr<FakeKernel> k;
    std::unique_ptr<DeviceAllocator> alloc;
    std::shared_ptr<Device> dev;
    std::optional<Stream> stream;
};

/// A fresh directory, removed with what is in it.
struct TempDir {
    TempDir() {
        std::string t =
            (std::filesystem::temp_directory_path() / "rbln-offload-test-XXXXXX").string();
        if (::mkdtemp(t.data()) == nullptr)
            throw std::runtime_error("mkdtemp failed");
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    TempDir(TempDir&&) = delete;
    TempDir& operator=(TempDir&&) = delete;

    std::size_t entries() const {
        return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path),
                                                      std::filesystem::directory_iterator()));
    }
    OffloadOptions options() const {
        OffloadOptions o;
        o.directory = path;
        return o;
    }
    std::string path;
};

/// Bytes that differ from one position and one seed to the next.
std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    std::uint32_t x = seed * 2654435761U + 1;
    for (auto& b : v) {
        x = x * 1664525U + 1013904223U;
        b = static_cast<std::byte>(x >> 24);
    }
    return v;
}

std::vector<std::byte> read_all(Storage& s) {
    std::vector<std::byte> out(s.nbytes());
    s.read(0, out);
    return out;
}

// ---- the round trip ---------------------------------------------------------

TEST(Offload, ScopeExitPagesTheHostCopiesOutAndAReadBringsBackEveryByte) {
    Card c;
    TempDir dir;
    const std::vector<std::uint64_t> sizes = {1, 4096, 5000, kMiB + 3};
    std::vector<std::shared_ptr<Storage>> storages;
    std::optional<OffloadStats> stats;
    {
        auto scope = offload(dir.options());
        EXPECT_TRUE(scope.uses_io_uring());
        for (std::size_t i = 0; i < sizes.size(); i++) {
            storages.push_back(c.lazy(sizes[i]));
            storages.back()->write(0, pattern(sizes[i], i));
        }
        scope.close();
        stats = scope.stats();
    }
    std::uint64_t total = 0;
    for (auto n : sizes)
        total += n;
    EXPECT_EQ(stats->writes, sizes.size());
    EXPECT_EQ(stats->bytes_offloaded, total);
    EXPECT_EQ(stats->bytes_paged_out, total);
    EXPECT_EQ(stats->failures, 0u);
    for (std::size_t i = 0; i < sizes.size(); i++) {
        EXPECT_TRUE(storages[i]->host_paged_out()) << i;
        EXPECT_FALSE(storages[i]->host_in_memory()) << i;
    }
    const OffloadStats before = offload_totals();
    for (std::size_t i = 0; i < sizes.size(); i++) {
        EXPECT_EQ(read_all(*storages[i]), pattern(sizes[i], i)) << "storage of " << sizes[i];
        EXPECT_TRUE(storages[i]->host_in_memory());
    }
    const OffloadStats after = offload_totals();
    EXPECT_EQ(after.reads - before.reads, sizes.size());
    EXPECT_EQ(after.bytes_brought_back - before.bytes_brought_back, total);
    for (const auto& s : storages)
        EXPECT_EQ(s->transfers().uploads + s->transfers().downloads, 0u)
            << "offloading is not a device transfer";
}

TEST(Offload, TheFileHasNoNameInTheDirectoryNeitherOpenNorAfter) {
    Card c;
    TempDir dir;
    std::shared_ptr<Storage> s;
    {
        auto scope = offload(dir.options());
        s = c.lazy(64 * 1024);
        s->write(0, pattern(64 * 1024, 7));
        scope.offload_now();
        EXPECT_TRUE(s->host_paged_out());
        EXPECT_EQ(dir.entries(), 0u) << "an O_TMPFILE (or unlinked) file";
    }
    EXPECT_EQ(dir.entries(), 0u);
    EXPECT_EQ(read_all(*s), pattern(64 * 1024, 7)) << "the file lives while its data is needed";
}

TEST(Offload, ABroughtBackCopyStaysUntilTheNextOffloadPointAndIsNotRewrittenUnchanged) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto s = c.lazy(8192);
    s->write(0, pattern(8192, 1));
    scope.offload_now();
    EXPECT_EQ(scope.stats().writes, 1u);

    std::vector<std::byte> part(100);
    s->read(4000, part);
    const auto whole = pattern(8192, 1);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 4000));
    EXPECT_TRUE(s->host_in_memory());
    EXPECT_EQ(scope.stats().reads, 1u);

    scope.offload_now();
    EXPECT_EQ(scope.stats().writes, 1u) << "the file still holds the same bytes";
    EXPECT_EQ(scope.stats().bytes_dropped, 8192u);
    EXPECT_TRUE(s->host_paged_out());

    s->write(10, pattern(20, 2)); // partial: reads back first
    EXPECT_EQ(scope.stats().reads, 2u);
    scope.offload_now();
    EXPECT_EQ(scope.stats().writes, 2u) << "changed: written again";
    auto expected = pattern(8192, 1);
    const auto patch = pattern(20, 2);
    std::copy(patch.begin(), patch.end(), expected.begin() + 10);
    EXPECT_EQ(read_all(*s), expected);
}

TEST(Offload, AWholeHostWriteOfAPagedOutStorageReadsNothingBack) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto s = c.lazy(4096);
    s->write(0, pattern(4096, 3));
    scope.offload_now();
    s->write(0, pattern(4096, 4));
    EXPECT_EQ(scope.stats().reads, 0u);
    EXPECT_EQ(scope.stats().bytes_paged_out, 0u);
    EXPECT_EQ(read_all(*s), pattern(4096, 4));
}

// ---- with the device ----------------------------------------------------------

TEST(Offload, AnUploadAfterOffloadPutsTheHostDataOnTheCard) {
    Card c;
    TempDir dir;
    std::shared_ptr<Storage> s;
    {
        auto scope = offload(dir.options());
        s = c.lazy(3 * 4096 + 17);
        s->write(0, pattern(s->nbytes(), 9));
    }
    ASSERT_TRUE(s->host_paged_out());
    s->device_use(*c.stream, DeviceAccess::Read);
    c.stream->synchronize();
    EXPECT_EQ(c.on_card(*s), pattern(s->nbytes(), 9));
    EXPECT_EQ(s->transfers().uploads, 1u);
    EXPECT_EQ(s->coherence(), Coherence::InSync);
}

TEST(Offload, AStaleHostCopyOfADeviceLatestStorageIsFreedWithoutAWrite) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto s = c.lazy(4096);
    s->write(0, pattern(4096, 5));
    c.device_fill(*s, 0x77); // device-latest: the host copy is stale
    ASSERT_TRUE(s->host_in_memory());
    scope.offload_now();
    EXPECT_EQ(scope.stats().writes, 0u);
    EXPECT_EQ(scope.stats().bytes_dropped, 4096u);
    EXPECT_FALSE(s->host_in_memory());
    EXPECT_FALSE(s->host_paged_out());
    EXPECT_EQ(read_all(*s), std::vector<std::byte>(4096, std::byte{0x77}));
    EXPECT_EQ(s->transfers().downloads, 1u);
    EXPECT_EQ(scope.stats().reads, 0u) << "a download needs nothing from the file";
}

TEST(Offload, ADeviceWriteAfterOffloadWinsOverThePagedOutCopy) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto s = c.lazy(4096);
    s->write(0, pattern(4096, 6));
    s->device_use(*c.stream, DeviceAccess::Read); // in sync
    scope.offload_now();
    ASSERT_TRUE(s->host_paged_out());
    c.device_fill(*s, 0x42);
    s->write(0, std::vector<std::byte>(8, std::byte{1})); // partial: downloads
    auto expected = std::vector<std::byte>(4096, std::byte{0x42});
    std::fill(expected.begin(), expected.begin() + 8, std::byte{1});
    EXPECT_EQ(read_all(*s), expected);
    EXPECT_EQ(scope.stats().reads, 0u);
}

TEST(Offload, HostWritesRacingOffloadsKeepTheNewestData) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    constexpr std::size_t kN = 64 * 1024;
    constexpr unsigned kRounds = 200;
    auto s = c.lazy(kN);
    s->write(0, pattern(kN, 0));
    std::atomic<bool> done{false};
    std::thread writer([&] {
        for (unsigned i = 1; i <= kRounds; i++) {
            s->write(i % 2 == 0 ? 0 : 100, i % 2 == 0 ? pattern(kN, i) : pattern(kN - 100, i));
            std::vector<std::byte> head(100);
            s->read(0, head); // a read back when the offload won
        }
        done = true;
    });
    unsigned offloads = 0;
    while (!done.load() || offloads == 0) {
        scope.offload_now();
        offloads++;
    }
    writer.join();
    auto expected = pattern(kN, kRounds); // the last write covers it all
    EXPECT_EQ(read_all(*s), expected);
    scope.offload_now();
    EXPECT_EQ(read_all(*s), expected) << "after a last offload";
    EXPECT_EQ(scope.stats().failures, 0u);
}

// ---- which storages -------------------------------------------------------------

TEST(Offload, OnlyStoragesMadeInTheScopeOnItsThreadAreOffloaded) {
    Card c;
    TempDir dir;
    auto before = c.lazy(4096);
    before->write(0, pattern(4096, 1));
    auto scope = offload(dir.options());
    auto inside = c.lazy(4096);
    inside->write(0, pattern(4096, 2));
    std::shared_ptr<Storage> other_thread;
    std::thread([&] {
        other_thread = c.lazy(4096);
        other_thread->write(0, pattern(4096, 3));
    }).join();
    scope.offload_now();
    EXPECT_TRUE(before->host_in_memory());
    EXPECT_TRUE(inside->host_paged_out());
    EXPECT_TRUE(other_thread->host_in_memory());
    EXPECT_EQ(scope.stats().writes, 1u);
}

TEST(Offload, AStorageBelongsToTheInnermostScopeOnly) {
    Card c;
    TempDir outer_dir;
    TempDir inner_dir;
    auto outer = offload(outer_dir.options());
    auto a = c.lazy(4096);
    a->write(0, pattern(4096, 1));
    std::shared_ptr<Storage> b;
    {
        auto inner = offload(inner_dir.options());
        b = c.lazy(4096);
        b->write(0, pattern(4096, 2));
        outer.offload_now();
        EXPECT_TRUE(a->host_paged_out());
        EXPECT_TRUE(b->host_in_memory()) << "b is the inner scope's";
    }
    EXPECT_TRUE(b->host_paged_out()) << "the inner scope's exit";
    auto d = c.lazy(4096); // the outer scope's again
    d->write(0, pattern(4096, 3));
    outer.close();
    EXPECT_TRUE(d->host_paged_out());
    EXPECT_EQ(outer.stats().writes, 2u);
    auto after = c.lazy(4096);
    after->write(0, pattern(4096, 4));
    EXPECT_TRUE(after->host_in_memory()) << "made after every scope closed";
    EXPECT_EQ(read_all(*b), pattern(4096, 2));
    EXPECT_EQ(read_all(*d), pattern(4096, 3));
}

TEST(Offload, StoragesBelowMinBytesStayInMemory) {
    Card c;
    TempDir dir;
    OffloadOptions o = dir.options();
    o.min_bytes = 8192;
    auto scope = offload(o);
    auto small = c.lazy(4096);
    auto big = c.lazy(8192);
    small->write(0, pattern(4096, 1));
    big->write(0, pattern(8192, 2));
    scope.offload_now();
    EXPECT_TRUE(small->host_in_memory());
    EXPECT_TRUE(big->host_paged_out());
}

// ---- failures keep the data -----------------------------------------------------

TEST(OffloadFailure, EnospcKeepsTheDataInMemoryAndSaysSo) {
    Card c;
    OffloadOptions o;
    o.file = "/dev/full"; // every write: ENOSPC
    std::shared_ptr<Storage> s;
    std::vector<Error> failures;
    {
        auto scope = offload(o);
        s = c.lazy(12288);
        s->write(0, pattern(12288, 8));
        try {
            scope.offload_now();
            ADD_FAILURE() << "offload_now() on a full device did not throw";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::Io);
            EXPECT_EQ(e.sys_errno(), ENOSPC);
            EXPECT_THAT(e.what(), HasSubstr("/dev/full"));
            EXPECT_THAT(e.what(), HasSubstr("12288 bytes"));
            EXPECT_THAT(e.what(), HasSubstr("the data stays in memory"));
            EXPECT_THAT(e.what(), HasSubstr("ENOSPC"));
        }
        EXPECT_TRUE(s->host_in_memory());
        EXPECT_EQ(read_all(*s), pattern(12288, 8));
        EXPECT_EQ(scope.stats().failures, 1u);
        EXPECT_EQ(scope.stats().writes, 0u);
        scope.close(); // records, does not throw
        failures = scope.failures();
    }
    ASSERT_EQ(failures.size(), 2u) << "offload_now() and the scope's exit";
    EXPECT_EQ(failures[1].sys_errno(), ENOSPC);
    EXPECT_TRUE(s->host_in_memory());
    EXPECT_EQ(read_all(*s), pattern(12288, 8));
    s->device_use(*c.stream, DeviceAccess::Read);
    EXPECT_EQ(c.on_card(*s), pattern(12288, 8));
}

/// The child of OneFailedStorageDoesNotStopTheOthers: 0 when all is as expected.
int file_size_limit_child() {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0)
        return 10;
    int code = 0;
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto a = c.lazy(48 * 1024);
    auto b = c.lazy(64 * 1024);
    auto d = c.lazy(4096);
    a->write(0, pattern(a->nbytes(), 1));
    b->write(0, pattern(b->nbytes(), 2));
    d->write(0, pattern(d->nbytes(), 3));
    try {
        scope.offload_now();
        code = 11;
    } catch (const Error& e) {
        const std::string what = e.what();
        if (e.sys_errno() != EFBIG || what.find("after 16384 bytes") == std::string::npos ||
            what.find("the data stays in memory") == std::string::npos) {
            std::fprintf(stderr, "unexpected error: %s\n", e.what());
            code = 12;
        }
    }
    const OffloadStats st = scope.stats();
    if (code == 0 && (!a->host_paged_out() || !b->host_in_memory() || !d->host_in_memory() ||
                      st.writes != 1 || st.failures != 2)) {
        std::fprintf(stderr, "writes %llu failures %llu\n",
                     static_cast<unsigned long long>(st.writes),
                     static_cast<unsigned long long>(st.failures));
        code = 13;
    }
    if (code == 0 &&
        (read_all(*a) != pattern(a->nbytes(), 1) || read_all(*b) != pattern(b->nbytes(), 2) ||
         read_all(*d) != pattern(d->nbytes(), 3)))
        code = 14;
    std::fprintf(stderr, "code %d\n", code);
    return code;
}

TEST(OffloadFailure, OneFailedStorageDoesNotStopTheOthers) {
    // RLIMIT_FSIZE in a child: the file may grow to 64 KiB, so the first
    // storage fits, the second is cut short (a short write, then EFBIG)
    // and the third, written past the limit, fails at once.
    GTEST_FLAG_SET(death_test_style, "threadsafe"); // other tests' threads may live
    EXPECT_EXIT(std::_Exit(file_size_limit_child()), ::testing::ExitedWithCode(0), "code 0");
}

/// The child of AForkChildNeitherWritesNorSharesTheRing: 0 when all is as expected.
int fork_child(OffloadScope& scope, Storage& paged, Storage& resident) {
    try {
        scope.offload_now();
        return 20;
    } catch (const Error& e) {
        if (e.code() != Errc::BadFork ||
            std::string(e.what()).find("the data stays in memory") == std::string::npos)
            return 21;
    }
    if (!resident.host_in_memory() || read_all(resident) != pattern(4096, 2))
        return 22;
    if (read_all(paged) != pattern(8192, 1)) // pread, not the parent's ring
        return 23;
    return 0;
}

TEST(OffloadFailure, AForkChildNeitherWritesNorSharesTheRing) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto paged = c.lazy(8192);
    paged->write(0, pattern(8192, 1));
    scope.offload_now();
    auto resident = c.lazy(4096);
    resident->write(0, pattern(4096, 2));
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
        ::_exit(fork_child(scope, *paged, *resident));
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    scope.offload_now(); // the parent goes on as before
    EXPECT_TRUE(resident->host_paged_out());
    EXPECT_EQ(read_all(*resident), pattern(4096, 2));
}

// A fork() child (a data-loader worker, say) that drops its copies of
// paged-out storages, at exit or before, must not take the parent's data
// with them: the file's extents are the parent's.
TEST(OffloadFailure, AForkChildDroppingItsCopiesLeavesTheParentsDataInTheFile) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto paged = c.lazy(64 * 1024);
    paged->write(0, pattern(64 * 1024, 5));
    scope.offload_now();
    ASSERT_TRUE(paged->host_paged_out());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        paged.reset();
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    EXPECT_TRUE(read_all(*paged) == pattern(64 * 1024, 5))
        << "the parent's paged-out data changed when the child dropped its copy";
}

// The child's copies are the storages as they were at the fork: what the
// parent drops or writes anew afterwards does not reach them.
TEST(OffloadFailure, AForkChildKeepsTheDataAsItWasAtTheFork) {
    Card c;
    TempDir dir;
    auto scope = offload(dir.options());
    auto dropped = c.lazy(64 * 1024);
    auto rewritten = c.lazy(64 * 1024);
    dropped->write(0, pattern(64 * 1024, 6));
    rewritten->write(0, pattern(64 * 1024, 7));
    scope.offload_now();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(go[1]);
        char byte = 0;
        if (::read(go[0], &byte, 1) != 1)
            ::_exit(30);
        if (read_all(*dropped) != pattern(64 * 1024, 6))
            ::_exit(31);
        if (read_all(*rewritten) != pattern(64 * 1024, 7))
            ::_exit(32);
        ::_exit(0);
    }
    ::close(go[0]);
    dropped.reset();
    rewritten->write(0, pattern(64 * 1024, 8));
    scope.offload_now();
    ASSERT_TRUE(rewritten->host_paged_out());
    ASSERT_EQ(::write(go[1], "x", 1), 1);
    ::close(go[1]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "31: the dropped storage, 32: the rewritten one";
    EXPECT_EQ(read_all(*rewritten), pattern(64 * 1024, 8));
}

TEST(OffloadFailure, AFailedReadBackThrowsAndTheNextUseTriesAgain) {
    Card c;
    TempDir dir;
    const std::string path = dir.path + "/given";
    {
        const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        ::close(fd);
    }
    OffloadOptions o;
    o.file = path;
    auto scope = offload(o);
    auto s = c.lazy(8192);
    s->write(0, pattern(8192, 4));
    scope.offload_now();
    ASSERT_TRUE(s->host_paged_out());
    std::filesystem::resize_file(path, 0); // someone cut the file
    std::vector<std::byte> out(8192);
    try {
        s->read(0, out);
        ADD_FAILURE() << "a read of a cut file did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::Io);
        EXPECT_THAT(e.what(), HasSubstr("reading storage"));
        EXPECT_THAT(e.what(), HasSubstr("8192 bytes"));
        EXPECT_THAT(e.what(), HasSubstr(path));
    }
    EXPECT_TRUE(s->host_paged_out()) << "still the file's";
    EXPECT_EQ(scope.stats().failures, 1u);
    EXPECT_THROW(s->read(0, out), Error) << "tried again, still cut";
    EXPECT_EQ(scope.stats().failures, 2u);
}

TEST(OffloadFailure, AMissingDirectoryIsATypedErrorNamingIt) {
    OffloadOptions o;
    o.directory = "/nonexistent/rbln-offload";
    try {
        auto scope = offload(o);
        ADD_FAILURE() << "a scope in a missing directory opened";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::NotFound);
        EXPECT_THAT(e.what(), HasSubstr("/nonexistent/rbln-offload"));
        EXPECT_THAT(e.what(), HasSubstr("RBLN_OFFLOAD_DIR"));
    }
}

TEST(OffloadFailure, CloseOnAnotherThreadIsRefused) {
    TempDir dir;
    auto scope = offload(dir.options());
    std::optional<Errc> code;
    std::thread([&] {
        try {
            scope.close();
        } catch (const Error& e) {
            code = e.code();
        }
    }).join();
    EXPECT_EQ(code, Errc::InvalidArgument);
    EXPECT_TRUE(scope.open());
}

// ---- where -------------------------------------------------------------------------

TEST(OffloadDirectory, OptionThenRblnOffloadDirThenTmpdirThenVarTmp) {
    auto env = [](const std::optional<std::string>& offload_dir,
                  const std::optional<std::string>& tmpdir) {
        return EnvSource([=](std::string_view name) -> std::optional<std::string> {
            if (name == "RBLN_OFFLOAD_DIR")
                return offload_dir;
            if (name == "TMPDIR")
                return tmpdir;
            return std::nullopt;
        });
    };
    OffloadOptions with;
    with.directory = "/a";
    EXPECT_EQ(offload_directory(with, env("/b", "/c")), "/a");
    EXPECT_EQ(offload_directory({}, env("/b", "/c")), "/b");
    EXPECT_EQ(offload_directory({}, env("", "/c")), "/c");
    EXPECT_EQ(offload_directory({}, env(std::nullopt, std::nullopt)), "/var/tmp");
}

} // namespace
} // namespace rbln::test::offload_test
