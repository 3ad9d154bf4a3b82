// SPDX-License-Identifier: GPL-2.0
// rbln/stream.hpp - streams and events, with CUDA's semantics.
//
// Stream.  Work on one stream runs in the order it was enqueued; work on
// different streams may overlap.  Each stream is one kernel queue (over
// all chiplets of the card: the kernel keeps a busy queue on one chiplet
// and moves an idle one to the least loaded), each enqueued operation one
// job whose packets the stream encodes into its command buffers; jobs
// reach the kernel in batches (rbln/submitter_options.hpp): when a batch
// is full and at every query(), synchronize() or Device::flush().  Every
// device has a default stream (Device::default_stream()) that is an
// ordinary stream: it does not synchronise with the others (as CUDA's
// per-thread default stream).  A Stream is a handle: copies share the
// stream.  Destroying the last handle waits for the stream's work.
//
// Errors of the card (a job that faulted or timed out) are reported by the
// next synchronize() of the stream (or of the device), once, as an Error
// with Errc::JobFailed / Errc::Timeout; the stream stays usable.
//
// Event.  record(stream) marks the point of the stream reached by the work
// enqueued so far (work enqueued later is outside it; recording again moves
// the mark).  query() is true once everything before the mark is done, and
// for an event never recorded.  synchronize() blocks the host until then.
// Stream::wait_event(e) makes later work of the stream wait for e on the
// device (a timeline-syncobj in-fence of the stream's next job): the host
// does not block.  An event records the card time at its mark (a TIMESTAMP
// packet) unless made with timing off; elapsed_time(start, end) is the card
// time between the two marks in milliseconds.
//
// Thread safety: streams and events may be used from any thread; one
// stream's operations are serialised by the stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "rbln/export.h"
#include "rbln/memory.hpp"

// librbln's own (umd/src), hidden from librbln.so (rbln/export.h).
namespace rbln {
class CommandEncoder;
struct KernelLaunch;
namespace detail {
struct StreamState;
struct EventState;
} // namespace detail
} // namespace rbln

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

class Device;
class Event;
class Graph;

enum class StreamPriority : std::uint32_t { Low = 0, Normal = 1, High = 2 };

class Stream {
public:
    /// The device's default stream is Device::default_stream(); this makes
    /// a new stream (a new kernel queue).
    Stream(std::shared_ptr<Device> device, StreamPriority priority = StreamPriority::Normal);

    Device& device() const noexcept;
    std::uint32_t queue_id() const noexcept;

    /// True when all work enqueued on the stream so far is done.
    bool query();
    /// Blocks until all work enqueued so far is done; throws the first
    /// failure of the stream's jobs since the last synchronize().
    void synchronize();
    /// Later work of the stream waits for @event on the device.  A
    /// never-recorded event is a no-op.  An event of another device is
    /// waited for on the host (no device-side fence reaches across cards).
    void wait_event(const Event& event);

    /// Graph capture (rbln/graph.hpp, include it for Graph): until
    /// end_capture(), the rbln::ops calls on this stream are recorded into
    /// a graph instead of run; low-level work (fill(), copy(), events) on a
    /// capturing stream is refused (Errc::InvalidArgument).
    void begin_capture();
    Graph end_capture();
    bool capturing() const;

    /// FILL of @size bytes of @memory at @offset with a 1/2/4/8-byte pattern.
    void fill(const std::shared_ptr<Memory>& memory, std::uint64_t offset, std::uint64_t size,
              std::uint64_t pattern, unsigned pattern_bytes = 1);
    /// A built-in kernel; @buffers are the memories its addresses point
    /// into (internal: rbln/ops.hpp is the public face).
    RBLN_LOCAL void launch(const KernelLaunch& launch,
                           std::span<const std::shared_ptr<Memory>> buffers);

    /// Low level: one job of packets written by @encode (at most @max_bytes),
    /// using @buffers (listed in the job and kept alive until it is done).
    /// Returns the job's number on the stream's queue.  Internal (the
    /// encoder is librbln's own).
    RBLN_LOCAL std::uint64_t enqueue(std::size_t max_bytes,
                                     const std::function<void(CommandEncoder&)>& encode,
                                     std::span<const std::shared_ptr<Memory>> buffers);
    /// The number of the last job enqueued (0: none).
    std::uint64_t last_job() const;

    bool operator==(const Stream& other) const noexcept { return s_ == other.s_; }
    /// librbln internals (copies).
    const std::shared_ptr<detail::StreamState>& state() const noexcept { return s_; }

private:
    friend class Device;
    friend class Event;
    friend struct detail::StreamState;
    RBLN_LOCAL Stream(std::shared_ptr<Device> device, std::shared_ptr<detail::StreamState> state);
    std::shared_ptr<Device> device_; // declared first: outlives s_
    std::shared_ptr<detail::StreamState> s_;
};

class Event {
public:
    /// @timing: record card timestamps (needed by elapsed_time()).
    explicit Event(bool timing = true);

    /// Marks the work enqueued on @stream so far.
    void record(Stream& stream);
    /// True when the marked work is done, or if never recorded.
    bool query() const;
    /// Blocks until the marked work is done.
    void synchronize() const;
    bool recorded() const;

    /// Card time from @start's mark to @end's, in milliseconds.
    /// Errc::InvalidArgument if either was never recorded or has no
    /// timing, Errc::NotReady if either mark is not done yet.
    static double elapsed_time(const Event& start, const Event& end);

private:
    friend class Stream;
    std::shared_ptr<detail::EventState> s_;
};

} // namespace rbln

#pragma GCC visibility pop
