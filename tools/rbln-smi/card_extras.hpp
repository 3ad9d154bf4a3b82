// SPDX-License-Identifier: GPL-2.0
// card_extras.hpp - the sysfs figures of a card that discovery does not
// read: where it sits (topology) and its use and resets.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "rbln/diagnostics.hpp"
#include "rbln/discovery.hpp"

namespace rbln::smi {

struct CardExtras {
    std::optional<CardPlacement> placement; ///< nullopt if it could not be read
    CardUse use;
};

/// By PCI BDF.
using ExtrasByBdf = std::map<std::string, CardExtras>;

/// The extras of every card of @discovery; a placement that cannot be
/// read is nullopt, a malformed number throws (Errc::BadValue naming the
/// file).
ExtrasByBdf read_extras(const SystemView& system, const Discovery& discovery);

} // namespace rbln::smi
