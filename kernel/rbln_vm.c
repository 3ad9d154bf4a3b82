// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: one device address space (VM) per open file.
 *
 * A VM is an ASID, a page-table root and a drm_mm of device VAs.  Every
 * buffer that gets a handle in a file gets a place (struct rbln_vma) in
 * that file's VM, through the GEM open/close callbacks: created buffers,
 * userptr buffers and imported dma-bufs alike.
 *
 * When the page-table entries are written:
 *  - HBM, userptr and imported buffers: when the handle is created (their
 *    memory exists already);
 *  - host buffers: at their first device use (rbln_vm_prepare_bo() for a
 *    job that names the buffer, rbln_vm_prepare() for the debug access),
 *    when their shmem pages are allocated and DMA-mapped.
 *
 * The card learns about a VM (VM_BIND) only at its first device use too:
 * until then page-table changes need no TLB invalidation, so creating and
 * freeing buffers in a VM the card never used costs no card round trip.
 *
 * Locks: see "Locking" in rbln_drv.h (bo->lock, then vm->lock).
 */
#include <linux/dma-resv.h>
#include <linux/dmapool.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_gem.h"
#include "rbln_hbm.h"
#include "rbln_vm.h"

static void rbln_vms_fini(struct drm_device *drm, void *arg)
{
	dma_pool_destroy(to_rbln(drm)->vms.pt_pool);
}

/* Probe, before the IRQs (an MMU fault event looks VMs up): the VM table. */
int rbln_vms_init(struct rbln_device *rdev)
{
	xa_init_flags(&rdev->vms.xa, XA_FLAGS_ALLOC1);
	INIT_LIST_HEAD(&rdev->vms.all);
	return drmm_mutex_init(&rdev->drm, &rdev->vms.list_lock);
}

/*
 * Probe, once the card is up: the page-table pool.  It lives until the
 * unbind (rbln_vms_unplug()); a failed probe frees it with the drm_device.
 */
int rbln_vms_alloc(struct rbln_device *rdev)
{
	struct rbln_vms *vms = &rdev->vms;

	vms->pt_pool = dma_pool_create("rbln-pt", &rdev->pdev->dev,
				       RBLN_FW_PAGE_SIZE, RBLN_FW_PAGE_SIZE, 0);
	if (!vms->pt_pool)
		return -ENOMEM;
	return drmm_add_action_or_reset(&rdev->drm, rbln_vms_fini, NULL);
}

/* Frees @vm's page tables, list_lock held (the card must not use them). */
static void rbln_vm_drop_tables_locked(struct rbln_vm *vm)
{
	lockdep_assert_held(&vm->rdev->vms.list_lock);
	list_del_init(&vm->link);
	mutex_lock(&vm->lock);
	rbln_pt_free_tree(vm->rdev, vm->root);
	vm->root = NULL;
	vm->bound = false;
	mutex_unlock(&vm->lock);
}

static void rbln_vm_free_tables(struct rbln_vm *vm)
{
	mutex_lock(&vm->rdev->vms.list_lock);
	rbln_vm_drop_tables_locked(vm);
	mutex_unlock(&vm->rdev->vms.list_lock);
}

/*
 * Unbind, once the card is stopped: the page tables of every VM, and the
 * pool they come from, are freed now rather than when the open files that
 * still hold the VMs close.  Those files can do nothing with the card any
 * more; their VMs keep their address ranges, without tables.
 */
void rbln_vms_unplug(struct rbln_device *rdev)
{
	struct rbln_vms *vms = &rdev->vms;
	struct rbln_vm *vm, *tmp;

	mutex_lock(&vms->list_lock);
	list_for_each_entry_safe(vm, tmp, &vms->all, link)
		rbln_vm_drop_tables_locked(vm);
	dma_pool_destroy(vms->pt_pool);
	vms->pt_pool = NULL;
	mutex_unlock(&vms->list_lock);
}

