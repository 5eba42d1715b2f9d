/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the BPF programs (bpf/, built against vmlinux.h) and the loader
 * (src/, built against <linux/types.h>). Fixed-width types only, so the
 * layout is the same on both sides and bpftool shows it by BTF.
 *
 * One section per module. Every tunable is a __u32 field of the module's
 * config struct, so the loader handles them all the same way and an
 * operator can write any of them with one `bpftool map update`.
 */
#ifndef STACKPILOT_H
#define STACKPILOT_H

/*
 * Tunables are declared once, as an X-macro list per module:
 *
 *   #define SP_FOO_TUNABLES(X, ctx) \
 *	X(ctx, name, min, max, default, out_of_range, "help") ...
 *
 * and everything else is derived from that list: the config struct
 * (SP_CFG_FIELD below), the loader's table (SP_TUNABLE_ROW, src/core/sp.h) with
 * the defaults `run` writes and the ranges `set` checks, and the BPF
 * function that reads the config map and clamps it (SP_CFG_READ,
 * bpf/common.bpf.h), with the same defaults when the map cannot be read.
 * A unit test checks README's Tunables table against the loader tables.
 *
 * out_of_range is what the BPF side does with a value outside [min, max],
 * which only a write from outside (bpftool) can store: SP_OOR_CLAMP uses the
 * nearest bound, SP_OOR_DEFAULT ignores it and uses the default.
 */
#define SP_OOR_CLAMP	0
#define SP_OOR_DEFAULT	1
#define SP_CFG_FIELD(ctx, name, min, max, def, oor, help)	__u32 name;

#define SP_PIN_DEFAULT	"/sys/fs/bpf/stackpilot"

/*
 * Sockops sharing. Every module that needs sockops has its own program,
 * attached to the same cgroup with BPF_F_ALLOW_MULTI (a bpf_link), and
 * enables its callbacks with sp_cb_flags_or() (bpf/common.bpf.h), which ORs
 * into the socket's current flags instead of replacing them. Modules stay
 * independent (one BPF file each) and can be loaded in any combination.
 */

/* ---- tcpstats: per-cgroup TCP counters ---------------------------------- */

enum sp_tcpstats_ctr {
	SP_TS_ACTIVE,		/* connections opened from the cgroup */
	SP_TS_PASSIVE,		/* connections accepted in the cgroup */
	SP_TS_RETRANS,		/* retransmitted segments */
	SP_TS_RTO,		/* retransmission timeouts */
	SP_TS_CLOSED_SEGS,	/* segments sent by connections that closed (their segs_out) */
	SP_TS_CLOSED_RETRANS,	/* of those, retransmitted (their total_retrans) */
	SP_TS_NR,
};

/* A port above 65535 (only possible from outside) is ignored: count everything. */
#define SP_TCPSTATS_TUNABLES(X, ctx) \
	X(ctx, port, 0, 65535, 0, SP_OOR_DEFAULT, \
	  "count only connections with this local or remote port; 0 = all") \
	X(ctx, closes, 0, 1, 0, SP_OOR_CLAMP, \
	  "1: count closing connections' segments and retransmissions (a state callback per state change)")

struct sp_tcpstats_cfg {
	SP_TCPSTATS_TUNABLES(SP_CFG_FIELD, _)
};

/* ---- rehash: congestion-driven txhash rehashing ------------------------- */

