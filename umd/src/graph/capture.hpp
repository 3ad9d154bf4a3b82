// SPDX-License-Identifier: GPL-2.0
// capture.hpp - (internal) stream capture: the recorder behind
// Stream::begin_capture() / end_capture() (rbln/graph.hpp), and the hooks
// ops.cpp, storage.cpp and stream.cpp call.
//
// With no capture open anywhere in the process every hook is one relaxed
// load and a branch.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rbln/graph.hpp"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"
#include "rbln_fw_graph.h"

namespace rbln::detail {
struct StreamState;
} // namespace rbln::detail

namespace rbln::detail::graph {

/// Captures open in the process.
extern std::atomic<unsigned> g_open_captures;
inline bool any_capture() noexcept {
    return g_open_captures.load(std::memory_order_relaxed) != 0;
}

/// One operand slot of a recorded node (LAUNCH a, b, out; COPY src, dst;
/// FILL dst).
struct Slot {
    std::shared_ptr<Storage> storage; ///< null: unused
    std::uint64_t byte_offset = 0;    ///< of the operand's first element
    DeviceAccess access = DeviceAccess::Read;
};

/// A slot as recorded: a storage made inside the capture is held by id
/// only (so it dies when the caller drops it: an intermediate), any other
/// one by reference (a boundary tensor).
struct RecordedSlot {
    bool used = false;
    std::uint64_t id = 0;
    std::uint64_t nbytes = 0;
    std::shared_ptr<Storage> boundary; ///< null for a capture-made storage
    std::uint64_t byte_offset = 0;
    DeviceAccess access = DeviceAccess::Read;
};

struct RecordedNode {
    std::uint32_t op = 0;
    std::array<std::byte, 192> pkt{}; ///< the packet, addresses zero
    std::array<RecordedSlot, RBLN_FW_GRAPH_OPERANDS> slots;
};

class Capture {
public:
    explicit Capture(Stream stream);
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
    Capture(Capture&&) = delete;
    Capture& operator=(Capture&&) = delete;
    ~Capture();

    /// A storage made on the capturing thread during the capture.
    void created(const std::shared_ptr<Storage>& storage);
    /// Records one node (@pkt: the packet with its header, addresses zero).
    void record(std::uint32_t op, std::span<const std::byte> pkt,
                const std::array<Slot, RBLN_FW_GRAPH_OPERANDS>& slots);
    /// Ends the capture: the executable graph (Errc::InvalidArgument when
    /// nothing was recorded).  The capture is closed either way.
    Graph finish();
    /// Closes the capture without a graph (a failed GraphFunction body).
    void abandon() noexcept;

    const Stream& stream() const noexcept { return stream_; }
    std::thread::id thread() const noexcept { return thread_; }
    bool made_here(std::uint64_t storage_id) const;

private:
    void close() noexcept;

    Stream stream_;
    std::thread::id thread_;
    bool open_ = true;
    mutable std::mutex mutex_;
    std::vector<std::weak_ptr<Storage>> created_; ///< in creation order
    std::vector<std::uint64_t> created_ids_;      ///< the same, by id
    std::vector<RecordedNode> nodes_;
};

/// The capture open on @stream, or null.
std::shared_ptr<Capture> capture_of(const Stream& stream);
/// Whether a capture is open on the stream of @state.
bool capturing(const StreamState* state);
/// Opens / takes the capture of @stream (stream.cpp).
void begin(Stream& stream);
std::shared_ptr<Capture> take(Stream& stream);

/// Storage::finish(): registers @storage with the capture open on this
/// thread, if any (true).
bool note_created(const std::shared_ptr<Storage>& storage);
/// Errc::InvalidArgument if @storage_id was made inside a capture that is
/// still open and @stream is not its stream (nullptr: a host use).
void check_outside_use(const char* what, std::uint64_t storage_id, const Stream* stream);

} // namespace rbln::detail::graph
