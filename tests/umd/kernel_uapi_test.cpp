// SPDX-License-Identifier: GPL-2.0
// kernel_uapi.hpp: the one encoding of jobs and waits into the uAPI structs
// that the ioctls and the io_uring commands both send.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernel/kernel_uapi.hpp"

namespace rbln::test::kernel_uapi_test {
namespace {

TEST(KernelUapi, ASubmitCarriesEveryFieldOfTheJobIncludingItsFlags) {
    const std::vector<std::uint32_t> bos = {7, 9, 11};
    const std::vector<SyncPoint> in_syncs = {{3, 0}, {4, 12}};
    SubmitArgs a;
    a.queue_id = 5;
    a.flags = SubmitFlags::NoImplicitWait;
    a.cmd_handle = 6;
    a.cmd_size = 64;
    a.cmd_offset = 128;
    a.bo_handles = bos;
    a.in_syncs = in_syncs;
    a.out = {8, 21};
    std::vector<drm_rbln_sync> in;
    detail::encode_syncs(a.in_syncs, in);
    const drm_rbln_submit s = detail::encode_submit(a, in);

    EXPECT_EQ(s.queue_id, 5u);
    EXPECT_EQ(s.flags, RBLN_SUBMIT_NO_IMPLICIT_WAIT);
    EXPECT_EQ(s.cmd_handle, 6u);
    EXPECT_EQ(s.cmd_size, 64u);
    EXPECT_EQ(s.cmd_offset, 128u);
    EXPECT_EQ(s.bo_handles, reinterpret_cast<std::uintptr_t>(bos.data()));
    EXPECT_EQ(s.bo_count, 3u);
    EXPECT_EQ(s.bo_elem_size, sizeof(std::uint32_t));
    EXPECT_EQ(s.in_syncs, reinterpret_cast<std::uintptr_t>(in.data()));
    EXPECT_EQ(s.in_count, 2u);
    EXPECT_EQ(s.in_elem_size, sizeof(drm_rbln_sync));
    ASSERT_EQ(in.size(), 2u);
    EXPECT_EQ(in[0].handle, 3u);
    EXPECT_EQ(in[0].flags, 0u);
    EXPECT_EQ(in[0].point, 0u);
    EXPECT_EQ(in[1].handle, 4u);
    EXPECT_EQ(in[1].point, 12u);
    EXPECT_EQ(s.out_handle, 8u);
    EXPECT_EQ(s.out_flags, 0u);
    EXPECT_EQ(s.out_point, 21u);
    EXPECT_EQ(s.seqno, 0u);
}

TEST(KernelUapi, AJobWithoutFlagsOrSyncsSendsZeroes) {
    SubmitArgs a;
    a.queue_id = 1;
    a.cmd_handle = 2;
    a.cmd_size = 8;
    std::vector<drm_rbln_sync> in;
    detail::encode_syncs(a.in_syncs, in);
    const drm_rbln_submit s = detail::encode_submit(a, in);
    EXPECT_EQ(s.flags, 0u);
    EXPECT_EQ(s.bo_count, 0u);
    EXPECT_EQ(s.in_count, 0u);
    EXPECT_EQ(s.in_syncs, 0u);
    EXPECT_EQ(s.out_handle, 0u);
}

TEST(KernelUapi, AWaitIsByQueueAndSeqnoOrBySyncobj) {
    WaitArgs by_seqno;
    by_seqno.queue_id = 3;
    by_seqno.seqno = 41;
    by_seqno.deadline_ns = 1234;
    const drm_rbln_wait w = detail::encode_wait(by_seqno);
    EXPECT_EQ(w.flags, 0u);
    EXPECT_EQ(w.queue_id, 3u);
    EXPECT_EQ(w.seqno, 41u);
    EXPECT_EQ(w.sync.handle, 0u);
    EXPECT_EQ(w.timeout_ns, 1234);

    WaitArgs by_sync;
    by_sync.queue_id = 3; // ignored: the syncobj is waited for
    by_sync.sync = SyncPoint{9, 5};
    const drm_rbln_wait v = detail::encode_wait(by_sync);
    EXPECT_EQ(v.flags, RBLN_WAIT_SYNCOBJ);
    EXPECT_EQ(v.queue_id, 0u);
    EXPECT_EQ(v.seqno, 0u);
    EXPECT_EQ(v.sync.handle, 9u);
    EXPECT_EQ(v.sync.point, 5u);
    EXPECT_EQ(v.timeout_ns, 0);
}

TEST(KernelUapi, TheTypedEnumsConvertToTheirUapiValues) {
    EXPECT_EQ(detail::uapi(Region::Auto), static_cast<std::uint32_t>(RBLN_REGION_AUTO));
    EXPECT_EQ(detail::uapi(QueuePriority::High),
              static_cast<std::uint32_t>(RBLN_QUEUE_PRIORITY_HIGH));
    EXPECT_EQ(detail::uapi(BoFlags::DeviceReadOnly | BoFlags::None),
              static_cast<std::uint32_t>(RBLN_BO_DEVICE_READ_ONLY));
}

} // namespace
} // namespace rbln::test::kernel_uapi_test
