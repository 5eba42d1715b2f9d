// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu: loader side. The sockops program (bpf/pmtu.bpf.c) learns from
 * connections and reports black-hole suspects on a ring buffer; here each
 * suspect destination is searched with DF probes (ICMP echo, or where echo is
 * not answered, TCP SYNs carrying data to the connection's port; both with
 * IP_PMTUDISC_PROBE), by binary search between a known-good and a known-bad MTU, the first step
 * bounded by max_step_pct (Heffner's 2x), max_probes tries per size (RFC 8899
 * MAX_PROBES), until high - low < threshold. The result goes to the map, and
 * with pmtu.route=1 into a route MTU so stalled connections recover too.
 * Probes run in the loader's network namespace: run stackpilot in the
 * namespace whose connections it serves (ip netns exec NS stackpilot run).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <netinet/icmp6.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"
#include "pmtu.skel.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
#define RTPROT_STACKPILOT 0xa5	/* marks the routes this module installs */

#define F(x) offsetof(struct sp_pmtu_cfg, x)
static const struct sp_tunable tunables[] = {
	{ "prefix4", F(prefix4), 0, 32, 32, "IPv4 destinations share what is learned by this prefix" },
	{ "prefix6", F(prefix6), 0, 128, 64, "IPv6 destinations share what is learned by this prefix" },
	{ "learn_kb", F(learn_kb), 4, 1 << 20, 64,
	  "KiB a connection delivers without an RTO to prove its MTU good" },
	{ "threshold", F(threshold), 1, 1024, 8, "search stops when high - low < threshold bytes" },
	{ "max_step_pct", F(max_step_pct), 101, 1000, 200,
	  "a probe is at most low * max_step_pct / 100 (Heffner: 2x)" },
	{ "max_probes", F(max_probes), 1, 10, 3, "tries per probe size before it counts as too big" },
	{ "probe_timeout_ms", F(probe_timeout_ms), 10, 10000, 500,
	  "longest wait for a probe's answer (shorter: 4x the base probe's RTT)" },
	{ "interval_s", F(interval_s), 1, 86400, 600,
	  "entries expire after this and are searched again (RFC 4821 raise timer)" },
	{ "base_mss", F(base_mss), 500, 9000, 1024, "first probe size as an MSS, as tcp_base_mss" },
	{ "route", F(route), 0, 1, 0, "1: install a route MTU for searched destinations" },
};
#undef F

#define MAX_PENDING 64
#define MAX_ROUTES 256

static struct pmtu_bpf *skel;
static struct bpf_link *sp_link;
static struct ring_buffer *rb;
static __u64 my_netns;
static struct sp_pmtu_event pending[MAX_PENDING];
static int nr_pending;
static struct route { struct sp_pmtu_key key; __u32 dst[4]; int family; } routes[MAX_ROUTES];
static int nr_routes;
static int saved_mtu_probing = -1, mtu_probing_arg = -1;
static unsigned long ticks;
static __u16 echo_seq;

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void read_cfg(struct sp_pmtu_cfg *c)
{
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.pmtu_cfg), &zero, c))
		memset(c, 0, sizeof(*c));
	/* Written from outside too: clamp as the BPF side does. */
	for (int i = 0; i < (int)(sizeof(tunables) / sizeof(tunables[0])); i++) {
		__u32 *v = (__u32 *)((char *)c + tunables[i].off);

		if (*v < tunables[i].min)
			*v = tunables[i].min;
		if (*v > tunables[i].max)
			*v = tunables[i].max;
	}
}

/* ---- probes ------------------------------------------------------------- */

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
static __u32 route_mtu(int family, const __u32 *dst)
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

/* A raw socket whose packets carry DF, sizes above the cached path MTU allowed. */
static int probe_socket(int family, int proto)
{
	int v6 = family == AF_INET6, fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, proto);
	int pmtud = v6 ? IPV6_PMTUDISC_PROBE : IP_PMTUDISC_PROBE;

	if (fd >= 0)
		setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP,
			   v6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER, &pmtud, sizeof(pmtud));
	return fd;
}

