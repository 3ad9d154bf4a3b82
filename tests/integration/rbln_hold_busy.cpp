// SPDX-License-Identifier: GPL-2.0
// rbln-hold-busy - a VM test helper (tests/vm/smi-check.sh): keeps one
// chiplet's command ring busy with back-to-back jobs until killed, so
// rbln-smi must show that chiplet (and this process) as utilised.
//
//   rbln-hold-busy NODE CHIPLET [SLICE_MS]
//
// Each job is one WAIT packet on a 64-bit counter in a host buffer: job k
// waits for counter >= k + 1.  Every SLICE_MS (default 20) the CPU raises
// the counter by one, which completes the oldest job, then waits for that
// job and submits the next.  Three jobs are always queued, so the ring
// never runs dry while the helper runs, and one job completes (and adds
// its ~SLICE_MS of card time to sysfs chiplet<i>/busy_ns and to this
// client's fdinfo drm-engine-chiplet<i>; both grow when a job completes)
// every slice.  Each WAIT also has a 1 s timeout of its own, so a helper
// killed with SIGKILL leaves no job that the driver must reset the ring for.
//
// Prints one line when the first jobs are queued:
//   ready pid=<pid> chiplet=<chiplet> slice_ms=<ms>
// and, after SIGTERM/SIGINT (every job released and waited for):
//   done jobs=<completed jobs>
// Exit status: 0 after SIGTERM/SIGINT, 1 usage, 2 open or set-up failed,
// 3 SUBMIT or WAIT failed, 4 a job failed (its error is printed).

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "drm/rbln_accel.h"
#include "kernel/unique_fd.hpp"
#include "rbln_fw_cmd.h"

namespace {

constexpr unsigned kDepth = 3;                       // jobs queued at any time
constexpr std::uint64_t kWaitTimeoutNs = 1000000000; // the WAIT packets' own timeout
constexpr std::uint64_t kCmdBytes = 64 * 1024;
constexpr std::uint64_t kSlots = kCmdBytes / sizeof(rbln_fw_pkt_wait);

volatile std::sig_atomic_t g_stop = 0;

void on_signal(int /*sig*/) {
    g_stop = 1;
}

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
    std::fputs("usage: rbln-hold-busy NODE CHIPLET [SLICE_MS]\n", stderr);
    return 1;
}

std::int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A host buffer with its CPU mapping; unmapped when destroyed (the GEM
// handle goes with the fd).
class HostBuffer {
public:
    HostBuffer() = default;
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    HostBuffer(HostBuffer&&) = delete;
    HostBuffer& operator=(HostBuffer&&) = delete;
    ~HostBuffer() {
        if (map_ != MAP_FAILED)
            ::munmap(map_, size_);
    }

    // 0 or the errno of the step that failed (@what names it).
    int create(int fd, std::uint64_t size, const char*& what) {
        drm_rbln_bo_create c{};
        c.size = size;
        c.region = RBLN_REGION_HOST;
        what = "DRM_IOCTL_RBLN_BO_CREATE";
        if (::ioctl(fd, DRM_IOCTL_RBLN_BO_CREATE, &c) != 0)
            return errno;
        drm_rbln_bo_info info{};
        info.handle = c.handle;
        what = "DRM_IOCTL_RBLN_BO_INFO";
        if (::ioctl(fd, DRM_IOCTL_RBLN_BO_INFO, &info) != 0)
            return errno;
        what = "mmap";
        void* p = ::mmap(nullptr, c.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                         static_cast<off_t>(info.mmap_offset));
        if (p == MAP_FAILED)
            return errno;
        handle_ = c.handle;
        va_ = c.device_va;
        size_ = c.size;
        map_ = p;
        std::memset(map_, 0, size_);
        return 0;
    }

    std::uint32_t handle() const { return handle_; }
    std::uint64_t va() const { return va_; }
    std::byte* bytes() const { return static_cast<std::byte*>(map_); }

private:
    std::uint32_t handle_ = 0;
    std::uint64_t va_ = 0;
    std::uint64_t size_ = 0;
    void* map_ = MAP_FAILED;
};

class Holder {
public:
    Holder(int fd, std::uint32_t queue, HostBuffer& counter, HostBuffer& cmd)
        : fd_(fd), queue_(queue), counter_(counter), cmd_(cmd) {}

    // Submits job @k: WAIT counter >= k + 1.  0 or the errno.
    int submit(std::uint64_t k) {
        rbln_fw_pkt_wait w{};
        w.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_WAIT, 0, sizeof(w));
        w.va = counter_.va();
        w.value = k + 1;
        w.timeout_ns = kWaitTimeoutNs;
        const std::uint64_t offset = (k % kSlots) * sizeof(w);
        std::memcpy(cmd_.bytes() + offset, &w, sizeof(w));

        const std::uint32_t bos[1] = {counter_.handle()};
        drm_rbln_submit s{};
        s.queue_id = queue_;
        s.cmd_handle = cmd_.handle();
        s.cmd_offset = offset;
        s.cmd_size = sizeof(w);
        s.bo_handles = reinterpret_cast<std::uintptr_t>(bos);
        s.bo_count = 1;
        s.bo_elem_size = sizeof(std::uint32_t);
        s.in_elem_size = sizeof(drm_rbln_sync);
        if (::ioctl(fd_, DRM_IOCTL_RBLN_SUBMIT, &s) != 0)
            return errno;
        seqno_.at(k % seqno_.size()) = s.seqno;
        return 0;
    }

    // Sets the counter: releases every job k < @value.
    void release(std::uint64_t value) {
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(counter_.bytes()))
            .store(value, std::memory_order_seq_cst);
    }

    // Waits for job @k; 0 or the errno of WAIT; its error in @job_error.
    int wait(std::uint64_t k, std::int32_t& job_error) {
        drm_rbln_wait w{};
        w.queue_id = queue_;
        w.seqno = seqno_.at(k % seqno_.size());
        w.timeout_ns = now_ns() + 10 * static_cast<std::int64_t>(kWaitTimeoutNs);
        int ret = 0;
        do {
            ret = ::ioctl(fd_, DRM_IOCTL_RBLN_WAIT, &w);
        } while (ret != 0 && errno == EINTR);
        if (ret != 0)
            return errno;
        job_error = w.job_error;
        return 0;
    }

