// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu: learn a path's MTU once per destination and start later connections
 * right. Where overlays drop big packets silently, the kernel recovers per
 * socket only, after several RTOs (black-hole detection, tcp_mtu_probing).
 *
 *  TCP_CONNECT_CB  a destination with a known-good MTU: set TCP_MAXSEG to
 *                  it, before tcp_connect_init copies it into mss_clamp. Never
 *                  above what was shown to pass: a connection is never a probe.
 *                  A destination not known: ask the loader (ring buffer) to
 *                  search it now, before any stall, so that the next
 *                  connection starts right even if this one never stalls
 *                  where the client can see it (a download).
 *  PASSIVE_ESTABLISHED_CB  the same ask for a server's clients: an accepted
 *                  connection cannot be clamped, but a route MTU (route=1)
 *                  rescues its stalled sends once the search has ended.
 *  RTT_CB          a connection that has delivered learn_kb since its last
 *                  RTO has proved its current MTU good. Asked for at
 *                  establishment and given up once proved (rttcb.bpf.h):
 *                  after learn_kb, no pmtu program runs per ACK. One
 *                  connection a destination a second waits so
 *                  (SP_PM_PROVER_T); the others wait after an RTO, or
 *                  prove at their close where another module asked for
 *                  STATE_CB (pmtu asks none: it would run every sockops
 *                  program three or four times a connection).
 *  RTO_CB          an RTO with full-size segments out, at an MTU not known
 *                  to pass: a black hole suspect. Tell the loader, which
 *                  searches the path with DF probes that cost no connection
 *                  anything (src/modules/pmtu/pmtu_search.c).
 *
 * Where the kernel allows fentry (src/core/probe.c), three fexit programs also
 * learn from the kernel's own path-MTU discoveries on this cgroup's
 * connections: an ICMP "fragmentation needed" / "packet too big" that
 * lowered a connection's MTU (tcp_v4/v6_mtu_reduced), and the kernel's own
 * MTU probing (tcp_mtu_probing) raising search_low, which a probe of that
 * size being acknowledged is (tcp_sync_mss). Later connections then start
 * right even when stackpilot never probed the path. The loader leaves them
 * out elsewhere, and the sockops program does all of the above alone.
 */
#include "common.bpf.h"
#include "netns.bpf.h"
#include "rttcb.bpf.h"
#include "chain.bpf.h"
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define SOL_TCP		6
#define TCP_MAXSEG	2
#define AF_INET		2

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_pmtu_cfg);
} pmtu_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SP_PM_NR);
	__type(key, __u32);
	__type(value, __u64);
} pmtu_ctr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_PM_DSTS);
	__type(key, struct sp_pmtu_key);
	__type(value, struct sp_pmtu_entry);
} pmtu_dsts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} pmtu_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ask_bucket);
} pmtu_ask_bucket SEC(".maps");

/* Credit in ns: an ask costs 1 s / searches_per_s. CPUs race on it: the
 * limit is approximate, the bound holds within a few asks. */
struct ask_bucket {
	__u64 ns;
	__u64 avail;
};

struct sk_state {
	__u64 acked_at_rto;	/* bytes_acked at the last RTO */
	__u32 klow;		/* fexit: the kernel's search_low when last seen (0: not yet) */
	__u32 check_low;	/* its destination's low at connect, unclamped: at establishment
				 * it has nothing to prove if this is at least its route's MTU */
	__u8 learned;
	__u8 suspected;
	__u8 passive;
	__u8 left;	/* left its proof to another connection: proves at close */
	__u8 rtt_asked;	/* pmtu asked for RTT_CB (want_rtt): a reconnect withdraws it */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sk_state);
} pmtu_sk SEC(".maps");

struct cfg {
	__u32 prefix4, prefix6, learn_bytes, enforce, search_new, searches_per_s, threshold;
	__u64 interval_ns;
};

SP_CFG_READ(pmtu, struct sp_pmtu_cfg, pmtu_cfg, SP_PMTU_TUNABLES)

static __always_inline void read_cfg(struct cfg *c)
{
	struct sp_pmtu_cfg m;

	pmtu_cfg_read(&m);
	c->prefix4 = m.prefix4;
	c->prefix6 = m.prefix6;
	c->learn_bytes = m.learn_kb << 10;
	c->interval_ns = (__u64)m.interval_s * 1000000000;
	c->enforce = m.enforce;
	c->search_new = m.search_new;
	c->searches_per_s = m.searches_per_s;
	c->threshold = m.threshold;
}

static __always_inline bool ask_token(const struct cfg *c, __u64 now)
{
	__u32 zero = 0;
	struct ask_bucket *b = bpf_map_lookup_elem(&pmtu_ask_bucket, &zero);
	__u64 cost, avail;

	if (!b)
		return true;
	cost = 1000000000ULL / (c->searches_per_s ? c->searches_per_s : 1);
	avail = b->avail + (now - b->ns);
	if (avail > cost * SP_PM_ASK_BURST)
		avail = cost * SP_PM_ASK_BURST;
	b->ns = now;
	b->avail = avail >= cost ? avail - cost : avail;
	return avail >= cost;
}

/*
 * The key of a destination, and its full address in full. An IPv4-mapped
 * IPv6 socket (a dual-stack listener's IPv4 client) is IPv4 on the wire: it
 * gets the IPv4 key, header size and probes. Returns 1 for a loopback or
 * IPv6 link-local destination: nothing to search there.
 */
