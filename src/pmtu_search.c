// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu search: each black-hole suspect from the ring buffer is searched with
 * DF probes by binary search between a known-good and a known-bad MTU, the
 * first step bounded by max_step_pct (Heffner's 2x), max_probes tries per
 * size (RFC 8899 MAX_PROBES), until high - low < threshold.
 *
 * A search is a state machine driven by the event loop: the probe in flight
 * is a socket and a timer there, so a destination that answers nothing (up
 * to 2 x max_probes x probe_timeout_ms before it is given up) never holds
 * up status, other modules' timers or a signal. One search at a time; the
 * others wait in `pending`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pmtu.h"
#include "loop.h"
#include "pmtu.skel.h"

#define MAX_PENDING PMTU_MAX_PENDING
#define MAX_SEARCHES PMTU_MAX_SEARCHES
#define MAX_SENT 64	/* probes per search, whatever the tunables say */

/* A slot of the instance's searches; its timer and probe socket carry it as ctx. */
struct pmtu_search {
	struct pmtu_state *st;
	bool active;
	bool bisect;		/* past the base size: the method is known */
	struct sp_pmtu_event ev;
	struct sp_pmtu_cfg c;
	int method;
	__u32 tries, sent, floor_mtu, ceil_mtu, low, high, size;
	unsigned int timeout_ms;
	struct pmtu_probe probe;
	struct sp_watch *probe_w, *timer_w;
	char a[INET6_ADDRSTRLEN];
};

/* The search of key in flight, if any. */
static struct pmtu_search *searching(struct pmtu_state *st, const struct sp_pmtu_key *key)
{
	for (int i = 0; i < MAX_SEARCHES; i++)
		if (st->searches[i].active && !memcmp(&st->searches[i].ev.key, key, sizeof(*key)))
			return &st->searches[i];
	return NULL;
}

static int dsts_fd(struct pmtu_state *st)
{
	return bpf_map__fd(st->skel->maps.pmtu_dsts);
}

static void save(struct pmtu_search *s, __u8 state, __u32 low, __u32 high, __u32 route_mtu)
{
	struct sp_pmtu_entry e = {};

	/* Re-read: the BPF side may have counted clamps while we searched. */
	bpf_map_lookup_elem(dsts_fd(s->st), &s->ev.key, &e);
	e.state = state;
	e.probes += s->sent;
	e.updated_ns = pmtu_now_ns();
	if (state == SP_PM_S_SEARCHED) {
		e.low = low;
		e.high = high;
		e.route_mtu = route_mtu;
	}
	bpf_map_update_elem(dsts_fd(s->st), &s->ev.key, &e, BPF_ANY);
}

static void finish(struct pmtu_search *s)
{
	__u32 high = s->high > s->ceil_mtu ? 0 : s->high, route_mtu = 0;

	pmtu_route_forget(s->st, &s->ev.key);
	if (s->c.route && high) {
		int err = pmtu_route_set(s->st, &s->ev.key, s->ev.key.family, s->ev.dst, s->low);

		if (!err)
			route_mtu = s->low;
		else if (err < 0)
			sp_log(SP_LOG_WARN, "pmtu: route mtu %u to %s: %s", s->low, s->a, strerror(-err));
	}
	save(s, SP_PM_S_SEARCHED, s->low, high, route_mtu);
	sp_log(SP_LOG_INFO, "pmtu: %s: path MTU %u%s (%u probes%s)", s->a, s->low,
	       high ? "" : ", as the route's", s->sent, route_mtu ? ", route MTU set" : "");
	s->active = false;
}

static void give_up(struct pmtu_search *s)
{
	save(s, SP_PM_S_NOPROBE, 0, 0, 0);
	sp_log(SP_LOG_WARN, "pmtu: %s answers neither ICMP echo nor a TCP SYN to port %u at %u "
	       "bytes: cannot probe it; learning from connections only (set tcp_mtu_probing=1)",
	       s->a, s->ev.dport, s->floor_mtu);
	s->active = false;
}

/* The next size between low and high, or the end of the search. */
static bool next_size(struct pmtu_search *s)
{
	if (s->high - s->low < s->c.threshold || s->sent >= MAX_SENT) {
		finish(s);
		return false;
	}
	s->size = s->low + (s->high - s->low) / 2;
	if (s->size > (__u64)s->low * s->c.max_step_pct / 100)
		s->size = (__u64)s->low * s->c.max_step_pct / 100;
	s->tries = 0;
	return true;
}

/* After a probe's outcome: true when another probe is to be sent. */
static bool advance(struct pmtu_search *s, bool answered)
{
	if (!s->bisect) {
		if (answered) {
			/* The base size tells whether, and how, probes are answered;
			 * its RTT sets the wait for the others. */
			unsigned int rtt4 = (pmtu_now_ns() - s->probe.t0) * 4 / 1000000;
			struct sp_pmtu_entry e = {};

			if (s->method == PM_SYN)
				sp_log(SP_LOG_WARN, "pmtu: %s does not answer ICMP echo; probing it "
				       "with TCP SYNs to port %u", s->a, s->ev.dport);
			s->timeout_ms = rtt4 < 20 ? 20 : rtt4 > s->c.probe_timeout_ms ?
							 s->c.probe_timeout_ms : rtt4;
			bpf_map_lookup_elem(dsts_fd(s->st), &s->ev.key, &e);
			s->low = e.low > s->floor_mtu ? e.low : s->floor_mtu;
			s->high = s->ceil_mtu + 1;
			s->bisect = true;
			return next_size(s);
		}
		if (s->tries < s->c.max_probes)
			return true;
		if (s->method == PM_ECHO && s->ev.dport) {
			s->method = PM_SYN;
			s->tries = 0;
			return true;
		}
		give_up(s);
		return false;
	}
	if (answered)
		s->low = s->size;
	else if (s->tries < s->c.max_probes)
		return true;
	else
		s->high = s->size;
	return next_size(s);
}

static void on_probe_answer(void *ctx);
static void on_probe_timeout(void *ctx);

/* Send probes until one is in flight or the search is over. */
static void launch(struct pmtu_search *s)
{
	while (s->active) {
		int r = pmtu_probe_send(s->st, &s->probe, s->method, s->ev.key.family, s->ev.dst,
					s->ev.dport, s->bisect ? s->size : s->floor_mtu);

		s->sent++;
		s->tries++;
		if (r > 0) {
			s->probe_w = sp_loop_watch(s->probe.fd, on_probe_answer, s);
			if (s->probe_w && !sp_timer_arm(s->timer_w, s->bisect ? s->timeout_ms
								 : s->c.probe_timeout_ms, 0))
				return;
			r = -1;
		}
		if (r < 0) {
			sp_log(SP_LOG_ERROR, "pmtu: %s: cannot send a probe: %s", s->a, strerror(errno));
			sp_loop_unwatch(s->probe_w);
			s->probe_w = NULL;
			pmtu_probe_close(&s->probe);
			s->active = false;
			return;
		}
		advance(s, false);
	}
}

/* Start waiting searches while there is room; the slot keeps its timer. */
static void kick(struct pmtu_state *st)
{
	for (int i = 0; i < MAX_SEARCHES && st->nr_pending; i++) {
		struct pmtu_search *s = &st->searches[i];
		struct sp_watch *timer_w = s->timer_w;

		if (s->active)
			continue;
		memset(s, 0, sizeof(*s));
		s->st = st;
		s->timer_w = timer_w;
		s->probe.fd = -1;
		s->ev = st->pending[0];
		memmove(st->pending, st->pending + 1, --st->nr_pending * sizeof(st->pending[0]));
		pmtu_read_cfg(st, &s->c);
		inet_ntop(s->ev.key.family, s->ev.dst, s->a, sizeof(s->a));
		if (s->ev.key.netns != st->netns) {
			sp_log(SP_LOG_WARN, "pmtu: %s: connection in another network namespace; "
			       "cannot probe from here (run stackpilot in that namespace)", s->a);
			i--;	/* the slot is still free */
			continue;
		}
		s->floor_mtu = s->c.base_mss + (s->ev.key.family == AF_INET ? 40 : 60);
		if (s->ev.key.family == AF_INET6 && s->floor_mtu < 1280)
			s->floor_mtu = 1280;	/* IPv6's minimum MTU always passes */
		s->ceil_mtu = pmtu_route_mtu(s->ev.key.family, s->ev.dst);
		if (!s->ceil_mtu || s->ceil_mtu <= s->floor_mtu) {
			i--;
			continue;
		}
		sp_log(SP_LOG_INFO, "pmtu: %s: black-hole suspect (port %u); searching its path MTU",
		       s->a, s->ev.dport);
		s->method = PM_ECHO;
		s->active = true;
		launch(s);
		if (!s->active)
			i--;	/* over before a probe left: the slot is free again */
	}
}

static void probe_done(struct pmtu_search *s, bool answered)
{
	sp_timer_disarm(s->timer_w);
	sp_loop_unwatch(s->probe_w);
	s->probe_w = NULL;
	pmtu_probe_close(&s->probe);
	if (advance(s, answered))
		launch(s);
	kick(s->st);
}

static void on_probe_answer(void *ctx)
{
	struct pmtu_search *s = ctx;

	if (pmtu_probe_answered(&s->probe))
		probe_done(s, true);
}

static void on_probe_timeout(void *ctx)
{
	probe_done(ctx, false);
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct pmtu_state *st = ctx;
	const struct sp_pmtu_event *ev = data;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;

	if (len < sizeof(*ev))
		return 0;
	/* A destination that answered no probe is not tried again before it
	 * expires: each try costs max_probes timeouts per method. */
	pmtu_read_cfg(st, &c);
	if (!bpf_map_lookup_elem(dsts_fd(st), &ev->key, &e) && e.state == SP_PM_S_NOPROBE &&
	    pmtu_now_ns() - e.updated_ns < (__u64)c.interval_s * 1000000000ULL)
		return 0;
	if (searching(st, &ev->key))
		return 0;
	for (int i = 0; i < st->nr_pending; i++)
		if (!memcmp(&st->pending[i].key, &ev->key, sizeof(ev->key)))
			return 0;
	if (st->nr_pending < MAX_PENDING)
		st->pending[st->nr_pending++] = *ev;
	else
		sp_log(SP_LOG_WARN, "pmtu: %d searches waiting; a suspect is dropped", MAX_PENDING);
	return 0;
}

static void on_ring(void *ctx)
{
	struct pmtu_state *st = ctx;

	ring_buffer__consume(st->rb);
	kick(st);
}

/* Expired entries: searched ones are searched again (a path may have grown),
 * the rest dropped. */
static void on_expire(void *ctx)
{
	struct pmtu_state *st = ctx;
	int fd = dsts_fd(st);
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;
	void *prev = NULL;
	__u64 now = pmtu_now_ns();

	pmtu_read_cfg(st, &c);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e) ||
		    now - e.updated_ns <= (__u64)c.interval_s * 1000000000ULL || searching(st, &k))
			continue;
		pmtu_route_forget(st, &k);
		if (e.state == SP_PM_S_SEARCHED && k.netns == st->netns && st->nr_pending < MAX_PENDING &&
		    (k.family == AF_INET ? c.prefix4 == 32 : c.prefix6 == 128)) {
			struct sp_pmtu_event ev = { .key = k };

			memcpy(ev.dst, k.addr, sizeof(ev.dst));
			st->pending[st->nr_pending++] = ev;
		} else {
			bpf_map_delete_elem(fd, &k);
		}
	}
	kick(st);
}

