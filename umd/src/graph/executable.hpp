// SPDX-License-Identifier: GPL-2.0
// executable.hpp - (internal) what a Graph handle holds: the interned
// Definition and how a replay binds it (graph.cpp replays it; capture.cpp
// makes it).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/definition.hpp"
#include "rbln/graph.hpp"
#include "rbln/storage.hpp"

namespace rbln::detail::graph {

struct Executable {
    std::shared_ptr<Device> device;
    std::shared_ptr<const Definition> def; ///< the device cache's copy
    /// Boundary tensors as captured, their directions and capture-time ids.
    std::vector<std::shared_ptr<Storage>> inputs;
    std::vector<GraphDirection> directions;
    struct Output {
        std::uint64_t id = 0;     ///< the capture-made storage's id
        std::uint64_t offset = 0; ///< in the replay's block
        std::uint64_t nbytes = 0;
        ElementType type = ElementType::Fp32;
    };
    std::vector<Output> outputs;  ///< in creation order
    std::uint64_t exec_bytes = 0; ///< the replay's block: outputs + intermediates
};

/// Replays @x on @stream with @inputs (rbln/graph.hpp).
std::vector<std::shared_ptr<Storage>> replay(const Executable& x, Stream& stream,
                                             std::span<const std::shared_ptr<Storage>> inputs);

} // namespace rbln::detail::graph
