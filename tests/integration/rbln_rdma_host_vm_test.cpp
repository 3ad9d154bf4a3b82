// SPDX-License-Identifier: GPL-2.0
// RDMA into librbln's host memory, the path gloo/UCX take when the NIC
// cannot read device memory: soft-RoCE (rdma_rxe) in the VM, an RDMA WRITE
// from another process into librbln's pinned host block (rbln_host_alloc),
// then the data copied to the card and back and checked.  Also pins which
// librbln host memory an RDMA NIC can register: pinned blocks (anonymous
// memory pinned as userptr) are ordinary pages; rbln_malloc_host's memory
// is the mmap of a host GEM buffer, a VM_PFNMAP mapping without struct
// pages behind it for get_user_pages, so ibv_reg_mr refuses it (export the
// buffer as a dma-buf instead).
//
// Runs in the VM after tools/scripts/rdma-rxe-setup.sh made rxe0 on a
// dummy netdev (test-vm.sh does); without an RDMA device it skips, unless
// RBLN_RDMA=1 says one must be there.

#include <gtest/gtest.h>

#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rbln/rbln.h"
#include "rbln/rbln_host.h"

namespace {

constexpr std::size_t kBytes = 1 << 20;

std::uint8_t pattern(std::size_t i) {
    return static_cast<std::uint8_t>(i * 13 + 5);
}

// One verbs endpoint: device context, protection domain, CQ and an RC QP.
struct Endpoint {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_gid gid{};
    int gid_index = -1;

    Endpoint() = default;
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;
    Endpoint(Endpoint&&) = delete;
    Endpoint& operator=(Endpoint&&) = delete;
    ~Endpoint() {
        if (qp != nullptr)
            ibv_destroy_qp(qp);
        if (cq != nullptr)
            ibv_destroy_cq(cq);
        if (pd != nullptr)
            ibv_dealloc_pd(pd);
        if (ctx != nullptr)
            ibv_close_device(ctx);
    }

    // Opens the first RDMA device; an empty string on success, else why not.
    std::string open() {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        if (list == nullptr || n == 0) {
            if (list != nullptr)
                ibv_free_device_list(list);
            return "no RDMA device";
        }
        ctx = ibv_open_device(list[0]);
        ibv_free_device_list(list);
        if (ctx == nullptr)
            return std::string("ibv_open_device: ") + std::strerror(errno);
        pd = ibv_alloc_pd(ctx);
        cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
        if (pd == nullptr || cq == nullptr)
            return "ibv_alloc_pd/ibv_create_cq failed";
        ibv_qp_init_attr init{};
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap.max_send_wr = 4;
        init.cap.max_recv_wr = 4;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        qp = ibv_create_qp(pd, &init);
        if (qp == nullptr)
            return std::string("ibv_create_qp: ") + std::strerror(errno);
        // RoCE v2 over IPv4: the IPv4-mapped GID of the netdev's address.
        for (int i = 0; i < 16 && gid_index < 0; i++) {
            ibv_gid g{};
            if (ibv_query_gid(ctx, 1, i, &g) != 0)
                break;
            static constexpr std::array<std::uint8_t, 12> v4mapped{0, 0, 0, 0, 0,    0,
                                                                   0, 0, 0, 0, 0xff, 0xff};
            if (std::memcmp(g.raw, v4mapped.data(), v4mapped.size()) == 0) {
                gid = g;
                gid_index = i;
            }
        }
        if (gid_index < 0)
            return "no IPv4 GID on port 1";
        return {};
    }

