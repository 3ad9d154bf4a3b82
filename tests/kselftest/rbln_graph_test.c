// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_graph_test - GRAPH_EXEC through the real driver: Definitions the
 * card refuses, and what user space learns about why.
 *
 * Pins, for a card of firmware-iface 1.4: a valid two-node Definition (a
 * copy into execution storage and out again) runs; each malformed one --
 * an object header framing another graph's image (same bytes, other
 * full_key), definition_bytes smaller or larger than the image, a section
 * outside the image or misaligned, a relocation reaching out of its
 * boundary tensor into the neighbouring valid Definition of the same
 * block, a cycle, a boundary count or a binding that does not match the
 * image -- fails its job with -EINVAL, and DRM_IOCTL_RBLN_WAIT names the
 * check (job_detail, RBLN_FW_GRAPH_E_*) and where (job_detail_arg); the
 * neighbour's bytes are untouched and the card runs the valid graph
 * afterwards.  The detail is read by seqno, through a syncobj, and after
 * an io_uring SUBMIT's CQE (which has no room for it); a node that faults
 * while the graph runs is named beside -EFAULT; jobs without a detail
 * read 0; WAIT refuses a non-zero detail on input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <drm/rbln_accel.h>
#include <rbln_fw_graph.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_sub_ksft.h"

#define MAX_NODES	4
#define MAX_BOUNDS	2
#define ELEMS		256		/* fp32 elements of each tensor */
#define TBYTES		(ELEMS * 4)
#define NEIGHBOUR	8192		/* offset of object B in the block */
#define KEY_A		0x5eed0000000000a1ull
#define KEY_B		0x5eed0000000000b2ull

/* A Definition as the test describes it, before it is laid out. */
struct gdef {
	unsigned int nodes;
	struct rbln_fw_graph_node node[MAX_NODES];
	unsigned int nfanin[MAX_NODES];
	__u16 fanin[MAX_NODES][MAX_NODES];
	unsigned int bounds;
	struct rbln_fw_graph_tensor bound[MAX_BOUNDS];
	__u64 exec_bytes;
};

static __u32 up16(__u32 x)
{
	return (x + 15) & ~15u;
}

static struct rbln_fw_graph_tensor fp32_vector(__u16 direction)
{
	struct rbln_fw_graph_tensor t = {
		.dtype = RBLN_FW_DT_FP32,
		.ndim = 1,
		.direction = direction,
		.bytes = TBYTES,
	};

	t.shape[0] = ELEMS;
	t.stride[0] = 1;
	return t;
}

static struct rbln_fw_graph_reloc reloc(__u32 kind, __u32 index, __u64 off)
{
	struct rbln_fw_graph_reloc r = {
		.kind = kind, .index = index, .offset = off,
	};

	return r;
}

/* Adds a COPY node of TBYTES from @src to @dst; its index. */
static unsigned int add_copy(struct gdef *g, struct rbln_fw_graph_reloc src,
			     struct rbln_fw_graph_reloc dst)
{
	struct rbln_fw_graph_node *n = &g->node[g->nodes];

	memset(n, 0, sizeof(*n));
	n->op = RBLN_FW_PKT_COPY;
	n->pkt.copy.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_COPY, 0,
					  sizeof(struct rbln_fw_pkt_copy));
	n->pkt.copy.size = TBYTES;
	n->reloc[0] = src;
	n->reloc[1] = dst;
	g->nfanin[g->nodes] = 0;
	return g->nodes++;
}

static void add_edge(struct gdef *g, unsigned int consumer, __u16 producer)
{
	g->fanin[consumer][g->nfanin[consumer]++] = producer;
}

/*
 * The step every test starts from: boundary 0 (IN) copied into the
 * execution storage, and from there into boundary 1 (OUT).
 */
static void two_copies(struct gdef *g)
{
	memset(g, 0, sizeof(*g));
	g->bounds = 2;
	g->bound[0] = fp32_vector(RBLN_FW_GRAPH_IN);
	g->bound[1] = fp32_vector(RBLN_FW_GRAPH_OUT);
	g->exec_bytes = TBYTES;
	add_copy(g, reloc(RBLN_FW_GRAPH_RELOC_BOUNDARY, 0, 0),
		 reloc(RBLN_FW_GRAPH_RELOC_EXEC, 0, 0));
	add_copy(g, reloc(RBLN_FW_GRAPH_RELOC_EXEC, 0, 0),
		 reloc(RBLN_FW_GRAPH_RELOC_BOUNDARY, 1, 0));
	add_edge(g, 1, 0);
}

