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
 *  RTT_CB      (every ACK with an RTT sample, but only while switched on,
 *              see below) apply a pending rehash once safe; measure the new
 *              path (path memory); count congested rounds.
 *  RTO_CB      the kernel rehashes by itself right after this callback:
 *              cancel what is pending, note the RTO (mode 0, pause); under
 *              policy 2, a move on trial goes back instead (rto_steer()),
 *              and a second RTO in a row takes a calm sibling's txhash
 *              (rto_calm()).
 *  STATE_CB    count the bytes a closing socket delivered (status: RTT
 *              callbacks per MB); asked for only by a socket with state
 *              (made at establishment, or at its first retransmission or
 *              RTO: lazy_state()), or by every socket with reuse on (its
 *              close feeds the good list).
 *
 * Zero steady-state cost. RTT_CB runs on every ACK of a socket that has it
 * (291-375 ns each in this program when it was always on). rehash switches it
 * on only while it has something to do per ACK: a deferred rehash or revert
 * waiting to be safe, or a path-memory window open; the rounds trigger
 * (off by default) measures every round and keeps it on. The flag word is
 * per socket and shared by every module: rehash asks for it and gives up its
 * ask through rttcb.bpf.h, which switches it off when no module asks any more.
 *
 * Path memory (revert_pct > 0). A random rehash lands on a busy path as
 * often as on a free one; a flow alone on its path loses packets at its own
 * queue and moves into a collision. So each applied rehash opens a window:
 * one srtt of warm-up (what is acked then was sent on the old path), then
 * probe_rtts srtt of measurement. If the new path delivered less than
 * revert_pct % of the old path's rate (measured since the previous episode,
 * at no per-ACK cost, from bytes_acked) and its queueing delay (srtt -
 * min_rtt) is not clearly lower than the old one's (a lower rate with a
 * draining queue is the congestion window's cut, not a busier path), the
 * flow returns to its old txhash, reordering-safe like any rehash.
 *
 * Deciding with the siblings' view (policy, issue 11). A host sees all its
 * flows to a destination: per (source, destination) address pair,
 * rehash_dests keeps the last episode (time, socket, txhash), the usual
 * loss density of its flows, the time of the last policy move and a list of
 * good txhashes. policy 1 rehashes an episode that starts within one srtt of
 * a sibling's (a shared overflow; the mechanism (a)); policy 2 one
 * whose flow loses more per byte than DENS_FACTOR x the pair's usual, which
 * is what tells a shared path from a lone one on drop-tail queues, where
 * one overflow hits one flow (measured, see density()); a policy 2 move
 * is kept only if it lowered the flow's density or its siblings' episode
 * rate, else reverted (judge_move()). Under both, one
 * flow of the pair moves per SETTLE_RTTS, not all that lost. reuse (c):
 * connections start, and rehashes land, on hashes earlier flows to the pair
 * closed with uncongested. enforce=0 makes every decision and counts it, but
 * never writes sk_txhash (run --dry-run).
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
#include "rttcb.bpf.h"
#include "chain.bpf.h"
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/*
 * Kernels before 5.12 refuse any BPF atomic but a plain add (5.10: "BPF_STX
 * uses reserved fields", checked on every instruction, dead or not). The
 * loader loads a second build of this file there (SP_NO_ATOMICS, Makefile),
 * where a compare-and-exchange and a fetch are a read, a compare and a
 * write: two CPUs at the same instant may then both claim a pair's move or
 * a calm note that the atomic gives to one, and two windows share a seq.
 */
#ifdef SP_NO_ATOMICS
#define sp_cmpxchg(p, old, new) ({ typeof(*(p)) __o = *(p); if (__o == (old)) *(p) = (new); __o; })
#define sp_fetch_add(p, v) ({ typeof(*(p)) __o = *(p); __sync_fetch_and_add(p, v); __o; })
#else
#define sp_cmpxchg(p, old, new) __sync_val_compare_and_swap(p, old, new)
#define sp_fetch_add(p, v) __sync_fetch_and_add(p, v)
#endif

#define NSEC_PER_MSEC	1000000ULL
#define TCP_CLOSE	7
#define SOL_SOCKET	1
#define SO_TXREHASH	74	/* asm-generic/socket.h */

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

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_RH_DESTS);
	__type(key, struct sp_rehash_dest_key);
	__type(value, struct sp_rehash_dest);
} rehash_dests SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_RH_WINLOG);
	__type(key, __u32);
	__type(value, struct sp_rehash_window);
} rehash_windows SEC(".maps");

/* Next sequence number of rehash_windows (a racy slot choice is harmless). */
__u64 window_seq = 0;

/* What a pending decision (want) will write once safe. */
#define WANT_REHASH	1	/* a fresh random txhash */
#define WANT_REVERT	2	/* back to old_hash (path memory) */

/* Path-memory window phases. */
#define WIN_WARM	1	/* first srtt after the switch: old path's data acked */
#define WIN_MEASURE	2	/* measuring the new path */

/* Per-socket state; freed with the socket. */
struct sk_state {
	__u32 episode;		/* tp->retrans_stamp of the last episode decided */
	__u8 want;		/* WANT_*: decided, waiting until safe */
	__u8 had_rto;
	__u8 own_rtt;		/* rehash's ask for RTT_CB is recorded (rttcb.bpf.h) */
	__u8 win;		/* WIN_*: path-memory window phase; 0 = none */
	__u8 rounds_on;		/* rounds trigger on (cfg at the last decision point) */
	__u8 memory_on;		/* path memory on for the pending rehash */
	__u8 corr_hit;		/* the current txhash was judged a shared bottleneck */
	__u8 hash_eps;		/* episodes in the loss-density window (see density()) */
	__u16 congested_rounds;
	__u8 judge;		/* policy 2: the move to this txhash is on trial (old_dens) */
	__u8 backoff;		/* policy 2: futile moves in a row (quiet_until_ns) */
	__u8 rto_held;		/* policy 2: SO_TXREHASH off for this RTO (rto_hold()) */
	__u8 trial_eps;		/* policy 2: own episodes since the move on trial was decided */
	__u32 next_hash;	/* reuse: the known-good txhash the pending rehash takes */
	__u32 calm_given;	/* policy 2: the calm hash rto_calm() last gave this flow */
	__u32 calm_bad;		/* ... one that then ended in an RTO: never again */
	__u32 round_retrans;	/* total_retrans at the start of the round */
	__u32 old_hash;		/* txhash before the last rehash: the revert target */
	__u32 old_qdelay_us;	/* old path: srtt - min_rtt at the decision */
	__u64 old_rate;		/* old path: bytes per ms since mark; 0 = unknown */
	__u64 mark_bytes;	/* bytes_acked when the current path's measurement began */
	__u64 mark_ns;
	__u64 win_bytes;	/* bytes_acked at the start of WIN_MEASURE */
	__u64 win_start_ns;
	__u64 win_end_ns;	/* end of the current window phase */
	__u64 bytes_counted;	/* bytes_acked already added to SP_RH_BYTES */
	__u64 round_end_ns;
	__u64 pause_until_ns;
	__u64 want_since_ns;
	__u64 hash_bytes;	/* bytes_acked at the start of the loss-density window */
	__u64 hash_ns;		/* ... and its time */
	__u64 hash_deps;	/* ... and the pair's episode count (the siblings' rate) */
	__u64 mv_bytes;		/* policy 2: bytes_acked when the move on trial was made */
	__u64 old_dens;		/* policy 2: density on the txhash it moved from */
	__u64 old_prate;	/* policy 2: the siblings' episode rate before the move */
	__u64 mv_eps;		/* ... the pair's episode count at the move */
	__u64 mv_ns;
	__u64 quiet_until_ns;	/* policy 2: no move before this (after futile ones) */
	__u64 floor;		/* policy 2: the density it found everywhere (2 futile moves) */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sk_state);
} rehash_sk SEC(".maps");

