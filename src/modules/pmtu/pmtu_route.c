// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu routes: a host route to a searched destination with the kernel's
 * current nexthop and the learned MTU, so that connections already stalled
 * recover too (pmtu.route=1). Marked RTPROT_STACKPILOT; removed on expiry
 * and exit.
 *
 * A route we did not make is never shadowed: ours is added only where the
 * destination is reached through the default route or a connected subnet,
 * the routes nobody chose for this destination. An admin's route to it (of
 * any metric: ours would win by prefix length alone) decides instead.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include "modules/pmtu/pmtu_state.h"
#include "core/nl.h"
#include "core/state.h"

/* What a route lookup said. */
struct lookup {
	struct rtmsg rt;
	__u32 table, oif, gw[4], dst[4];
	int gw_len, found;
};

static int attr_cb(const struct nlattr *a, void *data)
{
	struct lookup *l = data;
	int len = mnl_attr_get_payload_len(a);

	switch (mnl_attr_get_type(a)) {
	case RTA_TABLE:
		if (!mnl_attr_validate(a, MNL_TYPE_U32))
			l->table = mnl_attr_get_u32(a);
		break;
	case RTA_OIF:
		if (!mnl_attr_validate(a, MNL_TYPE_U32))
			l->oif = mnl_attr_get_u32(a);
		break;
	case RTA_DST:
		if (len == 4 || len == 16)
			memcpy(l->dst, mnl_attr_get_payload(a), len);
		break;
	case RTA_GATEWAY:
		if (len == 4 || len == 16) {
			memcpy(l->gw, mnl_attr_get_payload(a), len);
			l->gw_len = len;
		}
		break;
	}
	return MNL_CB_OK;
}

static int route_cb(const struct nlmsghdr *nlh, void *data)
{
	struct lookup *l = data;

	if (nlh->nlmsg_type != RTM_NEWROUTE || l->found ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct rtmsg))
		return MNL_CB_OK;
	l->rt = *(struct rtmsg *)mnl_nlmsg_get_payload(nlh);
	l->table = l->rt.rtm_table;
	l->found = 1;
	mnl_attr_parse(nlh, sizeof(struct rtmsg), attr_cb, l);
	return MNL_CB_OK;
}

static struct nlmsghdr *route_msg(char *buf, int type, int flags, int family,
				  const __u32 *dst, struct rtmsg **rt)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	*rt = mnl_nlmsg_put_extra_header(nlh, sizeof(**rt));
	(*rt)->rtm_family = family;
	(*rt)->rtm_dst_len = family == AF_INET ? 32 : 128;
	mnl_attr_put(nlh, RTA_DST, family == AF_INET ? 4 : 16, dst);
	return nlh;
}

/* The route the kernel uses toward dst: with fib_match the FIB entry (its
 * real prefix, protocol and table), else the resolved nexthop. */
static int lookup(int family, const __u32 *dst, bool fib_match, struct lookup *l)
{
	char buf[SP_NL_BUF];
	struct rtmsg *rt;
	struct nlmsghdr *nlh = route_msg(buf, RTM_GETROUTE, 0, family, dst, &rt);
	int err;

	if (fib_match)
		rt->rtm_flags |= RTM_F_FIB_MATCH;
	memset(l, 0, sizeof(*l));
	err = sp_nl_talk(nlh, route_cb, l);
	return err ? err : l->found ? 0 : -ENOENT;
}

/* Why our route would shadow one we did not make, or NULL when it would not. */
static const char *shadows(int family, const __u32 *dst, char *why, size_t len)
{
	struct lookup l;
	char a[INET6_ADDRSTRLEN];
	int host = family == AF_INET ? 32 : 128;

	if (lookup(family, dst, true, &l)) {
		snprintf(why, len, "no route to it");
		return why;
	}
	if (l.rt.rtm_protocol == RTPROT_STACKPILOT)
		return NULL;
	inet_ntop(family, l.dst, a, sizeof(a));
	if (l.table != RT_TABLE_MAIN)
		snprintf(why, len, "it is routed by table %u, not main", l.table);
	else if (l.rt.rtm_dst_len == host)
		snprintf(why, len, "a host route to it exists (proto %u)", l.rt.rtm_protocol);
	else if (l.rt.rtm_dst_len && l.rt.rtm_protocol != RTPROT_KERNEL)
		snprintf(why, len, "an admin route %s/%u (proto %u) covers it", a, l.rt.rtm_dst_len,
			 l.rt.rtm_protocol);
	else
		return NULL;
	return why;
}

