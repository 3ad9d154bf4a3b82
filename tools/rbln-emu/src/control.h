// SPDX-License-Identifier: GPL-2.0
// The control protocol: one command line in, one reply line out
// ("ok[ key=value...]" or "error <message>").  Transport-free: the
// control server and the tests feed it lines.
#pragma once

#include <string>
#include <string_view>

#include "card.h"

namespace rbln::emu {

inline constexpr std::size_t kMaxControlLine = 4096;

class ControlInterface {
public:
    explicit ControlInterface(Card& card) : card_(card) {}

    // Executes one line (without its newline) and returns the reply line
    // (without newline).  Never throws for bad input.
    std::string execute(std::string_view line);

private:
    Card& card_;
};

} // namespace rbln::emu