private:
    int fd_;
    std::uint32_t queue_;
    HostBuffer& counter_;
    HostBuffer& cmd_;
    std::array<std::uint64_t, kDepth + 1> seqno_{};
};

void sleep_ms(std::uint64_t ms) {
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
    ::nanosleep(&ts, nullptr); // a signal ends it early: the loop then stops
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4)
        return usage();
    const std::string node = argv[1];
    std::uint64_t chiplet = 0;
    std::uint64_t slice_ms = 20;
    if (!parse_u64(argv[2], chiplet) || chiplet >= 32)
        return usage();
    if (argc == 4 && (!parse_u64(argv[3], slice_ms) || slice_ms == 0 || slice_ms > 500))
        return usage();

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);

    const rbln::detail::UniqueFd fd(::open(node.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd) {
        std::fprintf(stderr, "rbln-hold-busy: open %s: %s\n", node.c_str(), std::strerror(errno));
        return 2;
    }
    HostBuffer counter;
    HostBuffer cmd;
    const char* what = "";
    int e = counter.create(fd.get(), 4096, what);
    if (e == 0)
        e = cmd.create(fd.get(), kCmdBytes, what);
    if (e != 0) {
        std::fprintf(stderr, "rbln-hold-busy: %s: %s\n", what, std::strerror(e));
        return 2;
    }
    drm_rbln_queue_create q{};
    q.chiplet_mask = 1u << chiplet;
    q.priority = RBLN_QUEUE_PRIORITY_NORMAL;
    if (::ioctl(fd.get(), DRM_IOCTL_RBLN_QUEUE_CREATE, &q) != 0) {
        std::fprintf(stderr, "rbln-hold-busy: DRM_IOCTL_RBLN_QUEUE_CREATE(chiplet %llu): %s\n",
                     static_cast<unsigned long long>(chiplet), std::strerror(errno));
        return 2;
    }

    Holder h(fd.get(), q.queue_id, counter, cmd);
    std::uint64_t next = 0; // the next job to submit
    std::uint64_t done = 0; // jobs completed (and waited for)
    int status = 0;
    for (; next < kDepth; next++) {
        if ((e = h.submit(next)) != 0) {
            std::fprintf(stderr, "rbln-hold-busy: SUBMIT: %s\n", std::strerror(e));
            h.release(~0ull);
            return 3;
        }
    }
    std::printf("ready pid=%d chiplet=%llu slice_ms=%llu\n", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(chiplet),
                static_cast<unsigned long long>(slice_ms));
    std::fflush(stdout);

    while (g_stop == 0 && status == 0) {
        sleep_ms(slice_ms);
        h.release(done + 1); // completes job `done`
        std::int32_t job_error = 0;
        if ((e = h.wait(done, job_error)) != 0) {
            std::fprintf(stderr, "rbln-hold-busy: WAIT job %llu: %s\n",
                         static_cast<unsigned long long>(done), std::strerror(e));
            status = 3;
            break;
        }
        if (job_error != 0) {
            std::fprintf(stderr, "rbln-hold-busy: job %llu failed: %s\n",
                         static_cast<unsigned long long>(done), std::strerror(-job_error));
            status = 4;
            break;
        }
        done++;
        if (g_stop != 0)
            break;
        if ((e = h.submit(next)) != 0) {
            std::fprintf(stderr, "rbln-hold-busy: SUBMIT: %s\n", std::strerror(e));
            status = 3;
            break;
        }
        next++;
    }

    // Release everything and wait for what is still queued.
    h.release(~0ull);
    for (; done < next; done++) {
        std::int32_t job_error = 0;
        if (h.wait(done, job_error) != 0)
            break;
    }
    std::printf("done jobs=%llu\n", static_cast<unsigned long long>(done));
    return status;
}
