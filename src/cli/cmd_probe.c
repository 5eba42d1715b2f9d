// SPDX-License-Identifier: GPL-2.0
/* `stackpilot probe`: what this kernel offers, and which modules it runs. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "core/probe.h"
#include "cli/cli.h"

static void usage_probe(FILE *out)
{
	fprintf(out,
"Usage: stackpilot probe [--json] [--btf FILE] [MODULE ...]\n"
"What this kernel offers each module (default: all): whether it can run, the\n"
"mechanism it will use for each choice, and what a missing feature costs.\n"
"Exit status 0 when every module named can run, 1 otherwise.\n"
"\n"
"  --json       one JSON object (schema 1): modules, then the kernel's features\n"
"  --btf FILE   kernel BTF to use instead of /sys/kernel/btf/vmlinux\n"
"\n"
"SP_PROBE_OFF=NAME,... in the environment makes the named features count as\n"
"missing, here and in `run` (the names are those of --json): for trying the\n"
"fallbacks on a kernel that has the real thing.\n");
}

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "btf", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *btf_path = NULL;
	bool json = false, all_ok = true;
	__u32 mask = 0;
	struct sp_json j;
	int opt, idx;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j': json = true; break;
		case 'b': btf_path = optarg; break;
		case 'h': usage_probe(stdout); return 0;
		default: usage_probe(stderr); return 2;
		}
	}
	for (; optind < argc; optind++) {
		if (!sp_module_find(argv[optind], &idx))
			return sp_fail(2, "unknown module '%s' (see: stackpilot --help)", argv[optind]);
		mask |= 1u << idx;
	}
	if (!mask)
		mask = (1u << sp_nr_modules) - 1;
	if (sp_check_btf(btf_path) || sp_probe(btf_path))
		return 1;
	if (json) {
		sp_json_init(&j, stdout);
		sp_json_begin_object(&j);
		sp_json_key(&j, "schema");
		sp_json_u64(&j, 1);
		sp_json_key(&j, "modules");
		sp_json_begin_object(&j);
	}
	for (int i = 0; i < sp_nr_modules; i++) {
		const struct sp_module *m = sp_modules[i];
		struct sp_fit fit = {};
		char why[256];

		if (!(mask & (1u << i)))
			continue;
		m->fit(&fit);
		all_ok &= !fit.refused;
		if (fit.refused)
			sp_fit_refusal(m->name, &fit, why, sizeof(why));
		if (!json) {
			printf("%-10s %s\n", m->name, fit.refused ? "refused" : "runs");
			if (fit.refused)
				printf("  %s\n", why + strlen(m->name) + 2);
			for (int k = 0; k < fit.nr; k++) {
				printf("  %-13s %s\n", fit.mech[k].what, fit.mech[k].how);
				if (fit.mech[k].cost)
					printf("  %-13s (%s)\n", "", fit.mech[k].cost);
			}
			continue;
		}
		sp_json_key(&j, m->name);
		sp_json_begin_object(&j);
		sp_json_key(&j, "runs");
		sp_json_bool(&j, !fit.refused);
		sp_json_key(&j, "missing");
		if (fit.refused) {
			sp_json_begin_object(&j);
			sp_json_key(&j, "feature");
			sp_json_str(&j, sp_feat_desc[fit.refused - 1].name);
			sp_json_key(&j, "since");
			sp_json_str(&j, sp_feat_desc[fit.refused - 1].since);
			sp_json_key(&j, "message");
			sp_json_str(&j, why);
			sp_json_end_object(&j);
		} else {
			sp_json_null(&j);
		}
		sp_json_key(&j, "mechanisms");
		sp_json_begin_object(&j);
		for (int k = 0; k < fit.nr; k++) {
			sp_json_key(&j, fit.mech[k].what);
			sp_json_begin_object(&j);
			sp_json_key(&j, "uses");
			sp_json_str(&j, fit.mech[k].how);
			sp_json_key(&j, "cost");
			if (fit.mech[k].cost)
				sp_json_str(&j, fit.mech[k].cost);
			else
				sp_json_null(&j);
			sp_json_end_object(&j);
		}
		sp_json_end_object(&j);
		sp_json_end_object(&j);
	}
	if (json) {
		sp_json_end_object(&j);
		sp_json_key(&j, "features");
		sp_json_begin_object(&j);
		for (int f = 0; f < SP_F_NR; f++) {
			sp_json_key(&j, sp_feat_desc[f].name);
			sp_json_bool(&j, sp_has(f));
		}
		sp_json_end_object(&j);
		sp_json_end_object(&j);
		putchar('\n');
	} else {
		printf("kernel features:");
		for (int f = 0; f < SP_F_NR; f++)
			printf(" %s%s", sp_has(f) ? "" : "-", sp_feat_desc[f].name);
		printf("\n");
	}
	return all_ok ? 0 : 1;
}
