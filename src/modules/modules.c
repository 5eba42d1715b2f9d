// SPDX-License-Identifier: GPL-2.0
/* The module table, and tunables: KEY = module.field, each a __u32. */
/* What every module shares below this table is core/module.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "core/probe.h"

/* Order is attach order, and the bit order of sp_meta.modules. */
const struct sp_module *const sp_modules[] = {
	&sp_mod_tcpstats,
	&sp_mod_rehash,
	&sp_mod_pmtu,
	&sp_mod_fragguard,
};
const int sp_nr_modules = sizeof(sp_modules) / sizeof(sp_modules[0]);

const struct sp_module *sp_module_find(const char *name, int *idx)
{
	for (int i = 0; i < sp_nr_modules; i++) {
		if (!strcmp(sp_modules[i]->name, name)) {
			if (idx)
				*idx = i;
			return sp_modules[i];
		}
	}
	return NULL;
}

/* "all" or a comma-separated list of module names. */
int sp_parse_modules(const char *list, __u32 *mask)
{
	char buf[256], *tok, *save = NULL;
	int idx;

	*mask = 0;
	if (!strcmp(list, "all")) {
		*mask = (1u << sp_nr_modules) - 1;
		return 0;
	}
	if (strlen(list) >= sizeof(buf))
		return sp_err("--modules: list too long");
	strcpy(buf, list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!sp_module_find(tok, &idx))
			return sp_err("unknown module '%s' (see: stackpilot --help)", tok);
		*mask |= 1u << idx;
	}
	if (!*mask)
		return sp_err("--modules: empty list");
	return 0;
}

const struct sp_tunable *sp_tunable_find(const char *key, const struct sp_module **mod)
{
	const char *dot = strchr(key, '.');
	char name[64];
	const struct sp_module *m;

	if (!dot || (size_t)(dot - key) >= sizeof(name)) {
		sp_err("tunable '%s': expected MODULE.NAME, e.g. tcpstats.port", key);
		return NULL;
	}
	memcpy(name, key, dot - key);
	name[dot - key] = '\0';
	m = sp_module_find(name, NULL);
	if (!m) {
		sp_err("unknown module '%s' in tunable '%s'", name, key);
		return NULL;
	}
	for (int i = 0; i < m->nr_tunables; i++) {
		if (!strcmp(m->tunables[i].name, dot + 1)) {
			*mod = m;
			return &m->tunables[i];
		}
	}
	sp_err("unknown tunable '%s' (see: stackpilot get --help)", key);
	return NULL;
}

/* KEY=VALUE, checked against the tunable's range. */
int sp_parse_assignment(const char *arg, const struct sp_module **mod,
			const struct sp_tunable **t, __u32 *val)
{
	const char *eq = strchr(arg, '=');
	char key[128];
	int err;

	if (!eq || eq == arg)
		return sp_err("'%s': expected KEY=VALUE", arg);
	if ((size_t)(eq - arg) >= sizeof(key))
		return sp_err("'%s': key too long", arg);
	memcpy(key, arg, eq - arg);
	key[eq - arg] = '\0';
	*t = sp_tunable_find(key, mod);
	if (!*t)
		return -1;
	err = sp_parse_u32(eq + 1, (*t)->min, (*t)->max, val);
	if (err == -ERANGE)
		return sp_err("%s=%s: out of range [%u, %u]", key, eq + 1, (*t)->min, (*t)->max);
	if (err == -EDOM)
		return sp_err("%s=%s: leading zeros not allowed (decimal, or 0x for hex)", key, eq + 1);
	if (err)
		return sp_err("%s=%s: not a number", key, eq + 1);
	return 0;
}

void *sp_run_inst(const struct sp_run *run, const struct sp_module *m)
{
	int idx;

	return sp_module_find(m->name, &idx) ? run->inst[idx] : NULL;
}

int sp_fit_modules(unsigned int *mask, unsigned int named)
{
	char why[256];

	if (!sp_probe_usable())
		return 0;	/* not root: the load will say what is wrong */
	for (int i = 0; i < sp_nr_modules; i++) {
		struct sp_fit fit = {};

		if (!(*mask & (1u << i)))
			continue;
		sp_modules[i]->fit(&fit);
		if (!fit.refused)
			continue;
		sp_fit_refusal(sp_modules[i]->name, &fit, why, sizeof(why));
		if (named & (1u << i))
			return sp_err("%s", why);
		sp_log(SP_LOG_WARN, "%s: not started (stackpilot probe)", why);
		*mask &= ~(1u << i);
	}
	return 0;
}
