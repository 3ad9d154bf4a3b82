// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: rbln-emu's admin ring and MMU, driven the way only the
// kernel may drive them (rbln_fw_admin.md, rbln_fw_mmu.md, rbln_fw_cmd.md).
//
// The card runs in-process (tests/emu's FakeHost), freshly reset and
// handshaken for every input.  An input is a run of 64-byte records, each
// one admin request (the harness numbers it: seq is overwritten).  One
// opcode is the harness's own, not the card's: kPoke writes the 40 bytes
// of args into the page-table scratch area at data_addr modulo its size,
// so inputs build page tables (well formed or not) for VM_BIND to name.
// Like a driver, the harness invalidates the TLB after it or the card
// changed a page table (a poke, a DEBUG_ACCESS write, a data buffer the
// card filled, on a page some walk read as a table): exactly the VA range
// the table translates, in each ASID that walked it.  It leaves out
// requests whose memory
// would land on its own admin rings, and command rings set up below 4 MiB
// (over the scratch or the data buffers).
//
// What must hold for every request:
//   - exactly one completion, with the request's seq, a status of
//     rbln_fw_admin.h, and the card still READY;
//   - an error status other than MMU_FAULT comes with a BAD_REQUEST event
//     naming seq, opcode and status; MMU_FAULT only for DEBUG_ACCESS, with
//     an MMU_FAULT event of the ASID; success posts neither;
//   - DEBUG_ACCESS agrees with a page-table walk of the harness's own over
//     the same guest memory: it succeeds exactly when every byte
//     translates with the access's permission, a read returns exactly the
//     translated bytes, a write lands exactly there, a fault reports the
//     first faulting VA and reason and moves no byte;
//   - and, under ASan/UBSan, no memory error or undefined behaviour.
// RBLN_FUZZ_SEEDS=DIR writes a seed corpus and exits.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "fake_host.h"
#include "fuzz_seeds.h"
#include "rbln_fw_mmu.h"

namespace {

using namespace rbln::emu;
using namespace rbln::emu::test;

constexpr std::uint16_t kPoke = 0xfffe;      // harness: write args into the scratch
constexpr std::uint64_t kScratch = 0x100000; // page-table scratch: 16 pages
constexpr std::uint64_t kScratchSize = 0x10000;
constexpr std::uint64_t kPokeBytes = sizeof(rbln_fw_admin_req::args);
constexpr std::uint32_t kEntries = 64;
constexpr std::size_t kMaxRecords = 64;
// The admin rings FakeHost keeps: requests, completions, events.
constexpr std::uint64_t kRingsBegin = FakeHost::kSq;
constexpr std::uint64_t kRingsEnd = FakeHost::kEv + 64ULL * kEntries;
// Command rings may be set up only above this (not over the scratch or a
// data buffer, where a ring's completions would rewrite page tables).
constexpr std::uint64_t kCmdRingFloor = 0x400000;

[[noreturn]] void die(const char* what, std::uint64_t value = 0) {
    std::fprintf(stderr, "emu_admin_fuzz: %s (%llu)\n", what,
                 static_cast<unsigned long long>(value));
    std::abort();
}

std::uint64_t arg64(const rbln_fw_admin_req& r, unsigned i) {
    return r.args[i] | std::uint64_t{r.args[i + 1]} << 32;
}

bool overlaps(std::uint64_t a, std::uint64_t alen, std::uint64_t b, std::uint64_t blen) {
    return alen != 0 && blen != 0 && a < b + blen && b < a + alen && a + alen > a;
}

// The harness's own walk, written from rbln_fw_mmu.md.
struct RefPage {
    std::uint64_t addr; // guest RAM address, or BAR offset if local
    bool local;
    std::uint64_t size;
    std::uint64_t perms;
};

struct RefSpan {
    std::byte* p;
    std::uint64_t len;
};

struct RefFault {
    std::uint32_t reason;
    std::uint64_t va;
};

class Harness {
public:
    Harness() : h_(test_options()) { h_.set_log_level(LogLevel::error); }
    // How often the walk of the harness was compared (fuzz.sh's log).
    ~Harness() {
        std::fprintf(stderr,
                     "emu_admin_fuzz: %llu requests, %llu rejected; DEBUG_ACCESS checked "
                     "against the walk: %llu ok, %llu faulted\n",
                     static_cast<unsigned long long>(requests_),
                     static_cast<unsigned long long>(rejected_),
                     static_cast<unsigned long long>(checked_ok_),
                     static_cast<unsigned long long>(checked_fault_));
    }

