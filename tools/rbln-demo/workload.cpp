// SPDX-License-Identifier: GPL-2.0
// workload.cpp - the demo's job on the card (see workload.hpp).

#include "workload.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <sstream>
#include <vector>

#include "buffers.hpp"
#include "cmdbuf.hpp"
#include "drm/rbln_accel.h"

namespace rbln::demo {

namespace {

std::int64_t monotonic_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct Named {
    const char* name;
    const DeviceBuffer* buf;
};

std::string hex(std::uint64_t v) {
    std::ostringstream s;
    s << "0x" << std::hex << v;
    return s.str();
}

// What a job error (-errno in WAIT's job_error) means, per rbln_accel.h.
std::string job_error_meaning(int err) {
    switch (err) {
    case EFAULT:
        return "the card's MMU faulted on an access of the job";
    case EINVAL:
        return "the card refused a packet of the command buffer (bad packet)";
    case EPERM:
        return "the command buffer holds a privileged packet";
    case EIO:
        return "a DMA error on the card, or the job was aborted";
    case ETIMEDOUT:
        return "the job timed out on the card (a hang?)";
    case ECANCELED:
        return "the card was reset while the job ran";
    default:
        return "the job failed on the card";
    }
}

// For an MMU fault: where, how, and in which of our buffers.
std::string fault_detail(KernelInterface& kernel, std::span<const Named> bufs) {
    drm_rbln_info_vm vm{};
    try {
        kernel.get_info(RBLN_INFO_VM, std::as_writable_bytes(std::span(&vm, 1)));
    } catch (const Error& e) {
        return std::string("; RBLN_INFO_VM: ") + e.what();
    }
    if ((vm.flags & RBLN_VM_FAULTED) == 0)
        return "";
    std::string out = "; first fault at device VA " + hex(vm.fault_va);
    out += vm.fault_access == RBLN_ACCESS_WRITE ? " (write" : " (read";
    static constexpr std::array<const char*, 8> kReasons = {"?",
                                                            "not mapped",
                                                            "read-only",
                                                            "write-only",
                                                            "bad page-table entry",
                                                            "memory the card lacks",
                                                            "no address space",
                                                            "beyond 48 bits"};
    out += ", ";
    out += vm.fault_reason < kReasons.size() ? kReasons[vm.fault_reason] : "?";
    out += ")";
    for (const Named& b : bufs)
        if (vm.fault_va >= b.buf->va() && vm.fault_va - b.buf->va() < b.buf->size())
            return out + ", in buffer " + b.name + " at offset " + hex(vm.fault_va - b.buf->va());
    return out + ", outside every buffer of the job";
}

std::uint64_t elapsed(std::uint64_t from, std::uint64_t to) noexcept {
    return to > from ? to - from : 0;
}

} // namespace

WorkloadResult run_workload(KernelInterface& kernel, const WorkloadOptions& o) {
    const DeviceIdentity id = query_device_identity(kernel);
    if (o.chiplet >= id.chiplet_count)
        throw Error(Errc::InvalidArgument, "--chiplet " + std::to_string(o.chiplet), kernel.path(),
                    0,
                    "the card has " + std::to_string(id.chiplet_count) +
                        " chiplet(s): pick one of 0.." + std::to_string(id.chiplet_count - 1));

    const Shape s = o.shape;
    const DType t = o.dtype;
    const std::size_t es = dtype_size(t);
    const std::uint64_t bx = s.m * s.k * es;
    const std::uint64_t bw = s.k * s.n * es;
    const std::uint64_t by = s.m * s.n * es;
    constexpr std::uint64_t kStampsBytes = 4096;

    // Host RAM: what the CPU writes and reads.  The card may only read x, w
    // and the command buffer.
    const DeviceBuffer hx(kernel, bx, RBLN_REGION_HOST, 0, RBLN_BO_DEVICE_READ_ONLY, true);
    const DeviceBuffer hw(kernel, bw, RBLN_REGION_HOST, 0, RBLN_BO_DEVICE_READ_ONLY, true);
    const DeviceBuffer hy(kernel, by, RBLN_REGION_HOST, 0, 0, true);
    const DeviceBuffer stamps(kernel, kStampsBytes, RBLN_REGION_HOST, 0, 0, true);
    // HBM of the chiplet: the tensors the kernels work on.
    const DeviceBuffer dx(kernel, bx, RBLN_REGION_HBM, o.chiplet, 0, false);
    const DeviceBuffer dw(kernel, bw, RBLN_REGION_HBM, o.chiplet, 0, false);
    const DeviceBuffer dmm(kernel, by, RBLN_REGION_HBM, o.chiplet, 0, false);
    const DeviceBuffer drelu(kernel, by, RBLN_REGION_HBM, o.chiplet, 0, false);
    const DeviceBuffer dy(kernel, by, RBLN_REGION_HBM, o.chiplet, 0, false);

    const std::vector<float> x = random_values(t, s.m * s.k, o.seed);
    const std::vector<float> w = random_values(t, s.k * s.n, o.seed ^ 0x5deece66dULL);
    for (std::size_t i = 0; i < x.size(); i++)
        store(t, hx.cpu(), i, x[i]);
    for (std::size_t i = 0; i < w.size(); i++)
        store(t, hw.cpu(), i, w[i]);
    // All-ones bytes are a NaN in every type: an element the card does not
    // write fails the check.
    std::memset(hy.cpu().data(), 0xff, by);
    std::memset(stamps.cpu().data(), 0, kStampsBytes);

    CommandBuffer cb;
    const auto stamp = [&](unsigned i) { cb.timestamp(stamps.va() + 8ULL * i); };
    stamp(0);
    cb.copy(hx.va(), dx.va(), bx);
    cb.copy(hw.va(), dw.va(), bw);
    stamp(1);
    cb.launch(matmul_launch(t, dx.va(), dw.va(), dmm.va(), s.m, s.k, s.n));
    stamp(2);
    cb.launch(relu_launch(t, dmm.va(), drelu.va(), s.m * s.n));
    cb.launch(scale_launch(t, drelu.va(), dy.va(), s.m * s.n, o.scale));
    stamp(3);
    cb.copy(dy.va(), hy.va(), by);
    stamp(4);

    const DeviceBuffer cmd(kernel, cb.size(), RBLN_REGION_HOST, 0, RBLN_BO_DEVICE_READ_ONLY, true);
    std::memcpy(cmd.cpu().data(), cb.bytes().data(), cb.size());

    const std::array<Named, 9> bufs = {{{"x (host)", &hx},
                                        {"w (host)", &hw},
                                        {"y (host)", &hy},
                                        {"timestamps (host)", &stamps},
                                        {"x (HBM)", &dx},
                                        {"w (HBM)", &dw},
                                        {"x@w (HBM)", &dmm},
                                        {"relu (HBM)", &drelu},
                                        {"y (HBM)", &dy}}};
    std::array<std::uint32_t, bufs.size()> handles{};
    std::transform(bufs.begin(), bufs.end(), handles.begin(),
                   [](const Named& b) { return b.buf->handle(); });

    WorkloadResult r;
    r.packets = cb.packets();
    r.cmd_bytes = cb.size();
    for (const Named& b : bufs) {
        if (b.buf->cpu().empty())
            r.hbm_bytes += b.buf->size();
        else
            r.host_bytes += b.buf->size();
    }
    r.host_bytes += cmd.size();

    const DeviceQueue queue(kernel, 1U << o.chiplet);
    r.queue_id = queue.id();
    SubmitArgs sub;
    sub.queue_id = queue.id();
    sub.cmd_handle = cmd.handle();
    sub.cmd_size = static_cast<std::uint32_t>(cb.size());
    sub.bo_handles = handles;
    const std::int64_t t0 = monotonic_ns();
    r.seqno = kernel.submit(sub);
    WaitArgs wa;
    wa.queue_id = queue.id();
    wa.seqno = r.seqno;
    wa.deadline_ns = t0 + std::chrono::nanoseconds(o.timeout).count();
    const WaitResult done = kernel.wait(wa);
    r.submit_to_done = std::chrono::nanoseconds(monotonic_ns() - t0);
    if (!done.done)
        throw Error(Errc::Timeout, "wait", kernel.path(), ETIME,
                    "the job did not finish within " + std::to_string(o.timeout.count()) +
                        " ms (is the card hung? see dmesg)");
    if (done.job_error != 0) {
        const int err = -done.job_error;
        const char* name = strerrorname_np(err);
        std::string msg = job_error_meaning(err) + " (" +
                          (name != nullptr ? name : "errno " + std::to_string(err)) + ")";
        if (err == EFAULT)
            msg += fault_detail(kernel, bufs);
        throw JobError("job " + std::to_string(r.seqno) + " on queue " + std::to_string(r.queue_id),
                       kernel.path(), err, msg);
    }

    std::array<std::uint64_t, 5> ts{};
    std::memcpy(ts.data(), stamps.cpu().data(), sizeof(ts));
    r.card.copy_in_ns = elapsed(ts[0], ts[1]);
    r.card.matmul_ns = elapsed(ts[1], ts[2]);
    r.card.relu_scale_ns = elapsed(ts[2], ts[3]);
    r.card.copy_out_ns = elapsed(ts[3], ts[4]);
    r.card.total_ns = elapsed(ts[0], ts[4]);

    std::vector<float> y(s.m * s.n);
    for (std::size_t i = 0; i < y.size(); i++)
        y[i] = load(t, hy.cpu(), i);

    const std::int64_t c0 = monotonic_ns();
    const Reference ref = reference(t, x, w, s, o.scale);
    r.cpu_reference = std::chrono::nanoseconds(monotonic_ns() - c0);
    r.check = check(y, ref);
    return r;
}

} // namespace rbln::demo
