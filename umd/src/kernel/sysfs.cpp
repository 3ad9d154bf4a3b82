// SPDX-License-Identifier: GPL-2.0
// sysfs.cpp - reading sysfs attributes below a (possibly fake) root.

#include "kernel/sysfs.hpp"

#include "kernel/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace rbln {

namespace fs = std::filesystem;

namespace {

// sysfs attributes are at most one page; anything longer is not an attribute.
constexpr std::size_t kMaxAttribute = 64 * 1024;

std::string quote_for_message(std::string_view text) {
    std::string out = "'";
    for (char c : text.substr(0, 64)) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) {
            static constexpr std::array<char, 17> hex{"0123456789abcdef"};
            out += "\\x";
            out += hex[u >> 4];
            out += hex[u & 0xf];
        } else {
            out += c;
        }
    }
    if (text.size() > 64)
        out += "...";
    out += "'";
    return out;
}

template <typename T>
T parse_number(std::string_view text, const std::string& what, const char* kind) {
    T value{};
    const char* first = text.data();
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(first, last, value, 10);
    if (text.empty() || ec != std::errc() || ptr != last) {
        std::string why = ec == std::errc::result_out_of_range ? "out of range for " : "expected ";
        throw Error(Errc::BadValue, "parse", what, 0,
                    why + kind + ", got " + quote_for_message(text));
    }
    return value;
}

} // namespace

Result<std::optional<dev_t>> stat_char_device(const fs::path& resolved) {
    struct stat st {};
    if (::stat(resolved.c_str(), &st) != 0)
        return Error::from_errno("stat", resolved.string(), errno);
    if (!S_ISCHR(st.st_mode))
        return std::optional<dev_t>{};
    return std::optional<dev_t>{st.st_rdev};
}

Sysfs::Sysfs(fs::path root, CharDeviceProbe probe)
    : root_(std::move(root)), probe_(std::move(probe)) {
    if (root_.empty())
        root_ = "/";
}

Result<std::optional<dev_t>> Sysfs::char_device(std::string_view abs_path) const {
    const fs::path p = resolve(abs_path);
    return probe_ ? probe_(p) : stat_char_device(p);
}

Result<std::vector<std::string>> Sysfs::try_list(std::string_view abs_dir) const {
    const fs::path p = resolve(abs_dir);
    const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(p.c_str()), ::closedir);
    if (!dir)
        return Error::from_errno("list", p.string(), errno);
    std::vector<std::string> names;
    for (;;) {
        errno = 0;
        const dirent* entry = ::readdir(dir.get());
        if (entry == nullptr) {
            if (errno != 0)
                return Error::from_errno("list", p.string(), errno);
            break;
        }
        const std::string_view name = entry->d_name;
        if (name != "." && name != "..")
            names.emplace_back(name);
    }
    return names;
}

fs::path Sysfs::resolve(std::string_view abs_path) const {
    while (!abs_path.empty() && abs_path.front() == '/')
        abs_path.remove_prefix(1);
    return root_ / fs::path(abs_path);
}

bool Sysfs::exists(std::string_view abs_path) const {
    std::error_code ec;
    return fs::exists(resolve(abs_path), ec);
}

Result<std::string> Sysfs::try_read(std::string_view abs_path) const {
    const fs::path p = resolve(abs_path);
    detail::UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        return Error::from_errno("read", p.string(), errno);
    std::string data;
    std::array<char, 4096> buf{};
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return Error::from_errno("read", p.string(), errno);
        }
        if (n == 0)
            break;
        data.append(buf.data(), static_cast<std::size_t>(n));
        if (data.size() > kMaxAttribute)
            return Error(Errc::BadValue, "read", p.string(), 0,
                         "longer than " + std::to_string(kMaxAttribute) +
                             " bytes: not a sysfs attribute");
    }
    while (!data.empty() && (data.back() == '\n' || data.back() == '\r'))
        data.pop_back();
    return data;
}

std::string Sysfs::read(std::string_view abs_path) const {
    return try_read(abs_path).value();
}

std::optional<std::string> Sysfs::read_optional(std::string_view abs_path) const {
    auto r = try_read(abs_path);
    if (r.ok())
        return std::move(r).value();
    if (r.error().code() == Errc::NotFound)
        return std::nullopt;
    throw r.error();
}

std::uint64_t Sysfs::read_u64(std::string_view abs_path) const {
    return parse_u64(read(abs_path), resolve(abs_path).string());
}

std::int64_t Sysfs::read_i64(std::string_view abs_path) const {
    return parse_i64(read(abs_path), resolve(abs_path).string());
}

std::optional<std::uint64_t> Sysfs::read_u64_optional(std::string_view abs_path) const {
    auto text = read_optional(abs_path);
    if (!text)
        return std::nullopt;
    return parse_u64(*text, resolve(abs_path).string());
}

std::optional<std::int64_t> Sysfs::read_i64_optional(std::string_view abs_path) const {
    auto text = read_optional(abs_path);
    if (!text)
        return std::nullopt;
    return parse_i64(*text, resolve(abs_path).string());
}

std::vector<std::string> Sysfs::list(std::string_view abs_dir, std::string_view prefix) const {
    std::vector<std::string> names;
    std::error_code ec;
    fs::directory_iterator it(resolve(abs_dir), ec);
    if (ec) {
        if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory)
            return names;
        throw Error::from_errno("list", resolve(abs_dir).string(), ec.value());
    }
    for (const auto& entry : it) {
        std::string name = entry.path().filename().string();
        if (name.starts_with(prefix))
            names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::optional<std::string> Sysfs::link_basename(std::string_view abs_path) const {
    const fs::path p = resolve(abs_path);
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) {
        if (ec == std::errc::no_such_file_or_directory)
            return std::nullopt;
        throw Error::from_errno("readlink", p.string(), ec.value());
    }
    return target.filename().string();
}

std::string Sysfs::resolved_basename(std::string_view abs_path) const {
    const fs::path p = resolve(abs_path);
    std::error_code ec;
    const fs::path real = fs::canonical(p, ec);
    if (ec)
        throw Error::from_errno("resolve", p.string(), ec.value());
    return real.filename().string();
}

std::uint64_t Sysfs::parse_u64(std::string_view text, const std::string& what) {
    return parse_number<std::uint64_t>(text, what, "an unsigned decimal integer");
}

std::int64_t Sysfs::parse_i64(std::string_view text, const std::string& what) {
    return parse_number<std::int64_t>(text, what, "a decimal integer");
}

} // namespace rbln
