// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: buffer objects - host (GEM shmem), HBM (buddy blocks, CPU access
 * through the BAR), imported dma-bufs - and PRIME.
 *
 * Every kind is a struct rbln_bo.  GEM's open/close callbacks give each
 * buffer its place in the VM of every file that holds a handle of it
 * (rbln_vm.c).  Freeing happens when the last reference goes: after the
 * last handle, the last mmap and the last dma-buf are gone, and after the
 * vmas waited for the card (rbln_vma_put()).
 *
 * PRIME: host buffers export through the DRM helpers (their pages);
 * HBM buffers export their BAR range to peer-to-peer capable importers
 * (dma_map_resource of the BAR pages, as other drivers export VRAM); an
 * importer that cannot take peer-to-peer memory gets -EOPNOTSUPP at
 * attach.  Imported dma-bufs, ours from another card or anyone's, are
 * mapped into the importer's VM from their sg_table.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/iosys-map.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/pagemap.h>
#include <linux/shmem_fs.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_gem.h"
#include "rbln_hbm.h"

static void rbln_bo_fini(struct rbln_bo *bo)
{
	drm_WARN_ON(bo->shmem.base.dev, !list_empty(&bo->vmas));
	mutex_destroy(&bo->lock);
}

static void rbln_bo_init_common(struct rbln_bo *bo, enum rbln_bo_kind kind)
{
	bo->kind = kind;
	mutex_init(&bo->lock);
	INIT_LIST_HEAD(&bo->vmas);
	INIT_LIST_HEAD(&bo->blocks);
	INIT_LIST_HEAD(&bo->dma_link);
}

/* GEM open/close: the buffer's place in the file's VM (rbln_vma_add()). */
int rbln_gem_open(struct drm_gem_object *obj, struct drm_file *file)
{
	return rbln_vma_add(to_rbln_bo(obj), &to_rbln_file(file)->vm);
}

void rbln_gem_close(struct drm_gem_object *obj, struct drm_file *file)
{
	rbln_vma_put(to_rbln_bo(obj), &to_rbln_file(file)->vm);
}

/* ---- host buffers -------------------------------------------------------- */

static void rbln_host_unmap(struct rbln_bo *bo)
{
	struct drm_device *drm = bo->shmem.base.dev;

	if (!bo->dev_sgt)
		return;
	dma_unmap_sgtable(drm->dev, bo->dev_sgt, DMA_BIDIRECTIONAL,
			  RBLN_HOST_DMA_ATTRS);
	sg_free_table(bo->dev_sgt);
	kfree(bo->dev_sgt);
	bo->dev_sgt = NULL;
	drm_gem_shmem_unpin(&bo->shmem);
}

static void rbln_host_free(struct drm_gem_object *obj)
{
	struct rbln_bo *bo = to_rbln_bo(obj);

	atomic64_sub(obj->size, &to_rbln(obj->dev)->gem.host_bytes);
	rbln_bo_dma_untrack(bo);
	rbln_host_unmap(bo);
	rbln_bo_fini(bo);
	drm_gem_shmem_free(&bo->shmem);	/* frees bo: shmem is its start */
}

static const struct drm_gem_object_funcs rbln_host_funcs = {
	.free = rbln_host_free,
	.open = rbln_gem_open,
	.close = rbln_gem_close,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = drm_gem_shmem_object_mmap,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

/*
 * Host buffers live in a tmpfs of the driver's own, mounted with
 * huge=within_size: from 2 MiB up their pages come as transparent huge
 * pages where the kernel has them, so the card sees 2 MiB contiguous
 * pieces (2 MiB device PTEs, one DMA span each) instead of scattered
 * 4 KiB pages.  host_thp=N, or a kernel without THP, keeps the plain shmem
 * mount; either way the buffers behave the same.
 */
static struct vfsmount *rbln_gemfs;

void rbln_gemfs_init(void)
{
	char opts[] = "huge=within_size";
	struct file_system_type *type;
	struct vfsmount *mnt;

	if (!rbln_host_thp || !IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE))
		return;
	type = get_fs_type("tmpfs");
	if (!type)
		return;
	/* tmpfs is built in: the type holds no module reference to drop. */
	mnt = vfs_kern_mount(type, SB_KERNMOUNT, type->name, opts);
	if (IS_ERR(mnt)) {
		pr_notice("rbln: no huge-page tmpfs (%ld): host buffers use 4 KiB pages\n",
			  PTR_ERR(mnt));
		return;
	}
	rbln_gemfs = mnt;
}

