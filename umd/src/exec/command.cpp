// SPDX-License-Identifier: GPL-2.0
// command.cpp - firmware-iface packet encoding (command.hpp).

#include "exec/command.hpp"

#include <bit>
#include <cstring>
#include <string>

#include "rbln/error.hpp"
#include "rbln_fw_cmd.h"

namespace rbln {

static_assert(PacketSize::nop == sizeof(rbln_fw_pkt_nop));
static_assert(PacketSize::copy == sizeof(rbln_fw_pkt_copy));
static_assert(PacketSize::copy_strided == sizeof(rbln_fw_pkt_copy_strided));
static_assert(PacketSize::fill == sizeof(rbln_fw_pkt_fill));
static_assert(PacketSize::signal == sizeof(rbln_fw_pkt_signal));
static_assert(PacketSize::wait == sizeof(rbln_fw_pkt_wait));
static_assert(PacketSize::timestamp == sizeof(rbln_fw_pkt_timestamp));
static_assert(PacketSize::launch == sizeof(rbln_fw_pkt_launch));
static_assert(PacketSize::graph_exec == sizeof(rbln_fw_pkt_graph_exec));

namespace {

// The size field of a header holds bytes / 8 in 16 bits.
constexpr std::size_t kMaxPacketBytes = 0xffffu * 8;

[[noreturn]] void bad(const char* packet, const std::string& why) {
    throw Error(Errc::InvalidArgument, std::string("encode ") + packet, "", 0, why);
}

void check_aligned(const char* packet, const char* field, std::uint64_t va) {
    if (va % 8 != 0)
        bad(packet, std::string(field) + " " + std::to_string(va) + " is not 8-byte aligned");
}

} // namespace

CommandEncoder::CommandEncoder(std::span<std::byte> buffer, std::uint64_t device_va)
    : buffer_(buffer), device_va_(device_va) {
    if (reinterpret_cast<std::uintptr_t>(buffer.data()) % 8 != 0)
        bad("command buffer", "the buffer is not 8-byte aligned");
    if (buffer_.size() > RBLN_FW_CMD_MAX)
        buffer_ = buffer_.first(RBLN_FW_CMD_MAX);
    buffer_ = buffer_.first(buffer_.size() / 8 * 8);
}

template <typename Packet> void CommandEncoder::append(const Packet& p, const char* what) {
    if (!fits(sizeof(p)))
        bad(what, "the packet (" + std::to_string(sizeof(p)) + " bytes) does not fit in the " +
                      std::to_string(remaining()) + " bytes left of the command buffer");
    std::memcpy(buffer_.data() + used_, &p, sizeof(p));
    used_ += sizeof(p);
}

void CommandEncoder::nop(std::size_t bytes) {
    if (bytes < 8 || bytes % 8 != 0 || bytes > kMaxPacketBytes)
        bad("NOP", "size " + std::to_string(bytes) + " is not a multiple of 8 in 8.." +
                       std::to_string(kMaxPacketBytes));
    if (!fits(bytes))
        bad("NOP", "the packet does not fit in the " + std::to_string(remaining()) +
                       " bytes left of the command buffer");
    std::memset(buffer_.data() + used_, 0, bytes);
    const std::uint32_t hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, bytes);
    std::memcpy(buffer_.data() + used_, &hdr, sizeof(hdr));
    used_ += bytes;
}

void CommandEncoder::copy(std::uint64_t src, std::uint64_t dst, std::uint64_t size) {
    rbln_fw_pkt_copy p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0, sizeof(p));
    p.src = src;
    p.dst = dst;
    p.size = size;
    append(p, "COPY");
}

void CommandEncoder::copy_strided(const StridedCopy& c) {
    if (c.height < 1 || c.depth < 1)
        bad("COPY_STRIDED", "height and depth must be at least 1");
    rbln_fw_pkt_copy_strided p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY_STRIDED, 0, sizeof(p));
    p.src = c.src;
    p.dst = c.dst;
    p.width = c.width;
    p.height = c.height;
    p.depth = c.depth;
    p.src_pitch = c.src_pitch;
    p.src_slice = c.src_slice;
    p.dst_pitch = c.dst_pitch;
    p.dst_slice = c.dst_slice;
    append(p, "COPY_STRIDED");
}

void CommandEncoder::fill(std::uint64_t dst, std::uint64_t size, std::uint64_t pattern,
                          unsigned pattern_bytes) {
    if (pattern_bytes != 1 && pattern_bytes != 2 && pattern_bytes != 4 && pattern_bytes != 8)
        bad("FILL", "pattern_bytes " + std::to_string(pattern_bytes) + " is not 1, 2, 4 or 8");
    if (size % pattern_bytes != 0)
        bad("FILL", "size " + std::to_string(size) + " is not a multiple of the " +
                        std::to_string(pattern_bytes) + "-byte pattern");
    rbln_fw_pkt_fill p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_FILL, 0, sizeof(p));
    p.pattern_bytes = pattern_bytes;
    p.dst = dst;
    p.size = size;
    p.pattern = pattern_bytes == 8 ? pattern : pattern & ((1ull << (8 * pattern_bytes)) - 1);
    append(p, "FILL");
}

