// SPDX-License-Identifier: GPL-2.0
/* tcpstats: loader side. See bpf/tcpstats.bpf.c. */
#include <stddef.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "tcpstats.skel.h"

static const struct sp_tunable tunables[] = {
	SP_TCPSTATS_TUNABLES(SP_TUNABLE_ROW, struct sp_tcpstats_cfg)
};

/* The skeleton is all there is: the core loads it and attaches its sockops program. */
static void *open_skel(const struct bpf_object_open_opts *opts)
{
	return tcpstats_bpf__open_opts(opts);
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
	[SP_TS_CLOSED_SEGS] = { "closed_segs_out", "segments sent by connections that closed" },
	[SP_TS_CLOSED_RETRANS] = { "closed_retrans_segs",
				   "segments retransmitted by connections that closed" },
};

/*
 * What it counted, in words (export/ lays them out); the share
 * retransmitted once a connection closed (the totals come at close).
 */
static void say(const struct sp_report *r, struct sp_summary *s)
{
	double sent = sp_rec_num(r, NULL, "closed_segs_out");

	sp_say(s, SP_SAY_COUNTER, sp_rec_num(r, NULL, "active_opens") +
	       sp_rec_num(r, NULL, "passive_opens"), "%s {connection|connections}");
	if (sent)
		sp_say(s, SP_SAY_PCT, 100 * sp_rec_num(r, NULL, "closed_retrans_segs") / sent,
		       "%s of segments retransmitted (closed connections)");
	sp_say_rec(s, SP_SAY_COUNTER, r, "retrans_segs", "%s {segment|segments} retransmitted");
	sp_say_rec(s, SP_SAY_COUNTER, r, "rto", "%s {RTO|RTOs}");
}

const struct sp_module sp_mod_tcpstats = {
	SP_MODULE(tcpstats, struct sp_tcpstats_cfg, tunables),
	.summary = "per-cgroup TCP counters: connections, retransmitted segments, RTOs",
	SP_COUNTERS(tcpstats, counters),
	.needs_cgroup = true,
	.fit = fit,
	.open = open_skel,
	.say = say,
};
