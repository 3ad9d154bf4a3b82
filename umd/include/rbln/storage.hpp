// SPDX-License-Identifier: GPL-2.0
// rbln/storage.hpp - lazy device storage: the memory behind a framework's
// device tensor, with a host copy and a record of which side is latest.
//
// Identity and memory.  A Storage gets its identity (id(), unique in the
// process, never reused) when it is made, and device memory (a block of
// the caching allocator, rbln/allocator.hpp) only when a device operation
// first needs it: lazy mode, the default.  RBLN_EAGER_MALLOC=1, read once
// when librbln first makes a storage, commits at creation instead.  So:
//   - the allocator's statistics do not count a storage until its first
//     device use (memory_allocated() is 0 right after creation);
//   - an out-of-memory error can come from the first device use rather
//     than from creation; it is the allocator's Errc::OutOfMemory, with the
//     same message either way, and the storage stays uncommitted;
//   - data_ptr() is the device VA of the storage.  The CPU must never
//     dereference it: it is an address in the card's address space, not in
//     the process's.  Host access goes through read()/write(), which copy.
//     data_ptr() is a device use: it commits a lazy storage (an address is
//     only good for handing to the device).
//
// Coherence.  A storage is host-latest (the host copy is newer), device-
// latest (the device memory is newer) or in-sync (both hold the same data;
// also the state of a new storage, whose contents are unspecified on both
// sides, as torch.empty's).  Data moves only at these state changes:
//   host-latest   -> in-sync   one upload, when a device operation reads it
//   device-latest -> in-sync   one download, when the host reads it
// and writes move the state without moving data: a device write makes it
// device-latest, a host write host-latest.  Two combinations need the old
// data first and so pass through in-sync: a host write of part of a
// device-latest storage (one download, then the write), and a device
// read-write of a host-latest one (one upload, then the operation).  A
// device operation that overwrites the whole storage (DeviceAccess::Write)
// of a host-latest storage uploads nothing.  Nothing else moves data;
// transfers() counts every transfer.
//
// Transfers are synchronous copies (rbln/copy.hpp) on a stream: uploads on
// the stream of the device operation that needs them, downloads on the
// stream of the last device write (so they follow it).  As on CUDA, using
// a storage from several streams is ordered by the caller (events), and a
// storage used on a stream other than its first one should be passed to
// record_stream() so its block is not reused too early.
//
// Device layout.  A storage's device memory has a layout: flat (row-major
// bytes, what bind_device_memory() gives) or a device-native format an
// operation chose (set_device_layout()).  set_device_layout_like() gives a
// storage the layout of another so that device-to-device copies between
// them can take the fast path (one COPY, no conversion); it copies no
// data.  On the emulated card every format is stored as flat bytes: the
// layout is the contract a copy checks, not a transformation done here.
//
// Thread safety: a Storage may be used from several threads; its state
// changes are serialised by a mutex, and the check of a device use that
// changes nothing (the common case) takes no lock.
//
// Offload: a storage created while an offload scope is open on the thread
// (rbln/offload.hpp) belongs to it: its host copy goes to the scope's file
// at the scope's offload points and comes back, transparently, when
// read(), write() or an upload needs it.  Coherence and transfers() are
// unchanged by it.
//
// Lifetime: a storage refers to its allocator; destroy storages before it
// (process_allocator()'s allocators live until the process exits).
//
// Planning: Storage::create(index, ...) on a logical device of the process
// opens nothing and fixes no mapping (rbln/devices.hpp); host writes and
// reads of a lazy storage stay on the host.  Its first device use (and
// device(), allocator(), data_ptr(), commit(), record_stream()) is the real
// use that commits.  Jobs
// that use a storage's device memory keep that memory alive until done.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rbln/allocator.hpp"
#include "rbln/devices.hpp"
#include "rbln/export.h"
#include "rbln/memory.hpp"
#include "rbln/offload.hpp"
#include "rbln/stream.hpp"

// librbln's own (umd/src), hidden from librbln.so (rbln/export.h).
namespace rbln::detail {
class DeviceContext;
} // namespace rbln::detail

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

class Device;

/// Element types; the floating-point values are firmware-iface's RBLN_FW_DT_*.
enum class ElementType : std::uint32_t { U8 = 0, Fp32 = 1, Fp16 = 2, Bf16 = 3 };

/// Bytes per element (0 for an unknown value).
std::uint32_t element_size(ElementType type) noexcept;

enum class Coherence : std::uint8_t { HostLatest = 0, DeviceLatest = 1, InSync = 2 };

