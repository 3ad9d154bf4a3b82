// SPDX-License-Identifier: GPL-2.0
// The C ABI of lazy device storage (rbln_storage.h), over a fake sysfs
// tree whose one card opens as a FakeKernel that runs its packets, with the
// process allocator over that card.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/rbln_alloc.h"
#include "rbln/rbln_host.h"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"
#include "testing.hpp"

namespace rbln::test::c_api_storage_test {
namespace {

using ::testing::HasSubstr;

class CStorage : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        fake.add_card(CardSpec{});
        ProcessOptions p;
        p.runtime.root = fake.root();
        p.runtime.env = [](std::string_view) { return std::optional<std::string>(); };
        p.device.submitter.use_io_uring = false;
        p.device.submitter.warn = [](const std::string&) {};
        p.opener = [](const std::string&) -> Result<std::unique_ptr<KernelInterface>> {
            auto k = std::make_unique<FakeKernel>();
            k->run_packets = true;
            return std::unique_ptr<KernelInterface>(std::move(k));
        };
        reset_process_for_tests(std::move(p));
    }
    void TearDown() override { reset_process_for_tests(); }

    static rbln_storage_info info_of(const rbln_storage* s) {
        rbln_storage_info i{};
        i.struct_size = sizeof(i);
        EXPECT_EQ(rbln_storage_get_info(s, &i), RBLN_OK) << rbln_last_error_message();
        return i;
    }
    static std::uint64_t allocated() {
        std::uint64_t b = 0;
        EXPECT_EQ(rbln_memory_allocated(0, &b), RBLN_OK);
        return b;
    }

    FakeSysfs fake;
};

// One thread-local error channel for every C header: a failure of any
// header's call is read with rbln_last_error_message(), and the next call
// that gets through its argument checks clears it.
TEST_F(CStorage, EveryHeaderReportsThroughTheOneErrorChannel) {
    rbln_storage* s = nullptr;
    EXPECT_EQ(rbln_storage_create(0, 3, RBLN_STORAGE_FP32, &s), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("4-byte elements"));
    std::int64_t v = 0;
    EXPECT_EQ(rbln_memory_stat(0, "no.such.key", &v), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("no memory statistic 'no.such.key'"));
    int local = 0;
    EXPECT_EQ(rbln_host_free(&local), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("not returned by rbln_host_alloc()"));
    int count = 0;
    ASSERT_EQ(rbln_logical_device_count(&count), RBLN_OK);
    EXPECT_STREQ(rbln_last_error_message(), "");
    EXPECT_EQ(rbln_storage_create(-1, 4, RBLN_STORAGE_FP32, &s), RBLN_ERR_INVALID_ARGUMENT);
    std::string message = rbln_last_error_message();
    std::thread([] { EXPECT_STREQ(rbln_last_error_message(), "") << "per thread"; }).join();
    EXPECT_EQ(rbln_last_error_message(), message);
}

TEST_F(CStorage, CreateIsLazyAndTheFirstDeviceUseCommits) {
    rbln_storage* s = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 128 * 128 * 2, RBLN_STORAGE_FP16, &s), RBLN_OK)
        << rbln_last_error_message();
    rbln_storage_info i = info_of(s);
    EXPECT_NE(i.id, 0u);
    EXPECT_EQ(i.resident, 0u);
    EXPECT_EQ(i.coherence, RBLN_STORAGE_IN_SYNC);
    EXPECT_EQ(allocated(), 0u);

    std::uint64_t va = 0;
    std::uint32_t handle = 0;
    ASSERT_EQ(rbln_storage_device_use(s, RBLN_STORAGE_WRITE, &va, &handle), RBLN_OK)
        << rbln_last_error_message();
    EXPECT_NE(va, 0u);
    EXPECT_NE(handle, 0u);
    EXPECT_EQ(allocated(), 128u * 128 * 2);
    i = info_of(s);
    EXPECT_EQ(i.resident, 1u);
    EXPECT_EQ(i.coherence, RBLN_STORAGE_DEVICE_LATEST);
    EXPECT_EQ(i.commits, 1u);
    std::uint64_t ptr = 0;
    ASSERT_EQ(rbln_storage_data_ptr(s, &ptr), RBLN_OK);
    EXPECT_EQ(ptr, va);
    EXPECT_EQ(rbln_storage_destroy(s), RBLN_OK);
    EXPECT_EQ(allocated(), 0u);
}

