// SPDX-License-Identifier: GPL-2.0
// The seed hook every target of tests/fuzz shares: with RBLN_FUZZ_SEEDS=DIR
// in the environment, LLVMFuzzerInitialize writes the target's seeds into
// DIR and the process ends (tools/scripts/fuzz.sh, uapi-in-vm.sh).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace rbln::fuzz {

inline void write_seeds_if_asked(void (*write)(const std::filesystem::path&)) {
    if (const char* dir = std::getenv("RBLN_FUZZ_SEEDS")) {
        write(dir);
        std::exit(0);
    }
}

} // namespace rbln::fuzz
