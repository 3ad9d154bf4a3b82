// SPDX-License-Identifier: GPL-2.0
// rbln-hold-hbm - a VM test helper (tests/vm/smi-check.sh): opens an rbln
// accel node, creates one HBM buffer with DRM_IOCTL_RBLN_BO_CREATE, then
// shares the open file the ways a real program does (a dup() in the same
// process and, with --fork, a child that inherits it) and sleeps until
// killed, so rbln-smi must show one client with that buffer under the
// lowest PID.
//
//   rbln-hold-hbm NODE SIZE CHIPLET [--fork]
//
// Prints one line when the buffer exists and every holder is running:
//   ready pid=<parent> child=<child or 0> chiplet=<placed on> size=<allocated bytes>
// Exit status: 1 usage, 2 open failed, 3 BO_CREATE failed (errno printed).
// The child dies with the parent (PR_SET_PDEATHSIG); SIGTERM/SIGINT end both.

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drm/rbln_accel.h"
#include "kernel/unique_fd.hpp"

namespace {

bool parse_u64(const char* text, std::uint64_t& out) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0')
        return false;
    out = v;
    return true;
}

int usage() {
    std::fputs("usage: rbln-hold-hbm NODE SIZE CHIPLET [--fork]\n", stderr);
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 4 || argc > 5)
        return usage();
    const std::string node = argv[1];
    std::uint64_t size = 0;
    std::uint64_t chiplet = 0;
    if (!parse_u64(argv[2], size) || !parse_u64(argv[3], chiplet) || chiplet > 0xffffffffu)
        return usage();
    const bool fork_child = argc == 5 && std::string(argv[4]) == "--fork";
    if (argc == 5 && !fork_child)
        return usage();

    const rbln::detail::UniqueFd fd(::open(node.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd) {
        std::fprintf(stderr, "rbln-hold-hbm: open %s: %s\n", node.c_str(), std::strerror(errno));
        return 2;
    }
    drm_rbln_bo_create bo{};
    bo.size = size;
    bo.region = RBLN_REGION_HBM;
    bo.chiplet = static_cast<std::uint32_t>(chiplet);
    if (::ioctl(fd.get(), DRM_IOCTL_RBLN_BO_CREATE, &bo) != 0) {
        std::fprintf(stderr,
                     "rbln-hold-hbm: DRM_IOCTL_RBLN_BO_CREATE(%llu bytes, chiplet %llu): %s\n",
                     static_cast<unsigned long long>(size),
                     static_cast<unsigned long long>(chiplet), std::strerror(errno));
        return 3;
    }
    // A second fd of the same open file: still one client.
    const rbln::detail::UniqueFd dup(::dup(fd.get()));
    if (!dup) {
        std::fprintf(stderr, "rbln-hold-hbm: dup: %s\n", std::strerror(errno));
        return 2;
    }

    const pid_t parent = ::getpid();
    pid_t child = 0;
    int ready[2] = {-1, -1};
    if (fork_child) {
        if (::pipe(ready) != 0) {
            std::perror("rbln-hold-hbm: pipe");
            return 2;
        }
        child = ::fork();
        if (child < 0) {
            std::perror("rbln-hold-hbm: fork");
            return 2;
        }
        if (child == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (::getppid() != parent)
                ::_exit(0);
            ::close(ready[0]);
            ::close(ready[1]); // EOF tells the parent the child is set up
            for (;;)
                ::pause();
        }
        ::close(ready[1]);
        char c = 0;
        while (::read(ready[0], &c, 1) < 0 && errno == EINTR) {
        }
        ::close(ready[0]);
    }

    std::printf("ready pid=%d child=%d chiplet=%u size=%llu\n", static_cast<int>(parent),
                static_cast<int>(child), bo.chiplet, static_cast<unsigned long long>(bo.size));
    std::fflush(stdout);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    int sig = 0;
    sigwait(&set, &sig);
    if (child > 0) {
        ::kill(child, SIGTERM);
        ::waitpid(child, nullptr, 0);
    }
    return 0;
}
