// SPDX-License-Identifier: GPL-2.0
/*
 * fragguard: per-peer IP fragment memory control at tc ingress, before
 * fragments reach the reassembly queues.
 *
 * The kernel's reassembly memory (ipfrag_high_thresh) is one pool per
 * namespace: once a single peer fills it, every fragment from everyone is
 * dropped until queues time out. Gobert's series (seed 003, never merged)
 * tracked memory per inetpeer and shortened timeouts under load; the review
 * objected that inetpeer is not DDoS-resistant and that near-zero timeouts
 * stop datagrams from ever completing. Here:
 *  - every datagram in progress is tracked (LRU, SP_FG_DGRAMS), charged with
 *    what the kernel holds for it: each fragment's skb truesize plus the
 *    queue struct, and released when it completes or the kernel's timer
 *    (ipfrag_time) would have expired it;
 *  - per peer (source masked to prefix4/prefix6; LRU, SP_FG_PEERS) the sum;
 *  - a new datagram is refused when its peer is over peer_limit, or, when
 *    the namespace is loaded (sockstat memory > load_pct of high_thresh),
 *    over its fair share; the later fragments of a refused datagram go too;
 *  - the seed's adaptive timeout becomes an age limit: a datagram older than
 *    max(base*(limit - peer_mem)/limit, base*(high - mem)/high) gets no more
 *    fragments. It is only ever applied to new fragments: what the kernel
 *    already holds completes or times out as usual (the review's point);
 *  - peers that have never completed a datagram share unknown_pct of
 *    high_thresh between them, all together. Spoofed sources never complete
 *    (they would have to send whole datagrams), so a flood from any number
 *    of them cannot take the memory that completing peers use. Peers that
 *    completed one move to a map of their own (fragguard_known) that only
 *    completions enter, so churning the peer LRU with random sources cannot
 *    evict them either (the review's inetpeer objection). Refusals by the
 *    unknown pool leave no datagram entry behind, for the same reason.
 */
#include "common.bpf.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define TC_ACT_OK	0
#define TC_ACT_SHOT	2
#define ETH_P_IP	0x0800
#define ETH_P_IPV6	0x86DD
#define ETH_P_8021Q	0x8100
#define ETH_P_8021AD	0x88A8
#define IP_MF		0x2000
#define IP_OFFSET	0x1fff
#define NEXTHDR_HOP	0
#define NEXTHDR_ROUTING	43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_AUTH	51
#define NEXTHDR_DEST	60

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_fg_cfg);
} fragguard_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SP_FG_NR);
	__type(key, __u32);
	__type(value, __u64);
} fragguard_ctr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct sp_fg_global);
} fragguard_glob SEC(".maps");

struct dgram_key {
	__u32 family;
	__u32 id;
	__u32 proto;
	__u32 saddr[4];
	__u32 daddr[4];
};

struct dgram {
	__u64 first_ns;
	__u64 seen;		/* bit (offset/8) % 64: duplicate detection */
	__u32 mem;		/* bytes charged to the peer */
	__u32 covered;		/* payload bytes received, duplicates excluded */
	__u32 total;		/* datagram length, once the last fragment came */
	__u8 refused;
	__u8 unknown;		/* charged to the never-completed pool */
	__u16 frags;
	struct sp_fg_peer_key peer;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	/* Per-CPU LRU lists: a datagram's insert and delete take no global lock. */
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__uint(max_entries, SP_FG_DGRAMS);
	__type(key, struct dgram_key);
	__type(value, struct dgram);
} fragguard_dgram SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_FG_PEERS);
	__type(key, struct sp_fg_peer_key);
	__type(value, struct sp_fg_peer);
} fragguard_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_FG_KNOWN);
	__type(key, struct sp_fg_peer_key);
	__type(value, struct sp_fg_peer);
} fragguard_known SEC(".maps");

struct fg_state {
	struct bpf_timer timer;
	__u32 armed;
	__s32 active_peers;	/* peers with a datagram in progress */
	__s64 unknown_mem[2];	/* held by peers that never completed, per family */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_state);
} fragguard_state SEC(".maps");

