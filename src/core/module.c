// SPDX-License-Identifier: GPL-2.0
/*
 * What every module's loader shares, below the module table: config maps,
 * pins, the common part of start(), and the `run` options modules add.
 * Nothing here knows which modules exist (modules/modules.c does) or who
 * runs them (service/).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"

/*
 * Options modules add to `run`; registered before main() runs. The table is
 * process-wide like the option parser itself; what a run was given is in
 * struct sp_run, where each module instance reads it.
 */
const struct sp_run_opt *sp_run_opts[SP_MAX_RUN_OPTS];
int sp_nr_run_opts;

void sp_run_opt_register(const struct sp_run_opt *opt)
{
	if (sp_nr_run_opts < SP_MAX_RUN_OPTS)
		sp_run_opts[sp_nr_run_opts++] = opt;
}

const char *sp_run_opt_arg(const struct sp_run *run, const struct sp_run_opt *opt)
{
	for (int i = 0; i < sp_nr_run_opts; i++)
		if (sp_run_opts[i] == opt)
			return run->opt_arg[i];
	return NULL;
}

void sp_cfg_apply(void *cfg, const struct sp_tunable *t, __u32 v)
{
	memcpy((unsigned char *)cfg + t->off, &v, sizeof(v));
}

__u32 sp_cfg_get(const void *cfg, const struct sp_tunable *t)
{
	__u32 v;

	memcpy(&v, (const unsigned char *)cfg + t->off, sizeof(v));
	return v;
}

/* A module's first config: the defaults, then what the run's cfg_init changes. */
int sp_cfg_write_initial(struct sp_run *run, const struct sp_module *m, int map_fd)
{
	unsigned char cfg[SP_CFG_MAX] = {};
	__u32 zero = 0;

	for (int i = 0; i < m->nr_tunables; i++)
		sp_cfg_apply(cfg, &m->tunables[i], m->tunables[i].def);
	/* Before the programs attach: no connection ever sees the defaults instead. */
	if (run && run->cfg_init)
		run->cfg_init(run, m, cfg);
	if (bpf_map_update_elem(map_fd, &zero, cfg, BPF_ANY))
		return sp_err("%s: writing default tunables: %s", m->name, strerror(errno));
	return 0;
}

/* A module's pinned config; fails with one line when the module is not loaded. */
static int cfg_open(const char *pin_dir, const struct sp_module *m, char *path, size_t len)
{
	if (sp_pin_path(path, len, pin_dir, m->cfg_map))
		return -1;
	if (access(path, F_OK))
		return sp_pin_errors++, sp_err("module %s is not loaded: no %s (is `stackpilot run` "
					       "active with this --pin-path and that module?)",
					       m->name, path);
	return sp_open_pinned(pin_dir, m->cfg_map);
}

int sp_cfg_read(const char *pin_dir, const struct sp_module *m, void *cfg)
{
	char path[512];
	__u32 zero = 0;
	int fd = cfg_open(pin_dir, m, path, sizeof(path)), err;

	if (fd < 0)
		return -1;
	err = sp_map_lookup_sized(fd, &zero, cfg, m->cfg_size);
	close(fd);
	if (err == -EMSGSIZE)
		return sp_err("%s: not %s's config map (value size differs)", path, m->name);
	return err ? sp_err("%s: %s", path, strerror(-err)) : 0;
}

int sp_cfg_write(const char *pin_dir, const struct sp_module *m, const void *cfg)
{
	char path[512];
	__u32 zero = 0;
	int fd = cfg_open(pin_dir, m, path, sizeof(path)), err;

	if (fd < 0)
		return -1;
	err = bpf_map_update_elem(fd, &zero, cfg, BPF_EXIST) ? -errno : 0;
	close(fd);
	return err ? sp_err("%s: %s", path, strerror(-err)) : 0;
}

/*
 * The maps a module's pins hold: every named one, not .rodata/.bss, not
 * sp_rttcb (one per process, shared by the modules, read by no one), and
 * not sp_chain (the run's, chain.c: a pin would keep its programs alive).
 */
static bool pinned(const struct bpf_map *map)
{
	return !strchr(bpf_map__name(map), '.') && strcmp(bpf_map__name(map), SP_RTTCB_MAP) &&
	       strcmp(bpf_map__name(map), SP_CHAIN_MAP);
}

/* Pin every named map of a module (not .rodata/.bss) as PIN_DIR/<map name>. */
int sp_pin_obj_maps(struct bpf_object *obj, const char *pin_dir)
{
	struct bpf_map *map;
	char path[512];

	bpf_object__for_each_map(map, obj) {
		if (!pinned(map))
			continue;
		if (sp_pin_path(path, sizeof(path), pin_dir, bpf_map__name(map)))
			return -1;
		unlink(path);	/* stale pin from a run that was killed */
		if (bpf_map__pin(map, path))
			return sp_err("pinning %s: %s", path, strerror(errno));
	}
	return 0;
}

