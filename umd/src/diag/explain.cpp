// SPDX-License-Identifier: GPL-2.0
// explain.cpp - explain regions (rbln/explain.hpp) and the recording
// behind the hooks of explain_hooks.hpp.

#include "rbln/explain.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "diag/explain_hooks.hpp"
#include "rbln/error.hpp"

namespace rbln {

namespace detail {

std::atomic<unsigned> g_explain_open{0};

struct ExplainState {
    ExplainState(std::string n, ExplainLocation w)
        : name(std::move(n)), where(std::move(w)), owner(std::this_thread::get_id()) {}

    /// What the region saw of one storage.
    struct Seen {
        bool uploaded = false;
        bool downloaded = false;
        std::vector<std::size_t> read_downloads; ///< expected downloads a device read would undo
    };

    void add(ExplainRecord r) { records.push_back(std::move(r)); }
    void on_copy(const CopyPlan& plan, std::uint64_t bytes, bool non_blocking, bool drained,
                 std::uint64_t storage, ExplainCause cause, const ExplainLocation& at);
    void on_device_use(std::uint64_t storage);
    static ExplainLocation location_of(const ExplainSite& s) {
        return {s.file_ != nullptr ? s.file_ : "", s.line_,
                s.function_ != nullptr ? s.function_ : ""};
    }

    const std::string name;
    const ExplainLocation where;
    const std::thread::id owner;
    std::atomic<bool> open{true};

