// SPDX-License-Identifier: GPL-2.0
// fake_kernel.hpp - a stateful fake of rbln.ko behind KernelInterface.  It
// answers GET_INFO with the uAPI's size protocol, keeps buffers (with host
// memory behind their mmap offsets), queues, jobs and syncobjs as the
// uAPI describes them, checks inputs the way rbln_accel.h documents, can
// fail the next call of any kind with a given errno, and counts calls.
// Jobs complete at once unless hold_jobs is set (then complete_jobs(), or a
// WAIT with a deadline, which plays the card running while the host waits).
// With run_packets set, a job that completes runs its command buffer like
// the card would, on the fake's memory: NOP, COPY, COPY_STRIDED, FILL, SIGNAL, WAIT (not yet true:
// the job fails with -ETIMEDOUT), TIMESTAMP (a fake clock) and LAUNCH
// (ignored); an address outside every buffer fails the job with -EFAULT, a
// bad packet with -EINVAL.  Syncobjs are timelines (point 0: binary).
// make_ring() hands out what the test's `rings` factory makes (a FakeRing
// of fake_ring.hpp), or none (ENOTSUP) as a node without io_uring.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "drm/rbln_accel.h"
#include "kernel/kernel.hpp"
#include "rbln_fw_cmd.h"

namespace rbln::test {

/// What FakeKernel::make_ring() calls (tests/umd/fake_ring.hpp makes them).
using RingFactory =
    std::function<Result<std::unique_ptr<CommandRing>>(KernelInterface& kernel, unsigned entries)>;

class FakeKernel final : public KernelInterface {
public:
    explicit FakeKernel(std::string path = "/dev/accel/accel0") : path_(std::move(path)) {
        version_.name = "rbln";
        device.family = RBLN_FAMILY_REBEL100;
        device.chiplet_count = 4;
        device.fw_iface_major = 1;
        device.fw_iface_minor = 0;
        device.pci_bus = 0;
        device.pci_dev = 4;
        device.pci_func = 0;
        device.numa_node = -1;
        for (unsigned i = 0; i < 4; i++)
            device.hbm_size[i] = 512ull << 20;
        std::strcpy(device.fw_version, "rbln-emu 0.2.0");
        std::strcpy(device.serial, "RBLNEMU-KERNEL");
        for (unsigned i = 0; i < 16; i++)
            device.uuid[i] = static_cast<__u8>(i);
        telemetry.temp_mc = 51234;
        telemetry.power_uw = 12345678;
        telemetry.chiplet_count = 4;
    }

    // ---- test controls ----------------------------------------------------

    /// The next call of @op fails with @err (calls queue up in order).
    void fail_next(KernelOp op, int err) { failures_[index(op)].push_back(err); }
    /// Calls of @op so far (failed ones included).
    int count(KernelOp op) const { return counts_[index(op)]; }
    /// Every call so far.
    int total_calls() const {
        int n = 0;
        for (int c : counts_)
            n += c;
        return n;
    }
    std::size_t buffer_count() const { return bos_.size(); }
    std::size_t queue_count() const { return queues_.size(); }
    std::size_t syncobj_count() const { return syncobjs_.size(); }
    std::size_t mapping_count() const { return maps_.size(); }
    std::uint64_t hbm_used(unsigned chiplet) const { return hbm_used_[chiplet]; }
    /// Jobs submitted but not done (only with hold_jobs).
    std::size_t pending_jobs() const { return pending_.size(); }
    /// Completes (runs) the first @max held jobs in submission order.
    void complete_jobs(std::size_t max = SIZE_MAX) {
        while (max-- > 0 && !pending_.empty()) {
            const PendingJob j = pending_.front();
            pending_.pop_front();
            run_job(j);
        }
    }
    /// Whether job @seqno of @queue is done (no call counted).
    bool job_done(std::uint32_t queue, std::uint64_t seqno) const {
        auto q = queues_.find(queue);
        return q != queues_.end() && seqno <= q->second.completed;
    }
    /// The job error (-errno) of a done job.
    int job_error(std::uint32_t queue, std::uint64_t seqno) const {
        auto q = queues_.find(queue);
        if (q == queues_.end())
            return 0;
        auto e = q->second.errors.find(seqno);
        return e == q->second.errors.end() ? 0 : e->second;
    }
    /// A blocking WAIT on a held job completes held jobs up to it.
    bool complete_on_blocking_wait = true;
    /// Completed jobs run their packets (else they only complete).
    bool run_packets = false;
    /// With run_packets, a GRAPH_EXEC packet is handed to this (its result:
    /// 0 or -errno, the job's); unset, GRAPH_EXEC fails the job (-EINVAL).
    std::function<int(FakeKernel& kernel, const rbln_fw_pkt_graph_exec& packet)> graph_exec;
    /// GRAPH_EXEC packets run so far.
    std::uint64_t graph_execs = 0;
    /// The fake card clock TIMESTAMP packets store (advances 1000 ns each).
    std::uint64_t clock_ns = 1000000;
    /// The CPU view of device VA @va (nullptr if no buffer holds it).
    std::byte* translate(std::uint64_t va, std::uint64_t len = 1) {
        for (auto& [h, bo] : bos_) {
            std::byte* base = bo.memory ? bo.memory.get() : bo.user;
            if (base != nullptr && va >= bo.device_va && va - bo.device_va + len <= bo.size &&
                len <= bo.size)
                return base + (va - bo.device_va);
        }
        return nullptr;
    }
    /// The in-syncs of the last accepted SUBMIT.
    std::vector<SyncPoint> last_in_syncs;

