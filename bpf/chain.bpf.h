/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One program run per socket event, whatever the modules on a cgroup.
 *
 * The kernel runs every sockops program attached to a cgroup at every
 * socket event, each through its own indirect call, and most events
 * (TIMEOUT_INIT, RWND_INIT, NEEDS_ECN: 3 of a short connection's 5) no
 * module reads. So a run attaches one program, sp_sockops
 * (bpf/sockops.bpf.c), which drops the events no module reads and
 * tail-calls slot 0 of the run's chain, a program array; each module's
 * sockops program does its work and tail-calls the slot after its own
 * (SP_SOCKOPS_MODULE). A tail call is a jump, not a program run: one
 * run, one indirect call, however many modules (docs/architecture.md).
 *
 * Each module stays its own object: loaded, refused or given a fallback
 * on its own, its own maps and verifier budget. The loader (core/chain.c)
 * makes every object of a run share one sp_chain map and gives each
 * module its slot (sp_chain_slot, before load: the verifier then sees a
 * constant and the JIT a direct jump); a slot left empty ends the chain.
 */
#ifndef SP_CHAIN_BPF_H
#define SP_CHAIN_BPF_H

#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SP_CHAIN_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} sp_chain SEC(".maps");

/* This module's slot in its run's chain: set by the loader before load. */
const volatile __u32 sp_chain_slot = 0;

/*
 * The ops some module reads (their switch statements): sp_sockops passes
 * only these down the chain. A module that reads another op adds it here.
 */
#define SP_CHAIN_OPS ((1ull << BPF_SOCK_OPS_TCP_CONNECT_CB) |		\
		      (1ull << BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) |	\
		      (1ull << BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) |	\
		      (1ull << BPF_SOCK_OPS_RETRANS_CB) |		\
		      (1ull << BPF_SOCK_OPS_RTO_CB) |			\
		      (1ull << BPF_SOCK_OPS_RTT_CB) |			\
		      (1ull << BPF_SOCK_OPS_STATE_CB))

/*
 * A module's sockops program: NAME runs BODY (the module's handler, its
 * return value unused: every module returns 1), then the next module.
 */
#ifdef SP_MUTANT_CHAIN_BROKEN	/* make mutants: no module runs after the first */
#define SP_CHAIN_NEXT(skops)
#else
#define SP_CHAIN_NEXT(skops) bpf_tail_call(skops, &sp_chain, sp_chain_slot + 1)
#endif
#define SP_SOCKOPS_MODULE(name, body)					\
SEC("sockops")								\
int name(struct bpf_sock_ops *skops)					\
{									\
	body(skops);							\
	SP_CHAIN_NEXT(skops);						\
	return 1;							\
}

#endif /* SP_CHAIN_BPF_H */
