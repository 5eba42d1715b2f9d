// SPDX-License-Identifier: GPL-2.0
/*
 * pmtu's learned destinations across restarts (persist.c does the files):
 * saved every SP_PERSIST_SAVE_S and at exit, restored at start before the
 * program is attached, so the first connection after a restart already
 * starts at the learned MSS. Lines of KEY.pmtu after the header:
 *
 *   boot BOOT_ID
 *   dst FAMILY ADDR netns=COOKIE nsino=INODE low=MTU high=MTU state=N
 *       expires=UNIX_TIME [method=M port=PORT] [route=MTU via=ADDR]
 *
 * Expiry is wall-clock (CLOCK_MONOTONIC, which the map holds, restarts at
 * boot); an entry comes back with its remaining lifetime, expired ones are
 * dropped. The key holds the netns cookie (bpf_get_netns_cookie): cookies
 * are never reused within a boot, but start again at each boot. So within a
 * boot an entry is restored only if a namespace with that cookie exists now
 * (NS_GET_ID on the namespaces of /proc/PID/ns/net and /run/netns, which on
 * 6.18 is the netns cookie: checked on this machine; without NS_GET_ID, only
 * the loader's own namespace counts; where the kernel has no cookies, the
 * key holds the inode number and the same rules apply to it); after a
 * reboot (another boot_id) only
 * entries of the initial namespace (its inode, PROC_NET_INIT_INO, is the
 * same at every boot) are restored, re-keyed to its new cookie, if the
 * loader sees that namespace. Counters (probes, clamped) start at 0.
 *
 * Routes (pmtu.route=1): a run removes its routes at exit (a killed run's
 * are removed by the next start), so a restored entry that had one gets it
 * back through pmtu_route_set(), the same checks as after a search (never
 * shadowing an admin's route), if pmtu.route is 1 now and the entry is of
 * this namespace; otherwise it is restored without one (route_mtu 0) and the
 * route comes back with the re-search at expiry.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "modules/pmtu/pmtu_state.h"
#include "core/saved.h"
#include "pmtu.skel.h"
#include "core/probe.h"

#ifndef NS_GET_ID
#define NS_GET_ID _IOR(0xb7, 0xd, __u64)
#endif
#define MAX_NS 4096
/* The initial namespace's inode, fixed in the kernel (include/linux/proc_ns.h; 4026531833 here). */
#define PROC_NET_INIT_INO 0xEFFFFFF9UL

struct ns_id { unsigned long ino; __u64 cookie; };
struct ns_set { int n; bool ioctl_ok; struct ns_id ns[MAX_NS]; };

static void ns_add(struct ns_set *s, const char *path)
{
	struct stat st;
	__u64 id;
	int fd;

	if (s->n == MAX_NS || stat(path, &st))
		return;
	for (int i = 0; i < s->n; i++)
		if (s->ns[i].ino == st.st_ino)
			return;
	/* Where namespaces have no cookies, the programs name them by inode too. */
	if (!sp_has(SP_F_NETNS_COOKIE)) {
		s->ns[s->n++] = (struct ns_id){ st.st_ino, st.st_ino };
		s->ioctl_ok = true;
		return;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!ioctl(fd, NS_GET_ID, &id)) {
		s->ns[s->n++] = (struct ns_id){ st.st_ino, id };
		s->ioctl_ok = true;
	}
	close(fd);
}

/* Every network namespace a process or /run/netns holds, with its cookie. */
static void ns_scan(struct ns_set *s)
{
	char p[300];
	struct dirent *de;
	DIR *d;

	s->n = 0;
	ns_add(s, "/proc/self/ns/net");
	ns_add(s, "/proc/1/ns/net");
	if ((d = opendir("/run/netns"))) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' &&
			    snprintf(p, sizeof(p), "/run/netns/%s", de->d_name) < (int)sizeof(p))
				ns_add(s, p);
		closedir(d);
	}
	if ((d = opendir("/proc"))) {
		while ((de = readdir(d)))
			if (de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
			    snprintf(p, sizeof(p), "/proc/%s/ns/net", de->d_name) < (int)sizeof(p))
				ns_add(s, p);
		closedir(d);
	}
}

static const struct ns_id *ns_by_cookie(const struct ns_set *s, __u64 cookie)
{
	for (int i = 0; i < s->n; i++)
		if (s->ns[i].cookie == cookie)
			return &s->ns[i];
	return NULL;
}

static __u64 real_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

