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
 * stop datagrams from ever completing.
 *
 * A policy that refuses fragments must first see reassembly exactly as the
 * kernel does, or it drops datagrams the kernel would have delivered. So:
 *  - datagrams are keyed as the kernel keys its queues (IPv4: saddr, daddr,
 *    id, protocol; IPv6: saddr, daddr, id, and the interface for link-local
 *    and multicast destinations) and each fragment goes through the
 *    kernel's own rules (net/ipv4/ip_fragment.c ip_frag_queue,
 *    net/ipv6/reassembly.c ip6_frag_queue, inet_frag_queue_insert): runs of
 *    adjacent fragments, a fragment inside one run is a duplicate (dropped,
 *    queue kept), any other overlap kills the queue, inconsistent ends kill
 *    it, reassembly fails on oversize and bad ECN mixes;
 *  - runs are kept inline (SP_FG_RUNS) and, past that, as two bitmaps of
 *    8-byte units (covered, run start) in a separate map: exact for every
 *    legal fragmentation up to 65535 bytes at any MTU;
 *  - a known peer's datagrams in progress live in slots of its own (four,
 *    in an array), the rest in hash maps: a slot costs nothing to take or
 *    give back, a hash map's entry half a fragment's cost;
 *  - each datagram is charged what the kernel holds for it (every queued
 *    fragment's truesize plus the queue struct) and released exactly once:
 *    on completion or discard (here, as the kernel does it), or on expiry
 *    (the kernel's own FRAG_REASM_TIMEOUT drops, seen on tp_btf/kfree_skb,
 *    with a sweep every 250 ms as the fallback).
 * On top of that view, the policy:
 *  - a new datagram is refused when its peer (source masked to a prefix) is
 *    over peer_limit, or, under load, over its fair share; peers not yet
 *    known share unknown_pct of high_thresh between them all;
 *  - "known" has to be paid for: known_kb reassembled over at least
 *    known_s seconds. The known map is not an LRU: entries leave only after
 *    SP_FG_KNOWN_IDLE_S without a fragment, so no newcomer can push out a
 *    peer that is still sending (the review's inetpeer objection);
 *  - the seed's adaptive timeout becomes an age limit on new fragments of
 *    a datagram: what the kernel already queued is never cut short.
 */
#include "common.bpf.h"
#include "netns.bpf.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* Every packet let through goes on to the next filter (TC_ACT_UNSPEC, and
 * TCX_NEXT under tcx): TC_ACT_OK would end the chain and skip the filters
 * of others behind ours. */
#ifndef SP_MUTANT_FG_END_CHAIN	/* make mutants: TC_ACT_OK, which ends the chain */
#define TC_PASS		(-1)
#else
#define TC_PASS		0
#endif
#define TC_ACT_SHOT	2
#define ETH_P_IP	0x0800
#define ETH_P_IPV6	0x86DD
#define ETH_P_8021Q	0x8100
#define ETH_P_8021AD	0x88A8
#define IP_MF		0x2000
#define IP_OFFSET	0x1fff
#define NEXTHDR_HOP	0
#define NEXTHDR_TCP	6
#define NEXTHDR_UDP	17
#define NEXTHDR_ROUTING	43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_AUTH	51
#define NEXTHDR_ICMP	58
#define NEXTHDR_DEST	60
#define PACKET_OTHERHOST 3

/* inet_frag_queue flags */
#define F_FIRST_IN	0x01
#define F_LAST_IN	0x02
#define F_BITS		0x04	/* runs are in fragguard_bits */
#define F_INEXACT	0x08	/* coverage by byte count only */
#define F_LAST_MF	0x10	/* the last fragment added had MF set */

#define DEAD		(-1LL)	/* dgram.mem once released */
#define UNITS		8192	/* 8-byte units of 64 KiB */
#define WORDS		(UNITS / 64)
/* Keeps the compiler from dropping an index mask the verifier needs. */
#define word_idx(w)	({ __u32 __w = (w); asm volatile("" : "+r"(__w)); __w & (WORDS - 1); })

/* The namespace of the --iface devices (sp_netns_id()), set before load. */
const volatile __u64 fg_netns = 0;
/* The kernel has bpf_cast_to_kern_ctx (SP_F_KERN_CTX), set before load. */
const volatile bool fg_kern_ctx = false;
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_fg_agg);
} fragguard_agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_fg_mem);
} fragguard_mem SEC(".maps");

/* The kernel's queue key (struct frag_v4_compare_key / frag_v6_compare_key). */
struct dgram_key {
	__u32 id;
	__u8 family;		/* 2 or 10 */
	__u8 proto;		/* IPv4 only: IPv6 queues ignore the next header */
	__u16 pad;
	__u32 iif;		/* IPv6 link-local/multicast destinations only */
	__u32 saddr[4];
	__u32 daddr[4];
};

struct dgram {
	__u64 first_ns;		/* the kernel's timer start: queue creation or reinit */
	__s64 mem;		/* bytes charged; DEAD once released (exactly once) */
	__u32 len;		/* the kernel's q.len */
	__u32 meat;		/* the kernel's q.meat: bytes queued */
	__u32 tail_end;		/* end of the fragment with the highest end */
	__u32 run_s[SP_FG_RUNS];
	__u32 run_e[SP_FG_RUNS];
	__u32 last_off, last_end, last_ts;	/* last fragment added (for a reinit) */
	__u32 epoch;		/* of the peer entry charged */
	__u16 hl;		/* header bytes before the payload, from offset 0 */
	__u8 flags;
	__u8 ecn;		/* IPFRAG_ECN_* bits seen */
	__u8 nruns;
	__u8 tail;		/* index of the tail run */
	__u8 unknown;		/* charged to the unknown pool */
	__u8 last_ecn;
	__u8 reinit;		/* a reinit was applied since the last fragment */
	__u8 pad[3];
	struct sp_fg_peer_key peer;
};

/*
 * Datagrams in progress, one map per family. Not an LRU: an eviction would
 * lose a datagram's charge. Allocated on use; when full, new datagrams pass
 * untracked. IPv4's has the kernel's IPv4 key, 12 bytes where dgram_key has
 * 44: every fragment looks its datagram up, and once the bucket is cached
 * hashing and comparing the key is much of a lookup (docs/bench/fragguard.md).
 */
struct dgram_key4 {
	__u32 saddr, daddr;
	__u16 id;
	__u8 proto, pad;
};

#define DGRAM_MAP(name, key_type)			\
	struct {						\
		__uint(type, BPF_MAP_TYPE_HASH);		\
		__uint(map_flags, BPF_F_NO_PREALLOC);		\
		__uint(max_entries, SP_FG_DGRAMS);		\
		__type(key, key_type);				\
		__type(value, struct dgram);			\
	} name SEC(".maps")

DGRAM_MAP(fragguard_dgram4, struct dgram_key4);
DGRAM_MAP(fragguard_dgram6, struct dgram_key);

static __always_inline void key4(const struct dgram_key *k, struct dgram_key4 *k4)
{
	k4->saddr = k->saddr[0];
	k4->daddr = k->daddr[0];
	k4->id = k->id;
	k4->proto = k->proto;
	k4->pad = 0;
}

static __always_inline struct dgram *dgram_get(const struct dgram_key *k)
{
	struct dgram_key4 k4;

	if (k->family != 2)
		return bpf_map_lookup_elem(&fragguard_dgram6, k);
	key4(k, &k4);
	return bpf_map_lookup_elem(&fragguard_dgram4, &k4);
}

static __always_inline long dgram_new(const struct dgram_key *k, const struct dgram *d)
{
	struct dgram_key4 k4;

	if (k->family != 2)
		return bpf_map_update_elem(&fragguard_dgram6, k, d, BPF_NOEXIST);
	key4(k, &k4);
	return bpf_map_update_elem(&fragguard_dgram4, &k4, d, BPF_NOEXIST);
}

static __always_inline void dgram_del(const struct dgram_key *k)
{
	struct dgram_key4 k4;

	if (k->family != 2) {
		bpf_map_delete_elem(&fragguard_dgram6, k);
		return;
	}
	key4(k, &k4);
	bpf_map_delete_elem(&fragguard_dgram4, &k4);
}

struct bits {
	__u64 cov[WORDS];	/* 8-byte units queued */
	__u64 start[WORDS];	/* units where a run starts */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SP_FG_BITS);
	__type(key, struct dgram_key);
	__type(value, struct bits);
} fragguard_bits SEC(".maps");

/* A zeroed struct bits to insert from (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bits);
} fragguard_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_FG_PEERS);
	__type(key, struct sp_fg_peer_key);
	__type(value, struct sp_fg_peer);
} fragguard_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_FG_KNOWN);
	__type(key, struct sp_fg_peer_key);
	__type(value, struct sp_fg_peer);
} fragguard_known SEC(".maps");

/* Refused datagrams: only so that their later fragments go too. Holds no
 * accounting, so an eviction costs nothing but one re-evaluation. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_FG_REFUSED);
	__type(key, struct dgram_key);
	__type(value, __u64);
} fragguard_refused SEC(".maps");

struct fg_state {
	struct bpf_timer timer;
	__u32 armed;
	__u32 sweeps;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_state);
} fragguard_state SEC(".maps");

/*
 * Input interfaces the loader attached to, and the cookie of their network
 * namespace: the kernel-drop program's filter. Interface indexes repeat in
 * every namespace, so the index alone counts other namespaces' drops.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_IFACES);
	__type(key, __u32);
	__type(value, __u64);
} fragguard_ifs SEC(".maps");

struct frag {
	struct dgram_key key;
	__u32 off, end;		/* end as the kernel computes it (MF: rounded down to 8) */
	__u16 hl;		/* IPv4 IHL; IPv6 extension headers before the fragment header */
	__u8 mf;
	__u8 ecn;		/* 1 << (tos & 3): the kernel's IPFRAG_ECN_* bit */
	__u8 prob;		/* IPv6: dropped with a parameter problem, queue kept */
};

