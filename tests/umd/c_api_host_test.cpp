// SPDX-License-Identifier: GPL-2.0
// The C ABI of pinned host memory (rbln_host.h), over a fake sysfs and a
// FakeKernel that runs its packets: blocks and huge buffers are pinned
// (copies through them asynchronous), freed blocks are cached, statistics
// by key, errors with messages, and the same from a C translation unit.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/host_allocator.hpp"
#include "rbln/rbln.h"
#include "rbln/rbln_host.h"
#include "testing.hpp"

extern "C" int rbln_test_host_from_c(void);

namespace rbln::test::c_api_host_test {
namespace {

using ::testing::HasSubstr;

class CHost : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        fake.add_card(CardSpec{});
        ProcessOptions p;
        p.runtime.root = fake.root();
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
    static std::int64_t stat(const char* key) {
        std::int64_t v = -1;
        EXPECT_EQ(rbln_host_memory_stat(0, key, &v), RBLN_OK) << rbln_last_error_message();
        return v;
    }

    FakeSysfs fake;
};

TEST_F(CHost, BlocksArePinnedAndCopiesThroughThemAreAsync) {
    void* p = nullptr;
    ASSERT_EQ(rbln_host_alloc(0, 4096, &p), RBLN_OK) << rbln_last_error_message();
    rbln_buffer* d = nullptr;
    ASSERT_EQ(rbln_malloc(0, 2048, &d), RBLN_OK);
    std::memset(p, 0x5a, 2048);
    ASSERT_EQ(rbln_memcpy_htod(d, 0, p, 2048, nullptr, 1), RBLN_OK);
    auto* back = static_cast<unsigned char*>(p) + 2048;
    ASSERT_EQ(rbln_memcpy_dtoh(back, d, 0, 2048, nullptr, 1), RBLN_OK);
    ASSERT_EQ(rbln_device_synchronize(0), RBLN_OK);
    EXPECT_EQ(back[0], 0x5a);
    EXPECT_EQ(back[2047], 0x5a);
    const CopyStats cs = Device::get(0)->copy_stats();
    EXPECT_EQ(cs.async_h2d, 1u);
    EXPECT_EQ(cs.async_d2h, 1u);
    EXPECT_EQ(rbln_buffer_free(d), RBLN_OK);
    EXPECT_EQ(rbln_host_free(p), RBLN_OK);
}

TEST_F(CHost, AFreedBlockIsCachedAndEmptyCacheReturnsIt) {
    void* p = nullptr;
    ASSERT_EQ(rbln_host_alloc(0, 5000, &p), RBLN_OK);
    std::size_t size = 0;
    ASSERT_EQ(rbln_host_block_size(p, &size), RBLN_OK);
    EXPECT_EQ(size, 8192u);
    EXPECT_EQ(stat("allocated_bytes.current"), 8192);
    ASSERT_EQ(rbln_host_free(p), RBLN_OK);
    EXPECT_EQ(stat("allocated_bytes.current"), 0);
    EXPECT_EQ(stat("reserved_bytes.current"), 8192);
    void* q = nullptr;
    ASSERT_EQ(rbln_host_alloc(0, 8000, &q), RBLN_OK);
    EXPECT_EQ(q, p);
    EXPECT_EQ(stat("num_host_alloc"), 1);
    ASSERT_EQ(rbln_host_free(q), RBLN_OK);
    ASSERT_EQ(rbln_host_empty_cache(0), RBLN_OK);
    EXPECT_EQ(stat("reserved_bytes.current"), 0);
    EXPECT_EQ(stat("num_host_free"), 1);
}

TEST_F(CHost, BadArgumentsAreInvalidWithAMessage) {
    void* p = nullptr;
    EXPECT_EQ(rbln_host_alloc(0, 0, &p), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_host_alloc(-1, 10, &p), RBLN_ERR_INVALID_ARGUMENT);
    int local = 0;
    EXPECT_EQ(rbln_host_free(&local), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("not returned by rbln_host_alloc"));
    EXPECT_EQ(rbln_host_free(nullptr), RBLN_OK);
    std::int64_t v = 0;
    EXPECT_EQ(rbln_host_memory_stat(0, "no.such.key", &v), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("no.such.key"));
    rbln_huge_host* h = nullptr;
    EXPECT_EQ(rbln_huge_host_empty(0, 0, &h, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_huge_host_empty(7, 4096, &h, nullptr), RBLN_ERR_NO_DEVICE);
    EXPECT_EQ(rbln_huge_host_free(nullptr), RBLN_OK);
}

TEST_F(CHost, HugeBuffersReportTheirBackingAndSize) {
    rbln_huge_host* h = nullptr;
    void* data = nullptr;
    ASSERT_EQ(rbln_huge_host_empty(0, 3u << 20, &h, &data), RBLN_OK) << rbln_last_error_message();
    rbln_huge_host_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(rbln_huge_host_get_info(h, &info), RBLN_OK);
    EXPECT_EQ(info.size, 4u << 20);
    EXPECT_EQ(info.data, data);
    EXPECT_LE(info.backing, RBLN_HUGE_HOST_SMALL_PAGES);
    EXPECT_LE(info.huge_bytes, info.size);
    // An older caller's shorter struct gets only its prefix.
    rbln_huge_host_info small{};
    small.struct_size = 8;
    small.size = 77;
    ASSERT_EQ(rbln_huge_host_get_info(h, &small), RBLN_OK);
    EXPECT_EQ(small.size, 77u);
    EXPECT_EQ(rbln_huge_host_free(h), RBLN_OK);
}

TEST_F(CHost, TheHeaderWorksFromC) {
    EXPECT_EQ(rbln_test_host_from_c(), 0) << rbln_last_error_message();
}

} // namespace
} // namespace rbln::test::c_api_host_test
