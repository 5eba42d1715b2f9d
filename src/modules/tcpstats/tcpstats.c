// SPDX-License-Identifier: GPL-2.0
/* tcpstats: loader side. See bpf/tcpstats.bpf.c. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "tcpstats.skel.h"

static const struct sp_tunable tunables[] = {
	SP_TCPSTATS_TUNABLES(SP_TUNABLE_ROW, struct sp_tcpstats_cfg)
};

struct tcpstats_inst {
	struct tcpstats_bpf *skel;
	struct bpf_link *link;
};

static void stop(struct sp_run *run, void *inst)
{
	struct tcpstats_inst *in = inst;

	if (!in)
		return;
	if (in->skel)
		sp_module_unpublish(run, in->skel->obj, &in->link);
	tcpstats_bpf__destroy(in->skel);
	free(in);
}

static int start(struct sp_run *run, void **inst)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	struct tcpstats_inst *in = calloc(1, sizeof(*in));
	int err;

	if (!(*inst = in))
		return sp_err("tcpstats: %s", strerror(ENOMEM));
	in->skel = tcpstats_bpf__open_opts(&opts);
	if (!in->skel)
		return sp_err("tcpstats: open: %s", strerror(errno));
	err = tcpstats_bpf__load(in->skel);
	if (err)
		return sp_err("tcpstats: load: %s", strerror(-err));
	return sp_module_publish(run, &sp_mod_tcpstats, in->skel->obj, in->skel->progs.sp_tcpstats,
				 &in->link);
}

/* Sockops and a cgroup link: every kernel stackpilot knows (5.10 and later). */
static void fit(struct sp_fit *f)
{
}

static const struct sp_counter counters[SP_TS_NR] = {
	[SP_TS_ACTIVE] = { "active_opens", "connections opened from the cgroup" },
	[SP_TS_PASSIVE] = { "passive_opens", "connections accepted in the cgroup" },
	[SP_TS_RETRANS] = { "retrans_segs", "retransmitted segments" },
	[SP_TS_RTO] = { "rto", "retransmission timeouts" },
};

const struct sp_module sp_mod_tcpstats = {
	.name = "tcpstats",
	.summary = "per-cgroup TCP counters: connections, retransmitted segments, RTOs",
	.cfg_map = "tcpstats_cfg",
	.cfg_size = sizeof(struct sp_tcpstats_cfg),
	.tunables = tunables,
	.nr_tunables = sizeof(tunables) / sizeof(tunables[0]),
	.counter_map = "tcpstats_ctr",
	.counters = counters,
	.nr_counters = SP_TS_NR,
	.needs_cgroup = true,
	.fit = fit,
	.start = start,
	.stop = stop,
};