/* The config as the programs may use it: out-of-range values clamped. */
struct cfg {
	__u32 prob, mode, rounds, delay_pct, defer_rtts, revert_pct, probe_rtts;
	__u32 policy, reuse, enforce;
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
	c->revert_pct = m.revert_pct;
	c->probe_rtts = m.probe_rtts;
	c->policy = m.policy;
	c->reuse = m.reuse;
	c->enforce = m.enforce;
}

/* The address pair (the first fields of both key structs). */
static __always_inline void addr_key(const struct bpf_sock_ops *skops,
				     struct sp_rehash_dest_key *k)
{
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
}

static __always_inline void conn_key(const struct bpf_sock_ops *skops,
				     struct sp_rehash_conn_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	addr_key(skops, (struct sp_rehash_dest_key *)k);
	k->sport = sp_local_port(skops);
	k->dport = sp_remote_port(skops);
}

_Static_assert(__builtin_offsetof(struct sp_rehash_conn_key, daddr) ==
	       __builtin_offsetof(struct sp_rehash_dest_key, daddr), "key prefix");

static __always_inline struct sp_rehash_dest *dest_get(const struct bpf_sock_ops *skops,
						       bool create)
{
	struct sp_rehash_dest_key k;
	struct sp_rehash_dest zero = {}, *d;

	__builtin_memset(&k, 0, sizeof(k));
	addr_key(skops, &k);
	d = bpf_map_lookup_elem(&rehash_dests, &k);
	if (d || !create)
		return d;
	bpf_map_update_elem(&rehash_dests, &k, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&rehash_dests, &k);
}

/*
 * Good-hash reuse (c). good[] holds txhashes flows to this pair found
 * uncongested when they closed (loss density not above DENS_FACTOR x the
 * pair's base, or too few episodes for a density in at least SP_RH_GOOD_MIN bytes;
 * never judged shared), at most SP_RH_GOOD_AGE_S old. Entries are handed out
 * round robin and not removed: flows opened back to back (iperf3 -P, a
 * connection pool) spread over the good hashes instead of all taking the
 * first; a hash whose flow later finds it congested is dropped.
 */
#define SP_RH_GOOD_MIN	(1ULL << 20)
#define GOOD_AGE_NS	((__u64)SP_RH_GOOD_AGE_S * 1000000000ULL)

static __always_inline bool good_fresh(const struct sp_rehash_dest *d, __u32 i, __u64 now)
{
	__u64 t = d->good_ns[i & (SP_RH_GOOD - 1)];

	/* A time in the future (bpftool) is not fresh. */
	return d->good[i & (SP_RH_GOOD - 1)] && t <= now && now - t < GOOD_AGE_NS;
}

static __always_inline __u32 good_pick(struct sp_rehash_dest *d, __u64 now, __u32 avoid1,
				       __u32 avoid2)
{
	__u32 start = d->next, i, slot, h;

	for (i = 0; i < SP_RH_GOOD; i++) {
		slot = (start + i) & (SP_RH_GOOD - 1);
		h = d->good[slot];
		if (!good_fresh(d, slot, now) || h == avoid1 || h == avoid2)
			continue;
		d->next = slot + 1;
		return h;
	}
	return 0;
}

static __always_inline void good_drop(struct sp_rehash_dest *d, __u32 h)
{
	for (__u32 i = 0; i < SP_RH_GOOD; i++) {
		if (h && d->good[i] == h) {
			d->good[i] = 0;
			sp_count(&rehash_ctr, SP_RH_GOOD_DROP, 1);
		}
	}
}

/* Refresh h if listed, else take an empty or stale slot, else the oldest. */
static __always_inline void good_add(struct sp_rehash_dest *d, __u32 h, __u64 now)
{
	__u32 i, slot = 0;
	__u64 oldest = ~0ULL;

	for (i = 0; i < SP_RH_GOOD; i++) {
		if (d->good[i] == h) {
			slot = i;
			break;
		}
		if (!good_fresh(d, i, now)) {
			slot = i;
			oldest = 0;
		} else if (d->good_ns[i] < oldest) {
			slot = i;
			oldest = d->good_ns[i];
		}
	}
	slot &= SP_RH_GOOD - 1;
	d->good[slot] = h;
	d->good_ns[slot] = now;
	sp_count(&rehash_ctr, SP_RH_GOOD_ADD, 1);
}

/*
 * Loss density: episodes per GiB a flow delivered on its current txhash,
 * counted from its first episode there (the bytes before it are a slow
 * start's or a warm-up's, not the path's), over a window of DENS_EPS to
 * 2 x DENS_WIN later episodes that halves at 2 x DENS_WIN (so it follows
 * changes within a few episodes). Drop-tail overflows hit one flow at a
 * time: two flows sharing a 100 Mbit/s path here start their episodes
 * within one srtt of each other no more often than two flows on separate
 * paths, but each loses far more often per byte: 112-122 episodes in ~47 MB
 * each against 4-5 in ~94 MB each for flows alone, 8 s on a quiet machine
 * (a 50x gap; ~9x on a loaded one). Two intervals between episodes are
 * enough to tell them apart at that gap, and a flow alone on a quiet
 * machine has only a handful in 8 s. The pair's base is a low quantile of
 * what its flows that were not high showed (reset after SP_RH_GOOD_AGE_S
 * without one); a flow above DENS_FACTOR x base is on a path busier than
 * the others.
 */
