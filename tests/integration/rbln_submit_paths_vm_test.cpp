// SPDX-License-Identifier: GPL-2.0
// librbln's two submission paths against the real rbln.ko: a job's flags,
// buffers and syncs reach the kernel the same way through io_uring and
// through the SUBMIT/WAIT ioctls, whether the fallback is asked for
// (SubmitterOptions::use_io_uring = false) or forced by the host
// (sysctl kernel.io_uring_disabled=2, set and restored here: needs root).
// The flag's effect is observed on the card: RBLN_SUBMIT_NO_IMPLICIT_WAIT
// lets a job that shares a dma-buf with a blocked job of another queue run
// first; without it the job waits for that job's fence.  Runs inside the
// VM (tools/scripts/test-vm.sh), not under host ctest; without an rbln
// card every test skips with a message.
//
//   tools/vm/rbln-vm -q --cards 1 -- build/cmake/tests/integration/rbln_submit_paths_vm_tests

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <sys/ioctl.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "drm/rbln_accel.h"
#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "kernel/kernel.hpp"
#include "kernel/unique_fd.hpp"
#include "rbln/discovery.hpp"

namespace rbln::test::submit_paths_vm_test {
namespace {

using namespace std::chrono_literals;

// How long a test keeps a job blocked on the card (below the job timeout
// of 2 s that tools/scripts/test-vm.sh gives the driver).
constexpr auto kHold = 400ms;

std::optional<std::string> first_node() {
    try {
        DiscoveryOptions d;
        d.telemetry_fallback = false;
        const auto cards = discover(d).cards;
        if (cards.empty())
            return std::nullopt;
        return cards[0].accel_node;
    } catch (...) {
        return std::nullopt;
    }
}

// kernel.io_uring_disabled=2 for the object's lifetime, then as it was.
class IoUringDisabled {
public:
    static constexpr const char* kPath = "/proc/sys/kernel/io_uring_disabled";
    IoUringDisabled() {
        std::ifstream in(kPath);
        if (!(in >> old_))
            return;
        ok_ = write("2");
    }
    IoUringDisabled(const IoUringDisabled&) = delete;
    IoUringDisabled& operator=(const IoUringDisabled&) = delete;
    IoUringDisabled(IoUringDisabled&&) = delete;
    IoUringDisabled& operator=(IoUringDisabled&&) = delete;
    ~IoUringDisabled() {
        if (ok_)
            write(old_);
    }
    bool ok() const noexcept { return ok_; }

private:
    static bool write(const std::string& v) {
        std::ofstream out(kPath);
        out << v << '\n';
        out.flush();
        return static_cast<bool>(out);
    }
    std::string old_;
    bool ok_ = false;
};

enum class Via { IoUring, IoctlAskedFor, IoctlIoUringDisabled };

std::string via_name(const ::testing::TestParamInfo<Via>& info) {
    switch (info.param) {
    case Via::IoUring:
        return "IoUring";
    case Via::IoctlAskedFor:
        return "IoctlAskedFor";
    case Via::IoctlIoUringDisabled:
        return "IoctlIoUringDisabled";
    }
    return "?";
}

// A host buffer of the node, mapped for the CPU.
struct Buffer {
    BoHandle bo;
    std::byte* cpu = nullptr;
    std::uint64_t* words() const { return reinterpret_cast<std::uint64_t*>(cpu); }
};

class SubmitPaths : public ::testing::TestWithParam<Via> {
protected:
    void SetUp() override {
        const auto node = first_node();
        if (!node)
            GTEST_SKIP() << "no rbln card (run it in the VM: tools/vm/rbln-vm -- <this binary>)";
        // librbln's file, and a second descriptor of the same open file
        // for PRIME export (GEM handles are the open file's).
        raw_ = detail::UniqueFd(::open(node->c_str(), O_RDWR | O_CLOEXEC));
        ASSERT_TRUE(raw_) << strerror(errno);
        detail::UniqueFd dup(::fcntl(raw_.get(), F_DUPFD_CLOEXEC, 0));
        ASSERT_TRUE(dup);
        auto k = KernelDevice::adopt(std::move(dup), *node);
        ASSERT_TRUE(k) << k.error().what();
        kernel_ = std::shared_ptr<KernelInterface>(std::move(*k));
        chiplets_ = query_device_identity(*kernel_).chiplet_count;
        if (chiplets_ < 2)
            GTEST_SKIP() << "one chiplet: a blocked job blocks every queue";

        SubmitterOptions o;
        o.warn = [](const std::string&) {};
        o.batch = 1;
        if (GetParam() == Via::IoctlAskedFor)
            o.use_io_uring = false;
        if (GetParam() == Via::IoctlIoUringDisabled) {
            const IoUringDisabled off;
            if (!off.ok())
                GTEST_SKIP() << "cannot write " << IoUringDisabled::kPath << " (not root?)";
            submitter_ = std::make_unique<Submitter>(kernel_, o);
            EXPECT_NE(submitter_->fallback_reason().find("io_uring_disabled"), std::string::npos)
                << submitter_->fallback_reason();
        } else {
            submitter_ = std::make_unique<Submitter>(kernel_, o);
        }
        ASSERT_EQ(submitter_->path(),
                  GetParam() == Via::IoUring ? Submitter::Path::IoUring : Submitter::Path::Ioctl)
            << submitter_->fallback_reason();

        qa_ = kernel_->queue_create(1u << 0, QueuePriority::Normal);
        qb_ = kernel_->queue_create(1u << (chiplets_ - 1), QueuePriority::Normal);
        shared_ = host_buffer();
        cmd_a_ = host_buffer();
        cmd_b_ = host_buffer();
    }

