// SPDX-License-Identifier: GPL-2.0
// rbln/explain.hpp - explain regions: what librbln did with the host behind
// the caller's back while a region was open.
//
//     auto region = rbln::explain("train step");
//     ... uploads, device operations, reads ...
//     std::cout << region.report();
//
// Scope.  A region is per thread: it records what librbln does on the
// thread that opened it, from its construction until close() or its
// destruction (librbln's transfers, copies and waits run on the calling
// thread, so everything a call of this thread causes is seen; work other
// threads cause is theirs).  Regions nest: an event is recorded in every
// region open on the thread, and each region classifies its own events
// (an inner region does not know what happened before it opened).
// Regions are closed in reverse order of opening; a region must be
// closed on the thread that opened it.  Reading a region (counts(),
// records(), report()) is allowed from any thread, also after close().
//
// What is recorded (ExplainKind):
//   Push           a synchronous host->device transfer: a storage's upload
//                  before a device operation, or a synchronous copy() from
//                  host memory to the device;
//   Download       a physical device->host transfer: a storage's download,
//                  or a synchronous copy() from the device to host memory;
//   AsyncTransfer  an asynchronous copy() (one COPY packet, pinned host
//                  memory or device to device);
//   HostBounce     a device-to-device copy whose data went through host
//                  memory: between two logical devices (copy.hpp), or a
//                  synchronous copy on one device through its staging buffer;
//   SyncWait       the host blocked on the caller's behalf: a synchronous
//                  copy first drained the device's pending asynchronous
//                  transfers, a copy() asked for non_blocking ran
//                  synchronously, or Stream::wait_event on an event of
//                  another device waited on the host;
//   LazyCommit     a lazy storage got its device memory (first device use,
//                  data_ptr(), bind_device_memory(), ...).
// Graph replays and recompiles (rbln/graph.hpp) are counted, not recorded
// (neither is a host round trip): counts() has them and, when there was
// one, the report adds the lines
//   "  graphs: R replays, C recompiles" and
//   "  graph_upload defs=D bytes=B copies=K spilled=S"
// (Definitions built into a block, bytes and COPY packets of the binds,
// Definitions that did not fit the blocks).
// Not recorded: the caller's own Stream/Event/Device synchronize() calls
// (the caller asked for them) and the caching allocator's own waits (its
// out-of-memory retry; see num_alloc_retries in its statistics).
//
// Expected and signals.  Every record is either expected or a signal.
// Expected are exactly:
//   - the first upload of a storage in the region when its host copy holds
//     what the caller wrote with Storage::write (a storage is host-latest
//     only after a caller's write) and the region has not downloaded that
//     storage before (data the caller put on the host, pushed once);
//   - a download made because the caller read a storage (Storage::read)
//     that no later device operation in the region reads (a result the
//     caller asked for; reading an intermediate the device then uses again
//     turns it into a signal when that device use happens);
//   - a host<->device copy() the caller made itself, run as it asked
//     (synchronous, or asynchronous with non_blocking);
//   - asynchronous transfers and lazy commits (neither is a host round trip).
// Everything else is a signal: a second upload of the same storage, an
// upload of data the region downloaded (a host round trip of device data),
// a download for a host write of part of a device-latest storage, a
// download of an intermediate, every host bounce and every SyncWait.
//
// report() starts with "[clean]" when the region has no signal and
// "[overhead: N signals]" otherwise, then the counts, then a table of the
// signals (kind, bytes, storage, source location, why).  Clean means that
// no hidden host round trip happened, not that the region was fast: it
// says nothing about kernel time, the number of launches or memory use.
//
// Source locations.  rbln::explain() and ExplainRegion record where the
// region was opened.  A record gets a source location when the caller
// passes one: while an ExplainSite lives on the thread (innermost wins),
// records carry its location; the ops of rbln/ops.hpp open one with their
// source_location default argument (std::source_location where the
// compiler has it, rbln/source_location.hpp), so each op's transfers name
// the line that called it.  Records without a site show "-".
//
// Cost.  With no region open anywhere in the process, every hook is one
// relaxed load of a process-wide counter and a branch (no lock, no
// thread-local access); with a region open on another thread, hooks also
// read a thread-local pointer.  Recording takes the region's mutex.
#pragma once

#include "rbln/source_location.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rbln::detail {
struct ExplainState; // librbln's own (explain.cpp), hidden (rbln/export.h)
} // namespace rbln::detail

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

enum class ExplainKind : std::uint8_t {
    Push,
    Download,
    AsyncTransfer,
    HostBounce,
    SyncWait,
    LazyCommit
};

/// What caused a record.
enum class ExplainCause : std::uint8_t {
    Copy,           ///< the caller's copy()
    DeviceUse,      ///< a device operation used a storage (upload, commit)
    HostRead,       ///< Storage::read
    HostWrite,      ///< Storage::write of part of a device-latest storage
    CrossDeviceWait ///< Stream::wait_event on another device's event
};

