// SPDX-License-Identifier: GPL-2.0
#include "net.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

namespace rbln::emu {

namespace {

bool fill_addr(const std::string& path, sockaddr_un& sa) {
    sa = {};
    sa.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(sa.sun_path))
        return false;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    return true;
}

} // namespace

UniqueFd connect_unix(const std::string& path) {
    sockaddr_un sa{};
    if (!fill_addr(path, sa)) {
        errno = ENAMETOOLONG;
        return UniqueFd();
    }
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid())
        return fd;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
        const int err = errno;
        fd.reset();
        errno = err;
    }
    return fd;
}

namespace {

// The name a socket is bound under before it listens; renamed to the real
// path afterwards (see the constructor).  /proc/net/unix keeps showing the
// name given to bind(), so a live server of `path` appears under this one.
std::string staging_path(const std::string& path) {
    return path + ".new";
}

// Whether a socket is listening on `path` (under either name), from
// /proc/net/unix (flag __SO_ACCEPTCON).  Asking this way, rather than by
// connecting, matters for the ivshmem socket: its server takes any
// connection for QEMU.
bool has_listener(const std::string& path) {
    const std::string staged = staging_path(path);
    std::ifstream in("/proc/net/unix");
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string num, refs, proto, flags, type, state, inode, bound;
        if (!(fields >> num >> refs >> proto >> flags >> type >> state >> inode >> bound))
            continue;
        constexpr unsigned long kAcceptCon = 0x10000;
        if ((bound == path || bound == staged) &&
            (std::strtoul(flags.c_str(), nullptr, 16) & kAcceptCon) != 0)
            return true;
    }
    return false;
}

// The absolute form of `path` when it fits sun_path, so /proc/net/unix
// shows a name other processes can compare against.
std::string bind_path(const std::string& path) {
    std::error_code ec;
    std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (ec || abs.size() >= sizeof(sockaddr_un{}.sun_path))
        return path;
    return abs;
}

} // namespace

ListeningSocket::ListeningSocket(const std::string& given, const std::string& what)
    : path_(bind_path(given)) {
    const std::string& path = path_;
    sockaddr_un sa{};
    if (!fill_addr(given, sa) || !fill_addr(path, sa))
        throw std::runtime_error(what + ": path empty or longer than " +
                                 std::to_string(sizeof(sa.sun_path) - 1) + " bytes");
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            throw std::runtime_error(what + ": " + path + " exists and is not a socket");
        if (has_listener(path))
            throw std::runtime_error(what + ": " + path + " is in use by a running server");
        ::unlink(path.c_str()); // stale socket of a dead process
    }
    // The socket file must not appear before listen(): a client that sees
    // it (rbln-vm, QEMU's chardev) and connects in between would get
    // ECONNREFUSED.  So bind under a staging name and rename it into place
    // once listening; when that name does not fit sun_path, bind directly.
    const std::string staged = staging_path(path);
    const bool staging = fill_addr(staged, sa);
    if (!staging)
        fill_addr(path, sa);
    if (staging && ::lstat(staged.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && !has_listener(path))
        ::unlink(staged.c_str()); // left by a process killed while starting
    const std::string& bind_name = staging ? staged : path;
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_.valid())
        throw std::runtime_error(what + ": socket: " + std::strerror(errno));
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0)
        throw std::runtime_error(what + ": cannot bind " + bind_name + ": " + std::strerror(errno));
    if (::listen(fd_.get(), 8) != 0 || (staging && ::rename(staged.c_str(), path.c_str()) != 0)) {
        const std::string err = std::strerror(errno);
        ::unlink(bind_name.c_str());
        throw std::runtime_error(what + ": cannot listen on " + path + ": " + err);
    }
}

ListeningSocket::~ListeningSocket() {
    ::unlink(path_.c_str());
}

UniqueFd ListeningSocket::accept() const {
    return UniqueFd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
}

bool send_i64(int sock, std::int64_t value, int fd) {
    iovec iov{&value, sizeof(value)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
    if (fd >= 0) {
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n = 0;
    do {
        n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(sizeof(value));
}

bool set_nonblocking(int fd, bool on) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0)
        return false;
    return ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK)) == 0;
}

} // namespace rbln::emu
