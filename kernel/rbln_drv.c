// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: module, PCI driver and DRM accel device.
 *
 * Binding: the id table is empty, so rbln claims no device by itself.  It
 * binds a PCI function only when told to (driver_override, new_id, or the
 * ids= module parameter) and then only if the function's memory BAR shows
 * a firmware-iface v1 control block (rbln_fw_check_identity()).  A real
 * card whose firmware implements firmware-iface binds exactly the same way.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>

#include <drm/rbln_accel.h>

#include "rbln_compat.h"
#include "rbln_drv.h"
#include "rbln_job.h"
#include "rbln_queue.h"

/*
 * Module parameters, all of them (kernel/README.md has the table).  The
 * files that use them see the variables through rbln_drv.h.
 */
unsigned int rbln_boot_timeout_ms = 5000;
module_param_named(boot_timeout_ms, rbln_boot_timeout_ms, uint, 0644);
MODULE_PARM_DESC(boot_timeout_ms,
		 "How long to wait for the firmware to answer the boot handshake and resets, in ms (default 5000)");

unsigned int rbln_admin_timeout_ms = 5000;
module_param_named(admin_timeout_ms, rbln_admin_timeout_ms, uint, 0644);
MODULE_PARM_DESC(admin_timeout_ms,
		 "How long to wait for the completion of one admin request, in ms (default 5000)");

unsigned int rbln_job_timeout_ms = 10000;
module_param_named(job_timeout_ms, rbln_job_timeout_ms, uint, 0444);
MODULE_PARM_DESC(job_timeout_ms,
		 "How long a job may run before its chiplet's ring is reset, in ms, read at probe (default 10000)");

unsigned int rbln_release_grace_ms = 1000;
module_param_named(release_grace_ms, rbln_release_grace_ms, uint, 0644);
MODULE_PARM_DESC(release_grace_ms,
		 "How long the jobs of a closed file may still run before the card cancels them, in ms (default 1000)");

unsigned int rbln_heartbeat_timeout_ms = 5000;
module_param_named(heartbeat_timeout_ms, rbln_heartbeat_timeout_ms, uint, 0644);
MODULE_PARM_DESC(heartbeat_timeout_ms,
		 "A ready card whose heartbeat counter stands still this long is faulted, in ms (default 5000, 0: no watchdog)");

bool rbln_ring_poll = true;
module_param_named(ring_poll, rbln_ring_poll, bool, 0644);
MODULE_PARM_DESC(ring_poll,
		 "The 500 ms watchdog also reads the command rings' completions, so a job whose interrupt was lost completes within about 500 ms (default on; off: at job_timeout_ms)");

bool rbln_recovery = true;
module_param_named(recovery, rbln_recovery, bool, 0644);
MODULE_PARM_DESC(recovery,
		 "Reset and recover a faulted card by itself (default on; off: the card stays faulted until rebound)");

bool rbln_host_thp = true;
module_param_named(host_thp, rbln_host_thp, bool, 0444);
MODULE_PARM_DESC(host_thp,
		 "Back host buffers with transparent huge pages where possible (default: Y)");

static char *rbln_ids;
module_param_named(ids, rbln_ids, charp, 0444);
MODULE_PARM_DESC(ids,
		 "Comma-separated vendor:device pairs (hex) to probe at load, e.g. ids=1af4:1110");

#define RBLN_MAX_IDS	16

static const char *const rbln_state_names[] = {
	[RBLN_STATE_INIT] = "initializing",
	[RBLN_STATE_READY] = "ready",
	[RBLN_STATE_FAULT] = "fault",
	[RBLN_STATE_RESETTING] = "resetting",
	[RBLN_STATE_OFFLINE] = "offline",
};

/*
 * The state string of sysfs "state" and of the RBLN_STATE= uevent key:
 * initializing, ready, fault, resetting, offline, unplugged.
 */
const char *rbln_state_name(struct rbln_device *rdev)
{
	if (drm_dev_is_unplugged(&rdev->drm))
		return "unplugged";
	return rbln_state_names[rbln_get_state(rdev)];
}

/* The state string of the RBLN_STATE= uevent key (never "unplugged"). */
const char *rbln_state_str(enum rbln_state state)
{
	return rbln_state_names[state];
}

/* The last fault's code; its reason (NUL-terminated) into @reason. */
u32 rbln_get_fault(struct rbln_device *rdev, char *reason, size_t len)
{
	u32 code;

	spin_lock(&rdev->state_lock);
	code = rdev->fault_code;
	strscpy(reason, rdev->fault_reason, len);
	spin_unlock(&rdev->state_lock);
	return code;
}

