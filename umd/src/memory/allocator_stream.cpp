// SPDX-License-Identifier: GPL-2.0
// allocator_stream.cpp - StreamFence / StreamFenceSource over rbln::Event
// and rbln::Stream.

#include "rbln/allocator_stream.hpp"

#include <cstdint>
#include <utility>

namespace rbln {

namespace {

class EventFence final : public StreamFence {
public:
    explicit EventFence(Event event) : event_(std::move(event)) {}
    bool query() override { return event_.query(); }
    void synchronize() override { event_.synchronize(); }

private:
    Event event_;
};

class StreamFences final : public StreamFenceSource {
public:
    explicit StreamFences(Stream stream) : stream_(std::move(stream)) {}
    StreamId stream_id() const noexcept override { return rbln::stream_id(stream_); }
    std::unique_ptr<StreamFence> record() override {
        Event event(false);
        event.record(stream_);
        return std::make_unique<EventFence>(std::move(event));
    }

private:
    Stream stream_;
};

} // namespace

StreamId stream_id(const Stream& stream) noexcept {
    return static_cast<StreamId>(reinterpret_cast<std::uintptr_t>(stream.state().get()));
}

std::shared_ptr<StreamFenceSource> stream_fence_source(const Stream& stream) {
    return std::make_shared<StreamFences>(stream);
}

} // namespace rbln
