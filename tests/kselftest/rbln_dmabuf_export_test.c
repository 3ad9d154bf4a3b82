// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_dmabuf_export_test - rbln buffers exported as dma-bufs, taken by an
 * importer the way an RDMA NIC's driver takes them (ib_umem_dmabuf behind
 * ibv_reg_dmabuf_mr): a dynamic attachment, a DMA mapping under the
 * reservation lock, a kernel mapping (vmap), detach.
 *
 * The importer is the test module tests/dmabuf-importer (Debian's 6.12 has
 * neither PCI P2PDMA nor a soft-RoCE that takes dma-buf memory regions);
 * `make test` loads it and sets RBLN_DMABUF_IMPORTER=1, without which a
 * missing module skips these tests.
 *
 * Pins: an HBM buffer maps for a peer-to-peer importer at bus addresses
 * inside the card's HBM BAR (no IOMMU in the VM: bus address = BAR
 * address), its segments add up to its size, and its vmap shows the bytes
 * written through its mmap -- for a buffer of one buddy block and one of
 * several (on a kernel without CONFIG_VMAP_PFN, such as the debug tier's,
 * the latter is exported without vmap: dma_buf_vmap() gives -EINVAL); an
 * importer that cannot take peer-to-peer memory is refused
 * with -EOPNOTSUPP at attach; a host buffer maps (dma_map_sgtable) and
 * vmaps for any importer; and the checker itself fails on a wrong size or
 * wrong bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <drm/rbln_accel.h>

#include "kselftest_harness.h"
#include "rbln_ksft.h"
#include "rbln_sub_ksft.h"

#define IMPORTER "/sys/kernel/debug/rbln_dmabuf_importer/"

FIXTURE(exp)
{
	struct rbln_node nodes[RBLN_MAX_TEST_CARDS];
	int fd;
	unsigned long long bar_lo, bar_hi;	/* BAR2: the card's HBM */
	bool ready;
};

/* [lo, hi) of BAR @bar of the PCI function @bdf, from sysfs. */
static int bar_range(const char *bdf, int bar, unsigned long long *lo,
		     unsigned long long *hi)
{
	unsigned long long start = 0, end = 0, flags;
	char path[128];
	FILE *f;
	int i, ret = -ENOENT;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource", bdf);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	for (i = 0; i <= bar; i++)
		if (fscanf(f, "%llx %llx %llx", &start, &end, &flags) != 3)
			break;
	if (i > bar && end > start) {
		*lo = start;
		*hi = end + 1;
		ret = 0;
	}
	fclose(f);
	return ret;
}

FIXTURE_SETUP(exp)
{
	self->fd = -1;
	if (!rbln_require_nodes(_metadata, self->nodes))
		return;
	if (access(IMPORTER "check", W_OK) != 0) {
		ASSERT_EQ(NULL, getenv("RBLN_DMABUF_IMPORTER"))
		TH_LOG("RBLN_DMABUF_IMPORTER is set but %scheck is missing: %s",
		       IMPORTER, strerror(errno));
		SKIP(return, "no test importer (insmod tests/dmabuf-importer's module)");
	}
	self->fd = rbln_open_minor(self->nodes[0].minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, bar_range(self->nodes[0].bdf, 2, &self->bar_lo,
			       &self->bar_hi));
	self->ready = true;
}

FIXTURE_TEARDOWN(exp)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* A buffer of @size in @region, filled (all of it) with the importer's pattern. */
static void make_buffer(struct __test_metadata *_metadata, int fd,
			struct rbln_buf *b, __u64 size, __u32 region,
			unsigned int seed)
{
	__u64 i;

	ASSERT_EQ(0, rbln_buf_new(fd, b, size, region, 0));
	for (i = 0; i < b->size; i++)
		b->map[i] = (unsigned char)(i * 7 + seed);
	__sync_synchronize();	/* out of the write-combining buffers */
}

static int export_fd(int fd, __u32 handle)
{
	int dfd = -1;
	int err = rbln_prime_export(fd, handle, &dfd);

	return err ? err : dfd;
}

/*
 * Hands dma-buf @dfd to the importer; 0 when every check passed, else
 * the -errno of the step that failed (the kernel log says more).
 */
static int importer_check(int dfd, __u64 size, bool p2p, unsigned int seed,
			  unsigned long long lo, unsigned long long hi)
{
	char cmd[256];
	ssize_t n;
	int f, len;

	len = snprintf(cmd, sizeof(cmd), "fd=%d size=%llu p2p=%d seed=%u",
		       dfd, (unsigned long long)size, p2p, seed);
	if (hi)
		len += snprintf(cmd + len, sizeof(cmd) - len,
				" lo=%#llx hi=%#llx", lo, hi);
	f = open(IMPORTER "check", O_WRONLY);
	if (f < 0)
		return -errno;
	n = write(f, cmd, len);
	if (n < 0)
		n = -errno;
	close(f);
	return n == len ? 0 : (int)n;
}

