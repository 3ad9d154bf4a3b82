// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: rbln-emu's control protocol (control.h), the port a
// test harness, rbln-smi's tests or anyone root in the guest writes lines
// to (status, set, fault, help).
//
// The card runs in-process (tests/emu's FakeHost), handshaken, with ASID 1
// bound and every chiplet's command ring set up.  An input is text: each
// line (cut at kMaxControlLine) is one command.  `memcpy-bench` lines are
// left out: their cost (up to 2 GiB and a second per line) is bounded by
// their own range check, which tests/emu/control_test.cpp pins.
//
// What must hold:
//   - every reply is one line, "ok" or "ok <key=value...>" or
//     "error <message>", and never "error internal:" (an exception the
//     parser did not turn into a message of its own);
//   - every fault the port injects is recoverable the way the driver
//     recovers: after the input, "fault clear", and if the firmware left
//     READY a host reset and handshake (with the rings and the ASID set up
//     again) bring it back; then no fault is left armed (status), and on
//     every chiplet a job that copies 256 bytes host -> HBM completes OK
//     with its seqno and the bytes land (the ring interrupt is not checked:
//     moderation lets the card skip it for a record already read);
//   - and, under ASan/UBSan, no memory error or undefined behaviour.
// RBLN_FUZZ_SEEDS=DIR writes a seed corpus and exits.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "cmd_builder.h"
#include "control.h"
#include "fake_host.h"
#include "fuzz_seeds.h"
#include "page_table_builder.h"

namespace {

using namespace rbln::emu;
using namespace rbln::emu::test;
using namespace std::chrono_literals;

constexpr std::uint64_t kTables = 0x100000;
constexpr std::uint64_t kCmd = 0x200000;  // chiplet c's job at + c pages
constexpr std::uint64_t kHost = 0x300000; // the bytes the jobs copy
constexpr std::uint64_t kCopy = 256;
constexpr std::uint64_t kVaCmd = 0x30'0000'0000ULL;
constexpr std::uint64_t kVaHost = 0x10'0000'0000ULL;
constexpr std::uint64_t kVaHbm = 0x20'0000'0000ULL; // chiplet c at + c GiB
constexpr std::uint32_t kAsid = 1;
constexpr std::uint32_t kEntries = 16;

[[noreturn]] void die(const char* what, std::string_view detail = {}) {
    std::fprintf(stderr, "emu_control_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
                 detail.data());
    std::abort();
}

bool well_formed(std::string_view reply) {
    if (reply.find_first_of("\r\n", 0) != std::string_view::npos ||
        reply.find('\0') != std::string_view::npos)
        return false;
    if (reply == "ok" || reply.starts_with("ok "))
        return true;
    return reply.starts_with("error ") && reply.size() > 6;
}

class Harness {
public:
    Harness() : pt_(h_.memory(), kTables, 0x10000) {
        h_.set_log_level(LogLevel::error);
        h_.real_clock = true;
        pt_.map_4k(kVaHost, kHost, RBLN_FW_PTE_READ);
        for (unsigned c = 0; c < h_.ctrl().chiplet_count; c++) {
            const std::uint64_t cmd = kCmd + c * RBLN_FW_PAGE_SIZE;
            pt_.map_4k(kVaCmd + c * RBLN_FW_PAGE_SIZE, cmd, RBLN_FW_PTE_READ);
            pt_.map_4k(kVaHbm + (std::uint64_t{c} << 30), h_.ctrl().hbm[c].bar_offset,
                       kPteRw | RBLN_FW_PTE_LOCAL);
            const CmdBuf job = CmdBuf().copy(kVaHost, kVaHbm + (std::uint64_t{c} << 30), kCopy);
            if (!h_.memory().write(cmd, job.bytes().data(), job.size()))
                die("command buffer outside guest RAM");
            cmd_size_ = static_cast<std::uint32_t>(job.size());
        }
        bring_up();
    }
    // What the inputs did (fuzz.sh's log).
    ~Harness() {
        std::fprintf(stderr,
                     "emu_control_fuzz: %llu lines, %llu ok; %llu inputs, %llu recovered by a "
                     "host reset\n",
                     static_cast<unsigned long long>(lines_), static_cast<unsigned long long>(ok_),
                     static_cast<unsigned long long>(inputs_),
                     static_cast<unsigned long long>(resets_));
    }

