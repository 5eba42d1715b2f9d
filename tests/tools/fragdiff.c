// SPDX-License-Identifier: GPL-2.0
/*
 * fragdiff: fragguard against the kernel, datagram by datagram.
 *
 *   fragdiff PIN_DIR RX_NETNS TX_NETNS TX_IFACE RX_MAC COUNT [SEED]
 *
 * Sends COUNT generated IPv4/IPv6 datagrams (sizes 9..65535, fragmented at
 * MTUs 68/576/1280/1500/9000, in order or shuffled, interleaved in threes,
 * some with duplicates, fragments inside a run, overlaps, a missing
 * fragment, inconsistent ends, mixed ECN, ragged IPv4 lengths) as raw frames
 * from TX_IFACE in TX_NETNS to RX_MAC, each datagram from its own source
 * address. In RX_NETNS, raw sockets for protocol 253 see what the kernel
 * reassembled. fragguard (pins in PIN_DIR, run with enforce=0, prefix4=32,
 * prefix6=128) keeps per-source counters: so every datagram gets both
 * verdicts. Prints one line per batch and a summary; exit 1 on any
 * disagreement or a memory estimate more than 10% off sockstat's.
 * Run as root, with RX_NETNS's ipfrag_time/ip6frag_time at 1 s and
 * high_thresh well above what a batch holds.
 * FRAGDIFF_KNOWN=1: every source is put into the known map before its
 * datagram (as many as it holds), so that datagrams go through known
 * peers' slots (those whose block is free) and the hash maps beside them;
 * prints how many blocks were taken in each batch.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "stackpilot.h"
#include "csum.h"

#define BATCH	5000
#define PROTO	253

enum kind { CLEAN, DUP, INSIDE, TRUNC, OVERLAP, BADEND, ECN, RAGGED, NKINDS };
static const char *kind_name[NKINDS] = { "clean", "duplicate", "inside-run", "missing",
					  "overlap", "bad-end", "ecn-mix", "ragged" };

struct frag { __u32 off, len; int mf, tos; };

static unsigned char rx_mac[6];
static int tx_fd, tx_ifindex, rx4, rx6;
static const char *pin_dir;
static __u8 got[BATCH];			/* kernel delivered, per datagram of the batch */
static __u8 fam6[BATCH];
static enum kind kinds[BATCH];
static long disagree, total, delivered_total, kinds_seen[NKINDS];
static double max_dev;
static long mem_samples;
static long long max_kmem;

static unsigned rnd(unsigned n) { return n ? (unsigned)random() % n : 0; }

static void src_addr(int v6, int idx, __u32 *a)
{
	memset(a, 0, 16);
	if (!v6) {
		a[0] = htonl(0x0ac80000 | (idx + 1));		/* 10.200.x.y */
	} else {
		a[0] = htonl(0xfd600000);			/* fd60::x */
		a[3] = htonl(idx + 1);
	}
}

static void send_frag(int v6, int idx, __u32 id, const __u8 *data, struct frag *f)
{
	static __u8 buf[10000];
	__u32 src[4], dst[4] = {};
	__u8 *ip = buf + 14;
	int hl;

	memcpy(buf, rx_mac, 6);
	memcpy(buf + 6, "\x02\x00\x00\xfd\x00\x01", 6);
	src_addr(v6, idx, src);
	if (!v6) {
		buf[12] = 0x08, buf[13] = 0x00;
		hl = 20;
		memset(ip, 0, 20);
		ip[0] = 0x45;
		ip[1] = f->tos;
		*(__u16 *)(ip + 2) = htons(20 + f->len);
		*(__u16 *)(ip + 4) = htons(id);
		*(__u16 *)(ip + 6) = htons((f->mf ? 0x2000 : 0) | (f->off / 8));
		ip[8] = 64;
		ip[9] = PROTO;
		memcpy(ip + 12, src, 4);
		inet_pton(AF_INET, "10.50.1.1", ip + 16);
		*(__u16 *)(ip + 10) = ip_csum(ip, 20);
	} else {
		buf[12] = 0x86, buf[13] = 0xdd;
		hl = 48;
		memset(ip, 0, 48);
		ip[0] = 0x60 | (f->tos >> 4);
		ip[1] = (f->tos & 0xf) << 4;
		*(__u16 *)(ip + 4) = htons(8 + f->len);
		ip[6] = 44;
		ip[7] = 64;
		memcpy(ip + 8, src, 16);
		inet_pton(AF_INET6, "fd50:1::1", dst);
		memcpy(ip + 24, dst, 16);
		ip[40] = PROTO;
		*(__u16 *)(ip + 42) = htons(f->off | (f->mf ? 1 : 0));
		{ __u32 nid = htonl(id); memcpy(ip + 44, &nid, 4); }	/* unaligned */
	}
	memcpy(ip + hl, data + f->off, f->len);
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_ifindex = tx_ifindex, .sll_halen = 6 };

	memcpy(sll.sll_addr, rx_mac, 6);
	while (sendto(tx_fd, buf, 14 + hl + f->len, 0, (void *)&sll, sizeof(sll)) < 0) {
		if (errno != ENOBUFS) {
			perror("fragdiff: send");
			exit(2);
		}
		usleep(100);
	}
}

