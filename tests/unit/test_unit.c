// SPDX-License-Identifier: GPL-2.0
/* Unit tests of the loader's parsing and validation (no BPF, no root). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "service/config.h"
#include "export/export.h"
#include "check.h"

static void test_parse_u32(void)
{
	__u32 v = 7;

	CHECK("u32_decimal", EQ(sp_parse_u32("42", 0, 100, &v), 0) && EQ(v, 42));
	CHECK("u32_hex", EQ(sp_parse_u32("0x10", 0, 100, &v), 0) && EQ(v, 16));
	CHECK("u32_bounds_inclusive", EQ(sp_parse_u32("100", 0, 100, &v), 0) && EQ(v, 100) &&
	      EQ(sp_parse_u32("5", 5, 100, &v), 0) && EQ(v, 5));
	CHECK_EQ("u32_above_max", sp_parse_u32("101", 0, 100, &v), -ERANGE);
	CHECK_EQ("u32_below_min", sp_parse_u32("4", 5, 100, &v), -ERANGE);
	CHECK_EQ("u32_negative", sp_parse_u32("-1", 0, 100, &v), -EINVAL);
	CHECK("u32_garbage", EQ(sp_parse_u32("12x", 0, 100, &v), -EINVAL) &&
	      EQ(sp_parse_u32("", 0, 100, &v), -EINVAL) &&
	      EQ(sp_parse_u32(" 1", 0, 100, &v), -EINVAL));
	CHECK("u32_overflow", EQ(sp_parse_u32("4294967296", 0, 0xffffffff, &v), -ERANGE) &&
	      EQ(sp_parse_u32("99999999999999999999999", 0, 0xffffffff, &v), -EINVAL));
	CHECK("u32_leading_zero", EQ(sp_parse_u32("010", 0, 100, &v), -EDOM) &&
	      EQ(sp_parse_u32("00", 0, 100, &v), -EDOM) && EQ(sp_parse_u32("0", 0, 100, &v), 0) &&
	      EQ(v, 0));
	CHECK("u32_hex_needs_digits", EQ(sp_parse_u32("0x", 0, 100, &v), -EINVAL) &&
	      EQ(sp_parse_u32("0x-1", 0, 100, &v), -EINVAL) &&
	      EQ(sp_parse_u32("0xg", 0, 100, &v), -EINVAL));
	v = 7;
	sp_parse_u32("1000", 0, 100, &v);
	CHECK_EQ("u32_untouched_on_error", v, 7);
}

static void test_modules(void)
{
	__u32 mask = 0;
	int idx = -1;

	CHECK("modules_all", EQ(sp_parse_modules("all", &mask), 0) &&
	      EQ(mask, (1u << sp_nr_modules) - 1));
	CHECK("modules_one", EQ(sp_parse_modules("tcpstats", &mask), 0) &&
	      sp_module_find("tcpstats", &idx) && EQ(mask, 1u << idx));
	CHECK_EQ("modules_unknown", sp_parse_modules("tcpstats,nope", &mask), -1);
	CHECK_EQ("modules_empty", sp_parse_modules(",", &mask), -1);
	CHECK("modules_table_sane", GT(sp_nr_modules, 0) && LE(sp_nr_modules, 16));
	/* Per module: "tunable_table_defaults_in_range/rehash"; a failure names the tunable. */
	for (int i = 0; i < sp_nr_modules; i++) {
		const struct sp_module *m = sp_modules[i];
		/* Its own start() and stop(), or a skeleton the core starts (.open); */
		/* status: report(), or the declared counters alone (6f279f7). */
		bool ok = LE(m->cfg_size, 256) &&
			  (((m->open || (m->start && m->stop)) &&
			    (m->report || (m->counter_map && m->counters && m->nr_counters > 0))) ||
			   check_note("open or start and stop, or both report() and counters, missing"));

		for (int j = 0; j < m->nr_tunables; j++) {
			const struct sp_tunable *t = &m->tunables[j];

			ok &= (LE(t->off + sizeof(__u32), m->cfg_size) && LE(t->min, t->def) &&
			       LE(t->def, t->max)) || check_note("in %s.%s", m->name, t->name);
		}
		CHECK(check_name("tunable_table_defaults_in_range/%s", m->name), ok);
		/* Every __u32 of the config struct is a tunable, each exactly once. */
		__u32 offs = 0;

		for (int j = 0; j < m->nr_tunables; j++)
			offs |= (m->tunables[j].off % 4 == 0 && m->tunables[j].off / 4 < 32) ?
				1u << (m->tunables[j].off / 4) : 0;
		CHECK(check_name("tunable_table_covers_cfg_struct/%s", m->name),
		      EQ(m->cfg_size, 4u * m->nr_tunables) && LT(m->nr_tunables, 32) &&
		      EQ(offs, (1u << m->nr_tunables) - 1));
	}
}

