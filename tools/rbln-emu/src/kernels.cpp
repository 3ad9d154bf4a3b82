// SPDX-License-Identifier: GPL-2.0
// Built-in kernels of LAUNCH: checking, staging tensors from MMU spans,
// and the computations (kernels.h).
#include "kernels.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "dma.h"
#include "fp.h"

namespace rbln::emu {

namespace {

using Shape = std::array<std::uint64_t, RBLN_FW_MAX_DIMS>;
using Strides = std::array<std::int64_t, RBLN_FW_MAX_DIMS>;
using Wide = __int128;

constexpr Wide kAddressSpace = static_cast<Wide>(1) << 64;

bool is_dtype(std::uint32_t dt) {
    return dt == simd::kF32 || dt == simd::kF16 || dt == simd::kBf16;
}

bool uses_b(std::uint32_t kernel) {
    return kernel == RBLN_FW_KERNEL_ADD || kernel == RBLN_FW_KERNEL_MUL ||
           kernel == RBLN_FW_KERNEL_MATMUL;
}

Strides strides_of(const __s64 (&s)[RBLN_FW_MAX_DIMS]) {
    Strides out{};
    std::copy(std::begin(s), std::end(s), out.begin());
    return out;
}

// The bytes a tensor's elements cover, relative to its address: [lo, hi).
struct Extent {
    Wide lo = 0; // <= 0
    Wide hi = 0; // > 0
};

Extent extent_of(unsigned ndim, const Shape& shape, const Strides& stride, std::size_t es) {
    Extent e;
    for (unsigned d = 0; d < ndim; d++) {
        const Wide reach = static_cast<Wide>(shape.at(d) - 1) * stride.at(d);
        if (reach < 0)
            e.lo += reach;
        else
            e.hi += reach;
    }
    e.lo *= static_cast<Wide>(es);
    e.hi = (e.hi + 1) * static_cast<Wide>(es);
    return e;
}

bool extent_fits(std::uint64_t va, const Extent& e) {
    const Wide first = static_cast<Wide>(va) + e.lo;
    const Wide end = static_cast<Wide>(va) + e.hi;
    return first >= 0 && end <= kAddressSpace;
}

// A tensor of the packet: its dims (the loop's, or MATMUL's two).
struct TensorDims {
    unsigned ndim = 0;
    Shape shape{};
    Strides stride{};
};

struct LaunchLayout {
    TensorDims a;
    TensorDims b;
    TensorDims out;
};

LaunchLayout layout_of(const rbln_fw_pkt_launch& p) {
    LaunchLayout l;
    const Strides sa = strides_of(p.stride_a);
    const Strides sb = strides_of(p.stride_b);
    const Strides so = strides_of(p.stride_out);
    if (p.kernel == RBLN_FW_KERNEL_MATMUL) {
        const std::uint64_t m = p.shape[0];
        const std::uint64_t n = p.shape[1];
        const std::uint64_t k = p.shape[2];
        l.a = {2, {m, k, 0, 0}, sa};
        l.b = {2, {k, n, 0, 0}, sb};
        l.out = {2, {m, n, 0, 0}, so};
        return l;
    }
    Shape shape{};
    std::copy(std::begin(p.shape), std::end(p.shape), shape.begin());
    l.a = {p.ndim, shape, sa};
    l.b = {p.ndim, shape, sb};
    l.out = {p.ndim, shape, so};
    return l;
}

// --- loops over the elements --------------------------------------------------

// Up to three tensors walked together: dims of size 1 dropped, dims merged
// while every tensor is contiguous across them, innermost last.
struct Loop {
    unsigned ndim = 0;
    Shape shape{};
    std::array<Strides, 3> stride{};
};

Loop collapse(unsigned ndim, const Shape& shape, const std::array<Strides, 3>& stride,
              unsigned tensors) {
    Loop l;
    for (unsigned d = 0; d < ndim; d++) {
        if (shape.at(d) == 1)
            continue;
        const unsigned at = l.ndim;
        l.shape.at(at) = shape.at(d);
        for (unsigned t = 0; t < tensors; t++)
            l.stride.at(t).at(at) = stride.at(t).at(d);
        l.ndim++;
    }
    if (l.ndim == 0) {
        l.ndim = 1;
        l.shape[0] = 1;
        return l;
    }
    // Merge dim d (outer) into d + 1 when contiguous for every tensor.
    Loop m;
    m.ndim = 1;
    m.shape[0] = l.shape[0];
    for (unsigned t = 0; t < tensors; t++)
        m.stride.at(t)[0] = l.stride.at(t)[0];
    for (unsigned d = 1; d < l.ndim; d++) {
        const unsigned last = m.ndim - 1;
        bool mergeable = true;
        for (unsigned t = 0; t < tensors; t++) {
            const Wide outer = m.stride.at(t).at(last);
            const Wide inner = static_cast<Wide>(l.stride.at(t).at(d)) * l.shape.at(d);
            mergeable = mergeable && outer == inner;
        }
        if (mergeable) {
            m.shape.at(last) *= l.shape.at(d);
            for (unsigned t = 0; t < tensors; t++)
                m.stride.at(t).at(last) = l.stride.at(t).at(d);
        } else {
            m.shape.at(m.ndim) = l.shape.at(d);
            for (unsigned t = 0; t < tensors; t++)
                m.stride.at(t).at(m.ndim) = l.stride.at(t).at(d);
            m.ndim++;
        }
    }
    return m;
}

// Calls row(offsets of element 0 of the row, in elements, per tensor) for
// every row of the innermost dim, until it returns false; false when it
// did or the checkpoint (every 64 rows) said to stop.
template <typename Row>
bool for_each_row(const Loop& l, unsigned tensors, Checkpoint* cp, Row&& row) {
    const int outer = static_cast<int>(l.ndim) - 1; // dims 0..outer-1 are the outer loops
    std::array<std::uint64_t, RBLN_FW_MAX_DIMS> idx{};
    std::array<std::int64_t, 3> off{};
    std::uint64_t rows = 0;
    while (true) {
        if (cp != nullptr && (++rows & 63U) == 0 && !cp->proceed())
            return false;
        if (!row(off))
            return false;
        int d = outer - 1;
        for (; d >= 0; d--) {
            const auto u = static_cast<unsigned>(d);
            idx.at(u)++;
            for (unsigned t = 0; t < tensors; t++)
                off.at(t) += l.stride.at(t).at(u);
            if (idx.at(u) < l.shape.at(u))
                break;
            for (unsigned t = 0; t < tensors; t++)
                off.at(t) -= static_cast<std::int64_t>(l.shape.at(u)) * l.stride.at(t).at(u);
            idx.at(u) = 0;
        }
        if (d < 0)
            return true;
    }
}

constexpr std::size_t kChunk = 512; // fp32 elements per pass over a row

// n elements of dt from p (stride in elements, any sign) into dst.
void gather(const simd::Ops& ops, std::uint32_t dt, const std::byte* p, std::int64_t stride,
            float* dst, std::size_t n) {
    const std::size_t es = simd::elem_size(dt);
    if (stride == 1) {
        ops.load(dt, p, dst, n);
        return;
    }
    if (stride == 0) {
        float v = 0;
        ops.load(dt, p, &v, 1);
        std::fill_n(dst, n, v);
        return;
    }
    const std::ptrdiff_t step =
        static_cast<std::ptrdiff_t>(stride) * static_cast<std::ptrdiff_t>(es);
    for (std::size_t i = 0; i < n; i++)
        ops.load(dt, p + static_cast<std::ptrdiff_t>(i) * step, dst + i, 1);
}

void scatter(const simd::Ops& ops, std::uint32_t dt, const float* src, std::byte* p,
             std::int64_t stride, std::size_t n) {
    const std::size_t es = simd::elem_size(dt);
    if (stride == 1) {
        ops.store(dt, src, p, n);
        return;
    }
    const std::ptrdiff_t step =
        static_cast<std::ptrdiff_t>(stride) * static_cast<std::ptrdiff_t>(es);
    for (std::size_t i = 0; i < n; i++)
        ops.store(dt, src + i, p + static_cast<std::ptrdiff_t>(i) * step, 1);
}

std::byte* at(const TensorRef& t, std::int64_t elems, std::size_t es) {
    return t.base + static_cast<std::ptrdiff_t>(elems) * static_cast<std::ptrdiff_t>(es);
}

// --- staging tensors from MMU spans -------------------------------------------

// A tensor's bytes: translated, then used in place (one span) or staged
// through a contiguous copy.
struct Staged {
    std::vector<HostSpan> spans;
    std::vector<std::byte> copy;
    Extent extent;
    std::size_t es = 0;
    TensorDims dims;
    TensorRef ref;