void rbln_gemfs_fini(void)
{
	if (rbln_gemfs)
		kern_unmount(rbln_gemfs);
	rbln_gemfs = NULL;
}

/* A new host buffer's (still empty) shmem file moves to the driver's tmpfs. */
static int rbln_host_bo_use_gemfs(struct drm_gem_object *obj)
{
	struct file *filp;

	if (!rbln_gemfs || obj->size < SZ_2M)
		return 0;
	filp = shmem_file_setup_with_mnt(rbln_gemfs, "rbln host buffer",
					 obj->size, VM_NORESERVE);
	if (IS_ERR(filp))
		return PTR_ERR(filp);
	/* As drm_gem_shmem_create() set it for the file it made. */
	mapping_set_gfp_mask(filp->f_mapping, GFP_HIGHUSER | __GFP_RETRY_MAYFAIL);
	fput(obj->filp);
	obj->filp = filp;
	return 0;
}

/* drm_driver.gem_create_object: drm_gem_shmem_create() allocates a bo. */
struct drm_gem_object *rbln_gem_create_object(struct drm_device *drm,
					      size_t size)
{
	struct rbln_bo *bo;

	static_assert(offsetof(struct rbln_bo, shmem) == 0);
	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	rbln_bo_init_common(bo, RBLN_BO_KIND_HOST);
	bo->shmem.base.funcs = &rbln_host_funcs;
	return &bo->shmem.base;
}

/*
 * DMA addresses of @bo for the card; for host buffers this allocates and
 * DMA-maps the pages on first use.  Called with bo->lock held.
 */
struct sg_table *rbln_bo_device_sgt(struct rbln_bo *bo)
{
	struct drm_device *drm = bo->shmem.base.dev;
	struct sg_table *sgt;
	int ret;

	lockdep_assert_held(&bo->lock);
	if (bo->dev_sgt || bo->kind != RBLN_BO_KIND_HOST)
		return bo->dev_sgt;
	/*
	 * Not drm_gem_shmem_get_pages_sgt(): it maps with a CPU sync, which
	 * RBLN_HOST_DMA_ATTRS explains we do not do.  The pin keeps the pages
	 * until rbln_host_unmap().
	 */
	ret = drm_gem_shmem_pin(&bo->shmem);
	if (ret)
		return ERR_PTR(ret);
	sgt = drm_gem_shmem_get_sg_table(&bo->shmem);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto err_unpin;
	}
	ret = dma_map_sgtable(drm->dev, sgt, DMA_BIDIRECTIONAL,
			      RBLN_HOST_DMA_ATTRS);
	if (ret)
		goto err_free;
	bo->dev_sgt = sgt;
	ret = rbln_bo_dma_track(bo);
	if (ret) {
		rbln_host_unmap(bo);
		return ERR_PTR(ret);
	}
	return sgt;

err_free:
	sg_free_table(sgt);
	kfree(sgt);
err_unpin:
	drm_gem_shmem_unpin(&bo->shmem);
	return ERR_PTR(ret);
}

/* ---- HBM buffers --------------------------------------------------------- */

static void rbln_hbm_bo_free(struct drm_gem_object *obj)
{
	struct rbln_bo *bo = to_rbln_bo(obj);

	rbln_bo_fini(bo);
	rbln_hbm_free(to_rbln(obj->dev), bo->chiplet, &bo->blocks);
	drm_gem_object_release(obj);
	kfree(bo);
}

/* CPU mapping through the BAR, write-combined, block by block. */
static int rbln_hbm_bo_mmap(struct drm_gem_object *obj,
			    struct vm_area_struct *vma)
{
	struct rbln_device *rdev = to_rbln(obj->dev);
	struct rbln_bo *bo = to_rbln_bo(obj);
	unsigned long uaddr = vma->vm_start;
	struct rbln_buddy_block *block;
	int idx, ret = 0;

