// SPDX-License-Identifier: GPL-2.0
// libFuzzer target, run inside the VM: rbln.ko's ioctls with fuzzed structs.
//
// Each input is one client: /dev/accel/accel0 opened, a small world made
// (a host BO, an HBM BO, a mapped command BO holding a NOP, a queue and a
// syncobj), then up to 64 operations read from the input, then the file
// closed (the kernel frees what is left, jobs in flight included).  An
// operation is a selector byte and the bytes of its ioctl struct, taken as
// they are except that
//   - handles and queue ids name the world's objects unless their top bit
//     is set (then the low 31 bits are used as they are);
//   - user pointers point into this process's scratch memory (or, with
//     their top bit set, at an address that is never mapped), so the
//     kernel's writes cannot land on the fuzzer's own data;
//   - sizes of memory to create or pin are cut to 64 MiB / 1 MiB, and
//     WAIT deadlines to 2 ms from now.
// What must hold: every ioctl returns; the kernel's taint flags stay as
// they were (a WARN or an oops taints it; the dmesg tail is printed and
// the input is kept); and, under ASan, this process stays sound.
// RBLN_FUZZ_SEEDS=DIR writes a seed corpus and exits.
//
// RBLN_FUZZ_FAULTS=1 (in the rbln VM, whose card 0 has its emulator's
// control port at /dev/virtio-ports/rbln-emu.0): selector values 120..127
// (with or without bit 7) inject a card fault instead: a firmware crash,
// or on chiplet N a hang, a failing DMA, a corrupt completion or a lost
// interrupt.  After each input the faults are cleared and the card must
// work again: within 20 s, a NOP job succeeds on every chiplet (jobs that
// fail meanwhile with the recovery's errors are retried), after a rebind
// if the driver gave the card up (a burst of crashes can outlast its
// recovery attempts: documented, and counted in the tally).
#include <drm.h>
#include <drm/rbln_accel.h>
#include <rbln_fw_cmd.h>

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_seeds.h"

namespace {

constexpr std::size_t kScratch = 1 << 20; // pointer targets, page aligned
constexpr std::uint64_t kNever = 0x10;    // the zero page: never mapped
constexpr std::uint64_t kMaxCreate = 64ULL << 20;
constexpr std::size_t kMaxOps = 64;

constexpr std::array<const char*, 13> kOpNames{"GET_INFO",
                                               "BO_CREATE",
                                               "BO_INFO",
                                               "BO_USERPTR",
                                               "QUEUE_CREATE",
                                               "QUEUE_DESTROY",
                                               "SUBMIT",
                                               "WAIT",
                                               "GEM_CLOSE",
                                               "URING_CMD (submitted)",
                                               "CQE (res 0)",
                                               "FAULT (injected)",
                                               "REBIND (the driver gave the card up)"};
constexpr unsigned kFaultOp = 11;
constexpr unsigned kRebindOp = 12;

// Per ioctl: calls that failed, calls that succeeded.
std::array<std::array<std::uint64_t, 2>, kOpNames.size()>& tally() {
    static std::array<std::array<std::uint64_t, 2>, kOpNames.size()> t{};
    return t;
}

// RBLN_FUZZ_TRACE=1: every ioctl's outcome on stderr (replaying an input).
bool trace() {
    static const bool on = std::getenv("RBLN_FUZZ_TRACE") != nullptr;
    return on;
}

void print_tally() {
    std::fprintf(stderr, "uapi_fuzz: ioctls accepted / called:");
    for (std::size_t i = 0; i < kOpNames.size(); i++) {
        const std::uint64_t ok = tally().at(i)[1];
        const std::uint64_t all = tally().at(i)[0] + ok;
        std::fprintf(stderr, " %s %llu/%llu", kOpNames.at(i), static_cast<unsigned long long>(ok),
                     static_cast<unsigned long long>(all));
    }
    std::fprintf(stderr, "\n");
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "uapi_fuzz: %s\n", what.c_str());
    std::fflush(stderr);
    std::system("dmesg | tail -n 40 >&2");
    std::abort();
}

