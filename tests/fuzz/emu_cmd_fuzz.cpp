// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: user command buffers on rbln-emu's command processor.
//
// The card runs in-process (tests/emu's FakeHost) with command ring 0 set up
// and one user address space (ASID 1) mapping 2 MiB of host memory, 2 MiB of
// every chiplet's HBM and the read-only command buffer.  Each input is one
// job's command buffer (cut to 64 KiB and to a multiple of 8 bytes).  What
// must hold for every input (rbln_fw_cmd.md):
//   - the job completes with its own seqno and a status of rbln_fw_cmd.h;
//   - a job still running after kStuck (a WAIT nobody satisfies, a long
//     kernel) does not hold up a TLB_INVALIDATE, and is ended by RING_STOP
//     (the ring can be set up again) or, every other time, by VM_ABORT of
//     its ASID (CANCELLED, or its own end if it got there first; binding
//     the ASID again runs jobs again);
//   - the firmware stays READY: nothing a user job holds crashes it;
//   - and, under ASan/UBSan, no memory error or undefined behaviour.
// RBLN_FUZZ_SEEDS=DIR writes a seed corpus of well-formed jobs and exits.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cmd_builder.h"
#include "fake_host.h"
#include "fuzz_seeds.h"
#include "page_table_builder.h"

namespace {

using namespace rbln::emu;
using namespace rbln::emu::test;
using namespace std::chrono_literals;

constexpr std::uint64_t kTables = 0x100000; // page-table pool (1 MiB)
constexpr std::uint64_t kCmd = 0x200000;    // the command buffer (64 KiB)
constexpr std::uint64_t kCmdSize = 0x10000;
constexpr std::uint64_t kHost = 0x800000; // host data (2 MiB)
constexpr std::uint64_t kHostSize = RBLN_FW_HUGE_SIZE;
constexpr std::uint32_t kAsid = 1;
constexpr std::uint64_t kVaHost = 0x10'0000'0000ULL;
constexpr std::uint64_t kVaHbm = 0x20'0000'0000ULL; // chiplet c at + c GiB
constexpr std::uint64_t kVaCmd = 0x30'0000'0000ULL;
constexpr std::uint32_t kEntries = 16;
constexpr auto kStuck = 20ms;

[[noreturn]] void die(const char* what, std::uint64_t value = 0) {
    std::fprintf(stderr, "emu_cmd_fuzz: %s (%llu)\n", what, static_cast<unsigned long long>(value));
    std::abort();
}

class Harness {
public:
    Harness() : h_(test_options(), kHost + kHostSize), pt_(h_.memory(), kTables, 0x100000) {
        h_.set_log_level(LogLevel::error);
        h_.real_clock = true; // WAIT timeouts and TIMESTAMPs see time pass
        h_.boot(64);
        (void)h_.drain_events();
        pt_.map_2m(kVaHost, kHost, kPteRw);
        for (unsigned c = 0; c < h_.ctrl().chiplet_count; c++)
            pt_.map_2m(kVaHbm + (std::uint64_t{c} << 30), h_.ctrl().hbm[c].bar_offset,
                       kPteRw | RBLN_FW_PTE_LOCAL);
        for (std::uint64_t off = 0; off < kCmdSize; off += RBLN_FW_PAGE_SIZE)
            pt_.map_4k(kVaCmd + off, kCmd + off, RBLN_FW_PTE_READ);
        if (bind() != RBLN_FW_ST_OK)
            die("VM_BIND failed");
        if (h_.setup_ring(0, kEntries) != RBLN_FW_ST_OK)
            die("RING_SETUP failed");
    }

