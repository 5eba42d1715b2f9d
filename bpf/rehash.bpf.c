// SPDX-License-Identifier: GPL-2.0
/*
 * rehash: move flows off congested paths by changing sk_txhash, which the
 * IPv6 flow label and VXLAN's outer source port follow, so ECMP routers
 * downstream pick another path. Brakmo's tcp_retrans_txhash_{prob,mode}
 * (never merged) as a sockops policy, plus a congested-rounds trigger that
 * needs neither ECN nor a particular congestion control.
 *
 * Decisions, in order of the callbacks:
 *  RETRANS_CB  first retransmission of a non-RTO recovery episode: with
 *              probability prob, rehash now if safe, else mark the socket.
 *  RTT_CB      (every ACK with an RTT sample) apply a pending rehash once
 *              safe; count congested rounds.
 *  RTO_CB      the kernel rehashes by itself right after this callback:
 *              cancel what is pending, note the RTO (mode 0, pause).
 *
 * "Safe" (the question the reviewer asked of the patch): a path change can let
 * segments sent on the new path overtake those still in flight on the old
 * one. At most packets_out - sacked_out segments are still in flight
 * undelivered (as far as the sender knows). If that is below tp->reordering,
 * the reordering the sender already measured and tolerates before it calls a
 * segment lost (its dupthresh), no segment can be marked lost just because
 * of the switch. With reordering = 100 and 200 in flight, the rehash waits
 * until fewer than 100 are unsacked: that is safe by this definition,
 * because the flow has shown that 100-deep reordering is normal for it, and
 * RACK's reordering window grows the same way. What it does not bound is the
 * receiver's out-of-order queue, which is cheap. There is no "RTT is small"
 * escape as the patch's comment claimed: small RTTs make the flight smaller,
 * which already satisfies the rule. Segments already marked lost are not
 * counted (packets_out - sacked_out - lost_out): they are retransmitted
 * anyway, so overtaking them cannot make a false loss.
 *
 * Measured on a 100 Mbit/s tbf path, a bulk flow in recovery keeps ~28
 * segments unsacked against reordering = 3: the rule alone almost never
 * holds and the flow stays on the congested path. So a deferred rehash is
 * also applied once it has waited defer_rtts smoothed RTTs (tunable; 0 keeps
 * the patch's wait-until-safe).
 */
#include "common.bpf.h"
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define NSEC_PER_MSEC	1000000ULL

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_rehash_cfg);
} rehash_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SP_RH_NR);
	__type(key, __u32);
	__type(value, __u64);
} rehash_ctr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_RH_CONNS);
	__type(key, struct sp_rehash_conn_key);
	__type(value, struct sp_rehash_conn);
} rehash_conns SEC(".maps");

/* Per-socket state; freed with the socket. */
struct sk_state {
	__u32 episode;		/* tp->retrans_stamp of the last episode decided */
	__u8 want;		/* rehash decided, waiting until safe */
	__u8 had_rto;
	__u16 congested_rounds;
	__u32 round_retrans;	/* total_retrans at the start of the round */
	__u64 round_end_ns;
	__u64 pause_until_ns;
	__u64 want_since_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sk_state);
} rehash_sk SEC(".maps");

/* The config as the programs may use it: out-of-range values clamped. */
struct cfg {
	__u32 prob, mode, rounds, delay_pct, defer_rtts;
	__u64 pause_ns;
};

SP_CFG_READ(rehash, struct sp_rehash_cfg, rehash_cfg, SP_REHASH_TUNABLES)

static __always_inline void read_cfg(struct cfg *c)
{
	struct sp_rehash_cfg m;

	rehash_cfg_read(&m);
	c->prob = m.prob;
	c->mode = m.mode;
	c->rounds = m.rounds;
	c->delay_pct = m.delay_pct;
	c->pause_ns = m.pause_ms * NSEC_PER_MSEC;
	c->defer_rtts = m.defer_rtts;
}

