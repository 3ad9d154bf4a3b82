/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: DRM accel driver for rbln NPU cards (firmware-iface v1).
 *
 * One PCI function is one card is one struct rbln_device is one
 * /dev/accel/accelN node.  The device embeds one state struct per
 * subsystem, each defined in the subsystem's header and touched by the
 * subsystem's files only (kernel/README.md lists them); the other files go
 * through the functions those headers declare.  This header holds the
 * device, the per-file state, the card state machine, the control-block
 * accessors and the module parameters.
 *
 * Locking
 * -------
 * Every lock of the driver, outermost first.  A lock may be taken while
 * holding the ones above it on its line, never the other way round:
 *
 *   unplug_lock                (mutex, struct rbln_device)
 *   reset.lock                 (mutex, struct rbln_reset)
 *     -> vms.list_lock         (mutex, struct rbln_vms)
 *       -> bo->lock            (mutex, struct rbln_bo)
 *         -> vm->lock          (mutex, struct rbln_vm)
 *           -> admin.lock      (mutex, struct rbln_admin)
 *             -> events.lock   (mutex, struct rbln_events)
 *               -> state_lock  (spinlock, struct rbln_device)
 *   telemetry.lock -> admin.lock
 *   dma_resv (the job's buffers, ww) -> q->lock (mutex, struct rbln_queue)
 *   an in-fence's lock -> rf->deps.lock (spinlock, irqsave, struct rbln_deps)
 *   unplug_lock -> drm.filelist_mutex (DRM core) -> rf->deps.lock
 *   events.lock -> vms.xa's lock -> vm->fault_lock (spinlock, irqsave)
 *   ring->lock (spinlock, irqsave, hard irq) -> vm->fault_lock, fence_lock
 *   hbm.chiplet[i].lock (mutex, struct rbln_hbm): takes no other lock
 *   bo->lock -> gem.dma_lock (mutex, struct rbln_gem): takes no other lock
 *
 * Not every pair on a line nests in the code (reset.lock -> vm->lock does
 * in rbln_vm_close() and the recovery, reset.lock -> admin.lock in the
 * ring reset and the recovery); none nests in the opposite order.
 * reset.lock is taken through rbln_reset_lock().  Each lock's declaration
 * says what it protects.  A reference (kref, drm_gem_object_get) keeps an
 * object alive; the locks only order the changes to it.
 */
#ifndef RBLN_DRV_H
#define RBLN_DRV_H

#include <linux/io.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/xarray.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>

#include <drm/rbln_accel.h>

#include "rbln_compat.h"

#include "rbln_fw_admin.h"
#include "rbln_fw_cmd.h"
#include "rbln_fw_ctrl.h"

#include "rbln_admin.h"
#include "rbln_dep.h"
#include "rbln_event.h"
#include "rbln_fw.h"
#include "rbln_gem.h"
#include "rbln_hbm.h"
#include "rbln_pci.h"
#include "rbln_reset.h"
#include "rbln_ring.h"
#include "rbln_sysfs.h"
#include "rbln_telemetry.h"
#include "rbln_vm.h"

#if defined(__BIG_ENDIAN)
#error "rbln: firmware-iface records are little endian; big-endian hosts are not supported"
#endif

#define RBLN_DRIVER_NAME	"rbln"
#define RBLN_DRIVER_DESC	"DRM accel driver for rbln NPU cards"
#define RBLN_DRIVER_VERSION	"0.2.0"
#define RBLN_DRIVER_MAJOR	0
#define RBLN_DRIVER_MINOR	2
#define RBLN_DRIVER_PATCHLEVEL	0

/* Oldest firmware-iface minor the driver can use (1.1: the MMU). */
#define RBLN_FW_IFACE_MINOR_MIN	1

/* PCI BARs of the card (the ivshmem-doorbell layout). */
#define RBLN_BAR_REGS		0
#define RBLN_BAR_MEM		2

/* BAR0 registers (ivshmem-doorbell). */
#define RBLN_REG_IVPOSITION	0x08
#define RBLN_REG_DOORBELL	0x0c
#define RBLN_REGS_MIN_SIZE	0x10

/* Module parameters, all defined in rbln_drv.c. */
extern unsigned int rbln_boot_timeout_ms;
extern unsigned int rbln_admin_timeout_ms;
extern unsigned int rbln_job_timeout_ms;
extern unsigned int rbln_release_grace_ms;
extern unsigned int rbln_heartbeat_timeout_ms;
extern bool rbln_ring_poll;
extern bool rbln_recovery;
extern bool rbln_host_thp;

/* Driver view of the card; see rbln_state_name() for the sysfs strings. */
enum rbln_state {
	RBLN_STATE_INIT,	/* probing, handshake not done */
	RBLN_STATE_READY,	/* firmware READY, admin ring served */
	RBLN_STATE_FAULT,	/* firmware reported FAULT or stopped answering */
	RBLN_STATE_RESETTING,	/* the driver is resetting the card */
	RBLN_STATE_OFFLINE,	/* the card was reset and is no longer used */
};

#define RBLN_FAULT_REASON_LEN	64

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

/* Per open file: a client. */
struct rbln_file {
	struct rbln_device *rdev;
	struct rbln_vm vm;
	/*
	 * id -> struct rbln_queue; its xa_lock protects each queue's
	 * destroyed flag.  A destroyed queue stays here, its id taken, until
	 * its last job is done (rbln_queue.c).
	 */
	struct xarray queues;
	struct rbln_deps deps;		/* in-fences its jobs wait for */
	atomic64_t busy_ns[RBLN_FW_MAX_CHIPLETS];	/* card time of its jobs */
};

static inline struct rbln_file *to_rbln_file(struct drm_file *file)
{
	return file->driver_priv;
}

struct rbln_device {
	struct drm_device drm;
	struct pci_dev *pdev;

	void __iomem *regs;		/* BAR0 (rbln_pci.c) */
	void __iomem *ctrl;		/* BAR2, control region only */

	struct rbln_identity id;	/* rbln_fw.c, at probe */

	/*
	 * Protects state, fault_code, fault_reason and announce: the card
	 * state machine of rbln_drv.c.
	 */
	spinlock_t state_lock;
	enum rbln_state state;
	u32 fault_code;
	char fault_reason[RBLN_FAULT_REASON_LEN];
	bool announce;		/* probe finished: state changes send uevents */

	/*
	 * Protects unplugged: rbln_unplug() tears the binding down once,
	 * from remove or from the work that found the card gone.
	 */
	struct mutex unplug_lock;
	bool unplugged;

	struct rbln_irqs irqs;		/* rbln_pci.c */
	struct rbln_fw fw;		/* rbln_fw.c */
	struct rbln_admin admin;	/* rbln_admin.c */
	struct rbln_events events;	/* rbln_event.c */
	struct rbln_telemetry telemetry; /* rbln_telemetry.c */
	struct rbln_hbm_mem hbm;	/* rbln_hbm.c */
	struct rbln_vms vms;		/* rbln_vm.c, rbln_mmu.c */
	struct rbln_gem gem;	/* rbln_gem.c, rbln_userptr.c */
	struct rbln_rings rings;	/* rbln_ring.c */
	struct rbln_reset reset;	/* rbln_reset.c */
	struct rbln_sysfs sysfs;	/* rbln_sysfs.c */
};

static inline struct rbln_device *to_rbln(struct drm_device *drm)
{
	return container_of(drm, struct rbln_device, drm);
}

#define rbln_ctrl_off(field) offsetof(struct rbln_fw_ctrl, field)

/*
 * The control block (firmware-iface rbln_fw_ctrl.h) is read and written
 * through these only; @off is rbln_ctrl_off(field).
 */
static inline u16 rbln_ctrl_rd16(struct rbln_device *rdev, size_t off)
{
	return ioread16(rdev->ctrl + off);
}

static inline void rbln_ctrl_wr16(struct rbln_device *rdev, size_t off, u16 val)
{
	iowrite16(val, rdev->ctrl + off);
}

static inline u32 rbln_ctrl_rd32(struct rbln_device *rdev, size_t off)
{
	return ioread32(rdev->ctrl + off);
}

static inline void rbln_ctrl_wr32(struct rbln_device *rdev, size_t off, u32 val)
{
	iowrite32(val, rdev->ctrl + off);
}

static inline u64 rbln_ctrl_rd64(struct rbln_device *rdev, size_t off)
{
	return readq(rdev->ctrl + off);
}

static inline void rbln_ctrl_wr64(struct rbln_device *rdev, size_t off, u64 val)
{
	writeq(val, rdev->ctrl + off);
}

/* Copies @len bytes at @off of the control block (all of it: 0, size). */
static inline void rbln_ctrl_copy(struct rbln_device *rdev, size_t off,
				  void *buf, size_t len)
{
	memcpy_fromio(buf, rdev->ctrl + off, len);
}

/* rbln_drv.c: the card state machine */
const char *rbln_state_name(struct rbln_device *rdev);
const char *rbln_state_str(enum rbln_state state);
const char *rbln_family_name(u32 family);
enum rbln_state rbln_get_state(struct rbln_device *rdev);
void rbln_set_state(struct rbln_device *rdev, enum rbln_state state);
void rbln_set_fault(struct rbln_device *rdev, u32 code, const char *reason);
u32 rbln_get_fault(struct rbln_device *rdev, char *reason, size_t len);
void rbln_unplug(struct rbln_device *rdev);

/* Entry points of the other files */
int rbln_ioctl_get_info(struct drm_device *drm, void *data,
			struct drm_file *file);		/* rbln_info.c */
void rbln_debugfs_init(struct rbln_device *rdev);	/* rbln_debugfs.c */
void rbln_show_fdinfo(struct drm_printer *p,
		      struct drm_file *file);		/* rbln_fdinfo.c */
struct io_uring_cmd;
int rbln_uring_cmd(struct io_uring_cmd *cmd,
		   unsigned int issue_flags);		/* rbln_uring.c */

#endif /* RBLN_DRV_H */
