/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/rbln.h - C ABI of librbln.
 *
 * Every entry point of every C header (rbln.h, rbln_alloc.h, rbln_host.h,
 * rbln_storage.h, rbln_ops.h, rbln_offload.h, rbln_explain.h) returns an
 * rbln_status; on failure a thread-local message (what failed, why, what
 * to do) is available from rbln_last_error_message(), the one error
 * channel of them all.  No C++ exception crosses this interface.
 * Structs carry their size in their first field: the caller sets it to
 * sizeof() of the struct it was compiled with, the library writes no more
 * than that, so old callers keep working when a struct grows.
 */
#ifndef RBLN_RBLN_H
#define RBLN_RBLN_H

#include <stddef.h>
#include <stdint.h>

/* Exported from librbln.so (rbln/export.h). */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/* Values match rbln::Errc. */
typedef enum rbln_status {
    RBLN_OK = 0,
    RBLN_ERR_INVALID_ARGUMENT = 1,
    RBLN_ERR_DRIVER_NOT_LOADED = 2,
    RBLN_ERR_NO_DEVICE = 3,
    RBLN_ERR_PERMISSION_DENIED = 4,
    RBLN_ERR_NOT_FOUND = 5,
    RBLN_ERR_BAD_VALUE = 6,
    RBLN_ERR_WRONG_DRIVER = 7,
    RBLN_ERR_IO = 8,
    RBLN_ERR_DEVICE_GONE = 9,
    RBLN_ERR_BAD_CONTROL_BLOCK = 10,
    RBLN_ERR_INTERNAL = 11,
    RBLN_ERR_BAD_CONFIG = 12,    /* an RBLN_* variable is malformed; the message names it */
    RBLN_ERR_BAD_FORK = 13,      /* fork() child of a process that used a device */
    RBLN_ERR_OUT_OF_MEMORY = 14, /* kernel/device memory or device VA exhausted */
    RBLN_ERR_TIMEOUT = 15,       /* a deadline passed */
    RBLN_ERR_JOB_FAILED = 16,    /* work failed on the card; the message says how */
    RBLN_ERR_NOT_READY = 17,     /* the work asked about has not completed yet */
} rbln_status;

#define RBLN_DEVICE_FAMILY_UNKNOWN 0
#define RBLN_DEVICE_FAMILY_REBEL100 1
#define RBLN_DEVICE_FAMILY_ATOM 2

#define RBLN_DEVICE_MAX_CHIPLETS 8

/* rbln_device_info.flags */
#define RBLN_DEVICE_HAS_TEMPERATURE (1u << 0)      /* temperature_mc is valid */
#define RBLN_DEVICE_HAS_POWER (1u << 1)            /* power_uw is valid */
#define RBLN_DEVICE_SUSPENDED (1u << 2)            /* runtime-suspended; not woken */
#define RBLN_DEVICE_IDENTITY_FROM_KERNEL (1u << 3) /* GET_INFO answered */

struct rbln_device_info {
    uint32_t struct_size; /* in: sizeof(struct rbln_device_info) */
    uint32_t index;       /* physical NPU id */
    uint32_t accel_minor; /* N of /dev/accel/accelN */
    int32_t numa_node;    /* -1 if none */
    uint32_t family;      /* RBLN_DEVICE_FAMILY_* */
    uint32_t chiplet_count;
    uint32_t fw_iface_major;
    uint32_t fw_iface_minor;
    uint32_t flags; /* RBLN_DEVICE_* */
    uint32_t pad;
    uint64_t hbm_total_bytes;
    uint64_t chiplet_hbm_bytes[RBLN_DEVICE_MAX_CHIPLETS];
    int64_t temperature_mc;
    uint64_t power_uw;
    char accel_node[64];
    char pci_bdf[16];
    char family_name[16];
    char fw_version[32];
    char serial[32];
    char state[32];
};

/* librbln version, "major.minor.patch". */
const char* rbln_version(void);

/* Short name of a status, e.g. "permission-denied". */
const char* rbln_status_name(rbln_status status);

