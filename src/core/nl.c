// SPDX-License-Identifier: GPL-2.0
/* One rtnetlink request and its replies; see nl.h. */
#include <errno.h>
#include <time.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include "core/nl.h"

int sp_nl_talk(struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	static unsigned int seq;
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	char buf[32768];	/* a dump's batch; libmnl checks each message's length */
	unsigned int portid;
	int ret, err = 0;

	if (!nl)
		return -errno;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err = -errno;
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	if (!seq)
		seq = time(NULL);
	nlh->nlmsg_seq = ++seq;
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		err = -errno;
		goto out;
	}
	while ((ret = mnl_socket_recvfrom(nl, buf, sizeof(buf))) > 0) {
		ret = mnl_cb_run(buf, ret, nlh->nlmsg_seq, portid, cb, data);
		if (ret <= MNL_CB_STOP)
			break;
	}
	if (ret < 0)
		err = errno ? -errno : -EIO;
out:
	mnl_socket_close(nl);
	return err;
}