    [[nodiscard]] std::uint64_t bytes() const {
        return static_cast<std::uint64_t>(extent.hi - extent.lo);
    }
    [[nodiscard]] bool direct() const { return spans.size() == 1; }
    // Computed through the copy (else used in place).
    [[nodiscard]] bool staged() const { return !copy.empty(); }

    std::optional<MmuFault> translate(JobMemory& mem, std::uint64_t va, Access access) {
        const auto first = static_cast<std::uint64_t>(static_cast<Wide>(va) + extent.lo);
        return mem.translate(first, bytes(), access, spans);
    }

    // In place: element 0 is -lo bytes into the single span.
    void use_in_place() {
        ref.base = spans[0].data() - static_cast<std::ptrdiff_t>(extent.lo);
        ref.stride = dims.stride;
    }

    // Inputs: a snapshot of every byte.
    void stage_input() {
        copy.resize(bytes());
        std::byte* p = copy.data();
        for (const HostSpan& s : spans) {
            std::memcpy(p, s.data(), s.size());
            p += s.size();
        }
        ref.base = copy.data() - static_cast<std::ptrdiff_t>(extent.lo);
        ref.stride = dims.stride;
    }

    // Output: computed into the copy, written back element run by run.
    void stage_output() {
        copy.resize(bytes());
        ref.base = copy.data() - static_cast<std::ptrdiff_t>(extent.lo);
        ref.stride = dims.stride;
    }

