// SPDX-License-Identifier: GPL-2.0
// End to end on the host: the real rbln-emu binary, with this test as a
// fake QEMU (ivshmem client: receives the fds, maps the BAR and the guest
// RAM, rings doorbells, waits for interrupts) and as a control client.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "rbln_fw_admin.h"
#include "rbln_fw_cmd.h"
#include "rbln_fw_ctrl.h"
#include "unique_fd.h"

extern char** environ;

using namespace rbln::emu;
using namespace std::chrono_literals;

namespace e2e_test {

constexpr std::size_t kMaxLine = 4096;

namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "rbln-emu-e2e.XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr)
            throw std::runtime_error("mkdtemp");
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    TempDir(TempDir&&) = delete;
    TempDir& operator=(TempDir&&) = delete;
    [[nodiscard]] std::string file(const char* name) const { return (path_ / name).string(); }
    [[nodiscard]] std::vector<std::string> entries() const {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(path_))
            out.push_back(e.path().filename().string());
        return out;
    }

private:
    fs::path path_;
};

bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
        if (cond())
            return true;
        std::this_thread::sleep_for(5ms);
    }
    return cond();
}

// A child process; killed and reaped if the test ends early.
class Child {
public:
    Child(const std::vector<std::string>& args, const std::string& log_path) {
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(RBLN_EMU_BINARY));
        for (const std::string& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log_path.c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        const int rc = posix_spawn(&pid_, RBLN_EMU_BINARY, &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0)
            throw std::runtime_error("posix_spawn failed");
    }
    ~Child() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            (void)::waitpid(pid_, nullptr, 0);
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    Child(Child&&) = delete;
    Child& operator=(Child&&) = delete;

    void signal(int sig) const { ::kill(pid_, sig); }

    // The exit status (or 128 + signal), nullopt on timeout.
    std::optional<int> wait(std::chrono::milliseconds timeout) {
        std::optional<int> result;
        wait_until(
            [&] {
                int st = 0;
                if (::waitpid(pid_, &st, WNOHANG) != pid_)
                    return false;
                pid_ = -1;
                result = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                return true;
            },
            timeout);
        return result;
    }

private:
    pid_t pid_ = -1;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct CtlResult {
    int status;
    std::string out;
};

CtlResult ctl(const std::string& control, const std::string& command) {
    const std::string cmd =
        std::string(RBLN_EMU_BINARY) + " ctl --control " + control + " " + command + " 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr)
        return {-1, ""};
    std::string out;
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), p) != nullptr)
        out += buf.data();
    const int st = ::pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// One ivshmem protocol message: an int64 and maybe an fd.
struct Msg {
    std::int64_t value = 0;
    UniqueFd fd;
};

std::optional<Msg> recv_msg(int sock) {
    Msg m;
    iovec iov{&m.value, sizeof(m.value)};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1)
        return std::nullopt;
    if (::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof(m.value)))
        return std::nullopt;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int fd = -1;
            std::memcpy(&fd, CMSG_DATA(c), sizeof(fd));
            m.fd.reset(fd);
        }
    }
    return m;
}

// The QEMU side of ivshmem-doorbell.
class FakeQemu {
public:
    FakeQemu(const std::string& socket, unsigned vectors) : sock_(connect_unix(socket)) {
        if (!sock_.valid())
            throw std::runtime_error("connect: " + std::string(std::strerror(errno)));
        for (unsigned i = 0; i < 3 + 2 * vectors; i++) {
            auto m = recv_msg(sock_.get());
            if (!m)
                throw std::runtime_error("protocol message " + std::to_string(i) + " missing");
            msgs.push_back(std::move(*m));
        }
        shm_size = static_cast<std::uint64_t>(lseek(msgs[2].fd.get(), 0, SEEK_END));
        void* a =
            ::mmap(nullptr, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, msgs[2].fd.get(), 0);
        if (a == MAP_FAILED)
            throw std::runtime_error("mmap shm");
        shm_ = Mapping(a, shm_size);
    }

