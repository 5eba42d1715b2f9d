// SPDX-License-Identifier: GPL-2.0
/*
 * fragguard: loader side. Attaches the tc ingress program to each --iface
 * (a tcx link; a clsact filter only where the kernel lacks tcx, the qdisc
 * created only where none exists and removed only if made here),
 * counts the kernel's fragment drops with tp_btf/kfree_skb, and every 100 ms
 * feeds the namespace's real reassembly memory (sockstat) and thresholds
 * (sysctls) to the programs. The decisions are in bpf/fragguard.bpf.c;
 * status is in fragguard_report.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "modules/fragguard/fragguard.h"
#include "core/probe.h"
#include "core/state.h"
#include "fragguard.skel.h"

static const struct sp_tunable tunables[] = {
	SP_FRAGGUARD_TUNABLES(SP_TUNABLE_ROW, struct sp_fg_cfg)
};

/* clsact filter identity: "SP". A rerun after kill -9 replaces a stale one. */
#define FG_TC_HANDLE	0x5350
#define FG_TC_PRIO	0x5350

#ifndef BPF_TCX_INGRESS
#define BPF_TCX_INGRESS 46	/* uapi headers before 6.6 lack it; the kernel has it */
#endif

/*
 * The tc program is attached through a tcx link where the kernel has tcx:
 * the link is this process's fd, so the program goes when the run goes,
 * kill -9 included. A clsact filter, the fallback, outlives a killed run
 * (dropping with dead settings, then passing all once its heartbeat
 * stops): it is recorded in the namespace's state file before it is
 * attached ("fgfilter IFINDEX PROG_ID"), so that the next run in the
 * namespace removes it, whatever its modules (undo_filter()), and the
 * next fragguard start on the device replaces it.
 */
struct fg_inst {
	struct fragguard_bpf *skel;
	struct bpf_link *drops_link;	/* the kernel's reassembly drops: tp_btf, or fentry on its expiry */
	struct bpf_link *expire_link[2];
	int tcx_fd[SP_MAX_IFACES];
	bool hook_created[SP_MAX_IFACES], filter_attached[SP_MAX_IFACES];
	__u32 filter_prog[SP_MAX_IFACES];	/* the program of its state entry, 0: none */
	__u64 netns;		/* cookie of the namespace the interfaces are in */
	struct sp_fg_global glob[2];	/* what tick() read last, per family */
	unsigned int unread_said;	/* bit per source unreadable() warned of */
};

/* The state entry of the filter on --iface i: gone with the filter (or the device). */
static void filter_forget(struct sp_run *run, struct fg_inst *in, int i)
{
	if (in->filter_prog[i])
		sp_state_del("fgfilter %d %u", run->ifindex[i], in->filter_prog[i]);
	in->filter_prog[i] = 0;
}

/*
 * "fgfilter IFINDEX PROG_ID" of a killed run: its filter, if the device
 * still runs that program there (a later run's, or another's, is left).
 * The clsact qdisc stays: without filters it does nothing, and others' may
 * have been added to it since.
 */
static int undo_filter(const char *args)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = FG_TC_HANDLE, .priority = FG_TC_PRIO);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, ours, .handle = FG_TC_HANDLE, .priority = FG_TC_PRIO);
	unsigned int id;
	int err;

	if (sscanf(args, "%d %u", &hook.ifindex, &id) != 2)
		return -EINVAL;
	err = bpf_tc_query(&hook, &opts);
	if (err)	/* no such device, qdisc or filter any more */
		return err == -ENODEV || err == -EINVAL ? -ENOENT : err;
	return opts.prog_id == id ? bpf_tc_detach(&hook, &ours) : -ESRCH;
}

static const struct sp_state_undo filter_undo = { .kind = "fgfilter", .undo = undo_filter };

__attribute__((constructor)) static void register_undo(void)
{
	sp_state_undo_register(&filter_undo);
}

