// SPDX-License-Identifier: GPL-2.0
// ops.cpp - built-in kernels over lazy storages (rbln/ops.hpp).

#include "rbln/ops.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "exec/command.hpp"
#include "graph/capture.hpp"
#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/explain.hpp"
#include "rbln_fw_cmd.h"

namespace rbln::ops {

namespace {

[[noreturn]] void bad(const char* op, const std::string& why) {
    throw Error(Errc::InvalidArgument, op, "", 0, why);
}

std::string dims(const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); i++)
        s += (i != 0 ? "," : "") + std::to_string(v[i]);
    return s + "]";
}

/// The view's sizes/strides as the kernel sees them (0-D: one element).
struct Shape {
    std::vector<std::int64_t> sizes;
    std::vector<std::int64_t> strides;
};

Shape shape_of(const StorageView& v) {
    if (v.sizes.empty())
        return {{1}, {1}};
    return {v.sizes, v.strides};
}

// Checks @v: a storage, a float type, 1..4 dimensions, every element it
// reaches inside the storage.
void check_view(const char* op, const char* name, const StorageView& v, Stream& stream) {
    if (!v.storage)
        bad(op, std::string(name) + " has no storage");
    const ElementType t = v.storage->element_type();
    if (t != ElementType::Fp32 && t != ElementType::Fp16 && t != ElementType::Bf16)
        bad(op, std::string(name) + " has element type " +
                    std::to_string(static_cast<unsigned>(t)) + "; ops take fp32, fp16 or bf16");
    if (v.sizes.size() > RBLN_FW_MAX_DIMS)
        bad(op, std::string(name) + " has " + std::to_string(v.sizes.size()) +
                    " dimensions; at most 4");
    if (v.strides.size() != v.sizes.size())
        bad(op, std::string(name) + " has " + std::to_string(v.sizes.size()) + " sizes but " +
                    std::to_string(v.strides.size()) + " strides");
    const auto esize = static_cast<std::int64_t>(element_size(t));
    const auto total = static_cast<std::int64_t>(v.storage->nbytes()) / esize;
    std::int64_t lo = static_cast<std::int64_t>(v.offset);
    std::int64_t hi = lo;
    for (std::size_t d = 0; d < v.sizes.size(); d++) {
        if (v.sizes[d] <= 0)
            bad(op, std::string(name) + " has size " + std::to_string(v.sizes[d]) +
                        " in dimension " + std::to_string(d) + "; sizes are positive");
        const std::int64_t reach = (v.sizes[d] - 1) * v.strides[d];
        (reach < 0 ? lo : hi) += reach;
    }
    if (lo < 0 || hi >= total)
        bad(op, std::string(name) + " (offset " + std::to_string(v.offset) + ", sizes " +
                    dims(v.sizes) + ", strides " + dims(v.strides) +
                    ") reaches outside its storage of " + std::to_string(total) + " elements");
    if (&v.storage->device()->kernel() != &stream.device().kernel())
        bad(op, std::string(name) + " is on rbln:" + std::to_string(v.storage->device()->index()) +
                    " but the stream is on rbln:" + std::to_string(stream.device().index()));
}

std::uint64_t va_of(const std::shared_ptr<Memory>& m, const StorageView& v) {
    return m->device_va() + v.offset * element_size(v.storage->element_type());
}

DeviceAccess out_access(const StorageView& out, std::initializer_list<const StorageView*> inputs) {
    if (!out.covers_whole_storage())
        return DeviceAccess::ReadWrite;
    for (const StorageView* in : inputs)
        if (in->storage == out.storage)
            return DeviceAccess::ReadWrite;
    return DeviceAccess::Write;
}

std::uint64_t byte_offset(const StorageView& v) {
    return v.offset * element_size(v.storage->element_type());
}

/// While a capture is open somewhere: records the op if @stream captures
/// (true: nothing more to do), else refuses storages an open capture made
/// on another stream.
template <typename Pkt>
bool captured(const char* op, Stream& stream, std::uint32_t opcode, const Pkt& pkt,
              const std::array<detail::graph::Slot, RBLN_FW_GRAPH_OPERANDS>& slots) {
    if (!detail::graph::any_capture())
        return false;
    if (auto cap = detail::graph::capture_of(stream)) {
        cap->record(opcode, std::as_bytes(std::span<const Pkt>(&pkt, 1)), slots);
        return true;
    }
    for (const auto& s : slots)
        if (s.storage)
            detail::graph::check_outside_use(op, s.storage->id(), &stream);
    return false;
}

