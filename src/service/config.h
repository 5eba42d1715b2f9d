/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The configuration file of `run --config` (issue 12): global settings, then
 * one [cgroup PATH] section per cgroup, each with its modules and tunables
 * in the spelling `get` prints. Syntax in docs/stackpilot.rst (CONFIGURATION).
 */
#ifndef SP_CONFIG_H
#define SP_CONFIG_H

#include "core/sp.h"

#define SP_CONFIG_DEFAULT "/etc/stackpilot/stackpilot.conf"
#define SP_CFG_MAX_SETS 64	/* more than every tunable of every module */
/* A file over this is a mistake (SP_MAX_CGROUPS sections with every tunable and comments fit). */
#define SP_CONFIG_MAX_BYTES (1 << 20)

/* The global settings a file may give once (key_line). */
enum sp_cfg_key {
	SP_CFG_PIN_PATH, SP_CFG_BTF, SP_CFG_LOG_LEVEL, SP_CFG_INTERVAL, SP_CFG_MTU_PROBING,
	SP_CFG_METRICS_TEXTFILE, SP_CFG_METRICS_LISTEN, SP_CFG_MODULES, SP_CFG_KEYS
};

/* One `module.key = value` line. */
struct sp_cfg_set {
	struct sp_assign a;
	int line;
};

/* The global settings' modules (those on interfaces), or one [cgroup] section. */
struct sp_cfg_section {
	char path[256];		/* relative to the cgroup v2 mount; "/" is its root */
	bool pattern;		/* path has globs: an instance per cgroup it matches */
	char name[256];		/* its pin folder under pin-path (sp_cgroup_pin_name) */
	int line;
	__u32 modules;
	int modules_line;	/* of its `modules =`, 0 when not given */
	__u32 named;		/* modules its `modules =` names (not "all") */
	int nr_sets;
	struct sp_cfg_set sets[SP_CFG_MAX_SETS];
};

struct sp_config {
	char file[256];
	char pin_dir[256];
	char btf[256];			/* "" : the kernel's */
	int log_level;			/* -1: not given */
	int interval;			/* -1: not given */
	int mtu_probing;		/* net.ipv4.tcp_mtu_probing while running; -1: not given */
	char metrics_textfile[256], metrics_listen[64];
	int key_line[SP_CFG_KEYS];	/* of each global setting given once, 0 if not given */
	int nr_ifaces;
	char ifname[SP_MAX_IFACES][32];
	int iface_line[SP_MAX_IFACES];
	struct sp_cfg_section global;	/* path and name empty */
	int nr_cgroups;
	struct sp_cfg_section cg[SP_MAX_CGROUPS];
};

/*
 * Read and check FILE into c (everything but what depends on the host: the
 * interfaces and the metrics folder, see sp_config_check_host). 0, or -1
 * after one line "FILE:LINE: what is wrong" through sp_err().
 */
int sp_config_load(const char *file, struct sp_config *c);
/*
 * The interfaces exist, this kernel runs each section's named modules (those
 * of "all" it cannot run are taken out, each with a warning), and (with
 * metrics: not on a reload) the pin path is one `run` can use, and the
 * metrics options are good, and are given to metrics.c, which keeps
 * pointers into c: 0 or -1, as above.
 */
int sp_config_check_host(struct sp_config *c, bool metrics);
/* path has a glob ('*', '?', '['): a section of it is a pattern. */
bool sp_cgroup_is_pattern(const char *path);
/*
 * A cgroup path (relative, as in the file) matches a section's pattern:
 * fnmatch(3) per level, so '*' never crosses a '/'; a level "**" is zero or
 * more levels between two others and one or more at the end. A literal
 * path matches itself only.
 */
bool sp_cgroup_match(const char *pattern, const char *path);
/* outer is a cgroup above inner (paths as the file gives them). */
bool sp_cgroup_is_above(const char *outer, const char *inner);
/* The pin folder name of a cgroup path as sp_config_load() normalised it. */
int sp_cgroup_pin_name(const char *path, char *out, size_t len);
/*
 * A --cgroup argument of get/set/status as a config path: relative to the
 * mount, with or without a leading '/', or the full path below the mount.
 */
int sp_cgroup_arg_name(const char *arg, char *name, size_t len);
/* The value the config gives t of m in s (a set, else the default). */
__u32 sp_cfg_value(const struct sp_cfg_section *s, const struct sp_module *m,
		   const struct sp_tunable *t);


int cmd_check_config(int argc, char **argv);

#endif
