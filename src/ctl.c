// SPDX-License-Identifier: GPL-2.0
/* status, get, set: talk to a running `stackpilot run` through its pins. */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"

/* Shared option parsing: --pin-path and (status only) --json. */
static int parse_common(int argc, char **argv, char *pin_dir, size_t len,
			bool *json, void (*usage)(FILE *))
{
	static const struct option opts[] = {
		{ "pin-path", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt;

	snprintf(pin_dir, len, "%s", SP_PIN_DEFAULT);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (optarg[0] != '/' || strlen(optarg) >= len)
				return sp_fail(2, "--pin-path %s: must be an absolute path", optarg);
			snprintf(pin_dir, len, "%s", optarg);
			break;
		case 'j':
			if (!json)
				return sp_fail(2, "--json is only for status");
			*json = true;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	return -1;	/* go on */
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static int read_meta(const char *pin_dir, struct sp_meta *meta)
{
	__u32 zero = 0;
	int fd = sp_open_pinned(pin_dir, "meta"), err;

	if (fd < 0)
		return -1;
	err = bpf_map_lookup_elem(fd, &zero, meta);
	close(fd);
	if (err)
		return sp_err("%s/meta: %s", pin_dir, strerror(errno));
	return 0;
}

static void print_progs(const struct sp_meta *meta, FILE *out, bool json)
{
	for (__u32 i = 0; i < meta->nr_progs && i < SP_MAX_PROGS; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(meta->prog_ids[i]);
		double avg;

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		close(fd);
		avg = info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0;
		if (json)
			fprintf(out, "%s{\"id\":%u,\"name\":\"%s\",\"run_cnt\":%llu,"
				"\"run_time_ns\":%llu,\"avg_ns\":%.1f}", i ? "," : "",
				info.id, info.name, (unsigned long long)info.run_cnt,
				(unsigned long long)info.run_time_ns, avg);
		else
			fprintf(out, "  %-16s id %-6u runs %-10llu avg %.0f ns\n", info.name,
				info.id, (unsigned long long)info.run_cnt, avg);
	}
}

static void usage_status(FILE *out)
{
	fprintf(out,
"Usage: stackpilot status [--json] [--pin-path DIR]\n"
"What the running stackpilot attached where, each module's counters, and each\n"
"program's run count and average run time (kernel BPF stats, enabled by `run`).\n");
}

int cmd_status(int argc, char **argv)
{
	char pin_dir[256];
	struct sp_meta meta;
	unsigned long long up;
	bool json = false, alive;
	int rc = parse_common(argc, argv, pin_dir, sizeof(pin_dir), &json, usage_status);

	if (rc >= 0)
		return rc;
	if (optind < argc)
		return sp_fail(2, "status: unexpected argument '%s'", argv[optind]);
	if (read_meta(pin_dir, &meta))
		return 1;
	alive = !kill(meta.pid, 0);
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		up = ts.tv_sec - meta.started_ns / 1000000000ULL;
	}
	if (json) {
		printf("{\"pid\":%u,\"alive\":%s,\"uptime_s\":%llu,\"pin_path\":", meta.pid,
		       alive ? "true" : "false", up);
		json_str(stdout, pin_dir);
		printf(",\"cgroup\":");
		json_str(stdout, meta.cgroup);
		printf(",\"ifaces\":[");
	} else {
		printf("stackpilot pid %u%s, up %llu s, pins %s\n", meta.pid,
		       alive ? "" : " (not running: stale pins)", up, pin_dir);
		if (meta.cgroup[0])
			printf("cgroup %s\n", meta.cgroup);
	}
	for (__u32 i = 0; i < meta.nr_ifaces && i < SP_MAX_IFACES; i++) {
		char name[IF_NAMESIZE] = "?";

		if_indextoname(meta.ifindex[i], name);
		if (json)
			printf("%s", i ? "," : ""), json_str(stdout, name);
		else
			printf("%s%s", i ? "," : "iface ", name);
	}
	if (json)
		printf("],\"modules\":{");
	else if (meta.nr_ifaces)
		printf("\n");
	for (int i = 0, n = 0; i < sp_nr_modules; i++) {
		if (!(meta.modules & (1u << i)))
			continue;
		if (json) {
			printf("%s\"%s\":{", n++ ? "," : "", sp_modules[i]->name);
			sp_modules[i]->status(pin_dir, stdout, true);
			printf("}");
		} else {
			printf("%s:\n", sp_modules[i]->name);
			sp_modules[i]->status(pin_dir, stdout, false);
		}
	}
	if (json) {
		printf("},\"programs\":[");
		print_progs(&meta, stdout, true);
		printf("]}\n");
	} else {
		printf("programs:\n");
		print_progs(&meta, stdout, false);
	}
	return 0;
}

static void list_tunables(FILE *out)
{
	for (int i = 0; i < sp_nr_modules; i++)
		for (int j = 0; j < sp_modules[i]->nr_tunables; j++) {
			const struct sp_tunable *t = &sp_modules[i]->tunables[j];

			fprintf(out, "  %s.%-16s [%u, %u] default %u: %s\n", sp_modules[i]->name,
				t->name, t->min, t->max, t->def, t->help);
		}
}

static void usage_get(FILE *out)
{
	fprintf(out,
"Usage: stackpilot get [--pin-path DIR] [KEY ...]\n"
"Print tunables of the running stackpilot (all of them without KEY).\n"
"The BPF side clamps or ignores values outside the range shown.\n"
"Tunables:\n");
	list_tunables(out);
}

static void usage_set(FILE *out)
{
	fprintf(out,
"Usage: stackpilot set [--pin-path DIR] KEY=VALUE ...\n"
"Change tunables of the running stackpilot; programs use the new value at once.\n"
"All assignments are checked before any is written.\n"
"Tunables:\n");
	list_tunables(out);
}

static int cfg_rw(const char *pin_dir, const struct sp_module *m, void *cfg, bool write)
{
	__u32 zero = 0;
	int fd = sp_open_pinned(pin_dir, m->cfg_map), err;

	if (fd < 0)
		return -1;
	err = write ? bpf_map_update_elem(fd, &zero, cfg, BPF_EXIST)
		    : bpf_map_lookup_elem(fd, &zero, cfg);
	close(fd);
	if (err)
		return sp_err("%s/%s: %s", pin_dir, m->cfg_map, strerror(errno));
	return 0;
}

static int get_one(const char *pin_dir, const struct sp_module *m, const struct sp_tunable *t)
{
	unsigned char cfg[256];
	__u32 v;

	if (cfg_rw(pin_dir, m, cfg, false))
		return -1;
	memcpy(&v, cfg + t->off, sizeof(v));
	printf("%s.%s=%u\n", m->name, t->name, v);
	return 0;
}

int cmd_get(int argc, char **argv)
{
	char pin_dir[256];
	const struct sp_module *m;
	const struct sp_tunable *t;
	int rc = parse_common(argc, argv, pin_dir, sizeof(pin_dir), NULL, usage_get);

	if (rc >= 0)
		return rc;
	for (int i = optind; i < argc; i++)	/* validate all first */
		if (!sp_tunable_find(argv[i], &m))
			return 2;
	if (optind == argc) {	/* every tunable of every loaded module */
		int shown = 0;

		for (int i = 0; i < sp_nr_modules; i++) {
			char path[512];

			if (sp_pin_path(path, sizeof(path), pin_dir, sp_modules[i]->cfg_map) ||
			    access(path, F_OK))
				continue;	/* not loaded */
			for (int j = 0; j < sp_modules[i]->nr_tunables; j++, shown++)
				if (get_one(pin_dir, sp_modules[i], &sp_modules[i]->tunables[j]))
					return 1;
		}
		return shown ? 0 : sp_fail(1, "%s: no module's tunables (is `stackpilot run` active "
					   "with this --pin-path?)", pin_dir);
	}
	for (int i = optind; i < argc; i++) {
		t = sp_tunable_find(argv[i], &m);
		if (get_one(pin_dir, m, t))
			return 1;
	}
	return 0;
}

int cmd_set(int argc, char **argv)
{
	char pin_dir[256];
	const struct sp_module *m;
	const struct sp_tunable *t;
	unsigned char cfg[256];
	__u32 v;
	int rc = parse_common(argc, argv, pin_dir, sizeof(pin_dir), NULL, usage_set);

	if (rc >= 0)
		return rc;
	if (optind == argc)
		return sp_fail(2, "set: expected KEY=VALUE (see: stackpilot set --help)");
	for (int i = optind; i < argc; i++)
		if (sp_parse_assignment(argv[i], &m, &t, &v))
			return 2;
	/* Read-modify-write per assignment: other fields keep their values. */
	for (int i = optind; i < argc; i++) {
		sp_parse_assignment(argv[i], &m, &t, &v);
		if (cfg_rw(pin_dir, m, cfg, false))
			return 1;
		memcpy(cfg + t->off, &v, sizeof(v));
		if (cfg_rw(pin_dir, m, cfg, true))
			return 1;
		printf("%s.%s=%u\n", m->name, t->name, v);
	}
	return 0;
}
