// SPDX-License-Identifier: GPL-2.0
// The card's MMU (firmware-iface 1.1, rbln_fw_mmu.md): ASID bindings, the
// four-level page-table walk in guest RAM, and TLBs.
//
// Independent of the transport: it sees guest RAM through GuestMemory and
// the card's memory BAR as a span described by a BarLayout.  Every
// card-side access by VA (the debug access, the command rings' DMA and
// compute engines) goes through a translation, which covers the whole
// range before any byte moves.
//
// Threads.  Every engine (one command processor per ring) has its own
// Mmu::Port: a TLB and counters only that engine's thread uses.  An engine
// translates and moves its bytes while it holds an Mmu::Hold on its
// port, a shared hold of the MMU.  The changes (bind, unbind, invalidate,
// reset) take the MMU exclusively: they wait until every engine has
// finished the access it is in the middle of, change bindings and every
// TLB, and only then return.  So once invalidate() has returned, no engine
// still uses a translation it dropped, and every later access of any
// engine walks the tables again: the TLB rule of the spec holds for all of
// them.  Writers go first (a waiting change blocks new holds), so rings
// that run back to back cannot starve an invalidation.  The calls on the
// Mmu itself (translate(), read(), write()) use the card's own port and
// may be made from any one thread at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
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
    std::uint64_t tlb_hits = 0;          // pages found in a TLB
    std::uint64_t tlb_misses = 0;        // pages walked
    std::uint64_t tlb_invalidations = 0; // invalidate() calls (TLB_INVALIDATE)
};

// A readers-writer lock where a waiting writer blocks new readers.
class SharedGate {
public:
    void lock_shared();
    void unlock_shared();
    void lock();
    void unlock();
    // A writer waits (readers holding the gate for long should let it in).
    [[nodiscard]] bool writer_waiting() const {
        return writers_waiting_.load(std::memory_order_relaxed) != 0;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    unsigned readers_ = 0;
    std::atomic<unsigned> writers_waiting_{0}; // changed under mu_
    bool writer_ = false;
};

class Mmu {
public:
    // Entries of each TLB (leaf and intermediate entries share it).
    static constexpr std::size_t kTlbEntries = 4096;

    class Port;
    class Hold;

    // `bar` is the card's memory BAR, `layout` where its HBM regions are.
    // LOCAL pages resolve into `bar`; a page outside it is BAD_ADDRESS.
    Mmu(GuestMemory& ram, std::span<std::byte> bar, const BarLayout& layout);
    ~Mmu();
    Mmu(const Mmu&) = delete;
    Mmu& operator=(const Mmu&) = delete;
    Mmu(Mmu&&) = delete;
    Mmu& operator=(Mmu&&) = delete;

    // Bindings.  The caller (the admin request) validates the arguments:
    // bind() needs 1 <= asid < RBLN_FW_MAX_ASID and a 4 KiB aligned root in
    // guest RAM and returns false otherwise; binding a bound ASID replaces
    // its root.  Both drop the ASID's cached translations in every TLB.
    bool bind(std::uint32_t asid, std::uint64_t root);
    bool unbind(std::uint32_t asid); // false if it was not bound
    [[nodiscard]] bool bound(std::uint32_t asid) const;
    [[nodiscard]] std::optional<std::uint64_t> root(std::uint32_t asid) const;
    [[nodiscard]] std::uint32_t bound_count() const { return bound_count_.load(); }

    // VM_ABORT: marks a bound ASID (false if it is not) so that its jobs
    // end CANCELLED; bind(), unbind() and reset() clear the mark.
    bool abort(std::uint32_t asid);
    [[nodiscard]] bool aborted(std::uint32_t asid) const {
        return asid < RBLN_FW_MAX_ASID && aborted_[asid].load(std::memory_order_acquire);
    }

    // Drops the cached translations of asid that overlap [va, va + size)
    // from every TLB; size 0: all of them.  An unbound ASID is fine
    // (nothing cached).  Returns once no engine uses a dropped entry.
    void invalidate(std::uint32_t asid, std::uint64_t va, std::uint64_t size);
    // Card reset: forgets every binding and every TLB entry.
    void reset();

    // Translates [va, va + len) for `access` through the card's own port.
    // On success `spans` (cleared first; its capacity is reused, so a caller
    // that keeps the vector does not allocate) holds the host memory in VA
    // order and the result is nullopt.  len 0 translates to no spans.
    std::optional<MmuFault> translate_into(std::uint32_t asid, std::uint64_t va, std::uint64_t len,
                                           Access access, std::vector<HostSpan>& spans);
    Translation translate(std::uint32_t asid, std::uint64_t va, std::uint64_t len, Access access);