/* Fragments of one datagram, perturbed by kind; returns how many. */
static int plan(int v6, __u32 size, enum kind k, struct frag *fr, int max)
{
	static const __u32 mtus[] = { 68, 576, 1280, 1500, 9000 };
	__u32 mtu, fsz, n = 0, hdr = v6 ? 48 : 20;

	do
		mtu = mtus[rnd(5)];
	while (v6 && mtu < 1280);
	fsz = (mtu - hdr) & ~7u;
	if (size / fsz > 200 && rnd(10))	/* keep the packet count sane */
		fsz = (1500 - hdr) & ~7u;
	if (size <= fsz)	/* one piece would be no fragment at all */
		fsz = size / 2 >= 8 ? (size / 2) & ~7u : 8;
	for (__u32 off = 0; off < size && n < (unsigned)max - 4; off += fsz, n++) {
		fr[n].off = off;
		fr[n].len = off + fsz >= size ? size - off : fsz;
		fr[n].mf = off + fsz < size;
		fr[n].tos = 0;
		if (k == RAGGED && !v6 && fr[n].mf)
			fr[n].len += 1 + rnd(7);	/* the kernel trims MF ends to 8 */
	}
	switch (k) {
	case DUP:
		fr[n] = fr[rnd(n)];
		n++;
		break;
	case INSIDE: {	/* a piece inside one fragment: inside a run, a duplicate */
		struct frag f = fr[rnd(n)];

		if (f.len >= 16) {
			f.off += 8, f.len = (f.len - 8) & ~7u, f.mf = 1;
			if (f.len)
				fr[n++] = f;
		}
		break;
	}
	case TRUNC:
		if (n > 1) {
			int i = rnd(n);

			n--;
			fr[i] = fr[n];
		}
		break;
	case OVERLAP:
		if (n > 1) {
			int i = rnd(n - 1);

			fr[i].len += 8;	/* into the next fragment */
		}
		break;
	case BADEND:
		fr[n] = fr[n - 1];
		fr[n].len = fr[n].len > 8 ? fr[n].len - 8 : fr[n].len + 8;
		n++;
		break;
	case ECN:
		fr[rnd(n)].tos = 2;	/* ECT(0) among not-ECT */
		break;
	default:
		break;
	}
	return n;
}

static void shuffle(struct frag *fr, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = rnd(i + 1);
		struct frag t = fr[i];

		fr[i] = fr[j];
		fr[j] = t;
	}
}

static void drain(int fd, int v6)
{
	static __u8 buf[70000];
	struct sockaddr_storage ss;
	socklen_t sl;
	ssize_t r;

	for (;;) {
		__u32 idx;

		sl = sizeof(ss);
		r = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (void *)&ss, &sl);
		if (r < 0)
			return;
		if (!v6) {
			int hl = (buf[0] & 15) * 4;

			if (r < hl + 4)
				continue;
			memcpy(&idx, buf + hl, 4);
		} else {
			if (r < 4)
				continue;
			memcpy(&idx, buf, 4);
		}
		idx = ntohl(idx);
		if (idx < BATCH && fam6[idx] == v6)
			got[idx] = 1;
	}
}

/* FRAG/FRAG6 memory from sockstat in the receiver namespace. */
static long long sockstat(int v6)
{
	char line[256];
	long long inuse, mem = 0;
	FILE *f = fopen(v6 ? "/proc/net/sockstat6" : "/proc/net/sockstat", "r");
	const char *tag = v6 ? "FRAG6:" : "FRAG:";

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, tag, strlen(tag)) &&
		    sscanf(line + strlen(tag), " inuse %lld memory %lld", &inuse, &mem) == 2)
			break;
	fclose(f);
	return mem;
}

