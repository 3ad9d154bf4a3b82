// SPDX-License-Identifier: GPL-2.0
// rbln_explain.h: regions, counts, the report and sites through the C ABI,
// over lazy storages on a FakeKernel device.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops_card.hpp"
#include "rbln/rbln_explain.h"

namespace rbln::test::c_api_explain_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::uint64_t kBytes = 4096;

TEST(CApiExplain, ARegionCountsAPartialWriteOfADeviceResultAsSignals) {
    OpsCard c;
    auto y = c.lazy(kBytes);
    rbln_explain* r = nullptr;
    ASSERT_EQ(rbln_explain_begin("c step", "dir/step.c", 12, &r), RBLN_OK);
    y->device_use(*c.stream, DeviceAccess::Write);
    ASSERT_EQ(rbln_explain_site_push("dir/step.c", 20), RBLN_OK);
    const std::vector<std::byte> part(8, std::byte{1});
    y->write(0, part);
    ASSERT_EQ(rbln_explain_site_pop(), RBLN_OK);
    y->device_use(*c.stream, DeviceAccess::Read);
    ASSERT_EQ(rbln_explain_end(r), RBLN_OK);
    y->write(0, part); // after the end: not recorded

    rbln_explain_counts n{};
    n.struct_size = sizeof(n);
    ASSERT_EQ(rbln_explain_get_counts(r, &n), RBLN_OK);
    EXPECT_EQ(n.clean, 0u);
    EXPECT_EQ(n.signals, 2u);
    EXPECT_EQ(n.downloads, 1u);
    EXPECT_EQ(n.pushes, 1u);
    EXPECT_EQ(n.push_bytes, kBytes);
    EXPECT_EQ(n.lazy_commits, 1u);

    std::size_t needed = 0;
    ASSERT_EQ(rbln_explain_report(r, nullptr, 0, &needed), RBLN_OK);
    std::string text(needed, '\0');
    ASSERT_EQ(rbln_explain_report(r, text.data(), text.size(), nullptr), RBLN_OK);
    text.resize(needed - 1);
    EXPECT_THAT(text, StartsWith("[overhead: 2 signals] explain \"c step\" at step.c:12"));
    EXPECT_THAT(text, HasSubstr("step.c:20"));
    char small[9];
    ASSERT_EQ(rbln_explain_report(r, small, sizeof(small), nullptr), RBLN_OK);
    EXPECT_STREQ(small, "[overhea") << "truncated, NUL-terminated";
    EXPECT_EQ(rbln_explain_destroy(r), RBLN_OK);
}

TEST(CApiExplain, AnEmptyRegionIsCleanAndBadArgumentsAreRefused) {
    rbln_explain* r = nullptr;
    EXPECT_EQ(rbln_explain_begin(nullptr, nullptr, 0, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("region is NULL"));
    ASSERT_EQ(rbln_explain_begin(nullptr, nullptr, 0, &r), RBLN_OK);
    rbln_explain_counts n{};
    n.struct_size = sizeof(n);
    ASSERT_EQ(rbln_explain_get_counts(r, &n), RBLN_OK);
    EXPECT_EQ(n.clean, 1u);
    n.struct_size = 0;
    EXPECT_EQ(rbln_explain_get_counts(r, &n), RBLN_ERR_INVALID_ARGUMENT);
    char buf[4];
    EXPECT_EQ(rbln_explain_report(r, nullptr, sizeof(buf), nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_explain_site_pop(), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_explain_site_push(nullptr, 1), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbln_explain_destroy(r), RBLN_OK) << "ends an open region";
    EXPECT_EQ(rbln_explain_destroy(nullptr), RBLN_OK);
}

} // namespace
} // namespace rbln::test::c_api_explain_test
