// SPDX-License-Identifier: GPL-2.0
// Page-table walk and TLB of the card's MMU (rbln_fw_mmu.md).
#include "mmu.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <shared_mutex>

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

// --- the gate ---------------------------------------------------------------

void SharedGate::lock_shared() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return !writer_ && writers_waiting_ == 0; });
    readers_++;
}

void SharedGate::unlock_shared() {
    const std::lock_guard<std::mutex> lk(mu_);
    if (--readers_ == 0)
        cv_.notify_all();
}

void SharedGate::lock() {
    std::unique_lock<std::mutex> lk(mu_);
    writers_waiting_.fetch_add(1, std::memory_order_relaxed);
    cv_.wait(lk, [this] { return !writer_ && readers_ == 0; });
    writers_waiting_.fetch_sub(1, std::memory_order_relaxed);
    writer_ = true;
}

void SharedGate::unlock() {
    const std::lock_guard<std::mutex> lk(mu_);
    writer_ = false;
    cv_.notify_all();
}

Mmu::Mmu(GuestMemory& ram, std::span<std::byte> bar, const BarLayout& layout)
    : ram_(ram), bar_(bar), layout_(layout), bindings_(RBLN_FW_MAX_ASID),
      aborted_(std::make_unique<std::atomic<bool>[]>(RBLN_FW_MAX_ASID)),
      own_(std::make_unique<Port>(*this)) {}

Mmu::~Mmu() {
    own_.reset(); // unregisters itself; engines' ports must be gone already
}

// --- ports ------------------------------------------------------------------

Mmu::Port::Port(Mmu& mmu) : mmu_(mmu) {
    const std::lock_guard<SharedGate> g(mmu_.gate_);
    mmu_.ports_.push_back(this);
}

Mmu::Port::~Port() {
    const std::lock_guard<SharedGate> g(mmu_.gate_);
    std::erase(mmu_.ports_, this);
    mmu_.retired_hits_ += hits_.load();
    mmu_.retired_misses_ += misses_.load();
    mmu_.retired_faults_ += faults_.load();
}

Mmu::Hold::Hold(Port& port) : port_(port) {
    port_.mmu_.gate_.lock_shared();
}

Mmu::Hold::~Hold() {
    port_.mmu_.gate_.unlock_shared();
}

bool Mmu::Hold::change_waiting() const {
    return port_.mmu_.gate_.writer_waiting();
}

std::optional<MmuFault> Mmu::Hold::translate_into(std::uint32_t asid, std::uint64_t va,
                                                  std::uint64_t len, Access access,
                                                  std::vector<HostSpan>& spans) {
    return port_.mmu_.translate_locked(port_, asid, va, len, access, spans);
}

std::optional<MmuFault> Mmu::Hold::translate_dma_into(std::uint64_t addr, std::uint64_t len,
                                                      Access access, std::vector<HostSpan>& spans) {
    spans.clear();
    if (len == 0)
        return std::nullopt;
    std::byte* p = port_.mmu_.ram_.translate(addr, len);
    if (p == nullptr) {
        port_.faults_.fetch_add(1, std::memory_order_relaxed);
        return MmuFault{RBLN_FW_MMU_BAD_ADDRESS, addr, access};
    }
    spans.emplace_back(p, len);
    return std::nullopt;
}

// --- bindings ---------------------------------------------------------------

bool Mmu::bind(std::uint32_t asid, std::uint64_t root) {
    if (asid == 0 || asid >= RBLN_FW_MAX_ASID || root % RBLN_FW_PAGE_SIZE != 0)
        return false;
    std::byte* host = ram_.translate(root, kTableBytes);
    if (host == nullptr)
        return false;
    const std::lock_guard<SharedGate> g(gate_);
    Binding& b = bindings_[asid];
    if (b.root == nullptr)
        bound_count_++;
    b.root = host;
    b.root_gpa = root;
    aborted_[asid].store(false, std::memory_order_release);
    drop_asid_everywhere(asid);
    return true;
}

bool Mmu::unbind(std::uint32_t asid) {
    const std::lock_guard<SharedGate> g(gate_);
    if (asid >= bindings_.size() || bindings_[asid].root == nullptr)
        return false;
    bindings_[asid] = Binding{};
    bound_count_--;
    aborted_[asid].store(false, std::memory_order_release);
    drop_asid_everywhere(asid);
    return true;
}

