// SPDX-License-Identifier: GPL-2.0
/* rehash: loader side. The decisions are in bpf/rehash.bpf.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"
#include "rehash.skel.h"

static const struct sp_tunable tunables[] = {
	SP_REHASH_TUNABLES(SP_TUNABLE_ROW, struct sp_rehash_cfg)
};

struct rehash_inst {
	struct rehash_bpf *skel;
	struct bpf_link *link;
};

static void stop(struct sp_run *run, void *inst)
{
	struct rehash_inst *in = inst;

	if (!in)
		return;
	if (in->skel)
		sp_module_unpublish(run, in->skel->obj, &in->link);
	rehash_bpf__destroy(in->skel);
	free(in);
}

static int start(struct sp_run *run, void **inst)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = run->btf_path);
	struct rehash_inst *in = calloc(1, sizeof(*in));
	int err;

	if (!(*inst = in))
		return sp_err("rehash: %s", strerror(ENOMEM));
	in->skel = rehash_bpf__open_opts(&opts);
	if (!in->skel)
		return sp_err("rehash: open: %s", strerror(errno));
	err = rehash_bpf__load(in->skel);
	if (err)
		return sp_err("rehash: load: %s", strerror(-err));
	return sp_module_publish(run, &sp_mod_rehash, in->skel->obj, in->skel->progs.sp_rehash,
				 &in->link);
}

static const char *const names[SP_RH_NR] = {
	[SP_RH_RETRANS] = "retrans_seen", [SP_RH_EPISODES] = "episodes",
	[SP_RH_NOW] = "rehash_now", [SP_RH_DEFERRED] = "rehash_deferred",
	[SP_RH_DEFERRED_DONE] = "rehash_deferred_done",
	[SP_RH_DEFERRED_FORCED] = "rehash_deferred_forced",
	[SP_RH_SUP_MODE] = "suppressed_mode", [SP_RH_SUP_PAUSE] = "suppressed_pause",
	[SP_RH_SUP_PROB] = "suppressed_prob", [SP_RH_LOSS_STATE] = "retrans_in_loss",
	[SP_RH_RTO] = "rto", [SP_RH_ROUNDS] = "rounds_trigger",
	[SP_RH_RTT_CBS] = "rtt_callbacks", [SP_RH_BYTES] = "bytes_delivered",
	[SP_RH_RTT_ON] = "rtt_cb_switched_on", [SP_RH_WINDOWS] = "memory_windows",
	[SP_RH_REVERT] = "memory_revert_decided", [SP_RH_REVERT_DONE] = "memory_reverted",
	[SP_RH_SUP_WINDOW] = "suppressed_pending",
};

static void conn_addrs(const struct sp_rehash_conn_key *k, char *s, char *d)
{
	int af = k->family == AF_INET ? AF_INET : AF_INET6;

	inet_ntop(af, k->saddr, s, INET6_ADDRSTRLEN);
	inet_ntop(af, k->daddr, d, INET6_ADDRSTRLEN);
}

static void print_conns_json(const struct sp_rehash_conn_key *k, const struct sp_rehash_conn *v,
			     int n, FILE *out)
{
	struct sp_json j;

	sp_json_init_member(&j, out);
	sp_json_key(&j, "connections");
	sp_json_begin_array(&j);
	for (int i = 0; i < n; i++) {
		char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];

		conn_addrs(&k[i], s, d);
		sp_json_begin_object(&j);
		sp_json_key(&j, "src"), sp_json_str(&j, s);
		sp_json_key(&j, "sport"), sp_json_u64(&j, k[i].sport);
		sp_json_key(&j, "dst"), sp_json_str(&j, d);
		sp_json_key(&j, "dport"), sp_json_u64(&j, k[i].dport);
		sp_json_key(&j, "rehashes"), sp_json_u64(&j, v[i].rehashes);
		sp_json_key(&j, "episodes"), sp_json_u64(&j, v[i].episodes);
		sp_json_key(&j, "rtos"), sp_json_u64(&j, v[i].rtos);
		sp_json_key(&j, "reverts"), sp_json_u64(&j, v[i].reverts);
		sp_json_key(&j, "txhash"), sp_json_u64(&j, v[i].txhash);
		sp_json_end_object(&j);
	}
	sp_json_end_array(&j);
}

/* Connections with at least one rehash, most rehashed first (at most 10). */
static void print_conns(const char *pin_dir, FILE *out, bool json)
{
	struct sp_rehash_conn_key k, next, top_k[10];
	struct sp_rehash_conn v, top_v[10];
	int fd = sp_open_pinned(pin_dir, "rehash_conns"), n = 0;
	void *prev = NULL;

	if (fd < 0)
		return;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &v) || !(v.rehashes | v.episodes | v.rtos | v.reverts))
			continue;
		int i = n < 10 ? n++ : 9;

		if (i == 9 && n == 10 && top_v[9].rehashes >= v.rehashes)
			continue;
		for (; i > 0 && top_v[i - 1].rehashes < v.rehashes; i--) {
			top_k[i] = top_k[i - 1];
			top_v[i] = top_v[i - 1];
		}
		top_k[i] = k;
		top_v[i] = v;
	}
	close(fd);
	if (json) {
		print_conns_json(top_k, top_v, n, out);
		return;
	}
	if (n)
		fprintf(out, "  connections (most rehashed first):\n");
	for (int i = 0; i < n; i++) {
		char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];

		conn_addrs(&top_k[i], s, d);
		fprintf(out, "    %s.%u > %s.%u rehashes %u reverts %u episodes %u rtos %u\n", s,
			top_k[i].sport, d, top_k[i].dport, top_v[i].rehashes, top_v[i].reverts,
			top_v[i].episodes, top_v[i].rtos);
	}
}

