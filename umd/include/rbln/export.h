/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln/export.h - what librbln.so exports, and how a header says so.
 *
 * librbln is compiled with hidden visibility (-fvisibility=hidden
 * -fvisibility-inlines-hidden) and linked with a version script
 * (umd/librbln.map: the C entry points rbln_* and namespace rbln, nothing
 * else), so only what a public header declares can leave librbln.so:
 *
 *   - every installed header (umd/include/rbln/) puts its declarations,
 *     after its own #includes, between
 *         #pragma GCC visibility push(default)
 *         #pragma GCC visibility pop
 *     (the C headers too; GCC and clang both read the pragma);
 *   - a type of librbln's internals (umd/src: KernelInterface, Submitter,
 *     CommandEncoder, the detail:: state behind a handle) that a public
 *     header must name is declared there outside that region (before the
 *     push, or between a pop and a push), so it keeps the hidden default;
 *   - a function or member declared inside the region that names such a
 *     type is RBLN_LOCAL: it stays usable inside librbln and by programs
 *     that link librbln.a with the internal headers (the tests), and is
 *     not a symbol of librbln.so.
 *
 * Headers under umd/src have no pragma: everything there is hidden.
 * tests/install/install_test.sh checks the result with nm -D.
 */
#ifndef RBLN_EXPORT_H
#define RBLN_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define RBLN_LOCAL __attribute__((visibility("hidden")))
#else
#define RBLN_LOCAL
#endif

#endif /* RBLN_EXPORT_H */
