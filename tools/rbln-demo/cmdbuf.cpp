// SPDX-License-Identifier: GPL-2.0
// cmdbuf.cpp - firmware-iface packet encoder (see cmdbuf.hpp).

#include "cmdbuf.hpp"

#include <bit>
#include <cstring>

namespace rbln::demo {

static_assert(sizeof(rbln_fw_pkt_copy) == 32);
static_assert(sizeof(rbln_fw_pkt_timestamp) == 16);
static_assert(sizeof(rbln_fw_pkt_launch) == 176);

rbln_fw_pkt_launch matmul_launch(DType t, std::uint64_t a, std::uint64_t b, std::uint64_t out,
                                 std::uint64_t m, std::uint64_t k, std::uint64_t n) noexcept {
    rbln_fw_pkt_launch l{};
    l.kernel = RBLN_FW_KERNEL_MATMUL;
    l.dtype_in = fw_dtype(t);
    l.dtype_out = fw_dtype(t);
    l.ndim = 2;
    l.a = a;
    l.b = b;
    l.out = out;
    // firmware-iface orders the shape {M, N, K}.
    l.shape[0] = m;
    l.shape[1] = n;
    l.shape[2] = k;
    l.stride_a[0] = static_cast<std::int64_t>(k); // row of a
    l.stride_a[1] = 1;
    l.stride_b[0] = static_cast<std::int64_t>(n);
    l.stride_b[1] = 1;
    l.stride_out[0] = static_cast<std::int64_t>(n);
    l.stride_out[1] = 1;
    return l;
}

namespace {

rbln_fw_pkt_launch elementwise(std::uint32_t kernel, DType t, std::uint64_t a, std::uint64_t out,
                               std::uint64_t count) noexcept {
    rbln_fw_pkt_launch l{};
    l.kernel = kernel;
    l.dtype_in = fw_dtype(t);
    l.dtype_out = fw_dtype(t);
    l.ndim = 1;
    l.a = a;
    l.out = out;
    l.shape[0] = count;
    l.stride_a[0] = 1;
    l.stride_out[0] = 1;
    return l;
}

} // namespace

rbln_fw_pkt_launch relu_launch(DType t, std::uint64_t a, std::uint64_t out,
                               std::uint64_t count) noexcept {
    return elementwise(RBLN_FW_KERNEL_RELU, t, a, out, count);
}

rbln_fw_pkt_launch scale_launch(DType t, std::uint64_t a, std::uint64_t out, std::uint64_t count,
                                float factor) noexcept {
    rbln_fw_pkt_launch l = elementwise(RBLN_FW_KERNEL_SCALE, t, a, out, count);
    l.scale = std::bit_cast<std::uint32_t>(factor);
    return l;
}

template <typename Packet> void CommandBuffer::append(Packet p, std::uint32_t op) {
    static_assert(sizeof(Packet) % 8 == 0, "packets are whole 8-byte units");
    p.hdr = packet_header(op, 0, sizeof(Packet));
    const std::size_t at = bytes_.size();
    bytes_.resize(at + sizeof(Packet));
    std::memcpy(bytes_.data() + at, &p, sizeof(Packet));
    packets_++;
}

void CommandBuffer::copy(std::uint64_t src, std::uint64_t dst, std::uint64_t size) {
    rbln_fw_pkt_copy p{};
    p.src = src;
    p.dst = dst;
    p.size = size;
    append(p, RBLN_FW_PKT_COPY);
}

void CommandBuffer::timestamp(std::uint64_t va) {
    rbln_fw_pkt_timestamp p{};
    p.va = va;
    append(p, RBLN_FW_PKT_TIMESTAMP);
}

void CommandBuffer::launch(const rbln_fw_pkt_launch& l) {
    append(l, RBLN_FW_PKT_LAUNCH);
}

} // namespace rbln::demo