static __always_inline int key_of(const struct cfg *c, __u64 netns, __u32 family, __u32 ip4,
				  __u32 a0, __u32 a1, __u32 a2, __u32 a3,
				  struct sp_pmtu_key *k, __u32 *full)
{
	__u32 bits;
	int local;

	__builtin_memset(k, 0, sizeof(*k));
	k->netns = netns;
	if (family != AF_INET && !a0 && !a1 && a2 == bpf_htonl(0xffff)) {
		family = AF_INET;
		ip4 = a3;
	}
	k->family = family;
	if (family == AF_INET) {
		k->addr[0] = ip4;
		local = (bpf_ntohl(ip4) >> 24) == 127;
	} else {
		k->addr[0] = a0; k->addr[1] = a1; k->addr[2] = a2; k->addr[3] = a3;
		/* ::1, and link-local fe80::/10: a probe would need the scope. */
		local = (!a0 && !a1 && !a2 && a3 == bpf_htonl(1)) ||
			(a0 & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000);
	}
	__builtin_memcpy(full, k->addr, 16);
	bits = family == AF_INET ? c->prefix4 : c->prefix6;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 b = bits > 32 ? 32 : bits;

		k->addr[i] &= b ? bpf_htonl(b == 32 ? 0xffffffff : ~(0xffffffffu >> b)) : 0;
		bits -= b;
	}
	return local;
}

/* The namespace of a sockops socket, named as the loader names it. */
static __always_inline __u64 skops_netns(struct bpf_sock_ops *skops)
{
	struct bpf_sock *bsk;
	struct tcp_sock *tp;

	if (!sp_netns_by_ino)
		return bpf_get_netns_cookie(skops);
	bsk = skops->sk;
	if (!bsk || !(tp = bpf_skc_to_tcp_sock(bsk)))
		return 0;
	return sp_net_id(tp->inet_conn.icsk_inet.sk.__sk_common.skc_net.net);
}

/* The key of the connection's destination (see key_of). */
static __always_inline int make_key(struct bpf_sock_ops *skops, const struct cfg *c,
				    struct sp_pmtu_key *k, __u32 *full)
{
	/* Load every field, then choose: the verifier refuses ctx loads through a
	 * pointer, which is what clang makes of "family ? ip4 : ip6[0]". */
	__u32 family = skops->family, ip4 = skops->remote_ip4, a0 = skops->remote_ip6[0],
	      a1 = skops->remote_ip6[1], a2 = skops->remote_ip6[2], a3 = skops->remote_ip6[3];

	barrier_var(ip4);
	barrier_var(a0);
	return key_of(c, skops_netns(skops), family, ip4, a0, a1, a2, a3, k, full);
}

/*
 * The MTU a connection's full-size segments use: payload + TCP header with
 * options + extension headers + IP. With path_only, 0 unless the path bounds
 * it (tcp_sync_mss: the route's MTU, icsk_pmtu_cookie, or the kernel's own
 * probing's search_low): a peer's advertised MSS, its window
 * (tcp_bound_to_half_wnd) or a user's TCP_MAXSEG bound it lower, and then
 * what passed says nothing about the path. Learned as low, a peer's MSS 536
 * would start every later connection to that host (any port, any prefix
 * sharer) at 536 for interval_s (t_pmtu_peer_mss_not_learned).
 */
static __always_inline __u32 conn_mtu(struct bpf_sock_ops *skops, __u32 family, bool path_only)
{
	struct bpf_sock *bsk = skops->sk;
	struct tcp_sock *tp;
	__u32 mtu;

	if (!bsk || !(tp = bpf_skc_to_tcp_sock(bsk)))
		return 0;
	mtu = skops->mss_cache + tp->tcp_header_len + tp->inet_conn.icsk_ext_hdr_len +
	      (family == AF_INET ? 20 : 40);
	if (path_only && mtu != tp->inet_conn.icsk_pmtu_cookie &&
	    mtu != (__u32)tp->inet_conn.icsk_mtup.search_low)
		return 0;
	return mtu;
}

static __always_inline bool fresh(const struct sp_pmtu_entry *e, const struct cfg *c, __u64 now)
{
	return now - e->updated_ns <= c->interval_ns;
}

/*
 * A destination with nothing known (no entry, an expired one, or one whose
 * ask went unanswered for SP_PM_ASK_RETRY_NS): ask the loader to search it.
 * The entry made here marks the ask, so the connections that follow to the
 * same destination ask nothing until the search ends. Returns the
 * destination's entry: e, or the one made here, or the one another
 * connection made first.
 */
static __always_inline struct sp_pmtu_entry *ask(struct bpf_sock_ops *skops, const struct cfg *c,
						 const struct sp_pmtu_key *k, const __u32 *full,
						 struct sp_pmtu_entry *e, __u64 now)
{
	struct sp_pmtu_entry placeholder = {};
	struct sp_pmtu_event *ev;

