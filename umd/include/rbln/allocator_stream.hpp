// SPDX-License-Identifier: GPL-2.0
// rbln/allocator_stream.hpp - librbln's streams as the caching allocator
// sees them: a StreamId per stream and fences that are rbln::Events.
#pragma once

#include <memory>

#include "rbln/allocator.hpp"
#include "rbln/stream.hpp"

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// The allocator's id of @stream (stable while any handle of it lives).
StreamId stream_id(const Stream& stream) noexcept;

/// For DeviceAllocator::record_stream(): at free() time an event without
/// timing (a NOP job) is recorded on @stream; the block returns to its pool
/// once that event is done.  Holds a handle of the stream until then.
std::shared_ptr<StreamFenceSource> stream_fence_source(const Stream& stream);

/// DeviceAllocator::allocate() on @stream.
inline DeviceBlock allocate_on(DeviceAllocator& allocator, std::uint64_t size, const Stream& stream,
                               std::optional<unsigned> place = {}) {
    return allocator.allocate(size, stream_id(stream), place);
}

} // namespace rbln

#pragma GCC visibility pop
