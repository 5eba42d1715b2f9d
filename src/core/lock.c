// SPDX-License-Identifier: GPL-2.0
/*
 * What keeps two runs, or another user, from interfering with a run: folders
 * only we may change, and one lock per attach target.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include "core/sp.h"

/*
 * Whether folder st, where name e is looked up, lets anyone but root and
 * us change what e is: 0, or -1 after one line (what names the path).
 */
static int folder_ok(const char *what, const char *dir, const struct stat *st,
		     const struct stat *e)
{
	uid_t me = geteuid();
	bool others = st->st_mode & S_IWOTH, group = (st->st_mode & S_IWGRP) && st->st_gid;

	if (st->st_uid && st->st_uid != me)
		return sp_err("%s: folder %s is owned by uid %u, not by root or uid %u, who could put "
			      "another in its place: refusing it", what, dir, st->st_uid, me);
	/* Sticky (as /tmp): others may add names there, not move ours. */
	if ((others || group) && !((st->st_mode & S_ISVTX) && (!e->st_uid || e->st_uid == me)))
		return sp_err("%s: folder %s is writable by %s (mode %04o), who could put another in "
			      "its place: refusing it", what, dir, others ? "others" : "its group",
			      st->st_mode & 07777);
	return 0;
}

/*
 * Like sshd's StrictModes: only root and we may change what path names.
 * Every folder its lookup goes through, following symlinks as the kernel
 * does (so the folder of each symlink too, and those of its target), must
 * be root's or ours and writable by nobody else (group write only for
 * group root), or be sticky with the name looked up in it root's or ours.
 * Otherwise a user who can write one of them can move the file away and
 * put a symlink to another file there, which a check of the file's owner
 * and mode would pass. 0, or -1 after one line naming path and the folder.
 */
