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
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "stackpilot.h"
#include "fragguard.skel.h"
#include "../tools/csum.h"

/* run() says TC_ACT_OK for what the program passes on to the next filter
 * (TC_ACT_UNSPEC); a real TC_ACT_OK would end the chain, and is 99 here. */
#define TC_ACT_OK	0
#define TC_ACT_SHOT	2
#define ENDS_CHAIN	99

#define CHECK_PREFIX "fragguard/"
#include "check.h"

static struct fragguard_bpf *skel;

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
static int send_dgram(int v6, const char *src, __u32 id, __u32 size, __u32 fsz, int shuffle);

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
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_dgram4), NULL, dk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_dgram4), dk);
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_dgram6), NULL, dk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_dgram6), dk);
	{
		/* Known peers' slots: every block free. */
		static __u8 zblock[8192];

		for (__u32 i = 0; i < SP_FG_BLOCKS; i++)
			bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_slots), &i, zblock,
					    BPF_ANY);
	}
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_bits), NULL, dk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_bits), dk);
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_refused), NULL, dk))
		bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_refused), dk);
	/* The sums of the datagrams just deleted. */
	{
		struct sp_fg_agg a = {};
		__u32 zero = 0;

		int ncpu = libbpf_num_possible_cpus();
		struct sp_fg_mem m[ncpu];

		memset(m, 0, sizeof(m));
		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_agg), &zero, &a, BPF_ANY);
		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_mem), &zero, m, BPF_ANY);
	}
	set_global(0, 0, 0, 0);
	set_global(1, 0, 0, 0);
}

static __u32 known_kb = 64, known_s = 2;

static void set_cfg(__u32 p4, __u32 p6, __u32 limit_kb, __u32 unknown, __u32 load, __u32 enforce)
{
	struct sp_fg_cfg c = { p4, p6, limit_kb, unknown, load, enforce, known_kb, known_s };
	__u32 zero = 0;

	bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_cfg), &zero, &c, BPF_ANY);
}

/* updated_ns 0: as if no loader wrote it, which the program takes as alive. */
static void set_global_at(int fam, __u64 mem, __u64 high, __u64 time_ns, __u64 updated_ns)
{
	struct sp_fg_global g = { mem, high, time_ns, updated_ns };
	__u32 k = fam;

	bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_glob), &k, &g, BPF_ANY);
}

static void set_global(int fam, __u64 mem, __u64 high, __u64 time_ns)
{
	set_global_at(fam, mem, high, time_ns, 0);
}

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int run(const void *pkt, __u32 len)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = len, .repeat = 1);

	if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.sp_fragguard), &o))
		return -errno;
	return (int)o.retval == -1 ? TC_ACT_OK : o.retval == 0 ? ENDS_CHAIN : (int)o.retval;
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

/* Overwrite src4's charge in its entry, in whichever map peer_mem() finds
 * it: 0, or -1 if it has none. */
static int set_peer_mem(const char *src4, __s64 mem)
{
	int fds[2] = { bpf_map__fd(skel->maps.fragguard_peers), bpf_map__fd(skel->maps.fragguard_known) };
	struct sp_fg_peer_key k = { .family = AF_INET };
	struct sp_fg_peer v;

	inet_pton(AF_INET, src4, &k.addr[0]);
	for (int i = 0; i < 2; i++)
		if (!bpf_map_lookup_elem(fds[i], &k, &v)) {
			v.mem = mem;
			return bpf_map_update_elem(fds[i], &k, &v, BPF_EXIST);
		}
	return -1;
}

static bool is_known(const char *src4)
{
	struct sp_fg_peer_key k = { .family = AF_INET };
	struct sp_fg_peer v;

	inet_pton(AF_INET, src4, &k.addr[0]);
	return !bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_known), &k, &v);
}

/* The aggregate, with the per-CPU memory sums added up into mem. */
struct agg { __s64 mem[2], unknown_mem[2]; __u32 active_peers, dgrams; };

static struct agg get_agg(void)
{
	int ncpu = libbpf_num_possible_cpus();
	struct sp_fg_mem m[ncpu];
	struct sp_fg_agg a = {};
	struct agg r = {};
	__u32 zero = 0;

	bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_agg), &zero, &a);
	if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_mem), &zero, m))
		for (int i = 0; i < ncpu; i++)
			r.mem[0] += m[i].mem[0], r.mem[1] += m[i].mem[1];
	r.unknown_mem[0] = a.unknown_mem[0], r.unknown_mem[1] = a.unknown_mem[1];
	r.active_peers = a.active_peers, r.dgrams = a.dgrams;
	return r;
}

/* The aggregate's memory all released; a check's note says what is left. */
static bool agg_zero(void)
{
	struct agg a = get_agg();

	return (!a.mem[0] && !a.mem[1] && !a.unknown_mem[0] && !a.unknown_mem[1]) ||
	       check_note("aggregate not zero: mem %lld/%lld unknown_mem %lld/%lld (IPv4/IPv6)",
			  (long long)a.mem[0], (long long)a.mem[1],
			  (long long)a.unknown_mem[0], (long long)a.unknown_mem[1]);
}

/* Ethernet (+ nvlan 802.1Q tags) + IPv4 fragment with len payload bytes. */
static int mk4(__u8 *b, const char *src, __u16 id, __u32 off, __u32 len, int mf, int nvlan)
{
	int h = 12, ihl = 20;
	__u8 *ip;

	memset(b, 0, 14 + 8 + ihl + len);
	memcpy(b, "\0\0\0\0\0\0\x02\0\0\0\0\x02", 12);
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
	*(__u16 *)(ip + 10) = ip_csum(ip, 20);
	return h + 2 + ihl + len;
}

/* Ethernet + IPv6 + [hop-by-hop + destination options] + fragment header. */
static __u8 mk6_nexthdr = 17;