/* Message of the last failure of a librbln C call on this thread, from
 * any header ("" if none, or cleared by a later call that got through its
 * argument checks). */
const char* rbln_last_error_message(void);

/* Number of rbln cards (0 is not an error). */
rbln_status rbln_device_count(int* count);

/* Facts about card @index (0 .. count-1); info->struct_size must be set. */
rbln_status rbln_device_get_info(int index, struct rbln_device_info* info);

/* Version of the loaded kernel driver, NUL-terminated into buf. */
rbln_status rbln_driver_version(char* buf, size_t len);

/*
 * Logical devices (see rbln/devices.hpp for the variables RBLN_VISIBLE_DEVICES,
 * RBLN_DEVICES (deprecated), RBLN_NPUS_PER_DEVICE and RBLN_DEVICE_MAP).
 * Queries plan the mapping from the current variables and claim nothing;
 * rbln_commit() (and every later real use: allocation, synchronize,
 * submission) fixes it for the life of the process.
 */

/* Number of logical devices; never fails for a valid pointer: 0 when the
 * driver is absent, nothing is visible or the variables are malformed (a
 * warning on stderr says which). */
rbln_status rbln_logical_device_count(int* count);

/* 1 if at least one logical device is usable, else 0; never fails. */
int rbln_is_available(void);

/* Visible physical NPUs regardless of grouping; RBLN_ERR_BAD_CONFIG (the
 * message names the variable) if the variables are malformed. */
rbln_status rbln_physical_device_count(int* count);

/* The NPU ids (indices into the visible list) of logical device @index:
 * up to @capacity into @npus, their number into *@count. */
rbln_status rbln_logical_device_npus(int index, uint32_t* npus, size_t capacity, size_t* count);

/* Fixes the mapping (the first real use does it implicitly).
 * RBLN_ERR_BAD_CONFIG, RBLN_ERR_BAD_FORK, or a discovery error. */
rbln_status rbln_commit(void);

/* The calling thread's current logical device (0 until set). */
rbln_status rbln_get_device(int* index);

/* Makes @index the calling thread's current device.  Bookkeeping only:
 * checks @index against the plan, does not commit. */
rbln_status rbln_set_device(int index);

/* Parses "rbln:N", "N" or "rbln" (the current device: *index = -1). */
rbln_status rbln_parse_device(const char* text, int* index);

/* RBLN_ERR_BAD_FORK if this process is a fork() child of a process that
 * had used a device (such a child cannot use it: start workers with the
 * spawn start method); RBLN_OK otherwise. */
rbln_status rbln_check_fork(void);

/*
 * Streams, events and copies (rbln/stream.hpp, rbln/copy.hpp, rbln/device.hpp
 * say the same in more words).
 *
 * Devices are logical device indices; -1 is the calling thread's current
 * device.  Using a device commits the device mapping.  A NULL stream is the
 * default stream of the device concerned (for copies: of the device
 * buffer's device; of the destination's for device to device).  Work on one
 * stream runs in order; work of different streams may overlap; the default
 * stream is an ordinary stream (it does not synchronise with the others).
 * Failures of work on the card (RBLN_ERR_JOB_FAILED, RBLN_ERR_TIMEOUT) are
 * reported by the next synchronize of the stream or device.
 */
typedef struct rbln_stream rbln_stream; /* opaque */
typedef struct rbln_event rbln_event;   /* opaque */
typedef struct rbln_buffer rbln_buffer; /* opaque: device or pinned host memory */

/* A new stream (a kernel queue) on @device. */
rbln_status rbln_stream_create(int device, rbln_stream** stream);
/* Waits for the stream's work, then frees it.  NULL is a no-op. */
rbln_status rbln_stream_destroy(rbln_stream* stream);
/* RBLN_OK if all work enqueued so far is done, RBLN_ERR_NOT_READY if not. */
rbln_status rbln_stream_query(rbln_stream* stream);
/* Blocks until the stream's work is done; reports its first failure. */
rbln_status rbln_stream_synchronize(rbln_stream* stream);
/* Later work of @stream waits for @event on the device (the host does not
 * block); a never-recorded event is a no-op. */
