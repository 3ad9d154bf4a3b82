// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_prime_test - buffers shared through dma-bufs (PRIME) are the same
 * memory for every holder, and live as long as the last one.
 *
 * Pins: host and HBM buffers exported (DRM_IOCTL_PRIME_HANDLE_TO_FD) and
 * imported on a second open file of the card get a VA in the importer's
 * VM, and the bytes are the same through both VAs (card, vm_access),
 * through both CPU mappings and through an mmap of the dma-buf; either
 * side may close first and the other keeps the memory, which is freed
 * after the last holder; a userptr buffer cannot be exported (-EINVAL); a
 * host buffer of card 0 imported on card 1 (two-card VM) is reached by
 * card 1 (an HBM one needs a peer-to-peer importer: -EOPNOTSUPP or a
 * working import); a foreign dma-buf (udmabuf of a sealed memfd) is read
 * and written by the card and counted in fdinfo drm-total-memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_mem_ksft.h"

FIXTURE(prime)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int count;
	int vfd[RBLN_MAX_TEST_CARDS];
	struct drm_rbln_info_device dev[RBLN_MAX_TEST_CARDS];
	long pg;
};

FIXTURE_SETUP(prime)
{
	self->pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		self->vfd[i] = -1;
	self->count = rbln_require_nodes(_metadata, self->nodes);
	if (self->count && !rbln_require_root(_metadata)) {
		self->count = 0;
		return;
	}
	for (int i = 0; i < self->count; i++) {
		int fd = rbln_open_minor(self->nodes[i].minor);

		ASSERT_LE(0, fd);
		ASSERT_EQ(0, rbln_info_device(fd, &self->dev[i]));
		close(fd);
		self->vfd[i] = rbln_require_vm_access(_metadata,
						      self->nodes[i].bdf);
		if (self->vfd[i] < 0) {
			self->count = 0;
			return;
		}
	}
}

FIXTURE_TEARDOWN(prime)
{
	for (int i = 0; i < RBLN_MAX_TEST_CARDS; i++)
		if (self->vfd[i] >= 0)
			close(self->vfd[i]);
}

struct client {
	int fd;
	struct drm_rbln_info_vm vm;
};

static void open_client(struct __test_metadata *_metadata,
			const struct rbln_node *node, struct client *c)
{
	c->fd = rbln_open_minor(node->minor);
	ASSERT_LE(0, c->fd);
	ASSERT_EQ(0, rbln_info_vm(c->fd, &c->vm));
}

/* A buffer of kind @k (0: host, 1..n: HBM of chiplet k - 1), CPU-filled. */
static void make_filled(struct __test_metadata *_metadata, int fd, __u32 k,
			size_t size, __u32 seed, struct drm_rbln_bo_create *c,
			void **map)
{
	ASSERT_EQ(0, rbln_bo_create(fd, size,
				    k ? RBLN_REGION_HBM : RBLN_REGION_HOST,
				    k ? k - 1 : 0, 0, c));
	ASSERT_EQ(0, rbln_bo_mmap(fd, c->handle, c->size,
				  PROT_READ | PROT_WRITE, map));
	rbln_pattern_fill(*map, c->size, seed, 0);
	rbln_cpu_flush();
}

/* @len bytes of a CPU mapping of @fd at @off hold pattern @seed. */
static void expect_mapping_holds(struct __test_metadata *_metadata, int fd,
				 __u64 off, size_t len, __u32 seed,
				 const char *what)
{
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);

	ASSERT_NE(MAP_FAILED, map) TH_LOG("%s: mmap: %s", what, strerror(errno));
	EXPECT_EQ(-1, rbln_pattern_check(map, len, seed, 0)) TH_LOG("%s", what);
	munmap(map, len);
}