    // The input, cut to 64 KiB and to a multiple of 8 bytes, as one job.
    void run(const std::uint8_t* data, std::size_t input_size) {
        const std::size_t size = std::min<std::size_t>(input_size, kCmdSize) & ~std::size_t{7};
        if (size == 0)
            return;
        if (!h_.memory().write(kCmd, data, size))
            die("command buffer outside guest RAM", size);
        // Every other size: FAULT_ABORTS, as the driver sets it.
        const bool fault_aborts = ((input_size >> 3) & 1) != 0;
        const std::uint32_t flags =
            RBLN_FW_JOB_IRQ | (fault_aborts ? RBLN_FW_JOB_FAULT_ABORTS : 0U);
        const std::uint64_t seqno =
            h_.submit_job(0, FakeHost::job(kAsid, kVaCmd, static_cast<std::uint32_t>(size), flags));
        std::optional<rbln_fw_job_cpl> cpl = h_.wait_job_cpl(0, kStuck);
        if (!cpl) {
            // Blocked or long.  An MMU change (another client freeing a
            // buffer) must not wait for it (libFuzzer's -timeout catches
            // one that does); then the driver's job timeout stops the ring.
            if (const std::uint16_t st = invalidate_all(); st != RBLN_FW_ST_OK)
                die("TLB_INVALIDATE beside a busy ring failed", st);
            if (seqno % 2 == 1) {
                end_by_vm_abort(seqno);
                return;
            }
            if (const std::uint16_t st = h_.stop_ring(0); st != RBLN_FW_ST_OK)
                die("RING_STOP of a busy ring failed", st);
            cpl = h_.wait_job_cpl(0, 10s);
            if (!cpl)
                die("RING_STOP left the job without a completion", seqno);
            if (const std::uint16_t st = h_.setup_ring(0, kEntries); st != RBLN_FW_ST_OK)
                die("RING_SETUP after RING_STOP failed", st);
        }
        if (cpl->seqno != seqno)
            die("completion of another job", cpl->seqno);
        if (cpl->status > RBLN_FW_JOB_ABORTED)
            die("unknown job status, or CANCELLED without a VM_ABORT", cpl->status);
        if (cpl->status == RBLN_FW_JOB_MMU_FAULT && fault_aborts)
            expect_asid_aborted();
        settle();
    }

private:
    // The job's ASID aborted: it ends (CANCELLED, or by itself), the
    // ring stays up, and bound again the ASID runs jobs.
    void end_by_vm_abort(std::uint64_t seqno) {
        rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_VM_ABORT);
        req.args[0] = kAsid;
        if (const std::uint16_t st = h_.admin(req); st != RBLN_FW_ST_OK)
            die("VM_ABORT of a busy ASID failed", st);
        const std::optional<rbln_fw_job_cpl> cpl = h_.wait_job_cpl(0, 10s);
        if (!cpl)
            die("VM_ABORT left the job without a completion", seqno);
        if (cpl->seqno != seqno)
            die("completion of another job", cpl->seqno);
        if (cpl->status > RBLN_FW_JOB_CANCELLED || cpl->status == RBLN_FW_JOB_ABORTED)
            die("job status after VM_ABORT", cpl->status);
        if (const std::uint16_t st = bind(); st != RBLN_FW_ST_OK)
            die("VM_BIND after VM_ABORT failed", st);
        settle();
    }

    // After a FAULT_ABORTS fault a NOP job of the ASID is CANCELLED; bound
    // again, the ASID runs jobs.
    void expect_asid_aborted() {
        const std::uint64_t nop[] = {RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, 8)};
        if (!h_.memory().write(kCmd, nop, sizeof(nop)))
            die("command buffer outside guest RAM", sizeof(nop));
        const std::uint64_t seqno = h_.submit_job(0, FakeHost::job(kAsid, kVaCmd, sizeof(nop)));
        const std::optional<rbln_fw_job_cpl> cpl = h_.wait_job_cpl(0, 10s);
        if (!cpl || cpl->seqno != seqno)
            die("no completion for the job after a FAULT_ABORTS fault", seqno);
        if (cpl->status != RBLN_FW_JOB_CANCELLED)
            die("a job ran after a FAULT_ABORTS fault of its ASID", cpl->status);
        if (const std::uint16_t st = bind(); st != RBLN_FW_ST_OK)
            die("VM_BIND after a FAULT_ABORTS fault failed", st);
    }

    void settle() {
        if (const std::uint32_t state = h_.load(h_.ctrl().fw_state); state != RBLN_FW_STATE_READY)
            die("a user job took the firmware out of READY", state);
        (void)h_.drain_events();
        h_.forget_history();
    }

    std::uint16_t bind() {
        rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_VM_BIND);
        req.args[0] = kAsid;
        req.args[1] = static_cast<std::uint32_t>(pt_.root());
        req.args[2] = static_cast<std::uint32_t>(pt_.root() >> 32);
        return h_.admin(req);
    }

    std::uint16_t invalidate_all() {
        rbln_fw_admin_req req = FakeHost::request(RBLN_FW_OP_TLB_INVALIDATE);
        req.args[0] = kAsid; // va 0, size 0: the whole address space
        return h_.admin(req);
    }

    FakeHost h_;
    PageTableBuilder pt_;
};

std::uint64_t hbm(unsigned chiplet, std::uint64_t off = 0) {
    return kVaHbm + (std::uint64_t{chiplet} << 30) + off;
}

rbln_fw_pkt_launch launch(std::uint32_t kernel, std::uint32_t dtype, std::uint64_t n) {
    rbln_fw_pkt_launch l{};
    l.kernel = kernel;
    l.dtype_in = dtype;
    l.dtype_out = dtype;
    l.ndim = 1;
    l.scale = 0x40000000; // 2.0f
    l.a = kVaHost;
    l.b = kVaHost + 0x10000;
    l.out = hbm(1);
    l.shape[0] = n;
    l.stride_a[0] = 1;
    l.stride_b[0] = 1;
    l.stride_out[0] = 1;
    return l;
}

