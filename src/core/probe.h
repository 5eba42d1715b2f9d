/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What this kernel offers stackpilot, found by trying, never by version
 * number (probe.c): libbpf's probes for program types, map types and
 * helpers, the kernel's BTF for types, fields and functions, a load of a
 * tiny program where only a load can tell (fentry), a socket option.
 *
 * Each module says from these what it needs (refused without) and what it
 * chooses between (its fit(), in its mod_*.c); `stackpilot probe` prints
 * both, `run` refuses or carries on with one line per module.
 */
#ifndef SP_PROBE_H
#define SP_PROBE_H

#include <stdbool.h>

enum sp_feat {
	SP_F_SKC_TCP,		/* bpf_skc_to_tcp_sock() in sockops: the tcp_sock behind a socket */
	SP_F_SK_STORAGE,	/* per-socket storage maps */
	SP_F_RINGBUF,		/* BPF ring buffer */
	SP_F_NETNS_COOKIE,	/* namespace cookies: SO_NETNS_COOKIE and bpf_get_netns_cookie() in sockops */
	SP_F_TP_BTF,		/* BTF-typed tracepoints (tp_btf) */
	SP_F_KFREE_REASON,	/* the kfree_skb tracepoint's drop reason argument */
	SP_F_FRAG_REASONS,	/* drop reasons of IP reassembly (FRAG_REASM_TIMEOUT, ...) */
	SP_F_FOR_EACH,		/* bpf_for_each_map_elem() */
	SP_F_TIMER,		/* bpf_timer */
	SP_F_LOOP,		/* bpf_loop() */
	SP_F_TCX,		/* tcx links on tc ingress */
	SP_F_FENTRY,		/* fentry/fexit programs load and attach */
	SP_F_FENTRY_SK,		/* ... and may use socket storage */
	SP_F_ATOMICS,		/* BPF atomics beyond a plain add: fetch, compare-and-exchange */
	SP_F_TXREHASH,		/* SO_TXREHASH */
	SP_F_MAXSEG,		/* TCP_MAXSEG through bpf_setsockopt() in sockops (probed at first ask) */
	SP_F_KERN_CTX,		/* bpf_cast_to_kern_ctx(): a program's ctx as the kernel's own struct */
	SP_F_WEAK_KFUNC,	/* a call to a kfunc the kernel lacks (weak, unresolved) in code never run */
	SP_F_NR
};

struct sp_feat_desc {
	const char *name;	/* for --json and SP_PROBE_OFF */
	const char *what;	/* what a user reads */
	const char *since;	/* the first mainline kernel with it */
};
extern const struct sp_feat_desc sp_feat_desc[SP_F_NR];

/*
 * Probe once (later calls return at once). btf_path: run --btf, or NULL.
 * SP_PROBE_OFF=NAME,... in the environment makes features count as missing:
 * how the tests run the fallbacks on a kernel that has the real thing.
 * 0, or -1 after saying why (no BTF at all).
 */
int sp_probe(const char *btf_path);
bool sp_has(enum sp_feat f);

/*
 * A module's fit to this kernel, from its fit(): refused for the first
 * missing feature it needs, or the mechanism it will use for each of its
 * choices and what a missing feature costs.
 */
#define SP_FIT_MECHS 6
struct sp_mech {
	const char *what;	/* "attach", "truesize", ... */
	const char *how;	/* what it uses here */
	const char *cost;	/* NULL when nothing is lost; else what the user loses */
};
struct sp_fit {
	int refused;		/* a missing enum sp_feat + 1; 0 = it runs */
	int nr;
	struct sp_mech mech[SP_FIT_MECHS];
};
/* In a fit(): false (and refused) when f is missing. */
bool sp_fit_need(struct sp_fit *fit, enum sp_feat f);
/* In a fit(): one mechanism line. */
void sp_fit_mech(struct sp_fit *fit, const char *what, const char *how, const char *cost);
/* In a fit(): "with" when the kernel has f, else "without" at that cost. */
void sp_fit_choice(struct sp_fit *fit, const char *what, enum sp_feat f, const char *with,
		   const char *without, const char *cost);
/* A mechanism the kernel may offer: "with" when it has f, else "without" at that cost. */
struct sp_choice {
	const char *what;
	enum sp_feat f;
	const char *with, *without, *cost;
};
/*
 * In a fit(), from the module's tables: what it cannot run without, in
 * order (the first missing is the refusal), then its choices. False when
 * refused: the choices are not looked at then.
 */
bool sp_fit_table(struct sp_fit *fit, const enum sp_feat *needs, int nr_needs,
		  const struct sp_choice *choices, int nr_choices);
/* "fragguard: needs bpf_loop() (Linux 5.17), which this kernel lacks" into buf. */
void sp_fit_refusal(const char *module, const struct sp_fit *fit, char *buf, size_t len);

/* Whether probing could run at all (as root): without, nothing is refused. */
bool sp_probe_usable(void);

/* The identity of this process's network namespace that the BPF side sees too:
 * its cookie, or its inode number where there are no cookies (SP_F_NETNS_COOKIE). */
int sp_netns_id(unsigned long long *id);

#endif
