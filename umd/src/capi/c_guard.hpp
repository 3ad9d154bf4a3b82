// SPDX-License-Identifier: GPL-2.0
// c_guard.hpp - the C ABI's one guard and one error channel (private to
// librbln: every c_api*.cpp).
//
// Every C entry point of every header (rbln.h, rbln_alloc.h, rbln_host.h,
// rbln_storage.h, rbln_ops.h, rbln_offload.h, rbln_explain.h) returns an
// rbln_status and leaves the message of a failure in one thread-local
// string, read by rbln_last_error_message().  guard() runs the body,
// clears the message first and turns every exception into a status and a
// message: no exception crosses into C.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "rbln/error.hpp"
#include "rbln/rbln.h"

namespace rbln::capi {

/// The calling thread's last failure message (rbln_last_error_message()).
std::string& last_error() noexcept;

/// Records @message as the thread's last failure and returns @status.
inline rbln_status fail(rbln_status status, std::string message) noexcept {
    try {
        last_error() = std::move(message);
    } catch (...) { // NOLINT(bugprone-empty-catch): the status still says what failed
    }
    return status;
}

/// RBLN_ERR_INVALID_ARGUMENT with @message.
inline rbln_status invalid(std::string message) noexcept {
    return fail(RBLN_ERR_INVALID_ARGUMENT, std::move(message));
}

/// Runs @body (which returns an rbln_status) with every exception caught.
template <typename F> rbln_status guard(F&& body) noexcept {
    try {
        last_error().clear();
        return std::forward<F>(body)();
    } catch (const Error& e) {
        return fail(static_cast<rbln_status>(e.code()), e.what());
    } catch (const std::bad_alloc&) {
        return fail(RBLN_ERR_INTERNAL, "librbln: host memory exhausted");
    } catch (const std::exception& e) {
        return fail(RBLN_ERR_INTERNAL, std::string("librbln: internal error: ") + e.what());
    } catch (...) {
        return fail(RBLN_ERR_INTERNAL, "librbln: internal error: unknown exception");
    }
}

} // namespace rbln::capi