    rbln_fw_ctrl& ctrl() { return *reinterpret_cast<rbln_fw_ctrl*>(shm_.data()); }
    // Doorbell: what QEMU does when the guest writes (peer << 16) | vector.
    void ring(unsigned vector) {
        const std::uint64_t one = 1;
        ASSERT_EQ(::write(msgs[3 + vector].fd.get(), &one, 8), 8);
    }
    // Waits for MSI-X `vector` (our own eventfds come last).
    bool wait_irq(unsigned vector, unsigned vectors) {
        const int fd = msgs[3 + vectors + vector].fd.get();
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1)
            return false;
        std::uint64_t n = 0;
        return ::read(fd, &n, 8) == 8 && n > 0;
    }
    void disconnect() { sock_.reset(); }
    int sock() const { return sock_.get(); }

    std::vector<Msg> msgs;
    std::uint64_t shm_size = 0;

private:
    UniqueFd sock_;
    Mapping shm_;
};

struct Emu {
    explicit Emu(std::vector<std::string> extra = {})
        : socket(dir.file("card0.sock")), control(dir.file("card0.sock.ctl")), ram(dir.file("ram")),
          log(dir.file("emu.log")) {
        std::vector<std::string> args{"--socket",         socket, "--guest-ram", ram,
                                      "--guest-ram-size", "16M",  "--serial",    "E2E-0001"};
        args.insert(args.end(), extra.begin(), extra.end());
        child.emplace(args, log);
        ready = wait_until([&] { return fs::exists(control); }, 5s);
        // The control socket appears only after the ivshmem socket listens.
        socket_first = fs::exists(socket);
    }
    TempDir dir;
    std::string socket, control, ram, log;
    std::optional<Child> child;
    bool ready = false;
    bool socket_first = false;
};

std::string read_line(int fd) {
    std::string line;
    char c = 0;
    while (true) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1 || ::read(fd, &c, 1) != 1)
            return line + "<eof>";
        if (c == '\n')
            return line;
        line += c;
    }
}

void send_all(int fd, const std::string& s) {
    ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

} // namespace

