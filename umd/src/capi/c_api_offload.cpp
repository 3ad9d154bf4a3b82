// SPDX-License-Identifier: GPL-2.0
// c_api_offload.cpp - rbln_offload.h over rbln::OffloadScope.  Every entry
// point catches everything: no exception crosses into C.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "capi/c_guard.hpp"
#include "rbln/offload.hpp"
#include "rbln/rbln_offload.h"

struct rbln_offload {
    std::unique_ptr<rbln::OffloadScope> scope;
};

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

// The fields of rbln_offload_options a caller of @size bytes passed.
constexpr std::size_t kOptionsV1 = offsetof(rbln_offload_options, min_bytes) + sizeof(uint64_t);

} // namespace

extern "C" {

rbln_status rbln_offload_begin(const struct rbln_offload_options* options, rbln_offload** scope) {
    if (scope == nullptr)
        return invalid("scope is NULL");
    if (options != nullptr && options->struct_size < kOptionsV1)
        return invalid("options->struct_size is " + std::to_string(options->struct_size) +
                       ", less than the " + std::to_string(kOptionsV1) +
                       " bytes of struct rbln_offload_options");
    if (options != nullptr && options->pad != 0)
        return invalid("options->pad must be 0");
    return guard([&] {
        rbln::OffloadOptions o;
        if (options != nullptr) {
            o.directory = options->directory != nullptr ? options->directory : "";
            o.file = options->file != nullptr ? options->file : "";
            o.min_bytes = options->min_bytes;
        }
        auto s = std::make_unique<rbln_offload>();
        s->scope = std::make_unique<rbln::OffloadScope>(std::move(o));
        *scope = s.release();
        return RBLN_OK;
    });
}

rbln_status rbln_offload_now(rbln_offload* scope) {
    if (scope == nullptr)
        return invalid("scope is NULL");
    return guard([&] {
        scope->scope->offload_now();
        return RBLN_OK;
    });
}

rbln_status rbln_offload_end(rbln_offload* scope) {
    if (scope == nullptr)
        return invalid("scope is NULL");
    return guard([&] {
        scope->scope->close();
        return RBLN_OK;
    });
}

rbln_status rbln_offload_destroy(rbln_offload* scope) {
    if (scope == nullptr)
        return RBLN_OK;
    return guard([&] {
        scope->scope->close(); // throws on the wrong thread: nothing is freed
        const std::unique_ptr<rbln_offload> owned(scope);
        return RBLN_OK;
    });
}

rbln_status rbln_offload_get_stats(const rbln_offload* scope, struct rbln_offload_stats* stats) {
    if (stats == nullptr)
        return invalid("stats is NULL");
    if (stats->struct_size < sizeof(std::uint32_t))
        return invalid("stats->struct_size is too small");
    return guard([&] {
        const rbln::OffloadStats s =
            scope != nullptr ? scope->scope->stats() : rbln::offload_totals();
        rbln_offload_stats out{};
        out.struct_size = stats->struct_size;
        out.writes = s.writes;
        out.bytes_offloaded = s.bytes_offloaded;
        out.reads = s.reads;
        out.bytes_brought_back = s.bytes_brought_back;
        out.failures = s.failures;
        out.bytes_dropped = s.bytes_dropped;
        out.bytes_paged_out = s.bytes_paged_out;
        std::memcpy(stats, &out, std::min<std::size_t>(stats->struct_size, sizeof(out)));
        return RBLN_OK;
    });
}

rbln_status rbln_offload_failure_message(const rbln_offload* scope, size_t index, char* buf,
                                         size_t size, size_t* needed) {
    if (scope == nullptr)
        return invalid("scope is NULL");
    if (buf == nullptr && size != 0)
        return invalid("buf is NULL but size is not 0");
    return guard([&] {
        const std::vector<rbln::Error> failures = scope->scope->failures();
        if (index >= failures.size()) {
            return rbln::capi::fail(RBLN_ERR_NOT_FOUND, "failure " + std::to_string(index) +
                                                            " does not exist: the scope has " +
                                                            std::to_string(failures.size()));
        }
        const std::string m = failures[index].what();
        if (needed != nullptr)
            *needed = m.size() + 1;
        if (size != 0) {
            const std::size_t n = std::min(size - 1, m.size());
            std::memcpy(buf, m.data(), n);
            buf[n] = '\0';
        }
        return RBLN_OK;
    });
}

} // extern "C"
