// SPDX-License-Identifier: GPL-2.0
/*
 * fragguard: loader side. Attaches the tc ingress program to each --iface
 * (a tcx link; a clsact filter only where the kernel lacks tcx, the qdisc
 * created only where none exists and removed only if made here),
 * counts the kernel's fragment drops with tp_btf/kfree_skb, and every 100 ms
 * feeds the namespace's real reassembly memory (sockstat) and thresholds
 * (sysctls) to the programs. The decisions are in bpf/fragguard.bpf.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"
#include "fragguard.skel.h"

static const struct sp_tunable tunables[] = {
	SP_FRAGGUARD_TUNABLES(SP_TUNABLE_ROW, struct sp_fg_cfg)
};

/* clsact filter identity: "SP". A rerun after kill -9 replaces a stale one. */
#define FG_TC_HANDLE	0x5350
#define FG_TC_PRIO	0x5350

static struct fragguard_bpf *skel;
static struct bpf_link *drops_link;
static bool hook_created[SP_MAX_IFACES], filter_attached[SP_MAX_IFACES];

#ifndef BPF_TCX_INGRESS
#define BPF_TCX_INGRESS 46	/* uapi headers before 6.6 lack it; the kernel has it */
#endif

/*
 * The tc program is attached through a tcx link where the kernel has tcx:
 * the link is this process's fd, so the program goes when the run goes,
 * kill -9 included. A clsact filter, the fallback, outlives a killed run
 * (dropping with dead settings) until the next start replaces it.
 */
static int tcx_fd[SP_MAX_IFACES] = { [0 ... SP_MAX_IFACES - 1] = -1 };

static void stop(struct sp_run *run)
{
	for (int i = 0; i < run->nr_ifaces; i++) {
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = run->ifindex[i],
				    .attach_point = BPF_TC_INGRESS);
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = FG_TC_HANDLE,
				    .priority = FG_TC_PRIO);

		if (tcx_fd[i] >= 0)
			close(tcx_fd[i]);
		tcx_fd[i] = -1;
		if (filter_attached[i])
			bpf_tc_detach(&hook, &opts);
		if (hook_created[i]) {
			hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
			bpf_tc_hook_destroy(&hook);
		}
		filter_attached[i] = hook_created[i] = false;
	}
	bpf_link__destroy(drops_link);
	drops_link = NULL;
	if (skel)
		sp_unpin_obj_maps(skel->obj, run->pin_dir);
	fragguard_bpf__destroy(skel);
	skel = NULL;
}

/* Where tcx is missing: a clsact filter, replacing one a killed run left. */
static int attach_clsact(struct sp_run *run, int i, int prog_fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = run->ifindex[i],
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = FG_TC_HANDLE,
			    .priority = FG_TC_PRIO, .prog_fd = prog_fd,
			    .flags = BPF_TC_F_REPLACE);
	int err = bpf_tc_hook_create(&hook);

	if (err && err != -EEXIST)
		return sp_err("fragguard: clsact on %s: %s", run->ifname[i], strerror(-err));
	hook_created[i] = !err;
	err = bpf_tc_attach(&hook, &opts);
	if (err)
		return sp_err("fragguard: tc ingress on %s: %s", run->ifname[i], strerror(-err));
	filter_attached[i] = true;
	return 0;
}

static int attach_iface(struct sp_run *run, int i, int prog_fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = run->ifindex[i],
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, stale, .handle = FG_TC_HANDLE, .priority = FG_TC_PRIO);

	tcx_fd[i] = bpf_link_create(prog_fd, run->ifindex[i], BPF_TCX_INGRESS, NULL);
	if (tcx_fd[i] < 0) {
		if (errno != EINVAL && errno != EOPNOTSUPP)
			return sp_err("fragguard: tcx ingress on %s: %s", run->ifname[i], strerror(errno));
		sp_log(SP_LOG_WARN, "fragguard: no tcx on this kernel; a clsact filter on %s "
		       "instead (a killed run leaves it until the next start)", run->ifname[i]);
		return attach_clsact(run, i, prog_fd);
	}
	/* A clsact filter of ours is a killed older run's: it would drop with dead settings. */
	if (!bpf_tc_detach(&hook, &stale))
		sp_log(SP_LOG_INFO, "fragguard: removed a stale filter on %s left by a killed run",
		       run->ifname[i]);
	return 0;
}

