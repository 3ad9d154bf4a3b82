/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-API differences between the kernels rbln supports (6.8 .. 6.15).
 *
 * Each difference is detected by tools/scripts/kernel-features.sh, which
 * writes rbln_config.h with one HAVE_* define per API; the rest of the
 * driver uses only the helpers below and never tests kernel versions.
 */
#ifndef RBLN_COMPAT_H
#define RBLN_COMPAT_H

#include <linux/device.h>
#include <linux/fs.h>
#include <linux/pci.h>

#include "rbln_config.h"

/* 6.13 spells a symbol namespace as a string. */
#ifdef HAVE_MODULE_IMPORT_NS_STRING
#define RBLN_IMPORT_NS_DMA_BUF() MODULE_IMPORT_NS("DMA_BUF")
#else
#define RBLN_IMPORT_NS_DMA_BUF() MODULE_IMPORT_NS(DMA_BUF)
#endif

/*
 * 6.12 added file_operations.fop_flags; accel_open() refuses files
 * without FOP_UNSIGNED_OFFSET there.  Older kernels have neither.
 */
#ifdef HAVE_FOP_UNSIGNED_OFFSET
#define RBLN_FOP_FLAGS .fop_flags = FOP_UNSIGNED_OFFSET,
#else
#define RBLN_FOP_FLAGS
#endif

/* 6.14 removed drm_driver.date. */
#ifdef HAVE_DRM_DRIVER_DATE
#define RBLN_DRM_DRIVER_DATE .date = "20250101",
#else
#define RBLN_DRM_DRIVER_DATE
#endif

#ifndef HAVE_DRM_DRIVER_SHOW_FDINFO
#error "rbln needs drm_driver.show_fdinfo (Linux 6.5 or newer)"
#endif
#ifndef HAVE_DRM_DEBUGFS_ADD_FILE
#error "rbln needs drm_debugfs_add_file() (Linux 6.3 or newer)"
#endif

/*
 * Managed BAR helpers.  6.11 added pcim_iomap_region(), pcim_request_region()
 * and pcim_iomap_range(); before that, BAR0 goes through the (now
 * deprecated) pcim_iomap_regions() table and the BAR2 window is mapped by
 * hand with a devres action.  All return an IOMEM_ERR_PTR on failure.
 */
static inline void __iomem *rbln_pcim_iomap_bar(struct pci_dev *pdev, int bar,
						const char *name)
{
#ifdef HAVE_PCIM_IOMAP_REGION
	return pcim_iomap_region(pdev, bar, name);
#else
	int ret = pcim_iomap_regions(pdev, BIT(bar), name);

	if (ret)
		return IOMEM_ERR_PTR(ret);
	return pcim_iomap_table(pdev)[bar];
#endif
}

#ifndef HAVE_PCIM_REQUEST_REGION
struct rbln_compat_region {
	struct pci_dev *pdev;
	int bar;
};

static inline void rbln_compat_release_region(void *data)
{
	struct rbln_compat_region *r = data;

	pci_release_region(r->pdev, r->bar);
}
#endif

