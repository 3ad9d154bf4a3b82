// SPDX-License-Identifier: GPL-2.0
// distributed.cpp - the torch.distributed backend "rbln": a
// c10d::ProcessGroup for tensors on rbln devices that stages them through
// librbln pinned host memory into a gloo process group (TCP between
// processes and machines).
//
// Each collective: the rank's device tensor is copied into a pinned host
// block of its logical device (rbln::process_host_allocator, a caching
// allocator of page-locked, card-registered blocks, so the download is one
// DMA), gloo runs the collective on the host copies, and the result is
// copied back into the device tensor.  The calls are synchronous: the
// returned Work is complete (its future holds the device tensors), so DDP's
// reducer and Python's wait() see the result at once.
//
// What gloo lacks is built here: AVG (SUM, then a division on the host
// copy), reduce_scatter (an allreduce of the whole input, each rank keeping
// its chunk: world-size times the bytes of a native reduce_scatter),
// _allgather_base and _reduce_scatter_base (one flat host buffer), bfloat16
// (staged as float32).
//
// One tensor per rank and call (a process drives one card, as with NCCL);
// tensors on the CPU or on two devices in one call are refused with a
// TypeError / ValueError naming what to do.
#include "backend.hpp"

#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <cstring>

#include "rbln/host_allocator.hpp"

namespace py = pybind11;

namespace torch_rbln {

namespace {

const char* const kWho = "rbln process group";

// The dtype of the host copy: gloo has no bfloat16.
c10::ScalarType staging_dtype(c10::ScalarType t) {
    return t == c10::ScalarType::BFloat16 ? c10::ScalarType::Float : t;
}

// A contiguous CPU tensor of @sizes in pinned host memory of logical device
// @index (the block returns to the allocator's cache with the tensor).
at::Tensor pinned_empty(at::IntArrayRef sizes, c10::ScalarType dtype, unsigned index) {
    std::uint64_t n = c10::elementSize(dtype);
    for (const auto s : sizes)
        n *= static_cast<std::uint64_t>(s);
    auto block = std::make_shared<rbln::HostBlock>(rbln_call([&] {
        return rbln::process_host_allocator(index).allocate(std::max<std::uint64_t>(n, 1));
    }));
    std::byte* data = block->data();
    return at::from_blob(
        data, sizes, [block](void*) mutable { block.reset(); },
        at::TensorOptions().dtype(dtype).device(at::kCPU));
}

// Checks that @t is a tensor on an rbln device; returns its index.
unsigned device_of_tensor(const at::Tensor& t, const char* op) {
    TORCH_CHECK_TYPE(t.defined(), kWho, ": ", op, " got an undefined tensor");
    TORCH_CHECK_TYPE(t.device().type() == c10::DeviceType::PrivateUse1, kWho, ": ", op,
                     " takes tensors on an rbln device (",
                     c10::DeviceTypeName(c10::DeviceType::PrivateUse1, true), ":N), got one on ",
                     t.device().str(),
                     "; move it to the rank's card with .to(torch_rbln.device_of(n)), or use a "
                     "gloo process group for CPU tensors");
    check_dtype(t.scalar_type());
    return device_index(t.device());
}

// Checks that every tensor of @ts is on the device of @first.
void same_device(const at::Tensor& first, at::TensorList ts, const char* op) {
    for (const auto& t : ts) {
        device_of_tensor(t, op);
        TORCH_CHECK_VALUE(t.device() == first.device(), kWho, ": ", op,
                          " takes the tensors of one call on one rbln device, got ",
                          first.device().str(), " and ", t.device().str());
    }
}

// The single tensor of @ts (one card per rank).
const at::Tensor& single(at::TensorList ts, const char* op) {
    TORCH_CHECK_VALUE(ts.size() == 1, kWho, ": ", op,
                      " takes one tensor per rank (each process drives one card), got ", ts.size());
    device_of_tensor(ts[0], op);
    return ts[0];
}

void same_shape(const at::Tensor& a, const at::Tensor& b, const char* op) {
    TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes(), kWho, ": ", op,
                      " needs tensors of one dtype and shape, got ", a.scalar_type(), a.sizes(),
                      " and ", b.scalar_type(), b.sizes());
}

// The host copy of device tensor @t (pinned, contiguous).
at::Tensor stage_in(const at::Tensor& t) {
    at::Tensor h =
        pinned_empty(t.sizes(), staging_dtype(t.scalar_type()), device_index(t.device()));
    h.copy_(t);
    return h;
}

// A complete Work whose future holds @result.
c10::intrusive_ptr<c10d::Work> completed(std::vector<at::Tensor> result) {
    auto fut =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    fut->markCompleted(c10::IValue(std::move(result)));
    return c10d::Work::create_from_future(fut);
}

// gloo's options for @op: AVG becomes SUM (divided afterwards).
struct Reduction {
    c10d::ReduceOp gloo_op;
    bool average = false;
};

Reduction reduction_of(const c10d::ReduceOp& op, const at::Tensor& t, const char* what) {
    TORCH_CHECK_VALUE(op.op_ != c10d::ReduceOp::PREMUL_SUM, kWho, ": ", what,
                      ": PREMUL_SUM is NCCL's; scale the tensor and use SUM");
    if (op.op_ != c10d::ReduceOp::AVG)
        return {op, false};
    TORCH_CHECK_TYPE(at::isFloatingType(t.scalar_type()), kWho, ": ", what,
                     ": AVG needs a floating-point tensor, got ", t.scalar_type(),
                     "; use SUM and divide");
    return {c10d::ReduceOp(c10d::ReduceOp::SUM), true};
}

class ProcessGroupRBLN final : public c10d::ProcessGroup {
public:
    ProcessGroupRBLN(c10::intrusive_ptr<c10d::ProcessGroup> gloo, int rank, int size)
        : ProcessGroup(rank, size), gloo_(std::move(gloo)) {
        TORCH_CHECK_VALUE(gloo_->getRank() == rank && gloo_->getSize() == size, kWho,
                          ": the gloo group is rank ", gloo_->getRank(), " of ", gloo_->getSize(),
                          ", expected ", rank, " of ", size);
        init();
    }

