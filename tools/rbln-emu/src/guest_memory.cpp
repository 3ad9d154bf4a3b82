// SPDX-License-Identifier: GPL-2.0
#include "guest_memory.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>

namespace rbln::emu {

std::uint64_t default_lowmem(std::uint64_t ram_size) {
    return ram_size >= 0xe0000000ULL ? 0xc0000000ULL : ram_size;
}

GpaMap::GpaMap(std::uint64_t ram_size, std::uint64_t lowmem)
    : ram_size_(ram_size), lowmem_(lowmem) {
    if (lowmem > ram_size)
        throw std::invalid_argument("low memory larger than guest RAM");
    if (lowmem > k4GiB)
        throw std::invalid_argument("low memory larger than 4G");
}

std::optional<std::uint64_t> GpaMap::to_offset(std::uint64_t gpa, std::uint64_t len) const {
    if (len == 0)
        return std::nullopt;
    if (gpa < lowmem_) {
        if (len > lowmem_ - gpa)
            return std::nullopt; // runs into the PCI hole (or past RAM)
        return gpa;
    }
    if (gpa < k4GiB)
        return std::nullopt; // in the hole
    const std::uint64_t high = gpa - k4GiB;
    const std::uint64_t high_size = ram_size_ - lowmem_;
    if (high >= high_size || len > high_size - high)
        return std::nullopt;
    return lowmem_ + high;
}

bool GuestMemory::read(std::uint64_t gpa, void* dst, std::size_t len) {
    const std::byte* src = translate(gpa, len);
    if (src == nullptr)
        return false;
    std::memcpy(dst, src, len);
    return true;
}

bool GuestMemory::write(std::uint64_t gpa, const void* src, std::size_t len) {
    std::byte* dst = translate(gpa, len);
    if (dst == nullptr)
        return false;
    std::memcpy(dst, src, len);
    return true;
}

SpanGuestMemory::SpanGuestMemory(std::span<std::byte> ram, std::uint64_t lowmem)
    : ram_(ram), map_(ram.size(), lowmem) {}

std::byte* SpanGuestMemory::translate(std::uint64_t gpa, std::uint64_t len) {
    auto off = map_.to_offset(gpa, len);
    if (!off)
        return nullptr;
    return ram_.data() + *off;
}

namespace {

std::runtime_error sys_error(const std::string& what) {
    return std::runtime_error(what + ": " + std::strerror(errno));
}

} // namespace

FileGuestMemory::FileGuestMemory(const std::string& path, std::optional<std::uint64_t> size,
                                 std::optional<std::uint64_t> lowmem) {
    file_.path = path;
    fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd_.valid()) {
        file_.owned = true;
    } else if (errno == EEXIST) {
        fd_.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
        if (!fd_.valid())
            throw sys_error("--guest-ram: cannot open " + path);
    } else {
        throw sys_error("--guest-ram: cannot create " + path);
    }
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0)
        throw sys_error("--guest-ram: cannot stat " + path);
    if (!S_ISREG(st.st_mode))
        throw std::runtime_error("--guest-ram: " + path + " is not a regular file");
    auto file_size = static_cast<std::uint64_t>(st.st_size);
    if (file_size == 0) {
        if (!size)
            throw std::runtime_error("--guest-ram-size: required, " + path +
                                     " does not exist or is empty");
        if (::ftruncate(fd_.get(), static_cast<off_t>(*size)) != 0)
            throw sys_error("--guest-ram: cannot size " + path);
        file_size = *size;
    } else if (size && *size != file_size) {
        throw std::runtime_error("--guest-ram-size: " + std::to_string(*size) + " but " + path +
                                 " has " + std::to_string(file_size) + " bytes");
    }
    const std::uint64_t low = lowmem ? *lowmem : default_lowmem(file_size);
    if (low > file_size)
        throw std::runtime_error("--guest-lowmem: larger than the guest RAM file");
    map_ = GpaMap(file_size, low);
    void* addr = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (addr == MAP_FAILED)
        throw sys_error("--guest-ram: cannot map " + path);
    mapping_ = Mapping(addr, file_size);
}

std::byte* FileGuestMemory::translate(std::uint64_t gpa, std::uint64_t len) {
    auto off = map_.to_offset(gpa, len);
    if (!off)
        return nullptr;
    return mapping_.data() + *off;
}

} // namespace rbln::emu