    void run(const std::uint8_t* data, std::size_t size) {
        h_.host_reset();
        h_.boot(kEntries);
        if (h_.load(h_.ctrl().fw_state) != RBLN_FW_STATE_READY)
            die("handshake did not reach READY");
        (void)h_.drain_events();
        roots_.clear();
        walked_.clear();
        std::memset(h_.ram(kScratch), 0, kScratchSize);
        const std::size_t n = std::min(size / sizeof(rbln_fw_admin_req), kMaxRecords);
        for (std::size_t i = 0; i < n; i++) {
            rbln_fw_admin_req req{};
            std::memcpy(&req, data + i * sizeof(req), sizeof(req));
            if (req.opcode == kPoke)
                poke(req);
            else
                request(req);
        }
        // Nothing outlives the input: the reset joins the threads of the
        // command rings it set up (LeakSanitizer checks between inputs).
        h_.host_reset();
        h_.forget_history();
    }

private:
    void poke(const rbln_fw_admin_req& req) {
        const std::uint64_t at = req.data_addr % (kScratchSize - kPokeBytes + 1);
        std::memcpy(h_.ram(kScratch + at), req.args, kPokeBytes);
        changed(kScratch + at, kPokeBytes);
    }

    // Guest memory a request makes the card write, or read for a driver:
    // none of it may be the harness's admin rings.
    bool skipped(const rbln_fw_admin_req& req) {
        if (overlaps(req.data_addr, req.data_len, kRingsBegin, kRingsEnd - kRingsBegin))
            return true;
        if (req.opcode == RBLN_FW_OP_RING_SETUP) {
            const std::uint64_t bytes = 64ULL * std::min<std::uint32_t>(req.args[1], 4096);
            for (unsigned a : {2U, 4U, 6U}) {
                if (overlaps(arg64(req, a), bytes, 0, kCmdRingFloor))
                    return true;
            }
        }
        if (req.opcode == RBLN_FW_OP_DEBUG_ACCESS && req.args[1] == RBLN_FW_ACCESS_WRITE &&
            req.data_len <= RBLN_FW_PAGE_SIZE) {
            std::vector<RefSpan> spans;
            if (!ref_translate(req.args[0], arg64(req, 2), req.data_len, RBLN_FW_PTE_WRITE,
                               spans)) {
                for (const RefSpan& s : spans) {
                    const auto gpa = static_cast<std::uint64_t>(s.p - h_.ram(0));
                    if (s.p >= h_.ram(0) && gpa < h_.ram_size() &&
                        overlaps(gpa, s.len, kRingsBegin, kRingsEnd - kRingsBegin))
                        return true;
                }
            }
        }
        return false;
    }