    /// make_ring() returns what it makes (empty: no io_uring, ENOTSUP).
    RingFactory rings;

    bool hold_jobs = false;    ///< jobs stay pending until complete_jobs()
    int next_job_error = 0;    ///< the job error (-errno) of the next job submitted
    JobDetail next_job_detail; ///< the card's detail for the next job submitted
    bool has_cap_sys_nice = false;

    drm_rbln_info_device device{};
    drm_rbln_info_telemetry telemetry{};
    std::uint32_t device_size = sizeof(drm_rbln_info_device);
    int telemetry_errno = 0;

    // ---- KernelInterface --------------------------------------------------

    const std::string& path() const override { return path_; }
    const DrmVersion& drm_version() const override { return version_; }

    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override {
        enter(KernelOp::GetInfo);
        std::vector<std::byte> answer;
        if (type == RBLN_INFO_DEVICE) {
            // A newer kernel's answer is longer: the v1 prefix plus zeroes.
            answer.resize(std::max<std::size_t>(device_size, sizeof(device)));
            std::memcpy(answer.data(), &device, sizeof(device));
            answer.resize(device_size);
        } else if (type == RBLN_INFO_TELEMETRY) {
            if (telemetry_errno != 0)
                throw Error::from_errno("ioctl GET_INFO(type 2)", path_, telemetry_errno);
            answer.resize(sizeof(telemetry));
            std::memcpy(answer.data(), &telemetry, sizeof(telemetry));
        } else {
            throw Error::from_errno("ioctl GET_INFO", path_, EINVAL);
        }
        const auto full = static_cast<std::uint32_t>(answer.size());
        // The kernel writes min(in, full) bytes and nothing past them.
        std::memcpy(out.data(), answer.data(), std::min<std::size_t>(out.size(), full));
        return full;
    }

    BoHandle bo_create(const BoCreateArgs& a) override {
        enter(KernelOp::BoCreate);
        if (a.size == 0 || (a.flags & ~BoFlags::DeviceReadOnly) != BoFlags::None)
            fail(KernelOp::BoCreate, EINVAL);
        if (a.region != Region::Host && a.region != Region::Hbm && a.region != Region::Auto)
            fail(KernelOp::BoCreate, EINVAL);
        if (a.region != Region::Hbm && a.chiplet != 0)
            fail(KernelOp::BoCreate, EINVAL);
        if (a.region == Region::Hbm && a.chiplet >= device.chiplet_count)
            fail(KernelOp::BoCreate, EINVAL);
        const bool hbm = a.region != Region::Host;
        const std::uint64_t size = round_up(a.size, hbm && a.size >= kHuge ? kHuge : kPage);
        unsigned chiplet = a.chiplet;
        if (hbm) {
            if (a.region == Region::Auto) {
                chiplet = 0;
                for (unsigned c = 1; c < device.chiplet_count; c++)
                    if (hbm_free(c) > hbm_free(chiplet))
                        chiplet = c;
            }
            if (size > device.hbm_size[chiplet])
                fail(KernelOp::BoCreate, E2BIG);
            if (size > hbm_free(chiplet))
                fail(KernelOp::BoCreate, ENOSPC);
            hbm_used_[chiplet] += size;
        }
        Bo bo;
        bo.size = size;
        bo.region = hbm ? Region::Hbm : Region::Host;
        bo.chiplet = hbm ? chiplet : 0;
        bo.flags = a.flags;
        bo.device_va = next_va_;
        bo.mmap_offset = next_offset_;
        bo.memory = std::make_unique<std::byte[]>(size); // zeroed, as the kernel does
        next_va_ += size;
        next_offset_ += size;
        const std::uint32_t handle = next_handle_++;
        BoHandle out{handle, size, bo.chiplet, bo.device_va};
        bos_.emplace(handle, std::move(bo));
        return out;
    }