const char *rbln_family_name(u32 family)
{
	switch (family) {
	case RBLN_FW_FAMILY_REBEL100:
		return "rebel100";
	case RBLN_FW_FAMILY_ATOM:
		return "atom";
	default:
		return "unknown";
	}
}

enum rbln_state rbln_get_state(struct rbln_device *rdev)
{
	enum rbln_state state;

	spin_lock(&rdev->state_lock);
	state = rdev->state;
	spin_unlock(&rdev->state_lock);
	return state;
}

/* Must be called from process context (it may send a uevent). */
void rbln_set_state(struct rbln_device *rdev, enum rbln_state state)
{
	enum rbln_state old;
	bool announce;

	spin_lock(&rdev->state_lock);
	old = rdev->state;
	rdev->state = state;
	announce = rdev->announce;
	spin_unlock(&rdev->state_lock);

	if (old != state && announce)
		rbln_sysfs_state_changed(rdev, state, 0);
	rbln_admin_wake(rdev);
}

/*
 * The card reported a fault (event, control block) or stopped answering.
 * Logs once per transition into FAULT.
 */
void rbln_set_fault(struct rbln_device *rdev, u32 code, const char *reason)
{
	enum rbln_state old;
	bool announce;

	spin_lock(&rdev->state_lock);
	old = rdev->state;
	if (old != RBLN_STATE_FAULT) {
		rdev->state = RBLN_STATE_FAULT;
		rdev->fault_code = code;
		strscpy(rdev->fault_reason, reason, sizeof(rdev->fault_reason));
	}
	announce = rdev->announce;
	spin_unlock(&rdev->state_lock);

	if (old != RBLN_STATE_FAULT) {
		drm_err(&rdev->drm, "card fault: code %u (%s): %s\n", code,
			rbln_fw_fault_name(code), reason);
		if (announce) {
			rbln_sysfs_state_changed(rdev, RBLN_STATE_FAULT, code);
			rbln_reset_schedule(rdev);
		}
	}
	rbln_admin_wake(rdev);
}

/*
 * The DRM core answers a driver ioctl number it has no entry for with
 * -EINVAL; the rbln uAPI promises -ENOTTY (an unknown ioctl is not a bad
 * argument), so the driver range is checked here first.
 */
static bool rbln_ioctl_unknown(struct drm_device *drm, unsigned int cmd)
{
	unsigned int nr = _IOC_NR(cmd);

	return _IOC_TYPE(cmd) == DRM_IOCTL_BASE &&
	       nr >= DRM_COMMAND_BASE && nr < DRM_COMMAND_END &&
	       nr - DRM_COMMAND_BASE >= drm->driver->num_ioctls;
}

static long rbln_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct drm_file *file_priv = filp->private_data;
	struct drm_device *drm = file_priv->minor->dev;

	if (drm_dev_is_unplugged(drm))
		return -ENODEV;
	if (rbln_ioctl_unknown(drm, cmd))
		return -ENOTTY;
	return drm_ioctl(filp, cmd, arg);
}

#ifdef CONFIG_COMPAT
static long rbln_compat_ioctl(struct file *filp, unsigned int cmd,
			      unsigned long arg)
{
	struct drm_file *file_priv = filp->private_data;
	struct drm_device *drm = file_priv->minor->dev;

	if (drm_dev_is_unplugged(drm))
		return -ENODEV;
	if (rbln_ioctl_unknown(drm, cmd))
		return -ENOTTY;
	return drm_compat_ioctl(filp, cmd, arg);
}
#else
#define rbln_compat_ioctl NULL
#endif

/*
 * At release (the last reference to the file is gone: closed, or its
 * process killed), before the buffers go.  Nobody can wait for the jobs
 * the file left any more; what they write may still be seen elsewhere
 * (shared user pages, exported buffers and syncobjs), so they get
 * release_grace_ms to finish.  Then the file's address space runs
 * nothing more (rbln_vm_close()): their fences get -ECANCELED.  So a
 * job held by a WAIT that nobody will satisfy neither keeps the file's
 * memory until the job timeout nor costs the other clients of its
 * chiplet a ring reset, and a job waiting for an in-fence that nobody
 * signals does not wait for it (rbln_dep.c).  A 1.2 card has no VM_ABORT: what it holds runs
 * on as before.
 */
static void rbln_file_quiesce(struct rbln_file *rf)
{
	unsigned int busy = rbln_queues_wait(rf, rbln_release_grace_ms);

	if (busy)
		rbln_vm_close(&rf->vm, busy);
	/* Jobs that still wait for someone else's fence stop waiting. */
	rbln_deps_cancel(&rf->deps);
}

