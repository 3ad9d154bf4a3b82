// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_dmabuf_importer - a test-only dma-buf importer: what an RDMA NIC's
 * driver does with an exported rbln buffer (ib_umem_dmabuf behind
 * ibv_reg_dmabuf_mr), done by a module so the contract can be tested on
 * a kernel without P2PDMA and without a NIC.
 *
 * Writing "fd=<dma-buf fd> size=<bytes> p2p=<0|1> seed=<n>
 * [lo=<bus address> hi=<bus address>]" to
 * /sys/kernel/debug/rbln_dmabuf_importer/check (in the process that owns
 * the fd) attaches dynamically (allow_peer2peer = p2p) with a device of
 * this module's own, maps the attachment for DMA under the reservation
 * lock, checks that the segments add up to the buffer's size (and, with
 * lo/hi, that every DMA address lies in [lo, hi): the card's BAR when no
 * IOMMU translates), vmaps the buffer and compares its bytes with the
 * pattern byte i = (i * 7 + seed) & 0xff, then unmaps, vunmaps and
 * detaches.  The write returns its length when every step passed, else
 * the failing step's -errno (the step and the details go to the kernel
 * log).  "vmap_pfn" reads 1 if this kernel can map several
 * non-contiguous BAR ranges into one kernel mapping (CONFIG_VMAP_PFN).
 */
#include <linux/debugfs.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

static struct platform_device *importer_pdev;
static struct dentry *importer_dir;

struct importer_req {
	int fd;
	u64 size;
	u64 seed;
	u64 lo;
	u64 hi;
	bool p2p;
};

static void importer_move_notify(struct dma_buf_attachment *attach)
{
	/* Nothing cached: every check maps and unmaps before it returns. */
}

static const struct dma_buf_attach_ops importer_p2p_ops = {
	.allow_peer2peer = true,
	.move_notify = importer_move_notify,
};

static const struct dma_buf_attach_ops importer_ops = {
	.allow_peer2peer = false,
	.move_notify = importer_move_notify,
};

static int importer_parse(char *buf, struct importer_req *r)
{
	char *tok;
	bool have_fd = false, have_size = false;

	memset(r, 0, sizeof(*r));
	while ((tok = strsep(&buf, "\n\t ")) != NULL) {
		char *val = strchr(tok, '=');
		u64 v;

		if (!*tok)
			continue;
		if (!val)
			return -EINVAL;
		*val++ = '\0';
		if (kstrtou64(val, 0, &v))
			return -EINVAL;
		if (!strcmp(tok, "fd")) {
			r->fd = (int)v;
			have_fd = true;
		} else if (!strcmp(tok, "size")) {
			r->size = v;
			have_size = true;
		} else if (!strcmp(tok, "p2p")) {
			r->p2p = v;
		} else if (!strcmp(tok, "seed")) {
			r->seed = v;
		} else if (!strcmp(tok, "lo")) {
			r->lo = v;
		} else if (!strcmp(tok, "hi")) {
			r->hi = v;
		} else {
			return -EINVAL;
		}
	}
	return have_fd && have_size ? 0 : -EINVAL;
}

/* The attachment's DMA segments: their total and, with lo/hi, their range. */
static int importer_check_sgt(const struct importer_req *r, struct sg_table *sgt)
{
	struct scatterlist *sg;
	u64 total = 0;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		dma_addr_t a = sg_dma_address(sg);
		u64 len = sg_dma_len(sg);

		if (r->hi && (a < r->lo || a + len > r->hi || a + len < a)) {
			pr_err("rbln_dmabuf_importer: segment %u at %pad + %llu outside [%#llx, %#llx)\n",
			       i, &a, len, r->lo, r->hi);
			return -ERANGE;
		}
		total += len;
	}
	if (total != r->size) {
		pr_err("rbln_dmabuf_importer: segments add up to %llu bytes, the buffer has %llu\n",
		       total, r->size);
		return -EMSGSIZE;
	}
	return 0;
}

/* The buffer's bytes through the exporter's vmap, against the pattern. */
static int importer_check_vmap(const struct importer_req *r,
			       struct dma_buf *dmabuf)
{
	struct iosys_map map;
	u64 i, bad = 0, first = 0;
	u8 chunk[256];
	int ret;

