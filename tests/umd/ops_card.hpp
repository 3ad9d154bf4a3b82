// SPDX-License-Identifier: GPL-2.0
// ops_card.hpp - a FakeKernel device that runs its packets, with the caching
// allocator over the same fake and its default stream: what the explain
// and ops tests make lazy storages on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "device_fixture.hpp"
#include "fake_kernel.hpp"
#include "memory/segment_provider.hpp"
#include "rbln/allocator.hpp"
#include "rbln/storage.hpp"

namespace rbln::test {

struct OpsCard {
    explicit OpsCard(std::string path = "/dev/accel/accel0")
        : k(std::make_shared<FakeKernel>(std::move(path))) {
        alloc = DeviceAllocator::for_kernels(0, {{0, k}});
        dev = fake_device(k, Path::Ioctl);
        stream.emplace(dev->default_stream());
    }
    ~OpsCard() {
        stream.reset();
        dev.reset();
    }
    OpsCard(const OpsCard&) = delete;
    OpsCard& operator=(const OpsCard&) = delete;
    OpsCard(OpsCard&&) = delete;
    OpsCard& operator=(OpsCard&&) = delete;

    std::shared_ptr<Storage> lazy(std::uint64_t nbytes, ElementType t = ElementType::U8) {
        return Storage::create(dev, *alloc, nbytes, t, StorageOptions{CommitMode::Lazy, {}});
    }

    std::shared_ptr<FakeKernel> k;
    std::unique_ptr<DeviceAllocator> alloc;
    std::shared_ptr<Device> dev;
    std::optional<Stream> stream;
};

} // namespace rbln::test