    // Copies [off, off + len) of the extent from the staging copy to the
    // spans, from span `i` on (the span holding off).
    void write_back_run(std::uint64_t off, std::uint64_t len, std::size_t& i,
                        std::uint64_t& span_start) {
        while (span_start + spans[i].size() <= off) {
            span_start += spans[i].size();
            i++;
        }
        while (span_start > off) {
            i--;
            span_start -= spans[i].size();
        }
        while (len > 0) {
            const std::uint64_t in = off - span_start;
            const std::uint64_t n = std::min<std::uint64_t>(len, spans[i].size() - in);
            std::memcpy(spans[i].data() + in, copy.data() + off, n);
            off += n;
            len -= n;
            if (len > 0) {
                span_start += spans[i].size();
                i++;
            }
        }
    }

    void write_back() {
        const std::array<Strides, 3> st{dims.stride, {}, {}};
        const Loop l = collapse(dims.ndim, dims.shape, st, 1);
        const std::int64_t inner = l.stride[0].at(l.ndim - 1);
        const std::uint64_t n = l.shape.at(l.ndim - 1);
        std::size_t i = 0;
        std::uint64_t span_start = 0;
        const auto lo = static_cast<std::int64_t>(extent.lo);
        (void)for_each_row(l, 1, nullptr, [&](const std::array<std::int64_t, 3>& off) {
            const std::int64_t row = off[0] * static_cast<std::int64_t>(es) - lo;
            if (inner == 1) {
                write_back_run(static_cast<std::uint64_t>(row), n * es, i, span_start);
                return true;
            }
            for (std::uint64_t e = 0; e < n; e++) {
                const std::int64_t at_byte =
                    row + static_cast<std::int64_t>(e) * inner * static_cast<std::int64_t>(es);
                write_back_run(static_cast<std::uint64_t>(at_byte), es, i, span_start);
            }
            return true;
        });
    }
};

} // namespace

// --- checking -------------------------------------------------------------------

const char* check_launch(const rbln_fw_pkt_launch& p) {
    if (p.kernel < RBLN_FW_KERNEL_ADD || p.kernel > RBLN_FW_KERNEL_CAST)
        return "unknown kernel";
    if (!is_dtype(p.dtype_in) || !is_dtype(p.dtype_out))
        return "unknown element type";
    const bool matmul = p.kernel == RBLN_FW_KERNEL_MATMUL;
    if (!matmul && p.kernel != RBLN_FW_KERNEL_CAST && p.dtype_in != p.dtype_out)
        return "dtype_out differs from dtype_in";
    if (matmul ? p.ndim != 2 : (p.ndim < 1 || p.ndim > RBLN_FW_MAX_DIMS))
        return matmul ? "MATMUL needs ndim 2" : "ndim not 1..4";
    // Dims in use: the loop's, or MATMUL's M, N, K (shape) and row/column
    // (strides).
    const unsigned shapes = matmul ? 3 : p.ndim;
    const unsigned strides = matmul ? 2 : p.ndim;
    Wide count = 1;
    for (unsigned d = 0; d < RBLN_FW_MAX_DIMS; d++) {
        if (d < shapes && p.shape[d] == 0)
            return "zero extent in shape";
        if (d >= shapes && p.shape[d] != 0)
            return "shape beyond ndim not zero";
        if (d >= strides && (p.stride_a[d] != 0 || p.stride_b[d] != 0 || p.stride_out[d] != 0))
            return "stride beyond ndim not zero";
        if (d < shapes) {
            count *= p.shape[d];
            if (count > static_cast<Wide>(1) << 62)
                return "too many elements";
        }
    }
    if (matmul) {
        // Dense fp32 A, B and C whatever the strides (run_matmul): with
        // broadcasting, far more than the tensors' memory.
        const Wide m = p.shape[0];
        const Wide n = p.shape[1];
        const Wide k = p.shape[2];
        if (m * k + k * n + m * n > RBLN_FW_MATMUL_MAX_ELEMS)
            return "MATMUL beyond the engine's working set (M*K + K*N + M*N > 2^27)";
    }
    if (!uses_b(p.kernel)) {
        if (p.b != 0)
            return "b given to a kernel without b";
        if (std::any_of(std::begin(p.stride_b), std::end(p.stride_b),
                        [](__s64 s) { return s != 0; }))
            return "stride_b given to a kernel without b";
    }
    if (p.kernel != RBLN_FW_KERNEL_SCALE && p.scale != 0)
        return "scale given to a kernel other than SCALE";
    const LaunchLayout l = layout_of(p);
    const std::size_t ei = simd::elem_size(p.dtype_in);
    const std::size_t eo = simd::elem_size(p.dtype_out);
    if (!extent_fits(p.a, extent_of(l.a.ndim, l.a.shape, l.a.stride, ei)))
        return "a beyond the address space";
    if (uses_b(p.kernel) && !extent_fits(p.b, extent_of(l.b.ndim, l.b.shape, l.b.stride, ei)))
        return "b beyond the address space";
    if (!extent_fits(p.out, extent_of(l.out.ndim, l.out.shape, l.out.stride, eo)))
        return "out beyond the address space";
    return nullptr;
}

LaunchReach launch_reach(const rbln_fw_pkt_launch& p) {
    const LaunchLayout l = layout_of(p);
    const std::size_t ei = simd::elem_size(p.dtype_in);
    const std::size_t eo = simd::elem_size(p.dtype_out);
    auto reach = [](const TensorDims& t, std::size_t es) {
        const Extent e = extent_of(t.ndim, t.shape, t.stride, es);
        return TensorReach{e.lo, e.hi};
    };
    LaunchReach r;
    r.a = reach(l.a, ei);
    r.uses_b = uses_b(p.kernel);
    if (r.uses_b)
        r.b = reach(l.b, ei);
    r.out = reach(l.out, eo);
    return r;
}

// --- computing --------------------------------------------------------------------

bool run_elementwise(std::uint32_t kernel, std::uint32_t dtype_in, std::uint32_t dtype_out,
                     std::uint32_t ndim, const Shape& shape, const TensorRef& a, const TensorRef& b,
                     const TensorRef& out, float scale, Checkpoint* cp, const simd::Ops& ops) {
    const bool two = kernel == RBLN_FW_KERNEL_ADD || kernel == RBLN_FW_KERNEL_MUL;
    const unsigned tensors = 3;
    const std::array<Strides, 3> st{a.stride, two ? b.stride : Strides{}, out.stride};
    const Loop l = collapse(ndim, shape, st, tensors);
    const unsigned in = l.ndim - 1;
    const std::uint64_t n = l.shape.at(in);
    const std::int64_t ia = l.stride[0].at(in);
    const std::int64_t ib = l.stride[1].at(in);
    const std::int64_t io = l.stride[2].at(in);
    const std::size_t ei = simd::elem_size(dtype_in);
    const std::size_t eo = simd::elem_size(dtype_out);
    std::array<float, kChunk> x{};
    std::array<float, kChunk> y{};
    // The tensors' bases may move at a checkpoint: every pointer into them
    // is taken after the last one.
    return for_each_row(l, tensors, cp, [&](const std::array<std::int64_t, 3>& off) {
        for (std::uint64_t i0 = 0; i0 < n; i0 += kChunk) {
            if (cp != nullptr && (i0 / kChunk) % 256 == 255 && !cp->proceed())
                return false;
            const std::size_t c = std::min<std::uint64_t>(kChunk, n - i0);
            const auto i = static_cast<std::int64_t>(i0);
            gather(ops, dtype_in, at(a, off[0] + i * ia, ei), ia, x.data(), c);
            switch (kernel) {
            case RBLN_FW_KERNEL_ADD:
                gather(ops, dtype_in, at(b, off[1] + i * ib, ei), ib, y.data(), c);
                ops.arith(simd::Op::add, x.data(), y.data(), 0.0F, c);
                break;
            case RBLN_FW_KERNEL_MUL:
                gather(ops, dtype_in, at(b, off[1] + i * ib, ei), ib, y.data(), c);
                ops.arith(simd::Op::mul, x.data(), y.data(), 0.0F, c);
                break;
            case RBLN_FW_KERNEL_RELU:
                ops.arith(simd::Op::relu, x.data(), nullptr, 0.0F, c);
                break;
            case RBLN_FW_KERNEL_SCALE:
                ops.arith(simd::Op::scale, x.data(), nullptr, scale, c);
                break;
            default: // CAST: the value as it is, rounded by the store
                break;
            }
            scatter(ops, dtype_out, x.data(), at(out, off[2] + i * io, eo), io, c);
        }
        return true;
    });
}

bool run_matmul(std::uint32_t dtype_in, std::uint32_t dtype_out, std::uint64_t m, std::uint64_t n,
                std::uint64_t k, const TensorRef& a, const TensorRef& b, const TensorRef& out,
                Checkpoint* cp, const simd::Ops& ops) {
    const std::size_t ei = simd::elem_size(dtype_in);
    const std::size_t eo = simd::elem_size(dtype_out);
    // Dense fp32 copies: A (m x k), B (k x n), C (m x n).
    std::vector<float> ad(m * k);
    std::vector<float> bd(k * n);
    std::vector<float> cd(m * n);
    for (std::uint64_t i = 0; i < m; i++)
        gather(ops, dtype_in, at(a, static_cast<std::int64_t>(i) * a.stride[0], ei), a.stride[1],
               &ad[i * k], k);
    for (std::uint64_t kk = 0; kk < k; kk++)
        gather(ops, dtype_in, at(b, static_cast<std::int64_t>(kk) * b.stride[0], ei), b.stride[1],
               &bd[kk * n], n);
    constexpr std::uint64_t kRowsPerStep = 96;
    for (std::uint64_t i0 = 0; i0 < m; i0 += kRowsPerStep) {
        if (cp != nullptr && !cp->proceed())
            return false; // the dense copies are ours: only out moves
        const std::uint64_t rows = std::min(kRowsPerStep, m - i0);
        ops.sgemm(rows, n, k, &ad[i0 * k], k, bd.data(), n, &cd[i0 * n], n);
    }
    for (std::uint64_t i = 0; i < m; i++)
        scatter(ops, dtype_out, &cd[i * n],
                at(out, static_cast<std::int64_t>(i) * out.stride[0], eo), out.stride[1], n);
    return true;
}

namespace {

// A LAUNCH's checkpoint: the ring's stop, and the MMU changes it lets pass.
// After one, every tensor translates again.  One used in place points at
// its memory anew; if that memory is no longer one span, an input is
// staged from it and an output too (from what it holds now, so elements
// written before stay as the new memory has them) and written back at the
// end.  A staged input keeps its snapshot; a staged output is written back
// to its new spans.  A tensor that no longer translates ends the packet
// with that fault.
class LaunchCheckpoint final : public Checkpoint {
public:
    LaunchCheckpoint(JobMemory& mem, const Cancel& cancel) : mem_(mem), cancel_(cancel) {}