enum sp_rehash_ctr {
	SP_RH_RETRANS,		/* retransmissions seen (RETRANS_CB) */
	SP_RH_EPISODES,		/* non-RTO loss-recovery episodes started */
	SP_RH_NOW,		/* rehashes applied at once */
	SP_RH_DEFERRED,		/* rehashes decided but deferred until safe */
	SP_RH_DEFERRED_DONE,	/* deferred rehashes applied at a later ACK, once safe */
	SP_RH_DEFERRED_FORCED,	/* deferred rehashes applied after defer_rtts, not safe */
	SP_RH_SUP_MODE,		/* suppressed: mode 0 and the flow had an RTO */
	SP_RH_SUP_PAUSE,	/* suppressed: within pause_ms after an RTO */
	SP_RH_SUP_PROB,		/* suppressed: the coin said no */
	SP_RH_LOSS_STATE,	/* retransmissions in TCP_CA_Loss (post-RTO): ignored */
	SP_RH_RTO,		/* RTOs seen */
	SP_RH_ROUNDS,		/* rehashes decided by the congested-rounds trigger */
	SP_RH_RTT_CBS,		/* RTT (per-ACK) callbacks of the connections it keeps state for */
	SP_RH_BYTES,		/* bytes delivered (bytes_acked) by those connections */
	SP_RH_RTT_ON,		/* times rehash switched RTT callbacks on for a socket */
	SP_RH_WINDOWS,		/* path-memory windows closed (new path measured) */
	SP_RH_REVERT,		/* windows that found the new path worse: revert decided */
	SP_RH_REVERT_DONE,	/* reverts applied (back to the old txhash) */
	SP_RH_SUP_WINDOW,	/* episodes not decided: a path-memory window was open */
	SP_RH_CORR,		/* policy 1/2: episodes judged a shared bottleneck */
	SP_RH_UNCORR,		/* policy 1/2: episodes judged the flow's own queue: no rehash */
	SP_RH_SUP_SIBLING,	/* policy 1/2: shared, but a sibling was just moved: no rehash */
	SP_RH_REUSE_EST,	/* reuse=1: new connections given a known-good txhash */
	SP_RH_REUSE_REHASH,	/* reuse=1: rehashes to a known-good txhash instead of a random one */
	SP_RH_GOOD_ADD,		/* reuse=1: txhashes recorded good by a closing connection */
	SP_RH_GOOD_DROP,	/* txhashes taken off the good list: a flow found them congested */
	SP_RH_DRY,		/* enforce=0: txhash writes decided but not done */
	SP_RH_EXPLORE,		/* policy 2: not high, rehashed anyway (prob / 10) */
	SP_RH_FUTILE,		/* policy 2: a move that helped no flow of the pair: reverted */
	SP_RH_SUP_BACKOFF,	/* policy 2: no move: one on trial, or backing off */
	SP_RH_RTO_STEER,	/* policy 2: RTOs of a move on trial: back to the old txhash */
	SP_RH_KEPT_SIB,		/* policy 2: moves kept by the siblings' rate alone */
	SP_RH_RTO_CALM,		/* policy 2: repeated RTOs sent onto a calm sibling's txhash */
	SP_RH_RTT_CBS_OTHER,	/* RTT callbacks of connections without state: another module's ask */
	SP_RH_NR,
};

#define SP_REHASH_TUNABLES(X, ctx) \
	X(ctx, prob, 0, 100, 20, SP_OOR_CLAMP, \
	  "percent chance to rehash per non-RTO loss-recovery episode") \
	X(ctx, mode, 0, 1, 0, SP_OOR_CLAMP, \
	  "0: no balancing rehash once a flow had an RTO; 1: always") \
	X(ctx, rounds, 0, 1000, 0, SP_OOR_CLAMP, \
	  "rehash after this many congested rounds in a row; 0 = off") \
	X(ctx, delay_pct, 100, 10000, 150, SP_OOR_CLAMP, \
	  "a round is congested if srtt > min_rtt * delay_pct / 100") \
	X(ctx, pause_ms, 0, 600000, 2000, SP_OOR_CLAMP, \
	  "no rounds-trigger rehash for this long after an RTO") \
	X(ctx, defer_rtts, 0, 1000, 2, SP_OOR_CLAMP, \
	  "apply a deferred rehash after this many srtt even if unsafe; 0 = wait") \
	X(ctx, revert_pct, 0, 100, 0, SP_OOR_CLAMP, \
	  "path memory: revert a rehash if the new path delivers < this % of the old; 0 = off") \
	X(ctx, probe_rtts, 1, 100, 16, SP_OOR_CLAMP, \
	  "path memory: measure the new path for this many srtt (after one srtt of warm-up)") \
	X(ctx, policy, 0, 2, 0, SP_OOR_CLAMP, \
	  "which episodes rehash: 0 prob's coin; 1 losses within one srtt of a sibling's; 2 loss density over the pair's usual") \
	X(ctx, reuse, 0, 1, 0, SP_OOR_CLAMP, \
	  "1: new flows and rehashes prefer txhashes recent flows to the same peer found good") \
	X(ctx, enforce, 0, 1, 1, SP_OOR_CLAMP, \
	  "1: write sk_txhash; 0: dry run, decide and count only")

struct sp_rehash_cfg {
	SP_REHASH_TUNABLES(SP_CFG_FIELD, _)
};