int rbln_vm_init(struct rbln_device *rdev, struct rbln_vm *vm)
{
	int ret;

	vm->rdev = rdev;
	mutex_init(&vm->lock);
	spin_lock_init(&vm->fault_lock);
	drm_mm_init(&vm->mm, RBLN_VA_START, RBLN_VA_END - RBLN_VA_START);
	INIT_LIST_HEAD(&vm->link);
	mutex_lock(&rdev->vms.list_lock);
	if (rdev->vms.pt_pool) {
		vm->root = rbln_pt_alloc(rdev);
		ret = vm->root ? 0 : -ENOMEM;
	} else {
		ret = -ENODEV;	/* unbound meanwhile */
	}
	if (!ret)
		list_add_tail(&vm->link, &rdev->vms.all);
	mutex_unlock(&rdev->vms.list_lock);
	if (ret)
		goto err;
	ret = xa_alloc(&rdev->vms.xa, &vm->asid, vm,
		       XA_LIMIT(1, RBLN_FW_MAX_ASID - 1), GFP_KERNEL);
	if (ret) {
		if (ret == -EBUSY) {
			dev_warn_ratelimited(rdev->drm.dev,
					     "all %u device address spaces are in use (one per open file)\n",
					     RBLN_FW_MAX_ASID - 1);
			ret = -ENOSPC;
		}
		goto err;
	}
	return 0;

err:
	rbln_vm_free_tables(vm);
	drm_mm_takedown(&vm->mm);
	mutex_destroy(&vm->lock);
	return ret;
}

/*
 * Whether a failed MMU request (VM_BIND, VM_UNBIND, TLB_INVALIDATE) is worth
 * logging: not if the device is gone, nor if the card is not READY (the
 * request was refused, or the card faulted before it answered).  Such a
 * card is restarted, and forgets every binding and translation, before it
 * runs anything again.
 */
static bool rbln_vm_request_failed(struct rbln_device *rdev, int ret)
{
	return ret && ret != -ENODEV && rbln_get_state(rdev) == RBLN_STATE_READY;
}

/* At file close: every handle of the file is gone, and so every vma. */
void rbln_vm_fini(struct rbln_vm *vm)
{
	struct rbln_device *rdev = vm->rdev;
	int ret;

	/*
	 * No debug access or recovery can find the VM (and bind it) from here
	 * on, but its ASID stays taken (a reserved entry) until the card has
	 * unbound it.  Freed at once, a file opened meanwhile could get the
	 * ASID and bind it, and this VM_UNBIND would then take the new
	 * file's address space away (the release of a file runs late, in a
	 * worker, when io_uring held it).
	 *
	 * A card recovery restarts the card, which forgets every binding,
	 * and then binds again the VMs it finds: not this one.  reset_lock
	 * keeps the recovery out until the unbind is done.
	 */
	rbln_reset_lock(rdev);
	mutex_lock(&rdev->vms.list_lock);
	xa_cmpxchg(&rdev->vms.xa, vm->asid, vm, XA_ZERO_ENTRY, GFP_KERNEL);
	mutex_unlock(&rdev->vms.list_lock);
	if (vm->bound) {
		ret = rbln_msg_vm_unbind(rdev, vm->asid);
		if (rbln_vm_request_failed(rdev, ret))
			drm_warn(&rdev->drm, "VM_UNBIND of asid %u failed: %d\n",
				 vm->asid, ret);
	}
	rbln_reset_unlock(rdev);
	xa_release(&rdev->vms.xa, vm->asid);
	rbln_vm_free_tables(vm);
	drm_WARN_ON(&rdev->drm, !drm_mm_clean(&vm->mm));
	drm_mm_takedown(&vm->mm);
	mutex_destroy(&vm->lock);
}

static int rbln_vm_bind_locked(struct rbln_vm *vm)
{
	int ret;

	lockdep_assert_held(&vm->lock);
	if (vm->bound)
		return 0;
	if (!vm->root)
		return -ENODEV;	/* unbound: rbln_vms_unplug() */
	ret = rbln_msg_vm_bind(vm->rdev, vm->asid, rbln_pt_dma(vm->root));
	if (ret)
		return ret;
	vm->bound = true;
	return 0;
}

/* First device use of @vm: the card learns it (VM_BIND), once. */
int rbln_vm_bind(struct rbln_vm *vm)
{
	int ret;

	/* Set once; a card recovery binds it again with the rings stopped. */
	if (READ_ONCE(vm->bound))
		return 0;
	mutex_lock(&vm->lock);
	ret = rbln_vm_bind_locked(vm);
	mutex_unlock(&vm->lock);
	return ret;
}

