// SPDX-License-Identifier: GPL-2.0
// capture.cpp - stream capture: recording rbln::ops calls and turning them
// into a Definition and an executable graph (capture.hpp, rbln/graph.hpp).

#include "graph/capture.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "graph/executable.hpp"
#include "graph/runtime.hpp"
#include "rbln/device.hpp"
#include "rbln/error.hpp"

namespace rbln::detail::graph {

std::atomic<unsigned> g_open_captures{0};

namespace {

// Guards the two maps; never held while taking another lock of librbln.
std::mutex g_mutex;
std::unordered_map<const StreamState*, std::shared_ptr<Capture>> g_by_stream;
std::unordered_map<std::uint64_t, const Capture*> g_made; ///< storages of open captures

thread_local Capture* t_capture = nullptr;

[[noreturn]] void misuse(const char* what, const std::string& why) {
    throw Error(Errc::InvalidArgument, what, "", 0, why);
}

constexpr std::uint64_t kRegionAlign = 256;

constexpr std::uint64_t align_region(std::uint64_t v) {
    return (v + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
}

std::string storage_name(std::uint64_t id) {
    return "storage " + std::to_string(id);
}

} // namespace

Capture::Capture(Stream stream) : stream_(std::move(stream)), thread_(std::this_thread::get_id()) {}

Capture::~Capture() {
    close();
}

void Capture::close() noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!open_)
        return;
    open_ = false;
    {
        const std::lock_guard<std::mutex> g(g_mutex);
        for (const std::uint64_t id : created_ids_)
            g_made.erase(id);
        g_by_stream.erase(stream_.state().get());
    }
    if (t_capture == this)
        t_capture = nullptr;
    g_open_captures.fetch_sub(1, std::memory_order_relaxed);
}

void Capture::abandon() noexcept {
    close();
}

bool Capture::made_here(std::uint64_t storage_id) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return std::find(created_ids_.begin(), created_ids_.end(), storage_id) != created_ids_.end();
}

void Capture::created(const std::shared_ptr<Storage>& storage) {
    const std::lock_guard<std::mutex> lock(mutex_);
    created_.push_back(storage);
    created_ids_.push_back(storage->id());
    const std::lock_guard<std::mutex> g(g_mutex);
    g_made[storage->id()] = this;
}

void Capture::record(std::uint32_t op, std::span<const std::byte> pkt,
                     const std::array<Slot, RBLN_FW_GRAPH_OPERANDS>& slots) {
    const char* what = "graph capture";
    if (std::this_thread::get_id() != thread_)
        misuse(what, "an op on the capturing stream came from another thread than the one that "
                     "began the capture; capture a step on one thread");
    for (const Slot& s : slots) {
        if (!s.storage)
            continue;
        if (s.storage->element_type() == ElementType::U8)
            misuse(what, storage_name(s.storage->id()) +
                             " has element type U8; a graph's tensors are fp32, fp16 or bf16");
        if (s.storage->nbytes() == 0)
            misuse(what, storage_name(s.storage->id()) + " has 0 bytes");
        if (&s.storage->device()->kernel() != &stream_.device().kernel())
            misuse(what, storage_name(s.storage->id()) +
                             " is on rbln:" + std::to_string(s.storage->device_index()) +
                             " but the capturing stream on rbln:" +
                             std::to_string(stream_.device().index()) +
                             "; a graph runs on one device");
        const std::lock_guard<std::mutex> g(g_mutex);
        auto it = g_made.find(s.storage->id());
        if (it != g_made.end() && it->second != this)
            misuse(what, storage_name(s.storage->id()) +
                             " was made inside another open capture; end that capture first");
    }
    RecordedNode n;
    n.op = op;
    std::copy_n(pkt.begin(), std::min(pkt.size(), n.pkt.size()), n.pkt.begin());
    const std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t k = 0; k < slots.size(); k++) {
        const Slot& s = slots[k];
        if (!s.storage)
            continue;
        RecordedSlot& r = n.slots[k];
        r.used = true;
        r.id = s.storage->id();
        r.nbytes = s.storage->nbytes();
        r.byte_offset = s.byte_offset;
        r.access = s.access;
        if (std::find(created_ids_.begin(), created_ids_.end(), r.id) == created_ids_.end())
            r.boundary = s.storage;
    }
    nodes_.push_back(std::move(n));
}

