// SPDX-License-Identifier: GPL-2.0
/*
 * The config file: INI-like, read by a small parser of our own. Debian's
 * libinih would save the line splitting only (about 40 lines here) and
 * adds a run-time dependency, while what matters is the checking, which
 * reuses `run`'s and `set`'s own checks with FILE:LINE in front of their
 * messages (sp_err_where): one spelling and one range per tunable, whether
 * it comes from the command line or from the file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "export/export.h"
#include "core/log.h"
#include "service/config.h"
#include "core/probe.h"

/*
 * bpffs refuses names with a dot, and every systemd unit has one, so a
 * cgroup's pin folder is its path with '/' as ':' and '.' as '+'; '%', ':',
 * '+' and bytes outside printable ASCII become %XX, so that two paths never
 * share a name. The root ("/") is ":". system.slice/nginx.service ->
 * system+slice:nginx+service.
 */
int sp_cgroup_pin_name(const char *path, char *out, size_t len)
{
	size_t n = 0;

	if (!strcmp(path, "/"))
		path = "";
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		char e[4] = { *p == '/' ? ':' : *p == '.' ? '+' : *p };

		if (*p == '%' || *p == ':' || *p == '+' || *p < 0x21 || *p > 0x7e)
			snprintf(e, sizeof(e), "%%%02x", *p);
		if (n + strlen(e) >= len || n + strlen(e) > 200)
			return sp_err("cgroup %s: its pin folder name would be too long", path);
		memcpy(out + n, e, strlen(e));
		n += strlen(e);
	}
	if (!n)
		out[n++] = ':';
	out[n] = '\0';
	return 0;
}

/* A config path: "/" or components without "", "." or "..". */
static int check_path(const char *path)
{
	const char *p = path;

	if (!strcmp(path, "/"))
		return 0;
	if (path[0] == '/')
		return sp_err("cgroup %s: give the path relative to the cgroup v2 mount "
			      "(system.slice/nginx.service), or / for its root", path);
	while (*p) {
		size_t l = strcspn(p, "/");

		if (!l || (l == 1 && p[0] == '.') || (l == 2 && !strncmp(p, "..", 2)))
			return sp_err("cgroup %s: empty, '.' or '..' component", path);
		p += l;
		if (*p == '/' && !*++p)
			return sp_err("cgroup %s: empty, '.' or '..' component", path);
	}
	return 0;
}

bool sp_cgroup_is_pattern(const char *path)
{
	return strpbrk(path, "*?[") != NULL;
}

/* A pattern's '**' is a whole level: "a**" or "**b" would be two readings of one name. */
static int check_pattern(const char *path)
{
	for (const char *p = path; *p; ) {
		size_t l = strcspn(p, "/");
		bool star = false;

		for (size_t i = 0; i + 1 < l; i++)
			star |= p[i] == '*' && p[i + 1] == '*';
		if (star && l != 2)
			return sp_err("cgroup %s: '**' must be a whole level, not part of a name",
				      path);
		p += l + (p[l] == '/');
	}
	if (!strcmp(path, "**"))
		return sp_err("cgroup %s: matches every cgroup; give at least one level by name",
			      path);
	return 0;
}

/* One level of path: its length. */
static size_t level(const char *p)
{
	return strcspn(p, "/");
}

/*
 * A level '**' is zero or more levels between two others ("a/STAR/b" with
 * STAR as '**': a/b, a/x/b, ...) and one or more at the end (below a, not
 * a itself).
 */
bool sp_cgroup_match(const char *pattern, const char *path)
{
	char pl[256], nl[256];
	size_t lp = level(pattern), ln;

	if (!*pattern)
		return !*path;
	if (lp == 2 && !strncmp(pattern, "**", 2)) {
		const char *rest = pattern + 2 + (pattern[2] == '/');

		if (!*rest)
			return *path;
		for (const char *p = path; ; ) {
			if (sp_cgroup_match(rest, p))
				return true;
			if (!*p)
				return false;
			p += level(p);
			p += *p == '/';
		}
	}
	ln = level(path);
	if (!*path || lp >= sizeof(pl) || ln >= sizeof(nl))
		return false;
	memcpy(pl, pattern, lp), pl[lp] = '\0';
	memcpy(nl, path, ln), nl[ln] = '\0';
	if (fnmatch(pl, nl, 0))
		return false;
	if (!pattern[lp])
		return !path[ln];
	return sp_cgroup_match(pattern + lp + 1, path + ln + (path[ln] == '/'));
}

