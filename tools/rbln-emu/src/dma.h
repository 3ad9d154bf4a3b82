// SPDX-License-Identifier: GPL-2.0
// The DMA engine's data movement on translated memory: copies and fills
// over lists of host spans (what the MMU gives for a VA range), with
// memcpy/memmove/memset of whole pieces, never byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine.h"
#include "mmu.h"

namespace rbln::emu::dma {

// Does any byte of `a` lie in `b`?
bool overlap(const std::vector<HostSpan>& a, const std::vector<HostSpan>& b);

// Copies the bytes of `src` (spans in VA order) to `dst` (the same number
// of bytes) as memmove would if both were one buffer: the result is as if
// every source byte was read before any destination byte was written,
// however the pieces alias each other in host memory.  Returns false when
// `cancel` was set meanwhile (some bytes may have moved).
bool copy(const std::vector<HostSpan>& dst, const std::vector<HostSpan>& src,
          const Cancel* cancel = nullptr);

// Copies of stream_threshold() bytes or more, source and destination
// apart, write with stores that bypass the CPU caches, as glibc's memcpy
// does for one large copy (which a copy over thousands of page spans never
// is).  Smaller copies use memcpy and leave their result in the cache for
// whoever reads it next.  Which way is faster from what size depends on the
// host's caches (4 MiB fits in a 32 MiB L3 but not in an 8 MiB one), so
// rbln-emu measures it at start-up (calibrate_stream_threshold();
// --dma-nt-threshold fixes it instead).  Until set: kDefaultStreamThreshold.
inline constexpr std::size_t kDefaultStreamThreshold = 4ULL << 20;
std::size_t stream_threshold() noexcept;
void set_stream_threshold(std::size_t bytes) noexcept; // 0 means 1

// One measured size: the best rate of each way over 4 KiB pieces.
struct StreamPoint {
    std::size_t size;
    double cached_gbps;
    double streamed_gbps;
};
struct StreamCalibration {
    std::vector<StreamPoint> points; // ascending sizes
    std::size_t threshold;
};

// The smallest measured size at which streaming is clearly faster (by 10%)
// and from which cached copies are clearly faster at no larger size (closer
// is a tie: a busy host's timings move that much); twice the largest size
// if there is none.  Above the last size streaming is assumed to win.
std::size_t choose_stream_threshold(const std::vector<StreamPoint>& points);

// Times both ways at 1, 2, 4, 8, 16 and 32 MiB on this host (a fraction of
// a second, 64 MiB of scratch) and chooses the threshold; does not set it.
StreamCalibration calibrate_stream_threshold();

// Repeats the low `pattern_bytes` (1, 2, 4 or 8) bytes of `pattern`, little
// endian, over `dst`, the first byte of dst getting the pattern's byte 0.
bool fill(const std::vector<HostSpan>& dst, std::uint64_t pattern, unsigned pattern_bytes,
          const Cancel* cancel = nullptr);

} // namespace rbln::emu::dma