/// What a device operation does with a storage.
enum class DeviceAccess : std::uint8_t {
    Read,      ///< reads it
    Write,     ///< overwrites all of it without reading
    ReadWrite, ///< reads it, or writes part of it
};

/// When a storage gets device memory.
enum class CommitMode : std::uint8_t { Lazy, Eager };

/// RBLN_EAGER_MALLOC from @env (empty: the process environment): "1" is
/// Eager, "0", "" or unset Lazy; anything else throws Errc::BadConfig.
CommitMode commit_mode_from_environment(const EnvSource& env = {});
/// The process's mode: RBLN_EAGER_MALLOC (where Runtime::process() reads
/// its variables) read at the first call, then kept.
CommitMode process_commit_mode();

/// Transfers of one storage (or of all storages, storage_transfer_totals()).
struct StorageTransfers {
    std::uint64_t uploads = 0;   ///< host -> device
    std::uint64_t downloads = 0; ///< device -> host
    std::uint64_t upload_bytes = 0;
    std::uint64_t download_bytes = 0;
    std::uint64_t commits = 0; ///< device memory taken from the allocator
};

/// Every storage's transfers since the process started.
StorageTransfers storage_transfer_totals() noexcept;

/// The layout of a storage's device memory.
struct DeviceLayout {
    static constexpr std::uint32_t kFlat = 0;
    std::uint32_t format = kFlat;    ///< kFlat or a device-native format
    std::vector<std::int64_t> sizes; ///< the shape it was laid out for ({}: 1-D)
    bool operator==(const DeviceLayout&) const = default;
};

struct StorageOptions {
    std::optional<CommitMode> commit; ///< default: process_commit_mode()
    std::optional<unsigned> place;    ///< allocator place (default: its default place)
};

class Storage : private detail::OffloadMember {
    struct Key {
        explicit Key() = default;
    };

public:
    /// A storage of @nbytes on @device, whose device memory comes from
    /// @allocator (the device's).  Eager: commits now (Errc::OutOfMemory).
    /// Errc::InvalidArgument if @nbytes is not a whole number of elements.
    static std::shared_ptr<Storage> create(std::shared_ptr<Device> device,
                                           DeviceAllocator& allocator, std::uint64_t nbytes,
                                           ElementType type = ElementType::U8,
                                           StorageOptions options = {});
    /// The same on logical device @index of the process (Device::get(),
    /// process_allocator()).  A lazy storage plans only: it opens no NPU
    /// and leaves the device mapping unfixed until its first device use
    /// (Errc::NoDevice now if @index is not a device of the plan).
    static std::shared_ptr<Storage> create(unsigned index, std::uint64_t nbytes,
                                           ElementType type = ElementType::U8,
                                           StorageOptions options = {});

    Storage(Key key, std::shared_ptr<Device> device, DeviceAllocator& allocator,
            std::uint64_t nbytes, ElementType type, StorageOptions options);
    RBLN_LOCAL Storage(Key key, std::shared_ptr<detail::DeviceContext> context,
                       std::uint64_t nbytes, ElementType type, StorageOptions options);
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    Storage(Storage&&) = delete;
    Storage& operator=(Storage&&) = delete;
    ~Storage() override;

    /// The virtual identity (process-unique, from creation on).
    std::uint64_t id() const noexcept { return id_; }
    std::uint64_t nbytes() const noexcept { return nbytes_; }
    ElementType element_type() const noexcept { return type_; }
    /// The logical device index.
    unsigned device_index() const noexcept { return index_; }
    /// The device and its allocator.  Of a storage made on a logical device
    /// index, the first call is a use of the device: it commits the mapping
    /// and opens the NPU (Errc::BadFork in a fork() child of a process that
    /// committed, and the planning errors).
    const std::shared_ptr<Device>& device() const;
    DeviceAllocator& allocator() const;

    /// Whether it has device memory.
    bool resident() const noexcept { return resident_.load(std::memory_order_acquire); }
    Coherence coherence() const noexcept { return state_.load(std::memory_order_acquire); }
    StorageTransfers transfers() const;

    /// The device VA; commits if lazy (no data moves).  Not a CPU address:
    /// never dereference it on the host.
    std::uint64_t data_ptr();

    /// Before a device operation on @stream that uses the storage as
    /// @access: commits it (first use; Errc::OutOfMemory), uploads if the
    /// operation reads a host-latest storage, and records a write.  The
    /// memory to pass to the operation (list it in the job) stays valid
    /// while the storage lives.
    const std::shared_ptr<Memory>& device_use(Stream& stream, DeviceAccess access);