    BoDescription bo_info(std::uint32_t handle) override {
        enter(KernelOp::BoInfo);
        const Bo& bo = find_bo(KernelOp::BoInfo, handle, ENOENT);
        return {bo.mmap_offset, bo.size, bo.device_va, bo.region, bo.chiplet, bo.flags};
    }

    BoHandle bo_userptr(void* addr, std::uint64_t size, UserptrFlags flags) override {
        enter(KernelOp::BoUserptr);
        const auto a = reinterpret_cast<std::uintptr_t>(addr);
        if (a == 0 || size == 0 || a % kPage != 0 || size % kPage != 0 ||
            (flags & ~UserptrFlags::ReadOnly) != UserptrFlags::None || a + size < a)
            fail(KernelOp::BoUserptr, EINVAL);
        if (pinned_ + size > memlock_limit)
            fail(KernelOp::BoUserptr, ENOMEM);
        pinned_ += size;
        Bo bo;
        bo.size = size;
        bo.user = static_cast<std::byte*>(addr);
        bo.region = Region::Userptr;
        bo.flags = has(flags, UserptrFlags::ReadOnly) ? BoFlags::DeviceReadOnly : BoFlags::None;
        bo.device_va = next_va_;
        next_va_ += size;
        const std::uint32_t handle = next_handle_++;
        BoHandle out{handle, size, 0, bo.device_va};
        bos_.emplace(handle, std::move(bo));
        return out;
    }

    void gem_close(std::uint32_t handle) override {
        enter(KernelOp::GemClose);
        const Bo& bo = find_bo(KernelOp::GemClose, handle, EINVAL); // DRM says EINVAL
        if (bo.region == Region::Hbm)
            hbm_used_[bo.chiplet] -= bo.size;
        if (bo.region == Region::Userptr)
            pinned_ -= bo.size;
        // A mapping keeps the memory, as a real mmap keeps the object.
        auto node = bos_.extract(handle);
        if (node.mapped().memory)
            orphans_.push_back(std::move(node.mapped().memory));
    }

    void* mmap(std::uint64_t offset, std::size_t size) override {
        enter(KernelOp::Mmap);
        for (auto& [h, bo] : bos_) {
            if (bo.memory && bo.mmap_offset == offset) {
                if (size == 0 || size > bo.size)
                    fail(KernelOp::Mmap, EINVAL);
                void* p = bo.memory.get();
                maps_[p] = size;
                return p;
            }
        }
        fail(KernelOp::Mmap, EINVAL);
    }

    void munmap(void* addr, std::size_t size) override {
        enter(KernelOp::Munmap);
        auto it = maps_.find(addr);
        if (it == maps_.end() || it->second != size)
            fail(KernelOp::Munmap, EINVAL);
        maps_.erase(it);
    }

    std::uint32_t queue_create(std::uint32_t mask, QueuePriority priority) override {
        enter(KernelOp::QueueCreate);
        if (mask == 0 || (mask >> device.chiplet_count) != 0 || priority > QueuePriority::High)
            fail(KernelOp::QueueCreate, EINVAL);
        if (priority == QueuePriority::High && !has_cap_sys_nice)
            fail(KernelOp::QueueCreate, EACCES);
        if (queues_.size() >= 256)
            fail(KernelOp::QueueCreate, ENOSPC);
        const std::uint32_t id = next_queue_++;
        queues_[id].mask = mask;
        return id;
    }