	if (!drm_dev_enter(obj->dev, &idx))
		return -ENODEV;
	/* drm_gem_mmap() checked that the vma is not larger than the bo. */
	vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_page_prot = pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	vma->vm_pgoff = 0;

	list_for_each_entry(block, &bo->blocks, link) {
		u64 len = rbln_hbm_block_size(rdev, bo->chiplet, block);
		phys_addr_t phys = rbln_hbm_phys(rdev,
						 rbln_hbm_block_addr(rdev, bo->chiplet, block));

		len = min_t(u64, len, vma->vm_end - uaddr);
		if (!len)
			break;
		ret = io_remap_pfn_range(vma, uaddr, PHYS_PFN(phys), len,
					 vma->vm_page_prot);
		if (ret)
			break;
		uaddr += len;
	}
	drm_dev_exit(idx);
	return ret;
}

/*
 * A kernel mapping of an HBM buffer, write-combined like its mmap (dma-buf
 * vmap: importers that touch the buffer with the CPU).  A buffer of one
 * buddy block is a window of the driver's mapping of all HBM; one of
 * several blocks is mapped page by page (vmap_pfn(), where the kernel
 * has it; else -EOPNOTSUPP).  The caller holds the buffer's reservation
 * lock (drm_gem_vmap()).
 */
static int rbln_hbm_bo_vmap(struct drm_gem_object *obj, struct iosys_map *map)
{
	struct rbln_device *rdev = to_rbln(obj->dev);
	struct rbln_bo *bo = to_rbln_bo(obj);
	unsigned long *pfns, n = 0, pages = obj->size >> PAGE_SHIFT;
	struct rbln_buddy_block *block;
	void *vaddr;
	int idx;

	if (!drm_dev_enter(obj->dev, &idx))
		return -ENODEV;
	if (list_is_singular(&bo->blocks)) {
		block = list_first_entry(&bo->blocks, struct rbln_buddy_block, link);
		iosys_map_set_vaddr_iomem(map, rdev->hbm.wc - rdev->hbm.wc_start +
					  rbln_hbm_block_addr(rdev, bo->chiplet, block));
		drm_dev_exit(idx);
		return 0;
	}
	if (!IS_ENABLED(CONFIG_VMAP_PFN)) {
		drm_dev_exit(idx);
		return -EOPNOTSUPP;
	}
	pfns = kvmalloc_array(pages, sizeof(*pfns), GFP_KERNEL);
	if (!pfns) {
		drm_dev_exit(idx);
		return -ENOMEM;
	}
	list_for_each_entry(block, &bo->blocks, link) {
		u64 len = rbln_hbm_block_size(rdev, bo->chiplet, block);
		u64 addr = rbln_hbm_block_addr(rdev, bo->chiplet, block);
		unsigned long pfn = PHYS_PFN(rbln_hbm_phys(rdev, addr));
		u64 i;

		for (i = 0; i < len >> PAGE_SHIFT && n < pages; i++)
			pfns[n++] = pfn + i;
	}
	vaddr = vmap_pfn(pfns, n, pgprot_writecombine(PAGE_KERNEL));
	kvfree(pfns);
	drm_dev_exit(idx);
	if (!vaddr)
		return -ENOMEM;
	iosys_map_set_vaddr_iomem(map, (void __iomem __force *)vaddr);
	return 0;
}

static void rbln_hbm_bo_vunmap(struct drm_gem_object *obj,
			       struct iosys_map *map)
{
	struct rbln_bo *bo = to_rbln_bo(obj);

	if (!list_is_singular(&bo->blocks))
		vunmap((void __force *)map->vaddr_iomem);
}

