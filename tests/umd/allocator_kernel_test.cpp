// SPDX-License-Identifier: GPL-2.0
// The caching allocator over kernel buffers (the FakeKernel behind
// KernelSegmentProvider), with librbln's streams as fences, and its C ABI.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "device_fixture.hpp"
#include "fake_kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/allocator_stream.hpp"
#include "rbln/rbln_alloc.h"
#include "testing.hpp"

namespace rbln::test::allocator_kernel_test {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t MiB = 1024 * 1024;

TEST(AllocatorKernel, SegmentsAreHbmBuffersOfTheChosenChiplet) {
    auto k = std::make_shared<FakeKernel>();
    auto a = DeviceAllocator::for_kernels(0, {{0, k}});
    ASSERT_EQ(a->place_count(), 4u);
    DeviceBlock x = a->allocate(1000, 0, 2);
    EXPECT_EQ(k->hbm_used(2), 2 * MiB);
    EXPECT_EQ(k->hbm_used(0), 0u);
    EXPECT_EQ(k->buffer_count(), 1u);
    EXPECT_NE(k->translate(x.device_va(), x.size()), nullptr) << "a VA inside the buffer";
    x.reset();
    EXPECT_EQ(k->buffer_count(), 1u) << "cached";
    a->empty_cache();
    EXPECT_EQ(k->buffer_count(), 0u) << "GEM close";
    EXPECT_EQ(k->count(KernelOp::GemClose), 1);
}

// Device::allocate takes its HBM from the device's caching allocator, so a
// framework's every device allocation shows in memory_stats().
TEST(AllocatorKernel, DeviceAllocateComesFromTheCachingAllocatorAndShowsInItsStatistics) {
    auto k = std::make_shared<FakeKernel>();
    auto dev = fake_device(k, Path::Ioctl);
    const std::size_t buffers = k->buffer_count(); // the device's own (command, staging)
    std::shared_ptr<Memory> m = dev->allocate(1000, 2);
    DeviceAllocator& a = dev->allocator();
    EXPECT_EQ(a.memory_allocated(), 1024u);
    EXPECT_EQ(a.memory_reserved(), 2 * MiB);
    EXPECT_EQ(a.memory_stats().at("requested_bytes.all.current"), 1000);
    EXPECT_EQ(k->hbm_used(2), 2 * MiB) << "on the chiplet asked for";
    EXPECT_EQ(m->chiplet(), 2u);
    EXPECT_EQ(m->size(), 1000u);
    EXPECT_NE(k->translate(m->device_va(), m->size()), nullptr);
    std::shared_ptr<Memory> n = dev->allocate(1000, 2);
    EXPECT_EQ(k->buffer_count(), buffers + 1) << "both blocks from one cached segment";
    m.reset();
    n.reset();
    EXPECT_EQ(a.memory_allocated(), 0u);
    EXPECT_EQ(a.memory_reserved(), 2 * MiB) << "cached, as PyTorch's";
    a.empty_cache();
    EXPECT_EQ(k->buffer_count(), buffers);
}

// A fork() child shares the parent's open file: its copy of the allocator
// must not make buffers in it.  (That it closes none of the parent's is
// KernelDevice's part: VmMemory.AForkChildsEmptyCacheLeavesTheParentsCachedMemoryUsable.)
TEST(AllocatorKernel, AForkChildMakesNoSegmentInTheParentsFile) {
    auto k = std::make_shared<FakeKernel>();
    auto a = DeviceAllocator::for_kernels(0, {{0, k}});
    DeviceBlock x = a->allocate(1000);
    x.reset(); // one cached segment
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        try {
            (void)a->allocate(64 * MiB);
            ::_exit(11);
        } catch (const Error& e) {
            if (e.code() != Errc::BadFork ||
                std::string(e.what()).find("spawn") == std::string::npos)
                ::_exit(12);
        }
        if (k->count(KernelOp::BoCreate) != 1)
            ::_exit(13);
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "11/12: no BadFork, 13: made a buffer";
    DeviceBlock y = a->allocate(64 * MiB);
    EXPECT_EQ(k->count(KernelOp::BoCreate), 2) << "the parent still makes them";
}

TEST(AllocatorKernel, AFullChipletIsATypedOutOfMemoryNamingIt) {
    auto k = std::make_shared<FakeKernel>();
    k->device.hbm_size[1] = 64 * MiB;
    auto a = DeviceAllocator::for_kernels(0, {{0, k}});
    DeviceBlock x = a->allocate(50 * MiB, 0, 1);
    try {
        a->allocate(20 * MiB, 0, 1);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::OutOfMemory);
        EXPECT_THAT(e.what(), HasSubstr("NPU 0 chiplet 1 is out of memory"));
        EXPECT_THAT(e.what(), HasSubstr("64.00 MiB in total"));
        EXPECT_THAT(e.what(), HasSubstr("/dev/accel/accel0"));
    }
    EXPECT_TRUE(a->allocate(20 * MiB, 0, 0));
}

