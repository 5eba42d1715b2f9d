/* SPDX-License-Identifier: GPL-2.0 */
/* pmtu loader internals: the instance's state, probes, routes, the search. */
#ifndef SP_PMTU_STATE_H
#define SP_PMTU_STATE_H

#include <stddef.h>
#include "core/sp.h"

struct pmtu_bpf;
struct bpf_link;
struct ring_buffer;

#define RTPROT_STACKPILOT 0xa5	/* marks the routes this module installs */

/* pmtu_probe.c: one DF probe in flight, never waited for here. */
enum pmtu_method { PM_ECHO, PM_SYN };
/* An entry's expiry asks for a search too (the loader's own kind of event). */
enum { PMTU_EV_EXPIRED = SP_PM_EV_NEW + 1 };
struct pmtu_probe {
	int fd, family, method;
	__u32 dst[4];
	__u16 dport, sport, id, seq;
	__u32 tcp_seq;
	size_t len;		/* IP payload */
	__u64 t0;
	unsigned char *buf;	/* the instance's packet buffer */
};

#define PMTU_MAX_PENDING 64
#define PMTU_MAX_SEARCHES 16	/* the max_searches tunable's ceiling */
#define PMTU_MAX_ROUTES 256
#define PMTU_BUF 65536		/* a probe, or what a probe socket reads */

struct sp_watch;
struct pmtu_search;	/* pmtu_search.c */
/* under: the MTU toward dst before our route (mtu) was added, the ceiling of
 * the next search: our own route must not cap the search that decides it. */
struct pmtu_route { struct sp_pmtu_key key; __u32 dst[4]; int family; __u32 mtu, under; };

/* One instance of the module: what start() allocates and stop() frees. */
struct pmtu_state {
	struct pmtu_bpf *skel;
	struct bpf_link *klinks[3];	/* fentry kernels: the fexit programs */
	struct ring_buffer *rb;
	__u64 netns;		/* sp_netns_id() of the namespace probes leave from */
	int mtu_probing_arg, saved_mtu_probing;	/* -1: not given, not changed */
	/* the search */
	struct sp_pmtu_event pending[PMTU_MAX_PENDING];
	int nr_pending;
	struct sp_watch *rb_w, *expire_w, *kick_w;
	struct pmtu_search *searches;	/* PMTU_MAX_SEARCHES of them */
	/* Token buckets of searches_per_s and probes_per_s, full at start. */
	double search_tokens, probe_tokens;
	__u64 tokens_ns, dropped_logged_ns, netns_logged_ns;
	/* routes we added, to remove on expiry and exit */
	struct pmtu_route routes[PMTU_MAX_ROUTES];
	int nr_routes;
	/* probes */
	__u16 echo_seq;
	/* Headers are read and written in place: aligned as a static array was. */
	unsigned char buf[PMTU_BUF] __attribute__((aligned(16)));
};

extern const struct sp_module sp_mod_pmtu;

/* pmtu_persist.c: the destinations learned, kept across runs. */
extern const struct sp_persister pmtu_persister;

/* pmtu_state.c */
#define PMTU_NR_TUNABLES (0 SP_PMTU_TUNABLES(SP_COUNT_ROW, _))
extern const struct sp_tunable pmtu_tunables[PMTU_NR_TUNABLES];
__u64 pmtu_now_ns(void);
void pmtu_read_cfg(struct pmtu_state *st, struct sp_pmtu_cfg *c);

__u32 pmtu_route_mtu(int family, const __u32 *dst);
bool pmtu_dst_is_local(int family, const __u32 *dst);
/* 1: sent, watch p->fd; 0: could not leave (bigger than our link), a loss; -1: error. */
int pmtu_probe_send(struct pmtu_state *st, struct pmtu_probe *p, int method, int family,
		    const __u32 *dst, __u16 dport, __u32 mtu);
/* Reads what is queued on p->fd without blocking; 1 when the answer is among it. */
int pmtu_probe_answered(struct pmtu_probe *p);
void pmtu_probe_close(struct pmtu_probe *p);

/* pmtu_route.c: host routes with a route MTU, marked RTPROT_STACKPILOT. */
/* 0 added, 1 refrained (a route we did not make decides), or -errno. */
int pmtu_route_set(struct pmtu_state *st, const struct sp_pmtu_key *key, int family,
		   const __u32 *dst, __u32 mtu);
/* The MTU toward dst as if our route to it were not there (the kernel's otherwise). */
__u32 pmtu_route_ceiling(struct pmtu_state *st, const struct sp_pmtu_key *key, int family,
			 const __u32 *dst);
void pmtu_route_forget(struct pmtu_state *st, const struct sp_pmtu_key *key);
void pmtu_route_forget_all(struct pmtu_state *st);
/* Delete our route to dst (only one of our protocol); 0 or -errno. */
int pmtu_route_del(int family, const __u32 *dst);

/* pmtu_search.c */
int pmtu_search_start(struct pmtu_state *st);
void pmtu_search_stop(struct pmtu_state *st);

#endif
