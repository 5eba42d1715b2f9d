// SPDX-License-Identifier: GPL-2.0
/*
 * fragguard status: counters, the kernel's reassembly memory and limits as
 * last sampled, the aggregates of the last sweep, and the peers holding the
 * most memory, as records (sp.h) from the pinned maps.
 */
#include <arpa/inet.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "modules/fragguard/fragguard.h"

const struct sp_counter sp_fg_counters[SP_FG_NR] = {
	[SP_FG_FRAGS] = { "fragments", "IPv4/IPv6 fragments seen on the attached interfaces" },
	[SP_FG_MALFORMED] = { "malformed", "fragments the kernel drops before reassembly: passed" },
	[SP_FG_ADMITTED] = { "admitted", "new datagrams admitted" },
	[SP_FG_REF_PEER] = { "refused_peer_limit", "new datagrams refused: peer over peer_limit" },
	[SP_FG_REF_SHARE] = { "refused_fair_share", "refused: under load, peer over its fair share" },
	[SP_FG_REF_UNKNOWN] = { "refused_unknown_pool",
				"refused: peers not yet known are over unknown_pct" },
	[SP_FG_REF_AGE] = { "refused_age", "fragments refused: datagram older than its age limit" },
	[SP_FG_REF_FOLLOW] = { "refused_followers", "later fragments of a refused datagram" },
	[SP_FG_DROPPED] = { "dropped", "fragments dropped (all refusals, when enforce=1)" },
	[SP_FG_COMPLETED] = { "completed", "datagrams reassembled" },
	[SP_FG_EXPIRED] = { "expired", "datagrams the kernel's timer expired" },
	[SP_FG_DISCARDED] = { "discarded", "datagrams the kernel discards: overlap, bad length, "
			      "oversize, ECN" },
	[SP_FG_DUPS] = { "duplicates", "fragments the kernel drops as duplicates" },
	[SP_FG_REINIT] = { "reinit", "datagrams restarted by the kernel (ipfrag_max_dist)" },
	[SP_FG_UNTRACKED] = { "untracked", "new datagrams passed untracked: datagram map full" },
	[SP_FG_INEXACT] = { "inexact", "datagrams tracked by byte count only" },
	[SP_FG_PROMOTED] = { "peers_promoted", "peers that became known" },
	[SP_FG_KNOWN_FULL] = { "known_map_full", "peers that qualified but the known map was full" },
	[SP_FG_K_TIMEOUT] = { "kernel_drop_timeout", "kernel drops: reassembly timeout (fragments; queues where fexit sees the expiry)" },
	[SP_FG_K_DUP] = { "kernel_drop_dup", "kernel drops: duplicate fragment" },
	[SP_FG_K_TOO_FAR] = { "kernel_drop_too_far", "kernel drops: fragment too far (ipfrag_max_dist)" },
	[SP_FG_REF_KNOWN] = { "refused_known", "refusals of peers in the known pool (new datagrams over "
			      "peer_limit or fair share under load, or too old): a legitimate peer "
			      "refused, or its address spoofed" },
	[SP_FG_ORPHANED] = { "orphaned", "fragments passed unjudged: the run stopped feeding the filter (a killed run's clsact filter)" },
};

#define TOP 10
struct top {
	int n, total;
	struct sp_fg_peer_key k[TOP];
	struct sp_fg_peer v[TOP];
	bool known[TOP];
};

/* Keep the TOP peers by memory of one pinned peer map. */
static void collect(const char *pin_dir, const char *map, bool known, struct top *t)
{
	struct sp_fg_peer_key k, next;
	struct sp_fg_peer v;
	int fd = sp_open_pinned(pin_dir, map);
	void *prev = NULL;

	if (fd < 0)
		return;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		int i;

		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &v))
			continue;
		t->total++;
		if (t->n == TOP && t->v[TOP - 1].mem >= v.mem)
			continue;
		i = t->n < TOP ? t->n++ : TOP - 1;
		for (; i > 0 && t->v[i - 1].mem < v.mem; i--) {
			t->k[i] = t->k[i - 1];
			t->v[i] = t->v[i - 1];
			t->known[i] = t->known[i - 1];
		}
		t->k[i] = k;
		t->v[i] = v;
		t->known[i] = known;
	}
	close(fd);
}

