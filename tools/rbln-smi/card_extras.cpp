// SPDX-License-Identifier: GPL-2.0
// card_extras.cpp - the sysfs figures of a card that discovery does not read.

#include "card_extras.hpp"

namespace rbln::smi {

ExtrasByBdf read_extras(const SystemView& system, const Discovery& discovery) {
    ExtrasByBdf extras;
    for (const auto& c : discovery.cards) {
        CardExtras e;
        try {
            e.placement = read_card_placement(system, c.pci_bdf);
        } catch (const Error& err) {
            if (err.code() != Errc::NotFound && err.code() != Errc::BadValue)
                throw;
            // gone since discovery, or an odd tree: shown as N/A
        }
        e.use = read_card_use(system, c.pci_bdf);
        extras.emplace(c.pci_bdf, std::move(e));
    }
    return extras;
}

} // namespace rbln::smi
