// SPDX-License-Identifier: GPL-2.0
// The C ABI of streams, events and copies (rbln.h), over a fake sysfs tree
// whose one card opens as a FakeKernel.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "fake_kernel.hpp"
#include "fake_ring.hpp"
#include "fake_sysfs.hpp"
#include "rbln/device.hpp"
#include "rbln/rbln.h"
#include "rbln/rbln_alloc.h"
#include "testing.hpp"

namespace rbln::test::c_api_stream_test {
namespace {

using ::testing::HasSubstr;

class CStreams : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        fake.add_card(CardSpec{});
        k = std::make_shared<FakeKernel>();
        k->run_packets = true;
        ProcessOptions p;
        p.runtime.root = fake.root();
        k->rings = fake_ring_factory(*k);
        p.opener = [this](const std::string&) -> Result<std::unique_ptr<KernelInterface>> {
            // The device shares the fake with the test (non-owning view).
            return std::unique_ptr<KernelInterface>(std::make_unique<Forward>(*k));
        };
        reset_process_for_tests(std::move(p));
    }
    void TearDown() override { reset_process_for_tests(); }

    // A KernelInterface that forwards to the test's FakeKernel.
    struct Forward final : KernelInterface {
        explicit Forward(FakeKernel& f) : k(f) {}
        FakeKernel& k;
        const std::string& path() const override { return k.path(); }
        const DrmVersion& drm_version() const override { return k.drm_version(); }
        std::uint32_t get_info(std::uint32_t t, std::span<std::byte> o) override {
            return k.get_info(t, o);
        }
        BoHandle bo_create(const BoCreateArgs& a) override { return k.bo_create(a); }
        BoDescription bo_info(std::uint32_t h) override { return k.bo_info(h); }
        BoHandle bo_userptr(void* p, std::uint64_t s, UserptrFlags f) override {
            return k.bo_userptr(p, s, f);
        }
        void gem_close(std::uint32_t h) override { k.gem_close(h); }
        void* mmap(std::uint64_t o, std::size_t s) override { return k.mmap(o, s); }
        void munmap(void* p, std::size_t s) override { k.munmap(p, s); }
        std::uint32_t queue_create(std::uint32_t m, QueuePriority p) override {
            return k.queue_create(m, p);
        }
        void queue_destroy(std::uint32_t q) override { k.queue_destroy(q); }
        std::uint64_t submit(const SubmitArgs& a) override { return k.submit(a); }
        WaitResult wait(const WaitArgs& a) override { return k.wait(a); }
        std::uint32_t syncobj_create(std::uint32_t f) override { return k.syncobj_create(f); }
        void syncobj_destroy(std::uint32_t h) override { k.syncobj_destroy(h); }
        Result<std::unique_ptr<CommandRing>> make_ring(unsigned e, RingMode m,
                                                       unsigned i) override {
            return k.make_ring(e, m, i);
        }
    };

    FakeSysfs fake;
    std::shared_ptr<FakeKernel> k;
};

TEST_F(CStreams, CopiesRoundTripAndEventsTimeThem) {
    rbln_stream* s = nullptr;
    ASSERT_EQ(rbln_stream_create(0, &s), RBLN_OK) << rbln_last_error_message();
    rbln_buffer* d = nullptr;
    ASSERT_EQ(rbln_malloc(0, 4096, &d), RBLN_OK) << rbln_last_error_message();
    rbln_buffer* h = nullptr;
    void* host = nullptr;
    ASSERT_EQ(rbln_malloc_host(0, 4096, &h, &host), RBLN_OK);
    std::memset(host, 0x42, 4096);
    rbln_event* start = nullptr;
    rbln_event* end = nullptr;
    ASSERT_EQ(rbln_event_create(&start, 0), RBLN_OK);
    ASSERT_EQ(rbln_event_create(&end, 0), RBLN_OK);
    EXPECT_EQ(rbln_event_query(start), RBLN_OK) << "never recorded: complete";

    k->hold_jobs = true;
    ASSERT_EQ(rbln_event_record(start, s), RBLN_OK);
    ASSERT_EQ(rbln_memcpy_htod(d, 0, host, 4096, s, 1), RBLN_OK) << rbln_last_error_message();
    ASSERT_EQ(rbln_event_record(end, s), RBLN_OK);
    EXPECT_EQ(rbln_stream_query(s), RBLN_ERR_NOT_READY);
    float ms = 0;
    EXPECT_EQ(rbln_event_elapsed_time(&ms, start, end), RBLN_ERR_NOT_READY);
    k->complete_jobs();
    ASSERT_EQ(rbln_stream_synchronize(s), RBLN_OK);
    ASSERT_EQ(rbln_event_elapsed_time(&ms, start, end), RBLN_OK);
    EXPECT_GT(ms, 0.0F);

    std::vector<std::uint8_t> back(4096);
    k->hold_jobs = false;
    ASSERT_EQ(rbln_memcpy_dtoh(back.data(), d, 0, 4096, nullptr, 0), RBLN_OK)
        << rbln_last_error_message();
    EXPECT_EQ(std::count(back.begin(), back.end(), 0x42), 4096);
    ASSERT_EQ(rbln_memset(d, 0, 7, 4096, nullptr), RBLN_OK);
    ASSERT_EQ(rbln_memcpy_dtoh(back.data(), d, 0, 4096, nullptr, 0), RBLN_OK);
    EXPECT_EQ(std::count(back.begin(), back.end(), 7), 4096);

    rbln_copy_stats st{};
    st.struct_size = sizeof(st);
    ASSERT_EQ(rbln_device_copy_stats(0, &st), RBLN_OK);
    EXPECT_EQ(st.async_h2d, 1u);
    EXPECT_EQ(st.sync_d2h, 2u);
    int uring = -1;
    ASSERT_EQ(rbln_device_submit_path(0, &uring), RBLN_OK);
    EXPECT_EQ(uring, 1);
    EXPECT_EQ(rbln_device_synchronize(0), RBLN_OK);

    EXPECT_EQ(rbln_event_destroy(start), RBLN_OK);
    EXPECT_EQ(rbln_event_destroy(end), RBLN_OK);
    EXPECT_EQ(rbln_buffer_free(d), RBLN_OK);
    EXPECT_EQ(rbln_buffer_free(h), RBLN_OK);
    EXPECT_EQ(rbln_stream_destroy(s), RBLN_OK);
}

