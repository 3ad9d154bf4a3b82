// SPDX-License-Identifier: GPL-2.0
// fake_card.hpp - a fake card for rbln-demo's host tests: librbln's
// stateful FakeKernel (tests/umd/fake_kernel.hpp) for the uAPI's
// bookkeeping, plus a small interpreter of the packets librbln sends for
// the demo (NOP, COPY, TIMESTAMP, LAUNCH of MATMUL, RELU and SCALE on dense
// tensors), run at SUBMIT.  Every address a packet touches must lie in a
// buffer the SUBMIT listed (or the command buffer), and device-read-only
// buffers cannot be written: anything else is an MMU fault of the job, as
// on the card.  Tests can make it get one element of the first copy out
// (HBM -> host) wrong, or fail the next job.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtype.hpp"
#include "fake_kernel.hpp"
#include "rbln_fw_cmd.h"

namespace rbln::demo::test {

class FakeCard final : public KernelInterface {
public:
    explicit FakeCard(unsigned chiplets = 4) {
        kernel.device.chiplet_count = chiplets;
        kernel.device.fw_iface_minor = 2;
    }

    // ---- test controls ----------------------------------------------------

    /// Adds 1.0 to this element (of type corrupt_type) of the first COPY
    /// from HBM to host memory, counted from its destination.
    std::optional<std::size_t> corrupt_element;
    DType corrupt_type = DType::Fp32;
    /// The next job fails with this errno (and without running).
    int fail_job = 0;
    /// Opcodes of every packet run, in order.
    std::vector<std::uint32_t> ops;
    /// Every LAUNCH packet run, in order.
    std::vector<rbln_fw_pkt_launch> launches;
    /// Chiplet masks of the queues made.
    std::vector<std::uint32_t> queue_masks;
    /// The fake under it (bookkeeping, counters, injected failures).
    rbln::test::FakeKernel kernel;

    // ---- KernelInterface --------------------------------------------------

    const std::string& path() const override { return kernel.path(); }
    const DrmVersion& drm_version() const override { return kernel.drm_version(); }

    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override {
        if (type != RBLN_INFO_VM)
            return kernel.get_info(type, out);
        drm_rbln_info_vm vm{};
        vm.asid = 1;
        if (fault_) {
            vm.flags = RBLN_VM_FAULTED;
            vm.fault_count = 1;
            vm.fault_va = fault_->va;
            vm.fault_access = fault_->write ? RBLN_ACCESS_WRITE : RBLN_ACCESS_READ;
            vm.fault_reason = fault_->reason;
        }
        std::memcpy(out.data(), &vm, std::min(out.size(), sizeof(vm)));
        return sizeof(vm);
    }

    BoHandle bo_create(const BoCreateArgs& a) override {
        const BoHandle h = kernel.bo_create(a);
        // The fake's memory behind the buffer is the card's view of it.
        const BoDescription d = kernel.bo_info(h.handle);
        mem_[h.handle] = Mem{h.device_va,
                             h.size,
                             static_cast<std::byte*>(kernel.mmap(d.mmap_offset, h.size)),
                             has(a.flags, BoFlags::DeviceReadOnly),
                             a.region == Region::Hbm,
                             h.chiplet};
        return h;
    }
    BoDescription bo_info(std::uint32_t handle) override { return kernel.bo_info(handle); }
    BoHandle bo_userptr(void* addr, std::uint64_t size, UserptrFlags flags) override {
        return kernel.bo_userptr(addr, size, flags);
    }
    void gem_close(std::uint32_t handle) override {
        kernel.gem_close(handle);
        mem_.erase(handle);
    }
    void* mmap(std::uint64_t offset, std::size_t size) override {
        return kernel.mmap(offset, size);
    }
    void munmap(void* addr, std::size_t size) override { kernel.munmap(addr, size); }
    std::uint32_t queue_create(std::uint32_t mask, QueuePriority priority) override {
        queue_masks.push_back(mask);
        return kernel.queue_create(mask, priority);
    }
    void queue_destroy(std::uint32_t id) override { kernel.queue_destroy(id); }

