// SPDX-License-Identifier: GPL-2.0
/* tcpstats: loader side. See bpf/tcpstats.bpf.c. */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"
#include "tcpstats.skel.h"

static const struct sp_tunable tunables[] = {
	{ "port", offsetof(struct sp_tcpstats_cfg, port), 0, 65535, 0,
	  "count only connections with this local or remote port; 0 = all" },
};

struct priv {
	struct tcpstats_bpf *skel;
	struct bpf_link *link;
};

static struct priv st;

static void stop(struct sp_run *run)
{
	bpf_link__destroy(st.link);
	st.link = NULL;
	if (st.skel)
		sp_unpin_obj_maps(st.skel->obj, run->pin_dir);
	tcpstats_bpf__destroy(st.skel);
	st.skel = NULL;
}

static int start(struct sp_run *run)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	int err;

	st.skel = tcpstats_bpf__open_opts(&opts);
	if (!st.skel)
		return sp_err("tcpstats: open: %s", strerror(errno));
	err = tcpstats_bpf__load(st.skel);
	if (err)
		return sp_err("tcpstats: load: %s", strerror(-err));
	if (sp_cfg_write_defaults(&sp_mod_tcpstats, bpf_map__fd(st.skel->maps.tcpstats_cfg)) ||
	    sp_pin_obj_maps(st.skel->obj, run->pin_dir))
		return -1;
	st.link = bpf_program__attach_cgroup(st.skel->progs.sp_tcpstats, run->cgroup_fd);
	if (!st.link)
		return sp_err("tcpstats: attach to cgroup %s: %s", run->cgroup, strerror(errno));
	sp_run_add_prog(run, bpf_program__fd(st.skel->progs.sp_tcpstats));
	return 0;
}

static const char *const names[SP_TS_NR] = {
	[SP_TS_ACTIVE] = "active_opens", [SP_TS_PASSIVE] = "passive_opens",
	[SP_TS_RETRANS] = "retrans_segs", [SP_TS_RTO] = "rto",
};

static void status(const char *pin_dir, FILE *out, bool json)
{
	int fd = sp_open_pinned(pin_dir, "tcpstats_ctr");
	__u64 v;

	if (fd < 0)
		return;
	for (__u32 i = 0; i < SP_TS_NR; i++) {
		if (sp_sum_percpu(fd, i, &v))
			v = 0;
		if (json)
			fprintf(out, "%s\"%s\":%llu", i ? "," : "", names[i],
				(unsigned long long)v);
		else
			fprintf(out, "  %-14s %llu\n", names[i], (unsigned long long)v);
	}
	close(fd);
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
