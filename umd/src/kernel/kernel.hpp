// SPDX-License-Identifier: GPL-2.0
// kernel.hpp - (internal to librbln) the one narrow interface through which
// librbln talks to rbln.ko: the ioctls, mmap, and the io_uring command ring (make_ring()).
// Its types are librbln's own (typed regions, priorities and flags, jobs
// as SubmitArgs); the uAPI structs of drm/rbln_accel.h are filled in one
// place behind it (kernel/kernel_uapi.hpp, used by KernelDevice and its
// io_uring ring), so the ioctl and io_uring paths hand the kernel the same
// job.  Tests put a fake behind KernelInterface (tests/umd/fake_kernel.hpp).
// Every failure is an rbln::Error made by kernel_error(): the operation,
// the errno and a sentence saying what it means for the caller.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "kernel/unique_fd.hpp"
#include "rbln/error.hpp"
#include "rbln/identity.hpp"
#include "rbln/submitter_options.hpp"

namespace rbln {

/// The answer of DRM_IOCTL_VERSION.
struct DrmVersion {
    int major = 0;
    int minor = 0;
    int patchlevel = 0;
    std::string name;
    std::string date;
    std::string desc;
};

/// The operations of KernelInterface (for errors, fakes and call counts).
enum class KernelOp : unsigned {
    Open,
    GetInfo,
    BoCreate,
    BoInfo,
    BoUserptr,
    GemClose,
    Mmap,
    Munmap,
    QueueCreate,
    QueueDestroy,
    Submit,
    Wait,
    SyncobjCreate,
    SyncobjDestroy,
};
inline constexpr unsigned kKernelOpCount = 14;

/// "ioctl RBLN_BO_CREATE", "mmap", ... (the operation of an Error).
std::string_view kernel_op_name(KernelOp op) noexcept;

/// The Error for @op failing with @err on the node @path: code from the
/// errno, a message saying what it means for this operation.
Error kernel_error(KernelOp op, const std::string& path, int err);

/// Where a buffer lives (uAPI RBLN_REGION_*).  BO_CREATE takes Host, Hbm
/// or Auto; BO_INFO also reports Userptr and Import.
enum class Region : std::uint32_t {
    Host,    ///< host RAM (GEM shmem), CPU cached
    Hbm,     ///< HBM of the given chiplet
    Auto,    ///< HBM, the driver picks the chiplet
    Userptr, ///< reported only: pinned user pages
    Import,  ///< reported only: a foreign dma-buf
};

/// A queue's scheduling priority (uAPI RBLN_QUEUE_PRIORITY_*); High needs
/// CAP_SYS_NICE.
enum class QueuePriority : std::uint32_t { Low, Normal, High };

/// Flags of a buffer (uAPI RBLN_BO_*).
enum class BoFlags : std::uint32_t {
    None = 0,
    DeviceReadOnly = 1u << 0, ///< the card may only read it
};

/// Flags of BO_USERPTR (uAPI RBLN_USERPTR_*).
enum class UserptrFlags : std::uint32_t {
    None = 0,
    ReadOnly = 1u << 0, ///< pinned for reading: the card cannot write it
};

/// Flags of a job (uAPI RBLN_SUBMIT_*).
enum class SubmitFlags : std::uint32_t {
    None = 0,
    /// The job does not wait for the implicit fences of its buffers that
    /// are shared (exported or imported dma-bufs): explicit sync.
    NoImplicitWait = 1u << 0,
};

/// The flag types combine with | and ~ and test with & or has().
template <typename F>
concept KernelFlags =
    std::is_same_v<F, BoFlags> || std::is_same_v<F, UserptrFlags> || std::is_same_v<F, SubmitFlags>;

template <KernelFlags F> constexpr F operator|(F a, F b) noexcept {
    return static_cast<F>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
template <KernelFlags F> constexpr F operator&(F a, F b) noexcept {
    return static_cast<F>(static_cast<std::uint32_t>(a) & static_cast<std::uint32_t>(b));
}
template <KernelFlags F> constexpr F operator~(F a) noexcept {
    return static_cast<F>(~static_cast<std::uint32_t>(a));
}
/// Whether @flags has every bit of @bits.
template <KernelFlags F> constexpr bool has(F flags, F bits) noexcept {
    return (flags & bits) == bits;
}

/// RBLN_BO_CREATE input.
struct BoCreateArgs {
    std::uint64_t size = 0;
    Region region = Region::Host; ///< Host, Hbm or Auto
    std::uint32_t chiplet = 0;    ///< Hbm: the chiplet; else 0
    BoFlags flags = BoFlags::None;
};

/// A buffer as BO_CREATE / BO_USERPTR return it.
struct BoHandle {
    std::uint32_t handle = 0;
    std::uint64_t size = 0; ///< as allocated (rounded up)
    std::uint32_t chiplet = 0;
    std::uint64_t device_va = 0;
};

/// RBLN_BO_INFO output.
struct BoDescription {
    std::uint64_t mmap_offset = 0;
    std::uint64_t size = 0;
    std::uint64_t device_va = 0;
    Region region = Region::Host;
    std::uint32_t chiplet = 0;
    BoFlags flags = BoFlags::None;
};

/// A syncobj and a timeline point (0: binary).
struct SyncPoint {
    std::uint32_t handle = 0;
    std::uint64_t point = 0;
};

/// One job for RBLN_SUBMIT, on either path (the ioctl or the io_uring
/// command): the same fields reach the kernel.
struct SubmitArgs {
    std::uint32_t queue_id = 0;
    std::uint32_t cmd_handle = 0;
    std::uint32_t cmd_size = 0;
    std::uint64_t cmd_offset = 0;
    std::span<const std::uint32_t> bo_handles;
    std::span<const SyncPoint> in_syncs;
    SyncPoint out; ///< handle 0: none
    SubmitFlags flags = SubmitFlags::None;
};

/// RBLN_WAIT input: a queue + seqno, or a syncobj point.
struct WaitArgs {
    std::uint32_t queue_id = 0;
    std::uint64_t seqno = 0;
    std::optional<SyncPoint> sync; ///< set: wait for it instead of queue_id + seqno
    std::int64_t deadline_ns = 0;  ///< absolute CLOCK_MONOTONIC; 0 polls (on a ring: none)
};

/// Why the card failed a job, beyond its errno: the completion's detail and
/// detail_arg (firmware-iface 1.4, rbln_fw_graph.h RBLN_FW_GRAPH_E_*); 0 = none.
/// exec/job_detail.hpp puts it in words.
struct JobDetail {
    std::uint32_t detail = 0;
    std::uint32_t detail_arg = 0; ///< the section, node, root slot or boundary it names
};

/// RBLN_WAIT outcome: done (with the job's 0 / -errno and the card's
/// detail of a failure) or the deadline passed.
struct WaitResult {
    bool done = false;
    int job_error = 0;
    JobDetail detail;
};

/// One CQE of a command ring.
struct RingCompletion {
    std::uint64_t user_data = 0;
    std::int32_t res = 0;
    std::uint64_t extra = 0; ///< big_cqe[0]: the job's seqno (0: SUBMIT refused it)
};

/// How a ring is set up: any thread submits and reaps (the default),
/// IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (only its maker's thread), or
/// IORING_SETUP_SQPOLL (any thread; a kernel thread issues the SQEs).
enum class RingMode { AnyThread, SingleIssuer, SqPoll };

/// The io_uring (SQE128, CQE32) of an open node, in jobs: push_submit()
/// and push_wait() fill the SQEs of the uAPI's uring commands
/// (RBLN_URING_CMD_SUBMIT, _WAIT) from the same SubmitArgs / WaitArgs the
/// ioctls take.  Made by KernelInterface::make_ring(); tests substitute
/// fakes.  Not thread-safe by itself: Submitter calls push/submit/drain
/// under its mutex and wait_for_completion() from the one reaping thread.
class CommandRing {
public:
    CommandRing() = default;
    CommandRing(const CommandRing&) = delete;
    CommandRing& operator=(const CommandRing&) = delete;
    CommandRing(CommandRing&&) = delete;
    CommandRing& operator=(CommandRing&&) = delete;
    virtual ~CommandRing() = default;

    /// How the ring was set up (SqPoll only if the kernel granted it).
    virtual RingMode mode() const noexcept = 0;
    /// Free SQEs.
    virtual unsigned space() const = 0;
    /// Fills one SQE: the SUBMIT of @job.  Its CQE comes when the job is
    /// done: res 0 or the job's -errno (or SUBMIT's), extra its seqno (0:
    /// refused).  The arrays @job's spans point to must stay valid until
    /// that CQE was drained (the kernel may read them until it issues the
    /// command).  Precondition: space() > 0.
    virtual void push_submit(const SubmitArgs& job, std::uint64_t user_data) = 0;
    /// Fills one SQE: a WAIT (@wait.deadline_ns 0: none).  Its CQE: res the
    /// job error, -ETIME or -ENOENT; extra the seqno waited for.
    /// Precondition: space() > 0.
    virtual void push_wait(const WaitArgs& wait, std::uint64_t user_data) = 0;
    /// Hands the pushed SQEs to the kernel; returns how many it took or -errno.
    virtual int submit() = 0;
    /// Moves up to out.size() available CQEs into @out; returns how many.
    virtual std::size_t drain(std::span<RingCompletion> out) = 0;
    /// Blocks until at least one CQE is available (consumes none); 0 or -errno.
    virtual int wait_for_completion() = 0;
    /// Blocks until @n CQEs not yet drained are available (or fewer, on a
    /// signal: the caller re-checks); 0 or -errno.  Precondition: @n
    /// completions are certain to come.  Default: wait_for_completion().
    virtual int wait_for_completions(unsigned n) {
        (void)n;
        return wait_for_completion();
    }
};

/// What an open rbln node can do.  Implementations: KernelDevice (the real
/// node) and fakes in tests.
class KernelInterface {
public:
    KernelInterface() = default;
    KernelInterface(const KernelInterface&) = delete;
    KernelInterface& operator=(const KernelInterface&) = delete;
    KernelInterface(KernelInterface&&) = delete;
    KernelInterface& operator=(KernelInterface&&) = delete;
    virtual ~KernelInterface() = default;

    /// The node's path (for messages).
    virtual const std::string& path() const = 0;
    /// DRM_IOCTL_VERSION as read at open time.
    virtual const DrmVersion& drm_version() const = 0;
    /// DRM_IOCTL_RBLN_GET_INFO: the kernel writes min(out.size(), full)
    /// bytes into @out; returns the full size of the answer.  Throws Error.
    virtual std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) = 0;

    /// DRM_IOCTL_RBLN_BO_CREATE.
    virtual BoHandle bo_create(const BoCreateArgs& args) = 0;
    /// DRM_IOCTL_RBLN_BO_INFO.
    virtual BoDescription bo_info(std::uint32_t handle) = 0;
    /// DRM_IOCTL_RBLN_BO_USERPTR: pins @size bytes at @addr (page-aligned).
    virtual BoHandle bo_userptr(void* addr, std::uint64_t size, UserptrFlags flags) = 0;
    /// DRM_IOCTL_GEM_CLOSE.
    virtual void gem_close(std::uint32_t handle) = 0;
    /// mmap(MAP_SHARED, read-write) of @size bytes at @offset (BO_INFO's mmap_offset).
    virtual void* mmap(std::uint64_t offset, std::size_t size) = 0;
    /// munmap of a mapping mmap() returned.
    virtual void munmap(void* addr, std::size_t size) = 0;
    /// DRM_IOCTL_RBLN_QUEUE_CREATE; returns the queue id.
    virtual std::uint32_t queue_create(std::uint32_t chiplet_mask, QueuePriority priority) = 0;
    /// DRM_IOCTL_RBLN_QUEUE_DESTROY.
    virtual void queue_destroy(std::uint32_t queue_id) = 0;
    /// DRM_IOCTL_RBLN_SUBMIT; returns the job's seqno in its queue.
    virtual std::uint64_t submit(const SubmitArgs& args) = 0;
    /// DRM_IOCTL_RBLN_WAIT; -ETIME is WaitResult{done = false}, not an error.
    virtual WaitResult wait(const WaitArgs& args) = 0;
    /// DRM_IOCTL_SYNCOBJ_CREATE (libdrm); returns the handle.
    virtual std::uint32_t syncobj_create(std::uint32_t flags) = 0;
    /// DRM_IOCTL_SYNCOBJ_DESTROY (libdrm).
    virtual void syncobj_destroy(std::uint32_t handle) = 0;
    /// An io_uring for this node's uring commands, @entries SQEs, in @mode
    /// (SingleIssuer: the calling thread is the issuer; SqPoll: the ring's
    /// thread polls @sq_idle_ms, 1..kMaxSqpollIdleMs, after the last
    /// submission before it sleeps).  An Error carries the errno of
    /// io_uring_setup (ENOSYS, EPERM under kernel.io_uring_disabled, ...)
    /// when there is none.  Default: none (ENOTSUP): the caller uses the
    /// ioctls.
    virtual Result<std::unique_ptr<CommandRing>> make_ring(unsigned entries, RingMode mode,
                                                           unsigned sq_idle_ms);
};

/// GET_INFO(RBLN_INFO_DEVICE) with the size protocol; validates the answer
/// (chiplet count, NUL-terminated strings) and throws Errc::BadValue if not.
DeviceIdentity query_device_identity(KernelInterface& kernel);

/// GET_INFO(RBLN_INFO_TELEMETRY); an admin round trip to the card.
TelemetrySample query_telemetry(KernelInterface& kernel);

/// The real /dev/accel/accelN.
///
/// In a fork() child of the process that opened it, gem_close,
/// queue_destroy and syncobj_destroy do nothing: the child shares the open
/// file, so the handles are the parent's, and a copy of a librbln object
/// dropped in the child (a pinned block, a stream) must not take them
/// away; the kernel frees them when the last descriptor is closed.
class KernelDevice final : public KernelInterface {
    struct Key {
        explicit Key() = default;
    };

public:
    /// open(O_RDWR | O_CLOEXEC) and DRM_IOCTL_VERSION; fails with
    /// Errc::WrongDriver unless the node is served by "rbln".
    static Result<std::unique_ptr<KernelDevice>> open(const std::string& path);
    /// The same over a descriptor of @path the caller opened (O_CLOEXEC
    /// is the caller's to set).  The caller may keep another descriptor of
    /// the same open file (dup) for what librbln does not do, e.g. export
    /// a buffer as a dma-buf: the GEM handles are the open file's.
    static Result<std::unique_ptr<KernelDevice>> adopt(detail::UniqueFd fd,
                                                       const std::string& path);