/*
 * Lays @g out as a Definition object with @key at @p: the 32-byte header,
 * then the image (header, nodes, rows, producers, roots, signatures, each
 * section 16-byte aligned).  Returns the object's bytes.
 */
static __u32 write_object(const struct gdef *g, __u64 key, unsigned char *p)
{
	struct rbln_fw_graph_obj obj = { .magic = RBLN_FW_GRAPH_MAGIC };
	struct rbln_fw_graph_image h = {
		.full_key = key,
		.version = RBLN_FW_GRAPH_VERSION,
		.node_count = g->nodes,
		.boundary_count = g->bounds,
		.execution_storage_bytes = g->exec_bytes,
	};
	__u32 rows[MAX_NODES + 1], at;
	__u16 prods[MAX_NODES * MAX_NODES], roots[MAX_NODES];
	unsigned char *img = p + sizeof(obj);
	unsigned int i, j;

	rows[0] = 0;
	for (i = 0; i < g->nodes; i++) {
		for (j = 0; j < g->nfanin[i]; j++)
			prods[h.edge_count++] = g->fanin[i][j];
		rows[i + 1] = h.edge_count;
		if (!g->nfanin[i])
			roots[h.root_count++] = (__u16)i;
	}
	at = sizeof(h);
	h.off[RBLN_FW_GRAPH_SEC_NODES] = at;
	at = up16(at + g->nodes * sizeof(g->node[0]));
	h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS] = at;
	at = up16(at + (g->nodes + 1) * 4);
	h.off[RBLN_FW_GRAPH_SEC_FANIN_PRODS] = at;
	at = up16(at + h.edge_count * 2);
	h.off[RBLN_FW_GRAPH_SEC_ROOTS] = at;
	at = up16(at + h.root_count * 2);
	h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] = at;
	at = up16(at + g->bounds * sizeof(g->bound[0]));
	h.total_bytes = at;

	memset(img, 0, at);
	memcpy(img, &h, sizeof(h));
	memcpy(img + h.off[RBLN_FW_GRAPH_SEC_NODES], g->node,
	       g->nodes * sizeof(g->node[0]));
	memcpy(img + h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS], rows,
	       (g->nodes + 1) * 4);
	memcpy(img + h.off[RBLN_FW_GRAPH_SEC_FANIN_PRODS], prods,
	       h.edge_count * 2);
	memcpy(img + h.off[RBLN_FW_GRAPH_SEC_ROOTS], roots, h.root_count * 2);
	memcpy(img + h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES], g->bound,
	       g->bounds * sizeof(g->bound[0]));
	obj.full_key = key;
	obj.definition_bytes = at;
	memcpy(p, &obj, sizeof(obj));
	return sizeof(obj) + at;
}

/* The image header of the object at @p, to corrupt in place. */
static struct rbln_fw_graph_image *image_of(unsigned char *p)
{
	return (struct rbln_fw_graph_image *)(p + sizeof(struct rbln_fw_graph_obj));
}

static struct rbln_fw_graph_obj *object_at(unsigned char *p)
{
	return (struct rbln_fw_graph_obj *)p;
}

FIXTURE(graph)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev;
	int fd;
	__u32 q;
	struct rbln_cmdbuf cb;
	struct rbln_buf defs;	/* the Definition block: objects A and B */
	struct rbln_buf table;	/* GRAPH_EXEC's boundary table */
	struct rbln_buf src;
	struct rbln_buf dst;
	struct rbln_buf exec;	/* execution storage */
	struct gdef g;
	bool ready;
};

