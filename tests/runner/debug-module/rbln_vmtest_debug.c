// SPDX-License-Identifier: GPL-2.0
/*
 * A module that makes, when loaded, one of the errors the debug kernel's
 * checkers must catch, chosen by its "fault" parameter:
 *   leak  an unreferenced 128-byte allocation (kmemleak)
 *   uaf   a read of a freed allocation (KASAN)
 * The debug tier's self-test (tests/runner/debug-checks.sh) loads it to
 * prove that each fails a run whose command succeeded.  Never shipped,
 * never loaded outside that test.
 */
#include <linux/compiler.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

static char *fault = "";
module_param(fault, charp, 0444);
MODULE_PARM_DESC(fault, "leak or uaf");

static int __init rbln_vmtest_debug_init(void)
{
	char *p;

	if (!strcmp(fault, "leak")) {
		p = kmalloc(128, GFP_KERNEL);
		if (!p)
			return -ENOMEM;
		/* The only reference dies with this frame: a leak. */
		memset(p, 0x5a, 128);
		return 0;
	}
	if (!strcmp(fault, "uaf")) {
		p = kmalloc(64, GFP_KERNEL);
		if (!p)
			return -ENOMEM;
		kfree(p);
		/* A read of freed memory (READ_ONCE: the compiler keeps it). */
		pr_info("rbln_vmtest_debug: read after free: %d\n", READ_ONCE(*p));
		return 0;
	}
	return -EINVAL;
}

static void __exit rbln_vmtest_debug_exit(void)
{
}

module_init(rbln_vmtest_debug_init);
module_exit(rbln_vmtest_debug_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("A leak or a use-after-free on load, for the rbln debug tier's self-test");
