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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/inotify.h>
#include <linux/rtnetlink.h>
#include <bpf/bpf.h>
#include "core/sp.h"
#include "service/targets.h"
#include "modules/modules.h"
#include "service/persist.h"
#include "core/loop.h"
#include "core/nl.h"
#include "export/export.h"

#define NR_RECS SP_TARGET_RECS

/* What one run watches; its loop callbacks get it as ctx. */
struct sp_targets {
	struct sp_run *run;
	struct sp_target_rec recs[NR_RECS];
	int ino_fd, map_fd;
	struct mnl_socket *nl;
	struct sp_watch *ino_w, *nl_w;
	char cg_name[NAME_MAX + 1];
};

/* What `status` reads first: who runs, with what, attached where. */
int sp_run_publish_meta(struct sp_run *run)
{
	struct sp_meta meta = {};
	struct timespec ts;
	__u32 zero = 0;
	char path[512];
	int fd, err, n;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!run->started_ns)
		run->started_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	meta.pid = getpid();
	meta.modules = run->modules;
	meta.started_ns = run->started_ns;
	meta.nr_ifaces = run->nr_ifaces;
	for (int i = 0; i < run->nr_ifaces; i++) {
		meta.ifindex[i] = run->ifindex[i];
		snprintf(meta.ifname[i], sizeof(meta.ifname[i]), "%s", run->ifname[i]);
	}
	meta.nr_progs = run->nr_progs;
	memcpy(meta.prog_ids, run->prog_ids, sizeof(meta.prog_ids));
	/*
	 * run->cgroup stays the path: state files are named after it
	 * (persist.c), and a config run attaches there again when it is back.
	 */
	n = snprintf(meta.cgroup, sizeof(meta.cgroup), "%s", run->cgroup);
	if (run->cgroup[0] && run->targets && run->targets->recs[0].state == T_GONE &&
	    n >= 0 && n < (int)sizeof(meta.cgroup))
		strncat(meta.cgroup, " (removed)", sizeof(meta.cgroup) - n - 1);
	sp_persist_meta(run, &meta);
	meta.loop_delay_ns = run->loop_delay_ns;
	meta.loop_delay_max_ns = run->loop_delay_max_ns;

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

/* The map, and meta: `status` shows the cgroup as removed, a device as gone. */
static void publish(struct sp_targets *t)
{
	for (__u32 i = 0; i < NR_RECS; i++)
		bpf_map_update_elem(t->map_fd, &i, &t->recs[i], BPF_ANY);
	sp_run_publish_meta(t->run);
}

static void on_inotify(void *ctx)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct sp_targets *t = ctx;
	struct sp_target_rec *recs = t->recs;
	struct sp_run *run = t->run;
	ssize_t n = read(t->ino_fd, buf, sizeof(buf));

	for (char *p = buf; n > 0 && p < buf + n;) {
		struct inotify_event *ev = (void *)p;

		p += sizeof(*ev) + ev->len;
		if (!ev->len || strcmp(ev->name, t->cg_name) || recs[0].state == T_GONE ||
		    !access(run->cgroup, F_OK))
			continue;
		sp_log(SP_LOG_WARN, "cgroup %s was removed: its programs are detached; "
		       "this run goes on for what else it serves", run->cgroup);
		recs[0].state = T_GONE;
		recs[0].changes++;
		publish(t);
	}
}

static void iface_gone(struct sp_targets *t, int i)
{
	struct sp_run *run = t->run;

	sp_log(SP_LOG_WARN, "interface %s (index %d) is gone; attaching again when it is back",
	       run->ifname[i], run->ifindex[i]);
	for (int k = 0; k < sp_nr_modules; k++) {
		const struct sp_target_ops *ops = sp_modules[k]->target_ops;

		if (ops && ops->iface_gone && run->inst[k])
			ops->iface_gone(run, run->inst[k], i);
	}
	t->recs[1 + i].state = T_GONE;
	t->recs[1 + i].changes++;
	run->ifindex[i] = 0;
	publish(t);
}

static void iface_back(struct sp_targets *t, int i, int ifindex)
{
	struct sp_target_rec *recs = t->recs;
	struct sp_run *run = t->run;
	int old = recs[1 + i].ifindex, err = 0;

	run->ifindex[i] = ifindex;
	for (int k = 0; k < sp_nr_modules; k++) {
		const struct sp_target_ops *ops = sp_modules[k]->target_ops;

		if (ops && ops->iface_back && run->inst[k])
			err |= ops->iface_back(run, run->inst[k], i, old);
	}
	if (err)
		sp_log(SP_LOG_ERROR, "interface %s is back (index %d) but attaching failed",
		       run->ifname[i], ifindex);
	else
		sp_log(SP_LOG_INFO, "interface %s is back (index %d): attached again",
		       run->ifname[i], ifindex);
	recs[1 + i] = (struct sp_target_rec){ .kind = T_IFACE, .ifindex = ifindex,
		.state = err ? T_GONE : T_ATTACHED, .changes = recs[1 + i].changes + 1 };
	snprintf(recs[1 + i].name, sizeof(recs[1 + i].name), "%s", run->ifname[i]);
	publish(t);
}

