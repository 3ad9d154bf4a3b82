// SPDX-License-Identifier: GPL-2.0
/*
 * rbln_bench - buffer-object costs of rbln.ko, with their baselines measured
 * in the same run (inside the VM: absolute figures of software emulation
 * mean little, ratios within one run do).
 *
 *   BO create + destroy (RBLN_BO_CREATE + GEM_CLOSE), host and HBM, for
 *     4 KiB, 2 MiB and 64 MiB, against the in-tree vgem driver
 *     (DRM_IOCTL_MODE_CREATE_DUMB + GEM_CLOSE of the same size) and against
 *     an anonymous mmap + munmap of the same size;
 *   userptr pinning (RBLN_BO_USERPTR + GEM_CLOSE) of 2 MiB and 64 MiB of
 *     populated memory in GB/s, against mlock + munlock of the same range.
 *
 * Every figure is the rate over at least --min-ms milliseconds and
 * --min-iters iterations.  No figure is judged here: this prints a table.
 *
 *   rbln_bench [--card N] [--min-ms MS] [--min-iters N]
 */
#include <drm/rbln_accel.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

[[noreturn]] void fail(const std::string& what, int err) {
    throw std::system_error(err, std::generic_category(), what);
}

/* An owned file descriptor. */
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    ~Fd() { reset(); }
    [[nodiscard]] int get() const { return fd_; }
    [[nodiscard]] bool valid() const { return fd_ >= 0; }

private:
    void reset() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = -1;
    }
    int fd_ = -1;
};

/* An owned anonymous mapping. */
class Mapping {
public:
    explicit Mapping(std::size_t len) : len_(len) {
        addr_ = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (addr_ == MAP_FAILED) {
            fail("mmap", errno);
        }
        std::memset(addr_, 0x5a, len); // pages of its own, as a framework's buffer
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    Mapping(Mapping&&) = delete;
    Mapping& operator=(Mapping&&) = delete;
    ~Mapping() { ::munmap(addr_, len_); }
    [[nodiscard]] void* addr() const { return addr_; }
    [[nodiscard]] std::size_t size() const { return len_; }

private:
    void* addr_ = nullptr;
    std::size_t len_;
};

int xioctl(int fd, unsigned long req, void* arg) {
    int r = 0;
    do {
        r = ::ioctl(fd, req, arg);
    } while (r != 0 && (errno == EINTR || errno == EAGAIN));
    return r == 0 ? 0 : errno;
}

std::string drm_driver_name(int fd) {
    std::array<char, 64> name{};
    drm_version v{};
    v.name = name.data();
    v.name_len = name.size() - 1;
    if (xioctl(fd, DRM_IOCTL_VERSION, &v) != 0) {
        return {};
    }
    return {name.data()};
}

std::string read_link_base(const fs::path& p) {
    std::error_code ec;
    fs::path t = fs::read_symlink(p, ec);
    return ec ? std::string{} : t.filename().string();
}

struct RblnCard {
    Fd fd;
    std::string node;
    std::string bdf;
    drm_rbln_info_device dev{};
};

/* The @index-th rbln accel node in PCI address order. */
RblnCard open_rbln(unsigned index) {
    std::vector<std::pair<std::string, std::string>> nodes; // bdf, node
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/sys/class/accel", ec)) {
        std::string name = e.path().filename().string();
        if (name.rfind("accel", 0) != 0 || read_link_base(e.path() / "device/driver") != "rbln") {
            continue;
        }
        nodes.emplace_back(read_link_base(e.path() / "device"), name);
    }
    std::sort(nodes.begin(), nodes.end());
    if (index >= nodes.size()) {
        throw std::runtime_error("no rbln card #" + std::to_string(index) + " (found " +
                                 std::to_string(nodes.size()) + ")");
    }
    RblnCard c;
    c.bdf = nodes[index].first;
    c.node = nodes[index].second;
    c.fd = Fd(::open(("/dev/accel/" + c.node).c_str(), O_RDWR | O_CLOEXEC));
    if (!c.fd.valid()) {
        fail("open /dev/accel/" + c.node, errno);
    }
    drm_rbln_get_info q{};
    q.type = RBLN_INFO_DEVICE;
    q.size = sizeof(c.dev);
    q.ptr = reinterpret_cast<std::uintptr_t>(&c.dev);
    if (int err = xioctl(c.fd.get(), DRM_IOCTL_RBLN_GET_INFO, &q); err != 0) {
        fail("GET_INFO(DEVICE)", err);
    }
    return c;
}

