// SPDX-License-Identifier: GPL-2.0
/* Errors, number parsing, privileges, bpffs and cgroup v2 discovery. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"

/* Every user-facing error is one line on stderr; callers return its -1. */
int sp_err(const char *fmt, ...)
{
	va_list ap;

	fputs("stackpilot: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

/* Decimal or 0x-hex, no sign, no trailing garbage, within [min, max]. */
int sp_parse_u32(const char *s, __u32 min, __u32 max, __u32 *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = (__u32)v;
	return 0;
}

static bool cap_effective(int cap)
{
	char line[256];
	unsigned long long caps = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps & (1ULL << cap);
}

int sp_check_privileges(void)
{
	enum { CAP_NET_ADMIN_ = 12, CAP_SYS_ADMIN_ = 21, CAP_PERFMON_ = 38, CAP_BPF_ = 39 };

	if (cap_effective(CAP_SYS_ADMIN_))
		return 0;
	if (cap_effective(CAP_BPF_) && cap_effective(CAP_NET_ADMIN_) &&
	    cap_effective(CAP_PERFMON_))
		return 0;
	return sp_err("need root (CAP_SYS_ADMIN, or CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON)");
}

int sp_check_btf(const char *btf_path)
{
	const char *p = btf_path ? btf_path : "/sys/kernel/btf/vmlinux";

	if (access(p, R_OK))
		return sp_err("no kernel BTF at %s (%s): stackpilot needs a kernel built with CONFIG_DEBUG_INFO_BTF, or --btf FILE",
			      p, strerror(errno));
	return 0;
}

static bool is_fs(const char *path, long magic)
{
	struct statfs st;

	return !statfs(path, &st) && st.f_type == magic;
}

/*
 * The pin folder must be on a bpf filesystem. `ip netns exec` remounts /sys
 * without one, so mount /sys/fs/bpf when that is where the pins go.
 */
int sp_ensure_bpffs(const char *pin_dir)
{
	char parent[PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", pin_dir);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return sp_err("pin path %s: must be a folder below a bpf filesystem", pin_dir);
	*slash = '\0';
	if (is_fs(parent, BPF_FS_MAGIC))
		return 0;
	if (strcmp(parent, "/sys/fs/bpf"))
		return sp_err("pin path %s: %s is not a bpf filesystem", pin_dir, parent);
	if (mkdir(parent, 0755) && errno != EEXIST)
		return sp_err("cannot mount bpffs at %s: mkdir: %s", parent, strerror(errno));
	if (mount("bpf", parent, "bpf", 0, "mode=0700"))
		return sp_err("cannot mount bpffs at %s: %s", parent, strerror(errno));
	sp_mounted_bpffs = true;
	return 0;
}

bool sp_mounted_bpffs, sp_mounted_cgroup2;

/* Undo the mounts made above, if nothing else has been put there meanwhile. */
void sp_unmount_ours(void)
{
	struct dirent *d;
	DIR *dir;
	int others = 0;

	if (sp_mounted_cgroup2)
		umount2("/sys/fs/cgroup", MNT_DETACH);
	if (!sp_mounted_bpffs || !(dir = opendir("/sys/fs/bpf")))
		return;
	while ((d = readdir(dir)))	/* the kernel's own preload entries do not count */
		others += strcmp(d->d_name, ".") && strcmp(d->d_name, "..") &&
			  !strstr(d->d_name, ".debug");
	closedir(dir);
	if (!others)
		umount2("/sys/fs/bpf", MNT_DETACH);
}

static bool is_empty_dir(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *d;
	int n = 0;

	if (!dir)
		return false;
	while ((d = readdir(dir)))
		n += strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
	closedir(dir);
	return n == 0;
}

/* Where cgroup v2 is mounted: /sys/fs/cgroup on unified hosts, .../unified on hybrid ones. */
int sp_cgroup2_mount(char *buf, size_t len)
{
	char line[4096], mnt[PATH_MAX], *sep;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int found = -1;

	if (!f)
		return sp_err("cannot read /proc/self/mountinfo: %s", strerror(errno));
	while (found && fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype ... */
		sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "cgroup2 ", 8))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 &&
		    strlen(mnt) < len) {
			snprintf(buf, len, "%s", mnt);
			found = 0;
		}
	}
	fclose(f);
	/* None at all, as under `ip netns exec` (a fresh /sys): mount one where
	 * systemd would, if that place is free. */
	if (found && is_empty_dir("/sys/fs/cgroup") &&
	    !mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL)) {
		sp_mounted_cgroup2 = true;
		snprintf(buf, len, "/sys/fs/cgroup");
		found = 0;
	}
	if (found)
		return sp_err("no cgroup v2 filesystem is mounted (mount -t cgroup2 none /sys/fs/cgroup/unified)");
	return 0;
}

/* PATH absolute, or relative to the cgroup v2 mount; must be a cgroup v2 folder. */
int sp_resolve_cgroup(const char *arg, char *out, size_t len)
{
	char mnt[PATH_MAX];
	struct stat st;

	if (sp_cgroup2_mount(mnt, sizeof(mnt)))
		return -1;
	if (!arg || !*arg)
		snprintf(out, len, "%s", mnt);
	else if (arg[0] == '/')
		snprintf(out, len, "%s", arg);
	else if ((size_t)snprintf(out, len, "%s/%s", mnt, arg) >= len)
		return sp_err("cgroup path too long: %s", arg);
	if (stat(out, &st) || !S_ISDIR(st.st_mode))
		return sp_err("cgroup %s does not exist", out);
	if (!is_fs(out, CGROUP2_SUPER_MAGIC))
		return sp_err("cgroup %s is not on cgroup v2 (that is mounted at %s)", out, mnt);
	return 0;
}

int sp_pin_path(char *buf, size_t len, const char *pin_dir, const char *name)
{
	if ((size_t)snprintf(buf, len, "%s/%s", pin_dir, name) >= len)
		return sp_err("pin path too long: %s/%s", pin_dir, name);
	return 0;
}

int sp_sum_percpu(int map_fd, __u32 key, __u64 *sum)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 vals[ncpu > 0 ? ncpu : 1];

	*sum = 0;
	if (ncpu <= 0 || bpf_map_lookup_elem(map_fd, &key, vals))
		return -1;
	for (int i = 0; i < ncpu; i++)
		*sum += vals[i];
	return 0;
}

/* A pinned object of the running stackpilot, or -1 after printing why. */
int sp_open_pinned(const char *pin_dir, const char *name)
{
	char path[512];
	int fd;

	if (sp_pin_path(path, sizeof(path), pin_dir, name))
		return -1;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return sp_err("%s: %s (is `stackpilot run` active with this --pin-path?)",
			      path, strerror(errno));
	return fd;
}

void sp_run_add_prog(struct sp_run *run, int prog_fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (run->nr_progs < SP_MAX_PROGS &&
	    !bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		run->prog_ids[run->nr_progs++] = info.id;
}
