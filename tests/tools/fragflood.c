// SPDX-License-Identifier: GPL-2.0
/*
 * fragflood: send first fragments (offset 0, MF set) of IPv4 or IPv6 UDP
 * datagrams that never complete, the way a reassembly-memory hog does.
 *   fragflood DST COUNT [SRC|SRC/PREFIX] [PPS] [SIZE] [complete]
 * SRC/PREFIX picks a random source in that prefix per datagram (spoofed
 * flood). PPS 0 = as fast as possible. SIZE = fragment payload (default 1400).
 * "complete": whole datagrams of 2 x SIZE bytes instead, two per source (the
 * cheapest way for a spoofer to complete datagrams and look legitimate).
 * DST and SRC are IPv4 or IPv6 addresses (IPv6: the prefix may be up to 128).
 * FRAGFLOOD_SEED=N in the environment fixes the datagram ids (and spoofed
 * sources): a second flood with the same seed sends duplicates.
 * Raw socket with its own IP header: root, and only inside a test namespace.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

/* A random address in src/prefix (len bytes), or src itself. */
static void pick(unsigned char *out, const unsigned char *src, int len, unsigned int prefix)
{
	memcpy(out, src, len);
	for (int bit = prefix; bit < len * 8; bit++)
		if (random() & 1)
			out[bit / 8] ^= 0x80 >> (bit % 8);
}

int main(int argc, char **argv)
{
	static unsigned char buf[1600];
	struct sockaddr_storage dst = {};
	unsigned long count, pps = 0, size = 1400, sent = 0;
	unsigned int prefix = 128;
	unsigned char src[16] = {}, prev[16] = {};
	char srcbuf[64] = "", *slash;
	struct timespec t0, now;
	int fd, one = 1, v6, alen, hl;
	socklen_t dlen;

	if (argc < 3) {
		fprintf(stderr, "usage: fragflood DST COUNT [SRC[/PREFIX]] [PPS] [SIZE] [complete]\n");
		return 2;
	}
	v6 = strchr(argv[1], ':') != NULL;
	alen = v6 ? 16 : 4;
	hl = v6 ? 48 : 20;
	if (v6) {
		struct sockaddr_in6 *d = (void *)&dst;

		d->sin6_family = AF_INET6;
		dlen = sizeof(*d);
		if (inet_pton(AF_INET6, argv[1], &d->sin6_addr) != 1)
			return fprintf(stderr, "fragflood: bad DST %s\n", argv[1]), 2;
	} else {
		struct sockaddr_in *d = (void *)&dst;

		d->sin_family = AF_INET;
		dlen = sizeof(*d);
		if (inet_pton(AF_INET, argv[1], &d->sin_addr) != 1)
			return fprintf(stderr, "fragflood: bad DST %s\n", argv[1]), 2;
	}
	count = strtoul(argv[2], NULL, 0);
	prefix = alen * 8;
	if (argc > 3 && strcmp(argv[3], "-")) {
		snprintf(srcbuf, sizeof(srcbuf), "%s", argv[3]);
		slash = strchr(srcbuf, '/');
		if (slash) {
			*slash = '\0';
			prefix = atoi(slash + 1);
		}
		if (inet_pton(v6 ? AF_INET6 : AF_INET, srcbuf, src) != 1 || prefix > (unsigned)alen * 8)
			return fprintf(stderr, "fragflood: bad SRC %s\n", argv[3]), 2;
	} else if (v6) {
		/* The kernel does not fill an IPv6 source in: take the route's. */
		struct sockaddr_in6 me;
		socklen_t ml = sizeof(me);
		int u = socket(AF_INET6, SOCK_DGRAM, 0);

		((struct sockaddr_in6 *)&dst)->sin6_port = htons(9);
		if (u < 0 || connect(u, (void *)&dst, dlen) || getsockname(u, (void *)&me, &ml))
			return perror("fragflood: source"), 1;
		memcpy(src, &me.sin6_addr, 16);
		((struct sockaddr_in6 *)&dst)->sin6_port = 0;
		close(u);
	}
	if (argc > 4)
		pps = strtoul(argv[4], NULL, 0);
	if (argc > 5)
		size = strtoul(argv[5], NULL, 0) & ~7UL;
	bool complete = argc > 6 && !strcmp(argv[6], "complete");

	if (size < 8 || size > sizeof(buf) - hl - 8)
		return fprintf(stderr, "fragflood: SIZE must be 8..%zu\n", sizeof(buf) - hl - 8), 2;

	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0 || (!v6 && setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)))) {
		perror("fragflood: raw socket");
		return 1;
	}
	srandom(getenv("FRAGFLOOD_SEED") ? (unsigned int)atoi(getenv("FRAGFLOOD_SEED")) :
		getpid() ^ time(NULL));
	memset(buf, 0xa5, sizeof(buf));
	if (v6) {
		struct ip6_hdr *ip6 = (void *)buf;

		memset(buf, 0, 48);
		ip6->ip6_flow = htonl(6 << 28);
		ip6->ip6_plen = htons(8 + size);
		ip6->ip6_nxt = IPPROTO_FRAGMENT;
		ip6->ip6_hlim = 64;
		ip6->ip6_dst = ((struct sockaddr_in6 *)&dst)->sin6_addr;
		buf[40] = IPPROTO_UDP;
	} else {
		struct iphdr *ip = (void *)buf;

		ip->version = 4;
		ip->ihl = 5;
		ip->ttl = 64;
		ip->protocol = IPPROTO_UDP;
		ip->tot_len = htons(20 + size);
		ip->daddr = ((struct sockaddr_in *)&dst)->sin_addr.s_addr;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (; sent < count; sent++) {
		unsigned char *saddr = buf + (v6 ? 8 : 12);
		unsigned int id = random();

		if (complete && sent % 2)
			memcpy(saddr, prev, alen);	/* a second datagram from the same source */
		else
			pick(saddr, src, alen, prefix);
		memcpy(prev, saddr, alen);
		if (v6)
			memcpy(buf + 44, &id, 4);
		else
			((struct iphdr *)buf)->id = id;
		/* IPv4: the kernel fills the checksum (and, with saddr 0, the source). */
		for (int part = 0; part < (complete ? 2 : 1); part++) {
			if (v6)
				*(unsigned short *)(buf + 42) = htons(part ? size : 1);
			else
				((struct iphdr *)buf)->frag_off = htons(part ? size / 8 : IP_MF);
			if (sendto(fd, buf, hl + size, 0, (void *)&dst, dlen) < 0) {
				perror("fragflood: sendto");
				return 1;
			}
		}
		if (pps) {
			double due = (double)(sent + 1) / pps, el;

			do {
				clock_gettime(CLOCK_MONOTONIC, &now);
				el = now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) / 1e9;
				if (el < due)
					usleep((due - el) * 1e6 > 1000 ? 1000 : (due - el) * 1e6 + 1);
			} while (el < due);
		}
	}
	printf("sent %lu %s\n", sent, complete ? "complete datagrams" : "first fragments");
	return 0;
}