    mutable std::mutex mutex;
    std::vector<ExplainRecord> records;               // guarded
    std::unordered_map<std::uint64_t, Seen> storages; // guarded
    ExplainGraph graph;                               // guarded
};

namespace {

struct ThreadExplain {
    std::vector<std::shared_ptr<ExplainState>> regions; ///< open on this thread, outermost first
    const ExplainSite* site = nullptr;
    std::uint64_t storage = 0; ///< the storage whose transfer is under way (0: none)
    ExplainCause cause = ExplainCause::Copy;
};

thread_local ThreadExplain t_explain;

std::string kind_text(const CopyPlan& plan) {
    switch (plan.kind) {
    case CopyKind::HostToDevice:
        return "host to device";
    case CopyKind::DeviceToHost:
        return "device to host";
    case CopyKind::DeviceToDevice:
        return "device to device";
    case CopyKind::HostToHost:
        return "host to host";
    }
    return "?";
}

} // namespace

namespace {

// Runs @f on each open region of this thread, under its mutex.
template <typename F> void for_each_region(F&& f) {
    auto& regions = t_explain.regions;
    std::erase_if(regions, [](const auto& r) { return !r->open.load(std::memory_order_acquire); });
    for (const auto& r : regions) {
        const std::lock_guard<std::mutex> lock(r->mutex);
        f(*r);
    }
}

ExplainLocation site_location() {
    const ExplainSite* s = t_explain.site;
    return s == nullptr ? ExplainLocation{} : ExplainState::location_of(*s);
}

} // namespace

void ExplainState::on_copy(const CopyPlan& plan, std::uint64_t bytes, bool non_blocking,
                           bool drained, std::uint64_t storage, ExplainCause cause,
                           const ExplainLocation& at) {
    auto rec = [&](ExplainKind kind, ExplainCause c, bool signal, std::uint64_t n,
                   std::string why) {
        add(ExplainRecord{kind, c, signal, n, storage, at, std::move(why)});
    };
    if (drained)
        rec(ExplainKind::SyncWait, ExplainCause::Copy, true, 0,
            "a synchronous copy first waited for the device's pending asynchronous transfers");
    if (plan.mode == CopyMode::Async) {
        rec(ExplainKind::AsyncTransfer, ExplainCause::Copy, false, bytes,
            "the caller's copy() " + kind_text(plan) + ", asynchronous");
        return;
    }
    if (non_blocking && plan.kind != CopyKind::HostToHost)
        rec(ExplainKind::SyncWait, ExplainCause::Copy, true, 0,
            "copy() asked for non_blocking but ran synchronously: " + std::string(plan.reason));
    switch (plan.kind) {
    case CopyKind::HostToDevice: {
        if (storage == 0 || cause != ExplainCause::DeviceUse) {
            rec(ExplainKind::Push, ExplainCause::Copy, false, bytes,
                "the caller's copy() host to device, synchronous: " + std::string(plan.reason));
            break;
        }
        Seen& s = storages[storage];
        if (s.uploaded)
            rec(ExplainKind::Push, cause, true, bytes,
                "uploaded again in this region (the host wrote it after it was on the device)");
        else if (s.downloaded)
            rec(ExplainKind::Push, cause, true, bytes,
                "uploads data this region downloaded from the device (a host round trip)");
        else
            rec(ExplainKind::Push, cause, false, bytes,
                "upload of what the caller wrote, for a device operation");
        s.uploaded = true;
        break;
    }
    case CopyKind::DeviceToHost: {
        if (storage == 0) {
            rec(ExplainKind::Download, ExplainCause::Copy, false, bytes,
                "the caller's copy() device to host, synchronous: " + std::string(plan.reason));
            break;
        }
        Seen& s = storages[storage];
        s.downloaded = true;
        if (cause == ExplainCause::HostRead) {
            s.read_downloads.push_back(records.size());
            rec(ExplainKind::Download, cause, false, bytes, "download for the caller's read");
        } else {
            rec(ExplainKind::Download, cause, true, bytes,
                "a host write of part of a device-latest storage downloaded it first");
        }
        break;
    }
    case CopyKind::DeviceToDevice:
        rec(ExplainKind::HostBounce, ExplainCause::Copy, true, bytes,
            plan.cross_device
                ? "copy between two logical devices, through host memory"
                : "synchronous copy on one device, through the host staging buffer (" +
                      std::string(plan.reason) + ")");
        break;
    case CopyKind::HostToHost:
        break;
    }
}

void ExplainState::on_device_use(std::uint64_t storage) {
    auto it = storages.find(storage);
    if (it == storages.end())
        return;
    for (const std::size_t i : it->second.read_downloads) {
        records[i].signal = true;
        records[i].why = "an intermediate: read on the host, then read again by a device "
                         "operation (a host round trip of device data)";
    }
    it->second.read_downloads.clear();
}

void explain_record_commit(std::uint64_t storage, std::uint64_t bytes) {
    if (t_explain.regions.empty())
        return;
    const ExplainLocation at = site_location();
    for_each_region([&](ExplainState& r) {
        r.add(ExplainRecord{ExplainKind::LazyCommit, ExplainCause::DeviceUse, false, bytes, storage,
                            at, "device memory from the caching allocator at first use"});
    });
}

void explain_record_device_use(std::uint64_t storage, bool reads) {
    if (!reads || t_explain.regions.empty())
        return;
    for_each_region([&](ExplainState& r) { r.on_device_use(storage); });
}

void explain_record_copy(const CopyPlan& plan, std::uint64_t bytes, bool non_blocking,
                         bool drained) {
    if (t_explain.regions.empty())
        return;
    const ExplainLocation at = site_location();
    const std::uint64_t storage = t_explain.storage;
    const ExplainCause cause = t_explain.cause;
    for_each_region([&](ExplainState& r) {
        r.on_copy(plan, bytes, non_blocking, drained, storage, cause, at);
    });
}

void explain_record_graph(const ExplainGraph& g) {
    if (t_explain.regions.empty())
        return;
    for_each_region([&](ExplainState& r) {
        r.graph.replays += g.replays;
        r.graph.recompiles += g.recompiles;
        r.graph.defs += g.defs;
        r.graph.bytes += g.bytes;
        r.graph.copies += g.copies;
        r.graph.spilled += g.spilled;
    });
}

void explain_record_wait(ExplainCause cause, const char* why) {
    if (t_explain.regions.empty())
        return;
    const ExplainLocation at = site_location();
    for_each_region([&](ExplainState& r) {
        r.add(ExplainRecord{ExplainKind::SyncWait, cause, true, 0, 0, at, why});
    });
}

void ExplainStorageCause::enter(std::uint64_t storage, ExplainCause cause) noexcept {
    active_ = true;
    outer_storage_ = t_explain.storage;
    outer_cause_ = t_explain.cause;
    t_explain.storage = storage;
    t_explain.cause = cause;
}

void ExplainStorageCause::leave() noexcept {
    t_explain.storage = outer_storage_;
    t_explain.cause = outer_cause_;
}

} // namespace detail

// ---- public API -----------------------------------------------------------------

const char* explain_kind_name(ExplainKind kind) noexcept {
    switch (kind) {
    case ExplainKind::Push:
        return "push";
    case ExplainKind::Download:
        return "download";
    case ExplainKind::AsyncTransfer:
        return "async transfer";
    case ExplainKind::HostBounce:
        return "host bounce";
    case ExplainKind::SyncWait:
        return "sync wait";
    case ExplainKind::LazyCommit:
        return "lazy commit";
    }
    return "?";
}

std::string ExplainLocation::brief() const {
    if (file.empty())
        return "-";
    const std::size_t slash = file.rfind('/');
    return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" +
           std::to_string(line);
}

ExplainRegion::ExplainRegion(std::string name, ExplainLocation where)
    : s_(std::make_shared<detail::ExplainState>(std::move(name), std::move(where))) {
    detail::t_explain.regions.push_back(s_);
    detail::g_explain_open.fetch_add(1, std::memory_order_relaxed);
}

ExplainRegion::~ExplainRegion() {
    if (!s_->open.exchange(false))
        return;
    detail::g_explain_open.fetch_sub(1, std::memory_order_relaxed);
    // On the opening thread (the documented use) drop it from the stack
    // now; elsewhere the owner's hooks drop it at their next call.
    if (std::this_thread::get_id() == s_->owner)
        std::erase(detail::t_explain.regions, s_);
}

void ExplainRegion::close() {
    if (!s_->open.load())
        return;
    if (std::this_thread::get_id() != s_->owner)
        throw Error(Errc::InvalidArgument, "explain close", "", 0,
                    "a region is closed on the thread that opened it");
    s_->open.store(false);
    detail::g_explain_open.fetch_sub(1, std::memory_order_relaxed);
    std::erase(detail::t_explain.regions, s_);
}

bool ExplainRegion::open() const noexcept {
    return s_->open.load();
}

const std::string& ExplainRegion::name() const noexcept {
    return s_->name;
}

const ExplainLocation& ExplainRegion::where() const noexcept {
    return s_->where;
}

std::vector<ExplainRecord> ExplainRegion::records() const {
    const std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->records;
}

std::vector<ExplainRecord> ExplainRegion::signals() const {
    std::vector<ExplainRecord> out = records();
    std::erase_if(out, [](const ExplainRecord& r) { return !r.signal; });
    return out;
}

ExplainCounts ExplainRegion::counts() const {
    ExplainCounts c;
    for (const ExplainRecord& r : records()) {
        c.signals += r.signal ? 1 : 0;
        switch (r.kind) {
        case ExplainKind::Push:
            c.pushes++;
            c.push_bytes += r.bytes;
            c.pushes_expected += r.signal ? 0 : 1;
            break;
        case ExplainKind::Download:
            c.downloads++;
            c.download_bytes += r.bytes;
            c.downloads_expected += r.signal ? 0 : 1;
            break;
        case ExplainKind::AsyncTransfer:
            c.async_transfers++;
            c.async_bytes += r.bytes;
            break;
        case ExplainKind::HostBounce:
            c.host_bounces++;
            c.host_bounce_bytes += r.bytes;
            break;
        case ExplainKind::SyncWait:
            c.sync_waits++;
            break;
        case ExplainKind::LazyCommit:
            c.lazy_commits++;
            c.commit_bytes += r.bytes;
            break;
        }
    }
    const std::lock_guard<std::mutex> lock(s_->mutex);
    c.graph_replays = s_->graph.replays;
    c.graph_recompiles = s_->graph.recompiles;
    c.graph_defs = s_->graph.defs;
    c.graph_upload_bytes = s_->graph.bytes;
    c.graph_copies = s_->graph.copies;
    c.graph_spilled = s_->graph.spilled;
    return c;
}

namespace {

std::string human_bytes(std::uint64_t n) {
    char buf[32];
    if (n < 1024)
        std::snprintf(buf, sizeof(buf), "%" PRIu64 " B", n);
    else if (n < (1ull << 20))
        std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(n) / 1024.0);
    else if (n < (1ull << 30))
        std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(n) / 1048576.0);
    else
        std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(n) / 1073741824.0);
    return buf;
}