rbln_fw_pkt_launch matmul(std::uint32_t dtype_in, std::uint32_t dtype_out) {
    rbln_fw_pkt_launch l = launch(RBLN_FW_KERNEL_MATMUL, dtype_in, 0);
    l.dtype_out = dtype_out;
    l.ndim = 2;
    l.shape[0] = 16; // M
    l.shape[1] = 8;  // N
    l.shape[2] = 32; // K
    l.stride_a[0] = 32;
    l.stride_a[1] = 1;
    l.stride_b[0] = 8;
    l.stride_b[1] = 1;
    l.stride_out[0] = 8;
    l.stride_out[1] = 1;
    return l;
}

// Well-formed jobs: one per packet type and a few mixes.
void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    auto put = [&](const char* name, const CmdBuf& cb) {
        std::ofstream f(dir / name, std::ios::binary);
        f.write(reinterpret_cast<const char*>(cb.bytes().data()),
                static_cast<std::streamsize>(cb.size()));
    };
    put("nop", CmdBuf().nop().nop(64));
    put("copy", CmdBuf().copy(kVaHost, hbm(0), 4096).copy(hbm(0, 3), kVaHost + 9, 1000));
    put("copy_chiplets", CmdBuf().copy(hbm(0), hbm(3), 65536));
    put("strided", CmdBuf().strided(kVaHost, hbm(2), 64, 8, 2, 128, 1024, 64, 512));
    put("fill", CmdBuf().fill(hbm(1, 5), 777, 0x1122334455667788ULL, 4));
    put("signal_wait", CmdBuf().signal(kVaHost + 64, 7, RBLN_FW_SIGNAL_IRQ).wait(kVaHost + 64, 7));
    put("wait_timeout", CmdBuf().wait(kVaHost + 128, 1, 1000));
    put("timestamp", CmdBuf().timestamp(kVaHost + 256).nop().timestamp(kVaHost + 264));
    put("add_fp32", CmdBuf().launch(launch(RBLN_FW_KERNEL_ADD, RBLN_FW_DT_FP32, 256)));
    put("relu_bf16", CmdBuf().launch(launch(RBLN_FW_KERNEL_RELU, RBLN_FW_DT_BF16, 100)));
    put("scale_fp16", CmdBuf().launch(launch(RBLN_FW_KERNEL_SCALE, RBLN_FW_DT_FP16, 33)));
    rbln_fw_pkt_launch cast = launch(RBLN_FW_KERNEL_CAST, RBLN_FW_DT_FP32, 64);
    cast.dtype_out = RBLN_FW_DT_FP16;
    put("cast", CmdBuf().launch(cast));
    put("matmul", CmdBuf().launch(matmul(RBLN_FW_DT_FP16, RBLN_FW_DT_FP32)));
    put("step", CmdBuf()
                    .copy(kVaHost, hbm(0), 1024)
                    .launch(matmul(RBLN_FW_DT_BF16, RBLN_FW_DT_BF16))
                    .launch(launch(RBLN_FW_KERNEL_MUL, RBLN_FW_DT_FP32, 64))
                    .copy(hbm(1), kVaHost + 4096, 512)
                    .signal(kVaHost + 8, 1));
    put("privileged", CmdBuf().tlb_invalidate(kAsid, 0, 0).write64(kHost, 1));
    // A graph whose Definition is whatever the host data holds (refused
    // unless the fuzzer writes one there first with COPY/FILL packets).
    rbln_fw_pkt_graph_exec graph{};
    graph.definition = kVaHost;
    graph.boundaries = kVaHost + 4096;
    graph.exec = hbm(0);
    graph.exec_bytes = 4096;
    put("graph_exec",
        CmdBuf().fill(kVaHost, 64, 0x4458454850415247ULL, 8).add(RBLN_FW_PKT_GRAPH_EXEC, graph));

    // Inputs this fuzzer failed on once, kept as seeds so every run checks
    // them first.  22571 x 24768 rows of 0 bytes: 47 s of translating
    // before RING_STOP could end it (fd5e457).
    put("found_strided_empty_rows", CmdBuf().strided(kVaHost, 0x2080000008400000ULL, 0, 22571,
                                                     24768, 128, 12884902912ULL, 64, 512));
    // A MATMUL of 2^20 x 1 x 2^20 broadcast from one element: 4 TiB of
    // dense fp32, bad_alloc on the ring thread (caadfe5).
    rbln_fw_pkt_launch huge = matmul(RBLN_FW_DT_FP32, RBLN_FW_DT_FP32);
    huge.shape[0] = huge.shape[2] = 1ULL << 20;
    huge.shape[1] = 1;
    huge.stride_a[0] = huge.stride_a[1] = huge.stride_b[0] = huge.stride_b[1] = 0;
    huge.stride_out[0] = huge.stride_out[1] = 0;
    put("found_matmul_broadcast", CmdBuf().launch(huge));
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    rbln::fuzz::write_seeds_if_asked(write_seeds);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return rbln::fuzz::run_input<Harness>(data, size);
}