	if (!c->search_new)
		return e;
	if (e) {
		if (fresh(e, c, now) && (e->low || e->state != SP_PM_S_ASKED))
			return e;	/* known, or searched without an answer: wait for expiry */
		if (now - e->asked_ns < SP_PM_ASK_RETRY_NS)
			return e;
	}
	if (!ask_token(c, now)) {
		sp_count(&pmtu_ctr, SP_PM_ASKS_LIMITED, 1);
		return e;
	}
	if (e) {
		/* Two CPUs may both pass here: the loader drops the duplicate. */
		e->asked_ns = now;
	} else {
		placeholder.state = SP_PM_S_ASKED;
		placeholder.updated_ns = now;
		placeholder.asked_ns = now;
		/* Failed: another connection made it first, and asked. */
		if (bpf_map_update_elem(&pmtu_dsts, k, &placeholder, BPF_NOEXIST))
			return bpf_map_lookup_elem(&pmtu_dsts, k);
		e = bpf_map_lookup_elem(&pmtu_dsts, k);
	}
	ev = bpf_ringbuf_reserve(&pmtu_events, sizeof(*ev), 0);
	if (!ev) {
		sp_count(&pmtu_ctr, SP_PM_EVENTS_LOST, 1);
		return e;
	}
	ev->key = *k;
	__builtin_memcpy(ev->dst, full, 16);
	ev->mtu = 0;
	ev->dport = sp_remote_port(skops);
	ev->kind = SP_PM_EV_NEW;
	bpf_ringbuf_submit(ev, 0);
	sp_count(&pmtu_ctr, SP_PM_ASKED, 1);
	return e;
}

/* A destination the connection finds unknown or out of date is searched. */
static __always_inline struct sp_pmtu_entry *ask_unknown(struct bpf_sock_ops *skops,
							 const struct cfg *c,
							 const struct sp_pmtu_key *k,
							 const __u32 *full, struct sp_pmtu_entry *e,
							 __u64 now)
{
	if (!e || !e->low || !fresh(e, c, now))
		e = ask(skops, c, k, full, e, now);
	return e;
}

enum role {
	PM_WAIT,	/* waits for its proof: storage, RTT_CB until learn_kb */
	PM_NOTHING,	/* can teach nothing */
	PM_LEFT,	/* leaves its proof to another connection (proves at an RTO, or a close seen) */
	PM_LATER,	/* decided at establishment (a kernel that cannot clamp) */
};

/*
 * Set by the loader where bpf_setsockopt() takes TCP_MAXSEG (6.1 on,
 * probe.c): a connecting socket's role is then decided at TCP_CONNECT_CB
 * (on_connect). Elsewhere no connection is clamped, and what it can teach
 * depends on its route's MTU, known only once tcp_connect_init() has run:
 * its establishment decides, with a lookup of its own.
 */
const volatile bool sp_kernel_clamps = true;

/*
 * A destination's proof is one connection's work: the first to claim it in
 * SP_PM_PROVER_T waits for its proof, the others leave it (see proof_role).
 * now in ns.
 */
static __always_inline enum role claim(struct sp_pmtu_entry *e, __u64 now_ns)
{
	__u32 now = now_ns >> 20;

#ifndef SP_MUTANT_PM_EVERY_PROVER	/* make mutants: every connection waits for its proof */
	/* 0: never claimed (a restored entry starts so). Written from
	 * outside, it can only make a connection leave its proof. */
	if (e->prover_t && now - e->prover_t < SP_PM_PROVER_T)
		return PM_LEFT;
#endif
	/* Two CPUs may both claim it: two provers, no harm. */
	e->prover_t = now ? now : 1;
	return PM_WAIT;
}

/*
 * A connection starts (TCP_CONNECT_CB): clamped to what its destination
 * passed, and its role in the destination's proof decided from the same
 * lookup, so that its establishment reads no map (pmtu_ops): that second
 * lookup was a fifth of what the modules cost a short connection
 * (docs/bench/overhead.md). Not where the kernel cannot clamp
 * (sp_kernel_clamps). A clamped connection's segments are at most
 * low (the clamp bounds mss_clamp, and with it the kernel's own probing's
 * search_high): nothing above low to prove. An unclamped one (enforce
 * off, a low past what TCP_MAXSEG takes) to a destination with a low
 * claims like one to an unproved destination, and its establishment lets
 * it go if low is at least its route's MTU (check_low; icsk_pmtu_cookie
 * is set only after this callback, in tcp_connect_init). A connect that
 * fails after claiming leaves the destination without a prover for
 * SP_PM_PROVER_T: the next second's first connection claims it.
 * Sets *check_low for the establishment to compare.
 */
static __always_inline enum role on_connect(struct bpf_sock_ops *skops, __u32 *check_low)
{
	struct sp_pmtu_key k;
	struct sp_pmtu_entry *e;
	__u32 full[4], low;
	struct cfg c;
	__u64 now;
	int mss;

	sp_count(&pmtu_ctr, SP_PM_CONNECTS, 1);
	read_cfg(&c);
	if (make_key(skops, &c, &k, full))
		return PM_NOTHING;	/* loopback, link-local: nothing to learn */
	e = bpf_map_lookup_elem(&pmtu_dsts, &k);
	now = bpf_ktime_get_ns();
	if (!e || !e->low) {
		e = ask_unknown(skops, &c, &k, full, e, now);
		if (!sp_kernel_clamps)
			return PM_LATER;
		/* No entry (searches off): this one may make it. */
		return e ? claim(e, now) : PM_WAIT;
	}
	/* An expired low still clamps while its entry is searched again: it
	 * passed, and starting above it is what may stall. */
	if (!fresh(e, &c, now))
		ask(skops, &c, &k, full, e, now);
	low = e->low;
	/* IPv6 never below its minimum MTU, whatever the map says. */
	mss = (k.family == AF_INET ? (low < 576 ? 576 : low) - 40
				   : (low < 1280 ? 1280 : low) - 60);
	if (!c.enforce) {
		sp_count(&pmtu_ctr, SP_PM_WOULD_CLAMP, 1);
		goto unclamped;
	}
	/* Before 6.1 bpf_setsockopt() takes no TCP_MAXSEG (probe.c): the
	 * kernel would refuse it. */
	if (!sp_kernel_clamps) {
		sp_count(&pmtu_ctr, SP_PM_CLAMP_REFUSED, 1);
		goto unclamped;
	}
#ifdef SP_MUTANT_PM_NO_CLAMP	/* make mutants: learned, never applied */
	goto unclamped;
#endif
	/* Past the largest MSS TCP takes (MAX_TCP_WINDOW), or no MTU at all
	 * (bpftool's): nothing to clamp. A local address's 65535 is one. */
	if (low > 65535 || mss > 32767)
		goto unclamped;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_MAXSEG, &mss, sizeof(mss))) {
		sp_count(&pmtu_ctr, SP_PM_CLAMP_REFUSED, 1);
		goto unclamped;
	}
	__sync_fetch_and_add(&e->clamped, 1);
	sp_count(&pmtu_ctr, SP_PM_CLAMPED, 1);
	/* Clamped at low: nothing to prove. Below the family's minimum,
	 * clamped above low: what it passes may raise it. */
	if (mss + (k.family == AF_INET ? 40 : 60) <= low)
		return PM_NOTHING;
