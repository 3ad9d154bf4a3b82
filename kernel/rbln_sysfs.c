// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: sysfs, hwmon and the uevents (state changes, ring resets).
 *
 * The driver's sysfs ABI (one value per file, strings or numbers with
 * units in the name; never renumberable enums; every file world-readable
 * and read-only except "reset", which is write-only for root).  The
 * directory hangs off the PCI function:
 *
 *   /sys/bus/pci/devices/<bdf>/rbln/            the card
 *   /sys/bus/pci/devices/<bdf>/rbln/chiplet<i>/ chiplet i, 0 <= i < chiplet_count
 *
 * Each key is described where it is emitted below.  Temperature and power
 * are in the hwmon device of the same PCI function (name "rbln"), and state
 * changes are KOBJ_CHANGE uevents of the PCI function carrying
 * RBLN_STATE=<state> (and RBLN_FAULT_CODE=<n> on a fault).
 */
#include <linux/capability.h>
#include <linux/err.h>
#include <linux/hwmon.h>
#include <linux/jiffies.h>
#include <linux/kobject.h>
#include <linux/limits.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include <drm/drm_drv.h>

#include "rbln_drv.h"
#include "rbln_reset.h"
#include "rbln_sysfs.h"
#include "rbln_telemetry.h"

/*
 * A directory: the card's rbln/ or one of its chiplet<i>/.  Raw kobjects,
 * since attribute groups of the PCI device cannot nest chiplet<i>/ inside
 * rbln/.
 */
struct rbln_sysfs_node {
	struct kobject kobj;
	struct rbln_device *rdev;
	u32 chiplet;
};

static struct rbln_sysfs_node *to_node(struct kobject *kobj)
{
	return container_of(kobj, struct rbln_sysfs_node, kobj);
}

static void rbln_sysfs_node_release(struct kobject *kobj)
{
	kfree(to_node(kobj));
}

/* ---- card: /sys/bus/pci/devices/<bdf>/rbln/ ------------------------------ */

/* family: "rebel100" (4 chiplets, each with its own HBM) or "atom" (1 NPU). */
static ssize_t family_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%s\n", rbln_family_name(to_node(kobj)->rdev->id.family));
}

/* chiplet_count: number of chiplets (and of chiplet<i> directories). */
static ssize_t chiplet_count_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_node(kobj)->rdev->id.chiplet_count);
}

/* hbm_total_bytes: HBM of all chiplets together, in bytes. */
static ssize_t hbm_total_bytes_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	const struct rbln_identity *id = &to_node(kobj)->rdev->id;
	u64 total = 0;
	unsigned int i;

	for (i = 0; i < id->chiplet_count; i++)
		total += id->hbm_size[i];
	return sysfs_emit(buf, "%llu\n", total);
}

/* fw_version: firmware version string reported by the card. */
static ssize_t fw_version_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", to_node(kobj)->rdev->id.fw_version);
}

/* fw_iface_version: firmware-iface version the card speaks, "major.minor". */
static ssize_t fw_iface_version_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	const struct rbln_identity *id = &to_node(kobj)->rdev->id;

	return sysfs_emit(buf, "%u.%u\n", id->iface_major, id->iface_minor);
}

/* serial: serial number of the card. */
static ssize_t serial_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%s\n", to_node(kobj)->rdev->id.serial);
}

/* uuid: card UUID, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". */
static ssize_t uuid_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%pUb\n", to_node(kobj)->rdev->id.uuid);
}

/*
 * state: "initializing", "ready", "fault", "resetting", "offline" or
 * "unplugged".  Pollable (sysfs_notify on every change).
 */
static ssize_t state_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%s\n", rbln_state_name(to_node(kobj)->rdev));
}

/* fault: "<fault name>: <firmware's reason>" of the last fault, or empty. */
static ssize_t fault_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	char reason[RBLN_FAULT_REASON_LEN];
	u32 code;

	code = rbln_get_fault(to_node(kobj)->rdev, reason, sizeof(reason));

	if (!reason[0] && code == RBLN_FW_FAULT_NONE)
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "%s: %s\n", rbln_fw_fault_name(code), reason);
}

/*
 * heartbeat: the card's heartbeat counter (incremented about every 100 ms
 * while the firmware runs), read from the card; -ENODEV once unplugged.
 */