/*
 * The last reference to the file is gone: its jobs get release_grace_ms,
 * then the card cancels them, before drm_release() frees the buffers
 * (which waits for the jobs that use them).
 */
static int rbln_release(struct inode *inode, struct file *filp)
{
	struct drm_file *file = filp->private_data;

	rbln_file_quiesce(to_rbln_file(file));
	return drm_release(inode, filp);
}

/*
 * Written by hand rather than DEFINE_DRM_ACCEL_FOPS: the stock accel fops
 * have no .show_fdinfo and no .uring_cmd, and .release must quiesce the
 * file's jobs first (rbln_release()).
 */
static const struct file_operations rbln_fops = {
	.owner = THIS_MODULE,
	.open = accel_open,
	.release = rbln_release,
	.unlocked_ioctl = rbln_ioctl,
	.compat_ioctl = rbln_compat_ioctl,
	.poll = drm_poll,
	.read = drm_read,
	.llseek = noop_llseek,
	.mmap = drm_gem_mmap,
	.show_fdinfo = drm_show_fdinfo,	/* calls rbln_show_fdinfo() */
	.uring_cmd = rbln_uring_cmd,
	RBLN_FOP_FLAGS
};

static const struct drm_ioctl_desc rbln_ioctls[] = {
	DRM_IOCTL_DEF_DRV(RBLN_GET_INFO, rbln_ioctl_get_info, 0),
	DRM_IOCTL_DEF_DRV(RBLN_BO_CREATE, rbln_ioctl_bo_create, 0),
	DRM_IOCTL_DEF_DRV(RBLN_BO_INFO, rbln_ioctl_bo_info, 0),
	DRM_IOCTL_DEF_DRV(RBLN_BO_USERPTR, rbln_ioctl_bo_userptr, 0),
	DRM_IOCTL_DEF_DRV(RBLN_QUEUE_CREATE, rbln_ioctl_queue_create, 0),
	DRM_IOCTL_DEF_DRV(RBLN_QUEUE_DESTROY, rbln_ioctl_queue_destroy, 0),
	DRM_IOCTL_DEF_DRV(RBLN_SUBMIT, rbln_ioctl_submit, 0),
	DRM_IOCTL_DEF_DRV(RBLN_WAIT, rbln_ioctl_wait, 0),
};

/* Every open file is a client with its own device address space. */
static int rbln_open(struct drm_device *drm, struct drm_file *file)
{
	struct rbln_file *rf;
	int ret;

	rf = kzalloc(sizeof(*rf), GFP_KERNEL);
	if (!rf)
		return -ENOMEM;
	rf->rdev = to_rbln(drm);
	xa_init_flags(&rf->queues, XA_FLAGS_ALLOC1);
	rbln_deps_init(&rf->deps);
	ret = rbln_vm_init(rf->rdev, &rf->vm);
	if (ret) {
		kfree(rf);
		return ret;
	}
	file->driver_priv = rf;
	return 0;
}

/* After the DRM core closed every handle of the file. */
static void rbln_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct rbln_file *rf = to_rbln_file(file);

	rbln_queues_fini(rf);
	rbln_vm_fini(&rf->vm);
	kfree(rf);
}

static const struct drm_driver rbln_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_COMPUTE_ACCEL | DRIVER_SYNCOBJ |
			   DRIVER_SYNCOBJ_TIMELINE,
	.fops = &rbln_fops,
	.ioctls = rbln_ioctls,
	.num_ioctls = ARRAY_SIZE(rbln_ioctls),
	.open = rbln_open,
	.postclose = rbln_postclose,
	.show_fdinfo = rbln_show_fdinfo,
	.gem_create_object = rbln_gem_create_object,
	.gem_prime_import = rbln_gem_prime_import,
	.gem_prime_import_sg_table = rbln_gem_prime_import_sg_table,
	.name = RBLN_DRIVER_NAME,
	.desc = RBLN_DRIVER_DESC,
	RBLN_DRM_DRIVER_DATE
	.major = RBLN_DRIVER_MAJOR,
	.minor = RBLN_DRIVER_MINOR,
	.patchlevel = RBLN_DRIVER_PATCHLEVEL,
};

