// SPDX-License-Identifier: GPL-2.0
// A framework written in C drives librbln: storages, a pinned host block
// copied into a storage without blocking, an operator job on a stream,
// copies out of and between storages, record_stream, placement and the
// per-process memory fraction (rbln_ops.h, rbln_storage.h, rbln_alloc.h,
// rbln_host.h and rbln_graph.h must be valid C).  Run by c_api_ops_test.cpp over a fake
// card and by rbln_memory_vm_test.cpp on the emulated one.

#include "rbln/rbln.h"
#include "rbln/rbln_alloc.h"
#include "rbln/rbln_graph.h" /* strict C too */
#include "rbln/rbln_host.h"
#include "rbln/rbln_ops.h"
#include "rbln/rbln_storage.h"

#include <stddef.h>
#include <string.h>

enum { kCount = 1024, kBytes = kCount * 4 };

#define STEP(n, call)                                                                              \
    do {                                                                                           \
        if ((call) != RBLN_OK)                                                                     \
            return (n);                                                                            \
    } while (0)

static int run(int device, int check_values, rbln_stream* s, rbln_stream* s2, rbln_storage** st,
               float* pinned_in, float* pinned_out) {
    struct rbln_copy_stats before, after;
    struct rbln_view va, vb, vo;
    float plain[kCount], back[kCount], copied[kCount];
    uint64_t id = 0, block = 0;
    int place = -1, i;

    for (i = 0; i < kCount; i++) {
        pinned_in[i] = (float)(i % 7);
        plain[i] = (float)(i % 5) - 2.0f;
    }
    memset(&before, 0, sizeof(before));
    before.struct_size = sizeof(before);
    after = before;
    STEP(10, rbln_device_copy_stats(device, &before));
    /* Pinned host -> storage a, not blocking: the copy is asynchronous. */
    STEP(11, rbln_storage_copy_from_host(st[0], 0, pinned_in, kBytes, s, 1));
    STEP(12, rbln_device_copy_stats(device, &after));
    if (after.async_h2d != before.async_h2d + 1)
        return 13;
    /* b through the host side (lazy: uploaded by the operator). */
    STEP(14, rbln_storage_write(st[1], 0, plain, sizeof(plain)));
    STEP(15, rbln_view_contiguous(st[0], 0, NULL, &va));
    STEP(16, rbln_view_contiguous(st[1], 0, NULL, &vb));
    STEP(17, rbln_view_contiguous(st[2], 0, NULL, &vo));
    STEP(18, rbln_op_add(s, &vo, &va, &vb));
    /* a is read on s2 too: its memory waits for s2's work when freed. */
    STEP(19, rbln_storage_record_stream(st[0], s2));
    /* out -> pinned host, not blocking; then wait for the stream. */
    STEP(20, rbln_storage_copy_to_host(pinned_out, st[2], 0, kBytes, s, 1));
    STEP(21, rbln_stream_synchronize(s));
    if (check_values)
        for (i = 0; i < kCount; i++)
            if (pinned_out[i] != pinned_in[i] + plain[i])
                return 22;
    /* out -> c on the device, blocking; c's bytes are out's. */
    STEP(23, rbln_storage_copy(st[3], 0, st[2], 0, kBytes, s, 0));
    STEP(24, rbln_storage_read(st[3], 0, copied, sizeof(copied)));
    STEP(25, rbln_storage_copy_to_host(back, st[2], 0, kBytes, NULL, 0));
    for (i = 0; i < kCount; i++)
        if (copied[i] != back[i] || back[i] != pinned_out[i])
            return 26;

    /* Placement. */
    STEP(30, rbln_get_default_place(device, &place));
    if (place != 0)
        return 31;
    if (rbln_set_default_place(device, 4096) != RBLN_ERR_INVALID_ARGUMENT)
        return 32;
    STEP(33, rbln_set_default_place(device, 0));

    /* The memory fraction caps new segments. */
    if (rbln_set_memory_fraction(device, 1.5, RBLN_PLACE_ALL) != RBLN_ERR_INVALID_ARGUMENT)
        return 40;
    STEP(41, rbln_set_memory_fraction(device, 0.0, RBLN_PLACE_ALL));
    if (rbln_caching_alloc(device, 64u << 20, 0, RBLN_PLACE_DEFAULT, &block) !=
        RBLN_ERR_OUT_OF_MEMORY)
        return 42;
    if (strstr(rbln_last_error_message(), "may use") == NULL)
        return 43;
    STEP(44, rbln_set_memory_fraction(device, 1.0, RBLN_PLACE_ALL));

    /* A block of the C allocator on a stream, used by another. */
    STEP(50, rbln_alloc_stream_id(s, &id));
    if (id == 0)
        return 51;
    STEP(52, rbln_caching_alloc(device, 1000, id, RBLN_PLACE_DEFAULT, &block));
    STEP(53, rbln_caching_record_stream(device, block, s2));
    STEP(54, rbln_caching_free(device, block));
    return 0;
}

// 0 if everything worked, else the number of the step that failed, its
// rbln_last_error_message() into @message (@len bytes).  @check_values:
// the card runs the operator (the fake does not compute).
int rbln_test_ops_from_c(int device, int check_values, char* message, size_t len) {
    rbln_stream* s = NULL;
    rbln_stream* s2 = NULL;
    rbln_storage* st[4] = {NULL, NULL, NULL, NULL};
    void* pin_in = NULL;
    void* pin_out = NULL;
    int rc = 0, i;

    if (rbln_stream_create(device, &s) != RBLN_OK || rbln_stream_create(device, &s2) != RBLN_OK)
        return 1;
    for (i = 0; i < 4 && rc == 0; i++)
        if (rbln_storage_create(device, kBytes, RBLN_STORAGE_FP32, &st[i]) != RBLN_OK)
            rc = 2;
    if (rc == 0 && (rbln_host_alloc(device, kBytes, &pin_in) != RBLN_OK ||
                    rbln_host_alloc(device, kBytes, &pin_out) != RBLN_OK))
        rc = 3;
    if (rc == 0)
        rc = run(device, check_values, s, s2, st, (float*)pin_in, (float*)pin_out);
    if (rc == 0 && rbln_device_synchronize(device) != RBLN_OK)
        rc = 4;
    if (rc != 0 && len > 0) {
        strncpy(message, rbln_last_error_message(), len - 1);
        message[len - 1] = '\0';
    }
    for (i = 0; i < 4; i++)
        rbln_storage_destroy(st[i]);
    rbln_host_free(pin_in);
    rbln_host_free(pin_out);
    rbln_stream_destroy(s2);
    rbln_stream_destroy(s);
    return rc;
}
