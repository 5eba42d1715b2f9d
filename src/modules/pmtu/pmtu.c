// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu: loader side. The sockops program (bpf/pmtu.bpf.c) learns from
 * connections and reports black-hole suspects on a ring buffer; the loader
 * searches each suspect with DF probes (pmtu_search.c, pmtu_probe.c), writes
 * the result to the map and with pmtu.route=1 into a route MTU
 * (pmtu_route.c). This file: start/stop, --mtu-probing, status; the
 * tunables, clock and config read are in pmtu_state.c, below them all.
 * Probes run in the loader's network namespace: run stackpilot in the
 * namespace whose connections it serves (ip netns exec NS stackpilot run).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "modules/pmtu/pmtu_state.h"
#include "pmtu.skel.h"
#include "core/probe.h"
#include "core/state.h"

#define MTU_PROBING "net/ipv4/tcp_mtu_probing"

/* ---- --mtu-probing ------------------------------------------------------ */

static int check_mtu_probing(const char *arg)
{
	__u32 v;

	if (sp_parse_u32(arg, 0, 2, &v))
		return sp_fail(2, "--mtu-probing %s: expected 0, 1 or 2", arg);
	return 0;
}

static const struct sp_run_opt mtu_probing_opt = {
	.module = &sp_mod_pmtu, .name = "mtu-probing", .arg = "N",
	.help = "net.ipv4.tcp_mtu_probing = N (0-2) here while running",
	.check = check_mtu_probing,
};

__attribute__((constructor)) static void register_opts(void)
{
	sp_run_opt_register(&mtu_probing_opt);
}

/*
 * One run per namespace owns tcp_mtu_probing: a second run asking for it is
 * refused, so that no exit restores a value from under a live run. What is
 * set is on disk first, for the next run to restore if this one is killed.
 */
static int apply_mtu_probing(struct pmtu_state *st)
{
	if (st->mtu_probing_arg < 0) {
		if (sp_sysctl_read(MTU_PROBING) == 0)
			sp_log(SP_LOG_WARN, "pmtu: net.ipv4.tcp_mtu_probing is 0 here: the kernel "
			       "never detects black holes itself; --mtu-probing 1 (in a config file, "
			       "mtu-probing = 1) sets it for this run");
		return 0;
	}
	return sp_sysctl_own(MTU_PROBING, st->mtu_probing_arg, &st->saved_mtu_probing,
			     "pmtu: --mtu-probing");
}

/* ---- start / stop ------------------------------------------------------- */

static void stop(struct sp_run *run, void *inst)
{
	struct pmtu_state *st = inst;

	if (!st)
		return;
	pmtu_search_stop(st);
	pmtu_route_forget_all(st);
	sp_sysctl_release(MTU_PROBING, st->saved_mtu_probing, st->mtu_probing_arg);
	for (int i = 0; i < 3; i++)
		bpf_link__destroy(st->klinks[i]);
	if (st->skel)
		sp_module_unpublish(run, st->skel->obj);
	pmtu_bpf__destroy(st->skel);
	free(st);
}