unclamped:
	if (!sp_kernel_clamps)
		return PM_LATER;
	*check_low = low;
	return claim(e, now);
}

/* The connection has delivered learn_kb (since its last RTO): what its
 * full-size segments use passes. */
static __always_inline void prove(struct bpf_sock_ops *skops, const struct cfg *c, bool passive)
{
	struct sp_pmtu_entry *e, fresh = {};
	struct sp_pmtu_key k;
	__u32 full[4], mtu;

	if (make_key(skops, c, &k, full))
		return;	/* loopback, link-local: nothing to learn */
	mtu = conn_mtu(skops, k.family, true);
	if (!mtu)
		return;
	e = bpf_map_lookup_elem(&pmtu_dsts, &k);
	if (!e) {
		/* A server's clients make no entries: they would be the LRU's
		 * churn at whatever rate clients come (a client of an IPv6 /64
		 * has 2^64 addresses), and an accepted connection is never
		 * clamped. They are searched (rate-limited) instead. */
		if (passive)
			return;
		fresh.low = mtu;
		fresh.updated_ns = bpf_ktime_get_ns();
		bpf_map_update_elem(&pmtu_dsts, &k, &fresh, BPF_NOEXIST);
		sp_count(&pmtu_ctr, SP_PM_LEARNED, 1);
		return;
	}
	if (mtu > e->low) {
		e->low = mtu;
		if (e->state == SP_PM_S_ASKED)
			e->state = SP_PM_S_LEARNED;
		/* It passed: whatever said it fails is out of date. */
		if (e->high && e->high <= mtu)
			e->high = 0;
		e->updated_ns = bpf_ktime_get_ns();
		sp_count(&pmtu_ctr, SP_PM_LEARNED, 1);
	}
}

/* Ask for RTT_CB for this connection's proof. */
static __always_inline void want_rtt(struct bpf_sock_ops *skops, struct sk_state *s)
{
	s->rtt_asked = 1;
	sp_rtt_want(skops, SP_RTT_PMTU, true);
}

static __always_inline void on_rtt(struct bpf_sock_ops *skops, struct sk_state *s)
{
	struct cfg c;

	/* Every ACK of every socket comes here: done sockets leave at once. */
	if (s->learned)
		return;
	/* Fewer bytes than at the last RTO: storage of the socket's earlier
	 * connection (a disconnect zeroes bytes_acked), seen at a reconnect's
	 * SYN-ACK before its establishment takes a fresh role (before 6.1).
	 * The difference would wrap and prove what nothing delivered. */
#ifndef SP_MUTANT_PM_RTO_MARK_WRAPS	/* make mutants: a reconnect's SYN-ACK proves the last connection's path */
	if (skops->bytes_acked < s->acked_at_rto)
		return;
#endif
	read_cfg(&c);
#ifndef SP_MUTANT_PM_LEARN_AT_ONCE	/* make mutants: a connection proves its MTU at its first ACK */
	if (skops->bytes_acked - s->acked_at_rto < c.learn_bytes)
		return;
#endif
	s->learned = 1;
#ifndef SP_MUTANT_RTT_NEVER_OFF	/* make mutants: pmtu keeps RTT_CB for the connection's life */
	sp_rtt_want(skops, SP_RTT_PMTU, false);
#endif
	prove(skops, &c, s->passive);
}

/*
 * A connection that left its proof to another (or had nothing to learn and
 * runs this because another module asks for STATE_CB) closes: what it
 * delivered in all is its proof. Its passiveness is not known without
 * storage: taken as accepted, it raises an entry but makes none (should
 * its entry have gone meanwhile, expired or evicted, nothing is learned).
 */
static __always_inline void on_close(struct bpf_sock_ops *skops)
{
	struct cfg c;

#ifdef SP_MUTANT_PM_NO_CLOSE_PROOF	/* make mutants: a connection that left its proof never gives it */
	return;
#endif
	read_cfg(&c);
	if (skops->bytes_acked < c.learn_bytes)
		return;
	prove(skops, &c, true);
}

