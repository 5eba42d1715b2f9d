// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel feature probe (probe.h); `stackpilot probe` is cli/cmd_probe.c.
 *
 * Every answer comes from the kernel itself: libbpf's probes load a tiny
 * program or map of the kind asked about; BTF says which types, fields,
 * enum values and functions exist; fentry is loaded and attached for real,
 * because kernels with the BTF and the config still refuse it (lockdown,
 * or the EPERM this project's own CI machine gives). Version numbers are
 * only ever printed, never compared.
 */
#define _GNU_SOURCE	/* unshare() */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "core/probe.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
#ifndef SO_TXREHASH
#define SO_TXREHASH 74
#endif

const struct sp_feat_desc sp_feat_desc[SP_F_NR] = {
	[SP_F_SKC_TCP] = { "skc_to_tcp_sock", "bpf_skc_to_tcp_sock() in sockops programs", "5.10" },
	[SP_F_SK_STORAGE] = { "sk_storage", "socket-local storage maps", "5.2" },
	[SP_F_RINGBUF] = { "ringbuf", "the BPF ring buffer", "5.8" },
	[SP_F_NETNS_COOKIE] = { "netns_cookie", "network namespace cookies in sockops programs", "5.15" },
	[SP_F_TP_BTF] = { "tp_btf", "BTF-typed tracepoints (tp_btf)", "5.5" },
	[SP_F_KFREE_REASON] = { "kfree_skb_reason", "the drop reason of the kfree_skb tracepoint", "5.17" },
	[SP_F_FRAG_REASONS] = { "frag_drop_reasons", "drop reasons of IP reassembly (FRAG_REASM_TIMEOUT)", "6.2" },
	[SP_F_FOR_EACH] = { "for_each_map_elem", "bpf_for_each_map_elem()", "5.13" },
	[SP_F_TIMER] = { "bpf_timer", "BPF timers (bpf_timer)", "5.15" },
	[SP_F_LOOP] = { "bpf_loop", "bpf_loop()", "5.17" },
	[SP_F_TCX] = { "tcx", "tcx links on tc ingress", "6.6" },
	[SP_F_FENTRY] = { "fentry", "fentry/fexit programs", "5.5" },
	[SP_F_FENTRY_SK] = { "fentry_sk_storage", "socket storage in fentry/fexit programs", "5.11" },
	[SP_F_ATOMICS] = { "atomics", "BPF atomic fetch and compare-and-exchange", "5.12" },
	[SP_F_TXREHASH] = { "so_txrehash", "the SO_TXREHASH socket option", "5.18" },
	[SP_F_MAXSEG] = { "sockops_maxseg", "TCP_MAXSEG through bpf_setsockopt() in sockops programs", "6.1" },
	[SP_F_KERN_CTX] = { "kern_ctx", "bpf_cast_to_kern_ctx(): a program's context as the kernel's struct", "6.2" },
	[SP_F_WEAK_KFUNC] = { "weak_kfunc", "weak kfuncs (a call to a kernel function it lacks, in code never run)", "5.18" },
};

static bool probed, usable, maxseg_probed;
static bool has[SP_F_NR], forced_off[SP_F_NR];
static bool maxseg_ok(void);

bool sp_has(enum sp_feat f)
{
	if (!probed)
		sp_probe(NULL);
	/* Only a connection tells, so only when asked (pmtu's fit). */
	if (f == SP_F_MAXSEG && !maxseg_probed) {
		maxseg_probed = true;
		has[f] = !forced_off[f] && maxseg_ok();
	}
	return has[f];
}

/* A helper the verifier accepts in prog_type (libbpf loads a call to it). */
static bool helper_ok(enum bpf_prog_type t, enum bpf_func_id id)
{
	return libbpf_probe_bpf_helper(t, id, NULL) == 1;
}

static bool sockopt_ok(int level, int name)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
	__u64 v = 0;
	socklen_t l = name == SO_NETNS_COOKIE ? sizeof(__u64) : sizeof(int);

	if (fd < 0)
		return false;
	ok = !getsockopt(fd, level, name, &v, &l);
	close(fd);
	return ok;
}

#define INSN(c, d, s_, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s_), .off = (o), .imm = (i) })
#define R0_EXIT INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0), INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* A tiny program of prog_type loads: the verifier accepts insns. */
static bool load_ok(enum bpf_prog_type t, const struct bpf_insn *insns, size_t n)
{
	int fd = bpf_prog_load(t, "sp_probe", "GPL", insns, n, NULL);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* An atomic fetch-add on the stack: before 5.12 only a plain add loads. */
static bool atomics_ok(void)
{
	const struct bpf_insn insns[] = {
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 0),
		INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_1, -8, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 1),
		INSN(BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_10, BPF_REG_1, -8, BPF_ADD | BPF_FETCH),
		R0_EXIT,
	};

	return load_ok(BPF_PROG_TYPE_SCHED_CLS, insns, sizeof(insns) / sizeof(insns[0]));
}

