// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu search: each destination to search (a new destination, a black-hole
 * suspect or an expired entry, from the ring buffer or the expiry timer) is
 * searched with DF probes: the base size first (is it answered, and how),
 * then the route's MTU (most paths are fine: two probes and done), then
 * binary search between a known-good and a known-bad MTU, each step bounded
 * by max_step_pct (Heffner's 2x), max_probes tries per size (RFC 8899
 * MAX_PROBES), until high - low < threshold.
 *
 * A search is a state machine driven by the event loop: the probe in flight
 * is a socket and a timer there, so a destination that answers nothing (up
 * to 2 x max_probes x probe_timeout_ms before it is given up) never holds
 * up status, other modules' timers or a signal. At most max_searches run at
 * once, started at most searches_per_s, all sending at most probes_per_s
 * (token buckets: a search out of tokens waits on its timer); the others
 * wait in `pending`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "modules/pmtu/pmtu_state.h"
#include "core/loop.h"
#include "pmtu.skel.h"

#define MAX_PENDING PMTU_MAX_PENDING
#define MAX_SEARCHES PMTU_MAX_SEARCHES
#define NS 1000000000ULL

/* A slot of the instance's searches; its timer and probe socket carry it as ctx. */
struct pmtu_search {
	struct pmtu_state *st;
	bool active;
	bool bisect;		/* past the base size: the method is known */
	bool verify;		/* nothing above the base passed: is the base still answered? */
	bool throttled;		/* the timer waits for a probe token, not an answer */
	struct sp_pmtu_event ev;
	struct sp_pmtu_cfg c;
	int method, tried;	/* tried: bit per method whose base probe went unanswered */
	__u32 tries, sent, bytes, floor_mtu, ceil_mtu, low, high, size;
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

/* tests/integration/test_pmtu.sh builds it by hand (t_pmtu_save_keeps_connections_fields). */
_Static_assert(sizeof(struct sp_pmtu_save) == 80 && offsetof(struct sp_pmtu_save, updated_ns) == 32 &&
	       offsetof(struct sp_pmtu_save, probe_bytes) == 72, "struct sp_pmtu_save's layout");

/*
 * The search's result into its destination's entry, written in place by
 * sp_pmtu_save (bpf/pmtu.bpf.c): a read here and a write of the whole entry
 * would undo what connections wrote in between.
 */
static int save(struct pmtu_search *s, __u8 state, __u32 low, __u32 high, __u32 route_mtu)
{
	struct {
		char eth[14];
		struct sp_pmtu_save m;
	} __attribute__((packed)) in = {
		.m = { .key = s->ev.key, .state = state, .updated_ns = pmtu_now_ns(),
		       .probes = s->sent, .probe_bytes = s->bytes, .method = SP_PM_M_NONE },
	};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = &in, .data_size_in = sizeof(in));
	int err;

	if (state == SP_PM_S_SEARCHED) {
		in.m.searched = 1;
		in.m.low = low;
		in.m.high = high;
		in.m.route_mtu = route_mtu;
	}
	if (state == SP_PM_S_SEARCHED && s->sent) {
		/* What answered, so that the next search (at expiry) starts with it. */
		in.m.method = s->method == PM_SYN ? SP_PM_M_SYN : SP_PM_M_ECHO;
		in.m.port = s->method == PM_SYN ? s->ev.dport : 0;
	}
	err = bpf_prog_test_run_opts(bpf_program__fd(s->st->skel->progs.sp_pmtu_save), &opts);
	if (!err && opts.retval <= 1)
		return 0;
	sp_log(SP_LOG_WARN, "pmtu: saving what the search of %s found: %s", s->a,
	       err ? strerror(errno) : opts.retval == 2 ? "message too short" :
	       opts.retval == 4 ? "refused as no search's result" : "no entry");
	return -1;
}