    const std::string getBackendName() const override { return "rbln"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const c10d::BroadcastOptions& opts) override {
        const at::Tensor& t = single(tensors, "broadcast");
        at::Tensor h =
            opts.rootRank == rank_
                ? stage_in(t)
                : pinned_empty(t.sizes(), staging_dtype(t.scalar_type()), device_index(t.device()));
        std::vector<at::Tensor> v{h};
        gloo_->broadcast(v, opts)->wait();
        if (opts.rootRank != rank_)
            t.copy_(h);
        return completed(tensors);
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& opts) override {
        const at::Tensor& t = single(tensors, "all_reduce");
        t.copy_(host_allreduce(stage_in(t), opts.reduceOp, "all_reduce"));
        return completed(tensors);
    }

    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor>& tensors,
                        const c10d::AllreduceCoalescedOptions& opts) override {
        TORCH_CHECK_VALUE(!tensors.empty(), kWho, ": all_reduce_coalesced got no tensors");
        same_device(tensors[0], tensors, "all_reduce_coalesced");
        for (auto& t : tensors)
            t.copy_(host_allreduce(stage_in(t), opts.reduceOp, "all_reduce_coalesced"));
        return completed(tensors);
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const c10d::ReduceOptions& opts) override {
        const at::Tensor& t = single(tensors, "reduce");
        const Reduction r = reduction_of(opts.reduceOp, t, "reduce");
        std::vector<at::Tensor> v{stage_in(t)};
        c10d::ReduceOptions o = opts;
        o.reduceOp = r.gloo_op;
        gloo_->reduce(v, o)->wait();
        if (opts.rootRank == rank_) {
            if (r.average)
                v[0].div_(size_);
            t.copy_(v[0]);
        }
        return completed(tensors);
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const c10d::AllgatherOptions& opts) override {
        const at::Tensor& in = single(inputs, "all_gather");
        TORCH_CHECK_VALUE(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                          kWho, ": all_gather takes one list of ", size_,
                          " output tensors (the world size)");
        same_device(in, outputs[0], "all_gather");
        for (const auto& o : outputs[0])
            same_shape(in, o, "all_gather");
        auto parts = gather_host(in, opts);
        for (int r = 0; r < size_; r++)
            outputs[0][r].copy_(parts[r]);
        return completed(outputs[0]);
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override {
        const at::Tensor& in = single(at::TensorList(input), "all_gather_into_tensor");
        same_device(in, at::TensorList(output), "all_gather_into_tensor");
        TORCH_CHECK_VALUE(
            output.scalar_type() == in.scalar_type() && output.numel() == in.numel() * size_, kWho,
            ": all_gather_into_tensor needs an output of the input's dtype "
            "and world size times its elements");
        auto parts = gather_host(in, opts);
        output.copy_(parts[0].as_strided({in.numel() * size_}, {1}).view(output.sizes()));
        return completed({output});
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ReduceScatterOptions& opts) override {
        const at::Tensor& out = single(outputs, "reduce_scatter");
        TORCH_CHECK_VALUE(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                          kWho, ": reduce_scatter takes one list of ", size_,
                          " input tensors (the world size)");
        same_device(out, inputs[0], "reduce_scatter");
        for (const auto& i : inputs[0])
            same_shape(out, i, "reduce_scatter");
        std::vector<std::int64_t> sizes{size_};
        sizes.insert(sizes.end(), out.sizes().begin(), out.sizes().end());
        at::Tensor h =
            pinned_empty(sizes, staging_dtype(out.scalar_type()), device_index(out.device()));
        for (int r = 0; r < size_; r++)
            h[r].copy_(inputs[0][r]);
        out.copy_(host_allreduce(h, opts.reduceOp, "reduce_scatter")[rank_]);
        return completed(outputs);
    }

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                         const c10d::ReduceScatterOptions& opts) override {
        const at::Tensor& out = single(at::TensorList(output), "reduce_scatter_tensor");
        same_device(out, at::TensorList(input), "reduce_scatter_tensor");
        TORCH_CHECK_VALUE(
            input.scalar_type() == out.scalar_type() && input.numel() == out.numel() * size_, kWho,
            ": reduce_scatter_tensor needs an input of the output's dtype "
            "and world size times its elements");
        at::Tensor h = host_allreduce(stage_in(input.reshape({size_, out.numel()})), opts.reduceOp,
                                      "reduce_scatter_tensor");
        out.copy_(h[rank_].view(out.sizes()));
        return completed({output});
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                        int tag) override {
        std::vector<at::Tensor> v{stage_in(single(tensors, "send"))};
        gloo_->send(v, dst, tag)->wait();
        return completed(tensors);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                        int tag) override {
        const at::Tensor& t = single(tensors, "recv");
        std::vector<at::Tensor> v{
            pinned_empty(t.sizes(), staging_dtype(t.scalar_type()), device_index(t.device()))};
        gloo_->recv(v, src, tag)->wait();
        t.copy_(v[0]);
        return completed(tensors);
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
        gloo_->barrier(opts)->wait();
        return completed({});
    }