    void queue_destroy(std::uint32_t queue_id) override {
        enter(KernelOp::QueueDestroy);
        if (queues_.erase(queue_id) == 0)
            fail(KernelOp::QueueDestroy, ENOENT);
    }

    std::uint64_t submit(const SubmitArgs& a) override {
        enter(KernelOp::Submit);
        if ((a.flags & ~SubmitFlags::NoImplicitWait) != SubmitFlags::None || a.cmd_size == 0 ||
            a.cmd_size % 8 != 0 || a.cmd_size > (1u << 20) || a.cmd_offset % 8 != 0 ||
            a.bo_handles.size() > 4096 || a.in_syncs.size() > 64)
            fail(KernelOp::Submit, EINVAL);
        auto q = queues_.find(a.queue_id);
        if (q == queues_.end())
            fail(KernelOp::Submit, ENOENT);
        const Bo& cmd = find_bo(KernelOp::Submit, a.cmd_handle, ENOENT);
        if (a.cmd_offset + a.cmd_size > cmd.size)
            fail(KernelOp::Submit, ERANGE);
        for (std::uint32_t h : a.bo_handles)
            find_bo(KernelOp::Submit, h, ENOENT);
        for (const SyncPoint& s : a.in_syncs)
            if (syncobjs_.find(s.handle) == syncobjs_.end())
                fail(KernelOp::Submit, ENOENT);
        if (a.out.handle != 0 && syncobjs_.find(a.out.handle) == syncobjs_.end())
            fail(KernelOp::Submit, ENOENT);
        for (const SyncPoint& s : a.in_syncs)
            if (!find_fence(s))
                fail(KernelOp::Submit, EINVAL); // no fence at that point yet
        Queue& queue = q->second;
        const std::uint64_t seqno = ++queue.submitted;
        if (a.out.handle != 0)
            syncobjs_[a.out.handle][a.out.point] = Fence{a.queue_id, seqno};
        last_submit = a;
        last_bo_handles.assign(a.bo_handles.begin(), a.bo_handles.end());
        last_submit.bo_handles = last_bo_handles;
        last_in_syncs.assign(a.in_syncs.begin(), a.in_syncs.end());
        last_submit.in_syncs = {};
        const PendingJob job{a.queue_id,
                             seqno,
                             a.cmd_handle,
                             a.cmd_offset,
                             a.cmd_size,
                             std::exchange(next_job_error, 0),
                             std::exchange(next_job_detail, JobDetail{})};
        if (hold_jobs)
            pending_.push_back(job);
        else
            run_job(job);
        return seqno;
    }

    WaitResult wait(const WaitArgs& a) override {
        enter(KernelOp::Wait);
        std::uint32_t queue_id = a.queue_id;
        std::uint64_t seqno = a.seqno;
        if (a.sync) {
            const Fence* f = find_fence(*a.sync);
            if (f == nullptr) // no fence yet: rbln.ko says ENOENT
                fail(KernelOp::Wait, ENOENT);
            queue_id = f->queue_id;
            seqno = f->seqno;
        }
        auto q = queues_.find(queue_id);
        if (q == queues_.end() || seqno == 0 || seqno > q->second.submitted)
            fail(KernelOp::Wait, ENOENT);
        if (seqno > q->second.completed && a.deadline_ns != 0 && complete_on_blocking_wait)
            while (seqno > q->second.completed && !pending_.empty())
                complete_jobs(1);
        if (seqno > q->second.completed)
            return {false, 0, {}};
        return {true, q->second.errors[seqno], q->second.details[seqno]};
    }

    std::uint32_t syncobj_create(std::uint32_t flags) override {
        enter(KernelOp::SyncobjCreate);
        if (flags != 0)
            fail(KernelOp::SyncobjCreate, EINVAL);
        const std::uint32_t h = next_syncobj_++;
        syncobjs_[h] = {};
        return h;
    }

    void syncobj_destroy(std::uint32_t handle) override {
        enter(KernelOp::SyncobjDestroy);
        if (syncobjs_.erase(handle) == 0)
            fail(KernelOp::SyncobjDestroy, EINVAL);
    }