static int start(struct sp_run *run)
{
	LIBBPF_OPTS(bpf_object_open_opts, oopts, .btf_custom_path = run->btf_path);
	int err, prog_fd;
	__u8 one = 1;

	skel = fragguard_bpf__open_opts(&oopts);
	if (!skel)
		return sp_err("fragguard: open: %s", strerror(errno));
	bpf_program__set_expected_attach_type(skel->progs.sp_fragguard, BPF_TCX_INGRESS);
	err = fragguard_bpf__load(skel);
	if (err)
		return sp_err("fragguard: load: %s", strerror(-err));
	if (sp_module_publish(run, &sp_mod_fragguard, skel->obj, NULL, NULL))
		return -1;
	prog_fd = bpf_program__fd(skel->progs.sp_fragguard);
	for (int i = 0; i < run->nr_ifaces; i++) {
		__u32 ifx = run->ifindex[i];

		if (attach_iface(run, i, prog_fd))
			return -1;
		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_ifs), &ifx, &one, BPF_ANY);
	}
	drops_link = bpf_program__attach(skel->progs.sp_fragguard_drops);
	if (!drops_link)
		return sp_err("fragguard: attach tp_btf/kfree_skb: %s", strerror(errno));
	sp_run_add_prog(run, prog_fd);
	sp_run_add_prog(run, bpf_program__fd(skel->progs.sp_fragguard_drops));
	return 0;
}

/* The device took our link (or clsact filter) with it. */
static void iface_gone(struct sp_run *run, int i)
{
	__u32 ifx = run->ifindex[i];

	if (tcx_fd[i] >= 0)
		close(tcx_fd[i]);
	tcx_fd[i] = -1;
	filter_attached[i] = hook_created[i] = false;
	if (skel)
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_ifs), &ifx);
}

static int iface_back(struct sp_run *run, int i, int old_ifindex)
{
	__u32 ifx = run->ifindex[i];
	__u8 one = 1;

	if (!skel || attach_iface(run, i, bpf_program__fd(skel->progs.sp_fragguard)))
		return -1;
	bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_ifs), &ifx, &one, BPF_ANY);
	return 0;
}

static const struct sp_target_ops target_ops = {
	.module = &sp_mod_fragguard, .iface_gone = iface_gone, .iface_back = iface_back,
};

__attribute__((constructor)) static void register_target_ops(void)
{
	sp_target_ops_register(&target_ops);
}

static unsigned long long read_ull(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* "FRAG: inuse N memory M" (sockstat) / "FRAG6: inuse N memory M" (sockstat6). */
static unsigned long long sockstat_frag_mem(const char *path, const char *tag)
{
	char line[256];
	unsigned long long inuse, mem = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, tag, strlen(tag)) &&
		    sscanf(line + strlen(tag), " inuse %llu memory %llu", &inuse, &mem) == 2)
			break;
	fclose(f);
	return mem;
}

static void tick(struct sp_run *run)
{
	struct sp_fg_global g[2] = {
		{ sockstat_frag_mem("/proc/net/sockstat", "FRAG:"),
		  read_ull("/proc/sys/net/ipv4/ipfrag_high_thresh"),
		  read_ull("/proc/sys/net/ipv4/ipfrag_time") * 1000000000ULL },
		{ sockstat_frag_mem("/proc/net/sockstat6", "FRAG6:"),
		  read_ull("/proc/sys/net/ipv6/ip6frag_high_thresh"),
		  read_ull("/proc/sys/net/ipv6/ip6frag_time") * 1000000000ULL },
	};

	if (!skel)
		return;
	for (__u32 i = 0; i < 2; i++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_glob), &i, &g[i], BPF_ANY);
}

