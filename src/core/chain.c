// SPDX-License-Identifier: GPL-2.0
/*
 * A run's sockops chain (bpf/chain.bpf.h): one program on the cgroup,
 * sp_sockops, and behind it the run's sockops modules in the order they
 * start, each tail-calling the next. Made when the first module joins,
 * on the cgroup once every module is in (no event sees part of the
 * chain), gone with the run (sp_chain_stop) or the process (a link, and
 * a program array no pin holds).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "sockops.skel.h"

struct sp_chain {
	struct sockops_bpf *skel;
	struct bpf_link *link;	/* sp_sockops on the run's cgroup, once every module is in */
	int map_fd;		/* the run's sp_chain, shared by its module objects */
	__u32 joined;		/* slots given */
	const struct sp_module *slot[SP_CHAIN_SLOTS];	/* whose each is */
};

/*
 * Set the object's read-only __u32 NAME to v, before load: its .rodata
 * section through BTF (the core does not know the module's skeleton).
 */
static int rodata_set_u32(struct bpf_object *obj, const char *name, __u32 v)
{
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *var;
	const struct btf_type *sec;
	struct bpf_map *map;
	const void *init;
	size_t size;
	int id, err = -ENOENT;

	if (!btf || (id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC)) < 0)
		return -ENOENT;
	sec = btf__type_by_id(btf, id);
	bpf_object__for_each_map(map, obj) {
		const char *n = bpf_map__name(map);
		size_t len = strlen(n);

		if (len >= 7 && !strcmp(n + len - 7, ".rodata"))
			break;
	}
	if (!map || !(init = bpf_map__initial_value(map, &size)))
		return -ENOENT;
	var = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++, var++) {
		const char *n = btf__name_by_offset(btf, btf__type_by_id(btf, var->type)->name_off);
		char *data;

		if (strcmp(n, name) || var->size != sizeof(v) || var->offset + var->size > size)
			continue;
		if (!(data = malloc(size)))
			return -ENOMEM;
		memcpy(data, init, size);
		memcpy(data + var->offset, &v, sizeof(v));
		err = bpf_map__set_initial_value(map, data, size);
		free(data);
		break;
	}
	return err;
}

static struct sp_chain *chain_new(struct sp_run *run)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	struct sp_chain *c = calloc(1, sizeof(*c));

	if (!c)
		return sp_err("sockops chain: %s", strerror(ENOMEM)), NULL;
	c->map_fd = -1;
	run->chain = c;
	c->skel = sockops_bpf__open_opts(&opts);
	if (!c->skel)
		return sp_err("sockops chain: open: %s", strerror(errno)), NULL;
	if (sockops_bpf__load(c->skel))
		return sp_err("sockops chain: load: %s", strerror(errno)), NULL;
	c->map_fd = fcntl(bpf_map__fd(c->skel->maps.sp_chain), F_DUPFD_CLOEXEC, 3);
	if (c->map_fd < 0)
		return sp_err("sockops chain: %s", strerror(errno)), NULL;
	return c;
}

int sp_chain_join(struct sp_run *run, const struct sp_module *m, struct bpf_object *obj)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, SP_CHAIN_MAP);
	struct sp_chain *c = run->chain;
	int err;

	if (!map)
		return 0;
	if (!c && !(c = chain_new(run)))
		return -1;
	if (c->joined >= SP_CHAIN_SLOTS)
		return sp_err("%s: more than %d sockops modules in one run", m->name, SP_CHAIN_SLOTS);
	if ((err = rodata_set_u32(obj, "sp_chain_slot", c->joined)))
		return sp_err("%s: sp_chain_slot: %s", m->name, strerror(-err));
	c->slot[c->joined++] = m;
	if ((err = bpf_map__reuse_fd(map, c->map_fd)))
		return sp_err("%s: sharing %s: %s", m->name, SP_CHAIN_MAP, strerror(-err));
	return 0;
}

int sp_chain_add(struct sp_run *run, const struct sp_module *m, struct bpf_program *prog)
{
	struct sp_chain *c = run->chain;
	int fd = bpf_program__fd(prog);
	__u32 slot = 0;

	while (c && slot < c->joined && c->slot[slot] != m)
		slot++;
	if (!c || slot == c->joined)
		return sp_err("%s: not in the run's sockops chain", m->name);
	if (bpf_map_update_elem(c->map_fd, &slot, &fd, BPF_ANY))
		return sp_err("%s: into the sockops chain: %s", m->name, strerror(errno));
	return 0;
}

int sp_chain_attach(struct sp_run *run)
{
	struct sp_chain *c = run->chain;

	if (!c || c->link)
		return 0;
	c->link = bpf_program__attach_cgroup(c->skel->progs.sp_sockops, run->cgroup_fd);
	if (!c->link)
		return sp_err("sp_sockops: attach to cgroup %s: %s", run->cgroup, strerror(errno));
	sp_run_add_prog(run, "chain", c->skel->progs.sp_sockops);
	return 0;
}

void sp_chain_stop(struct sp_run *run)
{
	struct sp_chain *c = run->chain;

	if (!c)
		return;
	/* The cgroup first: no event runs part of a chain being taken apart. */
	bpf_link__destroy(c->link);
	if (c->map_fd >= 0)
		close(c->map_fd);
	sockops_bpf__destroy(c->skel);
	free(c);
	run->chain = NULL;
}
