// SPDX-License-Identifier: GPL-2.0
// An in-process fake host for the firmware model: a control block, guest
// RAM, and the host half of the handshake, of the three admin rings and of
// the command rings (the way the kernel driver uses them).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "card.h"
#include "guest_memory.h"
#include "log.h"
#include "options.h"
#include "rbln_fw_cmd.h"
#include "unique_fd.h"

namespace rbln::emu::test {

inline Options test_options(Family family = Family::rebel100) {
    Options opt;
    opt.family = family;
    opt.serial = "RBLNTEST-0001";
    opt.socket_path = "unused";
    opt.guest_ram_path = "unused";
    return opt;
}

// Untouched anonymous memory: only the pages a test uses cost anything.
inline Mapping make_sparse(std::uint64_t size) {
    void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addr == MAP_FAILED)
        throw std::runtime_error("cannot map test memory");
    return {addr, size};
}

// The whole memory BAR (control block and HBM) like the emulator's.
inline Mapping make_test_bar(const Options& opt) {
    return make_sparse(make_identity(opt, 0).layout.bar_size);
}

// Guest RAM addresses of command ring `i` (entries <= 512).
struct RingMemory {
    std::uint64_t jobs = 0;
    std::uint64_t cpls = 0;
    std::uint64_t ctrl = 0;
};

class FakeHost {
public:
    static constexpr std::uint64_t kRamSize = 8ULL << 20;
    static constexpr std::uint64_t kSq = 0x10000;
    static constexpr std::uint64_t kCq = 0x20000;
    static constexpr std::uint64_t kEv = 0x30000;
    static constexpr std::uint64_t kData = 0x40000;      // request data buffers
    static constexpr std::uint64_t kRingBase = 0x500000; // command rings, 128 KiB each

    explicit FakeHost(Family family = Family::rebel100) : FakeHost(test_options(family)) {}

    explicit FakeHost(const Options& opt, std::uint64_t ram_size = kRamSize)
        : bar_(make_test_bar(opt)), ram_size_(ram_size), ram_(make_sparse(ram_size)),
          mem_(std::span<std::byte>(ram_.data(), ram_size), ram_size),
          log_(LogLevel::debug,
               [this](LogLevel, std::string_view line) {
                   const std::lock_guard<std::mutex> lk(mu_);
                   log_lines.emplace_back(line);
               }),
          card(
              make_identity(opt, 0), std::span<std::byte>(bar_.data(), bar_.size()), mem_,
              [this](unsigned v) {
                  const std::lock_guard<std::mutex> lk(mu_);
                  irqs.push_back(v);
              },
              log_, [this] { return now(); }) {}

    rbln_fw_ctrl& ctrl() { return *reinterpret_cast<rbln_fw_ctrl*>(bar_.data()); }
    std::byte* ram(std::uint64_t gpa) { return ram_.data() + gpa; }
    // The memory BAR at `offset` (HBM of chiplet i at ctrl().hbm[i]).
    std::byte* bar(std::uint64_t offset) { return bar_.data() + offset; }
    GuestMemory& memory() { return mem_; }
    [[nodiscard]] std::uint64_t ram_size() const { return ram_size_; }
    void set_log_level(LogLevel level) { log_.set_level(level); }

    // Step 2 of the handshake, without ringing.
    void configure(std::uint32_t entries, std::uint64_t sq = kSq, std::uint64_t cq = kCq,
                   std::uint64_t ev = kEv, std::uint16_t major = RBLN_FW_IFACE_MAJOR) {
        entries_ = entries;
        ctrl().ring_entries = entries;
        ctrl().admin_sq_addr = sq;
        ctrl().admin_cq_addr = cq;
        ctrl().event_ring_addr = ev;
        ctrl().host_iface_major = major;
        ctrl().host_iface_minor = RBLN_FW_IFACE_MINOR;
        ctrl().admin_sq_tail = 0;
        ctrl().admin_cq_head = 0;
        ctrl().event_head = 0;
        sq_tail_ = 0;
        cq_head_ = 0;
        ev_head_ = 0;
        cq_phase_ = RBLN_FW_REC_PHASE;
        ev_phase_ = RBLN_FW_REC_PHASE;
        for (std::uint64_t addr : {sq, cq, ev}) {
            if (entries <= RBLN_FW_RING_MAX_ENTRIES && addr <= ram_size_ &&
                64ULL * entries <= ram_size_ - addr)
                std::memset(ram(addr), 0, 64ULL * entries);
        }
    }

    void host_ready() {
        ctrl().host_gen++;
        ctrl().host_ctrl = RBLN_FW_HOST_READY;
        card.doorbell(RBLN_FW_DB_CTRL);
    }

    void boot(std::uint32_t entries = 8) {
        configure(entries);
        host_ready();
    }

    void host_reset() {
        ctrl().host_ctrl = 0;
        card.doorbell(RBLN_FW_DB_CTRL);
    }

