// SPDX-License-Identifier: GPL-2.0
// Copies and fills over host spans (dma.h).
#include "dma.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace rbln::emu::dma {

static_assert(std::endian::native == std::endian::little, "FILL patterns are little endian");

namespace {

// Large pieces move in steps of this, with a look at `cancel` in between.
constexpr std::size_t kStep = 16ULL << 20;

std::atomic<std::size_t> g_stream_threshold{kDefaultStreamThreshold};

using Range = std::pair<const std::byte*, const std::byte*>; // [first, end)

std::vector<Range> sorted_ranges(const std::vector<HostSpan>& v) {
    std::vector<Range> r;
    r.reserve(v.size());
    for (const HostSpan& s : v)
        r.emplace_back(s.data(), s.data() + s.size());
    std::sort(r.begin(), r.end());
    return r;
}

bool cancelled(const Cancel* cancel) {
    return cancel != nullptr && cancel->load(std::memory_order_relaxed);
}

// Copies @n bytes with stores that bypass the CPU caches (what a DMA
// engine's writes do to the host's caches).  Only for non-overlapping
// pieces; the caller fences once after the last one.
void stream(std::byte* dst, const std::byte* src, std::size_t n) {
#if defined(__SSE2__)
    constexpr std::size_t kVec = 16;
    constexpr std::size_t kLine = 64;
    const std::size_t head =
        std::min(n, (kVec - reinterpret_cast<std::uintptr_t>(dst) % kVec) % kVec);
    std::memcpy(dst, src, head);
    std::size_t i = head;
    for (; i + kLine <= n; i += kLine) {
        const auto* s = reinterpret_cast<const __m128i*>(src + i);
        auto* d = reinterpret_cast<__m128i*>(dst + i);
        const __m128i a = _mm_loadu_si128(s);
        const __m128i b = _mm_loadu_si128(s + 1);
        const __m128i c = _mm_loadu_si128(s + 2);
        const __m128i e = _mm_loadu_si128(s + 3);
        _mm_stream_si128(d, a);
        _mm_stream_si128(d + 1, b);
        _mm_stream_si128(d + 2, c);
        _mm_stream_si128(d + 3, e);
    }
    std::memcpy(dst + i, src + i, n - i);
#else
    std::memcpy(dst, src, n);
#endif
}

void stream_fence() {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

// memmove in steps (the direction memmove itself would take), so a long
// copy can be stopped.  @nt: with stores that bypass the caches (ranges
// apart only; the caller fences after its last piece).
bool move(std::byte* dst, const std::byte* src, std::size_t n, const Cancel* cancel, bool nt) {
    if (nt) {
        for (std::size_t done = 0; done < n; done += kStep) {
            if (cancelled(cancel))
                return false;
            stream(dst + done, src + done, std::min(kStep, n - done));
        }
        return true;
    }
    if (n <= kStep || cancel == nullptr) {
        std::memmove(dst, src, n);
        return true;
    }
    const bool backwards = dst > src && dst < src + n;
    for (std::size_t done = 0; done < n; done += kStep) {
        if (cancelled(cancel))
            return false;
        const std::size_t c = std::min(kStep, n - done);
        if (backwards)
            std::memmove(dst + (n - done - c), src + (n - done - c), c);
        else
            std::memmove(dst + done, src + done, c);
    }
    return true;
}

// A piece contiguous on both sides.
struct Segment {
    std::byte* dst;
    const std::byte* src;
    std::size_t n;
};

std::vector<Segment> segments(const std::vector<HostSpan>& dst, const std::vector<HostSpan>& src) {
    std::vector<Segment> out;
    out.reserve(std::max(dst.size(), src.size()));
    std::size_t i = 0;
    std::size_t j = 0;
    std::size_t di = 0; // bytes used of dst[i]
    std::size_t sj = 0; // bytes used of src[j]
    while (i < dst.size() && j < src.size()) {
        const std::size_t n = std::min(dst[i].size() - di, src[j].size() - sj);
        if (n > 0)
            out.push_back({dst[i].data() + di, src[j].data() + sj, n});
        di += n;
        sj += n;
        if (di == dst[i].size()) {
            i++;
            di = 0;
        }
        if (sj == src[j].size()) {
            j++;
            sj = 0;
        }
    }
    return out;
}

// A union of ranges, kept disjoint: first -> end.
class RangeSet {
public:
    [[nodiscard]] bool hits(const std::byte* first, const std::byte* end) const {
        auto it = set_.upper_bound(first);
        if (it != set_.begin() && std::prev(it)->second > first)
            return true;
        return it != set_.end() && it->first < end;
    }
    void add(const std::byte* first, const std::byte* end) {
        auto it = set_.upper_bound(first);
        if (it != set_.begin() && std::prev(it)->second >= first) {
            --it;
            first = it->first;
            end = std::max(end, it->second);
            it = set_.erase(it);
        }
        while (it != set_.end() && it->first <= end) {
            end = std::max(end, it->second);
            it = set_.erase(it);
        }
        set_.emplace(first, end);
    }

private:
    std::map<const std::byte*, const std::byte*> set_;
};

// Moving the segments one by one in this order is memmove of the whole iff
// no segment's source was written by a segment moved before it.
template <typename It> bool order_works(It first, It last) {
    RangeSet written;
    for (It s = first; s != last; ++s) {
        if (written.hits(s->src, s->src + s->n))
            return false;
        written.add(s->dst, s->dst + s->n);
    }
    return true;
}

// The smallest range holding every span of @v (an empty range for none).
Range bounds(const std::vector<HostSpan>& v) {
    if (v.empty())
        return {nullptr, nullptr};
    Range r{v.front().data(), v.front().data() + v.front().size()};
    for (const HostSpan& s : v) {
        r.first = std::min(r.first, static_cast<const std::byte*>(s.data()));
        r.second = std::max(r.second, static_cast<const std::byte*>(s.data() + s.size()));
    }
    return r;
}

} // namespace

bool overlap(const std::vector<HostSpan>& a, const std::vector<HostSpan>& b) {
    // The common case, host memory against HBM: apart as a whole, which one
    // pass shows without sorting thousands of page spans.
    const Range ba = bounds(a);
    const Range bb = bounds(b);
    if (ba.first == ba.second || bb.first == bb.second || ba.second <= bb.first ||
        bb.second <= ba.first)
        return false;
    const std::vector<Range> x = sorted_ranges(a);
    const std::vector<Range> y = sorted_ranges(b);
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < x.size() && j < y.size()) {
        if (x[i].first < y[j].second && y[j].first < x[i].second)
            return true;
        if (x[i].second <= y[j].second)
            i++;
        else
            j++;
    }
    return false;
}