FIXTURE_SETUP(graph)
{
	__u32 minor = 0;
	unsigned int i;

	self->fd = -1;
	if (!rbln_require_nodes(_metadata, self->nodes))
		return;
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, rbln_info_device(self->fd, &self->dev));
	ASSERT_EQ(0, rbln_iface_minor(self->fd, &minor));
	if (minor < 4)
		SKIP(return, "card speaks firmware-iface 1.%u: no GRAPH_EXEC (1.4 needed)",
		     minor);
	self->q = rbln_new_queue(_metadata, self->fd,
				 rbln_all_chiplets(self->dev.chiplet_count));
	ASSERT_EQ(0, rbln_cmd_init(self->fd, &self->cb, 64 * 1024,
				   RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->defs, 64 * 1024,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->table, 4096,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->src, 4096,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->dst, 4096,
				  RBLN_REGION_HOST, 0));
	ASSERT_EQ(0, rbln_buf_new(self->fd, &self->exec, 4096,
				  RBLN_REGION_HOST, 0));
	for (i = 0; i < TBYTES; i++)
		self->src.map[i] = (unsigned char)(i * 7 + 3);
	two_copies(&self->g);
	write_object(&self->g, KEY_A, self->defs.map);
	write_object(&self->g, KEY_B, self->defs.map + NEIGHBOUR);
	self->ready = true;
}

FIXTURE_TEARDOWN(graph)
{
	struct rbln_buf *b[] = { &self->defs, &self->table, &self->src,
				 &self->dst, &self->exec };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(b); i++)
		if (b[i]->handle)
			rbln_buf_free(self->fd, b[i]);
	if (self->cb.buf.handle)
		rbln_cmd_fini(self->fd, &self->cb);
	if (self->fd >= 0)
		close(self->fd);
}

/* Binds boundary 0 to src and 1 to @out_va, with the image's signatures. */
static void bind_tensors(struct rbln_buf *table, const struct gdef *g,
			 __u64 in_va, __u64 out_va)
{
	struct rbln_fw_graph_binding *b = (void *)table->map;

	memset(b, 0, 2 * sizeof(*b));
	b[0].va = in_va;
	b[0].tensor = g->bound[0];
	b[1].va = out_va;
	b[1].tensor = g->bound[1];
}

/* Makes the job: one GRAPH_EXEC of the object at @def_off. */
static void graph_exec_job(struct rbln_cmdbuf *cb, const struct rbln_buf *defs,
			   __u32 def_off, const struct rbln_buf *table,
			   __u32 boundary_count, const struct rbln_buf *exec)
{
	struct rbln_fw_pkt_graph_exec p = {
		.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_GRAPH_EXEC, 0, sizeof(p)),
		.boundary_count = boundary_count,
		.definition = defs->va + def_off,
		.boundaries = table->va,
		.exec = exec->va,
		.exec_bytes = TBYTES,
	};

	rbln_cmd_reset(cb);
	rbln_cmd_raw(cb, &p, sizeof(p));
}

/* Submits the current job; its seqno. */
static __u64 submit(struct __test_metadata *_metadata,
		    FIXTURE_DATA(graph) * self, __u32 out_syncobj)
{
	__u32 bos[] = { self->defs.handle, self->table.handle,
			self->src.handle, self->dst.handle, self->exec.handle };
	struct drm_rbln_submit s;
	int err;

	rbln_submit_args(&s, self->q, &self->cb, bos, ARRAY_SIZE(bos));
	s.out_handle = out_syncobj;
	err = rbln_submit_raw(self->fd, &s);
	EXPECT_EQ(0, err) TH_LOG("SUBMIT: %s", strerror(-err));
	return s.seqno;
}

/* WAITs for @seqno; the struct as the kernel left it. */
static struct drm_rbln_wait wait_seqno(struct __test_metadata *_metadata,
				       int fd, __u32 q, __u64 seqno)
{
	struct drm_rbln_wait w = {
		.queue_id = q,
		.seqno = seqno,
		.timeout_ns = rbln_deadline_ms(RBLN_JOB_WAIT_MS),
	};
	int err = rbln_wait_raw(fd, &w);

	EXPECT_EQ(0, err) TH_LOG("WAIT seqno %llu: %s",
				 (unsigned long long)seqno, strerror(-err));
	return w;
}

/*
 * Runs the current job and expects the card to refuse it: -EINVAL with
 * @detail at @arg.
 */
