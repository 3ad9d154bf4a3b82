// SPDX-License-Identifier: GPL-2.0
#include "event_loop.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <sys/epoll.h>

namespace rbln::emu {

EventLoop::EventLoop() : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (!epoll_.valid())
        throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
}

std::uint64_t EventLoop::add(int fd, std::uint32_t events, Handler handler) {
    const std::uint64_t token = next_token_++;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = token;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
        throw std::runtime_error(std::string("epoll_ctl add: ") + std::strerror(errno));
    handlers_.emplace(token, std::move(handler));
    return token;
}

void EventLoop::modify(std::uint64_t token, int fd, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = token;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0)
        throw std::runtime_error(std::string("epoll_ctl mod: ") + std::strerror(errno));
}

void EventLoop::remove(std::uint64_t token, int fd) {
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    handlers_.erase(token);
}

void EventLoop::run_once(int timeout_ms) {
    std::array<epoll_event, 16> evs{};
    const int n = ::epoll_wait(epoll_.get(), evs.data(), static_cast<int>(evs.size()), timeout_ms);
    if (n < 0) {
        if (errno == EINTR)
            return;
        throw std::runtime_error(std::string("epoll_wait: ") + std::strerror(errno));
    }
    for (int i = 0; i < n && !stopped_; i++) {
        auto it = handlers_.find(evs.at(static_cast<std::size_t>(i)).data.u64);
        if (it == handlers_.end())
            continue; // removed earlier in this batch
        // Copy: the handler may remove itself.
        const Handler h = it->second;
        h(evs.at(static_cast<std::size_t>(i)).events);
    }
}

void EventLoop::run() {
    while (!stopped_)
        run_once(-1);
}

} // namespace rbln::emu
