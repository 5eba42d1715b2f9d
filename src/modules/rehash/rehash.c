// SPDX-License-Identifier: GPL-2.0
/* rehash: loader side. The decisions are in bpf/rehash.bpf.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "core/probe.h"
#include "rehash.skel.h"
#include "rehash_noatomics.skel.h"	/* only its ELF bytes: the same maps and programs */

static const struct sp_tunable tunables[] = {
	SP_REHASH_TUNABLES(SP_TUNABLE_ROW, struct sp_rehash_cfg)
};

/*
 * rehash_bpf__open_opts(), but where the kernel has no BPF atomics but a
 * plain add (before 5.12) with the build of bpf/rehash.bpf.c made for it
 * (SP_NO_ATOMICS): the same maps and programs by name, so the skeleton
 * finds them in either.
 */
static void *open_skel(const struct bpf_object_open_opts *opts)
{
	struct rehash_bpf *obj = calloc(1, sizeof(*obj));
	int err;

	if (!obj)
		return errno = ENOMEM, NULL;
	err = rehash_bpf__create_skeleton(obj);
	if (!err && !sp_has(SP_F_ATOMICS))
		obj->skeleton->data = (void *)rehash_noatomics_bpf__elf_bytes(&obj->skeleton->data_sz);
	if (!err)
		err = bpf_object__open_skeleton(obj->skeleton, opts);
	if (err) {
		rehash_bpf__destroy(obj);
		errno = -err;
		return NULL;
	}
	return obj;
}

/* What this kernel lets rehash do (stackpilot probe). */
static const enum sp_feat needs[] = { SP_F_SKC_TCP, SP_F_SK_STORAGE };
static const struct sp_choice choices[] = {
	{ "atomics", SP_F_ATOMICS, "atomics", "no atomics",
	  "policy 1/2: two flows of a pair deciding at the same instant may both "
	  "move, where one would" },
	/* Policy 2 holds the kernel's own RTO rehash off with it. */
	{ "rto", SP_F_TXREHASH, "SO_TXREHASH", "no SO_TXREHASH",
	  "the kernel rehashes at every RTO: policy 2's RTO steering and calm "
	  "hashes (rto_steered, rto_to_calm) are overwritten at once" },
};

static void fit(struct sp_fit *f)
{
	sp_fit_table(f, needs, SP_LEN(needs), choices, SP_LEN(choices));
}