/* Input interfaces the loader attached to: the kernel-drop counter's filter. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_IFACES);
	__type(key, __u32);
	__type(value, __u8);
} fragguard_ifs SEC(".maps");

struct frag {
	struct dgram_key key;
	__u32 off, len;
	bool more;
};

struct cfg {
	__u32 prefix4, prefix6;
	__u64 peer_limit;
	__u32 unknown_pct, load_pct;
	bool enforce;
};

static __always_inline __u32 clamp(__u32 v, __u32 lo, __u32 hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Tunables as written from outside are clamped to what makes sense. */
static __always_inline void read_cfg(struct cfg *c)
{
	__u32 zero = 0;
	struct sp_fg_cfg *m = bpf_map_lookup_elem(&fragguard_cfg, &zero);

	if (!m) {
		*c = (struct cfg){ 32, 64, 1 << 20, 50, 50, true };
		return;
	}
	c->prefix4 = clamp(m->prefix4, 0, 32);
	c->prefix6 = clamp(m->prefix6, 0, 128);
	c->peer_limit = (__u64)clamp(m->peer_limit_kb, 16, 1 << 20) << 10;
	c->unknown_pct = clamp(m->unknown_pct, 1, 100);
	c->load_pct = clamp(m->load_pct, 1, 100);
	c->enforce = m->enforce != 0;
}

/*
 * 1: a fragment, parsed into f. 0: not a fragment (including atomic IPv6
 * fragments, which the kernel does not queue). -1: a fragment whose headers
 * do not add up; the kernel gets it untouched and drops it itself.
 */
static __always_inline int parse(struct __sk_buff *skb, struct frag *f)
{
	__u32 nh = 14, pos;
	__u16 proto;
	__u8 vlan[4];

	if (bpf_skb_load_bytes(skb, 12, &proto, 2))
		return 0;
	/* Tags left in the frame (no VLAN offload): up to two (QinQ). */
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		if (bpf_skb_load_bytes(skb, nh, vlan, 4))
			return 0;
		proto = *(__u16 *)&vlan[2];
		nh += 4;
	}
	__builtin_memset(f, 0, sizeof(*f));
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		__u16 fo, tot;
		__u32 hl;

		if (bpf_skb_load_bytes(skb, nh, &ip, sizeof(ip)) || ip.version != 4)
			return 0;
		fo = bpf_ntohs(ip.frag_off);
		if (!(fo & (IP_MF | IP_OFFSET)))
			return 0;
		hl = ip.ihl * 4;
		tot = bpf_ntohs(ip.tot_len);
		if (hl < 20 || tot <= hl || nh + tot > skb->len)
			return -1;
		f->key.family = 2;
		f->key.id = ip.id;
		f->key.proto = ip.protocol;
		f->key.saddr[0] = ip.saddr;
		f->key.daddr[0] = ip.daddr;
		f->off = (fo & IP_OFFSET) * 8;
		f->len = tot - hl;
		f->more = fo & IP_MF;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		struct frag_hdr fh;
		__u8 next, ext[2];
		__u16 fo;
		__u32 plen, hdrs;
		bool found = false;

		if (bpf_skb_load_bytes(skb, nh, &ip6, sizeof(ip6)) || ip6.version != 6)
			return 0;
		next = ip6.nexthdr;
		pos = nh + sizeof(ip6);
#pragma unroll
		for (int i = 0; i < 6; i++) {
			if (next == NEXTHDR_FRAGMENT) {
				found = true;
				break;
			}
			if (next != NEXTHDR_HOP && next != NEXTHDR_ROUTING &&
			    next != NEXTHDR_DEST && next != NEXTHDR_AUTH)
				return 0;
			if (bpf_skb_load_bytes(skb, pos, ext, 2))
				return 0;
			pos += next == NEXTHDR_AUTH ? (ext[1] + 2) * 4 : (ext[1] + 1) * 8;
			next = ext[0];
		}
		if (!found || bpf_skb_load_bytes(skb, pos, &fh, sizeof(fh)))
			return 0;
		fo = bpf_ntohs(fh.frag_off);
		if (!(fo & 0xfff9))	/* offset 0, no M: an atomic fragment */
			return 0;
		plen = bpf_ntohs(ip6.payload_len);
		hdrs = pos + sizeof(fh) - nh - sizeof(ip6);
		if (plen <= hdrs || nh + sizeof(ip6) + plen > skb->len)
			return -1;
		f->key.family = 10;
		f->key.id = fh.identification;
		f->key.proto = fh.nexthdr;
		__builtin_memcpy(f->key.saddr, &ip6.saddr, 16);
		__builtin_memcpy(f->key.daddr, &ip6.daddr, 16);
		f->off = fo & ~7;
		f->len = plen - hdrs;
		f->more = fo & 1;
	} else {
		return 0;
	}
	if (f->off + f->len > 65535)
		return -1;
	return 1;
}