static int pinned(const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0) {
		fprintf(stderr, "fragdiff: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	return fd;
}

/* fragguard's estimate of one family's reassembly memory, all CPUs. */
static long long estimate(int fd, int ncpu, int v6)
{
	struct sp_fg_mem v[ncpu];
	long long est = 0;
	__u32 zero = 0;

	if (bpf_map_lookup_elem(fd, &zero, v))
		return -1;
	for (int c = 0; c < ncpu; c++)
		est += v[c].mem[v6];
	return est;
}

/*
 * One sample compares a snapshot: the kernel's queues expire on their own
 * timers, so an expiry between reading the map and reading sockstat shows
 * one side before and the other after it (CI saw 12.9% on a slow VM).
 * Both are read twice; a sample counts only when neither moved between.
 */
static void check_mem(void)
{
	int fd = pinned("fragguard_mem"), ncpu = libbpf_num_possible_cpus();

	for (int v6 = 0; v6 < 2; v6++) {
		for (int try = 0; try < 20; try++) {
			long long e1 = estimate(fd, ncpu, v6), k = sockstat(v6);
			long long e2 = estimate(fd, ncpu, v6), k2 = sockstat(v6);
			double dev;

			if (e1 < 0 || e1 != e2 || k != k2)
				continue;
			if (k < 65536)	/* a ratio of small numbers says nothing */
				break;
			mem_samples++;
			if (k > max_kmem)
				max_kmem = k;
			dev = (double)(e1 - k) / k;
			if (dev < 0)
				dev = -dev;
			if (dev > max_dev)
				max_dev = dev;
			break;
		}
	}
	close(fd);
}

/* Compare the batch's verdicts, then empty the peer maps for the next one. */
static void verdicts(int n, long batch)
{
	int fds[2] = { pinned("fragguard_peers"), pinned("fragguard_known") };
	static __u8 seen[BATCH];
	long bad = 0, bad_kind[NKINDS] = {};

	memset(seen, 0, sizeof(seen));
	for (int m = 0; m < 2; m++) {
		struct sp_fg_peer_key k;
		struct sp_fg_peer v;

		while (!bpf_map_get_next_key(fds[m], NULL, &k)) {
			__u32 idx;

			if (!bpf_map_lookup_elem(fds[m], &k, &v)) {
				idx = ntohl(k.family == AF_INET ? k.addr[0] : k.addr[3]) & 0xffff;
				idx -= 1;
				if (idx < (unsigned)n && fam6[idx] == (k.family != AF_INET)) {
					int ok = v.completed ? got[idx] && v.completed == 1
							     : !got[idx] && v.expired + v.discarded > 0;

					seen[idx] = 1;
					if (!ok) {
						bad++, bad_kind[kinds[idx]]++;
						if (bad <= 5)
							printf("  disagree: datagram %u (%s, %s): kernel %s, "
							       "fragguard completed %u expired %u discarded %u\n",
							       idx, fam6[idx] ? "IPv6" : "IPv4", kind_name[kinds[idx]],
							       got[idx] ? "delivered" : "did not deliver",
							       v.completed, v.expired, v.discarded);
					}
				}
			}
			bpf_map_delete_elem(fds[m], &k);
		}
	}
	for (int i = 0; i < n; i++)
		if (!seen[i]) {
			bad++, bad_kind[kinds[i]]++;
			if (bad <= 5)
				printf("  disagree: datagram %d (%s): no fragguard verdict\n", i,
				       kind_name[kinds[i]]);
		}
	close(fds[0]);
	close(fds[1]);
	disagree += bad;
	printf("batch %ld: %d datagrams, %ld disagreements", batch, n, bad);
	for (int k = 0; k < NKINDS; k++)
		if (bad_kind[k])
			printf(" %s:%ld", kind_name[k], bad_kind[k]);
	printf("\n");
	fflush(stdout);
}

/* FRAGDIFF_KNOWN: src (of datagram idx) known from now on. */
static void make_known(int fd, int v6, int idx)
{
	struct sp_fg_peer_key k = { .family = v6 ? AF_INET6 : AF_INET };
	struct sp_fg_peer v = { .epoch = (__u32)random() * 2 + 1 };
	struct timespec ts;

	/* An idle entry with nothing charged is forgotten by the sweep. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	v.last_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	src_addr(v6, idx, k.addr);
	bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST);
}

/* FRAGDIFF_KNOWN: blocks of slots owned by a known peer. */
static int blocks_taken(void)
{
	int fd = pinned("fragguard_slots"), n = 0;
	static __u8 v[65536];

	for (__u32 i = 0; i < SP_FG_BLOCKS; i++)
		if (!bpf_map_lookup_elem(fd, &i, v) && *(__u32 *)v)
			n++;
	close(fd);
	return n;
}

static int enter(const char *ns)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "fragdiff: netns %s: %s\n", ns, strerror(errno));
		exit(2);
	}
	return fd;
}

