// SPDX-License-Identifier: GPL-2.0
/*
 * tcpstats: TCP counters for the sockets of one cgroup (and its children).
 * The simplest stackpilot module, and the template for the others: one
 * sockops program, one config map of tunables, one per-CPU counter array.
 */
#include "chain.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_tcpstats_cfg);
} tcpstats_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SP_TS_NR);
	__type(key, __u32);
	__type(value, __u64);
} tcpstats_ctr SEC(".maps");

SP_CFG_READ(tcpstats, struct sp_tcpstats_cfg, tcpstats_cfg, SP_TCPSTATS_TUNABLES)

/*
 * Whether the connection counts: cfg.port selects it. A port above 65535,
 * or closes above 1, from outside reads as the default (0).
 */
static __always_inline bool port_selected(const struct bpf_sock_ops *skops,
					  struct sp_tcpstats_cfg *cfg)
{
	tcpstats_cfg_read(cfg);
#ifdef SP_MUTANT_TS_ANY_PORT	/* make mutants: every port counts */
	return true;
#endif
	if (cfg->port == 0)
		return true;
	return sp_local_port(skops) == cfg->port || sp_remote_port(skops) == cfg->port;
}

static __always_inline int tcpstats_ops(struct bpf_sock_ops *skops)
{
	struct sp_tcpstats_cfg cfg;
	__u32 op = skops->op;

	switch (op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (!port_selected(skops, &cfg))
			break;
		sp_count(&tcpstats_ctr, op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB ?
			 SP_TS_ACTIVE : SP_TS_PASSIVE, 1);
		/*
		 * STATE_CB only with closes on: the kernel then runs every
		 * sockops program of the cgroup at each of the connection's
		 * state changes (three or four, one of them the close), about
		 * 1 us of a short connection's 70 on veth
		 * (docs/bench/overhead.md), for one count at close.
		 */
#ifndef SP_MUTANT_TS_ALWAYS_STATE	/* make mutants: state callbacks whatever closes says */
		if (!cfg.closes)
			sp_cb_flags_or(skops, BPF_SOCK_OPS_RETRANS_CB_FLAG | BPF_SOCK_OPS_RTO_CB_FLAG);
		else
#endif
			sp_cb_flags_or(skops, BPF_SOCK_OPS_RETRANS_CB_FLAG |
					      BPF_SOCK_OPS_RTO_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		/*
		 * At close, the connection's own totals: the share of segments
		 * retransmitted, at one callback a connection, none a packet.
		 * args[1] = the new state. Another module's ask brings this
		 * callback with closes off too: then nothing is counted, or
		 * the totals would be of the connections other modules watch.
		 */
		if (skops->args[1] != BPF_TCP_CLOSE || !port_selected(skops, &cfg) || !cfg.closes)
			break;
		sp_count(&tcpstats_ctr, SP_TS_CLOSED_SEGS, skops->segs_out);
		sp_count(&tcpstats_ctr, SP_TS_CLOSED_RETRANS, skops->total_retrans);
		break;
	case BPF_SOCK_OPS_RETRANS_CB:
		/* Other modules may have enabled this callback on sockets we
		 * did not select: filter again. args[1] = segments, args[2] = err. */
		if (port_selected(skops, &cfg) && skops->args[2] == 0)
			sp_count(&tcpstats_ctr, SP_TS_RETRANS, skops->args[1]);
		break;
	case BPF_SOCK_OPS_RTO_CB:
		if (port_selected(skops, &cfg))
			sp_count(&tcpstats_ctr, SP_TS_RTO, 1);
		break;
	}
	return 1;
}

SP_SOCKOPS_MODULE(sp_tcpstats, tcpstats_ops)
