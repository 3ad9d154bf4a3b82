// SPDX-License-Identifier: GPL-2.0
// rbln_offload.h used from a C translation unit (it must be valid C): a
// storage written in a scope in @directory is paged out at the scope's end
// and read back exactly.

#include "rbln/rbln_offload.h"
#include "rbln/rbln_storage.h"

#include <stdint.h>
#include <string.h>

// 0 on success, else -(the step that failed).
int rbln_test_offload_from_c(const char* directory) {
    struct rbln_offload_options options;
    struct rbln_offload_stats stats;
    rbln_offload* scope = NULL;
    rbln_storage* storage = NULL;
    unsigned char in[5000];
    unsigned char out[5000];
    size_t i;
    int ret = 0;

    for (i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 13u + 7u);
    memset(&options, 0, sizeof(options));
    options.struct_size = sizeof(options);
    options.directory = directory;
    if (rbln_offload_begin(&options, &scope) != RBLN_OK)
        return -1;
    if (rbln_storage_create(0, sizeof(in), RBLN_STORAGE_U8, &storage) != RBLN_OK)
        ret = -2;
    else if (rbln_storage_write(storage, 0, in, sizeof(in)) != RBLN_OK)
        ret = -3;
    if (rbln_offload_end(scope) != RBLN_OK && ret == 0)
        ret = -4;
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    if (ret == 0 && rbln_offload_get_stats(scope, &stats) != RBLN_OK)
        ret = -5;
    if (ret == 0 && (stats.writes != 1 || stats.bytes_offloaded != sizeof(in) ||
                     stats.bytes_paged_out != sizeof(in)))
        ret = -6;
    if (ret == 0 && rbln_storage_read(storage, 0, out, sizeof(out)) != RBLN_OK)
        ret = -7;
    if (ret == 0 && memcmp(in, out, sizeof(in)) != 0)
        ret = -8;
    if (ret == 0 && (rbln_offload_get_stats(scope, &stats) != RBLN_OK || stats.reads != 1))
        ret = -9;
    rbln_storage_destroy(storage);
    if (rbln_offload_destroy(scope) != RBLN_OK && ret == 0)
        ret = -10;
    return ret;
}
