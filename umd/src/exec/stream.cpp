// SPDX-License-Identifier: GPL-2.0
// stream.cpp - streams and events over kernel queues (rbln/stream.hpp).

#include "rbln/stream.hpp"

#include <algorithm>
#include <string>

#include "diag/explain_hooks.hpp"
#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "graph/capture.hpp"
#include "kernel/kernel.hpp"
#include "memory/bo_memory.hpp"
#include "runtime/device_state.hpp"

namespace rbln {

namespace detail {

// A stream's priority is its kernel queue's (the same three values).
static_assert(static_cast<std::uint32_t>(StreamPriority::Low) ==
              static_cast<std::uint32_t>(QueuePriority::Low));
static_assert(static_cast<std::uint32_t>(StreamPriority::Normal) ==
              static_cast<std::uint32_t>(QueuePriority::Normal));
static_assert(static_cast<std::uint32_t>(StreamPriority::High) ==
              static_cast<std::uint32_t>(QueuePriority::High));

StreamState::StreamState(Device& dev, StreamPriority priority) : device(dev) {
    dev.state().check_fork();
    std::uint32_t mask = dev.options().chiplet_mask;
    if (mask == 0)
        mask = dev.chiplet_count() >= 32 ? ~0u : (1u << dev.chiplet_count()) - 1;
    queue_id = dev.kernel().queue_create(mask, static_cast<QueuePriority>(priority));
}

StreamState::~StreamState() {
    try {
        if (!pending_waits.empty())
            enqueue_locked(PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
        device.submitter().wait(queue_id, last_job);
    } catch (...) { // NOLINT(bugprone-empty-catch): a destructor cannot report
    }
    try {
        device.submitter().forget_queue(queue_id);
        device.kernel().queue_destroy(queue_id);
    } catch (...) { // NOLINT(bugprone-empty-catch): the queue goes with the fd
    }
}

const std::shared_ptr<Syncobj>& StreamState::timeline_locked() {
    if (!timeline)
        timeline =
            std::make_shared<Syncobj>(device.kernel_ptr(), device.kernel().syncobj_create(0));
    return timeline;
}

std::uint64_t StreamState::enqueue_locked(std::size_t max_bytes,
                                          const std::function<void(CommandEncoder&)>& encode,
                                          std::span<const std::shared_ptr<Memory>> buffers,
                                          std::optional<SyncPoint> out,
                                          std::shared_ptr<const void> extra_keep) {
    if (graph::any_capture() && graph::capturing(this))
        throw Error(Errc::InvalidArgument, "enqueue", device.kernel().path(), 0,
                    "the stream is capturing a graph: only rbln::ops calls are recorded; "
                    "enqueue copies, fills and event records after end_capture()");
    max_bytes = (max_bytes + 7) / 8 * 8;
    // A command buffer with room: the current one, else one the card is
    // done with (its last job is done; the kernel holds the BO of a job
    // itself), else a new one.
    if (chunks.empty() || chunk_used + max_bytes > chunks[current_chunk]->size()) {
        const std::uint64_t done = device.submitter().completed(queue_id);
        std::size_t pick = chunks.size();
        for (std::size_t i = 0; i < chunks.size(); i++)
            if (i != current_chunk && chunk_last_job[i] <= done && chunks[i]->size() >= max_bytes) {
                pick = i;
                break;
            }
        if (pick == chunks.size()) {
            chunks.push_back(BoMemory::create_host(
                device.kernel_ptr(), std::max(device.options().command_chunk_bytes, max_bytes)));
            chunk_last_job.push_back(0);
        }
        current_chunk = pick;
        chunk_used = 0;
    }
    const std::shared_ptr<Memory>& chunk = chunks[current_chunk];
    CommandEncoder enc(std::span<std::byte>(chunk->host_data() + chunk_used, max_bytes),
                       chunk->device_va() + chunk_used);
    encode(enc);
    if (enc.empty())
        enc.nop();

    Job job;
    job.queue_id = queue_id;
    job.cmd_handle = chunk->handle();
    job.cmd_offset = chunk_used;
    job.cmd_size = static_cast<std::uint32_t>(enc.size());
    if (const std::size_t keeps = buffers.size() + pending_keep.size() + (extra_keep ? 1 : 0);
        keeps > 0)
        job.keep_alive.reserve(keeps);
    if (!buffers.empty())
        job.bo_handles.reserve(buffers.size());
    for (const auto& b : buffers) {
        if (std::find(job.bo_handles.begin(), job.bo_handles.end(), b->handle()) ==
            job.bo_handles.end())
            job.bo_handles.push_back(b->handle());
        job.keep_alive.push_back(b);
    }
    if (!pending_waits.empty()) {
        job.in_syncs = std::move(pending_waits);
        pending_waits.clear();
    }
    if (!pending_keep.empty()) {
        for (auto& k : pending_keep)
            job.keep_alive.push_back(std::move(k));
        pending_keep.clear();
    }
    if (extra_keep)
        job.keep_alive.push_back(std::move(extra_keep));
    if (out)
        job.out = *out;
    chunk_used += enc.size();

    const std::uint64_t n = device.submitter().enqueue(std::move(job));
    chunk_last_job[current_chunk] = n;
    last_job = n;
    return n;
}

void StreamState::wait_job(std::uint64_t n) {
    if (n != 0)
        device.submitter().wait(queue_id, n);
}

void StreamState::synchronize() {
    std::uint64_t n = 0;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!pending_waits.empty()) // the waits are work of the stream too
            enqueue_locked(PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
        n = last_job;
    }
    wait_job(n);
    if (auto f = device.submitter().take_failure(queue_id))
        throw job_error(*f, device.kernel().path());
}

} // namespace detail

// ---- Stream -------------------------------------------------------------------

Stream::Stream(std::shared_ptr<Device> device, StreamPriority priority)
    : device_(std::move(device)), s_(std::make_shared<detail::StreamState>(*device_, priority)) {
    auto& ds = device_->state();
    const std::lock_guard<std::mutex> lock(ds.mutex);
    std::erase_if(ds.streams, [](const auto& w) { return w.expired(); });
    ds.streams.push_back(s_);
}

Stream::Stream(std::shared_ptr<Device> device, std::shared_ptr<detail::StreamState> state)
    : device_(std::move(device)), s_(std::move(state)) {}

Device& Stream::device() const noexcept {
    return *device_;
}

std::uint32_t Stream::queue_id() const noexcept {
    return s_->queue_id;
}

bool Stream::query() {
    device_->state().check_fork();
    std::uint64_t n = 0;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        if (!s_->pending_waits.empty())
            s_->enqueue_locked(PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {});
        n = s_->last_job;
    }
    if (n == 0)
        return true;
    return device_->submitter().done(s_->queue_id, n);
}

