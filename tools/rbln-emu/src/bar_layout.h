// SPDX-License-Identifier: GPL-2.0
// Layout of the card's memory BAR: control region, then each chiplet's HBM.
#pragma once

#include <array>
#include <cstdint>

namespace rbln::emu {

inline constexpr std::uint64_t kMaxBarSize = 1ULL << 40;

struct HbmAperture {
    std::uint64_t bar_offset = 0;
    std::uint64_t size = 0;
};

struct BarLayout {
    unsigned chiplets = 0;
    std::uint64_t ctrl_size = 0; // RBLN_FW_CTRL_REGION_SIZE
    std::uint64_t used_size = 0; // control region + all HBM
    std::uint64_t bar_size = 0;  // used_size rounded up to a power of two
    std::array<HbmAperture, 8> hbm{};
};

// Chiplet i's HBM at CTRL_REGION_SIZE + i * hbm_per_chiplet.  Throws
// std::invalid_argument on 0 or too many chiplets, an HBM size that is 0 or
// not a multiple of 2 MiB, or a BAR larger than kMaxBarSize.
BarLayout compute_bar_layout(unsigned chiplets, std::uint64_t hbm_per_chiplet);

// Smallest power of two >= v (v > 0, v <= 2^63).
std::uint64_t round_up_pow2(std::uint64_t v);

} // namespace rbln::emu
