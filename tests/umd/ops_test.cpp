// SPDX-License-Identifier: GPL-2.0
// rbln/ops.hpp over lazy storages on a FakeKernel device.  The fake ignores
// LAUNCH, so a decorator in front of it runs each LAUNCH packet it sees in
// a SUBMIT on the CPU (fp32), on the fake's memory, before the fake runs
// the job: the ops' results are checked against values computed here, and
// the packets' fields (kernel, types, shape, strides) against the views.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "device_fixture.hpp"
#include "fake_kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/explain.hpp"
#include "rbln/ops.hpp"
#include "rbln_fw_cmd.h"

namespace rbln::test::ops_test {
namespace {

using ::testing::HasSubstr;

/// FakeKernel with LAUNCH run on the CPU (fp32 only) at SUBMIT.
class LaunchingKernel final : public KernelInterface {
public:
    explicit LaunchingKernel(std::shared_ptr<FakeKernel> fake) : k_(std::move(fake)) {}

    std::vector<rbln_fw_pkt_launch> launches; ///< every LAUNCH submitted

    const std::string& path() const override { return k_->path(); }
    const DrmVersion& drm_version() const override { return k_->drm_version(); }
    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override {
        return k_->get_info(type, out);
    }
    BoHandle bo_create(const BoCreateArgs& args) override {
        BoHandle h = k_->bo_create(args);
        va_[h.handle] = h.device_va;
        return h;
    }
    BoDescription bo_info(std::uint32_t handle) override { return k_->bo_info(handle); }
    BoHandle bo_userptr(void* addr, std::uint64_t size, UserptrFlags flags) override {
        BoHandle h = k_->bo_userptr(addr, size, flags);
        va_[h.handle] = h.device_va;
        return h;
    }
    void gem_close(std::uint32_t handle) override {
        va_.erase(handle);
        k_->gem_close(handle);
    }
    void* mmap(std::uint64_t offset, std::size_t size) override { return k_->mmap(offset, size); }
    void munmap(void* addr, std::size_t size) override { k_->munmap(addr, size); }
    std::uint32_t queue_create(std::uint32_t mask, QueuePriority priority) override {
        return k_->queue_create(mask, priority);
    }
    void queue_destroy(std::uint32_t queue_id) override { k_->queue_destroy(queue_id); }
    std::uint64_t submit(const SubmitArgs& args) override {
        run_launches(args);
        return k_->submit(args);
    }
    WaitResult wait(const WaitArgs& args) override { return k_->wait(args); }
    std::uint32_t syncobj_create(std::uint32_t flags) override { return k_->syncobj_create(flags); }
    void syncobj_destroy(std::uint32_t handle) override { k_->syncobj_destroy(handle); }

private:
    float* at(std::uint64_t va) {
        auto* p = k_->translate(va, sizeof(float));
        if (p == nullptr)
            throw std::runtime_error("LAUNCH address outside every buffer");
        return reinterpret_cast<float*>(p);
    }

    void run(const rbln_fw_pkt_launch& l) {
        if (l.dtype_in != RBLN_FW_DT_FP32 || l.dtype_out != RBLN_FW_DT_FP32)
            return; // the CPU model is fp32 only
        constexpr std::uint64_t e = sizeof(float);
        if (l.kernel == RBLN_FW_KERNEL_MATMUL) {
            const std::uint64_t m = l.shape[0];
            const std::uint64_t n = l.shape[1];
            const std::uint64_t kk = l.shape[2];
            for (std::uint64_t i = 0; i < m; i++)
                for (std::uint64_t j = 0; j < n; j++) {
                    float acc = 0;
                    for (std::uint64_t p = 0; p < kk; p++)
                        acc += *at(l.a + (i * l.stride_a[0] + p * l.stride_a[1]) * e) *
                               *at(l.b + (p * l.stride_b[0] + j * l.stride_b[1]) * e);
                    *at(l.out + (i * l.stride_out[0] + j * l.stride_out[1]) * e) = acc;
                }
            return;
        }
        std::uint64_t total = 1;
        for (std::uint32_t d = 0; d < l.ndim; d++)
            total *= l.shape[d];
        for (std::uint64_t flat = 0; flat < total; flat++) {
            std::int64_t oa = 0;
            std::int64_t ob = 0;
            std::int64_t oo = 0;
            std::uint64_t rest = flat;
            for (std::uint32_t d = l.ndim; d-- > 0;) {
                const auto idx = static_cast<std::int64_t>(rest % l.shape[d]);
                rest /= l.shape[d];
                oa += idx * l.stride_a[d];
                ob += idx * l.stride_b[d];
                oo += idx * l.stride_out[d];
            }
            const float a = *at(l.a + oa * e);
            const float b = l.b != 0 ? *at(l.b + ob * e) : 0.0F;
            float scale = 0;
            std::memcpy(&scale, &l.scale, sizeof(scale));
            float r = 0;
            switch (l.kernel) {
            case RBLN_FW_KERNEL_ADD:
                r = a + b;
                break;
            case RBLN_FW_KERNEL_MUL:
                r = a * b;
                break;
            case RBLN_FW_KERNEL_RELU:
                r = a > 0 ? a : 0;
                break;
            case RBLN_FW_KERNEL_SCALE:
                r = a * scale;
                break;
            case RBLN_FW_KERNEL_CAST:
                r = a;
                break;
            default:
                return;
            }
            *at(l.out + oo * e) = r;
        }
    }

