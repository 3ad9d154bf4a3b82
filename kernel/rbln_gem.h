/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: buffer objects (rbln_gem.c: host, HBM, imported; rbln_userptr.c:
 * pinned user pages).  A buffer's place in each VM (vmas, under lock) is
 * managed by rbln_vm.c.
 */
#ifndef RBLN_GEM_H
#define RBLN_GEM_H

#include <linux/atomic.h>
#include <linux/dma-mapping.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include <drm/drm_gem_shmem_helper.h>

struct dma_buf;
struct dma_buf_attachment;
struct drm_device;
struct drm_file;
struct rbln_device;
struct sg_table;

enum rbln_bo_kind {
	RBLN_BO_KIND_HOST,	/* GEM shmem */
	RBLN_BO_KIND_HBM,	/* buddy blocks of one chiplet */
	RBLN_BO_KIND_USERPTR,	/* pinned user pages */
	RBLN_BO_KIND_IMPORT,	/* a foreign dma-buf's sg_table */
};

/*
 * A buffer object.  Every kind embeds the shmem object so that one type
 * covers all of them; only host buffers use its shmem part.
 */
struct rbln_bo {
	struct drm_gem_shmem_object shmem;
	enum rbln_bo_kind kind;
	u32 flags;			/* RBLN_BO_* of the uAPI */
	u32 chiplet;			/* HBM */

	/* Protects vmas and dev_sgt. */
	struct mutex lock;
	struct list_head vmas;		/* struct rbln_vma, one per VM */
	struct sg_table *dev_sgt;	/* DMA addresses for the card */
	struct list_head dma_link;	/* in rbln_gem.dma_bos while mapped */

	struct list_head blocks;	/* HBM: buddy blocks */

	/* userptr */
	struct page **pages;
	unsigned long npages;
	struct mm_struct *mm;		/* charged for RLIMIT_MEMLOCK */
	struct sg_table *pin_sgt;

	/* import */
	struct sg_table *import_sgt;
};

/*
 * Host memory the card uses (host buffers, userptr) stays DMA-mapped for
 * the buffer's life while the CPU uses it too: the driver relies on a
 * cache-coherent interconnect and never syncs caches per job.  The
 * mappings therefore skip the CPU sync, which also lets the same pages be
 * mapped twice - pinned in two userptr buffers, or a host buffer used by
 * its own card and, through PRIME, by another - as the uAPI allows.
 */
#define RBLN_HOST_DMA_ATTRS	DMA_ATTR_SKIP_CPU_SYNC

static inline struct rbln_bo *to_rbln_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct rbln_bo, shmem.base);
}

/* The buffers of all clients. */
struct rbln_gem {
	atomic64_t host_bytes;		/* host buffers (RBLN_INFO_MEM) */
	atomic64_t pinned_bytes;	/* pinned user pages (RBLN_INFO_MEM) */
	/*
	 * Protects dma_bos and unplugged.  dma_bos lists the buffers that
	 * hold DMA mappings for the card (host buffers once used, userptr,
	 * imports): rbln_gem_unplug() gives those back at unbind even while
	 * open files keep the buffers, and none is made after it.
	 */
	struct mutex dma_lock;
	struct list_head dma_bos;
	bool unplugged;
};

/*
 * The most pages one host or userptr buffer may have: the machine's RAM
 * (every page is resident while the card uses the buffer), and no more
 * than a page array kvmalloc() hands out without a warning (1 TiB of 4 KiB
 * pages).  Larger requests are -ENOMEM before anything is allocated.
 */
static inline bool rbln_host_pages_fit(u64 npages)
{
	return npages <= totalram_pages() &&
	       npages <= INT_MAX / sizeof(struct page *);
}

/* rbln_gem.c */
int rbln_gem_init(struct rbln_device *rdev);
void rbln_gem_unplug(struct rbln_device *rdev);
int rbln_bo_dma_track(struct rbln_bo *bo);
void rbln_bo_dma_untrack(struct rbln_bo *bo);
void rbln_gemfs_init(void);
void rbln_gemfs_fini(void);
struct drm_gem_object *rbln_gem_create_object(struct drm_device *drm,
					      size_t size);
struct drm_gem_object *rbln_gem_prime_import(struct drm_device *drm,
					     struct dma_buf *dma_buf);
struct drm_gem_object *
rbln_gem_prime_import_sg_table(struct drm_device *drm,
			       struct dma_buf_attachment *attach,
			       struct sg_table *sgt);
int rbln_gem_open(struct drm_gem_object *obj, struct drm_file *file);
void rbln_gem_close(struct drm_gem_object *obj, struct drm_file *file);
struct rbln_bo *rbln_bo_alloc(struct rbln_device *rdev, size_t size,
			      enum rbln_bo_kind kind,
			      const struct drm_gem_object_funcs *funcs);
int rbln_bo_install(struct drm_file *file, struct rbln_bo *bo, u32 *handle,
		    u64 *va);
struct sg_table *rbln_bo_device_sgt(struct rbln_bo *bo);
void rbln_gem_stats(struct rbln_device *rdev, u64 *host_bytes,
		    u64 *pinned_bytes);
int rbln_ioctl_bo_create(struct drm_device *drm, void *data,
			 struct drm_file *file);
int rbln_ioctl_bo_info(struct drm_device *drm, void *data,
		       struct drm_file *file);

/* rbln_userptr.c */
void rbln_userptr_unmap(struct rbln_bo *bo);
int rbln_ioctl_bo_userptr(struct drm_device *drm, void *data,
			  struct drm_file *file);

#endif /* RBLN_GEM_H */
