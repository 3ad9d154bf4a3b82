// SPDX-License-Identifier: GPL-2.0
// alloc_config.cpp - RBLN_ALLOC_CONF (PyTorch's PYTORCH_CUDA_ALLOC_CONF
// syntax for the options librbln has) and the request rounding it drives.

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "rbln/allocator.hpp"

namespace rbln {

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

class Parser {
public:
    Parser(std::string_view text, std::string_view variable) : text_(text), variable_(variable) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(Errc::BadConfig, std::string(variable_), "", 0,
                    what + " (value '" + std::string(text_) +
                        "'; options: max_split_size_mb:<MiB "
                        "> 20>, roundup_power2_divisions:<N> or [<MiB>:<N>,...,>:<N>], "
                        "garbage_collection_threshold:<0..1 exclusive>)");
    }

    std::uint64_t unsigned_value(std::string_view option, std::string_view v) const {
        v = trim(v);
        std::uint64_t out = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
        if (v.empty() || ec != std::errc() || end != v.data() + v.size())
            fail(std::string(option) + ": '" + std::string(v) + "' is not a non-negative integer");
        return out;
    }

    double fraction_value(std::string_view option, std::string_view v) const {
        v = trim(v);
        const std::string s(v);
        char* end = nullptr;
        errno = 0;
        const double out = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !std::isfinite(out))
            fail(std::string(option) + ": '" + s + "' is not a number");
        return out;
    }

    std::uint32_t divisions_value(std::string_view v) const {
        const std::uint64_t d = unsigned_value("roundup_power2_divisions", v);
        if (d != 0 && !std::has_single_bit(d))
            fail("roundup_power2_divisions: " + std::to_string(d) +
                 " divisions: must be a power of 2 (or 0 to disable rounding)");
        if (d > (1u << 20))
            fail("roundup_power2_divisions: " + std::to_string(d) + " divisions is too many");
        return static_cast<std::uint32_t>(d);
    }

    // "[256:1,512:2,1024:4,>:8]", read as PyTorch documents it: 1 division
    // below 256 MiB, 2 in [256, 512) MiB, 4 in [512, 1024) MiB, 8 above.
    // An entry "<MiB>:<N>" (MiB a power of 2, increasing) covers the sizes
    // from the previous entry's MiB up to its own, ">:<N>" everything from
    // the last entry's MiB on.  Sizes past the last entry: no divisions.
    void divisions_list(std::string_view v, AllocatorConfig& c) const {
        std::string_view body = trim(v);
        body.remove_prefix(1);
        if (body.empty() || body.back() != ']')
            fail("roundup_power2_divisions: the list has no closing ']'");
        body.remove_suffix(1);
        if (trim(body).empty())
            fail("roundup_power2_divisions: the list is empty");
        auto& table = c.roundup_power2_divisions;
        std::size_t begin = 0; // first interval the next entry covers
        bool open_end = false;
        while (!body.empty()) {
            const std::size_t comma = body.find(',');
            const std::string_view item = trim(body.substr(0, comma));
            body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
            const std::size_t colon = item.find(':');
            if (colon == std::string_view::npos)
                fail("roundup_power2_divisions: list entry '" + std::string(item) +
                     "' is not <MiB>:<divisions>");
            if (open_end)
                fail("roundup_power2_divisions: '>' must be the last entry");
            const std::string_view key = trim(item.substr(0, colon));
            const std::uint32_t d = divisions_value(item.substr(colon + 1));
            std::size_t end = table.size();
            if (key == ">") {
                open_end = true;
            } else {
                const std::uint64_t mib = unsigned_value("roundup_power2_divisions", key);
                if (!std::has_single_bit(mib))
                    fail("roundup_power2_divisions: interval " + std::to_string(mib) +
                         " MiB: intervals must be powers of 2");
                end = std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(mib) - 1),
                                            table.size());
                if (begin == 0 && end == 0)
                    end = 1; // below 1 MiB shares the first interval
                if (end <= begin)
                    fail("roundup_power2_divisions: interval " + std::to_string(mib) +
                         " MiB: the intervals must increase");
            }
            for (std::size_t i = begin; i < end; i++)
                table[i] = d;
            begin = end;
        }
    }

    AllocatorConfig parse() const {
        AllocatorConfig c;
        std::string_view rest = text_;
        bool seen_split = false;
        bool seen_round = false;
        bool seen_gc = false;
        while (!trim(rest).empty()) {
            // Options are separated by commas outside brackets.
            std::size_t end = 0;
            int depth = 0;
            for (; end < rest.size(); end++) {
                if (rest[end] == '[')
                    depth++;
                else if (rest[end] == ']')
                    depth--;
                else if (rest[end] == ',' && depth == 0)
                    break;
            }
            const std::string_view option = trim(rest.substr(0, end));
            rest = end < rest.size() ? rest.substr(end + 1) : std::string_view{};
            if (option.empty())
                fail("an empty option (two commas in a row?)");
            const std::size_t colon = option.find(':');
            if (colon == std::string_view::npos)
                fail("option '" + std::string(option) + "' has no ':<value>'");
            const std::string_view key = trim(option.substr(0, colon));
            const std::string_view value = trim(option.substr(colon + 1));
            if (value.empty())
                fail("option '" + std::string(key) + "' has an empty value");
            auto once = [&](bool& seen) {
                if (seen)
                    fail("option '" + std::string(key) + "' is given twice");
                seen = true;
            };
            if (key == "max_split_size_mb") {
                once(seen_split);
                const std::uint64_t mb = unsigned_value(key, value);
                if (mb <= alloc::kLargeBuffer / kMiB)
                    fail("max_split_size_mb: " + std::to_string(mb) + " is too small, must be > " +
                         std::to_string(alloc::kLargeBuffer / kMiB));
                c.max_split_size = mb > alloc::kNoMaxSplit / kMiB ? alloc::kNoMaxSplit : mb * kMiB;
            } else if (key == "roundup_power2_divisions") {
                once(seen_round);
                if (value.front() == '[') {
                    divisions_list(value, c);
                } else {
                    const std::uint32_t d = divisions_value(value);
                    c.roundup_power2_divisions.fill(d);
                }
            } else if (key == "garbage_collection_threshold") {
                once(seen_gc);
                const double t = fraction_value(key, value);
                if (t <= 0.0)
                    fail("garbage_collection_threshold: " + std::string(value) +
                         " is too small, must be in (0, 1)");
                if (t >= 1.0)
                    fail("garbage_collection_threshold: " + std::string(value) +
                         " is too big, must be in (0, 1)");
                c.garbage_collection_threshold = t;
            } else if (key == "expandable_segments" || key == "backend" ||
                       key == "release_lock_on_cudamalloc" ||
                       key == "pinned_use_cuda_host_register" ||
                       key == "pinned_num_register_threads") {
                fail("option '" + std::string(key) +
                     "' is a PyTorch CUDA option that librbln does not have");
            } else {
                fail("unknown option '" + std::string(key) + "'");
            }
        }
        return c;
    }

