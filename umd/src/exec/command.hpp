// SPDX-License-Identifier: GPL-2.0
// command.hpp - (internal) encodes firmware-iface command packets
// (firmware-iface/rbln_fw_cmd.h) into a command buffer.
//
// The encoder writes into memory it does not own (the CPU mapping of a
// command-buffer BO) and checks what the card would refuse: field values
// (pattern sizes, alignment of SIGNAL/WAIT/TIMESTAMP addresses, strided
// extents, LAUNCH kernels and types), the packet size field, the buffer's
// 8-byte alignment and the 1 MiB limit of a job.  A packet that does not fit
// in the room left is never written partially: fits() says whether it
// would, and appending one that does not throws.  Errors are
// rbln::Error(Errc::InvalidArgument) naming the packet and the field.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rbln_fw_cmd.h"

namespace rbln {

/// Bytes of each packet (the structs of rbln_fw_cmd.h).
struct PacketSize {
    static constexpr std::size_t nop = 8;
    static constexpr std::size_t copy = 32;
    static constexpr std::size_t copy_strided = 72;
    static constexpr std::size_t fill = 32;
    static constexpr std::size_t signal = 24;
    static constexpr std::size_t wait = 32;
    static constexpr std::size_t timestamp = 16;
    static constexpr std::size_t launch = 176;
    static constexpr std::size_t graph_exec = 48;
};

/// COPY_STRIDED: depth planes of height rows of width bytes; row r of plane p
/// is at base + p * slice + r * pitch on each side.
struct StridedCopy {
    std::uint64_t src = 0;
    std::uint64_t dst = 0;
    std::uint64_t width = 0;
    std::uint32_t height = 1;
    std::uint32_t depth = 1;
    std::uint64_t src_pitch = 0;
    std::uint64_t src_slice = 0;
    std::uint64_t dst_pitch = 0;
    std::uint64_t dst_slice = 0;
};

/// LAUNCH of a built-in kernel (RBLN_FW_KERNEL_*, RBLN_FW_DT_*).
struct KernelLaunch {
    std::uint32_t kernel = 0;
    std::uint32_t dtype_in = 0;
    std::uint32_t dtype_out = 0;
    std::uint32_t ndim = 1;
    float scale = 1.0F; ///< SCALE only
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::uint64_t out = 0;
    std::array<std::uint64_t, 4> shape{};
    std::array<std::int64_t, 4> stride_a{};
    std::array<std::int64_t, 4> stride_b{};
    std::array<std::int64_t, 4> stride_out{};
};

class CommandEncoder {
public:
    /// Encodes into @buffer (8-byte aligned; at most 1 MiB is used) whose
    /// byte 0 the card sees at @device_va (0: unknown; nop_payload() needs it).
    explicit CommandEncoder(std::span<std::byte> buffer, std::uint64_t device_va = 0);

    std::size_t size() const noexcept { return used_; }
    std::size_t capacity() const noexcept { return buffer_.size(); }
    std::size_t remaining() const noexcept { return buffer_.size() - used_; }
    bool empty() const noexcept { return used_ == 0; }
    /// The device VA of the next packet (0 if the buffer's is unknown).
    std::uint64_t next_device_va() const noexcept {
        return device_va_ == 0 ? 0 : device_va_ + used_;
    }
    /// Whether a packet of @bytes fits in the room left.
    bool fits(std::size_t bytes) const noexcept { return bytes <= remaining(); }
    /// Starts over (the bytes written stay in the buffer).
    void reset() noexcept { used_ = 0; }

    /// NOP of @bytes (a multiple of 8, >= 8).
    void nop(std::size_t bytes = PacketSize::nop);
    /// COPY of @size bytes (any alignment and size, 0 allowed).
    void copy(std::uint64_t src, std::uint64_t dst, std::uint64_t size);
    /// COPY_STRIDED (height and depth >= 1).
    void copy_strided(const StridedCopy& c);
    /// FILL of @size bytes with the low @pattern_bytes (1, 2, 4, 8) of
    /// @pattern; @size a multiple of @pattern_bytes.
    void fill(std::uint64_t dst, std::uint64_t size, std::uint64_t pattern, unsigned pattern_bytes);
    /// SIGNAL: store @value at @va (8-byte aligned); @irq raises the ring IRQ.
    void signal(std::uint64_t va, std::uint64_t value, bool irq = false);
    /// WAIT until the 64-bit value at @va (8-byte aligned) is >= @value.
    void wait(std::uint64_t va, std::uint64_t value, std::uint64_t timeout_ns = 0);
    /// TIMESTAMP: store the card time in ns at @va (8-byte aligned).
    void timestamp(std::uint64_t va);
    /// LAUNCH of a built-in kernel.
    void launch(const KernelLaunch& l);
    /// A NOP whose body (after its 8-byte header) carries @payload, padded
    /// with zeros to 8 bytes: data a later packet of the job reads (a
    /// GRAPH_EXEC boundary table).  Returns the payload's device VA (8-byte
    /// aligned).  Needs the buffer's device VA (constructor).
    std::uint64_t nop_payload(std::span<const std::byte> payload);
    /// GRAPH_EXEC (rbln_fw_graph.h): @definition 16-byte aligned, @boundaries
    /// 8-byte aligned (or 0 with @boundary_count 0).
    void graph_exec(const rbln_fw_pkt_graph_exec& g);

    /// The LAUNCH packet of @l (header included), checked as launch() checks
    /// it.  Graph nodes hold it with their addresses zero.
    static rbln_fw_pkt_launch launch_packet(const KernelLaunch& l);

private:
    template <typename Packet> void append(const Packet& p, const char* what);

    std::span<std::byte> buffer_;
    std::uint64_t device_va_ = 0;
    std::size_t used_ = 0;
};

} // namespace rbln
