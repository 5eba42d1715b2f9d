/* SPDX-License-Identifier: GPL-2.0 */
/* The Internet checksum of a header, for the tools that craft packets. */
#ifndef SP_TEST_CSUM_H
#define SP_TEST_CSUM_H
#include <linux/types.h>

static inline __u16 ip_csum(const void *p, int n)
{
	const __u16 *w = p;
	__u32 s = 0;

	for (; n > 1; n -= 2)
		s += *w++;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s;
}
#endif
