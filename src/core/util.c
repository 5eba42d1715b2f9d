// SPDX-License-Identifier: GPL-2.0
/* Number parsing, privileges, bpffs and cgroup v2 discovery. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <bpf/btf.h>
#include "core/sp.h"
#include "core/log.h"

/*
 * Decimal or 0x-hex, no sign, no trailing garbage, within [min, max].
 * A leading zero is refused (-EDOM), not read as octal: "010" is not 8.
 */
int sp_parse_u32(const char *s, __u32 min, __u32 max, __u32 *out)
{
	unsigned long long v;
	bool hex;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	if (s[0] == '0' && s[1] && !hex)
		return s[1] >= '0' && s[1] <= '9' ? -EDOM : -EINVAL;
	if (hex && (!s[2] || s[2] == '-' || s[2] == '+' || s[2] == ' '))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, hex ? 16 : 10);
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = (__u32)v;
	return 0;
}

int sp_read_line(FILE *f, char *buf, size_t size)
{
	size_t n = 0;
	bool nul = false, any = false;
	int c;

	while ((c = getc_unlocked(f)) != EOF && c != '\n') {
		any = true;
		nul |= !c;
		if (n + 1 < size)
			buf[n] = c;
		n++;
	}
	if (c == EOF && !any)
		return SP_LINE_EOF;
	buf[n + 1 < size ? n : size - 1] = '\0';
	return nul ? SP_LINE_NUL : n + 1 > size ? SP_LINE_LONG : (int)n;
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
	struct btf *btf;

	if (access(p, R_OK))
		return sp_err("no kernel BTF at %s (%s): stackpilot needs a kernel built with CONFIG_DEBUG_INFO_BTF, or --btf FILE",
			      p, strerror(errno));
	if (!btf_path)
		return 0;
	/* It steers what the programs read of kernel memory: root's, like the config file. */
	if (sp_trusted_file(btf_path, "--btf"))
		return -1;
	/* libbpf would fail later with its own error numbers (4001 for bad magic). */
	libbpf_print_fn_t print = libbpf_set_print(NULL);	/* one line: ours */

	btf = btf__parse(p, NULL);
	libbpf_set_print(print);
	if (!btf)
		return sp_err("--btf %s: not a BTF file (raw BTF or an ELF file with a .BTF section)", p);
	if (!btf__find_by_name_kind(btf, "bpf_sock_ops_kern", BTF_KIND_STRUCT)) {
		btf__free(btf);
		return sp_err("--btf %s: BTF without kernel types (no struct bpf_sock_ops_kern): not a vmlinux BTF", p);
	}
	btf__free(btf);
	return 0;
}

static bool is_fs(const char *path, long magic)
{
	struct statfs st;

	return !statfs(path, &st) && st.f_type == magic;
}

/*
 * Where pins may go: a folder whose parent is a bpf filesystem, or
 * /sys/fs/bpf/NAME, where `run` mounts one (`ip netns exec` remounts /sys
 * without it). *need_mount: it must. 0, or -1 after one line.
 */
static int pin_parent(const char *pin_dir, char *parent, size_t len, bool *need_mount)
{
	char *slash;

	snprintf(parent, len, "%s", pin_dir);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return sp_err("pin path %s: must be a folder below a bpf filesystem", pin_dir);
	*slash = '\0';
	*need_mount = !is_fs(parent, BPF_FS_MAGIC);
	if (*need_mount && strcmp(parent, "/sys/fs/bpf"))
		return sp_err("pin path %s: %s is not a bpf filesystem: mount one there "
			      "(mount -t bpf bpf %s), or use a folder below /sys/fs/bpf", pin_dir, parent, parent);
	return 0;
}

/* check-config: the pin folder as `run` would take it, without mounting anything; 0 or -1. */
int sp_check_pin_path(const char *pin_dir)
{
	char parent[PATH_MAX];
	bool need_mount;

	return pin_parent(pin_dir, parent, sizeof(parent), &need_mount) ||
	       sp_private_dir(pin_dir, false) ? -1 : 0;
}

/*
 * The pin folder must be on a bpf filesystem. `ip netns exec` remounts /sys
 * without one, so mount /sys/fs/bpf when that is where the pins go. A pin
 * folder that exists must be ours; sp_lock_targets() makes a missing one.
 */
