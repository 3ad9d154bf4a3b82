// SPDX-License-Identifier: GPL-2.0
// rbln_host.h used from a C translation unit (it must be valid C): a pinned
// block and a huge buffer, each sent to the card and back asynchronously.

#include "rbln/rbln_host.h"

#include <stdint.h>
#include <string.h>

// Round trip of @size bytes of @host through the card; 0 or -(step).
static int round_trip(unsigned char* host, size_t size) {
    rbln_buffer* dev = NULL;
    size_t i;
    int ret = 0;

    for (i = 0; i < size / 2; i++)
        host[i] = (unsigned char)(i * 5u + 3u);
    if (rbln_malloc(0, size / 2, &dev) != RBLN_OK)
        return -10;
    if (rbln_memcpy_htod(dev, 0, host, size / 2, NULL, 1) != RBLN_OK)
        ret = -11;
    else if (rbln_memcpy_dtoh(host + size / 2, dev, 0, size / 2, NULL, 1) != RBLN_OK)
        ret = -12;
    else if (rbln_device_synchronize(0) != RBLN_OK)
        ret = -13;
    else if (memcmp(host, host + size / 2, size / 2) != 0)
        ret = -14;
    rbln_buffer_free(dev);
    return ret;
}

// 0 on success, else -(the step that failed).
int rbln_test_host_from_c(void) {
    void* p = NULL;
    size_t size = 0;
    int64_t allocs = 0;
    rbln_huge_host* huge = NULL;
    void* hdata = NULL;
    struct rbln_huge_host_info info;
    int ret;

    if (rbln_host_alloc(0, 6000, &p) != RBLN_OK)
        return -1;
    if (((uintptr_t)p & 4095u) != 0)
        return -2;
    if (rbln_host_block_size(p, &size) != RBLN_OK || size != 8192)
        return -3;
    ret = round_trip((unsigned char*)p, size);
    if (ret != 0)
        return ret;
    if (rbln_host_free(p) != RBLN_OK)
        return -4;
    if (rbln_host_memory_stat(0, "num_host_alloc", &allocs) != RBLN_OK || allocs != 1)
        return -5;
    if (rbln_host_empty_cache(0) != RBLN_OK)
        return -6;

    if (rbln_huge_host_empty(0, 1u << 20, &huge, &hdata) != RBLN_OK)
        return -20;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (rbln_huge_host_get_info(huge, &info) != RBLN_OK || info.data != hdata ||
        info.size != (2u << 20) || ((uintptr_t)hdata & ((2u << 20) - 1)) != 0)
        return -21;
    ret = round_trip((unsigned char*)hdata, (size_t)info.size);
    if (ret != 0)
        return ret - 100;
    if (rbln_huge_host_free(huge) != RBLN_OK)
        return -22;
    return 0;
}
