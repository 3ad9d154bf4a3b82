// SPDX-License-Identifier: GPL-2.0
// Submitter: batching, completions, failures, buffer lifetime, the
// io_uring -> ioctl fallback and single-issuer mode, on both paths against
// the fake kernel.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "exec/submitter.hpp"
#include "fake_kernel.hpp"
#include "fake_ring.hpp"
#include "rbln/device.hpp"

namespace rbln::test::submitter_test {
namespace {

using ::testing::HasSubstr;

enum class Via { Uring, Ioctl };

class SubmitterTest : public ::testing::TestWithParam<Via> {
protected:
    void SetUp() override {
        k = std::make_shared<FakeKernel>();
        queue = k->queue_create(1, QueuePriority::Normal);
        cmd = k->bo_create({4096, Region::Host, 0, BoFlags::None}).handle;
    }
    std::unique_ptr<Submitter> make(unsigned batch = 4, unsigned max_in_flight = 64) {
        SubmitterOptions o;
        o.batch = batch;
        o.max_in_flight = max_in_flight;
        o.warn = [this](const std::string& m) { warnings.push_back(m); };
        if (GetParam() == Via::Uring)
            k->rings = fake_ring_factory(*k, &ring);
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

// Both paths hand the kernel the job as it was enqueued: its flags (the
// ioctl fallback once dropped them), command buffer, buffers, in-syncs and
// out-sync.
TEST_P(SubmitterTest, AJobsFlagsBuffersAndSyncsReachTheKernelAsTheyAreOnEitherPath) {
    auto s = make(1);
    const std::uint32_t data0 = k->bo_create({4096, Region::Host, 0, BoFlags::None}).handle;
    const std::uint32_t data1 = k->bo_create({4096, Region::Hbm, 1, BoFlags::None}).handle;
    const std::uint32_t binary = k->syncobj_create(0);
    const std::uint32_t timeline = k->syncobj_create(0);
    const std::uint32_t out = k->syncobj_create(0);
    Job first = job(); // gives the in-syncs their fences
    first.out = {binary, 0};
    s->enqueue(first);
    Job second = job();
    second.out = {timeline, 3};
    s->enqueue(second);
    Job j = job();
    j.flags = SubmitFlags::NoImplicitWait;
    j.cmd_offset = 16;
    j.cmd_size = 24;
    j.bo_handles = {data1, data0};
    j.in_syncs = {{binary, 0}, {timeline, 3}};
    j.out = {out, 7};
    const std::uint64_t n = s->enqueue(j);
    s->wait(queue, n);

    const SubmitArgs& got = k->last_submit;
    EXPECT_EQ(got.flags, SubmitFlags::NoImplicitWait);
    EXPECT_EQ(got.queue_id, queue);
    EXPECT_EQ(got.cmd_handle, cmd);
    EXPECT_EQ(got.cmd_offset, 16u);
    EXPECT_EQ(got.cmd_size, 24u);
    EXPECT_THAT(std::vector<std::uint32_t>(got.bo_handles.begin(), got.bo_handles.end()),
                ::testing::ElementsAre(data1, data0));
    ASSERT_EQ(k->last_in_syncs.size(), 2u);
    EXPECT_EQ(k->last_in_syncs[0].handle, binary);
    EXPECT_EQ(k->last_in_syncs[0].point, 0u);
    EXPECT_EQ(k->last_in_syncs[1].handle, timeline);
    EXPECT_EQ(k->last_in_syncs[1].point, 3u);
    EXPECT_EQ(got.out.handle, out);
    EXPECT_EQ(got.out.point, 7u);
    EXPECT_EQ(k->count(KernelOp::Submit), 3);
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
    const std::uint32_t q = k->queue_create(1, QueuePriority::Normal);
    const std::uint32_t cmd = k->bo_create({4096, Region::Host, 0, BoFlags::None}).handle;
    std::vector<std::string> warnings;
    SubmitterOptions o;
    o.batch = 2;
    k->rings = failing_ring_factory(GetParam());
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
    k->rings = [&](KernelInterface& kernel,
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

TEST(FallbackProbe, AKernelInterfaceWithoutARingHasNone) {
    FakeKernel k; // no k.rings: the KernelInterface default
    auto r = k.make_ring(8, RingMode::AnyThread, 0);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().sys_errno(), ENOTSUP);
}

TEST(FallbackLog, TheFallbackIsLoggedOncePerProcess) {
    // Two devices without io_uring: whichever logged first, the second is silent.
    std::vector<std::string> warnings;
    for (int i = 0; i < 2; i++) {
        auto k = std::make_shared<FakeKernel>();
        SubmitterOptions o;
        k->rings = failing_ring_factory(ENOSYS);
        o.warn = [&](const std::string& m) { warnings.push_back(m); };
        const Submitter s(k, o);
    }
    EXPECT_LE(warnings.size(), 1u);
}

// ---- single issuer -------------------------------------------------------------

// A FakeRing that records what the Submitter asks of it: the CQEs each
// blocking wait asks for (the fake card then completes that many held
// jobs) and the drains.
class RecordingRing final : public CommandRing {
public:
    RecordingRing(FakeKernel& k, unsigned entries) : k_(k), ring_(k, entries) {}
    RingMode mode() const noexcept override { return ring_.mode(); }
    unsigned space() const override { return ring_.space(); }
    void push_submit(const SubmitArgs& job, std::uint64_t user_data) override {
        ring_.push_submit(job, user_data);
    }
    void push_wait(const WaitArgs& wait, std::uint64_t user_data) override {
        ring_.push_wait(wait, user_data);
    }
    int submit() override { return ring_.submit(); }
    std::size_t drain(std::span<RingCompletion> out) override {
        drains++;
        return ring_.drain(out);
    }
    int wait_for_completion() override { return wait_for_completions(1); }
    int wait_for_completions(unsigned n) override {
        waits.push_back(n);
        k_.complete_jobs(n);
        return ring_.wait_for_completion();
    }
    std::vector<unsigned> waits; ///< the CQEs asked for, per blocking wait
    int drains = 0;

private:
    FakeKernel& k_;
    FakeRing ring_;
};

// The rbln::Error @f throws on a thread of its own (a failure if none).
template <typename F> Error error_on_another_thread(F&& f) {
    std::exception_ptr thrown;
    std::thread t([&] {
        try {
            f();
        } catch (...) {
            thrown = std::current_exception();
        }
    });
    t.join();
    try {
        if (thrown)
            std::rethrow_exception(thrown);
    } catch (const Error& e) {
        return e;
    } catch (...) {
        ADD_FAILURE() << "not an rbln::Error";
        return Error(Errc::Internal, "", "", 0, "none");
    }
    ADD_FAILURE() << "nothing was thrown";
    return Error(Errc::Internal, "", "", 0, "none");
}

class SingleIssuer : public ::testing::TestWithParam<Via> {
protected:
    void SetUp() override {
        k = std::make_shared<FakeKernel>();
        queue = k->queue_create(1, QueuePriority::Normal);
        cmd = k->bo_create({4096, Region::Host, 0, BoFlags::None}).handle;
    }
    std::unique_ptr<Submitter> make(unsigned batch, bool single_issuer = true) {
        SubmitterOptions o;
        o.batch = batch;
        o.single_issuer = single_issuer;
        o.warn = [](const std::string&) {};
        if (GetParam() == Via::Uring)
            k->rings = [this](KernelInterface&,
                              unsigned entries) -> Result<std::unique_ptr<CommandRing>> {
                auto r = std::make_unique<RecordingRing>(*k, entries);
                ring = r.get();
                return std::unique_ptr<CommandRing>(std::move(r));
            };
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
    static void expect_refusal(const Error& e, const char* operation) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        const std::string what = e.what();
        EXPECT_THAT(what, HasSubstr(operation));
        EXPECT_THAT(what, HasSubstr("single-issuer mode"));
        EXPECT_THAT(what, HasSubstr("only the thread that opened it"));
        EXPECT_THAT(what, HasSubstr("open it without single-issuer mode"));
    }
    std::shared_ptr<FakeKernel> k;
    RecordingRing* ring = nullptr;
    std::uint32_t queue = 0;
    std::uint32_t cmd = 0;
};

TEST_P(SingleIssuer, EnqueueFromAnotherThreadIsRefusedBeforeAnythingReachesTheKernel) {
    auto s = make(1);
    ASSERT_TRUE(s->single_issuer());
    expect_refusal(error_on_another_thread([&] { s->enqueue(job()); }), "enqueue");
    EXPECT_EQ(k->count(KernelOp::Submit), 0);
    EXPECT_EQ(s->last_job(queue), 0u) << "the refused job got no number";
    // The owning thread still submits.
    const std::uint64_t n = s->enqueue(job());
    EXPECT_EQ(n, 1u);
    s->wait(queue, n);
    EXPECT_EQ(k->count(KernelOp::Submit), 1);
}

TEST_P(SingleIssuer, FlushAndWaitsFromAnotherThreadAreRefused) {
    auto s = make(4);
    const std::uint64_t n = s->enqueue(job()); // queued: the batch is not full
    expect_refusal(error_on_another_thread([&] { s->flush(); }), "flush");
    EXPECT_EQ(k->count(KernelOp::Submit), 0) << "the refused flush handed nothing over";
    expect_refusal(error_on_another_thread([&] { s->wait(queue, n); }), "wait");
    expect_refusal(error_on_another_thread([&] { s->wait_all(); }), "wait");
    EXPECT_EQ(k->count(KernelOp::Submit), 0);
    s->wait(queue, n);
    EXPECT_EQ(s->stats().completions, 1u);
}

TEST_P(SingleIssuer, DoneFromAnotherThreadAnswersFromWhatTheOwnerReaped) {
    k->hold_jobs = true;
    auto s = make(1);
    const std::uint64_t n = s->enqueue(job());
    k->complete_jobs(); // done on the card, not yet reaped
    const int waits_before = k->count(KernelOp::Wait);
    const int drains_before = ring != nullptr ? ring->drains : 0;
    bool seen = true;
    std::uint64_t completed = 1;
    std::thread([&] {
        seen = s->done(queue, n);
        completed = s->completed(queue);
    }).join();
    EXPECT_FALSE(seen) << "the owner has not reaped it yet";
    EXPECT_EQ(completed, 0u);
    EXPECT_EQ(k->count(KernelOp::Wait), waits_before) << "no WAIT from another thread";
    if (ring != nullptr) {
        EXPECT_EQ(ring->drains, drains_before) << "the ring is not touched from another thread";
    }
    EXPECT_TRUE(s->done(queue, n)) << "the owner reaps";
    std::thread([&] { seen = s->done(queue, n); }).join();
    EXPECT_TRUE(seen) << "now the bookkeeping says done";
}

INSTANTIATE_TEST_SUITE_P(BothPaths, SingleIssuer, ::testing::Values(Via::Uring, Via::Ioctl),
                         [](const auto& info) {
                             return info.param == Via::Uring ? std::string("IoUring")
                                                             : std::string("Ioctl");
                         });

class SingleIssuerWait : public SingleIssuer {};

TEST_P(SingleIssuerWait, AWaiterAsksForEveryCqeItNeedsInOneWait) {
    k->hold_jobs = true;
    auto s = make(8);
    ASSERT_NE(ring, nullptr);
    for (int i = 0; i < 4; i++)
        s->enqueue(job());
    s->wait(queue, 4);
    EXPECT_THAT(ring->waits, ::testing::ElementsAre(4u)) << "one wake-up for the four jobs";
    EXPECT_EQ(s->stats().completions, 4u);
}

TEST_P(SingleIssuerWait, AWaiterAsksOnlyForTheCqesUpToItsJob) {
    k->hold_jobs = true;
    auto s = make(8);
    ASSERT_NE(ring, nullptr);
    for (int i = 0; i < 4; i++)
        s->enqueue(job());
    s->wait(queue, 3);
    ASSERT_FALSE(ring->waits.empty());
    EXPECT_EQ(ring->waits.front(), 3u) << "the fourth job's CQE is not needed";
    EXPECT_TRUE(s->done(queue, 3));
}

TEST_P(SingleIssuerWait, InAnyThreadModeAWaiterAsksForOneCqeAtATime) {
    k->hold_jobs = true;
    auto s = make(8, false);
    ASSERT_NE(ring, nullptr);
    for (int i = 0; i < 4; i++)
        s->enqueue(job());
    s->wait(queue, 4);
    EXPECT_THAT(ring->waits, ::testing::Each(1u))
        << "another thread's job may finish first: woken for every CQE";
    EXPECT_EQ(ring->waits.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(IoUring, SingleIssuerWait, ::testing::Values(Via::Uring),
                         [](const auto&) { return std::string("IoUring"); });

// ---- SQPOLL ---------------------------------------------------------------------

Submitter make_sqpoll(const std::shared_ptr<FakeKernel>& k, unsigned idle_ms, bool single) {
    SubmitterOptions o;
    o.sqpoll_idle_ms = idle_ms;
    o.single_issuer = single;
    k->rings = fake_ring_factory(*k);
    o.warn = [](const std::string&) {};
    return {k, o};
}

TEST(Sqpoll, AndSingleIssuerModeExcludeEachOtherWithAClearError) {
    auto k = std::make_shared<FakeKernel>();
    try {
        const Submitter s = make_sqpoll(k, 10, true);
        FAIL() << "an SQPOLL single-issuer Submitter was made";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_THAT(e.what(), HasSubstr("exclude each other"));
        EXPECT_THAT(e.what(), HasSubstr("ask for one of them"));
    }
    EXPECT_EQ(k->count(KernelOp::Submit), 0);
}

TEST(Sqpoll, AnIdleTimeAboveTheLimitIsRefused) {
    auto k = std::make_shared<FakeKernel>();
    try {
        const Submitter s = make_sqpoll(k, kMaxSqpollIdleMs + 1, false);
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_THAT(e.what(), HasSubstr(std::to_string(kMaxSqpollIdleMs + 1) + " ms"));
    }
}

TEST(Sqpoll, ARingFromAFactoryIsNotReportedAsSqpoll) {
    // sqpoll() reports the ring the kernel interface made, which the fake's
    // is not.
    auto k = std::make_shared<FakeKernel>();
    const Submitter s = make_sqpoll(k, kMaxSqpollIdleMs, false);
    EXPECT_EQ(s.path(), Submitter::Path::IoUring);
    EXPECT_FALSE(s.sqpoll());
}

EnvSource env_with(const std::optional<std::string>& v) {
    return [v](std::string_view name) -> std::optional<std::string> {
        return name == "RBLN_URING_SQPOLL" ? v : std::nullopt;
    };
}

TEST(SqpollEnvironment, UnsetOrEmptyLeavesTheOptionAlone) {
    EXPECT_FALSE(sqpoll_from_environment(env_with(std::nullopt)));
    EXPECT_FALSE(sqpoll_from_environment(env_with("")));
}

TEST(SqpollEnvironment, ANumberOfMillisecondsIsTheIdleTime) {
    EXPECT_EQ(sqpoll_from_environment(env_with("0")), 0u);
    EXPECT_EQ(sqpoll_from_environment(env_with("50")), 50u);
    EXPECT_EQ(sqpoll_from_environment(env_with(std::to_string(kMaxSqpollIdleMs))),
              kMaxSqpollIdleMs);
}

TEST(SqpollEnvironment, AnythingElseIsABadConfigNamingTheValue) {
    for (const char* bad : {"abc", "-1", "5ms", " 5", "1.5", "60001", "99999999999"}) {
        try {
            (void)sqpoll_from_environment(env_with(bad));
            ADD_FAILURE() << "'" << bad << "' accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::BadConfig) << bad;
            EXPECT_THAT(e.what(), HasSubstr(std::string("'") + bad + "'"));
            EXPECT_THAT(e.what(), HasSubstr("0: off"));
        }
    }
}

} // namespace
} // namespace rbln::test::submitter_test
