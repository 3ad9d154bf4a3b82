// SPDX-License-Identifier: GPL-2.0
// job_detail.cpp - the card's reasons for a failed GRAPH_EXEC, in words
// (firmware-iface rbln_fw_graph.md, "What the card checks").

#include "exec/job_detail.hpp"

#include "rbln_fw_graph.h"

namespace rbln {

namespace {

struct DetailText {
    const char* name;  // the RBLN_FW_GRAPH_E_* suffix
    const char* what;  // what the check found
    const char* where; // what detail_arg names ("" for nothing)
};

DetailText detail_text(std::uint32_t code) {
    switch (code) {
    case RBLN_FW_GRAPH_E_PACKET:
        return {"PACKET", "the GRAPH_EXEC packet's reserved fields, flags or alignment are wrong",
                ""};
    case RBLN_FW_GRAPH_E_MAGIC:
        return {"MAGIC",
                "the Definition object's magic is wrong (not a Definition at that address)", ""};
    case RBLN_FW_GRAPH_E_OBJ_BYTES:
        return {"OBJ_BYTES", "the object's definition_bytes is out of range or not 16-byte aligned",
                ""};
    case RBLN_FW_GRAPH_E_TOTAL_BYTES:
        return {"TOTAL_BYTES", "the image's total_bytes differs from the object's definition_bytes",
                ""};
    case RBLN_FW_GRAPH_E_KEY:
        return {"KEY", "the object header frames another Definition (full_key differs)", ""};
    case RBLN_FW_GRAPH_E_VERSION:
        return {"VERSION", "the image's version or reserved field is not supported", ""};
    case RBLN_FW_GRAPH_E_COUNT:
        return {"COUNT", "a count is beyond its limit", "section"};
    case RBLN_FW_GRAPH_E_BOUNDARY_COUNT:
        return {"BOUNDARY_COUNT", "the packet binds a different number of boundary tensors than",
                "the image's count"};
    case RBLN_FW_GRAPH_E_EXEC_BYTES:
        return {"EXEC_BYTES", "the execution storage bound is smaller than the image needs", ""};
    case RBLN_FW_GRAPH_E_SECTION:
        return {"SECTION", "a section lies outside the image", "section"};
    case RBLN_FW_GRAPH_E_ALIGN:
        return {"ALIGN", "a section offset is misaligned", "section"};
    case RBLN_FW_GRAPH_E_FANIN:
        return {"FANIN", "the fan-in rows are malformed", "node"};
    case RBLN_FW_GRAPH_E_CYCLE:
        return {"CYCLE", "a producer index is not below its consumer", "consumer node"};
    case RBLN_FW_GRAPH_E_ROOTS:
        return {"ROOTS", "the roots are not exactly the nodes without fan-in", "root slot"};
    case RBLN_FW_GRAPH_E_SIGNATURE:
        return {"SIGNATURE", "a boundary signature is malformed", "boundary"};
    case RBLN_FW_GRAPH_E_BINDING:
        return {"BINDING", "a bound tensor does not match its boundary signature", "boundary"};
    case RBLN_FW_GRAPH_E_NODE:
        return {"NODE", "a node record or its packet is malformed", "node"};
    case RBLN_FW_GRAPH_E_RELOC:
        return {"RELOC", "a node's relocation is malformed (kind, index or slot)", "node"};
    case RBLN_FW_GRAPH_E_RELOC_RANGE:
        return {"RELOC_RANGE",
                "a node's operand reaches outside its tensor or the execution storage", "node"};
    case RBLN_FW_GRAPH_E_RELOC_WRITE_IN:
        return {"RELOC_WRITE_IN", "a node writes an input boundary tensor", "node"};
    case RBLN_FW_GRAPH_E_IN_NODE:
        return {"IN_NODE", "a node failed while running", "node"};
    default:
        return {nullptr, nullptr, nullptr};
    }
}

} // namespace

std::string describe_job_detail(const JobDetail& d) {
    if (d.detail == 0)
        return {};
    const DetailText t = detail_text(d.detail);
    if (t.name == nullptr)
        return "the card reported detail " + std::to_string(d.detail) + " (argument " +
               std::to_string(d.detail_arg) + "), which this librbln does not know";
    std::string s;
    if (d.detail == RBLN_FW_GRAPH_E_IN_NODE) {
        s = "node " + std::to_string(d.detail_arg) + " of the graph failed while running";
    } else if (d.detail == RBLN_FW_GRAPH_E_BOUNDARY_COUNT) {
        s = std::string("the card refused the graph: ") + t.what + " the image declares (" +
            std::to_string(d.detail_arg) + ")";
    } else {
        s = std::string("the card refused the graph: ") + t.what;
        if (*t.where != '\0')
            s += std::string(" (") + t.where + " " + std::to_string(d.detail_arg) + ")";
    }
    s += std::string(" [RBLN_FW_GRAPH_E_") + t.name + "]";
    return s;
}

} // namespace rbln
