// SPDX-License-Identifier: GPL-2.0
// Test side: builds command buffers of rbln_fw_cmd.h packets, the way a
// driver or the UMD would, and writes them into guest memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "guest_memory.h"
#include "rbln_fw_cmd.h"

namespace rbln::emu::test {

class CmdBuf {
public:
    // Any packet struct: its header is set from `op`, `flags` and its size.
    template <typename Pkt> CmdBuf& add(std::uint8_t op, Pkt pkt, std::uint8_t flags = 0) {
        pkt.hdr = RBLN_FW_PKT_HDR(op, flags, sizeof(pkt));
        return raw(&pkt, sizeof(pkt));
    }

    CmdBuf& raw(const void* p, std::size_t n) {
        // resize + memcpy rather than insert(end, p, p + n): once the tests
        // are compiled in unity batches, GCC 12 inlines insert() far enough
        // to warn -Wstringop-overflow about a region it sizes wrongly.
        const std::size_t at = bytes_.size();
        bytes_.resize(at + n);
        if (n != 0)
            std::memcpy(bytes_.data() + at, p, n);
        return *this;
    }

    CmdBuf& nop(std::uint32_t bytes = 8) {
        std::vector<std::byte> pkt(bytes);
        const std::uint32_t hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_NOP, 0, bytes);
        std::memcpy(pkt.data(), &hdr, sizeof(hdr));
        return raw(pkt.data(), pkt.size());
    }

    CmdBuf& copy(std::uint64_t src, std::uint64_t dst, std::uint64_t size) {
        rbln_fw_pkt_copy p{};
        p.src = src;
        p.dst = dst;
        p.size = size;
        return add(RBLN_FW_PKT_COPY, p);
    }

    CmdBuf& strided(std::uint64_t src, std::uint64_t dst, std::uint64_t width, std::uint32_t height,
                    std::uint32_t depth, std::uint64_t src_pitch, std::uint64_t src_slice,
                    std::uint64_t dst_pitch, std::uint64_t dst_slice) {
        rbln_fw_pkt_copy_strided p{};
        p.src = src;
        p.dst = dst;
        p.width = width;
        p.height = height;
        p.depth = depth;
        p.src_pitch = src_pitch;
        p.src_slice = src_slice;
        p.dst_pitch = dst_pitch;
        p.dst_slice = dst_slice;
        return add(RBLN_FW_PKT_COPY_STRIDED, p);
    }

    CmdBuf& fill(std::uint64_t dst, std::uint64_t size, std::uint64_t pattern,
                 std::uint32_t pattern_bytes) {
        rbln_fw_pkt_fill p{};
        p.pattern_bytes = pattern_bytes;
        p.dst = dst;
        p.size = size;
        p.pattern = pattern;
        return add(RBLN_FW_PKT_FILL, p);
    }

    CmdBuf& signal(std::uint64_t va, std::uint64_t value, std::uint8_t flags = 0) {
        rbln_fw_pkt_signal p{};
        p.va = va;
        p.value = value;
        return add(RBLN_FW_PKT_SIGNAL, p, flags);
    }

    CmdBuf& wait(std::uint64_t va, std::uint64_t value, std::uint64_t timeout_ns = 0) {
        rbln_fw_pkt_wait p{};
        p.va = va;
        p.value = value;
        p.timeout_ns = timeout_ns;
        return add(RBLN_FW_PKT_WAIT, p);
    }

    CmdBuf& timestamp(std::uint64_t va) {
        rbln_fw_pkt_timestamp p{};
        p.va = va;
        return add(RBLN_FW_PKT_TIMESTAMP, p);
    }

    CmdBuf& launch(const rbln_fw_pkt_launch& l) { return add(RBLN_FW_PKT_LAUNCH, l); }

    CmdBuf& tlb_invalidate(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
        rbln_fw_pkt_tlb_invalidate p{};
        p.asid = asid;
        p.va = va;
        p.size = size;
        return add(RBLN_FW_PKT_TLB_INVALIDATE, p);
    }

    CmdBuf& write64(std::uint64_t addr, std::uint64_t value) {
        rbln_fw_pkt_write64 p{};
        p.addr = addr;
        p.value = value;
        return add(RBLN_FW_PKT_WRITE64, p);
    }

    [[nodiscard]] std::uint32_t size() const { return static_cast<std::uint32_t>(bytes_.size()); }
    [[nodiscard]] const std::vector<std::byte>& bytes() const { return bytes_; }
    // Byte offset of the next packet (for packet_offset expectations).
    [[nodiscard]] std::uint32_t here() const { return size(); }
    void clear() { bytes_.clear(); }

    // Writes the buffer at guest-physical `gpa`.
    void put(GuestMemory& mem, std::uint64_t gpa) const {
        if (!mem.write(gpa, bytes_.data(), bytes_.size()))
            throw std::runtime_error("command buffer not in guest RAM");
    }

private:
    std::vector<std::byte> bytes_;
};

} // namespace rbln::emu::test