/* Per-connection view, keyed by addresses and ports (LRU, SP_RH_CONNS). */
#define SP_RH_CONNS	4096
struct sp_rehash_conn_key {
	__u32 family;
	__u32 saddr[4];
	__u32 daddr[4];
	__u16 sport;		/* host order */
	__u16 dport;
};

/* The last SP_RH_WINLOG path-memory windows (a ring; status shows them). */
#define SP_RH_WINLOG	64
struct sp_rehash_window {
	__u64 seq;		/* 1, 2, ... in the order written; 0 = empty slot */
	__u32 old_rate;		/* old path, bytes per ms since the previous episode */
	__u32 new_rate;		/* new path, bytes per ms over the window */
	__u32 old_qdelay_us;	/* srtt - min_rtt at the decision */
	__u32 new_qdelay_us;	/* srtt - min_rtt at the window's end */
	__u32 reverted;
	__u32 pad;
};

/*
 * Per (source, destination) address pair, what the host's flows to it saw
 * (LRU, SP_RH_DESTS): the pair is what R1 hashes besides the flow label (or,
 * for VXLAN, the outer port derived from it), so siblings are flows whose
 * txhash picks among the same paths, and a txhash good for one is good for
 * all. Written by the BPF side only; every field read is checked (a value
 * bpftool wrote can skip a rehash or pick a known-bad hash once, no more).
 */
#define SP_RH_DESTS	1024
#define SP_RH_GOOD	8	/* good txhashes remembered per pair */
#define SP_RH_GOOD_AGE_S 300	/* ... for this long after a flow last found one good */
struct sp_rehash_dest_key {
	__u32 family;
	__u32 saddr[4];
	__u32 daddr[4];
};

struct sp_rehash_dest {
	__u64 ep_ns;		/* start of the last loss episode of any flow */
	__u64 ep_cookie;	/* ... whose socket cookie */
	__u64 moved_ns;		/* last policy 1/2 rehash: "one of them, not both" */
	__u64 base;		/* usual loss density (episodes per GiB), see density() */
	__u64 base_ns;		/* ... when last set or confirmed */
	__u32 ep_hash;		/* ... and txhash at that episode */
	__u32 next;		/* round robin over good[] */
	__u32 good[SP_RH_GOOD];	/* 0 = empty */
	__u64 good_ns[SP_RH_GOOD];
	__u64 eps;		/* loss episodes of the pair's flows, all time */
	__u64 calm_ns;		/* policy 2: when a flow last measured a density not high ... */
	__u32 calm_hash;	/* ... on this txhash (0 = none) */
	__u32 pad;
	__u64 calm_cookie;	/* ... that flow's socket cookie */
};

struct sp_rehash_conn {
	__u32 rehashes;
	__u32 episodes;
	__u32 txhash;		/* last value written */
	__u32 rtos;
	__u32 reverts;		/* path memory: returns to the previous txhash */
};

/* ---- fragguard: per-peer IP fragment memory control --------------------- */

enum sp_fg_ctr {
	SP_FG_FRAGS,		/* IPv4/IPv6 fragments seen on the attached interfaces */
	SP_FG_MALFORMED,	/* fragments the kernel drops before reassembly: passed untouched */
	SP_FG_ADMITTED,		/* new datagrams admitted */
	SP_FG_REF_PEER,		/* new datagrams refused: peer over peer_limit */
	SP_FG_REF_SHARE,	/* refused: under load, peer over its fair share */
	SP_FG_REF_UNKNOWN,	/* refused: peers not yet known are over unknown_pct */
	SP_FG_REF_AGE,		/* fragments refused: datagram older than its age limit */
	SP_FG_REF_FOLLOW,	/* later fragments of a refused datagram */
	SP_FG_DROPPED,		/* fragments dropped (all refusals, when enforce=1) */
	SP_FG_COMPLETED,	/* datagrams reassembled (as the kernel does) */
	SP_FG_EXPIRED,		/* datagrams the kernel's timer expired */
	SP_FG_DISCARDED,	/* datagrams the kernel discards: overlap, bad length, oversize, ECN */
	SP_FG_DUPS,		/* fragments the kernel drops as duplicates (inside a run) */
	SP_FG_REINIT,		/* datagrams restarted by the kernel (ipfrag_max_dist) */
	SP_FG_UNTRACKED,	/* new datagrams passed untracked: datagram map full */
	SP_FG_INEXACT,		/* datagrams tracked by byte count only: run bitmap unavailable */
	SP_FG_PROMOTED,		/* peers that became known */
	SP_FG_KNOWN_FULL,	/* peers that qualified but the known map was full */
	SP_FG_K_TIMEOUT,	/* kernel drops: SKB_DROP_REASON_FRAG_REASM_TIMEOUT */
	SP_FG_K_DUP,		/* kernel drops: SKB_DROP_REASON_DUP_FRAG */
	SP_FG_K_TOO_FAR,	/* kernel drops: SKB_DROP_REASON_FRAG_TOO_FAR */
	SP_FG_ORPHANED,		/* fragments passed unjudged: the loader stopped (SP_FG_STALE_NS) */
	SP_FG_REF_KNOWN,	/* refusals (new datagrams, age) of peers in the known pool */
	SP_FG_NR,
};