static void finish(struct pmtu_search *s)
{
	__u32 high = s->high > s->ceil_mtu ? 0 : s->high, route_mtu = 0;

	pmtu_route_forget(s->st, &s->ev.key);
	if (s->c.route && s->c.enforce && high) {
		int err = pmtu_route_set(s->st, &s->ev.key, s->ev.key.family, s->ev.dst, s->low);

		if (!err)
			route_mtu = s->low;
		else if (err < 0)
			sp_log(SP_LOG_WARN, "pmtu: route mtu %u to %s: %s", s->low, s->a, strerror(-err));
	}
	/* Unsaved, a route would say what the entry does not: it goes. */
	if (save(s, SP_PM_S_SEARCHED, s->low, high, route_mtu) && route_mtu) {
		pmtu_route_forget(s->st, &s->ev.key);
		route_mtu = 0;
	}
	sp_log(SP_LOG_INFO, "pmtu: %s: path MTU %u%s (%u probes, %u bytes, by %s%s)", s->a, s->low,
	       high ? "" : ", as the route's", s->sent, s->bytes,
	       s->method == PM_SYN ? "TCP SYN" : "ICMP echo", route_mtu ? ", route MTU set" : "");
	s->active = false;
}

static void give_up(struct pmtu_search *s)
{
	pmtu_route_forget(s->st, &s->ev.key);
	save(s, SP_PM_S_NOPROBE, 0, 0, 0);
	sp_log(SP_LOG_WARN, "pmtu: %s answers neither ICMP echo nor a TCP SYN to port %u at %u "
	       "bytes: cannot probe it; learning from connections only (set tcp_mtu_probing=1)",
	       s->a, s->ev.dport, s->floor_mtu);
	s->active = false;
}

/* The base size answered at the start and not at the end: what was lost
 * says nothing of the path's MTU. The entry keeps what it had (a low that
 * passed still clamps) and is asked for again. */
static void lost_path(struct pmtu_search *s)
{
	sp_log(SP_LOG_WARN, "pmtu: %s stopped answering %u-byte probes during its search "
	       "(link down or route changed?): nothing learned", s->a, s->floor_mtu);
	s->active = false;
}

/* The next size between low and high, or the end of the search. */
static bool next_size(struct pmtu_search *s)
{
	if (s->high - s->low < s->c.threshold || s->sent >= SP_PM_MAX_PROBES) {
		/* Every size above the base lost: a path at the base size, or one
		 * that went away during the search (a link down, a route
		 * changed). The base size again tells which; without it a
		 * transient fault is learned as base_mss for interval_s
		 * (t_pmtu_path_lost_during_search). */
		if (s->low == s->floor_mtu && !s->verify) {
			s->verify = true;
			s->size = s->floor_mtu;
			s->tries = 0;
			return true;
		}
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

			if (s->method == PM_SYN && (s->tried & 1 << PM_ECHO))
				sp_log(SP_LOG_WARN, "pmtu: %s does not answer ICMP echo; probing it "
				       "with TCP SYNs to port %u", s->a, s->ev.dport);
			s->timeout_ms = rtt4 < 20 ? 20 : rtt4 > s->c.probe_timeout_ms ?
							 s->c.probe_timeout_ms : rtt4;
			bpf_map_lookup_elem(dsts_fd(s->st), &s->ev.key, &e);
			/* A stall at or below low: low is what is in doubt. */
			s->low = e.low > s->floor_mtu && e.low <= s->ceil_mtu &&
				 !(s->ev.kind == SP_PM_EV_STALL && s->ev.mtu && s->ev.mtu <= e.low)
				 ? e.low : s->floor_mtu;
			s->high = s->ceil_mtu + 1;
			s->bisect = true;
			/* Most paths carry their route's MTU: try it first, within the step bound. */
			if (s->ceil_mtu > s->low &&
			    s->ceil_mtu <= (__u64)s->low * s->c.max_step_pct / 100) {
				s->size = s->ceil_mtu;
				s->tries = 0;
				return true;
			}
			return next_size(s);
		}
		if (s->tries < s->c.max_probes)
			return true;
		/* Unanswered: the other method, SYNs only where a port is known. */
		s->tried |= 1 << s->method;
		s->tries = 0;
		if (!(s->tried & 1 << PM_SYN) && s->ev.dport) {
			s->method = PM_SYN;
			return true;
		}
		if (!(s->tried & 1 << PM_ECHO)) {
			s->method = PM_ECHO;
			return true;
		}
		give_up(s);
		return false;
	}
	/* The route's MTU is tried once: if that one loss was not the path's,
	 * the bisection still ends within threshold of it, and a black hole
	 * costs max_probes - 1 probes less (with the defaults and a 1500-byte
	 * route: 20 probes at most, whatever the path). */
	if (s->verify && !answered && s->tries >= s->c.max_probes) {
		lost_path(s);
		return false;
	}
	if (answered)
		s->low = s->size;
	else if (s->tries < (s->size == s->ceil_mtu ? 1 : s->c.max_probes))
		return true;
	else
		s->high = s->size;
	return next_size(s);
}

