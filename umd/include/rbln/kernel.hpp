// SPDX-License-Identifier: GPL-2.0
// rbln/kernel.hpp - the one narrow interface through which librbln talks to
// rbln.ko.  KernelDevice is the only code that issues ioctls; tests put a
// fake behind KernelInterface (tests/umd/fake_kernel.hpp).  Every failure
// is an rbln::Error made by kernel_error(): the operation, the errno and a
// sentence saying what it means for the caller.  io_uring comes later.
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

#include "rbln/detail/unique_fd.hpp"
#include "rbln/error.hpp"
#include "rbln/identity.hpp"

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

/// RBLN_BO_CREATE input (uAPI drm_rbln_bo_create).
struct BoCreateArgs {
    std::uint64_t size = 0;
    std::uint32_t region = 0; ///< RBLN_REGION_HOST, _HBM or _AUTO
    std::uint32_t chiplet = 0;
    std::uint32_t flags = 0; ///< RBLN_BO_*
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
    std::uint32_t region = 0;
    std::uint32_t chiplet = 0;
    std::uint32_t flags = 0;
};

/// A syncobj and a timeline point (0: binary).
struct SyncPoint {
    std::uint32_t handle = 0;
    std::uint64_t point = 0;
};

/// RBLN_SUBMIT input.
struct SubmitArgs {
    std::uint32_t queue_id = 0;
    std::uint32_t cmd_handle = 0;
    std::uint32_t cmd_size = 0;
    std::uint64_t cmd_offset = 0;
    std::span<const std::uint32_t> bo_handles;
    std::span<const SyncPoint> in_syncs;
    SyncPoint out; ///< handle 0: none
};

/// RBLN_WAIT input: a queue + seqno, or a syncobj point.
struct WaitArgs {
    std::uint32_t queue_id = 0;
    std::uint64_t seqno = 0;
    std::optional<SyncPoint> sync; ///< set: wait for it instead of queue_id + seqno
    std::int64_t deadline_ns = 0;  ///< absolute CLOCK_MONOTONIC; 0 polls
};

/// RBLN_WAIT outcome: done (with the job's 0 / -errno) or the deadline passed.
struct WaitResult {
    bool done = false;
    int job_error = 0;
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
    virtual BoHandle bo_userptr(void* addr, std::uint64_t size, std::uint32_t flags) = 0;
    /// DRM_IOCTL_GEM_CLOSE.
    virtual void gem_close(std::uint32_t handle) = 0;
    /// mmap(MAP_SHARED, read-write) of @size bytes at @offset (BO_INFO's mmap_offset).
    virtual void* mmap(std::uint64_t offset, std::size_t size) = 0;
    /// munmap of a mapping mmap() returned.
    virtual void munmap(void* addr, std::size_t size) = 0;
    /// DRM_IOCTL_RBLN_QUEUE_CREATE; returns the queue id.
    virtual std::uint32_t queue_create(std::uint32_t chiplet_mask, std::uint32_t priority) = 0;
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

    KernelDevice(Key key, detail::UniqueFd fd, std::string path, DrmVersion version);
    ~KernelDevice() override;

    const std::string& path() const override { return path_; }
    const DrmVersion& drm_version() const override { return version_; }
    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override;
    BoHandle bo_create(const BoCreateArgs& args) override;
    BoDescription bo_info(std::uint32_t handle) override;
    BoHandle bo_userptr(void* addr, std::uint64_t size, std::uint32_t flags) override;
    void gem_close(std::uint32_t handle) override;
    void* mmap(std::uint64_t offset, std::size_t size) override;
    void munmap(void* addr, std::size_t size) override;
    std::uint32_t queue_create(std::uint32_t chiplet_mask, std::uint32_t priority) override;
    void queue_destroy(std::uint32_t queue_id) override;
    std::uint64_t submit(const SubmitArgs& args) override;
    WaitResult wait(const WaitArgs& args) override;
    std::uint32_t syncobj_create(std::uint32_t flags) override;
    void syncobj_destroy(std::uint32_t handle) override;

    int fd() const noexcept { return fd_.get(); }

private:
    /// In a fork() child of the opener (see the class comment).
    bool in_child() const noexcept;

    detail::UniqueFd fd_;
    std::string path_;
    DrmVersion version_;
    long opener_; ///< the process that opened it
};

/// How discovery opens a node; tests substitute a fake.
using DeviceOpener = std::function<Result<std::unique_ptr<KernelInterface>>(const std::string&)>;

/// The default opener: KernelDevice::open.
Result<std::unique_ptr<KernelInterface>> open_kernel_device(const std::string& path);

} // namespace rbln