static inline int rbln_pcim_request_region(struct pci_dev *pdev, int bar,
					   const char *name)
{
#ifdef HAVE_PCIM_REQUEST_REGION
	return pcim_request_region(pdev, bar, name);
#else
	struct rbln_compat_region *r;
	int ret;

	r = devm_kzalloc(&pdev->dev, sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->pdev = pdev;
	r->bar = bar;
	ret = pci_request_region(pdev, bar, name);
	if (ret)
		return ret;
	return devm_add_action_or_reset(&pdev->dev, rbln_compat_release_region, r);
#endif
}

#ifndef HAVE_PCIM_IOMAP_RANGE
struct rbln_compat_iomap {
	struct pci_dev *pdev;
	void __iomem *addr;
};

static inline void rbln_compat_iounmap(void *data)
{
	struct rbln_compat_iomap *m = data;

	pci_iounmap(m->pdev, m->addr);
}
#endif

static inline void __iomem *rbln_pcim_iomap_range(struct pci_dev *pdev, int bar,
						  unsigned long offset,
						  unsigned long len)
{
#ifdef HAVE_PCIM_IOMAP_RANGE
	return pcim_iomap_range(pdev, bar, offset, len);
#else
	struct rbln_compat_iomap *m;
	int ret;

	m = devm_kzalloc(&pdev->dev, sizeof(*m), GFP_KERNEL);
	if (!m)
		return IOMEM_ERR_PTR(-ENOMEM);
	m->pdev = pdev;
	m->addr = pci_iomap_range(pdev, bar, offset, len);
	if (!m->addr)
		return IOMEM_ERR_PTR(-ENOMEM);
	ret = devm_add_action_or_reset(&pdev->dev, rbln_compat_iounmap, m);
	if (ret)
		return IOMEM_ERR_PTR(ret);
	return m->addr;
#endif
}

/*
 * The buddy allocator: drm_buddy_* up to 6.12.y's move to the shared
 * gpu_buddy_* (linux/gpu_buddy.h, built into the kernel).  rbln uses only
 * the calls below, under its own lock.
 */
#ifdef HAVE_GPU_BUDDY
#include <linux/gpu_buddy.h>
#define rbln_buddy			gpu_buddy
#define rbln_buddy_block		gpu_buddy_block
#define rbln_buddy_init			gpu_buddy_init
#define rbln_buddy_fini			gpu_buddy_fini
#define rbln_buddy_alloc_blocks		gpu_buddy_alloc_blocks
#define rbln_buddy_free_list		gpu_buddy_free_list
#define rbln_buddy_block_offset		gpu_buddy_block_offset
#define rbln_buddy_block_size		gpu_buddy_block_size
#define RBLN_BUDDY_TREES		GPU_BUDDY_MAX_FREE_TREES
#else
#include <drm/drm_buddy.h>
#define rbln_buddy			drm_buddy
#define rbln_buddy_block		drm_buddy_block
#define rbln_buddy_init			drm_buddy_init
#define rbln_buddy_fini			drm_buddy_fini
#define rbln_buddy_alloc_blocks		drm_buddy_alloc_blocks
#define rbln_buddy_free_list		drm_buddy_free_list
#define rbln_buddy_block_offset		drm_buddy_block_offset
#define rbln_buddy_block_size		drm_buddy_block_size
#define RBLN_BUDDY_TREES		DRM_BUDDY_MAX_FREE_TREES
#endif

/*
 * Size of the largest free block (a fragmentation figure for telemetry).
 * The allocator has no call for it, so this reads its free lists, which
 * its header calls internal: the caller holds the lock that serialises
 * every allocation and free.
 */
static inline u64 rbln_buddy_largest_free(struct rbln_buddy *mm)
{
	int order;

	for (order = mm->max_order; order >= 0; order--) {
#ifdef HAVE_BUDDY_FREE_TREES
		unsigned int t;

		for (t = 0; t < RBLN_BUDDY_TREES; t++)
			if (!RB_EMPTY_ROOT(&mm->free_trees[t][order]))
				return mm->chunk_size << order;
#else
		if (!list_empty(&mm->free_list[order]))
			return mm->chunk_size << order;
#endif
	}
	return 0;
}

/*
 * io_uring: the completion that carries res2 (the CQE32 extra) is
 * io_uring_cmd_done() before 6.18 and io_uring_cmd_done32() from 6.18 on.
 */
#ifdef HAVE_IO_URING_CMD_DONE_RES2
#define rbln_io_uring_cmd_done(cmd, ret, res2, issue_flags) \
	io_uring_cmd_done(cmd, ret, res2, issue_flags)
#else
#define rbln_io_uring_cmd_done(cmd, ret, res2, issue_flags) \
	io_uring_cmd_done32(cmd, ret, res2, issue_flags)
#endif

/*
 * drm_sched: 6.15 passes drm_sched_init() a struct of arguments, 6.17
 * gives drm_sched_job_init() the DRM client id (both are in 6.12.y stable).
 */
#include <drm/gpu_scheduler.h>

static inline int rbln_sched_init(struct drm_gpu_scheduler *sched,
				  const struct drm_sched_backend_ops *ops,
				  u32 credits, long timeout, const char *name,
				  struct device *dev)
{
#ifdef HAVE_DRM_SCHED_INIT_ARGS
	const struct drm_sched_init_args args = {
		.ops = ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = credits,
		.timeout = timeout,
		.name = name,
		.dev = dev,
	};

	return drm_sched_init(sched, &args);
#else
	return drm_sched_init(sched, ops, NULL, DRM_SCHED_PRIORITY_COUNT,
			      credits, 0, timeout, NULL, NULL, name, dev);
#endif
}

static inline int rbln_sched_job_init(struct drm_sched_job *job,
				      struct drm_sched_entity *entity,
				      void *owner, u64 client_id)
{
#ifdef HAVE_DRM_SCHED_JOB_INIT_CLIENT_ID
	return drm_sched_job_init(job, entity, 1, owner, client_id);
#else
	return drm_sched_job_init(job, entity, 1, owner);
#endif
}

#endif /* RBLN_COMPAT_H */
