// SPDX-License-Identifier: GPL-2.0
// The ivshmem-doorbell server side, as QEMU 7.2 expects it.
//
// On connect the client gets: int64 protocol version 0; int64 its own peer
// id; int64 -1 with the shared-memory fd; then, for every peer, its id once
// per vector each with an eventfd: first the emulator's own doorbell
// vectors (peer kEmulatorPeerId), last the client's own id with its
// interrupt (MSI-X) eventfds.  One client at a time.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "log.h"
#include "net.h"
#include "unique_fd.h"

namespace rbln::emu {

inline constexpr std::int64_t kEmulatorPeerId = 0;
inline constexpr std::int64_t kClientPeerId = 1;

class IvshmemServer {
public:
    // Listens on `path`; `shm_fd` is the BAR memory handed to the client.
    // Throws std::runtime_error.
    IvshmemServer(const std::string& path, int shm_fd, unsigned vectors, Logger& log);

    [[nodiscard]] int listen_fd() const { return listen_.fd(); }
    [[nodiscard]] int doorbell_fd(unsigned vector) const { return doorbells_.at(vector).get(); }
    [[nodiscard]] unsigned vectors() const { return vectors_; }
    [[nodiscard]] int client_fd() const { return client_.get(); }
    [[nodiscard]] bool has_client() const { return client_.valid(); }

    // Accepts one pending connection.  Returns true if it became the client
    // and was served; a second client is refused (closed) with a log line.
    bool accept_client();
    void drop_client();

    // Drains a doorbell eventfd; true if it had been rung (any number of times).
    bool consume_doorbell(unsigned vector);

    // Raises the client's MSI-X vector; dropped when no client is attached.
    // Any thread (the command rings raise theirs).
    void raise_irq(unsigned vector);

private:
    bool serve(int fd);

    ListeningSocket listen_;
    int shm_fd_;
    unsigned vectors_;
    Logger& log_;
    std::vector<UniqueFd> doorbells_; // ours: the guest rings them
    std::mutex irq_mu_;               // irqs_: ring threads raise, the loop replaces
    std::vector<UniqueFd> irqs_;      // the client's: we signal them
    UniqueFd client_;
};

} // namespace rbln::emu