int main(int argc, char **argv)
{
	static __u8 data[70000];
	static struct frag fr[3][1500], mix[4500];
	long count, seed = 1;
	int one = 1;

	if (argc < 7) {
		fprintf(stderr, "usage: fragdiff PIN_DIR RX_NETNS TX_NETNS TX_IFACE RX_MAC COUNT [SEED]\n");
		return 2;
	}
	pin_dir = argv[1];
	count = atol(argv[6]);
	if (argc > 7)
		seed = atol(argv[7]);
	srandom(seed);
	if (sscanf(argv[5], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &rx_mac[0], &rx_mac[1], &rx_mac[2],
		   &rx_mac[3], &rx_mac[4], &rx_mac[5]) != 6)
		return fprintf(stderr, "fragdiff: bad MAC %s\n", argv[5]), 2;

	close(enter(argv[2]));
	rx4 = socket(AF_INET, SOCK_RAW, PROTO);
	rx6 = socket(AF_INET6, SOCK_RAW, PROTO);
	if (rx4 < 0 || rx6 < 0)
		return perror("fragdiff: raw socket"), 2;
	setsockopt(rx4, SOL_SOCKET, SO_RCVBUFFORCE, &(int){ 64 << 20 }, sizeof(int));
	setsockopt(rx6, SOL_SOCKET, SO_RCVBUFFORCE, &(int){ 64 << 20 }, sizeof(int));
	close(enter(argv[3]));
	tx_fd = socket(AF_PACKET, SOCK_RAW, 0);
	tx_ifindex = if_nametoindex(argv[4]);
	if (tx_fd < 0 || !tx_ifindex)
		return fprintf(stderr, "fragdiff: tx %s: %s\n", argv[4], strerror(errno)), 2;
	setsockopt(tx_fd, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ 16 << 20 }, sizeof(int));
	(void)one;
	close(enter(argv[2]));	/* sockstat of the receiver from here on */

	for (long done = 0, batch = 0; done < count; batch++) {
		int n = count - done < BATCH ? count - done : BATCH;
		int known_fd = getenv("FRAGDIFF_KNOWN") ? pinned("fragguard_known") : -1;

		memset(got, 0, sizeof(got));
		for (int i = 0; i < n; i += 3) {
			int nf[3] = {}, m = 0, g = n - i < 3 ? n - i : 3;

			for (int j = 0; j < g; j++) {
				int idx = i + j, v6 = rnd(2);
				/* log-uniform size in [9, 65535] */
				__u32 size = 9 * exp(rnd(1000001) / 1e6 * log(65535.0 / 9));

				if (size > 65535 - (v6 ? 8 : 20))
					size = 65535 - (v6 ? 8 : 20);
				fam6[idx] = v6;
				kinds[idx] = rnd(10) < 5 ? CLEAN : 1 + rnd(NKINDS - 1);
				if (kinds[idx] == RAGGED && v6)
					kinds[idx] = CLEAN;
				kinds_seen[kinds[idx]]++;
				nf[j] = plan(v6, size, kinds[idx], fr[j], 1500);
				if (rnd(2))
					shuffle(fr[j], nf[j]);
				if (known_fd >= 0)
					make_known(known_fd, v6, idx);
			}
			/* Interleave the group's fragments at random. */
			for (int left = nf[0] + nf[1] + nf[2], pos[3] = {}; left; left--) {
				int j;

				do
					j = rnd(g);
				while (pos[j] >= nf[j]);
				mix[m] = fr[j][pos[j]++];
				mix[m].tos |= j << 8;	/* which datagram */
				m++;
			}
			for (int x = 0; x < m; x++) {
				int j = mix[x].tos >> 8, idx = i + j;
				__u32 v = htonl(idx);

				mix[x].tos &= 0xff;
				for (__u32 b = 0; b < 65536; b += 4096)
					data[b] = (__u8)(idx + b);
				memcpy(data, &v, 4);
				send_frag(fam6[idx], idx, 1000 + idx, data, &mix[x]);
			}
			if (i % 300 == 0) {
				drain(rx4, 0);
				drain(rx6, 1);
				check_mem();
			}
		}
		/* Everything completes or expires: ipfrag_time 1 s, sweep 250 ms. */
		for (int t = 0; t < 20; t++) {
			usleep(100000);
			drain(rx4, 0);
			drain(rx6, 1);
			if (t < 5)
				check_mem();
		}
		for (int i = 0; i < n; i++)
			delivered_total += got[i];
		if (known_fd >= 0) {
			printf("batch %ld: %d blocks of slots taken\n", batch, blocks_taken());
			close(known_fd);
		}
		verdicts(n, batch);
		done += n;
		total += n;
	}
	printf("fragdiff: %ld datagrams (%ld delivered by the kernel), %ld disagreements, "
	       "memory estimate at most %.1f%% off sockstat (%ld samples, kernel up to %lld bytes)\n",
	       total, delivered_total, disagree, max_dev * 100, mem_samples, max_kmem);
	printf("fragdiff: kinds:");
	for (int k = 0; k < NKINDS; k++)
		printf(" %s %ld", kind_name[k], kinds_seen[k]);
	printf("\n");
	return disagree || max_dev > 0.10 || !mem_samples ? 1 : 0;
}