void copy_strides(std::array<std::int64_t, 4>& to, const std::vector<std::int64_t>& from) {
    std::copy(from.begin(), from.end(), to.begin());
}

// One elementwise kernel: out = kernel(a[, b]).
void elementwise(const char* op, std::uint32_t kernel, Stream& stream, const StorageView& out,
                 const StorageView& a, const StorageView* b, float factor, bool converts = false) {
    check_view(op, "out", out, stream);
    check_view(op, "a", a, stream);
    if (b != nullptr)
        check_view(op, "b", *b, stream);
    const Shape so = shape_of(out);
    const Shape sa = shape_of(a);
    for (const StorageView* in : {&a, b}) {
        if (in == nullptr)
            continue;
        const char* name = in == &a ? "a" : "b";
        if (shape_of(*in).sizes != so.sizes)
            bad(op, std::string(name) + "'s sizes " + dims(in->sizes) + " differ from out's " +
                        dims(out.sizes));
        if (!converts && in->storage->element_type() != out.storage->element_type())
            bad(op, std::string(name) + "'s element type differs from out's");
    }
    KernelLaunch l;
    l.kernel = kernel;
    l.dtype_in = static_cast<std::uint32_t>(a.storage->element_type());
    l.dtype_out = static_cast<std::uint32_t>(out.storage->element_type());
    l.ndim = static_cast<std::uint32_t>(so.sizes.size());
    l.scale = factor;
    for (std::size_t d = 0; d < so.sizes.size(); d++)
        l.shape[d] = static_cast<std::uint64_t>(so.sizes[d]);
    copy_strides(l.stride_a, sa.strides);
    copy_strides(l.stride_out, so.strides);
    if (b != nullptr)
        copy_strides(l.stride_b, shape_of(*b).strides);
    const DeviceAccess oa = b != nullptr ? out_access(out, {&a, b}) : out_access(out, {&a});
    if (captured(op, stream, RBLN_FW_PKT_LAUNCH, CommandEncoder::launch_packet(l),
                 {detail::graph::Slot{a.storage, byte_offset(a), DeviceAccess::Read},
                  b != nullptr
                      ? detail::graph::Slot{b->storage, byte_offset(*b), DeviceAccess::Read}
                      : detail::graph::Slot{},
                  detail::graph::Slot{out.storage, byte_offset(out), oa}}))
        return;

    std::vector<std::shared_ptr<Memory>> bufs;
    const auto& ma = a.storage->device_use(stream, DeviceAccess::Read);
    l.a = va_of(ma, a);
    bufs.push_back(ma);
    if (b != nullptr) {
        const auto& mb = b->storage->device_use(stream, DeviceAccess::Read);
        l.b = va_of(mb, *b);
        bufs.push_back(mb);
    }
    const auto& mo = out.storage->device_use(stream, oa);
    l.out = va_of(mo, out);
    bufs.push_back(mo);
    stream.launch(l, bufs);
}

} // namespace

void add(Stream& stream, const StorageView& out, const StorageView& a, const StorageView& b,
         rbln::source_location where) {
    const ExplainSite site(where);
    elementwise("add", RBLN_FW_KERNEL_ADD, stream, out, a, &b, 1.0F);
}

void mul(Stream& stream, const StorageView& out, const StorageView& a, const StorageView& b,
         rbln::source_location where) {
    const ExplainSite site(where);
    elementwise("mul", RBLN_FW_KERNEL_MUL, stream, out, a, &b, 1.0F);
}

void relu(Stream& stream, const StorageView& out, const StorageView& a,
          rbln::source_location where) {
    const ExplainSite site(where);
    elementwise("relu", RBLN_FW_KERNEL_RELU, stream, out, a, nullptr, 1.0F);
}

void scale(Stream& stream, const StorageView& out, const StorageView& a, float factor,
           rbln::source_location where) {
    const ExplainSite site(where);
    elementwise("scale", RBLN_FW_KERNEL_SCALE, stream, out, a, nullptr, factor);
}

void cast(Stream& stream, const StorageView& out, const StorageView& a,
          rbln::source_location where) {
    const ExplainSite site(where);
    elementwise("cast", RBLN_FW_KERNEL_CAST, stream, out, a, nullptr, 1.0F, true);
}