    void request(rbln_fw_admin_req req) {
        if (skipped(req))
            return;
        const std::uint64_t dropped_before = h_.card.stats().events_dropped;

        // What DEBUG_ACCESS should do, worked out before the card does it.
        const bool debug =
            req.opcode == RBLN_FW_OP_DEBUG_ACCESS && req.flags == 0 && req.reserved == 0 &&
            std::all_of(req.args + 4, std::end(req.args), [](std::uint32_t a) { return a == 0; }) &&
            (req.args[1] == RBLN_FW_ACCESS_READ || req.args[1] == RBLN_FW_ACCESS_WRITE) &&
            req.data_len != 0 && req.data_len <= RBLN_FW_PAGE_SIZE && req.data_addr != 0 &&
            h_.memory().translate(req.data_addr, req.data_len) != nullptr;
        const bool write = req.args[1] == RBLN_FW_ACCESS_WRITE;
        std::vector<RefSpan> spans;
        std::optional<RefFault> expect_fault;
        std::vector<std::byte> before; // the target (write) or the buffer (read)
        std::vector<std::byte> source; // what the buffer should hold after a read
        bool checkable = debug;
        if (debug) {
            expect_fault = ref_translate(req.args[0], arg64(req, 2), req.data_len,
                                         write ? RBLN_FW_PTE_WRITE : RBLN_FW_PTE_READ, spans);
            std::byte* buf = h_.ram(req.data_addr);
            // A buffer that is also the target (or a page table): no
            // single right answer, so only the generic checks.
            for (const RefSpan& s : spans) {
                if (s.p < buf + req.data_len && buf < s.p + s.len)
                    checkable = false;
            }
            if (write) {
                for (const RefSpan& s : spans)
                    before.insert(before.end(), s.p, s.p + s.len);
            } else {
                before.assign(buf, buf + req.data_len);
                for (const RefSpan& s : spans)
                    source.insert(source.end(), s.p, s.p + s.len);
            }
        }

        req.seq = 0;
        const std::uint32_t seq = h_.submit(req);
        const std::optional<rbln_fw_admin_cpl> cpl = h_.pop_cpl();
        if (!cpl)
            die("admin request without a completion", req.opcode);
        if (cpl->seq != seq)
            die("completion of another request", cpl->seq);
        if (h_.pop_cpl())
            die("two completions for one request", seq);
        if (cpl->status > RBLN_FW_ST_MMU_FAULT)
            die("unknown admin status", cpl->status);
        if (const std::uint32_t st = h_.load(h_.ctrl().fw_state); st != RBLN_FW_STATE_READY)
            die("an admin request took the firmware out of READY", st);
        check_events(req, *cpl, dropped_before);
        requests_++;
        if (cpl->status != RBLN_FW_ST_OK && cpl->status != RBLN_FW_ST_MMU_FAULT)
            rejected_++;

        if (cpl->status == RBLN_FW_ST_OK)
            track(req);
        // What the card wrote may have been a page table.
        if (cpl->status == RBLN_FW_ST_OK && cpl->data_len != 0)
            changed(req.data_addr, cpl->data_len);
        if (cpl->status == RBLN_FW_ST_OK && debug && write) {
            for (const RefSpan& s : spans) {
                if (s.p >= h_.ram(0) && s.p < h_.ram(0) + h_.ram_size())
                    changed(static_cast<std::uint64_t>(s.p - h_.ram(0)), s.len);
            }
        }
        if (debug && checkable) {
            check_debug(req, *cpl, expect_fault, spans, before, source);
            (expect_fault ? checked_fault_ : checked_ok_)++;
        }
    }

    void check_events(const rbln_fw_admin_req& req, const rbln_fw_admin_cpl& cpl,
                      std::uint64_t dropped_before) {
        bool bad_request = false;
        bool mmu_fault = false;
        for (const rbln_fw_event& ev : h_.drain_events()) {
            if (ev.type == RBLN_FW_EV_BAD_REQUEST && ev.data[0] == cpl.seq) {
                if (ev.data[1] != req.opcode || ev.code != cpl.status)
                    die("BAD_REQUEST event does not match its request", ev.code);
                bad_request = true;
            }
            if (ev.type == RBLN_FW_EV_MMU_FAULT && ev.data[3] == RBLN_FW_SOURCE_DEBUG) {
                if (ev.data[0] != req.args[0])
                    die("MMU_FAULT event of another ASID", ev.data[0]);
                mmu_fault = true;
            }
        }
        if (h_.card.stats().events_dropped != dropped_before)
            return; // the event ring was full: events are allowed to be missing
        const bool error = cpl.status != RBLN_FW_ST_OK && cpl.status != RBLN_FW_ST_MMU_FAULT;
        if (error != bad_request)
            die(error ? "rejected request without a BAD_REQUEST event"
                      : "BAD_REQUEST event for a request that was not rejected",
                cpl.status);
        if (cpl.status == RBLN_FW_ST_MMU_FAULT && req.opcode != RBLN_FW_OP_DEBUG_ACCESS)
            die("MMU_FAULT status for a request that accesses no VA", req.opcode);
        if ((cpl.status == RBLN_FW_ST_MMU_FAULT) != mmu_fault)
            die("MMU_FAULT status and MMU_FAULT event disagree", cpl.status);
    }

