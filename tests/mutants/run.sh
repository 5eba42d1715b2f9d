#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make mutants`: for each mutant of tests/mutants/list, a build with its
# switch (-DSP_MUTANT_NAME, into build-mut/NAME; build/ is never touched)
# and its guarding tests against that build, the first failure killing it.
# A mutant no guard fails survived: the tests do not see that decision go.
# Prints "KILLED NAME by GUARD (build and guard seconds): the failing line"
# or "SURVIVED NAME: why", and ends with "M mutants, K killed"; exits
# non-zero if any survived.
# Usage: tests/mutants/run.sh [--fast] [NAME ...]
#   --fast: the mutants marked fast (make check runs those); NAME: these only.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
LIST=tests/mutants/list
fast=0
[ "${1:-}" = --fast ] && { fast=1; shift; }
n=0 killed=0 survived=()
for a; do
	grep -q "^$a " "$LIST" || { echo "tests/mutants/run.sh: no mutant $a in $LIST" >&2; exit 2; }
done

# The first line saying why a guard failed, from its output ($1): the
# test's own FAIL line (indented by tests/run.sh), else the runner's.
why() {
	{ grep -m1 '^    FAIL: ' "$1" || grep -m1 '^FAIL' "$1" || echo "(no FAIL line)"; } | sed 's/^ *//'
}

# Runs guard $2 against build-mut/$1: 0 if it failed (the mutant is killed).
guard_fails() {
	local out=build-mut/$1/guard.out
	case $2 in
	unit:*)
		timeout 120 "build-mut/$1/${2#unit:}" >"$out" 2>&1 && ! grep -q '^FAIL' "$out" && return 1
		;;
	*)
		SP_BUILD=$ROOT/build-mut/$1 tests/run.sh "$2" >"$out" 2>&1
		# Killed by a failure only: a guard that skipped, or matched no
		# test, did not see the mutant.
		tail -1 "$out" | grep -Eq '^[0-9]+ passed, [1-9][0-9]* failed' || return 1
		;;
	esac
	echo "KILLED $1 by $2 (build ${built} s, guards $((SECONDS - t1)) s): $(why "$out")"
}

while read -r name subset guards; do
	case $name in ''|'#'*) continue ;; esac
	[ $fast = 0 ] || [ "$subset" = fast ] || continue
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx -- "$name"; then continue; fi
	n=$((n + 1))
	# The switch must be in the source: a name misspelt here would build
	# the real code, and its guards pass.
	if ! grep -rqw "SP_MUTANT_$name" src bpf include; then
		echo "SURVIVED $name: no #ifdef SP_MUTANT_$name in src/, bpf/ or include/"
		survived+=("$name"); continue
	fi
	mkdir -p build-mut
	t0=$SECONDS
	if ! make -s -j2 OUTPUT="build-mut/$name" MUTANT="$name" all >"build-mut/$name.log" 2>&1; then
		echo "SURVIVED $name: it does not build: $(tail -3 "build-mut/$name.log")"
		survived+=("$name"); continue
	fi
	built=$((SECONDS - t0)) t1=$SECONDS
	dead=0
	for g in $guards; do
		if guard_fails "$name" "$g"; then dead=1; break; fi
	done
	if [ $dead = 1 ]; then
		killed=$((killed + 1))
	else
		echo "SURVIVED $name: guards $guards all passed ($((SECONDS - t1)) s)"
		survived+=("$name")
	fi
done <"$LIST"

echo "$n mutants, $killed killed"
[ ${#survived[@]} = 0 ]