private:
    std::string_view text_;
    std::string_view variable_;
};

} // namespace

AllocatorConfig AllocatorConfig::parse(std::string_view text, std::string_view variable) {
    return Parser(text, variable).parse();
}

AllocatorConfig AllocatorConfig::from_environment(const EnvSource& env) {
    const EnvSource source = env ? env : process_environment();
    const std::optional<std::string> text = source("RBLN_ALLOC_CONF");
    if (!text)
        return {};
    return parse(*text, "RBLN_ALLOC_CONF");
}

std::uint32_t AllocatorConfig::divisions_for(std::uint64_t size) const noexcept {
    if (size == 0)
        return roundup_power2_divisions[0];
    const int log2 = std::bit_width(size) - 1;
    int index = log2 - 20; // intervals start at 1 MiB
    if (index < 0)
        index = 0;
    if (index >= static_cast<int>(alloc::kRoundupIntervals))
        index = alloc::kRoundupIntervals - 1;
    return roundup_power2_divisions[static_cast<std::size_t>(index)];
}

namespace {

// The next of @divisions equal steps between the powers of two around @size.
std::uint64_t next_division(std::uint64_t size, std::uint32_t divisions) {
    if (std::has_single_bit(size))
        return size;
    const std::uint64_t floor = std::bit_floor(size);
    const std::uint64_t step = floor >> (std::bit_width(divisions) - 1);
    if (step == 0)
        return floor << 1;
    const std::uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

} // namespace

std::uint64_t round_request(std::uint64_t size, const AllocatorConfig& config) noexcept {
    if (size < alloc::kMinBlockSize)
        return alloc::kMinBlockSize;
    const std::uint32_t divisions = config.divisions_for(size);
    if (divisions > 1 && size > alloc::kMinBlockSize * divisions)
        return next_division(size, divisions);
    return alloc::kMinBlockSize * ((size + alloc::kMinBlockSize - 1) / alloc::kMinBlockSize);
}

std::uint64_t segment_size_for(std::uint64_t rounded) noexcept {
    if (rounded <= alloc::kSmallSize)
        return alloc::kSmallBuffer;
    if (rounded < alloc::kMinLargeAlloc)
        return alloc::kLargeBuffer;
    return alloc::kRoundLarge * ((rounded + alloc::kRoundLarge - 1) / alloc::kRoundLarge);
}

} // namespace rbln
