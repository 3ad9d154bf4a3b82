// SPDX-License-Identifier: GPL-2.0
// fake_segment_provider.hpp - segments for the caching allocator's tests
// without a kernel: a chiplet of a given capacity (VAs from a counter, a
// gap between segments so adjacency inside a segment is what tests see),
// fences whose completion the test decides.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"

namespace rbln::test {

/// The state of one fake chiplet, shared between the test and its provider.
struct FakeHbm {
    std::uint64_t capacity = 0;
    std::uint64_t used = 0;
    std::uint64_t next_va = 0;
    std::uint32_t next_handle = 1;
    int allocs = 0;   ///< successful allocate() calls
    int refusals = 0; ///< allocate() calls answered "no room"
    int releases = 0;
    std::map<std::uint64_t, std::uint64_t> live; ///< VA -> size
    std::vector<std::uint64_t> asked;            ///< sizes asked, in order
};

class FakeSegmentProvider final : public SegmentProvider {
public:
    FakeSegmentProvider(std::shared_ptr<FakeHbm> hbm, bool report_free = true)
        : hbm_(std::move(hbm)), report_free_(report_free) {}

    std::optional<Segment> allocate(std::uint64_t size) override {
        hbm_->asked.push_back(size);
        if (hbm_->used + size > hbm_->capacity) {
            hbm_->refusals++;
            return std::nullopt;
        }
        hbm_->used += size;
        hbm_->allocs++;
        const std::uint64_t va = hbm_->next_va;
        hbm_->next_va += size + (1ull << 30);
        hbm_->live[va] = size;
        return Segment{hbm_->next_handle++, va, size};
    }
    void release(const Segment& s) noexcept override {
        hbm_->releases++;
        hbm_->used -= s.size;
        hbm_->live.erase(s.device_va);
    }
    std::uint64_t capacity() const noexcept override { return hbm_->capacity; }
    std::optional<std::uint64_t> free_bytes() const override {
        if (!report_free_)
            return std::nullopt;
        return hbm_->capacity - hbm_->used;
    }
    std::string node() const override { return "/dev/accel/accel0"; }

private:
    std::shared_ptr<FakeHbm> hbm_;
    bool report_free_;
};

/// One fence: done when the test says so (or when synchronized).
struct FakeFenceState {
    bool done = false;
    int syncs = 0;
};

class FakeFence final : public StreamFence {
public:
    explicit FakeFence(std::shared_ptr<FakeFenceState> s) : s_(std::move(s)) {}
    bool query() override { return s_->done; }
    void synchronize() override {
        s_->syncs++;
        s_->done = true;
    }

private:
    std::shared_ptr<FakeFenceState> s_;
};

/// A stream that other blocks are recorded on; keeps every fence it made.
class FakeStream final : public StreamFenceSource {
public:
    explicit FakeStream(StreamId id) : id_(id) {}
    StreamId stream_id() const noexcept override { return id_; }
    std::unique_ptr<StreamFence> record() override {
        auto s = std::make_shared<FakeFenceState>();
        fences.push_back(s);
        return std::make_unique<FakeFence>(s);
    }
    void complete_all() {
        for (auto& f : fences)
            f->done = true;
    }
    std::vector<std::shared_ptr<FakeFenceState>> fences;

private:
    StreamId id_;
};

inline constexpr std::uint64_t KiB = 1024;
inline constexpr std::uint64_t MiB = 1024 * 1024;

/// An allocator over @n fake chiplets of @capacity each (NPU 0, chiplets
/// 0..n-1); the chiplets' state lands in @hbm.
inline std::unique_ptr<DeviceAllocator> fake_allocator(std::vector<std::shared_ptr<FakeHbm>>& hbm,
                                                       unsigned n = 1,
                                                       std::uint64_t capacity = 1024 * MiB,
                                                       AllocatorConfig config = {},
                                                       unsigned device_index = 0) {
    std::vector<AllocatorPlace> places;
    hbm.clear();
    for (unsigned c = 0; c < n; c++) {
        auto h = std::make_shared<FakeHbm>();
        h->capacity = capacity;
        h->next_va = (std::uint64_t{c} + 1) << 40;
        hbm.push_back(h);
        places.push_back(AllocatorPlace{0, c, std::make_unique<FakeSegmentProvider>(h)});
    }
    return std::make_unique<DeviceAllocator>(device_index, std::move(places), config);
}

} // namespace rbln::test