    void check_debug(const rbln_fw_admin_req& req, const rbln_fw_admin_cpl& cpl,
                     const std::optional<RefFault>& expect_fault, const std::vector<RefSpan>& spans,
                     const std::vector<std::byte>& before, const std::vector<std::byte>& source) {
        const bool write = req.args[1] == RBLN_FW_ACCESS_WRITE;
        std::byte* buf = h_.ram(req.data_addr);
        if (expect_fault) {
            if (cpl.status != RBLN_FW_ST_MMU_FAULT)
                die("DEBUG_ACCESS of an unmapped range did not fault", cpl.status);
            if (cpl.result[0] != expect_fault->va)
                die("DEBUG_ACCESS fault at another VA", cpl.result[0]);
            if (cpl.result[1] != expect_fault->reason)
                die("DEBUG_ACCESS fault for another reason", cpl.result[1]);
            // Nothing moved: the translated part of the target is as it was.
            std::vector<std::byte> now;
            if (write) {
                for (const RefSpan& s : spans)
                    now.insert(now.end(), s.p, s.p + s.len);
            } else {
                now.assign(buf, buf + req.data_len);
            }
            if (now != before)
                die("a faulting DEBUG_ACCESS moved bytes", req.data_len);
            return;
        }
        if (cpl.status != RBLN_FW_ST_OK)
            die("DEBUG_ACCESS of a mapped range failed", cpl.status);
        if (cpl.data_len != (write ? 0 : req.data_len))
            die("DEBUG_ACCESS reported another length", cpl.data_len);
        if (write) {
            std::uint64_t off = 0;
            for (const RefSpan& s : spans) {
                if (std::memcmp(s.p, buf + off, s.len) != 0)
                    die("DEBUG_ACCESS write landed elsewhere", off);
                off += s.len;
            }
        } else if (std::memcmp(buf, source.data(), req.data_len) != 0) {
            die("DEBUG_ACCESS read other bytes than the page tables say", req.data_len);
        }
    }

    // Bindings, as the card accepted them.  Binding and unbinding drop
    // the ASID's translations on the card.
    void track(const rbln_fw_admin_req& req) {
        if (req.opcode != RBLN_FW_OP_VM_BIND && req.opcode != RBLN_FW_OP_VM_UNBIND)
            return;
        const std::uint32_t asid = req.args[0];
        if (req.opcode == RBLN_FW_OP_VM_BIND)
            roots_[asid] = arg64(req, 1);
        else
            roots_.erase(asid);
        std::erase_if(walked_, [asid](const Walked& w) { return w.asid == asid; });
    }

    // Guest RAM [gpa, gpa + len) changed: every table on it is invalidated
    // for the VA range it translates, in the ASID that walked it.
    void changed(std::uint64_t gpa, std::uint64_t len) {
        std::vector<Walked> hit;
        std::erase_if(walked_, [&](const Walked& w) {
            if (!overlaps(w.table, RBLN_FW_PAGE_SIZE, gpa, len))
                return false;
            hit.push_back(w);
            return true;
        });
        for (const Walked& w : hit) {
            rbln_fw_admin_req inv = FakeHost::request(RBLN_FW_OP_TLB_INVALIDATE);
            inv.args[0] = w.asid;
            inv.args[1] = static_cast<std::uint32_t>(w.va);
            inv.args[2] = static_cast<std::uint32_t>(w.va >> 32);
            inv.args[3] = static_cast<std::uint32_t>(w.span);
            inv.args[4] = static_cast<std::uint32_t>(w.span >> 32);
            if (h_.admin(inv) != RBLN_FW_ST_OK)
                die("TLB_INVALIDATE of a walked range failed", w.asid);
        }
        (void)h_.drain_events();
    }

    void walked(std::uint32_t asid, std::uint64_t table, std::uint64_t va, int level) {
        const std::uint64_t span = 1ULL << RBLN_FW_PT_SHIFT(level + 1);
        const Walked w{asid, table, va & ~(span - 1), span};
        if (std::find(walked_.begin(), walked_.end(), w) == walked_.end())
            walked_.push_back(w);
    }