TEST(EndToEnd, FakeQemuReceivesProtocolMapsBarAndDrivesTheCard) {
    Emu emu({"--family", "atom", "--hbm-per-chiplet", "8M", "--vectors", "3"});
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    EXPECT_TRUE(emu.socket_first);
    FakeQemu q(emu.socket, 3);

    // Protocol: version 0, our id 1, -1 + shm, peer 0 x 3 vectors, our id x 3 last.
    EXPECT_EQ(q.msgs[0].value, 0);
    EXPECT_FALSE(q.msgs[0].fd.valid());
    EXPECT_EQ(q.msgs[1].value, 1);
    EXPECT_EQ(q.msgs[2].value, -1);
    EXPECT_TRUE(q.msgs[2].fd.valid());
    for (unsigned v = 0; v < 3; v++) {
        EXPECT_EQ(q.msgs[3 + v].value, 0);
        EXPECT_TRUE(q.msgs[3 + v].fd.valid());
        EXPECT_EQ(q.msgs[6 + v].value, 1);
        EXPECT_TRUE(q.msgs[6 + v].fd.valid());
    }

    // The BAR: 2 MiB control + 8 MiB HBM rounded up to 16 MiB.
    EXPECT_EQ(q.shm_size, 16ULL << 20);
    rbln_fw_ctrl& c = q.ctrl();
    EXPECT_EQ(c.magic, RBLN_FW_MAGIC);
    EXPECT_EQ(c.iface_major, 1);
    EXPECT_EQ(c.family, RBLN_FW_FAMILY_ATOM);
    EXPECT_EQ(c.chiplet_count, 1U);
    EXPECT_EQ(c.doorbell_peer_id, 0U);
    EXPECT_EQ(c.num_vectors, 3U);
    EXPECT_EQ(c.bar_size, 16ULL << 20);
    EXPECT_EQ(c.hbm[0].bar_offset, 2ULL << 20);
    EXPECT_EQ(c.hbm[0].size, 8ULL << 20);
    EXPECT_STREQ(c.serial, "E2E-0001");
    EXPECT_EQ(c.fw_state, RBLN_FW_STATE_RESET);

    // The guest RAM file, as the guest kernel would use it for DMA.
    const UniqueFd ramfd(::open(emu.ram.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(ramfd.valid());
    void* a = ::mmap(nullptr, 16ULL << 20, PROT_READ | PROT_WRITE, MAP_SHARED, ramfd.get(), 0);
    ASSERT_NE(a, MAP_FAILED);
    const Mapping ram(a, 16ULL << 20);
    auto* r = ram.data();
    constexpr std::uint64_t kSq = 0x100000, kCq = 0x101000, kEv = 0x102000, kData = 0x103000;

    c.ring_entries = 16;
    c.admin_sq_addr = kSq;
    c.admin_cq_addr = kCq;
    c.event_ring_addr = kEv;
    c.host_iface_major = 1;
    c.host_gen = 1;
    c.host_ctrl = RBLN_FW_HOST_READY;
    q.ring(RBLN_FW_DB_CTRL);
    ASSERT_TRUE(q.wait_irq(RBLN_FW_IRQ_EVENT, 3)) << slurp(emu.log);
    EXPECT_EQ(c.fw_state, RBLN_FW_STATE_READY);
    EXPECT_EQ(c.host_ack, 1U);
    rbln_fw_event ev{};
    std::memcpy(&ev, r + kEv, sizeof(ev));
    EXPECT_EQ(ev.flags & RBLN_FW_REC_PHASE, RBLN_FW_REC_PHASE);
    EXPECT_EQ(ev.type, RBLN_FW_EV_STATE);

    rbln_fw_admin_req req{};
    req.opcode = RBLN_FW_OP_IDENTIFY;
    req.seq = 77;
    req.data_addr = kData;
    req.data_len = sizeof(rbln_fw_identify);
    std::memcpy(r + kSq, &req, sizeof(req));
    c.admin_sq_tail = 1;
    q.ring(RBLN_FW_DB_ADMIN);
    ASSERT_TRUE(q.wait_irq(RBLN_FW_IRQ_ADMIN, 3)) << slurp(emu.log);
    rbln_fw_admin_cpl cpl{};
    std::memcpy(&cpl, r + kCq, sizeof(cpl));
    EXPECT_EQ(cpl.flags & RBLN_FW_REC_PHASE, RBLN_FW_REC_PHASE);
    EXPECT_EQ(cpl.seq, 77U);
    EXPECT_EQ(cpl.status, RBLN_FW_ST_OK);
    rbln_fw_identify idf{};
    std::memcpy(&idf, r + kData, sizeof(idf));
    EXPECT_EQ(idf.family, RBLN_FW_FAMILY_ATOM);
    EXPECT_STREQ(idf.serial, "E2E-0001");
    EXPECT_EQ(idf.hbm_size[0], 8ULL << 20);

    // The heartbeat runs while READY.
    EXPECT_TRUE(wait_until([&] { return c.heartbeat >= 2; }, 2s));

    auto st = ctl(emu.control, "status");
    EXPECT_EQ(st.status, 0) << st.out;
    EXPECT_NE(st.out.find("ok state=READY "), std::string::npos) << st.out;
    EXPECT_NE(st.out.find(" family=atom chiplets=1 "), std::string::npos) << st.out;
    EXPECT_NE(st.out.find(" admin_requests=1 "), std::string::npos) << st.out;

    // Fault injection through the control socket reaches the guest's view.
    EXPECT_EQ(ctl(emu.control, "fault fw-fault code=3 reason=e2e crash").status, 0);
    ASSERT_TRUE(q.wait_irq(RBLN_FW_IRQ_EVENT, 3));
    EXPECT_EQ(c.fw_state, RBLN_FW_STATE_FAULT);
    EXPECT_STREQ(c.fault_reason, "e2e crash");

    emu.child->signal(SIGTERM);
    EXPECT_EQ(emu.child->wait(5s), 0) << slurp(emu.log);
    EXPECT_FALSE(fs::exists(emu.socket));
    EXPECT_FALSE(fs::exists(emu.control));
    EXPECT_FALSE(fs::exists(emu.ram)); // it created the RAM file, so it removed it
    EXPECT_NE(slurp(emu.log).find("rbln-emu[E2E-0001]: "), std::string::npos);
}

TEST(EndToEnd, CommandRingJobRunsOnItsThreadAndRaisesTheRingInterrupt) {
    Emu emu({"--family", "atom", "--hbm-per-chiplet", "8M", "--vectors", "3"});
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    FakeQemu q(emu.socket, 3);
    rbln_fw_ctrl& c = q.ctrl();
    EXPECT_EQ(c.iface_minor, RBLN_FW_IFACE_MINOR);
    const UniqueFd ramfd(::open(emu.ram.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(ramfd.valid());
    void* a = ::mmap(nullptr, 16ULL << 20, PROT_READ | PROT_WRITE, MAP_SHARED, ramfd.get(), 0);
    ASSERT_NE(a, MAP_FAILED);
    const Mapping ram(a, 16ULL << 20);
    auto* r = ram.data();
    constexpr std::uint64_t kSq = 0x100000, kCq = 0x101000, kEv = 0x102000;
    constexpr std::uint64_t kJobs = 0x110000, kCpls = 0x111000, kCtrl = 0x112000;
    constexpr std::uint64_t kCmd = 0x120000, kData = 0x130000;

    c.ring_entries = 16;
    c.admin_sq_addr = kSq;
    c.admin_cq_addr = kCq;
    c.event_ring_addr = kEv;
    c.host_iface_major = 1;
    c.host_iface_minor = RBLN_FW_IFACE_MINOR;
    c.host_gen = 1;
    c.host_ctrl = RBLN_FW_HOST_READY;
    q.ring(RBLN_FW_DB_CTRL);
    ASSERT_TRUE(q.wait_irq(RBLN_FW_IRQ_EVENT, 3)) << slurp(emu.log);

    rbln_fw_admin_req req{};
    req.opcode = RBLN_FW_OP_RING_SETUP;
    req.seq = 1;
    req.args[1] = 16;
    req.args[2] = kJobs;
    req.args[4] = kCpls;
    req.args[6] = kCtrl;
    std::memcpy(r + kSq, &req, sizeof(req));
    c.admin_sq_tail = 1;
    q.ring(RBLN_FW_DB_ADMIN);
    ASSERT_TRUE(q.wait_irq(RBLN_FW_IRQ_ADMIN, 3)) << slurp(emu.log);
    rbln_fw_admin_cpl acpl{};
    std::memcpy(&acpl, r + kCq, sizeof(acpl));
    ASSERT_EQ(acpl.status, RBLN_FW_ST_OK);

    // A kernel job (DMA addresses): FILL 64 KiB, then SIGNAL.
    rbln_fw_pkt_fill fill{};
    fill.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_FILL, 0, sizeof(fill));
    fill.pattern_bytes = 2;
    fill.dst = kData;
    fill.size = 64 * 1024;
    fill.pattern = 0xbeef;
    rbln_fw_pkt_signal sig{};
    sig.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_SIGNAL, 0, sizeof(sig));
    sig.va = kData + 0x20000;
    sig.value = 42;
    std::memcpy(r + kCmd, &fill, sizeof(fill));
    std::memcpy(r + kCmd + sizeof(fill), &sig, sizeof(sig));
    rbln_fw_job job{};
    job.seqno = 1;
    job.flags = RBLN_FW_JOB_IRQ;
    job.cmd_addr = kCmd;
    job.cmd_size = sizeof(fill) + sizeof(sig);
    std::memcpy(r + kJobs, &job, sizeof(job));
    auto* ctrl = reinterpret_cast<rbln_fw_ring_ctrl*>(r + kCtrl);
    std::atomic_ref<std::uint32_t>(ctrl->job_tail).store(1, std::memory_order_release);
    q.ring(RBLN_FW_DB_RING);
    ASSERT_TRUE(q.wait_irq(RBLN_FW_IRQ_RING, 3)) << slurp(emu.log);
    rbln_fw_job_cpl cpl{};
    std::memcpy(&cpl, r + kCpls, sizeof(cpl));
    EXPECT_EQ(cpl.flags & RBLN_FW_REC_PHASE, RBLN_FW_REC_PHASE);
    EXPECT_EQ(cpl.seqno, 1U);
    EXPECT_EQ(cpl.status, RBLN_FW_JOB_OK);
    EXPECT_EQ(ctrl->done_seqno, 1U);
    EXPECT_EQ(ctrl->job_head, 1U);
    std::uint16_t w = 0;
    std::memcpy(&w, r + kData + 0xfffe, 2);
    EXPECT_EQ(w, 0xbeef);
    std::uint64_t v = 0;
    std::memcpy(&v, r + kData + 0x20000, 8);
    EXPECT_EQ(v, 42U);

    const auto st = ctl(emu.control, "status");
    EXPECT_NE(st.out.find(" rings_up=1 jobs=1 "), std::string::npos) << st.out;
    // A held job is interrupted by SIGTERM: the emulator exits cleanly.
    rbln_fw_pkt_wait wt{};
    wt.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_WAIT, 0, sizeof(wt));
    wt.va = kData + 0x30000;
    wt.value = 1;
    std::memcpy(r + kCmd + 0x1000, &wt, sizeof(wt));
    job.seqno = 2;
    job.cmd_addr = kCmd + 0x1000;
    job.cmd_size = sizeof(wt);
    std::memcpy(r + kJobs + 64, &job, sizeof(job));
    std::atomic_ref<std::uint32_t>(ctrl->job_tail).store(2, std::memory_order_release);
    q.ring(RBLN_FW_DB_RING);
    EXPECT_TRUE(wait_until([&] { return ctrl->job_head == 2; }, 2s));
    emu.child->signal(SIGTERM);
    EXPECT_EQ(emu.child->wait(5s), 0) << slurp(emu.log);
}

TEST(EndToEnd, ExitsCleanlyAndRemovesSocketsWhenQemuDisconnects) {
    Emu emu;
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    {
        FakeQemu q(emu.socket, 4);
        EXPECT_EQ(q.ctrl().magic, RBLN_FW_MAGIC);
        EXPECT_EQ(q.ctrl().family, RBLN_FW_FAMILY_REBEL100);
        EXPECT_EQ(q.shm_size, 2ULL << 30);
    }
    EXPECT_EQ(emu.child->wait(5s), 0) << slurp(emu.log);
    EXPECT_FALSE(fs::exists(emu.socket));
    EXPECT_FALSE(fs::exists(emu.control));
    EXPECT_EQ(emu.dir.entries(), std::vector<std::string>{"emu.log"});
    EXPECT_NE(slurp(emu.log).find("QEMU disconnected"), std::string::npos);
}

TEST(EndToEnd, SigtermBeforeAnyClientExitsCleanly) {
    Emu emu;
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    emu.child->signal(SIGTERM);
    EXPECT_EQ(emu.child->wait(5s), 0);
    EXPECT_EQ(emu.dir.entries(), std::vector<std::string>{"emu.log"});
}

TEST(EndToEnd, SecondIvshmemClientIsRefusedAndTheFirstKeepsWorking) {
    Emu emu;
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    FakeQemu first(emu.socket, 4);
    const UniqueFd second = connect_unix(emu.socket);
    ASSERT_TRUE(second.valid());
    pollfd p{second.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    std::array<char, 8> buf{};
    EXPECT_EQ(::read(second.get(), buf.data(), buf.size()), 0); // closed, nothing sent
    EXPECT_TRUE(
        wait_until([&] { return slurp(emu.log).find("refusing") != std::string::npos; }, 2s));
    EXPECT_EQ(ctl(emu.control, "status").status, 0); // still alive
    first.disconnect();
    EXPECT_EQ(emu.child->wait(5s), 0);
}

TEST(EndToEnd, ControlSocketAnswersBadAndOverlongLinesAndKeepsTheClient) {
    Emu emu;
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    const UniqueFd a = connect_unix(emu.control);
    const UniqueFd b = connect_unix(emu.control);
    ASSERT_TRUE(a.valid() && b.valid());
    send_all(a.get(), "bogus\n");
    EXPECT_EQ(read_line(a.get()).rfind("error unknown command", 0), 0U);
    send_all(a.get(), std::string(5000, 'x') + "\n");
    EXPECT_EQ(read_line(a.get()), "error line longer than 4096 bytes");
    // An overlong line arriving in pieces gets one error, then service resumes.
    send_all(b.get(), std::string(3000, 'y'));
    send_all(b.get(), std::string(3000, 'y'));
    EXPECT_EQ(read_line(b.get()), "error line longer than 4096 bytes");
    send_all(b.get(), std::string(3000, 'y') + "\nset temp_mc=61000\n");
    EXPECT_EQ(read_line(b.get()), "ok");
    // Two commands in one write, and a line of exactly the limit.
    send_all(a.get(), "status\nhelp\n");
    EXPECT_NE(read_line(a.get()).find(" temp_mc=61000 "), std::string::npos);
    EXPECT_EQ(read_line(a.get()).rfind("ok commands=", 0), 0U);
    std::string line = "set temp_mc=1";
    line.resize(kMaxLine, ' ');
    send_all(a.get(), line + "\n");
    EXPECT_EQ(read_line(a.get()), "ok");
}

TEST(EndToEnd, CtlExitStatusIsZeroOnOkOneOnErrorTwoWithoutServer) {
    Emu emu;
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    const auto ok = ctl(emu.control, "set temp_mc=50000");
    EXPECT_EQ(ok.status, 0);
    EXPECT_EQ(ok.out, "ok\n");
    const auto err = ctl(emu.control, "set temp_mc=warm");
    EXPECT_EQ(err.status, 1);
    EXPECT_EQ(err.out.rfind("error ", 0), 0U);
    EXPECT_EQ(ctl(emu.dir.file("nothing.ctl"), "status").status, 2);
}

TEST(EndToEnd, FaultNoResponseOptionMeansNoHandshake) {
    Emu emu({"--fault", "no-response"});
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    FakeQemu q(emu.socket, 4);
    q.ctrl().ring_entries = 16;
    q.ctrl().admin_sq_addr = 0x100000;
    q.ctrl().admin_cq_addr = 0x101000;
    q.ctrl().event_ring_addr = 0x102000;
    q.ctrl().host_iface_major = 1;
    q.ctrl().host_gen = 1;
    q.ctrl().host_ctrl = RBLN_FW_HOST_READY;
    q.ring(RBLN_FW_DB_CTRL);
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(q.ctrl().fw_state, RBLN_FW_STATE_RESET);
    EXPECT_NE(ctl(emu.control, "status").out.find("no_response=1"), std::string::npos);
    EXPECT_EQ(ctl(emu.control, "fault clear").status, 0);
    q.ring(RBLN_FW_DB_CTRL);
    EXPECT_TRUE(wait_until([&] { return q.ctrl().fw_state == RBLN_FW_STATE_READY; }, 2s));
}

TEST(EndToEnd, BadOptionExitsTwoNamingTheOption) {
    TempDir dir;
    Child child({"--socket", dir.file("s"), "--guest-ram", dir.file("r"), "--vectors", "1"},
                dir.file("log"));
    EXPECT_EQ(child.wait(5s), 2);
    EXPECT_NE(slurp(dir.file("log")).find("--vectors"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir.file("s")));
}

TEST(EndToEnd, MissingGuestRamSizeIsARuntimeErrorLeavingNothingBehind) {
    TempDir dir;
    Child child({"--socket", dir.file("s"), "--guest-ram", dir.file("r")}, dir.file("log"));
    EXPECT_EQ(child.wait(5s), 1);
    EXPECT_NE(slurp(dir.file("log")).find("--guest-ram-size"), std::string::npos);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"log"});
}