int pmtu_search_start(struct pmtu_state *st)
{
	st->searches = calloc(MAX_SEARCHES, sizeof(*st->searches));
	if (!st->searches)
		return sp_err("pmtu: %s", strerror(ENOMEM));
	for (int i = 0; i < MAX_SEARCHES; i++) {
		st->searches[i].st = st;
		st->searches[i].probe.fd = -1;
	}
	st->rb = ring_buffer__new(bpf_map__fd(st->skel->maps.pmtu_events), on_event, st, NULL);
	if (!st->rb)
		return sp_err("pmtu: ring buffer: %s", strerror(errno));
	st->rb_w = sp_loop_watch(ring_buffer__epoll_fd(st->rb), on_ring, st);
	st->expire_w = sp_loop_timer(on_expire, st);
	if (!st->rb_w || !st->expire_w || sp_timer_arm(st->expire_w, 1000, 1000))
		return sp_err("pmtu: registering with the event loop failed");
	for (int i = 0; i < MAX_SEARCHES; i++) {
		st->searches[i].timer_w = sp_loop_timer(on_probe_timeout, &st->searches[i]);
		if (!st->searches[i].timer_w)
			return sp_err("pmtu: registering with the event loop failed");
	}
	return 0;
}

void pmtu_search_stop(struct pmtu_state *st)
{
	/* An unfinished search teaches nothing: dropped, not saved. */
	for (int i = 0; st->searches && i < MAX_SEARCHES; i++) {
		sp_loop_unwatch(st->searches[i].probe_w);
		sp_loop_unwatch(st->searches[i].timer_w);
		pmtu_probe_close(&st->searches[i].probe);
	}
	free(st->searches);
	st->searches = NULL;
	sp_loop_unwatch(st->expire_w);
	sp_loop_unwatch(st->rb_w);
	st->expire_w = st->rb_w = NULL;
	st->nr_pending = 0;
	ring_buffer__free(st->rb);
	st->rb = NULL;
}