static const struct vm_operations_struct rbln_hbm_vm_ops = {
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static int rbln_hbm_dmabuf_attach(struct dma_buf *dmabuf,
				  struct dma_buf_attachment *attach)
{
	/* BAR memory has no struct pages: peer-to-peer importers only. */
	if (!attach->peer2peer)
		return -EOPNOTSUPP;
	return 0;
}

static struct sg_table *rbln_hbm_map_dma_buf(struct dma_buf_attachment *attach,
					     enum dma_data_direction dir)
{
	struct drm_gem_object *obj = attach->dmabuf->priv;
	struct rbln_device *rdev = to_rbln(obj->dev);
	struct rbln_bo *bo = to_rbln_bo(obj);
	struct rbln_buddy_block *block;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int n = 0;
	int ret;

	list_for_each_entry(block, &bo->blocks, link)
		n++;
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, n, GFP_KERNEL);
	if (ret)
		goto err_free;

	sg = sgt->sgl;
	list_for_each_entry(block, &bo->blocks, link) {
		u64 len = rbln_hbm_block_size(rdev, bo->chiplet, block);
		phys_addr_t phys = rbln_hbm_phys(rdev,
						 rbln_hbm_block_addr(rdev, bo->chiplet, block));
		dma_addr_t addr;

		addr = dma_map_resource(attach->dev, phys, len, dir,
					DMA_ATTR_SKIP_CPU_SYNC);
		ret = dma_mapping_error(attach->dev, addr);
		if (ret)
			goto err_unmap;
		sg_set_page(sg, NULL, len, 0);
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = len;
		sg = sg_next(sg);
	}
	return sgt;

err_unmap:
	for (sg = sgt->sgl; sg && sg_dma_len(sg); sg = sg_next(sg))
		dma_unmap_resource(attach->dev, sg_dma_address(sg),
				   sg_dma_len(sg), dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void rbln_hbm_unmap_dma_buf(struct dma_buf_attachment *attach,
				   struct sg_table *sgt,
				   enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i)
		dma_unmap_resource(attach->dev, sg_dma_address(sg),
				   sg_dma_len(sg), dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(sgt);
	kfree(sgt);
}

static const struct dma_buf_ops rbln_hbm_dmabuf_ops = {
	.attach = rbln_hbm_dmabuf_attach,
	.map_dma_buf = rbln_hbm_map_dma_buf,
	.unmap_dma_buf = rbln_hbm_unmap_dma_buf,
	.release = drm_gem_dmabuf_release,
	.mmap = drm_gem_dmabuf_mmap,
	.vmap = drm_gem_dmabuf_vmap,
	.vunmap = drm_gem_dmabuf_vunmap,
};

/*
 * A buffer the kernel cannot map (several blocks, no CONFIG_VMAP_PFN) is
 * exported without vmap, so dma_buf_vmap() answers -EINVAL: a failing
 * vmap op would WARN there.
 */
static const struct dma_buf_ops rbln_hbm_dmabuf_ops_novmap = {
	.attach = rbln_hbm_dmabuf_attach,
	.map_dma_buf = rbln_hbm_map_dma_buf,
	.unmap_dma_buf = rbln_hbm_unmap_dma_buf,
	.release = drm_gem_dmabuf_release,
	.mmap = drm_gem_dmabuf_mmap,
};

static struct dma_buf *rbln_hbm_bo_export(struct drm_gem_object *obj,
					  int flags)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);

	info.ops = list_is_singular(&to_rbln_bo(obj)->blocks) ||
		   IS_ENABLED(CONFIG_VMAP_PFN) ? &rbln_hbm_dmabuf_ops :
						 &rbln_hbm_dmabuf_ops_novmap;
	info.size = obj->size;
	info.flags = flags;
	info.priv = obj;
	info.resv = obj->resv;
	return drm_gem_dmabuf_export(obj->dev, &info);
}

static const struct drm_gem_object_funcs rbln_hbm_funcs = {
	.free = rbln_hbm_bo_free,
	.open = rbln_gem_open,
	.close = rbln_gem_close,
	.mmap = rbln_hbm_bo_mmap,
	.vmap = rbln_hbm_bo_vmap,
	.vunmap = rbln_hbm_bo_vunmap,
	.export = rbln_hbm_bo_export,
	.vm_ops = &rbln_hbm_vm_ops,
};

/* ---- imported dma-bufs --------------------------------------------------- */