namespace {

std::size_t total_bytes(const std::vector<Segment>& segs) {
    std::size_t total = 0;
    for (const Segment& s : segs)
        total += s.n;
    return total;
}

// copy() without the closing fence of its streamed stores.
bool copy_unfenced(const std::vector<HostSpan>& dst, const std::vector<HostSpan>& src,
                   const Cancel* cancel) {
    if (dst.size() == 1 && src.size() == 1) {
        std::byte* d = dst[0].data();
        const std::byte* s = src[0].data();
        const std::size_t n = std::min(dst[0].size(), src[0].size());
        return move(d, s, n, cancel, n >= stream_threshold() && (d + n <= s || s + n <= d));
    }
    const std::vector<Segment> segs = segments(dst, src);
    const bool apart = !overlap(dst, src);
    // Pieces of a large copy apart from its source stream even when each is
    // a page: too small for memcpy to bypass the caches itself, as it does
    // for one large copy.
    const bool nt = apart && total_bytes(segs) >= stream_threshold();
    std::size_t since_check = 0;
    auto run = [&](const Segment& s) {
        if (since_check >= kStep) {
            since_check = 0;
            if (cancelled(cancel))
                return false;
        }
        since_check += s.n;
        return move(s.dst, s.src, s.n, cancel, nt);
    };
    if (apart || order_works(segs.begin(), segs.end())) {
        for (const Segment& s : segs) {
            if (!run(s))
                return false;
        }
        return true;
    }
    if (order_works(segs.rbegin(), segs.rend())) {
        for (auto s = segs.rbegin(); s != segs.rend(); ++s) {
            if (!run(*s))
                return false;
        }
        return true;
    }
    // The pieces alias in both directions: through a snapshot.
    std::vector<std::byte> snapshot(total_bytes(segs));
    std::size_t at = 0;
    for (const Segment& s : segs) {
        std::memcpy(snapshot.data() + at, s.src, s.n);
        at += s.n;
    }
    if (cancelled(cancel))
        return false;
    at = 0;
    for (const Segment& s : segs) {
        std::memcpy(s.dst, snapshot.data() + at, s.n);
        at += s.n;
    }
    return true;
}

} // namespace