int sp_cgroup_arg_name(const char *arg, char *name, size_t len)
{
	char mnt[256];
	size_t l;

	/* The full path below the mount; without a mount, the argument as it is. */
	if (arg[0] == '/' && arg[1] && !sp_cgroup2_mount(mnt, sizeof(mnt)) &&
	    !strncmp(arg, mnt, (l = strlen(mnt))) && arg[l] == '/')
		arg += l;
	while (arg[0] == '/' && arg[1])
		arg++;
	if (!*arg || check_path(arg))
		return sp_err("--cgroup '%s': expected a cgroup path as in the config file", arg);
	return sp_cgroup_pin_name(arg, name, len);
}

__u32 sp_cfg_value(const struct sp_cfg_section *s, const struct sp_module *m,
		   const struct sp_tunable *t)
{
	for (int i = 0; i < s->nr_sets; i++)
		if (s->sets[i].a.m == m && s->sets[i].a.t == t)
			return s->sets[i].a.v;
	return t->def;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int copy(char *dst, size_t len, const char *key, const char *val)
{
	if (strlen(val) >= len)
		return sp_err("%s: value longer than %zu characters", key, len - 1);
	snprintf(dst, len, "%s", val);
	return 0;
}

/* modules = LIST in s; on interfaces (global) or on cgroups. */
static int parse_modules(struct sp_cfg_section *s, const char *list, bool global)
{
	char val[256];
	size_t n = 0;
	__u32 mask;

	/* "rehash, pmtu" as well as "rehash,pmtu". */
	for (; *list && n < sizeof(val) - 1; list++)
		if (*list != ' ' && *list != '\t')
			val[n++] = *list;
	val[n] = '\0';
	if (sp_parse_modules(val, &mask))
		return -1;
	for (int i = 0; i < sp_nr_modules; i++) {
		if (!(mask & (1u << i)))
			continue;
		if (global != sp_modules[i]->needs_iface) {
			if (!strcmp(val, "all"))
				mask &= ~(1u << i);
			else
				return sp_err("modules: %s attaches to %s: name it %s", sp_modules[i]->name,
					      global ? "cgroups" : "interfaces",
					      global ? "in a [cgroup PATH] section" : "before any section");
		}
	}
	s->modules = mask;
	/* Named modules are refused on a kernel that cannot run them; "all" is what can. */
	s->named = strcmp(val, "all") ? mask : 0;
	return 0;
}

static int parse_set(struct sp_cfg_section *s, const char *key, const char *val, int line,
		     bool global)
{
	char arg[512];
	struct sp_cfg_set *set;

	if (s->nr_sets == SP_CFG_MAX_SETS)
		return sp_err("more than %d tunables in one section", SP_CFG_MAX_SETS);
	set = &s->sets[s->nr_sets];
	snprintf(arg, sizeof(arg), "%s=%s", key, val);
	if (sp_parse_assignment(arg, &set->a))
		return -1;
	if (global != set->a.m->needs_iface)
		return sp_err("%s: %s attaches to %s: set it %s", key, set->a.m->name,
			      global ? "cgroups" : "interfaces",
			      global ? "in a [cgroup PATH] section" : "before any section");
	for (int i = 0; i < s->nr_sets; i++)
		if (s->sets[i].a.t == set->a.t && s->sets[i].a.m == set->a.m)
			return sp_err("%s: already set at line %d", key, s->sets[i].line);
	set->line = line;
	s->nr_sets++;
	return 0;
}

static int parse_iface(struct sp_config *c, char *val, int line)
{
	char *save = NULL;

	for (char *tok = strtok_r(val, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		if (c->nr_ifaces == SP_MAX_IFACES)
			return sp_err("iface: at most %d interfaces", SP_MAX_IFACES);
		if (strlen(tok) >= IF_NAMESIZE)
			return sp_err("iface %s: not an interface name", tok);
		for (int i = 0; i < c->nr_ifaces; i++)
			if (!strcmp(c->ifname[i], tok))
				return sp_err("iface %s: named twice", tok);
		c->iface_line[c->nr_ifaces] = line;
		snprintf(c->ifname[c->nr_ifaces++], sizeof(c->ifname[0]), "%s", tok);
	}
	return 0;
}

/*
 * A setting given twice is an error, not "the last one wins": in a file
 * that grew by appending, the line an operator reads first may not be
 * the one that applies.
 */
static int once(int *seen, const char *key, int line)
{
	if (*seen)
		return sp_err("%s: already set at line %d", key, *seen);
	*seen = line;
	return 0;
}

static int parse_global(struct sp_config *c, const char *key, char *val, int line)
{
	static const char *const single[SP_CFG_KEYS] = {
		[SP_CFG_PIN_PATH] = "pin-path", [SP_CFG_BTF] = "btf",
		[SP_CFG_LOG_LEVEL] = "log-level", [SP_CFG_INTERVAL] = "interval",
		[SP_CFG_MTU_PROBING] = "mtu-probing", [SP_CFG_METRICS_TEXTFILE] = "metrics-textfile",
		[SP_CFG_METRICS_LISTEN] = "metrics-listen", [SP_CFG_MODULES] = "modules",
	};
	__u32 v;

	for (int i = 0; i < SP_CFG_KEYS; i++)
		if (!strcmp(key, single[i]) && once(&c->key_line[i], key, line))
			return -1;

	if (!strcmp(key, "pin-path")) {
		if (val[0] != '/' || strlen(val) > 128)
			return sp_err("pin-path %s: must be an absolute path of at most 128 bytes", val);
		return copy(c->pin_dir, sizeof(c->pin_dir), key, val);
	}
	if (!strcmp(key, "btf"))
		return copy(c->btf, sizeof(c->btf), key, val);
	if (!strcmp(key, "log-level")) {
		if ((c->log_level = sp_log_parse_level(val)) < 0)
			return sp_err("log-level %s: expected error, warn, info or debug", val);
		return 0;
	}
	if (!strcmp(key, "interval")) {
		if (sp_parse_u32(val, 0, 86400, &v))
			return sp_err("interval %s: expected seconds in [0, 86400]", val);
		c->interval = v;
		return 0;
	}
	if (!strcmp(key, "mtu-probing")) {
		if (sp_parse_u32(val, 0, 2, &v))
			return sp_err("mtu-probing %s: expected 0, 1 or 2", val);
		c->mtu_probing = v;
		return 0;
	}
	if (!strcmp(key, "metrics-textfile"))
		return copy(c->metrics_textfile, sizeof(c->metrics_textfile), key, val);
	if (!strcmp(key, "metrics-listen"))
		return copy(c->metrics_listen, sizeof(c->metrics_listen), key, val);
	if (!strcmp(key, "iface"))
		return parse_iface(c, val, line);
	if (!strcmp(key, "modules"))
		return parse_modules(&c->global, val, true);
	if (strchr(key, '.'))
		return parse_set(&c->global, key, val, line, true);
	return sp_err("unknown setting '%s' (pin-path, btf, log-level, interval, mtu-probing, "
		      "metrics-textfile, metrics-listen, iface, modules, MODULE.KEY)", key);
}

static int parse_section_head(struct sp_config *c, char *head, int line)
{
	struct sp_cfg_section *s;
	char *path;

	if (!strcmp(head, "global"))
		return sp_err("[global] is not a section: global settings come before the first "
			      "[cgroup PATH]");
	if (strncmp(head, "cgroup", 6) || (head[6] != ' ' && head[6] != '\t'))
		return sp_err("[%s]: expected [cgroup PATH]", head);
	path = trim(head + 6);
	if (c->nr_cgroups == SP_MAX_CGROUPS)
		return sp_err("more than %d [cgroup] sections", SP_MAX_CGROUPS);
	s = &c->cg[c->nr_cgroups];
	memset(s, 0, sizeof(*s));
	s->pattern = sp_cgroup_is_pattern(path);
	if (check_path(path) || (s->pattern && check_pattern(path)) ||
	    copy(s->path, sizeof(s->path), "cgroup", path) ||
	    sp_cgroup_pin_name(path, s->name, sizeof(s->name)))
		return -1;
	for (int i = 0; i < c->nr_cgroups; i++)
		if (!strcmp(c->cg[i].name, s->name))
			return sp_err("[cgroup %s]: that cgroup has a section already, at line %d",
				      path, c->cg[i].line);
	s->line = line;
	/* Until `modules =` says otherwise: every module that attaches to a cgroup. */
	parse_modules(s, "all", false);
	c->nr_cgroups++;
	return 0;
}

/* outer is a cgroup above inner (paths as check_path accepts them). */
bool sp_cgroup_is_above(const char *outer, const char *inner)
{
	size_t l = strlen(outer);

	if (!strcmp(outer, "/"))
		return strcmp(inner, "/");
	return !strncmp(outer, inner, l) && inner[l] == '/';
}

/*
 * cgroup BPF runs the programs of every cgroup above a socket's too (links
 * attach with BPF_F_ALLOW_MULTI), so a section inside another that runs
 * the same module cannot override it: both instances act on the inner
 * cgroup's sockets (two rehash coins per episode, the outer pmtu's clamp
 * too). Refused rather than run as the file does not say.
 */
static int check_nesting(const struct sp_config *c, char *where, size_t len)
{
	for (int j = 0; j < c->nr_cgroups; j++)
		for (int i = 0; i < c->nr_cgroups; i++) {
			const struct sp_cfg_section *o = &c->cg[i], *in = &c->cg[j];
			__u32 both = o->modules & in->modules;
			const struct sp_cfg_section *late = o->line > in->line ? o : in;

			/* A pattern's matches are checked as they appear (service.c). */
			if (!both || o->pattern || in->pattern || !sp_cgroup_is_above(o->path, in->path))
				continue;
			snprintf(where, len, "%s:%d", c->file, late->line);
			return sp_err("[cgroup %s]: overlaps [cgroup %s] at line %d: %s's %s programs "
				      "also run for %s's sockets, so one cannot override the other; "
				      "give each module to one section", late->path,
				      late == in ? o->path : in->path, late == in ? o->line : in->line,
				      o->path, sp_modules[__builtin_ctz(both)]->name, in->path);
		}
	return 0;
}

/* A section's tunables are of its modules: checked once the section is read. */
static int check_section(const struct sp_config *c, const struct sp_cfg_section *s,
			 char *where, size_t len)
{
	for (int i = 0; i < s->nr_sets; i++) {
		int idx;

		sp_module_find(s->sets[i].a.m->name, &idx);
		if (s->modules & (1u << idx))
			continue;
		snprintf(where, len, "%s:%d", c->file, s->sets[i].line);
		return sp_err("%s.%s: module %s is not in this section's modules", s->sets[i].a.m->name,
			      s->sets[i].a.t->name, s->sets[i].a.m->name);
	}
	return 0;
}

static int parse_line(struct sp_config *c, char *line, int nr)
{
	char *s = trim(line), *eq, *key, *val, *hash;

	/* A comment also after a value, from a '#' after blank space. */
	for (hash = strchr(s, '#'); hash; hash = strchr(hash + 1, '#'))
		if (hash > s && (hash[-1] == ' ' || hash[-1] == '\t')) {
			*hash = '\0';
			s = trim(s);
			break;
		}
	if (!*s || *s == '#' || *s == ';')
		return 0;
	if (*s == '[') {
		char *end = strchr(s, ']');

		if (!end || *trim(end + 1))
			return sp_err("expected [cgroup PATH] alone on its line");
		*end = '\0';
		return parse_section_head(c, trim(s + 1), nr);
	}
	eq = strchr(s, '=');
	if (!eq)
		return sp_err("expected KEY = VALUE, [cgroup PATH] or a # comment");
	*eq = '\0';
	key = trim(s);
	val = trim(eq + 1);
	if (!*key || !*val)
		return sp_err("expected KEY = VALUE with both");
	if (!c->nr_cgroups)
		return parse_global(c, key, val, nr);
	if (!strcmp(key, "modules"))
		return once(&c->cg[c->nr_cgroups - 1].modules_line, key, nr) ? -1 :
		       parse_modules(&c->cg[c->nr_cgroups - 1], val, false);
	if (strchr(key, '.'))
		return parse_set(&c->cg[c->nr_cgroups - 1], key, val, nr, false);
	return sp_err("'%s' in a [cgroup] section: only modules and MODULE.KEY (global settings "
		      "come before the first section)", key);
}

/*
 * The file, if root (who runs the service) can trust it: whoever can write
 * it chooses the programs a root process attaches and their tunables, so
 * it must belong to root or to the run's user and be writable by nobody
 * else (group write only for group root), as sshd does with its files; so
 * must every folder on its way, or their owner could put a symlink to
 * another file in its place (sp_trusted_path). A symlink is followed
 * (configuration managers make them) and its target is what is checked.
 * Opened without blocking, so a FIFO or a device named by mistake is
 * refused instead of hanging a reload's event loop.
 */
static FILE *open_config(const char *file)
{
	struct stat st;
	FILE *f;
	int fd;

	if (sp_trusted_path(file))
		return NULL;
	fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		sp_err("%s: %s", file, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		sp_err("%s: not a regular file", file);
	} else if ((st.st_uid && st.st_uid != geteuid()) || (st.st_mode & S_IWOTH) ||
		   ((st.st_mode & S_IWGRP) && st.st_gid)) {
		sp_err("%s: owned by uid %u, mode %04o: must belong to root (or uid %u) and be "
		       "writable by nobody else", file, st.st_uid, st.st_mode & 07777, geteuid());
	} else if (st.st_size > SP_CONFIG_MAX_BYTES) {
		sp_err("%s: over %d bytes", file, SP_CONFIG_MAX_BYTES);
	} else if ((f = fdopen(fd, "r"))) {
		return f;
	} else {
		sp_err("%s: %s", file, strerror(errno));
	}
	close(fd);
	return NULL;
}

int sp_config_load(const char *file, struct sp_config *c)
{
	char line[1024], where[300];
	int nr = 0, err = 0, n;
	FILE *f;

	memset(c, 0, sizeof(*c));
	c->log_level = c->interval = c->mtu_probing = -1;
	snprintf(c->pin_dir, sizeof(c->pin_dir), "%s", SP_PIN_DEFAULT);
	if (strlen(file) >= sizeof(c->file))
		return sp_err("config file name too long: %s", file);
	snprintf(c->file, sizeof(c->file), "%s", file);
	if (!(f = open_config(file)))
		return -1;
	sp_err_where = where;
	while (!err && (n = sp_read_line(f, line, sizeof(line))) != SP_LINE_EOF) {
		snprintf(where, sizeof(where), "%s:%d", file, ++nr);
		if (n == SP_LINE_LONG)
			err = sp_err("line longer than %zu characters", sizeof(line) - 1);
		else if (n == SP_LINE_NUL)
			err = sp_err("a NUL byte in the line (not a text file?)");
		else
			err = parse_line(c, line, nr);
	}
	if (!err && ferror(f))
		err = sp_err("read error");
	fclose(f);
	if (!err && c->nr_ifaces && !c->global.modules)
		parse_modules(&c->global, "all", true);
	if (!err && !c->nr_ifaces && c->global.modules) {
		snprintf(where, sizeof(where), "%s", file);
		err = sp_err("%s attaches to interfaces: give them with iface = DEV",
			     sp_modules[__builtin_ctz(c->global.modules)]->name);
	}
	for (int i = -1; !err && i < c->nr_cgroups; i++)
		err = check_section(c, i < 0 ? &c->global : &c->cg[i], where, sizeof(where));
	if (!err)
		err = check_nesting(c, where, sizeof(where));
	if (!err && !c->nr_cgroups && !c->nr_ifaces) {
		snprintf(where, sizeof(where), "%s", file);
		err = sp_err("nothing to attach: no [cgroup PATH] section and no iface");
	}
	sp_err_where = NULL;
	return err ? -1 : 0;
}

int sp_config_check_host(struct sp_config *c, bool metrics)
{
	char where[300];
	int err = 0;

	sp_err_where = where;
	for (int i = -1; !err && i < c->nr_cgroups; i++) {
		struct sp_cfg_section *s = i < 0 ? &c->global : &c->cg[i];

		snprintf(where, sizeof(where), "%s:%d", c->file, s->modules_line ?: s->line);
		err = sp_fit_modules(&s->modules, s->named);
	}
	for (int i = 0; !err && i < c->nr_ifaces; i++) {
		snprintf(where, sizeof(where), "%s:%d", c->file, c->iface_line[i]);
		if (!if_nametoindex(c->ifname[i]))
			err = sp_err("iface %s: no such interface", c->ifname[i]);
	}
	/* As `run` takes it (on reload it cannot change, and is in use). */
	if (c->key_line[SP_CFG_PIN_PATH])
		snprintf(where, sizeof(where), "%s:%d", c->file, c->key_line[SP_CFG_PIN_PATH]);
	else
		snprintf(where, sizeof(where), "%s", c->file);
	if (!err && metrics && sp_check_pin_path(c->pin_dir))
		err = -1;
	snprintf(where, sizeof(where), "%s:%d", c->file, c->key_line[SP_CFG_METRICS_TEXTFILE]);
	if (!err && metrics && c->metrics_textfile[0] && sp_metrics_opt('t', c->metrics_textfile))
		err = -1;
	snprintf(where, sizeof(where), "%s:%d", c->file, c->key_line[SP_CFG_METRICS_LISTEN]);
	if (!err && metrics && c->metrics_listen[0] && sp_metrics_opt('L', c->metrics_listen))
		err = -1;
	sp_err_where = NULL;
	return err;
}

static void usage_check(FILE *out)
{
	fprintf(out,
"Usage: stackpilot check-config [FILE]\n"
"Check a config file as `run --config FILE` would, attaching nothing (default\n"
"%s). Prints each cgroup and its pin folder; exit 0 when good,\n"
"1 with FILE:LINE: what is wrong.\n", SP_CONFIG_DEFAULT);
}

int cmd_check_config(int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, {} };
	const char *file = SP_CONFIG_DEFAULT;
	struct sp_config *c;
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h')
			return usage_check(stdout), 0;
		usage_check(stderr);
		return 2;
	}
	if (optind < argc)
		file = argv[optind++];
	if (optind < argc)
		return sp_fail(2, "check-config: unexpected argument '%s'", argv[optind]);
	c = malloc(sizeof(*c));
	if (!c)
		return sp_fail(1, "check-config: %s", strerror(ENOMEM));
	rc = sp_config_load(file, c) || sp_config_check_host(c, true) ? 1 : 0;
	for (int i = 0; !rc && i < c->nr_cgroups; i++)
		if (c->cg[i].pattern)
			printf("cgroup %s: a pattern; each cgroup it matches has its pins in %s/NAME\n",
			       c->cg[i].path, c->pin_dir);
		else
			printf("cgroup %s: pins in %s/%s\n", c->cg[i].path, c->pin_dir, c->cg[i].name);
	if (!rc && c->nr_ifaces)
		printf("interfaces: pins in %s\n", c->pin_dir);
	if (!rc)
		printf("%s: good\n", file);
	free(c);
	return rc;
}