/* The first DRM card node whose driver is vgem, if any. */
std::optional<std::pair<Fd, std::string>> open_vgem() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/dri", ec)) {
        std::string n = e.path().filename().string();
        if (n.rfind("card", 0) == 0) {
            names.push_back(n);
        }
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        Fd fd(::open(("/dev/dri/" + n).c_str(), O_RDWR | O_CLOEXEC));
        if (fd.valid() && drm_driver_name(fd.get()) == "vgem") {
            return std::make_pair(std::move(fd), n);
        }
    }
    return std::nullopt;
}

struct Options {
    unsigned card = 0;
    double min_ms = 300;
    unsigned min_iters = 5;
};

/* Runs @op until both budgets are spent; operations per second. */
double rate(const Options& o, const std::function<void()>& op) {
    using clock = std::chrono::steady_clock;
    op(); // warm-up, also proves the operation works
    unsigned n = 0;
    auto t0 = clock::now();
    std::chrono::duration<double, std::milli> ms{};
    do {
        op();
        ++n;
        ms = clock::now() - t0;
    } while (n < o.min_iters || ms.count() < o.min_ms);
    return n * 1000.0 / ms.count();
}

void gem_close(int fd, std::uint32_t handle) {
    drm_gem_close c{};
    c.handle = handle;
    if (int err = xioctl(fd, DRM_IOCTL_GEM_CLOSE, &c); err != 0) {
        fail("GEM_CLOSE", err);
    }
}

void rbln_create_destroy(int fd, std::uint32_t region, std::uint64_t size) {
    drm_rbln_bo_create c{};
    c.size = size;
    c.region = region;
    if (int err = xioctl(fd, DRM_IOCTL_RBLN_BO_CREATE, &c); err != 0) {
        fail("RBLN_BO_CREATE of " + std::to_string(size), err);
    }
    gem_close(fd, c.handle);
}

void vgem_create_destroy(int fd, std::uint64_t size) {
    drm_mode_create_dumb d{};
    d.width = 1024; // 4 KiB rows of 32-bit pixels
    d.bpp = 32;
    d.height = static_cast<std::uint32_t>(size / (4 * KiB));
    if (int err = xioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &d); err != 0) {
        fail("MODE_CREATE_DUMB of " + std::to_string(size), err);
    }
    gem_close(fd, d.handle);
}

void mmap_munmap(std::uint64_t size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fail("mmap", errno);
    }
    ::munmap(p, size);
}

void pin_unpin(int fd, const Mapping& m) {
    drm_rbln_bo_userptr u{};
    u.addr = reinterpret_cast<std::uintptr_t>(m.addr());
    u.size = m.size();
    if (int err = xioctl(fd, DRM_IOCTL_RBLN_BO_USERPTR, &u); err != 0) {
        fail("RBLN_BO_USERPTR of " + std::to_string(m.size()), err);
    }
    gem_close(fd, u.handle);
}

void mlock_munlock(const Mapping& m) {
    if (::mlock(m.addr(), m.size()) != 0) {
        fail("mlock", errno);
    }
    ::munlock(m.addr(), m.size());
}

std::string size_name(std::uint64_t s) {
    return s >= MiB ? std::to_string(s / MiB) + " MiB" : std::to_string(s / KiB) + " KiB";
}

std::string num(double v, const char* fmt = "%.0f") {
    if (std::isnan(v)) {
        return "n/a";
    }
    std::array<char, 32> b{};
    std::snprintf(b.data(), b.size(), fmt, v);
    return {b.data()};
}

std::string ratio(double a, double b) {
    return (std::isnan(a) || std::isnan(b) || b == 0) ? "n/a" : num(a / b, "%.3f");
}