TEST(AllocatorKernel, OtherKernelErrorsPassThrough) {
    auto k = std::make_shared<FakeKernel>();
    auto a = DeviceAllocator::for_kernels(0, {{0, k}});
    k->fail_next(KernelOp::BoCreate, EIO);
    try {
        a->allocate(512);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::Io);
    }
    EXPECT_EQ(a->stats().num_ooms, 0);
    EXPECT_EQ(a->memory_reserved(), 0u);
}

TEST(AllocatorKernel, RecordStreamWaitsForTheStreamsWorkOnTheCard) {
    auto k = std::make_shared<FakeKernel>();
    auto dev = fake_device(k, Path::Ioctl);
    auto a = DeviceAllocator::for_kernels(0, {{0, k}});
    Stream s1(dev);
    Stream s2(dev);
    k->hold_jobs = true;
    k->complete_on_blocking_wait = false;
    DeviceBlock x = allocate_on(*a, MiB, s1);
    const std::uint64_t va = x.device_va();
    a->record_stream(x, stream_fence_source(s2));
    x.reset();
    EXPECT_EQ(a->stats().active[0].current, 1);
    DeviceBlock y = allocate_on(*a, MiB, s1);
    EXPECT_NE(y.device_va(), va) << "stream 2's work may still use it";
    y.reset();
    s2.query(); // hands the fence's job to the kernel
    k->complete_jobs();
    DeviceBlock z = allocate_on(*a, MiB, s1);
    EXPECT_EQ(z.device_va(), va);
    EXPECT_EQ(a->stats().active[0].current, 1);
    z.reset();
    k->complete_on_blocking_wait = true;
}

TEST(AllocatorKernel, StreamsHaveDistinctIds) {
    auto k = std::make_shared<FakeKernel>();
    auto dev = fake_device(k, Path::Ioctl);
    Stream s1(dev);
    Stream s2(dev);
    Stream copy = s1;
    EXPECT_NE(stream_id(s1), stream_id(s2));
    EXPECT_EQ(stream_id(s1), stream_id(copy));
    copy = s2;
    EXPECT_EQ(stream_id(copy), stream_id(s2));
    EXPECT_NE(stream_id(s1), kDefaultStream);
}

class AllocatorCApi : public ::testing::Test {
protected:
    void SetUp() override {
        ProcessOptions p;
        p.allocator = [this](unsigned index) {
            return DeviceAllocator::for_kernels(index, {{0, k}});
        };
        reset_process_for_tests(std::move(p));
    }
    void TearDown() override { reset_process_for_tests(); }
    std::shared_ptr<FakeKernel> k = std::make_shared<FakeKernel>();
};

