// SPDX-License-Identifier: GPL-2.0
// runtime.hpp - (internal) a device's graph runtime: the Definition cache,
// the pipeline slots with their retained blocks, binds and replays
// (rbln/graph.hpp has the behaviour; this is how).
//
// Locking: one mutex per device (Runtime::mutex_) guards the cache, the
// slots and the counters.  A replay takes it after its boundary tensors'
// device uses (which may enqueue uploads) and holds it while it enqueues
// its job, so the order is runtime mutex -> stream mutex; nothing takes
// them the other way round.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "graph/definition.hpp"
#include "rbln/graph.hpp"
#include "rbln/memory.hpp"
#include "rbln/stream.hpp"

namespace rbln::detail {
struct StreamState;
} // namespace rbln::detail

namespace rbln::detail::graph {

/// How a bind gets the Definition to the card.  Retained is the product
/// (rbln/graph.hpp); Inline and PerObject are the designs it replaced, kept
/// for the benchmark (tests/bench/graph_bench.cpp) and reachable only
/// through this internal header.
enum class UploadPolicy : std::uint8_t {
    Retained,  ///< per slot: a retained block, built in place, one copy per bind
    Inline,    ///< B0: the whole image built (zero fill first) and carried in every submission
    PerObject, ///< B1: one device object per key, plus one allocation + copy per replay
};

/// A job of a stream (what a slot or a Definition was last used by).
struct JobRef {
    std::weak_ptr<StreamState> stream;
    std::uint32_t queue_id = 0;
    std::uint64_t job = 0; ///< 0: none
};

/// What one replay binds.
struct BindRequest {
    std::shared_ptr<const Definition> def;
    std::vector<rbln_fw_graph_binding> bindings;
    std::shared_ptr<Memory> exec; ///< null when the image needs none
    std::uint64_t exec_bytes = 0;
    std::vector<std::shared_ptr<Memory>> buffers; ///< boundary memories (listed in the job)
};

class Runtime {
public:
    explicit Runtime(Device& device) : device_(device) {}

    /// The cache's copy of @def's content (a hit), or @def itself entered
    /// (a miss; may evict).
    std::shared_ptr<const Definition> intern(std::shared_ptr<Definition> def);
    /// Binds and enqueues one GRAPH_EXEC job on @stream; returns its number.
    std::uint64_t replay(Stream& stream, BindRequest request);

    GraphStats stats() const;
    void set_options(const GraphCacheOptions& options);
    void count_capture();
    void count_recompile();
    /// Benchmarks only (see UploadPolicy).
    void set_policy(UploadPolicy policy);

private:
    struct Entry {
        std::shared_ptr<const Definition> def;
        std::uint64_t lru = 0;
        JobRef last_use;
    };
    struct SlotBlock {
        std::shared_ptr<Memory> device;  ///< retained device block
        std::shared_ptr<Memory> staging; ///< retained host staging block
        std::uint64_t capacity = 0;
        std::uint64_t cursor = 0;                  ///< bytes claimed
        std::uint64_t garbage = 0;                 ///< bytes of evicted Definitions
        std::map<std::uint64_t, std::uint64_t> at; ///< key -> object offset (shipped)
        JobRef last_use;                           ///< the last job reading the device block
        JobRef last_copy;                          ///< the last job reading the staging
    };

    bool done(const JobRef& j) const;
    void wait(const JobRef& j);
    std::shared_ptr<const Definition> intern_locked(std::shared_ptr<const Definition> def);
    void evict_locked();
    /// A slot the bind may write without overwriting what an in-flight
    /// replay reads (waits if none is free).
    std::size_t writable_slot_locked(const Stream& stream);
    /// Slot @slot with blocks of @capacity bytes (new ones if larger, else
    /// the same) and its live Definitions rebuilt from offset 0.
    void rebuild_locked(SlotBlock& slot, std::uint64_t capacity);
    void build_at_locked(SlotBlock& slot, const Definition& def, std::uint64_t offset);

    Device& device_;
    mutable std::mutex mutex_;
    GraphCacheOptions options_;
    UploadPolicy policy_ = UploadPolicy::Retained;
    std::unordered_map<std::uint64_t, std::shared_ptr<Memory>> objects_; ///< PerObject's
    bool used_ = false;
    std::uint64_t tick_ = 0;
    std::uint64_t block_target_ = 0; ///< the size blocks grow to (0: options_.block_bytes)
    std::unordered_map<std::uint64_t, Entry> cache_;
    std::vector<SlotBlock> slots_;
    GraphStats stats_;
};

/// @device's runtime (made at first use; lives as long as the device).
Runtime& runtime_of(Device& device);

} // namespace rbln::detail::graph