static u64 rbln_vma_pte_flags(struct rbln_bo *bo)
{
	u64 flags = RBLN_FW_PTE_READ;

	if (!(bo->flags & RBLN_BO_DEVICE_READ_ONLY))
		flags |= RBLN_FW_PTE_WRITE;
	if (bo->kind == RBLN_BO_KIND_HBM)
		flags |= RBLN_FW_PTE_LOCAL;
	return flags;
}

/* Writes the page-table entries of @vma; bo->lock and vm->lock held. */
static int rbln_vma_map_locked(struct rbln_vma *vma, struct sg_table *sgt)
{
	struct rbln_bo *bo = vma->bo;
	struct rbln_vm *vm = vma->vm;
	struct rbln_device *rdev = vm->rdev;
	u64 flags = rbln_vma_pte_flags(bo);
	u64 va = vma->node.start, end = va + vma->node.size;
	int ret = 0;

	lockdep_assert_held(&bo->lock);
	lockdep_assert_held(&vm->lock);

	if (bo->kind == RBLN_BO_KIND_HBM) {
		struct rbln_buddy_block *block;

		list_for_each_entry(block, &bo->blocks, link) {
			u64 len = rbln_hbm_block_size(rdev, bo->chiplet, block);

			ret = rbln_pt_map(vm, va,
					  rbln_hbm_block_addr(rdev, bo->chiplet, block),
					  len, flags);
			if (ret)
				break;
			va += len;
		}
	} else {
		struct scatterlist *sg;
		unsigned int i;

		for_each_sgtable_dma_sg(sgt, sg, i) {
			u64 len = min_t(u64, sg_dma_len(sg), end - va);

			if (!len)
				break;
			if (!IS_ALIGNED(sg_dma_address(sg) | len, RBLN_FW_PAGE_SIZE)) {
				drm_dbg_driver(&rdev->drm, "buffer segment not page aligned\n");
				ret = -EINVAL;
				break;
			}
			ret = rbln_pt_map(vm, va, sg_dma_address(sg), len, flags);
			if (ret)
				break;
			va += len;
		}
	}
	if (ret) {
		rbln_pt_unmap(vm, vma->node.start, va - vma->node.start);
		return ret;
	}
	vma->mapped = true;
	return 0;
}

static struct rbln_vma *rbln_vma_find(struct rbln_bo *bo, struct rbln_vm *vm)
{
	struct rbln_vma *vma;

	lockdep_assert_held(&bo->lock);
	list_for_each_entry(vma, &bo->vmas, bo_link)
		if (vma->vm == vm)
			return vma;
	return NULL;
}

/*
 * GEM open: a handle of @bo was created in @vm's file.  The first one
 * gives the buffer its VA in @vm (2 MiB aligned from 2 MiB up).
 */
int rbln_vma_add(struct rbln_bo *bo, struct rbln_vm *vm)
{
	u64 size = bo->shmem.base.size;
	struct rbln_vma *vma;
	int ret;

	mutex_lock(&bo->lock);
	vma = rbln_vma_find(bo, vm);
	if (vma) {
		vma->handles++;
		mutex_unlock(&bo->lock);
		return 0;
	}
	vma = kzalloc(sizeof(*vma), GFP_KERNEL);
	if (!vma) {
		ret = -ENOMEM;
		goto out;
	}
	vma->bo = bo;
	vma->vm = vm;
	vma->handles = 1;

	mutex_lock(&vm->lock);
	ret = drm_mm_insert_node_generic(&vm->mm, &vma->node, size,
					 size >= SZ_2M ? SZ_2M : SZ_4K, 0,
					 DRM_MM_INSERT_BEST);
	if (ret) {
		mutex_unlock(&vm->lock);
		kfree(vma);
		ret = -ENOMEM;	/* device VA space exhausted */
		goto out;
	}
	if (bo->kind != RBLN_BO_KIND_HOST || bo->dev_sgt) {
		ret = rbln_vma_map_locked(vma, bo->dev_sgt);
		if (ret) {
			drm_mm_remove_node(&vma->node);
			mutex_unlock(&vm->lock);
			kfree(vma);
			goto out;
		}
	}
	vm->mapped_bytes += size;
	mutex_unlock(&vm->lock);
	list_add_tail(&vma->bo_link, &bo->vmas);
out:
	mutex_unlock(&bo->lock);
	return ret;
}