struct cfg {
	__u32 prefix4, prefix6;
	__u64 peer_limit;
	__u32 unknown_pct, load_pct;
	__u64 known_bytes, known_ns;
	bool enforce;
};

enum verdict { V_COMPLETED, V_EXPIRED, V_DISCARDED };

SP_CFG_READ(fg, struct sp_fg_cfg, fragguard_cfg, SP_FRAGGUARD_TUNABLES)

/* The tunables, clamped to their declared ranges, in the units used here. */
static __always_inline void read_cfg(struct cfg *c)
{
	struct sp_fg_cfg m;

	fg_cfg_read(&m);
	c->prefix4 = m.prefix4;
	c->prefix6 = m.prefix6;
	c->peer_limit = (__u64)m.peer_limit_kb << 10;
	c->unknown_pct = m.unknown_pct;
	c->load_pct = m.load_pct;
	c->enforce = m.enforce;
	c->known_bytes = (__u64)m.known_kb << 10;
	c->known_ns = (__u64)m.known_s * 1000000000ULL;
}

/*
 * The tc program's clock (datagram starts, ages, idle peers, refusals):
 * CLOCK_MONOTONIC as of the last tick. The kernel's reassembly timers count
 * jiffies, ticks too, so a queue's expiry and the time seen here advance
 * together; and it is read without the clock source, which a virtual
 * machine's paravirtual clock makes dear (about 50 ns a fragment there).
 * Tracing programs may not read it (it takes a lock): they read the same
 * clock to the nanosecond, never behind a tick-time read earlier, and the
 * one time they store (a reinit's start) is read here through since().
 */
static __always_inline __u64 fg_now(void)
{
	return bpf_ktime_get_coarse_ns();
}

/* now - t, 0 when t is the later (a nanosecond time within this tick). */
static __always_inline __u64 since(__u64 now, __u64 t)
{
	return now > t ? now - t : 0;
}

static __always_inline struct sp_fg_agg *agg(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fragguard_agg, &zero);
}

/*
 * A known peer's datagrams in progress, in slots of its own: up to
 * SP_FG_SLOTS of them, beyond that (and for unknown peers) in the hash
 * maps. A known peer sends most datagrams, and in the hash maps each one
 * was an insert and a delete (a bucket lock with interrupts off, an
 * element allocated and freed) and a first touch of a random bucket of a
 * megabyte: half a fragment's cost (docs/bench/fragguard.md). Its
 * block is found from its entry, which every fragment looks up anyway (the
 * peer key), and stays in cache while the peer sends. Block i serves the
 * known peer whose epoch / 2 is i modulo SP_FG_BLOCKS and took it first; a
 * peer whose block is taken keeps using the hash maps. The sweep frees a
 * block whose peer is gone. An array: nothing is allocated, and a slot is
 * reused as soon as its datagram ends.
 */
struct slot {
	struct dgram_key k;
	/* SLOT_LIVE while d is a datagram in progress; the slot's index in
	 * the low bits; above them a generation, new at every claim, so that a
	 * reader can tell that the slot was reused under it. */
	__u32 live;
	__u32 pad;
	struct dgram d;
};

#define SLOT_LIVE	0x100
#define SLOT_GEN	0x200	/* one generation */

struct block {
	__u32 owner;		/* epoch of the known peer it serves; 0: free */
	/* Held while a datagram takes a slot or spills, the block is taken
	 * or freed: by tc programs and the sweep, never nested on a CPU. */
	__u32 busy;
	/* The peer may have datagrams in the hash maps until they have
	 * surely expired past this time: those it began before it had the
	 * block, or while every slot was in use. 0: search them always. */
	__u64 hashed_ns;
	struct sp_fg_peer_key owner_key;	/* to find the owner's entry */
	__u32 pad;
	struct slot s[SP_FG_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_FG_BLOCKS);
	__type(key, __u32);
	__type(value, struct block);
} fragguard_slots SEC(".maps");

/* The kernel's queue key equality (dgram_key's padding is 0 everywhere). */
static __always_inline bool key_eq(const struct dgram_key *a, const struct dgram_key *b)
{
	if (a->id != b->id || a->saddr[0] != b->saddr[0] || a->daddr[0] != b->daddr[0] ||
	    a->family != b->family || a->proto != b->proto)
		return false;
	if (a->family == 2)
		return true;
	return a->iif == b->iif && a->saddr[1] == b->saddr[1] && a->saddr[2] == b->saddr[2] &&
	       a->saddr[3] == b->saddr[3] && a->daddr[1] == b->daddr[1] &&
	       a->daddr[2] == b->daddr[2] && a->daddr[3] == b->daddr[3];
}

/* Spin for b's busy word: false if another CPU kept it (then the caller
 * does without; its holder runs a few dozen instructions). */
static __always_inline bool block_lock(struct block *b)
{
	for (int i = 0; i < 64; i++)
		if (!__sync_val_compare_and_swap(&b->busy, 0, 1))
			return true;
	return false;
}

static __always_inline void block_unlock(struct block *b)
{
	__sync_lock_test_and_set(&b->busy, 0);
}

/* The block of known peer kp (key pk, family fam), if it has one. take:
 * the tc program, which gives it its block when that is free. */
static __always_inline struct block *block_of(const struct sp_fg_peer *kp,
					      const struct sp_fg_peer_key *pk, int fam, bool take)
{
	/* Epochs are odd (0 is no owner): bit 0 tells blocks nothing. */
	__u32 epoch = kp->epoch, i = (epoch >> 1) % SP_FG_BLOCKS;
	struct block *b = bpf_map_lookup_elem(&fragguard_slots, &i);

	if (!b || b->owner == epoch)
		return b;
	if (!take || b->owner || !pk || __sync_val_compare_and_swap(&b->busy, 0, 1))
		return NULL;
	if (!b->owner) {
		b->owner_key = *pk;
		b->hashed_ns = 0;	/* search them while this decides */
		__sync_lock_test_and_set(&b->owner, epoch);
		/*
		 * Its datagrams in progress are in the hash maps: search them
		 * until they have surely expired; with none, not at all. They
		 * are in its charge, or, begun while it was not known, in its
		 * family's unknown pool (there even if that entry was evicted
		 * or is being promoted); both read after the owner is published.
		 * One that another CPU charges after these reads is seen by
		 * hash_charged().
		 */
		struct sp_fg_agg *a = agg();
		bool hashed = *(volatile __s64 *)&kp->mem > 0;

#ifndef SP_MUTANT_FG_WINDOW_OWN_CHARGE	/* make mutants: the unknown pool not read at a take */
		hashed |= a && *(volatile __s64 *)&a->unknown_mem[fam & 1] > 0;
#else
		(void)a;
#endif

#ifndef SP_MUTANT_FG_WINDOW_ALWAYS	/* make mutants: every block taken opens the window */
		__sync_val_compare_and_swap(&b->hashed_ns, 0, hashed ? fg_now() : 1);
#else
		__sync_val_compare_and_swap(&b->hashed_ns, 0, fg_now() + 0 * hashed);
#endif
	}
	block_unlock(b);
	return b->owner == epoch ? b : NULL;
}


/*
 * The live slot of b holding k. Its live word read again after the key:
 * a slot reused meanwhile (its datagram ended, another began in it) is no
 * match. Found by its index as read from the slot: to the verifier a value
 * from memory, so the slots are one path after this, not one each (a
 * pointer's constant offset is part of its state).
 */
static __always_inline struct slot *slot_find(struct block *b, const struct dgram_key *k)
{
	__u32 w;

#pragma unroll
	for (int i = 0; i < SP_FG_SLOTS; i++) {
		w = *(volatile __u32 *)&b->s[i].live;
		if ((w & SLOT_LIVE) && key_eq(&b->s[i].k, k) &&
		    *(volatile __u32 *)&b->s[i].live == w)
			return &b->s[w & (SP_FG_SLOTS - 1)];
	}
	return NULL;
}

static __always_inline struct sp_fg_global *global(int fam)
{
	__u32 k = fam;

	return bpf_map_lookup_elem(&fragguard_glob, &k);
}

/* ipfrag_time: the sysctl's int seconds are under 2^61 ns; a larger value
 * (bpftool) is capped there, so that expired_after() cannot wrap. */
static __always_inline __u64 time_of(const struct sp_fg_global *g)
{
	__u64 t = g && g->time_ns ? g->time_ns : 30ULL * 1000000000;

	return t > 1ULL << 61 ? 1ULL << 61 : t;
}

