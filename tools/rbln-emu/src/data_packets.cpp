// SPDX-License-Identifier: GPL-2.0
// COPY, COPY_STRIDED and FILL: checks and runs (data_packets.h).
#include "data_packets.h"

#include "dma.h"

namespace rbln::emu {

const char* check_copy(const rbln_fw_pkt_copy& p) {
    return p.reserved != 0 ? "reserved field not zero" : nullptr;
}

const char* check_copy_strided(const rbln_fw_pkt_copy_strided& p) {
    if (p.reserved != 0)
        return "reserved field not zero";
    if (p.height == 0 || p.depth == 0)
        return "height or depth 0";
    using Wide = unsigned __int128;
    auto reach = [&](std::uint64_t base, std::uint64_t pitch, std::uint64_t slice) {
        return Wide{base} + Wide{p.depth - 1U} * slice + Wide{p.height - 1U} * pitch + p.width;
    };
    if (reach(p.src, p.src_pitch, p.src_slice) > ~std::uint64_t{0} ||
        reach(p.dst, p.dst_pitch, p.dst_slice) > ~std::uint64_t{0})
        return "strided copy beyond the address space";
    return nullptr;
}

const char* check_fill(const rbln_fw_pkt_fill& p) {
    if (p.pattern_bytes != 1 && p.pattern_bytes != 2 && p.pattern_bytes != 4 &&
        p.pattern_bytes != 8)
        return "pattern_bytes not 1, 2, 4 or 8";
    if (p.size % p.pattern_bytes != 0)
        return "size not a multiple of pattern_bytes";
    return nullptr;
}

PacketResult run_copy(const rbln_fw_pkt_copy& p, JobMemory& mem, DmaScratch& s,
                      const Cancel& cancel, std::uint64_t& moved) {
    if (auto f = mem.translate(p.src, p.size, Access::read, s.src))
        return PacketResult::mmu(*f);
    if (auto f = mem.translate(p.dst, p.size, Access::write, s.dst))
        return PacketResult::mmu(*f);
    if (!dma::copy(s.dst, s.src, &cancel))
        return PacketResult::stopped();
    moved += p.size;
    return PacketResult::ok();
}

PacketResult run_copy_strided(const rbln_fw_pkt_copy_strided& p, JobMemory& mem, DmaScratch& s,
                              const Cancel& cancel, std::uint64_t& moved) {
    if (p.width == 0)
        return PacketResult::ok(); // rows of nothing: no access at all
    // Every row translates before any moves; then row by row.  Up to
    // 2^64 rows: both passes look at the stop every row, and let a
    // waiting MMU change pass (each row translates anew anyway).
    for (int pass = 0; pass < 2; pass++) {
        for (std::uint32_t z = 0; z < p.depth; z++) {
            for (std::uint32_t y = 0; y < p.height; y++) {
                if (cancel.load(std::memory_order_acquire))
                    return PacketResult::stopped();
                (void)mem.yield();
                const std::uint64_t src = p.src + z * p.src_slice + y * p.src_pitch;
                const std::uint64_t dst = p.dst + z * p.dst_slice + y * p.dst_pitch;
                if (auto f = mem.translate(src, p.width, Access::read, s.src))
                    return PacketResult::mmu(*f);
                if (auto f = mem.translate(dst, p.width, Access::write, s.dst))
                    return PacketResult::mmu(*f);
                if (pass == 1 && !dma::copy(s.dst, s.src, &cancel))
                    return PacketResult::stopped();
            }
        }
    }
    moved += std::uint64_t{p.width} * p.height * p.depth;
    return PacketResult::ok();
}

PacketResult run_fill(const rbln_fw_pkt_fill& p, JobMemory& mem, DmaScratch& s,
                      const Cancel& cancel, std::uint64_t& moved) {
    if (auto f = mem.translate(p.dst, p.size, Access::write, s.dst))
        return PacketResult::mmu(*f);
    if (!dma::fill(s.dst, p.pattern, p.pattern_bytes, &cancel))
        return PacketResult::stopped();
    moved += p.size;
    return PacketResult::ok();
}

} // namespace rbln::emu
