// SPDX-License-Identifier: GPL-2.0
// The process's registry of logical devices (umd/src/process_context.hpp)
// over a fake sysfs tree whose cards open as FakeKernels: queries plan and
// do not commit (statistics of a device never used, a lazy storage, host
// reads and writes of it), and the first real use (an allocation, a
// synchronize, a job) commits the mapping read then.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/rbln.h"
#include "rbln/rbln_alloc.h"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"
#include "testing.hpp"

namespace rbln::test::process_context_test {
namespace {

using ::testing::HasSubstr;

class ProcessContext : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        for (unsigned i = 0; i < 4; i++) {
            CardSpec s;
            s.minor = i;
            s.bdf = "0000:00:0" + std::to_string(4 + i) + ".0";
            s.family = "atom";
            s.chiplets = 1;
            s.serial = "RBLNEMU-" + std::to_string(i);
            fake.add_card(s);
        }
        fresh();
    }
    void TearDown() override { reset_process_for_tests(); }

    /// A fresh process registry over the fakes (nothing opened or committed).
    void fresh() {
        opened.clear();
        ProcessOptions p;
        p.runtime.root = fake.root();
        p.runtime.env = [this](std::string_view name) -> std::optional<std::string> {
            const auto it = vars.find(std::string(name));
            if (it == vars.end())
                return std::nullopt;
            return it->second;
        };
        p.runtime.warn = [](const std::string&) {};
        p.device.submitter.use_io_uring = false;
        p.device.submitter.warn = [](const std::string&) {};
        p.opener = [this](const std::string& node) -> Result<std::unique_ptr<KernelInterface>> {
            opened.push_back(node);
            auto k = std::make_unique<FakeKernel>();
            k->run_packets = true;
            return std::unique_ptr<KernelInterface>(std::move(k));
        };
        reset_process_for_tests(std::move(p));
    }

    /// Reads every statistic the C ABI and the C++ API offer for @device.
    static void read_statistics(int device) {
        std::uint64_t bytes = 1;
        ASSERT_EQ(rbln_memory_allocated(device, &bytes), RBLN_OK) << rbln_last_error_message();
        EXPECT_EQ(bytes, 0u);
        ASSERT_EQ(rbln_memory_reserved(device, &bytes), RBLN_OK);
        EXPECT_EQ(bytes, 0u);
        ASSERT_EQ(rbln_max_memory_allocated(device, &bytes), RBLN_OK);
        EXPECT_EQ(bytes, 0u);
        std::int64_t v = -1;
        ASSERT_EQ(rbln_memory_stat(device, "allocated_bytes.all.peak", &v), RBLN_OK);
        EXPECT_EQ(v, 0);
        std::size_t count = 0;
        ASSERT_EQ(rbln_memory_stats(device, 1, nullptr, 0, &count), RBLN_OK);
        EXPECT_GT(count, 0u) << "the planned allocator has the device's chiplets";
        std::size_t needed = 0;
        std::vector<char> buf(16384);
        ASSERT_EQ(rbln_memory_summary(device, nullptr, buf.data(), buf.size(), &needed), RBLN_OK)
            << rbln_last_error_message();
        ASSERT_EQ(rbln_empty_cache(device), RBLN_OK);
        ASSERT_EQ(rbln_reset_peak_memory_stats(device), RBLN_OK);
        ASSERT_EQ(rbln_reset_accumulated_memory_stats(device), RBLN_OK);
        const DeviceAllocator& a = process_allocator_stats(static_cast<unsigned>(device));
        EXPECT_EQ(a.memory_stats().at("allocated_bytes.all.current"), 0);
        EXPECT_EQ(a.memory_allocated(), 0u);
    }

    FakeSysfs fake;
    std::map<std::string, std::string> vars;
    std::vector<std::string> opened; ///< nodes the registry opened
};

TEST_F(ProcessContext, StatisticsOfADeviceNeverUsedOpenNothingAndFixNoMapping) {
    read_statistics(0);
    read_statistics(3);
    EXPECT_TRUE(opened.empty()) << "opened " << opened.front();
    EXPECT_FALSE(Runtime::process().committed());
    EXPECT_EQ(process_allocator_stats(3).device_index(), 3u);
    EXPECT_EQ(process_allocator_stats(3).place_count(), 1u) << "one chiplet per ATOM NPU";
}

TEST_F(ProcessContext, StatisticsOfADeviceOutsideThePlanAreNoDevice) {
    std::uint64_t bytes = 0;
    EXPECT_EQ(rbln_memory_allocated(4, &bytes), RBLN_ERR_NO_DEVICE);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("4 are available"));
    EXPECT_FALSE(Runtime::process().committed());
}

TEST_F(ProcessContext, ALazyStorageOpensNothingUntilItsFirstDeviceUse) {
    auto s = Storage::create(1, 4096, ElementType::Fp32);
    rbln_storage* cs = nullptr;
    ASSERT_EQ(rbln_storage_create(2, 4096, RBLN_STORAGE_FP32, &cs), RBLN_OK)
        << rbln_last_error_message();
    const std::vector<std::byte> in(4096, std::byte{0x3c});
    s->write(0, in);
    std::vector<std::byte> out(4096);
    s->read(0, out);
    EXPECT_EQ(out, in);
    ASSERT_EQ(rbln_storage_write(cs, 0, in.data(), in.size()), RBLN_OK);
    EXPECT_EQ(s->device_index(), 1u);
    EXPECT_TRUE(opened.empty()) << "opened " << opened.front();
    EXPECT_FALSE(Runtime::process().committed());
    ASSERT_EQ(rbln_storage_destroy(cs), RBLN_OK);
}

