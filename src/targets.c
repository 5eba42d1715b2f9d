// SPDX-License-Identifier: GPL-2.0
/*
 * What a run is attached to can go away under it: the cgroup is removed, an
 * --iface device is deleted. The kernel detaches our programs then, so the
 * run must not go on reporting them attached. The cgroup's parent folder is
 * watched with inotify (cgroupfs reports no IN_DELETE_SELF on the folder
 * itself) and devices with rtnetlink link events; a device of the same name
 * that comes back is attached again. Each target's state is in the pinned
 * "targets" map and in the meta map that `status` reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <time.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/inotify.h>
#include <linux/rtnetlink.h>
#include <bpf/bpf.h>
#include "sp.h"
#include "loop.h"
#include "nl.h"

enum { T_CGROUP, T_IFACE };
enum { T_ATTACHED, T_GONE };
struct sp_target_rec {
	char name[256];
	__u32 kind, state, ifindex, changes;
};
#define NR_RECS (1 + SP_MAX_IFACES)	/* the cgroup, then each --iface */

#define MAX_OPS 8
static const struct sp_target_ops *ops[MAX_OPS];
static int nr_ops;
static struct sp_run *run;
static struct sp_target_rec recs[NR_RECS];
static int ino_fd = -1, map_fd = -1;
static struct mnl_socket *nl;
static struct sp_watch *ino_w, *nl_w;
static char cg_name[NAME_MAX + 1];

/* What `status` reads first: who runs, with what, attached where. */
int sp_run_publish_meta(const struct sp_run *run)
{
	static __u64 started_ns;
	struct sp_meta meta = {};
	struct timespec ts;
	__u32 zero = 0;
	char path[512];
	int fd, err;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!started_ns)
		started_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	meta.pid = getpid();
	meta.modules = run->modules;
	meta.started_ns = started_ns;
	meta.nr_ifaces = run->nr_ifaces;
	for (int i = 0; i < run->nr_ifaces; i++)
		meta.ifindex[i] = run->ifindex[i];
	meta.nr_progs = run->nr_progs;
	memcpy(meta.prog_ids, run->prog_ids, sizeof(meta.prog_ids));
	snprintf(meta.cgroup, sizeof(meta.cgroup), "%s", run->cgroup);

	if (sp_pin_path(path, sizeof(path), run->pin_dir, "meta"))
		return -1;
	/* Updated in place when targets change: `status` never finds it missing. */
	fd = bpf_obj_get(path);
	if (fd >= 0 && !bpf_map_update_elem(fd, &zero, &meta, BPF_ANY)) {
		close(fd);
		return 0;
	}
	if (fd >= 0)
		close(fd);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sp_meta", sizeof(__u32),
			    sizeof(meta), 1, NULL);
	if (fd < 0)
		return sp_err("creating meta map: %s", strerror(errno));
	err = bpf_map_update_elem(fd, &zero, &meta, BPF_ANY);
	if (!err) {
		unlink(path);
		err = bpf_obj_pin(fd, path);
	}
	close(fd);
	return err ? sp_err("pinning meta map: %s", strerror(errno)) : 0;
}

void sp_target_ops_register(const struct sp_target_ops *o)
{
	if (nr_ops < MAX_OPS)
		ops[nr_ops++] = o;
}

static bool chosen(const struct sp_module *m)
{
	int idx;

	return sp_module_find(m->name, &idx) && (run->modules & (1u << idx));
}

/* The map, and meta: `status` shows the cgroup as removed, a gone device as "?". */
static void publish(void)
{
	for (__u32 i = 0; i < NR_RECS; i++)
		bpf_map_update_elem(map_fd, &i, &recs[i], BPF_ANY);
	sp_run_publish_meta(run);
}