    std::variant<RefPage, std::uint32_t> ref_walk(std::uint32_t asid, std::uint64_t root,
                                                  std::uint64_t va) {
        constexpr std::uint64_t kReserved = ~(RBLN_FW_PTE_ADDR_MASK | RBLN_FW_PTE_FLAGS_MASK);
        constexpr std::uint64_t kNotInTable =
            RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE | RBLN_FW_PTE_LOCAL | RBLN_FW_PTE_LEAF;
        std::uint64_t table = root;
        for (int level = RBLN_FW_PT_LEVELS - 1; level >= 0; level--) {
            walked(asid, table, va, level);
            std::uint64_t pte = 0;
            std::memcpy(&pte, h_.ram(table + 8 * RBLN_FW_PT_INDEX(va, level)), sizeof(pte));
            if ((pte & RBLN_FW_PTE_VALID) == 0)
                return std::uint32_t{RBLN_FW_MMU_NOT_MAPPED};
            if ((pte & kReserved) != 0)
                return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
            const std::uint64_t addr = pte & RBLN_FW_PTE_ADDR_MASK;
            const bool huge = level == 1 && (pte & RBLN_FW_PTE_LEAF) != 0;
            if (level > 0 && !huge) {
                if ((pte & kNotInTable) != 0)
                    return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
                if (addr > h_.ram_size() || RBLN_FW_PAGE_SIZE > h_.ram_size() - addr)
                    return std::uint32_t{RBLN_FW_MMU_BAD_ADDRESS};
                table = addr;
                continue;
            }
            if ((pte & RBLN_FW_PTE_LEAF) != 0 && level == 0)
                return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
            const std::uint64_t size = huge ? RBLN_FW_HUGE_SIZE : RBLN_FW_PAGE_SIZE;
            if (addr % size != 0)
                return std::uint32_t{RBLN_FW_MMU_BAD_ENTRY};
            const bool local = (pte & RBLN_FW_PTE_LOCAL) != 0;
            if (local ? !in_one_chiplet(addr, size)
                      : addr > h_.ram_size() || size > h_.ram_size() - addr)
                return std::uint32_t{RBLN_FW_MMU_BAD_ADDRESS};
            return RefPage{addr, local, size, pte & (RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE)};
        }
        return std::uint32_t{RBLN_FW_MMU_NOT_MAPPED}; // not reached
    }

    bool in_one_chiplet(std::uint64_t addr, std::uint64_t size) {
        for (unsigned c = 0; c < h_.ctrl().chiplet_count; c++) {
            const std::uint64_t base = h_.ctrl().hbm[c].bar_offset;
            const std::uint64_t len = h_.ctrl().hbm[c].size;
            if (addr >= base && addr - base < len)
                return size <= len - (addr - base);
        }
        return false;
    }

    // Translates [va, va + len) for `need`; on a fault, `spans` holds what
    // translated before it.
    std::optional<RefFault> ref_translate(std::uint32_t asid, std::uint64_t va, std::uint64_t len,
                                          std::uint64_t need, std::vector<RefSpan>& spans) {
        spans.clear();
        const auto bound = roots_.find(asid);
        if (bound == roots_.end())
            return RefFault{RBLN_FW_MMU_NO_VM, va};
        std::uint64_t cur = va;
        std::uint64_t left = len;
        while (left > 0) {
            if (cur >= (1ULL << RBLN_FW_VA_BITS))
                return RefFault{RBLN_FW_MMU_BAD_VA, cur};
            const auto found = ref_walk(asid, bound->second, cur);
            if (const auto* reason = std::get_if<std::uint32_t>(&found))
                return RefFault{*reason, cur};
            const RefPage& page = std::get<RefPage>(found);
            if ((page.perms & need) == 0)
                return RefFault{need == RBLN_FW_PTE_WRITE ? std::uint32_t{RBLN_FW_MMU_NO_WRITE}
                                                          : std::uint32_t{RBLN_FW_MMU_NO_READ},
                                cur};
            const std::uint64_t off = cur & (page.size - 1);
            const std::uint64_t n = std::min(left, page.size - off);
            std::byte* p = page.local ? h_.bar(page.addr + off) : h_.ram(page.addr + off);
            spans.push_back({p, n});
            cur += n;
            left -= n;
        }
        return std::nullopt;
    }

    // A table some walk read: the VA range it translates in that ASID.
    struct Walked {
        std::uint32_t asid;
        std::uint64_t table;
        std::uint64_t va;
        std::uint64_t span;
        bool operator==(const Walked&) const = default;
    };

