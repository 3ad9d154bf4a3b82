// SPDX-License-Identifier: GPL-2.0
// rbln/devices.hpp - logical devices: which NPUs a process sees and how they
// are grouped, the current device of a thread, and fork detection.
//
// Variables (read through an EnvSource, so tests never touch the real
// environment):
//   RBLN_VISIBLE_DEVICES  comma-separated physical NPU ids (indices of the
//                         cards as discovery sorts them) the process may use,
//                         in that order; "" hides every NPU.  After it, NPU
//                         ids are indices into this visible list.
//   RBLN_DEVICES          deprecated alias of RBLN_VISIBLE_DEVICES, honoured
//                         with a one-time warning (ignored, with a warning, if
//                         RBLN_VISIBLE_DEVICES is set too).
//   RBLN_NPUS_PER_DEVICE  ATOM only: N consecutive visible NPUs form one
//                         logical device; N is 2, 4, 8, 16 or 32 and must
//                         divide the visible count.
//   RBLN_DEVICE_MAP       ATOM only, takes precedence over
//                         RBLN_NPUS_PER_DEVICE: the NPUs of each logical
//                         device, e.g. "[0,1],[2,3]"; every visible NPU in
//                         exactly one group, group sizes 2, 4, 8, 16 or 32.
// On Rebel100-class cards the four chiplets are the fixed RSD-4 group and a
// logical device is always one card: a grouping variable there is an error.
// An empty grouping variable counts as unset.
//
// Planning vs commit: queries (device_count(), physical_device_count(),
// is_available(), device()) plan the mapping from the current variables
// and claim nothing.  The first real use (an allocation, synchronize(), a
// collective or a submission: everything that calls commit()) fixes the
// mapping; the variables are not read again for the life of the process.
//
// fork(): a child forked after the parent committed cannot use a device
// (Errc::BadFork, "use the spawn start method"); a child forked before the
// commit plans and commits on its own.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rbln/discovery.hpp"
#include "rbln/error.hpp"

#include <sys/types.h>

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

/// Reads an environment variable: nullopt if unset.
using EnvSource = std::function<std::optional<std::string>(std::string_view name)>;

/// The process environment (getenv).
EnvSource process_environment();

/// Where a warning goes (default: one line on stderr, "librbln: warning: ...").
using WarningSink = std::function<void(const std::string& message)>;

/// Group sizes RBLN_NPUS_PER_DEVICE and RBLN_DEVICE_MAP accept.
inline constexpr std::array<unsigned, 5> kRsdGroupSizes = {2, 4, 8, 16, 32};

struct LogicalDevice {
    unsigned index = 0;                 ///< logical device id ("rbln:<index>")
    std::vector<unsigned> npus;         ///< NPU ids (indices into the visible list)
    std::vector<unsigned> physical_ids; ///< the same NPUs as indices of the discovered cards
    std::vector<std::string> nodes;     ///< their /dev/accel nodes, in the same order
    Family family = Family::Unknown;
};

/// How the logical devices came about.
enum class GroupingSource { None, NpusPerDevice, DeviceMap };

struct DeviceMapping {
    std::vector<unsigned> visible; ///< physical ids of the visible NPUs, in visible order
    std::vector<LogicalDevice> devices;
    std::vector<CardInfo> cards; ///< the discovered cards it was planned from
    GroupingSource grouping = GroupingSource::None;
    std::string visible_variable;      ///< the variable that chose `visible` ("" if none)
    std::vector<std::string> warnings; ///< e.g. the RBLN_DEVICES deprecation
};

/// Plans the mapping of @cards (as discover() returns them) under the
/// variables of @env.  Pure: reads nothing else.  Throws Errc::BadConfig
/// naming the variable and the problem.
DeviceMapping plan_device_mapping(std::span<const CardInfo> cards, const EnvSource& env);

/// "rbln:N" -> N, "rbln" -> nullopt (the current device), a bare "N" -> N;
/// anything else throws Errc::InvalidArgument.
std::optional<unsigned> parse_device_string(std::string_view text);
/// N -> "rbln:N".
std::string device_string(unsigned index);

struct RuntimeOptions {
    std::filesystem::path root = "/"; ///< sysfs root (tests: a fake tree)
    EnvSource env;                    ///< empty: process_environment()
    WarningSink warn;                 ///< empty: stderr
    DeviceOpener opener;              ///< how discovery opens nodes (empty: the real one)
};

/// The device state of a process: planning, the committed mapping, the
/// current device of each thread, fork detection.  Thread-safe.  Most code
/// uses Runtime::process(); tests make their own instances.
class Runtime {
public:
    explicit Runtime(RuntimeOptions options = {});
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
    Runtime(Runtime&&) = delete;
    Runtime& operator=(Runtime&&) = delete;
    ~Runtime();

    /// The process-wide instance (default options), owned by the
    /// process's device registry.
    static Runtime& process();

    /// The mapping: the committed one, or a fresh plan.  Throws the
    /// planning errors (Errc::BadConfig, discovery errors).
    DeviceMapping mapping() const;
    /// Logical devices; never throws: 0 when the driver is absent, no NPU
    /// is visible, or the configuration is malformed (warned once per
    /// distinct problem).
    unsigned device_count() const noexcept;
    /// Visible physical NPUs, regardless of grouping.  Throws like mapping().
    unsigned physical_device_count() const;
    /// device_count() > 0; never throws.
    bool is_available() const noexcept;
    /// Logical device @index; Errc::NoDevice if out of range.
    LogicalDevice device(unsigned index) const;

    /// Fixes the mapping (first real use); later calls return it.  Checks
    /// for a fork first.  Throws the planning errors and Errc::BadFork.
    const DeviceMapping& commit();
    bool committed() const noexcept;

    /// The calling thread's current device (0 until set).
    unsigned current_device() const noexcept;
    /// Bookkeeping only (plans, does not commit): Errc::NoDevice if out of range.
    void set_device(unsigned index);

    /// Throws Errc::BadFork if this process is a fork() child of the one
    /// that committed.  Every real use calls it (commit() does).
    void check_fork() const;

    /// Where this runtime reads RBLN_* variables (RuntimeOptions::env, else
    /// the process environment).
    EnvSource environment() const;

private:
    friend class DeviceGuard;
    void restore_device(unsigned index) noexcept;

    struct State;
    std::unique_ptr<State> s_;
};

/// Makes @index the current device of the thread for the scope and
/// restores the previous one at its end.
class DeviceGuard {
public:
    DeviceGuard(Runtime& runtime, unsigned index);
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;
    DeviceGuard(DeviceGuard&&) = delete;
    DeviceGuard& operator=(DeviceGuard&&) = delete;
    ~DeviceGuard();

    unsigned previous() const noexcept { return previous_; }

private:
    Runtime& runtime_;
    unsigned previous_;
};

} // namespace rbln

#pragma GCC visibility pop
