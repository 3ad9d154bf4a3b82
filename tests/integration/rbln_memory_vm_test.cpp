// SPDX-License-Identifier: GPL-2.0
// librbln's memory model on the real rbln.ko and the emulated card,
// replaying the runtime's documented examples: lazy placement and the
// statistics after one device add, one fp16 matmul on a four-chiplet card
// in memory_summary(), and explain reports of a step written the
// recommended way and carelessly, and inputs and a result paged out by an
// offload scope (rbln/offload.hpp).  Every result is checked against a CPU
// reference.  Runs inside the VM (tools/scripts/test-vm.sh), not under host
// ctest; without an rbln card every test skips with a message.
//
//   tools/vm/rbln-vm -q --cards 2 -- build/cmake/tests/integration/rbln_memory_vm_tests

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "drm/rbln_accel.h"
#include "kernel/kernel.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/explain.hpp"
#include "rbln/offload.hpp"
#include "rbln/ops.hpp"
#include "rbln/storage.hpp"

extern "C" int rbln_test_ops_from_c(int device, int check_values, char* message, size_t len);

namespace rbln::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

unsigned card_count() {
    static const unsigned n = [] {
        try {
            return Runtime::process().device_count();
        } catch (...) {
            return 0u;
        }
    }();
    return n;
}

#define REQUIRE_CARDS(n)                                                                           \
    do {                                                                                           \
        if (card_count() < (n))                                                                    \
            GTEST_SKIP() << "needs " << (n) << " rbln card(s) (run it in the VM: "                 \
                         << "tools/vm/rbln-vm --cards 2 -- <this binary>)";                        \
    } while (0)

// ---- fp16 on the host ------------------------------------------------------------

float from_half(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t man = h & 0x3ffu;
    if (exp == 0x1f)
        return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        const float v = std::ldexp(static_cast<float>(man), -24);
        return sign != 0 ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// Round to nearest even; normal and subnormal fp16 values, overflow to Inf.
std::uint16_t to_half(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const float a = std::fabs(f);
    if (std::isnan(f))
        return static_cast<std::uint16_t>(sign | 0x7e00u);
    if (a >= 65520.0F)
        return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (a < std::ldexp(1.0F, -14)) { // subnormal: units of 2^-24
        const auto units = static_cast<std::uint16_t>(std::nearbyint(a * std::ldexp(1.0F, 24)));
        return static_cast<std::uint16_t>(sign | units);
    }
    int e = 0;
    const float m = std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
    auto man = static_cast<std::uint32_t>(std::nearbyint(m * 2048.0F)); // 11 bits with the lead
    if (man == 2048) {
        man = 1024;
        e++;
    }
    const auto exp = static_cast<std::uint32_t>(e - 1 + 15);
    return static_cast<std::uint16_t>(sign | (exp << 10) | (man & 0x3ffu));
}

std::vector<std::uint16_t> halves(const std::vector<float>& v) {
    std::vector<std::uint16_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); i++)
        h[i] = to_half(v[i]);
    return h;
}

/// Small integers (exact in fp16 and in every sum the tests make).
std::vector<float> small_ints(std::size_t n, int seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; i++)
        v[i] = static_cast<float>(static_cast<int>((i * 7 + seed * 3) % 5) - 2);
    return v;
}

StorageView tensor(unsigned device, std::vector<std::int64_t> sizes, ElementType t) {
    std::uint64_t n = 1;
    for (const auto s : sizes)
        n *= static_cast<std::uint64_t>(s);
    return StorageView::contiguous(Storage::create(device, n * element_size(t), t),
                                   std::move(sizes));
}

std::vector<float> read_half(const StorageView& v) {
    std::vector<std::uint16_t> h(v.numel());
    ops::to_host(v, std::as_writable_bytes(std::span(h)));
    std::vector<float> out(h.size());
    for (std::size_t i = 0; i < h.size(); i++)
        out[i] = from_half(h[i]);
    return out;
}

std::vector<float> read_float(const StorageView& v) {
    std::vector<float> out(v.numel());
    ops::to_host(v, std::as_writable_bytes(std::span(out)));
    return out;
}

// ---- the documented examples ------------------------------------------------------