/// "push", "download", "async transfer", "host bounce", "sync wait", "lazy commit".
const char* explain_kind_name(ExplainKind kind) noexcept;

/// A source location, as the caller passed it (file "" and line 0: none).
struct ExplainLocation {
    std::string file;
    std::uint32_t line = 0;
    std::string function;

    ExplainLocation() = default;
    ExplainLocation(rbln::source_location where) // NOLINT(google-explicit-constructor)
        : file(where.file_name()), line(where.line()), function(where.function_name()) {}
    ExplainLocation(std::string file_name, std::uint32_t line_number,
                    std::string function_name = {})
        : file(std::move(file_name)), line(line_number), function(std::move(function_name)) {}
    bool known() const noexcept { return !file.empty(); }
    /// "file:line" with the file's directories dropped, or "-".
    std::string brief() const;
};

struct ExplainRecord {
    ExplainKind kind = ExplainKind::Push;
    ExplainCause cause = ExplainCause::Copy;
    bool signal = false;
    std::uint64_t bytes = 0;
    std::uint64_t storage = 0; ///< Storage::id(), 0: not a storage's
    ExplainLocation where;     ///< the innermost ExplainSite, if any
    std::string why;           ///< what happened, in words
};

/// Totals of a region.  *_expected: how many of them were expected.
struct ExplainCounts {
    std::uint64_t pushes = 0;
    std::uint64_t push_bytes = 0;
    std::uint64_t pushes_expected = 0;
    std::uint64_t downloads = 0;
    std::uint64_t download_bytes = 0;
    std::uint64_t downloads_expected = 0;
    std::uint64_t async_transfers = 0;
    std::uint64_t async_bytes = 0;
    std::uint64_t host_bounces = 0;
    std::uint64_t host_bounce_bytes = 0;
    std::uint64_t sync_waits = 0;
    std::uint64_t lazy_commits = 0;
    std::uint64_t commit_bytes = 0;
    std::uint64_t signals = 0;
    // Graphs (rbln/graph.hpp): replays and GraphFunction recompiles, and
    // what the replays' binds uploaded (the report's graph_upload line).
    std::uint64_t graph_replays = 0;
    std::uint64_t graph_recompiles = 0;
    std::uint64_t graph_defs = 0;         ///< Definitions built into a block
    std::uint64_t graph_upload_bytes = 0; ///< bytes the binds copied
    std::uint64_t graph_copies = 0;       ///< COPY packets of the binds
    std::uint64_t graph_spilled = 0;      ///< Definitions built outside the blocks
};

class ExplainRegion {
public:
    /// Opens a region on this thread, named @name, opened at @where.
    explicit ExplainRegion(std::string name = {},
                           ExplainLocation where = rbln::source_location::current());
    ExplainRegion(const ExplainRegion&) = delete;
    ExplainRegion& operator=(const ExplainRegion&) = delete;
    ExplainRegion(ExplainRegion&&) = delete;
    ExplainRegion& operator=(ExplainRegion&&) = delete;
    /// Closes it (if open).
    ~ExplainRegion();

    /// Stops recording (the records stay); idempotent.  Errc::InvalidArgument
    /// on another thread than the one that opened it.
    void close();
    bool open() const noexcept;

    const std::string& name() const noexcept;
    const ExplainLocation& where() const noexcept;
    ExplainCounts counts() const;
    std::vector<ExplainRecord> records() const;
    /// The signals, in the order they happened.
    std::vector<ExplainRecord> signals() const;
    bool clean() const { return counts().signals == 0; }
    /// The report (see the top of this header); ends with a newline.
    std::string report() const;

private:
    std::shared_ptr<detail::ExplainState> s_;
};

/// Opens a region (the same as constructing an ExplainRegion).
inline ExplainRegion explain(std::string name = {},
                             ExplainLocation where = rbln::source_location::current()) {
    return ExplainRegion(std::move(name), std::move(where));
}

/// While it lives, records of this thread carry @where (innermost wins).
/// Costs a relaxed load and a branch when no region is open.
class ExplainSite {
public:
    explicit ExplainSite(rbln::source_location where = rbln::source_location::current());
    /// @file and @function must outlive the site (C ABI: interned copies).
    ExplainSite(const char* file, std::uint32_t line, const char* function);
    ExplainSite(const ExplainSite&) = delete;
    ExplainSite& operator=(const ExplainSite&) = delete;
    ExplainSite(ExplainSite&&) = delete;
    ExplainSite& operator=(ExplainSite&&) = delete;
    ~ExplainSite();

private:
    friend struct detail::ExplainState;
    const char* file_ = nullptr;
    std::uint32_t line_ = 0;
    const char* function_ = nullptr;
    const ExplainSite* outer_ = nullptr;
    bool active_ = false;
};

} // namespace rbln

#pragma GCC visibility pop