static void test_tunables(void)
{
	const struct sp_module *m = NULL;
	struct sp_assign a = {};

	CHECK("tunable_find", sp_tunable_find("tcpstats.port", &m) && m &&
	      STREQ(m->name, "tcpstats"));
	CHECK("tunable_no_dot", !sp_tunable_find("port", &m));
	CHECK("tunable_unknown_module", !sp_tunable_find("nope.port", &m));
	CHECK("tunable_unknown_name", !sp_tunable_find("tcpstats.nope", &m));
	CHECK("assign_ok", EQ(sp_parse_assignment("tcpstats.port=5201", &a), 0) &&
	      EQ(a.v, 5201) && STREQ(a.t->name, "port"));
	CHECK_EQ("assign_out_of_range", sp_parse_assignment("tcpstats.port=65536", &a), -1);
	CHECK_EQ("assign_no_value", sp_parse_assignment("tcpstats.port=", &a), -1);
	CHECK_EQ("assign_no_equals", sp_parse_assignment("tcpstats.port", &a), -1);
	CHECK_EQ("assign_no_key", sp_parse_assignment("=5", &a), -1);
	/* The one parse, whose reasons the command line and a state file each word. */
	CHECK_EQ("assign_reason_syntax", sp_assign_parse("x", &a), SP_ASSIGN_SYNTAX);
	CHECK_EQ("assign_reason_no_dot", sp_assign_parse("port=1", &a), SP_ASSIGN_NO_DOT);
	CHECK_EQ("assign_reason_module", sp_assign_parse("nope.port=1", &a), SP_ASSIGN_MODULE);
	CHECK_EQ("assign_reason_tunable", sp_assign_parse("tcpstats.nope=1", &a), SP_ASSIGN_TUNABLE);
	CHECK_EQ("assign_reason_range", sp_assign_parse("tcpstats.port=65536", &a), SP_ASSIGN_RANGE);
	CHECK_EQ("assign_reason_zeros", sp_assign_parse("tcpstats.port=010", &a), SP_ASSIGN_ZEROS);
	CHECK_EQ("assign_reason_nan", sp_assign_parse("tcpstats.port=x", &a), SP_ASSIGN_NAN);
	unsigned char cfg[SP_CFG_MAX] = {};

	CHECK("cfg_apply_get", EQ(sp_assign_parse("tcpstats.port=443", &a), 0) &&
	      (sp_cfg_apply(cfg, a.t, a.v), EQ(sp_cfg_get(cfg, a.t), 443)));
}

