// SPDX-License-Identifier: GPL-2.0
// RBLN_ALLOC_CONF: what parses to what, and a clear error for each bad value.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "rbln/allocator.hpp"

namespace rbln::test::allocator_config_test {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t MiB = 1024 * 1024;

std::string error_of(const char* text) {
    try {
        AllocatorConfig::parse(text);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::BadConfig) << text;
        return e.what();
    }
    ADD_FAILURE() << "'" << text << "' parsed";
    return {};
}

TEST(AllocatorConfig, EmptyIsTheDefault) {
    const AllocatorConfig c = AllocatorConfig::parse("");
    EXPECT_EQ(c.max_split_size, alloc::kNoMaxSplit);
    EXPECT_EQ(c.garbage_collection_threshold, 0.0);
    for (std::uint32_t d : c.roundup_power2_divisions)
        EXPECT_EQ(d, 0u);
}

TEST(AllocatorConfig, AllThreeOptionsParseWithSpaces) {
    const AllocatorConfig c = AllocatorConfig::parse(
        " max_split_size_mb : 128 , roundup_power2_divisions:2, garbage_collection_threshold:0.6 ");
    EXPECT_EQ(c.max_split_size, 128 * MiB);
    EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
    for (std::uint32_t d : c.roundup_power2_divisions)
        EXPECT_EQ(d, 2u);
}

TEST(AllocatorConfig, ADivisionsListCoversTheIntervalsAsPyTorchDocumentsIt) {
    // PyTorch's example: 1 division below 256 MiB, 2 in [256, 512) MiB, 4 in
    // [512, 1024) MiB, 8 above.  Entry i of the table: [2^i, 2^(i+1)) MiB.
    const AllocatorConfig c =
        AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    for (std::size_t i = 0; i < 8; i++)
        EXPECT_EQ(c.roundup_power2_divisions[i], 1u) << i;
    EXPECT_EQ(c.roundup_power2_divisions[8], 2u);
    EXPECT_EQ(c.roundup_power2_divisions[9], 4u);
    for (std::size_t i = 10; i < 16; i++)
        EXPECT_EQ(c.roundup_power2_divisions[i], 8u) << i;
}

TEST(AllocatorConfig, SizesPastTheLastListEntryHaveNoDivisions) {
    const AllocatorConfig c = AllocatorConfig::parse("roundup_power2_divisions:[1:4,16:2]");
    EXPECT_EQ(c.roundup_power2_divisions[0], 4u) << "below 1 MiB shares the first interval";
    EXPECT_EQ(c.roundup_power2_divisions[1], 2u);
    EXPECT_EQ(c.roundup_power2_divisions[3], 2u);
    EXPECT_EQ(c.roundup_power2_divisions[4], 0u);
}

TEST(AllocatorConfig, TheEnvironmentVariableIsRead) {
    const EnvSource env = [](std::string_view name) -> std::optional<std::string> {
        if (name == "RBLN_ALLOC_CONF")
            return "max_split_size_mb:64";
        return std::nullopt;
    };
    EXPECT_EQ(AllocatorConfig::from_environment(env).max_split_size, 64 * MiB);
    const EnvSource none = [](std::string_view) -> std::optional<std::string> {
        return std::nullopt;
    };
    EXPECT_EQ(AllocatorConfig::from_environment(none).max_split_size, alloc::kNoMaxSplit);
}

TEST(AllocatorConfig, ErrorsNameTheVariableAndTheValue) {
    const std::string m = error_of("max_split_size_mb:10");
    EXPECT_THAT(m, HasSubstr("RBLN_ALLOC_CONF"));
    EXPECT_THAT(m, HasSubstr("max_split_size_mb: 10 is too small, must be > 20"));
    EXPECT_THAT(m, HasSubstr("(value 'max_split_size_mb:10'"));
}

TEST(AllocatorConfig, EachBadValueHasItsOwnMessage) {
    EXPECT_THAT(error_of("max_split_size_mb:20"), HasSubstr("too small"));
    EXPECT_THAT(error_of("max_split_size_mb:12x"),
                HasSubstr("'12x' is not a non-negative integer"));
    EXPECT_THAT(error_of("max_split_size_mb:-5"), HasSubstr("not a non-negative integer"));
    EXPECT_THAT(error_of("roundup_power2_divisions:3"), HasSubstr("must be a power of 2"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[256:3]"), HasSubstr("must be a power of 2"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[300:2]"),
                HasSubstr("intervals must be powers of 2"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[256:2"), HasSubstr("no closing ']'"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[]"), HasSubstr("the list is empty"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[256]"), HasSubstr("is not <MiB>:<divisions>"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[512:2,256:1]"), HasSubstr("must increase"));
    EXPECT_THAT(error_of("roundup_power2_divisions:[>:2,256:1]"), HasSubstr("must be the last"));
    EXPECT_THAT(error_of("garbage_collection_threshold:1.0"), HasSubstr("too big"));
    EXPECT_THAT(error_of("garbage_collection_threshold:0"), HasSubstr("too small"));
    EXPECT_THAT(error_of("garbage_collection_threshold:abc"), HasSubstr("is not a number"));
    EXPECT_THAT(error_of("garbage_collection_threshold:nan"), HasSubstr("is not a number"));
    EXPECT_THAT(error_of("foo:1"), HasSubstr("unknown option 'foo'"));
    EXPECT_THAT(error_of("expandable_segments:True"),
                HasSubstr("a PyTorch CUDA option that librbln does not have"));
    EXPECT_THAT(error_of("max_split_size_mb"), HasSubstr("has no ':<value>'"));
    EXPECT_THAT(error_of("max_split_size_mb:"), HasSubstr("empty value"));
    EXPECT_THAT(error_of("max_split_size_mb:64,,"), HasSubstr("empty option"));
    EXPECT_THAT(error_of("max_split_size_mb:64,max_split_size_mb:128"), HasSubstr("given twice"));
}

TEST(AllocatorConfig, MessagesListTheOptionsThatExist) {
    EXPECT_THAT(error_of("foo:1"), HasSubstr("options: max_split_size_mb:<MiB > 20>"));
}

} // namespace
} // namespace rbln::test::allocator_config_test
