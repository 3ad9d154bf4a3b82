// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: per-client figures in fdinfo (/proc/<pid>/fdinfo/<fd> of an open
 * /dev/accel/accelN), in the DRM usage-stats format
 * (Documentation/gpu/drm-usage-stats.rst).
 *
 * The DRM core prints drm-driver ("rbln"), drm-pdev (the card's PCI
 * address) and drm-client-id (unique per open file; several fds, also in
 * other processes, can share one client).  rbln adds, for the buffers
 * this client holds handles of:
 *
 *   drm-total-hbm<i>:      bytes of HBM buffers on chiplet i (one key per
 *   drm-shared-hbm<i>:     chiplet), the part shared with other clients
 *   drm-resident-hbm<i>:   or exported, and the resident part (all of it)
 *   drm-total-memory:      host buffers + pinned user pages + imported
 *   drm-shared-memory:     dma-bufs, in the reserved "memory" region; host
 *   drm-resident-memory:   buffers are resident once they have pages
 *   rbln-pinned-memory:    bytes of pinned user pages (part of "memory")
 *   rbln-asid:             the address-space id of this client's VM
 *   rbln-mmu-faults:       MMU faults of this client's VM
 *   drm-engine-chiplet<i>: card time (ns) the client's jobs ran on chiplet
 *                          i's command ring (one key per chiplet)
 *
 * Sizes are printed by drm_print_memory_stats(): a number of bytes, or a
 * number with " KiB" / " MiB" when it divides evenly.
 */
#include <linux/idr.h>
#include <linux/spinlock.h>

#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"

#define RBLN_FDINFO_HOST	RBLN_FW_MAX_CHIPLETS	/* index of "memory" */

static void rbln_fdinfo_count(struct drm_memory_stats *stats,
			      struct drm_gem_object *obj, u64 *pinned)
{
	struct rbln_bo *bo = to_rbln_bo(obj);
	struct drm_memory_stats *s;
	bool resident = true;

	if (bo->kind == RBLN_BO_KIND_HBM) {
		s = &stats[bo->chiplet];
	} else {
		s = &stats[RBLN_FDINFO_HOST];
		if (bo->kind == RBLN_BO_KIND_HOST)
			resident = READ_ONCE(bo->shmem.pages);
		if (bo->kind == RBLN_BO_KIND_USERPTR)
			*pinned += obj->size;
	}
	if (obj->handle_count > 1 || obj->dma_buf || obj->import_attach)
		s->shared += obj->size;
	else
		s->private += obj->size;
	if (resident)
		s->resident += obj->size;
}

void rbln_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct rbln_file *rf = to_rbln_file(file);
	struct rbln_device *rdev = rf->rdev;
	struct drm_memory_stats stats[RBLN_FW_MAX_CHIPLETS + 1] = {};
	struct drm_gem_object *obj;
	char region[16];
	u64 pinned = 0, faults;
	unsigned int i;
	int id;

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id)
		rbln_fdinfo_count(stats, obj, &pinned);
	spin_unlock(&file->table_lock);

	for (i = 0; i < rdev->id.chiplet_count; i++) {
		snprintf(region, sizeof(region), "hbm%u", i);
		drm_print_memory_stats(p, &stats[i], DRM_GEM_OBJECT_RESIDENT, region);
	}
	drm_print_memory_stats(p, &stats[RBLN_FDINFO_HOST],
			       DRM_GEM_OBJECT_RESIDENT, "memory");

	faults = rbln_vm_fault_count(&rf->vm);
	drm_printf(p, "rbln-pinned-memory:\t%llu KiB\n", pinned >> 10);
	drm_printf(p, "rbln-asid:\t%u\n", rbln_vm_asid(&rf->vm));
	drm_printf(p, "rbln-mmu-faults:\t%llu\n", faults);
	for (i = 0; i < rbln_rings_count(rdev); i++)
		drm_printf(p, "drm-engine-chiplet%u:\t%llu ns\n", i,
			   (u64)atomic64_read(&rf->busy_ns[i]));
}
