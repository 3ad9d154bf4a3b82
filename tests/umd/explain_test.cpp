// SPDX-License-Identifier: GPL-2.0
// explain regions (rbln/explain.hpp) over lazy storages and copies on a
// FakeKernel device: each record kind and what makes it a signal, clean
// against overhead, nesting, per-thread scope, source locations and the
// report's text.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ops_card.hpp"
#include "rbln/copy.hpp"
#include "rbln/explain.hpp"

namespace rbln::test::explain_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::uint64_t kBytes = 4096;

std::vector<std::byte> bytes(std::size_t n, std::uint8_t v) {
    return std::vector<std::byte>(n, std::byte{v});
}

/// A device operation that overwrites @s (a real FILL job).
void device_fill(Stream& stream, Storage& s, std::uint8_t value) {
    const auto& m = s.device_use(stream, DeviceAccess::Write);
    stream.fill(m, 0, s.nbytes(), value);
}

/// A device operation that reads @in and overwrites @out (FILL of out; the
/// fake does not run kernels, and the storage rules are all that matter).
void device_op(Stream& stream, Storage& in, Storage& out, std::uint8_t value) {
    in.device_use(stream, DeviceAccess::Read);
    device_fill(stream, out, value);
}

std::size_t count_kind(const std::vector<ExplainRecord>& rs, ExplainKind kind) {
    std::size_t n = 0;
    for (const auto& r : rs)
        n += r.kind == kind ? 1 : 0;
    return n;
}

// ---- clean --------------------------------------------------------------------

TEST(Explain, TheRecommendedStepIsCleanWithOnePushAndOneDownload) {
    OpsCard c;
    auto x = c.lazy(kBytes);
    auto y = c.lazy(kBytes);
    bind_device_memory(StorageView::whole(x));
    const auto in = bytes(kBytes, 7);
    std::vector<std::byte> out(kBytes);
    auto region = explain("step");
    x->write(0, in);
    device_op(*c.stream, *x, *y, 9);
    y->read(0, out);
    region.close();
    EXPECT_EQ(out, bytes(kBytes, 9));
    const ExplainCounts n = region.counts();
    EXPECT_TRUE(region.clean()) << region.report();
    EXPECT_EQ(n.signals, 0u);
    EXPECT_EQ(n.pushes, 1u);
    EXPECT_EQ(n.pushes_expected, 1u);
    EXPECT_EQ(n.push_bytes, kBytes);
    EXPECT_EQ(n.downloads, 1u);
    EXPECT_EQ(n.downloads_expected, 1u);
    EXPECT_EQ(n.download_bytes, kBytes);
    EXPECT_EQ(n.lazy_commits, 1u) << "y at its first use; x was bound before the region";
    EXPECT_EQ(n.commit_bytes, kBytes);
    EXPECT_THAT(region.report(), StartsWith("[clean] explain \"step\""));
}

TEST(Explain, NothingIsRecordedWithoutARegionOrAfterClose) {
    OpsCard c;
    auto x = c.lazy(kBytes);
    x->write(0, bytes(kBytes, 1));
    x->device_use(*c.stream, DeviceAccess::Read); // before the region
    auto region = explain();
    region.close();
    EXPECT_FALSE(region.open());
    x->write(0, bytes(kBytes, 2));
    x->device_use(*c.stream, DeviceAccess::Read);
    EXPECT_TRUE(region.records().empty());
    region.close(); // idempotent
}

TEST(Explain, LazyCommitsAreRecordedButAreNoSignal) {
    OpsCard c;
    auto region = explain();
    auto s = c.lazy(3 * kBytes);
    EXPECT_TRUE(region.records().empty()) << "creation commits nothing";
    s->data_ptr();
    const auto rs = region.records();
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].kind, ExplainKind::LazyCommit);
    EXPECT_EQ(rs[0].bytes, 3 * kBytes);
    EXPECT_EQ(rs[0].storage, s->id());
    EXPECT_FALSE(rs[0].signal);
    EXPECT_TRUE(region.clean());
}

// ---- each signal ------------------------------------------------------------------

