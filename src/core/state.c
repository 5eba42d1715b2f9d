// SPDX-License-Identifier: GPL-2.0
/* A run's changes to its namespace, kept where the next run finds them; see state.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "core/sp.h"
#include "core/state.h"
#include "core/probe.h"

#define MAX_ENTRIES 320
#define ENTRY_LEN 300	/* "promfile" and a --metrics-textfile folder of 255 bytes */
#define MAX_UNDO 8

static char entries[MAX_ENTRIES][ENTRY_LEN];
static int nr_entries, lock_fd = -1, lock_depth;

static unsigned long netns_ino, my_start;
/*
 * sp_netns_id(): the namespace's cookie, which unlike the inode is never
 * reused, so it tells our namespace from a dead one's. Kernels before 5.15
 * (no cookies in sockops) name it by inode: there a dead namespace's file
 * whose inode ours reuses is taken for ours, and its undo (a route, a
 * sysctl of that dead namespace) is replayed here once.
 */
static __u64 netns_id;
static char path[128];
static const struct sp_state_undo *undos[MAX_UNDO];
static int nr_undos;

void sp_state_undo_register(const struct sp_state_undo *u)
{
	if (nr_undos < MAX_UNDO)
		undos[nr_undos++] = u;
}

int sp_sysctl_read(const char *name)
{
	char p[128];
	FILE *f;
	int v;

	snprintf(p, sizeof(p), "/proc/sys/%s", name);
	f = fopen(p, "r");
	if (!f || fscanf(f, "%d", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

int sp_sysctl_write(const char *name, int v)
{
	char p[128];
	FILE *f;
	int err;

	snprintf(p, sizeof(p), "/proc/sys/%s", name);
	f = fopen(p, "w");
	if (!f)
		return -errno;
	err = fprintf(f, "%d\n", v) < 0;
	return fclose(f) || err ? -EIO : 0;
}

/* Field 22 of /proc/PID/stat: tells a live run from a recycled pid. */
static unsigned long start_time(pid_t pid)
{
	char p[64], buf[1024], *s;
	unsigned long t = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	f = fopen(p, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (s = strrchr(buf, ')')))
		sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %lu", &t);
	fclose(f);
	return t;
}

static int save(void)
{
	char tmp[160];
	FILE *f;
	int fd, dfd, err = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return sp_err("%s: %s", tmp, strerror(errno));
	}
	fprintf(f, "run %d %lu %llu\n", getpid(), my_start, netns_id);
	for (int i = 0; i < nr_entries; i++)
		fprintf(f, "%s\n", entries[i]);
	if (fflush(f) || fsync(fd))
		err = -1;
	if (fclose(f) || err || rename(tmp, path))
		return sp_err("%s: %s", path, strerror(errno));
	dfd = open(SP_STATE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

static void undo(const char *entry, pid_t pid)
{
	char kind[16], name[64];
	int old, set, cur, err = -EINVAL;

	if (sscanf(entry, "sysctl %63s %d %d", name, &old, &set) == 3) {
		cur = sp_sysctl_read(name);
		if (cur != set) {
			sp_log(SP_LOG_WARN, "%s is %d, not the %d a killed run (pid %d) set: left as is",
			       name, cur, set, pid);
			return;
		}
		err = sp_sysctl_write(name, old);
	} else if (sscanf(entry, "%15s", kind) == 1) {
		for (int i = 0; i < nr_undos; i++)
			if (!strcmp(undos[i]->kind, kind))
				err = undos[i]->undo(entry + strlen(kind) + 1);
	}
	if (err && err != -ESRCH && err != -ENOENT)
		sp_log(SP_LOG_WARN, "undoing '%s' left by a killed run (pid %d): %s", entry, pid,
		       strerror(-err));
	else
		sp_log(SP_LOG_INFO, "undid '%s' left by a killed run (pid %d)", entry, pid);
}

/* Each file of this namespace: undo (dead run) or look for prefix (live run). */
static pid_t scan(const char *prefix, char *out, size_t len)
{
	char pre[64], p[400], line[ENTRY_LEN + 8];
	DIR *d = opendir(SP_STATE_DIR);
	struct dirent *de;
	pid_t held = 0;

	if (!d)
		return 0;
	snprintf(pre, sizeof(pre), "state-%lu-", netns_ino);
	while (!held && (de = readdir(d))) {
		unsigned long long cookie = 0;
		unsigned long start = 0;
		int pid = 0;
		bool live, ours;
		FILE *f;

		if (strncmp(de->d_name, pre, strlen(pre)) || strstr(de->d_name, ".tmp"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", SP_STATE_DIR, de->d_name);
		if (!strcmp(p, path) || !(f = fopen(p, "r")))
			continue;
		if (!fgets(line, sizeof(line), f) ||
		    sscanf(line, "run %d %lu %llu", &pid, &start, &cookie) != 3)
			pid = 0;
		live = pid > 0 && start && start_time(pid) == start;
		/* A file of a namespace gone since, whose inode ours reuses: drop, never undo. */
		ours = cookie == netns_id;
		while (ours && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			if (!live && !prefix)
				undo(line, pid);
			else if (live && prefix && !strncmp(line, prefix, strlen(prefix))) {
				snprintf(out, len, "%s", line);
				held = pid;
				break;
			}
		}
		fclose(f);
		if (!live && !prefix)
			unlink(p);
	}
	closedir(d);
	return held;
}

void sp_state_lock(void)
{
	if (lock_fd >= 0 && !lock_depth++)
		flock(lock_fd, LOCK_EX);
}

void sp_state_unlock(void)
{
	if (lock_fd >= 0 && !--lock_depth)
		flock(lock_fd, LOCK_UN);
}

int sp_state_open(void)
{
	struct stat st;

	if (lock_fd >= 0)
		return 0;
	if (stat("/proc/self/ns/net", &st))
		return sp_err("/proc/self/ns/net: %s", strerror(errno));
	netns_ino = st.st_ino;
	my_start = start_time(getpid());
	if (sp_netns_id(&netns_id))
		return sp_err("reading this namespace's identity: %s", strerror(errno));
	if (mkdir(SP_STATE_DIR, 0700) && errno != EEXIST)
		return sp_err("cannot create %s: %s", SP_STATE_DIR, strerror(errno));
	/* Whoever can write here can make us undo anything: root's only. */
	if (lstat(SP_STATE_DIR, &st) || !S_ISDIR(st.st_mode) || st.st_uid || (st.st_mode & 022))
		return sp_err("%s: not a folder owned by root and writable only by it", SP_STATE_DIR);
	snprintf(path, sizeof(path), "%s/state-%lu-%d", SP_STATE_DIR, netns_ino, getpid());
	/* One lock for the folder, not a file per namespace left behind for good. */
	lock_fd = open(SP_STATE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock_fd < 0)
		return sp_err("%s: %s", SP_STATE_DIR, strerror(errno));
	sp_state_lock();
	scan(NULL, NULL, 0);
	sp_state_unlock();
	return 0;
}

pid_t sp_state_held(const char *prefix, char *line, size_t len)
{
	return lock_fd >= 0 ? scan(prefix, line, len) : 0;
}

static int vformat(char *buf, const char *fmt, va_list ap)
{
	return vsnprintf(buf, ENTRY_LEN, fmt, ap) >= ENTRY_LEN ? -1 : 0;
}

int sp_state_add(const char *fmt, ...)
{
	va_list ap;
	int err;

	if (lock_fd < 0 || nr_entries == MAX_ENTRIES)
		return sp_err("no room to record a change in %s", SP_STATE_DIR);
	va_start(ap, fmt);
	err = vformat(entries[nr_entries], fmt, ap);
	va_end(ap);
	if (err)
		return sp_err("state entry too long");
	nr_entries++;
	if (save()) {
		nr_entries--;
		return -1;
	}
	return 0;
}

void sp_state_del(const char *fmt, ...)
{
	char e[ENTRY_LEN];
	va_list ap;

	va_start(ap, fmt);
	vformat(e, fmt, ap);
	va_end(ap);
	for (int i = 0; i < nr_entries; i++) {
		if (strcmp(entries[i], e))
			continue;
		memcpy(entries[i], entries[--nr_entries], ENTRY_LEN);
		save();
		return;
	}
}

void sp_state_close(void)
{
	if (lock_fd < 0)
		return;
	/* What is still listed was not undone: keep it for the next run. */
	if (!nr_entries)
		unlink(path);
	close(lock_fd);
	lock_fd = -1;
	nr_entries = lock_depth = 0;
}

int sp_sysctl_own(const char *name, int v, int *saved, const char *who)
{
	const char *shown = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	char held[128], prefix[96];
	pid_t pid;
	int cur, err = 0;

	snprintf(prefix, sizeof(prefix), "sysctl %s ", name);
	sp_state_lock();
	pid = sp_state_held(prefix, held, sizeof(held));
	cur = sp_sysctl_read(name);
	if (pid)
		err = sp_err("%s: the run with pid %d already set %s in this network namespace "
			     "(%d now); only one run may", who, pid, shown, cur);
	else if (cur < 0)
		err = sp_err("%s: cannot read %s", who, name);
	else if (sp_state_add("sysctl %s %d %d", name, cur, v))
		err = -1;
	else if ((err = sp_sysctl_write(name, v))) {
		sp_state_del("sysctl %s %d %d", name, cur, v);
		err = sp_err("%s: setting %s: %s", who, shown, strerror(-err));
	} else {
		*saved = cur;
	}
	sp_state_unlock();
	return err;
}

void sp_sysctl_release(const char *name, int saved, int v)
{
	if (saved >= 0 && !sp_sysctl_write(name, saved))
		sp_state_del("sysctl %s %d %d", name, saved, v);
}
