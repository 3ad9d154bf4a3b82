// SPDX-License-Identifier: GPL-2.0
// json.cpp - JSON writer of rbln-smi.

#include "json.hpp"

#include <array>
#include <stdexcept>

namespace rbln::smi {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not valid
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    std::size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (i + len > s.size())
        return 0;
    if (b(i + 1) < lo || b(i + 1) > hi)
        return 0;
    for (std::size_t k = 2; k < len; k++)
        if (b(i + k) < 0x80 || b(i + k) > 0xbf)
            return 0;
    return len;
}

} // namespace

std::string json_quote(std::string_view text) {
    static constexpr std::array<char, 17> hex{"0123456789abcdef"};
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80) {
            const std::size_t len = utf8_sequence(text, i);
            if (len == 0) {
                out += "\\ufffd";
                i++;
            } else {
                out.append(text.substr(i, len));
                i += len;
            }
            continue;
        }
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 0xf];
            } else {
                out += static_cast<char>(c);
            }
        }
        i++;
    }
    out += '"';
    return out;
}

void JsonWriter::newline() {
    out_ += '\n';
    out_.append(2 * stack_.size(), ' ');
}

void JsonWriter::before_value() {
    if (done_)
        throw std::logic_error("JsonWriter: a value after the end of the document");
    if (stack_.empty())
        return;
    Level& top = stack_.back();
    if (top.is_object) {
        if (!top.has_key)
            throw std::logic_error("JsonWriter: an object member without a key");
        top.has_key = false;
        return;
    }
    if (!top.empty)
        out_ += ',';
    top.empty = false;
    newline();
}

void JsonWriter::key(std::string_view name) {
    if (stack_.empty() || !stack_.back().is_object || stack_.back().has_key)
        throw std::logic_error("JsonWriter: a key outside an object or twice");
    Level& top = stack_.back();
    if (!top.empty)
        out_ += ',';
    top.empty = false;
    top.has_key = true;
    newline();
    out_ += json_quote(name);
    out_ += ": ";
}

void JsonWriter::begin_object() {
    before_value();
    out_ += '{';
    stack_.push_back(Level{true});
}

void JsonWriter::begin_array() {
    before_value();
    out_ += '[';
    stack_.push_back(Level{false});
}

void JsonWriter::end_object() {
    if (stack_.empty() || !stack_.back().is_object || stack_.back().has_key)
        throw std::logic_error("JsonWriter: end_object without a matching begin_object");
    const bool empty = stack_.back().empty;
    stack_.pop_back();
    if (!empty)
        newline();
    out_ += '}';
    if (stack_.empty())
        done_ = true;
}

void JsonWriter::end_array() {
    if (stack_.empty() || stack_.back().is_object)
        throw std::logic_error("JsonWriter: end_array without a matching begin_array");
    const bool empty = stack_.back().empty;
    stack_.pop_back();
    if (!empty)
        newline();
    out_ += ']';
    if (stack_.empty())
        done_ = true;
}

void JsonWriter::value(std::string_view text) {
    before_value();
    out_ += json_quote(text);
    if (stack_.empty())
        done_ = true;
}

void JsonWriter::value(std::int64_t number) {
    before_value();
    out_ += std::to_string(number);
    if (stack_.empty())
        done_ = true;
}

void JsonWriter::value(std::uint64_t number) {
    before_value();
    out_ += std::to_string(number);
    if (stack_.empty())
        done_ = true;
}

void JsonWriter::value(bool flag) {
    before_value();
    out_ += flag ? "true" : "false";
    if (stack_.empty())
        done_ = true;
}

void JsonWriter::null() {
    before_value();
    out_ += "null";
    if (stack_.empty())
        done_ = true;
}

std::string JsonWriter::finish() const {
    if (!stack_.empty() || !done_)
        throw std::logic_error("JsonWriter: the document is incomplete");
    return out_ + '\n';
}

} // namespace rbln::smi