// @s then spaces to @width, and at least one.
std::string pad(std::string s, std::size_t width) {
    s.append(s.size() < width ? width - s.size() : 1, ' ');
    return s;
}

} // namespace

std::string ExplainRegion::report() const {
    const std::vector<ExplainRecord> all = records();
    const ExplainCounts c = counts();
    std::string out = c.signals == 0 ? std::string("[clean]")
                                     : "[overhead: " + std::to_string(c.signals) + " signals]";
    out += " explain";
    if (!s_->name.empty())
        out += " \"" + s_->name + "\"";
    out += " at " + s_->where.brief() + " (this thread only)\n";
    out += c.signals == 0
               ? "  clean: no hidden host round trip, only the expected uploads and downloads; "
                 "this is not a claim that it was fast\n"
               : "  each signal is work the host did behind the caller's back; clean would mean "
                 "no hidden host round trip, not fast\n";
    out += "  pushes (host->device):   " + std::to_string(c.pushes) + " (" +
           human_bytes(c.push_bytes) + "), " + std::to_string(c.pushes_expected) + " expected\n";
    out += "  downloads (device->host): " + std::to_string(c.downloads) + " (" +
           human_bytes(c.download_bytes) + "), " + std::to_string(c.downloads_expected) +
           " expected\n";
    out += "  async transfers: " + std::to_string(c.async_transfers) + " (" +
           human_bytes(c.async_bytes) + ")  host bounces: " + std::to_string(c.host_bounces) +
           " (" + human_bytes(c.host_bounce_bytes) +
           ")  sync waits: " + std::to_string(c.sync_waits) +
           "  lazy commits: " + std::to_string(c.lazy_commits) + " (" +
           human_bytes(c.commit_bytes) + ")\n";
    if (c.graph_replays != 0 || c.graph_recompiles != 0)
        out += "  graphs: " + std::to_string(c.graph_replays) + " replays, " +
               std::to_string(c.graph_recompiles) +
               " recompiles\n  graph_upload defs=" + std::to_string(c.graph_defs) +
               " bytes=" + std::to_string(c.graph_upload_bytes) +
               " copies=" + std::to_string(c.graph_copies) +
               " spilled=" + std::to_string(c.graph_spilled) + "\n";
    if (c.signals == 0)
        return out;
    out += "  " + pad("#", 4) + pad("signal", 15) + pad("bytes", 12) + pad("storage", 9) +
           pad("at", 24) + "why\n";
    std::size_t i = 0;
    for (const ExplainRecord& r : all) {
        if (!r.signal)
            continue;
        out += "  " + pad(std::to_string(++i), 4) + pad(explain_kind_name(r.kind), 15) +
               pad(r.bytes == 0 ? "-" : human_bytes(r.bytes), 12) +
               pad(r.storage == 0 ? "-" : "#" + std::to_string(r.storage), 9) +
               pad(r.where.brief(), 24) + r.why + "\n";
    }
    return out;
}

// ---- ExplainSite --------------------------------------------------------------------

ExplainSite::ExplainSite(rbln::source_location where)
    : ExplainSite(where.file_name(), where.line(), where.function_name()) {}

ExplainSite::ExplainSite(const char* file, std::uint32_t line, const char* function)
    : file_(file), line_(line), function_(function) {
    if (!detail::explain_any())
        return;
    active_ = true;
    outer_ = detail::t_explain.site;
    detail::t_explain.site = this;
}

ExplainSite::~ExplainSite() {
    if (active_)
        detail::t_explain.site = outer_;
}

} // namespace rbln