TEST_F(prime, host_and_hbm_buffers_shared_with_a_second_file)
{
	for (int i = 0; i < self->count; i++)
		for (__u32 k = 0; k <= self->dev[i].chiplet_count; k++) {
			struct client a, b;
			struct drm_rbln_bo_create c;
			struct drm_rbln_bo_info ib;
			__u32 hb, again;
			char what[48];
			int dmabuf;
			void *map;

			snprintf(what, sizeof(what), "card %d %s", i,
				 k ? "HBM" : "host");
			open_client(_metadata, &self->nodes[i], &a);
			open_client(_metadata, &self->nodes[i], &b);
			make_filled(_metadata, a.fd, k, 3 * self->pg, 5 + k, &c,
				    &map);
			ASSERT_EQ(0, rbln_prime_export(a.fd, c.handle, &dmabuf))
			TH_LOG("%s: export", what);
			ASSERT_EQ(0, rbln_prime_import(b.fd, dmabuf, &hb))
			TH_LOG("%s: import", what);
			ASSERT_EQ(0, rbln_prime_import(b.fd, dmabuf, &again));
			EXPECT_EQ(hb, again) TH_LOG("one buffer, one handle");

			ASSERT_EQ(0, rbln_bo_info(b.fd, hb, &ib));
			EXPECT_EQ(c.size, ib.size);
			if (k) {
				/* the same buffer on the same card */
				EXPECT_EQ(RBLN_REGION_HBM, ib.region);
				EXPECT_EQ(k - 1, ib.chiplet);
			} else {
				EXPECT_TRUE(ib.region == RBLN_REGION_HOST ||
					    ib.region == RBLN_REGION_IMPORT)
				TH_LOG("region %u", ib.region);
			}
			EXPECT_TRUE(rbln_va_in(ib.device_va, ib.size,
					       b.vm.va_start, b.vm.va_end));

			/* A's bytes through B's VA */
			rbln_expect_card_sees(_metadata, self->vfd[i],
					      b.vm.asid, ib.device_va, c.size,
					      5 + k, 0, what);
			/* B's card write through A's VA and mapping */
			rbln_card_writes(_metadata, self->vfd[i], b.vm.asid,
					 ib.device_va, c.size, 15 + k, 0, what);
			EXPECT_EQ(-1, rbln_pattern_check(map, c.size, 15 + k, 0))
			TH_LOG("%s: A's mapping after B's card write", what);
			rbln_expect_card_sees(_metadata, self->vfd[i],
					      a.vm.asid, c.device_va, c.size,
					      15 + k, 0, what);
			/* B's own CPU mapping, and the dma-buf's */
			if (ib.mmap_offset)
				expect_mapping_holds(_metadata, b.fd,
						     ib.mmap_offset, c.size,
						     15 + k, what);
			expect_mapping_holds(_metadata, dmabuf, 0, c.size,
					     15 + k, what);
			rbln_expect_no_fault(_metadata, a.fd, what);
			rbln_expect_no_fault(_metadata, b.fd, what);
			munmap(map, c.size);
			close(dmabuf);
			close(a.fd);
			close(b.fd);
		}
}

/* HBM used on @ch and host bytes of card @fd. */
static void usage(struct __test_metadata *_metadata, int fd, __u32 ch,
		  __u64 *hbm, __u64 *host)
{
	struct drm_rbln_info_mem m;

	ASSERT_EQ(0, rbln_info_mem(fd, &m));
	*hbm = m.chiplet[ch].used_bytes;
	*host = m.host_bytes;
}

/*
 * Exporter A and importer B; @exporter_first: A lets go of everything
 * (handle, dma-buf, file) first, else B does.  The other keeps the bytes;
 * after both the memory is free.
 */