static __always_inline void on_rto(struct bpf_sock_ops *skops, struct sk_state *s)
{
	struct sp_pmtu_key k;
	struct sp_pmtu_event *ev;
	struct sp_pmtu_entry *e;
	struct cfg c;
	__u32 mtu;

	s->acked_at_rto = skops->bytes_acked;
	/* A black hole passes the handshake (this callback is armed once it is
	 * done) and small segments, then eats the full-size ones: full-size data
	 * out now. No data delivered yet is no alibi: a server's first flight
	 * is full-size. */
	if (s->suspected || !skops->packets_out)
		return;
	ev = bpf_ringbuf_reserve(&pmtu_events, sizeof(*ev), 0);
	if (!ev) {
		sp_count(&pmtu_ctr, SP_PM_EVENTS_LOST, 1);
		return;
	}
	read_cfg(&c);
	/* Loopback, link-local: never searched. */
	if (make_key(skops, &c, &k, ev->dst)) {
		bpf_ringbuf_discard(ev, 0);
		return;
	}
	ev->key = k;
	mtu = conn_mtu(skops, k.family, false);
	/* The key from the stack: 6.1's verifier takes no ring buffer record as a map key. */
	e = bpf_map_lookup_elem(&pmtu_dsts, &k);
	/* Known to pass: congestion, not MTU, unless it is the third RTO in a
	 * row of a connection at low (our clamp): what passed may not any more
	 * (at most once per RECHECK). Below low by threshold or more, the
	 * kernel's black-hole detection has just lowered the MSS (in this same
	 * timer, before this callback) and its next retransmission passes.
	 * Above low on a searched, fresh entry: the search has said all it can
	 * (and set the route, with route=1); a connection the kernel or the
	 * route rescues must not search the path again. */
	if (!mtu || (e && e->low >= mtu &&
		     (mtu + c.threshold <= e->low || skops->args[0] < 2 ||
		      bpf_ktime_get_ns() - e->updated_ns < SP_PM_RECHECK_NS)) ||
	    (e && e->low < mtu && e->state == SP_PM_S_SEARCHED && fresh(e, &c, bpf_ktime_get_ns()))) {
		bpf_ringbuf_discard(ev, 0);
		return;
	}
	s->suspected = 1;
	ev->mtu = mtu;
	ev->dport = sp_remote_port(skops);
	ev->kind = SP_PM_EV_STALL;
	bpf_ringbuf_submit(ev, 0);
	sp_count(&pmtu_ctr, SP_PM_SUSPECTS, 1);
}

/*
 * At an establishment (an accepted connection's, or a connecting one's
 * where the kernel cannot clamp) and, with_claim false, at an RTO of one
 * that waited for nothing: a connection can
 * teach nothing (on_rtt) when what it could prove is known already: the
 * destination's low is at least the route's MTU the connection starts with
 * (icsk_pmtu_cookie: what it sends is at most that), or it was accepted and
 * its client has no entry (a server's clients make none); and (its
 * callers) a loopback or link-local one, searched never. Then it asks for
 * no per-ACK callback at all: a short connection to a known destination
 * costs no RTT_CB runs, for any module, and no RTT_CB word. (Should the
 * route's MTU rise later in its life, its close or the next connection
 * teaches it.) Otherwise, with claim, it waits for its proof only if no
 * other connection to the destination began to in SP_PM_PROVER_T: a
 * destination's proof is one connection's work, and a short connection's
 * wait (storage, RTT_CB word, RTT_CB runs for every module) is most of what
 * pmtu costs it, for a proof 100 bytes never give. The others ask for no
 * state callback to prove at close either: on a destination with many
 * short connections that would cost each of them three or four runs of
 * every module (about 1 us of a 100-byte fetch on veth), for a proof the
 * next second's first connection gives if it is a long one.
 */
static __always_inline enum role proof_role(struct bpf_sock *bsk, struct sp_pmtu_entry *e,
					    bool passive, bool with_claim)
{
	struct tcp_sock *tp;

	if (!e)
		return passive ? PM_NOTHING : PM_WAIT;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (tp && e->low && e->low >= tp->inet_conn.icsk_pmtu_cookie)
		return PM_NOTHING;
	if (!with_claim)
		return PM_WAIT;
	return claim(e, bpf_ktime_get_ns());
}

/*
 * The establishment of an accepted connection, or of a connecting one
 * whose role TCP_CONNECT_CB left to it (PM_LATER). An accepted one first
 * asks for its client as a connecting one did for its destination at
 * TCP_CONNECT_CB (after the handshake TCP_MAXSEG changes nothing: the ask
 * is all), and the one lookup serves the ask and the role.
 */
static __always_inline enum role on_established(struct bpf_sock_ops *skops, struct bpf_sock *bsk,
						bool passive)
{
	struct sp_pmtu_entry *e;
	struct sp_pmtu_key k;
	__u32 full[4];
	struct cfg c;

	if (passive)
		sp_count(&pmtu_ctr, SP_PM_ACCEPTS, 1);
	read_cfg(&c);
	if (make_key(skops, &c, &k, full))
		return PM_NOTHING;
	e = bpf_map_lookup_elem(&pmtu_dsts, &k);
	if (passive)
		e = ask_unknown(skops, &c, &k, full, e, bpf_ktime_get_ns());
	return bsk ? proof_role(bsk, e, passive, true) : PM_NOTHING;
}

/* At an RTO of a connection without storage, or that left its proof. */
static __always_inline bool waits_after_rto(struct bpf_sock_ops *skops, struct bpf_sock *bsk,
					    bool passive)
{
	struct sp_pmtu_key k;
	__u32 full[4];
	struct cfg c;

	read_cfg(&c);
	if (make_key(skops, &c, &k, full))
		return false;
	return proof_role(bsk, bpf_map_lookup_elem(&pmtu_dsts, &k), passive, false) == PM_WAIT;
}

