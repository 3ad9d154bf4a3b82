// SPDX-License-Identifier: GPL-2.0
// Guest RAM as the card sees it: DMA by guest-physical address.
//
// There is no vIOMMU, so a DMA address is a guest-physical address.  QEMU's
// pc machine puts the first `lowmem` bytes of RAM at 0..lowmem and the rest
// at 4 GiB and above; the memory-backend-file holds them back to back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <unistd.h>

#include "unique_fd.h"

namespace rbln::emu {

inline constexpr std::uint64_t k4GiB = 1ULL << 32;

// QEMU pc rule: RAM >= 0xe0000000 keeps 0xc0000000 below 4 GiB.
std::uint64_t default_lowmem(std::uint64_t ram_size);

// Guest-physical address -> offset in the RAM file.
class GpaMap {
public:
    // Throws std::invalid_argument if lowmem > ram_size or lowmem > 4 GiB.
    GpaMap(std::uint64_t ram_size, std::uint64_t lowmem);

    // Offset of [gpa, gpa + len) when every byte is RAM and the range does
    // not cross the hole between lowmem and 4 GiB; nullopt otherwise
    // (including len == 0 and arithmetic overflow).
    [[nodiscard]] std::optional<std::uint64_t> to_offset(std::uint64_t gpa,
                                                         std::uint64_t len) const;

    [[nodiscard]] std::uint64_t ram_size() const { return ram_size_; }
    [[nodiscard]] std::uint64_t lowmem() const { return lowmem_; }

private:
    std::uint64_t ram_size_;
    std::uint64_t lowmem_;
};

// What the firmware model uses.  All accessors are bounds checked and fail
// (nullptr / false) instead of touching anything outside guest RAM.
class GuestMemory {
public:
    GuestMemory() = default;
    virtual ~GuestMemory() = default;
    GuestMemory(const GuestMemory&) = delete;
    GuestMemory& operator=(const GuestMemory&) = delete;
    GuestMemory(GuestMemory&&) = delete;
    GuestMemory& operator=(GuestMemory&&) = delete;

    // Host pointer to [gpa, gpa + len), or nullptr if not all of it is RAM.
    virtual std::byte* translate(std::uint64_t gpa, std::uint64_t len) = 0;

    bool contains(std::uint64_t gpa, std::uint64_t len) { return translate(gpa, len) != nullptr; }
    bool read(std::uint64_t gpa, void* dst, std::size_t len);
    bool write(std::uint64_t gpa, const void* src, std::size_t len);
};

// Guest memory over a caller-owned buffer (the RAM file's mapping, or a
// plain buffer in tests).
class SpanGuestMemory : public GuestMemory {
public:
    SpanGuestMemory(std::span<std::byte> ram, std::uint64_t lowmem);
    std::byte* translate(std::uint64_t gpa, std::uint64_t len) override;
    [[nodiscard]] const GpaMap& map() const { return map_; }

private:
    std::span<std::byte> ram_;
    GpaMap map_;
};

// The RAM file of QEMU's memory-backend-file, mapped shared.
class FileGuestMemory : public GuestMemory {
public:
    // Opens `path`; creates it with `size` bytes if it does not exist (then
    // `size` is required).  An existing empty file is grown to `size`; an
    // existing non-empty file must have `size` bytes when `size` is given.
    // `lowmem` defaults to default_lowmem().  Throws std::runtime_error.
    FileGuestMemory(const std::string& path, std::optional<std::uint64_t> size,
                    std::optional<std::uint64_t> lowmem);
    ~FileGuestMemory() override = default;
    FileGuestMemory(const FileGuestMemory&) = delete;
    FileGuestMemory& operator=(const FileGuestMemory&) = delete;
    FileGuestMemory(FileGuestMemory&&) = delete;
    FileGuestMemory& operator=(FileGuestMemory&&) = delete;

    std::byte* translate(std::uint64_t gpa, std::uint64_t len) override;
    [[nodiscard]] const GpaMap& map() const { return map_; }
    [[nodiscard]] bool created() const { return file_.owned; }

private:
    // Removes a file this process created when it goes away (also when the
    // constructor fails half way).  QEMU has exited by then; a mapping
    // another process still holds stays valid.
    struct OwnedFile {
        std::string path;
        bool owned = false;
        OwnedFile() = default;
        ~OwnedFile() {
            if (owned)
                ::unlink(path.c_str());
        }
        OwnedFile(const OwnedFile&) = delete;
        OwnedFile& operator=(const OwnedFile&) = delete;
        OwnedFile(OwnedFile&&) = delete;
        OwnedFile& operator=(OwnedFile&&) = delete;
    };

    OwnedFile file_;
    UniqueFd fd_;
    Mapping mapping_;
    GpaMap map_{0, 0};
};

} // namespace rbln::emu
