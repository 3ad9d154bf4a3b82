// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: telemetry - the GET_TELEMETRY admin request (RBLN_INFO_TELEMETRY
 * asks the card each time) and the cache hwmon reads through.
 */
#include <linux/jiffies.h>
#include <linux/minmax.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "rbln_drv.h"
#include "rbln_admin.h"
#include "rbln_telemetry.h"

/* How long hwmon may reuse one GET_TELEMETRY answer. */
#define RBLN_TELEMETRY_CACHE_MS	100

int rbln_telemetry_init(struct rbln_device *rdev)
{
	return drmm_mutex_init(&rdev->drm, &rdev->telemetry.lock);
}

/* One GET_TELEMETRY round trip. */
int rbln_telemetry_read(struct rbln_device *rdev, struct rbln_fw_telemetry *t)
{
	struct rbln_admin_cmd cmd = {
		.opcode = RBLN_FW_OP_GET_TELEMETRY,
		.data = t,
		.data_size = sizeof(*t),
	};
	int ret;

	ret = rbln_admin_exec(rdev, &cmd);
	if (ret)
		return ret;
	if (cmd.data_len != sizeof(*t)) {
		drm_err_ratelimited(&rdev->drm, "GET_TELEMETRY answered %u bytes, expected %zu\n",
				    cmd.data_len, sizeof(*t));
		return -EIO;
	}
	t->chiplet_count = min(t->chiplet_count, rdev->id.chiplet_count);
	return 0;
}

/*
 * One GET_TELEMETRY answer serves all hwmon reads for
 * RBLN_TELEMETRY_CACHE_MS, so a monitoring daemon reading every file does
 * not turn into a stream of admin requests.
 */
int rbln_telemetry_cached(struct rbln_device *rdev, struct rbln_fw_telemetry *t)
{
	struct rbln_telemetry *tm = &rdev->telemetry;
	struct rbln_fw_telemetry fresh;
	int idx, ret = 0;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return -ENODEV;
	mutex_lock(&tm->lock);
	if (!tm->valid ||
	    time_after(jiffies, tm->stamp +
			       msecs_to_jiffies(RBLN_TELEMETRY_CACHE_MS))) {
		ret = rbln_telemetry_read(rdev, &fresh);
		if (!ret) {
			tm->cache = fresh;
			tm->stamp = jiffies;
			tm->valid = true;
		}
	}
	if (!ret)
		*t = tm->cache;
	mutex_unlock(&tm->lock);
	drm_dev_exit(idx);
	if (ret && ret != -ENODEV)
		ret = -EIO;
	return ret;
}
