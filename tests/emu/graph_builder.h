// SPDX-License-Identifier: GPL-2.0
// Test side: encodes graph Definitions (rbln_fw_graph.h) the way a host
// would -- node records holding the eager packet with relocations for its
// addresses, CSR fan-in, roots, boundary signatures -- and the
// GRAPH_EXEC packet and boundary table that run them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "rbln_fw_graph.h"

namespace rbln::emu::test {

inline rbln_fw_graph_reloc bnd(std::uint32_t index, std::uint64_t offset = 0) {
    return {RBLN_FW_GRAPH_RELOC_BOUNDARY, index, offset};
}
inline rbln_fw_graph_reloc exec_at(std::uint64_t offset) {
    return {RBLN_FW_GRAPH_RELOC_EXEC, 0, offset};
}
inline rbln_fw_graph_reloc none() {
    return {RBLN_FW_GRAPH_RELOC_NONE, 0, 0};
}

// A dense row-major tensor's signature.
inline rbln_fw_graph_tensor dense(std::uint32_t dtype, std::initializer_list<std::uint64_t> shape,
                                  std::uint16_t direction, std::size_t elem_size) {
    rbln_fw_graph_tensor t{};
    t.dtype = dtype;
    t.ndim = static_cast<std::uint16_t>(shape.size());
    t.direction = direction;
    std::uint64_t n = 1;
    unsigned d = 0;
    for (std::uint64_t s : shape)
        t.shape[d++] = s;
    for (unsigned i = t.ndim; i-- > 0;) {
        t.stride[i] = static_cast<std::int64_t>(n);
        n *= t.shape[i];
    }
    t.bytes = n * elem_size;
    return t;
}

class GraphBuilder {
public:
    // Where the sections of the last image() are (offsets in the image).
    struct Layout {
        std::uint32_t off[RBLN_FW_GRAPH_SECTIONS];
        std::uint32_t total;
    };

    std::uint32_t boundary(const rbln_fw_graph_tensor& t) {
        boundaries_.push_back(t);
        return static_cast<std::uint32_t>(boundaries_.size() - 1);
    }
    void exec_bytes(std::uint64_t n) { exec_bytes_ = n; }
    [[nodiscard]] std::uint64_t exec_bytes() const { return exec_bytes_; }

    // A node running `pkt` (addresses zero; the header is set here), its
    // operands at `r`, after `producers` (indices of earlier nodes).
    template <typename Pkt>
    std::uint32_t node(std::uint8_t op, Pkt pkt, std::initializer_list<rbln_fw_graph_reloc> r,
                       std::initializer_list<std::uint16_t> producers = {}) {
        rbln_fw_graph_node n{};
        n.op = op;
        pkt.hdr = RBLN_FW_PKT_HDR(op, 0, sizeof(pkt));
        std::memcpy(n.pkt.bytes, &pkt, sizeof(pkt));
        unsigned s = 0;
        for (const rbln_fw_graph_reloc& x : r)
            n.reloc[s++] = x;
        nodes_.push_back(n);
        fanin_.emplace_back(producers);
        return static_cast<std::uint32_t>(nodes_.size() - 1);
    }
    std::uint32_t launch(const rbln_fw_pkt_launch& l, rbln_fw_graph_reloc a, rbln_fw_graph_reloc b,
                         rbln_fw_graph_reloc out, std::initializer_list<std::uint16_t> deps = {}) {
        return node(RBLN_FW_PKT_LAUNCH, l, {a, b, out}, deps);
    }
    std::uint32_t copy(std::uint64_t size, rbln_fw_graph_reloc src, rbln_fw_graph_reloc dst,
                       std::initializer_list<std::uint16_t> deps = {}) {
        rbln_fw_pkt_copy p{};
        p.size = size;
        return node(RBLN_FW_PKT_COPY, p, {src, dst}, deps);
    }
    std::uint32_t fill(std::uint64_t size, std::uint64_t pattern, std::uint32_t pattern_bytes,
                       rbln_fw_graph_reloc dst, std::initializer_list<std::uint16_t> deps = {}) {
        rbln_fw_pkt_fill p{};
        p.size = size;
        p.pattern = pattern;
        p.pattern_bytes = pattern_bytes;
        return node(RBLN_FW_PKT_FILL, p, {dst}, deps);
    }
    std::uint32_t strided(const rbln_fw_pkt_copy_strided& p, rbln_fw_graph_reloc src,
                          rbln_fw_graph_reloc dst, std::initializer_list<std::uint16_t> deps = {}) {
        return node(RBLN_FW_PKT_COPY_STRIDED, p, {src, dst}, deps);
    }
    rbln_fw_graph_node& at(std::uint32_t i) { return nodes_.at(i); }
    std::vector<std::uint16_t>& fanin(std::uint32_t i) { return fanin_.at(i); }

