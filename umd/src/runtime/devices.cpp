// SPDX-License-Identifier: GPL-2.0
// devices.cpp - logical-device planning (RBLN_VISIBLE_DEVICES,
// RBLN_NPUS_PER_DEVICE, RBLN_DEVICE_MAP), commit, current device per
// thread, fork detection.

#include "rbln/devices.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <pthread.h>
#include <set>
#include <unistd.h>
#include <unordered_map>

#include "runtime/fork_state.hpp"
#include "runtime/process_context.hpp"

namespace rbln {

namespace {

constexpr std::string_view kVisible = "RBLN_VISIBLE_DEVICES";
constexpr std::string_view kDeprecatedVisible = "RBLN_DEVICES";
constexpr std::string_view kNpusPerDevice = "RBLN_NPUS_PER_DEVICE";
constexpr std::string_view kDeviceMap = "RBLN_DEVICE_MAP";

Error config_error(std::string_view variable, const std::string& value, const std::string& what) {
    return Error(Errc::BadConfig, std::string(variable), "", 0, what + " (value '" + value + "')");
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0)
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0)
        s.remove_suffix(1);
    return s;
}

bool is_blank(const std::optional<std::string>& v) {
    return !v || trim(*v).empty();
}

// A decimal NPU id or group size; nullopt if @token is not one.
std::optional<unsigned> parse_decimal(std::string_view token) {
    if (token.empty() || token.size() > 6)
        return std::nullopt;
    unsigned n = 0;
    for (char c : token) {
        if (c < '0' || c > '9')
            return std::nullopt;
        n = n * 10 + static_cast<unsigned>(c - '0');
    }
    return n;
}

std::string join(const std::vector<unsigned>& ids) {
    std::string out;
    for (unsigned id : ids) {
        if (!out.empty())
            out += ", ";
        out += std::to_string(id);
    }
    return out;
}

std::string id_range(std::size_t count) {
    if (count == 0)
        return "none";
    return "ids 0.." + std::to_string(count - 1);
}

bool allowed_group_size(std::size_t n) {
    return std::find(kRsdGroupSizes.begin(), kRsdGroupSizes.end(), n) != kRsdGroupSizes.end();
}

const char* kAllowedSizes = "2, 4, 8, 16 or 32";

// "0,2,3" -> ids, each below @limit, no duplicates.
std::vector<unsigned> parse_id_list(std::string_view variable, const std::string& value,
                                    std::string_view list, std::size_t limit,
                                    const std::string& limit_what) {
    std::vector<unsigned> ids;
    std::size_t pos = 0;
    unsigned entry = 0;
    while (true) {
        const std::size_t comma = list.find(',', pos);
        const std::string_view token = trim(list.substr(
            pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
        if (token.empty())
            throw config_error(variable, value,
                               "entry " + std::to_string(entry) + " is empty; expected an NPU id");
        const auto id = parse_decimal(token);
        if (!id)
            throw config_error(variable, value,
                               "'" + std::string(token) +
                                   "' is not an NPU id (a decimal number such as 0)");
        if (*id >= limit)
            throw config_error(variable, value,
                               "NPU " + std::to_string(*id) + " does not exist: " + limit_what +
                                   " (" + id_range(limit) + ")");
        if (std::find(ids.begin(), ids.end(), *id) != ids.end())
            throw config_error(variable, value, "NPU " + std::to_string(*id) + " is listed twice");
        ids.push_back(*id);
        if (comma == std::string_view::npos)
            break;
        pos = comma + 1;
        entry++;
    }
    return ids;
}

// "[0,1],[2,3]" -> groups of visible-list ids.
std::vector<std::vector<unsigned>> parse_device_map(const std::string& value, std::size_t visible) {
    std::vector<std::vector<unsigned>> groups;
    std::map<unsigned, std::size_t> group_of;
    const std::string_view text = trim(value);
    std::size_t pos = 0;
    auto skip_space = [&] {
        while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos])) != 0)
            pos++;
    };
    while (true) {
        skip_space();
        if (pos >= text.size() || text[pos] != '[')
            throw config_error(kDeviceMap, value,
                               "expected '[' at offset " + std::to_string(pos) +
                                   ": write each logical device as a bracketed group of NPU "
                                   "ids, e.g. [0,1],[2,3]");
        const std::size_t close = text.find(']', pos);
        if (close == std::string_view::npos)
            throw config_error(kDeviceMap, value,
                               "group " + std::to_string(groups.size()) + " has no closing ']'");
        const std::string_view inner = text.substr(pos + 1, close - pos - 1);
        const std::string g = std::to_string(groups.size());
        if (trim(inner).empty())
            throw config_error(kDeviceMap, value, "group " + g + " is empty");
        std::vector<unsigned> ids;
        try {
            ids = parse_id_list(kDeviceMap, value, inner, visible,
                                std::to_string(visible) + " NPUs are visible");
        } catch (const Error& e) {
            // Say which group the problem is in.
            throw Error(Errc::BadConfig, e.operation(), "", 0, "group " + g + ": " + e.detail());
        }
        for (unsigned id : ids) {
            if (auto it = group_of.find(id); it != group_of.end())
                throw config_error(kDeviceMap, value,
                                   "NPU " + std::to_string(id) + " is in group " +
                                       std::to_string(it->second) + " and in group " + g);
            group_of[id] = groups.size();
        }
        if (!allowed_group_size(ids.size()))
            throw config_error(kDeviceMap, value,
                               "group " + g + " has " + std::to_string(ids.size()) +
                                   (ids.size() == 1 ? " NPU" : " NPUs") +
                                   "; a logical device has " + kAllowedSizes + " NPUs");
        groups.push_back(std::move(ids));
        pos = close + 1;
        skip_space();
        if (pos >= text.size())
            break;
        if (text[pos] != ',')
            throw config_error(kDeviceMap, value,
                               "expected ',' between groups at offset " + std::to_string(pos));
        pos++;
    }
    std::vector<unsigned> leftover;
    for (unsigned id = 0; id < visible; id++)
        if (group_of.find(id) == group_of.end())
            leftover.push_back(id);
    if (!leftover.empty())
        throw config_error(kDeviceMap, value,
                           std::string(leftover.size() == 1 ? "NPU " : "NPUs ") + join(leftover) +
                               (leftover.size() == 1 ? " is" : " are") +
                               " visible but in no group: add them to a group or hide them "
                               "with RBLN_VISIBLE_DEVICES");
    return groups;
}

} // namespace

