// SPDX-License-Identifier: GPL-2.0
/*
 * Log lines of a running `run`: one line per action on stderr, rate-limited
 * per call site so that a flood of events (a peer refused a thousand times,
 * a flapping interface) cannot drown the lines that matter.
 *
 * Under systemd, stderr is a stream into journald, which reads a leading
 * "<N>" as the line's syslog priority; without it every line would be
 * logged at the unit's default level. So when stderr is the journal (the
 * JOURNAL_STREAM device:inode is stderr's, as sd-daemon(3) says to check:
 * a child whose stderr was redirected elsewhere inherits the variable but
 * not the stream), each line starts with <3>, <4>, <6> or <7>.
 * STACKPILOT_LOG_PRIORITIES=1 or 0 forces the prefixes on or off (for
 * other log collectors that understand them, and for tests);
 * STACKPILOT_LOG_LEVEL sets the level as --log-level does.
 * sp_err() is here too: a user-facing error is a log line at ERROR, and
 * every layer reports through it.
 */
#define _GNU_SOURCE	/* vasprintf, strchrnul */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/libbpf.h>
#include <systemd/sd-daemon.h>
#include "core/sp.h"
#include "core/log.h"

int sp_log_level = SP_LOG_INFO;
static bool journal, priorities;

static const char *const tags[] = {
	[SP_LOG_ERROR] = "", [SP_LOG_WARN] = "warning: ",
	[SP_LOG_INFO] = "", [SP_LOG_DEBUG] = "debug: ",
};
static const char *const names[] = {
	[SP_LOG_ERROR] = "error", [SP_LOG_WARN] = "warn",
	[SP_LOG_INFO] = "info", [SP_LOG_DEBUG] = "debug",
};
/* syslog(3) LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
static const char prio[] = { [SP_LOG_ERROR] = '3', [SP_LOG_WARN] = '4',
			     [SP_LOG_INFO] = '6', [SP_LOG_DEBUG] = '7' };

static void line_start(int level)
{
	if (priorities)
		fprintf(stderr, "<%c>", prio[level & 3]);
	fprintf(stderr, "stackpilot: %s", tags[level & 3]);
}

/*
 * libbpf's messages (only with --verbose: run turns them off otherwise) can
 * span many lines (a verifier log): each line gets its priority, or the
 * journal would log the verifier's lines as the unit's default level.
 */
static int libbpf_print(enum libbpf_print_level l, const char *fmt, va_list ap)
{
	int level = l == LIBBPF_WARN ? SP_LOG_WARN : l == LIBBPF_INFO ? SP_LOG_INFO : SP_LOG_DEBUG;
	char *buf = NULL, *p, *nl;

	if (level > sp_log_level || vasprintf(&buf, fmt, ap) < 0)
		return 0;
	for (p = buf; *p; p = nl + 1) {
		nl = strchrnul(p, '\n');
		fprintf(stderr, "<%c>libbpf: %.*s\n", prio[level], (int)(nl - p), p);
		if (!*nl)
			break;
	}
	free(buf);
	return 0;
}

int sp_log_parse_level(const char *s)
{
	for (int i = 0; s && i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

int sp_log_set_level(const char *s)
{
	int l = sp_log_parse_level(s);

	if (l < 0)
		return sp_fail(2, "--log-level %s: expected error, warn, info or debug", s);
	sp_log_level = l;
	return 0;
}

bool sp_log_journal(void)
{
	return journal;
}

void sp_log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM"), *force = getenv("STACKPILOT_LOG_PRIORITIES");
	const char *lvl = getenv("STACKPILOT_LOG_LEVEL");
	unsigned long long dev, ino;
	struct stat st;

	journal = js && !isatty(STDERR_FILENO) && !fstat(STDERR_FILENO, &st) &&
		  sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
		  dev == (unsigned long long)st.st_dev && ino == (unsigned long long)st.st_ino;
	priorities = force && *force ? !strcmp(force, "1") : journal;
	if (lvl && *lvl) {
		if (sp_log_parse_level(lvl) >= 0)
			sp_log_level = sp_log_parse_level(lvl);
		else
			sp_log_at(NULL, SP_LOG_WARN, "STACKPILOT_LOG_LEVEL=%s: expected error, "
				  "warn, info or debug; using info", lvl);
	}
	if (priorities)
		libbpf_set_print(libbpf_print);
}

void sp_log_verr(const char *fmt, va_list ap)
{
	line_start(SP_LOG_ERROR);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

const char *sp_err_where;
char *sp_err_capture;
size_t sp_err_capture_len;

static void err_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sp_log_verr(fmt, ap);	/* with its <3> priority under journald */
	va_end(ap);
}

/* Every user-facing error is one line on stderr; callers return its -1. */
int sp_err(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Only the first error is kept: it is the cause, the rest follow from it. */
	if (sp_err_capture) {
		if (!*sp_err_capture)
			snprintf(sp_err_capture, sp_err_capture_len, "%s%s%s", sp_err_where ?: "",
				 sp_err_where ? ": " : "", msg);
		return -1;
	}
	if (sp_err_where)
		err_line("%s: %s", sp_err_where, msg);
	else
		err_line("%s", msg);
	return -1;
}

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
		if (rl->suppressed) {
			if (priorities)
				fprintf(stderr, "<%c>", prio[level & 3]);
			fprintf(stderr, "stackpilot: %u similar lines suppressed\n", rl->suppressed);
		}
		rl->suppressed = 0;
	}
	line_start(level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void sp_notify(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!getenv("NOTIFY_SOCKET"))
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) >= 0) {
		sd_notify(0, msg);
		free(msg);
	}
	va_end(ap);
}
