/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the BPF programs (bpf/, built against vmlinux.h) and the loader
 * (src/, built against <linux/types.h>). Fixed-width types only, so the
 * layout is the same on both sides and bpftool shows it by BTF.
 *
 * One section per module. Every tunable is a __u32 field of the module's
 * config struct, so the loader handles them all the same way and an
 * operator can write any of them with one `bpftool map update`.
 */
#ifndef STACKPILOT_H
#define STACKPILOT_H

#define SP_PIN_DEFAULT	"/sys/fs/bpf/stackpilot"

/*
 * Sockops sharing. Every module that needs sockops has its own program,
 * attached to the same cgroup with BPF_F_ALLOW_MULTI (a bpf_link), and
 * enables its callbacks with sp_cb_flags_or() (bpf/common.bpf.h), which ORs
 * into the socket's current flags instead of replacing them. Modules stay
 * independent (one BPF file each) and can be loaded in any combination.
 */

/* ---- tcpstats: per-cgroup TCP counters ---------------------------------- */

enum sp_tcpstats_ctr {
	SP_TS_ACTIVE,		/* connections opened from the cgroup */
	SP_TS_PASSIVE,		/* connections accepted in the cgroup */
	SP_TS_RETRANS,		/* retransmitted segments */
	SP_TS_RTO,		/* retransmission timeouts */
	SP_TS_NR,
};

struct sp_tcpstats_cfg {
	/*
	 * Count only connections whose local or remote port is this one;
	 * 0 counts every connection. A value above 65535 (only possible from
	 * outside, e.g. bpftool) is ignored: the program counts everything.
	 */
	__u32 port;
};

/* ---- loader bookkeeping ------------------------------------------------- */

#define SP_MAX_IFACES	8
#define SP_MAX_PROGS	16

/* Value of the pinned "meta" map: what a running `stackpilot run` did. */
struct sp_meta {
	__u32 pid;
	__u32 modules;		/* bit i = sp_modules[i] loaded */
	__u64 cgroup_id;
	__u64 started_ns;	/* CLOCK_MONOTONIC */
	__u32 nr_ifaces;
	__u32 ifindex[SP_MAX_IFACES];
	__u32 nr_progs;
	__u32 prog_ids[SP_MAX_PROGS];	/* for run counts and times */
	char cgroup[256];
};

#endif /* STACKPILOT_H */
