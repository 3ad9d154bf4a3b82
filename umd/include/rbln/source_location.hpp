// SPDX-License-Identifier: GPL-2.0
// rbln/source_location.hpp - rbln::source_location: std::source_location
// where the compiler provides it (GCC; Clang from 16 with libstdc++), else
// a stand-in with the same current() / file_name() / line() /
// function_name() over the __builtin_FILE family, which every supported
// compiler has.  Used as a default argument, current() names the caller.
#pragma once

#include <cstdint>
#include <version>

#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#pragma GCC visibility push(default) // exported (rbln/export.h)

namespace rbln {

#if defined(__cpp_lib_source_location)
using source_location = std::source_location;
#else
class source_location {
public:
    static constexpr source_location current(const char* file = __builtin_FILE(),
                                             std::uint_least32_t line = __builtin_LINE(),
                                             const char* function = __builtin_FUNCTION()) noexcept {
        source_location s;
        s.file_ = file;
        s.line_ = line;
        s.function_ = function;
        return s;
    }
    constexpr source_location() noexcept = default;
    constexpr const char* file_name() const noexcept { return file_; }
    constexpr std::uint_least32_t line() const noexcept { return line_; }
    constexpr std::uint_least32_t column() const noexcept { return 0; }
    constexpr const char* function_name() const noexcept { return function_; }

private:
    const char* file_ = "";
    std::uint_least32_t line_ = 0;
    const char* function_ = "";
};
#endif

} // namespace rbln

#pragma GCC visibility pop