int sp_ensure_bpffs(const char *pin_dir)
{
	char parent[PATH_MAX];
	bool need_mount;

	if (pin_parent(pin_dir, parent, sizeof(parent), &need_mount))
		return -1;
	if (need_mount) {
		if (mkdir(parent, 0755) && errno != EEXIST)
			return sp_err("cannot mount bpffs at %s: mkdir: %s", parent, strerror(errno));
		if (mount("bpf", parent, "bpf", 0, "mode=0700"))
			return sp_err("cannot mount bpffs at %s: %s", parent, strerror(errno));
		sp_mounted_bpffs = true;
	}
	return sp_private_dir(pin_dir, false);
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

/*
 * Where cgroup v2 is mounted, from mountinfo, into buf ("" when nowhere);
 * mounts nothing. -1 with errno when mountinfo cannot be read.
 */
int sp_cgroup2_find(char *buf, size_t len)
{
	char line[4096], mnt[PATH_MAX], *sep;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	buf[0] = '\0';
	if (!f)
		return -1;
	while (!buf[0] && fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype ... */
		sep = strstr(line, " - ");
		if (sep && !strncmp(sep + 3, "cgroup2 ", 8) &&
		    sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 && strlen(mnt) < len)
			snprintf(buf, len, "%s", mnt);
	}
	fclose(f);
	return 0;
}

/* Where cgroup v2 is mounted: /sys/fs/cgroup on unified hosts, .../unified on hybrid ones. */
int sp_cgroup2_mount(char *buf, size_t len)
{
	int found;

	if (sp_cgroup2_find(buf, len))
		return sp_err("cannot read /proc/self/mountinfo: %s", strerror(errno));
	found = buf[0] ? 0 : -1;
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

/*
 * PATH absolute, or relative to the cgroup v2 mount, naming an existing cgroup
 * v2 folder strictly below a cgroup v2 mount; "/" alone names the mount's
 * root. Anything that normalises to the root ("", ".", "x/..", the mount
 * point itself) is refused: attaching there means every process on the host,
 * which must be asked for explicitly.
 */
int sp_resolve_cgroup(const char *arg, char *out, size_t len)
{
	char mnt[PATH_MAX], path[PATH_MAX], real[PATH_MAX];
	struct stat st, up;

	if (!arg)
		return sp_err("--cgroup PATH is needed by the chosen modules (--cgroup / for the whole host)");
	if (!*arg)
		return sp_err("--cgroup '': empty path (--cgroup / for the whole host)");
	if (sp_cgroup2_mount(mnt, sizeof(mnt)))
		return -1;
	if (!strcmp(arg, "/")) {
		if (strlen(mnt) >= len)
			return sp_err("cgroup v2 mount %s: path too long", mnt);
		snprintf(out, len, "%s", mnt);
		return 0;
	}
	if (strlen(arg) >= len)
		return sp_err("--cgroup: path longer than %zu characters", len - 1);
	if ((size_t)snprintf(path, sizeof(path), arg[0] == '/' ? "%s%s" : "%s/%s",
			     arg[0] == '/' ? "" : mnt, arg) >= len)
		return sp_err("--cgroup %s: %s/%s is longer than %zu characters", arg, mnt, arg, len - 1);
	if (!realpath(path, real) || stat(real, &st) || !S_ISDIR(st.st_mode))
		return sp_err("cgroup %s does not exist (a service's: `systemctl show -p ControlGroup UNIT`; "
			      "a process's: /proc/PID/cgroup)", path);
	if (strlen(real) >= len)
		return sp_err("cgroup %s: resolves to a path longer than %zu characters", path, len - 1);
	if (!is_fs(real, CGROUP2_SUPER_MAGIC))
		return sp_err("cgroup %s is not on cgroup v2 (that is mounted at %s)", real, mnt);
	/* Below a mount, the parent is on the same cgroup v2 filesystem. */
	snprintf(path, sizeof(path), "%s/..", real);
	if (!strcmp(real, "/") || stat(path, &up) || up.st_dev != st.st_dev ||
	    !is_fs(path, CGROUP2_SUPER_MAGIC))
		return sp_err("--cgroup %s names the root of cgroup v2 mount %s (every process): "
			      "use --cgroup / for that", arg, real);
	snprintf(out, len, "%s", real);
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

int sp_pin_errors;

/* A pinned object of the running stackpilot, or -1 after printing why. */
int sp_open_pinned(const char *pin_dir, const char *name)
{
	char path[512];
	int fd;

	if (sp_pin_path(path, sizeof(path), pin_dir, name))
		return sp_pin_errors++, -1;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return sp_pin_errors++, sp_err("%s: %s (is `stackpilot run` active with this --pin-path?)",
			      path, strerror(errno));
	return fd;
}

/*
 * Look up a value of a map someone else may have pinned: the kernel copies
 * the map's value size, whatever buffer we pass, so check that size first.
 * Returns 0, -EMSGSIZE, or -errno.
 */
int sp_map_lookup_sized(int fd, const void *key, void *val, __u32 size)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	if (info.value_size != size || info.key_size != sizeof(__u32) ||
	    info.type != BPF_MAP_TYPE_ARRAY)
		return -EMSGSIZE;
	return bpf_map_lookup_elem(fd, key, val) ? -errno : 0;
}

void sp_run_add_prog(struct sp_run *run, const char *module, const struct bpf_program *prog)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info), n = run->nr_progs;

	if (n >= SP_MAX_PROGS || bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
		return;
	run->prog_ids[n] = info.id;
	/* The kernel keeps 15 characters of a name: sp_fragguard_expire4 and 6 would be one. */
	snprintf(run->prog_module[n], sizeof(run->prog_module[n]), "%s", module);
	snprintf(run->prog_name[n], sizeof(run->prog_name[n]), "%s", bpf_program__name(prog));
	run->nr_progs++;
}
