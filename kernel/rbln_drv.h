/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: DRM accel driver for rbln NPU cards (firmware-iface v1).
 *
 * One PCI function is one card is one struct rbln_device is one
 * /dev/accel/accelN node.
 */
#ifndef RBLN_DRV_H
#define RBLN_DRV_H

#include <linux/kobject.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>

#include "rbln_fw_admin.h"
#include "rbln_fw_ctrl.h"

#if defined(__BIG_ENDIAN)
#error "rbln: firmware-iface records are little endian; big-endian hosts are not supported"
#endif

#define RBLN_DRIVER_NAME	"rbln"
#define RBLN_DRIVER_DESC	"DRM accel driver for rbln NPU cards"
#define RBLN_DRIVER_VERSION	"0.1.0"
#define RBLN_DRIVER_MAJOR	0
#define RBLN_DRIVER_MINOR	1
#define RBLN_DRIVER_PATCHLEVEL	0

/* PCI BARs of the card (the ivshmem-doorbell layout). */
#define RBLN_BAR_REGS		0
#define RBLN_BAR_MEM		2

/* BAR0 registers (ivshmem-doorbell). */
#define RBLN_REG_IVPOSITION	0x08
#define RBLN_REG_DOORBELL	0x0c
#define RBLN_REGS_MIN_SIZE	0x10

/* Entries of each of the three rings; a power of two in 4..4096. */
#define RBLN_RING_ENTRIES	256
#define RBLN_RING_REC_SIZE	64

/* How long hwmon may reuse one GET_TELEMETRY answer. */
#define RBLN_TELEMETRY_CACHE_MS	100

/* Module parameters (rbln_drv.c). */
extern unsigned int rbln_boot_timeout_ms;
extern unsigned int rbln_admin_timeout_ms;

/* Driver view of the card; see rbln_state_name() for the sysfs strings. */
enum rbln_state {
	RBLN_STATE_INIT,	/* probing, handshake not done */
	RBLN_STATE_READY,	/* firmware READY, admin ring served */
	RBLN_STATE_FAULT,	/* firmware reported FAULT or stopped answering */
	RBLN_STATE_RESETTING,	/* the driver is resetting the card */
	RBLN_STATE_OFFLINE,	/* the card was reset and is no longer used */
};

/* What the driver knows about the card after probe; never changes. */
struct rbln_identity {
	u32 family;			/* RBLN_FW_FAMILY_* */
	u32 chiplet_count;
	u16 iface_major;
	u16 iface_minor;
	u32 num_vectors;
	u32 doorbell_peer_id;
	u64 bar_size;
	u64 hbm_offset[RBLN_FW_MAX_CHIPLETS];
	u64 hbm_size[RBLN_FW_MAX_CHIPLETS];
	u8 uuid[16];
	char serial[32];
	char fw_version[32];
};

/* One ring of 64-byte records in coherent host memory. */
struct rbln_ring {
	void *va;
	dma_addr_t dma;
	u32 entries;
	u32 idx;	/* SQ: host tail; CQ/event: host head */
	u32 phase;	/* CQ/event: phase a new record carries */
};

struct rbln_sysfs_node;

struct rbln_device {
	struct drm_device drm;
	struct pci_dev *pdev;

	void __iomem *regs;	/* BAR0 */
	void __iomem *ctrl;	/* BAR2, control region only */

	struct rbln_identity id;

	/* IRQs: admin completions and events (rbln_pci.c) */
	int irq_admin;
	int irq_event;
	bool irqs_requested;

	/* state, protected by state_lock */
	spinlock_t state_lock;
	enum rbln_state state;
	u32 fault_code;
	char fault_reason[64];
	bool announce;		/* probe finished: state changes send uevents */

	/* firmware: set once the card may hold our ring addresses */
	bool fw_touched;
	bool fw_down;
	u32 host_gen;

	/* admin ring (rbln_fw.c), everything below under admin_lock */
	struct mutex admin_lock;
	wait_queue_head_t admin_wq;
	struct rbln_ring sq;
	struct rbln_ring cq;
	u32 admin_seq;
	void *admin_buf;	/* PAGE_SIZE, data of the current request */
	dma_addr_t admin_buf_dma;
	u64 admin_timeouts;
	u64 admin_stale;

	/* event ring, under event_lock */
	struct mutex event_lock;
	struct rbln_ring ev;
	bool ev_seq_valid;
	u32 ev_last_seq;
	u64 ev_count;
	u64 ev_lost;
	u64 last_heartbeat;

	/* hwmon telemetry cache, under telem_lock */
	struct mutex telem_lock;
	unsigned long telem_stamp;	/* jiffies */
	bool telem_valid;
	struct rbln_fw_telemetry telem;

	/* sysfs (rbln_sysfs.c) */
	struct rbln_sysfs_node *sysfs_card;
	struct rbln_sysfs_node *sysfs_chiplet[RBLN_FW_MAX_CHIPLETS];
	struct device *hwmon;
};

static inline struct rbln_device *to_rbln(struct drm_device *drm)
{
	return container_of(drm, struct rbln_device, drm);
}

#define rbln_ctrl_off(field) offsetof(struct rbln_fw_ctrl, field)

static inline u32 rbln_ctrl_rd32(struct rbln_device *rdev, size_t off)
{
	return ioread32(rdev->ctrl + off);
}

static inline void rbln_ctrl_wr32(struct rbln_device *rdev, size_t off, u32 val)
{
	iowrite32(val, rdev->ctrl + off);
}

/* rbln_drv.c */
const char *rbln_state_name(struct rbln_device *rdev);
const char *rbln_family_name(u32 family);
enum rbln_state rbln_get_state(struct rbln_device *rdev);
void rbln_set_state(struct rbln_device *rdev, enum rbln_state state);
void rbln_set_fault(struct rbln_device *rdev, u32 code, const char *reason);

/* rbln_pci.c */
int rbln_pci_map(struct rbln_device *rdev);
int rbln_pci_setup_irqs(struct rbln_device *rdev);
void rbln_pci_free_irqs(struct rbln_device *rdev);
void rbln_doorbell(struct rbln_device *rdev, u32 vector);

/* rbln_fw.c */
int rbln_fw_check_identity(struct rbln_device *rdev);
int rbln_fw_init(struct rbln_device *rdev);
void rbln_fw_fini(struct rbln_device *rdev);
void rbln_fw_admin_irq(struct rbln_device *rdev);
void rbln_fw_process_events(struct rbln_device *rdev);
int rbln_fw_get_telemetry(struct rbln_device *rdev, struct rbln_fw_telemetry *t);
const char *rbln_fw_fault_name(u32 code);

/* rbln_info.c */
int rbln_ioctl_get_info(struct drm_device *drm, void *data,
			struct drm_file *file);

/* rbln_sysfs.c */
int rbln_sysfs_init(struct rbln_device *rdev);
void rbln_sysfs_fini(struct rbln_device *rdev);
void rbln_sysfs_notify_state(struct rbln_device *rdev);
int rbln_telemetry_cached(struct rbln_device *rdev, struct rbln_fw_telemetry *t);

/* rbln_debugfs.c */
void rbln_debugfs_init(struct rbln_device *rdev);

#endif /* RBLN_DRV_H */