EnvSource process_environment() {
    return [](std::string_view name) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(name).c_str()); // NOLINT(concurrency-mt-unsafe)
        if (v == nullptr)
            return std::nullopt;
        return std::string(v);
    };
}

DeviceMapping plan_device_mapping(std::span<const CardInfo> cards, const EnvSource& env) {
    DeviceMapping m;
    m.cards.assign(cards.begin(), cards.end());
    const EnvSource& getenv = env;

    // Visibility.
    std::optional<std::string> visible = getenv(kVisible);
    std::string_view visible_var = kVisible;
    if (auto old = getenv(kDeprecatedVisible)) {
        if (visible) {
            m.warnings.push_back(std::string(kDeprecatedVisible) + " is ignored: " +
                                 std::string(kVisible) + " is set and takes precedence");
        } else {
            m.warnings.push_back(std::string(kDeprecatedVisible) + " is deprecated: use " +
                                 std::string(kVisible) + " (same meaning)");
            visible = old;
            visible_var = kDeprecatedVisible;
        }
    }
    if (visible) {
        m.visible_variable = visible_var;
        if (!trim(*visible).empty())
            m.visible = parse_id_list(visible_var, *visible, *visible, cards.size(),
                                      "the machine has " + std::to_string(cards.size()) +
                                          (cards.size() == 1 ? " NPU" : " NPUs"));
    } else {
        for (unsigned i = 0; i < cards.size(); i++)
            m.visible.push_back(i);
    }

    // Grouping.
    const std::optional<std::string> per = getenv(kNpusPerDevice);
    const std::optional<std::string> map = getenv(kDeviceMap);
    const bool use_map = !is_blank(map);
    const bool use_per = !use_map && !is_blank(per);
    if (use_map && !is_blank(per))
        m.warnings.push_back(std::string(kNpusPerDevice) + " is ignored: " +
                             std::string(kDeviceMap) + " is set and takes precedence");

    std::vector<std::vector<unsigned>> groups;
    if (use_map || use_per) {
        const std::string_view var = use_map ? kDeviceMap : kNpusPerDevice;
        const std::string& value = use_map ? *map : *per;
        for (std::size_t v = 0; v < m.visible.size(); v++) {
            const CardInfo& card = cards[m.visible[v]];
            if (card.family == Family::Atom)
                continue;
            const std::string npu = "NPU " + std::to_string(v);
            if (card.family == Family::Rebel100)
                throw config_error(var, value,
                                   npu +
                                       " is a Rebel100-class card: its four chiplets already form "
                                       "the fixed RSD-4 group and a logical device is always one "
                                       "card; grouping is for ATOM-class NPUs only, unset " +
                                       std::string(var));
            throw config_error(var, value,
                               npu + " is of an unknown family ('" + card.family_name +
                                   "'); grouping is for ATOM-class NPUs only, unset " +
                                   std::string(var));
        }
        if (use_map) {
            groups = parse_device_map(value, m.visible.size());
            m.grouping = GroupingSource::DeviceMap;
        } else {
            const auto n = parse_decimal(trim(value));
            if (!n)
                throw config_error(
                    var, value,
                    "expected a group size (a decimal number: " + std::string(kAllowedSizes) + ")");
            if (!allowed_group_size(*n))
                throw config_error(var, value,
                                   "group size " + std::to_string(*n) + " is not allowed: use " +
                                       kAllowedSizes +
                                       " (unset the variable for one NPU per device)");
            const std::size_t left = m.visible.size() % *n;
            if (left != 0) {
                std::vector<unsigned> rest;
                for (std::size_t v = m.visible.size() - left; v < m.visible.size(); v++)
                    rest.push_back(static_cast<unsigned>(v));
                throw config_error(var, value,
                                   std::to_string(m.visible.size()) +
                                       " visible NPUs do not divide into groups of " +
                                       std::to_string(*n) + ": NPUs " + join(rest) +
                                       " are left over; make the visible count a multiple of " +
                                       std::to_string(*n) + " or name the groups in " +
                                       std::string(kDeviceMap));
            }
            for (std::size_t v = 0; v < m.visible.size(); v += *n) {
                std::vector<unsigned> g;
                for (std::size_t k = 0; k < *n; k++)
                    g.push_back(static_cast<unsigned>(v + k));
                groups.push_back(std::move(g));
            }
            m.grouping = GroupingSource::NpusPerDevice;
        }
    } else {
        for (unsigned v = 0; v < m.visible.size(); v++)
            groups.push_back({v});
    }

    for (unsigned i = 0; i < groups.size(); i++) {
        LogicalDevice d;
        d.index = i;
        d.npus = groups[i];
        for (unsigned v : d.npus) {
            d.physical_ids.push_back(m.visible[v]);
            d.nodes.push_back(cards[m.visible[v]].accel_node);
        }
        d.family = cards[d.physical_ids.front()].family;
        m.devices.push_back(std::move(d));
    }
    return m;
}