rbln_status rbln_stream_wait_event(rbln_stream* stream, rbln_event* event);

#define RBLN_EVENT_DISABLE_TIMING (1u << 0) /* no timestamps: no elapsed time */

rbln_status rbln_event_create(rbln_event** event, uint32_t flags);
/* Frees the event (work it marks still runs).  NULL is a no-op. */
rbln_status rbln_event_destroy(rbln_event* event);
/* Marks the work enqueued on @stream so far; recording again moves the mark. */
rbln_status rbln_event_record(rbln_event* event, rbln_stream* stream);
/* RBLN_OK if the marked work is done (or never recorded), else RBLN_ERR_NOT_READY. */
rbln_status rbln_event_query(rbln_event* event);
/* Blocks until the marked work is done. */
rbln_status rbln_event_synchronize(rbln_event* event);
/* Card time between two marks, in ms; RBLN_ERR_NOT_READY if not both done. */
rbln_status rbln_event_elapsed_time(float* ms, rbln_event* start, rbln_event* end);

/* Waits for the device's pending async transfers and all its streams. */
rbln_status rbln_device_synchronize(int device);
/* 1 in *io_uring if the device submits over io_uring, 0 for the ioctl fallback. */
rbln_status rbln_device_submit_path(int device, int* io_uring);

/* Device memory (HBM) of @size bytes. */
rbln_status rbln_malloc(int device, size_t size, rbln_buffer** buffer);
/* Pinned host memory of @size bytes for @device; its address in *host. */
rbln_status rbln_malloc_host(int device, size_t size, rbln_buffer** buffer, void** host);
/* Pins the caller's memory (page-aligned address and size) for @device;
 * copies from/to plain pointers inside it become asynchronous.  The memory
 * must stay valid until the buffer is freed. */
rbln_status rbln_host_register(int device, void* data, size_t size, rbln_buffer** buffer);
/* Drops the caller's reference; in-flight copies keep the memory until done. */
rbln_status rbln_buffer_free(rbln_buffer* buffer);

/*
 * Copies.  Asynchronous (with @non_blocking, the call returns once the copy
 * is enqueued) only if the host side is pinned memory of the device and
 * both sides are contiguous and of the same size; otherwise synchronous,
 * after the device's pending async copies.
 */
rbln_status rbln_memcpy_htod(rbln_buffer* dst, size_t dst_offset, const void* src, size_t size,
                             rbln_stream* stream, int non_blocking);
rbln_status rbln_memcpy_dtoh(void* dst, rbln_buffer* src, size_t src_offset, size_t size,
                             rbln_stream* stream, int non_blocking);
/* Between buffers of one device, or of two (through host memory). */
rbln_status rbln_memcpy_dtod(rbln_buffer* dst, size_t dst_offset, rbln_buffer* src,
                             size_t src_offset, size_t size, rbln_stream* stream, int non_blocking);
/* Fills @size bytes at @offset with the byte @value, in stream order. */
rbln_status rbln_memset(rbln_buffer* buffer, size_t offset, int value, size_t size,
                        rbln_stream* stream);

struct rbln_copy_stats {
    uint32_t struct_size; /* in: sizeof(struct rbln_copy_stats) */
    uint32_t pad;
    uint64_t async_h2d, async_d2h, async_d2d;
    uint64_t sync_h2d, sync_d2h, sync_d2d;
    uint64_t host_to_host;
    uint64_t cross_device_via_host;     /* between logical devices, through host memory */
    uint64_t cross_device_card_to_card; /* 0 until the kernel offers peer to peer */
    uint64_t drains;                    /* sync copies that waited for pending async ones */
    uint64_t bytes_async, bytes_sync;
};

/* Which path the copies of @device took so far. */
rbln_status rbln_device_copy_stats(int device, struct rbln_copy_stats* stats);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* RBLN_RBLN_H */