    void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
    uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }

    const c10::intrusive_ptr<c10d::ProcessGroup>& gloo() const { return gloo_; }

private:
    // Reduces host tensor @h across the ranks in place; returns it.
    at::Tensor host_allreduce(at::Tensor h, const c10d::ReduceOp& op, const char* what) {
        const Reduction r = reduction_of(op, h, what);
        std::vector<at::Tensor> v{h};
        c10d::AllreduceOptions o;
        o.reduceOp = r.gloo_op;
        gloo_->allreduce(v, o)->wait();
        if (r.average)
            h.div_(size_);
        return h;
    }

    // Every rank's copy of device tensor @in, as views of one pinned buffer.
    std::vector<at::Tensor> gather_host(const at::Tensor& in, const c10d::AllgatherOptions& opts) {
        std::vector<std::int64_t> sizes{size_};
        sizes.insert(sizes.end(), in.sizes().begin(), in.sizes().end());
        at::Tensor all =
            pinned_empty(sizes, staging_dtype(in.scalar_type()), device_index(in.device()));
        std::vector<at::Tensor> parts;
        for (int r = 0; r < size_; r++)
            parts.push_back(all[r]);
        std::vector<std::vector<at::Tensor>> outs{parts};
        std::vector<at::Tensor> ins{stage_in(in)};
        gloo_->allgather(outs, ins, opts)->wait();
        return parts;
    }

    c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
};

} // namespace

// The collectives reach the process group through the dispatcher (c10d::
// allreduce_ and the rest, Ops.hpp), whose kernels cover every backend key
// but no autograd key: 1.13 gives AutogradCPU, AutogradCUDA and a few more
// a fallthrough (VariableFallbackKernel.cpp), not AutogradPrivateUse1, so
// without these an rbln tensor stops at "Could not run 'c10d::allreduce_'
// with arguments from the 'AutogradPrivateUse1' backend".  Collectives are
// not differentiated (as on CPU and CUDA).
TORCH_LIBRARY_IMPL(c10d, AutogradPrivateUse1, m) {
    for (const char* op : {"allgather_", "allreduce_", "alltoall_", "barrier", "broadcast_",
                           "gather_", "recv_", "reduce_", "reduce_scatter_", "scatter_", "send"})
        m.impl(op, torch::CppFunction::makeFallthrough());
}

void register_distributed(py::module_& m) {
    // @gloo: a ProcessGroupGloo made on the same store (torch_rbln/_distributed.py).
    m.def(
        "new_process_group",
        [](c10d::ProcessGroup& gloo, int rank, int size) -> c10::intrusive_ptr<c10d::ProcessGroup> {
            auto g = c10::intrusive_ptr<c10d::ProcessGroup>::unsafe_reclaim_from_nonowning(&gloo);
            return c10::make_intrusive<ProcessGroupRBLN>(std::move(g), rank, size);
        },
        py::arg("gloo"), py::arg("rank"), py::arg("size"));
    // The gloo group under an rbln group (bench: the same collective on CPU tensors).
    m.def("staging_group", [](c10d::ProcessGroup& pg) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        auto* r = dynamic_cast<ProcessGroupRBLN*>(&pg);
        TORCH_CHECK_TYPE(r != nullptr, "staging_group: not an rbln process group (",
                         pg.getBackendName(), ")");
        return r->gloo();
    });
}

} // namespace torch_rbln
