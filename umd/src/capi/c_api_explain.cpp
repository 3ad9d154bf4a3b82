// SPDX-License-Identifier: GPL-2.0
// c_api_explain.cpp - rbln_explain.h over rbln::ExplainRegion.  Every entry
// point catches everything: no exception crosses into C.

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "capi/c_guard.hpp"
#include "rbln/error.hpp"
#include "rbln/explain.hpp"
#include "rbln/rbln_explain.h"

struct rbln_explain {
    std::unique_ptr<rbln::ExplainRegion> region;
};

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

// The sites rbln_explain_site_push() opened on this thread, innermost last.
thread_local std::vector<std::unique_ptr<rbln::ExplainSite>> g_sites;

// Site file names live as long as the process (sites point at them).
const char* intern(const char* file) {
    static std::mutex mutex;
    static std::set<std::string, std::less<>> names;
    const std::lock_guard<std::mutex> lock(mutex);
    return names.emplace(file).first->c_str();
}

} // namespace

extern "C" {

rbln_status rbln_explain_begin(const char* name, const char* file, uint32_t line,
                               rbln_explain** region) {
    if (region == nullptr)
        return invalid("region is NULL");
    return guard([&] {
        auto r = std::make_unique<rbln_explain>();
        r->region = std::make_unique<rbln::ExplainRegion>(
            name != nullptr ? name : "",
            file != nullptr ? rbln::ExplainLocation(file, line) : rbln::ExplainLocation());
        *region = r.release();
        return RBLN_OK;
    });
}

rbln_status rbln_explain_end(rbln_explain* region) {
    if (region == nullptr)
        return invalid("region is NULL");
    return guard([&] {
        region->region->close();
        return RBLN_OK;
    });
}

rbln_status rbln_explain_destroy(rbln_explain* region) {
    if (region == nullptr)
        return RBLN_OK;
    const std::unique_ptr<rbln_explain> owned(region);
    return guard([&] {
        owned->region.reset();
        return RBLN_OK;
    });
}

rbln_status rbln_explain_get_counts(const rbln_explain* region,
                                    struct rbln_explain_counts* counts) {
    if (region == nullptr || counts == nullptr)
        return invalid(region == nullptr ? "region is NULL" : "counts is NULL");
    if (counts->struct_size < sizeof(std::uint32_t))
        return invalid("counts->struct_size is too small");
    return guard([&] {
        const rbln::ExplainCounts c = region->region->counts();
        rbln_explain_counts out{};
        out.struct_size = counts->struct_size;
        out.clean = c.signals == 0 ? 1 : 0;
        out.signals = c.signals;
        out.pushes = c.pushes;
        out.push_bytes = c.push_bytes;
        out.pushes_expected = c.pushes_expected;
        out.downloads = c.downloads;
        out.download_bytes = c.download_bytes;
        out.downloads_expected = c.downloads_expected;
        out.async_transfers = c.async_transfers;
        out.async_bytes = c.async_bytes;
        out.host_bounces = c.host_bounces;
        out.host_bounce_bytes = c.host_bounce_bytes;
        out.sync_waits = c.sync_waits;
        out.lazy_commits = c.lazy_commits;
        out.commit_bytes = c.commit_bytes;
        std::memcpy(counts, &out, std::min<std::size_t>(counts->struct_size, sizeof(out)));
        return RBLN_OK;
    });
}

rbln_status rbln_explain_report(const rbln_explain* region, char* buf, size_t size,
                                size_t* needed) {
    if (region == nullptr)
        return invalid("region is NULL");
    if (buf == nullptr && size != 0)
        return invalid("buf is NULL but size is not 0");
    return guard([&] {
        const std::string r = region->region->report();
        if (needed != nullptr)
            *needed = r.size() + 1;
        if (size != 0) {
            const std::size_t n = std::min(size - 1, r.size());
            std::memcpy(buf, r.data(), n);
            buf[n] = '\0';
        }
        return RBLN_OK;
    });
}

rbln_status rbln_explain_site_push(const char* file, uint32_t line) {
    if (file == nullptr)
        return invalid("file is NULL");
    return guard([&] {
        g_sites.push_back(std::make_unique<rbln::ExplainSite>(intern(file), line, ""));
        return RBLN_OK;
    });
}

rbln_status rbln_explain_site_pop(void) {
    if (g_sites.empty())
        return invalid("no site pushed on this thread");
    g_sites.pop_back();
    return RBLN_OK;
}

} // extern "C"
