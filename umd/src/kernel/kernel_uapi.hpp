// SPDX-License-Identifier: GPL-2.0
// kernel_uapi.hpp - the one place where librbln's kernel-interface types
// (kernel.hpp) become the uAPI structs of drm/rbln_accel.h.  Only the
// kernel boundary includes it: kernel_device.cpp (the ioctls) and
// kernel_uring.cpp (the io_uring commands), so a job reaches the kernel
// the same way on both paths.
#pragma once

#include <cstdint>
#include <vector>

#include "drm/rbln_accel.h"
#include "kernel/kernel.hpp"

namespace rbln::detail {

static_assert(kMaxChiplets == RBLN_MAX_CHIPLETS);
static_assert(static_cast<std::uint32_t>(Region::Host) == RBLN_REGION_HOST);
static_assert(static_cast<std::uint32_t>(Region::Hbm) == RBLN_REGION_HBM);
static_assert(static_cast<std::uint32_t>(Region::Auto) == RBLN_REGION_AUTO);
static_assert(static_cast<std::uint32_t>(Region::Userptr) == RBLN_REGION_USERPTR);
static_assert(static_cast<std::uint32_t>(Region::Import) == RBLN_REGION_IMPORT);
static_assert(static_cast<std::uint32_t>(QueuePriority::Low) == RBLN_QUEUE_PRIORITY_LOW);
static_assert(static_cast<std::uint32_t>(QueuePriority::Normal) == RBLN_QUEUE_PRIORITY_NORMAL);
static_assert(static_cast<std::uint32_t>(QueuePriority::High) == RBLN_QUEUE_PRIORITY_HIGH);
static_assert(static_cast<std::uint32_t>(BoFlags::DeviceReadOnly) == RBLN_BO_DEVICE_READ_ONLY);
static_assert(static_cast<std::uint32_t>(UserptrFlags::ReadOnly) == RBLN_USERPTR_READ_ONLY);
static_assert(static_cast<std::uint32_t>(SubmitFlags::NoImplicitWait) ==
              RBLN_SUBMIT_NO_IMPLICIT_WAIT);
static_assert(sizeof(drm_rbln_submit) == 80, "the SUBMIT payload fills sqe->cmd");
static_assert(sizeof(drm_rbln_wait) <= 80, "the WAIT payload fits sqe->cmd");

/// The uAPI value of a kernel-interface enum or flag type.
template <typename E> constexpr std::uint32_t uapi(E e) noexcept {
    return static_cast<std::uint32_t>(e);
}

/// The drm_rbln_sync array of @in_syncs.
inline void encode_syncs(std::span<const SyncPoint> in_syncs, std::vector<drm_rbln_sync>& out) {
    out.resize(in_syncs.size());
    for (std::size_t i = 0; i < in_syncs.size(); i++)
        out[i] = drm_rbln_sync{in_syncs[i].handle, 0, in_syncs[i].point};
}

/// The SUBMIT of @a, for DRM_IOCTL_RBLN_SUBMIT and RBLN_URING_CMD_SUBMIT
/// alike.  @in: the drm_rbln_sync array it points to (encode_syncs of
/// a.in_syncs), owned by the caller for as long as the kernel may read it.
inline drm_rbln_submit encode_submit(const SubmitArgs& a, const std::vector<drm_rbln_sync>& in) {
    drm_rbln_submit s{};
    s.queue_id = a.queue_id;
    s.flags = uapi(a.flags);
    s.cmd_handle = a.cmd_handle;
    s.cmd_size = a.cmd_size;
    s.cmd_offset = a.cmd_offset;
    s.bo_handles = reinterpret_cast<std::uintptr_t>(a.bo_handles.data());
    s.bo_count = static_cast<std::uint32_t>(a.bo_handles.size());
    s.bo_elem_size = sizeof(std::uint32_t);
    s.in_syncs = in.empty() ? 0 : reinterpret_cast<std::uintptr_t>(in.data());
    s.in_count = static_cast<std::uint32_t>(in.size());
    s.in_elem_size = sizeof(drm_rbln_sync);
    s.out_handle = a.out.handle;
    s.out_point = a.out.point;
    return s;
}

/// The WAIT of @a, for DRM_IOCTL_RBLN_WAIT and RBLN_URING_CMD_WAIT alike.
inline drm_rbln_wait encode_wait(const WaitArgs& a) {
    drm_rbln_wait w{};
    if (a.sync) {
        w.flags = RBLN_WAIT_SYNCOBJ;
        w.sync.handle = a.sync->handle;
        w.sync.point = a.sync->point;
    } else {
        w.queue_id = a.queue_id;
        w.seqno = a.seqno;
    }
    w.timeout_ns = a.deadline_ns;
    return w;
}

} // namespace rbln::detail
