# SPDX-License-Identifier: GPL-2.0
# Tests that say what they saw (issue 26, item 7), kept so by a lint of
# the tests themselves: no namespaces, no root needed.
# Each t_* runs in its own bash with tests/lib.sh sourced.

# The `|| fail` lines of shell FILEs that compare numbers (test's -eq -ne
# -ge -gt -le -lt, an arithmetic (( )), an awk "exit !(...)") but whose
# message does not carry the values: no $ in it, or a number the condition
# compares with missing from it. A condition may begin on earlier lines
# (ending in \, &&, || or |). Prints FILE:LINE: TEXT for each.
lint_fail_messages() {
	awk '
	FNR == 1 { stmt = "" }
	{
		line = $0
		sub(/^[ \t]+/, "", line)
		if (line ~ /^#/) next
		stmt = stmt == "" ? line : stmt " " line
		if (line ~ /(\\|&&|\|\||\|)[ \t]*$/) next
		s = stmt; stmt = ""
		i = index(s, "|| fail")
		if (!i) next
		# the last "|| fail" ends the condition; what follows is the message
		while ((j = index(substr(s, i + 7), "|| fail")) > 0) i += 6 + j
		cond = substr(s, 1, i - 1); msg = substr(s, i + 7)
		numeric = cond ~ /(^|[ \t])-(eq|ne|ge|gt|le|lt)[ \t]/ ||
			  cond ~ /(^|[^$])\(\([^)]*[<>=]/ || cond ~ /exit !\(/
		if (!numeric) next
		bad = msg !~ /\$/
		# every number the condition compares with is in the message
		c = cond
		while (!bad && match(c, /(-(eq|ne|ge|gt|le|lt)|[<>]=?|==)[ \t]*-?[0-9]+(\.[0-9]+)?([^0-9.a-zA-Z_]|$)/)) {
			lit = substr(c, RSTART, RLENGTH)
			c = substr(c, RSTART + RLENGTH)
			sub(/^(-(eq|ne|ge|gt|le|lt)|[<>]=?|==)[ \t]*/, "", lit)
			sub(/[^0-9.]$/, "", lit); sub(/^-/, "", lit)
			if (!match(msg, "(^|[^0-9.])" lit "([^0-9]|$)")) bad = 1
		}
		if (bad) printf "%s:%d: %s\n", FILENAME, FNR, s
	}' "$@"
}

# The unit tests' bare CHECK(name, cond) whose condition compares values
# with a C operator (== != >= <= < >) rather than CHECK_EQ ... or a clause
# (EQ, GE, ...) that prints both values. Prints FILE:LINE: TEXT for each.
lint_unit_checks() {
	awk '
	/(^|[^A-Z_])CHECK\(/ && !inchk { inchk = 1; start = FNR; stmt = "" }
	inchk {
		line = $0; sub(/^[ \t]+/, "", line)
		stmt = stmt " " line
		if (line !~ /\);[ \t]*(\/\*.*)?$/) next
		inchk = 0
		s = stmt
		gsub(/\/\*([^*]|\*[^\/])*\*\//, "", s)	# comments, escapes, strings, chars
		gsub(/\\./, "", s)
		gsub(/"[^"]*"/, "\"\"", s)
		gsub(/\047[^\047]*\047/, "0", s)
		gsub(/->/, ".", s)
		if (s ~ /==|!=|>=|<=|[^<>]<[^<=]|[^<>-]>[^>=]/)
			printf "%s:%d:%s\n", FILENAME, start, stmt
	}' "$@"
}

t_lint_fail_messages_carry_values() {
	local out
	# test_lint.sh itself plants bad lines, for t_lint_finds_planted_lines
	out=$(cd "$ROOT" && lint_fail_messages $(ls tests/integration/*.sh tests/lib*.sh | grep -v /test_lint.sh))
	[ -z "$out" ] || fail "$(echo "$out" | wc -l) '|| fail' lines compare numbers but their message does not say them all:
$out"
}

t_lint_unit_checks_print_values() {
	local out
	out=$(cd "$ROOT" && lint_unit_checks tests/unit/*.c)
	[ -z "$out" ] || fail "$(echo "$out" | wc -l) bare CHECKs compare values (use CHECK_EQ/_GE/_LE... or EQ(), GE()...):
$out"
}

# The lints themselves: each finds a bad line planted among good ones.
t_lint_finds_planted_lines() {
	cat >"$TMP/planted.sh" <<-'EOF'
	[ "$n" -ge 2 ] || fail "too few"
	[ "$n" -ge 2 ] || fail "n $n, expected >= 2"
	[ "$n" -le 1400 ] && [ "$n" -gt 1392 ] || fail "MTU $n, path 1400"
	[ "$n" -le 1400 ] &&
		[ "$n" -gt 1392 ] || fail "MTU $n, want 1392 < MTU <= 1400"
	awk "BEGIN { exit !($t < 2) }" || fail "took $t s"
	(( n > 3 )) || fail "no n"
	echo $((n + 1)) >/dev/null || fail "echo"
	EOF
	cat >"$TMP/planted.c" <<-'EOF'
	CHECK("bare_eq", v == 42);
	CHECK("bare_ge_on_two_lines", ok &&
	      x >= 3);
	CHECK("clauses", EQ(v, 42) && GE(x, 3) && m->start);
	CHECK_EQ("eq", v, 42);
	CHECK("boolean", !is_known("10.0.0.1"));
	CHECK("string", STREQ(s, "a == b"));	/* a < b */
	CHECK("char", EQ(buf[0], '>') && p->next);
	CHECK("bare_lt", n < 3 &&
	      m > 1);
	EOF
	local got want
	got=$(lint_fail_messages "$TMP/planted.sh" | cut -d: -f2 | tr '\n' ' ')
	want="1 3 6 7 "
	assert_eq "$got" "$want" "lines lint_fail_messages finds in $TMP/planted.sh"
	got=$(lint_unit_checks "$TMP/planted.c" | cut -d: -f2 | tr '\n' ' ')
	want="1 2 9 "
	assert_eq "$got" "$want" "lines lint_unit_checks finds in $TMP/planted.c"
}

# The layers of src/ (docs/architecture.md): an include only points down.
t_lint_layers() {
	make -s -C "$ROOT" layers >"$TMP/layers" 2>&1 || fail "make layers: $(cat "$TMP/layers")"
}