bool Mmu::abort(std::uint32_t asid) {
    const std::shared_lock<SharedGate> g(gate_);
    if (asid >= bindings_.size() || bindings_[asid].root == nullptr)
        return false;
    aborted_[asid].store(true, std::memory_order_release);
    return true;
}

bool Mmu::bound(std::uint32_t asid) const {
    const std::shared_lock<SharedGate> g(gate_);
    return asid < bindings_.size() && bindings_[asid].root != nullptr;
}

std::optional<std::uint64_t> Mmu::root(std::uint32_t asid) const {
    const std::shared_lock<SharedGate> g(gate_);
    if (asid >= bindings_.size() || bindings_[asid].root == nullptr)
        return std::nullopt;
    return bindings_[asid].root_gpa;
}

void Mmu::reset() {
    const std::lock_guard<SharedGate> g(gate_);
    std::fill(bindings_.begin(), bindings_.end(), Binding{});
    bound_count_ = 0;
    for (std::size_t i = 0; i < RBLN_FW_MAX_ASID; i++)
        aborted_[i].store(false, std::memory_order_release);
    for (Port* p : ports_)
        p->tlb_.clear();
}

void Mmu::drop_asid_everywhere(std::uint32_t asid) {
    for (Port* p : ports_)
        p->tlb_.drop_asid(asid);
}

void Mmu::invalidate(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
    const std::lock_guard<SharedGate> g(gate_);
    invalidations_.fetch_add(1, std::memory_order_relaxed);
    for (Port* p : ports_) {
        if (size == 0)
            p->tlb_.drop_asid(asid);
        else
            p->tlb_.drop_range(asid, va, size);
    }
}

MmuStats Mmu::stats() const {
    const std::shared_lock<SharedGate> g(gate_);
    MmuStats s;
    s.faults = retired_faults_.load();
    s.tlb_hits = retired_hits_.load();
    s.tlb_misses = retired_misses_.load();
    for (const Port* p : ports_) {
        s.faults += p->faults_.load(std::memory_order_relaxed);
        s.tlb_hits += p->hits_.load(std::memory_order_relaxed);
        s.tlb_misses += p->misses_.load(std::memory_order_relaxed);
    }
    s.tlb_invalidations = invalidations_.load();
    return s;
}

