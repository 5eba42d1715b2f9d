// SPDX-License-Identifier: GPL-2.0
/*
 * tcptool: the TCP endpoints the tests and benchmarks drive.
 *   tcptool server PORT                 accept forever (IPv4 and IPv6), discard data
 *   tcptool client HOST PORT BYTES [COUNT] [TIMEOUT_S]
 * The client opens COUNT connections one after the other, sends BYTES on
 * each, waits until the peer has acked everything (SIOCOUTQ == 0), and prints
 * per connection: seconds, MSS, retransmits, RTOs (from TCP_INFO).
 * Exit 0 if every transfer completed before TIMEOUT_S (default 30).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One thread, poll(): cheap enough that it never limits a connection-rate benchmark. */
static int serve(int port)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	static struct pollfd pfd[1024];
	static char buf[1 << 16];
	int one = 1, n = 1, fd = socket(AF_INET6, SOCK_STREAM, 0);

	/* A v6 any-socket takes IPv4 too (bindv6only=0 in a fresh netns). */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (void *)&a6, sizeof(a6)) || listen(fd, 1024)) {
		perror("tcptool server");
		return 1;
	}
	printf("listening %d\n", port);
	fflush(stdout);
	pfd[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	for (;;) {
		if (poll(pfd, n, -1) < 0)
			continue;
		for (int i = n - 1; i >= 1; i--) {
			if (!pfd[i].revents || read(pfd[i].fd, buf, sizeof(buf)) > 0)
				continue;
			close(pfd[i].fd);
			pfd[i] = pfd[--n];
		}
		if ((pfd[0].revents & POLLIN) && n < 1024) {
			int c = accept(fd, NULL, NULL);

			if (c >= 0)
				pfd[n++] = (struct pollfd){ .fd = c, .events = POLLIN };
		}
	}
}

static int one_transfer(const struct addrinfo *ai, long bytes, double deadline)
{
	static char buf[1 << 16];
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	double t0 = now();
	int fd = socket(ai->ai_family, SOCK_STREAM, 0), outq;
	long left = bytes;
	struct timeval tv = { .tv_sec = 1 };

	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		perror("tcptool connect");
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (left > 0 && now() < deadline) {
		ssize_t n = write(fd, buf, left < (long)sizeof(buf) ? left : (long)sizeof(buf));

		if (n > 0)
			left -= n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			break;
	}
	while (left == 0 && now() < deadline && !ioctl(fd, SIOCOUTQ, &outq) && outq > 0)
		usleep(1000);
	getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
	printf("conn secs=%.4f mss=%u retrans=%u rto_backoffs=%u done=%d\n", now() - t0,
	       ti.tcpi_snd_mss, ti.tcpi_total_retrans, ti.tcpi_backoff,
	       left == 0 && outq == 0);
	fflush(stdout);
	close(fd);
	return left == 0 && outq == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int count = 1, rc = 0;
	double timeout = 30;

	if (argc >= 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]));
	if (argc < 5 || strcmp(argv[1], "client")) {
		fprintf(stderr, "usage: tcptool server PORT | client HOST PORT BYTES [COUNT] [TIMEOUT_S]\n");
		return 2;
	}
	if (argc > 5)
		count = atoi(argv[5]);
	if (argc > 6)
		timeout = atof(argv[6]);
	if (getaddrinfo(argv[2], argv[3], &hints, &ai)) {
		fprintf(stderr, "tcptool: cannot resolve %s\n", argv[2]);
		return 2;
	}
	for (int i = 0; i < count; i++)
		if (one_transfer(ai, atol(argv[4]), now() + timeout))
			rc = 1;
	freeaddrinfo(ai);
	return rc;
}