    void run(const std::uint8_t* data, std::size_t size) {
        const std::string_view text(reinterpret_cast<const char*>(data), size);
        std::size_t pos = 0;
        while (pos < text.size()) {
            std::size_t end = text.find('\n', pos);
            if (end == std::string_view::npos)
                end = text.size();
            const std::string_view line = text.substr(pos, std::min(end - pos, kMaxControlLine));
            pos = end + 1;
            const std::size_t first = line.find_first_not_of(" \t");
            if (first != std::string_view::npos && line.substr(first).starts_with("memcpy-bench"))
                continue;
            const std::string reply = ctl_.execute(line);
            if (!well_formed(reply))
                die("malformed reply", reply);
            if (reply.starts_with("error internal"))
                die("an exception the parser did not explain", reply);
            lines_++;
            ok_ += reply.starts_with("ok") ? 1 : 0;
        }
        recover();
        inputs_++;
        h_.forget_history();
    }

private:
    void bring_up() {
        h_.host_reset();
        h_.boot(64);
        if (h_.load(h_.ctrl().fw_state) != RBLN_FW_STATE_READY)
            die("the handshake did not reach READY");
        rbln_fw_admin_req bind = FakeHost::request(RBLN_FW_OP_VM_BIND);
        bind.args[0] = kAsid;
        bind.args[1] = static_cast<std::uint32_t>(pt_.root());
        bind.args[2] = static_cast<std::uint32_t>(pt_.root() >> 32);
        if (h_.admin(bind) != RBLN_FW_ST_OK)
            die("VM_BIND failed");
        for (unsigned c = 0; c < h_.ctrl().chiplet_count; c++) {
            if (h_.setup_ring(c, kEntries) != RBLN_FW_ST_OK)
                die("RING_SETUP failed");
        }
        (void)h_.drain_events();
    }

    // What a driver does after a fault: the card answers again, and every
    // chiplet runs a job.
    void recover() {
        const std::string clear = ctl_.execute("fault clear");
        if (clear != "ok")
            die("fault clear failed", clear);
        const bool ready = h_.load(h_.ctrl().fw_state) == RBLN_FW_STATE_READY;
        if (!ready || h_.admin(FakeHost::request(RBLN_FW_OP_HEARTBEAT)) != RBLN_FW_ST_OK) {
            bring_up();
            resets_++;
        }
        const std::string st = ctl_.execute("status");
        for (const char* key : {" hung=0 ", " dma_error_armed=0 ", " corrupt_cpl_armed=0 ",
                                " lost_irq_armed=0 ", " no_response=0 "}) {
            if (st.find(key) == std::string::npos)
                die("a fault outlived the recovery", st);
        }
        std::array<std::uint8_t, kCopy> bytes{};
        for (unsigned c = 0; c < h_.ctrl().chiplet_count; c++) {
            for (std::size_t i = 0; i < bytes.size(); i++)
                bytes.at(i) = static_cast<std::uint8_t>(stamp_ + i * 7 + c);
            stamp_++;
            (void)h_.memory().write(kHost, bytes.data(), bytes.size());
            const std::uint64_t seqno =
                h_.submit_job(c, FakeHost::job(kAsid, kVaCmd + c * RBLN_FW_PAGE_SIZE, cmd_size_));
            const std::optional<rbln_fw_job_cpl> cpl = h_.wait_job_cpl(c, 5s);
            if (!cpl)
                die("a chiplet does not complete a job after recovery", std::to_string(c));
            if (cpl->seqno != seqno || cpl->status != RBLN_FW_JOB_OK)
                die("a job after recovery failed or was misreported", std::to_string(c));
            if (std::memcmp(h_.bar(h_.ctrl().hbm[c].bar_offset), bytes.data(), bytes.size()) != 0)
                die("the copy after recovery did not land", std::to_string(c));
        }
        (void)h_.drain_events();
    }

    FakeHost h_;
    PageTableBuilder pt_;
    ControlInterface ctl_{h_.card};
    std::uint32_t cmd_size_ = 0;
    std::uint8_t stamp_ = 0;
    std::uint64_t lines_ = 0;
    std::uint64_t ok_ = 0;
    std::uint64_t inputs_ = 0;
    std::uint64_t resets_ = 0;
};

void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    auto put = [&](const char* name, std::string_view text) {
        std::ofstream f(dir / name, std::ios::binary);
        f.write(text.data(), static_cast<std::streamsize>(text.size()));
    };
    put("status_help", "status\nhelp\n");
    put("set", "set temp_mc=91000\nset power_uw=120000000\n"
               "set chiplet=2 temp_mc=80000 clock_mhz=1200 mem_clock_mhz=3200 busy_ns=5\n");
    put("ring_faults", "fault hang chiplet=1\nfault dma-error chiplet=0\n"
                       "fault corrupt-cpl chiplet=3\nfault lost-irq chiplet=2\nstatus\n");
    put("fw_fault", "fault fw-fault code=thermal reason=too hot to go on\nstatus\n");
    put("no_response", "fault no-response\nstatus\nfault clear\n");
    put("bad", "set chiplet=9 temp_mc=1\nset temp_mc=x\nfault\nfault fw-fault code=0\n"
               "set chiplet=1\nbogus\n\t \r\nset temp_mc=1 temp_mc=2\n");
    // Inputs this fuzzer failed on once, kept as seeds so every run checks
    // them first.  A key given twice came back raw, NUL and all, in the
    // one-line reply.
    put("found_raw_key_in_reply", std::string_view("set \0=1 \0=1\n", 12));
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    rbln::fuzz::write_seeds_if_asked(write_seeds);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return rbln::fuzz::run_input<Harness>(data, size);
}