#define DENS_EPS	2
#define DENS_WIN	4
#define DENS_FACTOR	3

static __always_inline __u64 density(const struct bpf_sock_ops *skops, const struct sk_state *s)
{
	__u64 acked = skops->bytes_acked;
	__u32 n = s->hash_eps > 1 ? s->hash_eps - 1 : 0;

	if (n < DENS_EPS || acked <= s->hash_bytes)
		return 0;
	return ((__u64)n << 30) / (acked - s->hash_bytes);
}

static __always_inline bool base_known(const struct sp_rehash_dest *d, __u64 now)
{
	return d->base && d->base_ns <= now && now - d->base_ns <= GOOD_AGE_NS;
}

/*
 * True if dens is above DENS_FACTOR x the base; else dens moves the base
 * towards itself: half way down at once, 1/8 up at most once per
 * BASE_UP_NS. A low quantile of the measurements that are not high, not
 * their minimum (a density from two intervals is noisy, and the lowest of
 * many would make every other flow look high), and one that the flows
 * sharing a path cannot pull up: they measure every few tens of ms, a flow
 * alone every second or two, and per measurement they would win (the base
 * drifted to their own density, and nothing was high any more).
 */
#define BASE_UP_NS	1000000000ULL

static __always_inline bool dens_high(struct sp_rehash_dest *d, __u64 dens, __u64 now)
{
	__u64 base = d->base;

	/* A base from the future (bpftool) or too old is replaced. */
	if (!base_known(d, now)) {
		d->base = dens;
		d->base_ns = now;
		return false;
	}
	if (dens / DENS_FACTOR > base)
		return true;
	if (dens < base) {
		d->base = base / 2 + dens / 2;
		d->base_ns = now;
	} else if (now - d->base_ns >= BASE_UP_NS) {
		d->base = base - base / 8 + dens / 8;
		d->base_ns = now;
	}
	return false;
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

/*
 * RTT_CB on while there is per-ACK work, off (if rehash switched it on)
 * when there is none. Called after every change of want / win / rounds_on.
 */
static __always_inline void rtt_cb_update(struct bpf_sock_ops *skops, struct sk_state *s)
{
	bool need = s->want || s->win || s->rounds_on;

	if (need && !s->own_rtt) {
		if (!sp_rtt_want(skops, SP_RTT_REHASH, true)) {
			s->own_rtt = 1;
			sp_count(&rehash_ctr, SP_RH_RTT_ON, 1);
		}
	} else if (!need && s->own_rtt) {
		sp_rtt_want(skops, SP_RTT_REHASH, false);
		s->own_rtt = 0;
	}
}

/* Bytes delivered since the last call go to SP_RH_BYTES (per MB in status). */
static __always_inline void count_bytes(const struct bpf_sock_ops *skops, struct sk_state *s)
{
	__u64 acked = skops->bytes_acked;

	if (acked > s->bytes_counted) {
		sp_count(&rehash_ctr, SP_RH_BYTES, acked - s->bytes_counted);
		s->bytes_counted = acked;
	}
}

/* Start measuring the current path's delivery from here. */
static __always_inline void mark_path(const struct bpf_sock_ops *skops, struct sk_state *s,
				      __u64 now)
{
	s->mark_bytes = skops->bytes_acked;
	s->mark_ns = now;
}

static __always_inline __u32 srtt_us(const struct bpf_sock_ops *skops)
{
	return skops->srtt_us >> 3;
}

/* srtt in ns, 1 ms while there is no sample yet: a time scale, never 0. */
static __always_inline __u64 rtt_ns(const struct bpf_sock_ops *skops)
{
	return (__u64)(srtt_us(skops) ?: 1000) * 1000;
}

static __always_inline __u32 qdelay_us(const struct bpf_sock_ops *skops)
{
	__u32 srtt = srtt_us(skops), min_rtt = skops->rtt_min;

	return srtt > min_rtt ? srtt - min_rtt : 0;
}

/* Bytes per ms delivered since (bytes, ns); 0 when the span is too short. */
static __always_inline __u64 rate_since(const struct bpf_sock_ops *skops, __u64 bytes,
					__u64 ns, __u64 now, __u64 min_span_ns)
{
	__u64 span = now - ns;

	if (!ns || span < min_span_ns || span < 1000 || skops->bytes_acked < bytes)
		return 0;
	return (skops->bytes_acked - bytes) * NSEC_PER_MSEC / span;
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

/* Write the pending decision (s->want) now (enforce=0: all but the write). */
/*
 * Write h as the socket's txhash (and the connection view's), or under
 * enforce=0 only count the write skipped.
 */
static __always_inline void txhash_set(struct bpf_sock_ops *skops, const struct cfg *c,
				       struct sp_rehash_conn *conn, __u32 h)
{
	if (!c->enforce) {
		sp_count(&rehash_ctr, SP_RH_DRY, 1);
		return;
	}
#ifndef SP_MUTANT_RH_NO_TXHASH	/* make mutants: decided and counted, never written */
	skops->sk_txhash = h;
#endif
	if (conn)
		conn->txhash = h;
}

static __always_inline void apply(struct bpf_sock_ops *skops, struct sk_state *s,
				  const struct cfg *cf, __u64 now)
{
	__u32 h = s->next_hash ?: bpf_get_prandom_u32(), cur = skops->sk_txhash;
	struct sp_rehash_conn *c = conn_get(skops);
	bool revert = s->want == WANT_REVERT;

	if (revert && s->old_hash) {
		h = s->old_hash;
		sp_count(&rehash_ctr, SP_RH_REVERT_DONE, 1);
		if (c)
			__sync_fetch_and_add(&c->reverts, 1);
	} else {
		/* 0 means "no hash yet" to the stack, which would compute its own. */
		if (!h || h == cur)
			h = h * 2654435761u + 1 ?: 1;
		if (c)
			__sync_fetch_and_add(&c->rehashes, 1);
		s->old_hash = cur;
	}
	s->judge = !revert && (s->old_dens || s->old_prate);
	txhash_set(skops, cf, c, h);
	s->want = 0;
	s->next_hash = 0;
	s->corr_hit = 0;
	s->hash_eps = 0;
	s->hash_bytes = skops->bytes_acked;
	s->mv_bytes = skops->bytes_acked;
	mark_path(skops, s, now);
	/* A revert goes back to a path measured before: no window for it. */
	if (!revert && s->memory_on && s->old_rate) {
		s->win = WIN_WARM;
		s->win_end_ns = now + rtt_ns(skops);
	}
}

/* Apply at once if safe, else leave it to a later ACK (RTT_CB on). */
static __always_inline void decide(struct bpf_sock_ops *skops, struct sk_state *s,
				   const struct cfg *c, __u8 what, __u64 now)
{
	s->want = what;
	if (safe_now(skops)) {
		if (what == WANT_REHASH)
			sp_count(&rehash_ctr, SP_RH_NOW, 1);
		apply(skops, s, c, now);
	} else {
		s->want_since_ns = now;
		if (what == WANT_REHASH)
			sp_count(&rehash_ctr, SP_RH_DEFERRED, 1);
	}
}

/* A balancing rehash: note the old path's delivery and delay first. */
static __always_inline void decide_rehash(struct bpf_sock_ops *skops, struct sk_state *s,
					  const struct cfg *c, __u64 now)
{
	__u64 srtt_ns = (__u64)srtt_us(skops) * 1000;

	s->memory_on = c->revert_pct != 0;
	/* At least 2 srtt of history, or the old rate is noise: no window. */
	s->old_rate = rate_since(skops, s->mark_bytes, s->mark_ns, now, 2 * srtt_ns);
	s->old_qdelay_us = qdelay_us(skops);
	decide(skops, s, c, WANT_REHASH, now);
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

/*
 * Correlation (a): note this episode for the pair; true if a sibling (another
 * socket to the same addresses) started one within one srtt before it: the
 * same drop-tail overflow hit both, so they share the bottleneck. *sib gets
 * the sibling's txhash then (a hash onto the same congested path).
 */
static __always_inline bool episode_note(struct bpf_sock_ops *skops, struct sk_state *s,
					 struct sp_rehash_dest *d, __u64 now, __u32 *sib)
{
	__u64 cookie = bpf_get_socket_cookie(skops), prev = d->ep_ns, prev_cookie = d->ep_cookie;
	__u64 w = rtt_ns(skops);
	__u32 prev_hash = d->ep_hash, cur = skops->sk_txhash;

	d->ep_ns = now;
	d->ep_cookie = cookie;
	d->ep_hash = cur;
	/* A time in the future (bpftool) correlates with nothing. */
	if (!prev || prev > now || now - prev > w || prev_cookie == cookie)
		return false;
	*sib = prev_hash;
	return true;
}

/*
 * One of two correlated flows moves, not both: the first to claim the pair's
 * moved_ns; the others wait SETTLE_RTTS of their srtt, about one loss cycle
 * of a flow alone on a 5 ms queue, to see where the moved one landed.
 */
#define SETTLE_RTTS	8
#define EXPLORE_DIV	10
static __always_inline bool claim_move(const struct bpf_sock_ops *skops,
				       struct sp_rehash_dest *d, __u64 now)
{
	__u64 moved = d->moved_ns, settle = rtt_ns(skops) * SETTLE_RTTS;

	/* moved > now (bpftool) counts as long ago. */
	if (moved <= now && now - moved < settle)
		return false;
	return sp_cmpxchg(&d->moved_ns, moved, now) == moved;
}

/*
 * Rates of loss episodes, per second x 1024. A trial lasts at least
 * PAIR_WIN_NS: shorter, a rate of a few episodes a second is noise. n is at
 * most what bpftool could have put in the pair's count; beyond 2^20 the
 * product would overflow, and such a count is garbage anyway.
 */
#define PAIR_WIN_NS	250000000ULL
static __always_inline __u64 eps_per_s(__u64 n, __u64 span_ns)
{
	if (n > (1ULL << 20) || !span_ns)
		return 0;
	return (n << 10) * 1000000000ULL / span_ns;
}

/*
 * The siblings' episode rate over the flow's density window: the pair's
 * episodes since the window began, less the flow's own. Fewer than 2 of
 * them is no rate (0): nothing to judge a move by.
 */
static __always_inline __u64 sib_rate(const struct sk_state *s, const struct sp_rehash_dest *d,
				      __u64 now)
{
	__u64 pair, own;

	if (s->hash_eps < 2 || now <= s->hash_ns || d->eps < s->hash_deps)
		return 0;
	pair = d->eps - s->hash_deps;
	own = s->hash_eps - 1;
	if (pair < own + 2)
		return 0;
	return eps_per_s(pair - own, now - s->hash_ns);
}

/*
 * Policy 2's path memory. A move is on trial until the flow's density on
 * the new txhash is measured and PAIR_WIN_NS has passed. It helped if the
 * flow's density at least halved (it left a busier path), or if its
 * siblings' episode rate (the pair's, less its own) fell by a third (it
 * left a sibling alone: two flows on one path, the other path shared with
 * traffic from outside the host; the mover loses as before, the sibling
 * it left stops losing). Else it
 * went nowhere better: the new hash leads to the same path, or the other
 * path is as busy (a sibling there, or outside traffic, which no sibling
 * sees). Then the flow returns to its old txhash and waits SETTLE_RTTS x
 * 2^backoff before the next move, up to 2^BACKOFF_MAX: a flow that shares
 * with outside traffic looks high on every path, and would otherwise move
 * every SETTLE_RTTS and take a sibling's path each second time. A move that
 * helped resets the backoff. True if a revert was decided (the episode is
 * decided).
 */
#define BACKOFF_MAX	6
/* Siblings losing less than 2 episodes a second (a flow alone on a path
 * with a 5 ms queue loses under one; two sharing one, 14 each) had nothing
 * to gain from the move: their rate does not judge it. */
#define SIB_MIN_RATE	(2ULL << 10)

/* A move that helped nothing: counted, and the next one waits longer. */
static __always_inline void futile(const struct bpf_sock_ops *skops, struct sk_state *s, __u64 now)
{
	sp_count(&rehash_ctr, SP_RH_FUTILE, 1);
	if (s->backoff < BACKOFF_MAX)
		s->backoff++;
	s->quiet_until_ns = now + (rtt_ns(skops) * SETTLE_RTTS << (s->backoff & 7));
}

static __always_inline bool judge_move(struct bpf_sock_ops *skops, struct sk_state *s,
				       const struct sp_rehash_dest *d, const struct cfg *c,
				       __u64 dens, __u64 now)
{
	__u64 span, prate, n;
	bool own;

	/* mv_ns from before a restart of the clock cannot happen; > now is
	 * only a bug's, and ends the trial as "helped". */
	span = now > s->mv_ns ? now - s->mv_ns : PAIR_WIN_NS;
	if (span < PAIR_WIN_NS)
		return false;
	s->judge = 0;
	/* The siblings' episodes: the pair's, less the mover's own (its move
	 * onto a loaded path costs it a burst of losses, which says nothing
	 * about the path it left), counted as before the move (sib_rate()). */
	n = d->eps >= s->mv_eps ? d->eps - s->mv_eps : 0;
	n = n > s->trial_eps ? n - s->trial_eps : 0;
	prate = eps_per_s(n, span);
	own = dens * 2 <= s->old_dens;
	if (own || (s->old_prate >= SIB_MIN_RATE && prate * 3 <= s->old_prate * 2)) {
		if (!own)
			sp_count(&rehash_ctr, SP_RH_KEPT_SIB, 1);
		s->backoff = 0;
		s->floor = 0;
		return false;
	}
	futile(skops, s, now);
	/* A fresh hash leads back onto the same path once in N paths: one
	 * futile move says little (on a path that drops half, a floor set then
	 * kept the flow there). Two in a row say the others are no better. */
	if (s->backoff >= 2)
		s->floor = dens < s->old_dens ? dens : s->old_dens;
	if (s->win || s->want || !s->old_hash)
		return false;
	decide(skops, s, c, WANT_REVERT, now);
	return true;
}

/*
 * Policy 2: the txhash a flow of the pair last measured a density not
 * above DENS_FACTOR x a known base on (calm), for a flow in RTO backoff.
 * Such a flow has no density (each RTO starts its count again), so nothing
 * else here decides about it; the kernel's random RTO rehash leads back
 * onto a path that drops its retransmissions once in N paths, and each miss
 * doubles the wait (50%-loss path: flows 6-7 s of 8 delivering nothing,
 * never moved by policy 2; docs/rehash-benchmark-history.md, "Which flows starve"). A hash found high
 * or ending in an RTO stops being calm; an episode with no density says
 * nothing either way. Each note is given to one flow (rto_calm()): a path
 * that fails under many flows at once must not send them all onto one.
 */
#define CALM_AGE_NS	2000000000ULL

static __always_inline void calm_note(struct bpf_sock_ops *skops,
				      struct sp_rehash_dest *d, bool calm, bool over, __u64 now)
{
	__u32 cur = skops->sk_txhash;

	if (calm && cur) {
		d->calm_hash = cur;
		d->calm_ns = now;
		d->calm_cookie = bpf_get_socket_cookie(skops);
	} else if (over && d->calm_hash == cur) {
		d->calm_hash = 0;
	}
}

static __always_inline void on_retrans(struct bpf_sock_ops *skops, struct sk_state *s, __u64 now)
{
	struct bpf_sock *bsk = skops->sk;
	struct sp_rehash_dest *d = NULL;
	struct sp_rehash_conn *conn;
	struct tcp_sock *tp;
	struct cfg cf, *c = &cf;
	__u32 episode, sib = 0;
	bool corr = false, shared = false;
	__u64 dens = 0;

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
	count_bytes(skops, s);
	/* Only now: most retransmissions belong to an episode already decided. */
	read_cfg(c);
	conn = conn_get(skops);
	if (conn)
		__sync_fetch_and_add(&conn->episodes, 1);
	/* A change of the rounds tunable reaches running sockets here. */
	s->rounds_on = c->rounds != 0;
	if (s->hash_eps < 255)
		s->hash_eps++;
	/* The density counts from the first episode on this txhash. */
	if (s->hash_eps == 1) {
		s->hash_bytes = skops->bytes_acked;
		s->hash_ns = now;
	}
	/* The mover's own episodes from its decision on, also those before a
	 * deferred move is applied: mv_eps counts the pair's from then. */
	if ((s->judge || s->want == WANT_REHASH) && s->trial_eps < 255)
		s->trial_eps++;
	/* Every episode informs the siblings, decided or not. */
	if (c->policy || c->reuse)
		d = dest_get(skops, true);
	if (d) {
		/* A flow whose moves found nothing better is high only
		 * against what it found (floor): beside traffic from outside
		 * it looks high wherever it goes, and each try costs. */
		bool over, high;
		bool known = base_known(d, now);

		dens = density(skops, s);
		over = dens && dens_high(d, dens, now);
		high = over && dens / DENS_FACTOR > s->floor;
		/* Against no base (a new pair, or one bpftool wrote) every
		 * density is "not high": not calm either. */
		if (c->policy == 2)
			calm_note(skops, d, dens && known && !over, over, now);

		corr = episode_note(skops, s, d, now, &sib);
		shared = c->policy == 1 ? corr : high;
		__sync_fetch_and_add(&d->eps, 1);
		/* The siblings' count starts with the flow's density window. */
		if (s->hash_eps == 1)
			s->hash_deps = d->eps;
		if (dens && s->judge && judge_move(skops, s, d, c, dens, now))
			return;
		if (c->policy)
			sp_count(&rehash_ctr, shared ? SP_RH_CORR : SP_RH_UNCORR, 1);
		if (shared || high) {
			s->corr_hit = 1;
			/* This hash leads onto a busy path now: not good any more. */
			good_drop(d, skops->sk_txhash);
		}
		if (s->hash_eps > 2 * DENS_WIN) {
			/* 2 x DENS_WIN intervals -> DENS_WIN (hash_eps counts
			 * the first episode too). */
			s->hash_eps = DENS_WIN + 1;
			s->hash_bytes += (skops->bytes_acked - s->hash_bytes) / 2;
			s->hash_ns += (now - s->hash_ns) / 2;
			if (d->eps >= s->hash_deps)
				s->hash_deps += (d->eps - s->hash_deps) / 2;
		}
	}
	if (s->win || s->want) {
		/* The new path is being measured (losses there are part of
		 * the measurement), or a decision is still pending. */
		sp_count(&rehash_ctr, SP_RH_SUP_WINDOW, 1);
		return;
	}
	if (s->had_rto && !c->mode) {
		sp_count(&rehash_ctr, SP_RH_SUP_MODE, 1);
#ifndef SP_MUTANT_RH_MODE0_GOES_ON	/* make mutants: counted, and balanced all the same */
		goto out;
#endif
	}
	if (c->policy) {
		/* Other losses are the flow's own queue (or traffic from
		 * outside the host, which a move cannot escape for sure): no
		 * rehash. Except, under policy 2, now and then (prob / 10 of
		 * them): flows that all started on one path are each other's
		 * only reference, none looks high, and only a move shows them
		 * a lower density. Per episode, so it falls mostly on flows
		 * that lose often: a flow alone on its path rarely has one. */
		if (!shared) {
			/* A flow with a floor has explored: what it found
			 * was no better. One with no density on its hash yet
			 * (the first episodes after a move or an RTO) could
			 * not be judged: its move would be kept whatever it
			 * found, and not steered back on an RTO. (dens is
			 * from before the window halving above, which keeps
			 * a density non-zero.) */
#ifdef SP_MUTANT_RH_EXPLORE_BLIND	/* make mutants: explores with no density too */
			dens = dens ?: 1;
#endif
			if (c->policy != 2 || !d || s->floor || !dens ||
			    bpf_get_prandom_u32() % (100 * EXPLORE_DIV) >= c->prob)
				goto out;
			sp_count(&rehash_ctr, SP_RH_EXPLORE, 1);
		}
		if (s->judge || now < s->quiet_until_ns) {
			sp_count(&rehash_ctr, SP_RH_SUP_BACKOFF, 1);
			goto out;
		}
		if (!d || !claim_move(skops, d, now)) {
			sp_count(&rehash_ctr, SP_RH_SUP_SIBLING, 1);
			goto out;
		}
	} else if (bpf_get_prandom_u32() % 100 >= c->prob) {
		sp_count(&rehash_ctr, SP_RH_SUP_PROB, 1);
		goto out;
	}
	if (c->reuse && d) {
		/* Not our own hash, nor the sibling's: both lead here. */
		s->next_hash = good_pick(d, now, skops->sk_txhash, sib);
		if (s->next_hash)
			sp_count(&rehash_ctr, SP_RH_REUSE_REHASH, 1);
	}
	/* Policy 2 puts the move on trial: the density it leaves, the
	 * pair's rate before it. */
	s->old_dens = c->policy == 2 ? density(skops, s) : 0;
	s->old_prate = 0;
	if (c->policy == 2 && d) {
		s->old_prate = sib_rate(s, d, now);
		s->mv_eps = d->eps;
		s->mv_ns = now;
		s->trial_eps = 0;
	}
	decide_rehash(skops, s, c, now);
	return;
out:
	/* The old-path rate is measured from episode to episode: each one
	 * ends a stretch of the path's steady state. */
	mark_path(skops, s, now);
}

/* Path memory: advance the window; at its end, keep the new path or revert. */
static __always_inline void on_window(struct bpf_sock_ops *skops, struct sk_state *s,
				      const struct cfg *c, __u64 now)
{
	__u64 srtt_ns = rtt_ns(skops), new_rate, seq;
	struct sp_rehash_window *w;
	__u32 q, slot;
	bool worse;

	if (now < s->win_end_ns)
		return;
	if (s->win == WIN_WARM) {
		s->win = WIN_MEASURE;
		s->win_bytes = skops->bytes_acked;
		s->win_start_ns = now;
		s->win_end_ns = now + c->probe_rtts * srtt_ns;
		return;
	}
	s->win = 0;
	sp_count(&rehash_ctr, SP_RH_WINDOWS, 1);
	new_rate = rate_since(skops, s->win_bytes, s->win_start_ns, now, 0);
	q = qdelay_us(skops);
	/* The new path's delivery counts from its window on. */
	s->mark_bytes = s->win_bytes;
	s->mark_ns = s->win_start_ns;
	worse = new_rate * 100 < s->old_rate * c->revert_pct && (__u64)q * 2 >= s->old_qdelay_us;
#ifdef SP_MUTANT_RH_NO_REVERT	/* make mutants: every new path kept */
	worse = false;
#endif
	seq = sp_fetch_add(&window_seq, 1) + 1;
	slot = seq % SP_RH_WINLOG;
	w = bpf_map_lookup_elem(&rehash_windows, &slot);
	if (w) {
		w->seq = seq;
		w->old_rate = s->old_rate;
		w->new_rate = new_rate;
		w->old_qdelay_us = s->old_qdelay_us;
		w->new_qdelay_us = q;
		w->reverted = worse;
	}
	if (!worse)
		return;
	sp_count(&rehash_ctr, SP_RH_REVERT, 1);
	decide(skops, s, c, WANT_REVERT, now);
}

/*
 * Congested rounds (PLB's idea, any congestion control): one round per srtt;
 * a round is congested if it saw a retransmission or srtt stood above
 * min_rtt * delay_pct / 100 at its end. After `rounds` congested rounds in a
 * row, rehash, unless an RTO happened less than pause_ms ago (the kernel has
 * just moved the flow; give the new path time).
 */
static __always_inline void on_rounds(struct bpf_sock_ops *skops, struct sk_state *s,
				      const struct cfg *c, __u64 now)
{
	__u32 srtt = srtt_us(skops), min_rtt = skops->rtt_min;
	bool congested;

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
	if (++s->congested_rounds < c->rounds || s->want || s->win)
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
	s->old_dens = 0;	/* not policy 2's move: no trial */
	s->old_prate = 0;
	decide_rehash(skops, s, c, now);
}

static __always_inline void on_rtt(struct bpf_sock_ops *skops, struct sk_state *s, __u64 now)
{
	struct cfg c;

	sp_count(&rehash_ctr, SP_RH_RTT_CBS, 1);
	/* RTT_CB may be on for another module (pmtu): leave at once when
	 * rehash has nothing to do on this ACK. */
	if (!s->want && !s->win && !s->rounds_on) {
		rtt_cb_update(skops, s);
		return;
	}
	read_cfg(&c);
	s->rounds_on = c.rounds != 0;
	if (s->want) {
		bool revert = s->want == WANT_REVERT;

		if (safe_now(skops)) {
			if (!revert)
				sp_count(&rehash_ctr, SP_RH_DEFERRED_DONE, 1);
			apply(skops, s, &c, now);
		} else if (c.defer_rtts &&
			   now - s->want_since_ns >= (__u64)c.defer_rtts * srtt_us(skops) * 1000) {
			/* A bulk flow keeps its window full: the flight rarely
			 * drops below reordering. Waiting longer only keeps it on
			 * the congested path; pay a window of possible reordering
			 * (undone by DSACK) instead. */
			if (!revert)
				sp_count(&rehash_ctr, SP_RH_DEFERRED_FORCED, 1);
			apply(skops, s, &c, now);
		}
	} else if (s->win) {
		on_window(skops, s, &c, now);
	}
	on_rounds(skops, s, &c, now);
	rtt_cb_update(skops, s);
}

/*
 * Keep the kernel from drawing over the txhash this RTO callback writes:
 * SO_TXREHASH off (if on) until the socket's next callback (rto_release()).
 */
static __always_inline bool rto_hold(struct bpf_sock_ops *skops, struct sk_state *s)
{
	int on = 0, off = 0;

	if (bpf_getsockopt(skops, SOL_SOCKET, SO_TXREHASH, &on, sizeof(on)))
		return false;
	if (on == 1) {
		if (bpf_setsockopt(skops, SOL_SOCKET, SO_TXREHASH, &off, sizeof(off)))
			return false;
		s->rto_held = 1;
	}
	return true;
}

/*
 * Policy 2 on an RTO. The kernel draws a random hash right after this
 * callback, onto the path the flow is leaving as often as not (1 in N
 * paths). A move on trial that ended in an RTO failed: the flow goes back
 * to its old txhash instead (a futile move: backoff, no floor). On a path
 * that drops half of what it gets, a coin per RTO with the RTO doubling
 * each time kept a flow there for seconds. Not to a good hash of the pair
 * (reuse): measured, that made the 50%-loss path's fairness worse (a flow
 * there spends its time in loss recovery, where no episode is counted, so
 * its hash can look good when it closes). Where the kernel rehashes on
 * RTO (SO_TXREHASH 1, from net.core.txrehash), SO_TXREHASH off keeps it
 * from drawing over the revert; the retransmission that follows in the
 * same timer run (RETRANS_CB; any callback) turns it on again
 * (rto_release()). Where it does not, the revert is still done: the move
 * was stackpilot's, and a flow moved onto a path that drops everything
 * would otherwise stay there (no episode on it ever ends the trial).
 */
static __always_inline bool rto_steer(struct bpf_sock_ops *skops, struct sk_state *s,
				      const struct cfg *c, struct sp_rehash_conn *conn, __u64 now)
{
	__u32 cur = skops->sk_txhash, h = s->old_hash;
	bool pending = s->want == WANT_REVERT, trial;

	/* The RTO judges the move only while the new path has delivered
	 * little: a trial with too few episodes to end stays open, and an RTO
	 * a MiB later (a tail loss) says nothing about the move. A revert
	 * judge_move() decided but could not apply yet is done now too. */
	trial = s->judge && skops->bytes_acked - s->mv_bytes < SP_RH_GOOD_MIN;
	if (c->policy != 2 || !(trial || pending) || !cur || !h)
		return false;
	/* enforce=0 never wrote the move: old_hash is the current hash. */
	if (c->enforce && h == cur)
		return false;
	if (c->enforce && !rto_hold(skops, s))
		return false;
	if (trial)
		futile(skops, s, now);
	sp_count(&rehash_ctr, SP_RH_REVERT_DONE, 1);
	sp_count(&rehash_ctr, SP_RH_RTO_STEER, 1);
	if (conn)
		__sync_fetch_and_add(&conn->reverts, 1);
	txhash_set(skops, c, conn, h);
	return true;
}

/*
 * Policy 2, an RTO not steered back: from the second in a row (args[0] is
 * icsk_retransmits before this one counts: RTOs since the last progress),
 * onto the pair's calm hash (calm_note()) instead of the kernel's draw. Not
 * at the first: one RTO says little, and every flow sent to one calm
 * path adds to its queue.
 */
static __always_inline void rto_calm(struct bpf_sock_ops *skops, struct sk_state *s,
				     const struct cfg *c, struct sp_rehash_dest *d,
				     struct sp_rehash_conn *conn, __u32 cur, __u64 now)
{
	__u32 h;
	__u64 t;

	/* args[2]: the connection is timing out, nothing to move. */
	if (c->policy != 2 || !d || skops->args[0] < 1 || skops->args[2] || !cur)
		return;
#ifdef SP_MUTANT_RH_NO_RTO_CALM	/* make mutants: an RTO never takes a sibling's calm hash */
	return;
#endif
	h = d->calm_hash;
	t = d->calm_ns;
	/* A time in the future (bpftool) is not recent. A hash that already
	 * failed this flow may work for the sibling that found it calm (an
	 * MTU black hole its small packets pass): the kernel's draw then. */
	if (!h || h == cur || h == s->calm_bad || t > now || now - t > CALM_AGE_NS)
		return;
	/* A sibling's: the flow's own note is a hash it left, often by a
	 * move policy 2 kept (t_rehash_policy_sibling_keeps_move: B back
	 * beside A at its RTOs once in a make check). */
	if (d->calm_cookie == bpf_get_socket_cookie(skops))
		return;
	/* One flow per note. */
	if (sp_cmpxchg(&d->calm_hash, h, 0) != h)
		return;
	if (c->enforce && !rto_hold(skops, s))
		return;
	s->calm_given = h;
	sp_count(&rehash_ctr, SP_RH_RTO_CALM, 1);
	txhash_set(skops, c, conn, h);
}

/* The RTO is handled: the kernel's own RTO rehash is on again. Kept held
 * if that fails, so the next callback tries again. */
static __always_inline void rto_release(struct bpf_sock_ops *skops, struct sk_state *s)
{
	int on = 1;

	if (!bpf_setsockopt(skops, SOL_SOCKET, SO_TXREHASH, &on, sizeof(on)))
		s->rto_held = 0;
}

/* Reuse: a new connection starts on a hash its siblings found good. */
static __always_inline void start_on_good(struct bpf_sock_ops *skops, const struct cfg *c,
					  __u64 now)
{
	struct sp_rehash_dest *d = dest_get(skops, false);
	__u32 h;

	if (!d || !(h = good_pick(d, now, 0, 0)))
		return;
	sp_count(&rehash_ctr, SP_RH_REUSE_EST, 1);
	txhash_set(skops, c, NULL, h);
}

/* Reuse: a closing connection leaves its hash to the next ones if it found
 * it uncongested, and takes it off the list if not. s is NULL for a
 * connection that never retransmitted (no state made, lazy_state()): no
 * episode, so no density, and its hash carried all it delivered. */
static __always_inline void on_close(struct bpf_sock_ops *skops, struct sk_state *s, __u64 now)
{
	__u32 h = skops->sk_txhash;
	struct sp_rehash_dest *d;
	struct cfg c;
	__u64 dens;

	if (!h)
		return;
	read_cfg(&c);
	if (!c.reuse || !(d = dest_get(skops, true)))
		return;
	if (!s) {
		if (skops->bytes_acked >= SP_RH_GOOD_MIN)
			good_add(d, h, now);
		return;
	}
	dens = density(skops, s);
	if (s->corr_hit || (dens && dens_high(d, dens, now)))
		good_drop(d, h);
	else if (dens || skops->bytes_acked >= s->hash_bytes + SP_RH_GOOD_MIN)
		good_add(d, h, now);
}

/*
 * Whether a connection gets its state at establishment or at its first
 * retransmission or RTO. The first per-socket storage a connection gets is
 * most of what stackpilot costs a short connection (allocated and charged
 * at establishment, freed under a lock at close: 2.7 to 3.2 us of a 100-byte
 * fetch's 53 on veth, docs/bench/overhead.md), and a connection that never
 * retransmits needs none: with the rounds trigger and path memory off (the
 * defaults) nothing before the first episode reads it. Either on, the state
 * is made at establishment: rounds counts from the first ACK, and path
 * memory's old rate is measured from establishment (mark_path); a
 * connection made lazily measures it from its first retransmission.
 */
static __always_inline bool lazy_state(const struct cfg *c)
{
#ifdef SP_MUTANT_RH_EAGER_STATE	/* make mutants: every connection gets its state at once */
	return false;
#endif
	return !c->rounds && !c->revert_pct;
}

/*
 * A connection's state, at establishment or (lazy_state()) at its first
 * retransmission or RTO; F_CREATE returns the state there is, if any. With
 * state, its close counts (bytes, path memory, reuse): STATE_CB from here.
 */
static __always_inline struct sk_state *state_new(struct bpf_sock_ops *skops,
						  struct bpf_sock *bsk, const struct cfg *c,
						  __u64 now)
{
	struct sk_state *s;

	s = bpf_sk_storage_get(&rehash_sk, bsk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return NULL;
	s->rounds_on = c->rounds != 0;
	mark_path(skops, s, now);
#ifndef SP_MUTANT_RH_STATE_NO_CLOSE	/* make mutants: a connection with state asks for no close */
	sp_cb_flags_or(skops, BPF_SOCK_OPS_STATE_CB_FLAG);
#endif
	return s;
}

static __always_inline int rehash_ops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *bsk = skops->sk;
	struct sp_rehash_conn *conn;
	struct sp_rehash_dest *d;
	struct sk_state *s;
	struct cfg c;
	__u32 cur;
	__u64 now;

	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (!bsk)
			return 1;
		read_cfg(&c);
		/* No RTT_CB here: it is asked for when there is per-ACK work.
		 * No STATE_CB either unless there is work at close: a
		 * connection with state (state_new() asks for it), or reuse's
		 * good list, which every clean close feeds. */
#ifdef SP_MUTANT_RH_ALWAYS_STATE	/* make mutants: every connection asks for state callbacks */
		c.reuse = 1;
#endif
		sp_cb_flags_or(skops, BPF_SOCK_OPS_RETRANS_CB_FLAG | BPF_SOCK_OPS_RTO_CB_FLAG |
				      (c.reuse ? BPF_SOCK_OPS_STATE_CB_FLAG : 0));
		/* A clean connection's establishment reads no clock: with
		 * the defaults it ends here. */
		if (!c.reuse && lazy_state(&c))
			return 1;
		now = bpf_ktime_get_ns();
		if (c.reuse)
			start_on_good(skops, &c, now);
		if (lazy_state(&c))
			return 1;
		/* Storage now, so the hot callbacks never allocate. */
		s = state_new(skops, bsk, &c, now);
		if (s)
			rtt_cb_update(skops, s);
		return 1;
	case BPF_SOCK_OPS_RETRANS_CB:
	case BPF_SOCK_OPS_RTO_CB:
		/* A connection's first retransmission or RTO makes its state
		 * when establishment did not (lazy_state()). These callbacks
		 * come for the cgroup's sockets whose flags rehash, tcpstats or
		 * pmtu switched on: one established before rehash was enabled
		 * is taken on from here too. */
		if (!bsk)
			return 1;
		s = bpf_sk_storage_get(&rehash_sk, bsk, NULL, 0);
		if (!s) {
			read_cfg(&c);
			s = state_new(skops, bsk, &c, bpf_ktime_get_ns());
			if (!s)
				return 1;
		}
		break;
	case BPF_SOCK_OPS_RTT_CB:
	case BPF_SOCK_OPS_STATE_CB:
		if (!bsk)
			return 1;
		s = bpf_sk_storage_get(&rehash_sk, bsk, NULL, 0);
		if (s)
			break;
		/* No state: it never retransmitted (or was established before
		 * rehash was enabled). An RTT_CB is another module's ask,
		 * counted apart: rtt_callbacks and bytes_delivered are both of
		 * the connections with state, whose closes rehash always sees
		 * (state_new()), so their ratio holds. At close (reuse's ask,
		 * or another module's), its hash counts as a clean one's. */
		if (skops->op == BPF_SOCK_OPS_RTT_CB)
			sp_count(&rehash_ctr, SP_RH_RTT_CBS_OTHER, 1);
		else if (skops->args[1] == TCP_CLOSE)
			on_close(skops, NULL, bpf_ktime_get_ns());
		return 1;
	default:
		return 1;
	}
	if (s->rto_held)
		rto_release(skops, s);
	now = bpf_ktime_get_ns();
	switch (skops->op) {
	case BPF_SOCK_OPS_RTT_CB:
		on_rtt(skops, s, now);
		return 1;
	case BPF_SOCK_OPS_STATE_CB:
		/* args[1] is the new state: a closed socket delivers no more. */
		if (skops->args[1] == TCP_CLOSE) {
			count_bytes(skops, s);
			on_close(skops, s, now);
		}
		return 1;
	}
	if (skops->op == BPF_SOCK_OPS_RETRANS_CB) {
		on_retrans(skops, s, now);
	} else {
		read_cfg(&c);
		sp_count(&rehash_ctr, SP_RH_RTO, 1);
		/* An RTO on a hash is the worst a path can show: off the good
		 * list (before rto_steer() or the kernel moves the flow). */
		cur = skops->sk_txhash;
		d = c.reuse || c.policy == 2 ? dest_get(skops, false) : NULL;
		if (d && cur) {
			if (c.reuse)
				good_drop(d, cur);
			if (d->calm_hash == cur)
				d->calm_hash = 0;
		}
		/* The last calm hash given ended in an RTO. */
		if (cur && cur == s->calm_given)
			s->calm_bad = cur;
		/* One lookup for the connection view: the RTO count below,
		 * and the revert or calm move's txhash. */
		conn = conn_get(skops);
		if (!rto_steer(skops, s, &c, conn, now))
			rto_calm(skops, s, &c, d, conn, cur, now);
		s->had_rto = 1;
		/* The kernel moves the flow itself now: what was pending or being
		 * measured refers to a path it is leaving. */
		s->want = 0;
		s->win = 0;
		s->congested_rounds = 0;
		/* ... and the kernel's new hash has no history yet. */
		s->next_hash = 0;
		s->corr_hit = 0;
		s->hash_eps = 0;
		s->hash_bytes = skops->bytes_acked;
		s->judge = 0;
		s->old_dens = 0;
		s->old_prate = 0;
		s->pause_until_ns = now + c.pause_ns;
		mark_path(skops, s, now);
		if (conn)
			__sync_fetch_and_add(&conn->rtos, 1);
	}
	rtt_cb_update(skops, s);
	return 1;
}

SP_SOCKOPS_MODULE(sp_rehash, rehash_ops)