/* bpf_cast_to_kern_ctx(ctx) in a tc program: the kfunc of that BTF id
 * exists and tc programs may call it. */
static bool kern_ctx_ok(int btf_id)
{
	const struct bpf_insn insns[] = {
		INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_KFUNC_CALL, 0, btf_id),
		R0_EXIT,
	};

	return btf_id > 0 && load_ok(BPF_PROG_TYPE_SCHED_CLS, insns, sizeof(insns) / sizeof(insns[0]));
}

/* A call to a kfunc libbpf left unresolved (a weak one the kernel lacks:
 * BTF id 0) on a branch never taken: from 5.18 the verifier drops it as
 * dead code; 5.13 to 5.17 check every kfunc call first and refuse the
 * program; before 5.13 a call never reached is never looked at. */
static bool weak_kfunc_ok(void)
{
	const struct bpf_insn insns[] = {
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
		INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 1, 0),
		INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_KFUNC_CALL, 0, 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};

	return load_ok(BPF_PROG_TYPE_SCHED_CLS, insns, sizeof(insns) / sizeof(insns[0]));
}

/*
 * Load (and attach) a tracing program on the BTF id: "r0 = 0; exit", or
 * with map_fd >= 0, bpf_sk_storage_get(map, ctx arg 0, 0, 0) first (the
 * first argument a struct sock *), which tracing programs may call from 5.11.
 */
static bool tracing_ok(enum bpf_attach_type type, int btf_id, int map_fd)
{
	const struct bpf_insn plain[] = { R0_EXIT };
	const struct bpf_insn sk[] = {
		INSN(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_2, BPF_REG_1, 0, 0),
		INSN(BPF_LD | BPF_IMM | BPF_DW, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd),
		INSN(0, 0, 0, 0, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_4, 0, 0, 0),
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sk_storage_get),
		R0_EXIT,
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = type, .attach_btf_id = btf_id);
	int fd, link;

	if (btf_id <= 0)
		return false;
	fd = map_fd >= 0 ? bpf_prog_load(BPF_PROG_TYPE_TRACING, "sp_probe", "GPL", sk, 8, &o) :
			   bpf_prog_load(BPF_PROG_TYPE_TRACING, "sp_probe", "GPL", plain, 2, &o);
	if (fd < 0)
		return false;
	link = bpf_raw_tracepoint_open(NULL, fd);
	close(fd);
	if (link < 0)
		return false;
	close(link);
	return true;
}

/* A socket storage map as pmtu_sk is (int values; its BTF is required). */
static int sk_storage_map(void)
{
	struct btf *btf = btf__new_empty();
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC,
		    .btf_key_type_id = 1, .btf_value_type_id = 1);
	int fd = -1;

	if (btf && btf__add_int(btf, "int", 4, BTF_INT_SIGNED) == 1 && !btf__load_into_kernel(btf)) {
		o.btf_fd = btf__fd(btf);
		fd = bpf_map_create(BPF_MAP_TYPE_SK_STORAGE, "sp_probe", 4, 4, 0, &o);
	}
	btf__free(btf);
	return fd;
}

static int btf_id(const struct btf *btf, const char *name, int kind)
{
	return btf ? btf__find_by_name_kind(btf, name, kind) : -1;
}

static bool enum_has(const struct btf *btf, const char *type, const char *value)
{
	int id = btf_id(btf, type, BTF_KIND_ENUM);
	const struct btf_type *t;
	const struct btf_enum *e;

	if (id <= 0)
		return false;
	t = btf__type_by_id(btf, id);
	e = btf_enum(t);
	for (int i = 0; i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, e[i].name_off), value))
			return true;
	return false;
}

/* The number of arguments of the tracepoint NAME's BTF prototype (with its ctx). */
static int tp_args(const struct btf *btf, const char *name)
{
	char tn[128];
	int id;
	const struct btf_type *t;

	snprintf(tn, sizeof(tn), "btf_trace_%s", name);
	id = btf_id(btf, tn, BTF_KIND_TYPEDEF);
	if (id <= 0)
		return -1;
	t = btf__type_by_id(btf, btf__resolve_type(btf, id));	/* the pointer */
	if (!t || !btf_is_ptr(t))
		return -1;
	t = btf__type_by_id(btf, t->type);
	return t && btf_is_func_proto(t) ? btf_vlen(t) : -1;
}

