// SPDX-License-Identifier: GPL-2.0
// sysfs.hpp - (internal) every sysfs and /dev access of librbln goes through
// a root path, so discovery can run against a fake tree (tests, `rbln-smi --root`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rbln/diagnostics.hpp"
#include "rbln/error.hpp"

#include <sys/types.h>

namespace rbln {

/// stat() (following symlinks, so /proc/<pid>/fd/<n> gives the open file).
Result<std::optional<dev_t>> stat_char_device(const std::filesystem::path& resolved);

class Sysfs {
public:
    /// @root: the directory that plays "/" (default: the real root).
    /// @probe: how char_device() looks at a path (empty: stat_char_device).
    explicit Sysfs(std::filesystem::path root = "/", CharDeviceProbe probe = {});

    const std::filesystem::path& root() const noexcept { return root_; }

    /// Maps an absolute path of the system ("/sys/class/accel") into the root.
    std::filesystem::path resolve(std::string_view abs_path) const;

    /// True if the path exists (symlinks followed).
    bool exists(std::string_view abs_path) const;

    /// Reads a text attribute without its trailing newline.  Errors are
    /// returned, not thrown (NotFound if absent).
    Result<std::string> try_read(std::string_view abs_path) const;
    /// As try_read, but throws.
    std::string read(std::string_view abs_path) const;
    /// nullopt if the file is absent; other failures throw.
    std::optional<std::string> read_optional(std::string_view abs_path) const;

    /// Numeric attributes (decimal; the whole value must be a number, else
    /// Errc::BadValue naming the file).  *_optional: nullopt if absent.
    std::uint64_t read_u64(std::string_view abs_path) const;
    std::int64_t read_i64(std::string_view abs_path) const;
    std::optional<std::uint64_t> read_u64_optional(std::string_view abs_path) const;
    std::optional<std::int64_t> read_i64_optional(std::string_view abs_path) const;

    /// Names in a directory that start with @prefix, sorted; empty if the
    /// directory is absent.
    std::vector<std::string> list(std::string_view abs_dir, std::string_view prefix = {}) const;

    /// Basename of the target of a symlink (e.g. device/driver -> "rbln");
    /// nullopt if the link is absent.
    std::optional<std::string> link_basename(std::string_view abs_path) const;

    /// The device number of the character device at @abs_path (see
    /// CharDeviceProbe); errors are returned, not thrown.
    Result<std::optional<dev_t>> char_device(std::string_view abs_path) const;

    /// Names in a directory (unsorted), or the error of opening it.
    Result<std::vector<std::string>> try_list(std::string_view abs_dir) const;

    /// Basename of the fully resolved path (e.g. accel0/device -> "0000:00:04.0").
    std::string resolved_basename(std::string_view abs_path) const;

    /// Parses a decimal number; @what names the source in the error.
    static std::uint64_t parse_u64(std::string_view text, const std::string& what);
    static std::int64_t parse_i64(std::string_view text, const std::string& what);

private:
    std::filesystem::path root_;
    CharDeviceProbe probe_;
};

struct ClientScan; // rbln/fdinfo.hpp

/// Scans /proc below @sys's root for clients of @driver (fdinfo.cpp; the
/// public face is scan_clients(const SystemView&), rbln/diagnostics.hpp).
/// A process or fd that vanishes during the scan is skipped; an absent
/// /proc gives an empty scan.  Throws only if /proc exists and cannot be
/// listed.
ClientScan scan_clients(const Sysfs& sys, std::string_view driver = "rbln");

} // namespace rbln
