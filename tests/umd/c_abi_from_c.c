// SPDX-License-Identifier: GPL-2.0
// The C ABI used from a C translation unit (rbln.h must be valid C).

#include "rbln/rbln.h"
#include "testing.h"

#include <string.h>

// Returns the number of cards under @root, or -(status) on failure; writes
// the first card's serial into @serial (at least 32 bytes).
int rbln_test_count_from_c(const char* root, char* serial) {
    struct rbln_device_info info;
    int count = 0;
    rbln_status st;

    if (rbln_set_root(root) != RBLN_OK)
        return -100;
    st = rbln_device_count(&count);
    if (st != RBLN_OK)
        return -(int)st;
    if (count > 0) {
        memset(&info, 0, sizeof(info));
        info.struct_size = sizeof(info);
        st = rbln_device_get_info(0, &info);
        if (st != RBLN_OK)
            return -(int)st;
        memcpy(serial, info.serial, sizeof(info.serial));
    }
    rbln_set_root(NULL);
    return count;
}
