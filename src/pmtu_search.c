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
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pmtu.h"
#include "loop.h"
#include "pmtu.skel.h"

#define MAX_PENDING 64
#define MAX_SEARCHES 8
#define MAX_SENT 64	/* probes per search, whatever the tunables say */

static struct sp_pmtu_event pending[MAX_PENDING];
static int nr_pending;
static struct sp_watch *rb_w, *expire_w;

struct search {
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
static struct search searches[MAX_SEARCHES];

/* The search of key in flight, if any. */
static struct search *searching(const struct sp_pmtu_key *key)
{
	for (int i = 0; i < MAX_SEARCHES; i++)
		if (searches[i].active && !memcmp(&searches[i].ev.key, key, sizeof(*key)))
			return &searches[i];
	return NULL;
}

static int dsts_fd(void)
{
	return bpf_map__fd(pmtu.skel->maps.pmtu_dsts);
}

static void save(struct search *s, __u8 state, __u32 low, __u32 high, __u32 route_mtu)
{
	struct sp_pmtu_entry e = {};

	/* Re-read: the BPF side may have counted clamps while we searched. */
	bpf_map_lookup_elem(dsts_fd(), &s->ev.key, &e);
	e.state = state;
	e.probes += s->sent;
	e.updated_ns = pmtu_now_ns();
	if (state == SP_PM_S_SEARCHED) {
		e.low = low;
		e.high = high;
		e.route_mtu = route_mtu;
	}
	bpf_map_update_elem(dsts_fd(), &s->ev.key, &e, BPF_ANY);
}

static void finish(struct search *s)
{
	__u32 high = s->high > s->ceil_mtu ? 0 : s->high, route_mtu = 0;

	pmtu_route_forget(&s->ev.key);
	if (s->c.route && high) {
		int err = pmtu_route_set(&s->ev.key, s->ev.key.family, s->ev.dst, s->low);

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

static void give_up(struct search *s)
{
	save(s, SP_PM_S_NOPROBE, 0, 0, 0);
	sp_log(SP_LOG_WARN, "pmtu: %s answers neither ICMP echo nor a TCP SYN to port %u at %u "
	       "bytes: cannot probe it; learning from connections only (set tcp_mtu_probing=1)",
	       s->a, s->ev.dport, s->floor_mtu);
	s->active = false;
}

/* The next size between low and high, or the end of the search. */
static bool next_size(struct search *s)
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
static bool advance(struct search *s, bool answered)
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
			bpf_map_lookup_elem(dsts_fd(), &s->ev.key, &e);
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
static void launch(struct search *s)
{
	while (s->active) {
		int r = pmtu_probe_send(&s->probe, s->method, s->ev.key.family, s->ev.dst,
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
static void kick(void)
{
	for (int i = 0; i < MAX_SEARCHES && nr_pending; i++) {
		struct search *s = &searches[i];
		struct sp_watch *timer_w = s->timer_w;

		if (s->active)
			continue;
		memset(s, 0, sizeof(*s));
		s->timer_w = timer_w;
		s->probe.fd = -1;
		s->ev = pending[0];
		memmove(pending, pending + 1, --nr_pending * sizeof(pending[0]));
		pmtu_read_cfg(&s->c);
		inet_ntop(s->ev.key.family, s->ev.dst, s->a, sizeof(s->a));
		if (s->ev.key.netns != pmtu.netns) {
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

static void probe_done(struct search *s, bool answered)
{
	sp_timer_disarm(s->timer_w);
	sp_loop_unwatch(s->probe_w);
	s->probe_w = NULL;
	pmtu_probe_close(&s->probe);
	if (advance(s, answered))
		launch(s);
	kick();
}

static void on_probe_answer(void *ctx)
{
	struct search *s = ctx;

	if (pmtu_probe_answered(&s->probe))
		probe_done(s, true);
}

static void on_probe_timeout(void *ctx)
{
	probe_done(ctx, false);
}

static int on_event(void *ctx, void *data, size_t len)
{
	const struct sp_pmtu_event *ev = data;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;

	if (len < sizeof(*ev))
		return 0;
	/* A destination that answered no probe is not tried again before it
	 * expires: each try costs max_probes timeouts per method. */
	pmtu_read_cfg(&c);
	if (!bpf_map_lookup_elem(dsts_fd(), &ev->key, &e) && e.state == SP_PM_S_NOPROBE &&
	    pmtu_now_ns() - e.updated_ns < (__u64)c.interval_s * 1000000000ULL)
		return 0;
	if (searching(&ev->key))
		return 0;
	for (int i = 0; i < nr_pending; i++)
		if (!memcmp(&pending[i].key, &ev->key, sizeof(ev->key)))
			return 0;
	if (nr_pending < MAX_PENDING)
		pending[nr_pending++] = *ev;
	else
		sp_log(SP_LOG_WARN, "pmtu: %d searches waiting; a suspect is dropped", MAX_PENDING);
	return 0;
}

static void on_ring(void *ctx)
{
	ring_buffer__consume(pmtu.rb);
	kick();
}

/* Expired entries: searched ones are searched again (a path may have grown),
 * the rest dropped. */
static void on_expire(void *ctx)
{
	int fd = dsts_fd();
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;
	void *prev = NULL;
	__u64 now = pmtu_now_ns();

	pmtu_read_cfg(&c);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e) ||
		    now - e.updated_ns <= (__u64)c.interval_s * 1000000000ULL || searching(&k))
			continue;
		pmtu_route_forget(&k);
		if (e.state == SP_PM_S_SEARCHED && k.netns == pmtu.netns && nr_pending < MAX_PENDING &&
		    (k.family == AF_INET ? c.prefix4 == 32 : c.prefix6 == 128)) {
			struct sp_pmtu_event ev = { .key = k };

			memcpy(ev.dst, k.addr, sizeof(ev.dst));
			pending[nr_pending++] = ev;
		} else {
			bpf_map_delete_elem(fd, &k);
		}
	}
	kick();
}

int pmtu_search_start(void)
{
	pmtu.rb = ring_buffer__new(bpf_map__fd(pmtu.skel->maps.pmtu_events), on_event, NULL, NULL);
	if (!pmtu.rb)
		return sp_err("pmtu: ring buffer: %s", strerror(errno));
	rb_w = sp_loop_watch(ring_buffer__epoll_fd(pmtu.rb), on_ring, NULL);
	expire_w = sp_loop_timer(on_expire, NULL);
	if (!rb_w || !expire_w || sp_timer_arm(expire_w, 1000, 1000))
		return sp_err("pmtu: registering with the event loop failed");
	for (int i = 0; i < MAX_SEARCHES; i++) {
		searches[i].probe.fd = -1;
		searches[i].timer_w = sp_loop_timer(on_probe_timeout, &searches[i]);
		if (!searches[i].timer_w)
			return sp_err("pmtu: registering with the event loop failed");
	}
	return 0;
}

void pmtu_search_stop(void)
{
	/* An unfinished search teaches nothing: dropped, not saved. */
	for (int i = 0; i < MAX_SEARCHES; i++) {
		sp_loop_unwatch(searches[i].probe_w);
		sp_loop_unwatch(searches[i].timer_w);
		if (searches[i].timer_w)
			pmtu_probe_close(&searches[i].probe);
		memset(&searches[i], 0, sizeof(searches[i]));
	}
	sp_loop_unwatch(expire_w);
	sp_loop_unwatch(rb_w);
	expire_w = rb_w = NULL;
	nr_pending = 0;
	ring_buffer__free(pmtu.rb);
	pmtu.rb = NULL;
}