static const struct pmtu_route *route_of(const struct pmtu_state *st, const struct sp_pmtu_key *k)
{
	for (int i = 0; i < st->nr_routes; i++)
		if (!memcmp(&st->routes[i].key, k, sizeof(*k)))
			return &st->routes[i];
	return NULL;
}

static int save(struct sp_run *run, void *inst, FILE *f)
{
	struct pmtu_state *st = inst;
	int fd = bpf_map__fd(st->skel->maps.pmtu_dsts);
	struct ns_set *ns = calloc(1, sizeof(*ns));
	__u64 now = pmtu_now_ns(), real = real_now_s();
	struct sp_pmtu_key k, next;
	struct sp_pmtu_entry e;
	struct sp_pmtu_cfg c;
	void *prev = NULL;

	if (!ns)
		return -1;
	ns_scan(ns);
	pmtu_read_cfg(st, &c);
	fprintf(f, "boot %s\n", sp_boot_id());
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		__u64 life = (__u64)c.interval_s * 1000000000ULL, age;
		const struct pmtu_route *r;
		const struct ns_id *n;
		char a[INET6_ADDRSTRLEN], via[INET6_ADDRSTRLEN];

		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &e) || (k.family != AF_INET && k.family != AF_INET6))
			continue;
		age = now - e.updated_ns;
		/* A suspect waits for a search that is lost with this run. */
		if (age >= life || e.state == SP_PM_S_SUSPECT || (!e.low && e.state != SP_PM_S_NOPROBE))
			continue;
		n = ns_by_cookie(ns, k.netns);
		inet_ntop(k.family, k.addr, a, sizeof(a));
		fprintf(f, "dst %u %s netns=%llu nsino=%lu low=%u high=%u state=%u expires=%llu",
			k.family == AF_INET ? 4 : 6, a, (unsigned long long)k.netns, n ? n->ino : 0,
			e.low, e.high, e.state, (unsigned long long)(real + (life - age + 999999999) / 1000000000));
		/* How it answered: a re-search at expiry asks the same way first. */
		if (e.method != SP_PM_M_NONE)
			fprintf(f, " method=%u port=%u", e.method, e.port);
		if (e.route_mtu && (r = route_of(st, &k)))
			fprintf(f, " route=%u via=%s", e.route_mtu,
				inet_ntop(r->family, r->dst, via, sizeof(via)));
		fputc('\n', f);
	}
	free(ns);
	return ferror(f) ? -1 : 0;
}

/* One "dst" line into k, e and the route's address; false after saying why. */
static bool parse_dst(struct sp_persist_reader *r, char *line, struct sp_pmtu_key *k,
		      struct sp_pmtu_entry *e, unsigned long *nsino, __u64 *expires, __u32 *via)
{
	char *tok, *save = NULL, *val;
	unsigned long long v;
	int fam, have = 0;

	memset(k, 0, sizeof(*k));
	memset(e, 0, sizeof(*e));
	*nsino = 0;
	tok = strtok_r(line, " ", &save);
	if (!tok || strcmp(tok, "dst") || !(tok = strtok_r(NULL, " ", &save)) ||
	    (strcmp(tok, "4") && strcmp(tok, "6")))
		return sp_persist_bad(r, "expected 'dst 4|6 ADDR KEY=VALUE...'"), false;
	fam = tok[0] == '4' ? AF_INET : AF_INET6;
	k->family = fam;
	if (!(tok = strtok_r(NULL, " ", &save)) || inet_pton(fam, tok, k->addr) != 1)
		return sp_persist_bad(r, "not an IPv%c address", fam == AF_INET ? '4' : '6'), false;
	while ((tok = strtok_r(NULL, " ", &save))) {
		char *end;

		if (!(val = strchr(tok, '=')))
			return sp_persist_bad(r, "'%.32s': expected KEY=VALUE", tok), false;
		*val++ = '\0';
		if (!strcmp(tok, "via")) {
			if (inet_pton(fam, val, via) != 1)
				return sp_persist_bad(r, "via=%.48s: not an address", val), false;
			continue;
		}
		errno = 0;
		v = strtoull(val, &end, 10);
		if (errno || end == val || *end || val[0] == '-')
			return sp_persist_bad(r, "%s=%.32s: not a number", tok, val), false;
		if (!strcmp(tok, "netns"))
			k->netns = v, have |= 1;
		else if (!strcmp(tok, "nsino"))
			*nsino = v;
		else if (!strcmp(tok, "low") && v <= 65535)
			e->low = v, have |= 2;
		else if (!strcmp(tok, "high") && v <= 65536)
			e->high = v;
		else if (!strcmp(tok, "state") && v <= SP_PM_S_NOPROBE && v != SP_PM_S_SUSPECT)
			e->state = v;
		else if (!strcmp(tok, "expires"))
			*expires = v, have |= 4;
		else if (!strcmp(tok, "method") && v <= SP_PM_M_KERNEL)
			e->method = v;
		else if (!strcmp(tok, "port") && v <= 65535)
			e->port = v;
		else if (!strcmp(tok, "route") && v <= 65535)
			e->route_mtu = v;
		else
			return sp_persist_bad(r, "%s=%.32s: unknown or out of range", tok, val), false;
	}
	if (have != 7)
		return sp_persist_bad(r, "netns=, low= and expires= are needed"), false;
	/* What the BPF side would never store: an MTU below IPv4's minimum. */
	if (!sp_pm_bounds_ok(e->low, e->high))
		return sp_persist_bad(r, "low=%u high=%u: not a possible MTU pair", e->low, e->high), false;
	return true;
}