static void on_probe_answer(void *ctx);
static void on_probe_timeout(void *ctx);

/* Refill the token buckets for the time since the last refill. */
static void refill(struct pmtu_state *st, const struct sp_pmtu_cfg *c)
{
	__u64 now = pmtu_now_ns();
	double dt = st->tokens_ns ? (now - st->tokens_ns) / 1e9 : 1e9;

	st->tokens_ns = now;
	st->search_tokens += dt * c->searches_per_s;
	if (st->search_tokens > c->searches_per_s)
		st->search_tokens = c->searches_per_s;
	st->probe_tokens += dt * c->probes_per_s;
	if (st->probe_tokens > c->probes_per_s)
		st->probe_tokens = c->probes_per_s;
}

/* Milliseconds until a bucket at `tokens` has one whole token. */
static unsigned int token_wait_ms(double tokens, __u32 rate)
{
	return (unsigned int)((1 - tokens) * 1000 / rate) + 1;
}

/* Send probes until one is in flight, the probe budget says wait, or the search is over. */
static void launch(struct pmtu_search *s)
{
	struct pmtu_state *st = s->st;

	while (s->active) {
		__u32 size = s->bisect ? s->size : s->floor_mtu;
		int r;

		refill(st, &s->c);
		if (st->probe_tokens < 1) {
			s->throttled = true;
			if (!sp_timer_arm(s->timer_w, token_wait_ms(st->probe_tokens,
								    s->c.probes_per_s), 0))
				return;
			s->throttled = false;
			errno = EIO;
			r = -1;
		} else {
			st->probe_tokens -= 1;
			r = pmtu_probe_send(st, &s->probe, s->method, s->ev.key.family, s->ev.dst,
					    s->ev.dport, size);
			s->sent++;
			s->tries++;
		}
		if (r > 0) {
			s->bytes += size;
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
			/* Not asked for again at every connection until the entry expires. */
			save(s, SP_PM_S_NOPROBE, 0, 0, 0);
			s->active = false;
			return;
		}
		advance(s, false);
	}
}

/* Whether a search of ev's destination is (still) worth its probes. */
static bool wanted(struct pmtu_state *st, const struct sp_pmtu_event *ev)
{
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;

	if (searching(st, &ev->key))
		return false;
	if (bpf_map_lookup_elem(dsts_fd(st), &ev->key, &e))
		return true;
	pmtu_read_cfg(st, &c);
	if (pmtu_now_ns() - e.updated_ns > (__u64)c.interval_s * NS)
		return true;
	/* Searched: all a search can say is said (and the route set). No answer:
	 * each try costs max_probes timeouts per method, not again before expiry.
	 * Unless a connection at or below its low stalls (the BPF side sends
	 * that only at a third RTO in a row, once per SP_PM_RECHECK_NS). */
	if (ev->kind == SP_PM_EV_STALL && ev->mtu && ev->mtu <= e.low &&
	    pmtu_now_ns() - e.updated_ns >= SP_PM_RECHECK_NS)
		return true;
	if (e.state == SP_PM_S_SEARCHED || e.state == SP_PM_S_NOPROBE)
		return false;
	/* A new destination a connection has proved meanwhile needs no probes;
	 * a stall means what it proved is not enough. */
	return ev->kind != SP_PM_EV_NEW || !e.low;
}

static const char *const why[] = {
	[SP_PM_EV_STALL] = "black-hole suspect",
	[SP_PM_EV_NEW] = "new destination",
	[PMTU_EV_EXPIRED] = "entry expired",
};

