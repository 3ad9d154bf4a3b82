// SPDX-License-Identifier: GPL-2.0
#include "ctl_client.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

namespace rbln::emu {

namespace {

constexpr int kReplyTimeoutMs = 10000;

} // namespace

int run_ctl(const CtlOptions& opt) {
    const UniqueFd fd = connect_unix(opt.control_path);
    if (!fd.valid()) {
        std::fprintf(stderr, "rbln-emu ctl: cannot connect to %s: %s\n", opt.control_path.c_str(),
                     std::strerror(errno));
        return 2;
    }
    const std::string line = opt.command + "\n";
    std::size_t sent = 0;
    while (sent < line.size()) {
        const ssize_t n = ::send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            std::fprintf(stderr, "rbln-emu ctl: send: %s\n", std::strerror(errno));
            return 2;
        }
        sent += static_cast<std::size_t>(n);
    }
    std::string reply;
    std::array<char, 4096> buf{};
    while (reply.find('\n') == std::string::npos) {
        pollfd p{fd.get(), POLLIN, 0};
        const int r = ::poll(&p, 1, kReplyTimeoutMs);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            std::fprintf(stderr, "rbln-emu ctl: no reply within %d ms\n", kReplyTimeoutMs);
            return 2;
        }
        const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            std::fprintf(stderr, "rbln-emu ctl: connection closed without a reply\n");
            return 2;
        }
        reply.append(buf.data(), static_cast<std::size_t>(n));
    }
    reply.resize(reply.find('\n'));
    std::printf("%s\n", reply.c_str());
    if (reply == "ok" || reply.starts_with("ok "))
        return 0;
    if (reply.starts_with("error"))
        return 1;
    return 2;
}

} // namespace rbln::emu