static void stop(struct sp_run *run, void *inst)
{
	struct fg_inst *in = inst;

	if (!in)
		return;
	for (int i = 0; i < run->nr_ifaces; i++) {
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = run->ifindex[i],
				    .attach_point = BPF_TC_INGRESS);
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = FG_TC_HANDLE,
				    .priority = FG_TC_PRIO);

		if (in->tcx_fd[i] >= 0)
			close(in->tcx_fd[i]);
		if (in->filter_attached[i])
			bpf_tc_detach(&hook, &opts);
		filter_forget(run, in, i);
		if (in->hook_created[i]) {
			hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
			bpf_tc_hook_destroy(&hook);
		}
	}
	bpf_link__destroy(in->drops_link);
	bpf_link__destroy(in->expire_link[0]);
	bpf_link__destroy(in->expire_link[1]);
	if (in->skel)
		sp_unpin_obj_maps(in->skel->obj, run->pin_dir);
	fragguard_bpf__destroy(in->skel);
	free(in);
}

/*
 * Where tcx is missing: a clsact filter, replacing one a killed run left;
 * on disk before it is attached, for the next run to remove if we are killed.
 */
static int attach_clsact(struct sp_run *run, struct fg_inst *in, int i, int prog_fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = run->ifindex[i],
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = FG_TC_HANDLE,
			    .priority = FG_TC_PRIO, .prog_fd = prog_fd,
			    .flags = BPF_TC_F_REPLACE);
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int err;

	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return sp_err("fragguard: its program's id: %s", strerror(errno));
	if (sp_state_add("fgfilter %d %u", run->ifindex[i], info.id))
		return -1;
	in->filter_prog[i] = info.id;
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		filter_forget(run, in, i);
		return sp_err("fragguard: clsact on %s: %s", run->ifname[i], strerror(-err));
	}
	in->hook_created[i] = !err;
	err = bpf_tc_attach(&hook, &opts);
	if (err) {
		filter_forget(run, in, i);
		return sp_err("fragguard: tc ingress on %s: %s", run->ifname[i], strerror(-err));
	}
	in->filter_attached[i] = true;
	return 0;
}

static int attach_iface(struct sp_run *run, struct fg_inst *in, int i, int prog_fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = run->ifindex[i],
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, stale, .handle = FG_TC_HANDLE, .priority = FG_TC_PRIO);

	in->tcx_fd[i] = sp_has(SP_F_TCX) ? bpf_link_create(prog_fd, run->ifindex[i], BPF_TCX_INGRESS, NULL) :
						(errno = EOPNOTSUPP, -1);
	if (in->tcx_fd[i] < 0) {
		if (errno != EINVAL && errno != EOPNOTSUPP)
			return sp_err("fragguard: tcx ingress on %s: %s", run->ifname[i], strerror(errno));
		sp_log(SP_LOG_WARN, "fragguard: no tcx on this kernel; a clsact filter on %s "
		       "instead (a killed run leaves it until the next start)", run->ifname[i]);
		return attach_clsact(run, in, i, prog_fd);
	}
	/* A clsact filter of ours is a killed older run's: it would drop with dead settings. */
	if (!bpf_tc_detach(&hook, &stale))
		sp_log(SP_LOG_INFO, "fragguard: removed a stale filter on %s left by a killed run",
		       run->ifname[i]);
	return 0;
}

/* No drop reasons for reassembly (before 6.2), but fentry on its timers. */
static bool expire_by_fentry(void)
{
	return !sp_has(SP_F_FRAG_REASONS) && sp_has(SP_F_FENTRY);
}

static void tick(struct sp_run *run, void *inst);