    void watch(Staged& t, std::uint64_t va, Access access) { tensors_.push_back({&t, va, access}); }

    bool proceed() override {
        if (cancel_.load(std::memory_order_relaxed))
            return false;
        if (!mem_.yield())
            return true;
        for (const Watched& w : tensors_) {
            if (auto f = w.t->translate(mem_, w.va, w.access)) {
                fault_ = f;
                return false;
            }
            if (w.t->staged())
                continue;
            if (w.t->direct())
                w.t->use_in_place();
            else
                w.t->stage_input();
        }
        return true;
    }

    [[nodiscard]] const std::optional<MmuFault>& fault() const { return fault_; }

private:
    struct Watched {
        Staged* t;
        std::uint64_t va;
        Access access;
    };
    JobMemory& mem_;
    const Cancel& cancel_;
    std::vector<Watched> tensors_;
    std::optional<MmuFault> fault_;
};

} // namespace

PacketResult run_launch(const rbln_fw_pkt_launch& p, JobMemory& mem, const Cancel& cancel) {
    const LaunchLayout l = layout_of(p);
    const bool two = uses_b(p.kernel);
    const std::size_t ei = simd::elem_size(p.dtype_in);
    const std::size_t eo = simd::elem_size(p.dtype_out);
    Staged a;
    Staged b;
    Staged out;
    a.es = ei;
    b.es = ei;
    out.es = eo;
    a.dims = l.a;
    b.dims = l.b;
    out.dims = l.out;
    a.extent = extent_of(l.a.ndim, l.a.shape, l.a.stride, ei);
    b.extent = extent_of(l.b.ndim, l.b.shape, l.b.stride, ei);
    out.extent = extent_of(l.out.ndim, l.out.shape, l.out.stride, eo);

    // Every tensor translates before anything moves.
    if (auto f = a.translate(mem, p.a, Access::read))
        return PacketResult::mmu(*f);
    if (two) {
        if (auto f = b.translate(mem, p.b, Access::read))
            return PacketResult::mmu(*f);
    }
    if (auto f = out.translate(mem, p.out, Access::write))
        return PacketResult::mmu(*f);

    if (a.direct() && !dma::overlap(a.spans, out.spans))
        a.use_in_place();
    else
        a.stage_input();
    if (two) {
        if (b.direct() && !dma::overlap(b.spans, out.spans))
            b.use_in_place();
        else
            b.stage_input();
    }
    if (out.direct())
        out.use_in_place();
    else
        out.stage_output();

    LaunchCheckpoint cp(mem, cancel);
    cp.watch(a, p.a, Access::read);
    if (two)
        cp.watch(b, p.b, Access::read);
    cp.watch(out, p.out, Access::write);
    const simd::Ops& ops = simd::best();
    bool done = false;
    if (p.kernel == RBLN_FW_KERNEL_MATMUL) {
        done = run_matmul(p.dtype_in, p.dtype_out, p.shape[0], p.shape[1], p.shape[2], a.ref, b.ref,
                          out.ref, &cp, ops);
    } else {
        Shape shape{};
        std::copy(std::begin(p.shape), std::end(p.shape), shape.begin());
        done = run_elementwise(p.kernel, p.dtype_in, p.dtype_out, p.ndim, shape, a.ref,
                               two ? b.ref : TensorRef{}, out.ref, std::bit_cast<float>(p.scale),
                               &cp, ops);
    }
    if (!done)
        return cp.fault() ? PacketResult::mmu(*cp.fault()) : PacketResult::stopped();
    if (out.staged())
        out.write_back();
    return PacketResult::ok();
}

} // namespace rbln::emu
