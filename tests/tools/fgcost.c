// SPDX-License-Identifier: GPL-2.0
/*
 * fgcost: what a fragguard tc program costs per packet, each object side by
 * side with an empty tc program (the floor every tc program pays), two ways.
 *   fgcost [-S] [-n DATAGRAMS] OBJ...
 *   fgcost [-S] [-n DATAGRAMS] [-b BATCH] -i SENDIF,RECVIF OBJ...
 * OBJ: a fragguard BPF object (program sp_fragguard, maps fragguard_cfg and
 * fragguard_glob; the config's first six fields as in every version, any
 * later ones 0). Per object: ns per non-fragment, and per fragment of
 * 3-fragment 4000-byte datagrams from one peer. The peer becomes known after
 * its first datagram in every version (v2: known_kb and known_s 0, clamped
 * to 1 KiB). Its datagrams are measured from its second on: in the first
 * ipfrag_time after a peer becomes known (and takes its slots, since
 * 2026-12-06), a fragment not in its slots is looked for in the hash maps
 * too. -S (settled): ipfrag_time 1 s, and the measurement starts past it,
 * as for a peer known for longer; no difference to earlier versions.
 * Without -i: BPF_PROG_TEST_RUN on crafted frames, no network and no
 * bpf_stats clock reads; each fragment one system call (summed by position,
 * first / middle / last), so each starts with what the system call left in
 * the caches and TLB (all of it, where page-table isolation runs without
 * PCID).
 * With -i: the same frames through a veth pair of a network namespace the
 * caller made (SENDIF to RECVIF, RECVIF holding 10.9.0.1), BATCH of them a
 * sendmmsg() (default 64, a NAPI poll's budget) from this CPU: each is
 * received on it inside the send, before the next is sent, so between two
 * fragments runs the sender's code but no system call (no TLB flush, as
 * in a driver's poll). The program is on RECVIF's tc ingress and its time
 * is the kernel's run-time stats, their own clock reads cancelling against
 * the empty program's. They are on (BPF_ENABLE_STATS) for every program of
 * the host while fgcost runs: no sysctl is changed, and they go with it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "csum.h"

/* Test_run: lo's (zero) MAC, so the program sees PACKET_HOST. -i: RECVIF's. */
static __u8 mac_dst[6], mac_src[6] = { 2, 0, 0, 0, 0, 2 };

/* An IPv4 frame from 10.9.0.2 to 10.9.0.1. */
static int frame(__u8 *b, __u16 id, __u32 off, __u32 len, int mf, int frag)
{
	__u8 *ip = b + 14;

	memset(b, 0, 14 + 20 + len);
	memcpy(b, mac_dst, 6);
	memcpy(b + 6, mac_src, 6);
	memcpy(b + 12, "\x08\x00", 2);
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

/* -S: the program's peer made known, and ipfrag_time (1 s) left to pass. */
static bool settle;
static double train(int prog, int dgrams, int frag);

static void settle_peer(int prog, bool batched)
{
	static __u8 b[2000];

	if (!settle)
		return;
	/* The first makes it known, the second gives it its slots. */
	if (batched) {
		train(prog, 2, 1);
	} else {
		for (int i = 0; i < 6; i++) {
			LIBBPF_OPTS(bpf_test_run_opts, o, .data_size_in = frame(b, i / 3, i % 3 * 1480,
					i % 3 < 2 ? 1480 : 1040, i % 3 < 2, 1), .data_in = b, .repeat = 1);

			bpf_prog_test_run_opts(prog, &o);
		}
	}
	usleep(1300 * 1000);
}

static void measure(int prog, int dgrams, struct cost *c)
{
	static __u8 b[2000];
	int n = frame(b, 1, 0, 1400, 0, 0);

	c->plain = run(prog, b, n, 1000000);
	settle_peer(prog, false);
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

/* -i: the kernel's run-time stats of prog while BATCH frames at a time go
 * from SENDIF to RECVIF, the program on RECVIF's tc ingress. */
static int sock = -1, recv_ifindex, batch = 64;
static const char *recv_name;

static void prog_stats(int prog, __u64 *ns, __u64 *runs)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(prog, &info, &len)) {
		perror("fgcost: prog info");
		exit(1);
	}
	*ns = info.run_time_ns;
	*runs = info.run_cnt;
}

static void send_frames(struct mmsghdr *m, int n)
{
	for (int done = 0; done < n;) {
		int r = sendmmsg(sock, m + done, n - done, 0);

		if (r < 0) {
			perror("fgcost: sendmmsg");
			exit(1);
		}
		done += r;
	}
}

