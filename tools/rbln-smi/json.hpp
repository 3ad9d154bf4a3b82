// SPDX-License-Identifier: GPL-2.0
// json.hpp - a small JSON writer for rbln-smi: correct string escaping,
// numbers as numbers, pretty-printed with two-space indentation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rbln::smi {

/// @text as a JSON string literal (with the quotes).  Control characters are
/// escaped, valid UTF-8 passes through, and every byte that is not part of a
/// valid UTF-8 sequence becomes U+FFFD, so the output is always valid JSON.
std::string json_quote(std::string_view text);

class JsonWriter {
public:
    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    /// The key of the next member (only inside an object).
    void key(std::string_view name);

    void value(std::string_view text);
    void value(const char* text) { value(std::string_view(text)); }
    void value(const std::string& text) { value(std::string_view(text)); }
    void value(std::int64_t number);
    void value(std::uint64_t number);
    void value(int number) { value(static_cast<std::int64_t>(number)); }
    void value(unsigned number) { value(static_cast<std::uint64_t>(number)); }
    void value(bool flag);
    void null();

    /// A member of an object: key() and value() in one.
    template <typename T> void member(std::string_view name, const T& v) {
        key(name);
        value(v);
    }
    /// The same; an empty optional is null.
    template <typename T> void member(std::string_view name, const std::optional<T>& v) {
        key(name);
        if (v)
            value(*v);
        else
            null();
    }

    /// The document; throws std::logic_error if an object or array is open.
    std::string finish() const;

private:
    struct Level {
        bool is_object;
        bool empty = true;
        bool has_key = false;
    };
    void before_value();
    void newline();

    std::string out_;
    std::vector<Level> stack_;
    bool done_ = false;
};

} // namespace rbln::smi
