// SPDX-License-Identifier: GPL-2.0
// topology.hpp - rbln-smi --topo: where the cards sit (PCI path, NUMA node,
// local CPUs), their chiplets, and how each pair of cards is connected.
#pragma once

#include <string>
#include <string_view>

#include "card_extras.hpp"
#include "rbln/diagnostics.hpp"
#include "rbln/discovery.hpp"

namespace rbln::smi {

/// How two cards reach each other over PCIe (the legend of --topo):
///   X    the same card
///   PIX  behind the same PCIe bridge (siblings on one switch port or root port)
///   PXB  behind different bridges that share a PCIe bridge (e.g. one switch),
///        without crossing the host bridge
///   PHB  through the PCIe host bridge (the same root bus, no shared bridge)
///   NODE across host bridges of the same NUMA node
///   SYS  across NUMA nodes, or across host bridges where a NUMA node is unknown
std::string_view link_type(const CardPlacement& a, const CardPlacement& b);

/// The --topo view of @discovery's cards (placements from @extras; a card
/// without one shows N/A).
std::string render_topology(const Discovery& discovery, const ExtrasByBdf& extras);

} // namespace rbln::smi
