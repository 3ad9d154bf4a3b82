// SPDX-License-Identifier: GPL-2.0
// UNIX-socket helpers: listening sockets that clean up after themselves,
// and sending one int64 with an optional file descriptor (SCM_RIGHTS).
#pragma once

#include <cstdint>
#include <string>

#include "unique_fd.h"

namespace rbln::emu {

// A listening UNIX stream socket bound to a path; the path is unlinked on
// destruction.  A stale socket file nobody listens on is replaced; a path
// that a live server answers on, or that is not a socket, is an error.
// The file appears only once the socket listens (bound as "<path>.new",
// renamed after listen()), so a client may connect as soon as it sees it.
class ListeningSocket {
public:
    // `what` names the option for error messages (e.g. "--socket").
    ListeningSocket(const std::string& path, const std::string& what);
    ~ListeningSocket();
    ListeningSocket(const ListeningSocket&) = delete;
    ListeningSocket& operator=(const ListeningSocket&) = delete;
    ListeningSocket(ListeningSocket&&) = delete;
    ListeningSocket& operator=(ListeningSocket&&) = delete;

    [[nodiscard]] int fd() const { return fd_.get(); }
    [[nodiscard]] const std::string& path() const { return path_; }

    // accept4() a pending connection (non-blocking, close-on-exec); -1 if none.
    [[nodiscard]] UniqueFd accept() const;

private:
    std::string path_;
    UniqueFd fd_;
};

// Connects to a UNIX stream socket; invalid UniqueFd (errno set) on failure.
UniqueFd connect_unix(const std::string& path);

// Sends one little-endian int64, with `fd` attached when fd >= 0.
bool send_i64(int sock, std::int64_t value, int fd = -1);

bool set_nonblocking(int fd, bool on);

} // namespace rbln::emu
