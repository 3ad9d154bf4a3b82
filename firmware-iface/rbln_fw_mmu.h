/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln firmware interface: the card's MMU (device page tables).
 *
 * Every card-side access (DMA engines, compute, the debug access request)
 * names an address space by its id (ASID) and a device virtual address
 * (VA).  The card translates it by walking a four-level page table that
 * the host builds in host memory.  The spec is rbln_fw_mmu.md next to this
 * file.
 */
#ifndef RBLN_FW_MMU_H
#define RBLN_FW_MMU_H

#include <linux/types.h>

/* Device VAs are 48 bits; bits 63:48 of a VA must be zero. */
#define RBLN_FW_VA_BITS		48
#define RBLN_FW_PAGE_SHIFT	12
#define RBLN_FW_PAGE_SIZE	(1ull << RBLN_FW_PAGE_SHIFT)	/* 4 KiB */
#define RBLN_FW_HUGE_SHIFT	21
#define RBLN_FW_HUGE_SIZE	(1ull << RBLN_FW_HUGE_SHIFT)	/* 2 MiB */

/*
 * Four levels of 512 eight-byte entries; a table is one 4 KiB page.
 * Level 3 (the root) is indexed by VA bits 47:39, level 2 by 38:30,
 * level 1 by 29:21, level 0 by 20:12.
 */
#define RBLN_FW_PT_LEVELS	4
#define RBLN_FW_PT_ENTRIES	512
#define RBLN_FW_PT_INDEX_BITS	9
#define RBLN_FW_PT_SHIFT(level)	(RBLN_FW_PAGE_SHIFT + RBLN_FW_PT_INDEX_BITS * (level))
#define RBLN_FW_PT_INDEX(va, level) \
	(((va) >> RBLN_FW_PT_SHIFT(level)) & (RBLN_FW_PT_ENTRIES - 1))

/* Page-table entry bits. */
#define RBLN_FW_PTE_VALID	(1ull << 0)	/* entry is in use */
#define RBLN_FW_PTE_READ	(1ull << 1)	/* leaf: the card may read */
#define RBLN_FW_PTE_WRITE	(1ull << 2)	/* leaf: the card may write */
#define RBLN_FW_PTE_LOCAL	(1ull << 3)	/* leaf: address is card HBM */
#define RBLN_FW_PTE_LEAF	(1ull << 4)	/* level 1: a 2 MiB page */
/* Bits 11:5 and 63:52 are reserved and must be zero. */
#define RBLN_FW_PTE_ADDR_MASK	0x000ffffffffff000ull	/* bits 51:12 */
#define RBLN_FW_PTE_FLAGS_MASK	0x1full

/*
 * Address spaces.  ASID 0 is reserved (never bound); the card has
 * RBLN_FW_MAX_ASID ids, 1..RBLN_FW_MAX_ASID-1 usable.
 */
#define RBLN_FW_MAX_ASID	4096

/* MMU fault reasons (rbln_fw_event.code of RBLN_FW_EV_MMU_FAULT). */
#define RBLN_FW_MMU_NOT_MAPPED	1	/* no valid entry on the walk */
#define RBLN_FW_MMU_NO_WRITE	2	/* write to a page without WRITE */
#define RBLN_FW_MMU_NO_READ	3	/* read of a page without READ */
#define RBLN_FW_MMU_BAD_ENTRY	4	/* reserved bits set, misaligned, LEAF misused */
#define RBLN_FW_MMU_BAD_ADDRESS	5	/* table or page outside host RAM / HBM */
#define RBLN_FW_MMU_NO_VM	6	/* ASID not bound */
#define RBLN_FW_MMU_BAD_VA	7	/* VA beyond 48 bits */

/* Access types (rbln_fw_event.data[2] of RBLN_FW_EV_MMU_FAULT). */
#define RBLN_FW_ACCESS_READ	1
#define RBLN_FW_ACCESS_WRITE	2

/* Who made a faulting access (rbln_fw_event.data[3]). */
#define RBLN_FW_SOURCE_DEBUG	0	/* RBLN_FW_OP_DEBUG_ACCESS */

#endif /* RBLN_FW_MMU_H */