// rbln_malloc's HBM comes from the device's caching allocator: it shows in
// rbln_alloc.h's statistics and goes back to the cache when freed.
TEST_F(CStreams, MallocShowsInTheMemoryStatisticsOfTheDevice) {
    std::uint64_t allocated = 1;
    ASSERT_EQ(rbln_memory_allocated(0, &allocated), RBLN_OK) << rbln_last_error_message();
    EXPECT_EQ(allocated, 0u);
    rbln_buffer* d = nullptr;
    ASSERT_EQ(rbln_malloc(0, 4000, &d), RBLN_OK) << rbln_last_error_message();
    ASSERT_EQ(rbln_memory_allocated(0, &allocated), RBLN_OK);
    EXPECT_EQ(allocated, 4096u);
    EXPECT_EQ(Device::get(0)->allocator().memory_allocated(), 4096u);
    std::int64_t requested = 0;
    ASSERT_EQ(rbln_memory_stat(0, "requested_bytes.all.current", &requested), RBLN_OK);
    EXPECT_EQ(requested, 4000);
    ASSERT_EQ(rbln_buffer_free(d), RBLN_OK);
    ASSERT_EQ(rbln_memory_allocated(0, &allocated), RBLN_OK);
    EXPECT_EQ(allocated, 0u);
    std::uint64_t reserved = 0;
    ASSERT_EQ(rbln_memory_reserved(0, &reserved), RBLN_OK);
    EXPECT_EQ(reserved, 2u << 20) << "the segment stays cached";
}

TEST_F(CStreams, AFailedJobIsTheStatusOfTheNextSynchronize) {
    rbln_buffer* d = nullptr;
    ASSERT_EQ(rbln_malloc(0, 4096, &d), RBLN_OK);
    k->next_job_error = -EFAULT;
    ASSERT_EQ(rbln_memset(d, 0, 1, 64, nullptr), RBLN_OK) << "enqueued: fine so far";
    EXPECT_EQ(rbln_device_synchronize(0), RBLN_ERR_JOB_FAILED);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("MMU fault"));
    EXPECT_STREQ(rbln_status_name(RBLN_ERR_JOB_FAILED), "job-failed");
    EXPECT_EQ(rbln_device_synchronize(0), RBLN_OK) << "reported once";
    rbln_buffer_free(d);
}

TEST_F(CStreams, ACancelledJobSaysItsFileWasReleased) {
    rbln_buffer* d = nullptr;
    ASSERT_EQ(rbln_malloc(0, 4096, &d), RBLN_OK);
    k->next_job_error = -ECANCELED;
    ASSERT_EQ(rbln_memset(d, 0, 1, 64, nullptr), RBLN_OK);
    EXPECT_EQ(rbln_device_synchronize(0), RBLN_ERR_JOB_FAILED);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("cancelled"));
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("release_grace_ms"));
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("ECANCELED"));
    rbln_buffer_free(d);
}

TEST_F(CStreams, BadArgumentsAreRefused) {
    EXPECT_EQ(rbln_stream_create(0, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_stream_create(5, reinterpret_cast<rbln_stream**>(&k)), RBLN_ERR_NO_DEVICE);
    rbln_event* e = nullptr;
    EXPECT_EQ(rbln_event_create(&e, 0x80), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_stream_destroy(nullptr), RBLN_OK);
    EXPECT_EQ(rbln_memcpy_htod(nullptr, 0, nullptr, 0, nullptr, 0), RBLN_ERR_INVALID_ARGUMENT);
}

} // namespace
} // namespace rbln::test::c_api_stream_test