static void test_paths(void)
{
	char buf[64], big[300];

	CHECK("pin_path_ok", EQ(sp_pin_path(buf, sizeof(buf), "/sys/fs/bpf/x", "meta"), 0) &&
	      STREQ(buf, "/sys/fs/bpf/x/meta"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ("pin_path_too_long", sp_pin_path(buf, sizeof(buf), "/sys/fs/bpf", big), -1);
	CHECK_EQ("cgroup_missing", sp_resolve_cgroup("/nonexistent/sp-unit", buf, sizeof(buf)), -1);
	CHECK_EQ("cgroup_not_cgroup2", sp_resolve_cgroup("/tmp", buf, sizeof(buf)), -1);
	CHECK_EQ("bpffs_not_bpf", sp_ensure_bpffs("/tmp/sp-unit-pins"), -1);
	CHECK_EQ("bpffs_relative", sp_ensure_bpffs("pins"), -1);
}

/* What the writer produced, as a string (freed by the caller). */
static char *json_of(void (*fn)(FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f);
	fclose(f);
	return buf;
}

static void json_doc(FILE *f)
{
	struct sp_json j;

	sp_json_init(&j, f);
	sp_json_begin_object(&j);
	sp_json_key(&j, "a"), sp_json_u64(&j, 1);
	sp_json_key(&j, "empty"), sp_json_begin_array(&j), sp_json_end_array(&j);
	sp_json_key(&j, "o"), sp_json_begin_object(&j);
	sp_json_key(&j, "s"), sp_json_str(&j, "q\"\\\n");
	sp_json_end_object(&j);
	sp_json_key(&j, "l"), sp_json_begin_array(&j);
	sp_json_s64(&j, -1), sp_json_bool(&j, true), sp_json_null(&j), sp_json_double(&j, 1.5);
	sp_json_end_array(&j);
	sp_json_key(&j, "cut"), sp_json_strn(&j, "ABC", 2);
	sp_json_end_object(&j);
}

static void test_json(void)
{
	char *s = json_of(json_doc);

	CHECK_STR("json_commas_escapes_bounds", s, "{\"a\":1,\"empty\":[],"
	      "\"o\":{\"s\":\"q\\\"\\\\\\u000a\"},\"l\":[-1,true,null,1.5],\"cut\":\"AB\"}");
	free(s);
}

/* The status model: records and tables, rendered; a module never writes past the end. */
static const struct sp_field unit_cols[] = {
	{ "dst", SP_STRING, false, "", "" },
	{ "up", SP_BOOL, false, "", "" },
	{ "age_s", SP_GAUGE, true, "seconds", "" },
};

static struct sp_report *unit_report(void)
{
	struct sp_report *r = calloc(1, sizeof(*r));
	struct sp_table *t;
	struct sp_val *row;

	sp_rec_counter(r, NULL, "fragments", 7, "", "help");
	sp_rec_gauge(r, "ipv4", "mem", -1, "bytes", "");
	sp_rec_gauge(r, "ipv4", "time_s", 30, "seconds", "");
	sp_rec_gauge(r, "ipv6", "mem", 2, "bytes", "");
	sp_rec_gauge(r, NULL, "active_peers", 3, "", "");
	t = sp_table_add(r, "top", "", unit_cols, 3);
	row = sp_table_row(t);
	snprintf(row[0].s, sizeof(row[0].s), "10.0.0.1");
	row[1].b = true;
	row[2].d = 1.25;
	sp_table_add(r, "empty", "", unit_cols, 3);
	return r;
}

static void report_doc(FILE *f)
{
	struct sp_report *r = unit_report();
	struct sp_json j;

	sp_json_init(&j, f);
	sp_json_begin_object(&j);
	sp_report_json(r, &j);
	sp_json_end_object(&j);
	free(r);
}

static void report_txt(FILE *f)
{
	struct sp_report *r = unit_report();

	sp_report_text(r, f, "  ");
	free(r);
}

static void test_report(void)
{
	struct sp_report *r = calloc(1, sizeof(*r));
	struct sp_table *t;
	char *s = json_of(report_doc);
	int rows = 0;

	CHECK("report_json", STREQ(s, "{\"fragments\":7,\"ipv4\":{\"mem\":-1,\"time_s\":30},"
	      "\"ipv6\":{\"mem\":2},\"active_peers\":3,"
	      "\"top\":[{\"dst\":\"10.0.0.1\",\"up\":true,\"age_s\":1.2}],\"empty\":[]}") ||
	      STREQ(s, "{\"fragments\":7,\"ipv4\":{\"mem\":-1,\"time_s\":30},"
	      "\"ipv6\":{\"mem\":2},\"active_peers\":3,"
	      "\"top\":[{\"dst\":\"10.0.0.1\",\"up\":true,\"age_s\":1.3}],\"empty\":[]}"));
	free(s);
	s = json_of(report_txt);
	CHECK("report_text", HAS(s, "  ipv4.mem") && HAS(s, "-1 B\n") && HAS(s, "30 s\n") &&
	      HAS(s, "top (1):\n    dst      up  age_s\n    10.0.0.1 yes 1.") && HAS(s, "empty (0):\n"));
	free(s);
	for (int i = 0; i < SP_REPORT_RECS + 5; i++)
		sp_rec_counter(r, NULL, "x", i, "", "");
	CHECK("report_records_bounded", EQ(r->nr_recs, SP_REPORT_RECS) &&
	      EQ(r->recs[SP_REPORT_RECS - 1].v.u, SP_REPORT_RECS - 1));
	for (int i = 0; i < SP_REPORT_TABLES; i++)
		sp_table_add(r, "t", "", unit_cols, 3);
	CHECK("report_tables_bounded", !sp_table_add(r, "t", "", unit_cols, 3) &&
	      !sp_table_row(NULL));
	t = &r->tables[0];
	while (sp_table_row(t))
		rows++;
	CHECK("report_rows_bounded", EQ(rows, SP_TABLE_ROWS) && EQ(t->nr_rows, SP_TABLE_ROWS));
	free(r);
}

/*
 * The plain summary: a module's words from records as status reads them
 * (its counters by name, its cfg), each number the counters it sums.
 */
static const struct sp_module *mod(const char *name)
{
	int idx;

	return sp_module_find(name, &idx);
}

/* r: module m's counters, the i-th worth vals[i] (0 past n), and cfg.enforce. */
static void summary_recs(struct sp_report *r, const struct sp_module *m, int enforce,
			 const unsigned long long *vals, int n)
{
	sp_report_reset(r);
	if (enforce >= 0)
		sp_rec_gauge(r, "cfg", "enforce", enforce, "", "");
	for (int i = 0; i < m->nr_counters; i++)
		sp_rec_counter(r, NULL, m->counters[i].name, i < n ? vals[i] : 0, "", "");
}

static char *summary_of(const struct sp_module *m, const struct sp_report *r,
			const struct sp_summary *prev, bool warn, struct sp_summary *s)
{
	static char text[1024];

	s->n = 0;
	m->say(r, s);
	sp_summary_words(s, prev, 1, warn, text, sizeof(text));
	return text;
}

/* Under enforce=0 (a dry run), the words say what it would have done. */
static void summary_dry(struct sp_report *r, const struct sp_module *m,
			const unsigned long long *vals, int n, const char *want)
{
	struct sp_summary s;

	summary_recs(r, m, 0, vals, n);
	CHECK(check_name("summary_dry/%s", m->name), HAS(summary_of(m, r, NULL, false, &s), want));
}

static const struct sp_field pm_cols[] = {
	{ "dst", SP_STRING, false, "", "" },
	{ "low_mtu", SP_GAUGE, false, "bytes", "" },
	{ "state", SP_STRING, false, "", "" },
};

static void test_summary(void)
{
	struct sp_report *r = calloc(1, sizeof(*r));
	struct sp_summary s, prev;
	unsigned long long v[SP_RH_NR + SP_TS_NR + SP_PM_NR + SP_FG_NR] = {};
	char text[1024];
	const struct sp_module *m;
	struct sp_table *t;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int lines;

	for (int i = 0; i < sp_nr_modules; i++)
		CHECK(check_name("summary_declared/%s", sp_modules[i]->name), sp_modules[i]->say);

	m = mod("tcpstats");
	v[SP_TS_ACTIVE] = 3, v[SP_TS_PASSIVE] = 4, v[SP_TS_RETRANS] = 5, v[SP_TS_RTO] = 6;
	summary_recs(r, m, -1, v, SP_TS_NR);
	CHECK_STR("summary_tcpstats", summary_of(m, r, NULL, false, &s),
		  "7 connections, 5 segments retransmitted, 6 RTOs");
	prev = s;
	v[SP_TS_ACTIVE] = 10;
	summary_recs(r, m, -1, v, SP_TS_NR);
	CHECK_STR("summary_interval_counters_added", summary_of(m, r, &prev, false, &s),
		  "7 connections");
	/* Over 2 s: per second, a fraction where it is one. */
	sp_summary_words(&s, &prev, 2, false, text, sizeof(text));
	CHECK_STR("summary_interval_per_second", text, "3.5 connections");
	prev.p[0].v = 12;
	sp_summary_words(&s, &prev, 4, false, text, sizeof(text));
	CHECK_STR("summary_interval_rate_fraction", text, "0.5 connections");
	prev.p[0].v = 10;
	sp_summary_words(&s, &prev, 4, false, text, sizeof(text));
	CHECK_STR("summary_interval_rate_one", text, "1 connection");
	/* One of each: singular; the share retransmitted once connections closed. */
	memset(v, 0, sizeof(v));
	v[SP_TS_ACTIVE] = 1, v[SP_TS_RETRANS] = 1, v[SP_TS_RTO] = 1;
	v[SP_TS_CLOSED_SEGS] = 1000, v[SP_TS_CLOSED_RETRANS] = 3;
	summary_recs(r, m, -1, v, SP_TS_NR);
	CHECK_STR("summary_tcpstats_singular", summary_of(m, r, NULL, false, &s),
		  "1 connection, 0.3% of segments retransmitted (closed connections), "
		  "1 segment retransmitted, 1 RTO");

	m = mod("rehash");
	memset(v, 0, sizeof(v));
	v[SP_RH_NOW] = 1, v[SP_RH_DEFERRED_DONE] = 2, v[SP_RH_DEFERRED_FORCED] = 4;
	v[SP_RH_REVERT_DONE] = 8, v[SP_RH_EPISODES] = 16, v[SP_RH_RTO] = 32, v[SP_RH_DRY] = 64;
	summary_recs(r, m, 1, v, SP_RH_NR);
	CHECK_STR("summary_rehash", summary_of(m, r, NULL, false, &s),
		  "moved flows 7 times, 8 moved back, 16 loss episodes, 32 RTOs");
	summary_dry(r, m, v, SP_RH_NR, "would have moved flows 64 times");
	for (int i = 0; i < SP_RH_NR; i++)
		v[i] = 1;
	summary_recs(r, m, 1, v, SP_RH_NR);
	CHECK_STR("summary_rehash_singular", summary_of(m, r, NULL, false, &s),
		  "moved flows 3 times, 1 moved back, 1 loss episode, 1 RTO");
	v[SP_RH_NOW] = 0, v[SP_RH_DEFERRED_FORCED] = 0;
	summary_recs(r, m, 1, v, SP_RH_NR);
	CHECK("summary_rehash_one_time", HAS(summary_of(m, r, NULL, false, &s), "moved flows 1 time,"));
	summary_dry(r, m, v, SP_RH_NR, "would have moved flows 1 time,");

	m = mod("pmtu");
	memset(v, 0, sizeof(v));
	v[SP_PM_CLAMPED] = 5, v[SP_PM_WOULD_CLAMP] = 6, v[SP_PM_SUSPECTS] = 7, v[SP_PM_EVENTS_LOST] = 2;
	summary_recs(r, m, 1, v, SP_PM_NR);
	t = sp_table_add(r, "destinations", "", pm_cols, 3);
	for (int i = 0; i < 5; i++) {
		struct sp_val *row = sp_table_row(t);

		snprintf(row[0].s, sizeof(row[0].s), "10.0.0.%d", i);
		row[1].i = i == 4 ? 0 : 1400 - i;
		snprintf(row[2].s, sizeof(row[2].s), i == 4 ? "asked" : "searched");
	}
	CHECK_STR("summary_pmtu", summary_of(m, r, NULL, false, &s),
		  "learned 4 paths (10.0.0.0 1400, 10.0.0.1 1399, 10.0.0.2 1398, ...), 1 searching, "
		  "clamped 5 connections, 7 black-hole suspects");
	CHECK_STR("summary_pmtu_warning", summary_of(m, r, NULL, true, &s),
		  "2 searches lost: ring buffer full");
	summary_dry(r, m, v, SP_PM_NR, "would have clamped 6 connections");
	v[SP_PM_CLAMPED] = 1, v[SP_PM_SUSPECTS] = 1, v[SP_PM_EVENTS_LOST] = 1;
	summary_recs(r, m, 1, v, SP_PM_NR);
	t = sp_table_add(r, "destinations", "", pm_cols, 3);
	snprintf(sp_table_row(t)[0].s, sizeof(t->rows[0][0].s), "10.0.0.9");
	t->rows[0][1].i = 1400;
	snprintf(t->rows[0][2].s, sizeof(t->rows[0][2].s), "searched");
	CHECK_STR("summary_pmtu_singular", summary_of(m, r, NULL, false, &s),
		  "learned 1 path (10.0.0.9 1400), 0 searching, clamped 1 connection, "
		  "1 black-hole suspect");
	CHECK_STR("summary_pmtu_warning_singular", summary_of(m, r, NULL, true, &s),
		  "1 search lost: ring buffer full");

	m = mod("fragguard");
	memset(v, 0, sizeof(v));
	v[SP_FG_REF_PEER] = 1, v[SP_FG_REF_SHARE] = 2, v[SP_FG_REF_UNKNOWN] = 4, v[SP_FG_REF_AGE] = 8;
	v[SP_FG_REF_FOLLOW] = 16, v[SP_FG_COMPLETED] = 9;
	summary_recs(r, m, 1, v, SP_FG_NR);
	CHECK("summary_fragguard", HAS(summary_of(m, r, NULL, false, &s),
				       "refused 31 fragments, from 0 peers of the top 10") &&
	      HAS(summary_of(m, r, NULL, false, &s), "9 datagrams reassembled"));
	summary_dry(r, m, v, SP_FG_NR, "would have refused 31 fragments");
	memset(v, 0, sizeof(v));
	v[SP_FG_REF_AGE] = 1, v[SP_FG_COMPLETED] = 1, v[SP_FG_UNTRACKED] = 1;
	summary_recs(r, m, 1, v, SP_FG_NR);
	CHECK("summary_fragguard_singular", HAS(summary_of(m, r, NULL, false, &s),
						"refused 1 fragment, from 0 peers of the top 10") &&
	      HAS(summary_of(m, r, NULL, false, &s), "1 datagram reassembled"));
	CHECK_STR("summary_fragguard_warning_singular", summary_of(m, r, NULL, true, &s),
		  "1 datagram passed untracked: datagram map full");

	/* The one helper every module's words go through. */
	sp_say_words("%s {path|paths} (%s)", "1", text, sizeof(text));
	CHECK_STR("say_words_one", text, "1 path (1)");
	sp_say_words("learned %s {path|paths}", "0", text, sizeof(text));
	CHECK_STR("say_words_zero", text, "learned 0 paths");
	sp_say_words("%s {peer|peers} over {its|their} limit", "1.5", text, sizeof(text));
	CHECK_STR("say_words_fraction", text, "1.5 peers over their limit");
	sp_say_words("%s {a|b", "1", text, sizeof(text));
	CHECK_STR("say_words_unclosed", text, "1 {a|b");
	CHECK("say_words_bounded", EQ(sp_say_words("%s {path|paths}", "12345", text, 8), 11) &&
	      !strcmp(text, "12345 p"));

	/* Laid out: lines of 80 columns at most, the head in the first. */
	f = open_memstream(&buf, &len);
	lines = sp_summary_wrap(f, "pmtu", "aaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, "
				"cccccccccccccccccccccccccccccccc, dddd", 80, 5);
	fclose(f);
	CHECK("summary_wrap", EQ(lines, 2) && HAS(buf, "pmtu       aaaa, bbb") &&
	      HAS(buf, ",\n           cccc") && !HAS(buf, "bbb, ccc"));
	free(buf);
	free(r);
}

/* stop() of an instance that start() never made is a no-op, for every module. */
static void test_instances(void)
{
	struct sp_run run = { .cgroup_fd = -1 };
	bool ok = true;

	for (int i = 0; i < sp_nr_modules; i++) {
		sp_module_stop(&run, sp_modules[i], NULL);
		ok &= EQ(sp_run_inst(&run, sp_modules[i]), NULL) ||
		      check_note("after %s's stop", sp_modules[i]->name);
	}
	run.inst[0] = &run;
	CHECK("instance_stop_null", ok && EQ(sp_run_inst(&run, sp_modules[0]), &run));
}

/* Split "a / b" into at most n trimmed parts; returns how many. */
static int split_slash(char *cell, char **part, int n)
{
	int k = 0;

	for (char *save = NULL, *t = strtok_r(cell, "/", &save); t && k < n;
	     t = strtok_r(NULL, "/", &save)) {
		while (*t == ' ' || *t == '`')
			t++;
		for (char *e = t + strlen(t); e > t && (e[-1] == ' ' || e[-1] == '`'); )
			*--e = '\0';
		part[k++] = t;
	}
	return k;
}

/*
 * docs/configuration.md's Tunables table against the loader's tables (which for tcpstats,
 * rehash and pmtu are their declarations in stackpilot.h): every row's keys,
 * ranges and defaults, and every declared tunable in exactly one row.
 */
static void test_readme_tunables(const char *readme)
{
	char line[1024], msg[512] = "", *cells[4], *keys[4], *ranges[4], *defs[4];
	int seen[SP_MAX_MODULES][64] = {}, rows = 0, in_section = 0;
	FILE *f = fopen(readme, "r");

	if (!f) {
		CHECK("readme_tunables_found", check_note("%s: %m", readme));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "## ", 3))
			in_section = !strncmp(line, "## Tunables", 11);
		if (!in_section || strncmp(line, "| `", 3))
			continue;
		int nc = 0;
		for (char *save = NULL, *t = strtok_r(line + 1, "|", &save); t && nc < 4;
		     t = strtok_r(NULL, "|", &save))
			cells[nc++] = t;
		int nk = nc == 4 ? split_slash(cells[0], keys, 4) : 0;
		if (nk == 0 || split_slash(cells[1], ranges, 4) != nk || split_slash(cells[2], defs, 4) != nk) {
			snprintf(msg, sizeof(msg), "row %d: keys, ranges and defaults do not pair up", rows);
			break;
		}
		for (int i = 0; i < nk && !*msg; i++) {
			const struct sp_module *m;
			const struct sp_tunable *t = sp_tunable_find(keys[i], &m);
			unsigned long min, max, def;
			int idx;

			if (!t) {
				snprintf(msg, sizeof(msg), "%s: not declared", keys[i]);
				break;
			}
			sp_module_find(m->name, &idx);
			seen[idx][t - m->tunables]++;
			if (sscanf(ranges[i], "%lu..%lu", &min, &max) != 2 || sscanf(defs[i], "%lu", &def) != 1 ||
			    min != t->min || max != t->max || def != t->def)
				snprintf(msg, sizeof(msg), "%s: docs %s default %s, declared %u..%u default %u",
					 keys[i], ranges[i], defs[i], t->min, t->max, t->def);
		}
		if (*msg)
			break;
		rows++;
	}
	fclose(f);
	for (int i = 0; i < sp_nr_modules && !*msg; i++)
		for (int j = 0; j < sp_modules[i]->nr_tunables && !*msg; j++)
			if (seen[i][j] != 1)
				snprintf(msg, sizeof(msg), "%s.%s: in %d docs rows, expected 1",
					 sp_modules[i]->name, sp_modules[i]->tunables[j].name, seen[i][j]);
	if (*msg)
		CHECK("readme_tunables", check_note("%s", msg));
	else
		CHECK_GT("readme_tunables", rows, 0);
}

