// SPDX-License-Identifier: GPL-2.0
// kernel_device.cpp - the only code of librbln that issues ioctls (its
// io_uring ring is kernel_uring.cpp); the uAPI structs are filled by
// kernel_uapi.hpp.

#include "kernel/kernel.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include <xf86drm.h>

#include "kernel/kernel_uapi.hpp"
#include "kernel/unique_fd.hpp"
#include "runtime/error_text.hpp"

namespace rbln {

using detail::uapi;

namespace {

// The v1 answer sizes: a kernel never answers less than the first version.
constexpr std::uint32_t kDeviceV1Size = sizeof(drm_rbln_info_device);
constexpr std::uint32_t kTelemetryV1Size = sizeof(drm_rbln_info_telemetry);

template <std::size_t N>
std::string fixed_string(const char (&field)[N], const std::string& path, const char* name) {
    const void* nul = std::memchr(field, '\0', N);
    if (nul == nullptr)
        throw Error(Errc::BadValue, "ioctl GET_INFO(DEVICE)", path, 0,
                    std::string("the kernel's ") + name + " is not NUL-terminated");
    return {field, static_cast<const char*>(nul)};
}

template <typename T>
std::uint32_t query(KernelInterface& kernel, std::uint32_t type, T& answer, std::uint32_t min_size,
                    const char* what) {
    std::memset(&answer, 0, sizeof(answer));
    const std::uint32_t full = kernel.get_info(
        type, std::span<std::byte>(reinterpret_cast<std::byte*>(&answer), sizeof(answer)));
    if (full < min_size)
        throw Error(Errc::BadValue, std::string("ioctl GET_INFO(") + what + ")", kernel.path(), 0,
                    "the kernel answered " + std::to_string(full) + " bytes, less than the " +
                        std::to_string(min_size) + " of uAPI v1: rbln.ko and librbln disagree");
    return full;
}

std::string errno_tag(int err) {
    return " (" + detail::errno_name(err) + ")";
}

// What @err means for @op, as "<meaning>", "<what to do>" (either may be
// empty); nullopt: the generic errno text of Error::from_errno fits.
struct Meaning {
    const char* meaning;
    const char* todo;
};

std::optional<Meaning> meaning_of(KernelOp op, int err) {
    switch (op) {
    case KernelOp::BoCreate:
        switch (err) {
        case ENOSPC:
            return Meaning{"the chiplet (for AUTO: every chiplet) has no free block that large "
                           "right now; nothing was allocated",
                           "free device buffers or use another chiplet"};
        case E2BIG:
            return Meaning{"the buffer is larger than the chiplet's HBM and can never fit",
                           "split it or place it in host memory"};
        case ENOMEM:
            return Meaning{"host memory or device address space is exhausted", "free buffers"};
        case EINVAL:
            return Meaning{"the kernel refused the size, region, chiplet or flags",
                           "check the chiplet exists on this card (HOST and AUTO take "
                           "chiplet 0)"};
        case EIO:
            return Meaning{"the card is not ready", "see the kernel log (dmesg)"};
        default:
            break;
        }
        break;
    case KernelOp::BoInfo:
    case KernelOp::GemClose:
        if (err == ENOENT || (op == KernelOp::GemClose && err == EINVAL))
            return Meaning{"no such buffer handle in this open file",
                           "it was closed already or belongs to another open file"};
        break;
    case KernelOp::BoUserptr:
        switch (err) {
        case EFAULT:
            return Meaning{"the range is not mapped in this process (or not writable "
                           "without RBLN_USERPTR_READ_ONLY)",
                           "pass memory the process owns"};
        case ENOMEM:
            return Meaning{"pinning it would pass RLIMIT_MEMLOCK (or memory is exhausted)",
                           "raise 'ulimit -l' or grant CAP_IPC_LOCK"};
        case EINVAL:
            return Meaning{"address and size must be non-zero and page-aligned and the flags "
                           "known",
                           ""};
        default:
            break;
        }
        break;
    case KernelOp::Mmap:
        if (err == EINVAL)
            return Meaning{"the offset is not a buffer of this open file or the size does not "
                           "fit the buffer",
                           "map at the offset BO_INFO returned, at most the buffer's size"};
        if (err == ENOMEM)
            return Meaning{"no address space left for the mapping", ""};
        break;
    case KernelOp::QueueCreate:
        switch (err) {
        case EACCES:
        case EPERM:
            return Meaning{"high priority needs CAP_SYS_NICE", "use normal priority"};
        case ENOSPC:
            return Meaning{"this open file has 256 queues already", "destroy unused queues"};
        case EINVAL:
            return Meaning{"the chiplet mask or priority is not valid for this card", ""};
        default:
            break;
        }
        break;
    case KernelOp::QueueDestroy:
        if (err == ENOENT)
            return Meaning{"no such queue in this open file", ""};
        break;
    case KernelOp::Submit:
        switch (err) {
        case ENOENT:
            return Meaning{"an unknown queue, buffer handle or syncobj; nothing was queued",
                           "it was destroyed or belongs to another open file"};
        case ERANGE:
            return Meaning{"the commands run past the end of the command buffer; nothing was "
                           "queued",
                           ""};
        case EINVAL:
            return Meaning{"the kernel refused the job's sizes, alignment, counts or flags; "
                           "nothing was queued",
                           "commands are 8..1 MiB, multiples of 8, at most 4096 buffers and 64 "
                           "in-syncs"};
        case EIO:
            return Meaning{"the card is not usable (failed or resetting); nothing was queued",
                           "see the kernel log (dmesg)"};
        case ENOMEM:
            return Meaning{"memory for the job is exhausted; nothing was queued", ""};
        default:
            break;
        }
        break;
    case KernelOp::Wait:
        switch (err) {
        case ENOENT:
            return Meaning{"an unknown queue or syncobj, or a seqno not yet submitted", ""};
        case EINTR:
            return Meaning{"interrupted by a signal", "wait again"};
        case EINVAL:
            return Meaning{"the kernel refused the wait's flags or fields (or the syncobj "
                           "has no fence)",
                           ""};
        default:
            break;
        }
        break;
    case KernelOp::SyncobjDestroy:
        if (err == EINVAL || err == ENOENT)
            return Meaning{"no such syncobj in this open file", ""};
        break;
    case KernelOp::Open:
    case KernelOp::GetInfo:
    case KernelOp::Munmap:
    case KernelOp::SyncobjCreate:
        break;
    }
    return std::nullopt;
}

} // namespace

std::string_view kernel_op_name(KernelOp op) noexcept {
    switch (op) {
    case KernelOp::Open:
        return "open";
    case KernelOp::GetInfo:
        return "ioctl GET_INFO";
    case KernelOp::BoCreate:
        return "ioctl BO_CREATE";
    case KernelOp::BoInfo:
        return "ioctl BO_INFO";
    case KernelOp::BoUserptr:
        return "ioctl BO_USERPTR";
    case KernelOp::GemClose:
        return "ioctl GEM_CLOSE";
    case KernelOp::Mmap:
        return "mmap";
    case KernelOp::Munmap:
        return "munmap";
    case KernelOp::QueueCreate:
        return "ioctl QUEUE_CREATE";
    case KernelOp::QueueDestroy:
        return "ioctl QUEUE_DESTROY";
    case KernelOp::Submit:
        return "ioctl SUBMIT";
    case KernelOp::Wait:
        return "ioctl WAIT";
    case KernelOp::SyncobjCreate:
        return "ioctl SYNCOBJ_CREATE";
    case KernelOp::SyncobjDestroy:
        return "ioctl SYNCOBJ_DESTROY";
    }
    return "kernel operation";
}

Error kernel_error(KernelOp op, const std::string& path, int err) {
    const auto m = meaning_of(op, err);
    if (!m)
        return Error::from_errno(std::string(kernel_op_name(op)), path, err);
    std::string detail = m->meaning + errno_tag(err);
    if (*m->todo != '\0') {
        detail += ": ";
        detail += m->todo;
    }
    const Errc code = err == ERANGE ? Errc::InvalidArgument : errc_from_errno(err);
    return Error(code, std::string(kernel_op_name(op)), path, err, std::move(detail));
}

std::string DeviceIdentity::pci_bdf() const {
    std::array<char, 32> buf{};
    std::snprintf(buf.data(), buf.size(), "%04x:%02x:%02x.%x", pci_domain, pci_bus, pci_dev,
                  pci_func);
    return buf.data();
}

DeviceIdentity query_device_identity(KernelInterface& kernel) {
    drm_rbln_info_device raw{};
    DeviceIdentity id;
    id.answer_size = query(kernel, RBLN_INFO_DEVICE, raw, kDeviceV1Size, "DEVICE");
    if (raw.chiplet_count < 1 || raw.chiplet_count > RBLN_MAX_CHIPLETS)
        throw Error(Errc::BadValue, "ioctl GET_INFO(DEVICE)", kernel.path(), 0,
                    "the kernel reports " + std::to_string(raw.chiplet_count) +
                        " chiplets; expected 1.." + std::to_string(RBLN_MAX_CHIPLETS));
    id.family = raw.family;
    id.chiplet_count = raw.chiplet_count;
    id.fw_iface_major = raw.fw_iface_major;
    id.fw_iface_minor = raw.fw_iface_minor;
    id.pci_domain = raw.pci_domain;
    id.pci_bus = raw.pci_bus;
    id.pci_dev = raw.pci_dev;
    id.pci_func = raw.pci_func;
    id.numa_node = raw.numa_node;
    for (unsigned i = 0; i < kMaxChiplets; i++)
        id.hbm_size[i] = raw.hbm_size[i];
    id.fw_version = fixed_string(raw.fw_version, kernel.path(), "fw_version");
    id.serial = fixed_string(raw.serial, kernel.path(), "serial");
    std::memcpy(id.uuid.data(), raw.uuid, id.uuid.size());
    return id;
}

TelemetrySample query_telemetry(KernelInterface& kernel) {
    drm_rbln_info_telemetry raw{};
    query(kernel, RBLN_INFO_TELEMETRY, raw, kTelemetryV1Size, "TELEMETRY");
    if (raw.chiplet_count > RBLN_MAX_CHIPLETS)
        throw Error(Errc::BadValue, "ioctl GET_INFO(TELEMETRY)", kernel.path(), 0,
                    "the kernel reports " + std::to_string(raw.chiplet_count) +
                        " chiplets; at most " + std::to_string(RBLN_MAX_CHIPLETS) + " exist");
    TelemetrySample t;
    t.timestamp_ns = raw.timestamp_ns;
    t.temp_mc = raw.temp_mc;
    t.power_uw = raw.power_uw;
    t.chiplet_count = raw.chiplet_count;
    for (unsigned i = 0; i < raw.chiplet_count; i++) {
        t.chiplet[i].temp_mc = raw.chiplet[i].temp_mc;
        t.chiplet[i].clock_mhz = raw.chiplet[i].clock_mhz;
        t.chiplet[i].mem_clock_mhz = raw.chiplet[i].mem_clock_mhz;
        t.chiplet[i].busy_ns = raw.chiplet[i].busy_ns;
    }
    return t;
}

KernelDevice::KernelDevice(Key /*key*/, detail::UniqueFd fd, std::string path, DrmVersion version)
    : fd_(std::move(fd)), path_(std::move(path)), version_(std::move(version)),
      opener_(::getpid()) {}

bool KernelDevice::in_child() const noexcept {
    return ::getpid() != opener_;
}

KernelDevice::~KernelDevice() = default;

Result<std::unique_ptr<KernelDevice>> KernelDevice::open(const std::string& path) {
    detail::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd)
        return Error::from_errno("open", path, errno);
    return adopt(std::move(fd), path);
}