TEST(EndToEnd, LiveSocketOfAnotherEmulatorIsNotStolen) {
    Emu emu;
    ASSERT_TRUE(emu.ready) << slurp(emu.log);
    const std::string log2 = emu.dir.file("emu2.log");
    Child second({"--socket", emu.socket, "--guest-ram", emu.ram}, log2);
    EXPECT_EQ(second.wait(5s), 1);
    EXPECT_NE(slurp(log2).find("in use"), std::string::npos) << slurp(log2);
    EXPECT_TRUE(fs::exists(emu.socket));
    EXPECT_EQ(ctl(emu.control, "status").status, 0);
}

// Leaves a socket file at `path` that nobody listens on (a crashed run).
void leave_dead_socket(const std::string& path) {
    const UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)), 0);
}

TEST(EndToEnd, StaleSocketFileOfADeadRunIsReplaced) {
    TempDir dir;
    const std::string sock = dir.file("card0.sock");
    leave_dead_socket(sock);
    // Also the staging names of a run killed between bind() and rename().
    leave_dead_socket(sock + ".new");
    leave_dead_socket(sock + ".ctl.new");
    ASSERT_TRUE(fs::exists(sock));
    Child child({"--socket", sock, "--guest-ram", dir.file("ram"), "--guest-ram-size", "4M"},
                dir.file("log"));
    ASSERT_TRUE(wait_until([&] { return fs::exists(sock + ".ctl"); }, 5s))
        << slurp(dir.file("log"));
    EXPECT_EQ(ctl(sock + ".ctl", "status").status, 0);
    EXPECT_FALSE(fs::exists(sock + ".new"));
    EXPECT_FALSE(fs::exists(sock + ".ctl.new"));
    child.signal(SIGINT);
    EXPECT_EQ(child.wait(5s), 0);
    EXPECT_FALSE(fs::exists(sock));
}

