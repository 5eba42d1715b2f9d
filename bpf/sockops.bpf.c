// SPDX-License-Identifier: GPL-2.0
/*
 * The one sockops program a run attaches to its cgroup: the events some
 * module reads go down the run's chain of module programs (chain.bpf.h).
 */
#include "chain.bpf.h"

char LICENSE[] SEC("license") = "GPL";

SEC("sockops")
int sp_sockops(struct bpf_sock_ops *skops)
{
	__u32 op = skops->op;

	if (op >= 64 || !(SP_CHAIN_OPS & (1ull << op)))
		return 1;
	bpf_tail_call(skops, &sp_chain, 0);
	return 1;
}
