// SPDX-License-Identifier: GPL-2.0
// error.cpp - rbln::Error: messages that say what failed, what it means and
// what to do about it.

#include "rbln/error.hpp"

#include "runtime/error_text.hpp"

#include <cerrno>
#include <cstring>
#include <string>

namespace rbln {

std::string_view errc_name(Errc code) noexcept {
    switch (code) {
    case Errc::InvalidArgument:
        return "invalid-argument";
    case Errc::DriverNotLoaded:
        return "driver-not-loaded";
    case Errc::NoDevice:
        return "no-device";
    case Errc::PermissionDenied:
        return "permission-denied";
    case Errc::NotFound:
        return "not-found";
    case Errc::BadValue:
        return "bad-value";
    case Errc::WrongDriver:
        return "wrong-driver";
    case Errc::Io:
        return "io";
    case Errc::DeviceGone:
        return "device-gone";
    case Errc::BadControlBlock:
        return "bad-control-block";
    case Errc::Internal:
        return "internal";
    case Errc::BadConfig:
        return "bad-config";
    case Errc::BadFork:
        return "bad-fork";
    case Errc::OutOfMemory:
        return "out-of-memory";
    case Errc::Timeout:
        return "timeout";
    case Errc::JobFailed:
        return "job-failed";
    case Errc::NotReady:
        return "not-ready";
    }
    return "unknown";
}

Errc errc_from_errno(int err) noexcept {
    switch (err) {
    case EACCES:
    case EPERM:
        return Errc::PermissionDenied;
    case ENOENT:
        return Errc::NotFound;
    case ENODEV:
    case ENXIO:
        return Errc::DeviceGone;
    case EINVAL:
        return Errc::InvalidArgument;
    case ENOTTY:
        return Errc::WrongDriver;
    case ENOMEM:
    case ENOSPC:
    case E2BIG:
        return Errc::OutOfMemory;
    case ETIME:
    case ETIMEDOUT:
        return Errc::Timeout;
    default:
        return Errc::Io;
    }
}

namespace {

std::string compose(const std::string& operation, const std::string& path,
                    const std::string& detail) {
    std::string out = operation;
    if (!path.empty()) {
        if (!out.empty())
            out += ' ';
        out += path;
    }
    if (!out.empty())
        out += ": ";
    out += detail;
    return out;
}

bool is_accel_node(const std::string& path) {
    return path.find("/dev/accel/") != std::string::npos;
}

// "<meaning> (<ERRNO>)[: <what to do>]"
std::string describe_errno(const std::string& operation, const std::string& path, int err) {
    const std::string tag = " (" + detail::errno_name(err) + ")";
    switch (err) {
    case EACCES:
    case EPERM:
        if (is_accel_node(path))
            return "permission denied" + tag + ": add the user to group 'render' or run as root";
        return "permission denied" + tag;
    case ENOENT:
        if (is_accel_node(path))
            return "no such device node" + tag +
                   ": is devtmpfs mounted on /dev and is udev running?";
        return "no such file or directory" + tag;
    case ENODEV:
    case ENXIO:
        return "the device is gone" + tag +
               ": it was removed or its driver was unbound; rescan PCI or reload rbln";
    case ENOTTY:
        return "not a DRM device" + tag + ": the node does not answer DRM ioctls";
    case EIO:
        return "I/O error" + tag + ": the card did not answer; see the kernel log (dmesg)";
    case EINVAL:
        if (operation.rfind("ioctl", 0) == 0)
            return "invalid argument" + tag +
                   ": librbln and rbln.ko disagree on the uAPI; update the older one";
        return "invalid argument" + tag;
    case EBUSY:
        return "device or resource busy" + tag + ": another process holds it";
    case EMFILE:
    case ENFILE:
        return "too many open files" + tag + ": raise the file descriptor limit";
    default:
        return std::string(std::strerror(err)) + tag;
    }
}

} // namespace

Error::Error(Errc code, std::string operation, std::string path, int sys_errno, std::string message)
    : std::runtime_error(compose(operation, path, message)), code_(code),
      operation_(std::move(operation)), path_(std::move(path)), errno_(sys_errno),
      detail_(std::move(message)) {}

Error Error::from_errno(std::string operation, std::string path, int err) {
    std::string detail = describe_errno(operation, path, err);
    return Error(errc_from_errno(err), std::move(operation), std::move(path), err,
                 std::move(detail));
}

namespace detail {

std::string errno_name(int err) {
    const char* name = strerrorname_np(err);
    if (name != nullptr)
        return name;
    return "errno " + std::to_string(err);
}

} // namespace detail
} // namespace rbln