static const struct sp_counter counters[SP_RH_NR] = {
	[SP_RH_RETRANS] = { "retrans_seen", "retransmissions seen" },
	[SP_RH_EPISODES] = { "episodes", "non-RTO loss-recovery episodes started" },
	[SP_RH_NOW] = { "rehash_now", "rehashes applied at once" },
	[SP_RH_DEFERRED] = { "rehash_deferred", "rehashes decided but deferred until safe" },
	[SP_RH_DEFERRED_DONE] = { "rehash_deferred_done",
				  "deferred rehashes applied at a later ACK, once safe" },
	[SP_RH_DEFERRED_FORCED] = { "rehash_deferred_forced",
				    "deferred rehashes applied after defer_rtts, not safe" },
	[SP_RH_SUP_MODE] = { "suppressed_mode", "suppressed: mode 0 and the flow had an RTO" },
	[SP_RH_SUP_PAUSE] = { "suppressed_pause", "suppressed: within pause_ms after an RTO" },
	[SP_RH_SUP_PROB] = { "suppressed_prob", "suppressed: the coin said no" },
	[SP_RH_LOSS_STATE] = { "retrans_in_loss",
			       "retransmissions in TCP_CA_Loss (after an RTO): ignored" },
	[SP_RH_RTO] = { "rto", "RTOs seen" },
	[SP_RH_ROUNDS] = { "rounds_trigger", "rehashes decided by the congested-rounds trigger" },
	[SP_RH_RTT_CBS] = { "rtt_callbacks", "RTT (per-ACK) callbacks of the connections it keeps state for" },
	/* Counted at episodes and when a socket closes: a long flow shows up late. */
	[SP_RH_BYTES] = { "bytes_delivered", "bytes delivered (bytes_acked) by the connections it keeps state for",
			  "bytes" },
	[SP_RH_RTT_ON] = { "rtt_cb_switched_on", "times rehash switched RTT callbacks on for a socket" },
	[SP_RH_WINDOWS] = { "memory_windows", "path-memory windows closed (new path measured)" },
	[SP_RH_REVERT] = { "memory_revert_decided",
			   "windows that found the new path worse: revert decided" },
	[SP_RH_REVERT_DONE] = { "memory_reverted", "reverts applied (back to the old txhash)" },
	[SP_RH_SUP_WINDOW] = { "suppressed_pending",
			       "episodes not decided: a path-memory window was open" },
	[SP_RH_CORR] = { "shared_episodes", "policy 1/2: episodes judged a shared bottleneck" },
	[SP_RH_UNCORR] = { "own_episodes",
			   "policy 1/2: episodes judged the flow's own queue: no rehash" },
	[SP_RH_SUP_SIBLING] = { "suppressed_sibling_moved",
				"policy 1/2: shared, but a sibling was just moved: no rehash" },
	[SP_RH_REUSE_EST] = { "reuse_at_connect", "reuse=1: new connections given a known-good txhash" },
	[SP_RH_REUSE_REHASH] = { "reuse_at_rehash",
				 "reuse=1: rehashes to a known-good txhash instead of a random one" },
	[SP_RH_GOOD_ADD] = { "good_hash_added",
			     "reuse=1: txhashes recorded good by a closing connection" },
	[SP_RH_GOOD_DROP] = { "good_hash_dropped",
			      "txhashes taken off the good list: a flow found them congested" },
	[SP_RH_DRY] = { "dry_run_skipped", "enforce=0: txhash writes decided but not done" },
	[SP_RH_EXPLORE] = { "explored",
			    "policy 2: episodes not judged high, rehashed anyway (probability prob / 10)" },
	[SP_RH_FUTILE] = { "futile_moves",
			   "policy 2: moves that lowered neither the flow's losses nor its siblings', or ended in an RTO: reverted" },
	[SP_RH_SUP_BACKOFF] = { "suppressed_backoff",
				"policy 2: no move: one on trial, or backing off after futile ones" },
	[SP_RH_RTO_STEER] = { "rto_steered",
			      "policy 2: RTOs that ended a move on trial: back to the old txhash, not the kernel's random one" },
	[SP_RH_KEPT_SIB] = { "kept_by_siblings",
			     "policy 2: moves kept because the siblings' episode rate fell, the mover's own losses not halved" },
	[SP_RH_RTO_CALM] = { "rto_to_calm",
			     "policy 2: second and later RTOs in a row sent onto the txhash a sibling last found calm, not the kernel's random one" },
	[SP_RH_RTT_CBS_OTHER] = { "rtt_callbacks_other",
				  "RTT callbacks run for connections it keeps no state for (another module's ask)" },
};

/* The per-ACK price: RTT callbacks the module's sockets ran per MB they delivered. */
static void report_cost(const char *pin_dir, struct sp_report *rep)
{
	static const struct sp_field f = { "rtt_callbacks_per_mb", SP_GAUGE, true, "ratio",
					   "RTT callbacks per MB delivered (rtt_callbacks / bytes_delivered)" };
	int fd = sp_open_pinned(pin_dir, "rehash_ctr");
	__u64 cbs = 0, bytes = 0;

	if (fd < 0)
		return;
	if (sp_sum_percpu(fd, SP_RH_RTT_CBS, &cbs) || sp_sum_percpu(fd, SP_RH_BYTES, &bytes))
		cbs = bytes = 0;
	close(fd);
	sp_rec_add(rep, NULL, &f)->d = bytes ? (double)cbs * 1e6 / (double)bytes : 0;
}

/*
 * Tables of rows without a name of their own (windows) or named by ephemeral
 * ports (connections) are not for Prometheus: the first would be series with
 * equal labels, the second a new series set for every connection. The
 * destinations table is the Prometheus view: at most TOP series per metric,
 * labelled by a destination address, which stays the same across connections.
 */
static const struct sp_field win_cols[] = {
	{ "old_rate_kBps", SP_GAUGE, false, "", "old path, kB/s since the previous episode" },
	{ "new_rate_kBps", SP_GAUGE, false, "", "new path, kB/s over the window" },
	{ "old_qdelay_us", SP_GAUGE, false, "", "srtt - min_rtt at the decision, us" },
	{ "new_qdelay_us", SP_GAUGE, false, "", "srtt - min_rtt at the window's end, us" },
	{ "reverted", SP_GAUGE, false, "", "1: the window decided a revert" },
};