static void test_cgroup_input(void)
{
	char buf[256];

	CHECK_EQ("cgroup_required", sp_resolve_cgroup(NULL, buf, sizeof(buf)), -1);
	CHECK_EQ("cgroup_empty", sp_resolve_cgroup("", buf, sizeof(buf)), -1);
	CHECK_EQ("cgroup_dot_is_not_root", sp_resolve_cgroup(".", buf, sizeof(buf)), -1);
	CHECK("cgroup_root_by_slash", EQ(sp_resolve_cgroup("/", buf, sizeof(buf)), 0) &&
	      EQ(buf[0], '/'));
}

/* Config files: pin folder names, values and where an error is. */
static void test_config(void)
{
	static struct sp_config c;
	char name[256], path[] = "/tmp/sp-unit-config.XXXXXX", err[256] = "";
	const struct sp_module *m;
	const struct sp_tunable *t;
	int fd;
	FILE *f;

	CHECK("cgname_systemd", EQ(sp_cgroup_pin_name("system.slice/nginx.service", name, sizeof(name)), 0) &&
	      STREQ(name, "system+slice:nginx+service"));
	CHECK("cgname_root", EQ(sp_cgroup_pin_name("/", name, sizeof(name)), 0) && STREQ(name, ":"));
	/* What stands for '/' and '.' is escaped where it is itself: no two paths share a name. */
	CHECK("cgname_escapes", EQ(sp_cgroup_pin_name("a:b+c%d e", name, sizeof(name)), 0) &&
	      STREQ(name, "a%3ab%2bc%25d%20e"));
	CHECK("cgname_no_dot", EQ(sp_cgroup_pin_name("x.y/z", name, sizeof(name)), 0) &&
	      (!strchr(name, '.') || check_note("name = \"%s\", with a dot", name)));
	CHECK("cgarg_forms", EQ(sp_cgroup_arg_name("/a.b/c", name, sizeof(name)), 0) &&
	      STREQ(name, "a+b:c") &&
	      EQ(sp_cgroup_arg_name("a.b/c", name, sizeof(name)), 0) && STREQ(name, "a+b:c"));
	CHECK_EQ("cgarg_dotdot", sp_cgroup_arg_name("a/../b", name, sizeof(name)), -1);
	fd = mkstemp(path);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		CHECK("config_tmpfile", check_note("%s: %m", path));
		return;
	}
	fputs("log-level = debug  # comment\n[cgroup a/b.service]\nmodules = rehash , tcpstats\n"
	      "rehash.prob = 0x21\n\n; another comment\n[cgroup c]\n", f);
	fclose(f);
	CHECK("config_load", EQ(sp_config_load(path, &c), 0) && EQ(c.nr_cgroups, 2) &&
	      EQ(c.log_level, SP_LOG_DEBUG));
	t = sp_tunable_find("rehash.prob", &m);
	CHECK("config_value", t && EQ(sp_cfg_value(&c.cg[0], m, t), 33) &&
	      EQ(sp_cfg_value(&c.cg[1], m, t), t->def));
	CHECK("config_default_modules", NE(c.cg[1].modules, 0) && STREQ(c.cg[0].name, "a:b+service"));
	f = fopen(path, "w");
	fputs("[cgroup a]\nmodules = tcpstats\n\nrehash.prob = 1\n", f);
	fclose(f);
	sp_err_capture = err;
	sp_err_capture_len = sizeof(err);
	CHECK("config_error_line", EQ(sp_config_load(path, &c), -1) &&
	      ((!strncmp(err, path, strlen(path)) && !strncmp(err + strlen(path), ":4: rehash.prob", 15)) ||
	       check_note("error \"%s\", want \"%s:4: rehash.prob...\"", err, path)));
	sp_err_capture = NULL;
	unlink(path);
}

