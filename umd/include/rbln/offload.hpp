// SPDX-License-Identifier: GPL-2.0
// rbln/offload.hpp - offload scopes: the host copies of storages made in a
// scope are paged out to a file and brought back when used.
//
//     {
//         auto scope = rbln::offload();          // or rbln::offload_scope scope{options};
//         auto s = rbln::Storage::create(0, n);  // made inside: eligible
//         s->write(0, data);                     // host copy in memory
//     }                                          // scope exit: written to the file, memory freed
//     s->read(0, out);                           // read back from the file (io_uring)
//
// Scope.  A scope is per thread and nests: a storage created on a thread
// belongs to the innermost scope open on that thread at its creation (and
// only to it); storages made outside every scope are never offloaded.  A
// scope is closed on the thread that opened it (close() or destruction).
//
// The rule.  A storage's host copy (its HostRegion) is written out only at
// two points: offload_now() and the scope's exit (close()/destructor), for
// every live storage of the scope whose host copy is in memory:
//   - host-latest or in-sync: the bytes are written to the scope's file
//     with io_uring, the file is fdatasync'ed (so a write-back error cannot
//     lose data later), then the memory is freed;
//   - the file already holds the same bytes (brought back and not written
//     since): the memory is freed without writing;
//   - device-latest: the host copy is stale (a later host read downloads
//     anyway), so the memory is freed without writing.
// Any later host need of the data (Storage::read, a partial Storage::write,
// the upload before a device operation that reads it) reads it back with
// io_uring, transparently; what does not need the old bytes (a download, a
// whole-storage write) allocates without reading.  A storage brought back
// stays in memory until the next offload point of its scope (after the
// scope's exit: for good).  Storages smaller than OffloadOptions::min_bytes
// are not eligible.
//
// Data is never lost.  A failed write, a short write or a failed fdatasync
// (ENOSPC, EFBIG, EIO, ...) leaves the affected host copies in memory,
// intact and usable; the failure is counted (OffloadStats::failures) and
// kept (failures()).  offload_now() tries every storage, then throws the
// first failure (Errc::Io; its message names the file's directory, the
// bytes and says the data stays in memory).  The scope's exit does not
// throw: read failures() before closing, or check stats().  A failed read
// back throws from the host use that needed it (Errc::Io); the data stays
// in the file and the next use tries again.
//
// Files.  One file per scope, made when the scope opens: O_TMPFILE in the
// directory (no name, so nothing is left behind, even after a crash), or,
// where the file system has no O_TMPFILE, a mkostemp file unlinked at once.
// The directory is OffloadOptions::directory, else $RBLN_OFFLOAD_DIR, else
// $TMPDIR, else /var/tmp.  The file lives until the last storage whose
// data is in it is gone; a storage's extent is punched out when the storage
// is destroyed.  After writing, the pages are dropped from the page cache
// (POSIX_FADV_DONTNEED), so the memory really goes.  Without io_uring
// (kernel.io_uring_disabled) pwrite/pread do the same I/O.
//
// fork(): a child of the process that opened a scope neither writes to its
// file (Errc::BadFork, recorded like any failure; the data stays in
// memory) nor uses its io_uring (shared with the parent); it reads back with
// pread.  A storage the parent destroys after the fork may lose its file
// extent for the child too: use the spawn start method, as for devices.
//
// Thread safety: storages of a scope may be used from any thread while the
// scope offloads them; a host write racing with an offload keeps the new
// data in memory (the offload of that storage is abandoned, not counted as
// a failure).  Lock order: a storage's mutex, then the file's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rbln/devices.hpp"
#include "rbln/error.hpp"

namespace rbln::detail {
struct OffloadState; // librbln's own (offload.cpp), hidden (rbln/export.h)
} // namespace rbln::detail

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

struct OffloadOptions {
    /// Where the file goes ("": $RBLN_OFFLOAD_DIR, else $TMPDIR, else /var/tmp).
    std::string directory;
    /// An existing file to use instead of a temporary one (opened read-write,
    /// never truncated nor unlinked; e.g. a preallocated file).  "": none.
    std::string file;
    /// Storages of fewer bytes are not offloaded.
    std::uint64_t min_bytes = 0;
};

/// Figures of one scope (OffloadScope::stats()) or of the process
/// (offload_totals()).  A storage's bring-backs after its scope closed
/// still count in its scope's figures and in the totals.
struct OffloadStats {
    std::uint64_t writes = 0;             ///< host copies written to the file
    std::uint64_t bytes_offloaded = 0;    ///< their bytes (memory freed)
    std::uint64_t reads = 0;              ///< host copies read back
    std::uint64_t bytes_brought_back = 0; ///< their bytes
    std::uint64_t failures = 0;           ///< writes/reads that failed (data kept)
    std::uint64_t bytes_dropped =
        0; ///< memory freed without a write (stale or already in the file)
    std::uint64_t bytes_paged_out = 0; ///< now: host copies held by the file only
};

/// Every scope's figures since the process started.
OffloadStats offload_totals() noexcept;

/// The directory a scope with @options uses (see the top of this header);
/// @env: the process environment when empty.
std::string offload_directory(const OffloadOptions& options, const EnvSource& env = {});

