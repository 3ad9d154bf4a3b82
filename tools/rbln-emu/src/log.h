// SPDX-License-Identifier: GPL-2.0
// One-line-per-event logging to stderr, prefixed "rbln-emu[<serial>]: ".
#pragma once

#include <cstdarg>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace rbln::emu {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

std::optional<LogLevel> parse_log_level(std::string_view name);
const char* log_level_name(LogLevel level);

class Logger {
public:
    // A sink receives one finished line (prefix included, no newline).
    using Sink = std::function<void(LogLevel, std::string_view)>;

    explicit Logger(LogLevel level = LogLevel::info, Sink sink = {});

    void set_prefix(std::string_view serial);
    void set_level(LogLevel level) { level_ = level; }
    [[nodiscard]] LogLevel level() const { return level_; }
    [[nodiscard]] bool enabled(LogLevel level) const { return level <= level_; }

    void error(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
    void warn(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
    void info(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
    void debug(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

private:
    void emit(LogLevel level, const char* body);

    LogLevel level_;
    Sink sink_;
    std::string prefix_ = "rbln-emu: ";
};

} // namespace rbln::emu
