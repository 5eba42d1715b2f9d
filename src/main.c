// SPDX-License-Identifier: GPL-2.0
/* stackpilot: command dispatch. Each command lives in its own file. */
#include <string.h>
#include "sp.h"

static void usage(FILE *out)
{
	fprintf(out,
"Usage: stackpilot COMMAND [OPTIONS]   (COMMAND --help for its options)\n"
"\n"
"  run       attach modules to a cgroup / interfaces; Ctrl-C detaches all\n"
"  status    what is attached, counters, per-program run time [--json]\n"
"  get KEY   print tunables of the running instance\n"
"  set K=V   change tunables of the running instance\n"
"\n"
"Modules:\n");
	for (int i = 0; i < sp_nr_modules; i++)
		fprintf(out, "  %-10s %s\n", sp_modules[i]->name, sp_modules[i]->summary);
	fprintf(out,
"\nTunables live in pinned maps (default %s/MODULE_cfg) and can also be\n"
"written with bpftool; the programs clamp or ignore out-of-range values.\n",
		SP_PIN_DEFAULT);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "run", cmd_run }, { "status", cmd_status },
		{ "get", cmd_get }, { "set", cmd_set },
	};

	/* Before anything else: see sp_run_block_signals(). */
	if (argc >= 2 && !strcmp(argv[1], "run"))
		sp_run_block_signals();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	sp_err("unknown command '%s' (see: stackpilot --help)", argv[1]);
	return 2;
}