void matmul(Stream& stream, const StorageView& out, const StorageView& a, const StorageView& b,
            rbln::source_location where) {
    const ExplainSite site(where);
    constexpr const char* op = "matmul";
    check_view(op, "out", out, stream);
    check_view(op, "a", a, stream);
    check_view(op, "b", b, stream);
    for (const StorageView* v : {&out, &a, &b})
        if (v->sizes.size() != 2)
            bad(op, std::string(v == &out ? "out"
                                : v == &a ? "a"
                                          : "b") +
                        " has sizes " + dims(v->sizes) + "; matmul takes 2-D views");
    const std::int64_t m = a.sizes[0];
    const std::int64_t k = a.sizes[1];
    const std::int64_t n = b.sizes[1];
    if (b.sizes[0] != k)
        bad(op, "a is " + dims(a.sizes) + " and b " + dims(b.sizes) +
                    ": b needs as many rows as a has columns");
    if (out.sizes[0] != m || out.sizes[1] != n)
        bad(op, "out is " + dims(out.sizes) + "; a @ b is [" + std::to_string(m) + "," +
                    std::to_string(n) + "]");
    // The card holds A, B and C in fp32, whatever the strides.
    using Wide = unsigned __int128;
    const auto um = static_cast<std::uint64_t>(m);
    const auto uk = static_cast<std::uint64_t>(k);
    const auto un = static_cast<std::uint64_t>(n);
    const Wide work = Wide{um} * uk + Wide{uk} * un + Wide{um} * un;
    if (work > RBLN_FW_MATMUL_MAX_ELEMS)
        bad(op, "a @ b of [" + std::to_string(m) + "," + std::to_string(k) + "] @ [" +
                    std::to_string(k) + "," + std::to_string(n) +
                    "] needs a working set of M*K + K*N + M*N elements beyond the card's " +
                    std::to_string(RBLN_FW_MATMUL_MAX_ELEMS) +
                    " (RBLN_FW_MATMUL_MAX_ELEMS); split a into row blocks");
    const ElementType tin = a.storage->element_type();
    const ElementType tout = out.storage->element_type();
    if (b.storage->element_type() != tin)
        bad(op, "a and b have different element types");
    if (tout != tin && tout != ElementType::Fp32)
        bad(op, "out's element type must be a's or fp32");
    KernelLaunch l;
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = static_cast<std::uint32_t>(tin);
    l.dtype_out = static_cast<std::uint32_t>(tout);
    l.ndim = 2;
    l.shape = {static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(n),
               static_cast<std::uint64_t>(k), 0};
    copy_strides(l.stride_a, a.strides);
    copy_strides(l.stride_b, b.strides);
    copy_strides(l.stride_out, out.strides);
    const DeviceAccess oa = out_access(out, {&a, &b});
    if (captured(op, stream, RBLN_FW_PKT_LAUNCH, CommandEncoder::launch_packet(l),
                 {detail::graph::Slot{a.storage, byte_offset(a), DeviceAccess::Read},
                  detail::graph::Slot{b.storage, byte_offset(b), DeviceAccess::Read},
                  detail::graph::Slot{out.storage, byte_offset(out), oa}}))
        return;
    const auto& ma = a.storage->device_use(stream, DeviceAccess::Read);
    const auto& mb = b.storage->device_use(stream, DeviceAccess::Read);
    const auto& mo = out.storage->device_use(stream, oa);
    l.a = va_of(ma, a);
    l.b = va_of(mb, b);
    l.out = va_of(mo, out);
    const std::shared_ptr<Memory> bufs[] = {ma, mb, mo};
    stream.launch(l, bufs);
}

namespace {

std::uint64_t contiguous_bytes(const char* op, const char* name, const StorageView& v) {
    if (!v.storage)
        bad(op, std::string(name) + " has no storage");
    if (!v.is_contiguous())
        bad(op, std::string(name) + " is not contiguous (sizes " + dims(v.sizes) + ", strides " +
                    dims(v.strides) + ")");
    const std::uint64_t esize = element_size(v.storage->element_type());
    const std::uint64_t off = v.offset * esize;
    const std::uint64_t bytes = v.numel() * esize;
    if (off > v.storage->nbytes() || bytes > v.storage->nbytes() - off)
        bad(op, std::string(name) + " reaches outside its storage of " +
                    std::to_string(v.storage->nbytes()) + " bytes");
    return bytes;
}

} // namespace