    // Fills the next request slot (does not ring).  Returns its seq.
    std::uint32_t queue(rbln_fw_admin_req req) {
        req.seq = next_seq_++;
        std::memcpy(ram(ctrl().admin_sq_addr + 64ULL * sq_tail_), &req, sizeof(req));
        sq_tail_ = (sq_tail_ + 1) % entries_;
        ctrl().admin_sq_tail = sq_tail_;
        return req.seq;
    }

    std::uint32_t submit(const rbln_fw_admin_req& req) {
        const std::uint32_t seq = queue(req);
        card.doorbell(RBLN_FW_DB_ADMIN);
        return seq;
    }

    // The next new completion, consumed (admin_cq_head advanced).
    std::optional<rbln_fw_admin_cpl> pop_cpl() {
        rbln_fw_admin_cpl cpl{};
        std::memcpy(&cpl, ram(ctrl().admin_cq_addr + 64ULL * cq_head_), sizeof(cpl));
        if ((cpl.flags & RBLN_FW_REC_PHASE) != cq_phase_)
            return std::nullopt;
        cq_head_ = (cq_head_ + 1) % entries_;
        if (cq_head_ == 0)
            cq_phase_ ^= RBLN_FW_REC_PHASE;
        ctrl().admin_cq_head = cq_head_;
        return cpl;
    }

    // One admin request, answered (the admin ring is synchronous): status.
    std::uint16_t admin(const rbln_fw_admin_req& req) {
        const std::uint32_t seq = submit(req);
        const auto cpl = pop_cpl();
        if (!cpl || cpl->seq != seq)
            throw std::runtime_error("admin request got no completion");
        return cpl->status;
    }

