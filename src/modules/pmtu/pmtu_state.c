// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu: what every other pmtu file reads, at the bottom of the module so
 * that the search, probes, routes and saved state use it without reaching
 * up into the module's glue (pmtu.c): the tunables, the clock, and the
 * instance's current config.
 */
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "modules/pmtu/pmtu_state.h"
#include "pmtu.skel.h"

const struct sp_tunable pmtu_tunables[PMTU_NR_TUNABLES] = {
	SP_PMTU_TUNABLES(SP_TUNABLE_ROW, struct sp_pmtu_cfg)
};

__u64 pmtu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void pmtu_read_cfg(struct pmtu_state *st, struct sp_pmtu_cfg *c)
{
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(st->skel->maps.pmtu_cfg), &zero, c))
		memset(c, 0, sizeof(*c));
	/* Written from outside too: clamp as the BPF side does. */
	for (int i = 0; i < PMTU_NR_TUNABLES; i++) {
		const struct sp_tunable *t = &pmtu_tunables[i];
		__u32 v = sp_cfg_get(c, t);

		sp_cfg_apply(c, t, v < t->min ? t->min : v > t->max ? t->max : v);
	}
}
