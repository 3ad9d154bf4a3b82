// SPDX-License-Identifier: GPL-2.0
// cmdbuf.hpp - a command buffer in firmware-iface format (rbln_fw_cmd.h):
// packets laid out back to back, each 8-byte aligned, with the 32-bit
// header (opcode, flags, size / 8) in front.  Only what the demo needs:
// COPY, TIMESTAMP and LAUNCH of the built-in kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "rbln_fw_cmd.h"

namespace rbln::demo {

/// The header of a packet: @op in bits 7:0, @flags in 15:8, @bytes / 8 in 31:16.
constexpr std::uint32_t packet_header(std::uint32_t op, std::uint32_t flags,
                                      std::uint32_t bytes) noexcept {
    return (op & 0xffu) | ((flags & 0xffu) << 8) | ((bytes / 8) << 16);
}

/// A LAUNCH of MATMUL: out (M x N) = a (M x K) @ b (K x N), all row-major
/// and dense, inputs and output of type @t.
rbln_fw_pkt_launch matmul_launch(DType t, std::uint64_t a, std::uint64_t b, std::uint64_t out,
                                 std::uint64_t m, std::uint64_t k, std::uint64_t n) noexcept;

/// A LAUNCH of RELU over @count dense elements of @t.
rbln_fw_pkt_launch relu_launch(DType t, std::uint64_t a, std::uint64_t out,
                               std::uint64_t count) noexcept;

/// A LAUNCH of SCALE (out = a * @factor) over @count dense elements of @t.
rbln_fw_pkt_launch scale_launch(DType t, std::uint64_t a, std::uint64_t out, std::uint64_t count,
                                float factor) noexcept;

class CommandBuffer {
public:
    /// COPY of @size bytes from device VA @src to @dst.
    void copy(std::uint64_t src, std::uint64_t dst, std::uint64_t size);
    /// TIMESTAMP: the card stores its time in ns at @va (8-byte aligned).
    void timestamp(std::uint64_t va);
    /// LAUNCH of @l; the header is filled in here.
    void launch(const rbln_fw_pkt_launch& l);

    /// The packets, ready to be copied into a command buffer BO.
    std::span<const std::byte> bytes() const noexcept { return bytes_; }
    std::size_t size() const noexcept { return bytes_.size(); }
    /// Packets appended so far.
    unsigned packets() const noexcept { return packets_; }
    /// Byte offset at which the next packet will start.
    std::size_t offset() const noexcept { return bytes_.size(); }

private:
    template <typename Packet> void append(Packet p, std::uint32_t op);

    std::vector<std::byte> bytes_;
    unsigned packets_ = 0;
};

} // namespace rbln::demo
