// SPDX-License-Identifier: GPL-2.0
// explain_hooks.hpp - the one-line recording hooks of explain regions
// (rbln/explain.hpp) that storage.cpp, copy.cpp and stream.cpp call.
// Private to librbln.
//
// Every hook first reads a process-wide count of open regions (relaxed,
// no lock, no thread-local access); only when some region is open does it
// call into explain.cpp, which looks at this thread's regions.
#pragma once

#include <atomic>
#include <cstdint>

#include "rbln/copy.hpp"
#include "rbln/explain.hpp"

namespace rbln::detail {

/// Regions open in the process (any thread).
extern std::atomic<unsigned> g_explain_open;

inline bool explain_any() noexcept {
    return g_explain_open.load(std::memory_order_relaxed) != 0;
}

void explain_record_commit(std::uint64_t storage, std::uint64_t bytes);
void explain_record_device_use(std::uint64_t storage, bool reads);
void explain_record_copy(const CopyPlan& plan, std::uint64_t bytes, bool non_blocking,
                         bool drained);
void explain_record_wait(ExplainCause cause, const char* why);

/// What a graph replay or recompile adds to the regions (graph.cpp).
struct ExplainGraph {
    std::uint64_t replays = 0;
    std::uint64_t recompiles = 0;
    std::uint64_t defs = 0;
    std::uint64_t bytes = 0;
    std::uint64_t copies = 0;
    std::uint64_t spilled = 0;
};
void explain_record_graph(const ExplainGraph& g);

/// A graph replay or recompile on this thread.
inline void explain_graph(const ExplainGraph& g) {
    if (explain_any())
        explain_record_graph(g);
}

/// A lazy storage got its device memory.
inline void explain_commit(std::uint64_t storage, std::uint64_t bytes) {
    if (explain_any())
        explain_record_commit(storage, bytes);
}

/// A device operation uses the storage (@reads: it reads the data).
inline void explain_device_use(std::uint64_t storage, bool reads) {
    if (explain_any())
        explain_record_device_use(storage, reads);
}

/// A copy() ran as @plan (@drained: it first waited for pending async ones).
inline void explain_copy(const CopyPlan& plan, std::uint64_t bytes, bool non_blocking,
                         bool drained) {
    if (explain_any())
        explain_record_copy(plan, bytes, non_blocking, drained);
}

/// librbln blocked the host on the caller's behalf.
inline void explain_wait(ExplainCause cause, const char* why) {
    if (explain_any())
        explain_record_wait(cause, why);
}

/// While it lives, the copies of this thread are storage @storage's
/// transfers for @cause (an upload, or a download for a read or a write).
class ExplainStorageCause {
public:
    ExplainStorageCause(std::uint64_t storage, ExplainCause cause) noexcept {
        if (explain_any())
            enter(storage, cause);
    }
    ExplainStorageCause(const ExplainStorageCause&) = delete;
    ExplainStorageCause& operator=(const ExplainStorageCause&) = delete;
    ExplainStorageCause(ExplainStorageCause&&) = delete;
    ExplainStorageCause& operator=(ExplainStorageCause&&) = delete;
    ~ExplainStorageCause() {
        if (active_)
            leave();
    }

private:
    void enter(std::uint64_t storage, ExplainCause cause) noexcept;
    void leave() noexcept;
    bool active_ = false;
    std::uint64_t outer_storage_ = 0;
    ExplainCause outer_cause_ = ExplainCause::Copy;
};

} // namespace rbln::detail