std::optional<unsigned> parse_device_string(std::string_view text) {
    const std::string_view t = trim(text);
    auto bad = [&] {
        return Error(Errc::InvalidArgument, "parse device", "", 0,
                     "'" + std::string(text) +
                         "' is not an rbln device: expected 'rbln', 'rbln:N' or N");
    };
    if (t == "rbln")
        return std::nullopt;
    std::string_view digits = t;
    if (t.starts_with("rbln:"))
        digits = t.substr(5);
    const auto n = parse_decimal(digits);
    if (!n)
        throw bad();
    return n;
}

std::string device_string(unsigned index) {
    return "rbln:" + std::to_string(index);
}

// ---- fork detection --------------------------------------------------------

namespace {

// Incremented in every fork() child (pthread_atfork): a commit made under
// another generation belongs to an ancestor process.
std::atomic<std::uint64_t> g_fork_generation{0};
std::once_flag g_atfork_once;

void on_fork_child() {
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<std::uint64_t> g_runtime_ids{0};

// The current device of this thread in each Runtime (by its id, never
// reused, so a new Runtime at an old address starts at 0).
thread_local std::unordered_map<std::uint64_t, unsigned> t_current;

} // namespace

struct Runtime::State {
    RuntimeOptions options;
    std::uint64_t id = ++g_runtime_ids;
    mutable std::mutex mutex;
    mutable std::set<std::string> warned; // guarded by mutex
    DeviceMapping committed_mapping;      // written once, before `committed`
    detail::ForkStamp owner;              // written once, before `committed`
    std::atomic<bool> committed{false};

    void warn_once(const std::string& message) const { // mutex held
        if (!warned.insert(message).second)
            return;
        if (options.warn)
            options.warn(message);
        else
            std::fprintf(stderr, "librbln: warning: %s\n", message.c_str());
    }