static void rbln_import_unmap(struct rbln_bo *bo)
{
	if (!bo->import_sgt)
		return;
	dma_buf_unmap_attachment_unlocked(bo->shmem.base.import_attach,
					  bo->import_sgt, DMA_BIDIRECTIONAL);
	bo->import_sgt = NULL;
	bo->dev_sgt = NULL;
}

static void rbln_import_free(struct drm_gem_object *obj)
{
	struct rbln_bo *bo = to_rbln_bo(obj);

	rbln_bo_dma_untrack(bo);
	rbln_bo_fini(bo);
	/* Detaches; unmaps too unless rbln_gem_unplug() did it already. */
	drm_prime_gem_destroy(obj, bo->import_sgt);
	drm_gem_object_release(obj);
	kfree(bo);
}

static const struct drm_gem_object_funcs rbln_import_funcs = {
	.free = rbln_import_free,
	.open = rbln_gem_open,
	.close = rbln_gem_close,
};

struct drm_gem_object *
rbln_gem_prime_import_sg_table(struct drm_device *drm,
			       struct dma_buf_attachment *attach,
			       struct sg_table *sgt)
{
	size_t size = attach->dmabuf->size;
	struct rbln_bo *bo;

	if (!size || !PAGE_ALIGNED(size))
		return ERR_PTR(-EINVAL);
	bo = rbln_bo_alloc(to_rbln(drm), size, RBLN_BO_KIND_IMPORT,
			   &rbln_import_funcs);
	if (IS_ERR(bo))
		return ERR_CAST(bo);
	bo->import_sgt = sgt;
	bo->dev_sgt = sgt;
	if (rbln_bo_dma_track(bo)) {
		/* Unbound meanwhile: the helper unmaps and detaches. */
		bo->import_sgt = NULL;
		bo->dev_sgt = NULL;
		rbln_bo_fini(bo);
		drm_gem_object_release(&bo->shmem.base);
		kfree(bo);
		return ERR_PTR(-ENODEV);
	}
	return &bo->shmem.base;
}

/*
 * Our own HBM dma-bufs come back as the same object (self-import); the
 * DRM helper does that for host buffers and attaches to everything else.
 */
struct drm_gem_object *rbln_gem_prime_import(struct drm_device *drm,
					     struct dma_buf *dma_buf)
{
	if (dma_buf->ops == &rbln_hbm_dmabuf_ops ||
	    dma_buf->ops == &rbln_hbm_dmabuf_ops_novmap) {
		struct drm_gem_object *obj = dma_buf->priv;

		if (obj->dev == drm) {
			drm_gem_object_get(obj);
			return obj;
		}
	}
	return drm_gem_prime_import(drm, dma_buf);
}

/* ---- common -------------------------------------------------------------- */

/* Probe: the buffers' shared state. */
int rbln_gem_init(struct rbln_device *rdev)
{
	INIT_LIST_HEAD(&rdev->gem.dma_bos);
	return drmm_mutex_init(&rdev->drm, &rdev->gem.dma_lock);
}

/*
 * @bo now holds DMA mappings for the card: rbln_gem_unplug() will give
 * them back.  -ENODEV once the card is unbound: the caller unmaps.
 */
int rbln_bo_dma_track(struct rbln_bo *bo)
{
	struct rbln_gem *gem = &to_rbln(bo->shmem.base.dev)->gem;
	int ret = 0;

	mutex_lock(&gem->dma_lock);
	if (gem->unplugged)
		ret = -ENODEV;
	else
		list_add_tail(&bo->dma_link, &gem->dma_bos);
	mutex_unlock(&gem->dma_lock);
	return ret;
}

/* At the buffer's free, before it unmaps. */
void rbln_bo_dma_untrack(struct rbln_bo *bo)
{
	struct rbln_gem *gem = &to_rbln(bo->shmem.base.dev)->gem;

	mutex_lock(&gem->dma_lock);
	list_del_init(&bo->dma_link);
	mutex_unlock(&gem->dma_lock);
}

/*
 * Unbind, once the card is stopped: every DMA mapping for it is given
 * back now, not when the open files that still hold the buffers close
 * (the device may be gone by then, and its IOMMU domain with it).  The
 * buffers stay valid for the CPU; the card can no longer be reached.  A
 * buffer whose last reference is being dropped meanwhile unmaps itself.
 */
