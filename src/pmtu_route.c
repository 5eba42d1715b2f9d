// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu routes: a host route to a searched destination with the kernel's
 * current nexthop and the learned MTU, so that connections already stalled
 * recover too (pmtu.route=1). Marked RTPROT_STACKPILOT; removed on expiry
 * and exit.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include "pmtu.h"

#define MAX_ROUTES 256

static struct route { struct sp_pmtu_key key; __u32 dst[4]; int family; } routes[MAX_ROUTES];
static int nr_routes;

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

void pmtu_route_forget(const struct sp_pmtu_key *k)
{
	for (int i = 0; i < nr_routes; i++) {
		if (memcmp(&routes[i].key, k, sizeof(*k)))
			continue;
		route_del(routes[i].family, routes[i].dst);
		routes[i] = routes[--nr_routes];
		return;
	}
}

void pmtu_route_forget_all(void)
{
	while (nr_routes)
		pmtu_route_forget(&routes[0].key);
}

int pmtu_route_set(const struct sp_pmtu_key *key, int family, const __u32 *dst, __u32 mtu)
{
	int err;

	if (nr_routes == MAX_ROUTES)
		return -ENOSPC;
	err = route_add(family, dst, mtu);
	if (err)
		return err;
	routes[nr_routes].key = *key;
	memcpy(routes[nr_routes].dst, dst, 16);
	routes[nr_routes++].family = family;
	return 0;
}
