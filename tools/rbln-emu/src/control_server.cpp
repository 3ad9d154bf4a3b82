// SPDX-License-Identifier: GPL-2.0
#include "control_server.h"

#include <array>
#include <cerrno>
#include <cstring>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rbln::emu {

ControlServer::ControlServer(const std::string& path, ControlInterface& control, EventLoop& loop,
                             Logger& log)
    : listen_(path, "--control"), control_(control), loop_(loop), log_(log) {
    listen_token_ = loop_.add(listen_.fd(), EPOLLIN, [this](std::uint32_t) { on_accept(); });
}

ControlServer::~ControlServer() {
    while (!clients_.empty())
        drop(clients_.begin()->first);
    loop_.remove(listen_token_, listen_.fd());
}

void ControlServer::on_accept() {
    for (;;) {
        UniqueFd fd = listen_.accept();
        if (!fd.valid())
            return;
        auto c = std::make_unique<Client>();
        const std::uint64_t id = next_id_++;
        c->token = loop_.add(fd.get(), EPOLLIN | EPOLLRDHUP,
                             [this, id](std::uint32_t ev) { on_client(id, ev); });
        c->fd = std::move(fd);
        clients_.emplace(id, std::move(c));
        log_.debug("control client %llu connected", static_cast<unsigned long long>(id));
    }
}

void ControlServer::on_client(std::uint64_t id, std::uint32_t events) {
    auto it = clients_.find(id);
    if (it == clients_.end())
        return;
    Client& c = *it->second;
    if ((events & EPOLLIN) != 0 && !c.closing) {
        std::array<char, 8192> buf{};
        for (;;) {
            const ssize_t n = ::read(c.fd.get(), buf.data(), buf.size());
            if (n > 0) {
                c.in.append(buf.data(), static_cast<std::size_t>(n));
                consume_input(c);
                continue;
            }
            if (n == 0) {
                // Peer is done sending: answer a last unterminated line.
                if (!c.discarding && !c.in.empty()) {
                    const std::string line = std::move(c.in);
                    c.in.clear();
                    reply(c, control_.execute(line));
                }
                c.closing = true;
                break;
            }
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                c.closing = true;
            break;
        }
    }
    if ((events & (EPOLLHUP | EPOLLERR)) != 0) {
        drop(id);
        return;
    }
    if (!flush(c) || (c.closing && c.out.empty())) {
        drop(id);
        return;
    }
    std::uint32_t want = c.closing ? 0U : (EPOLLIN | EPOLLRDHUP);
    if (!c.out.empty())
        want |= EPOLLOUT;
    loop_.modify(c.token, c.fd.get(), want);
}

void ControlServer::consume_input(Client& c) {
    for (;;) {
        const std::size_t nl = c.in.find('\n');
        if (nl == std::string::npos)
            break;
        if (c.discarding) {
            c.discarding = false; // the end of the overlong line
        } else if (nl > kMaxControlLine) {
            reply(c, "error line longer than 4096 bytes");
        } else {
            reply(c, control_.execute(std::string_view(c.in).substr(0, nl)));
        }
        c.in.erase(0, nl + 1);
    }
    if (!c.discarding && c.in.size() > kMaxControlLine) {
        reply(c, "error line longer than 4096 bytes");
        c.discarding = true;
    }
    if (c.discarding)
        c.in.clear();
}

void ControlServer::reply(Client& c, const std::string& line) {
    if (c.out.size() > kMaxPendingOutput) {
        c.closing = true; // a client that never reads its replies
        return;
    }
    c.out += line;
    c.out += '\n';
}

bool ControlServer::flush(Client& c) {
    while (!c.out.empty()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) {
            c.out.erase(0, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

void ControlServer::drop(std::uint64_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end())
        return;
    loop_.remove(it->second->token, it->second->fd.get());
    clients_.erase(it);
    log_.debug("control client %llu disconnected", static_cast<unsigned long long>(id));
}

} // namespace rbln::emu
