// SPDX-License-Identifier: GPL-2.0
/*
 * rhfloor: what the least a sockops program can do costs per run on this
 * machine, as bpf_stats counts it: a program that only asks for RTT
 * callbacks at establishment (so it runs on every ACK, warm) and returns.
 * sp_rehash's "avg per run" is read beside it, in the same session: the
 * accounting's own clock reads and the callback's entry are in both.
 *   rhfloor CGROUP
 * Attaches to CGROUP through a BPF link (gone with the process), enables
 * run-time stats, prints "ready", and on SIGTERM or SIGINT prints
 * "runs RUN_CNT ns RUN_TIME_NS" and exits (the link closes with it).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), \
	.src_reg = (s), .off = (o), .imm = (i) })

static volatile sig_atomic_t stop;
static void on_signal(int sig) { stop = 1; }

int main(int argc, char **argv)
{
	const int op = offsetof(struct bpf_sock_ops, op);
	const int flags = offsetof(struct bpf_sock_ops, bpf_sock_ops_cb_flags);
	struct bpf_insn prog[] = {
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),		/* r6 = ctx */
		INSN(BPF_LDX | BPF_MEM | BPF_W, 2, 1, op, 0),		/* r2 = op */
		INSN(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 3, BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB),
		INSN(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 2, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		INSN(BPF_LDX | BPF_MEM | BPF_W, 2, 6, flags, 0),	/* flags | RTT_CB */
		INSN(BPF_ALU | BPF_OR | BPF_K, 2, 0, 0, BPF_SOCK_OPS_RTT_CB_FLAG),
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sock_ops_cb_flags_set),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	sigset_t set, old;
	int cg, fd, link, stats;

	if (argc != 2) {
		fprintf(stderr, "usage: rhfloor CGROUP\n");
		return 2;
	}
	cg = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (cg < 0) {
		fprintf(stderr, "rhfloor: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	fd = bpf_prog_load(BPF_PROG_TYPE_SOCK_OPS, "sp_floor", "GPL", prog,
			   sizeof(prog) / sizeof(prog[0]), NULL);
	if (fd < 0) {
		fprintf(stderr, "rhfloor: load: %s\n", strerror(-fd));
		return 1;
	}
	stats = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats < 0) {
		fprintf(stderr, "rhfloor: enable stats: %s\n", strerror(-stats));
		return 1;
	}
	link = bpf_link_create(fd, cg, BPF_CGROUP_SOCK_OPS, NULL);
	if (link < 0) {
		fprintf(stderr, "rhfloor: attach to %s: %s\n", argv[1], strerror(-link));
		return 1;
	}
	/* Blocked until sigsuspend(): a signal between the test and the wait
	 * is not lost. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, &old);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("ready\n");
	fflush(stdout);
	while (!stop)
		sigsuspend(&old);
	close(link);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		fprintf(stderr, "rhfloor: prog info: %s\n", strerror(errno));
		return 1;
	}
	printf("runs %llu ns %llu\n", (unsigned long long)info.run_cnt,
	       (unsigned long long)info.run_time_ns);
	return 0;
}
