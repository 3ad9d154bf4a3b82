// SPDX-License-Identifier: GPL-2.0
// KernelInterface queries (size protocol, validation) and KernelDevice::open
// against nodes that are not rbln.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "fake_kernel.hpp"
#include "kernel/kernel.hpp"

namespace rbln::test::kernel_test {
namespace {

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

TEST(KernelQuery, DeviceIdentityIsDecoded) {
    FakeKernel k;
    k.device.pci_domain = 1;
    k.device.pci_bus = 0x3b;
    k.device.pci_dev = 0x1f;
    k.device.pci_func = 7;
    k.device.numa_node = 1;
    const DeviceIdentity id = query_device_identity(k);
    EXPECT_EQ(id.family, static_cast<std::uint32_t>(RBLN_FAMILY_REBEL100));
    EXPECT_EQ(id.chiplet_count, 4u);
    EXPECT_EQ(id.hbm_size[3], 512ull << 20);
    EXPECT_EQ(id.hbm_size[4], 0u);
    EXPECT_EQ(id.fw_version, "rbln-emu 0.2.0");
    EXPECT_EQ(id.serial, "RBLNEMU-KERNEL");
    EXPECT_EQ(id.numa_node, 1);
    EXPECT_EQ(id.pci_bdf(), "0001:3b:1f.7");
    EXPECT_EQ(id.answer_size, sizeof(drm_rbln_info_device));
    EXPECT_EQ(k.count(KernelOp::GetInfo), 1);
}

TEST(KernelQuery, NewerKernelWithLongerAnswerIsAccepted) {
    FakeKernel k;
    k.device_size = sizeof(drm_rbln_info_device) + 64;
    const DeviceIdentity id = query_device_identity(k);
    EXPECT_EQ(id.answer_size, sizeof(drm_rbln_info_device) + 64);
    EXPECT_EQ(id.serial, "RBLNEMU-KERNEL");
}

TEST(KernelQuery, AnswerShorterThanUapiV1IsRefused) {
    FakeKernel k;
    k.device_size = 16;
    const Error e = catch_error([&] { query_device_identity(k); });
    EXPECT_EQ(e.code(), Errc::BadValue);
    EXPECT_THAT(e.what(), HasSubstr("answered 16 bytes"));
}

TEST(KernelQuery, UnterminatedSerialFromKernelIsRefused) {
    FakeKernel k;
    std::memset(k.device.serial, 'Z', sizeof(k.device.serial));
    const Error e = catch_error([&] { query_device_identity(k); });
    EXPECT_EQ(e.code(), Errc::BadValue);
    EXPECT_THAT(e.what(), HasSubstr("serial is not NUL-terminated"));
}

TEST(KernelQuery, ChipletCountOutsideOneToEightIsRefused) {
    FakeKernel k;
    k.device.chiplet_count = 0;
    EXPECT_EQ(catch_error([&] { query_device_identity(k); }).code(), Errc::BadValue);
    k.device.chiplet_count = 9;
    EXPECT_EQ(catch_error([&] { query_device_identity(k); }).code(), Errc::BadValue);
}

TEST(KernelQuery, TelemetryIsDecoded) {
    FakeKernel k;
    k.telemetry.chiplet[2].clock_mhz = 1500;
    const TelemetrySample t = query_telemetry(k);
    EXPECT_EQ(t.temp_mc, 51234);
    EXPECT_EQ(t.power_uw, 12345678u);
    EXPECT_EQ(t.chiplet_count, 4u);
    EXPECT_EQ(t.chiplet[2].clock_mhz, 1500u);
}

TEST(KernelQuery, TelemetryIoErrorPropagatesWithHint) {
    FakeKernel k;
    k.telemetry_errno = EIO;
    const Error e = catch_error([&] { query_telemetry(k); });
    EXPECT_EQ(e.code(), Errc::Io);
    EXPECT_THAT(e.what(), HasSubstr("the card did not answer"));
}

TEST(KernelDeviceOpen, MissingNodeIsNotFound) {
    auto r = KernelDevice::open("/nonexistent/dev/accel/accel99");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::NotFound);
    EXPECT_THAT(r.error().what(), HasSubstr("no such device node (ENOENT)"));
}

TEST(KernelDeviceOpen, NonDrmNodeIsRefused) {
    // /dev/null opens read-write but answers no DRM ioctl.
    auto r = KernelDevice::open("/dev/null");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::WrongDriver);
    EXPECT_THAT(r.error().what(), HasSubstr("DRM_IOCTL_VERSION /dev/null"));
}

