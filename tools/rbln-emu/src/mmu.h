// SPDX-License-Identifier: GPL-2.0
// The card's MMU (firmware-iface 1.1, rbln_fw_mmu.md): ASID bindings, the
// four-level page-table walk in guest RAM, and a TLB.
//
// Independent of the transport: it sees guest RAM through GuestMemory and
// the card's memory BAR as a span described by a BarLayout.  Every
// card-side access by VA (the debug access now, DMA and compute engines
// later) goes through translate() or read()/write(), which translate the
// whole range before any byte moves.
//
// Not thread-safe: the card model runs on one thread.  Engines that get
// their own threads must serialize their calls (or get their own TLB).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "bar_layout.h"
#include "guest_memory.h"
#include "rbln_fw_mmu.h"

namespace rbln::emu {

enum class Access : std::uint32_t {
    read = RBLN_FW_ACCESS_READ,
    write = RBLN_FW_ACCESS_WRITE,
};

// Why and where an access faulted.
struct MmuFault {
    std::uint32_t reason = 0; // RBLN_FW_MMU_*
    std::uint64_t va = 0;     // first faulting byte of the range
    Access access = Access::read;

    friend bool operator==(const MmuFault&, const MmuFault&) = default;
};

// A piece of a translated range: host memory the access may touch (guest
// RAM or the BAR's HBM).  Consecutive pieces that are contiguous in host
// memory are merged.
using HostSpan = std::span<std::byte>;

// The expected-like result of Mmu::translate(): the spans, in VA order,
// or the fault.
class Translation {
public:
    explicit Translation(std::vector<HostSpan> spans) : value_(std::move(spans)) {}
    explicit Translation(const MmuFault& fault) : value_(fault) {}

    [[nodiscard]] bool ok() const { return std::holds_alternative<std::vector<HostSpan>>(value_); }
    explicit operator bool() const { return ok(); }
    // Only when ok().
    [[nodiscard]] const std::vector<HostSpan>& spans() const {
        return std::get<std::vector<HostSpan>>(value_);
    }
    // Only when !ok().
    [[nodiscard]] const MmuFault& fault() const { return std::get<MmuFault>(value_); }

private:
    std::variant<std::vector<HostSpan>, MmuFault> value_;
};

struct MmuStats {
    std::uint64_t faults = 0;            // translations that faulted
    std::uint64_t tlb_hits = 0;          // pages found in the TLB
    std::uint64_t tlb_misses = 0;        // pages walked
    std::uint64_t tlb_invalidations = 0; // invalidate() calls (TLB_INVALIDATE)
};

class Mmu {
public:
    // Entries of the TLB (leaf and intermediate entries share it).
    static constexpr std::size_t kTlbEntries = 4096;

    // `bar` is the card's memory BAR, `layout` where its HBM regions are.
    // LOCAL pages resolve into `bar`; a page outside it is BAD_ADDRESS.
    Mmu(GuestMemory& ram, std::span<std::byte> bar, const BarLayout& layout);

    // Bindings.  The caller (the admin request) validates the arguments:
    // bind() needs 1 <= asid < RBLN_FW_MAX_ASID and a 4 KiB aligned root in
    // guest RAM and returns false otherwise; binding a bound ASID replaces
    // its root.  Both drop the ASID's cached translations.
    bool bind(std::uint32_t asid, std::uint64_t root);
    bool unbind(std::uint32_t asid); // false if it was not bound
    [[nodiscard]] bool bound(std::uint32_t asid) const;
    [[nodiscard]] std::optional<std::uint64_t> root(std::uint32_t asid) const;
    [[nodiscard]] std::uint32_t bound_count() const { return bound_count_; }

    // Drops the cached translations of asid that overlap [va, va + size);
    // size 0: all of them.  An unbound ASID is fine (nothing cached).
    void invalidate(std::uint32_t asid, std::uint64_t va, std::uint64_t size);
    // Card reset: forgets every binding and the whole TLB.
    void reset();

    // Translates [va, va + len) for `access`.  On success `spans` (cleared
    // first; its capacity is reused, so a caller that keeps the vector does
    // not allocate) holds the host memory in VA order and the result is
    // nullopt.  len 0 translates to no spans.
    std::optional<MmuFault> translate_into(std::uint32_t asid, std::uint64_t va, std::uint64_t len,
                                           Access access, std::vector<HostSpan>& spans);
    Translation translate(std::uint32_t asid, std::uint64_t va, std::uint64_t len, Access access);

    // Copy between the VA range and card-side memory; all-or-nothing (no
    // byte moves on a fault).  The ranges may overlap in guest memory.
    std::optional<MmuFault> read(std::uint32_t asid, std::uint64_t va, void* dst, std::size_t len);
    std::optional<MmuFault> write(std::uint32_t asid, std::uint64_t va, const void* src,
                                  std::size_t len);

    [[nodiscard]] const MmuStats& stats() const { return stats_; }
    // Valid TLB entries (for tests and diagnostics).
    [[nodiscard]] std::size_t tlb_size() const;

private:
    // What a TLB entry caches.  Pages hold the page's host address and
    // permissions; tables the host address of the next-level table that
    // covers the entry's VA range.
    enum class Kind : std::uint8_t {
        empty,
        page4k, // 4 KiB page; vpn = va >> 12
        page2m, // 2 MiB page; vpn = va >> 21
        table0, // level-0 table; vpn = va >> 21
        table1, // level-1 table; vpn = va >> 30
        table2, // level-2 table; vpn = va >> 39
    };

    struct TlbEntry {
        std::uint64_t vpn = 0;
        std::byte* host = nullptr;
        std::uint16_t asid = 0;
        Kind kind = Kind::empty;
        std::uint8_t perms = 0; // RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE
    };

    struct Page {
        std::byte* host = nullptr; // first byte of the page
        std::uint64_t size = 0;
        std::uint8_t perms = 0;
    };

    struct Binding {
        std::byte* root = nullptr; // nullptr: not bound
        std::uint64_t root_gpa = 0;
    };

    static unsigned shift_of(Kind kind);
    static std::size_t slot_of(std::uint32_t asid, Kind kind, std::uint64_t vpn);
    const TlbEntry* lookup(std::uint32_t asid, Kind kind, std::uint64_t va) const;
    void insert(std::uint32_t asid, Kind kind, std::uint64_t va, std::byte* host,
                std::uint8_t perms);
    void drop_asid(std::uint32_t asid);

    // The page holding va: from the TLB or by walking; reason on failure.
    std::variant<Page, std::uint32_t> page_of(std::uint32_t asid, std::uint64_t va);
    std::variant<Page, std::uint32_t> walk(std::uint32_t asid, std::uint64_t va);
    std::byte* local_page(std::uint64_t addr, std::uint64_t size) const;

    GuestMemory& ram_;
    std::span<std::byte> bar_;
    BarLayout layout_;
    std::vector<Binding> bindings_;
    std::uint32_t bound_count_ = 0;
    std::vector<TlbEntry> tlb_;
    std::vector<HostSpan> scratch_; // read()/write()
    MmuStats stats_;
};

} // namespace rbln::emu