static int start(struct sp_run *run, void **inst)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	struct pmtu_state *st = sp_module_inst(&sp_mod_pmtu, sizeof(*st), inst);
	const char *arg = sp_run_opt_arg(run, &mtu_probing_opt);
	__u32 v;

	if (!st)
		return -1;
	st->saved_mtu_probing = -1;
	st->mtu_probing_arg = arg && !sp_parse_u32(arg, 0, 2, &v) ? (int)v : -1;
	if (sp_netns_id(&st->netns))
		return sp_err("pmtu: reading this namespace's identity: %s", strerror(errno));
	/* Before anything is attached: a refused run leaves no trace, even briefly. */
	if (apply_mtu_probing(st))
		return -1;
	st->skel = pmtu_bpf__open_opts(&opts);
	if (!st->skel)
		return sp_err("pmtu: open: %s", strerror(errno));
	st->skel->rodata->sp_netns_by_ino = !sp_has(SP_F_NETNS_COOKIE);
	/* The fexit programs find the cgroup's sockets by their socket storage:
	 * with them, every connection gets one. */
	st->skel->rodata->sp_kernel_hooks = sp_has(SP_F_FENTRY_SK);
	/* Where TCP_MAXSEG cannot clamp, a connection's role waits for its route. */
	st->skel->rodata->sp_kernel_clamps = sp_has(SP_F_MAXSEG);
	if (!sp_has(SP_F_FENTRY_SK)) {
		bpf_program__set_autoload(st->skel->progs.sp_pmtu_icmp4, false);
		bpf_program__set_autoload(st->skel->progs.sp_pmtu_icmp6, false);
		bpf_program__set_autoload(st->skel->progs.sp_pmtu_sync, false);
	}
	if (sp_skel_load(run, &sp_mod_pmtu, st->skel) || pmtu_search_start(st) ||
	    sp_module_publish(run, &sp_mod_pmtu, st->skel->obj, st->skel->progs.sp_pmtu))
		return -1;
	if (sp_has(SP_F_FENTRY_SK)) {
		struct bpf_program *kp[] = { st->skel->progs.sp_pmtu_icmp4, st->skel->progs.sp_pmtu_icmp6,
					     st->skel->progs.sp_pmtu_sync };

		return sp_attach_progs(run, &sp_mod_pmtu, kp, 3, st->klinks);
	}
	return 0;
}

/* What this kernel lets pmtu do (stackpilot probe). */
static const enum sp_feat needs[] = { SP_F_SKC_TCP, SP_F_SK_STORAGE, SP_F_RINGBUF };
static const struct sp_choice choices[] = {
	{ "clamp", SP_F_MAXSEG, "TCP_MAXSEG", "no clamp",
	  "connections are not clamped: later connections start right only where "
	  "pmtu.route=1 installs a route MTU, which every socket of the namespace uses" },
	{ "namespaces", SP_F_NETNS_COOKIE, "netns cookie", "netns inode",
	  "what a namespace learned may apply to a later namespace that gets its inode "
	  "number, until it expires (interval_s)" },
	/* The kernel's own discoveries: ICMP reductions and tcp_mtu_probing's results. */
	{ "kernel pmtu", SP_F_FENTRY_SK, "fentry", "no fentry",
	  "paths are learned from stackpilot's own probes and from connections that "
	  "deliver learn_kb, not from ICMP messages or the kernel's own MTU probing" },
};

static void fit(struct sp_fit *f)
{
	sp_fit_table(f, needs, SP_LEN(needs), choices, SP_LEN(choices));
}

/* ---- status ------------------------------------------------------------- */

static const struct sp_counter counters[SP_PM_NR] = {
	[SP_PM_CONNECTS] = { "connects", "active opens seen" },
	[SP_PM_CLAMPED] = { "started_with_learned_mss", "connections started with a learned MSS" },
	[SP_PM_LEARNED] = { "learned_from_connections", "connections that proved an MTU good" },
	[SP_PM_SUSPECTS] = { "black_hole_suspects", "RTOs that looked like a black hole" },
	[SP_PM_EVENTS_LOST] = { "events_lost", "searches asked but lost: ring buffer full" },
	[SP_PM_ACCEPTS] = { "accepts", "passive opens seen" },
	[SP_PM_ASKED] = { "searches_asked", "first connections to a destination not known: search asked" },
	[SP_PM_WOULD_CLAMP] = { "would_clamp", "enforce=0: connections that would have started with a learned MSS" },
	[SP_PM_ASKS_LIMITED] = { "asks_limited", "new destinations not asked for: more than searches_per_s (burst 64)" },
	[SP_PM_CLAMP_REFUSED] = { "clamp_refused", "clamps the kernel refused: TCP_MAXSEG from sockops programs is 6.1 and later" },
	[SP_PM_PROOF_LEFT] = { "proofs_left_to_another", "connections to a destination not yet proved that did not wait for their proof: another connection began to within a second; they prove at an RTO, or at a close another module asked for" },
	[SP_PM_KERNEL] = { "learned_from_kernel", "paths learned from the kernel's own discoveries: ICMP reductions, its MTU probing (fentry kernels)" },
};
static const char *const states[] = { "learned", "suspect", "searched", "no_probe", "asked" };
static const char *const methods[] = { "", "echo", "syn", "icmp", "kernel" };