/*
 * Set by the loader where the fexit programs are loaded (fentry kernels):
 * they know a connection of the cgroup by its pmtu_sk storage, so there
 * every connection gets one when it takes its role (take_role).
 * Elsewhere a connection with nothing to learn gets none until its first
 * RTO (on_rto() is all that would read it): the first per-socket storage
 * is most of what stackpilot costs a short connection
 * (docs/bench/overhead.md).
 */
const volatile bool sp_kernel_hooks = false;

/*
 * A connection takes its role (at TCP_CONNECT_CB if it connects, at its
 * establishment if accepted): one that waits for its proof gets storage
 * (and RTT_CB once established); with the fexit programs loaded, every
 * connection does (sp_kernel_hooks). No STATE_CB (proof_role()): a close
 * another module asked for still proves what a connection that left its
 * proof delivered (on_close).
 */
static __always_inline struct sk_state *take_role(struct bpf_sock_ops *skops,
						  struct bpf_sock *bsk, enum role role,
						  bool passive, __u32 check_low)
{
	struct sk_state *s;

#ifdef SP_MUTANT_PM_ALWAYS_RTT	/* make mutants: every connection waits for its proof */
	role = PM_WAIT;
#endif
	if (role == PM_LEFT)
		sp_count(&pmtu_ctr, SP_PM_PROOF_LEFT, 1);
#ifdef SP_MUTANT_PM_LEFT_STATE	/* make mutants: one that left its proof asks for its close */
	if (role == PM_LEFT)
		sp_cb_flags_or(skops, BPF_SOCK_OPS_STATE_CB_FLAG);
#endif
	bool make = sp_kernel_hooks || role == PM_WAIT;

#ifdef SP_MUTANT_PM_EAGER_STATE	/* make mutants: every connection gets its storage at once */
	make = true;
#endif
	/* Storage a socket kept from an earlier connect (one that failed,
	 * or a disconnect) is this connection's from now on: all of it. */
	s = bpf_sk_storage_get(&pmtu_sk, bsk, NULL, make ? BPF_SK_STORAGE_GET_F_CREATE : 0);
#ifdef SP_MUTANT_PM_STALE_STORAGE
	if (s && !make)
		return NULL;
#endif
	if (s) {
		/* The earlier connection's ask for RTT_CB (a disconnect while it
		 * waited for its proof) survives it in the socket's flags: this
		 * one asks again if it waits. Only on a reconnect: fresh storage
		 * has rtt_asked 0. */
#ifndef SP_MUTANT_PM_RTT_KEPT	/* make mutants: a reconnected socket keeps the last connection's RTT_CB */
		if (s->rtt_asked)
			sp_rtt_want(skops, SP_RTT_PMTU, false);
#endif
#ifndef SP_MUTANT_PM_STALE_STORAGE	/* make mutants: a reconnected socket keeps its last role */
		__builtin_memset(s, 0, sizeof(*s));
#endif
		s->passive = passive;
		/* on_rtt then returns at once, should another module's ask bring RTT_CB. */
		s->learned = role != PM_WAIT;
		s->left = role == PM_LEFT;
		s->check_low = role == PM_WAIT ? check_low : 0;
	}
	return make ? s : NULL;
}

/*
 * Established (either way): RTO_CB for every connection (on_rto, and the
 * proof of one that had nothing to learn until a black hole); with storage
 * s, one that waits for its proof does from here (RTT_CB).
 */
static __always_inline void established(struct bpf_sock_ops *skops, struct bpf_sock *bsk,
					struct sk_state *s)
{
	struct tcp_sock *tp;

	sp_cb_flags_or(skops, BPF_SOCK_OPS_RTO_CB_FLAG);
	if (!s)
		return;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (tp) {
		/* Where the kernel's own probing starts (fexit/tcp_sync_mss). */
		s->klow = tp->inet_conn.icsk_mtup.search_low;
		/* Unclamped at connect: nothing to prove if its destination's
		 * low is at least its route's MTU (on_connect). */
#ifndef SP_MUTANT_PM_UNCLAMPED_WAITS	/* make mutants: an unclamped connection to a proved destination waits */
		if (s->check_low && s->check_low >= tp->inet_conn.icsk_pmtu_cookie)
			s->learned = 1;
#endif
	}
	if (!s->learned)
		want_rtt(skops, s);
}