static ssize_t heartbeat_show(struct kobject *kobj, struct kobj_attribute *attr,
			      char *buf)
{
	struct rbln_device *rdev = to_node(kobj)->rdev;
	u64 beat;
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return -ENODEV;
	beat = rbln_ctrl_rd64(rdev, rbln_ctrl_off(heartbeat));
	drm_dev_exit(idx);
	return sysfs_emit(buf, "%llu\n", beat);
}

static struct kobj_attribute rbln_attr_family = __ATTR_RO(family);
/* card_resets: whole-card recoveries since the driver bound the card. */
static ssize_t card_resets_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", rbln_reset_card_resets(to_node(kobj)->rdev));
}

/* heartbeat_losses: times the heartbeat watchdog found the firmware stopped. */
static ssize_t heartbeat_losses_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n",
			  rbln_reset_heartbeat_losses(to_node(kobj)->rdev));
}

/*
 * open_files: open files of the card's accel node (struct file, so a dup()
 * or a fork() sharing one open does not count twice), including files that
 * no process has in its fd table any more but that something still holds:
 * a mapping of a buffer made before the fd was closed, an io_uring
 * registered file, an fd in flight in a UNIX socket.  rbln-smi reads it to
 * tell whether the card is in use before a reset; /proc/<pid>/fdinfo says
 * by whom.
 */
static ssize_t open_files_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  atomic_read(&to_node(kobj)->rdev->drm.open_count));
}

/*
 * reset (write-only, root, CAP_SYS_ADMIN): writing 1 (or y, on) resets the
 * card and returns once it is ready again.  The reset is the card recovery
 * of rbln_reset.c, started by faulting the card with the reason "reset
 * requested through sysfs" (fault code none): the state uevents say fault
 * -> resetting -> ready, it leaves a devcoredump like every recovery,
 * card_resets counts it, and open files, buffers and queues survive it
 * while the jobs the card was running fail with -EIO.  Whether processes
 * hold the card is not checked here (open_files says; rbln-smi --reset
 * refuses unless --force).  Errors: -EPERM without CAP_SYS_ADMIN; -EINVAL
 * for anything but a true boolean; -EOPNOTSUPP with the module parameter
 * recovery=N (nothing would bring the card back); -EBUSY unless the card
 * is ready with no recovery queued (a recovery is already on its way, or
 * one failed: rebind the driver); -EIO if the recovery failed (the card
 * stays in "fault"); -ENODEV once the card is unplugged.
 */
static ssize_t reset_store(struct kobject *kobj, struct kobj_attribute *attr,
			   const char *buf, size_t count)
{
	struct rbln_device *rdev = to_node(kobj)->rdev;
	u64 resets;
	bool reset;
	int idx, ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	ret = kstrtobool(buf, &reset);
	if (ret)
		return ret;
	if (!reset)
		return -EINVAL;
	if (!READ_ONCE(rbln_recovery))
		return -EOPNOTSUPP;
	if (!drm_dev_enter(&rdev->drm, &idx))
		return -ENODEV;
	if (rbln_get_state(rdev) != RBLN_STATE_READY ||
	    rbln_reset_pending(rdev)) {
		ret = -EBUSY;
		goto out;
	}
	resets = rbln_reset_card_resets(rdev);
	rbln_set_fault(rdev, RBLN_FW_FAULT_NONE, "reset requested through sysfs");
	/*
	 * rbln_set_fault() queued the recovery.  Waiting for it inside
	 * drm_dev_enter() cannot deadlock with an unplug: the unplug waits
	 * for this section, and the work either runs to its end or, once
	 * the unplug has begun, returns at its own drm_dev_enter().
	 */
	flush_work(&rdev->reset.recover_work);
	if (rbln_reset_card_resets(rdev) != resets &&
	    rbln_get_state(rdev) == RBLN_STATE_READY)
		ret = count;
	else
		ret = -EIO;
out:
	drm_dev_exit(idx);
	return ret;
}

static struct kobj_attribute rbln_attr_open_files = __ATTR_RO(open_files);
static struct kobj_attribute rbln_attr_reset = __ATTR_WO(reset);
static struct kobj_attribute rbln_attr_heartbeat_losses = __ATTR_RO(heartbeat_losses);
static struct kobj_attribute rbln_attr_card_resets = __ATTR_RO(card_resets);
static struct kobj_attribute rbln_attr_chiplet_count = __ATTR_RO(chiplet_count);
static struct kobj_attribute rbln_attr_hbm_total_bytes = __ATTR_RO(hbm_total_bytes);
static struct kobj_attribute rbln_attr_fw_version = __ATTR_RO(fw_version);
static struct kobj_attribute rbln_attr_fw_iface_version = __ATTR_RO(fw_iface_version);
static struct kobj_attribute rbln_attr_serial = __ATTR_RO(serial);
static struct kobj_attribute rbln_attr_uuid = __ATTR_RO(uuid);
static struct kobj_attribute rbln_attr_state = __ATTR_RO(state);
static struct kobj_attribute rbln_attr_fault = __ATTR_RO(fault);
static struct kobj_attribute rbln_attr_heartbeat = __ATTR_RO(heartbeat);

