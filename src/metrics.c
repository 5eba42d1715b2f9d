// SPDX-License-Identifier: GPL-2.0
/*
 * run's metrics options: --metrics-textfile (prom.c) and --metrics-listen,
 * an HTTP endpoint serving /metrics from the event loop.
 *
 * HTTP is libmicrohttpd's (Debian's libmicrohttpd-dev), not ours: request
 * parsing is where a hand-written server goes wrong (partial requests,
 * oversized headers, pipelining), and MHD is a GNU library packaged and
 * security-maintained by Debian. It runs without a thread of its own
 * (no MHD_USE_INTERNAL_POLLING_THREAD): its epoll fd sits in our epoll and
 * MHD_run() is called when that fd is readable, or when MHD's own timeout
 * (idle connections) comes, from a timer. A scrape renders the same
 * exposition as `status --prometheus`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <microhttpd.h>
#include "sp.h"
#include "loop.h"

static struct {
	const char *textfile;
	struct sockaddr_storage addr;	/* ss_family 0: no --metrics-listen */
	const char *listen;
	const char *pin_dir;
	struct MHD_Daemon *d;
	struct sp_watch *fd_w, *timer_w;
	char *page;		/* the last exposition rendered, see render() */
	size_t page_len;
	struct timespec page_at;
} mx;

/*
 * Scrapes within this long of a rendering get that rendering: 50 scrapes
 * at once cost the loop one read of the pinned maps (~1.5 ms here), not 50,
 * so a burst of scrapes cannot delay the loop's 100 ms tick (README,
 * Metrics). Counters are at most this much older than a fresh read.
 */
#define PAGE_FRESH_NS (100 * 1000000LL)

/* "PORT", "ADDR:PORT" or "[ADDR6]:PORT"; the address 127.0.0.1 unless given. */
static int parse_listen(const char *arg)
{
	char host[64] = "127.0.0.1";
	const char *port = arg, *colon = strrchr(arg, ':');
	struct sockaddr_in *a4 = (struct sockaddr_in *)&mx.addr;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&mx.addr;
	__u32 p;

	if (colon) {
		size_t n = colon - arg;

		if (arg[0] == '[' && n >= 2 && arg[n - 1] == ']')
			arg++, n -= 2;
		if (n >= sizeof(host))
			return -1;
		memcpy(host, arg, n);
		host[n] = 0;
		port = colon + 1;
	}
	if (sp_parse_u32(port, 1, 65535, &p))
		return -1;
	memset(&mx.addr, 0, sizeof(mx.addr));
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(p);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(p);
	} else {
		return -1;
	}
	return 0;
}

int sp_metrics_opt(int opt, const char *arg)
{
	if (opt == 't') {
		mx.textfile = arg;
		return sp_prom_textfile_check(arg);
	}
	mx.listen = arg;
	if (parse_listen(arg))
		return sp_fail(2, "--metrics-listen %s: expected PORT, ADDR:PORT or [ADDR6]:PORT", arg);
	return 0;
}

static struct MHD_Response *text(const char *s)
{
	return MHD_create_response_from_buffer(strlen(s), (void *)s, MHD_RESPMEM_PERSISTENT);
}

static long long since_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000000LL + b->tv_nsec - a->tv_nsec;
}

/* The exposition in mx.page, rendered again when older than PAGE_FRESH_NS; 0 or -1. */
static int render(void)
{
	struct timespec now;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (mx.page && since_ns(&mx.page_at, &now) < PAGE_FRESH_NS)
		return 0;
	if (!(f = open_memstream(&buf, &len)))
		return -1;
	/* A missing pin still gives a valid exposition without it: 200. */
	sp_prom_write(mx.pin_dir, f);
	if (fclose(f)) {
		free(buf);
		return -1;
	}
	free(mx.page);
	mx.page = buf;
	mx.page_len = len;
	mx.page_at = now;
	return 0;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct MHD_Response *r;
	unsigned int code = MHD_HTTP_OK;
	enum MHD_Result ret;

	(void)cls, (void)version, (void)upload, (void)con_cls;
	if (*upload_size) {	/* a body nobody asked for: read and dropped */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		r = text("only GET\n");
		MHD_add_response_header(r, "Allow", "GET, HEAD");
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		r = text("not found: try /metrics\n");
		code = MHD_HTTP_NOT_FOUND;
	} else if (render()) {
		r = text("out of memory\n");
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
	} else {
		/* A copy: the page may be rendered again while this one is sent. */
		r = MHD_create_response_from_buffer(mx.page_len, mx.page, MHD_RESPMEM_MUST_COPY);
		if (r)
			MHD_add_response_header(r, "Content-Type",
						"text/plain; version=0.0.4; charset=utf-8");
	}
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

/* MHD's next deadline (idle connections to close) as our one-shot timer. */
static void rearm(void)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_get_timeout(mx.d, &ms) == MHD_YES)
		sp_timer_arm(mx.timer_w, ms > 60000 ? 60000 : (unsigned int)ms, 0);
	else
		sp_timer_arm(mx.timer_w, 60000, 0);
}

static void on_http(void *ctx)
{
	(void)ctx;
	MHD_run(mx.d);
	rearm();
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = 0;
	sp_log(SP_LOG_DEBUG, "--metrics-listen: %s", line);
}

static int listen_start(void)
{
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
			     (mx.addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);

	/*
	 * Bounds against junk and load: a slow or silent client is dropped
	 * after 5 s of idleness, headers beyond 16 KiB get 431, and at most 32
	 * connections at once (more wait in the listen backlog).
	 */
	mx.d = MHD_start_daemon(flags, 0, NULL, NULL, answer, NULL,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&mx.addr,
				MHD_OPTION_CONNECTION_TIMEOUT, 5u,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
				MHD_OPTION_CONNECTION_LIMIT, 32u,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_END);
	if (!mx.d)
		return sp_err("--metrics-listen %s: cannot listen: %s", mx.listen, strerror(errno));
	info = MHD_get_daemon_info(mx.d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info || !(mx.fd_w = sp_loop_watch(info->epoll_fd, on_http, NULL)) ||
	    !(mx.timer_w = sp_loop_timer(on_http, NULL)))
		return sp_err("--metrics-listen: cannot watch the HTTP server");
	rearm();
	sp_log(SP_LOG_INFO, "metrics served at %s, path /metrics", mx.listen);
	return 0;
}

int sp_metrics_start(const char *pin_dir, unsigned int interval_s)
{
	mx.pin_dir = pin_dir;
	if (mx.textfile && sp_prom_textfile_start(mx.textfile, pin_dir, interval_s ? interval_s : 10))
		return -1;
	return mx.addr.ss_family ? listen_start() : 0;
}

void sp_metrics_stop(void)
{
	sp_prom_textfile_stop();
	sp_loop_unwatch(mx.timer_w);
	sp_loop_unwatch(mx.fd_w);
	mx.timer_w = mx.fd_w = NULL;
	if (mx.d)
		MHD_stop_daemon(mx.d);
	mx.d = NULL;
	free(mx.page);
	mx.page = NULL;
}