TEST_F(ProcessContext, ALazyStorageOnADeviceOutsideThePlanIsNoDevice) {
    try {
        (void)Storage::create(4, 16);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::NoDevice);
    }
    EXPECT_TRUE(opened.empty());
}

TEST_F(ProcessContext, TheFirstDeviceUseOfALazyStorageCommitsAndOpensItsNpu) {
    auto s = Storage::create(1, 4096, ElementType::Fp32);
    Stream stream = s->device()->default_stream();
    (void)s->device_use(stream, DeviceAccess::Write);
    EXPECT_TRUE(Runtime::process().committed());
    ASSERT_EQ(opened.size(), 1u);
    EXPECT_EQ(opened[0], "/dev/accel/accel1");
    std::uint64_t bytes = 0;
    ASSERT_EQ(rbln_memory_allocated(1, &bytes), RBLN_OK);
    EXPECT_EQ(bytes, 4096u) << "the live allocator's statistics from now on";
}

// An allocation that needs memory, a synchronize and a job each commit.
TEST_F(ProcessContext, EachRealUseCommits) {
    std::uint64_t va = 0;
    ASSERT_EQ(rbln_caching_alloc(0, 1000, 0, RBLN_PLACE_DEFAULT, &va), RBLN_OK)
        << rbln_last_error_message();
    EXPECT_TRUE(Runtime::process().committed()) << "an allocation";
    ASSERT_EQ(rbln_caching_free(0, va), RBLN_OK);
    fresh();
    ASSERT_EQ(rbln_device_synchronize(1), RBLN_OK) << rbln_last_error_message();
    EXPECT_TRUE(Runtime::process().committed()) << "a synchronize";
    fresh();
    auto s = Storage::create(2, 64, ElementType::U8);
    rbln_storage* cs = nullptr;
    ASSERT_EQ(rbln_storage_create(2, 64, RBLN_STORAGE_U8, &cs), RBLN_OK);
    EXPECT_FALSE(Runtime::process().committed());
    std::uint64_t dva = 0;
    ASSERT_EQ(rbln_storage_device_use(cs, RBLN_STORAGE_READ_WRITE, &dva, nullptr), RBLN_OK)
        << rbln_last_error_message();
    EXPECT_TRUE(Runtime::process().committed()) << "a device use (a job's input)";
    EXPECT_NE(dva, 0u);
    ASSERT_EQ(rbln_storage_destroy(cs), RBLN_OK);
}

// The mapping is read when it commits, not when statistics were read.
TEST_F(ProcessContext, MappingVariablesSetAfterQueriesCount) {
    read_statistics(0);
    auto s = Storage::create(0, 64);
    EXPECT_EQ(Runtime::process().device_count(), 4u);
    vars["RBLN_NPUS_PER_DEVICE"] = "2";
    std::uint64_t va = 0;
    ASSERT_EQ(rbln_caching_alloc(0, 1000, 0, RBLN_PLACE_DEFAULT, &va), RBLN_OK)
        << rbln_last_error_message();
    EXPECT_TRUE(Runtime::process().committed());
    EXPECT_EQ(Runtime::process().device_count(), 2u);
    EXPECT_THAT(Runtime::process().device(0).npus, ::testing::ElementsAre(0u, 1u));
    ASSERT_EQ(rbln_caching_free(0, va), RBLN_OK);
    std::uint64_t bytes = 0;
    EXPECT_EQ(rbln_memory_allocated(3, &bytes), RBLN_ERR_NO_DEVICE)
        << "rbln:3 is gone from the committed mapping";
}

/// Runs @child in a fork() child: its exit code (100 if it threw).
template <typename F> int in_child(F&& child) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        int code = 0;
        try {
            code = child();
        } catch (...) {
            code = 100;
        }
        ::_exit(code);
    }
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

// A process that only read statistics and made lazy storages has claimed
// nothing: a fork() child uses the device on its own (no BadFork).
TEST_F(ProcessContext, AChildForkedAfterOnlyQueriesUsesTheDevice) {
    read_statistics(0);
    auto s = Storage::create(0, 4096, ElementType::Fp32);
    ASSERT_FALSE(Runtime::process().committed());
    const int code = in_child([&] {
        if (rbln_check_fork() != RBLN_OK)
            return 1;
        std::uint64_t va = 0;
        if (rbln_caching_alloc(0, 1000, 0, RBLN_PLACE_DEFAULT, &va) != RBLN_OK)
            return 2;
        Stream stream = s->device()->default_stream();
        (void)s->device_use(stream, DeviceAccess::Write);
        std::vector<std::byte> out(4096);
        s->read(0, out);
        if (rbln_device_synchronize(0) != RBLN_OK)
            return 3;
        return Runtime::process().committed() && opened.size() == 1 ? 0 : 4;
    });
    EXPECT_EQ(code, 0);
    EXPECT_FALSE(Runtime::process().committed()) << "the child's commit is its own";
    EXPECT_TRUE(opened.empty());
}

} // namespace
} // namespace rbln::test::process_context_test