static struct attribute *rbln_card_attrs[] = {
	&rbln_attr_family.attr,
	&rbln_attr_chiplet_count.attr,
	&rbln_attr_card_resets.attr,
	&rbln_attr_heartbeat_losses.attr,
	&rbln_attr_hbm_total_bytes.attr,
	&rbln_attr_fw_version.attr,
	&rbln_attr_fw_iface_version.attr,
	&rbln_attr_serial.attr,
	&rbln_attr_uuid.attr,
	&rbln_attr_state.attr,
	&rbln_attr_fault.attr,
	&rbln_attr_heartbeat.attr,
	&rbln_attr_open_files.attr,
	&rbln_attr_reset.attr,
	NULL
};
ATTRIBUTE_GROUPS(rbln_card);

static const struct kobj_type rbln_card_ktype = {
	.release = rbln_sysfs_node_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = rbln_card_groups,
};

/* ---- chiplet: /sys/bus/pci/devices/<bdf>/rbln/chiplet<i>/ ------------------ */

/* index: i, the chiplet's index (as in uAPI arrays and hwmon labels). */
static ssize_t index_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%u\n", to_node(kobj)->chiplet);
}

/* hbm_total_bytes: HBM of this chiplet, in bytes. */
static ssize_t chiplet_hbm_total_bytes_show(struct kobject *kobj,
					    struct kobj_attribute *attr,
					    char *buf)
{
	struct rbln_sysfs_node *node = to_node(kobj);

	return sysfs_emit(buf, "%llu\n", node->rdev->id.hbm_size[node->chiplet]);
}

static struct kobj_attribute rbln_attr_index = __ATTR_RO(index);
static struct kobj_attribute rbln_attr_chiplet_hbm_total_bytes =
	__ATTR(hbm_total_bytes, 0444, chiplet_hbm_total_bytes_show, NULL);

/* hbm_used_bytes: bytes of this chiplet's HBM held by buffers, all clients. */
static ssize_t hbm_used_bytes_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	struct rbln_sysfs_node *node = to_node(kobj);
	u64 used, largest;

	rbln_hbm_stats(node->rdev, node->chiplet, &used, &largest);
	return sysfs_emit(buf, "%llu\n", used);
}

/*
 * hbm_largest_free_bytes: the largest contiguous free block, in bytes (a
 * fragmentation figure: buffers need not be contiguous).
 */
static ssize_t hbm_largest_free_bytes_show(struct kobject *kobj,
					   struct kobj_attribute *attr, char *buf)
{
	struct rbln_sysfs_node *node = to_node(kobj);
	u64 used, largest;

	rbln_hbm_stats(node->rdev, node->chiplet, &used, &largest);
	return sysfs_emit(buf, "%llu\n", largest);
}

/*
 * busy_ns: card time this chiplet's command ring spent running jobs, ns,
 * since the driver bound; ring and card resets do not set it back.
 */
static ssize_t busy_ns_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct rbln_sysfs_node *node = to_node(kobj);

	return sysfs_emit(buf, "%llu\n", rbln_ring_busy_ns(node->rdev, node->chiplet));
}

/* ring_resets: times the driver reset this chiplet's ring (hung job). */
static ssize_t ring_resets_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	struct rbln_sysfs_node *node = to_node(kobj);

	return sysfs_emit(buf, "%llu\n", rbln_ring_resets(node->rdev, node->chiplet));
}

/*
 * ring_cpls_polled: jobs of this chiplet's ring that the driver's 500 ms
 * poll completed before any interrupt did: completion interrupts that were
 * lost, or (rarely) still on their way.
 */
static ssize_t ring_cpls_polled_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	struct rbln_sysfs_node *node = to_node(kobj);

	return sysfs_emit(buf, "%llu\n",
			  rbln_ring_cpls_polled(node->rdev, node->chiplet));
}

static struct kobj_attribute rbln_attr_busy_ns = __ATTR_RO(busy_ns);
static struct kobj_attribute rbln_attr_ring_cpls_polled =
	__ATTR_RO(ring_cpls_polled);
