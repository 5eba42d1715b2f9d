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
 * exposition as `status --prometheus`; /healthz answers "attached" (a
 * Kubernetes probe's, dist/kubernetes/).
 *
 * The listen socket is ours, not MHD's: at its connection limit MHD takes
 * its listen socket out of its epoll and puts it back only on a later
 * MHD_run(), which nothing may call (a burst of 33 connections stopped the
 * server until a 60 s fallback timer), and its idle timeout restarts with
 * every byte (a client trickling a byte every 2 s kept its slot for good).
 * So we accept, level-triggered, never leaving a connection in the
 * backlog, and hand each to MHD (MHD_USE_NO_LISTEN_SOCKET). Each has
 * REQUEST_S to send its request and REQUEST_S to read the answer, idle or
 * trickling, then is closed. At most a quarter of the fd limit are served
 * at once (mx.cap: 256 under systemd's default of 1024), so that held
 * connections never take the fds the modules need; beyond, the one that
 * has waited longest for its request is closed for the new one (a scrape
 * sends its request at once), or the new one when all are being answered.
 */
#define _GNU_SOURCE	/* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <bpf/bpf.h>
#include "core/sp.h"
#include "export/export.h"
#include "core/loop.h"

#define MIN_CONNS	8	/* served at once (mx.cap) however low the fd limit */
#define MAX_CONNS	1024	/* and however high: 16 KiB of MHD pool each */
#ifndef SP_MUTANT_METRICS_NO_TIMEOUT	/* make mutants: a silent client is kept forever */
#define REQUEST_S	5	/* to send a request (after accept or an answer), or read an answer */
#else
#define REQUEST_S	100000
#endif
#define ACCEPT_BATCH	16	/* then MHD reads what they sent, before more are taken */

/*
 * A connection MHD serves. MHD's own limit is mx.cap + ACCEPT_BATCH: one
 * we closed (shutdown) is MHD's until its next MHD_run() reaps it.
 */
struct conn {
	int fd;
	bool used, closing;	/* closing: shut down, not yet reaped by MHD */
	bool busy;		/* a request came, its answer is not all sent */
	long long deadline;	/* CLOCK_MONOTONIC ns: its request, or answer sent, by then */
};

static struct {
	const char *textfile;
	struct sockaddr_storage addr;	/* ss_family 0: no --metrics-listen */
	const char *listen;
	const char *pin_dir;
	struct MHD_Daemon *d;
	struct sp_watch *fd_w, *timer_w, *listen_w;
	int lfd, spare_fd;	/* spare: closed to accept and drop when out of fds */
	int cap;		/* connections served at once */
	struct conn *conns;	/* cap + ACCEPT_BATCH of them */
	char *page;		/* the last exposition rendered, see render() */
	size_t page_len;
	struct timespec page_at;
} mx = { .lfd = -1, .spare_fd = -1 };

/*
 * Scrapes within this long of a rendering get that rendering: 50 scrapes
 * at once cost the loop one read of the pinned maps (~1.5 ms here), not 50,
 * so a burst of scrapes cannot delay the loop's 100 ms tick
 * (docs/metrics.md). Counters are at most this much older than a fresh read.
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

unsigned int sp_metrics_top = SP_METRICS_TOP_DEFAULT;

static bool bpf_stats;

int sp_bpf_stats_open(void)
{
	int fd;

	if (!bpf_stats)
		return -1;
	fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (fd < 0)
		sp_log(SP_LOG_WARN, "--bpf-stats: BPF run-time stats unavailable: %s", strerror(errno));
	return fd;
}

int sp_metrics_opt(int opt, const char *arg)
{
	if (opt == 'B') {
		bpf_stats = true;
		return 0;
	}
	if (opt == 'T') {
		if (sp_parse_u32(arg, 0, SP_TABLE_ROWS, &sp_metrics_top))
			return sp_fail(2, "--metrics-top %s: expected rows in [0, %d] (0: no per-destination "
				       "or per-peer series)", arg, SP_TABLE_ROWS);
		return 0;
	}
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

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
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

/* c's request started (busy) or its answer went: REQUEST_S from now for the next step. */
static void conn_mark(struct MHD_Connection *c, bool busy)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *k = ci ? ci->socket_context : NULL;

	if (k && !k->closing) {
		k->busy = busy;
		k->deadline = now_ns() + REQUEST_S * 1000000000LL;
	}
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct MHD_Response *r;
	unsigned int code = MHD_HTTP_OK;
	enum MHD_Result ret;

	(void)cls, (void)version, (void)upload;
	/* A request came (its first call): REQUEST_S to send the answer. */
	if (!*con_cls) {
		*con_cls = &mx;
		conn_mark(c, true);
	}
	if (*upload_size) {	/* a body nobody asked for: read and dropped */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		r = text("only GET\n");
		MHD_add_response_header(r, "Allow", "GET, HEAD");
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (!strcmp(url, "/healthz")) {
		/* Served by the loop, which starts only once the run has
		 * attached (a config's missing cgroup is waited for): a
		 * probe's "attached and alive". */
		r = text("attached\n");
	} else if (strcmp(url, "/metrics")) {
		r = text("not found: try /metrics or /healthz\n");
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

/* Answer sent (or given up on): REQUEST_S for the next request. */
static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)con_cls, (void)toe;
	conn_mark(c, false);
}

/* MHD tracks them from here until it has closed them. */
static void on_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		    enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *ci;
	struct conn *k = *socket_context;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (k)
			k->used = false;
		return;
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	/* A free one exists: MHD's limit is the size of the table. */
	for (k = mx.conns; ci && k < mx.conns + mx.cap + ACCEPT_BATCH; k++)
		if (!k->used) {
			*k = (struct conn){ ci->connect_fd, true, false, false,
					    now_ns() + REQUEST_S * 1000000000LL };
			*socket_context = k;
			return;
		}
}

/*
 * Close k: MHD reads the end of the stream on its next MHD_run() and
 * reaps it (it owns the fd, so only shutdown(), never close()).
 */
static void conn_close(struct conn *k)
{
	shutdown(k->fd, SHUT_RDWR);
	k->closing = true;
}

/*
 * The open connections; in oldest, the one to close for a new one: of
 * those waiting for a request, the one waiting longest (NULL if all are
 * being answered).
 */
static int conns_open(struct conn **oldest)
{
	int n = 0;

	*oldest = NULL;
	for (struct conn *k = mx.conns; k < mx.conns + mx.cap + ACCEPT_BATCH; k++) {
		if (!k->used || k->closing)
			continue;
		n++;
		if (!k->busy && (!*oldest || k->deadline < (*oldest)->deadline))
			*oldest = k;
	}
	return n;
}

/*
 * One timer for MHD's own timeout and our connections' deadlines, the
 * earlier of the two; none when there is neither: every other event MHD
 * waits for comes on its epoll fd or on our listen socket.
 */
static void rearm(void)
{
	MHD_UNSIGNED_LONG_LONG ms;
	long long at = -1, now = now_ns();

	if (MHD_get_timeout(mx.d, &ms) == MHD_YES)
		at = now + (long long)(ms > 86400000 ? 86400000 : ms) * 1000000;
	for (struct conn *k = mx.conns; k < mx.conns + mx.cap + ACCEPT_BATCH; k++)
		if (k->used && !k->closing && (at < 0 || k->deadline < at))
			at = k->deadline;
	if (at < 0)
		sp_timer_disarm(mx.timer_w);
	else	/* in ms, rounded up: not before the deadline */
		sp_timer_arm(mx.timer_w, at > now ? (unsigned int)((at - now + 999999) / 1000000) : 0,
			     0);
}

static void on_http(void *ctx)
{
	long long now = now_ns();

	(void)ctx;
	/* Who has not sent its request (or read its answer) in time: closed, idle or trickling. */
	for (struct conn *k = mx.conns; k < mx.conns + mx.cap + ACCEPT_BATCH; k++)
		if (k->used && !k->closing && k->deadline <= now)
			conn_close(k);
	MHD_run(mx.d);
	rearm();
}

/*
 * New connections, a batch at a time (then MHD reads what they sent, and
 * the loop serves its other events): each is taken at once and given to
 * MHD; at mx.cap, the one that has waited longest for its request makes
 * room, or, when every one is being answered, the new one is closed.
 */
static void on_accept(void *ctx)
{
	struct sockaddr_storage a;
	struct conn *oldest;
	socklen_t len;
	int fd;

	for (int i = 0; i < ACCEPT_BATCH; i++) {
		len = sizeof(a);
		fd = accept4(mx.lfd, (struct sockaddr *)&a, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			/*
			 * Out of fds: taken with the spare one and closed, or the
			 * listen socket stays readable (a busy loop); and the one
			 * waiting longest goes, for an fd at the next MHD_run().
			 */
			if (mx.spare_fd >= 0)
				close(mx.spare_fd);
			fd = accept4(mx.lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				close(fd);
			mx.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (conns_open(&oldest) && oldest)
				conn_close(oldest);
			sp_log(SP_LOG_WARN, "--metrics-listen: out of file descriptors: a connection "
			       "was closed unanswered");
			if (fd < 0)
				break;
			continue;
		}
		if (fd < 0 && (errno == ECONNABORTED || errno == EINTR))
			continue;
		if (fd < 0)
			break;
		if (conns_open(&oldest) >= mx.cap) {
			if (!oldest) {
				close(fd);
				continue;
			}
			conn_close(oldest);
		}
		/* MHD closes fd itself when it cannot take it. */
		if (MHD_add_connection(mx.d, fd, (struct sockaddr *)&a, len) != MHD_YES)
			sp_log(SP_LOG_DEBUG, "--metrics-listen: connection refused: %s",
			       strerror(errno));
	}
	on_http(ctx);
}

/* Our listen socket for mx.addr (IPv6 only for an IPv6 address, as MHD made it). */
static int listen_socket(void)
{
	int one = 1, fd = socket(mx.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t len = mx.addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
							 sizeof(struct sockaddr_in);

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (mx.addr.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    bind(fd, (struct sockaddr *)&mx.addr, len) || listen(fd, SOMAXCONN)) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		errno = err;
		return -1;
	}
	return fd;
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
	struct rlimit rl;

	if ((mx.lfd = listen_socket()) < 0 && errno == EADDRINUSE)
		return sp_err("--metrics-listen %s: the port is in use (`ss -ltnp` names who listens "
			      "there): pick another PORT", mx.listen);
	if (mx.lfd < 0)
		return sp_err("--metrics-listen %s: cannot listen: %s", mx.listen, strerror(errno));
	mx.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	mx.cap = getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur / 4 > MAX_CONNS ? MAX_CONNS :
		 rl.rlim_cur / 4 < MIN_CONNS ? MIN_CONNS : (int)(rl.rlim_cur / 4);
	if (!(mx.conns = calloc(mx.cap + ACCEPT_BATCH, sizeof(*mx.conns))))
		return sp_err("--metrics-listen: %s", strerror(ENOMEM));
	/*
	 * Bounds against junk and load: headers beyond 16 KiB get 431, a
	 * connection idle for REQUEST_S is closed (and one that is not, see
	 * on_http()), at most mx.cap at once (see on_accept()).
	 */
	mx.d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG,
				0, NULL, NULL, answer, NULL,
				/* First, or MHD says so on stderr. */
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)REQUEST_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(mx.cap + ACCEPT_BATCH),
				MHD_OPTION_NOTIFY_CONNECTION, on_conn, NULL,
				MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
				MHD_OPTION_END);
	if (!mx.d)
		return sp_err("--metrics-listen %s: cannot start the HTTP server: %s", mx.listen,
			      strerror(errno));
	info = MHD_get_daemon_info(mx.d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info || !(mx.fd_w = sp_loop_watch(info->epoll_fd, on_http, NULL)) ||
	    !(mx.timer_w = sp_loop_timer(on_http, NULL)) ||
	    !(mx.listen_w = sp_loop_watch(mx.lfd, on_accept, NULL)))
		return sp_err("--metrics-listen: cannot watch the HTTP server");
	rearm();
	sp_log(SP_LOG_INFO, "metrics served at %s, path /metrics, /healthz (at most %d connections at once)",
	       mx.listen, mx.cap);
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
	sp_loop_unwatch(mx.listen_w);
	sp_loop_unwatch(mx.timer_w);
	sp_loop_unwatch(mx.fd_w);
	mx.listen_w = mx.timer_w = mx.fd_w = NULL;
	if (mx.d)
		MHD_stop_daemon(mx.d);
	mx.d = NULL;
	free(mx.conns);
	mx.conns = NULL;
	if (mx.lfd >= 0)
		close(mx.lfd);
	if (mx.spare_fd >= 0)
		close(mx.spare_fd);
	mx.lfd = mx.spare_fd = -1;
	free(mx.page);
	mx.page = NULL;
}
