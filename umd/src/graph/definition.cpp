// SPDX-License-Identifier: GPL-2.0
// definition.cpp - graph Definition layout, key and in-place build
// (definition.hpp).

#include "graph/definition.hpp"

#include <cstring>
#include <string>

#include "rbln/error.hpp"

namespace rbln::detail::graph {

namespace {

constexpr std::uint32_t kAlign = RBLN_FW_GRAPH_ALIGN;

constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) {
    return (v + a - 1) / a * a;
}

template <typename T> std::span<const std::byte> bytes_of(const std::vector<T>& v) {
    return std::as_bytes(std::span<const T>(v));
}

[[noreturn]] void too_big(const std::string& what) {
    throw Error(Errc::InvalidArgument, "graph capture", "", 0,
                what + " (firmware-iface/rbln_fw_graph.h); split the step into several graphs");
}

} // namespace

std::uint64_t content_hash(std::span<const std::byte> bytes, std::uint64_t seed) noexcept {
    // 8 bytes at a time: a multiply-xorshift mix (the key is checked
    // against the full content on every cache hit, so it only has to
    // spread well, not resist an adversary).
    std::uint64_t h = seed ^ (bytes.size() * 0x9e3779b97f4a7c15ull);
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, bytes.data() + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    std::uint64_t tail = 0;
    if (i < bytes.size())
        std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

void Definition::finish() {
    if (nodes.empty())
        throw Error(Errc::InvalidArgument, "graph capture", "", 0,
                    "the capture recorded no operation; run at least one rbln::ops call on the "
                    "capturing stream between begin_capture() and end_capture()");
    if (nodes.size() > RBLN_FW_GRAPH_MAX_NODES)
        too_big(std::to_string(nodes.size()) + " nodes are more than the card's " +
                std::to_string(RBLN_FW_GRAPH_MAX_NODES));
    if (prods.size() > RBLN_FW_GRAPH_MAX_EDGES)
        too_big(std::to_string(prods.size()) + " dependencies are more than the card's " +
                std::to_string(RBLN_FW_GRAPH_MAX_EDGES));
    if (boundaries.size() > RBLN_FW_GRAPH_MAX_BOUNDARIES)
        too_big(std::to_string(boundaries.size()) + " boundary tensors are more than the card's " +
                std::to_string(RBLN_FW_GRAPH_MAX_BOUNDARIES));
    // Sections in index order after the header, each aligned to its element.
    std::uint64_t at = sizeof(rbln_fw_graph_image);
    const std::uint64_t sizes[RBLN_FW_GRAPH_SECTIONS] = {
        nodes.size() * sizeof(rbln_fw_graph_node), rows.size() * sizeof(std::uint32_t),
        prods.size() * sizeof(std::uint16_t), roots.size() * sizeof(std::uint16_t),
        boundaries.size() * sizeof(rbln_fw_graph_tensor)};
    const std::uint64_t aligns[RBLN_FW_GRAPH_SECTIONS] = {16, 4, 2, 2, 16};
    for (unsigned s = 0; s < RBLN_FW_GRAPH_SECTIONS; s++) {
        at = align_up(at, aligns[s]);
        off[s] = static_cast<std::uint32_t>(at);
        at += sizes[s];
    }
    at = align_up(at, kAlign);
    if (at > RBLN_FW_GRAPH_MAX_BYTES)
        too_big("the Definition image of " + std::to_string(at) + " bytes is larger than " +
                std::to_string(RBLN_FW_GRAPH_MAX_BYTES));
    image_bytes = static_cast<std::uint32_t>(at);

    std::uint64_t h = content_hash(bytes_of(nodes), 0x7262'6c6e'6772'6170ull);
    h = content_hash(bytes_of(rows), h);
    h = content_hash(bytes_of(prods), h);
    h = content_hash(bytes_of(roots), h);
    h = content_hash(bytes_of(boundaries), h);
    const std::uint64_t tail[] = {exec_bytes, image_bytes};
    key = content_hash(std::as_bytes(std::span<const std::uint64_t>(tail)), h);
}

void Definition::build(std::span<std::byte> out) const {
    if (out.size() < object_bytes())
        throw Error(Errc::Internal, "graph build", "", 0,
                    "the room claimed for the Definition object is smaller than the object");
    std::byte* p = out.data();
    rbln_fw_graph_obj obj{};
    obj.magic = RBLN_FW_GRAPH_MAGIC;
    obj.full_key = key;
    obj.definition_bytes = image_bytes;
    std::memcpy(p, &obj, sizeof(obj));
    std::byte* img = p + sizeof(obj);

    rbln_fw_graph_image h{};
    h.full_key = key;
    h.total_bytes = image_bytes;
    h.version = RBLN_FW_GRAPH_VERSION;
    h.node_count = static_cast<std::uint32_t>(nodes.size());
    h.edge_count = static_cast<std::uint32_t>(prods.size());
    h.root_count = static_cast<std::uint32_t>(roots.size());
    h.boundary_count = static_cast<std::uint32_t>(boundaries.size());
    h.execution_storage_bytes = exec_bytes;
    std::memcpy(h.off, off, sizeof(off));
    std::memcpy(img, &h, sizeof(h));

    // Each section, then zeros up to the next one (the padding only).
    const std::span<const std::byte> secs[RBLN_FW_GRAPH_SECTIONS] = {
        bytes_of(nodes), bytes_of(rows), bytes_of(prods), bytes_of(roots), bytes_of(boundaries)};
    std::uint32_t at = sizeof(rbln_fw_graph_image);
    for (unsigned s = 0; s < RBLN_FW_GRAPH_SECTIONS; s++) {
        if (off[s] > at)
            std::memset(img + at, 0, off[s] - at);
        if (!secs[s].empty())
            std::memcpy(img + off[s], secs[s].data(), secs[s].size());
        at = off[s] + static_cast<std::uint32_t>(secs[s].size());
    }
    if (image_bytes > at)
        std::memset(img + at, 0, image_bytes - at);
}

bool Definition::same_content(const Definition& o) const noexcept {
    auto eq = [](const auto& a, const auto& b) {
        return a.size() == b.size() &&
               (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
    };
    return exec_bytes == o.exec_bytes && eq(nodes, o.nodes) && eq(rows, o.rows) &&
           eq(prods, o.prods) && eq(roots, o.roots) && eq(boundaries, o.boundaries);
}

} // namespace rbln::detail::graph
