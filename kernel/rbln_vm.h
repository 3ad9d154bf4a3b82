/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: device address spaces (VMs, rbln_vm.c) and their page tables
 * (rbln_mmu.c).  A VM's fields are those two files' own; the other files
 * use the functions below.
 */
#ifndef RBLN_VM_H
#define RBLN_VM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/xarray.h>

#include <drm/drm_mm.h>
#include <drm/rbln_accel.h>

#include "rbln_fw_mmu.h"

struct dma_pool;
struct rbln_bo;
struct rbln_device;
struct rbln_pt;

/*
 * Device VA layout of every VM: nothing below 4 GiB (catches small and
 * NULL-based addresses), 48-bit addresses above.
 */
#define RBLN_VA_START		BIT_ULL(32)
#define RBLN_VA_END		BIT_ULL(RBLN_FW_VA_BITS)

/* A client's device address space, one per open file. */
struct rbln_vm {
	struct rbln_device *rdev;
	/* Protects mm, the page tables under root, bound and mapped_bytes. */
	struct mutex lock;
	struct drm_mm mm;		/* VA allocator */
	struct rbln_pt *root;		/* NULL once freed at unbind */
	struct list_head link;		/* in rbln_vms.all, under its list_lock */
	u32 asid;
	bool bound;			/* the card knows the root */
	bool closed;			/* its file is gone: run no more jobs */
	u64 mapped_bytes;

	/*
	 * Protects flags and the fault record below; written by the event
	 * thread and by the completion interrupt.
	 */
	spinlock_t fault_lock;
	u32 flags;			/* RBLN_VM_* of the uAPI */
	u64 fault_count;
	u64 fault_va;
	u32 fault_access;
	u32 fault_reason;
};

/* A buffer's place in one VM. */
struct rbln_vma {
	struct list_head bo_link;	/* in rbln_bo.vmas, under bo->lock */
	struct rbln_bo *bo;
	struct rbln_vm *vm;
	struct drm_mm_node node;	/* VA range, under vm->lock */
	unsigned int handles;		/* handles of this VM's file */
	bool mapped;			/* page-table entries written */
};

/* The card's VMs. */
struct rbln_vms {
	struct xarray xa;		/* asid -> struct rbln_vm */
	/*
	 * Protects the VMs found in xa against their teardown, for the
	 * walkers outside their files: the debug access and recovery's
	 * rebind.  rbln_vm_fini() takes its VM out of xa under it.  Also
	 * protects all (every VM that has page tables, in xa or not) and
	 * pt_pool, which rbln_vms_unplug() frees at unbind.
	 */
	struct mutex list_lock;
	struct list_head all;
	struct dma_pool *pt_pool;	/* page-table pages */
};

/* rbln_vm.c */
int rbln_vms_init(struct rbln_device *rdev);
int rbln_vms_alloc(struct rbln_device *rdev);
void rbln_vms_unplug(struct rbln_device *rdev);
void rbln_vms_rebind(struct rbln_device *rdev);
int rbln_vm_debug_access(struct rbln_device *rdev, u32 asid, bool write,
			 u64 va, void *buf, u32 len);
void rbln_vm_mmu_fault(struct rbln_device *rdev, u32 asid, u64 va,
		       u32 access, u32 reason);

int rbln_vm_init(struct rbln_device *rdev, struct rbln_vm *vm);
void rbln_vm_fini(struct rbln_vm *vm);
void rbln_vm_close(struct rbln_vm *vm, unsigned int busy_queues);
int rbln_vm_bind(struct rbln_vm *vm);
int rbln_vm_prepare_bo(struct rbln_vm *vm, struct rbln_bo *bo, u64 *va);
void rbln_vm_set_faulted(struct rbln_vm *vm);
u64 rbln_vm_fault_count(struct rbln_vm *vm);
void rbln_vm_info(struct rbln_vm *vm, struct drm_rbln_info_vm *v);

int rbln_vma_add(struct rbln_bo *bo, struct rbln_vm *vm);
void rbln_vma_put(struct rbln_bo *bo, struct rbln_vm *vm);
u64 rbln_vma_va(struct rbln_bo *bo, struct rbln_vm *vm);

static inline u32 rbln_vm_asid(const struct rbln_vm *vm)
{
	return vm->asid;
}

/* A faulted VM runs no more jobs. */
static inline bool rbln_vm_faulted(const struct rbln_vm *vm)
{
	return READ_ONCE(vm->flags) & RBLN_VM_FAULTED;
}

/* Nor does one whose file is gone (rbln_vm_close()). */
static inline bool rbln_vm_closed(const struct rbln_vm *vm)
{
	return READ_ONCE(vm->closed);
}

/* rbln_mmu.c, under vm->lock */
struct rbln_pt *rbln_pt_alloc(struct rbln_device *rdev);
void rbln_pt_free_tree(struct rbln_device *rdev, struct rbln_pt *root);
dma_addr_t rbln_pt_dma(struct rbln_pt *pt);
int rbln_pt_map(struct rbln_vm *vm, u64 va, u64 addr, u64 len, u64 pte_flags);
void rbln_pt_unmap(struct rbln_vm *vm, u64 va, u64 len);

#endif /* RBLN_VM_H */
