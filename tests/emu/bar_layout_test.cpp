// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <stdexcept>

#include "bar_layout.h"
#include "options.h"
#include "rbln_fw_ctrl.h"

using namespace rbln::emu;

namespace bar_layout_test {

TEST(BarLayout, Rebel100HasFourChipletsAfterTheControlRegionAndAPow2Bar) {
    const BarLayout l = compute_bar_layout(family_chiplets(Family::rebel100), 256ULL << 20);
    ASSERT_EQ(l.chiplets, 4U);
    EXPECT_EQ(l.ctrl_size, RBLN_FW_CTRL_REGION_SIZE);
    for (unsigned i = 0; i < 4; i++) {
        EXPECT_EQ(l.hbm.at(i).bar_offset, (2ULL << 20) + i * (256ULL << 20)) << i;
        EXPECT_EQ(l.hbm.at(i).size, 256ULL << 20);
        EXPECT_EQ(l.hbm.at(i).bar_offset % RBLN_FW_HBM_ALIGN, 0U);
    }
    EXPECT_EQ(l.used_size, (2ULL << 20) + (1ULL << 30));
    EXPECT_EQ(l.bar_size, 2ULL << 30); // 1 GiB + 2 MiB rounds up to 2 GiB
    EXPECT_EQ(l.hbm.at(4).size, 0U);
}

TEST(BarLayout, AtomHasOneChiplet) {
    const BarLayout l = compute_bar_layout(family_chiplets(Family::atom), 64ULL << 20);
    ASSERT_EQ(l.chiplets, 1U);
    EXPECT_EQ(l.hbm[0].bar_offset, 2ULL << 20);
    EXPECT_EQ(l.hbm[0].size, 64ULL << 20);
    EXPECT_EQ(l.bar_size, 128ULL << 20);
}

TEST(BarLayout, ExactPowerOfTwoIsNotRoundedFurther) {
    // 2 MiB control + 1 x 2 MiB HBM = 4 MiB exactly.
    EXPECT_EQ(compute_bar_layout(1, 2ULL << 20).bar_size, 4ULL << 20);
    // 2 MiB + 3 x 2 MiB = 8 MiB exactly.
    EXPECT_EQ(compute_bar_layout(3, 2ULL << 20).bar_size, 8ULL << 20);
    EXPECT_EQ(compute_bar_layout(2, 2ULL << 20).bar_size, 8ULL << 20);
}

TEST(BarLayout, RejectsBadChipletCountsAndSizes) {
    EXPECT_THROW(compute_bar_layout(0, 2ULL << 20), std::invalid_argument);
    EXPECT_THROW(compute_bar_layout(9, 2ULL << 20), std::invalid_argument);
    EXPECT_THROW(compute_bar_layout(1, 0), std::invalid_argument);
    EXPECT_THROW(compute_bar_layout(1, (2ULL << 20) + 4096), std::invalid_argument);
    EXPECT_THROW(compute_bar_layout(4, 1ULL << 40), std::invalid_argument);
    EXPECT_NO_THROW(compute_bar_layout(1, (1ULL << 39)));
}
} // namespace bar_layout_test