    // Copy between the VA range and card-side memory; all-or-nothing (no
    // byte moves on a fault).  The ranges may overlap in guest memory.
    std::optional<MmuFault> read(std::uint32_t asid, std::uint64_t va, void* dst, std::size_t len);
    std::optional<MmuFault> write(std::uint32_t asid, std::uint64_t va, const void* src,
                                  std::size_t len);

    // Summed over every port, including those that are gone.
    [[nodiscard]] MmuStats stats() const;
    // Valid entries of the card's own TLB (for tests and diagnostics).
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

    // Direct mapped, tagged by ASID.
    class Tlb {
    public:
        Tlb() : entries_(kTlbEntries) {}
        [[nodiscard]] const TlbEntry* lookup(std::uint32_t asid, Kind kind, std::uint64_t va) const;
        void insert(std::uint32_t asid, Kind kind, std::uint64_t va, std::byte* host,
                    std::uint8_t perms);
        void drop_asid(std::uint32_t asid);
        void drop_range(std::uint32_t asid, std::uint64_t va, std::uint64_t size);
        void clear();
        [[nodiscard]] std::size_t size() const;

    private:
        std::vector<TlbEntry> entries_;
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

    // With the gate held (shared or exclusive).
    std::optional<MmuFault> translate_locked(Port& port, std::uint32_t asid, std::uint64_t va,
                                             std::uint64_t len, Access access,
                                             std::vector<HostSpan>& spans);
    std::variant<Page, std::uint32_t> page_of(Port& port, std::uint32_t asid, std::uint64_t va);
    std::variant<Page, std::uint32_t> walk(Tlb& tlb, std::uint32_t asid, std::uint64_t va);
    std::byte* local_page(std::uint64_t addr, std::uint64_t size) const;
    // With the gate held exclusively.
    void drop_asid_everywhere(std::uint32_t asid);

    GuestMemory& ram_;
    std::span<std::byte> bar_;
    BarLayout layout_;
    mutable SharedGate gate_;
    std::vector<Binding> bindings_;
    std::atomic<std::uint32_t> bound_count_{0};
    // VM_ABORT marks, read without the gate (by the command processors).
    std::unique_ptr<std::atomic<bool>[]> aborted_;
    std::vector<Port*> ports_; // every live port; changed with the gate held exclusively
    std::atomic<std::uint64_t> invalidations_{0};
    // Counters of ports that are gone.
    std::atomic<std::uint64_t> retired_hits_{0};
    std::atomic<std::uint64_t> retired_misses_{0};
    std::atomic<std::uint64_t> retired_faults_{0};
    // The card's own port (translate(), read(), write()), one caller at a time.
    mutable std::mutex own_mu_;
    std::unique_ptr<Port> own_;
    std::vector<HostSpan> scratch_; // read()/write(), under own_mu_
};

// An engine's view of the MMU: its own TLB and counters.  Create it on the
// engine's thread or before the thread starts; use it from that thread.
class Mmu::Port {
public:
    explicit Port(Mmu& mmu);
    ~Port();
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;
    Port(Port&&) = delete;
    Port& operator=(Port&&) = delete;

    [[nodiscard]] Mmu& mmu() { return mmu_; }

private:
    friend class Mmu;
    Mmu& mmu_;
    Tlb tlb_;
    std::atomic<std::uint64_t> hits_{0};
    std::atomic<std::uint64_t> misses_{0};
    std::atomic<std::uint64_t> faults_{0};
};

// A shared hold of the MMU by one engine: translations made through it stay
// valid (no change of the MMU completes) until it is destroyed.  Hold it
// for one packet's translation and data movement; never while waiting for
// anything else, and never while calling a changing Mmu method.
class Mmu::Hold {
public:
    explicit Hold(Port& port);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    Hold(Hold&&) = delete;
    Hold& operator=(Hold&&) = delete;

    // As Mmu::translate_into, through the engine's port.
    std::optional<MmuFault> translate_into(std::uint32_t asid, std::uint64_t va, std::uint64_t len,
                                           Access access, std::vector<HostSpan>& spans);
    // A kernel job (asid 0) has no page tables: `addr` is a host DMA
    // address.  One span of guest RAM, or BAD_ADDRESS at `addr` when the
    // range is not wholly RAM.  Counted like the translations.
    std::optional<MmuFault> translate_dma_into(std::uint64_t addr, std::uint64_t len, Access access,
                                               std::vector<HostSpan>& spans);
    // A change of the MMU waits for this hold (and every other) to end.
    [[nodiscard]] bool change_waiting() const;

private:
    Port& port_;
};

} // namespace rbln::emu