static void expect_refused(struct __test_metadata *_metadata,
			   FIXTURE_DATA(graph) * self, __u32 detail, __u32 arg,
			   const char *what)
{
	struct drm_rbln_wait w;

	w = wait_seqno(_metadata, self->fd, self->q, submit(_metadata, self, 0));
	EXPECT_EQ(-EINVAL, w.job_error)
	TH_LOG("%s: job error %d (%s), want -EINVAL", what, w.job_error,
	       strerror(-w.job_error));
	EXPECT_EQ(detail, w.job_detail)
	TH_LOG("%s: detail %u, want %u", what, w.job_detail, detail);
	EXPECT_EQ(arg, w.job_detail_arg)
	TH_LOG("%s: detail_arg %u, want %u", what, w.job_detail_arg, arg);
}

/*
 * Rewrites object A as valid, runs it and checks dst got src: the card
 * is usable after whatever the test did.
 */
static void expect_valid_runs(struct __test_metadata *_metadata,
			      FIXTURE_DATA(graph) * self, __u32 def_off,
			      const char *what)
{
	struct drm_rbln_wait w;

	two_copies(&self->g);
	if (def_off == 0)
		write_object(&self->g, KEY_A, self->defs.map);
	bind_tensors(&self->table, &self->g, self->src.va, self->dst.va);
	memset(self->dst.map, 0, TBYTES);
	graph_exec_job(&self->cb, &self->defs, def_off, &self->table, 2,
		       &self->exec);
	w = wait_seqno(_metadata, self->fd, self->q, submit(_metadata, self, 0));
	EXPECT_EQ(0, w.job_error) TH_LOG("%s: job error %d (%s)", what,
					 w.job_error, strerror(-w.job_error));
	EXPECT_EQ(0, w.job_detail);
	EXPECT_EQ(0, w.job_detail_arg);
	EXPECT_EQ(0, memcmp(self->src.map, self->dst.map, TBYTES))
	TH_LOG("%s: the graph did not copy src to dst", what);
}

/* Prepares the valid job of object A (the tests then corrupt something). */
static void valid_job(FIXTURE_DATA(graph) * self)
{
	two_copies(&self->g);
	write_object(&self->g, KEY_A, self->defs.map);
	bind_tensors(&self->table, &self->g, self->src.va, self->dst.va);
	graph_exec_job(&self->cb, &self->defs, 0, &self->table, 2, &self->exec);
}

TEST_F(graph, a_valid_definition_runs_through_execution_storage)
{
	if (!self->ready)
		return;
	expect_valid_runs(_metadata, self, 0, "object A");
	expect_valid_runs(_metadata, self, NEIGHBOUR, "object B");
}

TEST_F(graph, a_header_framing_another_graphs_image_is_refused_as_key)
{
	if (!self->ready)
		return;
	valid_job(self);
	/* The same image bytes, under the header key of another graph. */
	object_at(self->defs.map)->full_key = KEY_B;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_KEY, 0, "header key B, image key A");
	expect_valid_runs(_metadata, self, 0, "after the refusal");
}

TEST_F(graph, definition_bytes_other_than_the_images_size_is_refused)
{
	__u32 total;

	if (!self->ready)
		return;
	valid_job(self);
	total = object_at(self->defs.map)->definition_bytes;
	object_at(self->defs.map)->definition_bytes = total - 16;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_TOTAL_BYTES, 0,
		       "definition_bytes 16 below total_bytes");
	object_at(self->defs.map)->definition_bytes = total + 16;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_TOTAL_BYTES, 0,
		       "definition_bytes 16 above total_bytes");
	object_at(self->defs.map)->definition_bytes = total + 8;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_OBJ_BYTES, 0,
		       "definition_bytes not a multiple of 16");
	expect_valid_runs(_metadata, self, 0, "after the refusals");
}

TEST_F(graph, a_section_outside_the_image_or_misaligned_is_refused_naming_it)
{
	struct rbln_fw_graph_image *h;

	if (!self->ready)
		return;
	valid_job(self);
	h = image_of(self->defs.map);
	h->off[RBLN_FW_GRAPH_SEC_ROOTS] = h->total_bytes;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_SECTION,
		       RBLN_FW_GRAPH_SEC_ROOTS, "roots past the image");
	valid_job(self);
	h->off[RBLN_FW_GRAPH_SEC_NODES] = 16;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_SECTION,
		       RBLN_FW_GRAPH_SEC_NODES, "nodes inside the image header");
	valid_job(self);
	h->off[RBLN_FW_GRAPH_SEC_FANIN_ROWS] += 2;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_ALIGN,
		       RBLN_FW_GRAPH_SEC_FANIN_ROWS, "rows at 2 mod 4");
	expect_valid_runs(_metadata, self, 0, "after the refusals");
}