#define SP_FRAGGUARD_TUNABLES(X, ctx) \
	X(ctx, prefix4, 0, 32, 32, SP_OOR_CLAMP, \
	  "IPv4 sources are grouped into peers by this prefix") \
	X(ctx, prefix6, 0, 128, 64, SP_OOR_CLAMP, \
	  "IPv6 sources are grouped into peers by this prefix") \
	X(ctx, peer_limit_kb, 16, 1 << 20, 1024, SP_OOR_CLAMP, \
	  "reassembly memory one peer may hold, KiB (the seed's low_thresh)") \
	X(ctx, unknown_pct, 1, 100, 50, SP_OOR_CLAMP, \
	  "share of high_thresh for all peers not yet known") \
	X(ctx, load_pct, 1, 100, 50, SP_OOR_CLAMP, \
	  "above this share of high_thresh, known peers are held to limits and fair shares") \
	X(ctx, enforce, 0, 1, 1, SP_OOR_CLAMP, "1: drop refused fragments; 0: count only") \
	X(ctx, known_kb, 1, 1 << 20, 64, SP_OOR_CLAMP, \
	  "reassembled KiB a peer must complete to become known") \
	X(ctx, known_s, 0, 3600, 2, SP_OOR_CLAMP, "... over at least this many seconds")

struct sp_fg_cfg {
	SP_FRAGGUARD_TUNABLES(SP_CFG_FIELD, _)
};


/* Written by the loader every 100 ms, index 0 = IPv4, 1 = IPv6. */
struct sp_fg_global {
	__u64 mem;		/* kernel reassembly memory (sockstat FRAG memory) */
	__u64 high_thresh;	/* ipfrag_high_thresh */
	__u64 time_ns;		/* ipfrag_time */
	__u64 updated_ns;	/* CLOCK_MONOTONIC of this write; 0: never written */
};

/*
 * A filter whose loader has not written fragguard_glob for this long lets
 * every fragment through: where there is no tcx (before 6.6), a run killed
 * with SIGKILL leaves its clsact filter attached until the next start, and
 * it must not go on refusing with what it last knew.
 */
#define SP_FG_STALE_NS	(2ULL * 1000000000)

/*
 * Sums over tracked datagrams, each added and released exactly once (never
 * lost to an eviction: the datagram map is not an LRU). fragguard_mem is
 * per CPU (sum the CPUs' values): every fragment adds to it, and a shared
 * counter would bounce between CPUs.
 */
struct sp_fg_mem {
	__s64 mem[2];		/* all tracked datagrams, per family (IPv4, IPv6) */
};

/* One entry. active_peers and gen are recomputed from the datagrams by
 * every sweep, so they cannot drift. */
struct sp_fg_agg {
	__s64 unknown_mem[2];	/* datagrams charged to the unknown pool, per family */
	__u32 active_peers;	/* peers with a datagram in progress, at the last sweep */
	__u32 gen;		/* last finished sweep; a peer's in_progress is valid if equal */
	__u32 dgrams;		/* datagrams in progress, at the last sweep */
	__u32 known_active;	/* ... of them, known peers: the fair share's divisor */
	__u64 last_refusal_ns;	/* the refused map is looked up only within 1 s of it */
	/* prefix4 and prefix6 as a new datagram last saw them, and when they
	 * changed (1: not since the start): see prefix_moved(). */
	__u32 prefix[2];
	__u64 prefix_ns[2];
};