TEST(VmMemory, PlacingATensorAllocatesNothingAndOneDeviceAddDoes) {
    REQUIRE_CARDS(1u);
    DeviceAllocator& alloc = process_allocator(0);
    alloc.empty_cache();
    alloc.reset_peak_memory_stats();
    const std::vector<float> xa = small_ints(128 * 128, 1);
    const std::vector<float> xb = small_ints(128 * 128, 2);
    auto a = tensor(0, {128, 128}, ElementType::Fp16);
    auto b = tensor(0, {128, 128}, ElementType::Fp16);
    const auto ha = halves(xa);
    const auto hb = halves(xb);
    ops::from_host(a, std::as_bytes(std::span(ha)));
    ops::from_host(b, std::as_bytes(std::span(hb)));
    EXPECT_EQ(alloc.memory_allocated(), 0u) << "placed on the host side only (lazy)";
    EXPECT_FALSE(a.storage->resident());

    auto sum = tensor(0, {128, 128}, ElementType::Fp16);
    Stream s = Device::get(0)->default_stream();
    ops::add(s, sum, a, b);
    const std::vector<float> got = read_half(sum);
    for (std::size_t i = 0; i < got.size(); i++)
        ASSERT_EQ(got[i], xa[i] + xb[i]) << i;
    EXPECT_GT(alloc.memory_allocated(), 0u);
    EXPECT_EQ(alloc.memory_allocated(), 3u * 128 * 128 * 2) << "three committed storages";
    EXPECT_GE(alloc.memory_reserved(), alloc.memory_allocated());
    EXPECT_EQ(alloc.max_memory_allocated(), alloc.memory_allocated());
}

// A framework written in C: a pinned block copied into a storage without
// blocking, an fp32 add on the card, copies out and between storages,
// record_stream, placement and the memory fraction (c_ops_from_c.c).
TEST(VmMemory, AFrameworkWrittenInCRunsAnAddOnTheCard) {
    REQUIRE_CARDS(1u);
    std::array<char, 512> message{};
    EXPECT_EQ(rbln_test_ops_from_c(0, 1, message.data(), message.size()), 0) << message.data();
}

