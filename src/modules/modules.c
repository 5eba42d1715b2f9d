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
#include "modules/modules.h"

/*
 * Each module's declaration (modules/NAME/NAME.c): adding a module is a
 * line here and one in the table below (docs/adding-a-module.md).
 */
extern const struct sp_module sp_mod_tcpstats, sp_mod_rehash, sp_mod_fragguard, sp_mod_pmtu;

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

/* The tunable KEY names, or the reason there is none. */
static int tunable_of(const char *key, const struct sp_module **mod, const struct sp_tunable **t)
{
	const char *dot = strchr(key, '.');
	char name[64];
	const struct sp_module *m;

	if (!dot || (size_t)(dot - key) >= sizeof(name))
		return SP_ASSIGN_NO_DOT;
	memcpy(name, key, dot - key);
	name[dot - key] = '\0';
	m = sp_module_find(name, NULL);
	if (!m)
		return SP_ASSIGN_MODULE;
	*mod = m;
	for (int i = 0; i < m->nr_tunables; i++) {
		if (!strcmp(m->tunables[i].name, dot + 1)) {
			*t = &m->tunables[i];
			return 0;
		}
	}
	return SP_ASSIGN_TUNABLE;
}

/* The command line's and a config file's words for why KEY names no tunable. */
static void tunable_err(int why, const char *key)
{
	const char *dot = strchr(key, '.');

	if (why == SP_ASSIGN_NO_DOT)
		sp_err("tunable '%s': expected MODULE.NAME, e.g. tcpstats.port", key);
	else if (why == SP_ASSIGN_MODULE)
		sp_err("unknown module '%.*s' in tunable '%s'", (int)(dot - key), key, key);
	else
		sp_err("unknown tunable '%s' (see: stackpilot get --help)", key);
}

const struct sp_tunable *sp_tunable_find(const char *key, const struct sp_module **mod)
{
	const struct sp_tunable *t = NULL;
	int why = tunable_of(key, mod, &t);

	if (why)
		tunable_err(why, key);
	return t;
}

int sp_assign_parse(const char *arg, struct sp_assign *a)
{
	const char *eq = strchr(arg, '=');
	char key[128];
	int err;

	if (!eq || eq == arg)
		return SP_ASSIGN_SYNTAX;
	if ((size_t)(eq - arg) >= sizeof(key))
		return SP_ASSIGN_KEY_LONG;
	memcpy(key, arg, eq - arg);
	key[eq - arg] = '\0';
	a->m = NULL;
	a->t = NULL;
	err = tunable_of(key, &a->m, &a->t);
	if (err)
		return err;
	err = sp_parse_u32(eq + 1, a->t->min, a->t->max, &a->v);
	if (err == -ERANGE)
		return SP_ASSIGN_RANGE;
	return err == -EDOM ? SP_ASSIGN_ZEROS : err ? SP_ASSIGN_NAN : 0;
}

/* KEY=VALUE, checked against the tunable's range; -1 after one line saying why. */
int sp_parse_assignment(const char *arg, struct sp_assign *a)
{
	const char *eq = strchr(arg, '=');
	int why = sp_assign_parse(arg, a), klen = eq ? (int)(eq - arg) : 0;
	char key[128];

	if (why == SP_ASSIGN_SYNTAX)
		return sp_err("'%s': expected KEY=VALUE", arg);
	if (why == SP_ASSIGN_KEY_LONG)
		return sp_err("'%s': key too long", arg);
	if (!why)
		return 0;
	snprintf(key, sizeof(key), "%.*s", klen, arg);
	if (why == SP_ASSIGN_RANGE)
		return sp_err("%s=%s: out of range [%u, %u]", key, eq + 1, a->t->min, a->t->max);
	if (why == SP_ASSIGN_ZEROS)
		return sp_err("%s=%s: leading zeros not allowed (decimal, or 0x for hex)", key, eq + 1);
	if (why == SP_ASSIGN_NAN)
		return sp_err("%s=%s: not a number", key, eq + 1);
	tunable_err(why, key);
	return -1;
}

void *sp_run_inst(const struct sp_run *run, const struct sp_module *m)
{
	int idx;

	return sp_module_find(m->name, &idx) ? run->inst[idx] : NULL;
}

unsigned int sp_modules_refused;

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
		sp_modules_refused |= 1u << i;
	}
	return 0;
}