void Stream::synchronize() {
    device_->state().check_fork();
    s_->synchronize();
}

void Stream::wait_event(const Event& event) {
    std::shared_ptr<Device> dev;
    std::shared_ptr<detail::StreamState> from;
    std::shared_ptr<detail::Syncobj> timeline;
    std::uint64_t point = 0;
    {
        const std::lock_guard<std::mutex> lock(event.s_->mutex);
        if (!event.s_->device)
            return; // never recorded: complete
        dev = event.s_->device;
        from = event.s_->stream.lock();
        timeline = event.s_->timeline;
        point = event.s_->point;
    }
    if (!from || from == s_)
        return; // its stream finished all its work when it went away / in order anyway
    if (dev.get() != device_.get()) {
        // Syncobjs belong to one open file: wait on the host.
        detail::explain_wait(ExplainCause::CrossDeviceWait,
                             "wait_event on another device's event waited on the host");
        from->wait_job(point);
        return;
    }
    const std::lock_guard<std::mutex> lock(s_->mutex);
    s_->pending_waits.push_back(SyncPoint{timeline->handle, point});
    s_->pending_keep.push_back(timeline);
}

void Stream::fill(const std::shared_ptr<Memory>& memory, std::uint64_t offset, std::uint64_t size,
                  std::uint64_t pattern, unsigned pattern_bytes) {
    if (offset > memory->size() || size > memory->size() - offset)
        throw Error(Errc::InvalidArgument, "fill", device_->kernel().path(), 0,
                    "the range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                        ") is outside the " + std::to_string(memory->size()) + "-byte memory");
    const std::uint64_t va = memory->device_va() + offset;
    const std::shared_ptr<Memory> bufs[] = {memory};
    enqueue(
        PacketSize::fill, [&](CommandEncoder& e) { e.fill(va, size, pattern, pattern_bytes); },
        bufs);
}

