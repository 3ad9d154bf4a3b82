// SPDX-License-Identifier: GPL-2.0
// testing.hpp - librbln's test hooks (not installed: tests include it from
// umd/src through the rbln_testing target).
//
// The process keeps one registry of logical devices (process_context.hpp):
// the device mapping, and per logical device the opened device, its caching
// allocator, its host allocator and the C ABI's tables.  Production code
// never replaces it; a test does, to run the process-wide API (Device::get,
// process_allocator, the C ABI) over a fake sysfs tree and fake kernels.
#pragma once

#include <functional>
#include <memory>

#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/devices.hpp"

namespace rbln {

/// How the registry makes a device's caching allocator instead of opening
/// the device (a test's allocator over a fake kernel).  It must not call
/// back into the process-wide API (Device::get, process_allocator).
using AllocatorFactory = std::function<std::unique_ptr<DeviceAllocator>(unsigned index)>;

/// What a fresh process registry is made with.
struct ProcessOptions {
    RuntimeOptions runtime;     ///< sysfs root, RBLN_* variables, warnings, discovery's opener
    DeviceOpener opener;        ///< how devices open their node (empty: the real node)
    DeviceOptions device;       ///< options of the devices the registry opens
    AllocatorFactory allocator; ///< empty: the allocator over the opened device
};

/// Drops every logical device of the process (their C tables first, then
/// host allocators, allocators, devices), forgets the committed mapping and
/// RBLN_EAGER_MALLOC, and starts afresh with @options.  Not safe while
/// another thread uses librbln.
void reset_process_for_tests(ProcessOptions options = {});

} // namespace rbln