TEST_F(AllocatorCApi, AllocateFreeAndStatistics) {
    std::uint64_t va = 0;
    ASSERT_EQ(rbln_caching_alloc(0, 1000, 0, 1, &va), RBLN_OK) << rbln_last_error_message();
    EXPECT_NE(va, 0u);
    rbln_alloc_block_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(rbln_alloc_block_get_info(0, va, &info), RBLN_OK);
    EXPECT_EQ(info.size, 1024u);
    EXPECT_EQ(info.requested_size, 1000u);
    EXPECT_EQ(info.place, 1u);
    EXPECT_NE(info.handle, 0u);
    std::uint64_t bytes = 0;
    ASSERT_EQ(rbln_memory_allocated(0, &bytes), RBLN_OK);
    EXPECT_EQ(bytes, 1024u);
    ASSERT_EQ(rbln_memory_reserved(0, &bytes), RBLN_OK);
    EXPECT_EQ(bytes, 2 * MiB);
    std::int64_t v = 0;
    ASSERT_EQ(rbln_memory_stat(0, "requested_bytes.all.current", &v), RBLN_OK);
    EXPECT_EQ(v, 1000);
    ASSERT_EQ(rbln_memory_stat(0, "npu.0.chiplet.1.segment.small_pool.current", &v), RBLN_OK);
    EXPECT_EQ(v, 1);
    EXPECT_EQ(rbln_memory_stat(0, "no.such.key", &v), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("no memory statistic 'no.such.key'"));
    ASSERT_EQ(rbln_caching_free(0, va), RBLN_OK);
    EXPECT_EQ(rbln_caching_free(0, va), RBLN_ERR_INVALID_ARGUMENT) << "freed twice";
    ASSERT_EQ(rbln_max_memory_allocated(0, &bytes), RBLN_OK);
    EXPECT_EQ(bytes, 1024u);
    ASSERT_EQ(rbln_reset_peak_memory_stats(0), RBLN_OK);
    ASSERT_EQ(rbln_max_memory_allocated(0, &bytes), RBLN_OK);
    EXPECT_EQ(bytes, 0u);
    ASSERT_EQ(rbln_empty_cache(0), RBLN_OK);
    ASSERT_EQ(rbln_memory_reserved(0, &bytes), RBLN_OK);
    EXPECT_EQ(bytes, 0u);
    EXPECT_EQ(k->buffer_count(), 0u);
    ASSERT_EQ(rbln_reset_accumulated_memory_stats(0), RBLN_OK);
    ASSERT_EQ(rbln_memory_stat(0, "num_device_alloc", &v), RBLN_OK);
    EXPECT_EQ(v, 0);
}

TEST_F(AllocatorCApi, StatsAreListedSortedAndSized) {
    std::size_t count = 0;
    ASSERT_EQ(rbln_memory_stats(0, 0, nullptr, 0, &count), RBLN_OK);
    EXPECT_EQ(count, 9u * 3u * 4u + 2u * 4u + 6u);
    std::vector<rbln_memory_stat_entry> e(count);
    ASSERT_EQ(rbln_memory_stats(0, 0, e.data(), e.size(), &count), RBLN_OK);
    EXPECT_STREQ(e.front().key, "active.all.allocated");
    EXPECT_STREQ(e.back().key, "segment.small_pool.peak");
    ASSERT_EQ(rbln_memory_stats(0, 1, nullptr, 0, &count), RBLN_OK);
    EXPECT_EQ(count, 4u * e.size());
}

TEST_F(AllocatorCApi, OutOfMemoryAndBadArgumentsReturnStatuses) {
    std::uint64_t va = 1;
    EXPECT_EQ(rbln_caching_alloc(0, 600 * MiB, 0, RBLN_PLACE_DEFAULT, &va), RBLN_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(va, 0u);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("NPU 0 chiplet 0 is out of memory"));
    EXPECT_EQ(rbln_caching_alloc(0, 512, 0, 9, &va), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_caching_alloc(0, 512, 0, 0, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_caching_alloc(-1, 512, 0, 0, &va), RBLN_ERR_NO_DEVICE);
    ASSERT_EQ(rbln_caching_alloc(0, 0, 0, 0, &va), RBLN_OK);
    EXPECT_EQ(va, 0u);
    EXPECT_EQ(rbln_caching_free(0, 0), RBLN_OK);
}

TEST_F(AllocatorCApi, TheSummaryIsCopiedWithItsLength) {
    std::size_t needed = 0;
    char small[8];
    EXPECT_EQ(rbln_memory_summary(0, "torch_rbln", small, sizeof(small), &needed),
              RBLN_ERR_INVALID_ARGUMENT);
    ASSERT_GT(needed, 0u);
    std::string buf(needed + 1, '\0');
    ASSERT_EQ(rbln_memory_summary(0, "torch_rbln", buf.data(), buf.size(), &needed), RBLN_OK);
    buf.resize(needed);
    EXPECT_EQ(buf, process_allocator(0).memory_summary({"torch_rbln", {}}));
    EXPECT_THAT(buf, ::testing::StartsWith("torch_rbln memory summary (device=rbln:0, MiB)\n"));
}

} // namespace
} // namespace rbln::test::allocator_kernel_test