static const struct sp_field peer_cols[] = {
	{ "peer", SP_STRING, false, "", "peer address (IPv6: its /64)" },
	{ "known", SP_BOOL, false, "", "in the known-peers pool (completed datagrams before)" },
	{ "mem", SP_GAUGE, false, "bytes", "reassembly memory the peer holds now (estimate)" },
	{ "in_progress", SP_GAUGE, false, "", "datagrams being reassembled" },
	{ "completed", SP_COUNTER, false, "", "datagrams completed" },
	{ "expired", SP_COUNTER, false, "", "datagrams that timed out" },
	{ "discarded", SP_COUNTER, false, "", "datagrams dropped unfinished" },
	{ "admitted", SP_COUNTER, false, "", "datagrams admitted" },
	{ "refused", SP_COUNTER, false, "", "datagrams refused" },
	{ "reputation_bytes", SP_GAUGE, false, "bytes", "bytes of completed datagrams (reputation)" },
};

static void report_peers(const char *pin_dir, struct sp_report *rep, __u32 gen)
{
	struct top t = {};
	struct sp_table *tab;
	int known;

	collect(pin_dir, "fragguard_known", true, &t);
	known = t.total;
	collect(pin_dir, "fragguard_peers", false, &t);
	sp_rec_gauge(rep, NULL, "peers_known", known, "", "peers in the known pool");
	sp_rec_gauge(rep, NULL, "peers_tracked", t.total, "", "peers tracked (known and not)");
	tab = sp_table_add(rep, "top_peers", "peers by reassembly memory, at most 10",
			   peer_cols, sizeof(peer_cols) / sizeof(peer_cols[0]));
	for (int i = 0; i < t.n; i++) {
		struct sp_fg_peer *v = &t.v[i];
		struct sp_val *row = sp_table_row(tab);

		if (!row)
			break;
		inet_ntop(t.k[i].family == AF_INET ? AF_INET : AF_INET6, t.k[i].addr,
			  row[0].s, sizeof(row[0].s));
		row[1].b = t.known[i];
		row[2].i = v->mem;
		row[3].i = v->gen == gen ? v->in_progress : 0;
		row[4].u = v->completed;
		row[5].u = v->expired;
		row[6].u = v->discarded;
		row[7].u = v->admitted;
		row[8].u = v->refused;
		row[9].i = v->rep_bytes;
	}
}

static void report_global(const char *pin_dir, struct sp_report *rep)
{
	int fd = sp_open_pinned(pin_dir, "fragguard_glob");
	struct sp_fg_global g;

	if (fd < 0)
		return;
	for (__u32 i = 0; i < 2; i++) {
		const char *fam = i ? "ipv6" : "ipv4";

		if (bpf_map_lookup_elem(fd, &i, &g))
			continue;
		sp_rec_gauge(rep, fam, "mem", g.mem, "bytes",
			     "the namespace's reassembly memory (sockstat), as last sampled");
		sp_rec_gauge(rep, fam, "high_thresh", g.high_thresh, "bytes",
			     "the kernel's reassembly memory limit (ipfrag_high_thresh)");
		sp_rec_gauge(rep, fam, "time_s", g.time_ns / 1000000000, "seconds",
			     "the kernel's reassembly timeout (ipfrag_time)");
	}
	close(fd);
}