    void run_launches(const SubmitArgs& args) {
        auto va = va_.find(args.cmd_handle);
        if (va == va_.end())
            return;
        const std::byte* p = k_->translate(va->second + args.cmd_offset, args.cmd_size);
        if (p == nullptr)
            return;
        for (std::uint32_t off = 0; off < args.cmd_size;) {
            std::uint32_t hdr = 0;
            std::memcpy(&hdr, p + off, sizeof(hdr));
            const std::uint32_t bytes = RBLN_FW_PKT_BYTES(hdr);
            if (bytes == 0)
                return;
            if (RBLN_FW_PKT_OP(hdr) == RBLN_FW_PKT_LAUNCH) {
                rbln_fw_pkt_launch l{};
                std::memcpy(&l, p + off, sizeof(l));
                launches.push_back(l);
                run(l);
            }
            off += bytes;
        }
    }

    std::shared_ptr<FakeKernel> k_;
    std::map<std::uint32_t, std::uint64_t> va_;
};

struct Card {
    Card() : fake(std::make_shared<FakeKernel>()), k(std::make_shared<LaunchingKernel>(fake)) {
        fake->run_packets = true;
        alloc = DeviceAllocator::for_kernels(0, {{0, k}});
        DeviceOptions o;
        o.submitter.warn = [](const std::string&) {};
        o.submitter.use_io_uring = false;
        dev = Device::open(k, 0, o);
        stream.emplace(dev->default_stream());
    }
    ~Card() {
        stream.reset();
        dev.reset();
    }
    Card(const Card&) = delete;
    Card& operator=(const Card&) = delete;
    Card(Card&&) = delete;
    Card& operator=(Card&&) = delete;

    StorageView tensor(std::vector<std::int64_t> sizes, ElementType t = ElementType::Fp32) {
        std::int64_t n = 1;
        for (const auto s : sizes)
            n *= s;
        auto s = Storage::create(dev, *alloc, static_cast<std::uint64_t>(n) * element_size(t), t,
                                 StorageOptions{CommitMode::Lazy, {}});
        return StorageView::contiguous(std::move(s), std::move(sizes));
    }
    StorageView filled(std::vector<std::int64_t> sizes, const std::vector<float>& values) {
        StorageView v = tensor(std::move(sizes));
        ops::from_host(v, std::as_bytes(std::span(values)));
        return v;
    }
    std::vector<float> values(const StorageView& v) {
        std::vector<float> out(v.numel());
        ops::to_host(v, std::as_writable_bytes(std::span(out)));
        return out;
    }