/* The last path-memory windows, oldest first: why flows kept or reverted. */
static void report_windows(const char *pin_dir, struct sp_report *rep)
{
	int fd = sp_open_pinned(pin_dir, "rehash_windows"), n = 0;
	struct sp_rehash_window w[SP_RH_WINLOG], t;
	struct sp_table *tab;

	if (fd < 0)
		return;
	for (__u32 k = 0; k < SP_RH_WINLOG; k++) {
		if (bpf_map_lookup_elem(fd, &k, &t) || !t.seq)
			continue;
		int i = n++;

		for (; i > 0 && w[i - 1].seq > t.seq; i--)
			w[i] = w[i - 1];
		w[i] = t;
	}
	close(fd);
	tab = sp_table_add(rep, "windows", "the last 64 path-memory windows, oldest first",
			   win_cols, sizeof(win_cols) / sizeof(win_cols[0]));
	if (tab)
		tab->no_prom = true;
	for (int i = 0; i < n; i++) {
		struct sp_val *row = sp_table_row(tab);

		if (!row)
			break;
		row[0].i = w[i].old_rate;
		row[1].i = w[i].new_rate;
		row[2].i = w[i].old_qdelay_us;
		row[3].i = w[i].new_qdelay_us;
		row[4].i = w[i].reverted;
	}
}

#define TOP 10
struct conn { struct sp_rehash_conn_key k; struct sp_rehash_conn v; };

/* Insert c into the n-long list top (at most TOP), most rehashes first. */
static void top_insert(struct conn *top, int *n, const struct conn *c)
{
	int i;

	if (*n == TOP && top[TOP - 1].v.rehashes >= c->v.rehashes)
		return;
	i = *n < TOP ? (*n)++ : TOP - 1;
	for (; i > 0 && top[i - 1].v.rehashes < c->v.rehashes; i--)
		top[i] = top[i - 1];
	top[i] = *c;
}

/* Keys, or struct conns for qsort (the key is their first member). */
static int by_dst(const void *a, const void *b)
{
	const struct sp_rehash_conn_key *x = a, *y = b;

	return x->family != y->family ? (x->family < y->family ? -1 : 1) :
	       memcmp(x->daddr, y->daddr, sizeof(x->daddr));
}

static const struct sp_field conn_cols[] = {
	{ "src", SP_STRING, false, "", "source address" },
	{ "sport", SP_GAUGE, false, "", "source port" },
	{ "dst", SP_STRING, false, "", "destination address" },
	{ "dport", SP_GAUGE, false, "", "destination port" },
	{ "rehashes", SP_COUNTER, false, "", "rehashes applied" },
	{ "episodes", SP_COUNTER, false, "", "loss-recovery episodes" },
	{ "rtos", SP_COUNTER, false, "", "RTOs" },
	{ "reverts", SP_COUNTER, false, "", "path-memory reverts applied" },
	{ "txhash", SP_GAUGE, false, "", "last txhash written" },
};

static const struct sp_field dst_cols[] = {
	{ "dst", SP_STRING, false, "", "destination address" },
	{ "connections", SP_GAUGE, false, "",
	  "connections to it with a rehash, episode, RTO or revert, still tracked" },
	{ "rehashes", SP_GAUGE, false, "", "rehashes of those connections" },
	{ "episodes", SP_GAUGE, false, "", "loss-recovery episodes of those connections" },
	{ "rtos", SP_GAUGE, false, "", "RTOs of those connections" },
	{ "reverts", SP_GAUGE, false, "", "path-memory reverts of those connections" },
};

static void conn_row(struct sp_table *tab, const struct conn *c)
{
	struct sp_val *row = sp_table_row(tab);
	int af = c->k.family == AF_INET ? AF_INET : AF_INET6;

	if (!row)
		return;
	inet_ntop(af, c->k.saddr, row[0].s, sizeof(row[0].s));
	row[1].i = c->k.sport;
	inet_ntop(af, c->k.daddr, row[2].s, sizeof(row[2].s));
	row[3].i = c->k.dport;
	row[4].u = c->v.rehashes;
	row[5].u = c->v.episodes;
	row[6].u = c->v.rtos;
	row[7].u = c->v.reverts;
	row[8].i = c->v.txhash;
}

/*
 * Of the connections in rehash_conns (LRU, SP_RH_CONNS) with any activity:
 * the TOP most rehashed, and the TOP destinations by rehashes summed over
 * their connections (sorted by destination to merge them). The sums are
 * gauges: they drop when the LRU evicts a connection.
 */
