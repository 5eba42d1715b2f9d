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
		long long now = ts.tv_sec * 1000000000LL + ts.tv_nsec;

		/* Refilled at SP_LOG_BURST a second, never above it: a burst of
		 * SP_LOG_BURST lines passes, then one per 1/SP_LOG_BURST s. */
		rl->tokens = rl->primed ? rl->tokens + (now - rl->last_ns) * 1e-9 * SP_LOG_BURST
					: SP_LOG_BURST;
		if (rl->tokens > SP_LOG_BURST)
			rl->tokens = SP_LOG_BURST;
		rl->primed = true;
		rl->last_ns = now;
		if (rl->tokens < 1) {
			rl->suppressed++;
			return;
		}
		rl->tokens -= 1;
		if (rl->suppressed)
			fprintf(stderr, "stackpilot: %u similar lines suppressed\n", rl->suppressed);
		rl->suppressed = 0;
	}
	fprintf(stderr, "stackpilot: %s", tags[level & 3]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
