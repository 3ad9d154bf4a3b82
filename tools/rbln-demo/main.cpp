// SPDX-License-Identifier: GPL-2.0
// rbln-demo - a real workload on an rbln card, checked against the CPU.

#include <exception>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
    try {
        const std::vector<std::string_view> args(argv + 1, argv + argc);
        return rbln::demo::run(args, std::cout, std::cerr);
    } catch (const std::exception& e) {
        std::cerr << "rbln-demo: " << e.what() << "\n";
        return rbln::demo::kExitError;
    }
}