static int mk6(__u8 *b, __u32 id, __u32 off, __u32 len, int mf, int exts)
{
	__u8 *ip = b + 14, *p;
	int ext = exts ? 16 : 0;

	memset(b, 0, 14 + 40 + ext + 8 + len);
	memcpy(b, "\0\0\0\0\0\0\x02\0\0\0\0\x02\x86\xdd", 14);
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
	p[0] = mk6_nexthdr;
	*(__u16 *)(p + 2) = htons(off | (mf ? 1 : 0));
	{ __u32 nid = htonl(id); memcpy(p + 4, &nid, 4); }	/* unaligned */
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
	CHECK("nonfragment_passes", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_FRAGS), 0));

	reset();
	n = mk4(pkt, "10.0.0.1", 2, 0, 1480, 1, 0);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 2, 1480, 1480, 1, 0);
	rc |= run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 2, 2960, 500, 0, 0);
	rc |= run(pkt, n);
	CHECK("in_order_completes", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_FRAGS), 3) &&
	      EQ(ctr(SP_FG_ADMITTED), 1) && EQ(ctr(SP_FG_COMPLETED), 1) &&
	      EQ(peer_mem("10.0.0.1"), 0));
	CHECK("one_completion_does_not_make_known", !is_known("10.0.0.1"));

	reset();
	n = mk4(pkt, "10.0.0.1", 3, 2960, 500, 0, 0);	/* last first */
	rc = run(pkt, n);
	CHECK("last_first_held", EQ(ctr(SP_FG_COMPLETED), 0) && GT(peer_mem("10.0.0.1"), 0));
	n = mk4(pkt, "10.0.0.1", 3, 0, 1480, 1, 0);
	rc |= run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 3, 1480, 1480, 1, 0);
	rc |= run(pkt, n);
	CHECK("out_of_order_completes", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_COMPLETED), 1) &&
	      EQ(peer_mem("10.0.0.1"), 0));

	reset();
	n = mk4(pkt, "10.0.0.1", 4, 0, 1480, 1, 0);
	run(pkt, n);
	__s64 m1 = peer_mem("10.0.0.1");
	rc = run(pkt, n);	/* duplicate */
	CHECK("duplicate_not_charged", EQ(rc, TC_ACT_OK) && EQ(peer_mem("10.0.0.1"), m1) &&
	      GT(m1, 0));
	n = mk4(pkt, "10.0.0.1", 4, 1480, 1480, 0, 0);
	run(pkt, n);
	CHECK("duplicate_then_complete", EQ(ctr(SP_FG_COMPLETED), 1) &&
	      EQ(peer_mem("10.0.0.1"), 0));

	/* Overlap: the kernel discards the whole queue (RFC 5722), and so do we. */
	reset();
	n = mk4(pkt, "10.0.0.1", 5, 0, 1480, 1, 0);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 5, 1000, 1480, 1, 0);
	rc |= run(pkt, n);
	CHECK("overlap_discards", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_DISCARDED), 1) &&
	      EQ(ctr(SP_FG_COMPLETED), 0) && EQ(peer_mem("10.0.0.1"), 0) && agg_zero());

	reset();
	n = mk6(pkt, 77, 0, 1232, 1, 1);
	rc = run(pkt, n);
	n = mk6(pkt, 77, 1232, 800, 0, 1);
	rc |= run(pkt, n);
	CHECK("ipv6_ext_headers_complete", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_FRAGS), 2) &&
	      EQ(ctr(SP_FG_COMPLETED), 1));
	reset();
	n = mk6(pkt, 78, 0, 1232, 1, 0);
	run(pkt, n);
	n = mk6(pkt, 78, 1232, 100, 0, 0);
	run(pkt, n);
	CHECK_EQ("ipv6_plain_complete", ctr(SP_FG_COMPLETED), 1);
	reset();
	n = mk6(pkt, 79, 0, 100, 0, 1);	/* atomic fragment */
	rc = run(pkt, n);
	CHECK("ipv6_atomic_fragment_not_tracked", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_FRAGS), 0));

	reset();
	n = mk4(pkt, "10.0.0.1", 6, 0, 1480, 1, 1);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 7, 0, 1480, 1, 2);
	rc |= run(pkt, n);
	CHECK("vlan_and_qinq_fragments_parsed", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_FRAGS), 2) &&
	      EQ(ctr(SP_FG_ADMITTED), 2) && EQ(ctr(SP_FG_MALFORMED), 0));

	/* What ip_rcv_core / ipv6_frag_rcv drop goes to the kernel untouched. */
	reset();
	n = mk4(pkt, "10.0.0.1", 8, 0, 100, 1, 0);
	pkt[14] = 0x44;	/* IHL 4 */
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.0.1", 11, 0, 1480, 1, 0);
	rc |= run(pkt, n - 200);			/* truncated */
	n = mk4(pkt, "10.0.0.1", 12, 0, 1480, 1, 0);
	pkt[14 + 10] ^= 0x55;				/* bad header checksum */
	rc |= run(pkt, n);
	n = mk6(pkt, 81, 0, 4, 1, 0);			/* first fragment without the UDP header */
	rc |= run(pkt, n);
	CHECK("malformed_pass_untouched", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_MALFORMED), 4) &&
	      EQ(ctr(SP_FG_ADMITTED), 0));
	/* What the kernel queues and then discards, so do we. */
	reset();
	n = mk4(pkt, "10.0.0.1", 9, 65528, 100, 0, 0);	/* offset + len > 65535: queued */
	rc = run(pkt, n);
	CHECK("ipv4_past_64k_is_queued", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_ADMITTED), 1) &&
	      GT(peer_mem("10.0.0.1"), 0));
	n = mk4(pkt, "10.0.0.1", 9, 1480, 0, 1, 0);	/* zero-length kills the queue */
	rc = run(pkt, n);
	CHECK("zero_length_kills_queue", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_DISCARDED), 1) &&
	      EQ(peer_mem("10.0.0.1"), 0) && agg_zero());
	reset();
	n = mk6(pkt, 80, 8, 0, 1, 0);			/* IPv6 zero-length */
	rc = run(pkt, n);
	CHECK("ipv6_zero_length_discarded", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_DISCARDED), 1) &&
	      agg_zero());
	/* Cut inside the IP header (behind a VLAN tag: test_run itself refuses a
	 * plain IPv4 frame this short). */
	reset();
	n = mk4(pkt, "10.0.0.1", 12, 0, 1480, 1, 1);
	rc = run(pkt, 14 + 4 + 10);
	CHECK("short_header_passes", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_ADMITTED), 0));
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
	CHECK("peer_limit_refuses", GT(shot, 0) && LT(shot, 40) &&
	      EQ(ctr(SP_FG_REF_PEER), (__u64)shot) && LE(peer_mem("10.0.0.7"), 16 * 1024));
	n = mk4(pkt, "10.0.0.7", 100 + 39, 1480, 1480, 1, 0);	/* follower of a refused one */
	rc = run(pkt, n);
	CHECK("followers_of_refused_dropped", EQ(rc, TC_ACT_SHOT) && EQ(ctr(SP_FG_REF_FOLLOW), 1));
	n = mk4(pkt, "10.0.0.8", 500, 0, 1480, 1, 0);
	CHECK_EQ("other_peer_admitted", run(pkt, n), TC_ACT_OK);
	n = mk4(pkt, "10.0.0.7", 1, 0, 100, 0, 0);
	CHECK_EQ("nonfragment_of_full_peer_passes", run(pkt, n), TC_ACT_OK);
	/* Completing an admitted datagram still works for a full peer. */
	n = mk4(pkt, "10.0.0.7", 100, 1480, 100, 0, 0);
	CHECK("admitted_datagram_completes", EQ(run(pkt, n), TC_ACT_OK) &&
	      EQ(ctr(SP_FG_COMPLETED), 1));

	/* Out-of-range tunables: limit 0 acts as 16 KiB, enforce 7 as 1. */
	reset();
	set_cfg(99, 999, 0, 0, 0, 7);
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.1.7", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("clamped_limit_and_enforce", GT(shot, 0) && LT(shot, 40) &&
	      GT(peer_mem("10.0.1.7"), 0) && LE(peer_mem("10.0.1.7"), 16 * 1024));

	/* enforce=0 counts refusals but drops nothing. */
	reset();
	set_cfg(32, 64, 16, 100, 100, 0);
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.2.7", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("enforce_0_counts_only", EQ(shot, 0) && GT(ctr(SP_FG_REF_PEER), 0) &&
	      EQ(ctr(SP_FG_DROPPED), 0));

	/* prefix4 24: two sources in one /24 are one peer. */
	reset();
	set_cfg(24, 64, 16, 100, 100, 1);
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, i % 2 ? "10.0.3.1" : "10.0.3.2", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("prefix_groups_peers", GT(shot, 0) && GT(peer_mem("10.0.3.0"), 0));

	/* Age limit: namespace full and the peer at its limit -> no more fragments. */
	reset();
	set_cfg(32, 64, 16, 100, 100, 1);
	n = mk4(pkt, "10.0.4.1", 1, 0, 1480, 1, 0);
	run(pkt, n);
	for (i = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.4.1", 100 + i, 0, 1480, 1, 0);
		run(pkt, n);
	}
	set_peer_mem("10.0.4.1", 16 * 1024);	/* the peer at its limit, exactly */
	set_global(0, 4 << 20, 4 << 20, 30ULL * 1000000000);
	usleep(20 * 1000);	/* more than a tick: the program's clock moves by ticks */
	n = mk4(pkt, "10.0.4.1", 1, 1480, 1480, 1, 0);
	rc = run(pkt, n);
	CHECK("age_limit_refuses_when_full", EQ(rc, TC_ACT_SHOT) && EQ(ctr(SP_FG_REF_AGE), 1));
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	n = mk4(pkt, "10.0.4.1", 1, 2960, 1480, 1, 0);
	CHECK_EQ("age_limit_relaxes_when_memory_frees", run(pkt, n), TC_ACT_OK);

	/* The namespace's term alone (the peer at its limit has none): half
	 * full, ipfrag_time 1 s, a datagram may grow until it is 500 ms old.
	 * At a 4 MiB high_thresh and at 1 PiB (the products scaled down
	 * to fit 64 bits). Ages of 300 and 700 ms: 200 ms either side of
	 * the edge, under the expiry (1.125 s). */
	for (int big = 0; big < 2; big++) {
		__u64 high = big ? 1ULL << 50 : 4 << 20;
		__u64 t0;

		reset();
		set_cfg(32, 64, 16, 100, 100, 1);
		set_global(0, 0, high, 1000000000ULL);
		n = mk4(pkt, "10.0.4.2", 7, 0, 1480, 1, 0);
		t0 = mono_ns();
		run(pkt, n);
		set_peer_mem("10.0.4.2", 16 * 1024);
		set_global(0, high / 2, high, 1000000000ULL);
		while (mono_ns() - t0 < 300 * 1000000ULL)
			usleep(10 * 1000);
		n = mk4(pkt, "10.0.4.2", 7, 1480, 1480, 1, 0);
		rc = run(pkt, n);
		check_note("age %llu ms", (unsigned long long)(mono_ns() - t0) / 1000000);
		CHECK(check_name("age_limit_namespace_share_young/%s", big ? "1PiB" : "4MiB"),
		      EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_REF_AGE), 0));
		while (mono_ns() - t0 < 700 * 1000000ULL)
			usleep(10 * 1000);
		n = mk4(pkt, "10.0.4.2", 7, 2960, 1480, 1, 0);
		rc = run(pkt, n);
		CHECK(check_name("age_limit_namespace_share_old/%s", big ? "1PiB" : "4MiB"),
		      EQ(rc, TC_ACT_SHOT) && EQ(ctr(SP_FG_REF_AGE), 1));
	}

	/* Expiry: with ipfrag_time 50 ms, a datagram is released by the sweeper. */
	reset();
	set_cfg(32, 64, 1024, 100, 100, 1);
	set_global(0, 0, 4 << 20, 50ULL * 1000000);
	n = mk4(pkt, "10.0.5.1", 1, 0, 1480, 1, 0);
	run(pkt, n);
	CHECK_GT("held_before_expiry", peer_mem("10.0.5.1"), 0);
	usleep(700 * 1000);
	CHECK("released_on_expiry", EQ(peer_mem("10.0.5.1"), 0) && EQ(ctr(SP_FG_EXPIRED), 1));

	/* A filter its loader stopped feeding (kill -9 under clsact) judges
	 * nothing from SP_FG_STALE_NS after the last write: a peer over its
	 * limit is refused while the loader writes, passed once it is silent. */
	reset();
	set_cfg(32, 64, 16, 100, 100, 1);
	set_global_at(0, 0, 4 << 20, 30ULL * 1000000000, mono_ns());
	for (i = 0, shot = 0; i < 40; i++) {
		n = mk4(pkt, "10.0.6.1", 100 + i, 0, 1480, 1, 0);
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	CHECK("fed_filter_refuses", GT(shot, 0) && EQ(ctr(SP_FG_ORPHANED), 0));
	/* Silent for a tick more (20 ms): the program's clock moves by ticks. */
	set_global_at(0, 0, 4 << 20, 30ULL * 1000000000, mono_ns() - SP_FG_STALE_NS - 20000000);
	n = mk4(pkt, "10.0.6.1", 200, 0, 1480, 1, 0);
	rc = run(pkt, n);
	CHECK("orphaned_filter_passes", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_ORPHANED), 1));
	set_global_at(0, 0, 4 << 20, 30ULL * 1000000000, mono_ns());
	n = mk4(pkt, "10.0.6.1", 201, 0, 1480, 1, 0);
	CHECK_EQ("fed_again_refuses", run(pkt, n), TC_ACT_SHOT);

	/* Unknown pool: peers not yet known share unknown_pct of high. */
	reset();
	known_kb = 1, known_s = 0;	/* one completion makes a peer known */
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
	CHECK("spoofed_sources_capped", GT(shot, 100) && EQ(ctr(SP_FG_REF_UNKNOWN), (__u64)shot));
	n = mk4(pkt, "10.0.6.1", 2, 0, 1480, 1, 0);
	CHECK_EQ("known_peer_keeps_access", run(pkt, n), TC_ACT_OK);

	/* An ipfrag_high_thresh set to no limit (the sysctl takes any long):
	 * no load, whatever the percentages. Multiplied by 64 unchecked, 2^62
	 * is 0: every unknown peer over its pool, every known one loaded. */
	reset();
	known_kb = 1, known_s = 0;
	set_cfg(32, 64, 16, 64, 64, 1);
	set_global(0, 1 << 20, 1ULL << 62, 30ULL * 1000000000);
	send_dgram(0, "10.0.6.2", 1, 1024, 512, 0);	/* known_kb 1, known_s 0 */
	set_peer_mem("10.0.6.2", 64 * 1024);	/* over peer_limit (16 KiB): refused only under load */
	n = mk4(pkt, "10.0.6.3", 1, 0, 1480, 1, 0);
	rc = run(pkt, n);
	n = mk4(pkt, "10.0.6.2", 2, 0, 1480, 1, 0);
	CHECK("high_thresh_no_limit_no_load", EQ(rc, TC_ACT_OK) && is_known("10.0.6.2") &&
	      EQ(run(pkt, n), TC_ACT_OK) && EQ(ctr(SP_FG_REF_UNKNOWN), 0) && EQ(ctr(SP_FG_REF_PEER), 0));
	/* An ipfrag_time written past any the sysctl gives, where its eighth
	 * added wraps to 0: each later fragment would start a new datagram. */
	reset();
	set_global(0, 0, 4 << 20, 0xE38E38E38E38E38FULL);
	run(pkt, mk4(pkt, "10.0.6.4", 3, 0, 1480, 1, 0));
	usleep(20 * 1000);	/* more than a tick: the program's clock moves by ticks */
	run(pkt, mk4(pkt, "10.0.6.4", 3, 1480, 1480, 0, 0));
	CHECK("time_ns_wrapping_capped", EQ(ctr(SP_FG_COMPLETED), 1) && EQ(ctr(SP_FG_EXPIRED), 0) &&
	      EQ(ctr(SP_FG_ADMITTED), 1));
	/* The unknown pool below 0 for a moment (a release on another CPU
	 * subtracted a charge before charge() added it): nearly empty, not
	 * full. Compared unsigned, -3000 + a fragment read as 2^64. */
	reset();
	set_cfg(32, 64, 1024, 1, 100, 1);
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	{
		struct sp_fg_agg a = { .unknown_mem = { -3000, 0 } };
		__u32 zero = 0;

		bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_agg), &zero, &a, BPF_ANY);
	}
	rc = run(pkt, mk4(pkt, "10.0.6.5", 1, 0, 1480, 1, 0));
	CHECK("unknown_pool_below_zero_admits", EQ(rc, TC_ACT_OK) && EQ(ctr(SP_FG_REF_UNKNOWN), 0));
	/* The namespace's memory at 2^63 or past (a long below 0 printed
	 * with %lu, or bpftool): none, not a full namespace. A known peer
	 * over its limit is refused only under load. */
	reset();
	known_kb = 1, known_s = 0;
	set_cfg(32, 64, 16, 64, 64, 1);
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	send_dgram(0, "10.0.6.6", 1, 1024, 512, 0);
	set_peer_mem("10.0.6.6", 64 * 1024);
	set_global(0, (1ULL << 63) + 5, 4 << 20, 30ULL * 1000000000);
	rc = run(pkt, mk4(pkt, "10.0.6.6", 2, 0, 1480, 1, 0));
	CHECK("namespace_mem_past_2p63_none", is_known("10.0.6.6") && EQ(rc, TC_ACT_OK) &&
	      EQ(ctr(SP_FG_REF_PEER), 0));
	/* The age test's products at the extremes, a later fragment of a
	 * known peer over its limit (its own term refuses): the namespace's
	 * half-empty share decides. ipfrag_time 2^61 ns and high_thresh 2^40
	 * half used: base * left, unscaled, is 2^78 (0 in 64 bits); then
	 * high_thresh 2^62 half used, age * cap 2^70. */
	for (int big = 0; big < 2; big++) {
		__u64 high = big ? 1ULL << 62 : 1ULL << 40;

		reset();
		set_cfg(32, 64, 16, 64, 100, 1);
		set_global(0, 0, 4 << 20, 30ULL * 1000000000);
		send_dgram(0, "10.0.6.7", 1, 1024, 512, 0);
		set_global(0, high / 2, high, big ? 30ULL * 1000000000 : 1ULL << 61);
		rc = run(pkt, mk4(pkt, "10.0.6.7", 2, 0, 1480, 1, 0));
		set_peer_mem("10.0.6.7", 64 * 1024);
		usleep(big ? 300 * 1000 : 20 * 1000);	/* past a tick: an age above 0 */
		n = mk4(pkt, "10.0.6.7", 2, 1480, 1480, 1, 0);
		CHECK(check_name("age_share_products_scaled/%s", big ? "high_2p62" : "time_2p61"),
		      is_known("10.0.6.7") && EQ(rc, TC_ACT_OK) && EQ(run(pkt, n), TC_ACT_OK) &&
		      EQ(ctr(SP_FG_REF_AGE), 0));
	}
	known_kb = 64, known_s = 2;
}

