// SPDX-License-Identifier: GPL-2.0
// cli.hpp - rbln-demo's command line, report and exit status.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dtype.hpp"
#include "rbln/kernel.hpp"
#include "reference.hpp"

namespace rbln::demo {

/// Exit status of rbln-demo (3..5 as rbln-smi's).
enum Exit : int {
    kExitPass = 0,
    kExitWrongResult = 1, ///< the card's y is not within the bound
    kExitUsage = 2,
    kExitDriverNotLoaded = 3,
    kExitNoDevice = 4,
    kExitPermission = 5,
    kExitError = 6, ///< anything else: a kernel call, the job on the card, a timeout
};

struct Options {
    bool help = false;
    Shape shape;
    std::vector<DType> dtypes{DType::Fp32};
    unsigned chiplet = 0;
    std::optional<std::string> device; ///< else the first card discovery finds
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

/// Runs rbln-demo: the report goes to @out, errors to @err; returns the
/// exit status.  @opener opens the node (empty: the real one).
int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
        const DeviceOpener& opener = {});

} // namespace rbln::demo
