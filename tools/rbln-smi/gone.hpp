// SPDX-License-Identifier: GPL-2.0
// gone.hpp - the cards the driver unplugged while it stays bound to them.
//
// A card that falls off the bus (it answers every read with all-ones) is
// unplugged by rbln.ko: its accel node goes, so discovery no longer finds
// it, but the PCI function stays bound to rbln with sysfs rbln/state
// "unplugged" until it is unbound or removed.  rbln-smi names such cards
// as gone instead of leaving them out silently.
#pragma once

#include <string>
#include <vector>

#include "rbln/diagnostics.hpp"

namespace rbln::smi {

struct GoneCard {
    std::string pci_bdf;
    std::string state; ///< rbln/state: "unplugged"
};

/// The PCI functions below sys/bus/pci/devices bound to rbln whose
/// rbln/state reads "unplugged", sorted by BDF; unreadable entries are
/// skipped.
std::vector<GoneCard> find_gone_cards(const SystemView& system);

/// One line per card: "gone: <bdf> (state unplugged: ...)".
std::string render_gone(const std::vector<GoneCard>& gone);

} // namespace rbln::smi