/*
 * TCP_MAXSEG from a sockops program: before 6.1, bpf_setsockopt() refuses
 * every SOL_TCP option but its own few (EINVAL); from 6.1 it goes through
 * do_tcp_setsockopt(). Nothing but a socket tells. A child process (in a
 * network namespace of its own where it may make one) attaches a sockops
 * program to its cgroup, ours, for as long as one loopback connection to a
 * port of its own takes; the program acts on that connection alone and
 * keeps what bpf_setsockopt() said. Where it cannot tell (no cgroup v2,
 * loopback down), the answer is yes: the load works, and pmtu counts
 * clamps the kernel refused (clamp_refused).
 */
static int maxseg_child(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	char mnt[PATH_MAX], line[PATH_MAX], path[2 * PATH_MAX] = "";
	struct ifreq ifr = { .ifr_name = "lo" };
	int lfd, cfd, map, prog, link, cg, s;
	__u32 zero = 0, rc = 1;
	FILE *f;

	if (!unshare(CLONE_NEWNET) && (s = socket(AF_INET, SOCK_DGRAM, 0)) >= 0) {
		ifr.ifr_flags = IFF_UP;
		ioctl(s, SIOCSIFFLAGS, &ifr);
		close(s);
	}
	sp_err_capture = line, sp_err_capture_len = sizeof(line), line[0] = '\0';
	s = sp_cgroup2_mount(mnt, sizeof(mnt));
	sp_err_capture = NULL;
	if (s || !(f = fopen("/proc/self/cgroup", "r")))
		return 2;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, sizeof(path), "%s%s", mnt, line + 3);
		}
	fclose(f);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (!path[0] || lfd < 0 || bind(lfd, (void *)&a, sizeof(a)) || listen(lfd, 1) ||
	    getsockname(lfd, (void *)&a, &al) || (cg = open(path, O_RDONLY | O_DIRECTORY)) < 0 ||
	    (map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sp_probe", 4, 4, 1, NULL)) < 0 ||
	    bpf_map_update_elem(map, &zero, &rc, BPF_ANY))
		return 2;
	{
		const struct bpf_insn insns[] = {
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0),
			INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_6, offsetof(struct bpf_sock_ops, op), 0),
			/* to "r0 = 1" at the end: insn 22 */
			INSN(BPF_JMP32 | BPF_JNE | BPF_K, BPF_REG_2, 0, 19, BPF_SOCK_OPS_TCP_CONNECT_CB),
			INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_6, offsetof(struct bpf_sock_ops, remote_port), 0),
			INSN(BPF_JMP32 | BPF_JNE | BPF_K, BPF_REG_2, 0, 17, (__s32)htonl(ntohs(a.sin_port))),
			INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 1000),
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_6, 0, 0),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, IPPROTO_TCP),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, TCP_MAXSEG),
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_4, BPF_REG_10, 0, 0),
			INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_4, 0, 0, -4),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_5, 0, 0, 4),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_setsockopt),
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_7, BPF_REG_0, 0, 0),
			INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -8, 0),
			INSN(BPF_LD | BPF_IMM | BPF_DW, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map),
			INSN(0, 0, 0, 0, 0),
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
			INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -8),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
			INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 1, 0),
			INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_7, 0, 0),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1),
			INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		};
		LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_CGROUP_SOCK_OPS);

		prog = bpf_prog_load(BPF_PROG_TYPE_SOCK_OPS, "sp_probe", "GPL", insns,
				     sizeof(insns) / sizeof(insns[0]), &o);
	}
	if (prog < 0 || (link = bpf_link_create(prog, cg, BPF_CGROUP_SOCK_OPS, NULL)) < 0)
		return 2;
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	s = cfd >= 0 && !connect(cfd, (void *)&a, sizeof(a));
	close(link);
	if (!s || bpf_map_lookup_elem(map, &zero, &rc) || rc == 1)
		return 2;	/* the program did not run on it */
	return rc ? 1 : 0;
}

static bool maxseg_ok(void)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return true;
	if (!pid)
		_exit(maxseg_child());
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 1);
}

