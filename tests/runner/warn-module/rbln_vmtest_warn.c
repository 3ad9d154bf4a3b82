// SPDX-License-Identifier: GPL-2.0
/*
 * A module whose only job is to WARN when loaded.  The VM runner's own
 * test loads it to prove that a kernel WARN fails a run whose command
 * succeeded.  Never shipped, never loaded outside that test.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init rbln_vmtest_warn_init(void)
{
	WARN(1, "rbln_vmtest_warn: deliberate warning for the VM runner test\n");
	return 0;
}

static void __exit rbln_vmtest_warn_exit(void)
{
}

module_init(rbln_vmtest_warn_init);
module_exit(rbln_vmtest_warn_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("WARN on load, for the rbln VM runner's self-test");
