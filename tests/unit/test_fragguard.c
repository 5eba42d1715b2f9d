// SPDX-License-Identifier: GPL-2.0
/*
 * fragguard's tc program on crafted packets (bpf_prog_test_run_opts): parsing,
 * accounting and admission, without a network. Needs root. Prints PASS/FAIL
 * lines for tests/run.sh.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "stackpilot.h"
#include "fragguard.skel.h"

#define TC_ACT_OK	0
#define TC_ACT_SHOT	2

static struct fragguard_bpf *skel;
static int failures;

#define CHECK(name, cond) do {						\
	if (cond)							\
		printf("PASS fragguard/%s\n", name);			\
	else {								\
		printf("FAIL fragguard/%s: %s (line %d)\n", name, #cond, __LINE__); \
		failures++;						\
	}								\
} while (0)

static __u64 ctr(int idx)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 v[ncpu], sum = 0;
	__u32 k = idx;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_ctr), &k, v))
		return ~0ULL;
	for (int i = 0; i < ncpu; i++)
		sum += v[i];
	return sum;
}

static void set_global(int fam, __u64 mem, __u64 high, __u64 time_ns);

static void reset(void)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 z[ncpu];
	struct sp_fg_peer_key pk;
	__u8 dk[64];

	memset(z, 0, sizeof(z));
	for (__u32 k = 0; k < SP_FG_NR; k++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_ctr), &k, z, BPF_ANY);
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_peers), NULL, &pk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_peers), &pk);
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_known), NULL, &pk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_known), &pk);
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_dgram), NULL, dk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_dgram), dk);
	/* The pool sums of the datagrams just deleted (the timer field is kept). */
	{
		__u8 st[bpf_map__value_size(skel->maps.fragguard_state)];
		__u32 zero = 0;
		int fd = bpf_map__fd(skel->maps.fragguard_state);

		memset(st, 0, sizeof(st));
		bpf_map_update_elem(fd, &zero, st, BPF_ANY);
	}
	set_global(0, 0, 0, 0);
}

static void set_cfg(__u32 p4, __u32 p6, __u32 limit_kb, __u32 unknown, __u32 load, __u32 enforce)
{
	struct sp_fg_cfg c = { p4, p6, limit_kb, unknown, load, enforce };
	__u32 zero = 0;

	bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_cfg), &zero, &c, BPF_ANY);
}

static void set_global(int fam, __u64 mem, __u64 high, __u64 time_ns)
{
	struct sp_fg_global g = { mem, high, time_ns };
	__u32 k = fam;

	bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_glob), &k, &g, BPF_ANY);
}

static int run(const void *pkt, __u32 len)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = len, .repeat = 1);

	if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.sp_fragguard), &o))
		return -errno;
	return o.retval;
}

static __s64 peer_mem(const char *src4)
{
	struct sp_fg_peer_key k = { .family = AF_INET };
	struct sp_fg_peer v;

	inet_pton(AF_INET, src4, &k.addr[0]);
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_peers), &k, &v) &&
	    bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_known), &k, &v))
		return -1;
	return v.mem;
}

static __u16 csum(const void *p, int n)
{
	const __u16 *w = p;
	__u32 s = 0;

	for (; n > 1; n -= 2)
		s += *w++;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s;
}

/* Ethernet (+ nvlan 802.1Q tags) + IPv4 fragment with len payload bytes. */
static int mk4(__u8 *b, const char *src, __u16 id, __u32 off, __u32 len, int mf, int nvlan)
{
	int h = 12, ihl = 20;
	__u8 *ip;

	memset(b, 0, 14 + 8 + ihl + len);
	memcpy(b, "\x02\0\0\0\0\x01\x02\0\0\0\0\x02", 12);
	for (int i = 0; i < nvlan; i++, h += 4)
		memcpy(b + h, i == 0 && nvlan == 2 ? "\x88\xa8\0\x0a" : "\x81\x00\0\x0b", 4);
	memcpy(b + h, "\x08\x00", 2);
	ip = b + h + 2;
	ip[0] = 0x45;
	*(__u16 *)(ip + 2) = htons(ihl + len);
	*(__u16 *)(ip + 4) = htons(id);
	*(__u16 *)(ip + 6) = htons((mf ? 0x2000 : 0) | (off / 8));
	ip[8] = 64;
	ip[9] = 17;
	inet_pton(AF_INET, src, ip + 12);
	inet_pton(AF_INET, "10.99.0.1", ip + 16);
	*(__u16 *)(ip + 10) = csum(ip, 20);
	return h + 2 + ihl + len;
}