void rbln_gem_unplug(struct rbln_device *rdev)
{
	struct rbln_gem *gem = &rdev->gem;
	struct rbln_bo *bo, *tmp;
	LIST_HEAD(held);

	mutex_lock(&gem->dma_lock);
	gem->unplugged = true;
	list_for_each_entry_safe(bo, tmp, &gem->dma_bos, dma_link) {
		list_del_init(&bo->dma_link);
		if (kref_get_unless_zero(&bo->shmem.base.refcount))
			list_add_tail(&bo->dma_link, &held);
	}
	mutex_unlock(&gem->dma_lock);

	list_for_each_entry_safe(bo, tmp, &held, dma_link) {
		list_del_init(&bo->dma_link);
		mutex_lock(&bo->lock);
		if (bo->kind == RBLN_BO_KIND_HOST)
			rbln_host_unmap(bo);
		else if (bo->kind == RBLN_BO_KIND_USERPTR)
			rbln_userptr_unmap(bo);
		else if (bo->kind == RBLN_BO_KIND_IMPORT)
			rbln_import_unmap(bo);
		mutex_unlock(&bo->lock);
		drm_gem_object_put(&bo->shmem.base);
	}
}

/* RBLN_INFO_MEM: bytes of host buffers and of pinned user pages, all clients. */
void rbln_gem_stats(struct rbln_device *rdev, u64 *host_bytes, u64 *pinned_bytes)
{
	*host_bytes = atomic64_read(&rdev->gem.host_bytes);
	*pinned_bytes = atomic64_read(&rdev->gem.pinned_bytes);
}

/* A non-shmem bo of @size (a multiple of PAGE_SIZE). */
struct rbln_bo *rbln_bo_alloc(struct rbln_device *rdev, size_t size,
			      enum rbln_bo_kind kind,
			      const struct drm_gem_object_funcs *funcs)
{
	struct rbln_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return ERR_PTR(-ENOMEM);
	rbln_bo_init_common(bo, kind);
	bo->shmem.base.funcs = funcs;
	drm_gem_private_object_init(&rdev->drm, &bo->shmem.base, size);
	return bo;
}

/*
 * Gives the caller a handle (which maps @bo into its VM) and drops the
 * creation reference: on success the handle owns the bo, on failure it
 * is freed.
 */
int rbln_bo_install(struct drm_file *file, struct rbln_bo *bo, u32 *handle,
		    u64 *va)
{
	struct drm_gem_object *obj = &bo->shmem.base;
	int ret;

	ret = drm_gem_handle_create(file, obj, handle);
	if (!ret)
		*va = rbln_vma_va(bo, &to_rbln_file(file)->vm);
	drm_gem_object_put(obj);
	return ret;
}

static int rbln_bo_create_hbm(struct rbln_device *rdev,
			      struct drm_rbln_bo_create *args, u64 size,
			      struct rbln_bo **out)
{
	unsigned int i;
	struct rbln_bo *bo;
	LIST_HEAD(blocks);
	u32 chiplet = args->chiplet;
	int ret;

	if (args->region == RBLN_REGION_AUTO) {
		ret = rbln_hbm_pick_chiplet(rdev, size, &chiplet);
		if (ret == -E2BIG)
			return ret;
	}
	ret = rbln_hbm_alloc(rdev, chiplet, size, &blocks);
	/* AUTO: the best guess may be too fragmented; try the others. */
	for (i = 0; ret == -ENOSPC && args->region == RBLN_REGION_AUTO &&
	     i < rdev->id.chiplet_count; i++) {
		if (i == chiplet)
			continue;
		ret = rbln_hbm_alloc(rdev, i, size, &blocks);
		if (!ret)
			chiplet = i;
	}
	if (ret)
		return ret;