/* The next packet on fd before deadline (CLOCK_MONOTONIC ns); < 0 when none came. */
static ssize_t recv_until(int fd, void *buf, size_t len, __u64 deadline,
			  struct sockaddr_storage *from)
{
	for (;;) {
		socklen_t fl = sizeof(*from);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		__u64 now = mono_ns();
		ssize_t n;

		if (now >= deadline || poll(&p, 1, (deadline - now) / 1000000 + 1) <= 0)
			return -1;
		n = recvfrom(fd, buf, len, MSG_DONTWAIT, (void *)from, &fl);
		if (n >= 0)
			return n;	/* errors: keep waiting for an answer */
	}
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

/* One DF echo of `mtu` bytes (IP header included). 1 answered, 0 not. */
static int echo_once(int family, const __u32 *dst, __u32 mtu, int timeout_ms, double *rtt_ms)
{
	int v6 = family == AF_INET6, fd, hl = v6 ? 40 : 20;
	struct sockaddr_storage sa, from;
	socklen_t sl = dst_sockaddr(family, dst, 0, &sa);
	unsigned char buf[65536];
	__u16 id = getpid() & 0xffff, seq = ++echo_seq;
	__u64 t0 = mono_ns(), deadline = t0 + timeout_ms * 1000000ULL;
	size_t len = mtu - hl;
	ssize_t n;
	int ok = 0;

	fd = probe_socket(family, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
	if (fd < 0)
		return -1;
	memset(buf, 0x5a, len);
	if (v6) {
		struct icmp6_hdr *h = (void *)buf;

		h->icmp6_type = ICMP6_ECHO_REQUEST;
		h->icmp6_code = 0;
		h->icmp6_cksum = 0;	/* the kernel fills it for ICMPv6 raw sockets */
		h->icmp6_id = htons(id);
		h->icmp6_seq = htons(seq);
	} else {
		struct icmphdr *h = (void *)buf;

		h->type = ICMP_ECHO;
		h->code = 0;
		h->checksum = 0;
		h->un.echo.id = htons(id);
		h->un.echo.sequence = htons(seq);
		h->checksum = csum_fold(csum_add(0, buf, len));
	}
	if (sendto(fd, buf, len, 0, (void *)&sa, sl) < 0) {
		close(fd);
		return 0;	/* EMSGSIZE: bigger than our own link */
	}
	while (!ok && (n = recv_until(fd, buf, sizeof(buf), deadline, &from)) >= 0) {
		if (v6) {
			struct icmp6_hdr *h = (void *)buf;

			ok = n >= 8 && h->icmp6_type == ICMP6_ECHO_REPLY &&
			     ntohs(h->icmp6_id) == id && ntohs(h->icmp6_seq) == seq;
		} else if (n >= 28) {
			struct icmphdr *h = (void *)(buf + (buf[0] & 0xf) * 4);

			ok = h->type == ICMP_ECHOREPLY && ntohs(h->un.echo.id) == id &&
			     ntohs(h->un.echo.sequence) == seq;
		}
	}
	if (ok && rtt_ms)
		*rtt_ms = (mono_ns() - t0) / 1e6;
	close(fd);
	return ok;
}

/*
 * Where ICMP echo is filtered: a DF SYN of `mtu` bytes (padded with data, which
 * a SYN may carry) to the port the stalled connection used. Its SYN-ACK or RST
 * proves the size arrived; our stack resets the half-open connection it
 * leaves at the peer, as for any unsolicited SYN-ACK. 1 answered, 0 not.
 */
static int syn_once(int family, const __u32 *dst, __u16 dport, __u32 mtu, int timeout_ms,
		    double *rtt_ms)
{
	int v6 = family == AF_INET6, hl = v6 ? 40 : 20, fd, off = 16;
	__u32 src[4] = {}, seq = random(), sum;
	__u16 sport = 33000 + random() % 28000;
	size_t len = mtu - hl;
	unsigned char buf[65536];
	struct sockaddr_storage sa, from;
	socklen_t sl = dst_sockaddr(family, dst, 0, &sa);
	__u64 t0 = mono_ns(), deadline = t0 + timeout_ms * 1000000ULL;
	ssize_t n;
	int ok = 0;

	if (!dport || len < 20 || local_addr(family, dst, src))
		return 0;
	fd = probe_socket(family, IPPROTO_TCP);
	if (fd < 0)
		return -1;
	memset(buf, 0, len);
	*(__u16 *)buf = htons(sport);
	*(__u16 *)(buf + 2) = htons(dport);
	*(__u32 *)(buf + 4) = htonl(seq);
	buf[12] = 5 << 4;			/* data offset: 20 bytes */
	buf[13] = 0x02;				/* SYN */
	*(__u16 *)(buf + 14) = htons(65535);
	if (v6) {
		/* The kernel fills the checksum (offset 16) of raw IPv6 sockets on request. */
		setsockopt(fd, IPPROTO_IPV6, IPV6_CHECKSUM, &off, sizeof(off));
	} else {
		/* Pseudo header: source, destination, protocol, TCP length. */
		sum = csum_add(0, src, 4);
		sum = csum_add(sum, dst, 4);
		sum += htons(IPPROTO_TCP) + htons(len);
		sum = csum_add(sum, buf, len);
		*(__u16 *)(buf + 16) = csum_fold(sum);
	}
	if (sendto(fd, buf, len, 0, (void *)&sa, sl) < 0) {
		close(fd);
		return 0;
	}
	while (!ok && (n = recv_until(fd, buf, sizeof(buf), deadline, &from)) >= 0) {
		unsigned char *t = buf;
		__u32 ack;

		if (!v6) {	/* IPv4 raw sockets see the IP header */
			if (n < 20 || memcmp(buf + 12, dst, 4))
				continue;
			t = buf + (buf[0] & 0xf) * 4;
			n -= t - buf;
		} else if (memcmp(&((struct sockaddr_in6 *)&from)->sin6_addr, dst, 16)) {
			continue;
		}
		if (n < 20 || ntohs(*(__u16 *)t) != dport || ntohs(*(__u16 *)(t + 2)) != sport)
			continue;
		ack = ntohl(*(__u32 *)(t + 8));
		/* SYN-ACK acks the SYN; a RST acks SYN and data. */
		ok = ((t[13] & 0x12) == 0x12 && ack == seq + 1) ||
		     ((t[13] & 0x04) && (ack == seq + 1 || ack == seq + 1 + (__u32)(len - 20)));
	}
	if (ok && rtt_ms)
		*rtt_ms = (mono_ns() - t0) / 1e6;
	close(fd);
	return ok;
}

enum method { ECHO, SYN };

static int probe_once(enum method m, const struct sp_pmtu_event *ev, __u32 mtu, int timeout_ms,
		      double *rtt_ms)
{
	if (m == SYN)
		return syn_once(ev->key.family, ev->dst, ev->dport, mtu, timeout_ms, rtt_ms);
	return echo_once(ev->key.family, ev->dst, mtu, timeout_ms, rtt_ms);
}

static int probe(enum method m, const struct sp_pmtu_event *ev, __u32 mtu,
		 const struct sp_pmtu_cfg *c, int timeout_ms, __u32 *sent)
{
	for (__u32 i = 0; i < c->max_probes && !sp_stopping; i++) {
		++*sent;
		if (probe_once(m, ev, mtu, timeout_ms, NULL) == 1)
			return 1;
	}
	return 0;
}

/* The base size with each method in turn: the first that is answered is used. */
static int pick_method(const struct sp_pmtu_event *ev, __u32 base, const struct sp_pmtu_cfg *c,
		       enum method *m, double *rtt, __u32 *sent)
{
	for (int k = ECHO; k <= SYN; k++) {
		if (k == SYN && !ev->dport)
			break;
		for (__u32 i = 0; i < c->max_probes && !sp_stopping; i++, ++*sent) {
			if (probe_once(k, ev, base, c->probe_timeout_ms, rtt) == 1) {
				*m = k;
				return 1;
			}
		}
	}
	return 0;
}

/* ---- routes (netlink) --------------------------------------------------- */

struct nlreq {
	struct nlmsghdr nh;
	struct rtmsg rt;
	char attrs[256];
};

static void addattr(struct nlreq *r, int type, const void *data, int len)
{
	struct rtattr *a = (void *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	a->rta_type = type;
	a->rta_len = RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Send one request; for RTM_GETROUTE, copy the reply into *reply. 0 or -errno. */
static int nl_talk(struct nlreq *req, struct nlreq *reply)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	char buf[8192];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), err = -EIO;
	ssize_t n;

	if (fd < 0)
		return -errno;
	req->nh.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	if (sendto(fd, req, req->nh.nlmsg_len, 0, (void *)&sa, sizeof(sa)) < 0)
		goto out;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				err = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
				goto out;
			}
			if (reply && h->nlmsg_type == RTM_NEWROUTE && h->nlmsg_len <= sizeof(*reply)) {
				memcpy(reply, h, h->nlmsg_len);
				reply = NULL;
			}
		}
	}