static struct kobj_attribute rbln_attr_ring_resets = __ATTR_RO(ring_resets);
static struct kobj_attribute rbln_attr_hbm_used_bytes = __ATTR_RO(hbm_used_bytes);
static struct kobj_attribute rbln_attr_hbm_largest_free_bytes =
	__ATTR_RO(hbm_largest_free_bytes);

static struct attribute *rbln_chiplet_attrs[] = {
	&rbln_attr_index.attr,
	&rbln_attr_chiplet_hbm_total_bytes.attr,
	&rbln_attr_hbm_used_bytes.attr,
	&rbln_attr_hbm_largest_free_bytes.attr,
	&rbln_attr_busy_ns.attr,
	&rbln_attr_ring_resets.attr,
	&rbln_attr_ring_cpls_polled.attr,
	NULL
};
ATTRIBUTE_GROUPS(rbln_chiplet);

static const struct kobj_type rbln_chiplet_ktype = {
	.release = rbln_sysfs_node_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = rbln_chiplet_groups,
};

static struct rbln_sysfs_node *rbln_sysfs_node_add(struct rbln_device *rdev,
						   const struct kobj_type *ktype,
						   struct kobject *parent,
						   u32 chiplet,
						   const char *name)
{
	struct rbln_sysfs_node *node;
	int ret;

	node = kzalloc(sizeof(*node), GFP_KERNEL);
	if (!node)
		return ERR_PTR(-ENOMEM);
	node->rdev = rdev;
	node->chiplet = chiplet;
	ret = kobject_init_and_add(&node->kobj, ktype, parent, "%s", name);
	if (ret) {
		kobject_put(&node->kobj);
		return ERR_PTR(ret);
	}
	return node;
}

/* ---- hwmon --------------------------------------------------------------- */

static const char *const rbln_hwmon_temp_labels[] = {
	"card", "chiplet0", "chiplet1", "chiplet2", "chiplet3",
	"chiplet4", "chiplet5", "chiplet6", "chiplet7",
};

static_assert(ARRAY_SIZE(rbln_hwmon_temp_labels) == 1 + RBLN_FW_MAX_CHIPLETS);

/*
 * temp1 (label "card"): hottest sensor of the card, m°C.
 * temp<2+i> (label "chiplet<i>"): chiplet i, m°C; only i < chiplet_count.
 * power1: card power, µW.
 */
static umode_t rbln_hwmon_is_visible(const void *data,
				     enum hwmon_sensor_types type, u32 attr,
				     int channel)
{
	const struct rbln_device *rdev = data;

	if (type == hwmon_temp && channel > rdev->id.chiplet_count)
		return 0;
	return 0444;
}

