// SPDX-License-Identifier: GPL-2.0
#include "emulator.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "card.h"
#include "control.h"
#include "control_server.h"
#include "dma.h"
#include "event_loop.h"
#include "guest_memory.h"
#include "ivshmem_server.h"
#include "unique_fd.h"

namespace rbln::emu {

namespace {

constexpr long kTickNs = 100L * 1000 * 1000; // heartbeat period

std::runtime_error sys_error(const std::string& what) {
    return std::runtime_error(what + ": " + std::strerror(errno));
}

// The BAR: an anonymous memfd (nothing left behind) mapped shared.
struct Bar {
    UniqueFd fd;
    Mapping map;
};

Bar make_bar(std::uint64_t size) {
    Bar bar;
    bar.fd.reset(::memfd_create("rbln-emu-bar", MFD_CLOEXEC));
    if (!bar.fd.valid())
        throw sys_error("memfd_create");
    if (::ftruncate(bar.fd.get(), static_cast<off_t>(size)) != 0)
        throw sys_error("sizing the BAR memory");
    void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, bar.fd.get(), 0);
    if (addr == MAP_FAILED)
        throw sys_error("mapping the BAR memory");
    bar.map = Mapping(addr, size);
    return bar;
}

UniqueFd make_signalfd() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
        throw sys_error("sigprocmask");
    UniqueFd fd(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!fd.valid())
        throw sys_error("signalfd");
    return fd;
}

UniqueFd make_ticker() {
    UniqueFd fd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!fd.valid())
        throw sys_error("timerfd_create");
    itimerspec its{};
    its.it_interval.tv_nsec = kTickNs;
    its.it_value.tv_nsec = kTickNs;
    if (::timerfd_settime(fd.get(), 0, &its, nullptr) != 0)
        throw sys_error("timerfd_settime");
    return fd;
}

} // namespace

namespace {

std::string mib(std::uint64_t bytes) {
    std::array<char, 32> b{};
    std::snprintf(b.data(), b.size(), bytes % (1ULL << 20) == 0 ? "%.0f MiB" : "%.2f MiB",
                  static_cast<double>(bytes) / static_cast<double>(1ULL << 20));
    return b.data();
}

// The size from which DMA copies bypass the CPU caches (dma.h): given, or
// measured on this host now, before any guest runs.
void set_dma_threshold(const Options& opt, Logger& log) {
    if (opt.dma_nt_threshold) {
        dma::set_stream_threshold(*opt.dma_nt_threshold);
        log.info("DMA: copies from %s on bypass the CPU caches (--dma-nt-threshold)",
                 mib(*opt.dma_nt_threshold).c_str());
        return;
    }
    const dma::StreamCalibration c = dma::calibrate_stream_threshold();
    dma::set_stream_threshold(c.threshold);
    std::string rates;
    for (const dma::StreamPoint& p : c.points) {
        std::array<char, 64> b{};
        std::snprintf(b.data(), b.size(), "%s%s %.1f/%.1f", rates.empty() ? "" : ", ",
                      mib(p.size).c_str(), p.cached_gbps, p.streamed_gbps);
        rates += b.data();
    }
    log.info("DMA: copies from %s on bypass the CPU caches (measured, GB/s cached/streamed: %s)",
             mib(c.threshold).c_str(), rates.c_str());
}

} // namespace