TEST_F(graph, a_relocation_into_the_neighbouring_definition_is_refused)
{
	unsigned char saved[NEIGHBOUR];
	__u32 b_bytes;

	if (!self->ready)
		return;
	b_bytes = sizeof(struct rbln_fw_graph_obj) +
		  object_at(self->defs.map + NEIGHBOUR)->definition_bytes;
	ASSERT_LE(b_bytes, sizeof(saved));
	memcpy(saved, self->defs.map + NEIGHBOUR, b_bytes);
	/*
	 * Boundary 1 is bound to the block's bytes just before object B,
	 * and node 1 writes one tensor past it: straight into object B.
	 */
	valid_job(self);
	self->g.node[1].reloc[1].offset = TBYTES;
	write_object(&self->g, KEY_A, self->defs.map);
	bind_tensors(&self->table, &self->g, self->src.va,
		     self->defs.va + NEIGHBOUR - TBYTES);
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_RELOC_RANGE, 1,
		       "node 1 writing past boundary 1 into object B");
	EXPECT_EQ(0, memcmp(saved, self->defs.map + NEIGHBOUR, b_bytes))
	TH_LOG("object B changed");
	expect_valid_runs(_metadata, self, NEIGHBOUR, "object B afterwards");
}

TEST_F(graph, a_cycle_is_refused_naming_the_consumer)
{
	struct gdef *g = &self->g;

	if (!self->ready)
		return;
	/* 0 -> 2 -> 1, but node 1 names node 2 (a later node) as producer. */
	two_copies(g);
	g->nfanin[1] = 0;
	add_copy(g, reloc(RBLN_FW_GRAPH_RELOC_EXEC, 0, 0),
		 reloc(RBLN_FW_GRAPH_RELOC_BOUNDARY, 1, 0));
	add_edge(g, 2, 0);
	add_edge(g, 1, 2);
	write_object(g, KEY_A, self->defs.map);
	bind_tensors(&self->table, g, self->src.va, self->dst.va);
	graph_exec_job(&self->cb, &self->defs, 0, &self->table, 2, &self->exec);
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_CYCLE, 1,
		       "node 1 after node 2");
	expect_valid_runs(_metadata, self, 0, "after the refusal");
}

TEST_F(graph, a_boundary_count_or_binding_unlike_the_image_is_refused)
{
	struct rbln_fw_graph_binding *b = (void *)self->table.map;

	if (!self->ready)
		return;
	valid_job(self);
	graph_exec_job(&self->cb, &self->defs, 0, &self->table, 1, &self->exec);
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_BOUNDARY_COUNT, 2,
		       "one binding for two boundaries");
	valid_job(self);
	b[1].tensor.shape[0] = ELEMS / 2;
	b[1].tensor.bytes = TBYTES / 2;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_BINDING, 1,
		       "boundary 1 bound with half its shape");
	valid_job(self);
	b[0].tensor.direction = RBLN_FW_GRAPH_INOUT;
	expect_refused(_metadata, self, RBLN_FW_GRAPH_E_BINDING, 0,
		       "boundary 0 bound INOUT for IN");
	expect_valid_runs(_metadata, self, 0, "after the refusals");
}

