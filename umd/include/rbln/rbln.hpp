// SPDX-License-Identifier: GPL-2.0
// rbln/rbln.hpp - the C++ API of librbln (umbrella header).
#pragma once

#include "rbln/allocator.hpp"         // IWYU pragma: export
#include "rbln/allocator_stream.hpp"  // IWYU pragma: export
#include "rbln/copy.hpp"              // IWYU pragma: export
#include "rbln/device.hpp"            // IWYU pragma: export
#include "rbln/devices.hpp"           // IWYU pragma: export
#include "rbln/diagnostics.hpp"       // IWYU pragma: export
#include "rbln/discovery.hpp"         // IWYU pragma: export
#include "rbln/error.hpp"             // IWYU pragma: export
#include "rbln/explain.hpp"           // IWYU pragma: export
#include "rbln/fdinfo.hpp"            // IWYU pragma: export
#include "rbln/host_allocator.hpp"    // IWYU pragma: export
#include "rbln/identity.hpp"          // IWYU pragma: export
#include "rbln/memory.hpp"            // IWYU pragma: export
#include "rbln/offload.hpp"           // IWYU pragma: export
#include "rbln/ops.hpp"               // IWYU pragma: export
#include "rbln/source_location.hpp"   // IWYU pragma: export
#include "rbln/storage.hpp"           // IWYU pragma: export
#include "rbln/stream.hpp"            // IWYU pragma: export
#include "rbln/submitter_options.hpp" // IWYU pragma: export
#include "rbln/version.hpp"           // IWYU pragma: export
