// SPDX-License-Identifier: GPL-2.0
// definition.hpp - (internal) the content of a graph Definition
// (firmware-iface/rbln_fw_graph.h) and the builder that writes it as a
// Definition object into memory the caller claimed.
//
// A Definition is made once per capture (capture.cpp) from the recorded
// nodes: node records whose address fields are zero and whose operands are
// relocations, CSR fan-in, roots, boundary signatures and the execution
// storage size.  finish() lays the image out (the layout pass: section
// offsets and the total size, nothing written) and computes its content
// key; build() then writes the object header and the image straight into
// the bytes it is given (a retained staging block at a claimed offset, or
// a buffer of its own): every byte of the object is written exactly once,
// the padding between sections included, so the memory needs no zero fill
// first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rbln_fw_graph.h"

namespace rbln::detail::graph {

struct Definition {
    std::vector<rbln_fw_graph_node> nodes;
    std::vector<std::uint32_t> rows; ///< node_count + 1 CSR row offsets
    std::vector<std::uint16_t> prods;
    std::vector<std::uint16_t> roots;
    std::vector<rbln_fw_graph_tensor> boundaries;
    std::uint64_t exec_bytes = 0;

    // Set by finish().
    std::uint64_t key = 0;
    std::uint32_t off[RBLN_FW_GRAPH_SECTIONS] = {};
    std::uint32_t image_bytes = 0; ///< the image's total_bytes (a multiple of 16)

    /// The layout pass and the content key.  Errc::InvalidArgument when a
    /// limit of rbln_fw_graph.h is exceeded (naming it).
    void finish();
    /// Bytes of the object: its 32-byte header and the image.
    std::uint32_t object_bytes() const noexcept {
        return static_cast<std::uint32_t>(sizeof(rbln_fw_graph_obj)) + image_bytes;
    }
    /// Writes the object (header + image) to @out (object_bytes() bytes,
    /// 16-byte aligned).
    void build(std::span<std::byte> out) const;
    /// The same content (nodes, edges, roots, signatures, storage size).
    bool same_content(const Definition& other) const noexcept;
};

/// 64-bit content hash over @bytes, continuing @seed.
std::uint64_t content_hash(std::span<const std::byte> bytes, std::uint64_t seed) noexcept;

} // namespace rbln::detail::graph
