// SPDX-License-Identifier: GPL-2.0
/*
 * fgcost: what a fragguard tc program costs per packet, without a network
 * and without bpf_stats' own clock reads: BPF_PROG_TEST_RUN on crafted
 * frames, each object side by side with an empty tc program (the floor
 * every tc program pays here, test_run's own timing included).
 *   fgcost [-n DATAGRAMS] OBJ...
 * OBJ: a fragguard BPF object (program sp_fragguard, maps fragguard_cfg and
 * fragguard_glob; the config's first six fields as in every version, any
 * later ones 0). Per object: ns per non-fragment (a repeat loop), and per
 * fragment of 3-fragment 4000-byte datagrams from one peer (each fragment
 * one run, summed), by position. The peer becomes known after its first
 * datagram in every version (v2: known_kb and known_s 0, clamped to 1 KiB).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "csum.h"

/* An IPv4 frame to lo's (zero) MAC, so test_run sees PACKET_HOST. */
static int frame(__u8 *b, __u16 id, __u32 off, __u32 len, int mf, int frag)
{
	__u8 *ip = b + 14;

	memset(b, 0, 14 + 20 + len);
	memcpy(b + 6, "\x02\0\0\0\0\x02\x08\x00", 8);
	ip[0] = 0x45;
	*(__u16 *)(ip + 2) = htons(20 + len);
	*(__u16 *)(ip + 4) = htons(id);
	*(__u16 *)(ip + 6) = frag ? htons((mf ? 0x2000 : 0) | (off / 8)) : 0;
	ip[8] = 64;
	ip[9] = 17;
	inet_pton(AF_INET, "10.9.0.2", ip + 12);
	inet_pton(AF_INET, "10.9.0.1", ip + 16);
	*(__u16 *)(ip + 10) = ip_csum(ip, 20);
	return 14 + 20 + len;
}

/* ns for one run of prog on b (repeat > 1: the kernel's average). */
static double run(int prog, const void *b, int n, int repeat)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = b, .data_size_in = n, .repeat = repeat);

	if (bpf_prog_test_run_opts(prog, &o)) {
		perror("fgcost: test_run");
		exit(1);
	}
	return o.duration;
}

struct cost { double plain, frag, pos[3]; };

static void measure(int prog, int dgrams, struct cost *c)
{
	static __u8 b[2000];
	int n = frame(b, 1, 0, 1400, 0, 0);

	c->plain = run(prog, b, n, 1000000);
	c->frag = c->pos[0] = c->pos[1] = c->pos[2] = 0;
	for (int i = 0; i < dgrams; i++)
		for (int k = 0; k < 3; k++) {
			double t;

			n = frame(b, i, k * 1480, k < 2 ? 1480 : 1040, k < 2, 1);
			t = run(prog, b, n, 1);
			c->frag += t;
			c->pos[k] += t;
		}
	c->frag /= 3.0 * dgrams;
	for (int k = 0; k < 3; k++)
		c->pos[k] /= dgrams;
}

static int load(const char *path, struct bpf_object **obj)
{
	__u32 cfg[64] = { 32, 64, 1 << 20, 100, 100, 1 }, zero = 0;
	/* Room for every version's value (three fields, then updated_ns = 0: never stale). */
	__u64 glob[4] = { 0, 1ULL << 32, 30000000000ULL, 0 };
	struct bpf_program *p;
	struct bpf_map *m;

	*obj = bpf_object__open_file(path, NULL);
	/* The tc program alone: the others (tp_btf, fentry) need kernels that
	 * the loader chooses them for. */
	if (*obj)
		bpf_object__for_each_program(p, *obj)
			bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), "sp_fragguard"));
	if (!*obj || bpf_object__load(*obj))
		return fprintf(stderr, "fgcost: cannot load %s\n", path), -1;
	m = bpf_object__find_map_by_name(*obj, "fragguard_cfg");
	if (m && bpf_map__value_size(m) <= sizeof(cfg))
		bpf_map_update_elem(bpf_map__fd(m), &zero, cfg, BPF_ANY);
	m = bpf_object__find_map_by_name(*obj, "fragguard_glob");
	if (m)
		bpf_map_update_elem(bpf_map__fd(m), &zero, glob, BPF_ANY);
	p = bpf_object__find_program_by_name(*obj, "sp_fragguard");
	return p ? bpf_program__fd(p) : -1;
}

int main(int argc, char **argv)
{
	struct bpf_insn empty[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int dgrams = 20000, opt, e;
	struct cost base, c;

	while ((opt = getopt(argc, argv, "n:")) != -1)
		dgrams = opt == 'n' ? atoi(optarg) : dgrams;
	if (optind >= argc || dgrams < 1)
		return fprintf(stderr, "usage: fgcost [-n DATAGRAMS] OBJ...\n"), 2;
	libbpf_set_print(NULL);
	e = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "empty", "GPL", empty, 2, NULL);
	if (e < 0)
		return perror("fgcost: empty program"), 1;
	printf("| program | non-fragment, ns | fragment, ns | first / middle / last, ns |\n");
	printf("|---|---|---|---|\n");
	for (int i = optind; i < argc; i++) {
		struct bpf_object *obj;
		int f = load(argv[i], &obj);

		if (f < 0)
			return 1;
		/* The floor right before each object: the machine drifts. */
		measure(e, dgrams, &base);
		measure(f, dgrams, &c);
		printf("| %s (above an empty tc program) | %.1f | %.1f | %.0f / %.0f / %.0f |\n",
		       argv[i], c.plain - base.plain, c.frag - base.frag, c.pos[0] - base.pos[0],
		       c.pos[1] - base.pos[1], c.pos[2] - base.pos[2]);
		bpf_object__close(obj);
	}
	printf("| empty tc program (absolute: test_run's own timing) | %.1f | %.1f | |\n",
	       base.plain, base.frag);
	return 0;
}