static int rbln_hwmon_read(struct device *dev, enum hwmon_sensor_types type,
			   u32 attr, int channel, long *val)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);
	struct rbln_fw_telemetry t;
	int ret;

	ret = rbln_telemetry_cached(rdev, &t);
	if (ret)
		return ret;

	switch (type) {
	case hwmon_temp:
		if (attr != hwmon_temp_input)
			return -EOPNOTSUPP;
		if (!channel) {
			*val = t.temp_mc;
			return 0;
		}
		if (channel > t.chiplet_count)
			return -ENODATA;
		*val = t.chiplet[channel - 1].temp_mc;
		return 0;
	case hwmon_power:
		if (attr != hwmon_power_input)
			return -EOPNOTSUPP;
		*val = min_t(u64, t.power_uw, LONG_MAX);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static int rbln_hwmon_read_string(struct device *dev,
				  enum hwmon_sensor_types type, u32 attr,
				  int channel, const char **str)
{
	if (type != hwmon_temp || attr != hwmon_temp_label ||
	    channel >= ARRAY_SIZE(rbln_hwmon_temp_labels))
		return -EOPNOTSUPP;
	*str = rbln_hwmon_temp_labels[channel];
	return 0;
}

#define RBLN_HWMON_TEMP	(HWMON_T_INPUT | HWMON_T_LABEL)

static const struct hwmon_channel_info *const rbln_hwmon_channels[] = {
	HWMON_CHANNEL_INFO(temp, RBLN_HWMON_TEMP, RBLN_HWMON_TEMP,
			   RBLN_HWMON_TEMP, RBLN_HWMON_TEMP, RBLN_HWMON_TEMP,
			   RBLN_HWMON_TEMP, RBLN_HWMON_TEMP, RBLN_HWMON_TEMP,
			   RBLN_HWMON_TEMP),
	HWMON_CHANNEL_INFO(power, HWMON_P_INPUT),
	NULL
};

static const struct hwmon_ops rbln_hwmon_ops = {
	.is_visible = rbln_hwmon_is_visible,
	.read = rbln_hwmon_read,
	.read_string = rbln_hwmon_read_string,
};

static const struct hwmon_chip_info rbln_hwmon_chip = {
	.ops = &rbln_hwmon_ops,
	.info = rbln_hwmon_channels,
};

/* ---- setup --------------------------------------------------------------- */

int rbln_sysfs_init(struct rbln_device *rdev)
{
	struct device *dev = &rdev->pdev->dev;
	struct rbln_sysfs_node *card, *node;
	struct device *hwmon;
	unsigned int i;

	card = rbln_sysfs_node_add(rdev, &rbln_card_ktype, &dev->kobj, 0,
				   "rbln");
	if (IS_ERR(card)) {
		dev_err(dev, "cannot create the rbln sysfs directory: %ld\n",
			PTR_ERR(card));
		return PTR_ERR(card);
	}
	for (i = 0; i < rdev->id.chiplet_count; i++) {
		char name[16];

		snprintf(name, sizeof(name), "chiplet%u", i);
		node = rbln_sysfs_node_add(rdev, &rbln_chiplet_ktype,
					   &card->kobj, i, name);
		if (IS_ERR(node)) {
			rbln_sysfs_fini(rdev);
			kobject_put(&card->kobj);
			return PTR_ERR(node);
		}
		rdev->sysfs.chiplet[i] = node;
	}
	WRITE_ONCE(rdev->sysfs.card, card);

	hwmon = devm_hwmon_device_register_with_info(dev, RBLN_DRIVER_NAME,
						     rdev, &rbln_hwmon_chip,
						     NULL);
	if (IS_ERR(hwmon)) {
		dev_err(dev, "cannot register the hwmon device: %ld\n",
			PTR_ERR(hwmon));
		rbln_sysfs_fini(rdev);
		return PTR_ERR(hwmon);
	}
	rdev->sysfs.hwmon = hwmon;
	return 0;
}

/* Removes the directories; waits for running show() calls. */
void rbln_sysfs_fini(struct rbln_device *rdev)
{
	struct rbln_sysfs_node *card = rdev->sysfs.card;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(rdev->sysfs.chiplet); i++) {
		if (rdev->sysfs.chiplet[i])
			kobject_put(&rdev->sysfs.chiplet[i]->kobj);
		rdev->sysfs.chiplet[i] = NULL;
	}
	WRITE_ONCE(rdev->sysfs.card, NULL);
	if (card)
		kobject_put(&card->kobj);
}

/* ---- uevents ------------------------------------------------------------ */

/*
 * A state change: a KOBJ_CHANGE uevent of the PCI function with
 * RBLN_STATE=<state> (and RBLN_FAULT_CODE=<n> on a fault), and a
 * sysfs_notify() of "state" for pollers.
 */
void rbln_sysfs_state_changed(struct rbln_device *rdev, enum rbln_state state,
			      u32 fault_code)
{
	struct rbln_sysfs_node *card;
	char state_env[40];
	char code_env[40];
	char *envp[3] = { state_env, NULL, NULL };

	snprintf(state_env, sizeof(state_env), "RBLN_STATE=%s",
		 rbln_state_str(state));
	if (state == RBLN_STATE_FAULT) {
		snprintf(code_env, sizeof(code_env), "RBLN_FAULT_CODE=%u",
			 fault_code);
		envp[1] = code_env;
	}
	kobject_uevent_env(&rdev->pdev->dev.kobj, KOBJ_CHANGE, envp);

	card = READ_ONCE(rdev->sysfs.card);
	if (card)
		sysfs_notify(&card->kobj, NULL, "state");
}

/*
 * A ring reset: a KOBJ_CHANGE uevent of the PCI function with
 * RBLN_RING_RESET=<chiplet>.
 */
void rbln_sysfs_ring_reset(struct rbln_device *rdev, u32 ring)
{
	char env[32];
	char *envp[2] = { env, NULL };
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	snprintf(env, sizeof(env), "RBLN_RING_RESET=%u", ring);
	kobject_uevent_env(&rdev->pdev->dev.kobj, KOBJ_CHANGE, envp);
	drm_dev_exit(idx);
}