static void close_order(struct __test_metadata *_metadata,
			const struct rbln_node *node, int vfd, __u32 k,
			bool exporter_first, int watch)
{
	long pg = sysconf(_SC_PAGESIZE);
	__u64 hbm0, host0, hbm1, host1;
	struct drm_rbln_bo_create c;
	struct drm_rbln_bo_info ib;
	struct client a, b;
	int dmabuf;
	__u32 hb;
	void *map;

	usage(_metadata, watch, k ? k - 1 : 0, &hbm0, &host0);
	open_client(_metadata, node, &a);
	open_client(_metadata, node, &b);
	make_filled(_metadata, a.fd, k, 4 * pg, 44, &c, &map);
	munmap(map, c.size);
	ASSERT_EQ(0, rbln_prime_export(a.fd, c.handle, &dmabuf));
	ASSERT_EQ(0, rbln_prime_import(b.fd, dmabuf, &hb));
	ASSERT_EQ(0, rbln_bo_info(b.fd, hb, &ib));
	close(dmabuf);
	if (exporter_first) {
		ASSERT_EQ(0, rbln_gem_close(a.fd, c.handle));
		close(a.fd);
		rbln_expect_card_sees(_metadata, vfd, b.vm.asid, ib.device_va,
				      c.size, 44, 0, "importer left alone");
		rbln_card_writes(_metadata, vfd, b.vm.asid, ib.device_va,
				 c.size, 45, 0, "importer left alone");
		rbln_expect_card_sees(_metadata, vfd, b.vm.asid, ib.device_va,
				      c.size, 45, 0, "importer left alone");
		usage(_metadata, watch, k ? k - 1 : 0, &hbm1, &host1);
		EXPECT_EQ(hbm0 + (k ? c.size : 0), hbm1);
		EXPECT_EQ(host0 + (k ? 0 : c.size), host1);
		ASSERT_EQ(0, rbln_gem_close(b.fd, hb));
		close(b.fd);
	} else {
		ASSERT_EQ(0, rbln_gem_close(b.fd, hb));
		close(b.fd);
		rbln_expect_card_sees(_metadata, vfd, a.vm.asid, c.device_va,
				      c.size, 44, 0, "exporter left alone");
		usage(_metadata, watch, k ? k - 1 : 0, &hbm1, &host1);
		EXPECT_EQ(hbm0 + (k ? c.size : 0), hbm1);
		EXPECT_EQ(host0 + (k ? 0 : c.size), host1);
		ASSERT_EQ(0, rbln_gem_close(a.fd, c.handle));
		close(a.fd);
	}
	usage(_metadata, watch, k ? k - 1 : 0, &hbm1, &host1);
	EXPECT_EQ(hbm0, hbm1) TH_LOG("HBM not freed after the last holder");
	EXPECT_EQ(host0, host1) TH_LOG("host not freed after the last holder");
}

TEST_F(prime, exporter_may_close_first)
{
	for (int i = 0; i < self->count; i++) {
		int watch = rbln_open_minor(self->nodes[i].minor);

		ASSERT_LE(0, watch);
		for (__u32 k = 0; k <= self->dev[i].chiplet_count; k++)
			close_order(_metadata, &self->nodes[i], self->vfd[i], k,
				    true, watch);
		close(watch);
	}
}

TEST_F(prime, importer_may_close_first)
{
	for (int i = 0; i < self->count; i++) {
		int watch = rbln_open_minor(self->nodes[i].minor);

		ASSERT_LE(0, watch);
		for (__u32 k = 0; k <= self->dev[i].chiplet_count; k++)
			close_order(_metadata, &self->nodes[i], self->vfd[i], k,
				    false, watch);
		close(watch);
	}
}

TEST_F(prime, userptr_buffer_cannot_be_exported)
{
	for (int i = 0; i < self->count; i++) {
		struct drm_rbln_bo_userptr up;
		int fd = rbln_open_minor(self->nodes[i].minor);
		void *mem = mmap(NULL, 2 * self->pg, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
				 0);
		int dmabuf;

		ASSERT_LE(0, fd);
		ASSERT_NE(MAP_FAILED, mem);
		ASSERT_EQ(0, rbln_bo_userptr(fd, mem, 2 * self->pg, 0, &up));
		EXPECT_EQ(-EINVAL, rbln_prime_export(fd, up.handle, &dmabuf));
		if (dmabuf >= 0)
			close(dmabuf);
		close(fd);
		munmap(mem, 2 * self->pg);
	}
}