/* Set slot s up for ev and send its first probe; false if there is nothing to search. */
static bool begin(struct pmtu_state *st, struct pmtu_search *s, const struct sp_pmtu_event *ev)
{
	struct sp_watch *timer_w = s->timer_w;
	struct sp_pmtu_entry e = {};

	memset(s, 0, sizeof(*s));
	s->st = st;
	s->timer_w = timer_w;
	s->probe.fd = -1;
	s->ev = *ev;
	pmtu_read_cfg(st, &s->c);
	inet_ntop(s->ev.key.family, s->ev.dst, s->a, sizeof(s->a));
	if (s->ev.key.netns != st->netns) {
		__u64 now = pmtu_now_ns();

		/* Each new destination of such a cgroup comes here: one line per 10 s,
		 * and no_probe stops the asks until the entry expires. */
		if (now - st->netns_logged_ns > 10 * NS) {
			st->netns_logged_ns = now;
			sp_log(SP_LOG_WARN, "pmtu: %s: connection in another network namespace; "
			       "cannot probe from here (run stackpilot in that namespace)", s->a);
		}
		save(s, SP_PM_S_NOPROBE, 0, 0, 0);
		return false;
	}
	if (!wanted(st, ev))
		return false;
	s->floor_mtu = s->c.base_mss + (s->ev.key.family == AF_INET ? 40 : 60);
	if (s->ev.key.family == AF_INET6 && s->floor_mtu < 1280)
		s->floor_mtu = 1280;	/* IPv6's minimum MTU always passes */
	/* Not our own route's MTU: at expiry it would cap the search at the old
	 * result, the route would be dropped as "the path carries the route's
	 * MTU" while the black hole is still there, and a path that grew would
	 * never be found (t_pmtu_path_grows_under_our_route). */
	s->ceil_mtu = pmtu_route_ceiling(st, &s->ev.key, s->ev.key.family, s->ev.dst);
	if (!s->ceil_mtu)
		return false;
	if (s->ceil_mtu <= s->floor_mtu || pmtu_dst_is_local(s->ev.key.family, s->ev.dst)) {
		/* Nothing to search above our own route's MTU: the kernel uses it already. */
		save(s, SP_PM_S_SEARCHED, s->ceil_mtu, 0, 0);
		return false;
	}
	/* Start with what answered last time: where echo is filtered, an
	 * expiry's search would otherwise spend max_probes timeouts on it. */
	s->method = PM_ECHO;
	bpf_map_lookup_elem(dsts_fd(st), &s->ev.key, &e);
	if (e.method == SP_PM_M_SYN && e.port) {
		s->method = PM_SYN;
		s->ev.dport = e.port;
	}
	sp_log(SP_LOG_INFO, "pmtu: %s: %s (port %u); searching its path MTU%s", s->a,
	       why[ev->kind <= PMTU_EV_EXPIRED ? ev->kind : 0], s->ev.dport,
	       s->method == PM_SYN ? " with TCP SYNs, which answered its last search" : "");
	s->active = true;
	launch(s);
	return true;
}

/* Start waiting searches while there is room and a search token. */
static void kick(struct pmtu_state *st)
{
	struct sp_pmtu_cfg c;

	pmtu_read_cfg(st, &c);
	while (st->nr_pending) {
		struct pmtu_search *free_slot = NULL;
		struct sp_pmtu_event ev;
		__u32 active = 0;

		for (int i = 0; i < MAX_SEARCHES; i++) {
			if (st->searches[i].active)
				active++;
			else if (!free_slot)
				free_slot = &st->searches[i];
		}
		/* One search slot is kept for black-hole suspects (they are queued
		 * first): asks for new destinations, which others can make at will,
		 * never hold them all. */
		if (!free_slot || active >= c.max_searches -
		    (c.max_searches > 1 && st->pending[0].kind != SP_PM_EV_STALL))
			return;	/* a search's end kicks again */
		refill(st, &c);
		if (st->search_tokens < 1) {
			sp_timer_arm(st->kick_w, token_wait_ms(st->search_tokens, c.searches_per_s), 0);
			return;
		}
		ev = st->pending[0];
		memmove(st->pending, st->pending + 1, --st->nr_pending * sizeof(st->pending[0]));
		if (begin(st, free_slot, &ev))
			st->search_tokens -= 1;
	}
}

