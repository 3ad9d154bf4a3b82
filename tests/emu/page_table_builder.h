// SPDX-License-Identifier: GPL-2.0
// Test side: builds rbln_fw_mmu.md page tables in guest memory, the way a
// host driver would, so the MMU tests can map, change and break entries.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "guest_memory.h"
#include "rbln_fw_mmu.h"

namespace rbln::emu::test {

inline constexpr std::uint64_t kPteRw = RBLN_FW_PTE_READ | RBLN_FW_PTE_WRITE;

// The VA whose table indices are l3/l2/l1/l0, plus a byte offset.
constexpr std::uint64_t make_va(std::uint64_t l3, std::uint64_t l2, std::uint64_t l1,
                                std::uint64_t l0, std::uint64_t offset = 0) {
    return l3 << RBLN_FW_PT_SHIFT(3) | l2 << RBLN_FW_PT_SHIFT(2) | l1 << RBLN_FW_PT_SHIFT(1) |
           l0 << RBLN_FW_PT_SHIFT(0) | offset;
}

class PageTableBuilder {
public:
    // Tables are taken from [pool, pool + pool_size) of `mem` (4 KiB
    // aligned, guest RAM); the root is the first.
    PageTableBuilder(GuestMemory& mem, std::uint64_t pool, std::uint64_t pool_size)
        : mem_(mem), next_(pool), end_(pool + pool_size) {
        root_ = new_table();
    }

    [[nodiscard]] std::uint64_t root() const { return root_; }

    // A zeroed table (all entries invalid).
    std::uint64_t new_table() {
        if (end_ - next_ < RBLN_FW_PAGE_SIZE)
            throw std::runtime_error("page-table pool exhausted");
        const std::uint64_t gpa = next_;
        next_ += RBLN_FW_PAGE_SIZE;
        std::byte* p = mem_.translate(gpa, RBLN_FW_PAGE_SIZE);
        if (p == nullptr)
            throw std::runtime_error("page-table pool not in guest RAM");
        std::memset(p, 0, RBLN_FW_PAGE_SIZE);
        return gpa;
    }

    // Maps a 4 KiB page (flags: READ/WRITE/LOCAL), creating tables.
    void map_4k(std::uint64_t va, std::uint64_t pa, std::uint64_t flags) {
        set(va, 0, pa | flags | RBLN_FW_PTE_VALID);
    }
    // Maps a 2 MiB page (LEAF at level 1).
    void map_2m(std::uint64_t va, std::uint64_t pa, std::uint64_t flags) {
        set(va, 1, pa | flags | RBLN_FW_PTE_LEAF | RBLN_FW_PTE_VALID);
    }

    // GPA of the entry of `level` that translates va, creating the tables
    // above it (as valid table pointers) when missing.
    std::uint64_t entry_gpa(std::uint64_t va, int level) {
        std::uint64_t table = root_;
        for (int l = RBLN_FW_PT_LEVELS - 1; l > level; l--) {
            const std::uint64_t at = table + 8 * RBLN_FW_PT_INDEX(va, l);
            std::uint64_t e = load(at);
            if ((e & RBLN_FW_PTE_VALID) == 0) {
                e = new_table() | RBLN_FW_PTE_VALID;
                store(at, e);
            }
            table = e & RBLN_FW_PTE_ADDR_MASK;
        }
        return table + 8 * RBLN_FW_PT_INDEX(va, level);
    }

    [[nodiscard]] std::uint64_t get(std::uint64_t va, int level) {
        return load(entry_gpa(va, level));
    }
    void set(std::uint64_t va, int level, std::uint64_t entry) {
        store(entry_gpa(va, level), entry);
    }
    void clear(std::uint64_t va, int level) { set(va, level, 0); }

private:
    std::uint64_t load(std::uint64_t gpa) {
        std::uint64_t v = 0;
        if (!mem_.read(gpa, &v, sizeof(v)))
            throw std::runtime_error("page-table entry not in guest RAM");
        return v;
    }
    void store(std::uint64_t gpa, std::uint64_t v) {
        if (!mem_.write(gpa, &v, sizeof(v)))
            throw std::runtime_error("page-table entry not in guest RAM");
    }

    GuestMemory& mem_;
    std::uint64_t next_;
    std::uint64_t end_;
    std::uint64_t root_ = 0;
};

} // namespace rbln::emu::test