static __always_inline void peer_key(const struct frag *f, const struct cfg *c,
				     struct sp_fg_peer_key *pk)
{
	__u32 bits = f->key.family == 2 ? c->prefix4 : c->prefix6;

	__builtin_memset(pk, 0, sizeof(*pk));
	pk->family = f->key.family;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 b = bits > 32 ? 32 : bits;

		if (b)
			pk->addr[i] = f->key.saddr[i] &
				      bpf_htonl(b == 32 ? 0xffffffff : ~(0xffffffffu >> b));
		bits -= b;
	}
}

static __always_inline struct fg_state *fg_state(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fragguard_state, &zero);
}

static __always_inline struct sp_fg_peer *peer_find(const struct sp_fg_peer_key *pk)
{
	struct sp_fg_peer *p = bpf_map_lookup_elem(&fragguard_known, pk);

	return p ? p : bpf_map_lookup_elem(&fragguard_peers, pk);
}

/* Undo what a datagram charged: on completion or expiry. */
static __always_inline void release(struct dgram *d, int fam, bool completed,
				    struct sp_fg_peer *p)
{
	struct fg_state *st = fg_state();

	if (!p)
		p = peer_find(&d->peer);

	if (d->refused)
		return;
	if (st && d->unknown && fam >= 0 && fam < 2)
		__sync_fetch_and_add(&st->unknown_mem[fam], -(__s64)d->mem);
	if (!p)
		return;	/* evicted: its sums went with it */
	__sync_fetch_and_add(&p->mem, -(__s64)d->mem);
	if (completed)
		__sync_fetch_and_add(&p->completed, 1);
	else
		__sync_fetch_and_add(&p->expired, 1);
	if (__sync_fetch_and_add(&p->in_progress, -1) == 1 && st)
		__sync_fetch_and_add(&st->active_peers, -1);
	/* A first completion: the peer becomes known. */
	if (completed && p->completed == 1 &&
	    !bpf_map_update_elem(&fragguard_known, &d->peer, p, BPF_NOEXIST))
		bpf_map_delete_elem(&fragguard_peers, &d->peer);
}

static __always_inline struct sp_fg_global *global(int fam)
{
	__u32 k = fam;

	return bpf_map_lookup_elem(&fragguard_glob, &k);
}

static __always_inline __u64 frag_time_ns(int fam)
{
	struct sp_fg_global *g = global(fam);

	return g && g->time_ns ? g->time_ns : 30ULL * 1000000000;
}

/* base * (cap - used) / cap, 0 once used reaches cap (no signed division in BPF). */
static __always_inline __u64 share_of(__u64 base_ms, __s64 used, __u64 cap)
{
	__u64 left;

	if (!cap || used >= (__s64)cap)
		return 0;
	left = cap - (used < 0 ? 0 : used);
	return base_ms * ((left << 10) / cap) >> 10;
}

/*
 * The seed's rule: max(base*(limit - peer)/limit, base*(high - mem)/high),
 * base = ipfrag_time. 0 when both the peer and the namespace are full.
 */
static __always_inline __u64 age_limit_ns(__s64 peer_mem, __u64 limit, int fam)
{
	struct sp_fg_global *g = global(fam);
	__u64 base_ms = frag_time_ns(fam) / 1000000, t1, t2 = base_ms;

	t1 = share_of(base_ms, peer_mem, limit);
	if (g && g->high_thresh)
		t2 = share_of(base_ms, g->mem, g->high_thresh);
	return (t1 > t2 ? t1 : t2) * 1000000;
}

static int expire_one(void *map, struct dgram_key *k, struct dgram *d, void *ctx)
{
	__u64 now = *(__u64 *)ctx;
	int fam = k->family == 2 ? 0 : 1;

	if (now - d->first_ns <= frag_time_ns(fam))
		return 0;
	if (!d->refused)
		sp_count(&fragguard_ctr, SP_FG_EXPIRED, 1);
	release(d, fam, false, NULL);
	bpf_map_delete_elem(map, k);
	return 0;
}