#define SP_FG_DGRAMS	65536	/* datagrams in progress, each family (hash, allocated on use) */
#define SP_FG_BITS	4096	/* datagrams with more than SP_FG_RUNS runs: 2 KiB run bitmaps */
#define SP_FG_RUNS	4	/* runs kept inline per datagram */
#define SP_FG_PEERS	16384	/* peers not yet known (LRU) */
#define SP_FG_KNOWN	4096	/* known peers: left only after SP_FG_KNOWN_IDLE_S idle */
#define SP_FG_BLOCKS	1024	/* known peers with datagram slots of their own (array) */
#define SP_FG_SLOTS	4	/* datagrams in progress each of them holds in its slots (a power of 2) */
#define SP_FG_REFUSED	16384	/* refused datagrams, so their later fragments go too (LRU) */
#define SP_FG_KNOWN_IDLE_S 600

struct sp_fg_peer_key {
	__u32 family;
	__u32 addr[4];		/* masked to the prefix */
};

struct sp_fg_peer {
	__s64 mem;		/* estimated kernel memory held (truesize + queue) */
	__u64 last_ns;		/* last fragment (CLOCK_MONOTONIC) */
	__u64 rep_first_ns;	/* first completed datagram toward becoming known */
	__u64 rep_bytes;	/* bytes reassembled since */
	__u32 epoch;		/* random per entry: a datagram releases only into its own */
	__u32 gen;		/* sweep that computed in_progress */
	__u32 in_progress;	/* datagrams in progress (derived by the sweep) */
	__u32 completed;
	__u32 expired;
	__u32 discarded;
	__u32 admitted;
	__u32 refused;		/* datagrams and fragments refused */
};

/* ---- pmtu: per-destination path MTU learning ---------------------------- */

enum sp_pm_ctr {
	SP_PM_CONNECTS,		/* active opens seen */
	SP_PM_CLAMPED,		/* started with a learned MSS */
	SP_PM_LEARNED,		/* connections that proved an MTU good */
	SP_PM_SUSPECTS,		/* RTOs that looked like a black hole */
	SP_PM_EVENTS_LOST,	/* ring buffer full */
	SP_PM_ACCEPTS,		/* passive opens seen */
	SP_PM_ASKED,		/* searches asked at a first connection, before any stall */
	SP_PM_WOULD_CLAMP,	/* enforce=0: connections that would have been clamped */
	SP_PM_ASKS_LIMITED,	/* new destinations not asked for: ask rate (SP_PM_ASK_BURST) */
	SP_PM_KERNEL,		/* fentry kernels: paths learned from the kernel's own discoveries */
	SP_PM_CLAMP_REFUSED,	/* clamps the kernel refused (TCP_MAXSEG from sockops: 6.1) */
	SP_PM_PROOF_LEFT,	/* connections that left their proof to another (SP_PM_PROVER_T) */
	SP_PM_NR,
};

enum sp_pm_state {
	SP_PM_S_LEARNED,	/* low from connections only */
	SP_PM_S_SUSPECT,	/* black hole suspected, search pending */
	SP_PM_S_SEARCHED,	/* low/high from an out-of-band search */
	SP_PM_S_NOPROBE,	/* probes get no answer: learning from connections only */
	SP_PM_S_ASKED,		/* new destination, search asked before any stall */
};

/* How a destination answered the probes of its last search. */
enum sp_pm_method {
	SP_PM_M_NONE,		/* not searched yet, or nothing answered */
	SP_PM_M_ECHO,		/* ICMP echo */
	SP_PM_M_SYN,		/* TCP SYN to `port` */
	SP_PM_M_ICMP,		/* fentry: an ICMP the kernel took lowered a connection's MTU */
	SP_PM_M_KERNEL,		/* fentry: the kernel's own MTU probing (tcp_mtu_probing) */
};

/* A new destination whose search was asked is asked again after this when it
 * is still unknown (the loader may have dropped the ask: queue full). */
#define SP_PM_ASK_RETRY_NS	(5ULL * 1000000000)
/* Asks (and the entries they make) are a token bucket of searches_per_s with
 * this burst, the loader's queue: more would only be dropped there, and each
 * is an entry of the LRU map that a server's clients could otherwise churn,
 * evicting what was learned (t_pmtu_ask_flood_keeps_entries). */