static const struct sp_field dst_cols[] = {
	{ "dst", SP_STRING, false, "", "destination (the prefix of its entry)" },
	{ "low_mtu", SP_GAUGE, false, "bytes", "largest size known to pass" },
	{ "high_mtu", SP_GAUGE, false, "bytes", "smallest size known not to pass; 0: none" },
	{ "low_mss", SP_GAUGE, false, "bytes", "the MSS later connections start with" },
	{ "state", SP_STRING, false, "state", "learned, suspect, searched, no_probe or asked" },
	{ "age_s", SP_GAUGE, true, "seconds", "since the entry last changed" },
	{ "probes", SP_COUNTER, false, "", "probes sent to it" },
	{ "clamped", SP_COUNTER, false, "", "connections started with its MSS" },
	{ "route_mtu", SP_GAUGE, false, "bytes", "MTU of our route to it; 0: none" },
	{ "method", SP_STRING, false, "state", "what answered its last search (echo, syn), or what the kernel found (icmp, kernel), or empty" },
	{ "port", SP_GAUGE, false, "", "TCP port of the SYN probes that answered; 0: none" },
	{ "probe_bytes", SP_COUNTER, false, "bytes", "IP bytes of the probes sent to it" },
};

/* Row order: connections started with its MSS, then probes sent to it (most first). */
static bool busier(const struct sp_val *a, const struct sp_val *b)
{
	return a[7].u != b[7].u ? a[7].u > b[7].u : a[6].u > b[6].u;
}

static int by_use(const void *a, const void *b)
{
	return busier(a, b) ? -1 : busier(b, a) ? 1 : 0;
}

/*
 * Every entry of the map is counted by state; the table holds the
 * SP_TABLE_ROWS (100) busiest, busiest first, so the metrics' top N
 * (run --metrics-top) are the destinations that matter, not map order.
 */
static void report(const char *pin_dir, struct sp_report *rep)
{
	int fd = sp_open_pinned(pin_dir, "pmtu_dsts");
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	struct sp_table *t;
	struct sp_val *row, cand[SP_TABLE_COLS];
	void *prev = NULL;
	__u64 now = pmtu_now_ns();
	long long by_state[5] = {};

	if (fd < 0)
		return;
	t = sp_table_add(rep, "destinations", "what is known of each destination's path MTU, "
			 "at most 100, by connections clamped, then probes",
			 dst_cols, sizeof(dst_cols) / sizeof(dst_cols[0]));
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		int v6 = next.family == AF_INET6, least = 0;

		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e))
			continue;
		if (e.state < 5)
			by_state[e.state]++;
		if (!t)
			continue;
		row = cand;
		memset(cand, 0, sizeof(cand));
		inet_ntop(v6 ? AF_INET6 : AF_INET, k.addr, row[0].s, sizeof(row[0].s));
		row[1].i = e.low;
		row[2].i = e.high;
		row[3].i = e.low ? e.low - (v6 ? 60 : 40) : 0;
		snprintf(row[4].s, sizeof(row[4].s), "%s", e.state < 5 ? states[e.state] : "?");
		row[5].d = (now - e.updated_ns) / 1e9;
		row[6].u = e.probes;
		row[7].u = e.clamped;
		row[8].i = e.route_mtu;
		snprintf(row[9].s, sizeof(row[9].s), "%s",
			 e.method < sizeof(methods) / sizeof(methods[0]) ? methods[e.method] : "?");
		row[10].i = e.port;
		row[11].u = e.probe_bytes;
		/* A full table: the new entry takes the place of the least busy, if busier. */
		if (t->nr_rows == SP_TABLE_ROWS) {
			for (int i = 1; i < t->nr_rows; i++)
				if (busier(t->rows[least], t->rows[i]))
					least = i;
			if (busier(cand, t->rows[least]))
				memcpy(t->rows[least], cand, sizeof(cand));
		} else if ((row = sp_table_row(t))) {
			memcpy(row, cand, sizeof(cand));
		}
	}
	close(fd);
	if (t)
		qsort(t->rows, t->nr_rows, sizeof(t->rows[0]), by_use);
	/* Whole-map counts: bounded series, whatever the table shows. */
	for (int i = 0; i < 5; i++)
		sp_rec_gauge(rep, "entries", states[i], by_state[i], "",
			     i == SP_PM_S_NOPROBE ? "destinations whose probes get no answer: not searched again "
			     "before they expire" : i == SP_PM_S_SEARCHED ? "destinations with a finished search" :
			     i == SP_PM_S_LEARNED ? "destinations learned from connections only" :
			     i == SP_PM_S_SUSPECT ? "destinations suspected of a black hole, search pending" :
			     "new destinations, search asked");
}