/*
 * GEM close: a handle of @bo in @vm's file went away.  With the last one
 * the buffer leaves @vm: after the card finished every job that uses the
 * buffer (its reservation fences), the entries are cleared and the card's
 * TLB invalidated, and only then can the memory be freed or reused.
 */
void rbln_vma_put(struct rbln_bo *bo, struct rbln_vm *vm)
{
	struct drm_gem_object *obj = &bo->shmem.base;
	struct rbln_device *rdev = vm->rdev;
	struct rbln_vma *vma;
	int ret;

	mutex_lock(&bo->lock);
	vma = rbln_vma_find(bo, vm);
	if (drm_WARN_ON(&rdev->drm, !vma) || --vma->handles) {
		mutex_unlock(&bo->lock);
		return;
	}
	list_del(&vma->bo_link);
	mutex_unlock(&bo->lock);

	dma_resv_wait_timeout(obj->resv, DMA_RESV_USAGE_BOOKKEEP, false,
			      MAX_SCHEDULE_TIMEOUT);

	mutex_lock(&vm->lock);
	if (vma->mapped) {
		rbln_pt_unmap(vm, vma->node.start, vma->node.size);
		if (vm->bound) {
			ret = rbln_msg_tlb_invalidate(rdev, vm->asid,
						      vma->node.start,
						      vma->node.size);
			if (rbln_vm_request_failed(rdev, ret))
				dev_warn_ratelimited(rdev->drm.dev,
						     "TLB invalidation of asid %u failed (%d): the card is not answering\n",
						     vm->asid, ret);
		}
	}
	vm->mapped_bytes -= vma->node.size;
	drm_mm_remove_node(&vma->node);
	mutex_unlock(&vm->lock);
	kfree(vma);
}

/*
 * Host buffers: pages and DMA mapping, then the entries of @vma.  Called
 * with bo->lock held, which keeps @vma (GEM close takes it off the
 * buffer's list under that lock before it frees it).
 */
static int rbln_vma_populate_locked(struct rbln_vma *vma)
{
	struct rbln_bo *bo = vma->bo;
	struct sg_table *sgt;
	int ret = 0;

	lockdep_assert_held(&bo->lock);
	sgt = rbln_bo_device_sgt(bo);
	if (IS_ERR(sgt))
		return PTR_ERR(sgt);
	mutex_lock(&vma->vm->lock);
	if (!vma->mapped && drm_mm_node_allocated(&vma->node))
		ret = rbln_vma_map_locked(vma, sgt);
	mutex_unlock(&vma->vm->lock);
	return ret;
}

/*
 * First device use of [va, va + len) in @vm: the card learns the VM, and
 * host buffers in the range get their pages and entries.  Addresses with
 * no buffer stay unmapped (the access will fault, as it should).
 */
static int rbln_vm_prepare(struct rbln_vm *vm, u64 va, u64 len)
{
	struct drm_gem_object *objs[8];
	struct drm_mm_node *node;
	u64 start, end;
	unsigned int n, i;
	int ret;

	/*
	 * Only [RBLN_VA_START, RBLN_VA_END) can hold buffers; the drm_mm
	 * iterator must not be asked about anything outside its range.
	 */
	start = max(va, RBLN_VA_START);
	end = va + len < va ? RBLN_VA_END : min(va + len, RBLN_VA_END);

	ret = rbln_vm_bind(vm);
	if (ret)
		return ret;
	mutex_lock(&vm->lock);
	for (;;) {
		n = 0;
		if (start >= end) {
			mutex_unlock(&vm->lock);
			return 0;
		}
		drm_mm_for_each_node_in_range(node, &vm->mm, start, end) {
			struct rbln_vma *vma = container_of(node, struct rbln_vma, node);

			if (vma->mapped)
				continue;
			drm_gem_object_get(&vma->bo->shmem.base);
			objs[n++] = &vma->bo->shmem.base;
			if (n == ARRAY_SIZE(objs))
				break;
		}
		mutex_unlock(&vm->lock);
		if (!n)
			return 0;

		for (i = 0; i < n; i++) {
			struct rbln_bo *bo = to_rbln_bo(objs[i]);
			struct rbln_vma *vma;

			mutex_lock(&bo->lock);
			vma = rbln_vma_find(bo, vm);
			if (vma && !ret)
				ret = rbln_vma_populate_locked(vma);
			mutex_unlock(&bo->lock);
			drm_gem_object_put(objs[i]);
		}
		if (ret)
			return ret;
		mutex_lock(&vm->lock);
	}
}