/* Ethernet + IPv6 + [hop-by-hop + destination options] + fragment header. */
static int mk6(__u8 *b, __u32 id, __u32 off, __u32 len, int mf, int exts)
{
	__u8 *ip = b + 14, *p;
	int ext = exts ? 16 : 0;

	memset(b, 0, 14 + 40 + ext + 8 + len);
	memcpy(b, "\x02\0\0\0\0\x01\x02\0\0\0\0\x02\x86\xdd", 14);
	ip[0] = 0x60;
	*(__u16 *)(ip + 4) = htons(ext + 8 + len);
	ip[6] = exts ? 0 : 44;
	ip[7] = 64;
	inet_pton(AF_INET6, "fd99::2", ip + 8);
	inet_pton(AF_INET6, "fd99::1", ip + 24);
	p = ip + 40;
	if (exts) {
		p[0] = 60; p[1] = 0; p[2] = 1; p[3] = 4;	/* hop-by-hop, PadN */
		p[8] = 44; p[9] = 0; p[10] = 1; p[11] = 4;	/* dest opts, PadN */
		p += 16;
	}
	p[0] = 17;
	*(__u16 *)(p + 2) = htons(off | (mf ? 1 : 0));
	*(__u32 *)(p + 4) = htonl(id);
	return 14 + 40 + ext + 8 + len;
}

static __u8 pkt[70000];

static void test_parsing(void)
{
	int n, rc;

	reset();
	/* A UDP packet that is not a fragment. */
	n = mk4(pkt, "10.0.0.1", 1, 0, 100, 0, 0);
	rc = run(pkt, n);
	CHECK("nonfragment_passes", rc == TC_ACT_OK && ctr(SP_FG_PKTS) == 1 && ctr(SP_FG_FRAGS) == 0);

	reset();
	n = mk4(pkt, "10.0.0.1", 2, 0, 1480, 1, 0);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 2, 1480, 1480, 1, 0);
	rc |= run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 2, 2960, 500, 0, 0);
	rc |= run(pkt, n);
	CHECK("in_order_completes", rc == TC_ACT_OK && ctr(SP_FG_FRAGS) == 3 &&
	      ctr(SP_FG_ADMITTED) == 1 && ctr(SP_FG_COMPLETED) == 1 && peer_mem("10.0.0.1") == 0);
	{
		struct sp_fg_peer_key k = { .family = AF_INET };
		struct sp_fg_peer v;

		inet_pton(AF_INET, "10.0.0.1", &k.addr[0]);
		CHECK("completion_makes_peer_known",
		      !bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_known), &k, &v) &&
		      v.completed == 1 &&
		      bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_peers), &k, &v));
	}

	reset();
	n = mk4(pkt, "10.0.0.1", 3, 2960, 500, 0, 0);	/* last first */
	rc = run(pkt, n);
	CHECK("last_first_held", ctr(SP_FG_COMPLETED) == 0 && peer_mem("10.0.0.1") > 0);
	n = mk4(pkt, "10.0.0.1", 3, 0, 1480, 1, 0);
	rc |= run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 3, 1480, 1480, 1, 0);
	rc |= run(pkt, n);
	CHECK("out_of_order_completes", rc == TC_ACT_OK && ctr(SP_FG_COMPLETED) == 1 &&
	      peer_mem("10.0.0.1") == 0);

	reset();
	n = mk4(pkt, "10.0.0.1", 4, 0, 1480, 1, 0);
	run(pkt, n);
	__s64 m1 = peer_mem("10.0.0.1");
	rc = run(pkt, n);	/* duplicate */
	CHECK("duplicate_not_charged", rc == TC_ACT_OK && peer_mem("10.0.0.1") == m1 && m1 > 0);
	n = mk4(pkt, "10.0.0.1", 4, 1480, 1480, 0, 0);
	run(pkt, n);
	CHECK("duplicate_then_complete", ctr(SP_FG_COMPLETED) == 1 && peer_mem("10.0.0.1") == 0);

	/* Overlap: the kernel discards the whole queue (RFC 5722); we pass it on. */
	reset();
	n = mk4(pkt, "10.0.0.1", 5, 0, 1480, 1, 0);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 5, 1000, 1480, 1, 0);
	rc |= run(pkt, n);
	CHECK("overlap_passes", rc == TC_ACT_OK && ctr(SP_FG_FRAGS) == 2 && ctr(SP_FG_MALFORMED) == 0);

	reset();
	n = mk6(pkt, 77, 0, 1232, 1, 1);
	rc = run(pkt, n);
	n = mk6(pkt, 77, 1232, 800, 0, 1);
	rc |= run(pkt, n);
	CHECK("ipv6_ext_headers_complete", rc == TC_ACT_OK && ctr(SP_FG_FRAGS) == 2 &&
	      ctr(SP_FG_COMPLETED) == 1);
	reset();
	n = mk6(pkt, 78, 0, 1232, 1, 0);
	run(pkt, n);
	n = mk6(pkt, 78, 1232, 100, 0, 0);
	run(pkt, n);
	CHECK("ipv6_plain_complete", ctr(SP_FG_COMPLETED) == 1);
	reset();
	n = mk6(pkt, 79, 0, 100, 0, 1);	/* atomic fragment */
	rc = run(pkt, n);
	CHECK("ipv6_atomic_fragment_not_tracked", rc == TC_ACT_OK && ctr(SP_FG_FRAGS) == 0);

	reset();
	n = mk4(pkt, "10.0.0.1", 6, 0, 1480, 1, 1);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 7, 0, 1480, 1, 2);
	rc |= run(pkt, n);
	CHECK("vlan_and_qinq_fragments_parsed", rc == TC_ACT_OK && ctr(SP_FG_FRAGS) == 2 &&
	      ctr(SP_FG_ADMITTED) == 2 && ctr(SP_FG_MALFORMED) == 0);

	/* Malformed fragments go to the kernel untouched. */
	reset();
	n = mk4(pkt, "10.0.0.1", 8, 0, 100, 1, 0);
	pkt[14] = 0x44;	/* IHL 4 */
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 9, 65528, 100, 0, 0);	/* offset + len > 65535 */
	rc |= run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 10, 1480, 0, 1, 0);	/* zero-length */
	rc |= run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 11, 0, 1480, 1, 0);
	rc |= run(pkt, n - 200);			/* truncated */
	n = mk6(pkt, 80, 8, 0, 1, 0);			/* IPv6 zero-length */
	rc |= run(pkt, n);
	CHECK("malformed_pass_untouched", rc == TC_ACT_OK && ctr(SP_FG_MALFORMED) == 5 &&
	      ctr(SP_FG_ADMITTED) == 0);
	/* Cut inside the IP header (behind a VLAN tag: test_run itself refuses a
	 * plain IPv4 frame this short). */
	n = mk4(pkt, "10.0.0.1", 12, 0, 1480, 1, 1);
	rc = run(pkt, 14 + 4 + 10);
	CHECK("short_header_passes", rc == TC_ACT_OK && ctr(SP_FG_ADMITTED) == 0);
}

