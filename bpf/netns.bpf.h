/* SPDX-License-Identifier: GPL-2.0 */
/*
 * How the loader names a network namespace (sp_netns_id(), src/core/probe.c):
 * by its cookie, or by its inode number where sockops programs cannot read
 * cookies (before 5.15). Written before load; the branch not taken is dead
 * code the verifier never sees, so neither needs the other's kernel (on
 * 5.10 net_cookie is an atomic64_t, whose CO-RE read would not load).
 */
#ifndef SP_NETNS_BPF_H
#define SP_NETNS_BPF_H

#include <bpf/bpf_core_read.h>

const volatile bool sp_netns_by_ino = false;

static __always_inline __u64 sp_net_id(const struct net *net)
{
	if (sp_netns_by_ino)
		return BPF_CORE_READ(net, ns.inum);
	return BPF_CORE_READ(net, net_cookie);
}

#endif
