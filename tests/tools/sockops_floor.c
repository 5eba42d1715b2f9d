// SPDX-License-Identifier: GPL-2.0
/*
 * sockops_floor CGROUP: attach an empty sockops program (return 1) to
 * CGROUP until stdin closes, and print its program id. What a sockops run
 * costs before it does anything (entry, the kernel's stats, exit): the part
 * of each module's run that one dispatching program would pay once per
 * event instead of once per module (make bench: bench_overhead).
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>

int main(int argc, char **argv)
{
	struct bpf_insn empty[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int prog, cg, link;
	char c;

	if (argc != 2) {
		fprintf(stderr, "usage: sockops_floor CGROUP\n");
		return 2;
	}
	cg = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (cg < 0)
		return perror(argv[1]), 1;
	prog = bpf_prog_load(BPF_PROG_TYPE_SOCK_OPS, "sp_floor", "GPL", empty, 2, NULL);
	if (prog < 0)
		return perror("sockops_floor: load"), 1;
	/* A link: it goes with this process, whatever ends it. */
	link = bpf_link_create(prog, cg, BPF_CGROUP_SOCK_OPS, NULL);
	if (link < 0)
		return perror("sockops_floor: attach"), 1;
	if (bpf_obj_get_info_by_fd(prog, &info, &len))
		return perror("sockops_floor: info"), 1;
	printf("%u\n", info.id);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
