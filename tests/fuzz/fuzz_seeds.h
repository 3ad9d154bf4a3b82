// SPDX-License-Identifier: GPL-2.0
// What the targets of tests/fuzz share.  The seed hook: with
// RBLN_FUZZ_SEEDS=DIR in the environment, LLVMFuzzerInitialize writes the
// target's seeds into DIR and the process ends (tools/scripts/fuzz.sh,
// uapi-in-vm.sh).  And the input hook of a target built around one harness
// object for the whole process (a card, set up once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace rbln::fuzz {

inline void write_seeds_if_asked(void (*write)(const std::filesystem::path&)) {
    if (const char* dir = std::getenv("RBLN_FUZZ_SEEDS")) {
        write(dir);
        std::exit(0);
    }
}

// LLVMFuzzerTestOneInput of such a target: Harness is made at the first
// input and its run(data, size) takes every input.
template <typename Harness> int run_input(const std::uint8_t* data, std::size_t size) {
    static const std::unique_ptr<Harness> harness = std::make_unique<Harness>();
    harness->run(data, size);
    return 0;
}

} // namespace rbln::fuzz
