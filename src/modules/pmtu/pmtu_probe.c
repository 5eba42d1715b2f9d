// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu DF probes: ICMP echo, or where echo is not answered, TCP SYNs carrying
 * data to the stalled connection's port; both with IP_PMTUDISC_PROBE (DF set,
 * sizes above the cached path MTU allowed). A probe is sent here and its
 * answer recognised here; the waiting is the event loop's (pmtu_search.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <netinet/icmp6.h>
#include <sys/random.h>
#include <sys/socket.h>
#include "modules/pmtu/pmtu_state.h"

static socklen_t dst_sockaddr(int family, const __u32 *dst, __u16 port,
			      struct sockaddr_storage *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->ss_family = family;
	if (family == AF_INET) {
		((struct sockaddr_in *)sa)->sin_port = htons(port);
		((struct sockaddr_in *)sa)->sin_addr.s_addr = dst[0];
		return sizeof(struct sockaddr_in);
	}
	((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
	memcpy(&((struct sockaddr_in6 *)sa)->sin6_addr, dst, 16);
	return sizeof(struct sockaddr_in6);
}

/* A UDP socket connected to dst: the kernel's route, source and path MTU toward it. */
static int udp_toward(int family, const __u32 *dst)
{
	struct sockaddr_storage sa;
	socklen_t l = dst_sockaddr(family, dst, 9, &sa);
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (void *)&sa, l)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* What the kernel would use toward dst now: its route's (or cached) path MTU. */
__u32 pmtu_route_mtu(int family, const __u32 *dst)
{
	int fd = udp_toward(family, dst), mtu = 0;
	socklen_t l = sizeof(mtu);

	if (fd < 0)
		return 0;
	getsockopt(fd, family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP,
		   family == AF_INET6 ? IPV6_MTU : IP_MTU, &mtu, &l);
	close(fd);
	return mtu > 0 ? mtu : 0;
}

/* Our address toward dst, as the kernel would choose it. */
static int local_addr(int family, const __u32 *dst, __u32 *src)
{
	struct sockaddr_storage me = {};
	socklen_t l = sizeof(me);
	int fd = udp_toward(family, dst), err = -1;

	if (fd < 0)
		return -1;
	if (!getsockname(fd, (void *)&me, &l)) {
		memcpy(src, family == AF_INET ? (void *)&((struct sockaddr_in *)&me)->sin_addr
					      : (void *)&((struct sockaddr_in6 *)&me)->sin6_addr,
		       family == AF_INET ? 4 : 16);
		err = 0;
	}
	close(fd);
	return err;
}

/* One of our own addresses (not loopback's 127/8 or ::1, which the BPF side
 * skips): its route is lo's, 65536 bytes, whose search cost about 20 probes
 * of up to 64 KB to ourselves. */
bool pmtu_dst_is_local(int family, const __u32 *dst)
{
	__u32 src[4] = {};

	return !local_addr(family, dst, src) && !memcmp(src, dst, family == AF_INET ? 4 : 16);
}

/* A raw socket whose packets carry DF, sizes above the cached path MTU allowed. */
static int probe_socket(int family, int proto)
{
	int v6 = family == AF_INET6;
	int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, proto);
	int pmtud = v6 ? IPV6_PMTUDISC_PROBE : IP_PMTUDISC_PROBE;

	if (fd >= 0)
		setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP,
			   v6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER, &pmtud, sizeof(pmtud));
	return fd;
}

/* What a forger must guess (echo id, SYN sequence and port): never random(),
 * which nobody seeds here and so repeats the same numbers at every run. */
static __u32 unguessable(void)
{
	__u32 v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = random() ^ pmtu_now_ns();
	return v;
}

