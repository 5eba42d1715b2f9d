// SPDX-License-Identifier: GPL-2.0
/*
 * Log lines of a running `run`: one line per action on stderr, rate-limited
 * per call site so that a flood of events (a peer refused a thousand times,
 * a flapping interface) cannot drown the lines that matter.
 */
#include <stdarg.h>
#include <time.h>
#include "sp.h"

int sp_log_level = SP_LOG_INFO;

static const char *const tags[] = {
	[SP_LOG_ERROR] = "", [SP_LOG_WARN] = "warning: ",
	[SP_LOG_INFO] = "", [SP_LOG_DEBUG] = "debug: ",
};

void sp_log_at(struct sp_ratelimit *rl, int level, const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	if (level > sp_log_level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (rl) {
		if (ts.tv_sec != rl->sec) {
			if (rl->suppressed)
				fprintf(stderr, "stackpilot: %u similar lines suppressed\n",
					rl->suppressed);
			rl->sec = ts.tv_sec;
			rl->lines = rl->suppressed = 0;
		}
		if (rl->lines >= SP_LOG_BURST) {
			rl->suppressed++;
			return;
		}
		rl->lines++;
	}
	fprintf(stderr, "stackpilot: %s", tags[level & 3]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