static void on_kick(void *ctx)
{
	kick(ctx);
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
	struct pmtu_search *s = ctx;

	if (!s->throttled) {
		/* The loop hands out one ready fd at a time: an answer that came
		 * while the loader was not running is queued behind this expiry,
		 * and is an answer (a 20 ms wait is short on a busy host). */
		probe_done(s, s->probe.fd >= 0 && pmtu_probe_answered(&s->probe) > 0);
		return;
	}
	s->throttled = false;
	launch(s);
	kick(s->st);
}

/*
 * Queue a search of ev's destination unless it is searched, queued or not
 * worth it. Black-hole suspects go first, and a full queue makes room for
 * one by dropping its newest other ask: new destinations are whatever a
 * server's clients make them (an IPv6 client has a /64 of addresses), and
 * must not keep a real stall from being searched
 * (t_pmtu_stall_searched_during_flood).
 */
static void enqueue(struct pmtu_state *st, const struct sp_pmtu_event *ev)
{
	bool stall = ev->kind == SP_PM_EV_STALL;
	__u64 now = pmtu_now_ns();
	int at = 0;

	if (!wanted(st, ev))
		return;
	for (int i = 0; i < st->nr_pending; i++) {
		if (memcmp(&st->pending[i].key, &ev->key, sizeof(ev->key)))
			continue;
		if (!stall || st->pending[i].kind == SP_PM_EV_STALL)
			return;
		/* Asked as new, now stalled: moved to the front. */
		memmove(st->pending + i, st->pending + i + 1,
			(--st->nr_pending - i) * sizeof(st->pending[0]));
		break;
	}
	while (at < st->nr_pending && (!stall || st->pending[at].kind == SP_PM_EV_STALL))
		at++;
	if (st->nr_pending == MAX_PENDING) {
		if (stall && st->pending[MAX_PENDING - 1].kind != SP_PM_EV_STALL) {
			/* Its destination is asked again: by the BPF side
			 * (SP_PM_ASK_RETRY_NS) or at the next expiry pass. */
			st->nr_pending--;
		} else {
			if (now - st->dropped_logged_ns > 10 * NS) {
				st->dropped_logged_ns = now;
				sp_log(SP_LOG_WARN, "pmtu: %d searches waiting; further ones are dropped "
				       "(logged once per 10 s)", MAX_PENDING);
			}
			return;
		}
	}
	memmove(st->pending + at + 1, st->pending + at,
		(st->nr_pending - at) * sizeof(st->pending[0]));
	st->pending[at] = *ev;
	st->nr_pending++;
}

static int on_event(void *ctx, void *data, size_t len)
{
	if (len >= sizeof(struct sp_pmtu_event))
		enqueue(ctx, data);
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
		    now - e.updated_ns <= (__u64)c.interval_s * NS || searching(st, &k))
			continue;
		if (e.state == SP_PM_S_SEARCHED && k.netns == st->netns && st->nr_pending < MAX_PENDING &&
		    (k.family == AF_INET ? c.prefix4 == 32 : c.prefix6 == 128)) {
			struct sp_pmtu_event ev = { .key = k, .kind = PMTU_EV_EXPIRED };

			/* The route stays until the new search replaces it (finish,
			 * give_up): connections stalled meanwhile are still rescued. */
			memcpy(ev.dst, k.addr, sizeof(ev.dst));
			enqueue(st, &ev);
		} else {
			pmtu_route_forget(st, &k);
			bpf_map_delete_elem(fd, &k);
		}
	}
	/* A route whose entry the LRU evicted (4096 destinations: a server's
	 * clients can churn them) would stay until exit, its MTU never searched
	 * again, and fill the table of routes. */
	for (int i = st->nr_routes - 1; i >= 0; i--)
		if (bpf_map_lookup_elem(fd, &st->routes[i].key, &e) && !searching(st, &st->routes[i].key))
			pmtu_route_forget(st, &st->routes[i].key);
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
	st->kick_w = sp_loop_timer(on_kick, st);
	if (!st->rb_w || !st->expire_w || !st->kick_w || sp_timer_arm(st->expire_w, 1000, 1000))
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
	sp_loop_unwatch(st->kick_w);
	sp_loop_unwatch(st->rb_w);
	st->expire_w = st->rb_w = st->kick_w = NULL;
	st->nr_pending = 0;
	ring_buffer__free(st->rb);
	st->rb = NULL;
}