    std::uint64_t submit(const SubmitArgs& a) override {
        // The uAPI checks first (nothing runs if SUBMIT fails).
        const std::uint64_t seqno = kernel.submit(a);
        int err = std::exchange(fail_job, 0);
        if (err == 0)
            err = execute(a);
        job_errors_[{a.queue_id, seqno}] = err;
        return seqno;
    }

    WaitResult wait(const WaitArgs& a) override {
        WaitResult r = kernel.wait(a);
        if (r.done && !a.sync)
            r.job_error = -job_errors_[{a.queue_id, a.seqno}];
        return r;
    }
    std::uint32_t syncobj_create(std::uint32_t flags) override {
        return kernel.syncobj_create(flags);
    }
    void syncobj_destroy(std::uint32_t handle) override { kernel.syncobj_destroy(handle); }

private:
    struct Mem {
        std::uint64_t va = 0;
        std::uint64_t size = 0;
        std::byte* ptr = nullptr;
        bool read_only = false;
        bool hbm = false;
        std::uint32_t chiplet = 0;
    };
    struct Fault {
        std::uint64_t va = 0;
        bool write = false;
        std::uint32_t reason = 0;
    };
    struct JobFault {
        int err;
    };

    // The bytes [va, va + len) of a buffer the job may use, or a fault.
    std::byte* at(std::uint64_t va, std::uint64_t len, bool write) {
        for (const auto& [h, m] : mem_) {
            if (va < m.va || va - m.va >= m.size)
                continue;
            if (!allowed_.contains(h) || len > m.size - (va - m.va))
                break;
            if (write && m.read_only) {
                fault_ = Fault{va, write, RBLN_MMU_NO_WRITE};
                throw JobFault{EFAULT};
            }
            return m.ptr + (va - m.va);
        }
        fault_ = Fault{va, write, RBLN_MMU_NOT_MAPPED};
        throw JobFault{EFAULT};
    }

    static DType dtype_of(std::uint32_t fw) {
        if (fw == RBLN_FW_DT_FP32)
            return DType::Fp32;
        if (fw == RBLN_FW_DT_FP16)
            return DType::Fp16;
        if (fw == RBLN_FW_DT_BF16)
            return DType::Bf16;
        throw JobFault{EINVAL};
    }

    // Dense tensors only (what rbln-demo sends); strides are checked.
    void launch(const rbln_fw_pkt_launch& l) {
        const DType t = dtype_of(l.dtype_in);
        if (l.dtype_out != l.dtype_in)
            throw JobFault{EINVAL};
        const std::size_t es = dtype_size(t);
        if (l.kernel == RBLN_FW_KERNEL_MATMUL) {
            const std::uint64_t m = l.shape[0];
            const std::uint64_t n = l.shape[1];
            const std::uint64_t k = l.shape[2];
            if (l.ndim != 2 || l.stride_a[0] != static_cast<std::int64_t>(k) ||
                l.stride_a[1] != 1 || l.stride_b[0] != static_cast<std::int64_t>(n) ||
                l.stride_b[1] != 1 || l.stride_out[0] != static_cast<std::int64_t>(n) ||
                l.stride_out[1] != 1)
                throw JobFault{EINVAL};
            const std::span<const std::byte> a(at(l.a, m * k * es, false), m * k * es);
            const std::span<const std::byte> b(at(l.b, k * n * es, false), k * n * es);
            std::vector<std::byte> out(m * n * es);
            for (std::uint64_t i = 0; i < m; i++)
                for (std::uint64_t j = 0; j < n; j++) {
                    float sum = 0;
                    for (std::uint64_t q = 0; q < k; q++)
                        sum += load(t, a, i * k + q) * load(t, b, q * n + j);
                    store(t, out, i * n + j, sum);
                }
            std::memcpy(at(l.out, out.size(), true), out.data(), out.size());
            return;
        }
        if ((l.kernel != RBLN_FW_KERNEL_RELU && l.kernel != RBLN_FW_KERNEL_SCALE) || l.ndim != 1 ||
            l.stride_a[0] != 1 || l.stride_out[0] != 1 || l.b != 0)
            throw JobFault{EINVAL};
        const std::uint64_t count = l.shape[0];
        const std::span<const std::byte> a(at(l.a, count * es, false), count * es);
        const std::span<std::byte> out(at(l.out, count * es, true), count * es);
        float factor = 0;
        std::memcpy(&factor, &l.scale, 4);
        for (std::uint64_t i = 0; i < count; i++) {
            const float v = load(t, a, i);
            store(t, out, i, l.kernel == RBLN_FW_KERNEL_RELU ? (v > 0 ? v : 0.0F) : v * factor);
        }
    }