std::string tainted() {
    std::ifstream f("/proc/sys/kernel/tainted");
    std::string s;
    std::getline(f, s);
    return s;
}

// Card 0's emulator control port (tools/rbln-emu/README.md, "Control"):
// one command line, one reply line.
class EmuPort {
public:
    EmuPort() {
        fd_ = ::open("/dev/virtio-ports/rbln-emu.0", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd_ < 0)
            die("RBLN_FUZZ_FAULTS: no emulator control port: " + std::string(std::strerror(errno)));
    }
    EmuPort(const EmuPort&) = delete;
    EmuPort& operator=(const EmuPort&) = delete;
    EmuPort(EmuPort&&) = delete;
    EmuPort& operator=(EmuPort&&) = delete;
    ~EmuPort() { ::close(fd_); }

    // The reply to @cmd; dies unless it is "ok..." within 10 s.
    std::string ask(const std::string& cmd) {
        std::array<char, 1024> buf{};
        while (::read(fd_, buf.data(), buf.size()) > 0) {
        } // leftovers of an earlier command
        const std::string line = cmd + "\n";
        if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
            die("control port: cannot send '" + cmd + "'");
        std::string reply;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0)
                continue;
            const ssize_t n = ::read(fd_, buf.data(), buf.size());
            if (n > 0)
                reply.append(buf.data(), static_cast<std::size_t>(n));
            if (const auto nl = reply.find('\n'); nl != std::string::npos) {
                reply.resize(nl);
                if (reply.rfind("ok", 0) != 0) {
                    std::string what = "control port: '" + cmd;
                    what += "' -> '";
                    what += reply;
                    die(what + "'");
                }
                return reply;
            }
        }
        die("control port: no reply to '" + cmd + "'");
    }

private:
    int fd_ = -1;
};

// The port when RBLN_FUZZ_FAULTS=1, else nullptr.
EmuPort* faults() {
    static EmuPort* port = [] {
        const char* v = std::getenv("RBLN_FUZZ_FAULTS");
        if (v == nullptr || std::string(v) != "1")
            return static_cast<EmuPort*>(nullptr);
        static EmuPort p;
        return &p;
    }();
    return port;
}

// The bytes of the input, read front to back (zeros once it runs out).
class Input {
public:
    Input(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
    [[nodiscard]] bool empty() const { return at_ >= n_; }
    template <typename T> T take() {
        T v{};
        const std::size_t k = std::min(sizeof(T), n_ - std::min(at_, n_));
        std::memcpy(&v, d_ + std::min(at_, n_), k);
        at_ += sizeof(T);
        return v;
    }

private:
    const std::uint8_t* d_;
    std::size_t n_;
    std::size_t at_ = 0;
};

class Client {
public:
    explicit Client(std::byte* scratch) : scratch_(scratch) {
        fd_ = ::open("/dev/accel/accel0", O_RDWR | O_CLOEXEC);
        if (fd_ < 0)
            die("cannot open /dev/accel/accel0: " + std::string(std::strerror(errno)));
        bos_.push_back(create(64 << 10, RBLN_REGION_HOST));
        bos_.push_back(create(64 << 10, RBLN_REGION_HBM));
        cmd_ = create(4096, RBLN_REGION_HOST);
        bos_.push_back(cmd_);
        drm_rbln_bo_info info{};
        info.handle = cmd_;
        if (::ioctl(fd_, DRM_IOCTL_RBLN_BO_INFO, &info) != 0)
            die("BO_INFO of the command buffer failed");
        void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                         static_cast<off_t>(info.mmap_offset));
        if (m == MAP_FAILED)
            die("cannot map the command buffer");
        map_ = static_cast<std::byte*>(m);
        const std::uint64_t nop = RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 8);
        std::memcpy(map_, &nop, sizeof(nop));
        drm_rbln_queue_create q{};
        q.chiplet_mask = 1;
        if (::ioctl(fd_, DRM_IOCTL_RBLN_QUEUE_CREATE, &q) != 0)
            die("QUEUE_CREATE failed");
        queues_.push_back(q.queue_id);
        drm_syncobj_create s{};
        if (::ioctl(fd_, DRM_IOCTL_SYNCOBJ_CREATE, &s) != 0)
            die("SYNCOBJ_CREATE failed");
        syncobjs_.push_back(s.handle);
    }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    Client(Client&&) = delete;
    Client& operator=(Client&&) = delete;
    ~Client() {
        // Pending uring_cmds are cancelled by whichever goes last: the ring
        // (exit waits for them) or the file.
        if (ring_up_ && !close_first_)
            io_uring_queue_exit(&ring_);
        ::munmap(map_, 4096);
        ::close(fd_);
        if (ring_up_ && close_first_)
            io_uring_queue_exit(&ring_);
    }

    void run(Input& in) {
        for (std::size_t i = 0; i < kMaxOps && !in.empty(); i++)
            op(in);
    }