/// Runs @body in a fork() child: 0 if it returned, 2 if it threw, -1 if
/// the child did not exit.
template <typename F> int in_child(F body) {
    const pid_t pid = ::fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int rc = 0;
        try {
            body();
        } catch (...) {
            rc = 2;
        }
        ::_exit(rc);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/// One fp16 add of 128x128 tensors on card 0, checked against the host.
void add_on_the_card(int seed) {
    const std::vector<float> xa = small_ints(128 * 128, seed);
    const std::vector<float> xb = small_ints(128 * 128, seed + 1);
    auto a = tensor(0, {128, 128}, ElementType::Fp16);
    auto b = tensor(0, {128, 128}, ElementType::Fp16);
    const auto ha = halves(xa);
    const auto hb = halves(xb);
    ops::from_host(a, std::as_bytes(std::span(ha)));
    ops::from_host(b, std::as_bytes(std::span(hb)));
    auto sum = tensor(0, {128, 128}, ElementType::Fp16);
    Stream s = Device::get(0)->default_stream();
    ops::add(s, sum, a, b);
    const std::vector<float> got = read_half(sum);
    for (std::size_t i = 0; i < got.size(); i++)
        ASSERT_EQ(got[i], xa[i] + xb[i]) << i;
}

// A fork() child shares the parent's open file, so a GEM close from its
// copy of the caching allocator would take the parent's cached segments
// away (the parent's next jobs naming them would fail).
TEST(VmMemory, AForkChildsEmptyCacheLeavesTheParentsCachedMemoryUsable) {
    REQUIRE_CARDS(1u);
    DeviceAllocator& alloc = process_allocator(0);
    add_on_the_card(1); // its storages go: their segment stays cached
    const std::uint64_t reserved = alloc.memory_reserved();
    ASSERT_GT(reserved, 0u);
    ASSERT_EQ(alloc.memory_allocated(), 0u);
    EXPECT_EQ(in_child([] { process_allocator(0).empty_cache(); }), 0);
    EXPECT_EQ(alloc.memory_reserved(), reserved);
    add_on_the_card(5);
    EXPECT_EQ(alloc.memory_reserved(), reserved) << "the cached segments served it";
}

// The same one level down: whatever a child drops (a pinned block, a
// stream, a syncobj) must not close the parent's handles in the open file
// they share.
TEST(VmMemory, AForkChildDestroysNoneOfTheParentsHandles) {
    REQUIRE_CARDS(1u);
    KernelInterface& k = Device::get(0)->kernel();
    const BoHandle bo = k.bo_create(BoCreateArgs{4096, Region::Host, 0, BoFlags::None});
    const std::uint32_t queue = k.queue_create(1, QueuePriority::Low);
    const std::uint32_t syncobj = k.syncobj_create(0);
    EXPECT_EQ(in_child([&] {
                  k.gem_close(bo.handle);
                  k.queue_destroy(queue);
                  k.syncobj_destroy(syncobj);
              }),
              0)
        << "the child's calls return quietly";
    EXPECT_EQ(k.bo_info(bo.handle).size, 4096u) << "the buffer is still the parent's";
    EXPECT_NO_THROW(k.queue_destroy(queue));
    EXPECT_NO_THROW(k.syncobj_destroy(syncobj));
    EXPECT_NO_THROW(k.gem_close(bo.handle));
}

TEST(VmOffload, InputsPagedOutToAFileReachTheCardExactlyAndTheResultComesBack) {
    REQUIRE_CARDS(1u);
    const std::vector<float> xa = small_ints(128 * 128, 3);
    const std::vector<float> xb = small_ints(128 * 128, 4);
    std::optional<StorageView> a;
    std::optional<StorageView> b;
    std::optional<StorageView> sum;
    OffloadStats st;
    {
        auto scope = offload(); // $TMPDIR or /var/tmp: tmpfs in the guest
        a = tensor(0, {128, 128}, ElementType::Fp16);
        b = tensor(0, {128, 128}, ElementType::Fp16);
        sum = tensor(0, {128, 128}, ElementType::Fp16);
        const auto ha = halves(xa);
        const auto hb = halves(xb);
        ops::from_host(*a, std::as_bytes(std::span(ha)));
        ops::from_host(*b, std::as_bytes(std::span(hb)));
        scope.offload_now();
        EXPECT_TRUE(a->storage->host_paged_out());
        EXPECT_TRUE(b->storage->host_paged_out());
        Stream s = Device::get(0)->default_stream();
        ops::add(s, *sum, *a, *b); // the uploads read the inputs back from the file
        s.synchronize();
        const std::vector<float> first = read_half(*sum);
        for (std::size_t i = 0; i < first.size(); i++)
            ASSERT_EQ(first[i], xa[i] + xb[i]) << i;
        scope.close(); // the result's host copy goes to the file too
        st = scope.stats();
        EXPECT_TRUE(scope.failures().empty());
    }
    std::cout << "offload: writes " << st.writes << " (" << st.bytes_offloaded << " bytes), reads "
              << st.reads << " (" << st.bytes_brought_back << " bytes), dropped "
              << st.bytes_dropped << " bytes\n";
    EXPECT_EQ(st.writes, 3u) << "two inputs, then the result";
    EXPECT_EQ(st.reads, 2u) << "the two uploads";
    EXPECT_EQ(st.failures, 0u);
    EXPECT_TRUE(sum->storage->host_paged_out());
    const std::vector<float> again = read_half(*sum); // from the file, no download
    for (std::size_t i = 0; i < again.size(); i++)
        ASSERT_EQ(again[i], xa[i] + xb[i]) << i;
    EXPECT_EQ(sum->storage->transfers().downloads, 1u);
}

/// The rows of memory_summary(): (npu, chiplet, allocated MiB, reserved MiB).
struct SummaryRow {
    unsigned npu = 0;
    unsigned chiplet = 0;
    double allocated = 0;
    double reserved = 0;
};

std::vector<SummaryRow> summary_rows(const std::string& summary) {
    std::vector<SummaryRow> rows;
    std::istringstream in(summary);
    std::string line;
    int rules = 0;
    while (std::getline(in, line)) {
        if (line.starts_with("-----")) {
            rules++;
            continue;
        }
        if (rules != 1)
            continue;
        std::istringstream f(line);
        SummaryRow r;
        double peak = 0;
        if (f >> r.npu >> r.chiplet >> r.allocated >> peak >> r.reserved)
            rows.push_back(r);
    }
    return rows;
}

TEST(VmMemory, OneFp16MatmulOnAFourChipletCardUsesOneChipletOnly) {
    REQUIRE_CARDS(1u);
    auto dev = Device::get(0);
    if (dev->chiplet_count() != 4)
        GTEST_SKIP() << "a four-chiplet card (Rebel100) is needed; this one has "
                     << dev->chiplet_count();
    DeviceAllocator& alloc = process_allocator(0);
    alloc.empty_cache();
    constexpr std::int64_t m = 128;
    constexpr std::int64_t k = 96;
    constexpr std::int64_t n = 64;
    const std::vector<float> xa = small_ints(m * k, 3);
    const std::vector<float> xb = small_ints(k * n, 4);
    auto a = tensor(0, {m, k}, ElementType::Fp16);
    auto b = tensor(0, {k, n}, ElementType::Fp16);
    auto out = tensor(0, {m, n}, ElementType::Fp16);
    const auto ha = halves(xa);
    const auto hb = halves(xb);
    ops::from_host(a, std::as_bytes(std::span(ha)));
    ops::from_host(b, std::as_bytes(std::span(hb)));
    Stream s = dev->default_stream();
    ops::matmul(s, out, a, b);
    const std::vector<float> got = read_half(out);
    for (std::int64_t i = 0; i < m; i++)
        for (std::int64_t j = 0; j < n; j++) {
            float ref = 0;
            for (std::int64_t p = 0; p < k; p++)
                ref += xa[i * k + p] * xb[p * n + j];
            ASSERT_EQ(got[i * n + j], ref) << i << "," << j;
        }

    const std::string summary = alloc.memory_summary();
    std::cout << summary;
    const auto rows = summary_rows(summary);
    ASSERT_EQ(rows.size(), 4u) << summary;
    unsigned used = 0;
    for (const auto& r : rows) {
        EXPECT_EQ(r.npu, rows[0].npu);
        if (r.reserved > 0 || r.allocated > 0)
            used++;
    }
    EXPECT_EQ(used, 1u) << "one chiplet holds the matmul's tensors:\n" << summary;
    EXPECT_GT(rows[0].allocated, 0.0) << "the default place, chiplet 0";
}

// ---- explain: one step, written four ways ------------------------------------------------

constexpr std::int64_t kSide = 64;

/// The step's CPU reference: z = relu(x) * 0.5 + x, with t = relu(x); @t0
/// (not NaN) replaces t[0] (a careless host write into t).
std::vector<float> reference(const std::vector<float>& x, float t0 = NAN) {
    std::vector<float> z(x.size());
    for (std::size_t i = 0; i < x.size(); i++) {
        float t = x[i] > 0 ? x[i] : 0;
        if (i == 0 && !std::isnan(t0))
            t = t0;
        z[i] = t * 0.5F + x[i];
    }
    return z;
}

struct Step {
    explicit Step(unsigned device = 0)
        : x(tensor(device, {kSide, kSide}, ElementType::Fp32)),
          t(tensor(device, {kSide, kSide}, ElementType::Fp32)),
          y(tensor(device, {kSide, kSide}, ElementType::Fp32)),
          z(tensor(device, {kSide, kSide}, ElementType::Fp32)),
          stream(Device::get(device)->default_stream()), input(small_ints(kSide * kSide, 5)) {
        bind_device_memory(x); // the recommended input buffer
    }
    StorageView x, t, y, z;
    Stream stream;
    std::vector<float> input;
};

void print(const ExplainRegion& r) {
    std::cout << r.report() << std::flush;
}

TEST(VmExplain, TheRecommendedStepIsCleanWithOnePushAndOneDownload) {
    REQUIRE_CARDS(1u);
    Step st;
    auto region = explain("recommended step");
    ops::from_host(st.x, std::as_bytes(std::span(st.input)));
    ops::relu(st.stream, st.t, st.x);
    ops::scale(st.stream, st.y, st.t, 0.5F);
    ops::add(st.stream, st.z, st.y, st.x);
    const std::vector<float> z = read_float(st.z);
    region.close();
    print(region);
    EXPECT_EQ(z, reference(st.input));
    const ExplainCounts n = region.counts();
    EXPECT_THAT(region.report(), StartsWith("[clean]"));
    EXPECT_EQ(n.pushes, 1u);
    EXPECT_EQ(n.downloads, 1u);
    EXPECT_EQ(n.signals, 0u);
    EXPECT_EQ(n.host_bounces + n.sync_waits, 0u);
}

TEST(VmExplain, ReadingTheIntermediateOnTheHostIsReported) {
    REQUIRE_CARDS(1u);
    Step st;
    auto region = explain("careless: reads t");
    ops::from_host(st.x, std::as_bytes(std::span(st.input)));
    ops::relu(st.stream, st.t, st.x);
    const std::vector<float> t = read_float(st.t); // the careless line
    ops::scale(st.stream, st.y, st.t, 0.5F);
    ops::add(st.stream, st.z, st.y, st.x);
    const std::vector<float> z = read_float(st.z);
    region.close();
    print(region);
    EXPECT_EQ(z, reference(st.input));
    EXPECT_EQ(t[1], std::max(st.input[1], 0.0F));
    const ExplainCounts n = region.counts();
    EXPECT_THAT(region.report(), StartsWith("[overhead: 1 signals]"));
    EXPECT_EQ(n.pushes, 1u);
    EXPECT_EQ(n.downloads, 2u);
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 1u);
    EXPECT_EQ(sig[0].storage, st.t.storage->id());
    EXPECT_THAT(sig[0].why, HasSubstr("intermediate"));
}