/* Tracked memory per family: the sum of the per-CPU sums. */
static void tracked_mem(const char *pin_dir, long long mem[2])
{
	int ncpu = libbpf_num_possible_cpus(), fd = sp_open_pinned(pin_dir, "fragguard_mem");
	struct sp_fg_mem v[ncpu > 0 ? ncpu : 1];
	__u32 zero = 0;

	mem[0] = mem[1] = 0;
	if (fd < 0 || ncpu <= 0 || bpf_map_lookup_elem(fd, &zero, v)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	for (int i = 0; i < ncpu; i++)
		mem[0] += v[i].mem[0], mem[1] += v[i].mem[1];
}

/* The aggregates: sums over the tracked datagrams, and the last sweep's counts. */
static __u32 report_agg(const char *pin_dir, struct sp_report *rep)
{
	int fd = sp_open_pinned(pin_dir, "fragguard_agg");
	struct sp_fg_agg a;
	long long mem[2];
	__u32 zero = 0;

	if (fd < 0)
		return 0;
	if (bpf_map_lookup_elem(fd, &zero, &a)) {
		close(fd);
		return 0;
	}
	close(fd);
	tracked_mem(pin_dir, mem);
	for (int f = 0; f < 2; f++)
		sp_rec_gauge(rep, "tracked_mem", f ? "ipv6" : "ipv4", mem[f], "bytes",
			     "reassembly memory of the datagrams fragguard tracks");
	for (int f = 0; f < 2; f++)
		sp_rec_gauge(rep, "unknown_mem", f ? "ipv6" : "ipv4", a.unknown_mem[f], "bytes",
			     "of which held by peers outside the known pool");
	sp_rec_gauge(rep, NULL, "active_peers", a.active_peers, "",
		     "peers with datagrams in progress (last sweep)");
	sp_rec_gauge(rep, NULL, "datagrams_in_progress", a.dgrams, "",
		     "datagrams in progress (last sweep)");
	return a.gen;
}

/*
 * What it did, in words: the fragments refused (every reason) and from how
 * many of the peers shown (the top 10 by fragments), or under enforce=0 what it would have refused;
 * what it let through; a full map.
 */
void sp_fg_say(const struct sp_report *r, struct sp_summary *s)
{
	static const char *const why[] = { "refused_peer_limit", "refused_fair_share",
		"refused_unknown_pool", "refused_age", "refused_followers" };
	const struct sp_table *t = sp_table_find(r, "top_peers");
	int col = sp_table_col(t, "refused");
	bool dry = sp_rec_find(r, "cfg", "enforce") && !sp_rec_num(r, "cfg", "enforce");
	double refused = 0;
	int peers = 0;

	for (size_t i = 0; i < SP_LEN(why); i++)
		refused += sp_rec_num(r, NULL, why[i]);
	for (int i = 0; t && col >= 0 && i < t->nr_rows; i++)
		peers += t->rows[i][col].u > 0;
	sp_say(s, SP_SAY_COUNTER, refused, dry ? "would have refused %s {fragment|fragments}" :
	       "refused %s {fragment|fragments}");
	sp_say(s, 0, peers, "from %s {peer|peers} of the top 10");
	sp_say_rec(s, SP_SAY_COUNTER, r, "completed", "%s {datagram|datagrams} reassembled");
	sp_say_rec(s, 0, r, "peers_known", "%s {peer|peers} known");
	sp_say_rec(s, SP_SAY_COUNTER | SP_SAY_WARN, r, "untracked",
		   "%s {datagram|datagrams} passed untracked: datagram map full");
	sp_say_rec(s, SP_SAY_COUNTER | SP_SAY_WARN, r, "known_map_full",
		   "%s {peer|peers} not made known: known map full");
	sp_say_rec(s, SP_SAY_COUNTER | SP_SAY_WARN, r, "orphaned",
		   "%s {fragment|fragments} passed unjudged: a stopped run's filter");
}

void sp_fg_report(const char *pin_dir, struct sp_report *rep)
{
	report_global(pin_dir, rep);
	report_peers(pin_dir, rep, report_agg(pin_dir, rep));
}