void CommandEncoder::signal(std::uint64_t va, std::uint64_t value, bool irq) {
    check_aligned("SIGNAL", "va", va);
    rbln_fw_pkt_signal p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_SIGNAL, irq ? RBLN_FW_SIGNAL_IRQ : 0, sizeof(p));
    p.va = va;
    p.value = value;
    append(p, "SIGNAL");
}

void CommandEncoder::wait(std::uint64_t va, std::uint64_t value, std::uint64_t timeout_ns) {
    check_aligned("WAIT", "va", va);
    rbln_fw_pkt_wait p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_WAIT, 0, sizeof(p));
    p.va = va;
    p.value = value;
    p.timeout_ns = timeout_ns;
    append(p, "WAIT");
}

void CommandEncoder::timestamp(std::uint64_t va) {
    check_aligned("TIMESTAMP", "va", va);
    rbln_fw_pkt_timestamp p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_TIMESTAMP, 0, sizeof(p));
    p.va = va;
    append(p, "TIMESTAMP");
}

rbln_fw_pkt_launch CommandEncoder::launch_packet(const KernelLaunch& l) {
    if (l.kernel < RBLN_FW_KERNEL_ADD || l.kernel > RBLN_FW_KERNEL_CAST)
        bad("LAUNCH", "unknown kernel " + std::to_string(l.kernel));
    for (std::uint32_t dt : {l.dtype_in, l.dtype_out})
        if (dt < RBLN_FW_DT_FP32 || dt > RBLN_FW_DT_BF16)
            bad("LAUNCH", "unknown element type " + std::to_string(dt));
    if (l.ndim < 1 || l.ndim > RBLN_FW_MAX_DIMS)
        bad("LAUNCH", "ndim " + std::to_string(l.ndim) + " is not 1..4");
    if (l.kernel == RBLN_FW_KERNEL_MATMUL && l.ndim != 2)
        bad("LAUNCH", "MATMUL takes ndim 2 (shape = {M, N, K})");
    if (l.kernel != RBLN_FW_KERNEL_CAST && l.kernel != RBLN_FW_KERNEL_MATMUL &&
        l.dtype_in != l.dtype_out)
        bad("LAUNCH", "only CAST and MATMUL change the element type");
    rbln_fw_pkt_launch p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_LAUNCH, 0, sizeof(p));
    p.kernel = l.kernel;
    p.dtype_in = l.dtype_in;
    p.dtype_out = l.dtype_out;
    p.ndim = l.ndim;
    p.scale = l.kernel == RBLN_FW_KERNEL_SCALE ? std::bit_cast<std::uint32_t>(l.scale) : 0;
    // Only ADD, MUL and MATMUL read b; the others leave its fields zero.
    const bool has_b = l.kernel == RBLN_FW_KERNEL_ADD || l.kernel == RBLN_FW_KERNEL_MUL ||
                       l.kernel == RBLN_FW_KERNEL_MATMUL;
    p.a = l.a;
    p.b = has_b ? l.b : 0;
    p.out = l.out;
    // Dimensions past ndim must be zero (MATMUL's shape has a third entry, K).
    const unsigned dims = l.kernel == RBLN_FW_KERNEL_MATMUL ? 3 : l.ndim;
    for (unsigned d = 0; d < dims; d++)
        p.shape[d] = l.shape[d];
    for (unsigned d = 0; d < l.ndim; d++) {
        p.stride_a[d] = l.stride_a[d];
        p.stride_b[d] = has_b ? l.stride_b[d] : 0;
        p.stride_out[d] = l.stride_out[d];
    }
    return p;
}

void CommandEncoder::launch(const KernelLaunch& l) {
    append(launch_packet(l), "LAUNCH");
}

std::uint64_t CommandEncoder::nop_payload(std::span<const std::byte> payload) {
    if (device_va_ == 0)
        bad("NOP", "the command buffer's device VA is unknown: a payload cannot be addressed");
    const std::size_t bytes = 8 + (payload.size() + 7) / 8 * 8;
    nop(bytes); // checks the size and the room; zeroes the body
    std::byte* body = buffer_.data() + used_ - bytes + 8;
    if (!payload.empty())
        std::memcpy(body, payload.data(), payload.size());
    return device_va_ + (used_ - bytes) + 8;
}

void CommandEncoder::graph_exec(const rbln_fw_pkt_graph_exec& g) {
    if (g.definition % 16 != 0)
        bad("GRAPH_EXEC", "definition " + std::to_string(g.definition) + " is not 16-byte aligned");
    check_aligned("GRAPH_EXEC", "boundaries", g.boundaries);
    rbln_fw_pkt_graph_exec p = g;
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_GRAPH_EXEC, 0, sizeof(p));
    p.reserved = 0;
    append(p, "GRAPH_EXEC");
}

} // namespace rbln
