// SPDX-License-Identifier: GPL-2.0
/*
 * `stackpilot tunables [--rst] [MODULE ...]`: each tunable's key, range,
 * default and help, straight from the loader's tables (themselves derived
 * from the X-macro lists in stackpilot.h). The Makefile splices the --rst
 * form into each module's man page, so a page cannot list a tunable, range
 * or default the loader does not have; bash completion reads the plain form
 * for keys, which needs no running instance.
 */
#include <getopt.h>
#include <string.h>
#include "sp.h"
#include "doc.h"

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

static void usage(FILE *out)
{
	fprintf(out,
"Usage: stackpilot tunables [--rst] [MODULE ...]\n"
"Every tunable of the modules (all without MODULE) as the loader knows it:\n"
"KEY<tab>MIN<tab>MAX<tab>DEFAULT<tab>HELP, one a line; --rst: as a\n"
"reStructuredText definition list, for the man pages.\n");
}

int cmd_tunables(int argc, char **argv)
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
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	/* All modules check out before anything is printed: no half table. */
	for (int i = optind; i < argc; i++) {
		if (n == SP_MAX_MODULES)
			return sp_fail(2, "tunables: at most %d modules", SP_MAX_MODULES);
		if (!(list[n++] = sp_module_find(argv[i], NULL)))
			return sp_fail(2, "unknown module '%s' (see: stackpilot --help)", argv[i]);
	}
	if (!n)
		for (; n < sp_nr_modules; n++)
			list[n] = sp_modules[n];
	for (int i = 0; i < n; i++)
		(rst ? module_rst : module_plain)(list[i]);
	return 0;
}
