// SPDX-License-Identifier: GPL-2.0
// gone.cpp - the cards the driver unplugged while it stays bound to them.

#include "gone.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace rbln::smi {

namespace fs = std::filesystem;

namespace {

// The first line of @path without trailing blanks; empty if unreadable.
std::string first_line(const fs::path& path) {
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line))
        return {};
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
        line.pop_back();
    return line;
}

} // namespace

std::vector<GoneCard> find_gone_cards(const SystemView& system) {
    std::vector<GoneCard> gone;
    std::error_code ec;
    const fs::path devices = system.root / "sys/bus/pci/devices";
    for (fs::directory_iterator it(devices, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path dev = it->path();
        std::error_code lec;
        const fs::path driver = fs::read_symlink(dev / "driver", lec);
        if (lec || driver.filename() != "rbln")
            continue;
        std::string state = first_line(dev / "rbln/state");
        if (state == "unplugged")
            gone.push_back({dev.filename().string(), std::move(state)});
    }
    std::ranges::sort(gone, {}, &GoneCard::pci_bdf);
    return gone;
}

std::string render_gone(const std::vector<GoneCard>& gone) {
    std::string text;
    for (const auto& g : gone)
        text += "gone: " + g.pci_bdf + " (state " + g.state +
                ": the card was removed or stopped answering; the driver unplugged it; unbind "
                "and bind it again once it is back, see 'dmesg | grep rbln')\n";
    return text;
}

} // namespace rbln::smi
