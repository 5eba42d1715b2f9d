// SPDX-License-Identifier: GPL-2.0
/*
 * tcptool: the TCP endpoints the tests and benchmarks drive.
 *   tcptool server PORT [reply]         accept forever (IPv4 and IPv6), discard data
 *                                       (reply: send back what one read got, and close)
 *   tcptool client HOST PORT BYTES [COUNT] [TIMEOUT_S]
 *   tcptool fetch HOST PORT BYTES COUNT  against a reply server
 *   tcptool hold HOST PORT COUNT SECONDS [TRICKLE_S]
 * The client opens COUNT connections one after the other, sends BYTES on
 * each, waits until the peer has acked everything (SIOCOUTQ == 0), and prints
 * per connection: seconds, MSS, retransmits, RTOs (from TCP_INFO).
 * Exit 0 if every transfer completed before TIMEOUT_S (default 30).
 * TCPTOOL_PACING=BYTES_PER_S paces the client's sends (SO_MAX_PACING_RATE):
 * a flow below the path's rate, with no queue to overflow.
 * fetch opens COUNT connections one after the other, each a request of
 * BYTES, the same back and a close (a one-request HTTP fetch), and prints
 * how many and how long they took: a connection-rate load whose every step
 * waits in a blocking call for the step before, so a connection's time is
 * the stack's, not a poll interval's (see fetch()).
 * hold keeps COUNT connections open for SECONDS (see hold()).
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
static int serve(int port, int reply)
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
			ssize_t got;

			if (!pfd[i].revents)
				continue;
			if ((got = read(pfd[i].fd, buf, sizeof(buf))) > 0) {
				/* A reply never blocks the one thread: what does not fit is
				 * dropped. Then the server closes first, as an HTTP/1.0
				 * server does: the TIME-WAITs are its own, and the client's
				 * port choice does not slow down as a run goes on. */
				if (!reply)
					continue;
				send(pfd[i].fd, buf, got, MSG_DONTWAIT);
			}
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
	if (getenv("TCPTOOL_PACING")) {
		unsigned long rate = strtoul(getenv("TCPTOOL_PACING"), NULL, 10);

		setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate));
	}
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

/*
 * COUNT fetches of BYTES (at most 1024: a request the server reads in one
 * read), one after the other, each read back to the server's close. The client
 * in `client` waits for the peer's ACK by polling SIOCOUTQ every
 * millisecond: a connection of 50 us then took 50 us or 1.1 ms by the
 * race between that ACK and the first poll, and the connection rate of a
 * run moved by a factor of 2 to 3 (10000 to 22000 conn/s with nothing
 * attached). Here the reply is read in a blocking read().
 */
static int fetch(const struct addrinfo *ai, long bytes, int count)
{
	static char buf[1 << 16];
	double t0 = now();
	int done = 0;

	if (bytes <= 0 || bytes > 1024)
		return 2;
	for (; done < count; done++) {
		int fd = socket(ai->ai_family, SOCK_STREAM, 0);
		long got = 0;
		ssize_t n;

		if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			perror("tcptool fetch: connect");
			break;
		}
		if (write(fd, buf, bytes) != bytes) {
			perror("tcptool fetch: write");
			close(fd);
			break;
		}
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			got += n;
		close(fd);
		if (got != bytes) {
			fprintf(stderr, "tcptool fetch: %ld of %ld bytes back\n", got, bytes);
			break;
		}
	}
	printf("fetches=%d secs=%.6f\n", done, now() - t0);
	return done == count ? 0 : 1;
}

static int hold_open(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * What a client that wants to hold a server's connections does: COUNT
 * connections kept open for SECONDS, each one the peer closes opened again
 * 0.2 s later. With TRICKLE_S, each sends an HTTP request that never ends,
 * one byte every TRICKLE_S (a slowloris); without, nothing. Prints how many
 * were opened and how many the peer closed.
 */
static int hold(const struct addrinfo *ai, int count, double secs, double trickle)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	struct pollfd *pfd = calloc(count, sizeof(*pfd));
	struct held { int fd; double next; size_t sent; } *h = calloc(count, sizeof(*h));
	double end = now() + secs, t;
	long opened = 0, closed = 0;
	char buf[4096];

	if (!pfd || !h)
		return 1;
	for (int i = 0; i < count; i++)
		h[i].fd = -1;
	while ((t = now()) < end) {
		for (int i = 0; i < count; i++) {
			if (h[i].fd < 0 && t >= h[i].next) {
				h[i] = (struct held){ hold_open(ai), t + (trickle > 0 ? 0 : 1e9), 0 };
				opened += h[i].fd >= 0;
				if (h[i].fd < 0)
					h[i].next = t + 0.2;
			}
			if (h[i].fd >= 0 && t >= h[i].next) {
				char c = h[i].sent < sizeof(req) - 1 ? req[h[i].sent] : 'a';

				/* Not connected yet: tried again next round. */
				if (write(h[i].fd, &c, 1) == 1)
					h[i].sent++, h[i].next = t + trickle;
			}
			pfd[i] = (struct pollfd){ .fd = h[i].fd, .events = POLLIN };
		}
		if (poll(pfd, count, 50) <= 0)
			continue;
		for (int i = 0; i < count; i++) {
			ssize_t n;

			if (!pfd[i].revents || h[i].fd < 0)
				continue;
			n = read(h[i].fd, buf, sizeof(buf));
			if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
				continue;
			close(h[i].fd);
			h[i] = (struct held){ -1, now() + 0.2, 0 };
			closed++;
		}
	}
	printf("held opened=%ld closed_by_peer=%ld\n", opened, closed);
	return 0;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int count = 1, rc = 0;
	double timeout = 30;

	if (argc >= 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]), argc > 3 && !strcmp(argv[3], "reply"));
	if (argc < 5 || (strcmp(argv[1], "client") && strcmp(argv[1], "hold") &&
			 (strcmp(argv[1], "fetch") || argc < 6))) {
		fprintf(stderr, "usage: tcptool server PORT [reply] | client HOST PORT BYTES [COUNT] [TIMEOUT_S] |\n"
			"       fetch HOST PORT BYTES COUNT | hold HOST PORT COUNT SECONDS [TRICKLE_S]\n");
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
	if (!strcmp(argv[1], "fetch")) {
		rc = fetch(ai, atol(argv[4]), count);
		freeaddrinfo(ai);
		return rc;
	}
	if (!strcmp(argv[1], "hold")) {
		rc = argc > 5 ? hold(ai, atoi(argv[4]), atof(argv[5]), argc > 6 ? atof(argv[6]) : 0) : 2;
		freeaddrinfo(ai);
		return rc;
	}
	for (int i = 0; i < count; i++)
		if (one_transfer(ai, atol(argv[4]), now() + timeout))
			rc = 1;
	freeaddrinfo(ai);
	return rc;
}