	ret = dma_buf_vmap_unlocked(dmabuf, &map);
	if (ret) {
		pr_err("rbln_dmabuf_importer: vmap: %d\n", ret);
		return ret;
	}
	for (i = 0; i < r->size; i += sizeof(chunk)) {
		size_t n = min_t(u64, sizeof(chunk), r->size - i);
		size_t j;

		iosys_map_memcpy_from(chunk, &map, i, n);
		for (j = 0; j < n; j++) {
			if (chunk[j] == (u8)((i + j) * 7 + r->seed))
				continue;
			if (!bad++)
				first = i + j;
		}
	}
	dma_buf_vunmap_unlocked(dmabuf, &map);
	if (bad) {
		pr_err("rbln_dmabuf_importer: %llu of %llu bytes differ from the pattern, the first at %llu\n",
		       bad, r->size, first);
		return -EILSEQ;
	}
	return 0;
}

static int importer_check(const struct importer_req *r)
{
	struct dma_buf_attachment *attach;
	struct dma_buf *dmabuf;
	struct sg_table *sgt;
	int ret;

	dmabuf = dma_buf_get(r->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	if (dmabuf->size != r->size) {
		pr_err("rbln_dmabuf_importer: the dma-buf has %zu bytes, expected %llu\n",
		       dmabuf->size, r->size);
		ret = -EMSGSIZE;
		goto out_put;
	}
	attach = dma_buf_dynamic_attach(dmabuf, &importer_pdev->dev,
					r->p2p ? &importer_p2p_ops : &importer_ops,
					NULL);
	if (IS_ERR(attach)) {
		ret = PTR_ERR(attach);
		pr_info("rbln_dmabuf_importer: attach (p2p %d): %d\n", r->p2p, ret);
		goto out_put;
	}
	dma_resv_lock(dmabuf->resv, NULL);
	sgt = dma_buf_map_attachment(attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		dma_resv_unlock(dmabuf->resv);
		pr_err("rbln_dmabuf_importer: map: %d\n", ret);
		goto out_detach;
	}
	ret = importer_check_sgt(r, sgt);
	dma_buf_unmap_attachment(attach, sgt, DMA_BIDIRECTIONAL);
	dma_resv_unlock(dmabuf->resv);
	if (!ret)
		ret = importer_check_vmap(r, dmabuf);
out_detach:
	dma_buf_detach(dmabuf, attach);
out_put:
	dma_buf_put(dmabuf);
	return ret;
}

static ssize_t importer_write(struct file *file, const char __user *ubuf,
			      size_t len, loff_t *ppos)
{
	struct importer_req r;
	char buf[256];
	int ret;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';
	ret = importer_parse(buf, &r);
	if (!ret)
		ret = importer_check(&r);
	return ret ? ret : len;
}

static const struct file_operations importer_fops = {
	.owner = THIS_MODULE,
	.write = importer_write,
};

static int importer_vmap_pfn_get(void *data, u64 *val)
{
	*val = IS_ENABLED(CONFIG_VMAP_PFN);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE(importer_vmap_pfn_fops, importer_vmap_pfn_get, NULL,
			 "%llu\n");

static int __init importer_init(void)
{
	int ret;

	importer_pdev = platform_device_register_simple("rbln-dmabuf-importer",
							-1, NULL, 0);
	if (IS_ERR(importer_pdev))
		return PTR_ERR(importer_pdev);
	ret = dma_coerce_mask_and_coherent(&importer_pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		platform_device_unregister(importer_pdev);
		return ret;
	}
	/* As a NIC's: segments as long as the exporter makes them. */
	dma_set_max_seg_size(&importer_pdev->dev, UINT_MAX);
	importer_dir = debugfs_create_dir("rbln_dmabuf_importer", NULL);
	debugfs_create_file("check", 0200, importer_dir, NULL, &importer_fops);
	debugfs_create_file_unsafe("vmap_pfn", 0400, importer_dir, NULL,
				   &importer_vmap_pfn_fops);
	return 0;
}

static void __exit importer_exit(void)
{
	debugfs_remove_recursive(importer_dir);
	platform_device_unregister(importer_pdev);
}

module_init(importer_init);
module_exit(importer_exit);
/* 6.12's spelling (6.13 takes a string); the tests run on 6.12 kernels. */
MODULE_IMPORT_NS(DMA_BUF);
MODULE_DESCRIPTION("rbln tests: a dma-buf importer standing in for an RDMA NIC's driver");
MODULE_LICENSE("GPL");