TEST(VmExplain, WritingPartOfADeviceResultIsReported) {
    REQUIRE_CARDS(1u);
    Step st;
    auto region = explain("careless: writes t[0]");
    ops::from_host(st.x, std::as_bytes(std::span(st.input)));
    ops::relu(st.stream, st.t, st.x);
    const float t0 = 7.0F;
    StorageView first = st.t;
    first.sizes = {1};
    first.strides = {1};
    ops::from_host(first, std::as_bytes(std::span(&t0, 1))); // the careless line
    ops::scale(st.stream, st.y, st.t, 0.5F);
    ops::add(st.stream, st.z, st.y, st.x);
    const std::vector<float> z = read_float(st.z);
    region.close();
    print(region);
    EXPECT_EQ(z, reference(st.input, t0));
    const ExplainCounts n = region.counts();
    EXPECT_THAT(region.report(), StartsWith("[overhead: 2 signals]"));
    EXPECT_EQ(n.pushes, 2u) << "x, and t again";
    EXPECT_EQ(n.downloads, 2u) << "t before the write, z";
    const auto sig = region.signals();
    ASSERT_EQ(sig.size(), 2u);
    EXPECT_EQ(sig[0].kind, ExplainKind::Download);
    EXPECT_EQ(sig[1].kind, ExplainKind::Push);
}

