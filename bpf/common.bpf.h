/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by every stackpilot BPF program. */
#ifndef SP_COMMON_BPF_H
#define SP_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "stackpilot.h"

/*
 * bpf_sock_ops_cb_flags_set() replaces the socket's whole flag word. Several
 * stackpilot modules run on the same socket, so each adds its bits to what
 * is already there; otherwise the last module to run would switch off the
 * callbacks the others asked for.
 */
static __always_inline void sp_cb_flags_or(struct bpf_sock_ops *skops, __u32 flags)
{
	__u32 cur = skops->bpf_sock_ops_cb_flags;

	if ((cur & flags) != flags)
		bpf_sock_ops_cb_flags_set(skops, cur | flags);
}

static __always_inline void sp_count(void *percpu_array, __u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(percpu_array, &idx);

	if (v)
		*v += n;	/* per-CPU slot: no atomic needed */
}

/* Ports of a sockops context, both in host order. */
static __always_inline __u16 sp_remote_port(const struct bpf_sock_ops *skops)
{
	return bpf_ntohl(skops->remote_port);
}

static __always_inline __u16 sp_local_port(const struct bpf_sock_ops *skops)
{
	return skops->local_port;
}

/*
 * Anyone with bpftool can write the config map: every value is brought back
 * into its declared range (stackpilot.h), and the declared defaults apply
 * when the map cannot be read.
 */
static __always_inline __u32 sp_cfg_value(__u32 v, __u32 min, __u32 max, __u32 def, int oor)
{
	if (v >= min && v <= max)
		return v;
	if (oor == SP_OOR_DEFAULT)
		return def;
	return v < min ? min : max;
}

#define SP_CFG_READ_ONE(m, name, min, max, def, oor, help) \
	out->name = m ? sp_cfg_value(m->name, min, max, def, oor) : def;

/*
 * SP_CFG_READ(foo, struct sp_foo_cfg, foo_cfg, SP_FOO_TUNABLES) defines
 * static void foo_cfg_read(struct sp_foo_cfg *out), reading the one-entry
 * array map foo_cfg.
 */
#define SP_CFG_READ(prefix, cfg_type, map, LIST)				\
static __always_inline void prefix##_cfg_read(cfg_type *out)			\
{										\
	__u32 zero = 0;								\
	const cfg_type *m = bpf_map_lookup_elem(&map, &zero);			\
										\
	LIST(SP_CFG_READ_ONE, m)						\
}

#endif /* SP_COMMON_BPF_H */
