// SPDX-License-Identifier: GPL-2.0
#include "bar_layout.h"

#include <bit>
#include <stdexcept>

#include "rbln_fw_ctrl.h"

namespace rbln::emu {

std::uint64_t round_up_pow2(std::uint64_t v) {
    return std::bit_ceil(v);
}

BarLayout compute_bar_layout(unsigned chiplets, std::uint64_t hbm_per_chiplet) {
    if (chiplets == 0 || chiplets > RBLN_FW_MAX_CHIPLETS)
        throw std::invalid_argument("chiplet count must be 1..8");
    if (hbm_per_chiplet == 0 || hbm_per_chiplet % RBLN_FW_HBM_ALIGN != 0)
        throw std::invalid_argument("HBM size must be a non-zero multiple of 2M");
    if (hbm_per_chiplet > (kMaxBarSize - RBLN_FW_CTRL_REGION_SIZE) / chiplets)
        throw std::invalid_argument("BAR would exceed 1T");
    BarLayout layout;
    layout.chiplets = chiplets;
    layout.ctrl_size = RBLN_FW_CTRL_REGION_SIZE;
    for (unsigned i = 0; i < chiplets; i++) {
        layout.hbm.at(i).bar_offset = RBLN_FW_CTRL_REGION_SIZE + std::uint64_t{i} * hbm_per_chiplet;
        layout.hbm.at(i).size = hbm_per_chiplet;
    }
    layout.used_size = RBLN_FW_CTRL_REGION_SIZE + std::uint64_t{chiplets} * hbm_per_chiplet;
    layout.bar_size = round_up_pow2(layout.used_size);
    if (layout.bar_size > kMaxBarSize)
        throw std::invalid_argument("BAR would exceed 1T");
    return layout;
}

} // namespace rbln::emu
