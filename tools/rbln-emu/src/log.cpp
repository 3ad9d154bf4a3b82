// SPDX-License-Identifier: GPL-2.0
#include "log.h"

#include <array>
#include <cstdio>
#include <unistd.h>

namespace rbln::emu {

std::optional<LogLevel> parse_log_level(std::string_view name) {
    if (name == "error")
        return LogLevel::error;
    if (name == "warn")
        return LogLevel::warn;
    if (name == "info")
        return LogLevel::info;
    if (name == "debug")
        return LogLevel::debug;
    return std::nullopt;
}

const char* log_level_name(LogLevel level) {
    switch (level) {
    case LogLevel::error:
        return "error";
    case LogLevel::warn:
        return "warn";
    case LogLevel::info:
        return "info";
    case LogLevel::debug:
        return "debug";
    }
    return "?";
}

Logger::Logger(LogLevel level, Sink sink) : level_(level), sink_(std::move(sink)) {}

void Logger::set_prefix(std::string_view serial) {
    prefix_ = "rbln-emu[";
    prefix_ += serial;
    prefix_ += "]: ";
}

void Logger::emit(LogLevel level, const char* body) {
    std::string line = prefix_;
    if (level == LogLevel::error)
        line += "error: ";
    else if (level == LogLevel::warn)
        line += "warning: ";
    line += body;
    if (sink_) {
        sink_(level, line);
        return;
    }
    line += '\n';
    // One write() per line so lines of several processes do not interleave.
    const ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
    (void)unused;
}

// Each level formats in place (va_start and vsnprintf in one frame).
#define RBLN_EMU_LOG_FN(name, lvl)                                                                 \
    void Logger::name(const char* fmt, ...) {                                                      \
        if (!enabled(lvl))                                                                         \
            return;                                                                                \
        std::array<char, 1024> body{};                                                             \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        const int n = std::vsnprintf(body.data(), body.size(), fmt, ap);                           \
        va_end(ap);                                                                                \
        if (n >= 0)                                                                                \
            emit(lvl, body.data());                                                                \
    }
RBLN_EMU_LOG_FN(error, LogLevel::error)
RBLN_EMU_LOG_FN(warn, LogLevel::warn)
RBLN_EMU_LOG_FN(info, LogLevel::info)
RBLN_EMU_LOG_FN(debug, LogLevel::debug)
#undef RBLN_EMU_LOG_FN

} // namespace rbln::emu