    Result<std::unique_ptr<CommandRing>> make_ring(unsigned entries, RingMode mode,
                                                   unsigned sq_idle_ms) override {
        if (!rings)
            return KernelInterface::make_ring(entries, mode, sq_idle_ms);
        return rings(*this, entries);
    }

    std::uint64_t memlock_limit = 64ull << 20; ///< RLIMIT_MEMLOCK for userptr
    SubmitArgs last_submit;                    ///< the last accepted SUBMIT (in_syncs cleared)

private:
    static constexpr std::uint64_t kPage = 4096;
    static constexpr std::uint64_t kHuge = 2ull << 20;

    struct Bo {
        std::uint64_t size = 0;
        Region region = Region::Host;
        std::uint32_t chiplet = 0;
        BoFlags flags = BoFlags::None;
        std::uint64_t device_va = 0;
        std::uint64_t mmap_offset = 0;
        std::unique_ptr<std::byte[]> memory; ///< host and HBM buffers (CPU view)
        std::byte* user = nullptr;           ///< userptr buffers: the user's memory
    };
    struct Queue {
        std::uint32_t mask = 0;
        std::uint64_t submitted = 0;
        std::uint64_t completed = 0;
        std::map<std::uint64_t, int> errors;
        std::map<std::uint64_t, JobDetail> details;
    };
    struct Fence {
        std::uint32_t queue_id = 0;
        std::uint64_t seqno = 0;
    };
    struct PendingJob {
        std::uint32_t queue_id = 0;
        std::uint64_t seqno = 0;
        std::uint32_t cmd_handle = 0;
        std::uint64_t cmd_offset = 0;
        std::uint32_t cmd_size = 0;
        int injected_error = 0;
        JobDetail injected_detail;
    };

    // The fence of a syncobj point: point 0 the binary fence, else the
    // first point at or after it (as a timeline's chain finds it).
    const Fence* find_fence(const SyncPoint& s) const {
        auto it = syncobjs_.find(s.handle);
        if (it == syncobjs_.end())
            return nullptr;
        auto f = it->second.lower_bound(s.point);
        return f == it->second.end() ? nullptr : &f->second;
    }

    // Runs a job's packets on the fake's memory; its error (-errno) or 0.
    int execute(const PendingJob& j) {
        auto cmd = bos_.find(j.cmd_handle);
        if (cmd == bos_.end() || !cmd->second.memory)
            return -EFAULT;
        const std::byte* p = cmd->second.memory.get() + j.cmd_offset;
        for (std::uint32_t off = 0; off < j.cmd_size;) {
            std::uint32_t hdr = 0;
            std::memcpy(&hdr, p + off, sizeof(hdr));
            const std::uint32_t bytes = RBLN_FW_PKT_BYTES(hdr);
            if (bytes == 0 || off + bytes > j.cmd_size)
                return -EINVAL;
            const std::byte* pkt = p + off;
            off += bytes;
            switch (RBLN_FW_PKT_OP(hdr)) {
            case RBLN_FW_PKT_NOP:
            case RBLN_FW_PKT_LAUNCH:
                break;
            case RBLN_FW_PKT_COPY: {
                rbln_fw_pkt_copy c{};
                std::memcpy(&c, pkt, sizeof(c));
                std::byte* s = translate(c.src, c.size);
                std::byte* d = translate(c.dst, c.size);
                if (c.size != 0 && (s == nullptr || d == nullptr))
                    return -EFAULT;
                if (c.size != 0)
                    std::memmove(d, s, c.size);
                break;
            }
            case RBLN_FW_PKT_COPY_STRIDED: {
                rbln_fw_pkt_copy_strided c{};
                std::memcpy(&c, pkt, sizeof(c));
                for (std::uint32_t z = 0; z < c.depth; z++)
                    for (std::uint32_t y = 0; y < c.height; y++) {
                        std::byte* s =
                            translate(c.src + z * c.src_slice + y * c.src_pitch, c.width);
                        std::byte* d =
                            translate(c.dst + z * c.dst_slice + y * c.dst_pitch, c.width);
                        if (s == nullptr || d == nullptr)
                            return -EFAULT;
                        std::memmove(d, s, c.width);
                    }
                break;
            }
            case RBLN_FW_PKT_FILL: {
                rbln_fw_pkt_fill f{};
                std::memcpy(&f, pkt, sizeof(f));
                std::byte* d = translate(f.dst, f.size);
                if (d == nullptr && f.size != 0)
                    return -EFAULT;
                for (std::uint64_t i = 0; i < f.size; i++)
                    d[i] = static_cast<std::byte>(f.pattern >> (8 * (i % f.pattern_bytes)));
                break;
            }
            case RBLN_FW_PKT_SIGNAL: {
                rbln_fw_pkt_signal g{};
                std::memcpy(&g, pkt, sizeof(g));
                std::byte* d = translate(g.va, 8);
                if (d == nullptr)
                    return -EFAULT;
                std::memcpy(d, &g.value, 8);
                break;
            }
            case RBLN_FW_PKT_WAIT: {
                rbln_fw_pkt_wait w{};
                std::memcpy(&w, pkt, sizeof(w));
                std::byte* d = translate(w.va, 8);
                if (d == nullptr)
                    return -EFAULT;
                std::uint64_t v = 0;
                std::memcpy(&v, d, 8);
                if (v < w.value)
                    return -ETIMEDOUT;
                break;
            }
            case RBLN_FW_PKT_TIMESTAMP: {
                rbln_fw_pkt_timestamp t{};
                std::memcpy(&t, pkt, sizeof(t));
                std::byte* d = translate(t.va, 8);
                if (d == nullptr)
                    return -EFAULT;
                clock_ns += 1000;
                std::memcpy(d, &clock_ns, 8);
                break;
            }
            case RBLN_FW_PKT_GRAPH_EXEC: {
                rbln_fw_pkt_graph_exec g{};
                std::memcpy(&g, pkt, std::min<std::size_t>(sizeof(g), bytes));
                graph_execs++;
                if (!graph_exec)
                    return -EINVAL;
                if (const int err = graph_exec(*this, g); err != 0)
                    return err;
                break;
            }
            default:
                return -EINVAL;
            }
        }
        return 0;
    }