TEST_F(prime, import_of_something_that_is_no_dma_buf_fails)
{
	for (int i = 0; i < self->count; i++) {
		int fd = rbln_open_minor(self->nodes[i].minor);
		int memfd = memfd_create("not-a-dmabuf", MFD_CLOEXEC);
		__u32 h;

		ASSERT_LE(0, fd);
		ASSERT_LE(0, memfd);
		EXPECT_EQ(-EINVAL, rbln_prime_import(fd, memfd, &h));
		EXPECT_EQ(-EINVAL, rbln_prime_import(fd, fd, &h));
		EXPECT_EQ(-EBADF, rbln_prime_import(fd, 999, &h));
		close(memfd);
		close(fd);
	}
}

TEST_F(prime, host_buffer_of_card_0_is_reached_by_card_1)
{
	struct client a, b;
	struct drm_rbln_bo_create c;
	struct drm_rbln_bo_info ib;
	__u64 total;
	int dmabuf;
	void *map;
	__u32 hb;

	if (self->count < 2)
		SKIP(return, "needs two cards (the VM has %d): run with --cards 2",
		     self->count);
	open_client(_metadata, &self->nodes[0], &a);
	open_client(_metadata, &self->nodes[1], &b);
	make_filled(_metadata, a.fd, 0, 5 * self->pg, 61, &c, &map);
	ASSERT_EQ(0, rbln_prime_export(a.fd, c.handle, &dmabuf));
	ASSERT_EQ(0, rbln_prime_import(b.fd, dmabuf, &hb));
	ASSERT_EQ(0, rbln_bo_info(b.fd, hb, &ib));
	EXPECT_EQ(RBLN_REGION_IMPORT, ib.region);
	EXPECT_EQ(c.size, ib.size);
	EXPECT_EQ(0, ib.mmap_offset) TH_LOG("imports are mapped via the dma-buf");
	EXPECT_TRUE(rbln_va_in(ib.device_va, ib.size, b.vm.va_start,
			       b.vm.va_end));
	ASSERT_EQ(0, rbln_fdinfo_size(b.fd, "drm-total-memory", &total));
	EXPECT_EQ(c.size, total) TH_LOG("card 1 client: the import");

	rbln_expect_card_sees(_metadata, self->vfd[1], b.vm.asid, ib.device_va,
			      c.size, 61, 0, "card 1");
	rbln_card_writes(_metadata, self->vfd[1], b.vm.asid, ib.device_va,
			 c.size, 62, 0, "card 1");
	EXPECT_EQ(-1, rbln_pattern_check(map, c.size, 62, 0))
	TH_LOG("card 0's mapping after card 1 wrote");
	rbln_expect_card_sees(_metadata, self->vfd[0], a.vm.asid, c.device_va,
			      c.size, 62, 0, "card 0");
	/* the exporter goes away first; card 1 keeps the memory */
	munmap(map, c.size);
	close(dmabuf);
	close(a.fd);
	rbln_expect_card_sees(_metadata, self->vfd[1], b.vm.asid, ib.device_va,
			      c.size, 62, 0, "card 1 alone");
	rbln_expect_no_fault(_metadata, b.fd, "card 1");
	close(b.fd);
}

TEST_F(prime, hbm_buffer_of_card_0_needs_a_peer_to_peer_importer)
{
	struct client a, b;
	struct drm_rbln_bo_create c;
	struct drm_rbln_bo_info ib;
	int dmabuf, err;
	void *map;
	__u32 hb;

	if (self->count < 2)
		SKIP(return, "needs two cards (the VM has %d): run with --cards 2",
		     self->count);
	open_client(_metadata, &self->nodes[0], &a);
	open_client(_metadata, &self->nodes[1], &b);
	make_filled(_metadata, a.fd, 1, 2 * self->pg, 63, &c, &map);
	ASSERT_EQ(0, rbln_prime_export(a.fd, c.handle, &dmabuf));
	err = rbln_prime_import(b.fd, dmabuf, &hb);
	TH_LOG("card 1 importing card 0's HBM: %s",
	       err ? strerror(-err) : "imported");
	if (err) {
		EXPECT_EQ(-EOPNOTSUPP, err);
	} else {
		ASSERT_EQ(0, rbln_bo_info(b.fd, hb, &ib));
		rbln_expect_card_sees(_metadata, self->vfd[1], b.vm.asid,
				      ib.device_va, c.size, 63, 0,
				      "card 1 reading card 0's HBM");
	}
	munmap(map, c.size);
	close(dmabuf);
	close(a.fd);
	close(b.fd);
}

