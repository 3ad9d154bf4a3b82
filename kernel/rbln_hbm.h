/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: HBM (rbln_hbm.c) - one buddy allocator per chiplet over its
 * window of BAR2, and the write-combined mapping of all of them.
 */
#ifndef RBLN_HBM_H
#define RBLN_HBM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include "rbln_compat.h"
#include "rbln_fw_ctrl.h"

struct rbln_device;

/* One chiplet's HBM. */
struct rbln_hbm {
	/* Protects mm: serialises the buddy allocator. */
	struct mutex lock;
	struct rbln_buddy mm;		/* offsets relative to the region */
	u64 bar_offset;			/* region start in BAR2 (card address) */
	u64 size;
	bool ready;
};

/* The card's HBM; set up at probe, then only the allocators change. */
struct rbln_hbm_mem {
	struct rbln_hbm chiplet[RBLN_FW_MAX_CHIPLETS];
	void __iomem *wc;		/* all HBM apertures, write-combined */
	u64 wc_start;			/* BAR offset wc maps */
	resource_size_t bar_phys;	/* bus address of BAR2 */
};

int rbln_hbm_init(struct rbln_device *rdev);
int rbln_hbm_alloc(struct rbln_device *rdev, u32 chiplet, u64 size,
		   struct list_head *blocks);
void rbln_hbm_free(struct rbln_device *rdev, u32 chiplet,
		   struct list_head *blocks);
int rbln_hbm_pick_chiplet(struct rbln_device *rdev, u64 size, u32 *chiplet);
void rbln_hbm_stats(struct rbln_device *rdev, u32 chiplet, u64 *used,
		    u64 *largest_free);
u64 rbln_hbm_size(struct rbln_device *rdev, u32 chiplet);
u64 rbln_hbm_block_addr(struct rbln_device *rdev, u32 chiplet,
			struct rbln_buddy_block *block);
u64 rbln_hbm_block_size(struct rbln_device *rdev, u32 chiplet,
			struct rbln_buddy_block *block);
phys_addr_t rbln_hbm_phys(struct rbln_device *rdev, u64 card_addr);

#endif /* RBLN_HBM_H */