/*
 * A job names @bo: host buffers get their pages and entries in @vm at
 * their first device use.  The buffer's device VA in @vm goes to *@va;
 * -ENOENT if @bo has no handle in @vm's file.
 */
int rbln_vm_prepare_bo(struct rbln_vm *vm, struct rbln_bo *bo, u64 *va)
{
	struct rbln_vma *vma;
	int ret = 0;

	/*
	 * The lock keeps the vma against a concurrent GEM close, which takes
	 * it off the buffer's list (under this lock) before it unmaps it:
	 * one seen mapped here stays mapped.
	 */
	mutex_lock(&bo->lock);
	vma = rbln_vma_find(bo, vm);
	if (!vma)
		ret = -ENOENT;
	else if (!vma->mapped)
		ret = rbln_vma_populate_locked(vma);
	if (!ret)
		*va = vma->node.start;
	mutex_unlock(&bo->lock);
	return ret;
}

/* The device VA of @bo in @vm, 0 if @bo has no handle in @vm's file. */
u64 rbln_vma_va(struct rbln_bo *bo, struct rbln_vm *vm)
{
	struct rbln_vma *vma;
	u64 va;

	mutex_lock(&bo->lock);
	vma = rbln_vma_find(bo, vm);
	va = vma ? vma->node.start : 0;
	mutex_unlock(&bo->lock);
	return va;
}

/*
 * At release, when @busy_queues of the file's queues still had jobs after
 * release_grace_ms: the VM runs nothing more.  Jobs not yet on the card
 * fail in run_job(), and a firmware-iface 1.3 card cancels the ones it
 * holds (VM_ABORT) at their next packet boundary or inside a WAIT.
 */
void rbln_vm_close(struct rbln_vm *vm, unsigned int busy_queues)
{
	struct rbln_device *rdev = vm->rdev;
	int idx, ret = 0;

	WRITE_ONCE(vm->closed, true);
	if (rdev->id.iface_minor < 3 || !drm_dev_enter(&rdev->drm, &idx))
		return;
	/* As a recovery takes them: it rebinds (and so un-aborts) VMs. */
	rbln_reset_lock(rdev);
	mutex_lock(&vm->lock);
	if (vm->bound && rbln_get_state(rdev) == RBLN_STATE_READY)
		ret = rbln_msg_vm_abort(rdev, vm->asid);
	mutex_unlock(&vm->lock);
	rbln_reset_unlock(rdev);
	drm_dev_exit(idx);
	if (ret)
		drm_warn(&rdev->drm, "VM_ABORT of asid %u failed (%d): its jobs run on\n",
			 vm->asid, ret);
	else
		drm_dbg_driver(&rdev->drm, "asid %u: %u queue(s) busy %u ms after release\n",
			       vm->asid, busy_queues, rbln_release_grace_ms);
}

/* Card recovery: bind every VM the card knew again (it forgot all of them). */
void rbln_vms_rebind(struct rbln_device *rdev)
{
	struct rbln_vm *vm;
	unsigned long asid;
	int ret;

	mutex_lock(&rdev->vms.list_lock);	/* no VM goes away meanwhile */
	xa_for_each(&rdev->vms.xa, asid, vm) {
		mutex_lock(&vm->lock);
		if (vm->bound) {
			vm->bound = false;
			ret = rbln_vm_bind_locked(vm);
			/*
			 * Unbound, the VM is bound at its next job.  A card
			 * that faulted again fails this attempt anyway.
			 */
			if (rbln_vm_request_failed(rdev, ret))
				drm_err(&rdev->drm, "recovery: VM_BIND of asid %lu: %d\n",
					asid, ret);
		}
		mutex_unlock(&vm->lock);
	}
	mutex_unlock(&rdev->vms.list_lock);
}

