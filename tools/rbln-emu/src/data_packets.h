// SPDX-License-Identifier: GPL-2.0
// The packets that move or compute data -- COPY, COPY_STRIDED and FILL
// here, LAUNCH in kernels.h -- as checks of their fields and runs on a
// job's memory.  A command processor runs them as packets of a job, the
// graph executor (graph.h) as nodes of a Definition: the same code, so a
// node computes exactly what the same packet computes.
#pragma once

#include <cstdint>
#include <vector>

#include "engine.h"
#include "rbln_fw_cmd.h"

namespace rbln::emu {

// nullptr when the fields (not the header) are well formed, else why the
// packet is BAD_PACKET.
const char* check_copy(const rbln_fw_pkt_copy& p);
const char* check_copy_strided(const rbln_fw_pkt_copy_strided& p);
const char* check_fill(const rbln_fw_pkt_fill& p);

// Span lists an engine keeps, so that steady runs do not allocate.
struct DmaScratch {
    std::vector<HostSpan> src;
    std::vector<HostSpan> dst;
};

// Run a checked packet with the memory held (PortMemory::Scope): every
// byte it touches is translated before any moves (a fault moves nothing);
// `cancelled` in the result when `cancel` was set meanwhile (some bytes
// may have moved).  On success the bytes moved are added to `moved`.
PacketResult run_copy(const rbln_fw_pkt_copy& p, JobMemory& mem, DmaScratch& s,
                      const Cancel& cancel, std::uint64_t& moved);
PacketResult run_copy_strided(const rbln_fw_pkt_copy_strided& p, JobMemory& mem, DmaScratch& s,
                              const Cancel& cancel, std::uint64_t& moved);
PacketResult run_fill(const rbln_fw_pkt_fill& p, JobMemory& mem, DmaScratch& s,
                      const Cancel& cancel, std::uint64_t& moved);

} // namespace rbln::emu