out:
	close(fd);
	return err;
}

static void route_req(struct nlreq *r, int type, int flags, int family, const __u32 *dst)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	r->nh.nlmsg_type = type;
	r->nh.nlmsg_flags = flags;
	r->rt.rtm_family = family;
	r->rt.rtm_dst_len = family == AF_INET ? 32 : 128;
	r->rt.rtm_table = RT_TABLE_MAIN;
	addattr(r, RTA_DST, dst, family == AF_INET ? 4 : 16);
}

/* A host route to dst with the kernel's current nexthop and `mtu`, marked as ours. */
static int route_add(int family, const __u32 *dst, __u32 mtu)
{
	struct nlreq req, cur;
	struct rtattr *a;
	int len, err;
	char metrics[RTA_SPACE(sizeof(__u32))];
	struct rtattr *m = (void *)metrics;

	route_req(&req, RTM_GETROUTE, 0, family, dst);
	req.nh.nlmsg_flags = 0;
	memset(&cur, 0, sizeof(cur));
	err = nl_talk(&req, &cur);
	if (err && !cur.nh.nlmsg_len)
		return err;
	route_req(&req, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, family, dst);
	req.rt.rtm_protocol = RTPROT_STACKPILOT;
	req.rt.rtm_scope = RT_SCOPE_UNIVERSE;
	req.rt.rtm_type = RTN_UNICAST;
	len = cur.nh.nlmsg_len - NLMSG_LENGTH(sizeof(struct rtmsg));
	for (a = RTM_RTA(&cur.rt); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == RTA_GATEWAY || a->rta_type == RTA_OIF)
			addattr(&req, a->rta_type, RTA_DATA(a), RTA_PAYLOAD(a));
	m->rta_type = RTAX_MTU;
	m->rta_len = RTA_LENGTH(sizeof(__u32));
	memcpy(RTA_DATA(m), &mtu, sizeof(mtu));
	addattr(&req, RTA_METRICS, metrics, sizeof(metrics));
	return nl_talk(&req, NULL);
}

