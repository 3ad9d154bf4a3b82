// SPDX-License-Identifier: GPL-2.0
// job_detail.hpp - why the card failed a job, beyond its errno: the
// completion's detail and detail_arg (firmware-iface 1.4, rbln_fw_graph.h
// RBLN_FW_GRAPH_E_*), which the kernel hands out through DRM_IOCTL_RBLN_WAIT.
#pragma once

#include <string>

#include "kernel/kernel.hpp"

namespace rbln {

/// A sentence for a human, e.g. "the card refused the graph: a node writes an
/// input boundary tensor (node 3) [RBLN_FW_GRAPH_E_RELOC_WRITE_IN]"; empty for
/// no detail.
std::string describe_job_detail(const JobDetail& d);

} // namespace rbln
