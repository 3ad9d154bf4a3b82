// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: debugfs.  Under the DRM accel debugfs directory of the device
 * (/sys/kernel/debug/accel/<pci bdf>/ on 6.12; debugfs is root-only):
 *
 *   control_block  every field of the card's control block, decoded, and
 *                  the driver's view of the rings next to it.
 *   vm_access      (0600, CAP_SYS_ADMIN) the card reads or writes bytes at
 *                  a device VA of an address space, through its MMU
 *                  (firmware-iface DEBUG_ACCESS), so tests can prove
 *                  translation, permissions and faults without jobs.
 *
 * vm_access protocol: one request per write(), an ASCII header line and,
 * for a write, the data in the same write():
 *
 *   "r <asid> <va> <len>\n"             read <len> bytes at <va>
 *   "w <asid> <va> <len>\n" <len bytes>  write them
 *
 * Numbers in C notation (0x...), <len> 1..4096 (one card request: all or
 * nothing).  write() returns its count, or -EINVAL (malformed), -EFAULT
 * (the card's MMU faulted: no byte moved, the fault is recorded in the VM
 * of <asid>), -EIO (the card did not answer), -ENODEV.  After a read
 * request the next read() of the same open file returns the bytes.  The
 * first access to a VM binds it on the card and maps its host buffers,
 * as a job would.
 */
#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/io.h>
#include <linux/seq_file.h>
#include <linux/uaccess.h>
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
	rbln_ctrl_copy(rdev, 0, c, sizeof(*c));
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
	rbln_admin_show(rdev, m);
	rbln_events_show(rdev, m);

	kfree(c);
	return 0;
}

struct rbln_vm_access {
	struct rbln_device *rdev;
	u32 len;		/* bytes of the last read request */
	u8 buf[PAGE_SIZE];
};

static int rbln_vm_access_open(struct inode *inode, struct file *file)
{
	struct rbln_vm_access *st;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	st = kzalloc(sizeof(*st), GFP_KERNEL);
	if (!st)
		return -ENOMEM;
	st->rdev = inode->i_private;
	file->private_data = st;
	return nonseekable_open(inode, file);
}

static int rbln_vm_access_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data);
	return 0;
}

static ssize_t rbln_vm_access_write(struct file *file, const char __user *ubuf,
				    size_t count, loff_t *ppos)
{
	struct rbln_vm_access *st = file->private_data;
	struct rbln_device *rdev = st->rdev;
	char hdr[96], op, *nl;
	size_t hlen, n;
	u32 asid, len;
	int sasid, slen;
	u64 va;
	int ret;

	n = min(count, sizeof(hdr) - 1);
	if (copy_from_user(hdr, ubuf, n))
		return -EFAULT;
	hdr[n] = '\0';
	nl = strchr(hdr, '\n');
	if (!nl)
		return -EINVAL;
	*nl = '\0';
	hlen = nl - hdr + 1;
	/* %i and %lli take decimal, 0x hex and 0 octal alike. */
	if (sscanf(hdr, "%c %i %lli %i", &op, &sasid, &va, &slen) != 4 ||
	    (op != 'r' && op != 'w') || sasid < 0 || slen <= 0 ||
	    slen > PAGE_SIZE)
		return -EINVAL;
	asid = sasid;
	len = slen;
	if (op == 'w') {
		if (count != hlen + len)
			return -EINVAL;
		if (copy_from_user(st->buf, ubuf + hlen, len))
			return -EFAULT;
	} else if (count != hlen) {
		return -EINVAL;
	}
	st->len = 0;

	ret = rbln_vm_debug_access(rdev, asid, op == 'w', va, st->buf, len);
	if (ret == -EFAULT)
		/* The card posts the fault event before the completion. */
		rbln_events_process(rdev);
	if (ret)
		return ret;
	if (op == 'r')
		st->len = len;
	return count;
}

static ssize_t rbln_vm_access_read(struct file *file, char __user *ubuf,
				   size_t count, loff_t *ppos)
{
	struct rbln_vm_access *st = file->private_data;
	size_t n = min_t(size_t, count, st->len);

	if (copy_to_user(ubuf, st->buf, n))
		return -EFAULT;
	st->len = 0;
	return n;
}

static const struct file_operations rbln_vm_access_fops = {
	.owner = THIS_MODULE,
	.open = rbln_vm_access_open,
	.release = rbln_vm_access_release,
	.write = rbln_vm_access_write,
	.read = rbln_vm_access_read,
};

void rbln_debugfs_init(struct rbln_device *rdev)
{
	debugfs_create_file("vm_access", 0600, rdev->drm.debugfs_root, rdev,
			    &rbln_vm_access_fops);
	drm_debugfs_add_file(&rdev->drm, "control_block",
			     rbln_debugfs_control_block, NULL);
}