    std::shared_ptr<FakeKernel> fake;
    std::shared_ptr<LaunchingKernel> k;
    std::unique_ptr<DeviceAllocator> alloc;
    std::shared_ptr<Device> dev;
    std::optional<Stream> stream;
};

TEST(Ops, ElementwiseOpsComputeTheirKernels) {
    Card c;
    auto a = c.filled({2, 3}, {1, -2, 3, -4, 5, -6});
    auto b = c.filled({2, 3}, {10, 20, 30, 40, 50, 60});
    auto sum = c.tensor({2, 3});
    auto prod = c.tensor({2, 3});
    auto r = c.tensor({2, 3});
    auto s = c.tensor({2, 3});
    ops::add(*c.stream, sum, a, b);
    ops::mul(*c.stream, prod, a, b);
    ops::relu(*c.stream, r, a);
    ops::scale(*c.stream, s, a, 0.5F);
    EXPECT_EQ(c.values(sum), (std::vector<float>{11, 18, 33, 36, 55, 54}));
    EXPECT_EQ(c.values(prod), (std::vector<float>{10, -40, 90, -160, 250, -360}));
    EXPECT_EQ(c.values(r), (std::vector<float>{1, 0, 3, 0, 5, 0}));
    EXPECT_EQ(c.values(s), (std::vector<float>{0.5F, -1, 1.5F, -2, 2.5F, -3}));
    ASSERT_EQ(c.k->launches.size(), 4u);
    const rbln_fw_pkt_launch& l = c.k->launches[0];
    EXPECT_EQ(l.kernel, static_cast<std::uint32_t>(RBLN_FW_KERNEL_ADD));
    EXPECT_EQ(l.dtype_in, static_cast<std::uint32_t>(RBLN_FW_DT_FP32));
    EXPECT_EQ(l.ndim, 2u);
    EXPECT_EQ(l.shape[0], 2u);
    EXPECT_EQ(l.shape[1], 3u);
    EXPECT_EQ(l.stride_a[0], 3);
    EXPECT_EQ(l.stride_a[1], 1);
    EXPECT_EQ(l.out, sum.storage->data_ptr());
    EXPECT_EQ(c.k->launches[2].b, 0u) << "RELU takes no b";
}

TEST(Ops, MatmulComputesRowsTimesColumns) {
    Card c;
    auto a = c.filled({2, 3}, {1, 2, 3, 4, 5, 6});
    auto b = c.filled({3, 2}, {7, 8, 9, 10, 11, 12});
    auto out = c.tensor({2, 2});
    ops::matmul(*c.stream, out, a, b);
    EXPECT_EQ(c.values(out), (std::vector<float>{58, 64, 139, 154}));
    ASSERT_EQ(c.k->launches.size(), 1u);
    const rbln_fw_pkt_launch& l = c.k->launches[0];
    EXPECT_EQ(l.kernel, static_cast<std::uint32_t>(RBLN_FW_KERNEL_MATMUL));
    EXPECT_EQ(l.shape[0], 2u) << "M";
    EXPECT_EQ(l.shape[1], 2u) << "N";
    EXPECT_EQ(l.shape[2], 3u) << "K";
}

TEST(Ops, MatmulOfFp16InputsMayWriteFp32) {
    Card c;
    auto a = c.tensor({4, 8}, ElementType::Fp16);
    auto b = c.tensor({8, 2}, ElementType::Fp16);
    auto out = c.tensor({4, 2}, ElementType::Fp32);
    ops::matmul(*c.stream, out, a, b);
    EXPECT_TRUE(c.k->launches.empty()) << "asynchronous: enqueued, not yet submitted";
    c.stream->synchronize();
    ASSERT_EQ(c.k->launches.size(), 1u);
    EXPECT_EQ(c.k->launches[0].dtype_in, static_cast<std::uint32_t>(RBLN_FW_DT_FP16));
    EXPECT_EQ(c.k->launches[0].dtype_out, static_cast<std::uint32_t>(RBLN_FW_DT_FP32));
    auto bad = c.tensor({4, 2}, ElementType::Bf16);
    EXPECT_THROW(ops::matmul(*c.stream, bad, a, b), Error);
}

TEST(Ops, StridedViewsAndOffsetsReachTheKernel) {
    Card c;
    // a: the 2x2 top-left of a 3x3 matrix, read transposed through strides.
    auto whole = c.filled({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    StorageView at = whole;
    at.sizes = {2, 2};
    at.strides = {1, 3};
    at.offset = 1; // starts at element (0,1)
    auto out = c.tensor({2, 2});
    ops::scale(*c.stream, out, at, 2.0F);
    EXPECT_EQ(c.values(out), (std::vector<float>{4, 10, 6, 12}));
}

TEST(Ops, CastOfOneTypeGathersAStridedViewIntoAContiguousOne) {
    Card c;
    auto whole = c.filled({2, 3}, {1, 2, 3, 4, 5, 6});
    StorageView t = whole; // the transpose, 3x2
    t.sizes = {3, 2};
    t.strides = {1, 3};
    auto out = c.tensor({3, 2});
    ops::cast(*c.stream, out, t);
    EXPECT_EQ(c.values(out), (std::vector<float>{1, 4, 2, 5, 3, 6}));
    ASSERT_EQ(c.k->launches.size(), 1u) << "one job";
    EXPECT_EQ(c.k->launches[0].kernel, static_cast<std::uint32_t>(RBLN_FW_KERNEL_CAST));
}

TEST(Ops, CastConvertsBetweenElementTypesAndRefusesU8) {
    Card c;
    auto a = c.tensor({4});
    auto h = c.tensor({4}, ElementType::Fp16);
    ops::cast(*c.stream, h, a);
    c.stream->synchronize();
    ASSERT_EQ(c.k->launches.size(), 1u);
    EXPECT_EQ(c.k->launches[0].dtype_in, static_cast<std::uint32_t>(RBLN_FW_DT_FP32));
    EXPECT_EQ(c.k->launches[0].dtype_out, static_cast<std::uint32_t>(RBLN_FW_DT_FP16));
    auto bytes = c.tensor({16}, ElementType::U8);
    try {
        ops::cast(*c.stream, bytes, a);
        ADD_FAILURE() << "a cast into u8 was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("cast"));
        EXPECT_THAT(e.what(), HasSubstr("out has element type 0"));
    }
}

TEST(Ops, StateTransitionsFollowTheLazyStorageRules) {
    Card c;
    auto a = c.filled({64}, std::vector<float>(64, 1.0F));
    auto out = c.tensor({64});
    EXPECT_EQ(a.storage->coherence(), Coherence::HostLatest);
    EXPECT_FALSE(out.storage->resident());
    ops::relu(*c.stream, out, a);
    EXPECT_EQ(a.storage->coherence(), Coherence::InSync) << "uploaded once";
    EXPECT_EQ(a.storage->transfers().uploads, 1u);
    EXPECT_TRUE(out.storage->resident()) << "committed at first use";
    EXPECT_EQ(out.storage->coherence(), Coherence::DeviceLatest);
    EXPECT_EQ(out.storage->transfers().uploads, 0u) << "a whole overwrite uploads nothing";
    ops::relu(*c.stream, out, a);
    EXPECT_EQ(a.storage->transfers().uploads, 1u) << "in sync: no second upload";
    c.values(out);
    EXPECT_EQ(out.storage->transfers().downloads, 1u);
    EXPECT_EQ(out.storage->coherence(), Coherence::InSync);
}

TEST(Ops, AnOutputThatIsPartOfItsStorageOrAnInputIsReadWrite) {
    Card c;
    auto a = c.filled({8}, {1, 2, 3, 4, 5, 6, 7, 8});
    ops::scale(*c.stream, a, a, 3.0F); // in place
    EXPECT_EQ(c.values(a), (std::vector<float>{3, 6, 9, 12, 15, 18, 21, 24}));
    auto big = c.filled({8}, {0, 0, 0, 0, 0, 0, 0, 0});
    StorageView half = big;
    half.sizes = {4};
    half.offset = 4;
    auto src = c.filled({4}, {1, 1, 1, 1});
    ops::scale(*c.stream, half, src, 5.0F); // big is host-latest: uploaded first
    EXPECT_EQ(big.storage->transfers().uploads, 1u) << "a partial output keeps the rest";
    EXPECT_EQ(c.values(big), (std::vector<float>{0, 0, 0, 0, 5, 5, 5, 5}));
}

TEST(Ops, CopyMovesBytesOnTheDevice) {
    Card c;
    auto a = c.filled({4}, {1, 2, 3, 4});
    auto b = c.tensor({4});
    ops::copy(*c.stream, b, a);
    EXPECT_EQ(c.values(b), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(c.dev->copy_stats().async_d2d, 1u);
}

TEST(Ops, BadOperandsAreRefusedNamingTheOperand) {
    Card c;
    auto a = c.tensor({2, 3});
    auto b = c.tensor({3, 2});
    auto out = c.tensor({2, 3});
    auto expect_error = [](auto&& f, const char* what) {
        try {
            f();
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::InvalidArgument);
            EXPECT_THAT(e.what(), HasSubstr(what));
        }
    };
    expect_error([&] { ops::add(*c.stream, out, a, b); }, "b's sizes [3,2] differ from out's");
    expect_error([&] { ops::matmul(*c.stream, out, a, a); }, "b needs as many rows");
    // One element broadcast to 8192 x 8192: 3 * 2^26 elements of working set.
    StorageView wide = c.tensor({1});
    wide.sizes = {8192, 8192};
    wide.strides = {0, 0};
    expect_error([&] { ops::matmul(*c.stream, wide, wide, wide); },
                 "beyond the card's 134217728 (RBLN_FW_MATMUL_MAX_ELEMS)");
    auto u8 = Storage::create(c.dev, *c.alloc, 6, ElementType::U8);
    expect_error([&] { ops::relu(*c.stream, out, StorageView::whole(u8)); },
                 "ops take fp32, fp16 or bf16");
    StorageView past = a;
    past.offset = 1;
    expect_error([&] { ops::relu(*c.stream, out, past); }, "reaches outside its storage");
    EXPECT_FALSE(out.storage->resident()) << "refused before any device use";
}

TEST(Ops, EachOpsTransfersCarryTheCallersLine) {
    Card c;
    auto a = c.filled({4}, {1, 2, 3, 4});
    auto out = c.tensor({4});
    auto region = explain();
    const std::uint32_t line = __LINE__ + 1;
    ops::relu(*c.stream, out, a);
    const auto rs = region.records();
    ASSERT_FALSE(rs.empty());
    for (const auto& r : rs)
        EXPECT_EQ(r.where.line, line) << explain_kind_name(r.kind);
}

} // namespace
} // namespace rbln::test::ops_test
