/* SPDX-License-Identifier: GPL-2.0 */
/* rtnetlink requests through libmnl: sequence numbers, port ids and attribute
 * lengths are checked there, and replies of any size are read in full. */
#ifndef SP_NL_H
#define SP_NL_H

#include <libmnl/libmnl.h>

/* Buffer for one request; replies are read into a buffer of their own. */
#define SP_NL_BUF 8192

/* Send one request (NLM_F_REQUEST | NLM_F_ACK are added), hand every reply
 * message to cb (may be NULL), wait for the ACK or the dump's end.
 * 0, or -errno (the kernel's error for the request). */
int sp_nl_talk(struct nlmsghdr *nlh, mnl_cb_t cb, void *data);

#endif
