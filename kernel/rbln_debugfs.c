// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: debugfs.  Under the DRM accel debugfs directory of the device
 * (/sys/kernel/debug/accel/<pci bdf>/ on 6.12; debugfs is root-only):
 *
 *   control_block  every field of the card's control block, decoded, and
 *                  the driver's view of the rings next to it.
 */
#include <linux/io.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include <drm/drm_debugfs.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>

#include "rbln_drv.h"

static void rbln_seq_str(struct seq_file *m, const char *key, const char *s,
			 size_t len)
{
	seq_printf(m, "%-18s \"%.*s\"\n", key, (int)strnlen(s, len), s);
}

static int rbln_debugfs_control_block(struct seq_file *m, void *data)
{
	struct drm_debugfs_entry *entry = m->private;
	struct rbln_device *rdev = to_rbln(entry->dev);
	struct rbln_fw_ctrl *c;
	unsigned int i;
	int idx;

	c = kmalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	if (!drm_dev_enter(&rdev->drm, &idx)) {
		kfree(c);
		return -ENODEV;
	}
	memcpy_fromio(c, rdev->ctrl, sizeof(*c));
	drm_dev_exit(idx);

	seq_puts(m, "# identity (card)\n");
	seq_printf(m, "%-18s 0x%08x\n", "magic", c->magic);
	seq_printf(m, "%-18s %u.%u\n", "iface", c->iface_major, c->iface_minor);
	seq_printf(m, "%-18s %u\n", "ctrl_size", c->ctrl_size);
	seq_printf(m, "%-18s %u (%s)\n", "family", c->family,
		   rbln_family_name(c->family));
	seq_printf(m, "%-18s %u\n", "chiplet_count", c->chiplet_count);
	seq_printf(m, "%-18s %u\n", "doorbell_peer_id", c->doorbell_peer_id);
	seq_printf(m, "%-18s %u\n", "num_vectors", c->num_vectors);
	seq_printf(m, "%-18s %pUb\n", "uuid", c->uuid);
	rbln_seq_str(m, "serial", c->serial, sizeof(c->serial));
	rbln_seq_str(m, "fw_version", c->fw_version, sizeof(c->fw_version));
	seq_printf(m, "%-18s 0x%llx\n", "bar_size", c->bar_size);
	for (i = 0; i < RBLN_FW_MAX_CHIPLETS; i++)
		seq_printf(m, "hbm[%u]             offset 0x%llx size 0x%llx\n",
			   i, c->hbm[i].bar_offset, c->hbm[i].size);

	seq_puts(m, "# state (card)\n");
	seq_printf(m, "%-18s %u\n", "fw_state", c->fw_state);
	seq_printf(m, "%-18s %u (%s)\n", "fault_code", c->fault_code,
		   rbln_fw_fault_name(c->fault_code));
	rbln_seq_str(m, "fault_reason", c->fault_reason, sizeof(c->fault_reason));
	seq_printf(m, "%-18s %u\n", "host_ack", c->host_ack);
	seq_printf(m, "%-18s %u\n", "admin_sq_head", c->admin_sq_head);
	seq_printf(m, "%-18s %llu\n", "heartbeat", c->heartbeat);

	seq_puts(m, "# host\n");
	seq_printf(m, "%-18s 0x%x\n", "host_ctrl", c->host_ctrl);
	seq_printf(m, "%-18s %u\n", "host_gen", c->host_gen);
	seq_printf(m, "%-18s %u.%u\n", "host_iface", c->host_iface_major,
		   c->host_iface_minor);
	seq_printf(m, "%-18s %u\n", "ring_entries", c->ring_entries);
	seq_printf(m, "%-18s 0x%llx\n", "admin_sq_addr", c->admin_sq_addr);
	seq_printf(m, "%-18s 0x%llx\n", "admin_cq_addr", c->admin_cq_addr);
	seq_printf(m, "%-18s 0x%llx\n", "event_ring_addr", c->event_ring_addr);
	seq_printf(m, "%-18s %u\n", "admin_sq_tail", c->admin_sq_tail);
	seq_printf(m, "%-18s %u\n", "admin_cq_head", c->admin_cq_head);
	seq_printf(m, "%-18s %u\n", "event_head", c->event_head);

	seq_puts(m, "# driver\n");
	seq_printf(m, "%-18s %s\n", "state", rbln_state_name(rdev));
	mutex_lock(&rdev->admin_lock);
	seq_printf(m, "%-18s %u\n", "admin_seq", rdev->admin_seq);
	seq_printf(m, "%-18s %u/%u phase %u\n", "admin_cq", rdev->cq.idx,
		   rdev->cq.entries, rdev->cq.phase);
	seq_printf(m, "%-18s %llu\n", "admin_timeouts", rdev->admin_timeouts);
	seq_printf(m, "%-18s %llu\n", "admin_stale", rdev->admin_stale);
	mutex_unlock(&rdev->admin_lock);
	mutex_lock(&rdev->event_lock);
	seq_printf(m, "%-18s %u/%u phase %u\n", "event_ring", rdev->ev.idx,
		   rdev->ev.entries, rdev->ev.phase);
	seq_printf(m, "%-18s %llu\n", "events", rdev->ev_count);
	seq_printf(m, "%-18s %llu\n", "events_lost", rdev->ev_lost);
	mutex_unlock(&rdev->event_lock);

	kfree(c);
	return 0;
}

void rbln_debugfs_init(struct rbln_device *rdev)
{
	drm_debugfs_add_file(&rdev->drm, "control_block",
			     rbln_debugfs_control_block, NULL);
}