static int attr_cb(const struct nlattr *a, void *data)
{
	if (mnl_attr_get_type(a) == IFLA_IFNAME && !mnl_attr_validate(a, MNL_TYPE_NUL_STRING))
		*(const char **)data = mnl_attr_get_str(a);
	return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct sp_targets *t = data;
	struct sp_run *run = t->run;
	struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const char *name = NULL;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*ifi), attr_cb, &name);
	for (int i = 0; i < run->nr_ifaces; i++) {
		bool gone = t->recs[1 + i].state == T_GONE;

		if (nlh->nlmsg_type == RTM_DELLINK && !gone && ifi->ifi_index == run->ifindex[i])
			iface_gone(t, i);
		else if (nlh->nlmsg_type == RTM_NEWLINK && gone && name &&
			 !strcmp(name, run->ifname[i]))
			iface_back(t, i, ifi->ifi_index);
	}
	return MNL_CB_OK;
}

/* After lost events (ENOBUFS): compare each device by name. */
static void resync(struct sp_targets *t)
{
	struct sp_run *run = t->run;

	for (int i = 0; i < run->nr_ifaces; i++) {
		int now = if_nametoindex(run->ifname[i]);

		if (t->recs[1 + i].state != T_GONE && now != run->ifindex[i])
			iface_gone(t, i);
		if (t->recs[1 + i].state == T_GONE && now)
			iface_back(t, i, now);
	}
}

static void on_netlink(void *ctx)
{
	struct sp_targets *t = ctx;
	char buf[16384];
	ssize_t n = mnl_socket_recvfrom(t->nl, buf, sizeof(buf));

	if (n < 0 && errno == ENOBUFS)
		resync(t);
	else if (n > 0)
		mnl_cb_run(buf, n, 0, 0, link_cb, t);
}

static int pin_map(struct sp_targets *t)
{
	char path[512];

	t->map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sp_targets", sizeof(__u32),
				sizeof(struct sp_target_rec), NR_RECS, NULL);
	if (t->map_fd < 0)
		return sp_err("creating the targets map: %s", strerror(errno));
	if (sp_pin_path(path, sizeof(path), t->run->pin_dir, "targets"))
		return -1;
	unlink(path);
	if (bpf_obj_pin(t->map_fd, path))
		return sp_err("pinning %s: %s", path, strerror(errno));
	return 0;
}

static int watch_cgroup(struct sp_targets *t)
{
	char parent[sizeof(t->run->cgroup)], *slash;

	snprintf(parent, sizeof(parent), "%s", t->run->cgroup);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent || !slash[1])
		return 0;	/* the root of the mount: never removed */
	snprintf(t->cg_name, sizeof(t->cg_name), "%s", slash + 1);
	*slash = '\0';
	t->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (t->ino_fd < 0 || inotify_add_watch(t->ino_fd, parent, IN_DELETE | IN_MOVED_FROM) < 0)
		return sp_err("watching %s: %s", parent, strerror(errno));
	t->ino_w = sp_loop_watch(t->ino_fd, on_inotify, t);
	return t->ino_w ? 0 : -1;
}

static int watch_links(struct sp_targets *t)
{
	t->nl = mnl_socket_open(NETLINK_ROUTE);
	if (!t->nl || mnl_socket_bind(t->nl, RTMGRP_LINK, MNL_SOCKET_AUTOPID) < 0)
		return sp_err("rtnetlink link events: %s", strerror(errno));
	fcntl(mnl_socket_get_fd(t->nl), F_SETFL, O_NONBLOCK);
	t->nl_w = sp_loop_watch(mnl_socket_get_fd(t->nl), on_netlink, t);
	return t->nl_w ? 0 : -1;
}

int sp_targets_start(struct sp_run *run)
{
	struct sp_targets *t = calloc(1, sizeof(*t));
	struct sp_target_rec *recs;

	if (!(run->targets = t))
		return sp_err("targets: %s", strerror(ENOMEM));
	t->run = run;
	t->ino_fd = t->map_fd = -1;
	recs = t->recs;
	snprintf(recs[0].name, sizeof(recs[0].name), "%s", run->cgroup);
	recs[0].state = run->cgroup_fd >= 0 ? T_ATTACHED : T_GONE;
	for (int i = 0; i < run->nr_ifaces; i++) {
		recs[1 + i].kind = T_IFACE;
		recs[1 + i].ifindex = run->ifindex[i];
		snprintf(recs[1 + i].name, sizeof(recs[1 + i].name), "%s", run->ifname[i]);
	}
	if (pin_map(t) || (run->cgroup_fd >= 0 && watch_cgroup(t)) ||
	    (run->nr_ifaces && watch_links(t)))
		return -1;
	publish(t);
	/* A device deleted while we attached sent its event before we listened. */
	if (run->nr_ifaces)
		resync(t);
	return 0;
}

void sp_targets_stop(struct sp_run *run)
{
	struct sp_targets *t = run->targets;
	char path[512];

	if (!t)
		return;
	sp_loop_unwatch(t->ino_w);
	sp_loop_unwatch(t->nl_w);
	if (t->ino_fd >= 0)
		close(t->ino_fd);
	if (t->nl)
		mnl_socket_close(t->nl);
	if (t->map_fd >= 0) {
		close(t->map_fd);
		if (!sp_pin_path(path, sizeof(path), run->pin_dir, "targets"))
			unlink(path);
	}
	free(t);
	run->targets = NULL;
}
