// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: pinned user pages (RBLN_BO_USERPTR).
 *
 * The pages are pinned long-term (FOLL_LONGTERM, so they are migrated out
 * of movable zones and CMA first), charged to the caller's RLIMIT_MEMLOCK
 * through account_locked_vm() (which lets CAP_IPC_LOCK through), and
 * DMA-mapped for the card.  They stay pinned until the buffer is freed:
 * its last handle closed, which also happens when the process dies.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>

#include "rbln_drv.h"
#include "rbln_gem.h"

static enum dma_data_direction rbln_userptr_dir(struct rbln_bo *bo)
{
	return bo->flags & RBLN_BO_DEVICE_READ_ONLY ? DMA_TO_DEVICE :
						      DMA_BIDIRECTIONAL;
}

/* The card's mapping; the pages stay pinned until the buffer is freed. */
void rbln_userptr_unmap(struct rbln_bo *bo)
{
	if (!bo->pin_sgt)
		return;
	dma_unmap_sgtable(bo->shmem.base.dev->dev, bo->pin_sgt,
			  rbln_userptr_dir(bo), RBLN_HOST_DMA_ATTRS);
	sg_free_table(bo->pin_sgt);
	kfree(bo->pin_sgt);
	bo->pin_sgt = NULL;
	bo->dev_sgt = NULL;
}

static void rbln_userptr_release(struct rbln_device *rdev, struct rbln_bo *bo)
{
	rbln_bo_dma_untrack(bo);
	rbln_userptr_unmap(bo);
	if (bo->pages) {
		unpin_user_pages_dirty_lock(bo->pages, bo->npages,
					    !(bo->flags & RBLN_BO_DEVICE_READ_ONLY));
		kvfree(bo->pages);
		bo->pages = NULL;
		atomic64_sub((u64)bo->npages << PAGE_SHIFT, &rdev->gem.pinned_bytes);
	}
	if (bo->mm) {
		account_locked_vm(bo->mm, bo->npages, false);
		mmdrop(bo->mm);
		bo->mm = NULL;
	}
}

static void rbln_userptr_free(struct drm_gem_object *obj)
{
	struct rbln_bo *bo = to_rbln_bo(obj);

	drm_WARN_ON(obj->dev, !list_empty(&bo->vmas));
	rbln_userptr_release(to_rbln(obj->dev), bo);
	mutex_destroy(&bo->lock);
	drm_gem_object_release(obj);
	kfree(bo);
}

static struct dma_buf *rbln_userptr_export(struct drm_gem_object *obj,
					   int flags)
{
	/* Another device must not keep a process's pages pinned. */
	return ERR_PTR(-EINVAL);
}

static const struct drm_gem_object_funcs rbln_userptr_bo_funcs = {
	.free = rbln_userptr_free,
	.open = rbln_gem_open,
	.close = rbln_gem_close,
	.export = rbln_userptr_export,
};

static int rbln_userptr_pin(struct rbln_device *rdev, struct rbln_bo *bo,
			    u64 addr)
{
	unsigned int gup = FOLL_LONGTERM;
	unsigned long pinned = 0;
	struct sg_table *sgt;
	int ret;

	if (!(bo->flags & RBLN_BO_DEVICE_READ_ONLY))
		gup |= FOLL_WRITE;

	ret = account_locked_vm(current->mm, bo->npages, true);
	if (ret)
		return ret;	/* -ENOMEM past RLIMIT_MEMLOCK */
	mmgrab(current->mm);
	bo->mm = current->mm;

	bo->pages = kvmalloc_array(bo->npages, sizeof(*bo->pages),
				   GFP_KERNEL | __GFP_NOWARN);
	if (!bo->pages)
		return -ENOMEM;
	while (pinned < bo->npages) {
		ret = pin_user_pages_fast(addr + (pinned << PAGE_SHIFT),
					  min(bo->npages - pinned, 65536UL), gup,
					  bo->pages + pinned);
		if (ret <= 0) {
			if (pinned)
				unpin_user_pages(bo->pages, pinned);
			kvfree(bo->pages);
			bo->pages = NULL;
			return ret ? ret : -EFAULT;
		}
		pinned += ret;
	}
	atomic64_add((u64)bo->npages << PAGE_SHIFT, &rdev->gem.pinned_bytes);

	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return -ENOMEM;
	ret = sg_alloc_table_from_pages_segment(sgt, bo->pages, bo->npages, 0,
						bo->npages << PAGE_SHIFT,
						dma_get_max_seg_size(rdev->drm.dev) & PAGE_MASK,
						GFP_KERNEL);
	if (ret) {
		kfree(sgt);
		return ret;
	}
	ret = dma_map_sgtable(rdev->drm.dev, sgt, rbln_userptr_dir(bo),
			      RBLN_HOST_DMA_ATTRS);
	if (ret) {
		sg_free_table(sgt);
		kfree(sgt);
		return ret;
	}
	bo->pin_sgt = sgt;
	bo->dev_sgt = sgt;
	return rbln_bo_dma_track(bo);	/* on error the free unmaps */
}

int rbln_ioctl_bo_userptr(struct drm_device *drm, void *data,
			  struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln(drm);
	struct drm_rbln_bo_userptr *args = data;
	struct rbln_bo *bo;
	int idx, ret;

	if (args->flags & ~RBLN_USERPTR_READ_ONLY)
		return -EINVAL;
	if (!args->addr || !args->size || !PAGE_ALIGNED(args->addr) ||
	    !PAGE_ALIGNED(args->size) || args->addr + args->size < args->addr)
		return -EINVAL;
	if (args->size > RBLN_VA_END - RBLN_VA_START ||
	    !rbln_host_pages_fit(args->size >> PAGE_SHIFT))
		return -ENOMEM;
	if (!access_ok(u64_to_user_ptr(args->addr), args->size))
		return -EFAULT;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	bo = rbln_bo_alloc(rdev, args->size, RBLN_BO_KIND_USERPTR,
			   &rbln_userptr_bo_funcs);
	if (IS_ERR(bo)) {
		ret = PTR_ERR(bo);
		goto out;
	}
	bo->npages = args->size >> PAGE_SHIFT;
	if (args->flags & RBLN_USERPTR_READ_ONLY)
		bo->flags |= RBLN_BO_DEVICE_READ_ONLY;

	ret = rbln_userptr_pin(rdev, bo, args->addr);
	if (ret) {
		drm_gem_object_put(&bo->shmem.base);
		goto out;
	}
	ret = rbln_bo_install(file, bo, &args->handle, &args->device_va);
out:
	drm_dev_exit(idx);
	return ret;
}
