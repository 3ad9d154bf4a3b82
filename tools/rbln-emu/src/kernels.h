// SPDX-License-Identifier: GPL-2.0
// The built-in kernels of LAUNCH (rbln_fw_cmd.md): ADD, MUL, RELU, SCALE,
// MATMUL and CAST on fp32/fp16/bf16 tensors with shapes and element
// strides (0 broadcasts, negative ones walk backwards).  Inputs are
// widened to fp32 exactly, every result is computed in fp32 and rounded
// once to dtype_out (fp.h); MATMUL accumulates its products in fp32 in a
// blocked order (simd.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "engine.h"
#include "rbln_fw_cmd.h"
#include "simd.h"

namespace rbln::emu {

// nullptr when the fields of `p` are well formed, else why the packet is
// BAD_PACKET (kernel, types, ndim, shape, strides or addresses out of
// range, unused fields not zero).  The header is checked by the caller.
const char* check_launch(const rbln_fw_pkt_launch& p);

// The bytes a tensor of a LAUNCH reaches relative to its address:
// [lo, hi), lo <= 0 < hi (strides may be negative).
struct TensorReach {
    __int128 lo = 0;
    __int128 hi = 0;
};
struct LaunchReach {
    TensorReach a;
    TensorReach b; // used by ADD, MUL and MATMUL only
    TensorReach out;
    bool uses_b = false;
};
// For a LAUNCH whose fields (addresses aside) check_launch accepts.
LaunchReach launch_reach(const rbln_fw_pkt_launch& p);

// Runs a checked LAUNCH: translates every tensor first (a fault moves no
// byte), then computes.  Inputs that overlap the output in memory are read
// completely before anything is written; the bytes between output
// elements are never written.  Now and then it looks at `cancel` and lets
// a waiting MMU change pass (JobMemory::yield), after which it takes its
// tensors' translations again and goes on with them.
PacketResult run_launch(const rbln_fw_pkt_launch& p, JobMemory& mem, const Cancel& cancel);

// A tensor in host memory: element 0 at `base`, strides in elements.
struct TensorRef {
    std::byte* base = nullptr;
    std::array<std::int64_t, RBLN_FW_MAX_DIMS> stride{};
};

// The computations on host memory (run_launch and the tests use them).
// false when the checkpoint (may be null) said to stop.  `b` is read by ADD
// and MUL only.
bool run_elementwise(std::uint32_t kernel, std::uint32_t dtype_in, std::uint32_t dtype_out,
                     std::uint32_t ndim, const std::array<std::uint64_t, RBLN_FW_MAX_DIMS>& shape,
                     const TensorRef& a, const TensorRef& b, const TensorRef& out, float scale,
                     Checkpoint* cp, const simd::Ops& ops);
bool run_matmul(std::uint32_t dtype_in, std::uint32_t dtype_out, std::uint64_t m, std::uint64_t n,
                std::uint64_t k, const TensorRef& a, const TensorRef& b, const TensorRef& out,
                Checkpoint* cp, const simd::Ops& ops);

} // namespace rbln::emu