static void test_admission(void)
{
	int n, rc, shot = 0, i;

	/* peer_limit 16 KiB: a few incomplete datagrams, then refusals. */
	reset();
	set_cfg(32, 64, 16, 100, 100, 1);
	for (i = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.0.7", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("peer_limit_refuses", shot > 0 && shot < 40 && ctr(SP_FG_REF_PEER) == (__u64)shot &&
	      peer_mem("10.0.0.7") <= 16 * 1024);
	n = mk4(pkt, "10.0.0.7", 100 + 39, 1480, 1480, 1, 0);	/* follower of a refused one */
	rc = run(pkt, n);
	CHECK("followers_of_refused_dropped", rc == TC_ACT_SHOT && ctr(SP_FG_REF_FOLLOW) == 1);
	n = mk4(pkt, "10.0.0.8", 500, 0, 1480, 1, 0);
	CHECK("other_peer_admitted", run(pkt, n) == TC_ACT_OK);
	n = mk4(pkt, "10.0.0.7", 1, 0, 100, 0, 0);
	CHECK("nonfragment_of_full_peer_passes", run(pkt, n) == TC_ACT_OK);
	/* Completing an admitted datagram still works for a full peer. */
	n = mk4(pkt, "10.0.0.7", 100, 1480, 100, 0, 0);
	CHECK("admitted_datagram_completes", run(pkt, n) == TC_ACT_OK && ctr(SP_FG_COMPLETED) == 1);

	/* Out-of-range tunables: limit 0 acts as 16 KiB, enforce 7 as 1. */
	reset();
	set_cfg(99, 999, 0, 0, 0, 7);
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.1.7", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("clamped_limit_and_enforce", shot > 0 && shot < 40 && peer_mem("10.0.1.7") > 0 &&
	      peer_mem("10.0.1.7") <= 16 * 1024);

	/* enforce=0 counts refusals but drops nothing. */
	reset();
	set_cfg(32, 64, 16, 100, 100, 0);
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.2.7", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("enforce_0_counts_only", shot == 0 && ctr(SP_FG_REF_PEER) > 0 && ctr(SP_FG_DROPPED) == 0);

	/* prefix4 24: two sources in one /24 are one peer. */
	reset();
	set_cfg(24, 64, 16, 100, 100, 1);
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, i % 2 ? "10.0.3.1" : "10.0.3.2", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("prefix_groups_peers", shot > 0 && peer_mem("10.0.3.0") > 0);

	/* Age limit: namespace full and the peer at its limit -> no more fragments. */
	reset();
	set_cfg(32, 64, 16, 100, 100, 1);
	n = mk4(pkt, "10.0.4.1", 1, 0, 1480, 1, 0);
	run(pkt, n);
	for (i = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.4.1", 100 + i, 0, 1480, 1, 0);
		run(pkt, n);
	}
	{	/* the peer at its limit, exactly */
		struct sp_fg_peer_key k = { .family = AF_INET };
		struct sp_fg_peer v;
		int fd = bpf_map__fd(skel->maps.fragguard_peers);

		inet_pton(AF_INET, "10.0.4.1", &k.addr[0]);
		bpf_map_lookup_elem(fd, &k, &v);
		v.mem = 16 * 1024;
		bpf_map_update_elem(fd, &k, &v, BPF_EXIST);
	}
	set_global(0, 4 << 20, 4 << 20, 30ULL * 1000000000);
	usleep(2000);
	n = mk4(pkt, "10.0.4.1", 1, 1480, 1480, 1, 0);
	rc = run(pkt, n);
	CHECK("age_limit_refuses_when_full", rc == TC_ACT_SHOT && ctr(SP_FG_REF_AGE) == 1);
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	n = mk4(pkt, "10.0.4.1", 1, 2960, 1480, 1, 0);
	CHECK("age_limit_relaxes_when_memory_frees", run(pkt, n) == TC_ACT_OK);

	/* Expiry: with ipfrag_time 50 ms, a datagram is released by the sweeper. */
	reset();
	set_cfg(32, 64, 1024, 100, 100, 1);
	set_global(0, 0, 4 << 20, 50ULL * 1000000);
	n = mk4(pkt, "10.0.5.1", 1, 0, 1480, 1, 0);
	run(pkt, n);
	CHECK("held_before_expiry", peer_mem("10.0.5.1") > 0);
	usleep(700 * 1000);
	CHECK("released_on_expiry", peer_mem("10.0.5.1") == 0 && ctr(SP_FG_EXPIRED) == 1);

	/* Unknown pool: peers that never completed share unknown_pct of high. */
	reset();
	set_cfg(32, 64, 1024, 1, 100, 1);	/* 1% of 4 MiB = ~42 KB for all unknowns */
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	n = mk4(pkt, "10.0.6.1", 1, 0, 1480, 1, 0);	/* a peer that completes first */
	run(pkt, n);
	n = mk4(pkt, "10.0.6.1", 1, 1480, 100, 0, 0);
	run(pkt, n);
	for (i = 0, shot = 0; i < 200; i++) {
		char src[32];

		snprintf(src, sizeof(src), "10.7.%d.%d", i / 250, i % 250 + 1);
		n = mk4(pkt, src, 1, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	printf("# unknown pool: %d of 200 spoofed datagrams refused, ref_unknown %llu ref_peer %llu\n",
	       shot, (unsigned long long)ctr(SP_FG_REF_UNKNOWN), (unsigned long long)ctr(SP_FG_REF_PEER));
	CHECK("spoofed_sources_capped", shot > 100 && ctr(SP_FG_REF_UNKNOWN) == (__u64)shot);
	n = mk4(pkt, "10.0.6.1", 2, 0, 1480, 1, 0);
	CHECK("completing_peer_keeps_access", run(pkt, n) == TC_ACT_OK);
}

int main(void)
{
	int err;

	if (!getenv("V")) libbpf_set_print(NULL);
	skel = fragguard_bpf__open();
	if (!skel || (err = fragguard_bpf__load(skel))) {
		printf("FAIL fragguard/load: %s\n", strerror(errno));
		return 1;
	}
	set_cfg(32, 64, 1024, 50, 50, 1);
	test_parsing();
	test_admission();
	fragguard_bpf__destroy(skel);
	return failures ? 1 : 0;
}