    /// Copies @out.size() bytes from @offset to @out; downloads first if
    /// device-latest.  Errc::InvalidArgument if out of range.
    void read(std::uint64_t offset, std::span<std::byte> out);
    /// Copies @data to @offset of the host copy; downloads first only when
    /// device-latest and @data does not cover the whole storage.
    void write(std::uint64_t offset, std::span<const std::byte> data);

    /// The block is also used by @stream (DeviceAllocator::record_stream);
    /// commits if lazy.
    void record_stream(const Stream& stream);

    /// Commits now if lazy (no data moves).
    void commit();
    /// Internal (graph replays): gives a storage that has no device memory
    /// yet @memory, written by the job just enqueued on @writer (so it is
    /// device-latest).  Errc::InvalidArgument if it is resident already.
    RBLN_LOCAL void adopt_device_memory(std::shared_ptr<Memory> memory, Stream& writer);
    DeviceLayout device_layout() const;
    /// The layout an operation left the device memory in (no data moves).
    void set_device_layout(DeviceLayout layout);

    /// Whether its host copy is now in memory / only in its offload scope's
    /// file (rbln/offload.hpp); neither before the first host need.
    bool host_in_memory() const;
    bool host_paged_out() const;

private:
    /// Registers @s with its offload scope and commits it if @mode is Eager.
    RBLN_LOCAL static std::shared_ptr<Storage> finish(std::shared_ptr<Storage> s, CommitMode mode);
    RBLN_LOCAL std::uint64_t offload_write() override;
    RBLN_LOCAL void offload_finish(std::uint64_t token, bool synced) noexcept override;
    RBLN_LOCAL const std::shared_ptr<Memory>& device_use_slow(Stream& stream, DeviceAccess access);
    RBLN_LOCAL void commit_locked(StreamId stream);
    RBLN_LOCAL void upload_locked(Stream& stream);
    RBLN_LOCAL void download_locked();
    RBLN_LOCAL void check_range(const char* operation, std::uint64_t offset,
                                std::uint64_t size) const;
    /// Opens the context's device (once).
    RBLN_LOCAL void bind() const;
    /// Names the device in messages without opening it.
    RBLN_LOCAL std::string where() const;

    std::shared_ptr<detail::DeviceContext> context_; ///< null: made on a given device
    mutable std::once_flag bind_once_;
    mutable std::atomic<bool> bound_{false};
    mutable std::shared_ptr<Device> device_;       ///< set once, before bound_
    mutable DeviceAllocator* allocator_ = nullptr; ///< set once, before bound_
    unsigned index_ = 0;
    std::uint64_t id_;
    std::uint64_t nbytes_;
    ElementType type_;
    std::optional<unsigned> place_;

    std::atomic<bool> resident_{false};
    std::atomic<Coherence> state_{Coherence::InSync};
    std::atomic<StreamId> writer_id_{0}; ///< stream of the last device write (0: none)

    mutable std::mutex mutex_;
    std::shared_ptr<Memory> memory_; ///< set once, at commit (then read without lock)
    detail::HostRegion host_;        ///< the host copy, made at first host need
    std::optional<Stream> writer_;   ///< guarded
    StorageTransfers transfers_;     ///< guarded
    DeviceLayout layout_;            ///< guarded
};

/// A view of a storage as a tensor sees it: @sizes and @strides in
/// elements, from element @offset.
struct StorageView {
    std::shared_ptr<Storage> storage;
    std::uint64_t offset = 0;
    std::vector<std::int64_t> sizes;
    std::vector<std::int64_t> strides;

    /// The whole storage, 1-D.
    static StorageView whole(std::shared_ptr<Storage> storage);
    /// The whole storage, row-major with @sizes.
    static StorageView contiguous(std::shared_ptr<Storage> storage,
                                  std::vector<std::int64_t> sizes);

    std::uint64_t numel() const noexcept;
    /// Row-major without gaps (dimensions of size 1 ignored).
    bool is_contiguous() const noexcept;
    /// Contiguous from offset 0 over every byte of the storage.
    bool covers_whole_storage() const noexcept;
};

/// Gives @view's storage its device memory now, as one flat region (layout
/// kFlat with @view's sizes).  @view must be contiguous and cover the whole
/// storage from offset 0, else Errc::InvalidArgument saying which.
void bind_device_memory(const StorageView& view);

/// Gives @target's storage the device layout of @ref's, copying no data.
/// Both on the same device, with the same element type and sizes, each
/// covering its whole storage, and @ref resident; else Errc::InvalidArgument
/// saying which.
void set_device_layout_like(const StorageView& target, const StorageView& ref);

} // namespace rbln

#pragma GCC visibility pop