/*
 * When the kernel has surely expired a queue: its timer may fire up to one
 * timer-wheel granule late, and a granule is at most 1/8 of the timeout.
 * The kernel's own timeout drops (tp_btf) end a datagram on time; this is
 * for when they were not seen.
 */
static __always_inline __u64 expired_after(const struct sp_fg_global *g)
{
	__u64 t = time_of(g);

	return t + t / 8;
}

/* Walking an IPv6 extension header chain, one header per bpf_loop step. */
struct walk6 {
	struct __sk_buff *skb;
	__u32 pos;		/* offset of the header of type next */
	__u8 next;
	__u8 stop_at_frag;	/* 1: stop at a fragment header; 0: walk past it too */
	__u8 end;		/* 0 walking, 1 stopped at a non-extension header, 2 no room */
};

#define NEXTHDR_NONE	59

static int walk6_step(__u32 i, struct walk6 *w)
{
	__u8 ext[2];

	if (w->next == NEXTHDR_FRAGMENT && w->stop_at_frag) {
		w->end = 1;
		return 1;
	}
	if (w->next != NEXTHDR_HOP && w->next != NEXTHDR_ROUTING && w->next != NEXTHDR_DEST &&
	    w->next != NEXTHDR_AUTH && w->next != NEXTHDR_FRAGMENT) {
		w->end = 1;
		return 1;
	}
	if (bpf_skb_load_bytes(w->skb, w->pos, ext, 2)) {
		w->end = 2;
		return 1;
	}
	w->pos += w->next == NEXTHDR_AUTH ? (ext[1] + 2) * 4 :
		  w->next == NEXTHDR_FRAGMENT ? 8 : (ext[1] + 1) * 8;
	w->next = ext[0];
	return 0;
}

/* As many headers as fit in the packet: a chain the kernel walks to its end
 * cannot be cut short here, or fragments behind it would go unseen. */
static __always_inline void walk6(struct walk6 *w)
{
	bpf_loop(w->skb->len / 8 + 1 < 8192 ? w->skb->len / 8 + 1 : 8192, walk6_step, w, 0);
}

/*
 * IPv6, parsed from the IPv6 header on: fills the key and position. 1: a
 * fragment; 0: not one (or an atomic fragment, which the kernel does not
 * queue); -1: one the kernel drops before reassembly.
 */
static __always_inline int parse6(struct __sk_buff *skb, __u32 nh, struct frag *f)
{
	struct ipv6hdr ip6;
	struct frag_hdr fh;
	struct walk6 w = { .skb = skb, .stop_at_frag = 1 };
	__u16 fo;
	__u32 plen, hdrs, pos, need, end;

	if (bpf_skb_load_bytes(skb, nh, &ip6, sizeof(ip6)) || ip6.version != 6)
		return 0;
	w.next = ip6.nexthdr;
	w.pos = nh + sizeof(ip6);
	if (w.next != NEXTHDR_FRAGMENT)
		walk6(&w);
	if (w.next != NEXTHDR_FRAGMENT)
		return 0;
	pos = w.pos;
	plen = bpf_ntohs(ip6.payload_len);
	end = nh + sizeof(ip6) + plen;
	hdrs = pos + sizeof(fh) - nh - sizeof(ip6);
	/* ipv6_rcv: a payload beyond the packet; ipv6_frag_rcv: jumbo, or no
	 * room for the fragment header. */
	if (!plen || end > skb->len || plen < hdrs ||
	    bpf_skb_load_bytes(skb, pos, &fh, sizeof(fh)))
		return -1;
	fo = bpf_ntohs(fh.frag_off);
	if (!(fo & 0xfff9))	/* offset 0, no M: an atomic fragment */
		return 0;
	f->off = fo & ~7;
	f->mf = fo & 1;
	/* RFC 8200 4.5: a first fragment must hold the headers through the
	 * upper-layer one (ipv6frag_thdr_truncated, which walks past ours). */
	if (!f->off) {
		w.pos = pos + sizeof(fh);
		w.next = fh.nexthdr;
		w.stop_at_frag = 0;
		walk6(&w);
		if (w.end == 1 && w.next != NEXTHDR_NONE) {
			need = w.next == NEXTHDR_TCP ? 20 :
			       w.next == NEXTHDR_UDP || w.next == NEXTHDR_ICMP ? 8 : 1;
			if (w.pos + need > end)
				return -1;
		}
	}
	f->end = f->off + plen - hdrs;
	/* ip6_frag_queue: past 65535, or an MF fragment not a multiple of 8:
	 * a parameter problem; the fragment goes, a queue found or made stays. */
	f->prob = f->end > 65535 || (f->mf && (f->end & 7));
	f->hl = hdrs - sizeof(fh);
	f->ecn = 1 << ((bpf_ntohl(*(__u32 *)&ip6) >> 20) & 3);
	f->key.family = 10;
	f->key.id = fh.identification;
	__builtin_memcpy(f->key.saddr, &ip6.saddr, 16);
	__builtin_memcpy(f->key.daddr, &ip6.daddr, 16);
	/* fq_find: link-local and multicast destinations are per interface. */
	if ((ip6.daddr.in6_u.u6_addr8[0] == 0xfe && (ip6.daddr.in6_u.u6_addr8[1] & 0xc0) == 0x80) ||
	    ip6.daddr.in6_u.u6_addr8[0] == 0xff)
		f->key.iif = skb->ifindex;
	return 1;
}

/* The IPv4 header at ip (hl bytes, already checked), into f. -1 if ip_rcv_core drops it. */
static __always_inline int fill4(struct __sk_buff *skb, __u32 nh, const struct iphdr *ip,
				 __u32 hl, struct frag *f)
{
	__u16 fo = bpf_ntohs(ip->frag_off), tot = bpf_ntohs(ip->tot_len);

	if (skb->pkt_type == PACKET_OTHERHOST)
		return 0;	/* ip_rcv_core drops it first */
	if (tot < hl || nh + tot > skb->len)
		return -1;
	f->key.family = 2;
	f->key.id = ip->id;
	f->key.proto = ip->protocol;
	f->key.saddr[0] = ip->saddr;
	f->key.daddr[0] = ip->daddr;
	f->off = (fo & IP_OFFSET) * 8;
	f->mf = !!(fo & IP_MF);
	f->end = f->off + tot - hl;
	if (f->mf)
		f->end &= ~7;
	f->hl = hl;
	f->ecn = 1 << (ip->tos & 3);
	return 1;
}

/* The one's complement sum of a 20-byte header (no options: nearly every
 * fragment), without a helper call. */
static __always_inline __u32 csum20(const struct iphdr *ip)
{
	const __u32 *w = (const __u32 *)ip;
	__u64 s = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];

	s = (s & 0xffffffff) + (s >> 32);
	return (s & 0xffffffff) + (s >> 32);
}

