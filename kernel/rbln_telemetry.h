/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: telemetry (rbln_telemetry.c) - the GET_TELEMETRY request and the
 * cache hwmon reads through.
 */
#ifndef RBLN_TELEMETRY_H
#define RBLN_TELEMETRY_H

#include <linux/mutex.h>
#include <linux/types.h>

#include "rbln_fw_admin.h"

struct rbln_device;

/* The last GET_TELEMETRY answer, for hwmon. */
struct rbln_telemetry {
	/* Protects everything below; serialises the cache's refreshes. */
	struct mutex lock;
	unsigned long stamp;		/* jiffies of the answer */
	bool valid;
	struct rbln_fw_telemetry cache;
};

int rbln_telemetry_init(struct rbln_device *rdev);
int rbln_telemetry_read(struct rbln_device *rdev, struct rbln_fw_telemetry *t);
int rbln_telemetry_cached(struct rbln_device *rdev, struct rbln_fw_telemetry *t);

#endif /* RBLN_TELEMETRY_H */
