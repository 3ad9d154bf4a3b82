// SPDX-License-Identifier: GPL-2.0
// A small epoll loop.  Handlers are keyed by a token, not by fd, so a
// handler removed (and its fd reused) during a batch is never misrouted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "unique_fd.h"

namespace rbln::emu {

class EventLoop {
public:
    using Handler = std::function<void(std::uint32_t events)>;

    EventLoop(); // throws std::runtime_error

    // Watches `fd` for `events` (EPOLLIN...); returns the token.
    std::uint64_t add(int fd, std::uint32_t events, Handler handler);
    void modify(std::uint64_t token, int fd, std::uint32_t events);
    void remove(std::uint64_t token, int fd);

    // Waits once (timeout_ms, -1 = forever) and dispatches.
    void run_once(int timeout_ms);
    void run();
    void stop() { stopped_ = true; }
    [[nodiscard]] bool stopped() const { return stopped_; }

private:
    UniqueFd epoll_;
    std::map<std::uint64_t, Handler> handlers_;
    std::uint64_t next_token_ = 1;
    bool stopped_ = false;
};

} // namespace rbln::emu