static int rbln_pci_probe(struct pci_dev *pdev, const struct pci_device_id *ent)
{
	struct rbln_device *rdev;
	u64 hbm_total = 0;
	unsigned int i;
	int ret;

	rdev = devm_drm_dev_alloc(&pdev->dev, &rbln_drm_driver,
				  struct rbln_device, drm);
	if (IS_ERR(rdev))
		return PTR_ERR(rdev);
	rdev->pdev = pdev;
	rdev->state = RBLN_STATE_INIT;
	pci_set_drvdata(pdev, rdev);
	spin_lock_init(&rdev->state_lock);
	ret = drmm_mutex_init(&rdev->drm, &rdev->unplug_lock);
	if (ret)
		return ret;
	/* Locks first: handlers may run as soon as the IRQs are requested. */
	ret = rbln_admin_init(rdev);
	if (!ret)
		ret = rbln_events_init(rdev);
	if (!ret)
		ret = rbln_telemetry_init(rdev);
	if (!ret)
		ret = rbln_reset_init(rdev);
	if (!ret)
		ret = rbln_vms_init(rdev);
	if (!ret)
		ret = rbln_gem_init(rdev);
	if (ret)
		return ret;

	ret = rbln_pci_map(rdev);
	if (ret)
		return ret;
	ret = rbln_fw_check_identity(rdev);
	if (ret)
		return ret;
	ret = rbln_pci_setup_irqs(rdev);
	if (ret)
		return ret;
	ret = rbln_fw_init(rdev);
	if (ret)
		return ret;
	/* Memory lives as long as the drm_device, not the bind. */
	ret = rbln_vms_alloc(rdev);
	if (!ret)
		ret = rbln_hbm_init(rdev);
	if (ret)
		goto err_fw;
	ret = rbln_rings_init(rdev);
	if (ret)
		goto err_fw;
	ret = rbln_sysfs_init(rdev);
	if (ret)
		goto err_fw;
	rbln_debugfs_init(rdev);

	ret = drm_dev_register(&rdev->drm, 0);
	if (ret)
		goto err_sysfs;

	spin_lock(&rdev->state_lock);
	rdev->announce = true;
	spin_unlock(&rdev->state_lock);
	rbln_watchdog_start(rdev);

	for (i = 0; i < rdev->id.chiplet_count; i++)
		hbm_total += rdev->id.hbm_size[i];
	drm_info(&rdev->drm,
		 "%s card %s: %u chiplet(s), %llu MiB HBM, firmware %s, firmware-iface %u.%u, accel%d\n",
		 rbln_family_name(rdev->id.family), rdev->id.serial,
		 rdev->id.chiplet_count, hbm_total >> 20, rdev->id.fw_version,
		 rdev->id.iface_major, rdev->id.iface_minor,
		 rdev->drm.accel->index);
	return 0;

err_sysfs:
	rbln_fw_fini(rdev);
	rbln_sysfs_fini(rdev);
	return ret;
err_fw:
	rbln_fw_fini(rdev);
	return ret;
}

/*
 * Unbind, rmmod, hot unplug, or a card found gone from the bus (all-ones
 * reads, rbln_reset.c).  Open files keep the drm_device (and so struct
 * rbln_device) alive; after drm_dev_unplug() every ioctl on them fails
 * with -ENODEV and no path touches the hardware again.  The card is
 * stopped (reset, if it is still there), then every job it held fails
 * with -ENODEV at once, which wakes every WAIT and io_uring command
 * waiting for one (jobs not yet on a ring fail with -ENODEV when the
 * scheduler gets to them); then everything DMA-mapped for it (buffers,
 * page tables) is given back: nothing of the device's DMA outlives the
 * binding.  What the open files hold is freed when the last one closes.
 * Runs once; a second call returns at once.
 */
/*
 * The card is gone: jobs of its files that still wait for someone else's
 * fence stop waiting, and fail in run_job() (-ENODEV) with the rest.  No
 * submit runs any more (drm_dev_unplug() waited for them).
 */
static void rbln_files_cancel_deps(struct rbln_device *rdev)
{
	struct drm_file *file;

	mutex_lock(&rdev->drm.filelist_mutex);
	list_for_each_entry(file, &rdev->drm.filelist, lhead)
		rbln_deps_cancel(&to_rbln_file(file)->deps);
	mutex_unlock(&rdev->drm.filelist_mutex);
}

void rbln_unplug(struct rbln_device *rdev)
{
	mutex_lock(&rdev->unplug_lock);
	if (rdev->unplugged)
		goto out;
	rdev->unplugged = true;
	if (!drm_dev_is_unplugged(&rdev->drm))
		drm_dev_unplug(&rdev->drm);
	rbln_reset_stop(rdev);
	rbln_fw_fini(rdev);
	rbln_reset_lock(rdev);
	rbln_rings_stop(rdev);
	rbln_rings_fail_pending(rdev, -ENODEV);
	rbln_rings_resume(rdev);
	rbln_reset_unlock(rdev);
	rbln_files_cancel_deps(rdev);
	rbln_gem_unplug(rdev);
	rbln_vms_unplug(rdev);
out:
	mutex_unlock(&rdev->unplug_lock);
}