static int route_del(int family, const __u32 *dst)
{
	struct nlreq req;

	route_req(&req, RTM_DELROUTE, 0, family, dst);
	req.rt.rtm_protocol = RTPROT_STACKPILOT;
	return nl_talk(&req, NULL);
}

static void forget_route(const struct sp_pmtu_key *k)
{
	for (int i = 0; i < nr_routes; i++) {
		if (memcmp(&routes[i].key, k, sizeof(*k)))
			continue;
		route_del(routes[i].family, routes[i].dst);
		routes[i] = routes[--nr_routes];
		return;
	}
}

/* ---- search ------------------------------------------------------------- */

static void search(const struct sp_pmtu_event *ev)
{
	int fam = ev->key.family, fd = bpf_map__fd(skel->maps.pmtu_dsts);
	__u32 floor_mtu, ceil_mtu, low, high, size, cap, sent = 0;
	struct sp_pmtu_entry e = {};
	struct sp_pmtu_cfg c;
	double rtt = 0;
	int timeout, ok;
	enum method m = ECHO;
	char a[INET6_ADDRSTRLEN];

	read_cfg(&c);
	inet_ntop(fam, ev->dst, a, sizeof(a));
	bpf_map_lookup_elem(fd, &ev->key, &e);
	if (ev->key.netns != my_netns) {
		fprintf(stderr, "stackpilot: pmtu: %s: connection in another network namespace; "
			"cannot probe from here (run stackpilot in that namespace)\n", a);
		return;
	}
	floor_mtu = c.base_mss + (fam == AF_INET ? 40 : 60);
	if (fam == AF_INET6 && floor_mtu < 1280)
		floor_mtu = 1280;	/* IPv6's minimum MTU always passes */
	ceil_mtu = route_mtu(fam, ev->dst);
	if (!ceil_mtu || ceil_mtu <= floor_mtu)
		return;
	/* The base size first: it tells whether, and how, probes are answered. */
	ok = pick_method(ev, floor_mtu, &c, &m, &rtt, &sent);
	if (sp_stopping)
		return;
	if (!ok) {
		e.state = SP_PM_S_NOPROBE;
		e.probes += sent;
		e.updated_ns = mono_ns();
		bpf_map_update_elem(fd, &ev->key, &e, BPF_ANY);
		fprintf(stderr, "stackpilot: pmtu: %s answers neither ICMP echo nor a TCP SYN to port "
			"%u at %u bytes: cannot probe it; learning from connections only "
			"(set tcp_mtu_probing=1)\n", a, ev->dport, floor_mtu);
		return;
	}
	if (m == SYN)
		fprintf(stderr, "stackpilot: pmtu: %s does not answer ICMP echo; probing it with "
			"TCP SYNs to port %u\n", a, ev->dport);
	timeout = rtt * 4 < 20 ? 20 : rtt * 4 > c.probe_timeout_ms ? c.probe_timeout_ms : rtt * 4;
	low = e.low > floor_mtu ? e.low : floor_mtu;
	high = ceil_mtu + 1;
	while (high - low >= c.threshold && sent < 64 && !sp_stopping) {
		size = low + (high - low) / 2;
		cap = (__u64)low * c.max_step_pct / 100;
		if (size > cap)
			size = cap;
		if (probe(m, ev, size, &c, timeout, &sent))
			low = size;
		else
			high = size;
	}
	if (sp_stopping)
		return;	/* an unfinished search teaches nothing */
	e.low = low;
	e.high = high > ceil_mtu ? 0 : high;
	e.state = SP_PM_S_SEARCHED;
	e.probes += sent;
	e.updated_ns = mono_ns();
	forget_route(&ev->key);
	e.route_mtu = 0;
	if (c.route && e.high && nr_routes < MAX_ROUTES) {
		int err = route_add(fam, ev->dst, low);

		if (!err) {
			routes[nr_routes].key = ev->key;
			memcpy(routes[nr_routes].dst, ev->dst, 16);
			routes[nr_routes++].family = fam;
			e.route_mtu = low;
		} else {
			fprintf(stderr, "stackpilot: pmtu: route mtu %u to %s: %s\n", low, a, strerror(-err));
		}
	}
	bpf_map_update_elem(fd, &ev->key, &e, BPF_ANY);
}

