// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: HBM of each chiplet, one buddy allocator per chiplet.
 *
 * Chiplet i's HBM is the BAR2 window [hbm[i].bar_offset, + hbm[i].size)
 * of the control block.  Buffers get buddy blocks of that window; the card
 * addresses them as "card addresses" (BAR2 offsets, PTE bit LOCAL) and the
 * CPU through the write-combined mapping of the whole HBM part of BAR2.
 *
 * Placement: RBLN_REGION_HBM takes the caller's chiplet; RBLN_REGION_AUTO
 * the chiplet with the largest free block, the lowest index on a tie.
 * Buffers of 2 MiB and more are made of 2 MiB-aligned blocks so the card
 * maps them with 2 MiB pages.  New buffers are zeroed by the CPU through
 * the BAR before anyone sees them.
 */
#include <linux/io.h>
#include <linux/sizes.h>

#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_hbm.h"

/* Kernel pointer to BAR2 offset @off inside the HBM apertures. */
static void __iomem *rbln_hbm_io(struct rbln_device *rdev, u64 off)
{
	return rdev->hbm.wc + (off - rdev->hbm.wc_start);
}

static void rbln_hbm_fini(struct drm_device *drm, void *arg)
{
	struct rbln_device *rdev = to_rbln(drm);
	unsigned int i;

	for (i = 0; i < rdev->id.chiplet_count; i++) {
		struct rbln_hbm *h = &rdev->hbm.chiplet[i];

		if (!h->ready)
			continue;
		/* Every buffer holds a drm_device reference: all are gone. */
		rbln_buddy_fini(&h->mm);
		h->ready = false;
	}
}

int rbln_hbm_init(struct rbln_device *rdev)
{
	struct pci_dev *pdev = rdev->pdev;
	u64 start = U64_MAX, end = 0;
	unsigned int i;
	int ret;

	rdev->hbm.bar_phys = pci_resource_start(pdev, RBLN_BAR_MEM);
	for (i = 0; i < rdev->id.chiplet_count; i++) {
		struct rbln_hbm *h = &rdev->hbm.chiplet[i];

		h->bar_offset = rdev->id.hbm_offset[i];
		h->size = rdev->id.hbm_size[i];
		ret = drmm_mutex_init(&rdev->drm, &h->lock);
		if (ret)
			return ret;
		start = min(start, h->bar_offset);
		end = max(end, h->bar_offset + h->size);
	}
	if (end <= start)
		return -ENODEV;

	/*
	 * The HBM part of the BAR, mapped once for zeroing and for kernel
	 * access; user mappings go straight to the BAR pages.
	 */
	rdev->hbm.wc = devm_ioremap_wc(&pdev->dev, rdev->hbm.bar_phys + start,
				       end - start);
	if (!rdev->hbm.wc) {
		drm_err(&rdev->drm, "cannot map %llu MiB of HBM aperture\n",
			(end - start) >> 20);
		return -ENOMEM;
	}
	rdev->hbm.wc_start = start;

	for (i = 0; i < rdev->id.chiplet_count; i++) {
		struct rbln_hbm *h = &rdev->hbm.chiplet[i];

		ret = rbln_buddy_init(&h->mm, h->size, SZ_4K);
		if (ret) {
			drm_err(&rdev->drm, "chiplet %u: buddy allocator: %d\n", i,
				ret);
			goto err;
		}
		h->ready = true;
	}
	return drmm_add_action_or_reset(&rdev->drm, rbln_hbm_fini, NULL);

err:
	rbln_hbm_fini(&rdev->drm, NULL);
	return ret;
}

/*
 * Allocates @size bytes (a multiple of 4 KiB) on @chiplet into @blocks and
 * zeroes them.  -E2BIG if the chiplet is smaller than @size, -ENOSPC if it
 * has not that much free now.
 */
int rbln_hbm_alloc(struct rbln_device *rdev, u32 chiplet, u64 size,
		   struct list_head *blocks)
{
	struct rbln_hbm *h = &rdev->hbm.chiplet[chiplet];
	u64 min_block = size >= SZ_2M ? SZ_2M : SZ_4K;
	struct rbln_buddy_block *block;
	int ret;

	if (size > h->size)
		return -E2BIG;
	mutex_lock(&h->lock);
	ret = rbln_buddy_alloc_blocks(&h->mm, 0, h->size, size, min_block,
				      blocks, 0);
	mutex_unlock(&h->lock);
	if (ret)
		return ret == -ENOMEM ? -ENOSPC : ret;

	list_for_each_entry(block, blocks, link) {
		u64 off = h->bar_offset + rbln_buddy_block_offset(block);

		memset_io(rbln_hbm_io(rdev, off), 0, rbln_buddy_block_size(&h->mm, block));
	}
	/* The zeroes are in HBM before the buffer is handed out. */
	wmb();
	return 0;
}

void rbln_hbm_free(struct rbln_device *rdev, u32 chiplet,
		   struct list_head *blocks)
{
	struct rbln_hbm *h = &rdev->hbm.chiplet[chiplet];

	mutex_lock(&h->lock);
	rbln_buddy_free_list(&h->mm, blocks, 0);
	mutex_unlock(&h->lock);
}

void rbln_hbm_stats(struct rbln_device *rdev, u32 chiplet, u64 *used,
		    u64 *largest_free)
{
	struct rbln_hbm *h = &rdev->hbm.chiplet[chiplet];

	mutex_lock(&h->lock);
	*used = h->size - h->mm.avail;
	*largest_free = rbln_buddy_largest_free(&h->mm);
	mutex_unlock(&h->lock);
}

/* RBLN_REGION_AUTO: the chiplet with the largest free block. */
int rbln_hbm_pick_chiplet(struct rbln_device *rdev, u64 size, u32 *chiplet)
{
	u64 best = 0, used, largest;
	bool fits_somewhere = false;
	unsigned int i;

	for (i = 0; i < rdev->id.chiplet_count; i++) {
		if (size <= rdev->hbm.chiplet[i].size)
			fits_somewhere = true;
		rbln_hbm_stats(rdev, i, &used, &largest);
		if (rdev->hbm.chiplet[i].size - used < size)
			continue;
		if (largest > best) {
			best = largest;
			*chiplet = i;
		}
	}
	if (!fits_somewhere)
		return -E2BIG;
	return best ? 0 : -ENOSPC;
}

u64 rbln_hbm_size(struct rbln_device *rdev, u32 chiplet)
{
	return rdev->hbm.chiplet[chiplet].size;
}

/* The card address (BAR2 offset, PTE bit LOCAL) of a block of @chiplet. */
u64 rbln_hbm_block_addr(struct rbln_device *rdev, u32 chiplet,
			struct rbln_buddy_block *block)
{
	return rdev->hbm.chiplet[chiplet].bar_offset +
	       rbln_buddy_block_offset(block);
}

u64 rbln_hbm_block_size(struct rbln_device *rdev, u32 chiplet,
			struct rbln_buddy_block *block)
{
	return rbln_buddy_block_size(&rdev->hbm.chiplet[chiplet].mm, block);
}

/* The bus address of a card address, for CPU mappings and peers. */
phys_addr_t rbln_hbm_phys(struct rbln_device *rdev, u64 card_addr)
{
	return rdev->hbm.bar_phys + card_addr;
}