    void run_job(const PendingJob& j) {
        const int err = run_packets ? execute(j) : 0;
        auto q = queues_.find(j.queue_id);
        if (q == queues_.end())
            return;
        q->second.errors[j.seqno] = j.injected_error != 0 ? j.injected_error : err;
        q->second.details[j.seqno] = j.injected_detail;
        q->second.completed = std::max(q->second.completed, j.seqno);
    }

    static unsigned index(KernelOp op) { return static_cast<unsigned>(op); }
    static std::uint64_t round_up(std::uint64_t v, std::uint64_t to) {
        return (v + to - 1) / to * to;
    }
    std::uint64_t hbm_free(unsigned c) const { return device.hbm_size[c] - hbm_used_[c]; }

    // Counts the call and throws an injected failure, if one is queued.
    void enter(KernelOp op) {
        counts_[index(op)]++;
        auto& q = failures_[index(op)];
        if (!q.empty()) {
            const int err = q.front();
            q.pop_front();
            throw kernel_error(op, path_, err);
        }
    }
    [[noreturn]] void fail(KernelOp op, int err) const { throw kernel_error(op, path_, err); }
    const Bo& find_bo(KernelOp op, std::uint32_t handle, int err) const {
        auto it = bos_.find(handle);
        if (it == bos_.end())
            fail(op, err);
        return it->second;
    }

    std::string path_;
    DrmVersion version_;
    std::array<int, kKernelOpCount> counts_{};
    std::array<std::deque<int>, kKernelOpCount> failures_{};
    std::map<std::uint32_t, Bo> bos_;
    std::vector<std::unique_ptr<std::byte[]>> orphans_;
    std::map<void*, std::size_t> maps_;
    std::map<std::uint32_t, Queue> queues_;
    std::map<std::uint32_t, std::map<std::uint64_t, Fence>> syncobjs_; ///< handle -> point -> fence
    std::deque<PendingJob> pending_;
    std::array<std::uint64_t, kMaxChiplets> hbm_used_{};
    std::uint64_t pinned_ = 0;
    std::uint32_t next_handle_ = 1;
    std::uint32_t next_queue_ = 1;
    std::uint32_t next_syncobj_ = 1;
    std::uint64_t next_va_ = 1ull << 32;
    std::uint64_t next_offset_ = 1ull << 20;
    std::vector<std::uint32_t> last_bo_handles;
};

} // namespace rbln::test
