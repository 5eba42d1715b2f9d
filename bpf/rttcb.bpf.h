/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Who asked for RTT_CB on a socket. RTT_CB runs every sockops program of the
 * cgroup on every ACK, so a module asks for it only while it waits for
 * something per ACK (pmtu: a connection proving its MTU; rehash: a deferred
 * move or an open path-memory window) and gives it up after. The flag word
 * is one per socket, shared by every module: each module's ask is a bit of
 * this socket-local word, and the flag goes off when the last bit goes,
 * and only if a stackpilot module switched it on (SP_RTT_OURS): a flag that
 * was on before (another tool's program) stays on.
 *
 * The loader makes every module object of the process share one sp_rttcb
 * map (bpf_map__reuse_fd in sp_skel_load): each object declares it, the
 * first loaded creates it. Modules of two stackpilot processes on nested
 * cgroups do not share it: there, one may switch the flag off while the
 * other waits, and the other asks again at its next callback (docs/modules).
 */
#ifndef SP_RTTCB_BPF_H
#define SP_RTTCB_BPF_H

#include "common.bpf.h"

#define SP_RTT_PMTU	1u
#define SP_RTT_REHASH	2u
#define SP_RTT_OURS	0x80u	/* the flag was off when a module first asked */

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} sp_rttcb SEC(".maps");

/*
 * Ask for RTT_CB for module bit `who` (on) or give up its ask (off).
 * 0 once the ask is recorded (on) or withdrawn (off). Where no word can be
 * made (memory), an ask still switches the flag on, unowned: it is then never
 * switched off, which costs time, never a callback another module needs.
 */
static __always_inline int sp_rtt_want(struct bpf_sock_ops *skops, __u32 who, bool on)
{
	struct bpf_sock *sk = skops->sk;
	__u32 cur, *w;

	if (!sk)
		return -1;
	w = bpf_sk_storage_get(&sp_rttcb, sk, NULL, on ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	/* A fresh ctx load: clang would otherwise keep skops + offset in a
	 * register, and the verifier refuses a modified ctx pointer. */
	asm volatile("" : "+r"(skops));
	cur = skops->bpf_sock_ops_cb_flags;
	if (on) {
		if (cur & BPF_SOCK_OPS_RTT_CB_FLAG) {
			/* Already on: ours only if a module of ours set it. */
			if (w)
				*w |= who;
			return w ? 0 : -1;
		}
		if (bpf_sock_ops_cb_flags_set(skops, cur | BPF_SOCK_OPS_RTT_CB_FLAG))
			return -1;
		if (w)
			*w |= who | SP_RTT_OURS;
		return 0;
	}
	if (!w || !(*w & who))
		return 0;
	*w &= ~who;
#ifdef SP_MUTANT_RTT_OFF_ANY	/* make mutants: the first module done switches RTT_CB off for all */
	*w = SP_RTT_OURS;
#endif
	if (!(*w & ~SP_RTT_OURS) && (*w & SP_RTT_OURS)) {
		*w = 0;
		if (cur & BPF_SOCK_OPS_RTT_CB_FLAG)
			bpf_sock_ops_cb_flags_set(skops, cur & ~BPF_SOCK_OPS_RTT_CB_FLAG);
	}
	return 0;
}

#endif