#define SP_PM_ASK_BURST		64
/* A connection clamped to a known-good low that still takes its third RTO
 * in a row (args[0] of RTO_CB: the RTOs before it) suspects the path shrank
 * below low: its entry is searched again from the base size, at most once
 * per this (t_pmtu_path_shrinks_below_low). */
#define SP_PM_RECHECK_NS	(5ULL * 1000000000)
/* One connection a destination waits for its proof (RTT_CB and per-socket
 * storage until learn_kb) in this time, in units of 2^20 ns (1 s): the
 * others established in it leave the proof to it and prove at their close
 * instead, or wait after an RTO. A stream of short connections to a
 * destination nothing has proved (a container's, which the loader cannot
 * probe) then pays for one wait a second, not one each. */
#define SP_PM_PROVER_T		(1000000000u >> 20)

/* learn_kb's lowest value: below its bytes, no connection proves anything. */
#define SP_PM_LEARN_KB_MIN	4
#define SP_PM_LEARN_FLOOR	(SP_PM_LEARN_KB_MIN << 10)

#define SP_PMTU_TUNABLES(X, ctx) \
	X(ctx, prefix4, 0, 32, 32, SP_OOR_CLAMP, \
	  "IPv4 destinations share what is learned by this prefix") \
	X(ctx, prefix6, 0, 128, 64, SP_OOR_CLAMP, \
	  "IPv6 destinations share what is learned by this prefix") \
	X(ctx, learn_kb, SP_PM_LEARN_KB_MIN, 1 << 20, 64, SP_OOR_CLAMP, \
	  "KiB a connection delivers without an RTO to prove its MTU good") \
	X(ctx, threshold, 1, 1024, 8, SP_OOR_CLAMP, \
	  "search stops when high - low < threshold bytes") \
	X(ctx, max_step_pct, 101, 1000, 200, SP_OOR_CLAMP, \
	  "a probe is at most low * max_step_pct / 100 (Heffner: 2x)") \
	X(ctx, max_probes, 1, 10, 3, SP_OOR_CLAMP, \
	  "tries per probe size before it counts as too big") \
	X(ctx, probe_timeout_ms, 10, 10000, 500, SP_OOR_CLAMP, \
	  "longest wait for a probe's answer (shorter: 4x the base probe's RTT)") \
	X(ctx, interval_s, 1, 86400, 600, SP_OOR_CLAMP, \
	  "entries expire after this and are searched again (RFC 4821 raise timer)") \
	X(ctx, base_mss, 500, 9000, 1024, SP_OOR_CLAMP, \
	  "first probe size as an MSS, as tcp_base_mss") \
	X(ctx, route, 0, 1, 0, SP_OOR_CLAMP, \
	  "1: install a route MTU for searched destinations") \
	X(ctx, enforce, 0, 1, 1, SP_OOR_CLAMP, \
	  "1: clamp connections and install routes; 0: learn and report only") \
	X(ctx, search_new, 0, 1, 1, SP_OOR_CLAMP, \
	  "1: search a destination at its first connection; 0: only after a stall") \
	X(ctx, searches_per_s, 1, 1000, 10, SP_OOR_CLAMP, \
	  "searches started per second, at most (burst: as many)") \
	X(ctx, max_searches, 1, 16, 4, SP_OOR_CLAMP, \
	  "searches in flight at once, at most") \
	X(ctx, probes_per_s, 1, 10000, 100, SP_OOR_CLAMP, \
	  "probes sent per second by all searches, at most (burst: as many)")

struct sp_pmtu_cfg {
	SP_PMTU_TUNABLES(SP_CFG_FIELD, _)
};

#define SP_PM_DSTS	4096	/* destinations (LRU) */

struct sp_pmtu_key {
	__u64 netns;		/* namespaces never share what they learn */
	__u32 family;
	__u32 addr[4];		/* masked to the prefix */
};

