// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer of a use-after-free in the kernel's buddy allocator
 * (drivers/gpu/buddy.c of 6.12.y, gpu_buddy; drm_buddy has the same
 * code): a failed split_block() is undone by __gpu_buddy_free() on a block
 * that is still free and linked in its free tree.  The merge frees the
 * block while it is linked; the next allocation that walks that tree reads
 * freed memory (KASAN: slab-use-after-free in rb_last).
 *
 * On load: a 16 KiB allocator of 4 KiB chunks (one order-2 root); the
 * task's fault-injection counter (fail_nth, CONFIG_FAULT_INJECTION) fails
 * the slab allocation of the first block of the second split of an
 * order-0 allocation; then an order-1 allocation walks the order-1
 * tree.  failslab must be set to count blocking allocations:
 *   echo N > /sys/kernel/debug/failslab/ignore-gfp-wait
 * tests/runner/buddy-repro.sh runs it on the debug kernel; with
 * kernel/patches/gpu-buddy-undo-failed-split.patch applied the module
 * loads cleanly.  Never shipped, never loaded by make test.
 */
#include <linux/gpu_buddy.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sizes.h>

static int __init rbln_buddy_repro_init(void)
{
	struct gpu_buddy mm;
	LIST_HEAD(blocks);
	int ret;

	ret = gpu_buddy_init(&mm, SZ_16K, SZ_4K);
	if (ret)
		return ret;
	/*
	 * Root split: blocks 1 and 2; the order-1 right half's split: 3.
	 * Under kmemleak each block allocation is followed by one of
	 * kmemleak's own (its metadata): the fifth allocation is block 3.
	 */
	current->fail_nth = IS_ENABLED(CONFIG_DEBUG_KMEMLEAK) ? 5 : 3;
	ret = gpu_buddy_alloc_blocks(&mm, 0, SZ_16K, SZ_4K, SZ_4K, &blocks, 0);
	current->fail_nth = 0;
	pr_info("rbln_buddy_repro: order-0 allocation with its second split failed: %d\n",
		ret);
	ret = gpu_buddy_alloc_blocks(&mm, 0, SZ_16K, SZ_8K, SZ_8K, &blocks, 0);
	pr_info("rbln_buddy_repro: order-1 allocation afterwards: %d\n", ret);
	gpu_buddy_free_list(&mm, &blocks, 0);
	gpu_buddy_fini(&mm);
	return 0;
}

static void __exit rbln_buddy_repro_exit(void)
{
}

module_init(rbln_buddy_repro_init);
module_exit(rbln_buddy_repro_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Reproducer: the buddy allocator's undo of a failed split");
