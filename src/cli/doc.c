// SPDX-License-Identifier: GPL-2.0
/*
 * `stackpilot tunables [--rst] [MODULE ...]`: each tunable's key, range,
 * default and help, straight from the loader's tables (themselves derived
 * from the X-macro lists in stackpilot.h); `stackpilot counters`: each
 * counter's key, Prometheus name and help, from the module's declaration.
 * The Makefile splices the --rst forms into each module's man page, so a
 * page cannot list a tunable, range, default or counter the loader does not
 * have; bash completion reads the plain form for keys, which needs no
 * running instance.
 */
#include <getopt.h>
#include <string.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "export/export.h"
#include "cli/cli.h"

/* Help text is prose: backslash-escape what reStructuredText reads as markup. */
static void rst_text(const char *s)
{
	for (; *s; s++) {
		if (strchr("\\*`|_[]<>:", *s))
			putchar('\\');
		putchar(*s);
	}
}

static void module_rst(const struct sp_module *m)
{
	for (int i = 0; i < m->nr_tunables; i++) {
		const struct sp_tunable *t = &m->tunables[i];

		/* A definition list: rst2man makes each entry a .TP paragraph. */
		printf("``%s.%s`` (%u..%u, default %u)\n    ", m->name, t->name,
		       t->min, t->max, t->def);
		rst_text(t->help);
		printf("\n\n");
	}
}

static void module_plain(const struct sp_module *m)
{
	for (int i = 0; i < m->nr_tunables; i++) {
		const struct sp_tunable *t = &m->tunables[i];

		printf("%s.%s\t%u\t%u\t%u\t%s\n", m->name, t->name, t->min, t->max,
		       t->def, t->help);
	}
}

static void counters_rst(const struct sp_module *m)
{
	char metric[192];

	for (int i = 0; i < m->nr_counters; i++) {
		const struct sp_counter *c = &m->counters[i];

		sp_prom_counter_name(metric, sizeof(metric), m->name, c);
		printf("``%s``\n    ", c->name);
		rst_text(c->help);
		printf("; Prometheus ``%s``\n\n", metric);
	}
}

static void counters_plain(const struct sp_module *m)
{
	char metric[192];

	for (int i = 0; i < m->nr_counters; i++) {
		sp_prom_counter_name(metric, sizeof(metric), m->name, &m->counters[i]);
		printf("%s.%s\t%s\t%s\n", m->name, m->counters[i].name, metric,
		       m->counters[i].help);
	}
}

/* What each command lists, in its two forms. */
static const struct doc_cmd {
	const char *name, *usage;
	void (*plain)(const struct sp_module *m), (*rst)(const struct sp_module *m);
} cmds[] = {
	{ "tunables",
"Usage: stackpilot tunables [--rst] [MODULE ...]\n"
"Every tunable of the modules (all without MODULE) as the loader knows it:\n"
"KEY<tab>MIN<tab>MAX<tab>DEFAULT<tab>HELP, one a line; --rst: as a\n"
"reStructuredText definition list, for the man pages.\n", module_plain, module_rst },
	{ "counters",
"Usage: stackpilot counters [--rst] [MODULE ...]\n"
"Every counter of the modules (all without MODULE), as `status` shows it:\n"
"MODULE.KEY<tab>PROMETHEUS NAME<tab>HELP, one a line; --rst: as a\n"
"reStructuredText definition list, for the man pages.\n", counters_plain, counters_rst },
};

static int doc(const struct doc_cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rst", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const struct sp_module *list[SP_MAX_MODULES];
	bool rst = false;
	int opt, n = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': rst = true; break;
		case 'h': fputs(c->usage, stdout); return 0;
		default: fputs(c->usage, stderr); return 2;
		}
	}
	/* All modules check out before anything is printed: no half table. */
	for (int i = optind; i < argc; i++) {
		if (n == SP_MAX_MODULES)
			return sp_fail(2, "%s: at most %d modules", c->name, SP_MAX_MODULES);
		if (!(list[n++] = sp_module_find(argv[i], NULL)))
			return sp_fail(2, "unknown module '%s' (see: stackpilot --help)", argv[i]);
	}
	if (!n)
		for (; n < sp_nr_modules; n++)
			list[n] = sp_modules[n];
	for (int i = 0; i < n; i++)
		(rst ? c->rst : c->plain)(list[i]);
	return 0;
}

int cmd_tunables(int argc, char **argv) { return doc(&cmds[0], argc, argv); }
int cmd_counters(int argc, char **argv) { return doc(&cmds[1], argc, argv); }