static int start(struct sp_run *run, void **inst)
{
	LIBBPF_OPTS(bpf_object_open_opts, oopts, .btf_custom_path = run->btf_path);
	struct fg_inst *in = sp_module_inst(&sp_mod_fragguard, sizeof(*in), inst);
	struct fragguard_bpf *skel;
	int prog_fd;

	if (!in)
		return -1;
	/* --iface names are looked up here: the interfaces are in our namespace. */
	if (sp_netns_id(&in->netns))
		return sp_err("fragguard: this namespace's identity: %s", strerror(errno));
	for (int i = 0; i < SP_MAX_IFACES; i++)
		in->tcx_fd[i] = -1;
	skel = in->skel = fragguard_bpf__open_opts(&oopts);
	if (!skel)
		return sp_err("fragguard: open: %s", strerror(errno));
	bpf_program__set_expected_attach_type(skel->progs.sp_fragguard, BPF_TCX_INGRESS);
	skel->rodata->sp_netns_by_ino = !sp_has(SP_F_NETNS_COOKIE);
	skel->rodata->fg_netns = in->netns;
	skel->rodata->fg_kern_ctx = sp_has(SP_F_KERN_CTX);
	/* The kernel's own expiry: its drop reasons, else fentry on its timers,
	 * else only the sweep (fit() below says what each costs). */
	bpf_program__set_autoload(skel->progs.sp_fragguard_drops, sp_has(SP_F_FRAG_REASONS));
	bpf_program__set_autoload(skel->progs.sp_fragguard_expire4, expire_by_fentry());
	bpf_program__set_autoload(skel->progs.sp_fragguard_expire6, expire_by_fentry());
	if (sp_skel_load(run, &sp_mod_fragguard, skel) ||
	    sp_module_publish(run, &sp_mod_fragguard, skel->obj, NULL))
		return -1;
	/* The first heartbeat before the first packet: a run killed before its
	 * first tick must leave a filter that goes quiet too (never written
	 * reads as alive). */
	tick(run, in);
	prog_fd = bpf_program__fd(skel->progs.sp_fragguard);
	for (int i = 0; i < run->nr_ifaces; i++) {
		__u32 ifx = run->ifindex[i];

		if (attach_iface(run, in, i, prog_fd))
			return -1;
		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_ifs), &ifx, &in->netns, BPF_ANY);
	}
	sp_run_add_prog(run, sp_mod_fragguard.name, skel->progs.sp_fragguard);
	if (sp_has(SP_F_FRAG_REASONS)) {
		in->drops_link = bpf_program__attach(skel->progs.sp_fragguard_drops);
		if (!in->drops_link)
			return sp_err("fragguard: attach tp_btf/kfree_skb: %s", strerror(errno));
		sp_run_add_prog(run, sp_mod_fragguard.name, skel->progs.sp_fragguard_drops);
	} else if (expire_by_fentry()) {
		struct bpf_program *p[2] = { skel->progs.sp_fragguard_expire4, skel->progs.sp_fragguard_expire6 };

		return sp_attach_progs(run, &sp_mod_fragguard, p, 2, in->expire_link);
	}
	return 0;
}

/* What this kernel lets fragguard do (stackpilot probe). The newest need first:
 * a refusal then names the kernel that has them all. */
static const enum sp_feat needs[] = { SP_F_WEAK_KFUNC, SP_F_LOOP, SP_F_TIMER, SP_F_FOR_EACH };
static const struct sp_choice choices[] = {
	{ "attach", SP_F_TCX, "tcx", "clsact",
	  "a run killed with SIGKILL leaves its filter attached until the next start "
	  "in the namespace removes it; from 2 s after the run's last tick it lets "
	  "every fragment through (orphaned)" },
};

static void fit(struct sp_fit *f)
{
	if (!sp_fit_table(f, needs, SP_LEN(needs), choices, SP_LEN(choices)))
		return;
	/* The kernel's own reassembly drops: expiries, restarts, duplicates. */
	if (sp_has(SP_F_FRAG_REASONS))
		sp_fit_mech(f, "kernel drops", "drop reasons", NULL);
	else if (expire_by_fentry())
		sp_fit_mech(f, "kernel drops", "fentry expiry",
			    "expiries are seen (ip_expire, ip6_frag_expire), restarts are not: an IPv4 "
			    "datagram the kernel restarts (ipfrag_max_dist) stays charged at its old "
			    "size until it completes or expires; kernel_drop_dup and "
			    "kernel_drop_too_far stay 0");
	else
		sp_fit_mech(f, "kernel drops", "sweep",
			    "a sweep every 250 ms releases what the kernel expired, up to 1/8 of "
			    "ipfrag_time late (3.75 s of 30 s); restarts (ipfrag_max_dist) are not "
			    "seen; kernel_drop_* stay 0");
}

/* The device took our link (or clsact filter) with it. */
static void iface_gone(struct sp_run *run, void *inst, int i)
{
	struct fg_inst *in = inst;
	__u32 ifx = run->ifindex[i];

	if (in->tcx_fd[i] >= 0)
		close(in->tcx_fd[i]);
	in->tcx_fd[i] = -1;
	in->filter_attached[i] = in->hook_created[i] = false;
	filter_forget(run, in, i);
	if (in->skel)
		bpf_map_delete_elem(bpf_map__fd(in->skel->maps.fragguard_ifs), &ifx);
}

