// SPDX-License-Identifier: GPL-2.0
// The control socket: any number of line-protocol clients (tests, the VM
// runner, QEMU's virtio-serial port for tests inside the guest).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "control.h"
#include "event_loop.h"
#include "log.h"
#include "net.h"

namespace rbln::emu {

class ControlServer {
public:
    // Listens on `path` and registers with `loop`.  Throws std::runtime_error.
    ControlServer(const std::string& path, ControlInterface& control, EventLoop& loop, Logger& log);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;
    ControlServer(ControlServer&&) = delete;
    ControlServer& operator=(ControlServer&&) = delete;

    [[nodiscard]] std::size_t clients() const { return clients_.size(); }

private:
    struct Client {
        UniqueFd fd;
        std::uint64_t token = 0;
        std::string in;
        std::string out;
        bool discarding = false; // inside an overlong line
        bool closing = false;    // peer closed; flush `out`, then drop
    };

    static constexpr std::size_t kMaxPendingOutput = 1U << 20;

    void on_accept();
    void on_client(std::uint64_t id, std::uint32_t events);
    void consume_input(Client& c);
    void reply(Client& c, const std::string& line);
    bool flush(Client& c); // false: the client is broken
    void drop(std::uint64_t id);

    ListeningSocket listen_;
    ControlInterface& control_;
    EventLoop& loop_;
    Logger& log_;
    std::uint64_t listen_token_ = 0;
    std::uint64_t next_id_ = 1;
    std::map<std::uint64_t, std::unique_ptr<Client>> clients_;
};

} // namespace rbln::emu
