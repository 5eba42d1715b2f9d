// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu: loader side. The sockops program (bpf/pmtu.bpf.c) learns from
 * connections and reports black-hole suspects on a ring buffer; the loader
 * searches each suspect with DF probes (pmtu_search.c, pmtu_probe.c), writes
 * the result to the map and with pmtu.route=1 into a route MTU
 * (pmtu_route.c). This file: tunables, start/stop, --mtu-probing, status.
 * Probes run in the loader's network namespace: run stackpilot in the
 * namespace whose connections it serves (ip netns exec NS stackpilot run).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pmtu.h"
#include "pmtu.skel.h"
#include "state.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
#define MTU_PROBING "net/ipv4/tcp_mtu_probing"

static const struct sp_tunable tunables[] = {
	SP_PMTU_TUNABLES(SP_TUNABLE_ROW, struct sp_pmtu_cfg)
};

struct pmtu_state pmtu;
static int mtu_probing_arg = -1, saved_mtu_probing = -1;

__u64 pmtu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void pmtu_read_cfg(struct sp_pmtu_cfg *c)
{
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(pmtu.skel->maps.pmtu_cfg), &zero, c))
		memset(c, 0, sizeof(*c));
	/* Written from outside too: clamp as the BPF side does. */
	for (int i = 0; i < (int)(sizeof(tunables) / sizeof(tunables[0])); i++) {
		__u32 *v = (__u32 *)((char *)c + tunables[i].off);

		if (*v < tunables[i].min)
			*v = tunables[i].min;
		if (*v > tunables[i].max)
			*v = tunables[i].max;
	}
}

/* ---- --mtu-probing ------------------------------------------------------ */

static int set_mtu_probing(const char *arg)
{
	__u32 v;

	if (sp_parse_u32(arg, 0, 2, &v))
		return sp_fail(2, "--mtu-probing %s: expected 0, 1 or 2", arg);
	mtu_probing_arg = v;
	return 0;
}

static const struct sp_run_opt mtu_probing_opt = {
	.module = &sp_mod_pmtu, .name = "mtu-probing", .arg = "N",
	.help = "net.ipv4.tcp_mtu_probing = N (0-2) here while running",
	.set = set_mtu_probing,
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
static int apply_mtu_probing(void)
{
	char held[128];
	pid_t pid;
	int cur, err = 0;

	if (mtu_probing_arg < 0) {
		if (sp_sysctl_read(MTU_PROBING) == 0)
			sp_log(SP_LOG_WARN, "pmtu: net.ipv4.tcp_mtu_probing is 0 here: the kernel "
			       "never detects black holes itself; --mtu-probing 1 sets it for this run");
		return 0;
	}
	sp_state_lock();
	pid = sp_state_held("sysctl " MTU_PROBING " ", held, sizeof(held));
	cur = sp_sysctl_read(MTU_PROBING);
	if (pid)
		err = sp_err("pmtu: --mtu-probing: the run with pid %d already set tcp_mtu_probing "
			     "in this network namespace (%d now); only one run may", pid, cur);
	else if (cur < 0)
		err = sp_err("pmtu: cannot read net.ipv4.tcp_mtu_probing");
	else if (sp_state_add("sysctl " MTU_PROBING " %d %d", cur, mtu_probing_arg))
		err = -1;
	else if ((err = sp_sysctl_write(MTU_PROBING, mtu_probing_arg))) {
		sp_state_del("sysctl " MTU_PROBING " %d %d", cur, mtu_probing_arg);
		err = sp_err("pmtu: setting tcp_mtu_probing: %s", strerror(-err));
	} else {
		saved_mtu_probing = cur;
	}
	sp_state_unlock();
	return err;
}

/* ---- start / stop ------------------------------------------------------- */

static void stop(struct sp_run *run)
{
	pmtu_search_stop();
	pmtu_route_forget_all();
	if (saved_mtu_probing >= 0 && !sp_sysctl_write(MTU_PROBING, saved_mtu_probing))
		sp_state_del("sysctl " MTU_PROBING " %d %d", saved_mtu_probing, mtu_probing_arg);
	saved_mtu_probing = -1;
	if (pmtu.skel)
		sp_module_unpublish(run, pmtu.skel->obj, &pmtu.link);
	pmtu_bpf__destroy(pmtu.skel);
	pmtu.skel = NULL;
}

static int start(struct sp_run *run)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	socklen_t l = sizeof(pmtu.netns);
	int err, fd;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &pmtu.netns, &l))
		return sp_err("pmtu: reading this namespace's cookie: %s", strerror(errno));
	close(fd);
	/* Before anything is attached: a refused run leaves no trace, even briefly. */
	if (apply_mtu_probing())
		return -1;
	pmtu.skel = pmtu_bpf__open_opts(&opts);
	if (!pmtu.skel)
		return sp_err("pmtu: open: %s", strerror(errno));
	err = pmtu_bpf__load(pmtu.skel);
	if (err)
		return sp_err("pmtu: load: %s", strerror(-err));
	if (pmtu_search_start() ||
	    sp_module_publish(run, &sp_mod_pmtu, pmtu.skel->obj, pmtu.skel->progs.sp_pmtu, &pmtu.link))
		return -1;
	return 0;
}

