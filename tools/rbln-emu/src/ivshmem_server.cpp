// SPDX-License-Identifier: GPL-2.0
#include "ivshmem_server.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <sys/eventfd.h>
#include <unistd.h>

namespace rbln::emu {

namespace {

UniqueFd make_eventfd() {
    UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!fd.valid())
        throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
    return fd;
}

} // namespace

IvshmemServer::IvshmemServer(const std::string& path, int shm_fd, unsigned vectors, Logger& log)
    : listen_(path, "--socket"), shm_fd_(shm_fd), vectors_(vectors), log_(log) {
    for (unsigned v = 0; v < vectors; v++)
        doorbells_.push_back(make_eventfd());
}

bool IvshmemServer::serve(int fd) {
    // Sent in one go while blocking: a dozen small messages fit the socket
    // buffer, and QEMU reads them as they come.
    if (!set_nonblocking(fd, false))
        return false;
    std::vector<UniqueFd> irqs;
    for (unsigned v = 0; v < vectors_; v++)
        irqs.push_back(make_eventfd());
    if (!send_i64(fd, 0) || !send_i64(fd, kClientPeerId) || !send_i64(fd, -1, shm_fd_))
        return false;
    for (unsigned v = 0; v < vectors_; v++) {
        if (!send_i64(fd, kEmulatorPeerId, doorbells_[v].get()))
            return false;
    }
    for (unsigned v = 0; v < vectors_; v++) {
        if (!send_i64(fd, kClientPeerId, irqs[v].get()))
            return false;
    }
    if (!set_nonblocking(fd, true))
        return false;
    const std::lock_guard<std::mutex> lk(irq_mu_);
    irqs_ = std::move(irqs);
    return true;
}

bool IvshmemServer::accept_client() {
    UniqueFd fd = listen_.accept();
    if (!fd.valid())
        return false;
    if (client_.valid()) {
        log_.warn("refusing a second ivshmem client: one QEMU at a time");
        return false;
    }
    if (!serve(fd.get())) {
        log_.error("ivshmem client went away during setup: %s", std::strerror(errno));
        return false;
    }
    client_ = std::move(fd);
    log_.info("QEMU connected: peer id %lld, card peer id %lld, %u vectors",
              static_cast<long long>(kClientPeerId), static_cast<long long>(kEmulatorPeerId),
              vectors_);
    return true;
}

void IvshmemServer::drop_client() {
    client_.reset();
    const std::lock_guard<std::mutex> lk(irq_mu_);
    irqs_.clear();
}

bool IvshmemServer::consume_doorbell(unsigned vector) {
    std::uint64_t count = 0;
    return ::read(doorbells_.at(vector).get(), &count, sizeof(count)) ==
           static_cast<ssize_t>(sizeof(count));
}

void IvshmemServer::raise_irq(unsigned vector) {
    const std::lock_guard<std::mutex> lk(irq_mu_);
    if (vector >= irqs_.size())
        return;
    const std::uint64_t one = 1;
    if (::write(irqs_[vector].get(), &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one)))
        log_.debug("raising vector %u failed: %s", vector, std::strerror(errno));
}

} // namespace rbln::emu