Result<std::unique_ptr<KernelDevice>> KernelDevice::adopt(detail::UniqueFd fd,
                                                          const std::string& path) {
    if (!fd)
        return Error(Errc::InvalidArgument, "open", path, EBADF, "no descriptor to adopt");
    const std::unique_ptr<drmVersion, decltype(&drmFreeVersion)> v(drmGetVersion(fd.get()),
                                                                   &drmFreeVersion);
    if (!v)
        return Error::from_errno("ioctl DRM_IOCTL_VERSION", path, errno);
    DrmVersion version;
    version.major = v->version_major;
    version.minor = v->version_minor;
    version.patchlevel = v->version_patchlevel;
    version.name.assign(v->name != nullptr ? v->name : "", v->name_len > 0 ? v->name_len : 0);
    version.date.assign(v->date != nullptr ? v->date : "", v->date_len > 0 ? v->date_len : 0);
    version.desc.assign(v->desc != nullptr ? v->desc : "", v->desc_len > 0 ? v->desc_len : 0);

    if (version.name != "rbln")
        return Error(Errc::WrongDriver, "open", path, 0,
                     "the node is served by driver '" + version.name + "', not 'rbln'");
    return std::make_unique<KernelDevice>(Key{}, std::move(fd), path, std::move(version));
}