Graph Capture::finish() {
    close();
    std::vector<RecordedNode> nodes;
    std::vector<std::weak_ptr<Storage>> created;
    std::vector<std::uint64_t> created_ids;
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        nodes = std::move(nodes_);
        created = std::move(created_);
        created_ids = std::move(created_ids_);
    }
    auto def = std::make_shared<Definition>();
    auto x = std::make_shared<Executable>();
    Device& device = stream_.device();
    x->device = device.shared_from_this();

    // Storages made here: alive now = outputs, dead = intermediates.
    std::vector<std::shared_ptr<Storage>> alive(created.size());
    for (std::size_t i = 0; i < created.size(); i++)
        alive[i] = created[i].lock();

    // Execution storage: the outputs first (in creation order), each at a
    // 256-byte aligned offset; then the intermediates, placed at their first
    // use in a region an intermediate whose last use has passed freed (the
    // smallest that fits), else after the others.  A reused region makes
    // the new occupant's first writer depend on the old one's last writer
    // and readers (below), so nodes that may run at once never share bytes.
    std::unordered_map<std::uint64_t, std::uint64_t> region; // id -> offset
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < alive.size(); i++)
        if (alive[i]) {
            region[created_ids[i]] = at;
            x->outputs.push_back(
                {created_ids[i], at, alive[i]->nbytes(), alive[i]->element_type()});
            at = align_region(at + alive[i]->nbytes());
        }
    std::unordered_map<std::uint64_t, std::size_t> last_use; // intermediate id -> node
    for (std::size_t i = 0; i < nodes.size(); i++)
        for (const RecordedSlot& s : nodes[i].slots)
            if (s.used && !s.boundary &&
                std::find_if(x->outputs.begin(), x->outputs.end(),
                             [&](const Executable::Output& o) { return o.id == s.id; }) ==
                    x->outputs.end())
                last_use[s.id] = i;
    struct FreeRegion {
        std::uint64_t offset = 0;
        std::uint64_t bytes = 0;
        std::uint64_t previous = 0; ///< the id that held it
    };
    std::vector<FreeRegion> free_regions;
    std::unordered_map<std::uint64_t, std::uint64_t> region_bytes; // intermediate id -> bytes

    // Boundary tensors in order of first use; dependencies per storage.
    struct Use {
        bool seen = false;
        bool first_whole_write = false;
        bool read_before_write = false;
        bool written = false;
    };
    struct Dep {
        int writer = -1;
        std::vector<int> readers;
    };
    std::unordered_map<std::uint64_t, std::size_t> boundary; // id -> index
    std::vector<Use> uses;
    std::unordered_map<std::uint64_t, Dep> deps;
    def->rows.push_back(0);
    for (std::size_t i = 0; i < nodes.size(); i++) {
        const RecordedNode& rn = nodes[i];
        for (const RecordedSlot& s : rn.slots) {
            if (!s.used || s.boundary || region.count(s.id) != 0)
                continue;
            const std::uint64_t need = align_region(s.nbytes);
            auto best = free_regions.end();
            for (auto f = free_regions.begin(); f != free_regions.end(); ++f)
                if (f->bytes >= need && (best == free_regions.end() || f->bytes < best->bytes))
                    best = f;
            if (best != free_regions.end()) {
                region[s.id] = best->offset;
                region_bytes[s.id] = best->bytes;
                deps[s.id] = deps[best->previous]; // ordered after the old occupant
                free_regions.erase(best);
            } else {
                region[s.id] = at;
                region_bytes[s.id] = need;
                at += need;
            }
        }
        rbln_fw_graph_node node{};
        node.op = rn.op;
        std::memcpy(node.pkt.bytes, rn.pkt.data(), sizeof(node.pkt.bytes));
        std::vector<std::uint16_t> prods;
        for (std::size_t k = 0; k < rn.slots.size(); k++) {
            const RecordedSlot& s = rn.slots[k];
            if (!s.used)
                continue;
            const std::uint64_t id = s.id;
            const bool reads = s.access != DeviceAccess::Write;
            const bool writes = s.access != DeviceAccess::Read;
            if (auto r = region.find(id); r != region.end()) {
                node.reloc[k] = {RBLN_FW_GRAPH_RELOC_EXEC, 0, r->second + s.byte_offset};
            } else {
                auto [b, fresh] = boundary.try_emplace(id, x->inputs.size());
                if (fresh) {
                    x->inputs.push_back(s.boundary);
                    uses.emplace_back();
                }
                Use& u = uses[b->second];
                if (!u.seen) {
                    u.seen = true;
                    u.first_whole_write = s.access == DeviceAccess::Write;
                }
                if (reads && !u.written)
                    u.read_before_write = true;
                u.written = u.written || writes;
                node.reloc[k] = {RBLN_FW_GRAPH_RELOC_BOUNDARY,
                                 static_cast<std::uint32_t>(b->second), s.byte_offset};
            }
            Dep& d = deps[id];
            if (d.writer >= 0)
                prods.push_back(static_cast<std::uint16_t>(d.writer));
            if (writes)
                for (const int r : d.readers)
                    prods.push_back(static_cast<std::uint16_t>(r));
        }
        for (const RecordedSlot& s : rn.slots)
            if (s.used && s.access != DeviceAccess::Write)
                deps[s.id].readers.push_back(static_cast<int>(i));
        for (const RecordedSlot& s : rn.slots)
            if (s.used && s.access != DeviceAccess::Read) {
                Dep& d = deps[s.id];
                d.writer = static_cast<int>(i);
                d.readers.clear();
            }
        std::sort(prods.begin(), prods.end());
        prods.erase(std::unique(prods.begin(), prods.end()), prods.end());
        std::erase(prods, static_cast<std::uint16_t>(i));
        def->prods.insert(def->prods.end(), prods.begin(), prods.end());
        def->rows.push_back(static_cast<std::uint32_t>(def->prods.size()));
        if (prods.empty())
            def->roots.push_back(static_cast<std::uint16_t>(i));
        def->nodes.push_back(node);
        for (const RecordedSlot& s : rn.slots)
            if (s.used && !s.boundary) {
                auto lu = last_use.find(s.id);
                if (lu != last_use.end() && lu->second == i) {
                    free_regions.push_back({region[s.id], region_bytes[s.id], s.id});
                    last_use.erase(lu);
                }
            }
    }
    def->exec_bytes = at;
    x->exec_bytes = at;
    for (std::size_t b = 0; b < x->inputs.size(); b++) {
        const Use& u = uses[b];
        const GraphDirection dir = !u.written ? GraphDirection::In
                                   : (u.first_whole_write && !u.read_before_write)
                                       ? GraphDirection::Out
                                       : GraphDirection::InOut;
        x->directions.push_back(dir);
        const Storage& s = *x->inputs[b];
        rbln_fw_graph_tensor t{};
        t.dtype = static_cast<std::uint32_t>(s.element_type());
        t.ndim = 1;
        t.direction = static_cast<std::uint16_t>(dir);
        t.bytes = s.nbytes();
        t.shape[0] = s.nbytes() / element_size(s.element_type());
        t.stride[0] = 1;
        def->boundaries.push_back(t);
    }
    def->finish(); // limits, layout, key
    Runtime& rt = runtime_of(device);
    x->def = rt.intern(std::move(def));
    rt.count_capture();
    return Graph(std::move(x));
}