namespace {

// ops::copy of views that are not both contiguous: one COPY_STRIDED.
void copy_strided_views(Stream& stream, const StorageView& dst, const StorageView& src) {
    constexpr const char* op = "ops::copy";
    check_view(op, "dst", dst, stream);
    check_view(op, "src", src, stream);
    if (dst.storage->element_type() != src.storage->element_type())
        bad(op, "a strided copy keeps the element type; dst's differs from src's (use cast)");
    if (dst.sizes != src.sizes)
        bad(op, "dst's sizes " + dims(dst.sizes) + " differ from src's " + dims(src.sizes));
    const std::size_t nd = src.sizes.size();
    if (nd < 1 || nd > 3 || src.strides[nd - 1] != 1 || dst.strides[nd - 1] != 1)
        bad(op, "a strided copy takes 1 to 3 dimensions with a last stride of 1 on both sides "
                "(sizes " +
                    dims(src.sizes) + ", strides " + dims(src.strides) + " and " +
                    dims(dst.strides) + "); use cast for any other gather");
    for (std::size_t d = 0; d + 1 < nd; d++)
        if (src.strides[d] < 0 || dst.strides[d] < 0)
            bad(op, "a strided copy takes non-negative strides");
    const std::uint64_t es = element_size(src.storage->element_type());
    StridedCopy c;
    c.width = static_cast<std::uint64_t>(src.sizes[nd - 1]) * es;
    c.height = nd >= 2 ? static_cast<std::uint32_t>(src.sizes[nd - 2]) : 1;
    c.depth = nd == 3 ? static_cast<std::uint32_t>(src.sizes[0]) : 1;
    c.src_pitch = nd >= 2 ? static_cast<std::uint64_t>(src.strides[nd - 2]) * es : 0;
    c.dst_pitch = nd >= 2 ? static_cast<std::uint64_t>(dst.strides[nd - 2]) * es : 0;
    c.src_slice = nd == 3 ? static_cast<std::uint64_t>(src.strides[0]) * es : 0;
    c.dst_slice = nd == 3 ? static_cast<std::uint64_t>(dst.strides[0]) * es : 0;
    const DeviceAccess da = dst.covers_whole_storage() && dst.storage != src.storage
                                ? DeviceAccess::Write
                                : DeviceAccess::ReadWrite;
    rbln_fw_pkt_copy_strided p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY_STRIDED, 0, sizeof(p));
    p.width = c.width;
    p.height = c.height;
    p.depth = c.depth;
    p.src_pitch = c.src_pitch;
    p.src_slice = c.src_slice;
    p.dst_pitch = c.dst_pitch;
    p.dst_slice = c.dst_slice;
    if (captured(op, stream, RBLN_FW_PKT_COPY_STRIDED, p,
                 {detail::graph::Slot{src.storage, byte_offset(src), DeviceAccess::Read},
                  detail::graph::Slot{dst.storage, byte_offset(dst), da}, detail::graph::Slot{}}))
        return;
    const auto& ms = src.storage->device_use(stream, DeviceAccess::Read);
    const auto& md = dst.storage->device_use(stream, da);
    c.src = va_of(ms, src);
    c.dst = va_of(md, dst);
    const std::shared_ptr<Memory> bufs[] = {ms, md};
    stream.enqueue(
        PacketSize::copy_strided, [&](CommandEncoder& e) { e.copy_strided(c); }, bufs);
}

} // namespace