/* Still the entry's key under the current prefixes? A shorter prefix now: never looked up. */
static bool masked(const struct sp_pmtu_key *k, const struct sp_pmtu_cfg *c)
{
	__u32 bits = k->family == AF_INET ? c->prefix4 : c->prefix6;

	for (int i = 0; i < (k->family == AF_INET ? 1 : 4); i++) {
		__u32 b = bits > 32 ? 32 : bits;

		if (k->addr[i] & ~(b ? htonl(b == 32 ? 0xffffffff : ~(0xffffffffu >> b)) : 0))
			return false;
		bits -= b;
	}
	return true;
}

static void restore(struct sp_run *run, void *inst, struct sp_persist_reader *r)
{
	struct pmtu_state *st = inst;
	int fd = bpf_map__fd(st->skel->maps.pmtu_dsts), n = 0, gone = 0, expired = 0, routes = 0;
	struct ns_set *ns = calloc(1, sizeof(*ns));
	const struct ns_id *init_ns = NULL;
	__u64 now = pmtu_now_ns(), real = real_now_s();
	bool same_boot = false;
	struct sp_pmtu_cfg c;
	char *line;

	if (!ns)
		return;
	ns_scan(ns);
	for (int i = 0; i < ns->n; i++)
		if (ns->ns[i].ino == PROC_NET_INIT_INO)
			init_ns = &ns->ns[i];
	pmtu_read_cfg(st, &c);
	while ((line = sp_persist_next(r))) {
		__u64 life = (__u64)c.interval_s * 1000000000ULL, left, expires = 0;
		struct sp_pmtu_key k;
		struct sp_pmtu_entry e;
		unsigned long nsino;
		__u32 via[4] = {};
		char a[INET6_ADDRSTRLEN];

		if (!strncmp(line, "boot ", 5)) {
			same_boot = sp_boot_id()[0] && !strcmp(line + 5, sp_boot_id());
			continue;
		}
		if (!parse_dst(r, line, &k, &e, &nsino, &expires, via))
			continue;
		if (expires <= real) {
			expired++;
			continue;
		}
		if (same_boot ? !ns_by_cookie(ns, k.netns) && !(k.netns == st->netns) :
		    !(init_ns && nsino && nsino == init_ns->ino)) {
			gone++;	/* that namespace is gone; a new one never has its cookie */
			continue;
		}
		if (!same_boot)
			k.netns = init_ns->cookie;
		if (!masked(&k, &c)) {
			gone++;
			continue;
		}
		left = (expires - real) * 1000000000ULL;
		/* updated + interval = now + left; u64 arithmetic wraps as the BPF side's does. */
		e.updated_ns = now + (left < life ? left : life) - life;
		if (e.route_mtu) {
			inet_ntop(k.family, via, a, sizeof(a));
			e.route_mtu = 0;
			if (c.route && k.netns == st->netns && (via[0] | via[1] | via[2] | via[3]) &&
			    !pmtu_route_set(st, &k, k.family, via, e.low))
				e.route_mtu = e.low, routes++;
		}
		if (bpf_map_update_elem(fd, &k, &e, BPF_ANY))
			sp_log(SP_LOG_WARN, "pmtu: restoring an entry: %s", strerror(errno));
		else
			n++;
	}
	free(ns);
	sp_log(SP_LOG_INFO, "pmtu: %d destinations restored from %s (%d routes); %d expired, "
	       "%d of namespaces gone or no longer matching the prefixes: dropped", n, r->file, routes,
	       expired, gone);
}

const struct sp_persister pmtu_persister = {
	.suffix = "pmtu", .save = save, .restore = restore,
};