/* ns per run of prog over dgrams datagrams of 3 fragments (frag) or as many plain frames. */
static double train(int prog, int dgrams, int frag)
{
	static __u8 b[1024][1600];
	static struct mmsghdr m[1024];
	static struct iovec iov[1024];
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = recv_ifindex, .attach_point = BPF_TC_INGRESS);
	/* REPLACE: a run that died attached leaves its filter in the namespace. */
	LIBBPF_OPTS(bpf_tc_opts, tc, .handle = 1, .priority = 1, .prog_fd = prog,
		    .flags = BPF_TC_F_REPLACE);
	__u64 ns0, runs0, ns1, runs1;
	int q = 0;

	bpf_tc_hook_create(&hook);	/* EEXIST after the first */
	if (bpf_tc_attach(&hook, &tc)) {
		perror("fgcost: tc attach");
		exit(1);
	}
	prog_stats(prog, &ns0, &runs0);
	for (int i = 0; i < dgrams; i++)
		for (int k = 0; k < (frag ? 3 : 1); k++) {
			int n = frag ? frame(b[q], i, k * 1480, k < 2 ? 1480 : 1040, k < 2, 1) :
				       frame(b[q], i, 0, 1400, 0, 0);

			iov[q] = (struct iovec){ .iov_base = b[q], .iov_len = n };
			m[q].msg_hdr = (struct msghdr){ .msg_iov = &iov[q], .msg_iovlen = 1 };
			if (++q == batch) {
				send_frames(m, q);
				q = 0;
			}
		}
	send_frames(m, q);
	/* Received in the send, unless ksoftirqd took the backlog over. */
	for (int i = 0; i < 100; i++) {
		prog_stats(prog, &ns1, &runs1);
		if (runs1 - runs0 >= (__u64)dgrams * (frag ? 3 : 1))
			break;
		usleep(10000);
	}
	tc.flags = tc.prog_fd = tc.prog_id = 0;
	bpf_tc_detach(&hook, &tc);
	if (runs1 - runs0 < (__u64)dgrams * (frag ? 3 : 1)) {
		fprintf(stderr, "fgcost: %llu runs for %d frames: do the frames reach %s?\n",
			runs1 - runs0, dgrams * (frag ? 3 : 1), recv_name);
		exit(1);
	}
	return (double)(ns1 - ns0) / (runs1 - runs0);
}

static void measure_batched(int prog, int dgrams, struct cost *c)
{
	c->plain = train(prog, dgrams, 0);
	settle_peer(prog, true);
	c->frag = train(prog, dgrams, 1);
}

/* -i SENDIF,RECVIF: the packet socket, the MACs, this CPU, the stats. */
static int set_ifaces(char *arg)
{
	char *comma = strchr(arg, ',');
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP) };
	cpu_set_t cpu;
	int stats;

	if (!comma)
		return fprintf(stderr, "fgcost: -i %s: expected SENDIF,RECVIF\n", arg), -1;
	*comma = 0;
	ll.sll_ifindex = if_nametoindex(arg);
	recv_name = comma + 1;
	recv_ifindex = if_nametoindex(recv_name);
	if (!ll.sll_ifindex || !recv_ifindex)
		return fprintf(stderr, "fgcost: -i %s,%s: no such interface\n", arg, comma + 1), -1;
	for (int i = 0; i < 2; i++) {
		char path[64];
		__u8 *mac = i ? mac_dst : mac_src;
		FILE *f;
		int n;

		snprintf(path, sizeof(path), "/sys/class/net/%s/address", i ? comma + 1 : arg);
		f = fopen(path, "r");
		n = f ? fscanf(f, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", mac, mac + 1, mac + 2,
			       mac + 3, mac + 4, mac + 5) : 0;
		if (f)
			fclose(f);
		if (n != 6)
			return fprintf(stderr, "fgcost: %s: no MAC address\n", path), -1;
	}
	sock = socket(AF_PACKET, SOCK_RAW, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&ll, sizeof(ll)))
		return perror("fgcost: packet socket"), -1;
	/* Sender and receiver on one CPU, as a driver's poll and its stack are. */
	CPU_ZERO(&cpu);
	CPU_SET(sched_getcpu(), &cpu);
	sched_setaffinity(0, sizeof(cpu), &cpu);
	/* Held until exit: the stats go off with this process. */
	stats = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats < 0)
		return perror("fgcost: BPF_ENABLE_STATS"), -1;
	return 0;
}

/* Set the object's read-only bool NAME before load, if it has one (the
 * loader sets fg_kern_ctx where the kernel has the kfunc). */