int sp_trusted_path(const char *path)
{
	char cur[PATH_MAX] = "", rest[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
	struct stat dir, st;
	int links = 0;
	ssize_t n = 0;

	if (path[0] == '/')
		snprintf(rest, sizeof(rest), "%s", path);
	else if (!getcwd(next, sizeof(next)) ||
		 snprintf(rest, sizeof(rest), "%s/%s", next, path) >= (int)sizeof(rest))
		return sp_err("%s: %s", path, strerror(errno ? errno : ENAMETOOLONG));
	/* cur: the folders resolved so far ("" is /); rest: what is left, from its first '/'. */
	while (rest[0]) {
		char *c = rest + strspn(rest, "/"), *end = c + strcspn(c, "/");
		size_t l = end - c, cl = strlen(cur);

		if (!l || (l == 1 && c[0] == '.')) {
			memmove(rest, end, strlen(end) + 1);
			continue;
		}
		if (l == 2 && !strncmp(c, "..", 2)) {
			*(strrchr(cur, '/') ?: cur) = '\0';
			memmove(rest, end, strlen(end) + 1);
			continue;
		}
		if (cl + 1 + l >= sizeof(cur))
			return sp_err("%s: %s", path, strerror(ENAMETOOLONG));
		if (stat(cl ? cur : "/", &dir))
			return sp_err("%s: %s: %s", path, cl ? cur : "/", strerror(errno));
		snprintf(cur + cl, sizeof(cur) - cl, "/%.*s", (int)l, c);
		if (lstat(cur, &st) ||
		    (S_ISLNK(st.st_mode) && (n = readlink(cur, link, sizeof(link) - 1)) < 0))
			return sp_err("%s: %s", path, strerror(errno));
		cur[cl] = '\0';	/* the folder, for now */
		if (folder_ok(path, cl ? cur : "/", &dir, &st))
			return -1;
		if (!S_ISLNK(st.st_mode)) {
			cur[cl] = '/';
			memmove(rest, end, strlen(end) + 1);
			continue;
		}
		/* The target, then what was left after the symlink; from / if absolute. */
		if (++links > 40)
			return sp_err("%s: %s", path, strerror(ELOOP));
		link[n] = '\0';
		if (snprintf(next, sizeof(next), "/%s%s", link, end) >= (int)sizeof(next))
			return sp_err("%s: %s", path, strerror(ENAMETOOLONG));
		memcpy(rest, next, sizeof(rest));
		if (link[0] == '/')
			cur[0] = '\0';
	}
	return 0;
}

/*
 * A file only root and we may change: its path (sp_trusted_path), and the
 * file itself root's or ours, writable by nobody else (group write only
 * for group root). 0, or -1 after one line starting with "what path".
 */
int sp_trusted_file(const char *path, const char *what)
{
	struct stat st;

	if (sp_trusted_path(path))
		return -1;
	if (stat(path, &st))
		return sp_err("%s %s: %s", what, path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (st.st_uid && st.st_uid != geteuid()) ||
	    (st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid))
		return sp_err("%s %s: owned by uid %u, mode %04o: must be a file of root (or uid %u) "
			      "writable by nobody else: refusing it", what, path, st.st_uid,
			      st.st_mode & 07777, geteuid());
	return 0;
}

/*
 * A folder only we may change: not a symlink, owned by our effective uid
 * (root), not writable by group or others, on a path only root and we may
 * change (sp_trusted_path: world-writable parents must be sticky, as bpffs
 * mode 1777 and /tmp are). With create, made 0700 when missing; without, a
 * missing folder passes. On a bpffs mounted 1777 anyone can pre-create the
 * pin folder, then hold a flock on it or delete our pins.
 */
int sp_private_dir(const char *path, bool create)
{
	struct stat st;

	if (create && mkdir(path, 0700) && errno != EEXIST)
		return sp_err("cannot create %s: %s", path, strerror(errno));
	if (lstat(path, &st))
		return !create && errno == ENOENT ? 0 : sp_err("%s: %s", path, strerror(errno));
	if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
		return sp_err("%s is a %s, not a folder: refusing it", path,
			      S_ISLNK(st.st_mode) ? "symlink" : "file");
	if (st.st_uid != geteuid())
		return sp_err("%s is owned by uid %u, not by uid %u: refusing it (its owner could "
			      "remove our pins or hold its lock)", path, st.st_uid, geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return sp_err("%s is writable by group or others (mode %04o): refusing it",
			      path, st.st_mode & 07777);
	return sp_trusted_path(path);
}

/*
 * One lock file per target under /run/stackpilot, so that two runs never
 * attach to the same cgroup or interface, whatever their pin folders: a lock
 * on the pin folder is lost when the folder is removed or bpffs is unmounted,
 * and two `ip netns exec` runs each have a bpffs of their own. /run is not
 * remounted by `ip netns exec` (checked on Debian 12: same device and inode
 * inside and out), so all runs on a host meet there.
 */
#define SP_LOCK_DIR "/run/stackpilot"

/* Every lock this process holds, by the run it is for (a config run has many). */
#define MAX_HELD (SP_MAX_INSTANCES + 2 * SP_MAX_IFACES)
static struct {
	char path[80];
	int fd;
	const struct sp_run *run;
} held[MAX_HELD];
static int nr_held;
static bool atexit_set;

/*
 * At exit, while the locks are still held, remove their files: a run
 * waiting on an unlinked file sees that below and opens the path again.
 */
static void unlink_held(void)
{
	for (int i = 0; i < nr_held; i++)
		unlink(held[i].path);
}

/* A config run detaching one cgroup: its lock goes now, not at exit. */
void sp_unlock_targets(const struct sp_run *run)
{
	for (int i = 0; i < nr_held;) {
		if (held[i].run != run) {
			i++;
			continue;
		}
		unlink(held[i].path);
		close(held[i].fd);
		held[i] = held[--nr_held];
	}
}

static int lock_target(const struct sp_run *run, const char *name, const char *what)
{
	char path[sizeof(held[0].path)], pid[16] = "";
	struct stat a, b;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", SP_LOCK_DIR, name);
	for (;;) {
		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return sp_err("cannot open lock %s: %s", path, strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int e = errno;

			if (e == EWOULDBLOCK && pread(fd, pid, sizeof(pid) - 1, 0) > 0)
				pid[strcspn(pid, "\n")] = '\0';
			close(fd);
			if (e == EWOULDBLOCK)
				return sp_err("another `stackpilot run` (pid %s) is attached to %s (lock %s): "
					      "stop it first, or pick another target", *pid ? pid : "?", what, path);
			return sp_err("cannot lock %s: %s", path, strerror(e));
		}
		if (!fstat(fd, &a) && !stat(path, &b) && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			break;
		close(fd);	/* its holder removed it as we opened it */
	}
	if (nr_held == MAX_HELD || ftruncate(fd, 0) || dprintf(fd, "%d\n", (int)getpid()) < 0)
		return close(fd), sp_err("cannot write lock %s: %s", path,
					 nr_held == MAX_HELD ? "too many locks" : strerror(errno));
	if (!atexit_set)
		atexit(unlink_held), atexit_set = true;
	snprintf(held[nr_held].path, sizeof(held[0].path), "%s", path);
	held[nr_held].fd = fd;
	held[nr_held++].run = run;
	return 0;	/* fd stays open (and locked) until exit; O_CLOEXEC keeps it from children */
}

/*
 * Lock files that runs killed with SIGKILL left (their locks went with
 * them): removed when nobody holds them, so they do not pile up. Taken and
 * unlinked like at exit; a run that opened one meanwhile sees it gone and
 * opens the path again (lock_target).
 */
static void sweep_stale(void)
{
	DIR *d = opendir(SP_LOCK_DIR);
	struct dirent *e;
	char path[sizeof(held[0].path) + NAME_MAX];
	struct stat a, b;
	int fd;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if ((strncmp(e->d_name, "cgroup-", 7) && strncmp(e->d_name, "iface-", 6)) ||
		    n < 5 || strcmp(e->d_name + n - 5, ".lock"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", SP_LOCK_DIR, e->d_name);
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!flock(fd, LOCK_EX | LOCK_NB) && !fstat(fd, &a) && !stat(path, &b) &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			unlink(path);
		close(fd);
	}
	closedir(d);
}

/*
 * Called by `run` before it locks the pin folder: locks its cgroup (by inode,
 * the cgroup id) and each interface (by network namespace inode and ifindex),
 * then makes the pin folder, so a refused run leaves no folder behind.
 */
int sp_lock_targets(struct sp_run *run)
{
	char name[64], what[300];
	struct stat st, ns;

	if (sp_private_dir(SP_LOCK_DIR, true))
		return -1;
	sweep_stale();
	if (run->cgroup_fd >= 0) {
		if (fstat(run->cgroup_fd, &st))
			return sp_err("cgroup %s: %s", run->cgroup, strerror(errno));
		snprintf(name, sizeof(name), "cgroup-%llu.lock", (unsigned long long)st.st_ino);
		snprintf(what, sizeof(what), "cgroup %s", run->cgroup);
		if (lock_target(run, name, what))
			return -1;
	}
	if (run->nr_ifaces && stat("/proc/self/ns/net", &ns)) {
		sp_err("/proc/self/ns/net: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < run->nr_ifaces; i++) {
		snprintf(name, sizeof(name), "iface-%llu-%d.lock", (unsigned long long)ns.st_ino,
			 run->ifindex[i]);
		snprintf(what, sizeof(what), "interface %s in this network namespace", run->ifname[i]);
		if (lock_target(run, name, what))
			goto fail;
	}
	if (!sp_private_dir(run->pin_dir, true))
		return 0;
fail:
	/* A config run goes on without this target: nothing of it stays held. */
	sp_unlock_targets(run);
	return -1;
}
