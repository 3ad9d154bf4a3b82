// SPDX-License-Identifier: GPL-2.0
// Page-table walk and TLB of the card's MMU (rbln_fw_mmu.md).
#include "mmu.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

namespace rbln::emu {

namespace {

static_assert(std::endian::native == std::endian::little,
              "page-table entries are little endian; add byte swapping for this host");
static_assert(Mmu::kTlbEntries > 0 && (Mmu::kTlbEntries & (Mmu::kTlbEntries - 1)) == 0);

constexpr std::uint64_t kVaLimit = 1ULL << RBLN_FW_VA_BITS;
constexpr std::uint64_t kTableBytes = RBLN_FW_PT_ENTRIES * sizeof(std::uint64_t);
constexpr std::uint64_t kReservedBits = ~(RBLN_FW_PTE_ADDR_MASK | RBLN_FW_PTE_FLAGS_MASK);
constexpr std::uint64_t kPageFlags = RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE | RBLN_FW_PTE_LOCAL;
constexpr std::uint64_t kPermBits = RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE;

// An entry of a table the host may be rewriting: one 64-bit load.
std::uint64_t load_entry(std::byte* table, std::uint64_t index) {
    auto* entry = reinterpret_cast<std::uint64_t*>(table + index * sizeof(std::uint64_t));
    return std::atomic_ref<std::uint64_t>(*entry).load(std::memory_order_acquire);
}

} // namespace

Mmu::Mmu(GuestMemory& ram, std::span<std::byte> bar, const BarLayout& layout)
    : ram_(ram), bar_(bar), layout_(layout), bindings_(RBLN_FW_MAX_ASID), tlb_(kTlbEntries) {}

// --- bindings ---------------------------------------------------------------

bool Mmu::bind(std::uint32_t asid, std::uint64_t root) {
    if (asid == 0 || asid >= RBLN_FW_MAX_ASID || root % RBLN_FW_PAGE_SIZE != 0)
        return false;
    std::byte* host = ram_.translate(root, kTableBytes);
    if (host == nullptr)
        return false;
    Binding& b = bindings_[asid];
    if (b.root == nullptr)
        bound_count_++;
    b.root = host;
    b.root_gpa = root;
    drop_asid(asid);
    return true;
}

bool Mmu::unbind(std::uint32_t asid) {
    if (!bound(asid))
        return false;
    bindings_[asid] = Binding{};
    bound_count_--;
    drop_asid(asid);
    return true;
}

bool Mmu::bound(std::uint32_t asid) const {
    return asid < bindings_.size() && bindings_[asid].root != nullptr;
}

std::optional<std::uint64_t> Mmu::root(std::uint32_t asid) const {
    if (!bound(asid))
        return std::nullopt;
    return bindings_[asid].root_gpa;
}

void Mmu::reset() {
    std::fill(bindings_.begin(), bindings_.end(), Binding{});
    bound_count_ = 0;
    std::fill(tlb_.begin(), tlb_.end(), TlbEntry{});
}

// --- TLB --------------------------------------------------------------------

unsigned Mmu::shift_of(Kind kind) {
    switch (kind) {
    case Kind::page4k:
        return RBLN_FW_PT_SHIFT(0);
    case Kind::page2m:
    case Kind::table0:
        return RBLN_FW_PT_SHIFT(1);
    case Kind::table1:
        return RBLN_FW_PT_SHIFT(2);
    case Kind::table2:
        return RBLN_FW_PT_SHIFT(3);
    case Kind::empty:
        break;
    }
    return 64;
}

std::size_t Mmu::slot_of(std::uint32_t asid, Kind kind, std::uint64_t vpn) {
    std::uint64_t h = vpn * 0x9e3779b97f4a7c15ULL;
    h ^= (std::uint64_t{asid} << 8 | static_cast<std::uint64_t>(kind)) * 0xc2b2ae3d27d4eb4fULL;
    h ^= h >> 29;
    return static_cast<std::size_t>(h & (kTlbEntries - 1));
}

const Mmu::TlbEntry* Mmu::lookup(std::uint32_t asid, Kind kind, std::uint64_t va) const {
    const std::uint64_t vpn = va >> shift_of(kind);
    const TlbEntry& e = tlb_[slot_of(asid, kind, vpn)];
    if (e.kind == kind && e.asid == asid && e.vpn == vpn)
        return &e;
    return nullptr;
}

// Direct mapped: a new entry evicts whatever shared its slot.
void Mmu::insert(std::uint32_t asid, Kind kind, std::uint64_t va, std::byte* host,
                 std::uint8_t perms) {
    const std::uint64_t vpn = va >> shift_of(kind);
    tlb_[slot_of(asid, kind, vpn)] =
        TlbEntry{vpn, host, static_cast<std::uint16_t>(asid), kind, perms};
}

void Mmu::drop_asid(std::uint32_t asid) {
    for (TlbEntry& e : tlb_) {
        if (e.kind != Kind::empty && e.asid == asid)
            e = TlbEntry{};
    }
}

void Mmu::invalidate(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
    stats_.tlb_invalidations++;
    if (size == 0) {
        drop_asid(asid);
        return;
    }
    const std::uint64_t last = size - 1 > ~va ? ~0ULL : va + (size - 1); // inclusive, saturated
    for (TlbEntry& e : tlb_) {
        if (e.kind == Kind::empty || e.asid != asid)
            continue;
        const unsigned shift = shift_of(e.kind);
        const std::uint64_t first = e.vpn << shift;
        const std::uint64_t end = first + ((1ULL << shift) - 1);
        if (first <= last && va <= end)
            e = TlbEntry{};
    }
}

std::size_t Mmu::tlb_size() const {
    return static_cast<std::size_t>(std::count_if(
        tlb_.begin(), tlb_.end(), [](const TlbEntry& e) { return e.kind != Kind::empty; }));
}

// --- walk -------------------------------------------------------------------

// The BAR bytes of a LOCAL page: inside one chiplet's HBM region (not
// straddling into the next) and inside the BAR the card really has.
std::byte* Mmu::local_page(std::uint64_t addr, std::uint64_t size) const {
    for (unsigned i = 0; i < layout_.chiplets && i < layout_.hbm.size(); i++) {
        const HbmAperture& r = layout_.hbm.at(i);
        if (addr < r.bar_offset || addr - r.bar_offset >= r.size)
            continue;
        if (size > r.size - (addr - r.bar_offset))
            return nullptr; // straddles the end of the region
        if (addr > bar_.size() || size > bar_.size() - addr)
            return nullptr;
        return bar_.data() + addr;
    }
    return nullptr;
}

std::variant<Mmu::Page, std::uint32_t> Mmu::page_of(std::uint32_t asid, std::uint64_t va) {
    if (const TlbEntry* e = lookup(asid, Kind::page4k, va)) {
        stats_.tlb_hits++;
        return Page{e->host, RBLN_FW_PAGE_SIZE, e->perms};
    }
    if (const TlbEntry* e = lookup(asid, Kind::page2m, va)) {
        stats_.tlb_hits++;
        return Page{e->host, RBLN_FW_HUGE_SIZE, e->perms};
    }
    stats_.tlb_misses++;
    return walk(asid, va);
}

std::variant<Mmu::Page, std::uint32_t> Mmu::walk(std::uint32_t asid, std::uint64_t va) {
    // Start at the deepest table the TLB knows.
    std::byte* table = bindings_[asid].root;
    int level = RBLN_FW_PT_LEVELS - 1;
    if (const TlbEntry* e = lookup(asid, Kind::table0, va)) {
        table = e->host;
        level = 0;
    } else if (const TlbEntry* e1 = lookup(asid, Kind::table1, va)) {
        table = e1->host;
        level = 1;
    } else if (const TlbEntry* e2 = lookup(asid, Kind::table2, va)) {
        table = e2->host;
        level = 2;
    }

    for (;; level--) {
        const std::uint64_t pte = load_entry(table, RBLN_FW_PT_INDEX(va, level));
        if ((pte & RBLN_FW_PTE_VALID) == 0)
            return std::uint32_t{RBLN_FW_MMU_NOT_MAPPED};
        if ((pte & kReservedBits) != 0)
            return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
        const std::uint64_t addr = pte & RBLN_FW_PTE_ADDR_MASK;
        const bool leaf = level == 0 || (level == 1 && (pte & RBLN_FW_PTE_LEAF) != 0);
        if (!leaf) {
            // A table pointer carries VALID and the address only.
            if ((pte & (kPageFlags | RBLN_FW_PTE_LEAF)) != 0)
                return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
            std::byte* next = ram_.translate(addr, kTableBytes);
            if (next == nullptr)
                return std::uint32_t{RBLN_FW_MMU_BAD_ADDRESS};
            // The entry at level L points at the level L-1 table.
            const Kind kind = level == 3 ? Kind::table2 : level == 2 ? Kind::table1 : Kind::table0;
            insert(asid, kind, va, next, 0);
            table = next;
            continue;
        }
        if (level == 0 && (pte & RBLN_FW_PTE_LEAF) != 0)
            return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
        const std::uint64_t size = level == 0 ? RBLN_FW_PAGE_SIZE : RBLN_FW_HUGE_SIZE;
        if (addr % size != 0)
            return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
        std::byte* host =
            (pte & RBLN_FW_PTE_LOCAL) != 0 ? local_page(addr, size) : ram_.translate(addr, size);
        if (host == nullptr)
            return std::uint32_t{RBLN_FW_MMU_BAD_ADDRESS};
        const auto perms = static_cast<std::uint8_t>(pte & kPermBits);
        insert(asid, level == 0 ? Kind::page4k : Kind::page2m, va, host, perms);
        return Page{host, size, perms};
    }
}

// --- translation ------------------------------------------------------------

std::optional<MmuFault> Mmu::translate_into(std::uint32_t asid, std::uint64_t va, std::uint64_t len,
                                            Access access, std::vector<HostSpan>& spans) {
    spans.clear();
    auto fault = [&](std::uint32_t reason, std::uint64_t at) {
        stats_.faults++;
        spans.clear();
        return MmuFault{reason, at, access};
    };
    if (len == 0)
        return std::nullopt;
    if (!bound(asid))
        return fault(RBLN_FW_MMU_NO_VM, va);
    const std::uint8_t need = access == Access::write ? RBLN_FW_PTE_WRITE : RBLN_FW_PTE_READ;
    const std::uint32_t denied =
        access == Access::write ? RBLN_FW_MMU_NO_WRITE : RBLN_FW_MMU_NO_READ;

    std::uint64_t cur = va;
    std::uint64_t left = len;
    while (left > 0) {
        if (cur >= kVaLimit)
            return fault(RBLN_FW_MMU_BAD_VA, cur);
        const auto found = page_of(asid, cur);
        if (const auto* reason = std::get_if<std::uint32_t>(&found))
            return fault(*reason, cur);
        const Page& page = std::get<Page>(found);
        if ((page.perms & need) == 0)
            return fault(denied, cur);
        const std::uint64_t offset = cur & (page.size - 1);
        const std::uint64_t n = std::min(left, page.size - offset);
        std::byte* p = page.host + offset;
        if (!spans.empty() && spans.back().data() + spans.back().size() == p)
            spans.back() = HostSpan(spans.back().data(), spans.back().size() + n);
        else
            spans.emplace_back(p, n);
        cur += n;
        left -= n;
    }
    return std::nullopt;
}

Translation Mmu::translate(std::uint32_t asid, std::uint64_t va, std::uint64_t len, Access access) {
    std::vector<HostSpan> spans;
    if (auto f = translate_into(asid, va, len, access, spans))
        return Translation(*f);
    return Translation(std::move(spans));
}

std::optional<MmuFault> Mmu::read(std::uint32_t asid, std::uint64_t va, void* dst,
                                  std::size_t len) {
    if (auto f = translate_into(asid, va, len, Access::read, scratch_))
        return f;
    auto* out = static_cast<std::byte*>(dst);
    for (const HostSpan& s : scratch_) {
        std::memmove(out, s.data(), s.size());
        out += s.size();
    }
    return std::nullopt;
}

std::optional<MmuFault> Mmu::write(std::uint32_t asid, std::uint64_t va, const void* src,
                                   std::size_t len) {
    if (auto f = translate_into(asid, va, len, Access::write, scratch_))
        return f;
    const auto* in = static_cast<const std::byte*>(src);
    for (const HostSpan& s : scratch_) {
        std::memmove(s.data(), in, s.size());
        in += s.size();
    }
    return std::nullopt;
}

} // namespace rbln::emu