    DeviceMapping plan() const { // mutex held
        DiscoveryOptions d;
        d.root = options.root;
        d.opener = options.opener;
        d.telemetry_fallback = false;
        const Discovery found = discover(d);
        DeviceMapping m =
            plan_device_mapping(found.cards, options.env ? options.env : process_environment());
        for (const auto& w : m.warnings)
            warn_once(w);
        return m;
    }
};

Runtime::Runtime(RuntimeOptions options) : s_(std::make_unique<State>()) {
    s_->options = std::move(options);
}

Runtime::~Runtime() {
    t_current.erase(s_->id);
}

Runtime& Runtime::process() {
    return detail::ProcessContexts::get().runtime();
}

EnvSource Runtime::environment() const {
    return s_->options.env ? s_->options.env : process_environment();
}

namespace detail {

std::uint64_t fork_generation() noexcept {
    return g_fork_generation.load(std::memory_order_relaxed);
}

Error bad_fork_error(pid_t parent) {
    return Error(Errc::BadFork, "use device", "", 0,
                 "this process is a fork() child of process " + std::to_string(parent) +
                     ", which had already used an rbln device; a forked child cannot use it. "
                     "Start worker processes with the spawn start method (e.g. "
                     "multiprocessing.set_start_method('spawn')), or fork before the first "
                     "device use");
}

} // namespace detail

// The strict check (fork_state.hpp): the generation and the pid.
void Runtime::check_fork() const {
    if (s_->committed.load(std::memory_order_acquire))
        s_->owner.check_strict();
}

DeviceMapping Runtime::mapping() const {
    check_fork();
    if (s_->committed.load(std::memory_order_acquire))
        return s_->committed_mapping;
    const std::lock_guard<std::mutex> lock(s_->mutex);
    if (s_->committed.load(std::memory_order_acquire))
        return s_->committed_mapping;
    return s_->plan();
}

unsigned Runtime::device_count() const noexcept {
    try {
        return static_cast<unsigned>(mapping().devices.size());
    } catch (const Error& e) {
        if (e.code() == Errc::BadConfig || e.code() == Errc::BadFork) {
            try {
                const std::lock_guard<std::mutex> lock(s_->mutex);
                s_->warn_once(std::string(e.what()) + "; no rbln device is usable");
            } catch (...) { // NOLINT(bugprone-empty-catch): a warning that cannot be printed
            }
        }
        return 0;
    } catch (...) {
        return 0;
    }
}

bool Runtime::is_available() const noexcept {
    return device_count() > 0;
}

unsigned Runtime::physical_device_count() const {
    return static_cast<unsigned>(mapping().visible.size());
}

LogicalDevice Runtime::device(unsigned index) const {
    const DeviceMapping m = mapping();
    if (index >= m.devices.size())
        throw Error(Errc::NoDevice, "device", device_string(index), 0,
                    "no such logical device: " + std::to_string(m.devices.size()) +
                        " are available (" + id_range(m.devices.size()) + ")");
    return m.devices[index];
}

const DeviceMapping& Runtime::commit() {
    check_fork();
    if (s_->committed.load(std::memory_order_acquire))
        return s_->committed_mapping;
    const std::lock_guard<std::mutex> lock(s_->mutex);
    if (!s_->committed.load(std::memory_order_acquire)) {
        std::call_once(g_atfork_once, [] {
            if (pthread_atfork(nullptr, nullptr, &on_fork_child) != 0)
                throw Error(Errc::Internal, "pthread_atfork", "", 0,
                            "cannot register the fork handler");
        });
        s_->committed_mapping = s_->plan();
        s_->owner = detail::ForkStamp::now();
        s_->committed.store(true, std::memory_order_release);
    }
    return s_->committed_mapping;
}

bool Runtime::committed() const noexcept {
    return s_->committed.load(std::memory_order_acquire);
}

unsigned Runtime::current_device() const noexcept {
    const auto it = t_current.find(s_->id);
    return it == t_current.end() ? 0 : it->second;
}

void Runtime::set_device(unsigned index) {
    (void)device(index); // validates against the plan (or the commit)
    t_current[s_->id] = index;
}

void Runtime::restore_device(unsigned index) noexcept {
    try {
        t_current[s_->id] = index;
    } catch (...) { // NOLINT(bugprone-empty-catch): the entry exists: set_device made it
    }
}

DeviceGuard::DeviceGuard(Runtime& runtime, unsigned index)
    : runtime_(runtime), previous_(runtime.current_device()) {
    runtime_.set_device(index);
}

DeviceGuard::~DeviceGuard() {
    runtime_.restore_device(previous_);
}

} // namespace rbln
