// SPDX-License-Identifier: GPL-2.0
// rbln-smi - show the rbln NPU cards of this machine.

#include <iostream>
#include <string_view>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
    try {
        const std::vector<std::string_view> args(argv + 1, argv + argc);
        return rbln::smi::run(args, std::cout, std::cerr);
    } catch (...) {
        std::cerr << "rbln-smi: out of memory\n";
        return rbln::smi::kExitError;
    }
}
