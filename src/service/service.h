/* SPDX-License-Identifier: GPL-2.0 */
/* The service: a configuration file's instances, from start to end. */
#ifndef SP_SERVICE_H
#define SP_SERVICE_H

#include <stdbool.h>
#include "service/run.h"

/*
 * service.c: `run --config FILE` to its end. keep_log_level: --log-level or
 * --verbose was given and wins over the file's; interval -1: the file's;
 * dry_run: --dry-run, for every instance; watch: --watch-config, a change
 * of the file's content reloads it as SIGHUP does. State persists (run
 * --persist).
 */
int sp_config_run(const char *file, bool keep_log_level, int interval, bool dry_run,
		  bool watch, sp_show_fn *show);

#endif