/*
 * The per-ACK price: RTT callbacks the module's sockets ran per MB they
 * delivered (bytes are counted at episodes and when a socket closes, so a
 * long flow still running shows up late).
 */
static void print_cost(const char *pin_dir, FILE *out, bool json)
{
	int fd = sp_open_pinned(pin_dir, "rehash_ctr");
	__u64 cbs = 0, bytes = 0;
	struct sp_json j;
	double per_mb;

	if (fd < 0)
		return;
	if (sp_sum_percpu(fd, SP_RH_RTT_CBS, &cbs) || sp_sum_percpu(fd, SP_RH_BYTES, &bytes))
		cbs = bytes = 0;
	close(fd);
	per_mb = bytes ? (double)cbs * 1e6 / (double)bytes : 0;
	if (!json) {
		fprintf(out, "  %-22s %.1f\n", "rtt_callbacks_per_mb", per_mb);
		return;
	}
	sp_json_init_member(&j, out);
	sp_json_key(&j, "rtt_callbacks_per_mb"), sp_json_double(&j, per_mb);
}

/* The last path-memory windows, oldest first: why flows kept or reverted. */
static void print_windows(const char *pin_dir, FILE *out, bool json)
{
	int fd = sp_open_pinned(pin_dir, "rehash_windows"), n = 0;
	struct sp_rehash_window w[SP_RH_WINLOG], t;
	struct sp_json j;

	if (fd < 0)
		return;
	for (__u32 k = 0; k < SP_RH_WINLOG; k++) {
		if (bpf_map_lookup_elem(fd, &k, &t) || !t.seq)
			continue;
		int i = n++;

		for (; i > 0 && w[i - 1].seq > t.seq; i--)
			w[i] = w[i - 1];
		w[i] = t;
	}
	close(fd);
	if (json) {
		sp_json_init_member(&j, out);
		sp_json_key(&j, "windows");
		sp_json_begin_array(&j);
		for (int i = 0; i < n; i++) {
			sp_json_begin_object(&j);
			sp_json_key(&j, "old_rate_kBps"), sp_json_u64(&j, w[i].old_rate);
			sp_json_key(&j, "new_rate_kBps"), sp_json_u64(&j, w[i].new_rate);
			sp_json_key(&j, "old_qdelay_us"), sp_json_u64(&j, w[i].old_qdelay_us);
			sp_json_key(&j, "new_qdelay_us"), sp_json_u64(&j, w[i].new_qdelay_us);
			sp_json_key(&j, "reverted"), sp_json_u64(&j, w[i].reverted);
			sp_json_end_object(&j);
		}
		sp_json_end_array(&j);
		return;
	}
	if (n)
		fprintf(out, "  path-memory windows (old -> new path, kB/s and queueing us; last %d):\n", n);
	for (int i = n > 8 ? n - 8 : 0; i < n; i++)
		fprintf(out, "    %u -> %u kB/s, %u -> %u us%s\n", w[i].old_rate, w[i].new_rate,
			w[i].old_qdelay_us, w[i].new_qdelay_us, w[i].reverted ? ", reverted" : "");
}

static void status(const char *pin_dir, FILE *out, bool json)
{
	sp_print_counters(pin_dir, "rehash_ctr", names, SP_RH_NR, out, json);
	print_cost(pin_dir, out, json);
	print_windows(pin_dir, out, json);
	print_conns(pin_dir, out, json);
}

const struct sp_module sp_mod_rehash = {
	.name = "rehash",
	.summary = "move flows off congested ECMP paths by changing sk_txhash after losses",
	.cfg_map = "rehash_cfg",
	.cfg_size = sizeof(struct sp_rehash_cfg),
	.tunables = tunables,
	.nr_tunables = sizeof(tunables) / sizeof(tunables[0]),
	.needs_cgroup = true,
	.start = start,
	.stop = stop,
	.status = status,
};