TEST_F(graph, the_detail_is_read_through_a_syncobj_and_after_an_io_uring_cqe)
{
	struct drm_rbln_wait w = { .flags = RBLN_WAIT_SYNCOBJ };
	struct io_uring_sqe *sqe;
	struct drm_rbln_submit s;
	struct io_uring ring;
	__u32 bos[] = { self->defs.handle, self->table.handle,
			self->src.handle, self->dst.handle, self->exec.handle };
	__u32 so = 0;
	__u64 user_data = 0, extra = 0;
	__s32 res = 0;
	int err;

	if (!self->ready)
		return;
	valid_job(self);
	object_at(self->defs.map)->full_key = KEY_B;

	ASSERT_EQ(0, rbln_syncobj_create(self->fd, &so));
	submit(_metadata, self, so);
	w.sync.handle = so;
	w.timeout_ns = rbln_deadline_ms(RBLN_JOB_WAIT_MS);
	ASSERT_EQ(0, rbln_wait_raw(self->fd, &w));
	EXPECT_EQ(-EINVAL, w.job_error);
	EXPECT_EQ(RBLN_FW_GRAPH_E_KEY, w.job_detail) TH_LOG("through the syncobj");
	EXPECT_EQ(0, rbln_syncobj_destroy(self->fd, so));

	err = rbln_uring_init(&ring, 8, 0);
	ASSERT_EQ(0, err) TH_LOG("io_uring SQE128|CQE32: %s", strerror(-err));
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	rbln_submit_args(&s, self->q, &self->cb, bos, ARRAY_SIZE(bos));
	rbln_prep_uring_cmd(sqe, self->fd, RBLN_URING_CMD_SUBMIT, &s, sizeof(s),
			    42, false);
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(0, rbln_uring_reap(&ring, RBLN_JOB_WAIT_MS, &user_data, &res,
				     &extra));
	io_uring_queue_exit(&ring);
	EXPECT_EQ(42, user_data);
	EXPECT_EQ(-EINVAL, res) TH_LOG("the CQE carries the job's error");
	ASSERT_NE(0, extra) TH_LOG("the CQE carries the job's seqno");
	w = wait_seqno(_metadata, self->fd, self->q, extra);
	EXPECT_EQ(-EINVAL, w.job_error);
	EXPECT_EQ(RBLN_FW_GRAPH_E_KEY, w.job_detail)
	TH_LOG("WAIT by the CQE's seqno reads the detail");
	expect_valid_runs(_metadata, self, 0, "after the refusals");
}

TEST_F(graph, jobs_without_a_detail_read_zero_and_wait_refuses_one_on_input)
{
	struct drm_rbln_wait w;
	__u64 seqno;

	if (!self->ready)
		return;
	/* A bad packet outside any graph: -EINVAL, nothing more to say. */
	rbln_cmd_reset(&self->cb);
	rbln_cmd_nop(&self->cb, 8);
	*(__u32 *)(self->cb.buf.map + self->cb.start) =
		RBLN_FW_PKT_HDR(0x3f, 0, 8);
	seqno = submit(_metadata, self, 0);
	w = wait_seqno(_metadata, self->fd, self->q, seqno);
	EXPECT_EQ(-EINVAL, w.job_error);
	EXPECT_EQ(0, w.job_detail);
	EXPECT_EQ(0, w.job_detail_arg);

	w = (struct drm_rbln_wait){ .queue_id = self->q, .seqno = seqno,
				    .job_detail = RBLN_FW_GRAPH_E_KEY };
	EXPECT_EQ(-EINVAL, rbln_wait_raw(self->fd, &w)) TH_LOG("job_detail in");
	w = (struct drm_rbln_wait){ .queue_id = self->q, .seqno = seqno,
				    .job_detail_arg = 1 };
	EXPECT_EQ(-EINVAL, rbln_wait_raw(self->fd, &w)) TH_LOG("job_detail_arg in");
	expect_valid_runs(_metadata, self, 0, "after the bad packet");
}

/* Last: the fault stops this file's later jobs (another file goes on). */
TEST_F(graph, a_node_that_faults_while_the_graph_runs_is_named_beside_efault)
{
	struct drm_rbln_wait w;

	if (!self->ready)
		return;
	valid_job(self);
	/* Boundary 1 at a VA nothing is mapped at: node 1 faults. */
	bind_tensors(&self->table, &self->g, self->src.va, 1ull << 46);
	w = wait_seqno(_metadata, self->fd, self->q, submit(_metadata, self, 0));
	EXPECT_EQ(-EFAULT, w.job_error);
	EXPECT_EQ(RBLN_FW_GRAPH_E_IN_NODE, w.job_detail);
	EXPECT_EQ(1, w.job_detail_arg) TH_LOG("node 1 faulted");
}

TEST_HARNESS_MAIN