static void report_conns(const char *pin_dir, struct sp_report *rep)
{
	struct sp_rehash_conn_key k, next;
	struct conn *all, top[TOP], dtop[TOP];
	int fd = sp_open_pinned(pin_dir, "rehash_conns"), n = 0, nt = 0, nd = 0;
	struct sp_table *ct, *dt;
	void *prev = NULL;

	if (fd < 0)
		return;
	/* 4096 x 60 bytes for the merge; without them, empty tables. */
	all = malloc(SP_RH_CONNS * sizeof(*all));
	while (all && n < SP_RH_CONNS && !bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		all[n].k = k;
		if (bpf_map_lookup_elem(fd, &k, &all[n].v) ||
		    !(all[n].v.rehashes | all[n].v.episodes | all[n].v.rtos | all[n].v.reverts))
			continue;
		top_insert(top, &nt, &all[n++]);
	}
	close(fd);
	ct = sp_table_add(rep, "connections", "most rehashed connections, at most 10",
			  conn_cols, sizeof(conn_cols) / sizeof(conn_cols[0]));
	dt = sp_table_add(rep, "destinations", "destinations by rehashes, at most 10",
			  dst_cols, sizeof(dst_cols) / sizeof(dst_cols[0]));
	if (ct)
		ct->no_prom = true;
	for (int i = 0; i < nt; i++)
		conn_row(ct, &top[i]);
	if (!all)
		return;
	qsort(all, n, sizeof(*all), by_dst);
	for (int i = 0, j; i < n; i = j) {
		struct conn sum = { .k = all[i].k };

		for (j = i; j < n && !by_dst(&all[i].k, &all[j].k); j++) {
			sum.v.rehashes += all[j].v.rehashes;
			sum.v.episodes += all[j].v.episodes;
			sum.v.rtos += all[j].v.rtos;
			sum.v.reverts += all[j].v.reverts;
		}
		/* The count rides in txhash, unused for a sum. */
		sum.v.txhash = j - i;
		top_insert(dtop, &nd, &sum);
	}
	free(all);
	for (int i = 0; i < nd; i++) {
		struct sp_val *row = sp_table_row(dt);

		if (!row)
			break;
		inet_ntop(dtop[i].k.family == AF_INET ? AF_INET : AF_INET6, dtop[i].k.daddr,
			  row[0].s, sizeof(row[0].s));
		row[1].i = dtop[i].v.txhash;
		row[2].i = dtop[i].v.rehashes;
		row[3].i = dtop[i].v.episodes;
		row[4].i = dtop[i].v.rtos;
		row[5].i = dtop[i].v.reverts;
	}
}

static void report(const char *pin_dir, struct sp_report *rep)
{
	report_cost(pin_dir, rep);
	report_windows(pin_dir, rep);
	report_conns(pin_dir, rep);
}

/*
 * What it did, in words: the moves applied (at once or deferred), or under
 * enforce=0 the txhash writes it skipped; the reverts; what it reacted to.
 */
static void say(const struct sp_report *r, struct sp_summary *s)
{
	bool dry = sp_rec_find(r, "cfg", "enforce") && !sp_rec_num(r, "cfg", "enforce");

	if (dry)
		sp_say_rec(s, SP_SAY_COUNTER, r, "dry_run_skipped",
			   "would have moved flows %s {time|times}");
	else
		sp_say(s, SP_SAY_COUNTER, sp_rec_num(r, NULL, "rehash_now") +
		       sp_rec_num(r, NULL, "rehash_deferred_done") +
		       sp_rec_num(r, NULL, "rehash_deferred_forced"), "moved flows %s {time|times}");
	sp_say_rec(s, SP_SAY_COUNTER, r, "memory_reverted",
		   dry ? "%s would have moved back" : "%s moved back");
	sp_say_rec(s, SP_SAY_COUNTER, r, "episodes", "%s loss {episode|episodes}");
	sp_say_rec(s, SP_SAY_COUNTER, r, "rto", "%s {RTO|RTOs}");
}

const struct sp_module sp_mod_rehash = {
	SP_MODULE(rehash, struct sp_rehash_cfg, tunables),
	.summary = "move flows off congested ECMP paths by changing sk_txhash after losses",
	SP_COUNTERS(rehash, counters),
	.needs_cgroup = true,
	.fit = fit,
	.open = open_skel,
	.report = report,
	.say = say,
};
