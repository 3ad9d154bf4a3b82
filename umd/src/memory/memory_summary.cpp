// SPDX-License-Identifier: GPL-2.0
// memory_summary.cpp - the allocator's statistics under PyTorch's key names
// and the per-chiplet memory summary table.

#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include "rbln/allocator.hpp"

namespace rbln {

namespace {

void add_stat(MemoryStats& out, const std::string& name, const Stat& s) {
    out[name + ".current"] = s.current;
    out[name + ".peak"] = s.peak;
    out[name + ".allocated"] = s.allocated;
    out[name + ".freed"] = s.freed;
}

void add_array(MemoryStats& out, const std::string& name, const StatArray& a) {
    add_stat(out, name + ".all", a[static_cast<std::size_t>(StatType::All)]);
    add_stat(out, name + ".small_pool", a[static_cast<std::size_t>(StatType::SmallPool)]);
    add_stat(out, name + ".large_pool", a[static_cast<std::size_t>(StatType::LargePool)]);
}

std::string fixed(double value, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
    return buf;
}

// One column of the summary: right-aligned in @width.
std::string column(const std::string& text, std::size_t width) {
    return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string mib(std::int64_t bytes) {
    return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 1);
}

} // namespace

void append_memory_stats(MemoryStats& out, const AllocatorStats& s, std::string_view prefix) {
    const std::string p(prefix);
    add_array(out, p + "allocation", s.allocation);
    add_array(out, p + "segment", s.segment);
    add_array(out, p + "active", s.active);
    add_array(out, p + "inactive_split", s.inactive_split);
    add_array(out, p + "allocated_bytes", s.allocated_bytes);
    add_array(out, p + "reserved_bytes", s.reserved_bytes);
    add_array(out, p + "active_bytes", s.active_bytes);
    add_array(out, p + "inactive_split_bytes", s.inactive_split_bytes);
    add_array(out, p + "requested_bytes", s.requested_bytes);
    add_stat(out, p + "oversize_allocations", s.oversize_allocations);
    add_stat(out, p + "oversize_segments", s.oversize_segments);
    out[p + "num_alloc_retries"] = s.num_alloc_retries;
    out[p + "num_ooms"] = s.num_ooms;
    out[p + "num_sync_all_streams"] = s.num_sync_all_streams;
    out[p + "num_device_alloc"] = s.num_device_alloc;
    out[p + "num_device_free"] = s.num_device_free;
    out[p + "max_split_size"] = s.max_split_size;
}

std::string format_bytes(std::uint64_t bytes) {
    const auto b = static_cast<double>(bytes);
    if (bytes < 1024)
        return std::to_string(bytes) + " bytes";
    if (bytes < (1ull << 20))
        return fixed(b / 1024.0, 2) + " KiB";
    if (bytes < (1ull << 30))
        return fixed(b / (1024.0 * 1024.0), 2) + " MiB";
    return fixed(b / (1024.0 * 1024.0 * 1024.0), 2) + " GiB";
}

MemoryStats DeviceAllocator::memory_stats() const {
    MemoryStats out;
    append_memory_stats(out, stats());
    return out;
}

MemoryStats DeviceAllocator::memory_stats_per_chiplet() const {
    MemoryStats out;
    for (unsigned i = 0; i < place_count(); i++)
        append_memory_stats(out, stats(i),
                            "npu." + std::to_string(npu_of(i)) + ".chiplet." +
                                std::to_string(chiplet_of(i)) + ".");
    return out;
}

std::string DeviceAllocator::memory_summary(const SummaryOptions& options) const {
    // One snapshot of every chiplet and the total.
    std::vector<AllocatorStats> per;
    AllocatorStats total;
    snapshot(total, per);
    const long pid = options.pid ? *options.pid : static_cast<long>(::getpid());
    constexpr std::size_t kNpu = 5;
    constexpr std::size_t kChiplet = 9;
    constexpr std::size_t kValue = 13;
    const std::string rule(kNpu + kChiplet + 6 * kValue, '-');

    std::string s;
    s += options.title_word + " memory summary (device=rbln:" + std::to_string(device_index_) +
         ", MiB)\n";
    s += "scope: pid " + std::to_string(pid) + " -- caching allocator only, this process only\n";
    s += "npu: physical NPU id as in device_summary() (relative to RBLN_VISIBLE_DEVICES, may "
         "differ from rbln-smi)\n";
    s += column("npu", kNpu) + column("chiplet", kChiplet);
    for (const char* h : {"allocated", "alloc peak", "reserved", "resv peak", "active", "cached"})
        s += column(h, kValue);
    s += "\n" + rule + "\n";

    std::int64_t sum[6] = {};
    auto values = [&](const std::int64_t(&v)[6]) {
        std::string row;
        for (std::int64_t x : v)
            row += column(mib(x), kValue);
        return row;
    };
    for (std::size_t i = 0; i < per.size(); i++) {
        const AllocatorStats& st = per[i];
        const std::int64_t v[6] = {st.allocated_bytes[0].current,
                                   st.allocated_bytes[0].peak,
                                   st.reserved_bytes[0].current,
                                   st.reserved_bytes[0].peak,
                                   st.active_bytes[0].current,
                                   st.reserved_bytes[0].current - st.allocated_bytes[0].current};
        for (std::size_t k = 0; k < 6; k++)
            sum[k] += v[k];
        const auto place = static_cast<unsigned>(i);
        s += column(std::to_string(npu_of(place)), kNpu) +
             column(std::to_string(chiplet_of(place)), kChiplet) + values(v) + "\n";
    }
    s += rule + "\n";
    s += column("total", kNpu + kChiplet) + values(sum) + "\n";
    s += "alloc retries: " + std::to_string(total.num_alloc_retries) +
         "   ooms: " + std::to_string(total.num_ooms) + "\n";
    return s;
}

} // namespace rbln