static __always_inline void conn_key(const struct bpf_sock_ops *skops,
				     struct sp_rehash_conn_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->family = skops->family;
	if (skops->family == 2 /* AF_INET */) {
		k->saddr[0] = skops->local_ip4;
		k->daddr[0] = skops->remote_ip4;
	} else {
		k->saddr[0] = skops->local_ip6[0]; k->saddr[1] = skops->local_ip6[1];
		k->saddr[2] = skops->local_ip6[2]; k->saddr[3] = skops->local_ip6[3];
		k->daddr[0] = skops->remote_ip6[0]; k->daddr[1] = skops->remote_ip6[1];
		k->daddr[2] = skops->remote_ip6[2]; k->daddr[3] = skops->remote_ip6[3];
	}
	k->sport = sp_local_port(skops);
	k->dport = sp_remote_port(skops);
}

static __always_inline struct sp_rehash_conn *conn_get(const struct bpf_sock_ops *skops)
{
	struct sp_rehash_conn_key k;
	struct sp_rehash_conn zero = {}, *c;

	conn_key(skops, &k);
	c = bpf_map_lookup_elem(&rehash_conns, &k);
	if (c)
		return c;
	bpf_map_update_elem(&rehash_conns, &k, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&rehash_conns, &k);
}

static __always_inline bool safe_now(const struct bpf_sock_ops *skops)
{
	struct bpf_sock *bsk = skops->sk;
	struct tcp_sock *tp;

	if (!bsk)
		return false;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return false;
	return skops->packets_out - skops->sacked_out - skops->lost_out < tp->reordering;
}

static __always_inline void rehash(struct bpf_sock_ops *skops, struct sk_state *s)
{
	__u32 h = bpf_get_prandom_u32();
	struct sp_rehash_conn *c;

	/* 0 means "no hash yet" to the stack, which would compute its own. */
	if (!h || h == skops->sk_txhash)
		h = h * 2654435761u + 1 ?: 1;
	skops->sk_txhash = h;
	s->want = 0;
	c = conn_get(skops);
	if (c) {
		__sync_fetch_and_add(&c->rehashes, 1);
		c->txhash = h;
	}
}

/* Rehash at once if safe, else leave it to a later ACK. */
static __always_inline void rehash_when_safe(struct bpf_sock_ops *skops, struct sk_state *s)
{
	if (safe_now(skops)) {
		rehash(skops, s);
		sp_count(&rehash_ctr, SP_RH_NOW, 1);
	} else {
		s->want = 1;
		s->want_since_ns = bpf_ktime_get_ns();
		sp_count(&rehash_ctr, SP_RH_DEFERRED, 1);
	}
}

static __always_inline __u8 ca_state(const struct bpf_sock_ops *skops)
{
	struct bpf_sock *bsk = skops->sk;
	struct tcp_sock *tp;

	if (!bsk || !(tp = bpf_skc_to_tcp_sock(bsk)))
		return 0;
	/* A bitfield: the verifier rejects a direct read, a probed one works. */
	return BPF_CORE_READ_BITFIELD_PROBED(&tp->inet_conn, icsk_ca_state);
}

static __always_inline void on_retrans(struct bpf_sock_ops *skops, struct sk_state *s,
				       const struct cfg *c)
{
	struct bpf_sock *bsk = skops->sk;
	struct sp_rehash_conn *conn;
	struct tcp_sock *tp;
	__u32 episode;

	sp_count(&rehash_ctr, SP_RH_RETRANS, 1);
	if (skops->args[2])		/* the retransmission failed */
		return;
	/* Post-RTO retransmissions: the kernel already rehashed on the RTO. */
	if (ca_state(skops) == TCP_CA_Loss) {
		sp_count(&rehash_ctr, SP_RH_LOSS_STATE, 1);
		return;
	}
	if (!bsk || !(tp = bpf_skc_to_tcp_sock(bsk)))
		return;
	/* retrans_stamp is set by the first retransmission of an episode and
	 * cleared when it ends: it names the episode. Decide once per episode. */
	episode = tp->retrans_stamp;
	if (!episode || episode == s->episode)
		return;
	s->episode = episode;
	sp_count(&rehash_ctr, SP_RH_EPISODES, 1);
	conn = conn_get(skops);
	if (conn)
		__sync_fetch_and_add(&conn->episodes, 1);
	if (s->had_rto && !c->mode) {
		sp_count(&rehash_ctr, SP_RH_SUP_MODE, 1);
		return;
	}
	if (bpf_get_prandom_u32() % 100 >= c->prob) {
		sp_count(&rehash_ctr, SP_RH_SUP_PROB, 1);
		return;
	}
	rehash_when_safe(skops, s);
}