static __always_inline int pmtu_ops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *bsk = skops->sk;
	struct sk_state *s = NULL;
	__u32 check_low = 0;
	enum role role;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		role = on_connect(skops, &check_low);
		if (bsk && role != PM_LATER)
			take_role(skops, bsk, role, false, check_low);
		return 1;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		role = on_established(skops, bsk, true);
		if (bsk)
			established(skops, bsk, take_role(skops, bsk, role, true, 0));
		return 1;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		/* Its role was taken at TCP_CONNECT_CB: one that waits has
		 * storage by now; one without has nothing to wait for (or
		 * connected before pmtu was on). No map read here, but
		 * where the kernel cannot clamp (PM_LATER). */
		if (!bsk)
			return 1;
		if (sp_kernel_clamps) {
			s = bpf_sk_storage_get(&pmtu_sk, bsk, NULL, 0);
		} else {
#ifndef SP_MUTANT_PM_NO_LATER	/* make mutants: where the kernel cannot clamp, no connection waits */
			s = take_role(skops, bsk, on_established(skops, bsk, false), false, 0);
#endif
		}
		established(skops, bsk, s);
		return 1;
	case BPF_SOCK_OPS_STATE_CB:
		/* args[1]: the new state. At CLOSE (tcp_done: after the last
		 * ACK, a reset, or as TIME_WAIT takes over) bytes_acked is all
		 * the connection delivered; at FIN_WAIT1 a close() right after
		 * the last write may still have a send buffer in flight. */
		if (skops->args[1] != BPF_TCP_CLOSE)
			return 1;
		/* Below learn_kb's floor (4 KiB) nothing is proved: a short
		 * connection leaves here, before any map is read. */
		if (skops->bytes_acked < SP_PM_LEARN_FLOOR)
			return 1;
		break;
	case BPF_SOCK_OPS_RTT_CB:
	case BPF_SOCK_OPS_RTO_CB:
		break;
	default:
		return 1;
	}
	if (!bsk)
		return 1;
	s = bpf_sk_storage_get(&pmtu_sk, bsk, NULL, 0);
	if (skops->op == BPF_SOCK_OPS_RTT_CB) {
		if (s)
			on_rtt(skops, s);
		return 1;
	}
	if (skops->op == BPF_SOCK_OPS_STATE_CB) {
		/* One that waited has given its proof through RTT_CB, or not
		 * delivered learn_kb since its last RTO. */
		if (!s || s->left)
			on_close(skops);
		return 1;
	}
	/*
	 * An RTO of a connection with no storage: one with nothing to learn or
	 * that left its proof (above; also one established before pmtu was
	 * enabled, its flag switched on by another module). From now on it
	 * waits for its own proof if its destination is not proved (nor
	 * loopback or link-local, waits_after_rto): after a
	 * black hole the kernel's lowered MSS is what it will prove. Its
	 * passiveness is not known: taken as accepted (no entry made; so if
	 * its destination's entry went meanwhile it waits for nothing).
	 */
	if (!s || s->left) {
		if (!s) {
			s = bpf_sk_storage_get(&pmtu_sk, bsk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
			if (!s)
				return 1;
			s->passive = 1;
		}
		s->left = 0;
		s->learned = !waits_after_rto(skops, bsk, s->passive);
		if (!s->learned)
			want_rtt(skops, s);
	}
	on_rto(skops, s);
	return 1;
}

/* ---- fentry kernels: the kernel's own discoveries (see the top) --------- */

/*
 * What the kernel found for this cgroup's connection sk (it has pmtu_sk
 * storage: the sockops program made it at connect or establishment; other sockets of
 * the host are none of this instance's business): mtu passes (method
 * SP_PM_M_KERNEL) or is what a router said fits (SP_PM_M_ICMP, and then
 * mtu + 1 fails). Learned as a connection's proof is (on_rtt), but an ICMP
 * also lowers what was known.
 */
static __always_inline void learn_kernel(struct sock *sk, __u32 mtu, __u32 method)
{
	struct sp_pmtu_entry *e, fresh = {};
	struct sp_pmtu_key k;
	struct cfg c;
	__u32 full[4], family;
	__u64 now;

	read_cfg(&c);
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (key_of(&c, sp_net_id(BPF_CORE_READ(sk, __sk_common.skc_net.net)), family,
		   BPF_CORE_READ(sk, __sk_common.skc_daddr),
		   BPF_CORE_READ(sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[0]),
		   BPF_CORE_READ(sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[1]),
		   BPF_CORE_READ(sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[2]),
		   BPF_CORE_READ(sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[3]), &k, full))
		return;
	/* The floors on_connect clamps to: below them nothing is learned. */
	if (mtu < (k.family == AF_INET ? 576 : 1280) || mtu > 65535)
		return;
	now = bpf_ktime_get_ns();
	e = bpf_map_lookup_elem(&pmtu_dsts, &k);
	if (!e) {
		fresh.low = mtu;
		fresh.high = method == SP_PM_M_ICMP ? mtu + 1 : 0;
		fresh.method = method;
		fresh.updated_ns = now;
		if (!bpf_map_update_elem(&pmtu_dsts, &k, &fresh, BPF_NOEXIST))
			sp_count(&pmtu_ctr, SP_PM_KERNEL, 1);
		return;
	}
	if (method == SP_PM_M_ICMP) {
		/* What was known to pass does not any more: the path shrank. */
		if (e->low && e->low <= mtu && e->high == mtu + 1)
			return;
		if (e->low > mtu || !e->low)
			e->low = mtu;
		if (!e->high || e->high > mtu + 1)
			e->high = mtu + 1;
	} else {
		if (mtu <= e->low)
			return;
		e->low = mtu;
		if (e->high && e->high <= mtu)
			e->high = 0;
	}
	if (e->state == SP_PM_S_ASKED)
		e->state = SP_PM_S_LEARNED;
	e->method = method;
	e->updated_ns = now;
	sp_count(&pmtu_ctr, SP_PM_KERNEL, 1);
}

/* After an ICMP: the connection's MTU is what the kernel now uses, if the
 * message bounded it (mtu_info: what it said, already checked by the kernel). */
