// SPDX-License-Identifier: GPL-2.0
// The C ABI of offload scopes (rbln_offload.h), with storages of the C ABI
// (rbln_storage.h) over a fake sysfs tree whose one card opens as a
// FakeKernel, on real files and real io_uring.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/rbln_offload.h"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"
#include "testing.hpp"

extern "C" int rbln_test_offload_from_c(const char* directory);

namespace rbln::test::c_api_offload_test {
namespace {

using ::testing::HasSubstr;

class COffload : public ::testing::Test {
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
        std::string t = (std::filesystem::temp_directory_path() / "rbln-c-offload-XXXXXX").string();
        ASSERT_NE(::mkdtemp(t.data()), nullptr);
        dir = t;
    }
    void TearDown() override {
        reset_process_for_tests();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }

    static rbln_offload_stats stats_of(const rbln_offload* scope) {
        rbln_offload_stats s{};
        s.struct_size = sizeof(s);
        EXPECT_EQ(rbln_offload_get_stats(scope, &s), RBLN_OK) << rbln_last_error_message();
        return s;
    }

    FakeSysfs fake;
    std::string dir;
};

TEST_F(COffload, FromCAStorageIsPagedOutAtTheEndAndReadBackExactly) {
    EXPECT_EQ(rbln_test_offload_from_c(dir.c_str()), 0)
        << rbln_last_error_message() << rbln_last_error_message();
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "nothing named is left";
}

TEST_F(COffload, EnospcReturnsIoFromOffloadNowAndKeepsTheData) {
    rbln_offload_options o{};
    o.struct_size = sizeof(o);
    o.file = "/dev/full";
    rbln_offload* scope = nullptr;
    ASSERT_EQ(rbln_offload_begin(&o, &scope), RBLN_OK) << rbln_last_error_message();
    rbln_storage* s = nullptr;
    ASSERT_EQ(rbln_storage_create(0, 4096, RBLN_STORAGE_U8, &s), RBLN_OK);
    const std::vector<unsigned char> in(4096, 0x3c);
    ASSERT_EQ(rbln_storage_write(s, 0, in.data(), in.size()), RBLN_OK);
    EXPECT_EQ(rbln_offload_now(scope), RBLN_ERR_IO);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("the data stays in memory"));
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("/dev/full"));
    EXPECT_EQ(rbln_offload_end(scope), RBLN_OK) << "the end records, it does not fail";
    EXPECT_EQ(stats_of(scope).failures, 2u);
    size_t needed = 0;
    ASSERT_EQ(rbln_offload_failure_message(scope, 1, nullptr, 0, &needed), RBLN_OK);
    std::string m(needed, '\0');
    ASSERT_EQ(rbln_offload_failure_message(scope, 1, m.data(), m.size(), nullptr), RBLN_OK);
    EXPECT_THAT(m, HasSubstr("ENOSPC"));
    EXPECT_EQ(rbln_offload_failure_message(scope, 2, nullptr, 0, nullptr), RBLN_ERR_NOT_FOUND);
    std::vector<unsigned char> out(4096);
    ASSERT_EQ(rbln_storage_read(s, 0, out.data(), out.size()), RBLN_OK);
    EXPECT_EQ(out, in);
    rbln_storage_destroy(s);
    EXPECT_EQ(rbln_offload_destroy(scope), RBLN_OK);
}

TEST_F(COffload, TheProcessTotalsCountEveryScope) {
    const rbln_offload_stats before = stats_of(nullptr);
    EXPECT_EQ(rbln_test_offload_from_c(dir.c_str()), 0);
    const rbln_offload_stats after = stats_of(nullptr);
    EXPECT_EQ(after.writes - before.writes, 1u);
    EXPECT_EQ(after.reads - before.reads, 1u);
}

TEST_F(COffload, BadArgumentsAreRefusedWithAMessage) {
    rbln_offload* scope = nullptr;
    EXPECT_EQ(rbln_offload_begin(nullptr, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    rbln_offload_options o{};
    o.struct_size = 8;
    EXPECT_EQ(rbln_offload_begin(&o, &scope), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("struct_size"));
    o.struct_size = sizeof(o);
    o.pad = 1;
    EXPECT_EQ(rbln_offload_begin(&o, &scope), RBLN_ERR_INVALID_ARGUMENT);
    o.pad = 0;
    o.directory = "/nonexistent/rbln-offload";
    EXPECT_EQ(rbln_offload_begin(&o, &scope), RBLN_ERR_NOT_FOUND);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("/nonexistent/rbln-offload"));
    EXPECT_EQ(scope, nullptr);
    EXPECT_EQ(rbln_offload_now(nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_offload_destroy(nullptr), RBLN_OK);
}

} // namespace
} // namespace rbln::test::c_api_offload_test
