// SPDX-License-Identifier: GPL-2.0
// topology.cpp - rbln-smi --topo.

#include "topology.hpp"

#include <algorithm>
#include <vector>

#include "format.hpp"

namespace rbln::smi {

namespace {

std::string pad(std::string s, std::size_t width) {
    if (s.size() < width)
        s.insert(0, width - s.size(), ' ');
    return s;
}

const CardPlacement* placement_of(const ExtrasByBdf& extras, const CardInfo& c) {
    const auto it = extras.find(c.pci_bdf);
    return it != extras.end() && it->second.placement ? &*it->second.placement : nullptr;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
    std::string s;
    for (const auto& p : parts) {
        if (!s.empty())
            s += sep;
        s += p;
    }
    return s;
}

} // namespace

std::string_view link_type(const CardPlacement& a, const CardPlacement& b) {
    if (a.pci_path == b.pci_path)
        return "X";
    if (a.pci_path.empty() || b.pci_path.empty() || a.pci_path.front() != b.pci_path.front())
        return a.numa_node >= 0 && a.numa_node == b.numa_node ? "NODE" : "SYS";
    // The parents: the root bus, then every bridge down to the function.
    const std::size_t na = a.pci_path.size() - 1;
    const std::size_t nb = b.pci_path.size() - 1;
    std::size_t common = 0;
    while (common < na && common < nb && a.pci_path[common] == b.pci_path[common])
        common++;
    if (common <= 1)
        return "PHB"; // only the root bus (host bridge) is shared
    if (common == na && common == nb)
        return "PIX"; // the same bridge right above both
    return "PXB";
}

std::string render_topology(const Discovery& d, const ExtrasByBdf& extras) {
    std::string out;
    for (const auto& c : d.cards) {
        const CardPlacement* p = placement_of(extras, c);
        out += "NPU " + std::to_string(c.index) + "  " +
               std::string(family_display_name(c.family)) + "  " + c.pci_bdf + "  " + c.accel_node +
               "\n";
        const int numa = p != nullptr ? p->numa_node : c.numa_node;
        out += "  NUMA node  " + (numa >= 0 ? std::to_string(numa) : std::string("none")) + "\n";
        out += "  CPUs       " +
               (p != nullptr && !p->local_cpulist.empty() ? p->local_cpulist : std::string("N/A")) +
               "\n";
        out +=
            "  PCI path   " + (p != nullptr ? join(p->pci_path, " > ") : std::string("N/A")) + "\n";
        for (const auto& ch : c.chiplets)
            out += "  chiplet " + std::to_string(ch.index) + "  HBM " +
                   format_bytes(ch.hbm_total_bytes) + "\n";
    }
    if (d.cards.size() < 2)
        return out;

    // The connection matrix.
    std::vector<std::string> names;
    names.reserve(d.cards.size());
    std::size_t width = 4; // "NODE"
    for (const auto& c : d.cards) {
        names.push_back("NPU" + std::to_string(c.index));
        width = std::max(width, names.back().size());
    }
    out += "\nConnections:\n  " + std::string(width, ' ');
    for (const auto& n : names)
        out += "  " + pad(n, width);
    out += "\n";
    for (std::size_t i = 0; i < d.cards.size(); i++) {
        out += "  " + pad(names[i], width);
        const CardPlacement* pi = placement_of(extras, d.cards[i]);
        for (std::size_t j = 0; j < d.cards.size(); j++) {
            const CardPlacement* pj = placement_of(extras, d.cards[j]);
            std::string t;
            if (i == j)
                t = "X";
            else if (pi == nullptr || pj == nullptr)
                t = "N/A";
            else
                t = link_type(*pi, *pj);
            out += "  " + pad(t, width);
        }
        out += "\n";
    }
    out += "\n"
           "  X    = the same card\n"
           "  PIX  = behind the same PCIe bridge\n"
           "  PXB  = behind bridges that share a PCIe bridge (not through the host bridge)\n"
           "  PHB  = through the PCIe host bridge\n"
           "  NODE = across PCIe host bridges of one NUMA node\n"
           "  SYS  = across NUMA nodes (or host bridges of unknown NUMA nodes)\n";
    return out;
}

} // namespace rbln::smi