static void on_inotify(void *ctx)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n = read(ino_fd, buf, sizeof(buf));

	for (char *p = buf; n > 0 && p < buf + n;) {
		struct inotify_event *ev = (void *)p;

		p += sizeof(*ev) + ev->len;
		if (!ev->len || strcmp(ev->name, cg_name) || recs[0].state == T_GONE ||
		    !access(run->cgroup, F_OK))
			continue;
		sp_log(SP_LOG_WARN, "cgroup %s was removed: its programs are detached; "
		       "this run goes on for what else it serves", run->cgroup);
		recs[0].state = T_GONE;
		recs[0].changes++;
		strncat(run->cgroup, " (removed)", sizeof(run->cgroup) - strlen(run->cgroup) - 1);
		publish();
	}
}

static void iface_gone(int i)
{
	sp_log(SP_LOG_WARN, "interface %s (index %d) is gone; attaching again when it is back",
	       run->ifname[i], run->ifindex[i]);
	for (int k = 0; k < nr_ops; k++)
		if (ops[k]->iface_gone && chosen(ops[k]->module))
			ops[k]->iface_gone(run, i);
	recs[1 + i].state = T_GONE;
	recs[1 + i].changes++;
	run->ifindex[i] = 0;
	publish();
}

static void iface_back(int i, int ifindex)
{
	int old = recs[1 + i].ifindex, err = 0;

	run->ifindex[i] = ifindex;
	for (int k = 0; k < nr_ops; k++)
		if (ops[k]->iface_back && chosen(ops[k]->module))
			err |= ops[k]->iface_back(run, i, old);
	if (err)
		sp_log(SP_LOG_ERROR, "interface %s is back (index %d) but attaching failed",
		       run->ifname[i], ifindex);
	else
		sp_log(SP_LOG_INFO, "interface %s is back (index %d): attached again",
		       run->ifname[i], ifindex);
	recs[1 + i] = (struct sp_target_rec){ .kind = T_IFACE, .ifindex = ifindex,
		.state = err ? T_GONE : T_ATTACHED, .changes = recs[1 + i].changes + 1 };
	snprintf(recs[1 + i].name, sizeof(recs[1 + i].name), "%s", run->ifname[i]);
	publish();
}

static int attr_cb(const struct nlattr *a, void *data)
{
	if (mnl_attr_get_type(a) == IFLA_IFNAME && !mnl_attr_validate(a, MNL_TYPE_NUL_STRING))
		*(const char **)data = mnl_attr_get_str(a);
	return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const char *name = NULL;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*ifi), attr_cb, &name);
	for (int i = 0; i < run->nr_ifaces; i++) {
		bool gone = recs[1 + i].state == T_GONE;

		if (nlh->nlmsg_type == RTM_DELLINK && !gone && ifi->ifi_index == run->ifindex[i])
			iface_gone(i);
		else if (nlh->nlmsg_type == RTM_NEWLINK && gone && name &&
			 !strcmp(name, run->ifname[i]))
			iface_back(i, ifi->ifi_index);
	}
	return MNL_CB_OK;
}

/* After lost events (ENOBUFS): compare each device by name. */
static void resync(void)
{
	for (int i = 0; i < run->nr_ifaces; i++) {
		int now = if_nametoindex(run->ifname[i]);

		if (recs[1 + i].state != T_GONE && now != run->ifindex[i])
			iface_gone(i);
		if (recs[1 + i].state == T_GONE && now)
			iface_back(i, now);
	}
}

static void on_netlink(void *ctx)
{
	char buf[16384];
	ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));

	if (n < 0 && errno == ENOBUFS)
		resync();
	else if (n > 0)
		mnl_cb_run(buf, n, 0, 0, link_cb, NULL);
}

static int pin_map(void)
{
	char path[512];

	map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sp_targets", sizeof(__u32),
				sizeof(struct sp_target_rec), NR_RECS, NULL);
	if (map_fd < 0)
		return sp_err("creating the targets map: %s", strerror(errno));
	if (sp_pin_path(path, sizeof(path), run->pin_dir, "targets"))
		return -1;
	unlink(path);
	if (bpf_obj_pin(map_fd, path))
		return sp_err("pinning %s: %s", path, strerror(errno));
	return 0;
}