    void TearDown() override {
        if (submitter_) {
            release();
            submitter_->wait_all();
            submitter_.reset();
        }
        if (kernel_) {
            for (const Buffer* b : {&shared_, &cmd_a_, &cmd_b_})
                if (b->cpu != nullptr) {
                    kernel_->munmap(b->cpu, 4096);
                    kernel_->gem_close(b->bo.handle);
                }
            if (qa_ != 0)
                kernel_->queue_destroy(qa_);
            if (qb_ != 0)
                kernel_->queue_destroy(qb_);
        }
    }

    Buffer host_buffer() {
        Buffer b;
        b.bo = kernel_->bo_create({4096, Region::Host, 0, BoFlags::None});
        b.cpu =
            static_cast<std::byte*>(kernel_->mmap(kernel_->bo_info(b.bo.handle).mmap_offset, 4096));
        std::memset(b.cpu, 0, 4096);
        return b;
    }

    // Makes the shared buffer a dma-buf: implicit sync applies to it.
    void export_shared() {
        drm_prime_handle p{};
        p.handle = shared_.bo.handle;
        p.flags = DRM_CLOEXEC;
        ASSERT_EQ(::ioctl(raw_.get(), DRM_IOCTL_PRIME_HANDLE_TO_FD, &p), 0) << strerror(errno);
        dmabuf_ = detail::UniqueFd(p.fd);
    }

    // Job A on queue A (chiplet 0): waits until the CPU sets word 0 of the
    // shared buffer, then stores 77 at word 1.  Lists the shared buffer.
    std::uint64_t enqueue_blocked_a(SyncPoint out = {}) {
        CommandEncoder e(std::span<std::byte>(cmd_a_.cpu, 4096));
        e.wait(shared_.bo.device_va, 1);
        e.signal(shared_.bo.device_va + 8, 77);
        Job j;
        j.queue_id = qa_;
        j.cmd_handle = cmd_a_.bo.handle;
        j.cmd_size = static_cast<std::uint32_t>(e.size());
        j.bo_handles = {shared_.bo.handle};
        j.out = out;
        const std::uint64_t n = submitter_->enqueue(j);
        submitter_->flush();
        blocked_ = true;
        return n;
    }

    // Job B on queue B (the last chiplet): stores 55 at word 2 of the
    // shared buffer, which it lists.
    std::uint64_t enqueue_b(SubmitFlags flags, std::vector<SyncPoint> in_syncs = {}) {
        CommandEncoder e(std::span<std::byte>(cmd_b_.cpu, 4096));
        e.signal(shared_.bo.device_va + 16, 55);
        Job j;
        j.queue_id = qb_;
        j.flags = flags;
        j.cmd_handle = cmd_b_.bo.handle;
        j.cmd_size = static_cast<std::uint32_t>(e.size());
        j.bo_handles = {shared_.bo.handle};
        j.in_syncs = std::move(in_syncs);
        const std::uint64_t n = submitter_->enqueue(j);
        submitter_->flush();
        return n;
    }

