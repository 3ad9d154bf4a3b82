/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Harness-level helpers of the rbln kselftests.
 *
 * Include after kselftest_harness.h.  A test that finds no rbln node fails
 * inside the rbln VM (RBLN_VM=1: the runner promised a card) and is skipped
 * elsewhere (a developer's host without the card).
 */
#ifndef RBLN_KSFT_H
#define RBLN_KSFT_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rbln_util.h"

/*
 * Fills @nodes with the rbln nodes and returns their count; returns 0 after
 * marking the test skipped (no node, not in the VM) or failed (no node in
 * the VM).  The caller returns when it gets 0.
 */
static inline int rbln_require_nodes(struct __test_metadata *_metadata,
				     struct rbln_node *nodes)
{
	int count = rbln_find_nodes(nodes, RBLN_MAX_TEST_CARDS);

	ASSERT_LE(0, count)
	TH_LOG("cannot list /sys/class/accel: %s", strerror(-count));
	if (count == 0 && !rbln_in_vm())
		SKIP(return 0, "no rbln node (not in the rbln VM)");
	ASSERT_LT(0, count)
	TH_LOG("RBLN_VM=1 but no accel node is bound to rbln");
	return count;
}

/* False after marking the test skipped: bind/unbind and the ports need root. */
static inline bool rbln_require_root(struct __test_metadata *_metadata)
{
	if (geteuid() != 0)
		SKIP(return false, "needs root");
	return true;
}

/* Expected family from RBLN_VM_FAMILY, 0 if unset or unknown. */
static inline unsigned int rbln_env_family(void)
{
	const char *f = getenv("RBLN_VM_FAMILY");

	if (!f)
		return 0;
	if (strcmp(f, "rebel100") == 0)
		return RBLN_FAMILY_REBEL100;
	if (strcmp(f, "atom") == 0)
		return RBLN_FAMILY_ATOM;
	return 0;
}

/* Expected HBM bytes per chiplet from RBLN_VM_HBM, 0 if unset or bad. */
static inline unsigned long long rbln_env_hbm(void)
{
	const char *h = getenv("RBLN_VM_HBM");
	char *end = NULL;
	unsigned long long v;

	if (!h || !*h)
		return 0;
	v = strtoull(h, &end, 0);
	return *end ? 0 : v;
}

/* Expected card count from RBLN_VM_CARDS, -1 if unset or bad. */
static inline int rbln_env_cards(void)
{
	const char *c = getenv("RBLN_VM_CARDS");
	char *end = NULL;
	long v;

	if (!c || !*c)
		return -1;
	v = strtol(c, &end, 10);
	return (*end || v < 0 || v > RBLN_MAX_TEST_CARDS) ? -1 : (int)v;
}

/* True if the @len bytes at @p all equal @c. */
static inline int rbln_all_bytes(const void *p, size_t len, unsigned char c)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != c)
			return 0;
	return 1;
}

#endif /* RBLN_KSFT_H */