    KernelDevice(Key key, detail::UniqueFd fd, std::string path, DrmVersion version);
    ~KernelDevice() override;

    const std::string& path() const override { return path_; }
    const DrmVersion& drm_version() const override { return version_; }
    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override;
    BoHandle bo_create(const BoCreateArgs& args) override;
    BoDescription bo_info(std::uint32_t handle) override;
    BoHandle bo_userptr(void* addr, std::uint64_t size, UserptrFlags flags) override;
    void gem_close(std::uint32_t handle) override;
    void* mmap(std::uint64_t offset, std::size_t size) override;
    void munmap(void* addr, std::size_t size) override;
    std::uint32_t queue_create(std::uint32_t chiplet_mask, QueuePriority priority) override;
    void queue_destroy(std::uint32_t queue_id) override;
    std::uint64_t submit(const SubmitArgs& args) override;
    WaitResult wait(const WaitArgs& args) override;
    std::uint32_t syncobj_create(std::uint32_t flags) override;
    void syncobj_destroy(std::uint32_t handle) override;
    /// The real io_uring on this node (kernel/kernel_uring.cpp).
    Result<std::unique_ptr<CommandRing>> make_ring(unsigned entries, RingMode mode,
                                                   unsigned sq_idle_ms) override;

private:
    /// In a fork() child of the opener (see the class comment).
    bool in_child() const noexcept;

    detail::UniqueFd fd_;
    std::string path_;
    DrmVersion version_;
    long opener_; ///< the process that opened it
};

/// The default opener (rbln/discovery.hpp's DeviceOpener): KernelDevice::open.
Result<std::unique_ptr<KernelInterface>> open_kernel_device(const std::string& path);

} // namespace rbln