/* A udmabuf of a sealed memfd of @len bytes; the memfd's mapping in @map. */
static int make_udmabuf(struct __test_metadata *_metadata, size_t len,
			void **map)
{
	struct udmabuf_create req = { .flags = UDMABUF_FLAGS_CLOEXEC,
				      .size = len };
	int memfd = memfd_create("rbln-ksft", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	int dev, buf;

	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, (off_t)len));
	ASSERT_EQ(0, fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK));
	*map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, *map);
	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, dev) TH_LOG("/dev/udmabuf: %s", strerror(errno));
	req.memfd = (__u32)memfd;
	buf = ioctl(dev, UDMABUF_CREATE, &req);
	ASSERT_LE(0, buf) TH_LOG("UDMABUF_CREATE: %s", strerror(errno));
	close(dev);
	close(memfd);
	return buf;
}

static bool have_udmabuf(void)
{
	if (access("/dev/udmabuf", F_OK) == 0)
		return true;
	rbln_modprobe("udmabuf");
	return access("/dev/udmabuf", F_OK) == 0;
}

TEST_F(prime, foreign_dma_buf_of_user_memory_is_used_by_the_card)
{
	if (self->count && !have_udmabuf())
		SKIP(return, "no /dev/udmabuf (CONFIG_UDMABUF; modprobe udmabuf failed)");
	for (int i = 0; i < self->count; i++) {
		size_t len = 6 * self->pg;
		struct drm_rbln_bo_info ib;
		struct client b;
		__u64 before, after;
		void *map;
		int dmabuf = make_udmabuf(_metadata, len, &map);
		__u32 hb;

		rbln_pattern_fill(map, len, 71, 0);
		open_client(_metadata, &self->nodes[i], &b);
		ASSERT_EQ(0, rbln_fdinfo_size(b.fd, "drm-total-memory",
					      &before));
		ASSERT_EQ(0, rbln_prime_import(b.fd, dmabuf, &hb))
		TH_LOG("import of a udmabuf");
		close(dmabuf);
		ASSERT_EQ(0, rbln_bo_info(b.fd, hb, &ib));
		EXPECT_EQ(RBLN_REGION_IMPORT, ib.region);
		EXPECT_EQ(len, ib.size);
		EXPECT_EQ(0, ib.mmap_offset);
		EXPECT_EQ(0, ib.chiplet);
		ASSERT_EQ(0, rbln_fdinfo_size(b.fd, "drm-total-memory",
					      &after));
		EXPECT_EQ(before + len, after);

		rbln_expect_card_sees(_metadata, self->vfd[i], b.vm.asid,
				      ib.device_va, len, 71, 0, "udmabuf");
		rbln_expect_card_sees(_metadata, self->vfd[i], b.vm.asid,
				      ib.device_va + self->pg - 10, 20, 71,
				      self->pg - 10, "udmabuf, across pages");
		rbln_card_writes(_metadata, self->vfd[i], b.vm.asid,
				 ib.device_va, len, 72, 0, "udmabuf");
		EXPECT_EQ(-1, rbln_pattern_check(map, len, 72, 0))
		TH_LOG("the memfd after the card wrote");
		rbln_expect_no_fault(_metadata, b.fd, "udmabuf");
		ASSERT_EQ(0, rbln_gem_close(b.fd, hb));
		ASSERT_EQ(0, rbln_fdinfo_size(b.fd, "drm-total-memory",
					      &after));
		EXPECT_EQ(before, after);
		munmap(map, len);
		close(b.fd);
	}
}

TEST_HARNESS_MAIN
