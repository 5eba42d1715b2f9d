/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The checks of the unit tests, one per line of output for tests/run.sh:
 * "PASS name", or "FAIL name: what was seen (line N)". A failed comparison
 * says both expressions and both values.
 *
 *   CHECK_EQ(name, got, want)    and CHECK_NE, _GE, _GT, _LE, _LT
 *   CHECK_STR(name, got, want)   two strings equal (either may be NULL)
 *   CHECK(name, cond)            a true boolean, or clauses joined by && / ||:
 *   CHECK(name, EQ(a, b) && STREQ(s, "x") && HAS(text, "part"))
 *
 * The clauses EQ, NE, GE, GT, LE, LT, STREQ and HAS are expressions (each
 * operand evaluated once, compared in its own type as `a == b` would be)
 * that note what they saw when false; a failing CHECK prints the notes of
 * the false clauses since the previous check, or its condition when there
 * are none. check_note() adds context (which module, which tunable).
 *
 * Define CHECK_PREFIX (e.g. "fragguard/") before including to prefix every
 * name. Names are one word (tests/run.sh reads "PASS name"), and a looped
 * check names what it loops over: check_name("x/%s", m->name).
 */
#ifndef SP_TESTS_UNIT_CHECK_H
#define SP_TESTS_UNIT_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifndef CHECK_PREFIX
#define CHECK_PREFIX ""
#endif

static int failures;
static char check_notes_[2048];

/* Append to the notes of the check being evaluated; false, to sit in an || or &&. */
__attribute__((format(printf, 1, 2), unused))
static bool check_note(const char *fmt, ...)
{
	size_t len = strlen(check_notes_);
	va_list ap;

	if (len && len < sizeof(check_notes_) - 2)
		len += snprintf(check_notes_ + len, sizeof(check_notes_) - len, "; ");
	if (len < sizeof(check_notes_) - 1) {
		va_start(ap, fmt);
		vsnprintf(check_notes_ + len, sizeof(check_notes_) - len, fmt, ap);
		va_end(ap);
	}
	return false;
}

/* A name built with printf's format (a ring of 8: several may be live at once). */
__attribute__((format(printf, 1, 2), unused))
static const char *check_name(const char *fmt, ...)
{
	static char ring[8][128];
	static unsigned int next;
	char *s = ring[next++ % 8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s, sizeof(ring[0]), fmt, ap);
	va_end(ap);
	return s;
}

/* The notes taken since the last check are this one's (also those of a
 * loop before it that computed its condition); a check clears them. */
static void check_result_(const char *name, bool ok, const char *cond, int line)
{
	if (ok) {
		printf("PASS %s%s\n", CHECK_PREFIX, name);
	} else {
		printf("FAIL %s%s: %s (line %d)\n", CHECK_PREFIX, name,
		       check_notes_[0] ? check_notes_ : cond, line);
		failures++;
	}
	check_notes_[0] = '\0';
}

#define CHECK(name, cond) check_result_((name), (cond), #cond, __LINE__)

/* A value as text, by its type: signed, unsigned, floating or a pointer. */
struct check_val_ { char s[32]; };

static inline struct check_val_ check_s_(long long v)
{ struct check_val_ r; snprintf(r.s, sizeof(r.s), "%lld", v); return r; }
static inline struct check_val_ check_u_(unsigned long long v)
{ struct check_val_ r; snprintf(r.s, sizeof(r.s), "%llu", v); return r; }
static inline struct check_val_ check_d_(long double v)
{ struct check_val_ r; snprintf(r.s, sizeof(r.s), "%Lg", v); return r; }
static inline struct check_val_ check_p_(const volatile void *v)
{ struct check_val_ r; snprintf(r.s, sizeof(r.s), "%p", (const void *)v); return r; }

#define CHECK_VAL_(x) _Generic((x),					\
	_Bool: check_u_, unsigned char: check_u_, unsigned short: check_u_,	\
	unsigned int: check_u_, unsigned long: check_u_,		\
	unsigned long long: check_u_,					\
	char: check_s_, signed char: check_s_, short: check_s_, int: check_s_, \
	long: check_s_, long long: check_s_,				\
	float: check_d_, double: check_d_, long double: check_d_,	\
	default: check_p_)(x).s