static int on_event(void *ctx, void *data, size_t len)
{
	const struct sp_pmtu_event *ev = data;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;

	if (len < sizeof(*ev))
		return 0;
	/* A destination that answered no probe is not tried again before it
	 * expires: each try blocks for max_probes timeouts per method. */
	read_cfg(&c);
	if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.pmtu_dsts), &ev->key, &e) &&
	    e.state == SP_PM_S_NOPROBE &&
	    mono_ns() - e.updated_ns < (__u64)c.interval_s * 1000000000ULL)
		return 0;
	for (int i = 0; i < nr_pending; i++)
		if (!memcmp(&pending[i].key, &ev->key, sizeof(ev->key)))
			return 0;
	if (nr_pending < MAX_PENDING)
		pending[nr_pending++] = *ev;
	return 0;
}

/* Expired entries: searched ones are searched again (a path may have grown),
 * the rest dropped. */
static void expire(void)
{
	int fd = bpf_map__fd(skel->maps.pmtu_dsts);
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;
	void *prev = NULL;
	__u64 now = mono_ns();

	read_cfg(&c);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e) ||
		    now - e.updated_ns <= (__u64)c.interval_s * 1000000000ULL)
			continue;
		forget_route(&k);
		if (e.state == SP_PM_S_SEARCHED && k.netns == my_netns && nr_pending < MAX_PENDING &&
		    (k.family == AF_INET ? c.prefix4 == 32 : c.prefix6 == 128)) {
			struct sp_pmtu_event ev = { .key = k };

			memcpy(ev.dst, k.addr, sizeof(ev.dst));
			pending[nr_pending++] = ev;
		} else {
			bpf_map_delete_elem(fd, &k);
		}
	}
}