bool parse_uint(std::string_view s, unsigned& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

Options parse(int argc, char** argv) {
    Options o;
    std::vector<std::string_view> args(argv + 1, argv + argc);
    // options come in pairs: name, value
    for (std::size_t i = 0; i < args.size(); i += 2) {
        unsigned v = 0;
        bool has_value = i + 1 < args.size() && parse_uint(args[i + 1], v);
        if (args[i] == "--card" && has_value) {
            o.card = v;
        } else if (args[i] == "--min-ms" && has_value) {
            o.min_ms = v;
        } else if (args[i] == "--min-iters" && has_value && v > 0) {
            o.min_iters = v;
        } else {
            throw std::runtime_error("usage: rbln_bench [--card N] [--min-ms MS] [--min-iters N]");
        }
    }
    return o;
}

/* The rate of @op, or NaN (with a note on stderr) if it fails. */
double try_rate(const Options& o, const std::string& what, const std::function<void()>& op) {
    try {
        return rate(o, op);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rbln_bench: %s: %s\n", what.c_str(), e.what());
        return NAN;
    }
}

int run(int argc, char** argv) {
    const Options o = parse(argc, argv);
    RblnCard card = open_rbln(o.card);
    auto vgem = open_vgem();
    const int fd = card.fd.get();

    const std::string baseline = vgem ? "vgem " + vgem->second : "vgem not loaded (n/a)";
    std::printf("# rbln_bench: %s (%s), %s, %u chiplet(s) of %llu MiB; baseline %s\n",
                card.node.c_str(), card.bdf.c_str(),
                card.dev.family == RBLN_FAMILY_REBEL100 ? "Rebel100" : "ATOM",
                card.dev.chiplet_count, static_cast<unsigned long long>(card.dev.hbm_size[0] / MiB),
                baseline.c_str());
    std::printf("# each figure: >= %.0f ms and >= %u iterations, one run\n\n", o.min_ms,
                o.min_iters);

    constexpr std::array<std::uint64_t, 3> sizes{4 * KiB, 2 * MiB, 64 * MiB};
    std::printf("%-26s %8s %12s %12s %12s %10s %10s\n", "BO create+destroy", "size", "ours/s",
                "vgem/s", "mmap/s", "ours/vgem", "ours/mmap");
    std::array<double, sizes.size()> vgem_cache{};
    std::array<double, sizes.size()> mmap_cache{};
    for (std::size_t s = 0; s < sizes.size(); ++s) {
        const std::uint64_t size = sizes[s];
        vgem_cache[s] = vgem ? try_rate(o, "vgem " + size_name(size),
                                        [&] { vgem_create_destroy(vgem->first.get(), size); })
                             : NAN;
        mmap_cache[s] = try_rate(o, "mmap " + size_name(size), [&] { mmap_munmap(size); });
    }
    for (std::uint32_t region : {RBLN_REGION_HOST, RBLN_REGION_HBM}) {
        for (std::size_t s = 0; s < sizes.size(); ++s) {
            const std::uint64_t size = sizes[s];
            const char* rname = region == RBLN_REGION_HOST ? "host" : "HBM (chiplet 0)";
            double ours = try_rate(o, std::string(rname) + " " + size_name(size),
                                   [&] { rbln_create_destroy(fd, region, size); });
            std::printf("%-26s %8s %12s %12s %12s %10s %10s\n", rname, size_name(size).c_str(),
                        num(ours).c_str(), num(vgem_cache[s]).c_str(), num(mmap_cache[s]).c_str(),
                        ratio(ours, vgem_cache[s]).c_str(), ratio(ours, mmap_cache[s]).c_str());
        }
    }

    std::printf("\n%-26s %8s %12s %12s %10s\n", "pin+unpin (userptr)", "size", "ours GB/s",
                "mlock GB/s", "ours/mlock");
    for (std::uint64_t size : {2 * MiB, 64 * MiB}) {
        Mapping m(size);
        double pin = try_rate(o, "userptr " + size_name(size), [&] { pin_unpin(fd, m); });
        double lock = try_rate(o, "mlock " + size_name(size), [&] { mlock_munlock(m); });
        double gb = static_cast<double>(size) / 1e9;
        std::printf("%-26s %8s %12s %12s %10s\n", "userptr", size_name(size).c_str(),
                    num(pin * gb, "%.2f").c_str(), num(lock * gb, "%.2f").c_str(),
                    ratio(pin, lock).c_str());
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rbln_bench: %s\n", e.what());
        return 1;
    }
}
