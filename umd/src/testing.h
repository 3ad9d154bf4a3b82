/* SPDX-License-Identifier: GPL-2.0 */
/*
 * testing.h - librbln's C test hook (not installed; tests include it from
 * umd/src through the rbln_testing target).  testing.hpp has the C++ one.
 */
#ifndef RBLN_TESTING_H
#define RBLN_TESTING_H

#include "rbln/rbln.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Use @root instead of "/" for sysfs and /dev (a fake tree); NULL restores
 * "/".  Starts the process's device state afresh (mapping, commit, current
 * devices, opened devices and their allocators): reset_process_for_tests()
 * with only the root set.  Affects every thread.
 */
rbln_status rbln_set_root(const char* root);

#ifdef __cplusplus
}
#endif

#endif /* RBLN_TESTING_H */