static int watch_cgroup(void)
{
	char parent[sizeof(run->cgroup)], *slash;

	snprintf(parent, sizeof(parent), "%s", run->cgroup);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent || !slash[1])
		return 0;	/* the root of the mount: never removed */
	snprintf(cg_name, sizeof(cg_name), "%s", slash + 1);
	*slash = '\0';
	ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ino_fd < 0 || inotify_add_watch(ino_fd, parent, IN_DELETE | IN_MOVED_FROM) < 0)
		return sp_err("watching %s: %s", parent, strerror(errno));
	ino_w = sp_loop_watch(ino_fd, on_inotify, NULL);
	return ino_w ? 0 : -1;
}

static int watch_links(void)
{
	nl = mnl_socket_open(NETLINK_ROUTE);
	if (!nl || mnl_socket_bind(nl, RTMGRP_LINK, MNL_SOCKET_AUTOPID) < 0)
		return sp_err("rtnetlink link events: %s", strerror(errno));
	fcntl(mnl_socket_get_fd(nl), F_SETFL, O_NONBLOCK);
	nl_w = sp_loop_watch(mnl_socket_get_fd(nl), on_netlink, NULL);
	return nl_w ? 0 : -1;
}

int sp_targets_start(struct sp_run *r)
{
	run = r;
	memset(recs, 0, sizeof(recs));
	snprintf(recs[0].name, sizeof(recs[0].name), "%s", run->cgroup);
	recs[0].state = run->cgroup_fd >= 0 ? T_ATTACHED : T_GONE;
	for (int i = 0; i < run->nr_ifaces; i++) {
		recs[1 + i].kind = T_IFACE;
		recs[1 + i].ifindex = run->ifindex[i];
		snprintf(recs[1 + i].name, sizeof(recs[1 + i].name), "%s", run->ifname[i]);
	}
	if (pin_map() || (run->cgroup_fd >= 0 && watch_cgroup()) ||
	    (run->nr_ifaces && watch_links()))
		return -1;
	publish();
	/* A device deleted while we attached sent its event before we listened. */
	if (run->nr_ifaces)
		resync();
	return 0;
}

void sp_targets_stop(void)
{
	char path[512];

	sp_loop_unwatch(ino_w);
	sp_loop_unwatch(nl_w);
	ino_w = nl_w = NULL;
	if (ino_fd >= 0)
		close(ino_fd);
	if (nl)
		mnl_socket_close(nl);
	nl = NULL;
	ino_fd = -1;
	if (map_fd >= 0) {
		close(map_fd);
		if (run && !sp_pin_path(path, sizeof(path), run->pin_dir, "targets"))
			unlink(path);
	}
	map_fd = -1;
}

/* What run watches and whether it is there: text, or a "targets" member of j. */
void sp_targets_status(const char *pin_dir, FILE *out, struct sp_json *j)
{
	static const char *const kinds[] = { "cgroup", "iface" }, *const states[] = { "attached", "gone" };
	struct sp_target_rec r;
	char path[512];
	int fd;

	/* Optional: only a run that watches something pins it. */
	if (sp_pin_path(path, sizeof(path), pin_dir, "targets") || (fd = bpf_obj_get(path)) < 0)
		return;
	if (j) {
		sp_json_key(j, "targets");
		sp_json_begin_array(j);
	} else {
		fprintf(out, "targets:\n");
	}
	for (__u32 i = 0; i < NR_RECS; i++) {
		if (bpf_map_lookup_elem(fd, &i, &r) || !r.name[0] || r.kind > T_IFACE || r.state > T_GONE)
			continue;
		if (!j) {
			fprintf(out, "  %-6s %.*s %s (%u changes)\n", kinds[r.kind], (int)sizeof(r.name),
				r.name, states[r.state], r.changes);
			continue;
		}
		sp_json_begin_object(j);
		sp_json_key(j, "kind"), sp_json_str(j, kinds[r.kind]);
		sp_json_key(j, "name"), sp_json_strn(j, r.name, sizeof(r.name));
		sp_json_key(j, "state"), sp_json_str(j, states[r.state]);
		sp_json_key(j, "changes"), sp_json_u64(j, r.changes);
		sp_json_end_object(j);
	}
	if (j)
		sp_json_end_array(j);
	close(fd);
}
