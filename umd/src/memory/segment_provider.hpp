// SPDX-License-Identifier: GPL-2.0
// segment_provider.hpp - (internal) where the caching allocator
// (rbln/allocator.hpp) gets its segments: a SegmentProvider per chiplet,
// KernelSegmentProvider over the HBM buffers of a node, fakes in tests
// (tests/umd/fake_segment_provider.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kernel/kernel.hpp"
#include "rbln/allocator.hpp"

namespace rbln {

/// A piece of device memory the allocator carves blocks from.
struct Segment {
    std::uint32_t handle = 0; ///< GEM handle (0 for fakes that have none)
    std::uint64_t device_va = 0;
    std::uint64_t size = 0;
};

/// Where segments come from: HBM buffers of one chiplet (KernelSegmentProvider)
/// or a fake in tests.  Called with the allocator's mutex held (skipped while
/// the process has one thread: a provider must not start a thread that uses
/// the allocator while it is called).
class SegmentProvider {
public:
    SegmentProvider() = default;
    SegmentProvider(const SegmentProvider&) = delete;
    SegmentProvider& operator=(const SegmentProvider&) = delete;
    SegmentProvider(SegmentProvider&&) = delete;
    SegmentProvider& operator=(SegmentProvider&&) = delete;
    virtual ~SegmentProvider() = default;

    /// A segment of exactly @size bytes (a multiple of 2 MiB); nullopt when
    /// the chiplet has no room (the allocator then frees cache and retries).
    /// Other failures throw rbln::Error.
    virtual std::optional<Segment> allocate(std::uint64_t size) = 0;
    /// Gives a segment back.  Must not throw.
    virtual void release(const Segment& segment) noexcept = 0;
    /// The chiplet's HBM in bytes.
    virtual std::uint64_t capacity() const noexcept = 0;
    /// The chiplet's free HBM as the kernel sees it (all processes), if known.
    virtual std::optional<std::uint64_t> free_bytes() const { return std::nullopt; }
    /// The node the memory belongs to, for messages ("" if none).
    virtual std::string node() const { return {}; }
};

/// Segments = RBLN_BO_CREATE(region HBM, @chiplet) buffers; release = GEM close.
/// In a fork() child (which shares the parent's open file, and so its GEM
/// handles) it makes no buffer (Errc::BadFork); KernelDevice's gem_close
/// does nothing there, so the parent's segments stay.
class KernelSegmentProvider final : public SegmentProvider {
public:
    /// @free_probe (optional) reads the chiplet's free HBM, e.g. from sysfs
    /// (chiplet<i>/hbm_used_bytes); without it the OOM message gives an
    /// upper bound (capacity minus what this allocator holds).
    KernelSegmentProvider(std::shared_ptr<KernelInterface> kernel, unsigned chiplet,
                          std::uint64_t capacity,
                          std::function<std::optional<std::uint64_t>()> free_probe = {});

    std::optional<Segment> allocate(std::uint64_t size) override;
    void release(const Segment& segment) noexcept override;
    std::uint64_t capacity() const noexcept override { return capacity_; }
    std::optional<std::uint64_t> free_bytes() const override;
    std::string node() const override { return kernel_->path(); }
    const std::shared_ptr<KernelInterface>& kernel() const noexcept { return kernel_; }

private:
    std::shared_ptr<KernelInterface> kernel_;
    unsigned chiplet_;
    std::uint64_t capacity_;
    std::function<std::optional<std::uint64_t>()> free_probe_;
    long pid_; ///< the process that made it
};

/// One chiplet the allocator manages.
struct AllocatorPlace {
    unsigned npu = 0;     ///< NPU id in the logical device (index into the visible list)
    unsigned chiplet = 0; ///< chiplet of that NPU
    std::unique_ptr<SegmentProvider> provider;
};

} // namespace rbln