class OffloadScope {
public:
    /// Opens a scope on this thread and makes its file.  Throws the typed
    /// error of the file's creation (Errc::NotFound, PermissionDenied, Io)
    /// naming the directory.
    explicit OffloadScope(OffloadOptions options = {});
    OffloadScope(const OffloadScope&) = delete;
    OffloadScope& operator=(const OffloadScope&) = delete;
    OffloadScope(OffloadScope&&) = delete;
    OffloadScope& operator=(OffloadScope&&) = delete;
    /// Closes it if open (never throws).
    ~OffloadScope();

    /// Writes out the host copies of the scope's storages now (the rule at
    /// the top of this header).  Throws the first failure after trying every
    /// storage; the failed ones keep their data in memory.
    void offload_now();
    /// Offloads (recording failures, never throwing) and closes: storages
    /// made afterwards on this thread are not the scope's.  Idempotent;
    /// Errc::InvalidArgument on another thread than the opening one.
    void close();
    bool open() const noexcept;

    /// The file's directory (or OffloadOptions::file).
    const std::string& where() const noexcept;
    OffloadStats stats() const;
    /// The failures so far, in order (writes and reads).
    std::vector<Error> failures() const;
    /// Whether the file I/O goes through io_uring (false: pwrite/pread).
    bool uses_io_uring() const noexcept;

private:
    std::shared_ptr<detail::OffloadState> s_;
};

using offload_scope = OffloadScope;

/// Opens a scope (the same as constructing an OffloadScope).
inline OffloadScope offload(OffloadOptions options = {}) {
    return OffloadScope(std::move(options));
}

} // namespace rbln

#pragma GCC visibility pop

// librbln's own, hidden from librbln.so (rbln/export.h): a Storage
// (rbln/storage.hpp) is an OffloadMember and holds its host copy in a
// HostRegion, so they are declared here.
namespace rbln::detail {

/// The scope a storage created now on this thread belongs to (innermost
/// open one), or null.
std::shared_ptr<OffloadState> current_offload_scope();
/// Adds a storage to @scope; @offload is called at its offload points.
class OffloadMember {
public:
    OffloadMember() = default;
    OffloadMember(const OffloadMember&) = delete;
    OffloadMember& operator=(const OffloadMember&) = delete;
    OffloadMember(OffloadMember&&) = delete;
    OffloadMember& operator=(OffloadMember&&) = delete;
    virtual ~OffloadMember() = default;
    /// Phase 1: under the member's lock, write what must be written (or
    /// free what needs no write).  Returns a token for phase 2 (0: nothing
    /// to finish).  Failures are recorded in the scope and thrown as Error.
    virtual std::uint64_t offload_write() = 0;
    /// Phase 2, after the file was synced (@synced) or its sync failed:
    /// free the memory if synced and the host copy did not change since
    /// phase 1 (@token).
    virtual void offload_finish(std::uint64_t token, bool synced) noexcept = 0;
};
void offload_register(const std::shared_ptr<OffloadState>& scope,
                      const std::shared_ptr<OffloadMember>& member);

/// The host copy of a storage: in memory, in the scope's file, both (the
/// file holds what memory holds), or neither (never needed yet).  Not
/// thread-safe: the owner's lock guards it.
class HostRegion {
public:
    HostRegion() = default;
    /// Eligible for offloading to @scope's file (null: never offloaded).
    HostRegion(std::shared_ptr<OffloadState> scope, std::uint64_t storage, std::uint64_t nbytes);
    HostRegion(const HostRegion&) = delete;
    HostRegion& operator=(const HostRegion&) = delete;
    HostRegion(HostRegion&&) = delete;
    HostRegion& operator=(HostRegion&&) = delete;
    ~HostRegion();

    bool eligible() const noexcept { return scope_ != nullptr; }
    const std::shared_ptr<OffloadState>& scope() const noexcept { return scope_; }
    bool in_memory() const noexcept { return data_ != nullptr; }
    /// The data is in the file (and possibly in memory too).
    bool in_file() const noexcept { return file_valid_; }
    /// The data is in the file only.
    bool paged_out() const noexcept { return file_valid_ && data_ == nullptr; }

    /// The memory of the host copy, made now if needed: read back from the
    /// file when @need_data and the file has it (Errc::Io on failure, the
    /// file keeps the data), else zeroed (without @need_data the caller
    /// overwrites all of it: the file's copy is dropped).  Call modified()
    /// after changing it.
    std::byte* get(bool need_data);
    /// The host copy changed (the file's copy is no longer the same).
    void modified() noexcept;

    /// Phase 1 of an offload (see OffloadMember): @stale: the device holds
    /// newer data, so no write.  Returns the token (0: nothing for phase 2).
    std::uint64_t offload_write(bool stale);
    /// Phase 2: @synced: the file was synced, so the memory goes (if
    /// unchanged since phase 1); else the write does not count.
    void offload_finish(std::uint64_t token, bool synced) noexcept;

private:
    std::shared_ptr<OffloadState> scope_;
    std::uint64_t storage_ = 0;
    std::uint64_t nbytes_ = 0;
    std::unique_ptr<std::byte[]> data_;
    std::optional<std::uint64_t> extent_; ///< offset in the file, once written
    std::uint64_t extent_epoch_ = 0;      ///< forks the process had made by then
    bool file_valid_ = false;             ///< the extent holds the current data
    std::uint64_t generation_ = 1;        ///< bumped at every change
};

} // namespace rbln::detail