static int route_add(int family, const __u32 *dst, __u32 mtu)
{
	char buf[SP_NL_BUF];
	struct lookup l;
	struct rtmsg *rt;
	struct nlmsghdr *nlh;
	struct nlattr *m;
	int err = lookup(family, dst, false, &l);

	if (err)
		return err;
	nlh = route_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, family, dst, &rt);
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_STACKPILOT;
	rt->rtm_scope = RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_UNICAST;
	if (l.gw_len)
		mnl_attr_put(nlh, RTA_GATEWAY, l.gw_len, l.gw);
	if (l.oif)
		mnl_attr_put_u32(nlh, RTA_OIF, l.oif);
	m = mnl_attr_nest_start(nlh, RTA_METRICS);
	mnl_attr_put_u32(nlh, RTAX_MTU, mtu);
	mnl_attr_nest_end(nlh, m);
	return sp_nl_talk(nlh, NULL, NULL);
}

int pmtu_route_del(int family, const __u32 *dst)
{
	char buf[SP_NL_BUF];
	struct rtmsg *rt;
	struct nlmsghdr *nlh = route_msg(buf, RTM_DELROUTE, 0, family, dst, &rt);

	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_STACKPILOT;	/* the kernel deletes only a match */
	return sp_nl_talk(nlh, NULL, NULL);
}

/* A route a killed run left ("ADDR"), from state.c. */
static int undo_route(const char *args)
{
	__u32 dst[4] = {};

	if (inet_pton(AF_INET, args, dst) == 1)
		return pmtu_route_del(AF_INET, dst);
	if (inet_pton(AF_INET6, args, dst) == 1)
		return pmtu_route_del(AF_INET6, dst);
	return -EINVAL;
}

static const struct sp_state_undo route_undo = { .kind = "route", .undo = undo_route };

__attribute__((constructor)) static void register_undo(void)
{
	sp_state_undo_register(&route_undo);
}

void pmtu_route_forget(struct pmtu_state *st, const struct sp_pmtu_key *k)
{
	struct pmtu_route *routes = st->routes;
	char a[INET6_ADDRSTRLEN];
	int err;

	for (int i = 0; i < st->nr_routes; i++) {
		if (memcmp(&routes[i].key, k, sizeof(*k)))
			continue;
		inet_ntop(routes[i].family, routes[i].dst, a, sizeof(a));
		err = pmtu_route_del(routes[i].family, routes[i].dst);
		if (err && err != -ESRCH) {
			sp_log(SP_LOG_WARN, "pmtu: removing our route to %s: %s", a, strerror(-err));
		} else {
			sp_log(SP_LOG_INFO, "pmtu: route to %s removed", a);
			sp_state_del("route %s", a);
		}
		routes[i] = routes[--st->nr_routes];
		return;
	}
}

void pmtu_route_forget_all(struct pmtu_state *st)
{
	while (st->nr_routes)
		pmtu_route_forget(st, &st->routes[0].key);
}

__u32 pmtu_route_ceiling(struct pmtu_state *st, const struct sp_pmtu_key *key, int family,
			 const __u32 *dst)
{
	__u32 mtu = pmtu_route_mtu(family, dst);

	/* Below our route's MTU: the kernel learned less since (an ICMP), which holds. */
	for (int i = 0; i < st->nr_routes; i++)
		if (!memcmp(&st->routes[i].key, key, sizeof(*key)) && mtu >= st->routes[i].mtu)
			return st->routes[i].under ? st->routes[i].under : mtu;
	return mtu;
}

int pmtu_route_set(struct pmtu_state *st, const struct sp_pmtu_key *key, int family,
		   const __u32 *dst, __u32 mtu)
{
	struct pmtu_route *r;
	char a[INET6_ADDRSTRLEN], why[128];
	__u32 under;
	int err;

	inet_ntop(family, dst, a, sizeof(a));
	if (shadows(family, dst, why, sizeof(why))) {
		sp_log(SP_LOG_INFO, "pmtu: no route MTU to %s: %s; not shadowing it", a, why);
		return 1;
	}
	if (st->nr_routes == PMTU_MAX_ROUTES)
		return -ENOSPC;
	/* The ceiling of the next search, measured before our route is there
	 * (callers forget our previous one first). */
	under = pmtu_route_mtu(family, dst);
	/* On disk before the change: a killed run's route is found and removed. */
	if (sp_state_add("route %s", a))
		return -EIO;
	err = route_add(family, dst, mtu);
	if (err) {
		sp_state_del("route %s", a);
		return err;
	}
	r = &st->routes[st->nr_routes++];
	r->key = *key;
	memcpy(r->dst, dst, 16);
	r->family = family;
	r->mtu = mtu;
	r->under = under;
	sp_log(SP_LOG_INFO, "pmtu: route to %s with mtu %u added", a, mtu);
	return 0;
}