    FakeHost h_;
    std::map<std::uint32_t, std::uint64_t> roots_;
    std::vector<Walked> walked_;
    std::uint64_t requests_ = 0;
    std::uint64_t rejected_ = 0;
    std::uint64_t checked_ok_ = 0;
    std::uint64_t checked_fault_ = 0;
};

// --- seeds ------------------------------------------------------------------

class Records {
public:
    Records& req(std::uint16_t opcode, std::initializer_list<std::uint32_t> args = {},
                 std::uint64_t data_addr = 0, std::uint32_t data_len = 0) {
        rbln_fw_admin_req r = FakeHost::request(opcode, data_addr, data_len);
        std::copy(args.begin(), args.end(), r.args);
        return put(r);
    }
    // Writes `value` at scratch offset `at` (one entry per poke).
    Records& entry(std::uint64_t at, std::uint64_t value) {
        rbln_fw_admin_req r{};
        r.opcode = kPoke;
        r.data_addr = at;
        std::memcpy(r.args, &value, sizeof(value));
        return put(r);
    }
    // A four-level walk for `va` in the scratch: the root at page `base`,
    // the tables below it at the pages after it.
    Records& walk(std::uint64_t va, std::uint64_t leaf, int leaf_level = 0,
                  std::uint64_t base = 0) {
        const std::uint64_t first = base * RBLN_FW_PAGE_SIZE;
        for (int l = 3; l > leaf_level; l--) {
            const std::uint64_t next = kScratch + first + RBLN_FW_PAGE_SIZE * (4 - l);
            entry(first + RBLN_FW_PAGE_SIZE * (3 - l) + 8 * RBLN_FW_PT_INDEX(va, l),
                  next | RBLN_FW_PTE_VALID);
        }
        return entry(first + RBLN_FW_PAGE_SIZE * (3 - leaf_level) +
                         8 * RBLN_FW_PT_INDEX(va, leaf_level),
                     leaf);
    }
    Records& bind(std::uint32_t asid, std::uint64_t base = 0) {
        const std::uint64_t root = kScratch + base * RBLN_FW_PAGE_SIZE;
        return req(RBLN_FW_OP_VM_BIND, {asid, static_cast<std::uint32_t>(root), 0});
    }
    Records& access(std::uint32_t asid, std::uint32_t how, std::uint64_t va, std::uint64_t buf,
                    std::uint32_t len) {
        return req(
            RBLN_FW_OP_DEBUG_ACCESS,
            {asid, how, static_cast<std::uint32_t>(va), static_cast<std::uint32_t>(va >> 32)}, buf,
            len);
    }
    void save(const std::filesystem::path& file) const {
        std::ofstream f(file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(recs_.data()),
                static_cast<std::streamsize>(recs_.size() * sizeof(rbln_fw_admin_req)));
    }

private:
    Records& put(const rbln_fw_admin_req& r) {
        recs_.push_back(r);
        return *this;
    }
    std::vector<rbln_fw_admin_req> recs_;
};

void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    constexpr std::uint64_t kBuf = FakeHost::kData;
    constexpr std::uint64_t kVa = 0x12'3456'7000ULL;
    constexpr std::uint64_t kPage = 0x300000; // host page the walks map
    constexpr std::uint64_t kRw = RBLN_FW_PTE_VALID | RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE;
    Records()
        .req(RBLN_FW_OP_IDENTIFY, {}, kBuf, 4096)
        .req(RBLN_FW_OP_HEARTBEAT)
        .req(RBLN_FW_OP_GET_TELEMETRY, {}, kBuf, 4096)
        .req(RBLN_FW_OP_RESET_CHIPLET, {2})
        .save(dir / "info");
    Records()
        .walk(kVa, kPage | kRw)
        .bind(3)
        .access(3, RBLN_FW_ACCESS_WRITE, kVa + 100, kBuf, 64)
        .access(3, RBLN_FW_ACCESS_READ, kVa + 64, kBuf + 512, 256)
        .req(RBLN_FW_OP_TLB_INVALIDATE, {3, static_cast<std::uint32_t>(kVa), 0, 4096, 0})
        .req(RBLN_FW_OP_VM_UNBIND, {3})
        .access(3, RBLN_FW_ACCESS_READ, kVa, kBuf, 8)
        .save(dir / "bind_access_unbind");
    Records()
        .walk(kVa, kPage | RBLN_FW_PTE_VALID | RBLN_FW_PTE_READ)
        .walk(kVa + RBLN_FW_PAGE_SIZE, (kPage + RBLN_FW_PAGE_SIZE) | kRw)
        .bind(7)
        .access(7, RBLN_FW_ACCESS_READ, kVa + 4000, kBuf, 200)
        .access(7, RBLN_FW_ACCESS_WRITE, kVa + 4000, kBuf, 200) // read-only first page
        .entry(3 * RBLN_FW_PAGE_SIZE + 8 * RBLN_FW_PT_INDEX(kVa, 0), 0)
        .access(7, RBLN_FW_ACCESS_READ, kVa + 4000, kBuf, 200) // unmapped now
        .save(dir / "two_pages");
    // Two address spaces, one VA, two pages: no translation of one may
    // serve the other.
    Records()
        .walk(kVa, kPage | kRw)
        .walk(kVa, (kPage + 0x10000) | kRw, 0, 4)
        .bind(2)
        .bind(3, 4)
        .access(2, RBLN_FW_ACCESS_WRITE, kVa, kBuf, 64)
        .access(3, RBLN_FW_ACCESS_READ, kVa, kBuf + 1024, 64)
        .access(2, RBLN_FW_ACCESS_READ, kVa, kBuf + 2048, 64)
        .req(RBLN_FW_OP_VM_BIND, {3, static_cast<std::uint32_t>(kScratch), 0})
        .access(3, RBLN_FW_ACCESS_READ, kVa, kBuf + 1024, 64)
        .save(dir / "two_asids");
    // A 2 MiB page of chiplet 1's HBM (its card address from the layout).
    FakeHost layout;
    const std::uint64_t hbm1 = layout.ctrl().hbm[1].bar_offset;
    Records()
        .walk(0x4000'0000ULL, hbm1 | kRw | RBLN_FW_PTE_LOCAL | RBLN_FW_PTE_LEAF, 1)
        .bind(9)
        .access(9, RBLN_FW_ACCESS_WRITE, 0x4000'0000ULL + RBLN_FW_HUGE_SIZE - 16, kBuf, 16)
        .access(9, RBLN_FW_ACCESS_READ, 0x4000'0000ULL + RBLN_FW_HUGE_SIZE - 16, kBuf, 32)
        .save(dir / "hbm_huge");
    Records()
        .entry(0, (kScratch + RBLN_FW_PAGE_SIZE) | RBLN_FW_PTE_VALID | RBLN_FW_PTE_READ)
        .entry(8, 0xfff0'0000'0000'0001ULL)
        .entry(16, 0x7fff'ffff'f000ULL | RBLN_FW_PTE_VALID)
        .bind(1)
        .access(1, RBLN_FW_ACCESS_READ, 0, kBuf, 8)
        .access(1, RBLN_FW_ACCESS_READ, 1ULL << 39, kBuf, 8)
        .access(1, RBLN_FW_ACCESS_READ, 2ULL << 39, kBuf, 8)
        .access(1, RBLN_FW_ACCESS_READ, 1ULL << 48, kBuf, 8)
        .req(RBLN_FW_OP_VM_BIND, {0, static_cast<std::uint32_t>(kScratch), 0})
        .req(RBLN_FW_OP_VM_BIND, {4096, static_cast<std::uint32_t>(kScratch), 0})
        .req(RBLN_FW_OP_VM_BIND, {5, static_cast<std::uint32_t>(kScratch) + 8, 0})
        .req(RBLN_FW_OP_VM_UNBIND, {6})
        .req(RBLN_FW_OP_TLB_INVALIDATE, {1, 0, 0x10000, 0, 0x10000})
        .save(dir / "bad_entries");
    Records()
        .req(RBLN_FW_OP_RING_SETUP, {1, 16, 0x500000, 0, 0x508000, 0, 0x510000, 0})
        .req(RBLN_FW_OP_RING_STOP, {1})
        .req(RBLN_FW_OP_RING_SETUP, {4, 16, 0x500000, 0, 0x500000, 0, 0x510000, 0})
        .req(99)
        .save(dir / "rings");
    // VM_ABORT of a bound, an unbound, the kernel's and an out-of-range
    // ASID, then the bound one bound again.
    Records()
        .walk(kVa, kPage | kRw)
        .bind(2)
        .req(RBLN_FW_OP_VM_ABORT, {2})
        .req(RBLN_FW_OP_VM_ABORT, {3})
        .req(RBLN_FW_OP_VM_ABORT, {0})
        .req(RBLN_FW_OP_VM_ABORT, {4096})
        .bind(2)
        .access(2, RBLN_FW_ACCESS_WRITE, kVa, kBuf, 64)
        .save(dir / "vm_abort");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    rbln::fuzz::write_seeds_if_asked(write_seeds);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return rbln::fuzz::run_input<Harness>(data, size);
}