TEST(Explain, APartialHostWriteOfADeviceResultIsAHiddenDownloadAndARoundTrip) {
    OpsCard c;
    auto y = c.lazy(kBytes);
    auto z = c.lazy(kBytes);
    auto region = explain();
    device_fill(*c.stream, *y, 5);
    y->write(0, bytes(16, 1)); // part of a device-latest storage: downloads first
    device_op(*c.stream, *y, *z, 6);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 2u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::Download);
    EXPECT_EQ(sig[0].cause, ExplainCause::HostWrite);
    EXPECT_EQ(sig[0].storage, y->id());
    EXPECT_EQ(sig[0].bytes, kBytes);
    EXPECT_THAT(sig[0].why, HasSubstr("host write of part"));
    EXPECT_EQ(sig[1].kind, ExplainKind::Push);
    EXPECT_EQ(sig[1].storage, y->id());
    EXPECT_THAT(sig[1].why, HasSubstr("round trip"));
    EXPECT_EQ(region.counts().pushes_expected, 0u);
}

TEST(Explain, AWholeHostWriteOfADeviceResultDownloadsNothing) {
    OpsCard c;
    auto y = c.lazy(kBytes);
    auto z = c.lazy(kBytes);
    auto region = explain();
    device_fill(*c.stream, *y, 5);
    y->write(0, bytes(kBytes, 1));
    device_op(*c.stream, *y, *z, 6);
    EXPECT_EQ(region.counts().downloads, 0u);
    EXPECT_TRUE(region.clean()) << region.report();
}

TEST(Explain, ReadingAnIntermediateThatTheDeviceReadsAgainIsASignal) {
    OpsCard c;
    auto x = c.lazy(kBytes);
    auto y = c.lazy(kBytes);
    auto z = c.lazy(kBytes);
    std::vector<std::byte> out(kBytes);
    auto region = explain();
    x->write(0, bytes(kBytes, 1));
    device_op(*c.stream, *x, *y, 2);
    y->read(0, out); // the intermediate
    EXPECT_TRUE(region.clean()) << "a read result is expected until the device reads it again";
    device_op(*c.stream, *y, *z, 3);
    z->read(0, out);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::Download);
    EXPECT_EQ(sig[0].storage, y->id());
    EXPECT_THAT(sig[0].why, HasSubstr("intermediate"));
    const ExplainCounts n = region.counts();
    EXPECT_EQ(n.downloads, 2u);
    EXPECT_EQ(n.downloads_expected, 1u) << "z's";
}

TEST(Explain, ASecondUploadOfTheSameStorageIsASignal) {
    OpsCard c;
    auto x = c.lazy(kBytes);
    auto y = c.lazy(kBytes);
    auto region = explain();
    x->write(0, bytes(kBytes, 1));
    device_op(*c.stream, *x, *y, 2);
    x->write(0, bytes(kBytes, 3));
    device_op(*c.stream, *x, *y, 4);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::Push);
    EXPECT_THAT(sig[0].why, HasSubstr("uploaded again"));
    EXPECT_EQ(region.counts().pushes, 2u);
}

TEST(Explain, ACopyBetweenTwoLogicalDevicesIsAHostBounce) {
    OpsCard a;
    OpsCard b("/dev/accel/accel1");
    auto ma = a.dev->allocate(kBytes);
    auto mb = b.dev->allocate(kBytes);
    auto region = explain();
    copy(*a.stream, CopyEndpoint::of(mb), CopyEndpoint::of(ma));
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::HostBounce);
    EXPECT_EQ(sig[0].bytes, kBytes);
    EXPECT_THAT(sig[0].why, HasSubstr("two logical devices"));
    EXPECT_EQ(region.counts().host_bounce_bytes, kBytes);
}

TEST(Explain, AStridedCopyOnOneDeviceGoesThroughTheStagingBufferAndIsAHostBounce) {
    OpsCard c;
    auto src = c.dev->allocate(8192);
    auto dst = c.dev->allocate(8192);
    auto region = explain();
    copy(*c.stream, CopyEndpoint::of(dst, 0, 1600).strided(100, 128),
         CopyEndpoint::of(src, 0, 1600));
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::HostBounce);
    EXPECT_THAT(sig[0].why, HasSubstr("staging buffer (not contiguous)"));
}

TEST(Explain, ASynchronousCopyThatDrainedPendingAsyncTransfersIsASyncWait) {
    OpsCard c;
    c.k->hold_jobs = true;
    auto d = c.dev->allocate(kBytes);
    auto pinned = c.dev->allocate_host(kBytes);
    std::vector<std::uint8_t> back(kBytes);
    auto region = explain();
    copy(*c.stream, CopyEndpoint::of(d), CopyEndpoint::of(pinned), true);
    c.dev->flush();
    Stream other(c.dev);
    copy(other, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(d));
    const auto rs = region.records();
    EXPECT_EQ(count_kind(rs, ExplainKind::AsyncTransfer), 1u);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::SyncWait);
    EXPECT_THAT(sig[0].why, HasSubstr("pending asynchronous transfers"));
    EXPECT_EQ(region.counts().downloads_expected, 1u) << "the caller's own blocking copy";
}