// ---- hooks ----------------------------------------------------------------

std::shared_ptr<Capture> capture_of(const Stream& stream) {
    const std::lock_guard<std::mutex> g(g_mutex);
    auto it = g_by_stream.find(stream.state().get());
    return it == g_by_stream.end() ? nullptr : it->second;
}

bool capturing(const StreamState* state) {
    const std::lock_guard<std::mutex> g(g_mutex);
    return g_by_stream.count(state) != 0;
}

void begin(Stream& stream) {
    constexpr const char* what = "begin_capture";
    if (t_capture != nullptr)
        misuse(what, "this thread is capturing on a stream already; end_capture() it first "
                     "(captures do not nest)");
    auto cap = std::make_shared<Capture>(stream);
    {
        const std::lock_guard<std::mutex> g(g_mutex);
        if (g_by_stream.count(stream.state().get()) != 0)
            misuse(what, "the stream is capturing already (captures do not nest)");
        g_by_stream[stream.state().get()] = cap;
    }
    t_capture = cap.get();
    g_open_captures.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<Capture> take(Stream& stream) {
    std::shared_ptr<Capture> cap;
    {
        const std::lock_guard<std::mutex> g(g_mutex);
        auto it = g_by_stream.find(stream.state().get());
        if (it == g_by_stream.end())
            misuse("end_capture", "the stream is not capturing; call begin_capture() first");
        cap = it->second;
    }
    if (cap->thread() != std::this_thread::get_id())
        misuse("end_capture", "the capture was begun on another thread; end it there");
    return cap;
}

bool note_created(const std::shared_ptr<Storage>& storage) {
    if (t_capture == nullptr)
        return false;
    t_capture->created(storage);
    return true;
}

void check_outside_use(const char* what, std::uint64_t storage_id, const Stream* stream) {
    const std::lock_guard<std::mutex> g(g_mutex);
    auto it = g_made.find(storage_id);
    if (it == g_made.end() || (stream != nullptr && it->second->stream() == *stream))
        return;
    if (stream == nullptr)
        misuse(what, storage_name(storage_id) +
                         " was made inside an open graph capture: it has no data until a "
                         "replay returns the graph's outputs; read the replay's outputs instead");
    misuse(what, storage_name(storage_id) +
                     " was made inside a graph capture open on another stream; ops of other "
                     "streams cannot use it before end_capture() (and then it holds no data: "
                     "use the replay's outputs)");
}

} // namespace rbln::detail::graph
