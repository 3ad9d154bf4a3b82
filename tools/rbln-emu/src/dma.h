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

// Copies of this many bytes or more, source and destination apart, write
// with stores that bypass the CPU caches, as a DMA engine's writes do not
// pass through them (and as glibc's memcpy does for one large copy, which a
// copy over thousands of page spans never is).  Smaller copies use memcpy
// and leave their result in the cache for whoever reads it next.
inline constexpr std::size_t kStreamThreshold = 4ULL << 20;

// Repeats the low `pattern_bytes` (1, 2, 4 or 8) bytes of `pattern`, little
// endian, over `dst`, the first byte of dst getting the pattern's byte 0.
bool fill(const std::vector<HostSpan>& dst, std::uint64_t pattern, unsigned pattern_bytes,
          const Cancel* cancel = nullptr);

} // namespace rbln::emu::dma