TEST(Explain, ANonBlockingCopyThatRanSynchronouslyIsASyncWait) {
    OpsCard c;
    auto d = c.dev->allocate(kBytes);
    std::vector<std::uint8_t> pageable(kBytes, 3);
    auto region = explain();
    copy(*c.stream, CopyEndpoint::of(d), CopyEndpoint::of_host(pageable.data(), kBytes), true);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::SyncWait);
    EXPECT_THAT(sig[0].why, HasSubstr("not pinned"));
    EXPECT_EQ(region.counts().pushes, 1u);
}

TEST(Explain, TheCallersOwnCopiesAsItAskedAreExpected) {
    OpsCard c;
    auto d = c.dev->allocate(kBytes);
    auto pinned = c.dev->allocate_host(kBytes);
    std::vector<std::uint8_t> pageable(kBytes, 3);
    auto region = explain();
    copy(*c.stream, CopyEndpoint::of(d), CopyEndpoint::of_host(pageable.data(), kBytes));
    copy(*c.stream, CopyEndpoint::of(pinned), CopyEndpoint::of(d), true);
    c.stream->synchronize();
    const ExplainCounts n = region.counts();
    EXPECT_TRUE(region.clean()) << region.report();
    EXPECT_EQ(n.pushes, 1u);
    EXPECT_EQ(n.async_transfers, 1u);
    EXPECT_EQ(n.async_bytes, kBytes);
}

TEST(Explain, WaitingForAnEventOfAnotherDeviceOnTheHostIsASyncWait) {
    OpsCard a;
    OpsCard b("/dev/accel/accel1");
    Event e;
    e.record(*a.stream);
    auto region = explain();
    b.stream->wait_event(e);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u) << region.report();
    EXPECT_EQ(sig[0].kind, ExplainKind::SyncWait);
    EXPECT_EQ(sig[0].cause, ExplainCause::CrossDeviceWait);
}

TEST(Explain, TheCallersOwnSynchronizeIsNotRecorded) {
    OpsCard c;
    auto region = explain();
    c.stream->synchronize();
    c.dev->synchronize();
    EXPECT_TRUE(region.records().empty());
}

// ---- scope ---------------------------------------------------------------------------

TEST(Explain, NestedRegionsEachSeeTheirOwnSpanAndClassifyOnTheirOwn) {
    OpsCard c;
    auto y = c.lazy(kBytes);
    auto z = c.lazy(kBytes);
    auto outer = explain("outer");
    device_fill(*c.stream, *y, 5);
    y->write(0, bytes(16, 1)); // outer: a hidden download
    {
        auto inner = explain("inner");
        device_op(*c.stream, *y, *z, 6); // y's upload
        EXPECT_TRUE(inner.clean()) << "inner did not see the download: a first upload\n"
                                   << inner.report();
        EXPECT_EQ(inner.counts().pushes, 1u);
    }
    EXPECT_EQ(outer.counts().pushes, 1u) << "the inner region's events reach the outer";
    EXPECT_EQ(outer.counts().signals, 2u) << outer.report();
}

TEST(Explain, ARegionRecordsOnlyItsOwnThread) {
    OpsCard c;
    auto region = explain();
    std::thread t([&] {
        auto s = c.lazy(kBytes);
        s->data_ptr();
        auto own = explain();
        s->write(0, bytes(kBytes, 1));
        s->device_use(*c.stream, DeviceAccess::Read);
        EXPECT_EQ(own.counts().pushes, 1u);
    });
    t.join();
    EXPECT_TRUE(region.records().empty());
}

TEST(Explain, ARegionIsClosedOnTheThreadThatOpenedIt) {
    auto region = explain();
    std::thread t([&] { EXPECT_THROW(region.close(), Error); });
    t.join();
    EXPECT_TRUE(region.open());
    region.close();
}

// ---- source locations and the report ---------------------------------------------------