void sp_unpin_obj_maps(struct bpf_object *obj, const char *pin_dir)
{
	struct bpf_map *map;
	char path[512];

	if (!obj)
		return;
#ifdef SP_MUTANT_KEEP_PINS	/* make mutants: pins stay after the run */
	return;
#endif
	bpf_object__for_each_map(map, obj) {
		if (!pinned(map))
			continue;
		if (!sp_pin_path(path, sizeof(path), pin_dir, bpf_map__name(map)))
			unlink(path);
	}
}

/*
 * The part of a module's start() that is the same for every module once its
 * skeleton is loaded: default tunables, pins, and its sockops program into
 * the run's chain (chain.c; the run attaches the chain once every module
 * is in, with a link that dies with the process).
 */
int sp_module_publish(struct sp_run *run, const struct sp_module *m,
		      struct bpf_object *obj, struct bpf_program *sockops)
{
	struct bpf_map *cfg = bpf_object__find_map_by_name(obj, m->cfg_map);

	/* Then saved tunables, --dry-run and saved state, before the first packet. */
	if (!cfg || sp_cfg_write_initial(run, m, bpf_map__fd(cfg)) ||
	    (run->restore && run->restore(run, m, bpf_map__fd(cfg))) ||
	    sp_pin_obj_maps(obj, run->pin_dir))
		return -1;
	return sockops ? sp_chain_add(run, m, sockops) : 0;
}

/* The chain holds the module's sockops program until the run ends (sp_chain_stop). */
void sp_module_unpublish(struct sp_run *run, struct bpf_object *obj)
{
	sp_unpin_obj_maps(obj, run->pin_dir);
}

/*
 * How every skeleton bpftool generates begins (struct X_bpf): all the core
 * needs of one, whichever module's it is.
 */
struct skel_head {
	struct bpf_object_skeleton *skeleton;
	struct bpf_object *obj;
};

/* The instance of a module that only declares .open. */
struct skel_inst {
	struct skel_head *skel;
};

void *sp_module_inst(const struct sp_module *m, size_t size, void **inst)
{
	*inst = calloc(1, size);
	if (!*inst)
		sp_err("%s: %s", m->name, strerror(ENOMEM));
	return *inst;
}

/*
 * The process's one sp_rttcb map (bpf/rttcb.bpf.h): every module object that
 * declares it shares the first one loaded, so that the modules' asks for
 * RTT_CB are bits of one word per socket. Kept open for the process's life.
 */
static int rttcb_fd = -1;

int sp_skel_load(struct sp_run *run, const struct sp_module *m, void *skel)
{
	struct bpf_object *obj = ((struct skel_head *)skel)->obj;
	struct bpf_map *rttcb = bpf_object__find_map_by_name(obj, SP_RTTCB_MAP);
	int err;

	if (sp_chain_join(run, m, obj))
		return -1;
	if (rttcb && rttcb_fd >= 0 && (err = bpf_map__reuse_fd(rttcb, rttcb_fd)))
		return sp_err("%s: sharing %s: %s", m->name, SP_RTTCB_MAP, strerror(-err));
	err = bpf_object__load_skeleton(((struct skel_head *)skel)->skeleton);
	if (err)
		return sp_err("%s: load: %s", m->name, strerror(-err));
	if (rttcb && rttcb_fd < 0 &&
	    (rttcb_fd = fcntl(bpf_map__fd(rttcb), F_DUPFD_CLOEXEC, 3)) < 0)
		return sp_err("%s: %s: %s", m->name, SP_RTTCB_MAP, strerror(errno));
	return 0;
}

/* The module's one sockops program, attached to the run's cgroup, or NULL. */
static struct bpf_program *sockops_prog(struct bpf_object *obj)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, obj)
		if (bpf_program__type(p) == BPF_PROG_TYPE_SOCK_OPS)
			return p;
	return NULL;
}

int sp_module_start(struct sp_run *run, const struct sp_module *m, void **inst)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	struct skel_inst *in;

	if (m->start)
		return m->start(run, inst);
	if (!(in = sp_module_inst(m, sizeof(*in), inst)))
		return -1;
	in->skel = m->open(&opts);
	if (!in->skel)
		return sp_err("%s: open: %s", m->name, strerror(errno));
	if (sp_skel_load(run, m, in->skel))
		return -1;
	return sp_module_publish(run, m, in->skel->obj, sockops_prog(in->skel->obj));
}

void sp_module_stop(struct sp_run *run, const struct sp_module *m, void *inst)
{
	struct skel_inst *in = inst;

	if (m->stop) {
		m->stop(run, inst);
		return;
	}
	if (!in)
		return;
	if (in->skel) {
		sp_module_unpublish(run, in->skel->obj);
		bpf_object__destroy_skeleton(in->skel->skeleton);
		free(in->skel);
	}
	free(in);
}

int sp_attach_progs(struct sp_run *run, const struct sp_module *m, struct bpf_program **progs,
		    int n, struct bpf_link **links)
{
	for (int i = 0; i < n; i++) {
		links[i] = bpf_program__attach(progs[i]);
		if (!links[i])
			return sp_err("%s: attach %s: %s", m->name, bpf_program__section_name(progs[i]),
				      strerror(errno));
		sp_run_add_prog(run, m->name, progs[i]);
	}
	return 0;
}
