// SPDX-License-Identifier: GPL-2.0
// rbln/error.hpp - typed errors of librbln and a small expected-style Result.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// What went wrong, independent of the operation.  Values are stable: the C
/// ABI (rbln.h) returns them as rbln_status.
enum class Errc : int {
    InvalidArgument = 1,  ///< the caller passed something unusable
    DriverNotLoaded = 2,  ///< /sys/module/rbln is absent
    NoDevice = 3,         ///< driver loaded but no rbln accel node (or index out of range)
    PermissionDenied = 4, ///< EACCES/EPERM on a node or file
    NotFound = 5,         ///< a file or node that should exist does not
    BadValue = 6,         ///< a sysfs attribute or kernel answer is malformed
    WrongDriver = 7,      ///< the node is not served by rbln
    Io = 8,               ///< a read, open or ioctl failed for another reason
    DeviceGone = 9,       ///< the device was removed or unbound (ENODEV)
    BadControlBlock = 10, ///< a firmware-iface control block failed validation
    Internal = 11,        ///< a bug in librbln (or host memory exhausted in librbln)
    BadConfig = 12,       ///< an RBLN_* environment variable is malformed or not allowed here
    BadFork = 13,         ///< a fork() child of a process that used a device tried to use it
    OutOfMemory = 14,     ///< the kernel is out of memory, device memory or device VA
    Timeout = 15,         ///< a deadline passed before the job or fence was done
    JobFailed = 16,       ///< a job failed on the card (MMU fault, bad packet, DMA error, reset)
    NotReady = 17,        ///< the work asked about has not completed yet
};

/// Short stable name of an error code, e.g. "permission-denied".
std::string_view errc_name(Errc code) noexcept;

/// Maps an errno value to the Errc it usually means.
Errc errc_from_errno(int err) noexcept;

/// The exception librbln throws.  what() is a complete sentence for a human:
/// "<operation> <path>: <meaning> (<ERRNO>): <what to do>".
class Error : public std::runtime_error {
public:
    Error(Errc code, std::string operation, std::string path, int sys_errno, std::string message);

    /// An error from a failed system call: the message is derived from errno
    /// (with a hint on what to do, e.g. for EACCES on /dev/accel).
    static Error from_errno(std::string operation, std::string path, int err);

    Errc code() const noexcept { return code_; }
    const std::string& operation() const noexcept { return operation_; }
    const std::string& path() const noexcept { return path_; }
    int sys_errno() const noexcept { return errno_; }
    /// The message without the "<operation> <path>: " prefix.
    const std::string& detail() const noexcept { return detail_; }

private:
    Errc code_;
    std::string operation_;
    std::string path_;
    int errno_;
    std::string detail_;
};

/// An expected-style result (C++20 has no std::expected): a value or an Error.
template <typename T> class Result {
public:
    Result(T value) : v_(std::move(value)) {}     // NOLINT(google-explicit-constructor)
    Result(Error error) : v_(std::move(error)) {} // NOLINT(google-explicit-constructor)

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    /// The value; throws the stored Error if there is none.
    T& value() & {
        throw_if_error();
        return std::get<0>(v_);
    }
    const T& value() const& {
        throw_if_error();
        return std::get<0>(v_);
    }
    T&& value() && {
        throw_if_error();
        return std::get<0>(std::move(v_));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    /// The error; precondition: !ok().
    const Error& error() const { return std::get<1>(v_); }

private:
    void throw_if_error() const {
        if (v_.index() != 0)
            throw std::get<1>(v_);
    }
    std::variant<T, Error> v_;
};

} // namespace rbln

#pragma GCC visibility pop