/* ---- status ------------------------------------------------------------- */

static const char *const names[SP_PM_NR] = {
	[SP_PM_CONNECTS] = "connects", [SP_PM_CLAMPED] = "started_with_learned_mss",
	[SP_PM_LEARNED] = "learned_from_connections", [SP_PM_SUSPECTS] = "black_hole_suspects",
	[SP_PM_EVENTS_LOST] = "events_lost",
};
static const char *const states[] = { "learned", "suspect", "searched", "no_probe" };

static void status(const char *pin_dir, FILE *out, bool json)
{
	int fd = sp_open_pinned(pin_dir, "pmtu_dsts"), n = 0;
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	void *prev = NULL;
	__u64 now = pmtu_now_ns();

	sp_print_counters(pin_dir, "pmtu_ctr", names, SP_PM_NR, out, json);
	if (fd < 0)
		return;
	fprintf(out, json ? ",\"destinations\":[" : "  destinations:\n");
	while (!bpf_map_get_next_key(fd, prev, &next) && n < 100) {
		char a[INET6_ADDRSTRLEN];
		int v6 = next.family == AF_INET6;

		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e))
			continue;
		inet_ntop(v6 ? AF_INET6 : AF_INET, k.addr, a, sizeof(a));
		fprintf(out, json ? "%s{\"dst\":\"%s\",\"low_mtu\":%u,\"high_mtu\":%u,\"low_mss\":%u,"
				    "\"state\":\"%s\",\"age_s\":%.1f,\"probes\":%u,\"clamped\":%u,\"route_mtu\":%u}"
				  : "%s    %-24s low %-5u high %-5u mss %-5u %-9s age %.1fs probes %u clamped %u route %u\n",
			json && n ? "," : "", a, e.low, e.high, e.low ? e.low - (v6 ? 60 : 40) : 0,
			e.state < 4 ? states[e.state] : "?", (now - e.updated_ns) / 1e9, e.probes,
			e.clamped, e.route_mtu);
		n++;
	}
	if (json)
		fprintf(out, "]");
	close(fd);
}

const struct sp_module sp_mod_pmtu = {
	.name = "pmtu",
	.summary = "learn each destination's path MTU once; start later connections at it",
	.cfg_map = "pmtu_cfg",
	.cfg_size = sizeof(struct sp_pmtu_cfg),
	.tunables = tunables,
	.nr_tunables = sizeof(tunables) / sizeof(tunables[0]),
	.needs_cgroup = true,
	.start = start,
	.stop = stop,
	.status = status,
};
