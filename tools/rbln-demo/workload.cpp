// SPDX-License-Identifier: GPL-2.0
// workload.cpp - the demo's work through librbln (see workload.hpp).

#include "workload.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "rbln/copy.hpp"
#include "rbln/error.hpp"
#include "rbln/ops.hpp"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

namespace rbln::demo {

namespace {

// The events between the phases of a slice: before the copy in, after it,
// after MATMUL, after RELU + SCALE, after the copy out.
constexpr std::size_t kEvents = 5;

// One slice's stream, storages and events, alive until its work is done.
struct SliceWork {
    Slice slice;
    Stream stream;
    std::shared_ptr<Storage> x, w, mm, relu, y;
    std::array<Event, kEvents> events;

    SliceWork(const std::shared_ptr<Device>& device, Slice s) : slice(s), stream(device) {}
};

std::uint64_t event_ns(const Event& from, const Event& to) {
    const double ms = Event::elapsed_time(from, to);
    return ms > 0 ? static_cast<std::uint64_t>(std::llround(ms * 1e6)) : 0;
}

void check_chiplets(const Device& device, const WorkloadOptions& o) {
    const unsigned count = device.chiplet_count();
    if (o.chiplets.empty())
        throw Error(Errc::InvalidArgument, "rbln-demo", "", 0, "no chiplet to run on");
    for (unsigned c : o.chiplets)
        if (c >= count)
            throw Error(Errc::InvalidArgument, "--chiplet " + std::to_string(c), device.node_path(),
                        0,
                        "the card has " + std::to_string(count) + " chiplet(s): pick one of 0.." +
                            std::to_string(count - 1));
}

// The rows of x split as evenly as they go over @chiplets (the first ones
// take one more); chiplets left without a row get no slice.
std::vector<Slice> split_rows(std::uint64_t m, const std::vector<unsigned>& chiplets) {
    std::vector<Slice> out;
    const std::uint64_t n = chiplets.size();
    std::uint64_t row = 0;
    for (std::uint64_t i = 0; i < n; i++) {
        Slice s;
        s.chiplet = chiplets[i];
        s.first_row = row;
        s.rows = m / n + (i < m % n ? 1 : 0);
        row += s.rows;
        if (s.rows > 0)
            out.push_back(s);
    }
    return out;
}

// Enqueues slice @s's work on its stream: copy in, MATMUL, RELU, SCALE,
// copy out, with an event before and after each phase.  Nothing waits.
void enqueue_slice(SliceWork& s, const std::shared_ptr<Memory>& hx,
                   const std::shared_ptr<Memory>& hw, const std::shared_ptr<Memory>& hy,
                   const WorkloadOptions& o, std::size_t es) {
    const Shape& sh = o.shape;
    const auto rows = static_cast<std::int64_t>(s.slice.rows);
    const auto k = static_cast<std::int64_t>(sh.k);
    const auto n = static_cast<std::int64_t>(sh.n);
    const std::uint64_t bx = s.slice.rows * sh.k * es;
    const std::uint64_t bw = sh.k * sh.n * es;
    const std::uint64_t by = s.slice.rows * sh.n * es;

    // Copies into a storage are device writes of all of it: device_use
    // commits its memory on this stream and records the write.
    s.events[0].record(s.stream);
    copy(s.stream, CopyEndpoint::of(s.x->device_use(s.stream, DeviceAccess::Write)),
         CopyEndpoint::of(hx, s.slice.first_row * sh.k * es, bx), true);
    copy(s.stream, CopyEndpoint::of(s.w->device_use(s.stream, DeviceAccess::Write)),
         CopyEndpoint::of(hw, 0, bw), true);
    s.events[1].record(s.stream);
    ops::matmul(s.stream, StorageView::contiguous(s.mm, {rows, n}),
                StorageView::contiguous(s.x, {rows, k}), StorageView::contiguous(s.w, {k, n}));
    s.events[2].record(s.stream);
    ops::relu(s.stream, StorageView::whole(s.relu), StorageView::whole(s.mm));
    ops::scale(s.stream, StorageView::whole(s.y), StorageView::whole(s.relu), o.scale);
    s.events[3].record(s.stream);
    copy(s.stream, CopyEndpoint::of(hy, s.slice.first_row * sh.n * es, by),
         CopyEndpoint::of(s.y->device_use(s.stream, DeviceAccess::Read)), true);
    s.events[4].record(s.stream);
}

} // namespace

WorkloadResult run_workload(const std::shared_ptr<Device>& device, DeviceAllocator& allocator,
                            const WorkloadOptions& o) {
    check_chiplets(*device, o);
    const Shape sh = o.shape;
    const DType t = o.dtype;
    const ElementType et = element_type(t);
    const std::size_t es = dtype_size(t);

    // Pinned host memory: what the CPU writes and reads, and what the
    // asynchronous copies move (plain pageable memory would make them
    // synchronous, through librbln's staging buffer).
    const auto hx = device->allocate_host(sh.m * sh.k * es);
    const auto hw = device->allocate_host(sh.k * sh.n * es);
    const auto hy = device->allocate_host(sh.m * sh.n * es);
    const std::span<std::byte> x_bytes(hx->host_data(), sh.m * sh.k * es);
    const std::span<std::byte> w_bytes(hw->host_data(), sh.k * sh.n * es);
    const std::span<std::byte> y_bytes(hy->host_data(), sh.m * sh.n * es);
    const std::vector<float> x = random_values(t, sh.m * sh.k, o.seed);
    const std::vector<float> w = random_values(t, sh.k * sh.n, o.seed ^ 0x5deece66dULL);
    for (std::size_t i = 0; i < x.size(); i++)
        store(t, x_bytes, i, x[i]);
    for (std::size_t i = 0; i < w.size(); i++)
        store(t, w_bytes, i, w[i]);
    // All-ones bytes are a NaN in every type: an element the card does not
    // write fails the check.
    std::memset(y_bytes.data(), 0xff, y_bytes.size());

    WorkloadResult r;
    r.host_bytes = hx->size() + hw->size() + hy->size();
    std::vector<std::unique_ptr<SliceWork>> work;
    for (const Slice& s : split_rows(sh.m, o.chiplets)) {
        auto& sw = *work.emplace_back(std::make_unique<SliceWork>(device, s));
        StorageOptions so;
        // The chiplet of the device's first NPU (its streams run there).
        so.place = allocator.find_place(allocator.npu_of(0), s.chiplet);
        const auto make = [&](std::uint64_t elements) {
            r.hbm_bytes += elements * es;
            return Storage::create(device, allocator, elements * es, et, so);
        };
        sw.x = make(s.rows * sh.k);
        sw.w = make(sh.k * sh.n);
        sw.mm = make(s.rows * sh.n);
        sw.relu = make(s.rows * sh.n);
        sw.y = make(s.rows * sh.n);
        sw.slice.queue_id = sw.stream.queue_id();
    }

    const auto t0 = std::chrono::steady_clock::now();
    for (auto& sw : work)
        enqueue_slice(*sw, hx, hw, hy, o, es);
    for (auto& sw : work)
        sw->stream.synchronize();
    r.enqueue_to_done = std::chrono::steady_clock::now() - t0;

    for (auto& sw : work) {
        const auto& e = sw->events;
        Slice& s = sw->slice;
        s.jobs = sw->stream.last_job();
        s.card.copy_in_ns = event_ns(e[0], e[1]);
        s.card.matmul_ns = event_ns(e[1], e[2]);
        s.card.relu_scale_ns = event_ns(e[2], e[3]);
        s.card.copy_out_ns = event_ns(e[3], e[4]);
        s.card.total_ns = event_ns(e[0], e[4]);
        r.slices.push_back(s);
    }

    std::vector<float> y(sh.m * sh.n);
    for (std::size_t i = 0; i < y.size(); i++)
        y[i] = load(t, y_bytes, i);
    const auto c0 = std::chrono::steady_clock::now();
    const Reference ref = reference(t, x, w, sh, o.scale);
    r.cpu_reference = std::chrono::steady_clock::now() - c0;
    r.check = check(y, ref);
    return r;
}

} // namespace rbln::demo