int sp_probe(const char *btf_path)
{
	libbpf_print_fn_t print;
	struct btf *btf;
	const char *off;

	if (probed)
		return 0;
	probed = true;
	print = libbpf_set_print(NULL);	/* a probe that fails is an answer, not an error */
	btf = btf_path ? btf__parse(btf_path, NULL) : btf__load_vmlinux_btf();
	if (!btf || libbpf_get_error(btf))
		btf = NULL;

	/* Without the privileges to load anything, every answer would be "no". */
	usable = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SOCK_OPS, NULL) == 1;
	has[SP_F_SKC_TCP] = helper_ok(BPF_PROG_TYPE_SOCK_OPS, BPF_FUNC_skc_to_tcp_sock);
	has[SP_F_SK_STORAGE] = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_SK_STORAGE, NULL) == 1;
	has[SP_F_RINGBUF] = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	/* Both halves, or neither: the loader and the programs must name a
	 * namespace the same way. */
	has[SP_F_NETNS_COOKIE] = sockopt_ok(SOL_SOCKET, SO_NETNS_COOKIE) &&
				 helper_ok(BPF_PROG_TYPE_SOCK_OPS, BPF_FUNC_get_netns_cookie);
	has[SP_F_TP_BTF] = tracing_ok(BPF_TRACE_RAW_TP, btf_id(btf, "btf_trace_kfree_skb", BTF_KIND_TYPEDEF), -1);
	/* ctx, skb, location, reason (and later rx_sk). */
	has[SP_F_KFREE_REASON] = tp_args(btf, "kfree_skb") >= 4;
	has[SP_F_FRAG_REASONS] = has[SP_F_KFREE_REASON] &&
				 enum_has(btf, "skb_drop_reason", "SKB_DROP_REASON_FRAG_REASM_TIMEOUT");
	has[SP_F_FOR_EACH] = helper_ok(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_for_each_map_elem);
	has[SP_F_TIMER] = helper_ok(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_timer_init);
	has[SP_F_LOOP] = helper_ok(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_loop);
	has[SP_F_TCX] = enum_has(btf, "bpf_attach_type", "BPF_TCX_INGRESS");
	has[SP_F_FENTRY] = tracing_ok(BPF_TRACE_FENTRY, btf_id(btf, "tcp_sync_mss", BTF_KIND_FUNC), -1);
	if (has[SP_F_FENTRY]) {
		int map = sk_storage_map();

		has[SP_F_FENTRY_SK] = map >= 0 &&
			tracing_ok(BPF_TRACE_FEXIT, btf_id(btf, "tcp_sync_mss", BTF_KIND_FUNC), map);
		if (map >= 0)
			close(map);
	}
	has[SP_F_ATOMICS] = atomics_ok();
	has[SP_F_TXREHASH] = sockopt_ok(SOL_SOCKET, SO_TXREHASH);
	has[SP_F_KERN_CTX] = kern_ctx_ok(btf_id(btf, "bpf_cast_to_kern_ctx", BTF_KIND_FUNC));
	has[SP_F_WEAK_KFUNC] = weak_kfunc_ok();
	btf__free(btf);
	libbpf_set_print(print);

	off = getenv("SP_PROBE_OFF");
	if (off && *off) {
		char buf[512], *tok, *save = NULL;

		snprintf(buf, sizeof(buf), "%s", off);
		for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			int f;

			for (f = 0; f < SP_F_NR && strcmp(sp_feat_desc[f].name, tok); f++)
				;
			if (f == SP_F_NR)
				return sp_err("SP_PROBE_OFF: unknown feature '%s' (see: stackpilot probe --json)", tok);
			has[f] = false;
			forced_off[f] = true;
		}
	}
	return 0;
}

/* Whether probing could run at all (as root); probes first if nobody has yet. */
bool sp_probe_usable(void)
{
	if (!probed)
		sp_probe(NULL);
	return usable;
}

bool sp_fit_need(struct sp_fit *fit, enum sp_feat f)
{
	if (sp_has(f))
		return true;
	if (!fit->refused)
		fit->refused = f + 1;
	return false;
}

void sp_fit_mech(struct sp_fit *fit, const char *what, const char *how, const char *cost)
{
	if (fit->nr < SP_FIT_MECHS)
		fit->mech[fit->nr++] = (struct sp_mech){ what, how, cost };
}

void sp_fit_choice(struct sp_fit *fit, const char *what, enum sp_feat f, const char *with,
		   const char *without, const char *cost)
{
	if (sp_has(f))
		sp_fit_mech(fit, what, with, NULL);
	else
		sp_fit_mech(fit, what, without, cost);
}

bool sp_fit_table(struct sp_fit *fit, const enum sp_feat *needs, int nr_needs,
		  const struct sp_choice *choices, int nr_choices)
{
	for (int i = 0; i < nr_needs; i++)
		if (!sp_fit_need(fit, needs[i]))
			return false;
	for (int i = 0; i < nr_choices; i++)
		sp_fit_choice(fit, choices[i].what, choices[i].f, choices[i].with, choices[i].without,
			      choices[i].cost);
	return true;
}

void sp_fit_refusal(const char *module, const struct sp_fit *fit, char *buf, size_t len)
{
	const struct sp_feat_desc *d = &sp_feat_desc[fit->refused - 1];

	snprintf(buf, len, "%s: needs %s (Linux %s), which this kernel lacks", module, d->what, d->since);
}

int sp_netns_id(unsigned long long *id)
{
	socklen_t l = sizeof(*id);
	struct stat st;
	int fd, err, e;

	if (!sp_has(SP_F_NETNS_COOKIE)) {
		if (stat("/proc/self/ns/net", &st))
			return -1;
		*id = st.st_ino;
		return 0;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	err = getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, id, &l);
	e = errno;
	close(fd);
	errno = e;
	return err ? -1 : 0;
}
