/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A C program built against an installed librbln through pkg-config
 * (tests/install/install_test.sh): prints the library version and the
 * number of logical devices (0 without a card).
 */
#include <rbln/rbln.h>
#include <stdio.h>

int main(void) {
    int count = -1;

    if (rbln_logical_device_count(&count) != RBLN_OK) {
        fprintf(stderr, "rbln_logical_device_count: %s\n", rbln_last_error_message());
        return 1;
    }
    printf("c: librbln %s, %d logical devices\n", rbln_version(), count);
    return 0;
}