/* Every 250 ms: release datagrams the kernel's timer has expired by now. */
static int sweep(void *map, int *key, struct fg_state *st)
{
	__u64 now = bpf_ktime_get_ns();

	bpf_for_each_map_elem(&fragguard_dgram, expire_one, &now, 0);
	bpf_timer_start(&st->timer, 250 * 1000000ULL, 0);
	return 0;
}

static __always_inline void arm_sweeper(void)
{
	struct fg_state *st = fg_state();

	if (!st || st->armed || __sync_lock_test_and_set(&st->armed, 1))
		return;
	bpf_timer_init(&st->timer, &fragguard_state, 1 /* CLOCK_MONOTONIC */);
	bpf_timer_set_callback(&st->timer, sweep);
	bpf_timer_start(&st->timer, 250 * 1000000ULL, 0);
}

static __always_inline int refuse(const struct cfg *c, __u32 why, struct sp_fg_peer *p)
{
	sp_count(&fragguard_ctr, why, 1);
	if (p)
		__sync_fetch_and_add(&p->refused, 1);
	if (!c->enforce)
		return -1;	/* account only: let it through */
	sp_count(&fragguard_ctr, SP_FG_DROPPED, 1);
	return TC_ACT_SHOT;
}

/* Add one fragment to an admitted datagram of peer p; release it if now complete. */
static __always_inline void add_fragment(struct dgram *d, const struct frag *f, __u32 truesize,
					 int fam, struct sp_fg_peer *p)
{
	__u64 bit = 1ULL << ((f->off / 8) % 64);
	struct fg_state *st;

	if (d->seen & bit)
		return;	/* a duplicate: the kernel drops it, holds nothing more */
	d->seen |= bit;
	d->frags++;
	d->covered += f->len;
	if (!f->more)
		d->total = f->off + f->len;
	if (d->total && d->covered >= d->total) {
		sp_count(&fragguard_ctr, SP_FG_COMPLETED, 1);
		release(d, fam, true, p);
		bpf_map_delete_elem(&fragguard_dgram, &f->key);
		return;
	}
	d->mem += truesize;
	if (p)
		__sync_fetch_and_add(&p->mem, truesize);
	st = fg_state();
	if (st && d->unknown)
		__sync_fetch_and_add(&st->unknown_mem[fam], truesize);
}

/* A fragment that would start a new datagram: admit or refuse. */
static __always_inline int new_datagram(const struct frag *f, const struct cfg *c,
					__u32 truesize, __u32 qsize, int fam, __u64 now)
{
	struct sp_fg_peer_key pk;
	struct sp_fg_peer *p, zero = {};
	struct sp_fg_global *g = global(fam);
	struct fg_state *st = fg_state();
	struct dgram d = {};
	__u32 why = 0;
	__s64 pmem;
	int act;

	peer_key(f, c, &pk);
	p = peer_find(&pk);
	if (!p) {
		bpf_map_update_elem(&fragguard_peers, &pk, &zero, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&fragguard_peers, &pk);
		if (!p)
			return TC_ACT_OK;
	}
	pmem = p->mem;
	if (pmem + truesize + qsize > (__s64)c->peer_limit) {
		why = SP_FG_REF_PEER;
	} else if (g && g->high_thresh && g->mem * 100 > g->high_thresh * c->load_pct) {
		__s32 active = st && st->active_peers > 0 ? st->active_peers : 1;

		/* Under load: a fair share each of what is left below high. */
		if (pmem > 0 && (__u64)pmem > g->high_thresh / active)
			why = SP_FG_REF_SHARE;
	}
	if (!why && !p->completed && st && g && g->high_thresh &&
	    st->unknown_mem[fam & 1] + truesize + qsize > g->high_thresh * c->unknown_pct / 100)
		why = SP_FG_REF_UNKNOWN;
	d.first_ns = now;
	d.peer = pk;
	if (why) {
		act = refuse(c, why, p);
		if (act != -1) {
			/* Remember it so its later fragments go too; not for the
			 * unknown pool, whose refusals a spoofed flood makes by the
			 * million and which would churn the datagram LRU. */
			if (why != SP_FG_REF_UNKNOWN) {
				d.refused = 1;
				bpf_map_update_elem(&fragguard_dgram, &f->key, &d, BPF_ANY);
			}
			return act;
		}
	}
	/* Admitted (or account-only): the queue and this first fragment, in one
	 * insert. One fragment never completes a datagram (that would be an
	 * atomic fragment, not tracked, or one not starting at 0). */
	d.mem = qsize + truesize;
	d.unknown = !p->completed;
	d.seen = 1ULL << ((f->off / 8) % 64);
	d.frags = 1;
	d.covered = f->len;
	if (!f->more)
		d.total = f->off + f->len;
	if (bpf_map_update_elem(&fragguard_dgram, &f->key, &d, BPF_ANY))
		return TC_ACT_OK;
	__sync_fetch_and_add(&p->mem, d.mem);
	__sync_fetch_and_add(&p->admitted, 1);
	if (__sync_fetch_and_add(&p->in_progress, 1) == 0 && st)
		__sync_fetch_and_add(&st->active_peers, 1);
	if (st && d.unknown)
		__sync_fetch_and_add(&st->unknown_mem[fam & 1], d.mem);
	sp_count(&fragguard_ctr, SP_FG_ADMITTED, 1);
	return TC_ACT_OK;
}