private:
    std::uint32_t create(std::uint64_t size, std::uint32_t region) {
        drm_rbln_bo_create c{};
        c.size = size;
        c.region = region;
        if (::ioctl(fd_, DRM_IOCTL_RBLN_BO_CREATE, &c) != 0)
            die("BO_CREATE of the world failed: " + std::string(std::strerror(errno)));
        return c.handle;
    }

    static std::uint32_t pick(const std::vector<std::uint32_t>& v, std::uint32_t x) {
        if ((x & 0x80000000U) != 0 || v.empty())
            return x & 0x7fffffffU;
        return v[x % v.size()];
    }
    std::uint32_t bo(std::uint32_t x) const { return pick(bos_, x); }
    std::uint32_t queue(std::uint32_t x) const { return pick(queues_, x); }
    std::uint32_t syncobj(std::uint32_t x) const { return pick(syncobjs_, x); }

    // A user pointer for @len bytes: into the scratch memory, or never mapped.
    std::uint64_t ptr(std::uint64_t x, std::uint64_t len) const {
        if ((x >> 63) != 0 || len > kScratch)
            return kNever;
        const std::uint64_t off = (x % (kScratch - len + 1)) & ~std::uint64_t{7};
        return reinterpret_cast<std::uintptr_t>(scratch_ + off);
    }

    template <typename T> void call(unsigned op, unsigned long req, T& arg) {
        // Any errno is an answer; the tally shows how deep the inputs get.
        const bool ok = ::ioctl(fd_, req, &arg) == 0;
        tally().at(op).at(ok ? 1 : 0)++;
        if (trace())
            std::fprintf(stderr, "%s: %s\n", kOpNames.at(op), ok ? "ok" : std::strerror(errno));
    }

    // SUBMIT's struct from the input (the ioctl's and the uring_cmd's).
    drm_rbln_submit submit_args(Input& in, bool formed) {
        auto a = in.take<drm_rbln_submit>();
        const bool any_cmd = (a.flags & 0x80000000U) != 0; // else the mapped one
        if (formed) {
            a.flags &= RBLN_SUBMIT_NO_IMPLICIT_WAIT;
            a.out_flags = 0;
            a.cmd_offset = (a.cmd_offset % 512) * 8;
            a.cmd_size = 8 * (1 + a.cmd_size % static_cast<std::uint32_t>(512 - a.cmd_offset / 8));
            a.bo_count %= 9;
            a.bo_elem_size = sizeof(std::uint32_t);
            a.bo_handles &= ~(std::uint64_t{1} << 63);
            a.in_count = a.in_count % 4 == 3 ? 1 + a.in_count % 4 : 0;
            a.in_elem_size = sizeof(drm_rbln_sync);
            a.in_syncs &= ~(std::uint64_t{1} << 63);
            if (a.out_handle == 0)
                a.out_point = 0;
            a.seqno = 0;
        }
        a.queue_id = queue(a.queue_id);
        a.cmd_handle = any_cmd ? bo(a.cmd_handle) : cmd_;
        const std::size_t nb = std::min<std::size_t>(a.bo_count, 8);
        auto* handles = reinterpret_cast<std::uint32_t*>(scratch_);
        for (std::size_t i = 0; i < nb; i++)
            handles[i] = bo(in.take<std::uint32_t>());
        a.bo_handles =
            (a.bo_handles >> 63) != 0 ? kNever : reinterpret_cast<std::uintptr_t>(handles);
        auto* syncs = reinterpret_cast<drm_rbln_sync*>(scratch_ + 64);
        const std::size_t ns = std::min<std::size_t>(a.in_count, 4);
        for (std::size_t i = 0; i < ns; i++) {
            syncs[i] = in.take<drm_rbln_sync>();
            syncs[i].handle = syncobj(syncs[i].handle);
            if (formed)
                syncs[i].flags = 0;
        }
        a.in_syncs = (a.in_syncs >> 63) != 0 ? kNever : reinterpret_cast<std::uintptr_t>(syncs);
        if (a.out_handle != 0)
            a.out_handle = syncobj(a.out_handle);
        return a;
    }

    // WAIT's struct from the input; a deadline at most 2 ms away, or with
    // @none_ok and the input's say, none (io_uring: pending until the job
    // ends or the ring goes).
    drm_rbln_wait wait_args(Input& in, bool formed, bool none_ok) {
        auto a = in.take<drm_rbln_wait>();
        if (formed) {
            a.flags &= RBLN_WAIT_SYNCOBJ;
            a.job_error = 0;
            a.pad = 0;
            a.sync.flags = 0;
            if ((a.flags & RBLN_WAIT_SYNCOBJ) != 0) {
                a.queue_id = 0;
                a.seqno = 0;
                a.sync.handle |= 1; // one of the client's syncobjs
            } else {
                a.sync = drm_rbln_sync{};
                a.seqno %= 4;    // this input's first submits
                a.queue_id |= 1; // one of the client's queues
            }
        }
        // 0 stays 0: the mode not used needs zero fields.
        if (a.queue_id != 0)
            a.queue_id = queue(a.queue_id);
        if (a.sync.handle != 0)
            a.sync.handle = syncobj(a.sync.handle);
        if (none_ok && (in.take<std::uint8_t>() & 1U) != 0) {
            a.timeout_ns = 0;
            return a;
        }
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        a.timeout_ns =
            now.tv_sec * 1'000'000'000LL + now.tv_nsec +
            static_cast<std::int64_t>(static_cast<std::uint64_t>(a.timeout_ns) % 2'000'000);
        return a;
    }

    // Selector bit 7: the struct is made well formed first (known flags,
    // zero padding and outputs, right element sizes, small counts), so the
    // input gets past validation to the paths behind it.
    void op(Input& in) {
        const auto sel = in.take<std::uint8_t>();
        const bool formed = (sel & 0x80U) != 0;
        if (faults() != nullptr && (sel & 0x7fU) >= 120) {
            inject(in.take<std::uint8_t>());
            return;
        }
        switch ((sel & 0x7fU) % 12) {
        case 0: {
            auto a = in.take<drm_rbln_get_info>();
            if (formed) {
                a.type = 1 + a.type % 4;
                a.size %= 1024;
                a.flags = 0;
                a.pad = 0;
            }
            a.ptr = ptr(a.ptr, a.size);
            call(0, DRM_IOCTL_RBLN_GET_INFO, a);
            break;
        }
        case 1: {
            auto a = in.take<drm_rbln_bo_create>();
            a.size %= kMaxCreate + 1;
            if (formed) {
                a.region %= 3;
                a.chiplet %= 4;
                a.flags &= RBLN_BO_DEVICE_READ_ONLY;
                a.handle = 0;
                a.device_va = 0;
            }
            call(1, DRM_IOCTL_RBLN_BO_CREATE, a);
            if (a.handle != 0)
                bos_.push_back(a.handle);
            break;
        }
        case 2: {
            auto a = in.take<drm_rbln_bo_info>();
            a.handle = bo(a.handle);
            if (formed) {
                const std::uint32_t h = a.handle;
                a = drm_rbln_bo_info{};
                a.handle = h;
            }
            call(2, DRM_IOCTL_RBLN_BO_INFO, a);
            break;
        }
        case 3: {
            auto a = in.take<drm_rbln_bo_userptr>();
            a.size %= kScratch + 1;
            if (formed) {
                a.size &= ~std::uint64_t{0xfff};
                a.flags &= RBLN_BO_DEVICE_READ_ONLY;
                a.handle = 0;
                a.device_va = 0;
            }
            a.addr = (a.addr >> 63) != 0 ? a.addr & 0x7fffffffffffffffULL
                                         : ptr(a.addr & ~std::uint64_t{0xfff}, a.size);
            call(3, DRM_IOCTL_RBLN_BO_USERPTR, a);
            if (a.handle != 0)
                bos_.push_back(a.handle);
            break;
        }
        case 4: {
            auto a = in.take<drm_rbln_queue_create>();
            if (formed) {
                a.chiplet_mask = 1U << (a.chiplet_mask % 4);
                a.priority %= 2;
                a.flags = 0;
                a.queue_id = 0;
            }
            call(4, DRM_IOCTL_RBLN_QUEUE_CREATE, a);
            if (a.queue_id != 0)
                queues_.push_back(a.queue_id);
            break;
        }
        case 5: {
            auto a = in.take<drm_rbln_queue_destroy>();
            a.queue_id = queue(a.queue_id);
            if (formed)
                a.pad = 0;
            call(5, DRM_IOCTL_RBLN_QUEUE_DESTROY, a);
            break;
        }
        case 6: {
            drm_rbln_submit a = submit_args(in, formed);
            call(6, DRM_IOCTL_RBLN_SUBMIT, a);
            break;
        }
        case 7: {
            drm_rbln_wait a = wait_args(in, formed, false);
            call(7, DRM_IOCTL_RBLN_WAIT, a);
            break;
        }
        case 8: {
            drm_gem_close a{};
            a.handle = bo(in.take<std::uint32_t>());
            a.pad = in.take<std::uint8_t>() == 0xff ? 1 : 0;
            call(8, DRM_IOCTL_GEM_CLOSE, a);
            break;
        }
        case 10:
            uring_cmd(in, formed);
            break;
        case 11:
            reap();
            break;
        default: { // command buffer bytes at an 8-byte offset
            const std::size_t off = (in.take<std::uint16_t>() % 512) * 8;
            const auto words =
                std::min<std::size_t>(in.take<std::uint8_t>() % 16 + 1, (4096 - off) / 8);
            for (std::size_t i = 0; i < words; i++) {
                const auto w = in.take<std::uint64_t>();
                std::memcpy(map_ + off + 8 * i, &w, 8);
            }
            break;
        }
        }
    }

    // IORING_OP_URING_CMD with SUBMIT's or WAIT's struct (or, not formed,
    // any cmd_op), on a ring made at the first one: SQE128 | CQE32 (and
    // maybe DEFER_TASKRUN) when formed, else any of those flags.
    void uring_cmd(Input& in, bool formed) {
        const auto how = in.take<std::uint8_t>();
        if (!ring_up_) {
            unsigned flags = formed ? IORING_SETUP_SQE128 | IORING_SETUP_CQE32
                                    : ((how & 1U) != 0 ? IORING_SETUP_SQE128 : 0U) |
                                          ((how & 2U) != 0 ? IORING_SETUP_CQE32 : 0U);
            if ((how & 4U) != 0)
                flags |= IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER;
            if (io_uring_queue_init(16, &ring_, flags) != 0)
                return;
            ring_up_ = true;
            big_sqe_ = (flags & IORING_SETUP_SQE128) != 0;
            close_first_ = (how & 8U) != 0;
        }
        const bool wait = (how & 16U) != 0;
        std::uint32_t op = wait ? RBLN_URING_CMD_WAIT : RBLN_URING_CMD_SUBMIT;
        if (!formed && (how & 32U) != 0)
            op = in.take<std::uint32_t>();
        std::array<std::byte, 80> payload{};
        if (wait) {
            const drm_rbln_wait w = wait_args(in, formed, true);
            std::memcpy(payload.data(), &w, sizeof(w));
        } else {
            const drm_rbln_submit sub = submit_args(in, formed);
            std::memcpy(payload.data(), &sub, sizeof(sub));
        }
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) {
            reap();
            return;
        }
        std::memset(static_cast<void*>(sqe), 0, big_sqe_ ? 128 : 64);
        sqe->opcode = IORING_OP_URING_CMD;
        sqe->fd = fd_;
        sqe->cmd_op = op;
        // A 64-byte SQE has 16 bytes of command.
        std::memcpy(sqe->cmd, payload.data(), big_sqe_ ? payload.size() : 16);
        const int n = io_uring_submit(&ring_);
        tally().at(9).at(n == 1 ? 1 : 0)++;
    }

    // A card fault, @k: kind (low 3 bits) and chiplet (the next 2).
    static void inject(std::uint8_t k) {
        static constexpr std::array<const char*, 5> kKinds{"hang", "dma-error", "corrupt-cpl",
                                                           "lost-irq", "fw-fault"};
        const char* kind = kKinds.at((k & 7U) % kKinds.size());
        std::string cmd = std::string("fault ") + kind;
        if (kind != std::string("fw-fault"))
            cmd += " chiplet=" + std::to_string((k >> 3) & 3U);
        faults()->ask(cmd);
        tally().at(kFaultOp).at(1)++;
        if (trace())
            std::fprintf(stderr, "FAULT: %s\n", cmd.c_str());
    }

    // The CQEs there within 1 ms; none may carry a positive res.
    void reap() {
        if (!ring_up_)
            return;
        io_uring_cqe* cqe = nullptr;
        __kernel_timespec ts{0, 1'000'000};
        if (io_uring_wait_cqe_timeout(&ring_, &cqe, &ts) != 0)
            return;
        while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
            if (cqe->res > 0)
                die("a uring_cmd CQE with res " + std::to_string(cqe->res));
            tally().at(10).at(cqe->res == 0 ? 1 : 0)++;
            io_uring_cqe_seen(&ring_, cqe);
        }
    }

    std::byte* scratch_;
    int fd_ = -1;
    io_uring ring_{};
    bool ring_up_ = false;
    bool big_sqe_ = false;
    bool close_first_ = false;

    std::byte* map_ = nullptr;
    std::uint32_t cmd_ = 0;
    std::vector<std::uint32_t> bos_;
    std::vector<std::uint32_t> queues_;
    std::vector<std::uint32_t> syncobjs_;
};