    // The image: header, nodes, rows, producers, roots, signatures, each
    // section 16-byte aligned, the total a multiple of 16.
    [[nodiscard]] std::vector<std::byte> image(std::uint64_t key, Layout* layout = nullptr) const {
        const auto n = static_cast<std::uint32_t>(nodes_.size());
        std::vector<std::uint32_t> rows{0};
        std::vector<std::uint16_t> prods;
        std::vector<std::uint16_t> roots;
        for (std::uint32_t i = 0; i < n; i++) {
            for (std::uint16_t p : fanin_[i])
                prods.push_back(p);
            rows.push_back(static_cast<std::uint32_t>(prods.size()));
            if (fanin_[i].empty())
                roots.push_back(static_cast<std::uint16_t>(i));
        }
        auto up = [](std::size_t x) {
            return static_cast<std::uint32_t>((x + 15) & ~std::size_t{15});
        };
        rbln_fw_graph_image h{};
        h.full_key = key;
        h.version = RBLN_FW_GRAPH_VERSION;
        h.node_count = n;
        h.edge_count = static_cast<std::uint32_t>(prods.size());
        h.root_count = static_cast<std::uint32_t>(roots.size());
        h.boundary_count = static_cast<std::uint32_t>(boundaries_.size());
        h.execution_storage_bytes = exec_bytes_;
        std::uint32_t at = sizeof(h);
        h.off[RBLN_FW_GRAPH_SEC_NODES] = at;
        at = up(at + n * sizeof(rbln_fw_graph_node));
        h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS] = at;
        at = up(at + rows.size() * 4);
        h.off[RBLN_FW_GRAPH_SEC_FANIN_PRODS] = at;
        at = up(at + prods.size() * 2);
        h.off[RBLN_FW_GRAPH_SEC_ROOTS] = at;
        at = up(at + roots.size() * 2);
        h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES] = at;
        at = up(at + boundaries_.size() * sizeof(rbln_fw_graph_tensor));
        h.total_bytes = at;
        std::vector<std::byte> img(at);
        auto put = [&](std::uint32_t off, const void* p, std::size_t len) {
            if (len != 0)
                std::memcpy(img.data() + off, p, len);
        };
        put(0, &h, sizeof(h));
        put(h.off[RBLN_FW_GRAPH_SEC_NODES], nodes_.data(), n * sizeof(rbln_fw_graph_node));
        put(h.off[RBLN_FW_GRAPH_SEC_FANIN_ROWS], rows.data(), rows.size() * 4);
        put(h.off[RBLN_FW_GRAPH_SEC_FANIN_PRODS], prods.data(), prods.size() * 2);
        put(h.off[RBLN_FW_GRAPH_SEC_ROOTS], roots.data(), roots.size() * 2);
        put(h.off[RBLN_FW_GRAPH_SEC_BOUNDARIES], boundaries_.data(),
            boundaries_.size() * sizeof(rbln_fw_graph_tensor));
        if (layout != nullptr) {
            std::copy(std::begin(h.off), std::end(h.off), layout->off);
            layout->total = at;
        }
        return img;
    }

    // The Definition object: its 32-byte header, then image(key).
    [[nodiscard]] std::vector<std::byte> object(std::uint64_t key, Layout* layout = nullptr) const {
        return frame(key, image(key, layout));
    }
    static std::vector<std::byte> frame(std::uint64_t key, const std::vector<std::byte>& img) {
        rbln_fw_graph_obj o{};
        o.magic = RBLN_FW_GRAPH_MAGIC;
        o.full_key = key;
        o.definition_bytes = static_cast<std::uint32_t>(img.size());
        std::vector<std::byte> obj(sizeof(o) + img.size());
        std::memcpy(obj.data(), &o, sizeof(o));
        std::memcpy(obj.data() + sizeof(o), img.data(), img.size());
        return obj;
    }

    // The boundary table binding boundary i at vas[i].
    [[nodiscard]] std::vector<rbln_fw_graph_binding>
    bindings(const std::vector<std::uint64_t>& vas) const {
        std::vector<rbln_fw_graph_binding> t(boundaries_.size());
        for (std::size_t i = 0; i < t.size(); i++) {
            t[i].va = vas.at(i);
            t[i].tensor = boundaries_[i];
        }
        return t;
    }
    [[nodiscard]] std::uint32_t boundary_count() const {
        return static_cast<std::uint32_t>(boundaries_.size());
    }

private:
    std::vector<rbln_fw_graph_node> nodes_;
    std::vector<std::vector<std::uint16_t>> fanin_;
    std::vector<rbln_fw_graph_tensor> boundaries_;
    std::uint64_t exec_bytes_ = 0;
};

inline rbln_fw_pkt_graph_exec graph_exec(std::uint64_t definition, std::uint64_t boundaries,
                                         std::uint32_t count, std::uint64_t exec,
                                         std::uint64_t exec_bytes, std::uint32_t flags = 0) {
    rbln_fw_pkt_graph_exec p{};
    p.hdr = RBLN_FW_PKT_HDR(RBLN_FW_PKT_GRAPH_EXEC, 0, sizeof(p));
    p.boundary_count = count;
    p.definition = definition;
    p.boundaries = boundaries;
    p.exec = exec;
    p.exec_bytes = exec_bytes;
    p.flags = flags;
    return p;
}

} // namespace rbln::emu::test