/*
 * Congested rounds (PLB's idea, any congestion control): one round per srtt;
 * a round is congested if it saw a retransmission or srtt stood above
 * min_rtt * delay_pct / 100 at its end. After `rounds` congested rounds in a
 * row, rehash, unless an RTO happened less than pause_ms ago (the kernel has
 * just moved the flow; give the new path time).
 */
static __always_inline void on_rtt(struct bpf_sock_ops *skops, struct sk_state *s,
				   const struct cfg *c)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 srtt = skops->srtt_us >> 3, min_rtt = skops->rtt_min;
	bool congested;

	if (s->want) {
		if (safe_now(skops)) {
			rehash(skops, s);
			sp_count(&rehash_ctr, SP_RH_DEFERRED_DONE, 1);
		} else if (c->defer_rtts &&
			   now - s->want_since_ns >= (__u64)c->defer_rtts * srtt * 1000) {
			/* A bulk flow keeps its window full: the flight rarely
			 * drops below reordering. Waiting longer only keeps it on
			 * the congested path; pay a window of possible reordering
			 * (undone by DSACK) instead. */
			rehash(skops, s);
			sp_count(&rehash_ctr, SP_RH_DEFERRED_FORCED, 1);
		}
	}
	if (!c->rounds || now < s->round_end_ns)
		return;
	congested = skops->total_retrans != s->round_retrans ||
		    (min_rtt && (__u64)srtt * 100 > (__u64)min_rtt * c->delay_pct);
	s->round_retrans = skops->total_retrans;
	s->round_end_ns = now + (__u64)(srtt ?: 1000) * 1000;
	if (!congested) {
		s->congested_rounds = 0;
		return;
	}
	if (++s->congested_rounds < c->rounds || s->want)
		return;
	s->congested_rounds = 0;
	if (now < s->pause_until_ns) {
		sp_count(&rehash_ctr, SP_RH_SUP_PAUSE, 1);
		return;
	}
	if (s->had_rto && !c->mode) {
		sp_count(&rehash_ctr, SP_RH_SUP_MODE, 1);
		return;
	}
	sp_count(&rehash_ctr, SP_RH_ROUNDS, 1);
	rehash_when_safe(skops, s);
}

SEC("sockops")
int sp_rehash(struct bpf_sock_ops *skops)
{
	struct bpf_sock *bsk = skops->sk;
	struct sp_rehash_conn *conn;
	struct sk_state *s;
	struct cfg c;

	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (!bsk)
			return 1;
		/* Storage now, so the hot callbacks never allocate. */
		bpf_sk_storage_get(&rehash_sk, bsk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
		sp_cb_flags_or(skops, BPF_SOCK_OPS_RETRANS_CB_FLAG | BPF_SOCK_OPS_RTO_CB_FLAG |
				      BPF_SOCK_OPS_RTT_CB_FLAG);
		return 1;
	case BPF_SOCK_OPS_RETRANS_CB:
	case BPF_SOCK_OPS_RTT_CB:
	case BPF_SOCK_OPS_RTO_CB:
		break;
	default:
		return 1;
	}
	if (!bsk || !(s = bpf_sk_storage_get(&rehash_sk, bsk, NULL, 0)))
		return 1;	/* not a socket this program set up */
	read_cfg(&c);
	switch (skops->op) {
	case BPF_SOCK_OPS_RETRANS_CB:
		on_retrans(skops, s, &c);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		on_rtt(skops, s, &c);
		break;
	case BPF_SOCK_OPS_RTO_CB:
		sp_count(&rehash_ctr, SP_RH_RTO, 1);
		s->had_rto = 1;
		s->want = 0;
		s->congested_rounds = 0;
		s->pause_until_ns = bpf_ktime_get_ns() + c.pause_ns;
		conn = conn_get(skops);
		if (conn)
			__sync_fetch_and_add(&conn->rtos, 1);
		break;
	}
	return 1;
}