/*
 * debugfs vm_access: the card reads or writes @len bytes at @va of @asid
 * through its MMU.  A VM that exists is bound and its host buffers in the
 * range mapped first, as for a job; list_lock keeps it meanwhile.
 */
int rbln_vm_debug_access(struct rbln_device *rdev, u32 asid, bool write,
			 u64 va, void *buf, u32 len)
{
	struct rbln_vm *vm;
	int ret;

	mutex_lock(&rdev->vms.list_lock);
	vm = xa_load(&rdev->vms.xa, asid);
	ret = vm ? rbln_vm_prepare(vm, va, len) : 0;
	if (!ret)
		ret = rbln_msg_debug_access(rdev, asid, write, va, buf, len);
	mutex_unlock(&rdev->vms.list_lock);
	return ret;
}

/* The completion interrupt: a job of @vm faulted, its later jobs fail too. */
void rbln_vm_set_faulted(struct rbln_vm *vm)
{
	unsigned long flags;

	spin_lock_irqsave(&vm->fault_lock, flags);
	vm->flags |= RBLN_VM_FAULTED;
	spin_unlock_irqrestore(&vm->fault_lock, flags);
}

u64 rbln_vm_fault_count(struct rbln_vm *vm)
{
	u64 n;

	spin_lock_irq(&vm->fault_lock);
	n = vm->fault_count;
	spin_unlock_irq(&vm->fault_lock);
	return n;
}

/* RBLN_INFO_VM */
void rbln_vm_info(struct rbln_vm *vm, struct drm_rbln_info_vm *v)
{
	v->asid = vm->asid;
	v->va_start = RBLN_VA_START;
	v->va_end = RBLN_VA_END;
	mutex_lock(&vm->lock);
	v->mapped_bytes = vm->mapped_bytes;
	mutex_unlock(&vm->lock);
	spin_lock_irq(&vm->fault_lock);
	v->flags = vm->flags;
	v->fault_count = vm->fault_count;
	v->fault_va = vm->fault_va;
	v->fault_access = vm->fault_access;
	v->fault_reason = vm->fault_reason;
	spin_unlock_irq(&vm->fault_lock);
}

static const char *rbln_mmu_reason_name(u32 reason)
{
	switch (reason) {
	case RBLN_FW_MMU_NOT_MAPPED:
		return "not mapped";
	case RBLN_FW_MMU_NO_WRITE:
		return "write to a read-only page";
	case RBLN_FW_MMU_NO_READ:
		return "read of a page without read permission";
	case RBLN_FW_MMU_BAD_ENTRY:
		return "malformed page-table entry";
	case RBLN_FW_MMU_BAD_ADDRESS:
		return "page outside host RAM and HBM";
	case RBLN_FW_MMU_NO_VM:
		return "address space not bound";
	case RBLN_FW_MMU_BAD_VA:
		return "address beyond 48 bits";
	default:
		return "unknown reason";
	}
}

/* Event thread: the card's MMU refused an access of @asid. */
void rbln_vm_mmu_fault(struct rbln_device *rdev, u32 asid, u64 va,
		       u32 access, u32 reason)
{
	unsigned long flags;
	struct rbln_vm *vm;

	xa_lock(&rdev->vms.xa);
	vm = xa_load(&rdev->vms.xa, asid);
	if (vm) {
		spin_lock_irqsave(&vm->fault_lock, flags);
		if (!vm->fault_count) {
			vm->fault_va = va;
			vm->fault_access = access;
			vm->fault_reason = reason;
		}
		vm->fault_count++;
		vm->flags |= RBLN_VM_FAULTED;
		spin_unlock_irqrestore(&vm->fault_lock, flags);
	}
	xa_unlock(&rdev->vms.xa);

	dev_warn_ratelimited(rdev->drm.dev,
			     "MMU fault: asid %u %s at 0x%llx: %s%s\n", asid,
			     access == RBLN_FW_ACCESS_WRITE ? "write" : "read",
			     va, rbln_mmu_reason_name(reason),
			     vm ? "" : " (no such address space)");
}