TEST(KernelDeviceOpen, DefaultOpenerReturnsTheSameError) {
    auto r = open_kernel_device("/dev/null");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::WrongDriver);
}

} // namespace
} // namespace rbln::test::kernel_test

namespace rbln::test::kernel_test {
namespace {

using ::testing::HasSubstr;

template <typename F> Error kernel_catch(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no rbln::Error was thrown";
    return Error(Errc::Internal, "", "", 0, "none");
}

TEST(KernelError, CarriesOperationErrnoAndAMeaningForTheCaller) {
    const Error e = kernel_error(KernelOp::BoCreate, "/dev/accel/accel0", ENOSPC);
    EXPECT_EQ(e.code(), Errc::OutOfMemory);
    EXPECT_EQ(e.operation(), "ioctl BO_CREATE");
    EXPECT_EQ(e.sys_errno(), ENOSPC);
    EXPECT_STREQ(e.what(), "ioctl BO_CREATE /dev/accel/accel0: the chiplet (for AUTO: every "
                           "chiplet) has no free block that large right now; nothing was "
                           "allocated (ENOSPC): free device buffers or use another chiplet");
}

TEST(KernelError, EveryOperationHasAName) {
    for (unsigned i = 0; i < kKernelOpCount; i++)
        EXPECT_NE(kernel_op_name(static_cast<KernelOp>(i)), "kernel operation") << i;
}

TEST(KernelError, OperationSpecificSentences) {
    EXPECT_THAT(kernel_error(KernelOp::BoUserptr, "", ENOMEM).what(),
                HasSubstr("RLIMIT_MEMLOCK (or memory is exhausted) (ENOMEM): raise 'ulimit -l'"));
    EXPECT_THAT(kernel_error(KernelOp::QueueCreate, "", EACCES).what(),
                HasSubstr("high priority needs CAP_SYS_NICE (EACCES)"));
    EXPECT_THAT(kernel_error(KernelOp::Submit, "", ERANGE).what(),
                HasSubstr("past the end of the command buffer"));
    EXPECT_EQ(kernel_error(KernelOp::Submit, "", ERANGE).code(), Errc::InvalidArgument);
    EXPECT_THAT(kernel_error(KernelOp::Wait, "", ENOENT).what(),
                HasSubstr("a seqno not yet submitted (ENOENT)"));
    EXPECT_EQ(kernel_error(KernelOp::BoCreate, "", E2BIG).code(), Errc::OutOfMemory);
}

TEST(KernelError, UnlistedErrnosFallBackToTheGenericText) {
    const Error e = kernel_error(KernelOp::Submit, "/dev/accel/accel1", ENODEV);
    EXPECT_EQ(e.code(), Errc::DeviceGone);
    EXPECT_THAT(e.what(), HasSubstr("ioctl SUBMIT /dev/accel/accel1: the device is gone"));
}

TEST(FakeKernel, BuffersAreTrackedWithRoundedSizesAndHbmAccounting) {
    FakeKernel k;
    const BoHandle small = k.bo_create({100, Region::Hbm, 2, BoFlags::None});
    EXPECT_EQ(small.size, 4096u);
    EXPECT_EQ(small.chiplet, 2u);
    const BoHandle big = k.bo_create({(2u << 20) + 1, Region::Hbm, 2, BoFlags::None});
    EXPECT_EQ(big.size, 4u << 20);
    EXPECT_EQ(k.hbm_used(2), (4u << 20) + 4096);
    EXPECT_EQ(k.buffer_count(), 2u);
    const BoDescription d = k.bo_info(big.handle);
    EXPECT_EQ(d.region, Region::Hbm);
    EXPECT_EQ(d.device_va, big.device_va);
    k.gem_close(big.handle);
    EXPECT_EQ(k.hbm_used(2), 4096u);
    EXPECT_EQ(k.buffer_count(), 1u);
    const Error e = kernel_catch([&] { k.bo_info(big.handle); });
    EXPECT_EQ(e.code(), Errc::NotFound);
    EXPECT_THAT(e.what(), HasSubstr("no such buffer handle in this open file"));
}

TEST(FakeKernel, AutoPicksTheChipletWithTheMostFreeHbm) {
    FakeKernel k;
    k.bo_create({64u << 20, Region::Hbm, 0, BoFlags::None});
    EXPECT_EQ(k.bo_create({4096, Region::Auto, 0, BoFlags::None}).chiplet, 1u);
}

TEST(FakeKernel, BufferErrorsFollowTheUapi) {
    FakeKernel k;
    EXPECT_EQ(kernel_catch([&] {
                  k.bo_create({0, Region::Host, 0, BoFlags::None});
              }).sys_errno(),
              EINVAL);
    EXPECT_EQ(kernel_catch([&] {
                  k.bo_create({4096, Region::Hbm, 4, BoFlags::None});
              }).sys_errno(),
              EINVAL);
    EXPECT_EQ(kernel_catch([&] {
                  k.bo_create({4096, Region::Host, 1, BoFlags::None});
              }).sys_errno(),
              EINVAL);
    EXPECT_EQ(kernel_catch([&] {
                  k.bo_create({1ull << 30, Region::Hbm, 0, BoFlags::None});
              }).sys_errno(),
              E2BIG);
    k.bo_create({300u << 20, Region::Hbm, 0, BoFlags::None});
    const Error e = kernel_catch([&] { k.bo_create({300u << 20, Region::Hbm, 0, BoFlags::None}); });
    EXPECT_EQ(e.sys_errno(), ENOSPC);
    EXPECT_EQ(e.code(), Errc::OutOfMemory);
    EXPECT_EQ(k.buffer_count(), 1u); // nothing allocated on error
}

TEST(FakeKernel, MmapGivesTheBufferMemory) {
    FakeKernel k;
    const BoHandle bo = k.bo_create({8192, Region::Host, 0, BoFlags::None});
    const BoDescription d = k.bo_info(bo.handle);
    auto* p = static_cast<unsigned char*>(k.mmap(d.mmap_offset, 8192));
    EXPECT_EQ(p[100], 0); // zeroed
    p[100] = 7;
    auto* again = static_cast<unsigned char*>(k.mmap(d.mmap_offset, 4096));
    EXPECT_EQ(again[100], 7);
    EXPECT_EQ(k.mapping_count(), 1u); // same address
    k.munmap(p, 4096);
    EXPECT_EQ(k.mapping_count(), 0u);
    EXPECT_EQ(kernel_catch([&] { k.mmap(d.mmap_offset, 3 * 4096); }).sys_errno(), EINVAL);
    EXPECT_EQ(kernel_catch([&] { k.mmap(12345, 4096); }).sys_errno(), EINVAL);
    EXPECT_EQ(kernel_catch([&] { k.munmap(p, 4096); }).sys_errno(), EINVAL);
}

TEST(FakeKernel, UserptrChecksAlignmentAndMemlock) {
    FakeKernel k;
    k.memlock_limit = 8192;
    alignas(4096) static unsigned char pages[3 * 4096];
    const BoHandle u = k.bo_userptr(pages, 8192, UserptrFlags::None);
    EXPECT_EQ(k.bo_info(u.handle).region, Region::Userptr);
    EXPECT_EQ(k.bo_info(u.handle).mmap_offset, 0u);
    EXPECT_EQ(kernel_catch([&] { k.bo_userptr(pages + 1, 4096, UserptrFlags::None); }).sys_errno(),
              EINVAL);
    const Error e = kernel_catch([&] { k.bo_userptr(pages + 8192, 4096, UserptrFlags::None); });
    EXPECT_EQ(e.sys_errno(), ENOMEM);
    EXPECT_THAT(e.what(), HasSubstr("RLIMIT_MEMLOCK"));
    k.gem_close(u.handle);
    EXPECT_NO_THROW(k.bo_userptr(pages + 8192, 4096, UserptrFlags::ReadOnly));
}

TEST(FakeKernel, QueuesAreCreatedCheckedAndDestroyed) {
    FakeKernel k;
    const std::uint32_t q = k.queue_create(0xf, QueuePriority::Normal);
    EXPECT_EQ(q, 1u);
    EXPECT_EQ(k.queue_count(), 1u);
    EXPECT_EQ(kernel_catch([&] { k.queue_create(0x10, QueuePriority::Normal); }).sys_errno(),
              EINVAL);
    EXPECT_EQ(kernel_catch([&] { k.queue_create(0, QueuePriority::Normal); }).sys_errno(), EINVAL);
    EXPECT_EQ(kernel_catch([&] { k.queue_create(1, QueuePriority::High); }).code(),
              Errc::PermissionDenied);
    k.queue_destroy(q);
    EXPECT_EQ(k.queue_count(), 0u);
    EXPECT_EQ(kernel_catch([&] { k.queue_destroy(q); }).sys_errno(), ENOENT);
}

struct Submission : ::testing::Test {
    void SetUp() override {
        queue = k.queue_create(1, QueuePriority::Normal);
        cmd = k.bo_create({4096, Region::Host, 0, BoFlags::None}).handle;
        data = k.bo_create({4096, Region::Hbm, 0, BoFlags::None}).handle;
    }
    SubmitArgs job() const {
        SubmitArgs a;
        a.queue_id = queue;
        a.cmd_handle = cmd;
        a.cmd_size = 64;
        return a;
    }
    FakeKernel k;
    std::uint32_t queue = 0;
    std::uint32_t cmd = 0;
    std::uint32_t data = 0;
};

TEST_F(Submission, SeqnosCountUpPerQueueAndWaitReportsTheJobError) {
    const std::uint32_t bos[] = {data};
    SubmitArgs a = job();
    a.bo_handles = bos;
    EXPECT_EQ(k.submit(a), 1u);
    EXPECT_EQ(k.last_submit.bo_handles.size(), 1u);
    k.next_job_error = -EFAULT;
    EXPECT_EQ(k.submit(job()), 2u);
    const WaitResult first = k.wait({queue, 1, std::nullopt, 0});
    EXPECT_TRUE(first.done);
    EXPECT_EQ(first.job_error, 0);
    EXPECT_EQ(k.wait({queue, 2, std::nullopt, 0}).job_error, -EFAULT);
    const std::uint32_t other = k.queue_create(1, QueuePriority::Low);
    EXPECT_EQ(k.submit(SubmitArgs{other, cmd, 8, 0, {}, {}, {}}), 1u);
}

TEST_F(Submission, HeldJobsAreNotDoneUntilCompleted) {
    k.hold_jobs = true;
    const std::uint64_t s = k.submit(job());
    EXPECT_EQ(k.pending_jobs(), 1u);
    EXPECT_FALSE(k.wait({queue, s, std::nullopt, 0}).done);
    k.complete_jobs();
    EXPECT_TRUE(k.wait({queue, s, std::nullopt, 0}).done);
    EXPECT_EQ(k.pending_jobs(), 0u);
}

TEST_F(Submission, SyncobjsCarryTheJobFence) {
    k.hold_jobs = true;
    const std::uint32_t sync = k.syncobj_create(0);
    EXPECT_EQ(k.syncobj_count(), 1u);
    const WaitArgs on_sync{0, 0, SyncPoint{sync, 0}, 0};
    EXPECT_EQ(kernel_catch([&] { k.wait(on_sync); }).sys_errno(), ENOENT); // no fence yet
    SubmitArgs a = job();
    a.out = {sync, 0};
    k.submit(a);
    EXPECT_FALSE(k.wait(on_sync).done);
    k.complete_jobs();
    EXPECT_TRUE(k.wait(on_sync).done);
    const SyncPoint in[] = {{sync, 0}};
    SubmitArgs b = job();
    b.in_syncs = in;
    EXPECT_NO_THROW(k.submit(b));
    k.syncobj_destroy(sync);
    EXPECT_EQ(k.syncobj_count(), 0u);
    EXPECT_EQ(kernel_catch([&] { k.submit(b); }).sys_errno(), ENOENT);
    EXPECT_EQ(kernel_catch([&] { k.syncobj_destroy(sync); }).sys_errno(), EINVAL);
}

TEST_F(Submission, BadJobsAreRefusedAndNothingIsQueued) {
    auto errno_of = [&](SubmitArgs a) { return kernel_catch([&] { k.submit(a); }).sys_errno(); };
    SubmitArgs a = job();
    a.cmd_size = 12;
    EXPECT_EQ(errno_of(a), EINVAL);
    a = job();
    a.cmd_offset = 4;
    EXPECT_EQ(errno_of(a), EINVAL);
    a = job();
    a.cmd_offset = 4096 - 32;
    EXPECT_EQ(errno_of(a), ERANGE);
    a = job();
    a.queue_id = 99;
    EXPECT_EQ(errno_of(a), ENOENT);
    a = job();
    const std::uint32_t bogus[] = {data, 777};
    a.bo_handles = bogus;
    EXPECT_EQ(errno_of(a), ENOENT);
    EXPECT_EQ(kernel_catch([&] { k.wait({queue, 1, std::nullopt, 0}); }).sys_errno(), ENOENT);
    EXPECT_EQ(k.submit(job()), 1u); // the refused ones took no seqno
}

TEST_F(Submission, FailNextFailsExactlyTheNextCallOfThatKind) {
    k.fail_next(KernelOp::Submit, EIO);
    const Error e = kernel_catch([&] { k.submit(job()); });
    EXPECT_EQ(e.code(), Errc::Io);
    EXPECT_EQ(e.operation(), "ioctl SUBMIT");
    EXPECT_THAT(e.what(), HasSubstr("the card is not usable"));
    EXPECT_EQ(k.submit(job()), 1u);
    EXPECT_EQ(k.count(KernelOp::Submit), 2);
}

TEST_F(Submission, FailNextWorksForEveryOperation) {
    std::vector<std::pair<KernelOp, std::function<void()>>> calls = {
        {KernelOp::BoCreate,
         [&] {
             k.bo_create({4096, Region::Host, 0, BoFlags::None});
         }},
        {KernelOp::BoInfo, [&] { k.bo_info(cmd); }},
        {KernelOp::GemClose, [&] { k.gem_close(data); }},
        {KernelOp::Mmap, [&] { k.mmap(k.bo_info(cmd).mmap_offset, 4096); }},
        {KernelOp::QueueCreate, [&] { k.queue_create(1, QueuePriority::Low); }},
        {KernelOp::QueueDestroy, [&] { k.queue_destroy(queue); }},
        {KernelOp::Wait,
         [&] {
             k.wait({queue, 1, std::nullopt, 0});
         }},
        {KernelOp::SyncobjCreate, [&] { k.syncobj_create(0); }},
        {KernelOp::GetInfo, [&] { query_device_identity(k); }},
    };
    for (auto& [op, call] : calls) {
        const int before = k.count(op);
        k.fail_next(op, ENODEV);
        const Error e = kernel_catch(call);
        EXPECT_EQ(e.code(), Errc::DeviceGone) << kernel_op_name(op);
        EXPECT_EQ(e.operation(), kernel_op_name(op));
        EXPECT_EQ(k.count(op), before + 1) << kernel_op_name(op);
    }
    EXPECT_EQ(k.buffer_count(), 2u);
    EXPECT_EQ(k.queue_count(), 1u);
}

} // namespace
} // namespace rbln::test::kernel_test