static __always_inline void icmp_reduced(struct sock *sk)
{
	struct inet_connection_sock *icsk = (void *)sk;
	__u32 cookie, said;

	if (!bpf_sk_storage_get(&pmtu_sk, sk, NULL, 0))
		return;
	cookie = BPF_CORE_READ(icsk, icsk_pmtu_cookie);
	said = BPF_CORE_READ((struct tcp_sock *)sk, mtu_info);
	if (cookie && said && cookie <= said)
		learn_kernel(sk, cookie, SP_PM_M_ICMP);
}

SEC("fexit/tcp_v4_mtu_reduced")
int BPF_PROG(sp_pmtu_icmp4, struct sock *sk)
{
	icmp_reduced(sk);
	return 0;
}

SEC("fexit/tcp_v6_mtu_reduced")
int BPF_PROG(sp_pmtu_icmp6, struct sock *sk)
{
	icmp_reduced(sk);
	return 0;
}

/*
 * tcp_sync_mss runs at every MSS change (not per packet). When the kernel's
 * own probing succeeds (tcp_mtup_probe_success, inlined, then this), its
 * search_low has risen to the acknowledged probe's size and no probe is out.
 */
SEC("fexit/tcp_sync_mss")
int BPF_PROG(sp_pmtu_sync, struct sock *sk, __u32 pmtu, unsigned int ret)
{
	struct inet_connection_sock *icsk = (void *)sk;
	struct sk_state *s = bpf_sk_storage_get(&pmtu_sk, sk, NULL, 0);
	__u32 low, was, enabled, probe_size;

	if (!s)
		return 0;
	enabled = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_mtup.enabled);
	probe_size = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_mtup.probe_size);
	low = BPF_CORE_READ(icsk, icsk_mtup.search_low);
	was = s->klow;
	s->klow = low;
	if (enabled && !probe_size && was && low > was)
		learn_kernel(sk, low, SP_PM_M_KERNEL);
	return 0;
}

/*
 * The loader's write of a search's result (struct sp_pmtu_save), run with
 * BPF_PROG_TEST_RUN, never attached. A write of the whole entry from user
 * space would put back what the sockops side wrote between the loader's
 * read and its write: a prover's claim (two provers), clamps counted, an
 * ask's time. In place, each field is written by one side only, but for
 * low and high, where the search's answer wins as it always did. State
 * last: a connection that sees the new state sees the new bounds (on a
 * CPU that keeps stores in order; elsewhere it may read the old ones once,
 * as it would have an instant earlier).
 * Returns 0 (written), 1 (the entry was gone: made anew), 2 (no message),
 * 3 (no entry: made and gone at once), 4 (not a search's result: nothing
 * written).
 */
static __always_inline bool save_valid(const struct sp_pmtu_save *m)
{
	/* What a search ends in (pmtu_search.c), and no more probes than
	 * one search sends: whoever else can run this program (root, with
	 * bpftool) writes nothing a connection or the persist file would
	 * misread. */
	if ((m->state != SP_PM_S_SEARCHED && m->state != SP_PM_S_NOPROBE) || m->searched > 1 ||
	    m->method > SP_PM_M_SYN || m->port > 65535 || m->probes > SP_PM_MAX_PROBES ||
	    m->probe_bytes > SP_PM_MAX_PROBES * 65536)
		return false;
	if (!m->searched)
		return true;
	return m->low && sp_pm_bounds_ok(m->low, m->high) && (!m->route_mtu || m->route_mtu == m->low);
}

SEC("tc")
int sp_pmtu_save(struct __sk_buff *skb)
{
	struct sp_pmtu_entry *e, fresh = {};
	struct sp_pmtu_save m;

	if (bpf_skb_load_bytes(skb, 14, &m, sizeof(m)))
		return 2;
	if (!save_valid(&m))
		return 4;
	/* The entry as the search alone would make it. */
	fresh.state = m.state;
	fresh.updated_ns = m.updated_ns;
	fresh.method = m.method;
	fresh.port = m.port;
	fresh.probes = m.probes;
	fresh.probe_bytes = m.probe_bytes;
	if (m.searched) {
		fresh.low = m.low;
		fresh.high = m.high;
		fresh.route_mtu = m.route_mtu;
	}
#ifdef SP_MUTANT_PM_SAVE_WHOLE	/* make mutants: the whole entry written over */
	if (!bpf_map_update_elem(&pmtu_dsts, &m.key, &fresh, BPF_ANY))
		return 0;
#endif
	e = bpf_map_lookup_elem(&pmtu_dsts, &m.key);
	if (!e) {
		/* Evicted while it was searched (or never made): nothing of
		 * the connections' to keep. Made by a connection meanwhile, it
		 * is written in place below. */
		if (!bpf_map_update_elem(&pmtu_dsts, &m.key, &fresh, BPF_NOEXIST))
			return 1;
		e = bpf_map_lookup_elem(&pmtu_dsts, &m.key);
		if (!e)
			return 3;
	}
	__sync_fetch_and_add(&e->probes, m.probes);
	__sync_fetch_and_add(&e->probe_bytes, m.probe_bytes);
	if (m.searched) {
		e->low = m.low;
		e->high = m.high;
		e->route_mtu = m.route_mtu;
	}
	e->method = m.method;
	e->port = m.port;
	e->updated_ns = m.updated_ns;
	barrier();
	e->state = m.state;
	/* A connection that proved a larger MTU (prove()) between the
	 * writes above left a low at or past the search's high: it passed,
	 * so that high is out of date, as prove() itself would say. */
	if (m.searched && e->high && e->high <= e->low)
		e->high = 0;
	return 0;
}

SP_SOCKOPS_MODULE(sp_pmtu, pmtu_ops)