static __u16 csum_fold(__u32 sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

static __u32 csum_add(__u32 sum, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += *(const __u16 *)(b + i);
	if (len & 1)
		sum += b[len - 1];
	return sum;
}

static void build_echo(struct pmtu_probe *p, __u16 seq)
{
	unsigned char *buf = p->buf;

	/* Not the pid: a forger who knows it could answer every sequence number. */
	p->id = unguessable() & 0xffff;
	p->seq = seq;
	memset(buf, 0x5a, p->len);
	if (p->family == AF_INET6) {
		struct icmp6_hdr *h = (void *)buf;

		h->icmp6_type = ICMP6_ECHO_REQUEST;
		h->icmp6_code = 0;
		h->icmp6_cksum = 0;	/* the kernel fills it for ICMPv6 raw sockets */
		h->icmp6_id = htons(p->id);
		h->icmp6_seq = htons(p->seq);
	} else {
		struct icmphdr *h = (void *)buf;

		h->type = ICMP_ECHO;
		h->code = 0;
		h->checksum = 0;
		h->un.echo.id = htons(p->id);
		h->un.echo.sequence = htons(p->seq);
		h->checksum = csum_fold(csum_add(0, buf, p->len));
	}
}

/*
 * Where ICMP echo is filtered: a DF SYN padded with data (which a SYN may
 * carry) to the port the stalled connection used. Its SYN-ACK or RST proves
 * the size arrived; our stack resets the half-open connection it leaves at
 * the peer, as for any unsolicited SYN-ACK.
 */
static int build_syn(struct pmtu_probe *p)
{
	unsigned char *buf = p->buf;
	__u32 src[4] = {}, sum;
	int off = 16;

	if (!p->dport || p->len < 20 || local_addr(p->family, p->dst, src))
		return -1;
	p->tcp_seq = unguessable();
	p->sport = 33000 + unguessable() % 28000;
	memset(buf, 0, p->len);
	*(__u16 *)buf = htons(p->sport);
	*(__u16 *)(buf + 2) = htons(p->dport);
	*(__u32 *)(buf + 4) = htonl(p->tcp_seq);
	buf[12] = 5 << 4;			/* data offset: 20 bytes */
	buf[13] = 0x02;				/* SYN */
	*(__u16 *)(buf + 14) = htons(65535);
	if (p->family == AF_INET6) {
		/* The kernel fills the checksum (offset 16) of raw IPv6 sockets on request. */
		setsockopt(p->fd, IPPROTO_IPV6, IPV6_CHECKSUM, &off, sizeof(off));
	} else {
		/* Pseudo header: source, destination, protocol, TCP length. */
		sum = csum_add(0, src, 4);
		sum = csum_add(sum, p->dst, 4);
		sum += htons(IPPROTO_TCP) + htons(p->len);
		sum = csum_add(sum, buf, p->len);
		*(__u16 *)(buf + 16) = csum_fold(sum);
	}
	return 0;
}

int pmtu_probe_send(struct pmtu_state *st, struct pmtu_probe *p, int method, int family,
		    const __u32 *dst, __u16 dport, __u32 mtu)
{
	int v6 = family == AF_INET6, hl = v6 ? 40 : 20;
	struct sockaddr_storage sa;
	socklen_t sl = dst_sockaddr(family, dst, 0, &sa);

	memset(p, 0, sizeof(*p));
	p->buf = st->buf;
	p->family = family;
	p->method = method;
	p->dport = dport;
	p->len = mtu - hl;
	memcpy(p->dst, dst, v6 ? 16 : 4);
	p->fd = probe_socket(family, method == PM_SYN ? IPPROTO_TCP
				     : v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
	if (p->fd < 0)
		return -1;
	if (method == PM_SYN ? build_syn(p) : (build_echo(p, ++st->echo_seq), 0))
		goto lost;
	p->t0 = pmtu_now_ns();
	if (sendto(p->fd, p->buf, p->len, 0, (void *)&sa, sl) < 0)
		goto lost;	/* EMSGSIZE: bigger than our own link */
	return 1;
lost:
	pmtu_probe_close(p);
	return 0;
}

/*
 * An echo reply proves the size only if it is the destination's and as big
 * as the probe (a reply echoes it whole): small replies forged by another
 * host made every size pass (t_pmtu_forged_echo_replies).
 */
static int echo_match(const struct pmtu_probe *p, ssize_t n, const struct sockaddr_storage *from)
{
	unsigned char *buf = p->buf;

	if (p->family == AF_INET6) {
		struct icmp6_hdr *h = (void *)buf;

		return n == (ssize_t)p->len && h->icmp6_type == ICMP6_ECHO_REPLY &&
		       !memcmp(&((struct sockaddr_in6 *)from)->sin6_addr, p->dst, 16) &&
		       ntohs(h->icmp6_id) == p->id && ntohs(h->icmp6_seq) == p->seq;
	}
	/* IPv4 raw sockets see the IP header. */
#ifndef SP_MUTANT_PM_ECHO_ANY	/* make mutants: any IPv4 reply with the id and sequence counts */
	if (n < 28 || n - (buf[0] & 0xf) * 4 != (ssize_t)p->len || memcmp(buf + 12, p->dst, 4))
		return 0;
#endif
	struct icmphdr *h = (void *)(buf + (buf[0] & 0xf) * 4);

	return h->type == ICMP_ECHOREPLY && ntohs(h->un.echo.id) == p->id &&
	       ntohs(h->un.echo.sequence) == p->seq;
}

static int syn_match(const struct pmtu_probe *p, ssize_t n, const struct sockaddr_storage *from)
{
	unsigned char *buf = p->buf, *t = buf;
	__u32 ack;

	if (p->family == AF_INET) {	/* IPv4 raw sockets see the IP header */
		if (n < 20 || memcmp(buf + 12, p->dst, 4))
			return 0;
		t = buf + (buf[0] & 0xf) * 4;
		n -= t - buf;
	} else if (memcmp(&((struct sockaddr_in6 *)from)->sin6_addr, p->dst, 16)) {
		return 0;
	}
	if (n < 20 || ntohs(*(__u16 *)t) != p->dport || ntohs(*(__u16 *)(t + 2)) != p->sport)
		return 0;
	ack = ntohl(*(__u32 *)(t + 8));
	/* SYN-ACK acks the SYN; a RST acks SYN and data. */
	return ((t[13] & 0x12) == 0x12 && ack == p->tcp_seq + 1) ||
	       ((t[13] & 0x04) && (ack == p->tcp_seq + 1 ||
				   ack == p->tcp_seq + 1 + (__u32)(p->len - 20)));
}

int pmtu_probe_answered(struct pmtu_probe *p)
{
	for (;;) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(p->fd, p->buf, PMTU_BUF, MSG_DONTWAIT, (void *)&from, &fl);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			continue;	/* a queued ICMP error: keep waiting for an answer */
		if (p->method == PM_SYN ? syn_match(p, n, &from) : echo_match(p, n, &from))
			return 1;
	}
}

void pmtu_probe_close(struct pmtu_probe *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}
