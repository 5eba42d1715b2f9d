// SPDX-License-Identifier: GPL-2.0
/* One epoll for the whole run; see loop.h. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include "core/sp.h"
#include "core/loop.h"

struct sp_watch {
	int fd;
	bool timer;
	sp_loop_fn fn;
	void *ctx;
};

static int epfd = -1;
static bool stop_requested;
static unsigned long long delay_max_ns;	/* see sp_loop_delay_take() */

int sp_loop_init(void)
{
	if (epfd >= 0)
		return 0;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	stop_requested = false;
	return epfd < 0 ? sp_err("epoll: %s", strerror(errno)) : 0;
}

void sp_loop_fini(void)
{
	if (epfd >= 0)
		close(epfd);
	epfd = -1;
}

static struct sp_watch *add(int fd, bool timer, sp_loop_fn fn, void *ctx)
{
	struct sp_watch *w = calloc(1, sizeof(*w));
	struct epoll_event ev = { .events = EPOLLIN };

	if (!w || sp_loop_init())
		goto fail;
	*w = (struct sp_watch){ .fd = fd, .timer = timer, .fn = fn, .ctx = ctx };
	ev.data.ptr = w;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
		sp_err("epoll: adding fd %d: %s", fd, strerror(errno));
		goto fail;
	}
	return w;
fail:
	free(w);
	return NULL;
}

struct sp_watch *sp_loop_watch(int fd, sp_loop_fn fn, void *ctx)
{
	return add(fd, false, fn, ctx);
}

struct sp_watch *sp_loop_timer(sp_loop_fn fn, void *ctx)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	struct sp_watch *w;

	if (fd < 0) {
		sp_err("timerfd: %s", strerror(errno));
		return NULL;
	}
	w = add(fd, true, fn, ctx);
	if (!w)
		close(fd);
	return w;
}

int sp_timer_arm(struct sp_watch *w, unsigned int ms, unsigned int interval_ms)
{
	struct itimerspec its = {
		/* it_value 0 would disarm: "at once" is 1 ns. */
		.it_value = { ms / 1000, ms % 1000 * 1000000L + !ms },
		.it_interval = { interval_ms / 1000, interval_ms % 1000 * 1000000L },
	};

	return timerfd_settime(w->fd, 0, &its, NULL);
}

void sp_timer_disarm(struct sp_watch *w)
{
	struct itimerspec its = {};
	uint64_t n;

	timerfd_settime(w->fd, 0, &its, NULL);
	/* An expiry already counted must not fire after the disarm. */
	while (read(w->fd, &n, sizeof(n)) == sizeof(n))
		;
}

void sp_loop_unwatch(struct sp_watch *w)
{
	if (!w)
		return;
	if (epfd >= 0)
		epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
	if (w->timer)
		close(w->fd);
	free(w);
}

void sp_loop_stop(void)
{
	stop_requested = true;
}

static unsigned long long ts_ns(const struct timespec *t)
{
	return t->tv_sec * 1000000000ULL + t->tv_nsec;
}

/*
 * A periodic timer read n expiries and its next one is `left` away: the
 * first of them came (n - 1) periods + (period - left) ago. One-shot timers
 * cannot say (their remaining time is 0 once expired): the 100 ms tick,
 * always there, is the probe.
 */
static void note_delay(int fd, uint64_t n)
{
	struct itimerspec its;
	unsigned long long period, left, late;

	if (timerfd_gettime(fd, &its) || !(period = ts_ns(&its.it_interval)) || !n)
		return;
	left = ts_ns(&its.it_value);
	late = (n - 1) * period + (left < period ? period - left : 0);
	if (late > delay_max_ns)
		delay_max_ns = late;
}

unsigned long long sp_loop_delay_take(void)
{
	unsigned long long v = delay_max_ns;

	delay_max_ns = 0;
	return v;
}

int sp_loop_run(void)
{
	while (!stop_requested) {
		/* One event per wait: a callback may free any other watch. */
		struct epoll_event ev;
		struct sp_watch *w;
		uint64_t n;
		int r = epoll_wait(epfd, &ev, 1, -1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return sp_err("epoll_wait: %s", strerror(errno));
		if (!r)
			continue;
		w = ev.data.ptr;
		if (w->timer && read(w->fd, &n, sizeof(n)) != sizeof(n))
			continue;	/* disarmed since it became readable */
		if (w->timer)
			note_delay(w->fd, n);
		w->fn(w->ctx);
	}
	return 0;
}
