// SPDX-License-Identifier: GPL-2.0
// c_api_ops.cpp - rbln_ops.h over rbln::ops.  Every entry point catches
// everything: no exception crosses into C.

#include <cstdint>
#include <string>

#include "capi/c_guard.hpp"
#include "capi/c_handles.hpp"
#include "rbln/ops.hpp"
#include "rbln/rbln_ops.h"
#include "rbln/storage.hpp"

namespace {

using rbln::capi::guard;
using rbln::capi::invalid;

// The first fields every caller's rbln_view has.
constexpr std::uint32_t kViewV1 = sizeof(rbln_view);

// @v as a StorageView; Errc::InvalidArgument naming @op and @name.
rbln::StorageView view_of(const char* op, const char* name, const rbln_view* v) {
    auto bad = [&](const std::string& why) {
        return rbln::Error(rbln::Errc::InvalidArgument, op, "", 0, std::string(name) + why);
    };
    if (v == nullptr)
        throw bad(" is NULL");
    if (v->struct_size < kViewV1)
        throw bad("->struct_size is " + std::to_string(v->struct_size) +
                  "; set it to sizeof(struct rbln_view)");
    if (v->storage == nullptr)
        throw bad("->storage is NULL");
    if (v->ndim > RBLN_VIEW_MAX_DIMS)
        throw bad(" has " + std::to_string(v->ndim) + " dimensions; at most " +
                  std::to_string(RBLN_VIEW_MAX_DIMS));
    rbln::StorageView out;
    out.storage = v->storage->storage;
    out.offset = v->offset;
    out.sizes.assign(v->sizes, v->sizes + v->ndim);
    out.strides.assign(v->strides, v->strides + v->ndim);
    return out;
}

// @stream, or (NULL) the default stream of @out's device.
rbln::Stream stream_of(rbln_stream* stream, const rbln::StorageView& out) {
    return stream != nullptr ? stream->stream : out.storage->device()->default_stream();
}

} // namespace

extern "C" {

rbln_status rbln_view_contiguous(rbln_storage* storage, uint32_t ndim, const int64_t* sizes,
                                 struct rbln_view* view) {
    if (storage == nullptr || view == nullptr)
        return invalid(storage == nullptr ? "storage is NULL" : "view is NULL");
    if (ndim > RBLN_VIEW_MAX_DIMS || (ndim > 0 && sizes == nullptr))
        return invalid(ndim > RBLN_VIEW_MAX_DIMS ? "more than RBLN_VIEW_MAX_DIMS dimensions"
                                                 : "sizes is NULL with dimensions");
    return guard([&] {
        const rbln::StorageView v =
            ndim == 0 ? rbln::StorageView::whole(storage->storage)
                      : rbln::StorageView::contiguous(
                            storage->storage, std::vector<std::int64_t>(sizes, sizes + ndim));
        rbln_view out{};
        out.struct_size = sizeof(out);
        out.ndim = static_cast<std::uint32_t>(v.sizes.size());
        out.storage = storage;
        out.offset = v.offset;
        for (std::size_t d = 0; d < v.sizes.size(); d++) {
            out.sizes[d] = v.sizes[d];
            out.strides[d] = v.strides[d];
        }
        *view = out;
        return RBLN_OK;
    });
}

rbln_status rbln_op_add(rbln_stream* stream, const struct rbln_view* out, const struct rbln_view* a,
                        const struct rbln_view* b) {
    return guard([&] {
        const rbln::StorageView o = view_of("add", "out", out);
        rbln::Stream s = stream_of(stream, o);
        rbln::ops::add(s, o, view_of("add", "a", a), view_of("add", "b", b));
        return RBLN_OK;
    });
}

rbln_status rbln_op_mul(rbln_stream* stream, const struct rbln_view* out, const struct rbln_view* a,
                        const struct rbln_view* b) {
    return guard([&] {
        const rbln::StorageView o = view_of("mul", "out", out);
        rbln::Stream s = stream_of(stream, o);
        rbln::ops::mul(s, o, view_of("mul", "a", a), view_of("mul", "b", b));
        return RBLN_OK;
    });
}

rbln_status rbln_op_relu(rbln_stream* stream, const struct rbln_view* out,
                         const struct rbln_view* a) {
    return guard([&] {
        const rbln::StorageView o = view_of("relu", "out", out);
        rbln::Stream s = stream_of(stream, o);
        rbln::ops::relu(s, o, view_of("relu", "a", a));
        return RBLN_OK;
    });
}

rbln_status rbln_op_scale(rbln_stream* stream, const struct rbln_view* out,
                          const struct rbln_view* a, float factor) {
    return guard([&] {
        const rbln::StorageView o = view_of("scale", "out", out);
        rbln::Stream s = stream_of(stream, o);
        rbln::ops::scale(s, o, view_of("scale", "a", a), factor);
        return RBLN_OK;
    });
}

rbln_status rbln_op_cast(rbln_stream* stream, const struct rbln_view* out,
                         const struct rbln_view* a) {
    return guard([&] {
        const rbln::StorageView o = view_of("cast", "out", out);
        rbln::Stream s = stream_of(stream, o);
        rbln::ops::cast(s, o, view_of("cast", "a", a));
        return RBLN_OK;
    });
}

rbln_status rbln_op_matmul(rbln_stream* stream, const struct rbln_view* out,
                           const struct rbln_view* a, const struct rbln_view* b) {
    return guard([&] {
        const rbln::StorageView o = view_of("matmul", "out", out);
        rbln::Stream s = stream_of(stream, o);
        rbln::ops::matmul(s, o, view_of("matmul", "a", a), view_of("matmul", "b", b));
        return RBLN_OK;
    });
}

rbln_status rbln_op_copy(rbln_stream* stream, const struct rbln_view* dst,
                         const struct rbln_view* src) {
    return guard([&] {
        const rbln::StorageView d = view_of("copy", "dst", dst);
        rbln::Stream s = stream_of(stream, d);
        rbln::ops::copy(s, d, view_of("copy", "src", src));
        return RBLN_OK;
    });
}

} // extern "C"