static __always_inline bool csum_ok(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/*
 * 1: a fragment the kernel will give to reassembly, parsed into f. 0: not a
 * fragment. -1: a fragment the kernel drops before reassembly (bad header,
 * checksum, length); it gets it untouched. Non-fragments leave through the
 * first branch with two reads of the linear header.
 */
static __always_inline int parse(struct __sk_buff *skb, struct frag *f)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	__u32 nh = 14;
	__u16 proto;
	__u8 vlan[4];

	if (data + 14 + sizeof(struct iphdr) <= data_end) {
		struct ethhdr *eth = data;
		struct iphdr *ip = data + 14;

		/* The common case, decided on the linear header alone. */
		if (eth->h_proto == bpf_htons(ETH_P_IP) &&
		    !(ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
			return 0;
		/* An IPv4 fragment whose longest header is linear: read in place. */
		if (eth->h_proto == bpf_htons(ETH_P_IP) && data + 14 + 60 <= data_end) {
			__u32 hl = ip->ihl * 4;

			__builtin_memset(f, 0, sizeof(*f));
			if (ip->version != 4)
				return 0;
			if (hl < 20 || !csum_ok(hl == 20 ? csum20(ip) :
						bpf_csum_diff(NULL, 0, (void *)ip, hl & 60, 0)))
				return -1;
			return fill4(skb, 14, ip, hl, f);
		}
		if (eth->h_proto == bpf_htons(ETH_P_IPV6) &&
		    data + 14 + sizeof(struct ipv6hdr) <= data_end) {
			__u8 n = ((struct ipv6hdr *)(data + 14))->nexthdr;

			if (n != NEXTHDR_FRAGMENT && n != NEXTHDR_HOP && n != NEXTHDR_ROUTING &&
			    n != NEXTHDR_DEST && n != NEXTHDR_AUTH)
				return 0;
		}
	}
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
	if (proto == bpf_htons(ETH_P_IPV6)) {
		if (skb->pkt_type == PACKET_OTHERHOST)
			return 0;
		return parse6(skb, nh, f);
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		__u8 hdr[60];
		struct iphdr *ip = (void *)hdr;
		__u32 hl;

		if (bpf_skb_load_bytes(skb, nh, hdr, 20) || ip->version != 4)
			return 0;
		if (!(ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
			return 0;
		hl = ip->ihl * 4;
		/* ip_rcv_core: header length, checksum, total length. */
		if (hl < 20 || (hl > 20 && bpf_skb_load_bytes(skb, nh, hdr, hl & 60)) ||
		    !csum_ok(bpf_csum_diff(NULL, 0, (void *)hdr, hl & 60, 0)))
			return -1;
		return fill4(skb, nh, ip, hl, f);
	}
	return 0;
}

static __always_inline void peer_key(const struct dgram_key *k, __u32 bits,
				     struct sp_fg_peer_key *pk)
{
	__builtin_memset(pk, 0, sizeof(*pk));
	pk->family = k->family;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 b = bits > 32 ? 32 : bits;

		if (b)
			pk->addr[i] = k->saddr[i] &
				      bpf_htonl(b == 32 ? 0xffffffff : ~(0xffffffffu >> b));
		bits -= b;
	}
}

/* The peer entry a datagram was charged to, if it still exists (an unknown
 * peer may have been evicted, and its key reused by a new entry: the epoch
 * tells them apart, so nothing is ever released into the wrong entry). */
static __always_inline struct sp_fg_peer *peer_of(const struct dgram *d, bool *known)
{
	struct sp_fg_peer *p = NULL;

	/* Where it was charged first: an unknown peer moves to the known map
	 * when promoted (keeping its epoch), never back. */
	*known = false;
	if (d->unknown)
		p = bpf_map_lookup_elem(&fragguard_peers, &d->peer);
	if (!p || p->epoch != d->epoch) {
		p = bpf_map_lookup_elem(&fragguard_known, &d->peer);
		*known = true;
	}
	return p && p->epoch == d->epoch ? p : NULL;
}

/* Add t to the per-CPU sum of tracked memory (atomic: a tp_btf program in
 * process context can be interrupted by tc on the same CPU). */
static __always_inline void mem_add(int fam, __s64 t)
{
	__u32 zero = 0;
	struct sp_fg_mem *m = bpf_map_lookup_elem(&fragguard_mem, &zero);

	if (m)
		__sync_fetch_and_add(&m->mem[fam & 1], t);
}

/* Add t to a live datagram's charge and to every sum it is part of. */
static __always_inline void charge(struct dgram *d, int fam, __s64 t, struct sp_fg_peer *p)
{
	bool done = false;
	__s64 old;

	/* Only release() competes for it, and only once. */
	for (int i = 0; i < 4 && !done; i++) {
		old = d->mem;
		if (old == DEAD)
			return;
		done = __sync_val_compare_and_swap(&d->mem, old, old + t) == old;
	}
	if (!done)
		return;
	mem_add(fam, t);
	if (d->unknown) {
		struct sp_fg_agg *a = agg();

		if (a)
			__sync_fetch_and_add(&a->unknown_mem[fam & 1], t);
	}
	if (p)
		__sync_fetch_and_add(&p->mem, t);
}

static __always_inline void promote(struct sp_fg_peer *p, const struct sp_fg_peer_key *pk,
				    const struct cfg *c, __u32 bytes, __u64 now)
{
	long err;

	if (!p->rep_first_ns)
		p->rep_first_ns = now;
	p->rep_bytes += bytes;
	if (p->rep_bytes < c->known_bytes || now - p->rep_first_ns < c->known_ns)
		return;
	/* Known from now on. Its datagrams in progress keep the epoch and so
	 * release into the known entry. */
	err = bpf_map_update_elem(&fragguard_known, pk, p, BPF_NOEXIST);
	if (err == -17 /* EEXIST: promoted by another datagram */) {
		bpf_map_delete_elem(&fragguard_peers, pk);
		return;
	}
	if (err) {
		sp_count(&fragguard_ctr, SP_FG_KNOWN_FULL, 1);
		p->rep_first_ns = now;	/* try again later, not on every datagram */
		p->rep_bytes = 0;
		return;
	}
	bpf_map_delete_elem(&fragguard_peers, pk);
	sp_count(&fragguard_ctr, SP_FG_PROMOTED, 1);
}

/*
 * End a datagram: exactly once, whoever gets here first (the fragment that
 * completes or kills it, the kernel's timeout drop, the sweep). The charge
 * is taken with an exchange, so a fragment adding to it concurrently either
 * lands before (and is released here) or sees DEAD and adds nothing.
 */
static __always_inline void release(struct dgram *d, struct slot *sl, const struct dgram_key *k,
				    int fam, enum verdict v, const struct cfg *c, __u64 now,
				    struct sp_fg_peer *p)
{
	__s64 m = __sync_lock_test_and_set(&d->mem, DEAD);
	__u32 bytes = d->len;
	bool known;

	if (m == DEAD)
		return;
	if (d->flags & F_BITS)
		bpf_map_delete_elem(&fragguard_bits, k);
	mem_add(fam, -m);
	if (d->unknown) {
		struct sp_fg_agg *a = agg();

		if (a)
			__sync_fetch_and_add(&a->unknown_mem[fam & 1], -m);
	}
	sp_count(&fragguard_ctr, v == V_COMPLETED ? SP_FG_COMPLETED :
				 v == V_EXPIRED ? SP_FG_EXPIRED : SP_FG_DISCARDED, 1);
	if (!p)
		p = peer_of(d, &known);
	if (p) {
#ifndef SP_MUTANT_FG_PEER_KEEPS_CHARGE	/* make mutants: a peer's charge only grows */
		__sync_fetch_and_add(&p->mem, -m);
#endif
		if (v == V_COMPLETED) {
			__sync_fetch_and_add(&p->completed, 1);
			if (c && d->unknown)
				promote(p, &d->peer, c, bytes, now);
		} else if (v == V_EXPIRED) {
			__sync_fetch_and_add(&p->expired, 1);
		} else {
			__sync_fetch_and_add(&p->discarded, 1);
		}
	}
	/* The slot last: whoever finds it live until here finds mem DEAD. */
	if (sl)
#ifndef SP_MUTANT_FG_SLOT_KEPT	/* make mutants: a slot outlives its datagram */
		__sync_lock_test_and_set(&sl->live, sl->live & ~SLOT_LIVE);
#else
		;
#endif
	else
		dgram_del(k);
}

/* ---- runs: inet_frag_queue_insert -------------------------------------- */

enum ins { INS_OK, INS_DUP, INS_OVERLAP, INS_FULL };

static __always_inline __u64 mask_from(__u32 b)	/* bits b..63 */
{
	return b >= 64 ? 0 : ~0ULL << b;
}

struct bitrange {
	__u64 *map;
	__u32 a, b;		/* bits [a, b) */
	bool set;		/* set them, or only look */
	bool any, all;
};

/* One 64-bit word of a range (bpf_loop body: verified once, not per word). */
static int range_word(__u32 i, struct bitrange *r)
{
	__u32 w = r->a / 64 + i;
	__u64 m = ~0ULL, v;

	if (w == r->a / 64)
		m &= mask_from(r->a % 64);
	if ((w + 1) * 64 > r->b)
		m &= ~mask_from(r->b % 64);
	if (r->set) {
		r->map[word_idx(w)] |= m;
		return 0;
	}
	v = r->map[word_idx(w)] & m;
	r->any |= v != 0;
	r->all &= v == m;
	return 0;
}

static __always_inline __u32 range_words(__u32 a, __u32 b)
{
	return b > a ? (b - 1) / 64 - a / 64 + 1 : 0;
}

/* Bits [a, b) of a bitmap: 0 none set, 1 some, 2 all. */
static __always_inline int range_state(__u64 *map, __u32 a, __u32 b)
{
	struct bitrange r = { .map = map, .a = a, .b = b, .all = true };

	bpf_loop(range_words(a, b), range_word, &r, 0);
	return r.all ? 2 : r.any ? 1 : 0;
}

static __always_inline void range_set(__u64 *map, __u32 a, __u32 b)
{
	struct bitrange r = { .map = map, .a = a, .b = b, .set = true };

	bpf_loop(range_words(a, b), range_word, &r, 0);
}

static __always_inline void bit_set(__u64 *map, __u32 u)
{
	map[word_idx(u / 64)] |= 1ULL << (u % 64);
}

/*
 * A fragment [off, end) into runs held as bitmaps of 8-byte units. A global
 * function: verified once, not at every call site (its loops run up to
 * WORDS times).
 */
__noinline int fg_insert_bits(struct bits *b, struct dgram *d, __u32 off, __u32 end)
{
	__u32 a = off / 8, z = (end + 7) / 8;
	int st;

	if (!b || !d)
		return INS_FULL;
	if (z > UNITS)
		return INS_FULL;
	if (end > d->tail_end) {
		if (off < d->tail_end)
			return INS_OVERLAP;
		if (off != d->tail_end)
			bit_set(b->start, a);
		range_set(b->cov, a, z);
		d->tail_end = end;
		return INS_OK;
	}
	st = range_state(b->cov, a, z);
	if (!st) {
		bit_set(b->start, a);
		range_set(b->cov, a, z);
		return INS_OK;
	}
	/* Inside one run: covered, and no run starts after its first unit. */
	if (st == 2 && (z - a < 2 || !range_state(b->start, a + 1, z)))
		return INS_DUP;
	return INS_OVERLAP;
}

/* The same on the inline runs; INS_FULL when a new run does not fit. */
static __always_inline enum ins insert_inline(struct dgram *d, __u32 off, __u32 end)
{
	__u32 t = d->tail & (SP_FG_RUNS - 1), n = d->nruns;

	if (!n) {
		d->run_s[0] = off;
		d->run_e[0] = end;
		d->nruns = 1;
		d->tail = 0;
		d->tail_end = end;
		return INS_OK;
	}
	if (end > d->tail_end) {
		if (off < d->tail_end)
			return INS_OVERLAP;
		if (off == d->tail_end) {
			d->run_e[t] = end;
		} else {
			if (n >= SP_FG_RUNS)
				return INS_FULL;
			d->run_s[n & (SP_FG_RUNS - 1)] = off;
			d->run_e[n & (SP_FG_RUNS - 1)] = end;
			d->tail = n;
			d->nruns = n + 1;
		}
		d->tail_end = end;
		return INS_OK;
	}
#pragma unroll
	for (int i = 0; i < SP_FG_RUNS; i++) {
		if (i >= n || end <= d->run_s[i] || off >= d->run_e[i])
			continue;
		return off >= d->run_s[i] && end <= d->run_e[i] ? INS_DUP : INS_OVERLAP;
	}
	if (n >= SP_FG_RUNS)
		return INS_FULL;
	d->run_s[n & (SP_FG_RUNS - 1)] = off;
	d->run_e[n & (SP_FG_RUNS - 1)] = end;
	d->nruns = n + 1;
	return INS_OK;
}

/* The inline runs, drawn into a fresh bitmap. */
__noinline int fg_runs_to_bits(struct bits *b, struct dgram *d)
{
	if (!b || !d)
		return 0;
	for (int i = 0; i < SP_FG_RUNS; i++) {
		if (i >= d->nruns || d->run_e[i] > UNITS * 8)
			continue;
		bit_set(b->start, d->run_s[i] / 8);
		range_set(b->cov, d->run_s[i] / 8, (d->run_e[i] + 7) / 8);
	}
	d->flags |= F_BITS;
	return 0;
}

/* Move the inline runs into a bitmap entry; NULL if none can be had. */
static __always_inline struct bits *to_bits(struct dgram *d, const struct dgram_key *k)
{
	__u32 zero = 0;
	struct bits *z = bpf_map_lookup_elem(&fragguard_zero, &zero), *b;

	if (!z || bpf_map_update_elem(&fragguard_bits, k, z, BPF_NOEXIST))
		return NULL;
	b = bpf_map_lookup_elem(&fragguard_bits, k);
	if (b)
		fg_runs_to_bits(b, d);
	return b;
}

static __always_inline enum ins insert(struct dgram *d, const struct dgram_key *k,
				       __u32 off, __u32 end)
{
	enum ins r;
	struct bits *b = NULL;

	if (d->flags & F_INEXACT)
		return INS_OK;
	if (!(d->flags & F_BITS)) {
		r = insert_inline(d, off, end);
		if (r != INS_FULL)
			return r;
		/* Run ends past 64 KiB (IPv4 oversize, failing anyway) do
		 * not fit the bitmap. */
		if (d->tail_end <= UNITS * 8)
			b = to_bits(d, k);
	} else {
		b = bpf_map_lookup_elem(&fragguard_bits, k);
	}
	if (b) {
		r = fg_insert_bits(b, d, off, end);
		if (r != INS_FULL)
			return r;
	}
	/* No room for exact runs: count bytes only (the kernel's meat test),
	 * trusting this fragment not to overlap. */
	d->flags |= F_INEXACT;
	sp_count(&fragguard_ctr, SP_FG_INEXACT, 1);
	if (end > d->tail_end)
		d->tail_end = end;
	return INS_OK;
}

/* ---- the kernel's ip_frag_queue / ip6_frag_queue ----------------------- */

/*
 * One fragment into a tracked datagram. Returns the verdict when this
 * fragment ends the datagram (the caller releases it), -1 otherwise, with
 * *queued set to what the kernel now holds more (the caller charges it).
 */
static __always_inline int queue(struct dgram *d, const struct frag *f, __u32 truesize,
				 __u32 *queued)
{
	__u32 end = f->end;
	enum ins r;

	if (f->prob)
		return -1;	/* IPv6 parameter problem: dropped, queue kept */
	if (!f->mf) {
		if (end < d->len || ((d->flags & F_LAST_IN) && end != d->len))
			return V_DISCARDED;
		d->flags |= F_LAST_IN;
		d->len = end;
	} else if (end > d->len) {
		if (d->flags & F_LAST_IN)
			return V_DISCARDED;
		d->len = end;
	}
	if (end == f->off)
		return V_DISCARDED;
	r = insert(d, &f->key, f->off, end);
	if (r == INS_DUP) {
		sp_count(&fragguard_ctr, SP_FG_DUPS, 1);
		return -1;
	}
	if (r == INS_OVERLAP)
		return V_DISCARDED;
	d->reinit = 0;
	d->meat += end - f->off;
	d->ecn |= f->ecn;
	d->last_off = f->off;
	d->last_end = end;
	d->last_ts = truesize;
	d->last_ecn = f->ecn;
	d->flags = (d->flags & ~F_LAST_MF) | (f->mf ? F_LAST_MF : 0);
	if (!f->off) {
		d->flags |= F_FIRST_IN;
		d->hl = f->hl;
	}
	/* Without exact runs, duplicates may have been counted as meat: such a
	 * datagram is never called complete here, only expired (its charge
	 * errs high, and it earns no reputation). */
	if ((d->flags & (F_FIRST_IN | F_LAST_IN | F_INEXACT)) == (F_FIRST_IN | F_LAST_IN) &&
	    d->meat == d->len) {
		/* ip_frag_reasm / ip6_frag_reasm: oversize, or not-ECT mixed
		 * with ECT/CE (ip_frag_ecn_table), fail and kill the queue. */
		if (d->hl + d->len > 65535 || ((d->ecn & 1) && (d->ecn & ~1)))
			return V_DISCARDED;
		return V_COMPLETED;
	}
	*queued = truesize;
	return -1;
}

/* ---- the policy --------------------------------------------------------- */

/* Shift x and y right alike until x < 2^bits (x < 2^(bits + 32) on entry):
 * a ratio kept to bits of precision, whatever the magnitudes. */
static __always_inline void scale2(__u64 *x, __u64 *y, int bits)
{
#pragma unroll
	for (int s = 16; s; s /= 2)
		if (*x >> (bits + s)) {
			*x >>= s;
			*y >>= s;
		}
	if (*x >> bits) {
		*x >>= 1;
		*y >>= 1;
	}
}

/*
 * Whether age is within base * (cap - used) / cap (nothing once used reaches
 * cap). Without a division: a later fragment asks this every time, and a
 * 64-bit divide is the dearest instruction it would run. Compared in units
 * of 2^20 ns (about a millisecond; the ages have a tick's resolution); both
 * pairs scaled alike so that the products fit 64 bits whatever was written
 * into the maps: age and base below 2^24 units, cap and left below 2^38.
 * An age past base is past any share of it.
 */
static __always_inline bool within_share(__u64 age, __u64 base, __s64 used, __u64 cap)
{
	__u64 a = age >> 20, b = base >> 20, left;

	if (!cap || used >= (__s64)cap)
		return !age;
	if (a > b)
		return false;
	left = cap - (used < 0 ? 0 : used);
	/* Two compares where nothing is large (every real sysctl). */
	if (cap >> 38)
		scale2(&cap, &left, 38);
	if (b >> 24)
		scale2(&b, &a, 24);
	return a * cap <= b * left;
}

/*
 * ipfrag_high_thresh and the memory, for products with a percentage: the
 * sysctl takes any long (set huge: "no limit"), and 2^62 * 64 is 0 in 64
 * bits. Past 1 PiB, which no reassembly reaches, both read as 1 PiB.
 */
static __always_inline __u64 big_capped(__u64 v)
{
	return v > 1ULL << 50 ? 1ULL << 50 : v;
}

/* The namespace's reassembly memory: sockstat prints the kernel's long
 * with %lu, and bpftool writes anything; read past 2^63 as none, the
 * same everywhere it is used. */
static __always_inline __s64 mem_of(const struct sp_fg_global *g)
{
	return (__s64)g->mem < 0 ? 0 : (__s64)g->mem;
}

/*
 * The seed's rule: max(base*(limit - peer)/limit, base*(high - mem)/high),
 * base = ipfrag_time. 0 when both the peer and the namespace are full.
 */
static __always_inline bool too_old(__u64 age, const struct sp_fg_peer *p, const struct cfg *c,
				    const struct sp_fg_global *g)
{
	__u64 base = time_of(g);

	/* The namespace's term first: it needs no peer, and decides alone
	 * for any datagram younger than it (nearly all). */
	if (!g || !g->high_thresh ? age <= base : within_share(age, base, mem_of(g), g->high_thresh))
		return false;
	return !within_share(age, base, p ? p->mem : 0, c->peer_limit);
}

static __always_inline int refuse(const struct cfg *c, __u32 why, struct sp_fg_peer *p)
{
	sp_count(&fragguard_ctr, why, 1);
	if (p)
		__sync_fetch_and_add(&p->refused, 1);
	if (!c->enforce)
		return TC_PASS;	/* account only */
	sp_count(&fragguard_ctr, SP_FG_DROPPED, 1);
	return TC_ACT_SHOT;
}

/*
 * Whether prefix4 or prefix6 (bits, of family fam) changed less than
 * ipfrag_time + 1/8 ago, noting a change. A known peer's datagrams in
 * progress are in the slots of its entry under the old prefix, which the
 * new key does not find: until they have surely expired, a fragment taken
 * for a new datagram may be a later one of theirs, and is not refused.
 * Noted by new datagrams only: a change matters where datagrams are in
 * progress, and then new ones come too. A race of two CPUs noting it
 * moves the time by a tick.
 */
static __always_inline bool prefix_moved(struct sp_fg_agg *a, int fam, __u32 bits, __u64 now,
					 const struct sp_fg_global *g)
{
	bool first;

	if (!a)
		return false;
	if (a->prefix[fam & 1] != bits || !a->prefix_ns[fam & 1]) {
		first = !a->prefix_ns[fam & 1];
		a->prefix[fam & 1] = bits;
		a->prefix_ns[fam & 1] = first ? 1 : now;
#ifdef SP_MUTANT_FG_PREFIX_IGNORED	/* make mutants: refusals go on through a change of prefix */
		return false;
#endif
		return !first;
	}
#ifdef SP_MUTANT_FG_PREFIX_IGNORED
	return false;
#endif
	/* 1 is no time: a machine up for less than ipfrag_time is within it. */
	return a->prefix_ns[fam & 1] != 1 && since(now, a->prefix_ns[fam & 1]) <= expired_after(g);
}

/* Whether a fragment not in b's slots may be in the hash maps (hashed_ns
 * 1: none was when the block was taken). */
static __always_inline bool hash_window(const struct block *b, __u64 now,
					const struct sp_fg_global *g)
{
	__u64 h = b->hashed_ns;

	return !h || (h != 1 && since(now, h) <= expired_after(g));
}

/* A datagram of peer p (known without a block, or not known) went into the
 * hash maps, charged: if p's block was taken meanwhile (p promoted, its
 * epoch kept) by a CPU that read the charges before, the window opens here
 * (Dekker: each side writes, then reads the other's, across full barriers:
 * the owner's exchange there, the fetch-add of the charge here). */
static __always_inline void hash_charged(const struct sp_fg_peer *p, int fam, __u64 now)
{
	struct block *b = block_of(p, NULL, fam, false);
	__u64 h;

	for (int i = 0; b && i < 4; i++) {
		h = b->hashed_ns;
		if (h > 1 && h >= now)
			return;
		if (__sync_val_compare_and_swap(&b->hashed_ns, h, now) == h)
			return;
	}
}

/*
 * A new datagram d with key k of the peer whose epoch is epoch, owner of
 * b: into a free slot, else into the hash maps. 0: done; -1: not tracked
 * (it is there already, as when the hash maps' insert finds it: another
 * CPU's fragment of it got here first; or b stayed busy, or has just been
 * freed; or the hash map is full). Under b's busy word, so that one key
 * cannot go into a slot and into the hash maps both.
 */
static __always_inline int slot_new(struct block *b, __u32 epoch, const struct dgram_key *k,
				    const struct dgram *d, __u64 now, const struct sp_fg_global *g)
{
	struct slot *sl;
	int i, r = -1;
	__u32 w;

	if (!block_lock(b))
		return -1;
	if (b->owner != epoch || slot_find(b, k))
		goto out;
	if (hash_window(b, now, g) && dgram_get(k))
		goto out;
#pragma unroll
	for (i = 0; i < SP_FG_SLOTS; i++)
		if (!(b->s[i].live & SLOT_LIVE))
			break;
	if (i < SP_FG_SLOTS) {
		sl = &b->s[i];
		w = sl->live;
		sl->k = *k;
		sl->d = *d;
		/* Published last. */
		__sync_lock_test_and_set(&sl->live, ((w + SLOT_GEN) & ~(SLOT_GEN - 1)) | SLOT_LIVE | i);
		r = 0;
	} else {
		/* No slot: the hash maps, where its later fragments look. */
		if (now > b->hashed_ns)
			b->hashed_ns = now;
		r = dgram_new(k, d) ? -1 : 0;
	}
out:
	block_unlock(b);
	return r;
}

/* A fragment whose queue the kernel does not have: admit or refuse. */
static __always_inline int new_datagram(const struct frag *f, const struct cfg *c,
					__u32 truesize, __u32 qsize, int fam, __u64 now,
					const struct sp_fg_peer_key *pk, struct sp_fg_peer *p,
					struct block *b)
{
	struct sp_fg_peer fresh = {};
	struct sp_fg_global *g = global(fam);
	struct sp_fg_agg *a = agg();
	struct dgram d = {};
	bool known = true, loaded;
	__u32 why = 0, queued = 0;
	__u64 high;
	__s64 pmem;
	int act, r;

	if (!p) {
		known = false;
		p = bpf_map_lookup_elem(&fragguard_peers, pk);
	}
	if (!p) {
		fresh.epoch = bpf_get_prandom_u32() | 1;
		bpf_map_update_elem(&fragguard_peers, pk, &fresh, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&fragguard_peers, pk);
		if (!p)
			return TC_PASS;
	}
	p->last_ns = now;
	pmem = p->mem;
	high = g ? big_capped(g->high_thresh) : 0;
	loaded = high && big_capped(mem_of(g)) * 100 > high * c->load_pct;
	/*
	 * A known peer is held to its limit and to a fair share only under
	 * load. Its charge may have been run up by anyone spoofing its
	 * address; while the kernel has room, refusing it would only hurt it.
	 * The fair share divides what the unknown pool leaves among the known
	 * peers with datagrams in progress: spoofed unknown sources, however
	 * many, cannot shrink it.
	 */
	if ((!known || loaded) && pmem + truesize + qsize > (__s64)c->peer_limit) {
		why = SP_FG_REF_PEER;
	} else if (known && loaded) {
		__u32 active = a && a->known_active ? a->known_active : 1;

		if (pmem > 0 && (__u64)pmem > high * (100 - c->unknown_pct) / 100 / active)
			why = SP_FG_REF_SHARE;
	}
	/* Signed: the pool dips below 0 for a moment when a release on
	 * another CPU subtracts a charge before charge() has added it. */
	if (!why && !known && a && high &&
	    a->unknown_mem[fam & 1] + truesize + qsize > (__s64)(high * c->unknown_pct / 100))
		why = SP_FG_REF_UNKNOWN;
#ifdef SP_MUTANT_FG_ADMIT_ALL	/* make mutants: every first fragment admitted */
	why = 0;
#endif
	if (prefix_moved(a, fam, f->key.family == 2 ? c->prefix4 : c->prefix6, now, g) && why) {
		sp_count(&fragguard_ctr, why, 1);	/* counted, not enforced */
		why = 0;
	}
	if (why) {
		if (known)
			sp_count(&fragguard_ctr, SP_FG_REF_KNOWN, 1);
		act = refuse(c, why, p);
		if (act == TC_ACT_SHOT) {
			bpf_map_update_elem(&fragguard_refused, &f->key, &now, BPF_ANY);
			if (a)
				a->last_refusal_ns = now;
			return act;
		}
	}
	/* Admitted (or account-only): the kernel makes the queue. The first
	 * fragment is queued on a copy, inserted whole: one fragment never
	 * completes a datagram, but it can kill the queue at once. */
	__sync_fetch_and_add(&p->admitted, 1);
	sp_count(&fragguard_ctr, SP_FG_ADMITTED, 1);
	d.first_ns = now;
	d.peer = *pk;
	d.epoch = p->epoch;
	d.unknown = !known;
	if (queue(&d, f, truesize, &queued) >= 0) {
		__sync_fetch_and_add(&p->discarded, 1);
		sp_count(&fragguard_ctr, SP_FG_DISCARDED, 1);
		return TC_PASS;
	}
	d.mem = qsize + queued;
	r = b && known ? slot_new(b, p->epoch, &f->key, &d, now, g) : dgram_new(&f->key, &d);
	if (r) {
		sp_count(&fragguard_ctr, SP_FG_UNTRACKED, 1);
		return TC_PASS;
	}
	mem_add(fam, d.mem);
	if (!known && a)
		__sync_fetch_and_add(&a->unknown_mem[fam & 1], d.mem);
	/* Its old value used: a fetch-add, fully ordered on every JIT (an add
	 * whose result is unused orders nothing on arm64). */
	pmem = __sync_fetch_and_add(&p->mem, d.mem);
	asm volatile("" : : "r"(pmem));
	if (!b)
		hash_charged(p, fam, now);
	return TC_PASS;
}

static __always_inline int expire_one(const struct dgram_key *k, struct dgram *d, struct slot *sl,
				      __u32 *gen)
{
	__u64 now = fg_now();
	int fam = k->family == 2 ? 0 : 1;
	struct sp_fg_agg *a = agg();
	struct sp_fg_peer *p;
	bool known;

	if (since(now, d->first_ns) > expired_after(global(fam))) {
		release(d, sl, k, fam, V_EXPIRED, NULL, now, NULL);
		return 0;
	}
	if (a)
		a->dgrams++;
	p = peer_of(d, &known);
	if (!p)
		return 0;
	if (p->gen != *gen) {
		p->gen = *gen;
		p->in_progress = 0;
		if (a) {
			a->active_peers++;
			a->known_active += known;
		}
	}
	p->in_progress++;
	return 0;
}

static int expire4(void *map, const struct dgram_key4 *k4, struct dgram *d, __u32 *gen)
{
	struct dgram_key k = { .family = 2, .id = k4->id, .proto = k4->proto };

	k.saddr[0] = k4->saddr;
	k.daddr[0] = k4->daddr;
	return expire_one(&k, d, NULL, gen);
}

static int expire6(void *map, const struct dgram_key *k, struct dgram *d, __u32 *gen)
{
	return expire_one(k, d, NULL, gen);
}

/* Every block's live slots, as expire4/expire6 do the hash maps; and a
 * block whose peer has left the known map (forgotten) is free again. */
static int expire_slots(void *map, __u32 *i, struct block *b, __u32 *gen)
{
	struct sp_fg_peer *kp;
	bool live = false;

#pragma unroll
	for (int j = 0; j < SP_FG_SLOTS; j++)
		if (b->s[j].live & SLOT_LIVE) {
			live = true;
			expire_one(&b->s[j].k, &b->s[j].d, &b->s[j], gen);
		}
	if (!b->owner || live)
		return 0;
	kp = bpf_map_lookup_elem(&fragguard_known, &b->owner_key);
	if (kp && kp->epoch == b->owner)
		return 0;
	if (!block_lock(b))
		return 0;
	/* A slot taken since is the datagram of a peer forgotten meanwhile:
	 * it keeps the block until it ends. */
#pragma unroll
	for (int j = 0; j < SP_FG_SLOTS; j++)
		live |= !!(b->s[j].live & SLOT_LIVE);
	if (!live) {
		b->owner = 0;
		b->hashed_ns = 0;
	}
	block_unlock(b);
	return 0;
}

static int forget_idle(void *map, struct sp_fg_peer_key *k, struct sp_fg_peer *p, void *ctx)
{
	if (fg_now() - p->last_ns > SP_FG_KNOWN_IDLE_S * 1000000000ULL && p->mem <= 0)
		bpf_map_delete_elem(map, k);
	return 0;
}

/*
 * Every 250 ms: release datagrams whose kernel timer has run out (when the
 * kernel's drop was not seen), and count from the datagrams themselves the
 * peers and datagrams in progress: derived, so nothing can drift.
 */
static int sweep(void *map, int *key, struct fg_state *st)
{
	struct sp_fg_agg *a = agg();
	__u32 gen;

	if (a) {
		gen = a->gen + 1;
		a->active_peers = 0;
		a->known_active = 0;
		a->dgrams = 0;
		bpf_for_each_map_elem(&fragguard_dgram4, expire4, &gen, 0);
		bpf_for_each_map_elem(&fragguard_dgram6, expire6, &gen, 0);
		bpf_for_each_map_elem(&fragguard_slots, expire_slots, &gen, 0);
		a->gen = gen;
	}
	if (!(++st->sweeps % 16))
		bpf_for_each_map_elem(&fragguard_known, forget_idle, NULL, 0);
	bpf_timer_start(&st->timer, 250 * 1000000ULL, 0);
	return 0;
}

static __always_inline void arm_sweeper(void)
{
	__u32 zero = 0;
	struct fg_state *st = bpf_map_lookup_elem(&fragguard_state, &zero);

	if (!st || st->armed || __sync_lock_test_and_set(&st->armed, 1))
		return;
	bpf_timer_init(&st->timer, &fragguard_state, 1 /* CLOCK_MONOTONIC */);
	bpf_timer_set_callback(&st->timer, sweep);
	bpf_timer_start(&st->timer, 250 * 1000000ULL, 0);
}

/*
 * What the kernel will charge for this fragment: its sk_buff's truesize. A
 * tc program's ctx is the sk_buff itself; where the kernel hands it over as
 * its own type (bpf_cast_to_kern_ctx, 6.2: fg_kern_ctx, set by the loader)
 * it is a load, elsewhere a probe read (a helper call).
 */
static __always_inline __u32 skb_truesize(struct __sk_buff *skb)
{
	__u32 t, len;

	/* Each value pinned in its branch (barrier_var): merged into one
	 * load from a chosen pointer (the kernel's sk_buff, the stack, the
	 * ctx), the verifier refuses the instruction (6.1: "same insn cannot
	 * be used with different pointers"). */
	if (fg_kern_ctx) {
		t = ((struct sk_buff *)bpf_cast_to_kern_ctx(skb))->truesize;
		barrier_var(t);
		return t;
	}
	len = skb->len;
	barrier_var(len);
	if (bpf_probe_read_kernel(&t, sizeof(t),
				  (void *)skb + bpf_core_field_offset(struct sk_buff, truesize)))
		return len;
	barrier_var(t);
	return t;
}

/* A fragment that starts a queue. */
static __always_inline int start(const struct frag *f, const struct cfg *c, __u32 truesize,
				 __u32 qsize, int fam, __u64 now, const struct sp_fg_peer_key *pk,
				 struct sp_fg_peer *kp, struct block *b)
{
	struct sp_fg_agg *a = agg();
	__u64 *t = a && now - a->last_refusal_ns < 1000000000ULL ?
		   bpf_map_lookup_elem(&fragguard_refused, &f->key) : NULL;
	int act;

	/* Later fragments come right after the refused one; past a second,
	 * the same key is a new datagram (IP ID reuse). */
	if (t && now - *t < 1000000000ULL) {
		act = refuse(c, SP_FG_REF_FOLLOW, NULL);
		if (act == TC_ACT_SHOT)
			return act;
	}
	arm_sweeper();
	return new_datagram(f, c, truesize, qsize, fam, now, pk, kp, b);
}

/*
 * A later fragment of datagram d (in slot sl, or in a hash map when sl is
 * NULL), charged to peer p. 1: d has expired (released here), and this
 * fragment starts a new queue.
 */
static __always_inline int later(const struct frag *f, struct dgram *d, struct slot *sl,
				 struct sp_fg_peer *p, bool known, struct cfg *c,
				 const struct sp_fg_global *g, int fam, __u32 truesize, __u64 now)
{
	__u32 queued = 0;
	int act, v;

	if (since(now, d->first_ns) > expired_after(g)) {
		/* The kernel has expired it; this fragment starts a new queue. */
		release(d, sl, &f->key, fam, V_EXPIRED, c, now, NULL);
		return 1;
	}
	if (p)
		p->last_ns = now;
	if (too_old(since(now, d->first_ns), p, c, g)) {
		if (known)
			sp_count(&fragguard_ctr, SP_FG_REF_KNOWN, 1);
		act = refuse(c, SP_FG_REF_AGE, p);
		if (act == TC_ACT_SHOT)
			return act;
	}
	v = queue(d, f, truesize, &queued);
	if (v >= 0)
		release(d, sl, &f->key, fam, v, c, now, p);
	else if (queued)
		charge(d, fam, queued, p);
	return TC_PASS;
}

SEC("tc")
int sp_fragguard(struct __sk_buff *skb)
{
	struct sp_fg_global *g;
	struct sp_fg_peer_key pk;
	struct sp_fg_peer *p, *kp;
	struct block *b = NULL;
	struct slot *sl;
	bool known;
	struct dgram *d;
	struct frag f;
	struct cfg c;
	__u32 truesize, qsize;
	__u64 now;
	int r, fam;

	r = parse(skb, &f);
	if (r == 0)
		return TC_PASS;
	sp_count(&fragguard_ctr, SP_FG_FRAGS, 1);
	if (r < 0) {
		sp_count(&fragguard_ctr, SP_FG_MALFORMED, 1);
		return TC_PASS;
	}
	now = fg_now();
	fam = f.key.family == 2 ? 0 : 1;
	g = global(fam);
	/* The loader is gone (a killed run's clsact filter): judge nothing. */
	/* Signed: the loader's write may be newer than the last tick. */
	if (g && g->updated_ns && (__s64)(now - g->updated_ns) > (__s64)SP_FG_STALE_NS) {
		sp_count(&fragguard_ctr, SP_FG_ORPHANED, 1);
		return TC_PASS;
	}
	truesize = skb_truesize(skb);
	qsize = fam ? bpf_core_type_size(struct frag_queue) : bpf_core_type_size(struct ipq);
	read_cfg(&c);

	/* A known peer's datagram is in its slots, or, for a while after it
	 * had one there was no room for, in the hash maps. */
	peer_key(&f.key, f.key.family == 2 ? c.prefix4 : c.prefix6, &pk);
	kp = bpf_map_lookup_elem(&fragguard_known, &pk);
	if (kp)
		b = block_of(kp, &pk, fam, true);
	if (b) {
		sl = slot_find(b, &f.key);
		if (sl) {
			/* Not its datagram: one of a peer forgotten since, never
			 * seen (forgotten only without datagrams in progress);
			 * the sweep ends it. */
			if (sl->d.epoch != kp->epoch) {
				sp_count(&fragguard_ctr, SP_FG_UNTRACKED, 1);
				return TC_PASS;
			}
			r = later(&f, &sl->d, sl, kp, true, &c, g, fam, truesize, now);
			if (r != 1)
				return r;
		}
#ifndef SP_MUTANT_FG_NO_HASH_WINDOW	/* make mutants: a known peer's datagrams only in its slots */
		if (!hash_window(b, now, g))
#endif
			return start(&f, &c, truesize, qsize, fam, now, &pk, kp, b);
	}
	d = dgram_get(&f.key);
	if (d) {
		p = peer_of(d, &known);
		r = later(&f, d, NULL, p, known, &c, g, fam, truesize, now);
		if (r != 1)
			return r;
	}
	/* Looked up again rather than kept from above: with kp and b live
	 * through the datagram's path, the verifier walks that path once
	 * for each of their states (twice the instructions). */
	b = NULL;
	kp = bpf_map_lookup_elem(&fragguard_known, &pk);
	if (kp)
		b = block_of(kp, &pk, fam, true);
	return start(&f, &c, truesize, qsize, fam, now, &pk, kp, b);
}

/* The datagram with key k, wherever it is (no block taken here). */
static __always_inline struct dgram *dgram_find(const struct dgram_key *k, struct slot **sl)
{
	struct sp_fg_peer_key pk;
	struct sp_fg_peer *kp;
	struct block *b = NULL;
	struct cfg c;

	*sl = NULL;
	read_cfg(&c);
	peer_key(k, k->family == 2 ? c.prefix4 : c.prefix6, &pk);
	kp = bpf_map_lookup_elem(&fragguard_known, &pk);
	if (kp)
		b = block_of(kp, NULL, 0, false);
	if (b)
		*sl = slot_find(b, k);
	if (*sl)
		return &(*sl)->d;
	return dgram_get(k);
}

/* The key of a queued fragment, from its headers (still in place). */
static __always_inline int skb_key(struct sk_buff *skb, struct dgram_key *k)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header), th = BPF_CORE_READ(skb, transport_header);
	struct iphdr ip;
	struct ipv6hdr ip6;
	__u32 id;

	__builtin_memset(k, 0, sizeof(*k));
	if (bpf_probe_read_kernel(&ip, sizeof(ip), head + nh))
		return -1;
	if (ip.version == 4) {
		k->family = 2;
		k->id = ip.id;
		k->proto = ip.protocol;
		k->saddr[0] = ip.saddr;
		k->daddr[0] = ip.daddr;
		return 0;
	}
	/* ipv6_frag_rcv found the fragment header at the transport header. */
	if (bpf_probe_read_kernel(&ip6, sizeof(ip6), head + nh) ||
	    bpf_probe_read_kernel(&id, 4, head + th + 4))
		return -1;
	k->family = 10;
	k->id = id;
	__builtin_memcpy(k->saddr, &ip6.saddr, 16);
	__builtin_memcpy(k->daddr, &ip6.daddr, 16);
	if ((ip6.daddr.in6_u.u6_addr8[0] == 0xfe && (ip6.daddr.in6_u.u6_addr8[1] & 0xc0) == 0x80) ||
	    ip6.daddr.in6_u.u6_addr8[0] == 0xff)
		k->iif = BPF_CORE_READ(skb, skb_iif);
	return 0;
}

/*
 * ip_frag_reinit (ipfrag_max_dist): the kernel dropped every fragment of
 * the queue and restarts it with the one being queued, which this program
 * saw last. Runs once per reinit: the first of its drops.
 */
static __always_inline void reinit(struct dgram *d, struct slot *sl, const struct dgram_key *k)
{
	__u32 qsize = bpf_core_type_size(struct ipq);
	__s64 now_mem = qsize + d->last_ts, old = d->mem;
	struct sp_fg_peer *p;
	bool known;

	if (old == DEAD || d->reinit)
		return;
	if (d->flags & F_BITS)
		bpf_map_delete_elem(&fragguard_bits, k);
	d->flags = (d->flags & F_LAST_MF) | (d->last_off ? 0 : F_FIRST_IN) |
		   (d->flags & F_LAST_MF ? 0 : F_LAST_IN);
	d->len = d->last_end;
	d->meat = d->last_end - d->last_off;
	d->run_s[0] = d->last_off;
	d->run_e[0] = d->last_end;
	d->tail_end = d->last_end;
	d->tail = 0;
	d->ecn = d->last_ecn;
	d->first_ns = bpf_ktime_get_ns();	/* fg_now() is not for tracing programs */
	d->nruns = 1;
	d->reinit = 1;
	p = peer_of(d, &known);
	charge(d, 0, now_mem - old, p);
	sp_count(&fragguard_ctr, SP_FG_REINIT, 1);
	/* The kernel's timer starts again: a datagram in the hash maps of a
	 * peer with a block is looked for there as long. */
	if (!sl && p) {
		struct block *b = block_of(p, NULL, 0, false);

		if (b && d->first_ns > b->hashed_ns)
			b->hashed_ns = d->first_ns;
	}
}

/* The kernel's own fragment drops: counted, and its expiries and reinits
 * applied to the datagrams they belong to. */
SEC("tp_btf/kfree_skb")
int BPF_PROG(sp_fragguard_drops, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	struct dgram_key k;
	struct dgram *d;
	struct slot *sl;
	__u32 iif, idx;
	__u64 *netns;

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
	netns = bpf_map_lookup_elem(&fragguard_ifs, &iif);
	if (!netns)
		return 0;
	/*
	 * A duplicate is dropped before it is queued: its dev is still the
	 * device it came in on, and the device's namespace must be ours. Queued
	 * fragments (expiry, reinit) share skb->dev with their rbnode, so the
	 * namespace is unknown there: those drops count only when they match a
	 * datagram this program tracks (same key, see below).
	 */
	if (idx == SP_FG_K_DUP) {
		struct net_device *dev = BPF_CORE_READ(skb, dev);

		if (dev && sp_net_id(BPF_CORE_READ(dev, nd_net.net)) == *netns)
			sp_count(&fragguard_ctr, idx, 1);
		return 0;
	}
	if (skb_key(skb, &k))
		return 0;
	d = dgram_find(&k, &sl);
	if (!d)
		return 0;
	sp_count(&fragguard_ctr, idx, 1);
	/* A queue the kernel expires is at least ipfrag_time old: a younger
	 * entry of the same key is a later datagram, not this one. */
	if (idx == SP_FG_K_TIMEOUT) {
		int fam = k.family == 2 ? 0 : 1;
		__u64 now = bpf_ktime_get_ns();

		if (since(now, d->first_ns) >= time_of(global(fam)))
			release(d, sl, &k, fam, V_EXPIRED, NULL, now, NULL);
	}
	else
		reinit(d, sl, &k);
	return 0;
}

/*
 * Kernels without the reassembly drop reasons (before 6.2) that allow
 * fentry (6.1): the kernel's own expiry of a queue, when its timer has
 * fired, in place of the sweep's timeout + 1/8. At exit, not at entry: the
 * timer runs before it takes the queue's lock, and a last fragment that
 * completes the queue in between makes ip_expire do nothing. Released at
 * entry, that datagram was expired here and delivered by the kernel (seen
 * in the 6.1 VM, where sending one datagram at MTU 68 takes about
 * ipfrag_time). By the exit a completed datagram is gone from
 * the datagram map (tc ingress saw its last fragment first), so one still
 * there was expired. The queue is not freed before an RCU grace period,
 * which cannot end while this softirq runs.
 */
static __always_inline void kernel_expired(struct timer_list *t, int fam)
{
	void *q = (void *)t - bpf_core_field_offset(struct inet_frag_queue, timer);
	struct inet_frag_queue *fq = q;
	struct dgram_key k = {};
	struct dgram *d;
	struct slot *sl;
	__u64 now;

	if (sp_net_id(BPF_CORE_READ(fq, fqdir, net)) != fg_netns)
		return;
	if (fam == 0) {
		k.family = 2;
		k.id = BPF_CORE_READ(fq, key.v4.id);
		k.proto = BPF_CORE_READ(fq, key.v4.protocol);
		k.saddr[0] = BPF_CORE_READ(fq, key.v4.saddr);
		k.daddr[0] = BPF_CORE_READ(fq, key.v4.daddr);
	} else {
		k.family = 10;
		k.id = BPF_CORE_READ(fq, key.v6.id);
		k.iif = BPF_CORE_READ(fq, key.v6.iif);
		BPF_CORE_READ_INTO(&k.saddr, fq, key.v6.saddr);
		BPF_CORE_READ_INTO(&k.daddr, fq, key.v6.daddr);
	}
	d = dgram_find(&k, &sl);
	if (!d)
		return;
	sp_count(&fragguard_ctr, SP_FG_K_TIMEOUT, 1);
	now = bpf_ktime_get_ns();
	/* As in sp_fragguard_drops: a younger entry is a later datagram. */
	if (since(now, d->first_ns) >= time_of(global(fam)))
		release(d, sl, &k, fam, V_EXPIRED, NULL, now, NULL);
}

SEC("fexit/ip_expire")
int BPF_PROG(sp_fragguard_expire4, struct timer_list *t)
{
	kernel_expired(t, 0);
	return 0;
}

SEC("fexit/ip6_frag_expire")
int BPF_PROG(sp_fragguard_expire6, struct timer_list *t)
{
	kernel_expired(t, 1);
	return 0;
}