static int iface_back(struct sp_run *run, void *inst, int i, int old_ifindex)
{
	struct fg_inst *in = inst;
	__u32 ifx = run->ifindex[i];

	if (!in->skel || attach_iface(run, in, i, bpf_program__fd(in->skel->progs.sp_fragguard)))
		return -1;
	bpf_map_update_elem(bpf_map__fd(in->skel->maps.fragguard_ifs), &ifx, &in->netns, BPF_ANY);
	return 0;
}

static const struct sp_target_ops target_ops = {
	.iface_gone = iface_gone, .iface_back = iface_back,
};

/*
 * The first number on the line of path that starts with tag (tag "": the
 * file's first line), as the kernel printed it: %lu or %d, so a negative
 * value reads as its two's complement. 0 when read, -1 when not.
 */
static int read_num(const char *path, const char *tag, unsigned long long *v)
{
	char line[256], *end;
	int err = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *p = line;

		if (strncmp(line, tag, strlen(tag)))
			continue;
		/* "FRAG: inuse N memory M": M */
		if (*tag && (p = strstr(line + strlen(tag), " memory ")))
			p += strlen(" memory ");
		if (p) {
			errno = 0;
			*v = strtoull(p, &end, 10);
			err = end == p || errno ? -1 : 0;
		}
		break;
	}
	fclose(f);
	return err;
}

static const struct {
	const char *mem, *tag, *high, *time;
} fg_sources[2] = {
	{ "/proc/net/sockstat", "FRAG:", "/proc/sys/net/ipv4/ipfrag_high_thresh",
	  "/proc/sys/net/ipv4/ipfrag_time" },
	{ "/proc/net/sockstat6", "FRAG6:", "/proc/sys/net/ipv6/ip6frag_high_thresh",
	  "/proc/sys/net/ipv6/ip6frag_time" },
};

/* A source that could not be read keeps the value last read (none before
 * the first: the program's defaults), said once per source. */
static void unreadable(struct fg_inst *in, int bit, const char *path)
{
	if (in->unread_said & 1u << bit)
		return;
	in->unread_said |= 1u << bit;
	sp_log(SP_LOG_WARN, "fragguard: cannot read %s; keeping %s", path,
	       in->glob[0].updated_ns ? "the value read before" : "the defaults");
}

/* Also the filter's heartbeat: without it for SP_FG_STALE_NS, it passes everything. */
static void tick(struct sp_run *run, void *inst)
{
	struct fg_inst *in = inst;
	struct timespec ts;
	unsigned long long v;

	if (!in->skel)
		return;
	for (int i = 0; i < 2; i++) {
		struct sp_fg_global *g = &in->glob[i];

		/* The kernel's memory is a long: below 0 is none. */
		if (!read_num(fg_sources[i].mem, fg_sources[i].tag, &v))
			g->mem = (long long)v < 0 ? 0 : v;
		else
			unreadable(in, 3 * i, fg_sources[i].mem);
		if (!read_num(fg_sources[i].high, "", &v))
			g->high_thresh = v;
		else
			unreadable(in, 3 * i + 1, fg_sources[i].high);
		/* An int of seconds; 0 or less and the kernel's timer expires
		 * a queue at its next tick: 1 ns here (0 is the program's
		 * "not written": 30 s). */
		if (!read_num(fg_sources[i].time, "", &v))
			g->time_ns = (long long)v <= 0 ? 1 : v > 1ULL << 31 ? 1ULL << 61 : v * 1000000000ULL;
		else
			unreadable(in, 3 * i + 2, fg_sources[i].time);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (__u32 i = 0; i < 2; i++) {
		in->glob[i].updated_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
		bpf_map_update_elem(bpf_map__fd(in->skel->maps.fragguard_glob), &i, &in->glob[i], BPF_ANY);
	}
}

const struct sp_module sp_mod_fragguard = {
	SP_MODULE(fragguard, struct sp_fg_cfg, tunables),
	.summary = "per-peer IP fragment memory control at tc ingress of --iface devices",
	SP_COUNTERS(fragguard, sp_fg_counters),
	.needs_iface = true,
	.fit = fit,
	.start = start,
	.stop = stop,
	.tick = tick,
	.report = sp_fg_report,
	.say = sp_fg_say,
	.target_ops = &target_ops,
};