SEC("tc")
int sp_fragguard(struct __sk_buff *skb)
{
	struct sp_fg_peer *p;
	struct sk_buff *kskb;
	struct dgram *d;
	struct frag f;
	struct cfg c;
	__u32 truesize, qsize;
	__u64 now;
	int r, fam, act;

	sp_count(&fragguard_ctr, SP_FG_PKTS, 1);
	r = parse(skb, &f);
	if (r == 0)
		return TC_ACT_OK;
	sp_count(&fragguard_ctr, SP_FG_FRAGS, 1);
	if (r < 0) {
		sp_count(&fragguard_ctr, SP_FG_MALFORMED, 1);
		return TC_ACT_OK;
	}
	arm_sweeper();
	read_cfg(&c);
	now = bpf_ktime_get_ns();
	fam = f.key.family == 2 ? 0 : 1;
	kskb = bpf_cast_to_kern_ctx(skb);
	truesize = kskb->truesize;
	qsize = fam ? bpf_core_type_size(struct frag_queue) : bpf_core_type_size(struct ipq);

	d = bpf_map_lookup_elem(&fragguard_dgram, &f.key);
	if (d && now - d->first_ns > frag_time_ns(fam)) {
		/* The kernel has expired it; this fragment starts a new queue. */
		if (!d->refused)
			sp_count(&fragguard_ctr, SP_FG_EXPIRED, 1);
		release(d, fam, false, NULL);
		bpf_map_delete_elem(&fragguard_dgram, &f.key);
		d = NULL;
	}
	if (!d)
		return new_datagram(&f, &c, truesize, qsize, fam, now);
	if (d->refused) {
		act = refuse(&c, SP_FG_REF_FOLLOW, NULL);
		return act == -1 ? TC_ACT_OK : act;
	}
	p = peer_find(&d->peer);
	if (now - d->first_ns > age_limit_ns(p ? p->mem : 0, c.peer_limit, fam)) {
		act = refuse(&c, SP_FG_REF_AGE, p);
		if (act != -1)
			return act;
	}
	add_fragment(d, &f, truesize, fam, p);
	return TC_ACT_OK;
}

/* The kernel's own fragment drops, by reason (numbers resolved from BTF at load). */
SEC("tp_btf/kfree_skb")
int BPF_PROG(sp_fragguard_drops, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	__u32 iif, idx;

	if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_FRAG_REASM_TIMEOUT))
		idx = SP_FG_K_TIMEOUT;
	else if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_DUP_FRAG))
		idx = SP_FG_K_DUP;
	else if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_FRAG_TOO_FAR))
		idx = SP_FG_K_TOO_FAR;
	else
		return 0;
	/* Queued fragments have no dev; skb_iif is where they came in. */
	iif = BPF_CORE_READ(skb, skb_iif);
	if (bpf_map_lookup_elem(&fragguard_ifs, &iif))
		sp_count(&fragguard_ctr, idx, 1);
	return 0;
}