/* "got = 6, want == 7"; an operand's value is left out where it is its text. */
__attribute__((unused))
static void check_cmp_note_(const char *gx, const char *op, const char *wx,
			    const char *gv, const char *wv)
{
	check_note("%s%s%s, want %s %s%s%s", gx, strcmp(gx, gv) ? " = " : "",
		   strcmp(gx, gv) ? gv : "", op, wx, strcmp(wx, wv) ? " = " : "",
		   strcmp(wx, wv) ? wv : "");
}

/* The operands are copies: `ctr(i) == 3` compares a __u64 with an int
 * variable then, which -Wsign-compare flags; the comparison is the same.
 * The texts are taken by the macros the tests call, before expansion:
 * "ctr(SP_FG_COMPLETED)", not the number that stands for it. */
#define CHECK_CMP_(got, op, want, gtext, wtext) ({			\
	__auto_type check_g_ = (got);					\
	__auto_type check_w_ = (want);					\
	_Pragma("GCC diagnostic push")					\
	_Pragma("GCC diagnostic ignored \"-Wsign-compare\"")		\
	bool check_ok_ = check_g_ op check_w_;				\
	_Pragma("GCC diagnostic pop")					\
	if (!check_ok_)							\
		check_cmp_note_(gtext, #op, wtext, CHECK_VAL_(check_g_),	\
				CHECK_VAL_(check_w_));			\
	check_ok_;							\
})

#define EQ(got, want) CHECK_CMP_(got, ==, want, #got, #want)
#define NE(got, want) CHECK_CMP_(got, !=, want, #got, #want)
#define GE(got, want) CHECK_CMP_(got, >=, want, #got, #want)
#define GT(got, want) CHECK_CMP_(got, >, want, #got, #want)
#define LE(got, want) CHECK_CMP_(got, <=, want, #got, #want)
#define LT(got, want) CHECK_CMP_(got, <, want, #got, #want)

/* s, quoted and escaped onto one line, cut at 400 bytes. */
__attribute__((unused))
static const char *check_quote_(char *buf, size_t size, const char *s)
{
	size_t n = 0;

	if (!s)
		return "NULL";
	buf[n++] = '"';
	for (; *s && n < size - 8; s++) {
		unsigned char c = *s;

		if (c == '\n')
			n += snprintf(buf + n, size - n, "\\n");
		else if (c == '"' || c == '\\')
			n += snprintf(buf + n, size - n, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			n += snprintf(buf + n, size - n, "\\x%02x", c);
		else
			buf[n++] = c;
	}
	n += snprintf(buf + n, size - n, *s ? "\"..." : "\"");
	return buf;
}

__attribute__((unused))
static bool check_str_(const char *gx, const char *got, const char *want, bool whole)
{
	char g[416], w[416];
	bool ok = got && want && (whole ? !strcmp(got, want) : !!strstr(got, want));

	if (!ok)
		check_note("%s = %s, want %s %s", gx, check_quote_(g, sizeof(g), got),
			   whole ? "equal to" : "containing", check_quote_(w, sizeof(w), want));
	return ok;
}

/* got and want equal strings; text containing part. */
#define STREQ(got, want) check_str_(#got, (got), (want), true)
#define HAS(text, part) check_str_(#text, (text), (part), false)

#define CHECK_OP_(name, got, op, want, gtext, wtext)			\
	check_result_((name), CHECK_CMP_(got, op, want, gtext, wtext),	\
		      gtext " " #op " " wtext, __LINE__)
#define CHECK_EQ(name, got, want) CHECK_OP_(name, got, ==, want, #got, #want)
#define CHECK_NE(name, got, want) CHECK_OP_(name, got, !=, want, #got, #want)
#define CHECK_GE(name, got, want) CHECK_OP_(name, got, >=, want, #got, #want)
#define CHECK_GT(name, got, want) CHECK_OP_(name, got, >, want, #got, #want)
#define CHECK_LE(name, got, want) CHECK_OP_(name, got, <=, want, #got, #want)
#define CHECK_LT(name, got, want) CHECK_OP_(name, got, <, want, #got, #want)
#define CHECK_STR(name, got, want)					\
	check_result_((name), check_str_(#got, (got), (want), true), #got, __LINE__)

#endif