    // The buffer @va lies in, if any.
    const Mem* mem_at(std::uint64_t va) const {
        for (const auto& [h, m] : mem_)
            if (va >= m.va && va - m.va < m.size)
                return &m;
        return nullptr;
    }

    int execute(const SubmitArgs& a) {
        allowed_.clear();
        allowed_.insert(a.cmd_handle);
        for (std::uint32_t h : a.bo_handles)
            allowed_.insert(h);
        const Mem& cmd = mem_.at(a.cmd_handle);
        const std::byte* p = cmd.ptr + a.cmd_offset;
        std::uint64_t off = 0;
        try {
            while (off < a.cmd_size) {
                std::uint32_t hdr = 0;
                std::memcpy(&hdr, p + off, 4);
                const std::uint32_t op = RBLN_FW_PKT_OP(hdr);
                const std::uint32_t bytes = RBLN_FW_PKT_BYTES(hdr);
                ops.push_back(op);
                if (bytes == 0 || off + bytes > a.cmd_size || RBLN_FW_PKT_FLAGS(hdr) != 0)
                    throw JobFault{EINVAL};
                if (op == RBLN_FW_PKT_NOP) {
                    // nothing to do
                } else if (op == RBLN_FW_PKT_COPY && bytes == sizeof(rbln_fw_pkt_copy)) {
                    rbln_fw_pkt_copy c{};
                    std::memcpy(&c, p + off, sizeof(c));
                    const std::byte* src = at(c.src, c.size, false);
                    std::memmove(at(c.dst, c.size, true), src, c.size);
                    corrupt(c);
                } else if (op == RBLN_FW_PKT_TIMESTAMP && bytes == sizeof(rbln_fw_pkt_timestamp)) {
                    rbln_fw_pkt_timestamp ts{};
                    std::memcpy(&ts, p + off, sizeof(ts));
                    clock_ns_ += 1000;
                    std::memcpy(at(ts.va, 8, true), &clock_ns_, 8);
                } else if (op == RBLN_FW_PKT_LAUNCH && bytes == sizeof(rbln_fw_pkt_launch)) {
                    rbln_fw_pkt_launch l{};
                    std::memcpy(&l, p + off, sizeof(l));
                    launches.push_back(l);
                    launch(l);
                } else {
                    throw JobFault{EINVAL};
                }
                off += bytes;
            }
        } catch (const JobFault& f) {
            return f.err;
        }
        return 0;
    }

    // corrupt_element, on the first copy from HBM to host memory.
    void corrupt(const rbln_fw_pkt_copy& c) {
        const Mem* src = mem_at(c.src);
        const Mem* dst = mem_at(c.dst);
        if (!corrupt_element || src == nullptr || dst == nullptr || !src->hbm || dst->hbm)
            return;
        const std::span<std::byte> y(at(c.dst, c.size, true), c.size);
        const std::size_t i = *std::exchange(corrupt_element, std::nullopt);
        store(corrupt_type, y, i, load(corrupt_type, y, i) + 1.0F);
    }

public:
    /// The chiplet whose HBM holds @va, nullopt if it is not in HBM.
    std::optional<std::uint32_t> hbm_chiplet(std::uint64_t va) const {
        const Mem* m = mem_at(va);
        return m != nullptr && m->hbm ? std::optional(m->chiplet) : std::nullopt;
    }

private:
    std::map<std::uint32_t, Mem> mem_;
    std::set<std::uint32_t> allowed_;
    std::optional<Fault> fault_;
    std::map<std::pair<std::uint32_t, std::uint64_t>, int> job_errors_;
    std::uint64_t clock_ns_ = 1000000;
};

} // namespace rbln::demo::test