static void rbln_pci_remove(struct pci_dev *pdev)
{
	struct rbln_device *rdev = pci_get_drvdata(pdev);

	rbln_unplug(rdev);
	rbln_reset_fini(rdev);
	rbln_sysfs_fini(rdev);
}

/*
 * Reboot, power-off and kexec: the card must stop DMA into memory the next
 * kernel will own, so it is unplugged and reset as on remove.
 */
static void rbln_pci_shutdown(struct pci_dev *pdev)
{
	struct rbln_device *rdev = pci_get_drvdata(pdev);

	if (!drm_dev_is_unplugged(&rdev->drm))
		drm_dev_unplug(&rdev->drm);
	rbln_reset_fini(rdev);
	rbln_fw_fini(rdev);
}

/* Empty: rbln binds only what it is told to bind (see the top of the file). */
static const struct pci_device_id rbln_pci_ids[] = {
	{ }
};

static struct pci_driver rbln_pci_driver = {
	.name = RBLN_DRIVER_NAME,
	.id_table = rbln_pci_ids,
	.probe = rbln_pci_probe,
	.remove = rbln_pci_remove,
	.shutdown = rbln_pci_shutdown,
};

struct rbln_pci_id {
	u16 vendor;
	u16 device;
};

/* Parses ids= ("vvvv:dddd[,vvvv:dddd...]"); returns the count or -EINVAL. */
static int rbln_parse_ids(struct rbln_pci_id *ids, unsigned int max)
{
	char *copy, *cur, *tok;
	int n = 0;

	if (!rbln_ids || !*rbln_ids)
		return 0;
	copy = kstrdup(rbln_ids, GFP_KERNEL);
	if (!copy)
		return -ENOMEM;
	cur = copy;
	while ((tok = strsep(&cur, ",")) != NULL) {
		char *dev_str;

		tok = strim(tok);
		if (!*tok)
			continue;
		dev_str = strchr(tok, ':');
		if (n == max) {
			pr_err("rbln: ids: more than %u entries\n", max);
			n = -EINVAL;
			break;
		}
		if (!dev_str) {
			pr_err("rbln: ids: '%s' is not a vendor:device pair of hex numbers\n",
			       tok);
			n = -EINVAL;
			break;
		}
		*dev_str++ = '\0';
		if (kstrtou16(tok, 16, &ids[n].vendor) ||
		    kstrtou16(dev_str, 16, &ids[n].device)) {
			pr_err("rbln: ids: '%s:%s' is not a vendor:device pair of hex numbers\n",
			       tok, dev_str);
			n = -EINVAL;
			break;
		}
		n++;
	}
	kfree(copy);
	return n;
}

static int __init rbln_init(void)
{
	struct rbln_pci_id ids[RBLN_MAX_IDS];
	int n, i, ret;

	n = rbln_parse_ids(ids, ARRAY_SIZE(ids));
	if (n < 0)
		return n;

	rbln_gemfs_init();
	ret = pci_register_driver(&rbln_pci_driver);
	if (ret) {
		rbln_gemfs_fini();
		return ret;
	}

	for (i = 0; i < n; i++) {
		ret = pci_add_dynid(&rbln_pci_driver, ids[i].vendor,
				    ids[i].device, PCI_ANY_ID, PCI_ANY_ID, 0, 0,
				    0);
		if (ret && ret != -EEXIST) {
			pr_err("rbln: cannot add PCI id %04x:%04x: %d\n",
			       ids[i].vendor, ids[i].device, ret);
			pci_unregister_driver(&rbln_pci_driver);
			rbln_gemfs_fini();
			return ret;
		}
	}
	return 0;
}

static void __exit rbln_exit(void)
{
	pci_unregister_driver(&rbln_pci_driver);
	rbln_gemfs_fini();
}

module_init(rbln_init);
module_exit(rbln_exit);

MODULE_VERSION(RBLN_DRIVER_VERSION);
MODULE_LICENSE("GPL");
/* dma_buf_unmap_attachment_unlocked(): imports given back at unbind. */
RBLN_IMPORT_NS_DMA_BUF();
MODULE_DESCRIPTION(RBLN_DRIVER_DESC);
MODULE_AUTHOR("rbln developers");