void copy(Stream& stream, const StorageView& dst, const StorageView& src,
          rbln::source_location where) {
    const ExplainSite site(where);
    constexpr const char* op = "ops::copy";
    if (src.storage && dst.storage && (!src.is_contiguous() || !dst.is_contiguous())) {
        copy_strided_views(stream, dst, src);
        return;
    }
    const std::uint64_t n = contiguous_bytes(op, "src", src);
    if (contiguous_bytes(op, "dst", dst) != n)
        bad(op, "dst and src differ in size");
    auto stream_for = [&](const Storage& s) {
        return &s.device()->kernel() == &stream.device().kernel() ? stream
                                                                  : s.device()->default_stream();
    };
    if (&src.storage->device()->kernel() != &stream.device().kernel() &&
        &dst.storage->device()->kernel() != &stream.device().kernel())
        bad(op, "neither dst nor src is on the stream's device");
    {
        rbln_fw_pkt_copy p{};
        p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, sizeof(p));
        p.size = n;
        const bool whole_dst = dst.covers_whole_storage() && dst.storage != src.storage;
        if (captured(
                op, stream, RBLN_FW_PKT_COPY, p,
                {detail::graph::Slot{src.storage, byte_offset(src), DeviceAccess::Read},
                 detail::graph::Slot{dst.storage, byte_offset(dst),
                                     whole_dst ? DeviceAccess::Write : DeviceAccess::ReadWrite},
                 detail::graph::Slot{}}))
            return;
    }
    Stream ss = stream_for(*src.storage);
    Stream ds = stream_for(*dst.storage);
    const auto& ms = src.storage->device_use(ss, DeviceAccess::Read);
    const bool whole = dst.covers_whole_storage() && dst.storage != src.storage;
    const auto& md =
        dst.storage->device_use(ds, whole ? DeviceAccess::Write : DeviceAccess::ReadWrite);
    const std::uint64_t es = element_size(src.storage->element_type());
    const std::uint64_t ed = element_size(dst.storage->element_type());
    // Asynchronous on one device; between two it is synchronous anyway.
    const bool one_device = &ms->kernel() == &md->kernel();
    rbln::copy(stream, CopyEndpoint::of(md, dst.offset * ed, n),
               CopyEndpoint::of(ms, src.offset * es, n), one_device);
}

namespace {

// @value in @t's bits (round to nearest even), as FILL's pattern.
std::uint64_t pattern_of(float value, ElementType t) {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    if (t == ElementType::Fp32)
        return f;
    if (t == ElementType::Bf16) {
        if ((f & 0x7fffffffu) > 0x7f800000u) // NaN stays a (quiet) NaN
            return (f >> 16) | 0x40u;
        return (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
    }
    // fp16
    const std::uint32_t sign = (f >> 16) & 0x8000u;
    const std::uint32_t mag = f & 0x7fffffffu;
    if (mag > 0x7f800000u)
        return sign | 0x7e00u;
    if (mag >= 0x477ff000u) // rounds to >= 65520: infinity
        return sign | 0x7c00u;
    if (mag < 0x38800000u) { // below the smallest normal: a subnormal or 0
        const float a = std::bit_cast<float>(mag);
        // a * 2^24 rounded to nearest even (the FPU's default rounding).
        const auto q = static_cast<std::uint32_t>(std::nearbyint(a * 16777216.0F));
        return sign | q;
    }
    const std::uint32_t r = mag + 0xfffu + ((mag >> 13) & 1u);
    return sign | ((r - 0x38000000u) >> 13);
}

} // namespace

void fill(Stream& stream, const StorageView& out, float value, rbln::source_location where) {
    const ExplainSite site(where);
    constexpr const char* op = "ops::fill";
    const std::uint64_t n = contiguous_bytes(op, "out", out);
    check_view(op, "out", out, stream);
    const ElementType t = out.storage->element_type();
    const unsigned pb = element_size(t);
    const std::uint64_t pattern = pattern_of(value, t);
    const DeviceAccess oa =
        out.covers_whole_storage() ? DeviceAccess::Write : DeviceAccess::ReadWrite;
    rbln_fw_pkt_fill p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_FILL, 0, sizeof(p));
    p.pattern_bytes = pb;
    p.size = n;
    p.pattern = pattern;
    if (captured(op, stream, RBLN_FW_PKT_FILL, p,
                 {detail::graph::Slot{out.storage, byte_offset(out), oa}, detail::graph::Slot{},
                  detail::graph::Slot{}}))
        return;
    const auto& mo = out.storage->device_use(stream, oa);
    const std::uint64_t off = byte_offset(out);
    stream.fill(mo, off, n, pattern, pb);
}

void from_host(const StorageView& dst, std::span<const std::byte> data,
               rbln::source_location where) {
    const ExplainSite site(where);
    const std::uint64_t n = contiguous_bytes("ops::from_host", "dst", dst);
    if (data.size() > n)
        bad("ops::from_host",
            std::to_string(data.size()) + " bytes do not fit the view's " + std::to_string(n));
    dst.storage->write(dst.offset * element_size(dst.storage->element_type()), data);
}

void to_host(const StorageView& src, std::span<std::byte> out, rbln::source_location where) {
    const ExplainSite site(where);
    const std::uint64_t n = contiguous_bytes("ops::to_host", "src", src);
    if (out.size() > n)
        bad("ops::to_host",
            std::to_string(out.size()) + " bytes are more than the view's " + std::to_string(n));
    src.storage->read(src.offset * element_size(src.storage->element_type()), out);
}

} // namespace rbln::ops