bool copy(const std::vector<HostSpan>& dst, const std::vector<HostSpan>& src,
          const Cancel* cancel) {
    const bool done = copy_unfenced(dst, src, cancel);
    stream_fence();
    return done;
}

bool fill(const std::vector<HostSpan>& dst, std::uint64_t pattern, unsigned pattern_bytes,
          const Cancel* cancel) {
    constexpr std::size_t kBlock = 4096; // a multiple of every pattern size
    // The pattern repeated over 8 bytes, then over the block (+ 8 so that a
    // copy may start at any phase).
    std::uint64_t word = pattern;
    if (pattern_bytes < 8) {
        word &= (1ULL << (8 * pattern_bytes)) - 1;
        for (unsigned w = pattern_bytes; w < 8; w *= 2)
            word |= word << (8 * w);
    }
    std::array<std::uint64_t, kBlock / 8 + 1> words{};
    std::fill(words.begin(), words.end(), word);
    const auto* block = reinterpret_cast<const std::byte*>(words.data());
    std::uint64_t pos = 0; // bytes filled so far: the pattern phase
    std::size_t since_check = 0;
    for (const HostSpan& s : dst) {
        if (pattern_bytes == 1) {
            std::memset(s.data(), static_cast<int>(pattern & 0xffU), s.size());
        } else {
            std::size_t done = 0;
            while (done < s.size()) {
                const std::size_t phase = (pos + done) % pattern_bytes;
                const std::size_t n = std::min(kBlock, s.size() - done);
                std::memcpy(s.data() + done, block + phase, n);
                done += n;
                since_check += n;
                if (since_check >= kStep) {
                    since_check = 0;
                    if (cancelled(cancel))
                        return false;
                }
            }
        }
        pos += s.size();
    }
    return true;
}

std::size_t stream_threshold() noexcept {
    return g_stream_threshold.load(std::memory_order_relaxed);
}

void set_stream_threshold(std::size_t bytes) noexcept {
    g_stream_threshold.store(std::max<std::size_t>(bytes, 1), std::memory_order_relaxed);
}

std::size_t choose_stream_threshold(const std::vector<StreamPoint>& points) {
    if (points.empty())
        return kDefaultStreamThreshold;
    // Closer than this is a tie: timings of a busy host move that much.
    constexpr double kMargin = 1.10;
    std::size_t threshold = 2 * points.back().size;
    for (auto p = points.rbegin(); p != points.rend(); ++p) {
        if (p->cached_gbps >= kMargin * p->streamed_gbps)
            break;
        if (p->streamed_gbps >= kMargin * p->cached_gbps)
            threshold = p->size;
    }
    return threshold;
}

StreamCalibration calibrate_stream_threshold() {
    constexpr std::size_t kMin = 1ULL << 20;
    constexpr std::size_t kMax = 32ULL << 20;
    constexpr std::size_t kPage = 4096;
    constexpr std::size_t kRounds = 3;
    auto src = std::make_unique_for_overwrite<std::byte[]>(kMax);
    auto dst = std::make_unique_for_overwrite<std::byte[]>(kMax);
    std::memset(src.get(), 0x5a, kMax);
    std::memset(dst.get(), 0, kMax);
    // As a DMA copy of host pages moves them: a piece per page.
    auto run = [&](std::size_t n, bool nt) {
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t at = 0; at < n; at += kPage) {
            if (nt)
                stream(dst.get() + at, src.get() + at, kPage);
            else
                std::memcpy(dst.get() + at, src.get() + at, kPage);
        }
        if (nt)
            stream_fence();
        const auto t = std::chrono::steady_clock::now() - t0;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t).count();
        return static_cast<double>(n) / static_cast<double>(std::max<std::int64_t>(ns, 1));
    };
    StreamCalibration c;
    for (std::size_t n = kMin; n <= kMax; n *= 2) {
        // Each way in a row, after a warm-up: streamed stores evict the
        // destination, which would cost the next cached copy its reads.
        // The best of at least kRounds and at least kMax bytes.
        auto best = [&](bool nt) {
            double gbps = run(n, nt);
            for (std::size_t r = 0; r < kRounds || r * n < kMax; ++r)
                gbps = std::max(gbps, run(n, nt));
            return gbps;
        };
        StreamPoint p{n, 0.0, 0.0};
        p.cached_gbps = best(false);
        p.streamed_gbps = best(true);
        c.points.push_back(p);
    }
    c.threshold = choose_stream_threshold(c.points);
    return c;
}

} // namespace rbln::emu::dma