std::uint32_t KernelDevice::get_info(std::uint32_t type, std::span<std::byte> out) {
    drm_rbln_get_info args{};
    args.type = type;
    args.size = static_cast<std::uint32_t>(out.size());
    args.ptr = reinterpret_cast<std::uintptr_t>(out.data());
    if (drmIoctl(fd_.get(), DRM_IOCTL_RBLN_GET_INFO, &args) != 0)
        throw Error::from_errno("ioctl GET_INFO(type " + std::to_string(type) + ")", path_, errno);
    return args.size;
}

namespace {

template <typename T>
void ioctl_or_throw(int fd, unsigned long request, T& args, KernelOp op, const std::string& path) {
    if (drmIoctl(fd, request, &args) != 0)
        throw kernel_error(op, path, errno);
}

} // namespace

BoHandle KernelDevice::bo_create(const BoCreateArgs& a) {
    drm_rbln_bo_create args{};
    args.size = a.size;
    args.region = uapi(a.region);
    args.chiplet = a.chiplet;
    args.flags = uapi(a.flags);
    ioctl_or_throw(fd_.get(), DRM_IOCTL_RBLN_BO_CREATE, args, KernelOp::BoCreate, path_);
    return {args.handle, args.size, args.chiplet, args.device_va};
}

BoDescription KernelDevice::bo_info(std::uint32_t handle) {
    drm_rbln_bo_info args{};
    args.handle = handle;
    ioctl_or_throw(fd_.get(), DRM_IOCTL_RBLN_BO_INFO, args, KernelOp::BoInfo, path_);
    return {args.mmap_offset, args.size,
            args.device_va,   static_cast<Region>(args.region),
            args.chiplet,     static_cast<BoFlags>(args.flags_out)};
}

