/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: the firmware transport - the record rings in host memory
 * (rbln_admin.c), the admin request ring (rbln_admin.c) and the typed
 * admin requests (rbln_msg.c), firmware-iface rbln_fw_admin.md.
 */
#ifndef RBLN_ADMIN_H
#define RBLN_ADMIN_H

#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/wait.h>

struct rbln_device;
struct seq_file;

/* Entries of the admin and event rings; a power of two in 4..4096. */
#define RBLN_RING_ENTRIES	256
#define RBLN_RING_REC_SIZE	64

/*
 * One ring of 64-byte records in coherent host memory: the admin
 * request and completion rings, and the event ring.
 */
struct rbln_rec_ring {
	void *va;
	dma_addr_t dma;
	u32 entries;	/* card-written rings: 0 while not consumed */
	u32 idx;	/* SQ: host tail; CQ/event: host head */
	u32 phase;	/* CQ/event: phase a new record carries */
};

int rbln_rec_ring_alloc(struct rbln_device *rdev, struct rbln_rec_ring *ring);
void rbln_rec_ring_rewind(struct rbln_rec_ring *ring);
bool rbln_rec_ring_peek(struct rbln_rec_ring *ring, void *out);

/* The admin ring. */
struct rbln_admin {
	/*
	 * Protects everything below and the card's admin ring: one request
	 * at a time; held across a card restart so none goes in meanwhile.
	 */
	struct mutex lock;
	wait_queue_head_t wq;		/* woken by the admin IRQ, state changes */
	struct rbln_rec_ring sq;
	struct rbln_rec_ring cq;
	u32 seq;
	void *buf;			/* PAGE_SIZE, data of the current request */
	dma_addr_t buf_dma;
	u64 timeouts;
	u64 stale;
};

/* One admin request and its answer. */
struct rbln_admin_cmd {
	u16 opcode;
	u32 args[10];
	void *data;		/* answer buffer, or NULL */
	u32 data_size;		/* bytes offered to the card (<= PAGE_SIZE) */
	const void *in;		/* if set: data_size bytes the card reads */
	/*
	 * The host frees or reuses memory on the answer (MMU changes): no
	 * signal ends the wait, only the admin timeout or a card fault.
	 */
	bool must_complete;
	/* out */
	u32 data_len;		/* bytes the card wrote */
	u64 result[6];
};

/* rbln_admin.c */
int rbln_admin_init(struct rbln_device *rdev);
int rbln_admin_alloc(struct rbln_device *rdev);
void rbln_admin_ring_dma(struct rbln_device *rdev, dma_addr_t *sq,
			 dma_addr_t *cq);
void rbln_admin_block(struct rbln_device *rdev);
void rbln_admin_unblock(struct rbln_device *rdev);
void rbln_admin_rewind(struct rbln_device *rdev);
void rbln_admin_irq(struct rbln_device *rdev);
void rbln_admin_wake(struct rbln_device *rdev);
int rbln_admin_exec(struct rbln_device *rdev, struct rbln_admin_cmd *cmd);
void rbln_admin_show(struct rbln_device *rdev, struct seq_file *m);

/* rbln_msg.c: the typed requests */
int rbln_msg_identify(struct rbln_device *rdev);
int rbln_msg_heartbeat(struct rbln_device *rdev);
int rbln_msg_vm_bind(struct rbln_device *rdev, u32 asid, dma_addr_t root);
int rbln_msg_vm_unbind(struct rbln_device *rdev, u32 asid);
int rbln_msg_vm_abort(struct rbln_device *rdev, u32 asid);
int rbln_msg_tlb_invalidate(struct rbln_device *rdev, u32 asid, u64 va,
			    u64 size);
int rbln_msg_debug_access(struct rbln_device *rdev, u32 asid, bool write,
			  u64 va, void *buf, u32 len);
int rbln_msg_ring_setup(struct rbln_device *rdev, u32 ring, u32 entries,
			dma_addr_t jobs, dma_addr_t cpls, dma_addr_t ctrl);
int rbln_msg_ring_stop(struct rbln_device *rdev, u32 ring);

#endif /* RBLN_ADMIN_H */