	bo = rbln_bo_alloc(rdev, size, RBLN_BO_KIND_HBM, &rbln_hbm_funcs);
	if (IS_ERR(bo)) {
		rbln_hbm_free(rdev, chiplet, &blocks);
		return PTR_ERR(bo);
	}
	bo->chiplet = chiplet;
	list_splice_tail(&blocks, &bo->blocks);
	args->chiplet = chiplet;
	*out = bo;
	return 0;
}

int rbln_ioctl_bo_create(struct drm_device *drm, void *data,
			 struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln(drm);
	struct drm_rbln_bo_create *args = data;
	struct drm_gem_shmem_object *shmem;
	struct rbln_bo *bo;
	u64 size;
	int idx, ret;

	if (args->flags & ~RBLN_BO_DEVICE_READ_ONLY)
		return -EINVAL;
	/* Sizes that overflow when rounded up (to 4 KiB, HBM: 2 MiB). */
	if (!args->size || args->size > U64_MAX - (SZ_4K - 1) ||
	    (args->region != RBLN_REGION_HOST && args->size > U64_MAX - (SZ_2M - 1)))
		return -EINVAL;
	size = round_up(args->size, SZ_4K);
	switch (args->region) {
	case RBLN_REGION_HOST:
	case RBLN_REGION_AUTO:
		if (args->chiplet)
			return -EINVAL;
		break;
	case RBLN_REGION_HBM:
		if (args->chiplet >= rdev->id.chiplet_count)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (args->region != RBLN_REGION_HOST && size >= SZ_2M)
		size = round_up(size, SZ_2M);
	/* HBM: larger than the chiplet (-E2BIG) is checked at allocation. */
	if (args->region == RBLN_REGION_HOST &&
	    (size > RBLN_VA_END - RBLN_VA_START ||
	     !rbln_host_pages_fit(size >> PAGE_SHIFT)))
		return -ENOMEM;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	if (args->region == RBLN_REGION_HOST) {
		shmem = drm_gem_shmem_create(drm, size);
		if (IS_ERR(shmem)) {
			ret = PTR_ERR(shmem);
			goto out;
		}
		bo = to_rbln_bo(&shmem->base);
		ret = rbln_host_bo_use_gemfs(&shmem->base);
		if (ret) {
			drm_gem_object_put(&shmem->base);
			goto out;
		}
		atomic64_add(size, &rdev->gem.host_bytes);
	} else {
		ret = rbln_bo_create_hbm(rdev, args, size, &bo);
		if (ret)
			goto out;
		ret = drm_gem_create_mmap_offset(&bo->shmem.base);
		if (ret) {
			drm_gem_object_put(&bo->shmem.base);
			goto out;
		}
	}
	bo->flags = args->flags;

	ret = rbln_bo_install(file, bo, &args->handle, &args->device_va);
	if (!ret)
		args->size = size;
out:
	drm_dev_exit(idx);
	return ret;
}

int rbln_ioctl_bo_info(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct drm_rbln_bo_info *args = data;
	struct drm_gem_object *obj;
	struct rbln_bo *bo;
	int ret = 0;

	if (args->flags || args->pad)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	bo = to_rbln_bo(obj);

	args->mmap_offset = 0;
	if (bo->kind == RBLN_BO_KIND_HOST || bo->kind == RBLN_BO_KIND_HBM) {
		ret = drm_gem_create_mmap_offset(obj);
		if (ret)
			goto out;
		args->mmap_offset = drm_vma_node_offset_addr(&obj->vma_node);
	}
	args->size = obj->size;
	switch (bo->kind) {
	case RBLN_BO_KIND_HOST:
		args->region = RBLN_REGION_HOST;
		break;
	case RBLN_BO_KIND_HBM:
		args->region = RBLN_REGION_HBM;
		break;
	case RBLN_BO_KIND_USERPTR:
		args->region = RBLN_REGION_USERPTR;
		break;
	case RBLN_BO_KIND_IMPORT:
		args->region = RBLN_REGION_IMPORT;
		break;
	}
	args->chiplet = bo->kind == RBLN_BO_KIND_HBM ? bo->chiplet : 0;
	args->flags_out = bo->flags;
	args->device_va = rbln_vma_va(bo, &to_rbln_file(file)->vm);
out:
	drm_gem_object_put(obj);
	return ret;
}