BoHandle KernelDevice::bo_userptr(void* addr, std::uint64_t size, UserptrFlags flags) {
    drm_rbln_bo_userptr args{};
    args.addr = reinterpret_cast<std::uintptr_t>(addr);
    args.size = size;
    args.flags = uapi(flags);
    ioctl_or_throw(fd_.get(), DRM_IOCTL_RBLN_BO_USERPTR, args, KernelOp::BoUserptr, path_);
    return {args.handle, size, 0, args.device_va};
}

void KernelDevice::gem_close(std::uint32_t handle) {
    if (in_child())
        return;
    drm_gem_close args{};
    args.handle = handle;
    ioctl_or_throw(fd_.get(), DRM_IOCTL_GEM_CLOSE, args, KernelOp::GemClose, path_);
}

void* KernelDevice::mmap(std::uint64_t offset, std::size_t size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(),
                     static_cast<off_t>(offset));
    if (p == MAP_FAILED)
        throw kernel_error(KernelOp::Mmap, path_, errno);
    return p;
}

void KernelDevice::munmap(void* addr, std::size_t size) {
    if (::munmap(addr, size) != 0)
        throw kernel_error(KernelOp::Munmap, path_, errno);
}

std::uint32_t KernelDevice::queue_create(std::uint32_t chiplet_mask, QueuePriority priority) {
    drm_rbln_queue_create args{};
    args.chiplet_mask = chiplet_mask;
    args.priority = uapi(priority);
    ioctl_or_throw(fd_.get(), DRM_IOCTL_RBLN_QUEUE_CREATE, args, KernelOp::QueueCreate, path_);
    return args.queue_id;
}

void KernelDevice::queue_destroy(std::uint32_t queue_id) {
    if (in_child())
        return;
    drm_rbln_queue_destroy args{};
    args.queue_id = queue_id;
    ioctl_or_throw(fd_.get(), DRM_IOCTL_RBLN_QUEUE_DESTROY, args, KernelOp::QueueDestroy, path_);
}

std::uint64_t KernelDevice::submit(const SubmitArgs& a) {
    std::vector<drm_rbln_sync> in;
    detail::encode_syncs(a.in_syncs, in);
    drm_rbln_submit args = detail::encode_submit(a, in);
    ioctl_or_throw(fd_.get(), DRM_IOCTL_RBLN_SUBMIT, args, KernelOp::Submit, path_);
    return args.seqno;
}

WaitResult KernelDevice::wait(const WaitArgs& a) {
    drm_rbln_wait args = detail::encode_wait(a);
    // drmIoctl restarts on EINTR; the deadline is absolute, so that is safe.
    if (drmIoctl(fd_.get(), DRM_IOCTL_RBLN_WAIT, &args) != 0) {
        if (errno == ETIME)
            return {false, 0, {}};
        throw kernel_error(KernelOp::Wait, path_, errno);
    }
    return {true, args.job_error, JobDetail{args.job_detail, args.job_detail_arg}};
}

std::uint32_t KernelDevice::syncobj_create(std::uint32_t flags) {
    std::uint32_t handle = 0;
    if (drmSyncobjCreate(fd_.get(), flags, &handle) != 0)
        throw kernel_error(KernelOp::SyncobjCreate, path_, errno);
    return handle;
}

void KernelDevice::syncobj_destroy(std::uint32_t handle) {
    if (in_child())
        return;
    if (drmSyncobjDestroy(fd_.get(), handle) != 0)
        throw kernel_error(KernelOp::SyncobjDestroy, path_, errno);
}

Result<std::unique_ptr<CommandRing>>
KernelInterface::make_ring(unsigned /*entries*/, RingMode /*mode*/, unsigned /*sq_idle_ms*/) {
    return Error(Errc::InvalidArgument, "io_uring_queue_init", path(), ENOTSUP,
                 "not a real rbln node: no io_uring for it");
}

Result<std::unique_ptr<KernelInterface>> open_kernel_device(const std::string& path) {
    auto dev = KernelDevice::open(path);
    if (!dev)
        return dev.error();
    return std::unique_ptr<KernelInterface>(std::move(dev).value());
}

} // namespace rbln