std::size_t Mmu::tlb_size() const {
    const std::lock_guard<std::mutex> own(own_mu_);
    const std::shared_lock<SharedGate> g(gate_);
    return own_->tlb_.size();
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

const Mmu::TlbEntry* Mmu::Tlb::lookup(std::uint32_t asid, Kind kind, std::uint64_t va) const {
    const std::uint64_t vpn = va >> shift_of(kind);
    const TlbEntry& e = entries_[slot_of(asid, kind, vpn)];
    if (e.kind == kind && e.asid == asid && e.vpn == vpn)
        return &e;
    return nullptr;
}

// Direct mapped: a new entry evicts whatever shared its slot.
void Mmu::Tlb::insert(std::uint32_t asid, Kind kind, std::uint64_t va, std::byte* host,
                      std::uint8_t perms) {
    const std::uint64_t vpn = va >> shift_of(kind);
    entries_[slot_of(asid, kind, vpn)] =
        TlbEntry{vpn, host, static_cast<std::uint16_t>(asid), kind, perms};
}

void Mmu::Tlb::drop_asid(std::uint32_t asid) {
    for (TlbEntry& e : entries_) {
        if (e.kind != Kind::empty && e.asid == asid)
            e = TlbEntry{};
    }
}

void Mmu::Tlb::drop_range(std::uint32_t asid, std::uint64_t va, std::uint64_t size) {
    const std::uint64_t last = size - 1 > ~va ? ~0ULL : va + (size - 1); // inclusive, saturated
    for (TlbEntry& e : entries_) {
        if (e.kind == Kind::empty || e.asid != asid)
            continue;
        const unsigned shift = shift_of(e.kind);
        const std::uint64_t first = e.vpn << shift;
        const std::uint64_t end = first + ((1ULL << shift) - 1);
        if (first <= last && va <= end)
            e = TlbEntry{};
    }
}

void Mmu::Tlb::clear() {
    std::fill(entries_.begin(), entries_.end(), TlbEntry{});
}

std::size_t Mmu::Tlb::size() const {
    return static_cast<std::size_t>(std::count_if(
        entries_.begin(), entries_.end(), [](const TlbEntry& e) { return e.kind != Kind::empty; }));
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

std::variant<Mmu::Page, std::uint32_t> Mmu::page_of(Port& port, std::uint32_t asid,
                                                    std::uint64_t va) {
    if (const TlbEntry* e = port.tlb_.lookup(asid, Kind::page4k, va)) {
        port.hits_.fetch_add(1, std::memory_order_relaxed);
        return Page{e->host, RBLN_FW_PAGE_SIZE, e->perms};
    }
    if (const TlbEntry* e = port.tlb_.lookup(asid, Kind::page2m, va)) {
        port.hits_.fetch_add(1, std::memory_order_relaxed);
        return Page{e->host, RBLN_FW_HUGE_SIZE, e->perms};
    }
    port.misses_.fetch_add(1, std::memory_order_relaxed);
    return walk(port.tlb_, asid, va);
}

std::variant<Mmu::Page, std::uint32_t> Mmu::walk(Tlb& tlb, std::uint32_t asid, std::uint64_t va) {
    // Start at the deepest table the TLB knows.
    std::byte* table = bindings_[asid].root;
    int level = RBLN_FW_PT_LEVELS - 1;
    if (const TlbEntry* e = tlb.lookup(asid, Kind::table0, va)) {
        table = e->host;
        level = 0;
    } else if (const TlbEntry* e1 = tlb.lookup(asid, Kind::table1, va)) {
        table = e1->host;
        level = 1;
    } else if (const TlbEntry* e2 = tlb.lookup(asid, Kind::table2, va)) {
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
            tlb.insert(asid, kind, va, next, 0);
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
        tlb.insert(asid, level == 0 ? Kind::page4k : Kind::page2m, va, host, perms);
        return Page{host, size, perms};
    }
}

// --- translation ------------------------------------------------------------

std::optional<MmuFault> Mmu::translate_locked(Port& port, std::uint32_t asid, std::uint64_t va,
                                              std::uint64_t len, Access access,
                                              std::vector<HostSpan>& spans) {
    spans.clear();
    auto fault = [&](std::uint32_t reason, std::uint64_t at) {
        port.faults_.fetch_add(1, std::memory_order_relaxed);
        spans.clear();
        return MmuFault{reason, at, access};
    };
    if (len == 0)
        return std::nullopt;
    if (asid >= bindings_.size() || bindings_[asid].root == nullptr)
        return fault(RBLN_FW_MMU_NO_VM, va);
    const std::uint8_t need = access == Access::write ? RBLN_FW_PTE_WRITE : RBLN_FW_PTE_READ;
    const std::uint32_t denied =
        access == Access::write ? RBLN_FW_MMU_NO_WRITE : RBLN_FW_MMU_NO_READ;

    std::uint64_t cur = va;
    std::uint64_t left = len;
    while (left > 0) {
        if (cur >= kVaLimit)
            return fault(RBLN_FW_MMU_BAD_VA, cur);
        const auto found = page_of(port, asid, cur);
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

std::optional<MmuFault> Mmu::translate_into(std::uint32_t asid, std::uint64_t va, std::uint64_t len,
                                            Access access, std::vector<HostSpan>& spans) {
    const std::lock_guard<std::mutex> own(own_mu_);
    const std::shared_lock<SharedGate> g(gate_);
    return translate_locked(*own_, asid, va, len, access, spans);
}

Translation Mmu::translate(std::uint32_t asid, std::uint64_t va, std::uint64_t len, Access access) {
    std::vector<HostSpan> spans;
    if (auto f = translate_into(asid, va, len, access, spans))
        return Translation(*f);
    return Translation(std::move(spans));
}

std::optional<MmuFault> Mmu::read(std::uint32_t asid, std::uint64_t va, void* dst,
                                  std::size_t len) {
    const std::lock_guard<std::mutex> own(own_mu_);
    const std::shared_lock<SharedGate> g(gate_);
    if (auto f = translate_locked(*own_, asid, va, len, Access::read, scratch_))
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
    const std::lock_guard<std::mutex> own(own_mu_);
    const std::shared_lock<SharedGate> g(gate_);
    if (auto f = translate_locked(*own_, asid, va, len, Access::write, scratch_))
        return f;
    const auto* in = static_cast<const std::byte*>(src);
    for (const HostSpan& s : scratch_) {
        std::memmove(s.data(), in, s.size());
        in += s.size();
    }
    return std::nullopt;
}

} // namespace rbln::emu