    // Whether job @n of @queue is done within @limit (polling).
    bool done_within(std::uint32_t queue, std::uint64_t n, std::chrono::milliseconds limit) {
        const auto end = std::chrono::steady_clock::now() + limit;
        for (;;) {
            if (submitter_->done(queue, n))
                return true;
            if (std::chrono::steady_clock::now() >= end)
                return false;
            std::this_thread::sleep_for(5ms);
        }
    }

    // The CPU lets job A go on.
    void release() {
        if (!blocked_)
            return;
        std::atomic_ref<std::uint64_t>(shared_.words()[0]).store(1);
        blocked_ = false;
    }

    void expect_ok(std::uint32_t queue, std::uint64_t n, const char* what) {
        submitter_->wait(queue, n);
        const auto f = submitter_->take_failure(queue);
        EXPECT_FALSE(f) << what << " failed: " << (f ? strerror(f->err) : "");
    }

    detail::UniqueFd raw_;
    detail::UniqueFd dmabuf_;
    std::shared_ptr<KernelInterface> kernel_;
    std::unique_ptr<Submitter> submitter_;
    unsigned chiplets_ = 0;
    std::uint32_t qa_ = 0;
    std::uint32_t qb_ = 0;
    Buffer shared_;
    Buffer cmd_a_;
    Buffer cmd_b_;
    bool blocked_ = false;
};

TEST_P(SubmitPaths, AJobOnASharedBufferWaitsForTheBlockedJobThatUsesIt) {
    export_shared();
    const std::uint64_t a = enqueue_blocked_a();
    std::this_thread::sleep_for(50ms);
    const std::uint64_t b = enqueue_b(SubmitFlags::None);
    EXPECT_FALSE(done_within(qb_, b, kHold))
        << "B ran beside A though it shares A's dma-buf (no implicit wait)";
    EXPECT_FALSE(submitter_->done(qa_, a));
    release();
    expect_ok(qa_, a, "A");
    expect_ok(qb_, b, "B");
    EXPECT_EQ(shared_.words()[1], 77u);
    EXPECT_EQ(shared_.words()[2], 55u);
}

TEST_P(SubmitPaths, NoImplicitWaitLetsAJobOnASharedBufferRunBeforeTheBlockedJob) {
    export_shared();
    const std::uint64_t a = enqueue_blocked_a();
    std::this_thread::sleep_for(50ms);
    const std::uint64_t b = enqueue_b(SubmitFlags::NoImplicitWait);
    EXPECT_TRUE(done_within(qb_, b, kHold))
        << "B waited for A: RBLN_SUBMIT_NO_IMPLICIT_WAIT did not reach the kernel";
    EXPECT_EQ(shared_.words()[2], 55u);
    EXPECT_FALSE(submitter_->done(qa_, a)) << "A ran before the CPU let it";
    EXPECT_EQ(shared_.words()[1], 0u);
    release();
    expect_ok(qa_, a, "A");
    expect_ok(qb_, b, "B");
    EXPECT_EQ(shared_.words()[1], 77u);
}

TEST_P(SubmitPaths, AnInSyncHoldsAJobUntilTheOutSyncOfAnotherIsSignalled) {
    // A private buffer: no implicit sync, only the syncobj orders B after A.
    const std::uint32_t sync = kernel_->syncobj_create(0);
    const std::uint64_t a = enqueue_blocked_a(SyncPoint{sync, 0});
    std::this_thread::sleep_for(50ms);
    const std::uint64_t b = enqueue_b(SubmitFlags::None, {SyncPoint{sync, 0}});
    EXPECT_FALSE(done_within(qb_, b, kHold)) << "B ran before its in-sync (A's out-sync)";
    EXPECT_EQ(shared_.words()[2], 0u);
    release();
    expect_ok(qa_, a, "A");
    expect_ok(qb_, b, "B");
    EXPECT_EQ(shared_.words()[2], 55u);
    WaitArgs w;
    w.sync = SyncPoint{sync, 0};
    EXPECT_TRUE(kernel_->wait(w).done) << "A's out-sync never got its fence";
    kernel_->syncobj_destroy(sync);
}

INSTANTIATE_TEST_SUITE_P(BothPaths, SubmitPaths,
                         ::testing::Values(Via::IoUring, Via::IoctlAskedFor,
                                           Via::IoctlIoUringDisabled),
                         via_name);

} // namespace
} // namespace rbln::test::submit_paths_vm_test