/*
 * What it learned, in words: the destinations with a size known to pass
 * (the first few named), those being searched, the connections started at
 * a learned MSS (or, under enforce=0, that would have been).
 */
static void say(const struct sp_report *r, struct sp_summary *s)
{
	const struct sp_table *t = sp_table_find(r, "destinations");
	int dst = sp_table_col(t, "dst"), low = sp_table_col(t, "low_mtu"), st = sp_table_col(t, "state");
	bool dry = sp_rec_find(r, "cfg", "enforce") && !sp_rec_num(r, "cfg", "enforce");
	int learned = 0, searching = 0, named = 0;
	char detail[sizeof(((struct sp_phrase *)0)->detail)] = "";
	size_t l = 0;
	struct sp_phrase *p;

	for (int i = 0; t && dst >= 0 && low >= 0 && st >= 0 && i < t->nr_rows; i++) {
		const struct sp_val *row = t->rows[i];

		if (!strcmp(row[st].s, "suspect") || !strcmp(row[st].s, "asked"))
			searching++;
		else if (row[low].i > 0)
			learned++;
		else
			continue;
		if (row[low].i <= 0 || named == 3 || l >= sizeof(detail))
			continue;
		l += snprintf(detail + l, sizeof(detail) - l, "%s%s %lld", named ? ", " : " (",
			      row[dst].s, row[low].i);
		named++;
	}
	p = sp_say(s, 0, learned, "learned %s {path|paths}");
	if (p && named && l < sizeof(detail))
		snprintf(p->detail, sizeof(p->detail), "%s%s)", detail, learned > named ? ", ..." : "");
	sp_say(s, 0, searching, "%s searching");
	if (dry)
		sp_say_rec(s, SP_SAY_COUNTER, r, "would_clamp",
			   "would have clamped %s {connection|connections}");
	else
		sp_say_rec(s, SP_SAY_COUNTER, r, "started_with_learned_mss", "clamped %s {connection|connections}");
	sp_say_rec(s, SP_SAY_COUNTER, r, "black_hole_suspects", "%s black-hole {suspect|suspects}");
	sp_say_rec(s, SP_SAY_COUNTER | SP_SAY_WARN, r, "events_lost",
		   "%s {search|searches} lost: ring buffer full");
	sp_say_rec(s, SP_SAY_COUNTER | SP_SAY_WARN, r, "clamp_refused",
		   "%s {clamp|clamps} refused by the kernel (TCP_MAXSEG from sockops: 6.1)");
}

const struct sp_module sp_mod_pmtu = {
	SP_MODULE(pmtu, struct sp_pmtu_cfg, pmtu_tunables),
	.summary = "learn each destination's path MTU once; start later connections at it",
	SP_COUNTERS(pmtu, counters),
	.needs_cgroup = true,
	.fit = fit,
	.start = start,
	.stop = stop,
	.report = report,
	.say = say,
	.persister = &pmtu_persister,
};
