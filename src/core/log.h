/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Logging set-up for a service (log.c). Kept out of sp.h so the journal
 * support does not touch the shared header.
 */
#ifndef SP_LOG_H
#define SP_LOG_H

#include <stdarg.h>
#include <stdbool.h>

/* Env and stderr decide, before any command runs: see log.c. */
void sp_log_init(void);
/* "error", "warn", "info", "debug" -> SP_LOG_*, or -1. */
int sp_log_parse_level(const char *s);
/* run --log-level: 0, or 2 (bad usage) after saying why. */
int sp_log_set_level(const char *s);
/* stderr is the journal (JOURNAL_STREAM names it): no periodic status dump. */
bool sp_log_journal(void);
/* sp_err()'s body: one error line, never filtered or rate-limited. */
void sp_log_verr(const char *fmt, va_list ap);
/* A message to the service manager (sd_notify(3): "READY=1", "STATUS=...");
 * nothing when not started by one (no NOTIFY_SOCKET). */
void sp_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