/* MTUs are IP packet sizes; an MSS clamp is MTU - 40 (IPv4) or - 60 (IPv6). */
struct sp_pmtu_entry {
	__u32 low;		/* largest MTU known to pass (0: none) */
	__u32 high;		/* smallest MTU known to fail (0: none) */
	__u32 state;		/* enum sp_pm_state */
	__u32 probes;		/* probes sent for it */
	__u64 updated_ns;	/* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32 clamped;		/* connections started with it */
	__u32 route_mtu;	/* route installed by the loader, 0 if none */
	/* Added in pmtu v2 (appended: the fields above keep their offsets). */
	__u64 asked_ns;		/* last search asked by a connection (0: never) */
	__u32 method;		/* enum sp_pm_method: what answered the last search */
	__u32 port;		/* TCP port the SYN probes were answered on */
	__u32 probe_bytes;	/* IP bytes of the probes sent for it */
	/* Added in pmtu v3, in what was padding: when a connection last began
	 * to wait for its proof (bpf_ktime_get_ns() >> 20, 0: never); the
	 * others of SP_PM_PROVER_T after it leave the proof to it. */
	__u32 prover_t;
};

/*
 * A search's result, as the loader hands it to sp_pmtu_save (run with
 * BPF_PROG_TEST_RUN, after an Ethernet header's 14 bytes): the program
 * writes it into the destination's entry in place, so the fields the
 * sockops side keeps there (clamped, asked_ns, prover_t) are never written
 * back over with what they were when the loader last read them.
 */
#define SP_PM_MAX_PROBES 64	/* probes a search sends, whatever the tunables say */

/* A pmtu entry's bounds as the BPF side ever stores them (0: none): an
 * MTU from IPv4's minimum up, a failing size above the passing one. Both
 * the program that saves a search (sp_pmtu_save) and the persist file's
 * reader hold what they are given to this. */
static inline bool sp_pm_bounds_ok(__u32 low, __u32 high)
{
	return (!low || (low >= 68 && low <= 65535)) && (!high || (high > low && high <= 65536));
}

struct sp_pmtu_save {
	struct sp_pmtu_key key;
	__u64 updated_ns;
	__u32 state;
	__u32 searched;		/* 1: low, high and route_mtu are the search's */
	__u32 low, high, route_mtu;
	__u32 method, port;
	__u32 probes, probe_bytes;	/* added to the entry's */
	__u32 pad;
};

enum sp_pm_event_kind {
	SP_PM_EV_STALL,		/* an RTO that looks like a black hole on this path */
	SP_PM_EV_NEW,		/* a first connection to a destination not known */
};

/* Ring buffer event: a destination to search. */
struct sp_pmtu_event {
	struct sp_pmtu_key key;
	__u32 dst[4];		/* the full address, for the probes */
	__u32 mtu;		/* the connection's MTU when it stalled (0: new) */
	__u16 dport;		/* its remote port: TCP SYN probes go there */
	__u16 kind;		/* enum sp_pm_event_kind */
};

/* ---- loader bookkeeping ------------------------------------------------- */

#define SP_MAX_IFACES	8
#define SP_MAX_PROGS	16
/* Sockops modules one run can chain behind its one program (bpf/chain.bpf.h). */
#define SP_CHAIN_SLOTS	8

/* Value of the pinned "meta" map: what a running `stackpilot run` did. */
struct sp_meta {
	__u32 pid;
	__u32 modules;		/* bit i = sp_modules[i] loaded */
	__u64 cgroup_id;
	__u64 started_ns;	/* CLOCK_MONOTONIC */
	__u32 nr_ifaces;
	__u32 ifindex[SP_MAX_IFACES];
	__u32 nr_progs;
	__u32 prog_ids[SP_MAX_PROGS];	/* for run counts and times */
	char cgroup[256];
	__u32 flags;		/* SP_META_* (src/service/persist.h): --persist, --dry-run */
	__u32 pad;
	char state_file[256];	/* this run's saved tunables, where `set --persist` writes */
	/* How late the event loop served its periodic timers (run.c, every second). */
	__u64 loop_delay_ns;		/* the largest lateness in the last second */
	__u64 loop_delay_max_ns;	/* the largest since the run started */
	/*
	 * The --iface names: status may run in another network namespace, and
	 * a deleted device (ifindex 0 above) has no index to name it by.
	 */
	char ifname[SP_MAX_IFACES][16];
	/* Metrics name a program by its module and its full name, not by its id. */
	char prog_module[SP_MAX_PROGS][16];
	char prog_name[SP_MAX_PROGS][32];
	__u32 refused;		/* bit i = sp_modules[i] asked for, refused by this kernel */
	__u32 metrics_top;	/* run --metrics-top: rows of each module table in the metrics */
	char version[32];	/* the run's build (stackpilot --version) */
};

#endif /* STACKPILOT_H */
