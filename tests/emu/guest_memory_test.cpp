// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <sys/stat.h>

#include "guest_memory.h"

using namespace rbln::emu;

namespace guest_memory_test {

namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;

class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "rbln-emu-gm.XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr)
            throw std::runtime_error("mkdtemp");
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    TempDir(TempDir&&) = delete;
    TempDir& operator=(TempDir&&) = delete;
    [[nodiscard]] std::string file(const char* name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

} // namespace

TEST(GpaMap, DefaultLowmemFollowsQemuPcRule) {
    EXPECT_EQ(default_lowmem(2 * kGiB), 2 * kGiB);
    EXPECT_EQ(default_lowmem(0xdfffffffULL), 0xdfffffffULL);
    EXPECT_EQ(default_lowmem(0xe0000000ULL), 0xc0000000ULL);
    EXPECT_EQ(default_lowmem(8 * kGiB), 0xc0000000ULL);
}

TEST(GpaMap, BelowLowmemAddressIsTheFileOffset) {
    const GpaMap m(2 * kGiB, 2 * kGiB);
    EXPECT_EQ(m.to_offset(0, 4096), 0U);
    EXPECT_EQ(m.to_offset(0x12345000, 64), 0x12345000U);
    EXPECT_EQ(m.to_offset(2 * kGiB - 64, 64), 2 * kGiB - 64);
    EXPECT_FALSE(m.to_offset(2 * kGiB - 64, 65).has_value()); // one byte past RAM
    EXPECT_FALSE(m.to_offset(2 * kGiB, 1).has_value());
    EXPECT_FALSE(m.to_offset(4 * kGiB, 1).has_value()); // no high RAM at all
}

TEST(GpaMap, AboveFourGiBIsShiftedByLowmem) {
    const GpaMap m(6 * kGiB, 3 * kGiB); // 3 GiB low, 3 GiB high
    EXPECT_EQ(m.to_offset(4 * kGiB, 64), 3 * kGiB);
    EXPECT_EQ(m.to_offset(4 * kGiB + 0x1000, 64), 3 * kGiB + 0x1000);
    EXPECT_EQ(m.to_offset(7 * kGiB - 64, 64), 6 * kGiB - 64);
    EXPECT_FALSE(m.to_offset(7 * kGiB - 64, 65).has_value());
    EXPECT_FALSE(m.to_offset(7 * kGiB, 1).has_value());
}

TEST(GpaMap, PciHoleAndRangesCrossingItAreRejected) {
    const GpaMap m(6 * kGiB, 3 * kGiB);
    EXPECT_FALSE(m.to_offset(3 * kGiB, 1).has_value());               // start of the hole
    EXPECT_FALSE(m.to_offset(4 * kGiB - 1, 1).has_value());           // end of the hole
    EXPECT_FALSE(m.to_offset(3 * kGiB - 64, 128).has_value());        // low into the hole
    EXPECT_FALSE(m.to_offset(3 * kGiB - 64, kGiB + 128).has_value()); // low across to high
}

TEST(GpaMap, ZeroLengthAndArithmeticOverflowAreRejected) {
    const GpaMap m(6 * kGiB, 3 * kGiB);
    EXPECT_FALSE(m.to_offset(0, 0).has_value());
    EXPECT_FALSE(m.to_offset(~0ULL, 2).has_value());
    EXPECT_FALSE(m.to_offset(4 * kGiB, ~0ULL).has_value());
    EXPECT_FALSE(m.to_offset(0x1000, ~0ULL - 0x800).has_value());
}

TEST(GpaMap, RejectsLowmemLargerThanRamOrFourGiB) {
    EXPECT_THROW(GpaMap(kGiB, 2 * kGiB), std::invalid_argument);
    EXPECT_THROW(GpaMap(8 * kGiB, 5 * kGiB), std::invalid_argument);
}

TEST(GuestMemory, SpanAccessorsReadWriteAndRefuseOutOfRange) {
    std::vector<std::byte> ram(64 * 1024);
    SpanGuestMemory mem(ram, ram.size());
    const std::uint64_t v = 0x1122334455667788ULL;
    EXPECT_TRUE(mem.write(0x100, &v, sizeof(v)));
    std::uint64_t r = 0;
    EXPECT_TRUE(mem.read(0x100, &r, sizeof(r)));
    EXPECT_EQ(r, v);
    EXPECT_EQ(mem.translate(0x100, 8), ram.data() + 0x100);
    EXPECT_FALSE(mem.write(ram.size() - 4, &v, sizeof(v)));
    EXPECT_FALSE(mem.read(ram.size(), &r, 1));
    EXPECT_FALSE(mem.contains(~0ULL - 3, 8));
    EXPECT_EQ(mem.translate(ram.size(), 1), nullptr);
}

TEST(GuestMemory, FileIsCreatedWithTheGivenSizeAndRemovedAfterwards) {
    TempDir dir;
    const std::string path = dir.file("ram");
    {
        FileGuestMemory mem(path, 1ULL << 20, std::nullopt);
        EXPECT_TRUE(mem.created());
        EXPECT_EQ(std::filesystem::file_size(path), 1ULL << 20);
        EXPECT_EQ(mem.map().lowmem(), 1ULL << 20);
        const std::uint32_t v = 0xfeedU;
        EXPECT_TRUE(mem.write(0x1000, &v, sizeof(v)));
        EXPECT_FALSE(mem.write(1ULL << 20, &v, sizeof(v)));
    }
    EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GuestMemory, ExistingFileIsUsedAtItsSizeAndKept) {
    TempDir dir;
    const std::string path = dir.file("ram");
    {
        std::ofstream f(path, std::ios::binary);
        const std::vector<char> bytes(8192, 'x');
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    {
        FileGuestMemory mem(path, std::nullopt, 4096);
        EXPECT_FALSE(mem.created());
        EXPECT_EQ(mem.map().ram_size(), 8192U);
        char c = 0;
        EXPECT_TRUE(mem.read(4095, &c, 1));
        EXPECT_EQ(c, 'x');
        EXPECT_TRUE(mem.read(k4GiB, &c, 1)); // the second page sits above 4 GiB
        EXPECT_FALSE(mem.read(4096, &c, 1));
    }
    EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(GuestMemory, ExistingFileOfAnotherSizeIsRejected) {
    TempDir dir;
    const std::string path = dir.file("ram");
    std::ofstream(path) << "abcd";
    EXPECT_THROW(FileGuestMemory(path, 8192, std::nullopt), std::runtime_error);
    EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(GuestMemory, MissingFileWithoutSizeIsRejectedAndNotLeftBehind) {
    TempDir dir;
    const std::string path = dir.file("ram");
    EXPECT_THROW(FileGuestMemory(path, std::nullopt, std::nullopt), std::runtime_error);
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_THROW(FileGuestMemory(dir.file("no/such/dir"), 4096, std::nullopt), std::runtime_error);
}

TEST(GuestMemory, LowmemLargerThanFileIsRejected) {
    TempDir dir;
    EXPECT_THROW(FileGuestMemory(dir.file("ram"), 4096, 8192), std::runtime_error);
    EXPECT_FALSE(std::filesystem::exists(dir.file("ram")));
}
} // namespace guest_memory_test