static bool have_vmap_pfn(void)
{
	char buf[8] = "";
	FILE *f = fopen(IMPORTER "vmap_pfn", "r");

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return buf[0] == '1';
}

TEST_F(exp, an_hbm_buffer_maps_inside_the_bar_for_a_peer_to_peer_importer)
{
	struct rbln_buf b = { 0 };
	int dfd, err;

	if (!self->ready)
		return;
	make_buffer(_metadata, self->fd, &b, 1 << 20, RBLN_REGION_HBM, 5);
	dfd = export_fd(self->fd, b.handle);
	ASSERT_LE(0, dfd) TH_LOG("PRIME export: %s", strerror(-dfd));
	err = importer_check(dfd, b.size, true, 5, self->bar_lo, self->bar_hi);
	EXPECT_EQ(0, err) TH_LOG("importer: %s (see the kernel log)",
				 strerror(-err));
	close(dfd);
	rbln_buf_free(self->fd, &b);
}

TEST_F(exp, an_hbm_buffer_of_several_blocks_maps_and_vmaps_whole)
{
	struct rbln_buf b = { 0 };
	int dfd, err;

	if (!self->ready)
		return;
	/* 6 MiB: a 4 MiB and a 2 MiB block of the buddy allocator. */
	make_buffer(_metadata, self->fd, &b, 6 << 20, RBLN_REGION_HBM, 9);
	dfd = export_fd(self->fd, b.handle);
	ASSERT_LE(0, dfd);
	err = importer_check(dfd, b.size, true, 9, self->bar_lo, self->bar_hi);
	if (err == -EINVAL && !have_vmap_pfn())
		TH_LOG("no CONFIG_VMAP_PFN: several blocks have no vmap (documented)");
	else
		EXPECT_EQ(0, err) TH_LOG("importer: %s", strerror(-err));
	close(dfd);
	rbln_buf_free(self->fd, &b);
}

TEST_F(exp, an_hbm_buffer_refuses_an_importer_without_peer_to_peer)
{
	struct rbln_buf b = { 0 };
	int dfd;

	if (!self->ready)
		return;
	make_buffer(_metadata, self->fd, &b, 1 << 20, RBLN_REGION_HBM, 1);
	dfd = export_fd(self->fd, b.handle);
	ASSERT_LE(0, dfd);
	EXPECT_EQ(-EOPNOTSUPP, importer_check(dfd, b.size, false, 1, 0, 0));
	close(dfd);
	rbln_buf_free(self->fd, &b);
}

TEST_F(exp, a_host_buffer_maps_and_vmaps_for_any_importer)
{
	struct rbln_buf b = { 0 };
	int dfd, err;

	if (!self->ready)
		return;
	make_buffer(_metadata, self->fd, &b, 1 << 20, RBLN_REGION_HOST, 3);
	dfd = export_fd(self->fd, b.handle);
	ASSERT_LE(0, dfd);
	err = importer_check(dfd, b.size, false, 3, 0, 0);
	EXPECT_EQ(0, err) TH_LOG("without peer-to-peer: %s", strerror(-err));
	err = importer_check(dfd, b.size, true, 3, 0, 0);
	EXPECT_EQ(0, err) TH_LOG("with peer-to-peer: %s", strerror(-err));
	close(dfd);
	rbln_buf_free(self->fd, &b);
}

TEST_F(exp, the_importer_fails_on_a_wrong_size_range_or_content)
{
	struct rbln_buf b = { 0 };
	int dfd;

	if (!self->ready)
		return;
	make_buffer(_metadata, self->fd, &b, 1 << 20, RBLN_REGION_HBM, 7);
	dfd = export_fd(self->fd, b.handle);
	ASSERT_LE(0, dfd);
	EXPECT_EQ(-EMSGSIZE, importer_check(dfd, b.size + 4096, true, 7,
					    self->bar_lo, self->bar_hi));
	EXPECT_EQ(-ERANGE, importer_check(dfd, b.size, true, 7, self->bar_hi,
					  self->bar_hi + (1 << 30)));
	EXPECT_EQ(-EILSEQ, importer_check(dfd, b.size, true, 8, self->bar_lo,
					  self->bar_hi));
	close(dfd);
	rbln_buf_free(self->fd, &b);
}

TEST_HARNESS_MAIN
