/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Harness-level submission helpers of the rbln kselftests.
 *
 * Include after kselftest_harness.h and rbln_ksft.h.  The submission
 * tests need a card with command rings: firmware-iface 1.2.  A card that
 * reports 1.0 or 1.1 (the emulator before the submission work) skips them
 * with that reason; a card that reports 1.2 must take queues and run jobs.
 */
#ifndef RBLN_SUB_KSFT_H
#define RBLN_SUB_KSFT_H

#include <errno.h>
#include <string.h>

#include "rbln_sub.h"

/*
 * False after marking the test skipped: the card of @fd has no command
 * rings (firmware-iface < 1.2).
 */
static inline bool rbln_require_rings(struct __test_metadata *_metadata,
				      int fd)
{
	__u32 minor = 0;

	ASSERT_EQ(0, rbln_iface_minor(fd, &minor));
	if (minor < 2)
		SKIP(return false,
		     "card speaks firmware-iface 1.%u: no command rings (1.2 needed)",
		     minor);
	return true;
}

/*
 * Submits the current job of @cb on @queue_id with @bos, waits for it and
 * expects job error @want (0: success).
 */
static inline void rbln_expect_job(struct __test_metadata *_metadata, int fd,
				   __u32 queue_id,
				   const struct rbln_cmdbuf *cb,
				   const __u32 *bos, __u32 nbos, __s32 want,
				   const char *what)
{
	__s32 job_error = 1;
	__u64 seqno = 0;
	int err;

	ASSERT_FALSE(cb->overflow) TH_LOG("%s: command buffer full", what);
	err = rbln_submit_job(fd, queue_id, cb, bos, nbos, &seqno);
	ASSERT_EQ(0, err) TH_LOG("%s: SUBMIT: %s", what, strerror(-err));
	err = rbln_wait_job(fd, queue_id, seqno, RBLN_JOB_WAIT_MS, &job_error);
	ASSERT_EQ(0, err)
	TH_LOG("%s: WAIT for seqno %llu: %s", what, (unsigned long long)seqno,
	       strerror(-err));
	EXPECT_EQ(want, job_error)
	TH_LOG("%s: job error %d (%s), want %d (%s)", what, job_error,
	       strerror(-job_error), want, strerror(-want));
}

/* The same for a job that is all of @cb (reset first by the caller). */
static inline void rbln_expect_job_ok(struct __test_metadata *_metadata,
				      int fd, __u32 queue_id,
				      const struct rbln_cmdbuf *cb,
				      const __u32 *bos, __u32 nbos,
				      const char *what)
{
	rbln_expect_job(_metadata, fd, queue_id, cb, bos, nbos, 0, what);
}

/* A queue over @mask at normal priority; its id. */
static inline __u32 rbln_new_queue(struct __test_metadata *_metadata, int fd,
				   __u32 mask)
{
	__u32 q = 0;
	int err = rbln_queue_create(fd, mask, RBLN_QUEUE_PRIORITY_NORMAL, &q);

	ASSERT_EQ(0, err)
	TH_LOG("QUEUE_CREATE mask 0x%x: %s", mask, strerror(-err));
	ASSERT_LE(1, q);
	return q;
}

/* The mask of every chiplet of a card with @n chiplets. */
static inline __u32 rbln_all_chiplets(__u32 n)
{
	return n >= 32 ? ~0u : (1u << n) - 1;
}

#endif /* RBLN_SUB_KSFT_H */