void Stream::launch(const KernelLaunch& l, std::span<const std::shared_ptr<Memory>> buffers) {
    enqueue(
        PacketSize::launch, [&](CommandEncoder& e) { e.launch(l); }, buffers);
}

std::uint64_t Stream::enqueue(std::size_t max_bytes,
                              const std::function<void(CommandEncoder&)>& encode,
                              std::span<const std::shared_ptr<Memory>> buffers) {
    device_->state().check_fork(); // fill, launch and the rest come through here
    for (const auto& b : buffers)
        if (&b->kernel() != &device_->kernel())
            throw Error(Errc::InvalidArgument, "enqueue", device_->kernel().path(), 0,
                        "a buffer of another device (" + b->kernel().path() +
                            ") cannot be used by this stream's jobs");
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->enqueue_locked(max_bytes, encode, buffers);
}

std::uint64_t Stream::last_job() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->last_job;
}

// ---- Event --------------------------------------------------------------------

Event::Event(bool timing) : s_(std::make_shared<detail::EventState>(timing)) {}

void Event::record(Stream& stream) {
    auto& st = *stream.s_;
    std::shared_ptr<detail::TimestampSlot> slot;
    if (s_->timing)
        slot = stream.device().state().timestamp_slot();
    std::uint64_t n = 0;
    std::shared_ptr<detail::Syncobj> timeline;
    {
        const std::lock_guard<std::mutex> lock(st.mutex);
        timeline = st.timeline_locked();
        const SyncPoint out{timeline->handle, st.last_job + 1};
        if (slot) {
            const std::uint64_t va = slot->va();
            const std::shared_ptr<Memory> bufs[] = {slot->page};
            n = st.enqueue_locked(
                PacketSize::timestamp, [&](CommandEncoder& e) { e.timestamp(va); }, bufs, out,
                slot);
        } else {
            n = st.enqueue_locked(
                PacketSize::nop, [](CommandEncoder& e) { e.nop(); }, {}, out);
        }
    }
    const std::lock_guard<std::mutex> lock(s_->mutex);
    s_->device = stream.device_;
    s_->stream = stream.s_;
    s_->queue_id = st.queue_id;
    s_->job = n;
    s_->timeline = std::move(timeline);
    s_->point = n;
    s_->slot = std::move(slot);
}

bool Event::recorded() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->device != nullptr;
}

bool Event::query() const {
    std::shared_ptr<Device> dev;
    std::shared_ptr<detail::StreamState> st;
    std::uint64_t n = 0;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        if (!s_->device)
            return true;
        dev = s_->device;
        st = s_->stream.lock();
        n = s_->job;
    }
    if (!st)
        return true;
    return dev->submitter().done(st->queue_id, n);
}

void Event::synchronize() const {
    std::shared_ptr<detail::StreamState> st;
    std::uint64_t n = 0;
    {
        const std::lock_guard<std::mutex> lock(s_->mutex);
        if (!s_->device)
            return;
        st = s_->stream.lock();
        n = s_->job;
    }
    if (st)
        st->wait_job(n);
}

double Event::elapsed_time(const Event& start, const Event& end) {
    auto stamp = [](const Event& e, const char* which) {
        std::shared_ptr<detail::TimestampSlot> slot;
        {
            const std::lock_guard<std::mutex> lock(e.s_->mutex);
            if (!e.s_->device)
                throw Error(Errc::InvalidArgument, "elapsed_time", "", 0,
                            std::string("the ") + which + " event was never recorded");
            if (!e.s_->timing)
                throw Error(Errc::InvalidArgument, "elapsed_time", "", 0,
                            std::string("the ") + which + " event was made without timing");
            slot = e.s_->slot;
        }
        if (!e.query())
            throw Error(Errc::NotReady, "elapsed_time", "", 0,
                        std::string("the work before the ") + which +
                            " event has not completed yet");
        return slot->read();
    };
    const std::uint64_t t0 = stamp(start, "start");
    const std::uint64_t t1 = stamp(end, "end");
    return (static_cast<double>(t1) - static_cast<double>(t0)) / 1e6;
}

} // namespace rbln