static void rodata_bool(struct bpf_object *obj, const char *name, bool v)
{
	struct btf *btf = bpf_object__btf(obj);
	int id = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC) : -1;
	const struct btf_var_secinfo *var;
	const struct btf_type *sec;
	struct bpf_map *map;
	const char *init;
	size_t size;

	if (id < 0)
		return;
	map = bpf_object__find_map_by_name(obj, ".rodata");
	if (!map || !(init = bpf_map__initial_value(map, &size)))
		return;
	sec = btf__type_by_id(btf, id);
	var = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++, var++) {
		char data[size];

		if (strcmp(btf__name_by_offset(btf, btf__type_by_id(btf, var->type)->name_off), name) ||
		    var->size != 1 || var->offset >= size)
			continue;
		memcpy(data, init, size);
		data[var->offset] = v;
		bpf_map__set_initial_value(map, data, size);
	}
}

/* The object as the loader runs it here: bpf_cast_to_kern_ctx where it loads. */
static int load(const char *path, struct bpf_object **obj)
{
	__u32 cfg[64] = { 32, 64, 1 << 20, 100, 100, 1 }, zero = 0;
	/* Room for every version's value (three fields, then updated_ns = 0: never stale). */
	__u64 glob[4] = { 0, 1ULL << 32, settle ? 1000000000ULL : 30000000000ULL, 0 };
	struct bpf_program *p;
	struct bpf_map *m;

	for (int kern_ctx = 1; kern_ctx >= 0; kern_ctx--) {
		*obj = bpf_object__open_file(path, NULL);
		if (!*obj)
			break;
		/* The tc program alone: the others (tp_btf, fentry) need kernels that
		 * the loader chooses them for. */
		bpf_object__for_each_program(p, *obj)
			bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), "sp_fragguard"));
		rodata_bool(*obj, "fg_kern_ctx", kern_ctx);
		if (!bpf_object__load(*obj))
			break;
		bpf_object__close(*obj);
		*obj = NULL;
	}
	if (!*obj)
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
	/* r0 = -1 (TC_ACT_UNSPEC): the frame goes on, as fragguard lets it. */
	struct bpf_insn empty[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = -1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int dgrams = 20000, opt, e;
	void (*meas)(int, int, struct cost *) = measure;
	struct cost base, c;

	while ((opt = getopt(argc, argv, "Sn:b:i:")) != -1) {
		if (opt == 'S')
			settle = true;
		else if (opt == 'n')
			dgrams = atoi(optarg);
		else if (opt == 'b')
			batch = atoi(optarg);
		else if (opt == 'i' && set_ifaces(optarg))
			return 1;
		else if (opt == '?')
			dgrams = 0;
	}
	if (optind >= argc || dgrams < 1 || batch < 1 || batch > 1024 || (batch != 64 && sock < 0))
		return fprintf(stderr, "usage: fgcost [-S] [-n DATAGRAMS] [-b BATCH (1-1024) -i SENDIF,RECVIF] OBJ...\n"), 2;
	if (sock >= 0)
		meas = measure_batched;
	libbpf_set_print(NULL);
	e = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "empty", "GPL", empty, 2, NULL);
	if (e < 0)
		return perror("fgcost: empty program"), 1;
	if (sock >= 0)
		printf("| program | non-fragment, ns | fragment, ns |\n|---|---|---|\n");
	else
		printf("| program | non-fragment, ns | fragment, ns | first / middle / last, ns |\n"
		       "|---|---|---|---|\n");
	for (int i = optind; i < argc; i++) {
		struct bpf_object *obj;
		int f = load(argv[i], &obj);

		if (f < 0)
			return 1;
		/* The floor right before each object: the machine drifts. */
		meas(e, dgrams, &base);
		meas(f, dgrams, &c);
		printf("| %s (above an empty tc program) | %.1f | %.1f |", argv[i],
		       c.plain - base.plain, c.frag - base.frag);
		if (sock < 0)
			printf(" %.0f / %.0f / %.0f |", c.pos[0] - base.pos[0],
			       c.pos[1] - base.pos[1], c.pos[2] - base.pos[2]);
		printf("\n");
		bpf_object__close(obj);
	}
	if (sock >= 0)
		printf("| empty tc program (absolute: run-time stats, their clock reads included) | %.1f | %.1f |\n",
		       base.plain, base.frag);
	else
		printf("| empty tc program (absolute: test_run's own timing) | %.1f | %.1f | |\n",
		       base.plain, base.frag);
	return 0;
}
