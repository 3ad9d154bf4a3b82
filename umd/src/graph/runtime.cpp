// SPDX-License-Identifier: GPL-2.0
// runtime.cpp - a device's graph runtime: Definition cache, pipeline slots,
// binds and GRAPH_EXEC jobs (runtime.hpp).

#include "graph/runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "exec/command.hpp"
#include "memory/bo_memory.hpp"
#include "rbln/device.hpp"
#include "runtime/device_state.hpp"

namespace rbln::detail::graph {

namespace {

constexpr std::uint64_t align16(std::uint64_t v) {
    return (v + 15) / 16 * 16;
}

std::uint64_t next_pow2(std::uint64_t v) {
    std::uint64_t p = 4096;
    while (p < v)
        p <<= 1;
    return p;
}

std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

struct Copy {
    std::uint64_t src = 0;
    std::uint64_t dst = 0;
    std::uint64_t size = 0;
};

} // namespace

Runtime& runtime_of(Device& device) {
    auto& ds = device.state();
    const std::lock_guard<std::mutex> lock(ds.mutex);
    if (!ds.graph_runtime)
        ds.graph_runtime = std::make_shared<Runtime>(device);
    return *ds.graph_runtime;
}

bool Runtime::done(const JobRef& j) const {
    if (j.job == 0 || j.stream.expired()) // a stream waits for its work when it goes
        return true;
    return device_.submitter().done(j.queue_id, j.job);
}

void Runtime::wait(const JobRef& j) {
    if (j.job != 0 && !j.stream.expired())
        device_.submitter().wait(j.queue_id, j.job);
}

std::shared_ptr<const Definition> Runtime::intern(std::shared_ptr<Definition> def) {
    const std::lock_guard<std::mutex> lock(mutex_);
    return intern_locked(std::move(def));
}

std::shared_ptr<const Definition> Runtime::intern_locked(std::shared_ptr<const Definition> def) {
    for (;;) {
        auto it = cache_.find(def->key);
        if (it == cache_.end())
            break;
        if (it->second.def == def || it->second.def->same_content(*def)) {
            stats_.cache_hits++;
            it->second.lru = ++tick_;
            return it->second.def;
        }
        // Two contents, one key: give the newcomer another key (its image
        // carries the key, so the card tells them apart too).
        auto moved = std::make_shared<Definition>(*def);
        moved->key =
            content_hash(std::as_bytes(std::span<const std::uint64_t>(&moved->key, 1)), moved->key);
        def = std::move(moved);
    }
    stats_.cache_misses++;
    Entry& e = cache_[def->key];
    e.def = def;
    e.lru = ++tick_;
    evict_locked();
    return def;
}

void Runtime::evict_locked() {
    while (cache_.size() > options_.capacity) {
        // The least recently used Definition no in-flight replay uses.
        auto victim = cache_.end();
        for (auto it = cache_.begin(); it != cache_.end(); ++it)
            if ((victim == cache_.end() || it->second.lru < victim->second.lru) &&
                it->second.lru != tick_ && done(it->second.last_use))
                victim = it;
        if (victim == cache_.end())
            return; // every other one is in flight: over capacity until they finish
        const std::uint64_t key = victim->first;
        const std::uint32_t bytes = victim->second.def->object_bytes();
        for (SlotBlock& slot : slots_)
            if (slot.at.erase(key) != 0)
                slot.garbage += bytes;
        cache_.erase(victim);
        stats_.cache_evictions++;
    }
}

std::size_t Runtime::writable_slot_locked(const Stream& stream) {
    // A slot whose device block no unfinished replay reads (prefer one that
    // has blocks already); else one whose readers are all on this stream
    // (the stream orders the copy after them) and whose staging no copy
    // still reads; else wait for the slot used longest ago.
    std::size_t pick = slots_.size();
    for (std::size_t s = 0; s < slots_.size(); s++)
        if (done(slots_[s].last_use) &&
            (pick == slots_.size() || (!slots_[pick].device && slots_[s].device)))
            pick = s;
    if (pick == slots_.size())
        for (std::size_t s = 0; s < slots_.size(); s++) {
            const auto st = slots_[s].last_use.stream.lock();
            if (st == stream.state() && done(slots_[s].last_copy)) {
                pick = s;
                break;
            }
        }
    if (pick == slots_.size()) {
        pick = 0;
        for (std::size_t s = 1; s < slots_.size(); s++)
            if (slots_[s].last_use.job < slots_[pick].last_use.job)
                pick = s;
        wait(slots_[pick].last_use);
        wait(slots_[pick].last_copy);
        stats_.bind_waits++;
    }
    for (std::size_t s = 0; s < slots_.size(); s++)
        if (s != pick && !done(slots_[s].last_use)) {
            stats_.overlapped_binds++;
            break;
        }
    return pick;
}

void Runtime::build_at_locked(SlotBlock& slot, const Definition& def, std::uint64_t offset) {
    const std::uint64_t t0 = now_ns();
    def.build(std::span<std::byte>(slot.staging->host_data() + offset, def.object_bytes()));
    stats_.build_ns += now_ns() - t0;
    stats_.definitions_uploaded++;
}

void Runtime::rebuild_locked(SlotBlock& slot, std::uint64_t capacity) {
    if (!slot.device || capacity > slot.capacity) {
        // Replays still reading the old blocks hold them (their jobs keep
        // them alive): a new block never moves what they read.
        slot.device = BoMemory::create_device(device_.kernel_ptr(), capacity);
        slot.staging = BoMemory::create_host(device_.kernel_ptr(), capacity);
        // Touched once now, a byte a page, so that building into it later
        // costs the build and not first-touch page faults (the block is
        // retained: this is part of making it, not of any bind).
        for (std::uint64_t off = 0; off < capacity; off += 4096)
            slot.staging->host_data()[off] = std::byte{0};
        slot.capacity = capacity;
        stats_.allocations += 2;
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> live(slot.at.begin(), slot.at.end());
    std::sort(live.begin(), live.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    slot.at.clear();
    slot.cursor = 0;
    slot.garbage = 0;
    for (const auto& [key, old] : live) {
        const Definition& def = *cache_.at(key).def;
        if (slot.cursor + def.object_bytes() > slot.capacity)
            continue; // dropped from this slot; rebuilt on its next bind
        build_at_locked(slot, def, slot.cursor);
        slot.at[key] = slot.cursor;
        slot.cursor = align16(slot.cursor + def.object_bytes());
    }
}

std::uint64_t Runtime::replay(Stream& stream, BindRequest req) {
    const std::lock_guard<std::mutex> lock(mutex_);
    used_ = true;
    if (slots_.size() != options_.slots)
        slots_.resize(options_.slots);
    // A Definition evicted since its graph was made comes back (a miss).
    std::shared_ptr<const Definition> def = req.def;
    auto it = cache_.find(def->key);
    if (it == cache_.end() || it->second.def != def) {
        def = intern_locked(def);
        it = cache_.find(def->key);
    }
    Entry& entry = it->second;
    entry.lru = ++tick_;
    const std::uint64_t key = def->key;

    std::vector<std::shared_ptr<Memory>> bufs = std::move(req.buffers);
    if (req.exec)
        bufs.push_back(req.exec);
    std::vector<Copy> copies;
    std::uint64_t def_va = 0;
    std::size_t used = slots_.size();
    bool ships = false;
    std::vector<std::byte> inline_image; ///< Inline: the image this submission carries
    std::shared_ptr<Memory> table_copy;  ///< PerObject: this replay's boundary table
    if (policy_ == UploadPolicy::Inline) {
        const std::uint64_t t0 = now_ns();
        inline_image.resize(def->object_bytes()); // the allocation (zero filled)
        def->build(inline_image);
        stats_.build_ns += now_ns() - t0;
        stats_.allocations++;
        stats_.definitions_uploaded++;
        stats_.copies++; // into the command buffer
        stats_.upload_bytes += inline_image.size();
    } else if (policy_ == UploadPolicy::PerObject) {
        auto obj = objects_.find(key);
        if (obj == objects_.end()) {
            const std::uint32_t bytes = def->object_bytes();
            auto host = BoMemory::create_host(device_.kernel_ptr(), bytes);
            auto dev = BoMemory::create_device(device_.kernel_ptr(), bytes);
            const std::uint64_t t0 = now_ns();
            std::memset(host->host_data(), 0, bytes);
            def->build(std::span<std::byte>(host->host_data(), bytes));
            stats_.build_ns += now_ns() - t0;
            stats_.allocations += 2;
            stats_.definitions_uploaded++;
            copies.push_back({host->device_va(), dev->device_va(), bytes});
            bufs.push_back(host);
            obj = objects_.emplace(key, dev).first;
        }
        def_va = obj->second->device_va();
        bufs.push_back(obj->second);
        if (!req.bindings.empty()) {
            table_copy = BoMemory::create_device(
                device_.kernel_ptr(), req.bindings.size() * sizeof(rbln_fw_graph_binding));
            stats_.allocations++;
            bufs.push_back(table_copy);
        }
    } else {
        for (std::size_t s = 0; s < slots_.size() && used == slots_.size(); s++)
            if (auto at = slots_[s].at.find(key); at != slots_[s].at.end()) {
                used = s; // there already: no copy
                def_va = slots_[s].device->device_va() + at->second;
            }
        if (used == slots_.size()) {
            used = writable_slot_locked(stream);
            SlotBlock& slot = slots_[used];
            const std::uint64_t target = std::max(block_target_, options_.block_bytes);
            std::uint64_t ship_from = slot.cursor;
            const std::uint32_t obj = def->object_bytes();
            if (!slot.device || slot.capacity < target ||
                (slot.cursor + obj > slot.capacity && slot.garbage > 0)) {
                rebuild_locked(slot, std::max(target, slot.capacity));
                ship_from = 0;
            }
            if (slot.cursor + obj <= slot.capacity) {
                const std::uint64_t off = slot.cursor;
                build_at_locked(slot, *def, off);
                slot.at[key] = off;
                slot.cursor = align16(off + obj);
                def_va = slot.device->device_va() + off;
            } else {
                // Spilled: built in buffers of its own, copied in; the blocks
                // grow for the next bind.
                auto host = BoMemory::create_host(device_.kernel_ptr(), obj);
                auto dev = BoMemory::create_device(device_.kernel_ptr(), obj);
                stats_.allocations += 2;
                const std::uint64_t t0 = now_ns();
                def->build(std::span<std::byte>(host->host_data(), obj));
                stats_.build_ns += now_ns() - t0;
                stats_.definitions_uploaded++;
                stats_.spilled++;
                copies.push_back({host->device_va(), dev->device_va(), obj});
                def_va = dev->device_va();
                bufs.push_back(host);
                bufs.push_back(dev);
                block_target_ = next_pow2(std::max(slot.capacity * 2, slot.cursor + obj));
            }
            if (slot.cursor > ship_from) {
                copies.insert(copies.begin(),
                              Copy{slot.staging->device_va() + ship_from,
                                   slot.device->device_va() + ship_from, slot.cursor - ship_from});
                ships = true;
                bufs.push_back(slot.staging);
            }
        }
        bufs.push_back(slots_[used].device);
    }

    const std::span<const std::byte> table = std::as_bytes(std::span(req.bindings));
    const std::size_t max_bytes = (table.empty() ? 0 : 8 + table.size()) +
                                  (inline_image.empty() ? 0 : 16 + inline_image.size()) +
                                  (copies.size() + 1) * PacketSize::copy + PacketSize::graph_exec;
    const auto boundary_count = static_cast<std::uint32_t>(req.bindings.size());
    const std::uint64_t exec_va = req.exec ? req.exec->device_va() : 0;
    const std::uint64_t exec_bytes = req.exec ? req.exec_bytes : 0;
    const std::uint64_t n = stream.enqueue(
        max_bytes,
        [&](CommandEncoder& e) {
            std::uint64_t table_va = table.empty() ? 0 : e.nop_payload(table);
            std::uint64_t object_va = def_va;
            if (!inline_image.empty()) {
                if ((e.next_device_va() + 8) % 16 != 0)
                    e.nop(); // the object's VA is 16-byte aligned
                object_va = e.nop_payload(inline_image);
            }
            for (const Copy& c : copies)
                e.copy(c.src, c.dst, c.size);
            if (table_copy) {
                e.copy(table_va, table_copy->device_va(), table.size());
                table_va = table_copy->device_va();
            }
            rbln_fw_pkt_graph_exec g{};
            g.boundary_count = boundary_count;
            g.definition = object_va;
            g.boundaries = table_va;
            g.exec = exec_va;
            g.exec_bytes = exec_bytes;
            e.graph_exec(g);
        },
        bufs);

    const JobRef ref{stream.state(), stream.queue_id(), n};
    entry.last_use = ref;
    if (used < slots_.size()) {
        slots_[used].last_use = ref;
        if (ships)
            slots_[used].last_copy = ref;
    }
    stats_.replays++;
    stats_.binds++;
    stats_.table_bytes += table.size();
    stats_.copies += copies.size() + (table_copy ? 1 : 0);
    for (const Copy& c : copies)
        stats_.upload_bytes += c.size;
    if (table_copy)
        stats_.upload_bytes += table.size();
    return n;
}

GraphStats Runtime::stats() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    GraphStats s = stats_;
    s.cache_entries = cache_.size();
    s.block_bytes = std::max(block_target_, options_.block_bytes);
    return s;
}

void Runtime::set_options(const GraphCacheOptions& options) {
    if (options.slots < 2)
        throw Error(Errc::InvalidArgument, "set_graph_cache_options", device_.node_path(), 0,
                    "slots " + std::to_string(options.slots) +
                        " is fewer than 2: a bind must have a slot no in-flight replay reads");
    if (options.capacity == 0 || options.block_bytes == 0)
        throw Error(Errc::InvalidArgument, "set_graph_cache_options", device_.node_path(), 0,
                    "capacity and block_bytes must be at least 1");
    const std::lock_guard<std::mutex> lock(mutex_);
    if (used_)
        throw Error(Errc::InvalidArgument, "set_graph_cache_options", device_.node_path(), 0,
                    "the device has replayed graphs already; set the options before the first "
                    "replay");
    options_ = options;
}

void Runtime::set_policy(UploadPolicy policy) {
    const std::lock_guard<std::mutex> lock(mutex_);
    policy_ = policy;
}

void Runtime::count_capture() {
    const std::lock_guard<std::mutex> lock(mutex_);
    stats_.captures++;
}

void Runtime::count_recompile() {
    const std::lock_guard<std::mutex> lock(mutex_);
    stats_.recompiles++;
}

} // namespace rbln::detail::graph
