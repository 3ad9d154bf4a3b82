// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: device page tables (firmware-iface rbln_fw_mmu.h).
 *
 * Four levels of 4 KiB tables in coherent host memory, built and torn
 * down by the host only; the card walks them.  Each table has a shadow
 * array of child pointers so the driver never reads back what the card
 * may be reading.  Runs of 2 MiB whose VA and address are both 2 MiB
 * aligned get 2 MiB pages, everything else 4 KiB pages.
 *
 * Intermediate tables are kept until the VM dies: freeing them would need
 * a TLB invalidation per table, and a VM's VA space is reused by the next
 * buffers anyway.  All calls run under vm->lock.
 */
#include <linux/dma-mapping.h>
#include <linux/dmapool.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "rbln_drv.h"

struct rbln_pt {
	__le64 *cpu;			/* RBLN_FW_PT_ENTRIES entries */
	dma_addr_t dma;
	struct rbln_pt **child;		/* levels 3..1 only */
};

dma_addr_t rbln_pt_dma(struct rbln_pt *pt)
{
	return pt->dma;
}

static struct rbln_pt *rbln_pt_new(struct rbln_device *rdev, bool leaf_level)
{
	struct rbln_pt *pt = kzalloc(sizeof(*pt), GFP_KERNEL);

	if (!pt)
		return NULL;
	pt->cpu = dma_pool_zalloc(rdev->vms.pt_pool, GFP_KERNEL, &pt->dma);
	if (!pt->cpu)
		goto err;
	if (!leaf_level) {
		pt->child = kcalloc(RBLN_FW_PT_ENTRIES, sizeof(*pt->child),
				    GFP_KERNEL);
		if (!pt->child)
			goto err_pool;
	}
	return pt;

err_pool:
	dma_pool_free(rdev->vms.pt_pool, pt->cpu, pt->dma);
err:
	kfree(pt);
	return NULL;
}

struct rbln_pt *rbln_pt_alloc(struct rbln_device *rdev)
{
	return rbln_pt_new(rdev, false);
}

static void rbln_pt_free(struct rbln_device *rdev, struct rbln_pt *pt,
			 unsigned int level)
{
	unsigned int i;

	if (level > 0) {
		for (i = 0; i < RBLN_FW_PT_ENTRIES; i++)
			if (pt->child[i])
				rbln_pt_free(rdev, pt->child[i], level - 1);
		kfree(pt->child);
	}
	dma_pool_free(rdev->vms.pt_pool, pt->cpu, pt->dma);
	kfree(pt);
}

/* The card must no longer use the tables (VM unbound or never bound). */
void rbln_pt_free_tree(struct rbln_device *rdev, struct rbln_pt *root)
{
	if (root)
		rbln_pt_free(rdev, root, RBLN_FW_PT_LEVELS - 1);
}

static void rbln_pte_set(struct rbln_pt *pt, unsigned int idx, u64 val)
{
	WRITE_ONCE(pt->cpu[idx], cpu_to_le64(val));
}

/* The table at @level - 1 under @pt's entry for @va, created if missing. */
static struct rbln_pt *rbln_pt_child(struct rbln_vm *vm, struct rbln_pt *pt,
				     unsigned int level, u64 va)
{
	unsigned int idx = RBLN_FW_PT_INDEX(va, level);
	struct rbln_pt *c = pt->child[idx];

	if (c)
		return c;
	c = rbln_pt_new(vm->rdev, level == 1);
	if (!c)
		return NULL;
	pt->child[idx] = c;
	/* The zeroed table is in memory before the card can reach it. */
	dma_wmb();
	rbln_pte_set(pt, idx, c->dma | RBLN_FW_PTE_VALID);
	return c;
}

/*
 * Maps [va, va + len) to [addr, addr + len); @pte_flags are READ, WRITE
 * and LOCAL.  The range must be unmapped (new entries need no TLB
 * invalidation).  On failure nothing stays mapped.
 */
int rbln_pt_map(struct rbln_vm *vm, u64 va, u64 addr, u64 len, u64 pte_flags)
{
	u64 va0 = va, done = 0;

	lockdep_assert_held(&vm->lock);
	if (!vm->root)
		return -ENODEV;	/* freed at unbind */
	if (!IS_ALIGNED(va | addr | len, RBLN_FW_PAGE_SIZE) ||
	    (addr & ~RBLN_FW_PTE_ADDR_MASK) ||
	    (pte_flags & ~(RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE | RBLN_FW_PTE_LOCAL)))
		return -EINVAL;

	while (done < len) {
		struct rbln_pt *pt = vm->root;
		unsigned int level, idx;
		u64 step;

		for (level = RBLN_FW_PT_LEVELS - 1; level > 1; level--) {
			pt = rbln_pt_child(vm, pt, level, va);
			if (!pt)
				goto nomem;
		}
		/* level 1 */
		idx = RBLN_FW_PT_INDEX(va, 1);
		if (IS_ALIGNED(va | addr, SZ_2M) && len - done >= SZ_2M &&
		    !pt->child[idx]) {
			rbln_pte_set(pt, idx, addr | pte_flags | RBLN_FW_PTE_LEAF |
				     RBLN_FW_PTE_VALID);
			step = SZ_2M;
		} else {
			pt = rbln_pt_child(vm, pt, 1, va);
			if (!pt)
				goto nomem;
			rbln_pte_set(pt, RBLN_FW_PT_INDEX(va, 0),
				     addr | pte_flags | RBLN_FW_PTE_VALID);
			step = SZ_4K;
		}
		va += step;
		addr += step;
		done += step;
	}
	return 0;

nomem:
	rbln_pt_unmap(vm, va0, done);
	return -ENOMEM;
}

/*
 * Clears the entries of [va, va + len).  The caller invalidates the
 * card's TLB for the range before it reuses the memory behind it.
 */
void rbln_pt_unmap(struct rbln_vm *vm, u64 va, u64 len)
{
	u64 end = va + len;

	lockdep_assert_held(&vm->lock);
	while (va < end) {
		struct rbln_pt *pt = vm->root;
		unsigned int level, idx;
		u64 next;

		for (level = RBLN_FW_PT_LEVELS - 1; level > 1 && pt; level--)
			pt = pt->child[RBLN_FW_PT_INDEX(va, level)];
		if (!pt) {
			/* Nothing mapped in this 1 GiB: skip it. */
			va = round_up(va + 1, 1ull << RBLN_FW_PT_SHIFT(2));
			continue;
		}
		idx = RBLN_FW_PT_INDEX(va, 1);
		if (!pt->child[idx]) {
			/* A 2 MiB page, or nothing. */
			rbln_pte_set(pt, idx, 0);
			next = round_up(va + 1, SZ_2M);
		} else {
			rbln_pte_set(pt->child[idx], RBLN_FW_PT_INDEX(va, 0), 0);
			next = va + SZ_4K;
		}
		va = next;
	}
}