TEST_F(CStorage, WriteUseReadIsOneUploadAndOneDownload) {
    rbln_storage* s = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 64, RBLN_STORAGE_U8, &s), RBLN_OK);
    std::vector<unsigned char> in(64, 0xab);
    ASSERT_EQ(rbln_storage_write(s, 0, in.data(), in.size()), RBLN_OK);
    EXPECT_EQ(info_of(s).coherence, RBLN_STORAGE_HOST_LATEST);
    ASSERT_EQ(rbln_storage_device_use(s, RBLN_STORAGE_READ_WRITE, nullptr, nullptr), RBLN_OK);
    std::vector<unsigned char> out(64);
    ASSERT_EQ(rbln_storage_read(s, 0, out.data(), out.size()), RBLN_OK);
    EXPECT_EQ(out, in);
    const rbln_storage_info i = info_of(s);
    EXPECT_EQ(i.uploads, 1u);
    EXPECT_EQ(i.downloads, 1u);
    EXPECT_EQ(i.upload_bytes, 64u);
    EXPECT_EQ(i.coherence, RBLN_STORAGE_IN_SYNC);
    rbln_storage_destroy(s);
}

TEST_F(CStorage, BindNeedsTheWholeStorage) {
    rbln_storage* s = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 256, RBLN_STORAGE_FP32, &s), RBLN_OK);
    EXPECT_EQ(rbln_storage_bind_device_memory(s, 4, 252), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("not at offset 0"));
    EXPECT_EQ(rbln_storage_bind_device_memory(s, 0, 128), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("covers 128 of the storage's 256"));
    EXPECT_EQ(rbln_storage_bind_device_memory(s, 0, 2), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("whole numbers of 4-byte elements"));
    EXPECT_EQ(info_of(s).resident, 0u);
    ASSERT_EQ(rbln_storage_bind_device_memory(s, 0, 256), RBLN_OK) << rbln_last_error_message();
    EXPECT_EQ(info_of(s).resident, 1u);
    EXPECT_EQ(allocated(), 512u) << "256 B rounded to the allocator's 512";
    rbln_storage_destroy(s);
}

TEST_F(CStorage, OutOfMemoryAtFirstUseIsReportedThere) {
    rbln_storage* s = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 1ull << 40, RBLN_STORAGE_U8, &s), RBLN_OK);
    EXPECT_EQ(rbln_storage_device_use(s, RBLN_STORAGE_WRITE, nullptr, nullptr),
              RBLN_ERR_OUT_OF_MEMORY);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("out of memory"));
    EXPECT_EQ(info_of(s).resident, 0u);
    rbln_storage_destroy(s);
}

TEST_F(CStorage, BadArguments) {
    rbln_storage* s = nullptr;
    EXPECT_EQ(rbln_storage_create(0, 16, 99, &s), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_storage_create(-2, 16, RBLN_STORAGE_U8, &s), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_storage_create(0, 16, RBLN_STORAGE_U8, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_storage_create(0, 3, RBLN_STORAGE_FP16, &s), RBLN_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(rbln_storage_create(0, 16, RBLN_STORAGE_U8, &s), RBLN_OK);
    EXPECT_EQ(rbln_storage_device_use(s, 7, nullptr, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    char buf[8];
    EXPECT_EQ(rbln_storage_read(s, 12, buf, sizeof(buf)), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("outside the storage"));
    EXPECT_EQ(rbln_storage_read(nullptr, 0, buf, 1), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_storage_destroy(nullptr), RBLN_OK);
    rbln_storage_destroy(s);
}

} // namespace
} // namespace rbln::test::c_api_storage_test