/* Fragment one datagram of size bytes into fsz-byte pieces (a multiple of
 * 8), send them in order or shuffled; returns how many were dropped. */
static int send_dgram(int v6, const char *src, __u32 id, __u32 size, __u32 fsz, int shuffle)
{
	static __u32 order[8192];
	__u32 nfr = (size + fsz - 1) / fsz;
	int shot = 0;

	for (__u32 i = 0; i < nfr; i++)
		order[i] = i;
	for (__u32 i = nfr - 1; shuffle && i > 0; i--) {
		__u32 j = rand() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (__u32 i = 0; i < nfr; i++) {
		__u32 off = order[i] * fsz, len = off + fsz > size ? size - off : fsz;
		int mf = off + len < size, n;

		if (v6) {
			mk6_nexthdr = shuffle > 1 ? (order[i] % 3 ? 17 : 59) : 17;
			n = mk6(pkt, id, off, len, mf, 0);
		} else {
			n = mk4(pkt, src, id, off, len, mf, 0);
		}
		shot += run(pkt, n) == TC_ACT_SHOT;
	}
	mk6_nexthdr = 17;
	return shot;
}

/* Item 1 of fragguard v2: large datagrams at small MTUs, any order. */
static void test_large(void)
{
	int shot = 0;

	reset();
	set_cfg(32, 128, 1024, 50, 50, 1);
	for (int i = 0; i < 20; i++)
		shot += send_dgram(1, NULL, 1000 + i, 65000, 1232, 1);	/* IPv6 at MTU 1280 */
	CHECK("ipv6_65000_at_mtu1280_shuffled", EQ(shot, 0) && EQ(ctr(SP_FG_COMPLETED), 20) &&
	      EQ(ctr(SP_FG_DISCARDED), 0) && agg_zero());
	reset();
	for (int i = 0; i < 20; i++)
		shot += send_dgram(0, "10.1.0.1", 1000 + i, 65000, 552, 1);	/* IPv4 at MTU 576 */
	CHECK("ipv4_65000_at_mtu576_shuffled", EQ(shot, 0) && EQ(ctr(SP_FG_COMPLETED), 20) &&
	      EQ(peer_mem("10.1.0.1"), 0) && agg_zero());
	reset();
	for (int i = 0; i < 3; i++)
		shot += send_dgram(0, "10.1.0.2", 2000 + i, 65000, 48, 1);	/* IPv4 at MTU 68 */
	CHECK("ipv4_65000_at_mtu68_shuffled", EQ(shot, 0) && EQ(ctr(SP_FG_COMPLETED), 3) &&
	      EQ(ctr(SP_FG_INEXACT), 0) && agg_zero());
	reset();
	for (int i = 0; i < 20; i++)
		shot += send_dgram(0, "10.1.0.3", 3000 + i, 65000, 1480, 0);
	CHECK("ipv4_65000_in_order", EQ(shot, 0) && EQ(ctr(SP_FG_COMPLETED), 20) && agg_zero());

	/* Duplicates inside a run are dropped by the kernel, queue kept. */
	reset();
	run(pkt, mk4(pkt, "10.1.0.4", 1, 0, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.1.0.4", 1, 1480, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.1.0.4", 1, 8, 1000, 1, 0));	/* inside the run [0, 2960) */
	run(pkt, mk4(pkt, "10.1.0.4", 1, 2960, 100, 0, 0));
	CHECK("duplicate_inside_run_then_complete", EQ(ctr(SP_FG_DUPS), 1) &&
	      EQ(ctr(SP_FG_COMPLETED), 1) && agg_zero());
	/* A fragment across two runs (the second inserted out of order) is an
	 * overlap to the kernel, even though every byte was there. */
	reset();
	run(pkt, mk4(pkt, "10.1.0.5", 2, 2960, 1480, 1, 0));	/* tail first */
	run(pkt, mk4(pkt, "10.1.0.5", 2, 0, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.1.0.5", 2, 1480, 1480, 1, 0));	/* its own run */
	run(pkt, mk4(pkt, "10.1.0.5", 2, 0, 2960, 1, 0));	/* spans two runs */
	CHECK("span_of_two_runs_discards", EQ(ctr(SP_FG_DISCARDED), 1) &&
	      EQ(ctr(SP_FG_DUPS), 0) && agg_zero());
}

/* Item 2: "known" costs known_kb over known_s, and cannot be taken from anyone. */
static void test_reputation(void)
{
	struct sp_fg_peer_key k = { .family = AF_INET };
	struct sp_fg_peer v = {};
	int known = 0;

	reset();
	known_kb = 64, known_s = 2;
	set_cfg(32, 64, 1024, 50, 50, 1);
	for (int i = 0; i < 2; i++)
		send_dgram(0, "10.2.0.1", 10 + i, 16, 8, 0);
	CHECK("two_tiny_datagrams_do_not_make_known", EQ(ctr(SP_FG_COMPLETED), 2) &&
	      !is_known("10.2.0.1"));
	for (int i = 0; i < 20; i++)
		send_dgram(0, "10.2.0.2", 100 + i, 4000, 1480, 0);	/* 80 KB in no time */
	CHECK("bytes_without_time_do_not_make_known", !is_known("10.2.0.2"));
	known_s = 0;
	set_cfg(32, 64, 1024, 50, 50, 1);
	send_dgram(0, "10.2.0.2", 200, 4000, 1480, 0);
	CHECK("bytes_over_time_make_known", is_known("10.2.0.2") && EQ(ctr(SP_FG_PROMOTED), 1));

	/* Fill the known map; a newcomer then cannot push anyone out. */
	known_kb = 1;
	set_cfg(32, 64, 1024, 50, 50, 1);
	for (int i = 0; i < SP_FG_KNOWN + 10; i++) {
		char src[32];

		snprintf(src, sizeof(src), "10.3.%d.%d", i / 250, i % 250 + 1);
		send_dgram(0, src, 1, 1024, 512, 0);
	}
	inet_pton(AF_INET, "10.2.0.2", &k.addr[0]);
	for (__u32 i = 0, n = 0; !bpf_map_get_next_key(bpf_map__fd(skel->maps.fragguard_known),
						       i ? (void *)&v : NULL, &v); i++, n++)
		known = n + 1;
	CHECK("known_map_full_keeps_old_peers", is_known("10.2.0.2") &&
	      GE(ctr(SP_FG_KNOWN_FULL), 10) && EQ(known, SP_FG_KNOWN));
	/* Overlapping fragments are no completion, and earn nothing. */
	reset();
	run(pkt, mk4(pkt, "10.2.0.9", 7, 0, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.2.0.9", 7, 1000, 1480, 0, 0));
	CHECK("overlap_earns_no_reputation", EQ(ctr(SP_FG_COMPLETED), 0) && !is_known("10.2.0.9"));
	known_kb = 64, known_s = 2;
	set_cfg(32, 64, 1024, 50, 50, 1);
}

/* Sum of every peer's memory; -1 if any is negative. */
static __s64 peers_mem(void)
{
	struct sp_fg_peer_key k, *prev;
	struct sp_fg_peer v;
	__s64 sum = 0;
	int fds[2] = { bpf_map__fd(skel->maps.fragguard_peers), bpf_map__fd(skel->maps.fragguard_known) };

	for (int m = 0; m < 2; m++)
		for (prev = NULL; !bpf_map_get_next_key(fds[m], prev, &k); prev = &k) {
			if (bpf_map_lookup_elem(fds[m], &k, &v))
				continue;
			if (v.mem < 0 || v.in_progress > 1000000)
				return -1;
			sum += v.mem;
		}
	return sum;
}

/* Item 3: crafted chaos never drives a sum negative; all of it drains to 0. */
static void test_accounting(void)
{
	bool ok = true;
	struct agg a;

	reset();
	srand(7);
	set_cfg(32, 64, 1 << 20, 100, 100, 0);
	set_global(0, 0, 1ULL << 40, 30ULL * 1000000000);
	for (int i = 0; i < 30000; i++) {
		char src[32];
		__u32 off = (rand() % 1000) * 8, len = rand() % 3000;
		int n;

		snprintf(src, sizeof(src), "10.4.0.%d", rand() % 200 + 1);
		n = mk4(pkt, src, rand() % 40, off, len, rand() % 4 != 0, 0);
		run(pkt, n);
		if (i % 2000 == 1999) {
			a = get_agg();
			if (a.mem[0] < 0 || a.unknown_mem[0] < 0 || peers_mem() != a.mem[0]) {
				ok = check_note("chaos at %d: agg %lld unknown %lld peers %lld", i,
						(long long)a.mem[0], (long long)a.unknown_mem[0],
						(long long)peers_mem());
			}
		}
	}
	a = get_agg();
	printf("# chaos: %llu completed, %llu discarded, %llu dups, held %lld\n",
	       (unsigned long long)ctr(SP_FG_COMPLETED), (unsigned long long)ctr(SP_FG_DISCARDED),
	       (unsigned long long)ctr(SP_FG_DUPS), (long long)a.mem[0]);
	CHECK("chaos_sums_consistent_never_negative", ok && GT(a.mem[0], 0) &&
	      GT(ctr(SP_FG_DISCARDED), 0) && GT(ctr(SP_FG_DUPS), 0));

	/* Three floods of spoofed first fragments, more sources than the peer
	 * LRU holds, then everything expires. */
	for (int f = 0; f < 3; f++)
		for (int i = 0; i < 20000; i++) {
			char src[32];

			snprintf(src, sizeof(src), "10.%d.%d.%d", 100 + f, i / 250, i % 250 + 1);
			run(pkt, mk4(pkt, src, i, 0, 1400, 1, 0));
		}
	a = get_agg();
	CHECK("flood_tracked", GT(a.mem[0], 0) && GE(ctr(SP_FG_ADMITTED), 60000));
	set_global(0, 0, 1ULL << 40, 50ULL * 1000000);	/* ipfrag_time 50 ms */
	usleep(900 * 1000);
	a = get_agg();
	printf("# after expiry: mem %lld unknown %lld active %u dgrams %u peers %lld\n",
	       (long long)a.mem[0], (long long)a.unknown_mem[0], a.active_peers, a.dgrams,
	       (long long)peers_mem());
	CHECK("all_aggregates_back_to_zero", agg_zero() && EQ(a.active_peers, 0) &&
	      EQ(a.dgrams, 0) && EQ(peers_mem(), 0));
	set_cfg(32, 64, 1024, 50, 50, 1);
}

/* Item 4: the kernel's key; IPv6 ignores the next header. */
static void test_key(void)
{
	reset();
	send_dgram(1, NULL, 4242, 9000, 1232, 2);	/* next header 17 or 59 per fragment */
	CHECK("ipv6_key_ignores_next_header", EQ(ctr(SP_FG_COMPLETED), 1) && agg_zero());
	/* IPv4 keys on the protocol: same id, another protocol, another datagram. */
	reset();
	run(pkt, mk4(pkt, "10.5.0.1", 9, 0, 1480, 1, 0));
	int n = mk4(pkt, "10.5.0.1", 9, 0, 1480, 1, 0);

	pkt[14 + 9] = 6;
	*(__u16 *)(pkt + 14 + 10) = 0;
	*(__u16 *)(pkt + 14 + 10) = ip_csum(pkt + 14, 20);
	run(pkt, n);
	run(pkt, mk4(pkt, "10.5.0.1", 9, 1480, 100, 0, 0));
	CHECK("ipv4_key_includes_protocol", EQ(ctr(SP_FG_ADMITTED), 2) &&
	      EQ(ctr(SP_FG_COMPLETED), 1));
}

/* IPv6 fragment with nbefore destination-options headers before the
 * fragment header and nafter after it (then UDP, or nothing). */
static int mk6chain(__u8 *b, __u32 id, __u32 off, __u32 len, int mf, int nbefore, int nafter)
{
	__u8 *ip = b + 14, *p;
	int ext = 8 * (nbefore + nafter);

	memset(b, 0, 14 + 40 + ext + 8 + len);
	memcpy(b, "\0\0\0\0\0\0\x02\0\0\0\0\x02\x86\xdd", 14);
	ip[0] = 0x60;
	*(__u16 *)(ip + 4) = htons(ext + 8 + len);
	ip[6] = nbefore ? 60 : 44;
	ip[7] = 64;
	inet_pton(AF_INET6, "fd99::2", ip + 8);
	inet_pton(AF_INET6, "fd99::1", ip + 24);
	p = ip + 40;
	for (int i = 0; i < nbefore; i++, p += 8) {
		p[0] = i + 1 < nbefore ? 60 : 44;
		p[2] = 1, p[3] = 4;	/* PadN */
	}
	p[0] = nafter ? 60 : 17;
	*(__u16 *)(p + 2) = htons(off | (mf ? 1 : 0));
	{ __u32 nid = htonl(id); memcpy(p + 4, &nid, 4); }	/* unaligned */
	p += 8;
	for (int i = 0; i < nafter; i++, p += 8) {
		p[0] = i + 1 < nafter ? 60 : 59;	/* then No Next Header */
		p[2] = 1, p[3] = 4;
	}
	return 14 + 40 + ext + 8 + len;
}

/* Findings of the v2 review. */
static void test_review(void)
{
	int n;

	/* The program passes on to the next filter, never ends the chain. */
	reset();
	n = mk4(pkt, "10.6.0.1", 1, 0, 100, 0, 0);
	CHECK_EQ("nonfragment_goes_to_next_filter", run(pkt, n), TC_ACT_OK);
	n = mk4(pkt, "10.6.0.1", 2, 0, 1480, 1, 0);
	CHECK_EQ("fragment_goes_to_next_filter", run(pkt, n), TC_ACT_OK);

	/* A fragment header behind a long extension chain is still seen. */
	reset();
	run(pkt, mk6chain(pkt, 5, 0, 1232, 1, 12, 0));
	run(pkt, mk6chain(pkt, 5, 1232, 100, 0, 12, 0));
	CHECK("ipv6_long_extension_chain_seen", EQ(ctr(SP_FG_FRAGS), 2) &&
	      EQ(ctr(SP_FG_COMPLETED), 1));
	/* A first fragment whose headers after ours end in No Next Header is
	 * queued (not truncated); one cut inside its UDP header is not. */
	reset();
	run(pkt, mk6chain(pkt, 6, 0, 0, 1, 0, 1));
	CHECK("ipv6_first_fragment_headers_after_ours", EQ(ctr(SP_FG_MALFORMED), 0) &&
	      EQ(ctr(SP_FG_ADMITTED), 1));
	reset();
	run(pkt, mk6chain(pkt, 7, 0, 6, 1, 0, 0));
	CHECK("ipv6_first_fragment_cut_upper_header", EQ(ctr(SP_FG_MALFORMED), 1) &&
	      EQ(ctr(SP_FG_ADMITTED), 0));

	/* Spoofed first fragments in a known peer's name, while the namespace
	 * has room: the known peer is not refused. Under load it is. */
	reset();
	known_kb = 1, known_s = 0;
	set_cfg(32, 64, 16, 50, 50, 1);
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	send_dgram(0, "10.6.0.9", 1, 3000, 1480, 0);	/* known now */
	for (int i = 0; i < 40; i++)
		run(pkt, mk4(pkt, "10.6.0.9", 100 + i, 0, 1480, 1, 0));	/* the spoofer */
	CHECK("known_peer_not_refused_without_load", is_known("10.6.0.9") &&
	      EQ(send_dgram(0, "10.6.0.9", 500, 3000, 1480, 0), 0) && EQ(ctr(SP_FG_REF_PEER), 0));
	set_global(0, 3 << 20, 4 << 20, 30ULL * 1000000000);	/* 75% of high */
	CHECK("known_peer_over_limit_refused_under_load",
	      GT(send_dgram(0, "10.6.0.9", 600, 3000, 1480, 0), 0) && GT(ctr(SP_FG_REF_PEER), 0));

	/* Under load, the fair share divides among known peers: thousands of
	 * spoofed unknown sources do not shrink it. */
	reset();
	set_cfg(32, 64, 1024, 50, 50, 1);
	set_global(0, 0, 4 << 20, 30ULL * 1000000000);
	send_dgram(0, "10.6.1.1", 1, 3000, 1480, 0);	/* known */
	for (int i = 0; i < 2000; i++) {
		char src[32];

		snprintf(src, sizeof(src), "10.7.%d.%d", i / 250, i % 250 + 1);
		run(pkt, mk4(pkt, src, 1, 0, 1480, 1, 0));
	}
	run(pkt, mk4(pkt, "10.6.1.1", 2, 0, 1480, 1, 0));	/* one in progress */
	usleep(600 * 1000);	/* a sweep counts the peers */
	set_global(0, 3 << 20, 4 << 20, 30ULL * 1000000000);
	printf("# %u peers active, %u datagrams\n", get_agg().active_peers, get_agg().dgrams);
	CHECK("fair_share_not_diluted_by_unknown_peers", GT(get_agg().active_peers, 500) &&
	      EQ(send_dgram(0, "10.6.1.1", 3, 3000, 1480, 0), 0));
	known_kb = 64, known_s = 2;
	set_cfg(32, 64, 1024, 50, 50, 1);

	/* Bitmap map full: a datagram tracked by byte count only is never
	 * called complete (duplicates could have made up its meat). */
	reset();
	set_cfg(32, 64, 1 << 20, 100, 100, 0);
	set_global(0, 0, 1ULL << 40, 30ULL * 1000000000);
	for (int i = 0; i < SP_FG_BITS; i++)	/* five runs each: into the bitmap map */
		for (int k = 0; k < 5; k++)
			run(pkt, mk4(pkt, "10.6.2.1", i, k * 2960, 1480, 1, 0));
	for (int k = 0; k < 6; k++)	/* six runs, then a duplicate, then the gaps */
		run(pkt, mk4(pkt, "10.6.2.2", 9, k * 2960, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.6.2.2", 9, 0, 1480, 1, 0));
	for (int k = 0; k < 6; k++)
		run(pkt, mk4(pkt, "10.6.2.2", 9, k * 2960 + 1480, 1480, k < 5, 0));
	CHECK("inexact_never_completes", EQ(ctr(SP_FG_INEXACT), 1) && EQ(ctr(SP_FG_COMPLETED), 0));
	set_cfg(32, 64, 1024, 50, 50, 1);
}

/* The kernel's BTF has bpf_cast_to_kern_ctx (the loader's probe also loads a call to it). */
static bool has_kern_ctx(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool has = !libbpf_get_error(btf) && btf__find_by_name_kind(btf, "bpf_cast_to_kern_ctx",
								   BTF_KIND_FUNC) > 0;

	btf__free(btf);
	return has;
}

/* Entries in a datagram hash map. */
static int hashed(struct bpf_map *m)
{
	__u8 k[64], prev[64];
	int n = 0;

	for (void *pk = NULL; !bpf_map_get_next_key(bpf_map__fd(m), pk, k); pk = prev, n++)
		memcpy(prev, k, sizeof(k));
	return n;
}

/* src4 known, with this epoch (odd): 0 on success. */
static int set_known(const char *src4, __u32 epoch)
{
	struct sp_fg_peer_key k = { .family = AF_INET };
	struct sp_fg_peer v = { .epoch = epoch, .last_ns = mono_ns() };

	inet_pton(AF_INET, src4, &k.addr[0]);
	return bpf_map_update_elem(bpf_map__fd(skel->maps.fragguard_known), &k, &v, BPF_ANY);
}

static int del_known(const char *src4)
{
	struct sp_fg_peer_key k = { .family = AF_INET };

	inet_pton(AF_INET, src4, &k.addr[0]);
	return bpf_map_delete_elem(bpf_map__fd(skel->maps.fragguard_known), &k);
}

/* The block a peer of this epoch would take: its owner (an epoch) and
 * when its peer may last have begun a datagram in the hash maps. */
static __u32 block_owner(__u32 epoch)
{
	__u32 i = (epoch >> 1) % SP_FG_BLOCKS;
	static __u8 v[65536];

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_slots), &i, v))
		return ~0u;
	return *(__u32 *)v;
}

static __u64 block_hashed_ns(__u32 epoch)
{
	__u32 i = (epoch >> 1) % SP_FG_BLOCKS;
	static __u8 v[65536];

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_slots), &i, v))
		return ~0ull;
	return *(__u64 *)(v + 8);
}

static __u32 known_epoch(const char *src4)
{
	struct sp_fg_peer_key k = { .family = AF_INET };
	struct sp_fg_peer v;

	inet_pton(AF_INET, src4, &k.addr[0]);
	return bpf_map_lookup_elem(bpf_map__fd(skel->maps.fragguard_known), &k, &v) ? 0 : v.epoch;
}

/* A known peer's datagrams in its slots, the hash maps only past them. */
static void test_slots(void)
{
	int n, shot = 0;

	reset();
	known_kb = 1, known_s = 0;
	set_cfg(32, 64, 1024, 50, 50, 1);
	send_dgram(0, "10.8.0.1", 1, 4000, 1480, 0);	/* known from here on */
	run(pkt, mk4(pkt, "10.8.0.1", 2, 0, 1480, 1, 0));
	/* Nothing of its in progress when it took its block: no datagram of
	 * its can be in the hash maps (1), none is looked for there. */
	CHECK("known_peer_datagram_in_slot", is_known("10.8.0.1") &&
	      EQ(hashed(skel->maps.fragguard_dgram4), 0) && GT(peer_mem("10.8.0.1"), 1480) &&
	      EQ(block_owner(known_epoch("10.8.0.1")), known_epoch("10.8.0.1")) &&
	      EQ(block_hashed_ns(known_epoch("10.8.0.1")), 1));
	run(pkt, mk4(pkt, "10.8.0.1", 2, 1480, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.8.0.1", 2, 2960, 1000, 0, 0));
	CHECK("slot_datagram_completes", EQ(ctr(SP_FG_COMPLETED), 2) &&
	      EQ(peer_mem("10.8.0.1"), 0) && agg_zero());

	/* More datagrams in progress than slots: the rest in the hash map,
	 * found there by their later fragments, all completing. */
	for (int i = 0; i < SP_FG_SLOTS + 3; i++)
		shot += run(pkt, mk4(pkt, "10.8.0.1", 10 + i, 0, 1480, 1, 0)) == TC_ACT_SHOT;
	n = hashed(skel->maps.fragguard_dgram4);
	for (int i = SP_FG_SLOTS + 2; i >= 0; i--) {
		run(pkt, mk4(pkt, "10.8.0.1", 10 + i, 1480, 1480, 1, 0));
		run(pkt, mk4(pkt, "10.8.0.1", 10 + i, 2960, 1000, 0, 0));
	}
	CHECK("slots_full_spill_to_hash", EQ(shot, 0) && EQ(n, 3) &&
	      EQ(ctr(SP_FG_COMPLETED), 2 + SP_FG_SLOTS + 3) && EQ(ctr(SP_FG_UNTRACKED), 0) &&
	      EQ(hashed(skel->maps.fragguard_dgram4), 0) && EQ(peer_mem("10.8.0.1"), 0) &&
	      agg_zero());

	/* A datagram begun while its peer was unknown (in the hash map) ends
	 * there after the peer became known and took its slots. */
	reset();
	run(pkt, mk4(pkt, "10.8.0.2", 1, 0, 1480, 1, 0));
	send_dgram(0, "10.8.0.2", 2, 4000, 1480, 0);
	run(pkt, mk4(pkt, "10.8.0.2", 3, 0, 1480, 1, 0));	/* takes a slot */
	n = hashed(skel->maps.fragguard_dgram4);
	run(pkt, mk4(pkt, "10.8.0.2", 1, 1480, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.8.0.2", 1, 2960, 1000, 0, 0));
	run(pkt, mk4(pkt, "10.8.0.2", 3, 1480, 1480, 0, 0));
	CHECK("datagram_begun_unknown_ends_known", is_known("10.8.0.2") && EQ(n, 1) &&
	      GT(block_hashed_ns(known_epoch("10.8.0.2")), 1) &&
	      EQ(ctr(SP_FG_COMPLETED), 3) && EQ(ctr(SP_FG_UNTRACKED), 0) &&
	      EQ(peer_mem("10.8.0.2"), 0) && agg_zero());

	/* IPv6: the same, from fd99::2. */
	reset();
	send_dgram(1, NULL, 1, 4000, 1232, 0);
	run(pkt, mk6(pkt, 2, 0, 1232, 1, 0));
	n = hashed(skel->maps.fragguard_dgram6);
	run(pkt, mk6(pkt, 2, 1232, 1000, 0, 0));
	CHECK("ipv6_known_peer_datagram_in_slot", EQ(n, 0) && EQ(ctr(SP_FG_COMPLETED), 2) &&
	      agg_zero());

	/* A slot's datagram the kernel has expired: the sweep releases it. */
	reset();
	send_dgram(0, "10.8.0.3", 1, 4000, 1480, 0);
	run(pkt, mk4(pkt, "10.8.0.3", 2, 0, 1480, 1, 0));
	n = hashed(skel->maps.fragguard_dgram4);
	set_global(0, 0, 4 << 20, 50ULL * 1000000);	/* ipfrag_time 50 ms */
	usleep(700 * 1000);
	CHECK("slot_datagram_expires", EQ(n, 0) && EQ(ctr(SP_FG_EXPIRED), 1) &&
	      EQ(peer_mem("10.8.0.3"), 0) && agg_zero());
	/* ... and its slot is free again: as many new datagrams as slots,
	 * none in the hash map. */
	for (int i = 0; i < SP_FG_SLOTS; i++)
		run(pkt, mk4(pkt, "10.8.0.3", 10 + i, 0, 1480, 1, 0));
	CHECK("expired_slot_reused", EQ(hashed(skel->maps.fragguard_dgram4), 0));
	set_global(0, 0, 0, 0);

	/* Two known peers whose epochs choose one block: the second's
	 * datagrams in the hash map, all exact. */
	reset();
	known_kb = 64;
	set_cfg(32, 64, 1024, 50, 50, 1);
	n = set_known("10.8.4.1", 3) | set_known("10.8.4.2", 3 + 2 * SP_FG_BLOCKS);
	send_dgram(0, "10.8.4.1", 1, 4000, 1480, 0);
	run(pkt, mk4(pkt, "10.8.4.1", 2, 0, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.8.4.2", 2, 0, 1480, 1, 0));
	shot = hashed(skel->maps.fragguard_dgram4);
	run(pkt, mk4(pkt, "10.8.4.1", 2, 1480, 1000, 0, 0));
	run(pkt, mk4(pkt, "10.8.4.2", 2, 1480, 1000, 0, 0));
	CHECK("block_taken_peer_uses_hash", EQ(n, 0) && EQ(shot, 1) &&
	      EQ(block_owner(3), 3) && EQ(ctr(SP_FG_COMPLETED), 3) &&
	      EQ(peer_mem("10.8.4.2"), 0) && agg_zero());
	/* A datagram in the unknown pool when a peer takes its block may be
	 * that peer's, begun before it was known (its entry evicted since):
	 * the window opens. */
	reset();
	run(pkt, mk4(pkt, "10.8.5.9", 1, 0, 1480, 1, 0));	/* unknown, in progress */
	n = set_known("10.8.5.1", 5);
	run(pkt, mk4(pkt, "10.8.5.1", 2, 0, 1480, 1, 0));	/* takes its block */
	run(pkt, mk4(pkt, "10.8.5.9", 1, 1480, 1000, 0, 0));
	run(pkt, mk4(pkt, "10.8.5.1", 2, 1480, 1000, 0, 0));
	CHECK("unknown_pool_opens_window", EQ(n, 0) && EQ(block_owner(5), 5) &&
	      GT(block_hashed_ns(5), 1) && EQ(ctr(SP_FG_COMPLETED), 2) && agg_zero());
	/* A forgotten peer's block is freed by the sweep. */
	reset();
	n = set_known("10.8.4.1", 3);
	send_dgram(0, "10.8.4.1", 1, 4000, 1480, 0);
	shot = block_owner(3);
	n |= del_known("10.8.4.1");
	usleep(600 * 1000);
	CHECK("forgotten_peer_block_freed", EQ(n, 0) && EQ(shot, 3) && EQ(block_owner(3), 0));
	known_kb = 1;
	set_cfg(32, 64, 1024, 50, 50, 1);

	/* prefix4 changed while a known peer's datagram is in its slot: its
	 * later fragments, under the new key a new datagram of a peer not
	 * known and over the pool, are not refused; both records expire. */
	reset();
	set_cfg(32, 64, 1024, 1, 50, 1);
	send_dgram(0, "10.8.1.1", 1, 4000, 1480, 0);
	run(pkt, mk4(pkt, "10.8.1.1", 2, 0, 1480, 1, 0));
	run(pkt, mk4(pkt, "10.8.1.1", 3, 0, 1480, 1, 0));
	set_global(0, 0, 1000, 0);			/* unknown pool: 10 bytes */
	shot = run(pkt, mk4(pkt, "10.8.2.1", 1, 0, 1480, 1, 0)) == TC_ACT_SHOT;
	set_cfg(24, 64, 1024, 1, 50, 1);
	/* The first notes the change, the second comes after it. */
	n = 0;
	for (int id = 2; id <= 3; id++)
		n += (run(pkt, mk4(pkt, "10.8.1.1", id, 1480, 1480, 1, 0)) == TC_ACT_SHOT) +
		     (run(pkt, mk4(pkt, "10.8.1.1", id, 2960, 1000, 0, 0)) == TC_ACT_SHOT);
	CHECK("prefix_change_refuses_no_datagram_in_progress", EQ(shot, 1) && EQ(n, 0) &&
	      EQ(ctr(SP_FG_DROPPED), 1) && GE(ctr(SP_FG_REF_UNKNOWN), 2));
	set_global(0, 0, 1000, 50ULL * 1000000);
	usleep(700 * 1000);
	CHECK("prefix_change_records_expire", agg_zero() && EQ(peer_mem("10.8.1.1"), 0));

	set_global(0, 0, 0, 0);
	known_kb = 64, known_s = 2;
	set_cfg(32, 64, 1024, 50, 50, 1);
}

int main(void)
{
	int err;

	if (!getenv("V")) libbpf_set_print(NULL);
	/* What the loader refuses fragguard without (src/modules/fragguard/fragguard.c, fit()). */
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_loop, NULL) != 1) {
		printf("SKIP fragguard/all: this kernel has no bpf_loop() (Linux 5.17), and the loader refuses fragguard without it\n");
		return 0;
	}
	/* The truesize read the loader would choose: bpf_cast_to_kern_ctx where
	 * the kernel has it (6.2), else the probe read (the 6.1 VM runs this). */
	for (int kern_ctx = 1; kern_ctx >= 0; kern_ctx--) {
		skel = fragguard_bpf__open();
		/* The tc program alone: the kernel's drops and expiry (tp_btf, fentry)
		 * are for the loader to choose per kernel (src/modules/fragguard/fragguard.c). */
		if (skel) {
			bpf_program__set_autoload(skel->progs.sp_fragguard_drops, false);
			bpf_program__set_autoload(skel->progs.sp_fragguard_expire4, false);
			bpf_program__set_autoload(skel->progs.sp_fragguard_expire6, false);
			skel->rodata->fg_kern_ctx = kern_ctx;
		}
		if (skel && !(err = fragguard_bpf__load(skel))) {
			printf("# truesize read: %s\n", kern_ctx ? "bpf_cast_to_kern_ctx" : "probe read");
			break;
		}
		/* The kernel has the kfunc, so the loader would choose this: it must load. */
		if (kern_ctx && has_kern_ctx()) {
			printf("FAIL fragguard/load_kern_ctx: %s\n", strerror(errno));
			return 1;
		}
		fragguard_bpf__destroy(skel);
		skel = NULL;
	}
	if (!skel) {
		printf("FAIL fragguard/load: %s\n", strerror(errno));
		return 1;
	}
	set_cfg(32, 64, 1024, 50, 50, 1);
	test_parsing();
	test_admission();
	test_large();
	test_reputation();
	test_accounting();
	test_key();
	test_review();
	test_slots();
	fragguard_bpf__destroy(skel);
	return failures ? 1 : 0;
}
