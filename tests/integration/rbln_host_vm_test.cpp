// SPDX-License-Identifier: GPL-2.0
// librbln's host memory on the real rbln.ko and the emulated card: blocks of
// the pinned host allocator and huge_host_empty() buffers are registered as
// pinned user pages, so copies between them and HBM are asynchronous COPY
// packets the card runs on those pages directly (no staging), and the bytes
// arrive exactly; the allocator's cache and statistics behave as on the
// host.  Runs inside the VM (tools/scripts/test-vm.sh); without an rbln card
// every test skips with a message.
//
//   tools/vm/rbln-vm -q -- build/cmake/tests/integration/rbln_host_vm_tests

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "rbln/copy.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/host_allocator.hpp"
#include "rbln/memory.hpp"
#include "rbln/stream.hpp"

namespace rbln::test {
namespace {

bool have_card() {
    static const bool yes = [] {
        try {
            return Runtime::process().device_count() > 0;
        } catch (...) {
            return false;
        }
    }();
    return yes;
}

#define REQUIRE_CARD()                                                                             \
    do {                                                                                           \
        if (!have_card())                                                                          \
            GTEST_SKIP() << "needs an rbln card (run it in the VM: tools/vm/rbln-vm -- "           \
                            "<this binary>)";                                                      \
    } while (0)

void fill_pattern(std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; i++)
        p[i] = static_cast<std::byte>((i * 131 + seed * 17 + (i >> 12)) & 0xff);
}

bool has_pattern(const std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; i++)
        if (p[i] != static_cast<std::byte>((i * 131 + seed * 17 + (i >> 12)) & 0xff))
            return false;
    return true;
}

TEST(VmHostMemory, PinnedBlocksCopyToHbmAndBackAsynchronouslyByteForByte) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    HostAllocator alloc(dev);
    const std::size_t n = 3 << 20; // size class 4 MiB
    HostBlock in = alloc.allocate(n);
    HostBlock out = alloc.allocate(n);
    ASSERT_TRUE(in);
    ASSERT_EQ(in.size(), 4u << 20);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(in.data()) % 4096, 0u);
    EXPECT_EQ(in.memory()->kind(), MemoryKind::HostRegistered);
    fill_pattern(in.data(), n, 5);
    std::memset(out.data(), 0, n);

    auto hbm = dev->allocate(n);
    Stream s(dev);
    const CopyEndpoint to_dev = CopyEndpoint::of(hbm, 0, n);
    const CopyEndpoint from_pin = CopyEndpoint::of_host(in.data(), n);
    EXPECT_EQ(plan_copy(*dev, to_dev, from_pin).mode, CopyMode::Async);
    const CopyStats before = dev->copy_stats();
    copy(s, to_dev, from_pin, true);
    copy(s, CopyEndpoint::of_host(out.data(), n), CopyEndpoint::of(hbm, 0, n), true);
    in.record_stream(s);
    out.record_stream(s);
    s.synchronize();
    const CopyStats after = dev->copy_stats();
    EXPECT_EQ(after.async_h2d - before.async_h2d, 1u);
    EXPECT_EQ(after.async_d2h - before.async_d2h, 1u);
    EXPECT_EQ(after.sync_h2d - before.sync_h2d, 0u);
    EXPECT_EQ(after.sync_d2h - before.sync_d2h, 0u);
    EXPECT_TRUE(has_pattern(out.data(), n, 5));
}

TEST(VmHostMemory, AFreedBlockIsReusedOnceTheCardIsDoneAndEmptyCacheUnpinsIt) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    HostAllocator alloc(dev);
    const std::size_t n = 1 << 20;
    auto hbm = dev->allocate(n);
    Stream s(dev);
    std::byte* first = nullptr;
    {
        HostBlock b = alloc.allocate(n);
        first = b.data();
        fill_pattern(b.data(), n, 9);
        copy(s, CopyEndpoint::of(hbm, 0, n), CopyEndpoint::of_host(b.data(), n), true);
        b.record_stream(s);
    }
    s.synchronize();
    HostBlock again = alloc.allocate(n);
    EXPECT_EQ(again.data(), first); // the cached block, its card work done
    auto st = alloc.memory_stats();
    EXPECT_EQ(st["num_host_alloc"], 1);
    EXPECT_EQ(st["allocation.current"], 1);
    EXPECT_EQ(st["segment.current"], 1);
    EXPECT_EQ(st["allocated_bytes.current"], static_cast<std::int64_t>(n));

    // The card really wrote from that block: read HBM back into it.
    std::memset(again.data(), 0, n);
    copy(s, CopyEndpoint::of_host(again.data(), n), CopyEndpoint::of(hbm, 0, n));
    EXPECT_TRUE(has_pattern(again.data(), n, 9));

    again.reset();
    alloc.empty_cache();
    st = alloc.memory_stats();
    EXPECT_EQ(st["num_host_free"], 1);
    EXPECT_EQ(st["segment.current"], 0);
    EXPECT_EQ(st["reserved_bytes.current"], 0);
    EXPECT_EQ(st["reserved_bytes.peak"], static_cast<std::int64_t>(n));
}

TEST(VmHostMemory, HugeHostBufferIs2MiBAlignedPinnedAndTheCardDmasItDirectly) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    const std::size_t n = (6 << 20) + 12345;
    HugeHostBuffer buf = huge_host_empty(dev, n);
    ASSERT_TRUE(buf);
    EXPECT_EQ(buf.size(), 8u << 20);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.data()) % (2u << 20), 0u);
    EXPECT_EQ(buf.memory()->kind(), MemoryKind::HostRegistered);
    if (buf.backing() != HugeBacking::SmallPages) {
        EXPECT_GT(buf.huge_bytes(), 0u) << huge_backing_name(buf.backing());
    }
    fill_pattern(buf.data(), n, 3);

    auto hbm = dev->allocate(n);
    Stream s(dev);
    const CopyStats before = dev->copy_stats();
    copy(s, CopyEndpoint::of(hbm, 0, n), CopyEndpoint::of_host(buf.data(), n), true);
    s.synchronize();
    std::memset(buf.data(), 0, n);
    copy(s, CopyEndpoint::of_host(buf.data(), n), CopyEndpoint::of(hbm, 0, n));
    const CopyStats after = dev->copy_stats();
    EXPECT_EQ(after.async_h2d - before.async_h2d, 1u);
    EXPECT_EQ(after.async_d2h - before.async_d2h, 1u);
    EXPECT_EQ(after.bytes_sync - before.bytes_sync, 0u);
    EXPECT_TRUE(has_pattern(buf.data(), n, 3));
}

TEST(VmHostMemory, ZeroBytesOfHugeHostMemoryIsAClearError) {
    REQUIRE_CARD();
    auto dev = Device::get(0);
    try {
        (void)huge_host_empty(dev, 0);
        FAIL() << "huge_host_empty(0) succeeded";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::InvalidArgument) << e.what();
    }
}

} // namespace
} // namespace rbln::test