TEST(VmExplain, CopyingThroughAnotherDeviceIsReported) {
    REQUIRE_CARDS(2u);
    Step st;
    auto x1 = tensor(1, {kSide, kSide}, ElementType::Fp32);
    auto t1 = tensor(1, {kSide, kSide}, ElementType::Fp32);
    Stream s1 = Device::get(1)->default_stream();
    auto region = explain("careless: relu on rbln:1");
    ops::from_host(st.x, std::as_bytes(std::span(st.input)));
    ops::copy(s1, x1, st.x); // the careless lines
    ops::relu(s1, t1, x1);
    ops::copy(st.stream, st.t, t1);
    ops::scale(st.stream, st.y, st.t, 0.5F);
    ops::add(st.stream, st.z, st.y, st.x);
    const std::vector<float> z = read_float(st.z);
    region.close();
    print(region);
    EXPECT_EQ(z, reference(st.input));
    const ExplainCounts n = region.counts();
    EXPECT_THAT(region.report(), StartsWith("[overhead: 2 signals]"));
    EXPECT_EQ(n.host_bounces, 2u);
    EXPECT_EQ(n.host_bounce_bytes, 2u * kSide * kSide * sizeof(float));
    EXPECT_EQ(n.pushes, 1u);
    EXPECT_EQ(n.downloads, 1u);
}

} // namespace
} // namespace rbln::test
