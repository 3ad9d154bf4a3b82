// SPDX-License-Identifier: GPL-2.0
// cli.hpp - rbln-demo's command line, report and exit status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dtype.hpp"
#include "exit_codes.hpp"
#include "rbln/allocator.hpp"
#include "rbln/device.hpp"
#include "rbln/diagnostics.hpp"
#include "reference.hpp"

namespace rbln::demo {

/// Exit status of rbln-demo: the tools' shared table
/// (tools/common/exit_codes.hpp) and the demo's own.
using tools::kExitDriverNotLoaded;
using tools::kExitNoDevice;
using tools::kExitPermission;
using tools::kExitUsage;
inline constexpr int kExitPass = tools::kExitOk;
inline constexpr int kExitWrongResult = 1; ///< the card's y is not within the bound
inline constexpr int kExitError = 6; ///< anything else: a kernel call, a job on the card, a timeout

struct Options {
    bool help = false;
    Shape shape;
    std::vector<DType> dtypes{DType::Fp32};
    std::optional<unsigned> chiplet;   ///< only this chiplet; else all of the card's
    std::optional<std::string> device; ///< else the first logical device
    float scale = 0.375F;
    std::uint64_t seed = 1;
};

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Parses the arguments (without argv[0]); throws UsageError.
Options parse_options(std::span<const std::string_view> args);

/// "M,K,N" with each in 1..65536; throws UsageError.
Shape parse_shape(std::string_view text);

/// The card the demo runs on: a logical device of the process, the caching
/// allocator its storages come from, and what the report says about it.
struct Card {
    std::shared_ptr<Device> device;
    DeviceAllocator* allocator = nullptr;
    std::string node;        ///< "/dev/accel/accel0"
    std::string description; ///< "Rebel100, 4 chiplets, firmware ..., firmware-iface 1.3"
    /// Card time this process's jobs have spent on each chiplet's ring so
    /// far (the kernel's count); empty if not known.
    std::function<BusyCounters()> ring_ns;
};

/// Opens the card of --device (nullopt: logical device 0).
using CardOpener = std::function<Card(const std::optional<std::string>& node)>;

/// The process's card, as a framework opens it: the logical device whose
/// node is @node (Device::get(), process_allocator()).  Errc::NoDevice if
/// no card is visible or @node is none of them.
Card open_process_card(const std::optional<std::string>& node);

/// Runs rbln-demo: the report goes to @out, errors to @err; returns the
/// exit status.  @opener opens the card (empty: open_process_card).
int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
        const CardOpener& opener = {});

} // namespace rbln::demo