    std::optional<rbln_fw_event> pop_event() {
        const std::lock_guard<std::mutex> lk(ev_mu_);
        rbln_fw_event ev{};
        std::byte* slot = ram(ctrl().event_ring_addr + 64ULL * ev_head_);
        const std::uint16_t flags =
            std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(slot + 6))
                .load(std::memory_order_acquire);
        if ((flags & RBLN_FW_REC_PHASE) != ev_phase_)
            return std::nullopt;
        std::memcpy(&ev, slot, sizeof(ev));
        ev_head_ = (ev_head_ + 1) % entries_;
        if (ev_head_ == 0)
            ev_phase_ ^= RBLN_FW_REC_PHASE;
        std::atomic_ref<std::uint32_t>(ctrl().event_head).store(ev_head_);
        return ev;
    }

    std::vector<rbln_fw_event> drain_events() {
        std::vector<rbln_fw_event> out;
        while (auto ev = pop_event())
            out.push_back(*ev);
        return out;
    }

    bool logged(std::string_view text) {
        const std::lock_guard<std::mutex> lk(mu_);
        for (const std::string& l : log_lines) {
            if (l.find(text) != std::string::npos)
                return true;
        }
        return false;
    }

    // Forgets the log lines and interrupts seen so far (long runs: fuzzing).
    void forget_history() {
        const std::lock_guard<std::mutex> lk(mu_);
        log_lines.clear();
        irqs.clear();
    }

    // Interrupts raised on `vector` so far (ring threads raise them too).
    std::size_t irq_count(unsigned vector) {
        const std::lock_guard<std::mutex> lk(mu_);
        std::size_t n = 0;
        for (unsigned v : irqs)
            n += v == vector ? 1 : 0;
        return n;
    }

    static rbln_fw_admin_req request(std::uint16_t opcode, std::uint64_t data_addr = 0,
                                     std::uint32_t data_len = 0) {
        rbln_fw_admin_req req{};
        req.opcode = opcode;
        req.data_addr = data_addr;
        req.data_len = data_len;
        return req;
    }

    // --- command rings ------------------------------------------------------------

    static RingMemory ring_memory(unsigned ring) {
        const std::uint64_t base = kRingBase + 0x20000ULL * ring;
        return {base, base + 0x8000, base + 0x10000};
    }

    static rbln_fw_admin_req ring_setup_request(unsigned ring, std::uint32_t entries,
                                                const RingMemory& m) {
        rbln_fw_admin_req req = request(RBLN_FW_OP_RING_SETUP);
        req.args[0] = ring;
        req.args[1] = entries;
        req.args[2] = static_cast<std::uint32_t>(m.jobs);
        req.args[3] = static_cast<std::uint32_t>(m.jobs >> 32);
        req.args[4] = static_cast<std::uint32_t>(m.cpls);
        req.args[5] = static_cast<std::uint32_t>(m.cpls >> 32);
        req.args[6] = static_cast<std::uint32_t>(m.ctrl);
        req.args[7] = static_cast<std::uint32_t>(m.ctrl >> 32);
        return req;
    }

    // The host side of a ring, zeroed, then RING_SETUP; its status.
    std::uint16_t setup_ring(unsigned ring, std::uint32_t entries = 16) {
        return setup_ring_at(ring, entries, ring_memory(ring));
    }

    std::uint16_t setup_ring_at(unsigned ring, std::uint32_t entries, const RingMemory& m) {
        HostRing& r = rings_.at(ring);
        r = HostRing{};
        r.entries = entries;
        r.mem = m;
        std::memset(ram(m.jobs), 0, 64ULL * entries);
        std::memset(ram(m.cpls), 0, 64ULL * entries);
        std::memset(ram(m.ctrl), 0, sizeof(rbln_fw_ring_ctrl));
        return admin(ring_setup_request(ring, entries, m));
    }

    std::uint16_t stop_ring(unsigned ring) {
        rbln_fw_admin_req req = request(RBLN_FW_OP_RING_STOP);
        req.args[0] = ring;
        return admin(req);
    }

    rbln_fw_ring_ctrl& ring_ctrl(unsigned ring) {
        return *reinterpret_cast<rbln_fw_ring_ctrl*>(ram(rings_.at(ring).mem.ctrl));
    }

    template <typename T> T load(T& field) {
        return std::atomic_ref<T>(field).load(std::memory_order_acquire);
    }

    // Writes a job at the tail and publishes the tail (no doorbell).
    // seqno 0: the ring's next number.  Returns the seqno.
    std::uint64_t push_job(unsigned ring, rbln_fw_job job) {
        HostRing& r = rings_.at(ring);
        if (job.seqno == 0)
            job.seqno = ++r.seqno;
        std::memcpy(ram(r.mem.jobs + 64ULL * r.tail), &job, sizeof(job));
        r.tail = (r.tail + 1) % r.entries;
        std::atomic_ref<std::uint32_t>(ring_ctrl(ring).job_tail)
            .store(r.tail, std::memory_order_release);
        return job.seqno;
    }

    void ring_doorbell() { card.doorbell(RBLN_FW_DB_RING); }

    static rbln_fw_job job(std::uint32_t asid, std::uint64_t cmd_addr, std::uint32_t cmd_size,
                           std::uint32_t flags = RBLN_FW_JOB_IRQ) {
        rbln_fw_job j{};
        j.asid = asid;
        j.flags = flags;
        j.cmd_addr = cmd_addr;
        j.cmd_size = cmd_size;
        return j;
    }

    std::uint64_t submit_job(unsigned ring, const rbln_fw_job& j) {
        const std::uint64_t seqno = push_job(ring, j);
        ring_doorbell();
        return seqno;
    }

    // The next new completion of the ring, consumed (cpl_head advanced).
    std::optional<rbln_fw_job_cpl> pop_job_cpl(unsigned ring) {
        HostRing& r = rings_.at(ring);
        std::byte* slot = ram(r.mem.cpls + 64ULL * r.cpl_head);
        const std::uint16_t flags =
            std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(slot + 10))
                .load(std::memory_order_acquire);
        if ((flags & RBLN_FW_REC_PHASE) != r.phase)
            return std::nullopt;
        rbln_fw_job_cpl cpl{};
        std::memcpy(&cpl, slot, sizeof(cpl));
        r.cpl_head = (r.cpl_head + 1) % r.entries;
        if (r.cpl_head == 0)
            r.phase ^= RBLN_FW_REC_PHASE;
        std::atomic_ref<std::uint32_t>(ring_ctrl(ring).cpl_head)
            .store(r.cpl_head, std::memory_order_release);
        return cpl;
    }

    std::optional<rbln_fw_job_cpl>
    wait_job_cpl(unsigned ring, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (true) {
            if (auto c = pop_job_cpl(ring))
                return c;
            if (std::chrono::steady_clock::now() > deadline)
                return std::nullopt;
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    // Submits and waits for the job's completion.
    std::optional<rbln_fw_job_cpl> run_job(unsigned ring, const rbln_fw_job& j) {
        (void)submit_job(ring, j);
        return wait_job_cpl(ring);
    }

private:
    struct HostRing {
        std::uint32_t entries = 0;
        RingMemory mem;
        std::uint32_t tail = 0;
        std::uint32_t cpl_head = 0;
        std::uint16_t phase = RBLN_FW_REC_PHASE;
        std::uint64_t seqno = 0;
    };

    Mapping bar_; // page aligned
    std::uint64_t ram_size_;
    Mapping ram_;
    SpanGuestMemory mem_;
    std::uint32_t entries_ = 0;
    std::uint32_t sq_tail_ = 0;
    std::uint32_t cq_head_ = 0;
    std::uint32_t ev_head_ = 0;
    std::uint16_t cq_phase_ = RBLN_FW_REC_PHASE;
    std::uint16_t ev_phase_ = RBLN_FW_REC_PHASE;
    std::uint32_t next_seq_ = 100;
    std::array<HostRing, RBLN_FW_MAX_CHIPLETS> rings_{};
    std::mutex ev_mu_;
    std::mutex mu_; // log_lines and irqs (ring threads add to them)

public:
    std::vector<std::string> log_lines;
    std::vector<unsigned> irqs;
    std::atomic<std::uint64_t> clock_ns{1'000'000};
    // The card's clock: clock_ns, or the steady clock (benchmarks) once set.
    std::atomic<bool> real_clock{false};
    std::uint64_t now() const {
        if (!real_clock.load())
            return clock_ns.load();
        return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now().time_since_epoch())
                                              .count());
    }

private:
    Logger log_;

public:
    Card card;
};

} // namespace rbln::emu::test
