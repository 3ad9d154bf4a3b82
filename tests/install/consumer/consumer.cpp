// SPDX-License-Identifier: GPL-2.0
// A C++ program built against an installed librbln through
// find_package(rbln) (tests/install/install_test.sh): prints the library
// version and the number of logical devices (0 without a card).
#include <rbln/rbln.hpp>

#include <iostream>

int main() {
    const unsigned count = rbln::Runtime::process().device_count();
    std::cout << "c++ (" << RBLN_CONSUMER_KIND << "): librbln " << rbln::library_version() << ", "
              << count << " logical devices\n";
    return 0;
}