static void tick(struct sp_run *run)
{
	if (!skel)
		return;
	ring_buffer__poll(rb, 0);
	/* One search per tick keeps Ctrl-C and status responsive. */
	if (nr_pending) {
		struct sp_pmtu_event ev = pending[0];

		memmove(pending, pending + 1, --nr_pending * sizeof(pending[0]));
		search(&ev);
	}
	if (++ticks % 10 == 0)
		expire();
}

/* ---- start / stop ------------------------------------------------------- */

static int set_mtu_probing(const char *arg)
{
	__u32 v;

	if (sp_parse_u32(arg, 0, 2, &v))
		return sp_fail(2, "--mtu-probing %s: expected 0, 1 or 2", arg);
	mtu_probing_arg = v;
	return 0;
}

static const struct sp_run_opt mtu_probing_opt = {
	.module = &sp_mod_pmtu, .name = "mtu-probing", .arg = "N",
	.help = "net.ipv4.tcp_mtu_probing = N (0-2) here while running",
	.set = set_mtu_probing,
};

__attribute__((constructor)) static void register_opts(void)
{
	sp_run_opt_register(&mtu_probing_opt);
}

static int write_sysctl(const char *path, int v)
{
	FILE *f = fopen(path, "w");
	int err;

	if (!f)
		return -errno;
	err = fprintf(f, "%d\n", v) < 0;
	return fclose(f) || err ? -EIO : 0;
}

static void stop(struct sp_run *run)
{
	while (nr_routes)
		forget_route(&routes[0].key);
	if (saved_mtu_probing >= 0)
		write_sysctl("/proc/sys/net/ipv4/tcp_mtu_probing", saved_mtu_probing);
	saved_mtu_probing = -1;
	ring_buffer__free(rb);
	rb = NULL;
	if (skel)
		sp_module_unpublish(run, skel->obj, &sp_link);
	pmtu_bpf__destroy(skel);
	skel = NULL;
	nr_pending = 0;
}