// rbln-vm and QEMU's chardev connect as soon as a socket file exists, so
// the file must not appear before the socket listens.  The emulator runs
// with a listen() that first sleeps 100 ms (LD_PRELOAD shim); the test
// watches for the files without sleeping and connects the moment each
// appears.
TEST(EndToEnd, SocketsAcceptConnectionsFromTheMomentTheirFilesAppear) {
    TempDir dir;
    const std::string sock = dir.file("card0.sock");
    const std::string ctl_path = sock + ".ctl";
    ASSERT_EQ(::setenv("LD_PRELOAD", RBLN_SLOW_LISTEN, 1), 0);
    Child child({"--socket", sock, "--guest-ram", dir.file("ram"), "--guest-ram-size", "4M"},
                dir.file("log"));
    ::unsetenv("LD_PRELOAD");
    const auto spin_until_exists = [](const std::string& path) {
        const auto end = std::chrono::steady_clock::now() + 5s;
        while (!fs::exists(path) && std::chrono::steady_clock::now() < end) {
        }
        return fs::exists(path);
    };
    ASSERT_TRUE(spin_until_exists(sock)) << slurp(dir.file("log"));
    {
        FakeQemu q(sock, 4); // connects at once, gets the handshake
        EXPECT_EQ(q.ctrl().magic, RBLN_FW_MAGIC);
        ASSERT_TRUE(spin_until_exists(ctl_path)) << slurp(dir.file("log"));
        const UniqueFd c = connect_unix(ctl_path);
        ASSERT_TRUE(c.valid()) << std::strerror(errno);
        EXPECT_EQ(ctl(ctl_path, "status").status, 0);
    }
    EXPECT_EQ(child.wait(5s), 0) << slurp(dir.file("log"));
}
} // namespace e2e_test
