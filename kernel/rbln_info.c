// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: DRM_IOCTL_RBLN_GET_INFO, the extensible query of
 * include/uapi/drm/rbln_accel.h.
 */
#include <linux/minmax.h>
#include <linux/pci.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>

#include <drm/rbln_accel.h>

#include "rbln_drv.h"

/* The uAPI mirrors the firmware-iface limits. */
static_assert(RBLN_MAX_CHIPLETS == RBLN_FW_MAX_CHIPLETS);
static_assert(RBLN_FAMILY_REBEL100 == RBLN_FW_FAMILY_REBEL100);
static_assert(RBLN_FAMILY_ATOM == RBLN_FW_FAMILY_ATOM);

static void rbln_info_device(struct rbln_device *rdev,
			     struct drm_rbln_info_device *d)
{
	const struct rbln_identity *id = &rdev->id;
	struct pci_dev *pdev = rdev->pdev;
	unsigned int i;

	d->family = id->family;
	d->chiplet_count = id->chiplet_count;
	d->fw_iface_major = id->iface_major;
	d->fw_iface_minor = id->iface_minor;
	d->pci_domain = pci_domain_nr(pdev->bus);
	d->pci_bus = pdev->bus->number;
	d->pci_dev = PCI_SLOT(pdev->devfn);
	d->pci_func = PCI_FUNC(pdev->devfn);
	d->numa_node = dev_to_node(&pdev->dev);
	for (i = 0; i < id->chiplet_count; i++)
		d->hbm_size[i] = id->hbm_size[i];
	strscpy(d->fw_version, id->fw_version, sizeof(d->fw_version));
	strscpy(d->serial, id->serial, sizeof(d->serial));
	memcpy(d->uuid, id->uuid, sizeof(d->uuid));
}

static int rbln_info_telemetry(struct rbln_device *rdev,
			       struct drm_rbln_info_telemetry *u)
{
	struct rbln_fw_telemetry t;
	unsigned int i;
	int ret;

	ret = rbln_telemetry_read(rdev, &t);
	if (ret)
		return ret == -ENODEV ? -ENODEV : -EIO;

	u->timestamp_ns = t.timestamp_ns;
	u->temp_mc = t.temp_mc;
	u->chiplet_count = t.chiplet_count;
	u->power_uw = t.power_uw;
	for (i = 0; i < t.chiplet_count; i++) {
		u->chiplet[i].temp_mc = t.chiplet[i].temp_mc;
		u->chiplet[i].clock_mhz = t.chiplet[i].clock_mhz;
		u->chiplet[i].mem_clock_mhz = t.chiplet[i].mem_clock_mhz;
		u->chiplet[i].busy_ns = t.chiplet[i].busy_ns;
	}
	return 0;
}

static void rbln_info_mem(struct rbln_device *rdev, struct drm_rbln_info_mem *m)
{
	unsigned int i;

	m->chiplet_count = rdev->id.chiplet_count;
	rbln_gem_stats(rdev, &m->host_bytes, &m->pinned_bytes);
	for (i = 0; i < rdev->id.chiplet_count; i++) {
		struct drm_rbln_mem_chiplet *c = &m->chiplet[i];

		rbln_hbm_stats(rdev, i, &c->used_bytes, &c->largest_free_bytes);
		c->total_bytes = rbln_hbm_size(rdev, i);
		c->free_bytes = c->total_bytes - c->used_bytes;
	}
}

int rbln_ioctl_get_info(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln(drm);
	struct drm_rbln_get_info *args = data;
	union {
		struct drm_rbln_info_device device;
		struct drm_rbln_info_telemetry telemetry;
		struct drm_rbln_info_mem mem;
		struct drm_rbln_info_vm vm;
	} answer;
	u32 full;
	int ret;

	if (args->flags || args->pad)
		return -EINVAL;
	switch (args->type) {
	case RBLN_INFO_DEVICE:
		full = sizeof(answer.device);
		break;
	case RBLN_INFO_TELEMETRY:
		full = sizeof(answer.telemetry);
		break;
	case RBLN_INFO_MEM:
		full = sizeof(answer.mem);
		break;
	case RBLN_INFO_VM:
		full = sizeof(answer.vm);
		break;
	default:
		return -EINVAL;
	}

	/* Size query: no answer is built, the card is not asked. */
	if (!args->size) {
		args->size = full;
		return 0;
	}
	if (!args->ptr)
		return -EFAULT;

	memset(&answer, 0, sizeof(answer));
	switch (args->type) {
	case RBLN_INFO_DEVICE:
		rbln_info_device(rdev, &answer.device);
		break;
	case RBLN_INFO_TELEMETRY:
		ret = rbln_info_telemetry(rdev, &answer.telemetry);
		if (ret)
			return ret;
		break;
	case RBLN_INFO_MEM:
		rbln_info_mem(rdev, &answer.mem);
		break;
	case RBLN_INFO_VM:
		rbln_vm_info(&to_rbln_file(file)->vm, &answer.vm);
		break;
	}

	if (copy_to_user(u64_to_user_ptr(args->ptr), &answer,
			 min(args->size, full)))
		return -EFAULT;
	args->size = full;
	return 0;
}
