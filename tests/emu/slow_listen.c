// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for the end-to-end tests: listen() sleeps 100 ms before
 * doing its work, which widens the window between bind() and listen() of
 * rbln-emu's sockets so a test can tell whether their files appear before
 * they accept connections.
 */
#include <dlfcn.h>
#include <sys/socket.h>
#include <time.h>

int listen(int fd, int backlog) {
    static int (*real_listen)(int, int);
    const struct timespec delay = {.tv_nsec = 100 * 1000 * 1000};

    if (!real_listen)
        real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    nanosleep(&delay, NULL);
    return real_listen(fd, backlog);
}
