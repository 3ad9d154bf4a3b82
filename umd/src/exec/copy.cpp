// SPDX-License-Identifier: GPL-2.0
// copy.cpp - host <-> device and device <-> device copies (rbln/copy.hpp).

#include "rbln/copy.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "diag/explain_hooks.hpp"
#include "exec/command.hpp"
#include "exec/submitter.hpp"
#include "memory/bo_memory.hpp"
#include "rbln/device.hpp"
#include "rbln/stream.hpp"
#include "runtime/device_state.hpp"

namespace rbln {

CopyEndpoint CopyEndpoint::of(std::shared_ptr<Memory> memory, std::uint64_t offset,
                              std::uint64_t size) {
    if (!memory)
        throw Error(Errc::InvalidArgument, "copy", "", 0, "no memory given");
    if (offset > memory->size())
        throw Error(Errc::InvalidArgument, "copy", "", 0,
                    "offset " + std::to_string(offset) + " is past the end of the " +
                        std::to_string(memory->size()) + "-byte memory");
    CopyEndpoint e;
    e.size = size == 0 ? memory->size() - offset : size;
    e.offset = offset;
    e.memory = std::move(memory);
    return e;
}

CopyEndpoint CopyEndpoint::of_host(void* data, std::uint64_t size) {
    CopyEndpoint e;
    e.host = data;
    e.size = size;
    return e;
}

CopyEndpoint CopyEndpoint::of_host(const void* data, std::uint64_t size) {
    // A source endpoint: librbln only reads it.
    return of_host(const_cast<void*>(data), size); // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

CopyEndpoint CopyEndpoint::strided(std::uint64_t row_bytes, std::uint64_t pitch_bytes) const {
    if (row_bytes == 0 || pitch_bytes < row_bytes || size % row_bytes != 0)
        throw Error(Errc::InvalidArgument, "copy", "", 0,
                    "rows of " + std::to_string(row_bytes) + " bytes at a pitch of " +
                        std::to_string(pitch_bytes) + " do not describe " + std::to_string(size) +
                        " bytes (pitch >= row > 0, size a multiple of row)");
    CopyEndpoint e = *this;
    e.row = row_bytes;
    e.pitch = pitch_bytes;
    return e;
}

std::uint64_t CopyEndpoint::extent() const noexcept {
    if (contiguous() || size == 0)
        return size;
    return (size / row - 1) * pitch + row;
}

namespace {

bool same_node(const Memory& m, const Device& d) {
    return &m.kernel() == &d.kernel();
}

// The pinned memory of @device behind a host endpoint, and the offset in it.
std::shared_ptr<Memory> pinned_of(const Device& device, const CopyEndpoint& e,
                                  std::uint64_t& offset) {
    if (e.memory) {
        offset = e.offset;
        return same_node(*e.memory, device) ? e.memory : nullptr;
    }
    auto m = device.find_pinned(e.host, e.extent());
    if (m)
        offset = static_cast<std::uint64_t>(static_cast<std::byte*>(e.host) - m->host_data());
    return m;
}

std::byte* host_address(const CopyEndpoint& e) {
    return e.memory ? e.memory->host_data() + e.offset : static_cast<std::byte*>(e.host);
}

// The bytes [off, off + len) of @e (multiples of its row if strided).
CopyEndpoint sub(const CopyEndpoint& e, std::uint64_t off, std::uint64_t len) {
    CopyEndpoint s = e;
    const std::uint64_t skip = e.contiguous() ? off : off / e.row * e.pitch;
    if (s.memory)
        s.offset += skip;
    else
        s.host = static_cast<std::byte*>(s.host) + skip;
    s.size = len;
    return s;
}

// CPU gather of a host endpoint into contiguous @out / scatter back.
void gather(const CopyEndpoint& e, std::byte* out) {
    const std::byte* p = host_address(e);
    if (e.contiguous() || e.row == 0) {
        std::memcpy(out, p, e.size);
        return;
    }
    for (std::uint64_t r = 0; r < e.size / e.row; r++)
        std::memcpy(out + r * e.row, p + r * e.pitch, e.row);
}

void scatter(const CopyEndpoint& e, const std::byte* in) {
    std::byte* p = host_address(e);
    if (e.contiguous() || e.row == 0) {
        std::memcpy(p, in, e.size);
        return;
    }
    for (std::uint64_t r = 0; r < e.size / e.row; r++)
        std::memcpy(p + r * e.pitch, in + r * e.row, e.row);
}

void check_range(const CopyEndpoint& e, const char* side) {
    if (e.memory) {
        if (e.offset > e.memory->size() || e.extent() > e.memory->size() - e.offset)
            throw Error(Errc::InvalidArgument, "copy", e.memory->kernel().path(), 0,
                        std::string("the ") + side + " range [" + std::to_string(e.offset) + ", +" +
                            std::to_string(e.extent()) + ") is outside its " +
                            std::to_string(e.memory->size()) + "-byte memory");
    } else if (e.host == nullptr && e.size != 0) {
        throw Error(Errc::InvalidArgument, "copy", "", 0,
                    std::string("the ") + side + " host pointer is NULL");
    }
}

// One job moving @len bytes between the contiguous staging memory at
// @staging_off and the device endpoint @dev (to the device if @to_device).
std::uint64_t device_leg(detail::StreamState& st, const std::shared_ptr<Memory>& staging,
                         const CopyEndpoint& dev, bool to_device) {
    const std::uint64_t s = staging->device_va();
    const std::uint64_t d = dev.memory->device_va() + dev.offset;
    const std::shared_ptr<Memory> bufs[] = {staging, dev.memory};
    const std::lock_guard<std::mutex> lock(st.mutex);
    if (dev.contiguous())
        return st.enqueue_locked(
            PacketSize::copy,
            [&](CommandEncoder& e) {
                if (to_device)
                    e.copy(s, d, dev.size);
                else
                    e.copy(d, s, dev.size);
            },
            bufs);
    StridedCopy c;
    c.width = dev.row;
    c.height = static_cast<std::uint32_t>(dev.size / dev.row);
    c.src = to_device ? s : d;
    c.dst = to_device ? d : s;
    c.src_pitch = to_device ? dev.row : dev.pitch;
    c.dst_pitch = to_device ? dev.pitch : dev.row;
    return st.enqueue_locked(
        PacketSize::copy_strided, [&](CommandEncoder& e) { e.copy_strided(c); }, bufs);
}

void wait_checked(detail::StreamState& st, std::uint64_t n) {
    st.wait_job(n);
    if (auto f = st.device.submitter().take_failure(st.queue_id))
        throw job_error(*f, st.device.kernel().path());
}

const std::shared_ptr<Memory>& staging_of(Device& d) { // staging_mutex held
    auto& ds = d.state();
    if (!ds.staging)
        ds.staging = BoMemory::create_host(d.kernel_ptr(), d.options().staging_bytes);
    return ds.staging;
}

// The stream of @d that runs a leg of a copy on @stream's behalf.
std::shared_ptr<detail::StreamState> leg_stream(Stream& stream, Device& d) {
    if (&stream.device() == &d)
        return stream.state();
    return d.default_stream().state();
}

void copy_sync(Stream& stream, const CopyEndpoint& dst, const CopyEndpoint& src,
               const CopyPlan& plan) {
    if (dst.size != src.size) { // broadcast (both contiguous, checked by copy())
        // Repeat the source on the host, then one copy of the whole.
        std::vector<std::byte> unit(src.size);
        CopyPlan one = plan;
        if (src.is_device()) {
            one.kind = CopyKind::DeviceToHost;
            copy_sync(stream, CopyEndpoint::of_host(unit.data(), unit.size()), src, one);
        } else {
            gather(src, unit.data());
        }
        std::vector<std::byte> whole(dst.size);
        for (std::uint64_t off = 0; off < dst.size; off += src.size)
            std::memcpy(whole.data() + off, unit.data(), src.size);
        one.kind = dst.is_device() ? CopyKind::HostToDevice : CopyKind::HostToHost;
        one.cross_device = false;
        copy_sync(stream, dst, CopyEndpoint::of_host(whole.data(), whole.size()), one);
        return;
    }
    if (plan.kind == CopyKind::HostToHost) {
        if (src.contiguous()) {
            scatter(dst, host_address(src));
        } else {
            std::vector<std::byte> tmp(src.size);
            gather(src, tmp.data());
            scatter(dst, tmp.data());
        }
        return;
    }
    std::shared_ptr<Device> src_dev = src.is_device() ? device_of(*src.memory) : nullptr;
    std::shared_ptr<Device> dst_dev = dst.is_device() ? device_of(*dst.memory) : nullptr;
    if ((src.is_device() && !src_dev) || (dst.is_device() && !dst_dev))
        throw Error(Errc::InvalidArgument, "copy", stream.device().kernel().path(), 0,
                    "the device memory belongs to no open librbln device");
    if (src.is_device())
        src.memory->make_resident();
    if (dst.is_device())
        dst.memory->make_resident();

    const std::uint64_t unit =
        std::lcm(src.contiguous() ? 1 : src.row, dst.contiguous() ? 1 : dst.row);
    Device& first = src_dev ? *src_dev : *dst_dev;
    const std::uint64_t chunk = first.options().staging_bytes / unit * unit;
    if (chunk == 0 || (src_dev && dst_dev && dst_dev->options().staging_bytes < chunk))
        throw Error(Errc::InvalidArgument, "copy", first.kernel().path(), 0,
                    "rows of " + std::to_string(unit) +
                        " bytes do not fit the staging buffer of a synchronous copy");

    std::unique_lock<std::mutex> l1(first.state().staging_mutex, std::defer_lock);
    std::unique_lock<std::mutex> l2;
    if (plan.cross_device) {
        l2 = std::unique_lock<std::mutex>(dst_dev->state().staging_mutex, std::defer_lock);
        std::lock(l1, l2);
    } else {
        l1.lock();
    }
    for (std::uint64_t off = 0; off < src.size; off += chunk) {
        const std::uint64_t len = std::min(chunk, src.size - off);
        const CopyEndpoint a = sub(src, off, len);
        const CopyEndpoint b = sub(dst, off, len);
        switch (plan.kind) {
        case CopyKind::HostToDevice: {
            const auto& staging = staging_of(*dst_dev);
            gather(a, staging->host_data());
            auto st = leg_stream(stream, *dst_dev);
            wait_checked(*st, device_leg(*st, staging, b, true));
            break;
        }
        case CopyKind::DeviceToHost: {
            const auto& staging = staging_of(*src_dev);
            auto st = leg_stream(stream, *src_dev);
            wait_checked(*st, device_leg(*st, staging, a, false));
            scatter(b, staging->host_data());
            break;
        }
        case CopyKind::DeviceToDevice: {
            const auto& s_stage = staging_of(*src_dev);
            auto s_st = leg_stream(stream, *src_dev);
            const std::uint64_t n = device_leg(*s_st, s_stage, a, false);
            if (!plan.cross_device) {
                wait_checked(*s_st, device_leg(*s_st, s_stage, b, true));
                break;
            }
            wait_checked(*s_st, n);
            const auto& d_stage = staging_of(*dst_dev);
            std::memcpy(d_stage->host_data(), s_stage->host_data(), len);
            auto d_st = leg_stream(stream, *dst_dev);
            wait_checked(*d_st, device_leg(*d_st, d_stage, b, true));
            break;
        }
        case CopyKind::HostToHost:
            break;
        }
    }
}

} // namespace

CopyPlan plan_copy(const Device& device, const CopyEndpoint& dst, const CopyEndpoint& src) {
    CopyPlan p;
    const bool sd = src.is_device();
    const bool dd = dst.is_device();
    p.kind = sd ? (dd ? CopyKind::DeviceToDevice : CopyKind::DeviceToHost)
                : (dd ? CopyKind::HostToDevice : CopyKind::HostToHost);
    if (p.kind == CopyKind::HostToHost) {
        p.reason = "host to host";
        return p;
    }
    if (sd && dd && &src.memory->kernel() != &dst.memory->kernel()) {
        p.cross_device = true;
        p.reason = "between two logical devices (through host memory)";
        return p;
    }
    if (src.size != dst.size) {
        p.reason = "source and destination sizes differ";
        return p;
    }
    if (!src.contiguous() || !dst.contiguous()) {
        p.reason = "not contiguous";
        return p;
    }
    for (const CopyEndpoint* e : {&src, &dst}) {
        if (e->is_device())
            continue;
        std::uint64_t off = 0;
        if (!pinned_of(device, *e, off)) {
            p.reason = "the host memory is not pinned for this device";
            return p;
        }
    }
    for (const CopyEndpoint* e : {&src, &dst})
        if (e->is_device() && !e->memory->resident()) {
            p.reason = "the device memory is not resident";
            return p;
        }
    p.mode = CopyMode::Async;
    return p;
}

void copy(Stream& stream, const CopyEndpoint& dst, const CopyEndpoint& src, bool non_blocking) {
    Device& dev = stream.device();
    dev.state().check_fork();
    check_range(src, "source");
    check_range(dst, "destination");
    if (src.size == 0 && dst.size == 0)
        return;
    const CopyPlan plan = plan_copy(dev, dst, src);
    for (const CopyEndpoint* e : {&src, &dst})
        if (e->is_device() && !plan.cross_device && !same_node(*e->memory, dev))
            throw Error(Errc::InvalidArgument, "copy", dev.kernel().path(), 0,
                        "the device memory belongs to another device (" +
                            e->memory->kernel().path() + "): use a stream of that device");
    if (dst.size != src.size &&
        (src.size == 0 || dst.size % src.size != 0 || !src.contiguous() || !dst.contiguous()))
        throw Error(Errc::InvalidArgument, "copy", dev.kernel().path(), 0,
                    "a " + std::to_string(src.size) + "-byte source cannot fill a " +
                        std::to_string(dst.size) +
                        "-byte destination (sizes must match, or the destination be a "
                        "contiguous whole multiple of a contiguous source)");

    auto& ds = dev.state();
    if (plan.mode == CopyMode::Async) {
        CopyEndpoint s = src;
        CopyEndpoint d = dst;
        for (CopyEndpoint* e : {&s, &d})
            if (!e->is_device() && !e->memory) {
                std::uint64_t off = 0;
                e->memory = pinned_of(dev, *e, off);
                e->offset = off;
            }
        const std::uint64_t sva = s.memory->device_va() + s.offset;
        const std::uint64_t dva = d.memory->device_va() + d.offset;
        const std::uint64_t size = s.size;
        const std::shared_ptr<Memory> bufs[] = {s.memory, d.memory};
        const auto& st = stream.state();
        std::uint64_t n = 0;
        {
            const std::lock_guard<std::mutex> lock(st->mutex);
            n = st->enqueue_locked(
                PacketSize::copy, [&](CommandEncoder& e) { e.copy(sva, dva, size); }, bufs);
        }
        ds.add_async(st, n);
        {
            const std::lock_guard<std::mutex> lock(ds.mutex);
            ds.stats.bytes_async += size;
            if (plan.kind == CopyKind::HostToDevice)
                ds.stats.async_h2d++;
            else if (plan.kind == CopyKind::DeviceToHost)
                ds.stats.async_d2h++;
            else
                ds.stats.async_d2d++;
        }
        detail::explain_copy(plan, size, non_blocking, false);
        if (!non_blocking)
            wait_checked(*st, n);
        return;
    }

    // Synchronous: the async transfers before it first, on every device involved.
    bool drained = ds.drain_async();
    std::shared_ptr<Device> other;
    if (plan.cross_device) {
        other = device_of(&dst.memory->kernel() == &dev.kernel() ? *src.memory : *dst.memory);
        if (other)
            drained = other->state().drain_async() || drained;
    }
    copy_sync(stream, dst, src, plan);
    detail::explain_copy(plan, dst.size, non_blocking, drained);
    const std::lock_guard<std::mutex> lock(ds.mutex);
    ds.stats.bytes_sync += dst.size;
    if (drained)
        ds.stats.drains++;
    if (plan.cross_device)
        ds.stats.cross_device_via_host++;
    switch (plan.kind) {
    case CopyKind::HostToDevice:
        ds.stats.sync_h2d++;
        break;
    case CopyKind::DeviceToHost:
        ds.stats.sync_d2h++;
        break;
    case CopyKind::DeviceToDevice:
        ds.stats.sync_d2d++;
        break;
    case CopyKind::HostToHost:
        ds.stats.host_to_host++;
        break;
    }
}

} // namespace rbln