int run_emulator(const Options& opt, Logger& log) {
    std::signal(SIGPIPE, SIG_IGN);
    const UniqueFd sigfd = make_signalfd();

    CardIdentity identity = make_identity(opt, static_cast<std::uint32_t>(kEmulatorPeerId));
    log.set_prefix(identity.serial);
    set_dma_threshold(opt, log);
    FileGuestMemory ram(opt.guest_ram_path, opt.guest_ram_size, opt.guest_lowmem);
    Bar bar = make_bar(identity.layout.bar_size);

    // The card raises interrupts through the server, which is created
    // after the card; the callback looks it up when it fires (also on the
    // command rings' threads).
    std::atomic<IvshmemServer*> server{nullptr};
    Card card(
        identity, std::span<std::byte>(bar.map.data(), bar.map.size()), ram,
        [&server](unsigned vector) {
            if (IvshmemServer* s = server.load(std::memory_order_acquire))
                s->raise_irq(vector);
        },
        log);
    if (opt.fault_no_response)
        card.set_no_response(true);

    EventLoop loop;
    IvshmemServer ivshmem(opt.socket_path, bar.fd.get(), opt.vectors, log);
    server = &ivshmem;
    // However this ends, the ring threads stop before the transport they
    // raise interrupts on goes away.
    struct Detach {
        Card& card;
        std::atomic<IvshmemServer*>& server;
        Detach(Card& c, std::atomic<IvshmemServer*>& s) : card(c), server(s) {}
        Detach(const Detach&) = delete;
        Detach& operator=(const Detach&) = delete;
        Detach(Detach&&) = delete;
        Detach& operator=(Detach&&) = delete;
        ~Detach() {
            card.shutdown();
            server = nullptr;
        }
    } const detach(card, server);
    ControlInterface control(card);
    // Created only once the ivshmem socket listens: the VM runner starts
    // QEMU when the control socket appears.
    ControlServer control_server(opt.control_path, control, loop, log);
    const UniqueFd ticker = make_ticker();

    std::uint64_t client_token = 0;

    loop.add(sigfd.get(), EPOLLIN, [&](std::uint32_t) {
        signalfd_siginfo si{};
        if (::read(sigfd.get(), &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
            log.info("%s: exiting", strsignal(static_cast<int>(si.ssi_signo)));
            loop.stop();
        }
    });
    loop.add(ticker.get(), EPOLLIN, [&](std::uint32_t) {
        std::uint64_t expirations = 0;
        if (::read(ticker.get(), &expirations, sizeof(expirations)) ==
            static_cast<ssize_t>(sizeof(expirations)))
            card.tick();
    });
    for (unsigned v = 0; v < opt.vectors; v++) {
        loop.add(ivshmem.doorbell_fd(v), EPOLLIN, [&ivshmem, &card, v](std::uint32_t) {
            // Drain first: a doorbell rung while we work re-arms the fd.
            if (ivshmem.consume_doorbell(v))
                card.doorbell(v);
        });
    }
    loop.add(ivshmem.listen_fd(), EPOLLIN, [&](std::uint32_t) {
        if (!ivshmem.accept_client())
            return;
        client_token = loop.add(ivshmem.client_fd(), EPOLLIN | EPOLLRDHUP, [&](std::uint32_t ev) {
            std::array<char, 256> buf{};
            const ssize_t n = ::read(ivshmem.client_fd(), buf.data(), buf.size());
            const bool gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
                              (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) != 0;
            if (!gone)
                return; // QEMU sends nothing after set-up; ignore it
            if (opt.replug) {
                // Hot unplug: the card leaves the slot; the next QEMU
                // connection (device_add) finds a fresh one.
                log.info("QEMU disconnected: the card is unplugged; waiting for the next "
                         "connection");
                loop.remove(client_token, ivshmem.client_fd());
                ivshmem.drop_client();
                card.surprise_remove();
                card.power_cycle();
                return;
            }
            log.info("QEMU disconnected: exiting (doorbells %llu, admin requests %llu)",
                     static_cast<unsigned long long>(card.stats().doorbells),
                     static_cast<unsigned long long>(card.stats().admin_requests));
            loop.remove(client_token, ivshmem.client_fd());
            ivshmem.drop_client();
            loop.stop();
        });
    });

    log.info("%s card, %u chiplet(s) x %llu MiB HBM, BAR %llu MiB, guest RAM %s (%llu MiB, "
             "%llu MiB below 4G), %u vectors; ivshmem %s, control %s",
             family_name(opt.family), identity.layout.chiplets,
             static_cast<unsigned long long>(opt.hbm_per_chiplet >> 20),
             static_cast<unsigned long long>(identity.layout.bar_size >> 20),
             opt.guest_ram_path.c_str(),
             static_cast<unsigned long long>(ram.map().ram_size() >> 20),
             static_cast<unsigned long long>(ram.map().lowmem() >> 20), opt.vectors,
             opt.socket_path.c_str(), opt.control_path.c_str());

    // Runs until QEMU leaves (after having come) or a signal.
    loop.run();
    return 0;
}

} // namespace rbln::emu