std::byte* scratch() {
    static std::byte* s = [] {
        void* m = ::mmap(nullptr, kScratch, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (m == MAP_FAILED)
            die("cannot map scratch memory");
        return static_cast<std::byte*>(m);
    }();
    return s;
}

// A NOP job on every chiplet of card 0, each waited for: "" or what failed.
std::string nop_on_every_chiplet() {
    const int fd = ::open("/dev/accel/accel0", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return std::string("open: ") + std::strerror(errno);
    std::string failed;
    auto fail = [&failed](const std::string& what, int err) {
        failed = what + ": " + std::strerror(err);
    };
    drm_rbln_bo_create c{};
    c.size = 4096;
    c.region = RBLN_REGION_HOST;
    drm_rbln_bo_info info{};
    void* m = MAP_FAILED;
    if (::ioctl(fd, DRM_IOCTL_RBLN_BO_CREATE, &c) != 0) {
        fail("BO_CREATE", errno);
    } else {
        info.handle = c.handle;
        if (::ioctl(fd, DRM_IOCTL_RBLN_BO_INFO, &info) != 0)
            fail("BO_INFO", errno);
        else
            m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(info.mmap_offset));
    }
    if (failed.empty() && m == MAP_FAILED)
        fail("mmap", errno);
    if (m != MAP_FAILED) {
        const std::uint64_t nop = RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 8);
        std::memcpy(m, &nop, sizeof(nop));
    }
    for (std::uint32_t chiplet = 0; chiplet < 4 && failed.empty(); chiplet++) {
        drm_rbln_queue_create q{};
        q.chiplet_mask = 1U << chiplet;
        if (::ioctl(fd, DRM_IOCTL_RBLN_QUEUE_CREATE, &q) != 0) {
            if (errno != EINVAL || chiplet == 0) // EINVAL: fewer chiplets
                fail("QUEUE_CREATE", errno);
            break;
        }
        drm_rbln_submit sub{};
        sub.queue_id = q.queue_id;
        sub.cmd_handle = c.handle;
        sub.cmd_size = 8;
        if (::ioctl(fd, DRM_IOCTL_RBLN_SUBMIT, &sub) != 0) {
            fail("SUBMIT", errno);
            break;
        }
        drm_rbln_wait w{};
        w.queue_id = q.queue_id;
        w.seqno = sub.seqno;
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        w.timeout_ns = (now.tv_sec + 5) * 1'000'000'000LL + now.tv_nsec;
        if (::ioctl(fd, DRM_IOCTL_RBLN_WAIT, &w) != 0)
            fail("WAIT", errno);
        else if (w.job_error != 0)
            fail("job on chiplet " + std::to_string(chiplet), -w.job_error);
    }
    if (m != MAP_FAILED)
        ::munmap(m, 4096);
    ::close(fd);
    return failed;
}

