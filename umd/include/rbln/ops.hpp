// SPDX-License-Identifier: GPL-2.0
// rbln/ops.hpp - a minimal operator layer over lazy storages
// (rbln/storage.hpp): the card's built-in kernels (firmware-iface
// RBLN_FW_KERNEL_*) on StorageViews, enqueued on a Stream.
//
// Every op is asynchronous (one LAUNCH job on @stream) and goes through
// Storage::device_use, so the lazy-storage rules hold: each input is used
// as DeviceAccess::Read (committed at first use, uploaded once if
// host-latest), the output as DeviceAccess::Write when the op overwrites
// its whole storage and reads none of it (out covers its storage and is
// not an input's storage), else as DeviceAccess::ReadWrite.  Inputs are
// used before the output.  All storages must be on @stream's device.
//
// Views: sizes and strides in elements, offset in elements (StorageView);
// 1 to 4 dimensions (0 dimensions: one element); strides may be 0
// (broadcast) but the elements a view reaches must lie inside its storage.
// Element types: Fp32, Fp16 and Bf16 (not U8).  Errors are
// Errc::InvalidArgument naming the op and the operand.
//
// Each op takes a rbln::source_location default argument: while it runs,
// the records of an explain region (rbln/explain.hpp) carry the line that
// called it.  from_host()/to_host() are Storage::write/read with the same.
#pragma once

#include "rbln/source_location.hpp"
#include <cstddef>
#include <span>

#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln::ops {

/// out = a + b, elementwise (equal sizes, one element type).
void add(Stream& stream, const StorageView& out, const StorageView& a, const StorageView& b,
         rbln::source_location where = rbln::source_location::current());
/// out = a * b, elementwise.
void mul(Stream& stream, const StorageView& out, const StorageView& a, const StorageView& b,
         rbln::source_location where = rbln::source_location::current());
/// out = max(a, 0).
void relu(Stream& stream, const StorageView& out, const StorageView& a,
          rbln::source_location where = rbln::source_location::current());
/// out = a * factor.
void scale(Stream& stream, const StorageView& out, const StorageView& a, float factor,
           rbln::source_location where = rbln::source_location::current());
/// out = a converted to out's element type (CAST; round to nearest even).
/// Of one element type it is a strided gather: any view of a into any view
/// of out, in one job (a framework's contiguous()).
void cast(Stream& stream, const StorageView& out, const StorageView& a,
          rbln::source_location where = rbln::source_location::current());
/// out[M][N] = sum_k a[M][K] * b[K][N]: a and b 2-D of one element type,
/// out 2-D of that type or Fp32 (products accumulate in fp32 on the card).
void matmul(Stream& stream, const StorageView& out, const StorageView& a, const StorageView& b,
            rbln::source_location where = rbln::source_location::current());

/// Copies the bytes of contiguous @src to contiguous @dst (the same number
/// of bytes), on the device: one COPY on @stream when both are on its
/// device, else through host memory between the two logical devices (the
/// storage on the other device is used on that device's default stream;
/// as for any use from two streams, order its writer with an Event).
/// When either view is not contiguous it is a strided copy: equal sizes,
/// one element type, 1 to 3 dimensions whose last stride is 1 on both
/// sides, both on @stream's device: one COPY_STRIDED (rows of the last
/// dimension, planes of the first).
void copy(Stream& stream, const StorageView& dst, const StorageView& src,
          rbln::source_location where = rbln::source_location::current());

/// Sets every element of contiguous @out to @value (converted to out's
/// element type, round to nearest even): one FILL on @stream.
void fill(Stream& stream, const StorageView& out, float value,
          rbln::source_location where = rbln::source_location::current());

/// Storage::write of @data at @dst's first element (@dst contiguous and at
/// least @data's size).
void from_host(const StorageView& dst, std::span<const std::byte> data,
               rbln::source_location where = rbln::source_location::current());
/// Storage::read of @out.size() bytes from @src's first element.
void to_host(const StorageView& src, std::span<std::byte> out,
             rbln::source_location where = rbln::source_location::current());

} // namespace rbln::ops

#pragma GCC visibility pop