static const char *const names[SP_FG_NR] = {
	[SP_FG_FRAGS] = "fragments",
	[SP_FG_MALFORMED] = "malformed", [SP_FG_ADMITTED] = "admitted",
	[SP_FG_REF_PEER] = "refused_peer_limit", [SP_FG_REF_SHARE] = "refused_fair_share",
	[SP_FG_REF_UNKNOWN] = "refused_unknown_pool", [SP_FG_REF_AGE] = "refused_age",
	[SP_FG_REF_FOLLOW] = "refused_followers", [SP_FG_DROPPED] = "dropped",
	[SP_FG_COMPLETED] = "completed", [SP_FG_EXPIRED] = "expired",
	[SP_FG_DISCARDED] = "discarded", [SP_FG_DUPS] = "duplicates",
	[SP_FG_REINIT] = "reinit", [SP_FG_UNTRACKED] = "untracked",
	[SP_FG_INEXACT] = "inexact", [SP_FG_PROMOTED] = "peers_promoted",
	[SP_FG_KNOWN_FULL] = "known_map_full",
	[SP_FG_K_TIMEOUT] = "kernel_drop_timeout", [SP_FG_K_DUP] = "kernel_drop_dup",
	[SP_FG_K_TOO_FAR] = "kernel_drop_too_far",
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

static void print_peers(const char *pin_dir, FILE *out, bool json, __u32 gen)
{
	struct top t = {};

	collect(pin_dir, "fragguard_known", true, &t);
	int known = t.total;
	collect(pin_dir, "fragguard_peers", false, &t);
	fprintf(out, json ? ",\"peers_known\":%d,\"peers_tracked\":%d,\"top_peers\":["
			  : "  peers: %d known, %d tracked; top by memory:\n",
		known, t.total);
	for (int i = 0; i < t.n; i++) {
		char a[INET6_ADDRSTRLEN];
		struct sp_fg_peer *v = &t.v[i];

		inet_ntop(t.k[i].family == AF_INET ? AF_INET : AF_INET6, t.k[i].addr, a, sizeof(a));
		fprintf(out, json ? "%s{\"peer\":\"%s\",\"known\":%s,\"mem\":%lld,\"in_progress\":%u,"
				    "\"completed\":%u,\"expired\":%u,\"discarded\":%u,\"admitted\":%u,"
				    "\"refused\":%u,\"reputation_bytes\":%llu}"
				  : "%s    %-20s %-7s mem %-9lld in_progress %-5u completed %-7u expired %-6u discarded %-5u admitted %-7u refused %u\n",
			json && i ? "," : "", a, t.known[i] ? (json ? "true" : "known") : (json ? "false" : "unknown"),
			(long long)v->mem, v->gen == gen ? v->in_progress : 0, v->completed, v->expired,
			v->discarded, v->admitted, v->refused, json ? (unsigned long long)v->rep_bytes : 0ULL);
	}
	if (json)
		fprintf(out, "]");
}

static void print_global(const char *pin_dir, FILE *out, bool json)
{
	int fd = sp_open_pinned(pin_dir, "fragguard_glob");
	struct sp_fg_global g;

	if (fd < 0)
		return;
	for (__u32 i = 0; i < 2; i++) {
		if (bpf_map_lookup_elem(fd, &i, &g))
			continue;
		fprintf(out, json ? ",\"%s\":{\"mem\":%llu,\"high_thresh\":%llu,\"time_s\":%llu}"
				  : "  %s reassembly memory %llu of high_thresh %llu, timeout %llu s\n",
			i ? "ipv6" : "ipv4", (unsigned long long)g.mem,
			(unsigned long long)g.high_thresh, (unsigned long long)g.time_ns / 1000000000);
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
static __u32 print_agg(const char *pin_dir, FILE *out, bool json)
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
	fprintf(out, json ? ",\"tracked_mem\":{\"ipv4\":%lld,\"ipv6\":%lld},"
			    "\"unknown_mem\":{\"ipv4\":%lld,\"ipv6\":%lld},"
			    "\"active_peers\":%u,\"datagrams_in_progress\":%u"
			  : "  tracked memory ipv4 %lld ipv6 %lld (unknown pool %lld / %lld); "
			    "%u peers with %u datagrams in progress\n",
		mem[0], mem[1], (long long)a.unknown_mem[0],
		(long long)a.unknown_mem[1], a.active_peers, a.dgrams);
	return a.gen;
}

static void status(const char *pin_dir, FILE *out, bool json)
{
	__u32 gen;

	sp_print_counters(pin_dir, "fragguard_ctr", names, SP_FG_NR, out, json);
	print_global(pin_dir, out, json);
	gen = print_agg(pin_dir, out, json);
	print_peers(pin_dir, out, json, gen);
}

const struct sp_module sp_mod_fragguard = {
	.name = "fragguard",
	.summary = "per-peer IP fragment memory control at tc ingress of --iface devices",
	.cfg_map = "fragguard_cfg",
	.cfg_size = sizeof(struct sp_fg_cfg),
	.tunables = tunables,
	.nr_tunables = sizeof(tunables) / sizeof(tunables[0]),
	.needs_iface = true,
	.start = start,
	.stop = stop,
	.tick = tick,
	.status = status,
};
