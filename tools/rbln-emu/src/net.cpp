// SPDX-License-Identifier: GPL-2.0
#include "net.h"

#include <array>
#include <cerrno>
#include <cstring>
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

ListeningSocket::ListeningSocket(const std::string& path, const std::string& what) : path_(path) {
    sockaddr_un sa{};
    if (!fill_addr(path, sa))
        throw std::runtime_error(what + ": path empty or longer than " +
                                 std::to_string(sizeof(sa.sun_path) - 1) + " bytes");
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            throw std::runtime_error(what + ": " + path + " exists and is not a socket");
        if (connect_unix(path).valid())
            throw std::runtime_error(what + ": " + path + " is in use by a running server");
        ::unlink(path.c_str()); // stale socket of a dead process
    }
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_.valid())
        throw std::runtime_error(what + ": socket: " + std::strerror(errno));
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0)
        throw std::runtime_error(what + ": cannot bind " + path + ": " + std::strerror(errno));
    bound_ = true;
    if (::listen(fd_.get(), 8) != 0) {
        const std::string err = std::strerror(errno);
        ::unlink(path.c_str());
        bound_ = false;
        throw std::runtime_error(what + ": cannot listen on " + path + ": " + err);
    }
}

ListeningSocket::~ListeningSocket() {
    if (bound_)
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
