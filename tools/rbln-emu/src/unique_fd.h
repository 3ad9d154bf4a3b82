// SPDX-License-Identifier: GPL-2.0
// RAII owners for file descriptors and memory mappings.
#pragma once

#include <cstddef>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace rbln::emu {

// Owns one file descriptor; closes it on destruction.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other)
            reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    [[nodiscard]] int get() const noexcept { return fd_; }
    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

// Owns one mmap()ed range; unmaps it on destruction.
class Mapping {
public:
    Mapping() = default;
    Mapping(void* addr, std::size_t size) noexcept : addr_(addr), size_(size) {}
    ~Mapping() { reset(); }
    Mapping(Mapping&& other) noexcept
        : addr_(std::exchange(other.addr_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    Mapping& operator=(Mapping&& other) noexcept {
        if (this != &other) {
            reset();
            addr_ = std::exchange(other.addr_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;

    [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(addr_); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    void reset() noexcept {
        if (addr_ != nullptr)
            ::munmap(addr_, size_);
        addr_ = nullptr;
        size_ = 0;
    }

private:
    void* addr_ = nullptr;
    std::size_t size_ = 0;
};

} // namespace rbln::emu