static int start(struct sp_run *run)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	socklen_t l = sizeof(my_netns);
	int err, fd, cur;
	FILE *f;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &my_netns, &l))
		return sp_err("pmtu: reading this namespace's cookie: %s", strerror(errno));
	close(fd);
	skel = pmtu_bpf__open_opts(&opts);
	if (!skel)
		return sp_err("pmtu: open: %s", strerror(errno));
	err = pmtu_bpf__load(skel);
	if (err)
		return sp_err("pmtu: load: %s", strerror(-err));
	rb = ring_buffer__new(bpf_map__fd(skel->maps.pmtu_events), on_event, NULL, NULL);
	if (!rb)
		return sp_err("pmtu: ring buffer: %s", strerror(errno));
	if (sp_module_publish(run, &sp_mod_pmtu, skel->obj, skel->progs.sp_pmtu, &sp_link))
		return -1;
	f = fopen("/proc/sys/net/ipv4/tcp_mtu_probing", "r");
	if (!f || fscanf(f, "%d", &cur) != 1)
		cur = -1;
	if (f)
		fclose(f);
	if (mtu_probing_arg >= 0 && mtu_probing_arg != cur) {
		err = write_sysctl("/proc/sys/net/ipv4/tcp_mtu_probing", mtu_probing_arg);
		if (err)
			return sp_err("pmtu: setting tcp_mtu_probing: %s", strerror(-err));
		saved_mtu_probing = cur;
	} else if (mtu_probing_arg < 0 && cur == 0) {
		fprintf(stderr, "stackpilot: pmtu: net.ipv4.tcp_mtu_probing is 0 here: the kernel "
			"never detects black holes itself; --mtu-probing 1 sets it for this run\n");
	}
	return 0;
}

/* ---- status ------------------------------------------------------------- */

static const char *const names[SP_PM_NR] = {
	[SP_PM_CONNECTS] = "connects", [SP_PM_CLAMPED] = "started_with_learned_mss",
	[SP_PM_LEARNED] = "learned_from_connections", [SP_PM_SUSPECTS] = "black_hole_suspects",
	[SP_PM_EVENTS_LOST] = "events_lost",
};
static const char *const states[] = { "learned", "suspect", "searched", "no_probe" };

static void status(const char *pin_dir, FILE *out, bool json)
{
	int fd = sp_open_pinned(pin_dir, "pmtu_dsts"), n = 0;
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	void *prev = NULL;
	__u64 now = mono_ns();

	sp_print_counters(pin_dir, "pmtu_ctr", names, SP_PM_NR, out, json);
	if (fd < 0)
		return;
	fprintf(out, json ? ",\"destinations\":[" : "  destinations:\n");
	while (!bpf_map_get_next_key(fd, prev, &next) && n < 100) {
		char a[INET6_ADDRSTRLEN];
		int v6 = next.family == AF_INET6;

		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e))
			continue;
		inet_ntop(v6 ? AF_INET6 : AF_INET, k.addr, a, sizeof(a));
		fprintf(out, json ? "%s{\"dst\":\"%s\",\"low_mtu\":%u,\"high_mtu\":%u,\"low_mss\":%u,"
				    "\"state\":\"%s\",\"age_s\":%.1f,\"probes\":%u,\"clamped\":%u,\"route_mtu\":%u}"
				  : "%s    %-24s low %-5u high %-5u mss %-5u %-9s age %.1fs probes %u clamped %u route %u\n",
			json && n ? "," : "", a, e.low, e.high, e.low ? e.low - (v6 ? 60 : 40) : 0,
			e.state < 4 ? states[e.state] : "?", (now - e.updated_ns) / 1e9, e.probes,
			e.clamped, e.route_mtu);
		n++;
	}
	if (json)
		fprintf(out, "]");
	close(fd);
}

const struct sp_module sp_mod_pmtu = {
	.name = "pmtu",
	.summary = "learn each destination's path MTU once; start later connections at it",
	.cfg_map = "pmtu_cfg",
	.cfg_size = sizeof(struct sp_pmtu_cfg),
	.tunables = tunables,
	.nr_tunables = sizeof(tunables) / sizeof(tunables[0]),
	.needs_cgroup = true,
	.start = start,
	.stop = stop,
	.tick = tick,
	.status = status,
};
