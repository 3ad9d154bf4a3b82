// SPDX-License-Identifier: GPL-2.0
// rbln/copy.hpp - copies host <-> device and device <-> device.
//
// The rule (issue 5): a copy is asynchronous only when source and
// destination have the same size, both are contiguous, the host side (if
// any) is pinned memory of the device that runs the copy, and the device
// side is resident.  Otherwise it is synchronous, and the device's pending
// asynchronous transfers are drained first, so the two paths never
// reorder.  plan_copy() is the rule alone (no side effects).
//
// Asynchronous copies are one COPY packet on the stream; with
// non_blocking = false the call then waits for it.  The job keeps both
// memories alive until the card is done, so dropping them early is safe.
// A buffer keeps its asynchronous path for its whole life (using it as a
// kernel input does not take it away).
//
// Synchronous copies go through the device's pinned staging buffer in
// chunks (CPU gather/scatter for strided host sides, COPY_STRIDED for
// strided device sides) and return when the data has arrived.  Pageable
// host memory is recognised as pinned when it lies inside memory
// registered or allocated with Device::register_host()/allocate_host().
//
// Between two logical devices (two open nodes) data travels through host
// memory: the source device copies into its staging buffer, the host
// copies into the destination's, which the destination device copies in.
// rbln.ko can export an HBM buffer only to peer-to-peer importers, which
// the emulated cards are not, so there is no card-to-card path yet; the
// path taken is counted (CopyStats).
//
// A destination larger than the source (a whole multiple of it, both
// contiguous) receives the source repeated (broadcast); synchronous.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rbln/memory.hpp"

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

class Device;
class Stream;

/// One side of a copy: memory (device or pinned host), or plain host
/// memory; contiguous, or rows of @row bytes @pitch bytes apart.
struct CopyEndpoint {
    std::shared_ptr<Memory> memory; ///< null: plain host memory at @host
    void* host = nullptr;
    std::uint64_t offset = 0; ///< into @memory
    std::uint64_t size = 0;   ///< bytes copied to/from this side
    std::uint64_t row = 0;    ///< 0: contiguous; else @size is rows of @row bytes
    std::uint64_t pitch = 0;  ///< distance of rows (>= row)

    /// @size bytes of @memory from @offset (0: to its end).
    static CopyEndpoint of(std::shared_ptr<Memory> memory, std::uint64_t offset = 0,
                           std::uint64_t size = 0);
    /// Plain host memory (recognised as pinned if it lies in pinned memory).
    static CopyEndpoint of_host(void* data, std::uint64_t size);
    static CopyEndpoint of_host(const void* data, std::uint64_t size);
    /// This endpoint as rows of @row bytes, @pitch apart.
    CopyEndpoint strided(std::uint64_t row_bytes, std::uint64_t pitch_bytes) const;

    bool is_device() const noexcept { return memory && !memory->is_host(); }
    bool contiguous() const noexcept { return row == 0 || row == pitch; }
    /// Bytes of memory the endpoint spans.
    std::uint64_t extent() const noexcept;
};

enum class CopyMode { Async, Sync };
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost };

struct CopyPlan {
    CopyMode mode = CopyMode::Sync;
    CopyKind kind = CopyKind::HostToHost;
    bool cross_device = false; ///< device to device between two open nodes
    const char* reason = "";   ///< why synchronous ("" if async)
};

/// The decision, for a copy run by @device.
CopyPlan plan_copy(const Device& device, const CopyEndpoint& dst, const CopyEndpoint& src);

/// Copies @src to @dst in the order of @stream.  non_blocking: return once
/// the copy is enqueued (if the rule lets it be asynchronous).
void copy(Stream& stream, const CopyEndpoint& dst, const CopyEndpoint& src,
          bool non_blocking = false);

/// How many copies took which path (per Device).
struct CopyStats {
    std::uint64_t async_h2d = 0;
    std::uint64_t async_d2h = 0;
    std::uint64_t async_d2d = 0;
    std::uint64_t sync_h2d = 0;
    std::uint64_t sync_d2h = 0;
    std::uint64_t sync_d2d = 0;
    std::uint64_t host_to_host = 0;
    std::uint64_t cross_device_via_host = 0;     ///< between logical devices, bounced through host
    std::uint64_t cross_device_card_to_card = 0; ///< always 0 for now (no P2P importer)
    std::uint64_t drains = 0; ///< sync copies that first drained pending async ones
    std::uint64_t bytes_async = 0;
    std::uint64_t bytes_sync = 0;
};

} // namespace rbln

#pragma GCC visibility pop
