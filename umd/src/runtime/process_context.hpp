// SPDX-License-Identifier: GPL-2.0
// process_context.hpp - the process's one registry of logical devices
// (private to librbln).
//
// Everything librbln keeps per logical device of the process lives in one
// DeviceContext: the opened Device (its streams, pinned memory and copies
// hang off it), its caching allocator, its host allocator, and the C ABI's
// tables of blocks handed out by rbln_caching_alloc() and
// rbln_host_alloc().  ProcessContexts holds the contexts, the device
// mapping (Runtime) and how devices are opened, under one mutex, and does
// the one fork check of the process API (fork_state.hpp): Runtime::commit()
// before a device is opened, the devices' ForkStamp after.
//
// Planning vs commit (rbln/devices.hpp): making a context plans (the index
// is checked against the current plan) and opens nothing; statistics of a
// device never used read an empty allocator planned from sysfs.  The first
// real use (device(), allocator(), host_allocator(): an allocation, a
// stream, a synchronize, a job) commits the mapping and opens the NPU.
//
// Never destroyed: at exit (also the exit of a fork() child, which shares
// the parent's open files) no destructor may close buffers or wait on
// rings; the kernel frees everything with the fd.  Tests start afresh with
// reset_process_for_tests() (testing.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"
#include "rbln/host_allocator.hpp"
#include "testing.hpp"

namespace rbln::detail {

class ProcessContexts;

/// One logical device of the process.
class DeviceContext {
public:
    DeviceContext(ProcessContexts& registry, unsigned index) : registry_(registry), index_(index) {}
    DeviceContext(const DeviceContext&) = delete;
    DeviceContext& operator=(const DeviceContext&) = delete;
    DeviceContext(DeviceContext&&) = delete;
    DeviceContext& operator=(DeviceContext&&) = delete;
    /// The C tables' blocks first, then the host allocator, the device
    /// (its streams wait for their jobs) and the caching allocator.
    ~DeviceContext();

    unsigned index() const noexcept { return index_; }

    /// The opened device: commits the mapping (Errc::BadFork in a child of
    /// the committing process) and opens the NPU at the first call.
    std::shared_ptr<Device> device();
    /// The caching allocator, made at the first call over the opened device
    /// (RBLN_ALLOC_CONF read then).  Once made it is returned without a
    /// fork check: a fork() child may read its copy's statistics and empty
    /// its cache (which closes nothing), but makes no segment (BadFork).
    DeviceAllocator& allocator();
    std::shared_ptr<DeviceAllocator> allocator_ptr();
    /// The caching allocator if the device was used, else an empty one
    /// planned from sysfs (nothing opened, nothing committed): what the
    /// statistics and the summary read.
    const DeviceAllocator& allocator_for_query();
    /// The live allocator, or nullptr before the first real use.
    DeviceAllocator* live_allocator() noexcept { return live_.load(std::memory_order_acquire); }
    /// The pinned host allocator (opens the device at the first call).
    HostAllocator& host_allocator();

    /// The C ABI's tables (rbln_alloc.h, rbln_host.h), guarded by c_mutex.
    std::mutex c_mutex;
    std::unordered_map<std::uint64_t, DeviceBlock> c_blocks; ///< by device VA
    std::map<const void*, HostBlock> c_host_blocks;          ///< by host address

private:
    friend class ProcessContexts;
    ProcessContexts& registry_;
    const unsigned index_;
    // Guarded by the registry's mutex; each set once.
    std::shared_ptr<Device> device_;
    std::shared_ptr<DeviceAllocator> allocator_;
    std::unique_ptr<DeviceAllocator> planned_;
    std::unique_ptr<HostAllocator> host_;
    std::atomic<DeviceAllocator*> live_{nullptr}; ///< allocator_.get(), read without the mutex
};

/// The registry (one per process; see the file comment).
class ProcessContexts {
public:
    /// The process's registry (never destroyed).
    static ProcessContexts& get();

    ProcessContexts();
    ProcessContexts(const ProcessContexts&) = delete;
    ProcessContexts& operator=(const ProcessContexts&) = delete;
    ProcessContexts(ProcessContexts&&) = delete;
    ProcessContexts& operator=(ProcessContexts&&) = delete;
    ~ProcessContexts() = default;

    /// The device mapping (Runtime::process()).
    Runtime& runtime();
    /// The sysfs root devices are discovered under.
    std::filesystem::path root();

    /// The context of logical device @index, made at the first call.
    /// Plans only: Errc::NoDevice if @index is not a device of the current
    /// plan (or the committed mapping).
    std::shared_ptr<DeviceContext> context(unsigned index);
    /// Every context made so far.
    std::vector<std::shared_ptr<DeviceContext>> contexts();

    /// Shorthands: context(@index)->device() / ->allocator() / ->host_allocator().
    std::shared_ptr<Device> device(unsigned index) { return context(index)->device(); }
    DeviceAllocator& allocator(unsigned index);
    HostAllocator& host_allocator(unsigned index) { return context(index)->host_allocator(); }

    /// testing.hpp's reset_process_for_tests().
    void reset(ProcessOptions options);

private:
    friend class DeviceContext;
    std::shared_ptr<Device> device_locked(DeviceContext& c);
    DeviceAllocator& allocator_locked(DeviceContext& c);
    Runtime& runtime_locked();

    std::mutex mutex_;
    std::unique_ptr<Runtime> runtime_;                       ///< guarded
    std::map<unsigned, std::shared_ptr<DeviceContext>> map_; ///< guarded
    ProcessOptions options_;                                 ///< guarded
};

/// Forgets the RBLN_EAGER_MALLOC read so far (storage.cpp; reset()).
void forget_commit_mode() noexcept;

} // namespace rbln::detail
