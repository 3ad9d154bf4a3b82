// SPDX-License-Identifier: GPL-2.0
// Streams and events against the fake kernel, on both submission paths.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "device_fixture.hpp"
#include "rbln/copy.hpp"
#include "rbln/stream.hpp"
#include "rbln_fw_graph.h"

namespace rbln::test::stream_test {
namespace {

using ::testing::HasSubstr;

class Streams : public DeviceTest {
protected:
    std::vector<std::uint8_t> read(const std::shared_ptr<Memory>& m) {
        std::vector<std::uint8_t> out(m->size());
        std::memcpy(out.data(), k->translate(m->device_va(), m->size()), m->size());
        return out;
    }
};

TEST_P(Streams, TheDefaultStreamIsOnePerDeviceAndStreamsAreSeparateQueues) {
    Stream a = dev->default_stream();
    Stream b = dev->default_stream();
    EXPECT_TRUE(a == b);
    const Stream c(dev);
    EXPECT_NE(c.queue_id(), a.queue_id());
    EXPECT_EQ(k->queue_count(), 2u);
}

TEST_P(Streams, WorkOnOneStreamRunsInOrder) {
    auto m = dev->allocate(4096);
    Stream s(dev);
    s.fill(m, 0, 4096, 0x11, 1);
    s.fill(m, 0, 2048, 0x22, 1);
    s.fill(m, 1024, 1024, 0x33, 1);
    s.synchronize();
    const auto bytes = read(m);
    EXPECT_EQ(bytes[0], 0x22);
    EXPECT_EQ(bytes[1024], 0x33);
    EXPECT_EQ(bytes[2047], 0x33);
    EXPECT_EQ(bytes[2048], 0x11);
    EXPECT_EQ(s.last_job(), 3u);
}

TEST_P(Streams, QueryIsFalseWhileWorkIsPendingThenTrue) {
    k->hold_jobs = true;
    auto m = dev->allocate(4096);
    Stream s(dev);
    EXPECT_TRUE(s.query()) << "nothing enqueued";
    s.fill(m, 0, 64, 1, 1);
    EXPECT_FALSE(s.query());
    EXPECT_EQ(k->pending_jobs(), 1u) << "query hands the batch to the kernel";
    k->complete_jobs();
    EXPECT_TRUE(s.query());
}

TEST_P(Streams, AFailedJobIsReportedOnceBySynchronizeAndTheStreamGoesOn) {
    auto m = dev->allocate(4096);
    Stream s(dev);
    k->next_job_error = -ETIMEDOUT;
    s.fill(m, 0, 64, 1, 1);
    try {
        s.synchronize();
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::Timeout);
        EXPECT_THAT(e.what(), HasSubstr("hung the chiplet"));
    }
    s.fill(m, 0, 64, 2, 1);
    EXPECT_NO_THROW(s.synchronize());
}

// The error synchronize() raises for a job the fake fails with @err and
// the card's @detail.
Error failed_job_error(const std::shared_ptr<Device>& dev, FakeKernel& k, int err,
                       JobDetail detail) {
    auto m = dev->allocate(4096);
    Stream s(dev);
    k.next_job_error = err;
    k.next_job_detail = detail;
    s.fill(m, 0, 64, 1, 1);
    try {
        s.synchronize();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no error";
    return Error(Errc::Internal, "", "", 0, "no error");
}

TEST_P(Streams, ARefusedGraphIsReportedWithTheCardsCheckAndWhereItFailed) {
    const Error e =
        failed_job_error(dev, *k, -EINVAL, JobDetail{RBLN_FW_GRAPH_E_RELOC_WRITE_IN, 3});
    EXPECT_EQ(e.code(), Errc::JobFailed);
    EXPECT_EQ(e.sys_errno(), EINVAL);
    EXPECT_THAT(e.what(), HasSubstr("the card refused the graph: a node writes an input "
                                    "boundary tensor (node 3) [RBLN_FW_GRAPH_E_RELOC_WRITE_IN]"));
}

TEST_P(Streams, ANodeThatFaultsWhileAGraphRunsIsNamedBesideTheFault) {
    const Error e = failed_job_error(dev, *k, -EFAULT, JobDetail{RBLN_FW_GRAPH_E_IN_NODE, 7});
    EXPECT_EQ(e.code(), Errc::JobFailed);
    EXPECT_THAT(e.what(), HasSubstr("an MMU fault"));
    EXPECT_THAT(e.what(), HasSubstr("node 7 of the graph failed while running"));
}

TEST_P(Streams, ACardDetailThisLibraryDoesNotKnowIsShownAsNumbers) {
    const Error e = failed_job_error(dev, *k, -EINVAL, JobDetail{0x7777, 12});
    EXPECT_THAT(e.what(), HasSubstr("detail 30583 (argument 12)"));
}

TEST_P(Streams, CommandBuffersAreReusedOnceTheCardIsDoneWithThem) {
    auto m = dev->allocate(4096);
    Stream s(dev);
    const std::size_t before = k->buffer_count();
    for (int i = 0; i < 8000; i++) // 8000 x 32 bytes: about four 64 KiB chunks
        s.fill(m, 0, 8, static_cast<std::uint64_t>(i), 1);
    s.synchronize();
    EXPECT_LE(k->buffer_count() - before, 3u);
}

TEST_P(Streams, DestroyingAStreamWaitsForItsWorkAndFreesItsQueue) {
    k->hold_jobs = true;
    auto m = dev->allocate(4096);
    {
        Stream s(dev);
        s.fill(m, 0, 64, 5, 1);
        EXPECT_EQ(k->queue_count(), 1u);
    }
    EXPECT_EQ(k->pending_jobs(), 0u);
    EXPECT_EQ(k->queue_count(), 0u);
    EXPECT_EQ(read(m)[0], 5);
}

TEST_P(Streams, DeviceSynchronizeWaitsForEveryStream) {
    k->hold_jobs = true;
    auto m = dev->allocate(4096);
    Stream a(dev);
    Stream b(dev);
    a.fill(m, 0, 64, 1, 1);
    b.fill(m, 64, 64, 2, 1);
    dev->default_stream().fill(m, 128, 64, 3, 1);
    dev->synchronize();
    EXPECT_TRUE(a.query());
    EXPECT_TRUE(b.query());
    EXPECT_EQ(k->pending_jobs(), 0u);
    const auto bytes = read(m);
    EXPECT_EQ(bytes[0] + bytes[64] + bytes[128], 6);
}

// ---- events --------------------------------------------------------------------

TEST_P(Streams, ANeverRecordedEventIsComplete) {
    const Event e;
    EXPECT_TRUE(e.query());
    EXPECT_NO_THROW(e.synchronize());
    EXPECT_FALSE(e.recorded());
    Stream s(dev);
    const int calls = k->total_calls();
    s.wait_event(e);
    s.synchronize();
    EXPECT_EQ(k->total_calls(), calls) << "waiting for it is a no-op";
}

TEST_P(Streams, AnEventMarksOnlyTheWorkBeforeItsRecord) {
    k->hold_jobs = true;
    auto m = dev->allocate(4096);
    Stream s(dev);
    Event e;
    s.fill(m, 0, 64, 1, 1);
    e.record(s);
    s.fill(m, 0, 64, 2, 1);
    EXPECT_FALSE(e.query()) << "its record has not reached the card";
    k->complete_jobs(2); // the fill and the record
    EXPECT_TRUE(e.query());
    EXPECT_FALSE(s.query()) << "the later fill is outside the mark";
    e.record(s); // moves the mark past the second fill
    EXPECT_FALSE(e.query());
    e.synchronize();
    EXPECT_TRUE(s.query());
}

TEST_P(Streams, WaitEventIsADeviceSideFenceOnTheNextJob) {
    k->hold_jobs = true;
    auto m = dev->allocate(4096);
    Stream a(dev);
    Stream b(dev);
    Event e;
    a.fill(m, 0, 64, 1, 1);
    e.record(a);
    const int waits = k->count(KernelOp::Wait);
    b.wait_event(e);
    b.fill(m, 64, 64, 2, 1);
    dev->flush();
    EXPECT_EQ(k->count(KernelOp::Wait), waits) << "the host did not wait";
    ASSERT_EQ(k->last_in_syncs.size(), 1u);
    EXPECT_EQ(k->last_in_syncs[0].point, 2u) << "a's second job is the record";
    EXPECT_EQ(k->last_submit.queue_id, b.queue_id());
    k->complete_jobs();
    b.synchronize();
}

TEST_P(Streams, WaitingForAnEventOfTheSameStreamAddsNoFence) {
    Stream a(dev);
    Event e;
    e.record(a);
    a.wait_event(e);
    auto m = dev->allocate(4096);
    a.fill(m, 0, 8, 1, 1);
    a.synchronize();
    EXPECT_TRUE(k->last_in_syncs.empty());
}

TEST_P(Streams, ElapsedTimeIsPositiveAndOrderedFromCardTimestamps) {
    auto m = dev->allocate(4096);
    Stream s(dev);
    Event e0;
    Event e1;
    Event e2;
    e0.record(s);
    s.fill(m, 0, 4096, 1, 1);
    e1.record(s);
    s.fill(m, 0, 4096, 2, 1);
    e2.record(s);
    s.synchronize();
    const double t01 = Event::elapsed_time(e0, e1);
    const double t02 = Event::elapsed_time(e0, e2);
    EXPECT_GT(t01, 0.0);
    EXPECT_GT(t02, t01);
}

TEST_P(Streams, ElapsedTimeNeedsRecordedTimedAndDoneEvents) {
    auto code = [](auto&& f) {
        try {
            f();
        } catch (const Error& e) {
            return e.code();
        }
        return Errc::Internal;
    };
    Stream s(dev);
    Event a;
    Event b;
    EXPECT_EQ(code([&] { Event::elapsed_time(a, b); }), Errc::InvalidArgument);
    Event untimed(false);
    untimed.record(s);
    a.record(s);
    EXPECT_EQ(code([&] { Event::elapsed_time(a, untimed); }), Errc::InvalidArgument);
    k->hold_jobs = true;
    b.record(s);
    EXPECT_EQ(code([&] { Event::elapsed_time(a, b); }), Errc::NotReady);
    k->complete_jobs();
    EXPECT_NO_THROW(Event::elapsed_time(a, b));
}

TEST_P(Streams, AnEventOfAnotherDeviceIsWaitedForOnTheHost) {
    auto k2 = std::make_shared<FakeKernel>("/dev/accel/accel1");
    auto dev2 = fake_device(k2, GetParam());
    k2->hold_jobs = true;
    Stream other(dev2);
    Event e;
    e.record(other);
    Stream s(dev);
    s.wait_event(e);
    EXPECT_TRUE(e.query()) << "the host waited for it";
}

INSTANTIATE_TEST_SUITE_P(BothPaths, Streams, ::testing::Values(Path::Uring, Path::Ioctl),
                         path_name);

} // namespace
} // namespace rbln::test::stream_test
