// SPDX-License-Identifier: GPL-2.0
// Submitter: batching, completions, failures, buffer lifetime and the
// io_uring -> ioctl fallback, on both paths against the fake kernel.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fake_kernel.hpp"
#include "fake_ring.hpp"
#include "rbln/submitter.hpp"

namespace rbln::test {
namespace {

using ::testing::HasSubstr;

enum class Via { Uring, Ioctl };

class SubmitterTest : public ::testing::TestWithParam<Via> {
protected:
    void SetUp() override {
        k = std::make_shared<FakeKernel>();
        queue = k->queue_create(1, RBLN_QUEUE_PRIORITY_NORMAL);
        cmd = k->bo_create({4096, RBLN_REGION_HOST, 0, 0}).handle;
    }
    std::unique_ptr<Submitter> make(unsigned batch = 4, unsigned max_in_flight = 64) {
        SubmitterOptions o;
        o.batch = batch;
        o.max_in_flight = max_in_flight;
        o.warn = [this](const std::string& m) { warnings.push_back(m); };
        if (GetParam() == Via::Uring)
            o.ring_factory = fake_ring_factory(*k, &ring);
        else
            o.use_io_uring = false;
        return std::make_unique<Submitter>(k, o);
    }
    Job job() const {
        Job j;
        j.queue_id = queue;
        j.cmd_handle = cmd;
        j.cmd_size = 8;
        return j;
    }
    std::shared_ptr<FakeKernel> k;
    FakeRing* ring = nullptr;
    std::uint32_t queue = 0;
    std::uint32_t cmd = 0;
    std::vector<std::string> warnings;
};

TEST_P(SubmitterTest, UsesThePathItWasGiven) {
    auto s = make();
    EXPECT_EQ(s->path(),
              GetParam() == Via::Uring ? Submitter::Path::IoUring : Submitter::Path::Ioctl);
}

TEST_P(SubmitterTest, JobsReachTheKernelWhenTheBatchIsFullOrAtAWait) {
    auto s = make(4);
    for (int i = 0; i < 3; i++)
        s->enqueue(job());
    EXPECT_EQ(k->count(KernelOp::Submit), 0) << "queued, not yet handed over";
    s->enqueue(job());
    EXPECT_EQ(k->count(KernelOp::Submit), 4);
    const std::uint64_t n = s->enqueue(job());
    EXPECT_EQ(n, 5u);
    s->wait(queue, n);
    EXPECT_EQ(k->count(KernelOp::Submit), 5);
    EXPECT_EQ(s->stats().batches, 2u);
    if (ring != nullptr) {
        EXPECT_EQ(ring->enters, 2 + 1) << "the probe, then one enter per batch";
    }
}

TEST_P(SubmitterTest, ADoneJobIsSeenByQueryAndWaitWithoutAThreadOfItsOwn) {
    k->hold_jobs = true;
    auto s = make(1);
    const std::uint64_t a = s->enqueue(job());
    const std::uint64_t b = s->enqueue(job());
    EXPECT_FALSE(s->done(queue, a));
    k->complete_jobs(1);
    EXPECT_TRUE(s->done(queue, a));
    EXPECT_FALSE(s->done(queue, b));
    s->wait(queue, b); // the fake card runs while the host waits
    EXPECT_TRUE(s->done(queue, b));
    EXPECT_EQ(k->pending_jobs(), 0u);
}

TEST_P(SubmitterTest, NoMoreThanMaxInFlightJobsAreInTheKernel) {
    k->hold_jobs = true;
    auto s = make(1, 2);
    for (int i = 0; i < 6; i++) {
        s->enqueue(job());
        EXPECT_LE(k->pending_jobs(), 2u);
    }
    s->wait_all();
    EXPECT_EQ(s->stats().completions, 6u);
}

TEST_P(SubmitterTest, ARefusedSubmitIsTheJobsFailureAndLaterJobsRun) {
    auto s = make(1);
    k->fail_next(KernelOp::Submit, ENOENT);
    const std::uint64_t a = s->enqueue(job());
    const std::uint64_t b = s->enqueue(job());
    s->wait(queue, b);
    const auto f = s->take_failure(queue);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->job, a);
    EXPECT_EQ(f->err, ENOENT);
    EXPECT_TRUE(f->refused);
    EXPECT_THAT(job_error(*f, k->path()).what(), HasSubstr("ioctl SUBMIT"));
    EXPECT_FALSE(s->take_failure(queue)) << "reported once";
}

TEST_P(SubmitterTest, ACardFailureIsReportedWithItsMeaning) {
    auto s = make(1);
    k->next_job_error = -EFAULT;
    const std::uint64_t a = s->enqueue(job());
    s->wait(queue, a);
    const auto f = s->take_failure(queue);
    ASSERT_TRUE(f);
    EXPECT_FALSE(f->refused);
    const Error e = job_error(*f, k->path());
    EXPECT_EQ(e.code(), Errc::JobFailed);
    EXPECT_THAT(e.what(), HasSubstr("MMU fault"));
    EXPECT_EQ(s->stats().failures, 1u);
}

TEST_P(SubmitterTest, WhatAJobUsesLivesUntilTheJobIsDone) {
    k->hold_jobs = true;
    auto s = make(1);
    auto owner = std::make_shared<int>(7);
    const std::weak_ptr<int> watch = owner;
    Job j = job();
    j.keep_alive.push_back(std::move(owner));
    const std::uint64_t n = s->enqueue(std::move(j));
    EXPECT_FALSE(watch.expired()) << "the job still holds it";
    k->complete_jobs();
    EXPECT_TRUE(s->done(queue, n));
    EXPECT_TRUE(watch.expired());
}

TEST_P(SubmitterTest, TheDestructorWaitsForEveryJob) {
    k->hold_jobs = true;
    auto s = make(8);
    for (int i = 0; i < 3; i++)
        s->enqueue(job());
    s.reset();
    EXPECT_EQ(k->pending_jobs(), 0u);
    EXPECT_EQ(k->count(KernelOp::Submit), 3);
}

TEST_P(SubmitterTest, InSyncsAndOutSyncReachTheKernel) {
    auto s = make(1);
    const std::uint32_t sync = k->syncobj_create(0);
    Job first = job();
    first.out = {sync, 1};
    s->wait(queue, s->enqueue(std::move(first)));
    Job second = job();
    second.in_syncs = {{sync, 1}};
    s->wait(queue, s->enqueue(std::move(second)));
    ASSERT_EQ(k->last_in_syncs.size(), 1u);
    EXPECT_EQ(k->last_in_syncs[0].handle, sync);
    EXPECT_EQ(k->last_in_syncs[0].point, 1u);
    EXPECT_FALSE(s->take_failure(queue));
}

INSTANTIATE_TEST_SUITE_P(BothPaths, SubmitterTest, ::testing::Values(Via::Uring, Via::Ioctl),
                         [](const auto& info) {
                             return info.param == Via::Uring ? std::string("IoUring")
                                                             : std::string("Ioctl");
                         });

// ---- fallback ------------------------------------------------------------------

class Fallback : public ::testing::TestWithParam<int> {};

TEST_P(Fallback, IoUringSetupFailureFallsBackToTheIoctlsWithTheSameResults) {
    auto k = std::make_shared<FakeKernel>();
    const std::uint32_t q = k->queue_create(1, 1);
    const std::uint32_t cmd = k->bo_create({4096, RBLN_REGION_HOST, 0, 0}).handle;
    std::vector<std::string> warnings;
    SubmitterOptions o;
    o.batch = 2;
    o.ring_factory = failing_ring_factory(GetParam());
    o.warn = [&](const std::string& m) { warnings.push_back(m); };
    Submitter s(k, o);
    EXPECT_EQ(s.path(), Submitter::Path::Ioctl);
    EXPECT_THAT(s.fallback_reason(), HasSubstr("io_uring_queue_init"));
    Job j;
    j.queue_id = q;
    j.cmd_handle = cmd;
    j.cmd_size = 8;
    k->next_job_error = -EIO;
    const std::uint64_t a = s.enqueue(j);
    const std::uint64_t b = s.enqueue(j);
    EXPECT_EQ(k->count(KernelOp::Submit), 2) << "batched as on io_uring";
    s.wait(q, b);
    EXPECT_TRUE(s.done(q, a));
    const auto f = s.take_failure(q);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->job, a);
    EXPECT_EQ(f->err, EIO);
    // Logged at most once per process (an earlier case may have logged it).
    EXPECT_LE(warnings.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(SetupErrors, Fallback, ::testing::Values(ENOSYS, EPERM),
                         [](const auto& info) {
                             return info.param == ENOSYS ? std::string("ENOSYS")
                                                         : std::string("EPERM");
                         });

TEST(FallbackProbe, AKernelThatRejectsTheUringCmdFallsBack) {
    auto k = std::make_shared<FakeKernel>();
    SubmitterOptions o;
    auto factory = fake_ring_factory(*k);
    o.ring_factory = [&](KernelInterface& kernel,
                         unsigned entries) -> Result<std::unique_ptr<CommandRing>> {
        auto r = factory(kernel, entries);
        static_cast<FakeRing&>(*r.value()).reject_with = EOPNOTSUPP;
        return r;
    };
    o.warn = [](const std::string&) {};
    const Submitter s(k, o);
    EXPECT_EQ(s.path(), Submitter::Path::Ioctl);
    EXPECT_THAT(s.fallback_reason(), HasSubstr("rejects rbln uring_cmds"));
}

TEST(FallbackProbe, TheRealFactoryRefusesAFakeNode) {
    FakeKernel k;
    auto r = make_io_uring(k, 8);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().sys_errno(), ENOTSUP);
}

TEST(FallbackLog, TheFallbackIsLoggedOncePerProcess) {
    // Two devices without io_uring: whichever logged first, the second is silent.
    std::vector<std::string> warnings;
    for (int i = 0; i < 2; i++) {
        auto k = std::make_shared<FakeKernel>();
        SubmitterOptions o;
        o.ring_factory = failing_ring_factory(ENOSYS);
        o.warn = [&](const std::string& m) { warnings.push_back(m); };
        const Submitter s(k, o);
    }
    EXPECT_LE(warnings.size(), 1u);
}

} // namespace
} // namespace rbln::test
