// SPDX-License-Identifier: GPL-2.0
/* tcpstats: loader side. See bpf/tcpstats.bpf.c. */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "sp.h"
#include "tcpstats.skel.h"

static const struct sp_tunable tunables[] = {
	SP_TCPSTATS_TUNABLES(SP_TUNABLE_ROW, struct sp_tcpstats_cfg)
};

static struct tcpstats_bpf *skel;
static struct bpf_link *sp_link;

static void stop(struct sp_run *run)
{
	if (skel)
		sp_module_unpublish(run, skel->obj, &sp_link);
	tcpstats_bpf__destroy(skel);
	skel = NULL;
}

static int start(struct sp_run *run)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	int err;

	skel = tcpstats_bpf__open_opts(&opts);
	if (!skel)
		return sp_err("tcpstats: open: %s", strerror(errno));
	err = tcpstats_bpf__load(skel);
	if (err)
		return sp_err("tcpstats: load: %s", strerror(-err));
	return sp_module_publish(run, &sp_mod_tcpstats, skel->obj, skel->progs.sp_tcpstats, &sp_link);
}

static const char *const names[SP_TS_NR] = {
	[SP_TS_ACTIVE] = "active_opens", [SP_TS_PASSIVE] = "passive_opens",
	[SP_TS_RETRANS] = "retrans_segs", [SP_TS_RTO] = "rto",
};

static void status(const char *pin_dir, FILE *out, bool json)
{
	sp_print_counters(pin_dir, "tcpstats_ctr", names, SP_TS_NR, out, json);
}

const struct sp_module sp_mod_tcpstats = {
	.name = "tcpstats",
	.summary = "per-cgroup TCP counters: connections, retransmitted segments, RTOs",
	.cfg_map = "tcpstats_cfg",
	.cfg_size = sizeof(struct sp_tcpstats_cfg),
	.tunables = tunables,
	.nr_tunables = sizeof(tunables) / sizeof(tunables[0]),
	.needs_cgroup = true,
	.start = start,
	.stop = stop,
	.status = status,
};