    // INIT -> RTR -> RTS, connected to @remote_qpn at @remote_gid.
    std::string connect(std::uint32_t remote_qpn, const ibv_gid& remote_gid) const {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
        if (ibv_modify_qp(
                qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
            return "QP to INIT";
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = remote_qpn;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = remote_gid;
        a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.port_num = 1;
        if (ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) !=
            0)
            return std::string("QP to RTR: ") + std::strerror(errno);
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        if (ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
            return std::string("QP to RTS: ") + std::strerror(errno);
        return {};
    }
};

// What the two processes tell each other through pipes.
struct Hello {
    std::uint32_t qpn = 0;
    std::uint32_t rkey = 0;
    std::uint64_t addr = 0;
    ibv_gid gid{};
};

bool rdma_required() {
    const char* v = std::getenv("RBLN_RDMA");
    return v != nullptr && std::string(v) == "1";
}

// The writer: its own process, its own verbs context; RDMA WRITEs the
// pattern into the peer's memory region and reports 0 on success.
[[noreturn]] void writer(int in_fd, int out_fd) {
    Endpoint ep;
    Hello peer;
    if (!ep.open().empty() || read(in_fd, &peer, sizeof(peer)) != sizeof(peer))
        _exit(2);
    std::vector<std::uint8_t> src(kBytes);
    for (std::size_t i = 0; i < kBytes; i++)
        src[i] = pattern(i);
    ibv_mr* mr = ibv_reg_mr(ep.pd, src.data(), kBytes, IBV_ACCESS_LOCAL_WRITE);
    Hello me;
    me.qpn = ep.qp->qp_num;
    me.gid = ep.gid;
    if (mr == nullptr || write(out_fd, &me, sizeof(me)) != sizeof(me) ||
        !ep.connect(peer.qpn, peer.gid).empty())
        _exit(3);
    char go = 0;
    if (read(in_fd, &go, 1) != 1) // the peer is connected too
        _exit(4);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(src.data());
    sge.length = kBytes;
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(ep.qp, &wr, &bad) != 0)
        _exit(5);
    ibv_wc wc{};
    int n = 0;
    for (int spin = 0; spin < 20000000 && n == 0; spin++)
        n = ibv_poll_cq(ep.cq, 1, &wc);
    const char done = n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : 6;
    if (write(out_fd, &done, 1) != 1)
        _exit(7);
    ibv_dereg_mr(mr);
    _exit(done);
}

class RdmaHost : public ::testing::Test {
protected:
    void SetUp() override {
        int count = 0;
        if (rbln_device_count(&count) != RBLN_OK || count == 0)
            GTEST_SKIP() << "no rbln card";
        const std::string why = ep_.open();
        if (!why.empty()) {
            if (rdma_required())
                FAIL() << "RBLN_RDMA=1 but " << why;
            GTEST_SKIP() << why << " (tools/scripts/rdma-rxe-setup.sh makes rxe0)";
        }
    }
    Endpoint ep_;
};

TEST_F(RdmaHost, AnRdmaWriteFromAnotherProcessLandsInAPinnedBlockAndReachesTheCard) {
    void* block = nullptr;
    ASSERT_EQ(rbln_host_alloc(0, kBytes, &block), RBLN_OK) << rbln_last_error_message();
    std::memset(block, 0, kBytes);
    ibv_mr* mr =
        ibv_reg_mr(ep_.pd, block, kBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr) << "ibv_reg_mr of a pinned block: " << std::strerror(errno);

    std::array<int, 2> to_writer{};
    std::array<int, 2> from_writer{};
    ASSERT_EQ(pipe(to_writer.data()), 0);
    ASSERT_EQ(pipe(from_writer.data()), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
        writer(to_writer[0], from_writer[1]);

    Hello me;
    me.qpn = ep_.qp->qp_num;
    me.rkey = mr->rkey;
    me.addr = reinterpret_cast<std::uintptr_t>(block);
    me.gid = ep_.gid;
    ASSERT_EQ(write(to_writer[1], &me, sizeof(me)), static_cast<ssize_t>(sizeof(me)));
    Hello peer;
    ASSERT_EQ(read(from_writer[0], &peer, sizeof(peer)), static_cast<ssize_t>(sizeof(peer)));
    ASSERT_EQ(ep_.connect(peer.qpn, peer.gid), "");
    const char go = 1;
    ASSERT_EQ(write(to_writer[1], &go, 1), 1);
    char done = 1;
    EXPECT_EQ(read(from_writer[0], &done, 1), 1);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0) << "the writer failed at step " << WEXITSTATUS(status);
    EXPECT_EQ(done, 0) << "the RDMA WRITE completed with an error";

    // To the card and back: what the NIC wrote is what the card got.
    rbln_buffer* dev = nullptr;
    ASSERT_EQ(rbln_malloc(0, kBytes, &dev), RBLN_OK) << rbln_last_error_message();
    ASSERT_EQ(rbln_memcpy_htod(dev, 0, block, kBytes, nullptr, 0), RBLN_OK);
    std::vector<std::uint8_t> back(kBytes);
    ASSERT_EQ(rbln_memcpy_dtoh(back.data(), dev, 0, kBytes, nullptr, 0), RBLN_OK);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < kBytes; i++)
        bad += back[i] != pattern(i) ? 1 : 0;
    EXPECT_EQ(bad, 0U) << "bytes that differ after the card's round trip";

    for (int fd : {to_writer[0], to_writer[1], from_writer[0], from_writer[1]})
        close(fd);
    EXPECT_EQ(rbln_buffer_free(dev), RBLN_OK);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(rbln_host_free(block), RBLN_OK);
}

TEST_F(RdmaHost, AHostGemBuffersMmapIsNotPageBackedSoANicCannotRegisterIt) {
    rbln_buffer* buf = nullptr;
    void* host = nullptr;
    ASSERT_EQ(rbln_malloc_host(0, kBytes, &buf, &host), RBLN_OK) << rbln_last_error_message();
    std::memset(host, 1, kBytes); // populated: the refusal is not about missing pages
    ibv_mr* mr = ibv_reg_mr(ep_.pd, host, kBytes, IBV_ACCESS_LOCAL_WRITE);
    const int err = errno;
    EXPECT_EQ(mr, nullptr) << "a VM_PFNMAP mapping was registered";
    if (mr != nullptr)
        ibv_dereg_mr(mr);
    else
        EXPECT_EQ(err, EFAULT) << std::strerror(err);
    EXPECT_EQ(rbln_buffer_free(buf), RBLN_OK);
}

} // namespace