TEST(Explain, RecordsCarryTheInnermostSiteAndTheRegionWhereItWasOpened) {
    OpsCard c;
    auto y = c.lazy(kBytes);
    const std::uint32_t opened = __LINE__ + 1;
    auto region = explain("sites");
    EXPECT_EQ(region.where().line, opened);
    EXPECT_THAT(region.where().file, HasSubstr("explain_test.cpp"));
    std::uint32_t line = 0;
    {
        const ExplainSite outer;
        {
            line = __LINE__ + 1;
            const ExplainSite site;
            device_fill(*c.stream, *y, 1);
        }
        y->write(0, bytes(8, 1)); // at the outer site
    }
    y->read(0, std::span<std::byte>()); // host-latest: nothing to download
    const auto rs = region.records();
    ASSERT_EQ(rs.size(), 2u) << region.report();
    EXPECT_EQ(rs[0].kind, ExplainKind::LazyCommit);
    EXPECT_EQ(rs[0].where.line, line);
    EXPECT_THAT(rs[0].where.function, HasSubstr("TestBody"));
    EXPECT_EQ(rs[1].kind, ExplainKind::Download);
    EXPECT_EQ(rs[1].where.line, line - 3);
    EXPECT_EQ(rs[1].where.brief(), "explain_test.cpp:" + std::to_string(line - 3));
}

TEST(Explain, RecordsWithoutASiteHaveNoLocation) {
    OpsCard c;
    auto region = explain();
    c.lazy(kBytes)->data_ptr();
    const auto rs = region.records();
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_FALSE(rs[0].where.known());
    EXPECT_EQ(rs[0].where.brief(), "-");
}

TEST(Explain, TheCleanReportSaysCleanIsNotFast) {
    OpsCard c;
    auto x = c.lazy(kBytes);
    auto y = c.lazy(kBytes);
    std::vector<std::byte> out(kBytes);
    const std::uint32_t line = __LINE__ + 1;
    auto region = explain("clean step");
    x->write(0, bytes(kBytes, 1));
    device_op(*c.stream, *x, *y, 2);
    y->read(0, out);
    const std::string expected =
        "[clean] explain \"clean step\" at explain_test.cpp:" + std::to_string(line) +
        " (this thread only)\n"
        "  clean: no hidden host round trip, only the expected uploads and downloads; this is "
        "not a claim that it was fast\n"
        "  pushes (host->device):   1 (4.0 KiB), 1 expected\n"
        "  downloads (device->host): 1 (4.0 KiB), 1 expected\n"
        "  async transfers: 0 (0 B)  host bounces: 0 (0 B)  sync waits: 0  lazy commits: 2 "
        "(8.0 KiB)\n";
    EXPECT_EQ(region.report(), expected);
}

TEST(Explain, TheOverheadReportCountsTheSignalsAndTablesThem) {
    OpsCard c;
    auto y = c.lazy(kBytes);
    auto z = c.lazy(kBytes);
    auto region = explain();
    device_fill(*c.stream, *y, 5);
    std::uint32_t line = 0;
    {
        line = __LINE__ + 1;
        const ExplainSite here;
        y->write(0, bytes(16, 1));
    }
    device_op(*c.stream, *y, *z, 6);
    const std::string r = region.report();
    EXPECT_THAT(r, StartsWith("[overhead: 2 signals] explain at explain_test.cpp:"));
    EXPECT_THAT(r, HasSubstr("clean would mean no hidden host round trip, not fast"));
    EXPECT_THAT(
        r, HasSubstr("  #   signal         bytes       storage  at                      why\n"));
    const std::string id = "#" + std::to_string(y->id());
    EXPECT_THAT(r, HasSubstr("  1   download       4.0 KiB     " + id));
    EXPECT_THAT(r, HasSubstr("explain_test.cpp:" + std::to_string(line)));
    EXPECT_THAT(r, HasSubstr("  2   push           4.0 KiB     " + id));
}

TEST(Explain, KindNames) {
    EXPECT_STREQ(explain_kind_name(ExplainKind::Push), "push");
    EXPECT_STREQ(explain_kind_name(ExplainKind::Download), "download");
    EXPECT_STREQ(explain_kind_name(ExplainKind::AsyncTransfer), "async transfer");
    EXPECT_STREQ(explain_kind_name(ExplainKind::HostBounce), "host bounce");
    EXPECT_STREQ(explain_kind_name(ExplainKind::SyncWait), "sync wait");
    EXPECT_STREQ(explain_kind_name(ExplainKind::LazyCommit), "lazy commit");
}

} // namespace
} // namespace rbln::test::explain_test
