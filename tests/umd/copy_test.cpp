// SPDX-License-Identifier: GPL-2.0
// Copies: the async/sync decision table, data checked byte for byte on
// every path, draining, buffer lifetime, cross-device copies.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <sys/mman.h>
#include <vector>

#include "device_fixture.hpp"
#include "rbln/copy.hpp"

namespace rbln::test::copy_test {
namespace {

// Device memory whose storage is lazy (as issue 6's lazy tensors will be).
class LazyMemory final : public Memory {
public:
    explicit LazyMemory(std::shared_ptr<Memory> m) : m_(std::move(m)) {}
    MemoryKind kind() const noexcept override { return m_->kind(); }
    const KernelInterface& kernel() const noexcept override { return m_->kernel(); }
    std::uint32_t handle() const noexcept override { return m_->handle(); }
    std::uint64_t device_va() const noexcept override { return m_->device_va(); }
    std::uint64_t size() const noexcept override { return m_->size(); }
    std::byte* host_data() const noexcept override { return m_->host_data(); }
    bool resident() const noexcept override { return resident_; }
    void make_resident() override { resident_ = true; }

private:
    std::shared_ptr<Memory> m_;
    bool resident_ = false;
};

// Page-aligned user memory, for register_host().
class Pages {
public:
    explicit Pages(std::size_t size) : size_(size) {
        p_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; i++)
        v[i] = static_cast<std::uint8_t>(seed + i * 7 + (i >> 8));
    return v;
}

class Copies : public DeviceTest {
protected:
    DeviceOptions options() override {
        DeviceOptions o;
        o.staging_bytes = 8192; // small, so sync copies take several chunks
        return o;
    }
};

// ---- the decision table ----------------------------------------------------------

struct Row {
    const char* name;
    bool host_pinned;
    bool same_size;
    bool contiguous;
    bool resident;
    CopyMode expected;
    const char* reason;
};

class Decision : public ::testing::TestWithParam<Row> {};

TEST_P(Decision, HostToDeviceAndBack) {
    const Row& r = GetParam();
    auto k = std::make_shared<FakeKernel>();
    auto dev = fake_device(k, Path::Ioctl);
    std::shared_ptr<Memory> d = dev->allocate(8192);
    if (!r.resident)
        d = std::make_shared<LazyMemory>(d);
    std::vector<std::uint8_t> pageable(8192);
    auto pinned = dev->allocate_host(8192);
    CopyEndpoint host = r.host_pinned ? CopyEndpoint::of(pinned, 0, 4096)
                                      : CopyEndpoint::of_host(pageable.data(), 4096);
    CopyEndpoint device = CopyEndpoint::of(d, 0, r.same_size ? 4096 : 8192);
    if (!r.contiguous)
        host = host.strided(1024, 2048);
    for (const auto& plan : {plan_copy(*dev, device, host), plan_copy(*dev, host, device)}) {
        EXPECT_EQ(plan.mode, r.expected) << r.name;
        EXPECT_STREQ(plan.reason, r.reason) << r.name;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Table, Decision,
    ::testing::Values(Row{"all_conditions", true, true, true, true, CopyMode::Async, ""},
                      Row{"pageable_host", false, true, true, true, CopyMode::Sync,
                          "the host memory is not pinned for this device"},
                      Row{"sizes_differ", true, false, true, true, CopyMode::Sync,
                          "source and destination sizes differ"},
                      Row{"strided_host", true, true, false, true, CopyMode::Sync,
                          "not contiguous"},
                      Row{"not_resident", true, true, true, false, CopyMode::Sync,
                          "the device memory is not resident"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(DecisionExtra, PointersInsidePinnedMemoryArePinnedAndDeviceToDeviceIsAsync) {
    auto k = std::make_shared<FakeKernel>();
    auto dev = fake_device(k, Path::Ioctl);
    const Pages pages(16384);
    auto reg = dev->register_host(pages.data(), 16384);
    auto d = dev->allocate(4096);
    EXPECT_EQ(
        plan_copy(*dev, CopyEndpoint::of(d), CopyEndpoint::of_host(pages.data() + 4096, 4096)).mode,
        CopyMode::Async);
    EXPECT_EQ(
        plan_copy(*dev, CopyEndpoint::of(d), CopyEndpoint::of_host(pages.data() + 14000, 4096))
            .mode,
        CopyMode::Sync)
        << "runs past the registered range";
    auto d2 = dev->allocate(4096);
    const CopyPlan p = plan_copy(*dev, CopyEndpoint::of(d2), CopyEndpoint::of(d));
    EXPECT_EQ(p.mode, CopyMode::Async);
    EXPECT_EQ(p.kind, CopyKind::DeviceToDevice);
    // Pinned memory of another device is not pinned for this one.
    auto k2 = std::make_shared<FakeKernel>("/dev/accel/accel1");
    auto dev2 = fake_device(k2, Path::Ioctl);
    auto other = dev2->allocate_host(4096);
    EXPECT_EQ(plan_copy(*dev, CopyEndpoint::of(d), CopyEndpoint::of(other)).mode, CopyMode::Sync);
}

// ---- data, on both paths -----------------------------------------------------------

TEST_P(Copies, AsyncRoundTripThroughPinnedMemoryIsOnePacketEachWay) {
    auto d = dev->allocate(4096);
    auto in = dev->allocate_host(4096);
    auto out = dev->allocate_host(4096);
    const auto src = pattern(4096, 3);
    std::memcpy(in->host_data(), src.data(), 4096);
    Stream s = dev->default_stream();
    const std::uint64_t before = s.last_job();
    copy(s, CopyEndpoint::of(d), CopyEndpoint::of(in), true);
    copy(s, CopyEndpoint::of(out), CopyEndpoint::of(d), true);
    EXPECT_EQ(s.last_job() - before, 2u);
    s.synchronize();
    EXPECT_EQ(std::memcmp(out->host_data(), src.data(), 4096), 0);
    const CopyStats st = dev->copy_stats();
    EXPECT_EQ(st.async_h2d, 1u);
    EXPECT_EQ(st.async_d2h, 1u);
    EXPECT_EQ(st.sync_h2d + st.sync_d2h, 0u);
}

TEST_P(Copies, SyncRoundTripOfPageableMemoryInSeveralChunks) {
    auto d = dev->allocate(65536);
    const auto src = pattern(50000, 9);
    std::vector<std::uint8_t> back(50000);
    Stream s(dev);
    copy(s, CopyEndpoint::of(d, 100, 50000), CopyEndpoint::of_host(src.data(), src.size()), true);
    copy(s, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(d, 100, 50000));
    EXPECT_EQ(back, src);
    const CopyStats st = dev->copy_stats();
    EXPECT_EQ(st.sync_h2d, 1u);
    EXPECT_EQ(st.sync_d2h, 1u);
    EXPECT_EQ(st.bytes_sync, 100000u);
}

TEST_P(Copies, StridedHostAndDeviceSidesAreGatheredAndScattered) {
    auto d = dev->allocate(8192);
    // 16 rows of 100 bytes, 256 apart on the host; 128 apart on the device.
    const auto host = pattern(16 * 256, 1);
    Stream s(dev);
    copy(s, CopyEndpoint::of(d, 0, 1600).strided(100, 128),
         CopyEndpoint::of_host(host.data(), 1600).strided(100, 256));
    std::vector<std::uint8_t> back(1600);
    copy(s, CopyEndpoint::of_host(back.data(), back.size()),
         CopyEndpoint::of(d, 0, 1600).strided(100, 128));
    for (int r = 0; r < 16; r++)
        ASSERT_EQ(std::memcmp(back.data() + r * 100, host.data() + r * 256, 100), 0) << r;
}

TEST_P(Copies, DeviceToDeviceOnOneDeviceIsAsync) {
    auto a = dev->allocate(4096);
    auto b = dev->allocate(4096);
    Stream s(dev);
    s.fill(a, 0, 4096, 0x5a, 1);
    copy(s, CopyEndpoint::of(b), CopyEndpoint::of(a), true);
    std::vector<std::uint8_t> back(4096);
    copy(s, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(b));
    EXPECT_EQ(std::count(back.begin(), back.end(), 0x5a), 4096);
    EXPECT_EQ(dev->copy_stats().async_d2d, 1u);
}

TEST_P(Copies, ADestinationThatIsAMultipleOfTheSourceGetsItRepeated) {
    auto d = dev->allocate(4096);
    const std::uint8_t unit[4] = {1, 2, 3, 4};
    Stream s(dev);
    copy(s, CopyEndpoint::of(d, 0, 4096), CopyEndpoint::of_host(unit, 4));
    std::vector<std::uint8_t> back(4096);
    copy(s, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(d));
    for (std::size_t i = 0; i < back.size(); i++)
        ASSERT_EQ(back[i], unit[i % 4]) << i;
    EXPECT_THROW(copy(s, CopyEndpoint::of(d, 0, 4096), CopyEndpoint::of_host(unit, 3)), Error);
}

TEST_P(Copies, ASyncCopyDrainsThePendingAsyncOnesFirst) {
    k->hold_jobs = true;
    auto d = dev->allocate(4096);
    auto pinned = dev->allocate_host(4096);
    std::memset(pinned->host_data(), 0x77, 4096);
    Stream a(dev);
    Stream b(dev);
    copy(a, CopyEndpoint::of(d), CopyEndpoint::of(pinned), true);
    EXPECT_EQ(k->pending_jobs(), 0u) << "queued in the batch, not yet in the kernel";
    dev->flush();
    EXPECT_EQ(k->pending_jobs(), 1u);
    std::vector<std::uint8_t> back(4096);
    copy(b, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(d));
    EXPECT_EQ(std::count(back.begin(), back.end(), 0x77), 4096)
        << "the async copy on the other stream came first";
    EXPECT_EQ(dev->copy_stats().drains, 1u);
}

TEST_P(Copies, AnAsyncCopyKeepsItsBuffersAliveAfterTheCallerDropsThem) {
    k->hold_jobs = true;
    auto d = dev->allocate(4096);
    auto pinned = dev->allocate_host(4096);
    const std::weak_ptr<Memory> wd = d;
    const std::weak_ptr<Memory> wp = pinned;
    const std::size_t buffers = k->buffer_count();
    Stream s(dev);
    copy(s, CopyEndpoint::of(d), CopyEndpoint::of(pinned), true);
    d.reset();
    pinned.reset();
    EXPECT_FALSE(wd.expired());
    EXPECT_FALSE(wp.expired());
    EXPECT_EQ(k->buffer_count(), buffers + 1) << "+ the command buffer; nothing freed";
    k->complete_jobs();
    s.synchronize();
    EXPECT_TRUE(wd.expired());
    EXPECT_TRUE(wp.expired());
}

TEST_P(Copies, BetweenTwoDevicesTheDataGoesThroughHostMemory) {
    auto k2 = std::make_shared<FakeKernel>("/dev/accel/accel1");
    DeviceOptions o;
    o.staging_bytes = 8192;
    auto dev2 = fake_device(k2, GetParam(), o);
    auto a = dev->allocate(32768);
    auto b = dev2->allocate(32768);
    const auto src = pattern(20000, 5);
    Stream s = dev->default_stream();
    copy(s, CopyEndpoint::of(a, 0, 20000), CopyEndpoint::of_host(src.data(), src.size()));
    copy(s, CopyEndpoint::of(b, 0, 20000), CopyEndpoint::of(a, 0, 20000), true);
    std::vector<std::uint8_t> back(20000);
    Stream s2 = dev2->default_stream();
    copy(s2, CopyEndpoint::of_host(back.data(), back.size()), CopyEndpoint::of(b, 0, 20000));
    EXPECT_EQ(back, src);
    const CopyStats st = dev->copy_stats();
    EXPECT_EQ(st.cross_device_via_host, 1u);
    EXPECT_EQ(st.cross_device_card_to_card, 0u);
}

TEST_P(Copies, DeviceMemoryOfAnotherDeviceNeedsThatDevicesStream) {
    auto k2 = std::make_shared<FakeKernel>("/dev/accel/accel1");
    auto dev2 = fake_device(k2, GetParam());
    auto b = dev2->allocate(4096);
    std::vector<std::uint8_t> host(4096);
    Stream s(dev);
    EXPECT_THROW(copy(s, CopyEndpoint::of(b), CopyEndpoint::of_host(host.data(), 4096)), Error);
}

TEST_P(Copies, AFailedCopyJobIsReported) {
    auto d = dev->allocate(4096);
    std::vector<std::uint8_t> host(4096);
    Stream s(dev);
    k->next_job_error = -EFAULT;
    try {
        copy(s, CopyEndpoint::of(d), CopyEndpoint::of_host(host.data(), 4096));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::JobFailed);
    }
}

INSTANTIATE_TEST_SUITE_P(BothPaths, Copies, ::testing::Values(Path::Uring, Path::Ioctl), path_name);

} // namespace
} // namespace rbln::test::copy_test