/* Lines as files hold them: a NUL byte is named as such and never eats the next line. */
/* [cgroup PATTERN]: fnmatch per level, '**' across levels. */
static void test_cgroup_match(void)
{
	static const struct {
		const char *pat, *path;
		bool want;
	} cases[] = {
		/* A literal path matches itself only: not a parent, child or prefix. */
		{ "system.slice/nginx.service", "system.slice/nginx.service", true },
		{ "system.slice/nginx.service", "system.slice", false },
		{ "system.slice/nginx.service", "system.slice/nginx.service/x", false },
		{ "system.slice/nginx", "system.slice/nginx.service", false },
		/* '*' stays within one level. */
		{ "machine.slice/libpod-*.scope", "machine.slice/libpod-ab12.scope", true },
		{ "machine.slice/libpod-*.scope", "machine.slice/libpod-ab12.scope/container", false },
		{ "libpod_parent/libpod-*", "libpod_parent/libpod-1/x", false },
		{ "a/*", "a/b/c", false },
		{ "a*c", "ab/c", false },
		{ "*/c", "a/b/c", false },
		{ "a/?/c", "a/b/c", true },
		{ "a/[bx]/c", "a/x/c", true },
		{ "a/[!bx]/c", "a/b/c", false },
		/* '**' is zero or more levels between two. */
		{ "kubepods.slice/**/cri-containerd-*.scope", "kubepods.slice/cri-containerd-1.scope", true },
		{ "kubepods.slice/**/cri-containerd-*.scope",
		  "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/"
		  "cri-containerd-9f.scope", true },
		{ "kubepods.slice/**/cri-containerd-*.scope", "other.slice/x/cri-containerd-1.scope", false },
		{ "kubepods.slice/**/cri-containerd-*.scope", "kubepods.slice/x/cri-containerd-1.scope/y", false },
		{ "**/leaf", "leaf", true },
		{ "**/leaf", "a/b/leaf", true },
		{ "a/**/b/**/c", "a/b/c", true },
		{ "a/**/b/**/c", "a/x/b/y/z/c", true },
		{ "a/**/b/**/c", "a/x/y/c", false },
		/* ... and one or more at the end: what is below, not the folder itself. */
		{ "a/**", "a", false },
		{ "a/**", "a/b", true },
		{ "a/**", "a/b/c", true },
		{ "a/**", "ab/c", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(check_name("cgmatch/%zu", i), EQ(sp_cgroup_match(cases[i].pat, cases[i].path),
						      cases[i].want) ||
		      check_note("%s against %s", cases[i].pat, cases[i].path));
	CHECK("cgpattern_is", sp_cgroup_is_pattern("a/*") && sp_cgroup_is_pattern("a/b?") &&
	      sp_cgroup_is_pattern("a/[xy]") && !sp_cgroup_is_pattern("system.slice/a-b.service"));
}

static void test_read_line(void)
{
	static const char text[] = "prob=41\nx\0y\nmode=1\n\n0123456789abcdef\nport=5555";
	char buf[16];
	int r[7];
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");

	if (!f) {
		CHECK("read_line_fmemopen", check_note("fmemopen: %m"));
		return;
	}
	for (int i = 0; i < 7; i++)
		r[i] = sp_read_line(f, buf, sizeof(buf));
	fclose(f);
	CHECK_EQ("read_line_plain", r[0], 7);
	CHECK_EQ("read_line_nul", r[1], SP_LINE_NUL);
	CHECK_EQ("read_line_after_nul", r[2], 6);
	CHECK_EQ("read_line_empty", r[3], 0);
	CHECK_EQ("read_line_long", r[4], SP_LINE_LONG);
	CHECK("read_line_last_without_newline", EQ(r[5], 9) && STREQ(buf, "port=5555") &&
	      EQ(r[6], SP_LINE_EOF));
	f = fmemopen((void *)text, 19, "r");	/* "prob=41", "x\0y", "mode=1" */
	CHECK("read_line_kept", f && EQ(sp_read_line(f, buf, sizeof(buf)), 7) && STREQ(buf, "prob=41") &&
	      EQ(sp_read_line(f, buf, sizeof(buf)), SP_LINE_NUL) &&
	      EQ(sp_read_line(f, buf, sizeof(buf)), 6) && STREQ(buf, "mode=1") &&
	      EQ(sp_read_line(f, buf, sizeof(buf)), SP_LINE_EOF));
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	/* run.sh runs us from the repository root; a path may be given. */
	const char *readme = argc > 1 ? argv[1] : "docs/configuration.md";

	/* The functions under test print their one-line errors: keep them off the results. */
	freopen("/dev/null", "w", stderr);
	test_parse_u32();
	test_modules();
	test_tunables();
	test_paths();
	test_json();
	test_report();
	test_summary();
	test_instances();
	test_cgroup_input();
	test_config();
	test_cgroup_match();
	test_read_line();
	test_readme_tunables(readme);
	return failures ? 1 : 0;
}