std::string sysfs_line(const std::string& path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return s;
}

// After an input with faults: none armed any more, and the card works
// again within 20 s: a NOP job succeeds on every chiplet (tries that fail
// while the driver recovers are repeated).  A driver that gave the card up
// after its recovery attempts failed ("recovery failed" in sysfs fault,
// kernel/README.md) is rebound, the documented remedy, once.
void expect_recovery() {
    faults()->ask("fault clear");
    const std::string bdf =
        std::filesystem::read_symlink("/sys/class/accel/accel0/device").filename().string();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool rebound = false;
    for (;;) {
        const std::string failed = nop_on_every_chiplet();
        if (failed.empty())
            return;
        if (!rebound &&
            sysfs_line("/sys/bus/pci/devices/" + bdf + "/rbln/fault").find("recovery failed") !=
                std::string::npos) {
            std::ofstream("/sys/bus/pci/drivers/rbln/unbind") << bdf << std::flush;
            std::ofstream("/sys/bus/pci/drivers/rbln/bind") << bdf << std::flush;
            rebound = true;
            tally().at(kRebindOp).at(1)++;
            continue;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            std::string what = "after the faults the card did not work again within 20 s (";
            what += failed;
            what += rebound ? ", after a rebind); " : "); ";
            die(what + faults()->ask("status"));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// Operations as the input encodes them.
class Seed {
public:
    template <typename T> Seed& op(std::uint8_t which, const T& arg) {
        bytes_.push_back(static_cast<char>(which));
        bytes_.append(reinterpret_cast<const char*>(&arg), sizeof(arg));
        return *this;
    }
    template <typename T> Seed& raw(const T& v) {
        bytes_.append(reinterpret_cast<const char*>(&v), sizeof(v));
        return *this;
    }
    void write(const std::filesystem::path& p) const {
        std::ofstream(p, std::ios::binary) << bytes_;
    }

private:
    std::string bytes_;
};

void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    drm_rbln_get_info gi{};
    gi.type = RBLN_INFO_DEVICE;
    gi.size = sizeof(drm_rbln_info_device);
    Seed().op(0, gi).write(dir / "get_info");
    drm_rbln_bo_create bc{};
    bc.size = 1 << 20;
    bc.region = RBLN_REGION_HBM;
    drm_rbln_bo_info bi{};
    bi.handle = 3;
    Seed().op(1, bc).op(2, bi).op(8, std::uint32_t{3}).write(dir / "bo");
    drm_rbln_bo_userptr up{};
    up.size = 1 << 16;
    Seed().op(3, up).write(dir / "userptr");
    drm_rbln_queue_create qc{};
    qc.chiplet_mask = 2;
    drm_rbln_queue_destroy qd{};
    qd.queue_id = 1;
    Seed().op(4, qc).op(5, qd).write(dir / "queues");
    drm_rbln_submit s{};
    s.cmd_size = 8;
    s.bo_count = 2;
    s.bo_elem_size = 4;
    s.out_handle = 1;
    drm_rbln_wait w{};
    w.seqno = 1;
    w.timeout_ns = 1'000'000;
    Seed().op(6, s).raw(std::uint32_t{0}).raw(std::uint32_t{1}).op(7, w).write(dir / "submit_wait");
    Seed()
        .op(0x86, s)
        .raw(std::uint32_t{0})
        .raw(std::uint32_t{1})
        .op(0x87, w)
        .write(dir / "submit_wait_formed");
    // io_uring: a SUBMIT, a WAIT without deadline on its seqno, the CQEs.
    Seed()
        .raw(std::uint8_t{0x8a})
        .raw(std::uint8_t{0})
        .raw(s)
        .raw(std::uint32_t{0})
        .raw(std::uint32_t{1})
        .raw(std::uint8_t{0x8a})
        .raw(std::uint8_t{16})
        .raw(w)
        .raw(std::uint8_t{1})
        .raw(std::uint8_t{11})
        .write(dir / "uring_submit_wait");
    // After the NOP, a SIGNAL to a VA nothing maps (the job faults): the
    // three words at offset 8, then a submit of 32 bytes.
    Seed sig;
    sig.raw(std::uint8_t{9}).raw(std::uint16_t{1}).raw(std::uint8_t{2});
    sig.raw(std::uint64_t{RBLN_FW_PKT_HDR(RBLN_FW_PKT_SIGNAL, 0, 24)})
        .raw(std::uint64_t{0x1000})
        .raw(std::uint64_t{1});
    s.cmd_size = 32;
    sig.op(6, s).raw(std::uint32_t{0}).raw(std::uint32_t{1});
    sig.write(dir / "fault_job");
    // Card faults (with RBLN_FUZZ_FAULTS=1): a hang of chiplet 0 under a
    // submitted job; a firmware crash between two.
    s.cmd_size = 8;
    Seed()
        .op(6, s)
        .raw(std::uint32_t{0})
        .raw(std::uint32_t{1})
        .raw(std::uint8_t{0xf8})
        .raw(std::uint8_t{0})
        .op(0x87, w)
        .write(dir / "inject_hang");
    Seed()
        .op(0x86, s)
        .raw(std::uint32_t{0})
        .raw(std::uint32_t{1})
        .raw(std::uint8_t{0x78})
        .raw(std::uint8_t{4})
        .op(0x86, s)
        .raw(std::uint32_t{0})
        .raw(std::uint32_t{1})
        .write(dir / "inject_fw_fault");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    rbln::fuzz::write_seeds_if_asked(write_seeds);
    std::atexit(print_tally);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string taint0 = tainted();
    {
        Input in(data, size);
        Client c(scratch());
        c.run(in);
    }
    if (faults() != nullptr)
        expect_recovery();
    if (const std::string t = tainted(); t != taint0)
        die("the kernel's taint went from " + taint0 + " to " + t);
    return 0;
}
