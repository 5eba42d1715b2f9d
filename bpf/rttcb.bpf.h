/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Who may switch RTT_CB off: the ownership rule shared by the sockops
 * modules that want per-ACK callbacks (rehash, pmtu).
 *
 * RTT_CB runs every sockops program of the cgroup on every ACK of the
 * socket, and the flag word is per socket, not per program: a module that
 * switched it off while another still needed it would silence that one; a
 * module that never switched it off (pmtu before issue 28) made every
 * module run per ACK for the socket's life (8 runs per MB each).
 *
 * The rule: each module registers its need in rehash_rtt_need, one bit per
 * module, for as long as it has per-ACK work on the socket. The first to
 * register on a socket whose RTT_CB is off switches it on and marks it
 * owned (by stackpilot, not by that module). The module that withdraws the
 * last need switches it off, and only if owned: a flag some other program
 * (not stackpilot) set stays on. So ownership passes from module to module
 * with the needs, whatever subset is loaded and in whichever order the
 * programs run, and no module has to run per ACK to keep another's flag.
 *
 * Each module is its own BPF object: they share this one map because
 * libbpf pins it by name in the run's pin folder (pin_root_path, set by the
 * loader) and the next object to load reuses the pin. Its name starts with
 * "rehash_" only so that the loader's sweep of a killed run's pins (MODULE_
 * prefixes) takes it; pmtu uses it the same.
 *
 * Callers keep their own "registered" bit and call sp_rtt_need() only when
 * their need changes: the map costs a lookup per change, not per ACK.
 * Sockets are locked in every sockops callback: no races on the bits.
 */
#ifndef SP_RTTCB_BPF_H
#define SP_RTTCB_BPF_H

#define SP_RTT_NEED_REHASH	1
#define SP_RTT_NEED_PMTU	2

struct sp_rtt_need {
	__u8 need;	/* SP_RTT_NEED_*: modules with per-ACK work now */
	__u8 owned;	/* RTT_CB was off when a module here switched it on */
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, int);
	__type(value, struct sp_rtt_need);
} rehash_rtt_need SEC(".maps");

/*
 * Register (need) or withdraw this module's need of RTT_CB on the socket.
 * Returns 1 when this call switched RTT_CB on, 0 otherwise, -1 when the
 * need could not be registered (no socket, no memory): the caller tries
 * again at its next change.
 */
static __always_inline int sp_rtt_need(struct bpf_sock_ops *skops, __u8 bit, bool need)
{
	struct bpf_sock *bsk = skops->sk;
	struct sp_rtt_need *n;
	__u32 cur;

	if (!bsk)
		return -1;
	n = bpf_sk_storage_get(&rehash_rtt_need, bsk, NULL,
			       need ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!n)
		return -1;
	cur = skops->bpf_sock_ops_cb_flags;
	if (need) {
		n->need |= bit;
		if (!(cur & BPF_SOCK_OPS_RTT_CB_FLAG) &&
		    !bpf_sock_ops_cb_flags_set(skops, cur | BPF_SOCK_OPS_RTT_CB_FLAG)) {
			n->owned = 1;
			return 1;
		}
		return 0;
	}
	n->need &= ~bit;
#ifndef SP_MUTANT_RTT_NEVER_OFF	/* make mutants: RTT_CB stays on once a module asked */
	if (!n->need && n->owned) {
		/* Only the RTT bit: the other callbacks asked for stay. */
		if (cur & BPF_SOCK_OPS_RTT_CB_FLAG)
			bpf_sock_ops_cb_flags_set(skops, cur & ~BPF_SOCK_OPS_RTT_CB_FLAG);
		n->owned = 0;
	}
#endif
	return 0;
}

#endif
