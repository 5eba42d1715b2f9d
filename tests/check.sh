#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make check`: the sanitized unit tests, the whole suite on this machine's
# kernel against the sanitized loader (build-san/), the fast mutants
# (tests/mutants/run.sh --fast, into build-mut/), then the kernel matrix
# (tests/vm/matrix.sh: Debian's kernels under qemu, against build/). Ends
# with one line over all of it, "N passed, N failed, N skipped", and exits
# non-zero on any failure. SP_VM=0 leaves the matrix out, with a SKIP line.
set -uo pipefail
cd "$(dirname "$0")/.."
SAN=${SAN_OUTPUT:-build-san}
pass=0 failn=0 skipn=0

# Adds a phase's closing "N passed, N failed[, N skipped]" line; a phase
# without one failed.
tally() {
	local p f s
	read -r p _ f _ s _ <<<"$1"
	case $p$f in *[!0-9]*|"") failn=$((failn + 1)); echo "FAIL $2: no closing line"; return ;; esac
	pass=$((pass + p)) failn=$((failn + f)) skipn=$((skipn + ${s:-0}))
}
# A skip for a missing tool (lib.sh need_tool: "SKIP name: missing tool
# ...") is a failure here: `make check` has run scripts/install-deps.sh,
# which installs the tool (or tries to, as prometheus). A skip for what the
# kernel lacks (need_feature, a module it refuses) stays a skip.
tool_skips() { # tool_skips OUTPUT-FILE: those skips of a tallied phase become failures
	local n
	n=$(grep -cE '^SKIP [^ ]+: missing tool ' "$1")
	grep -E '^SKIP [^ ]+: missing tool ' "$1" | sed 's/^SKIP \([^ ]*\): /FAIL \1: not skipped in make check: /'
	failn=$((failn + n)) skipn=$((skipn - n))
}

for t in test_unit test_fragguard; do
	"$SAN/$t" >"$SAN/$t.out" 2>&1; rc=$?
	p=$(grep -c '^PASS' "$SAN/$t.out") f=$(grep -c '^FAIL' "$SAN/$t.out") s=$(grep -c '^SKIP' "$SAN/$t.out")
	grep -E '^(FAIL|SKIP)' "$SAN/$t.out" | sed "s|^|$SAN/$t (sanitized): |"
	if [ $rc != 0 ] && [ "$f" = 0 ]; then
		f=1; echo "FAIL $SAN/$t (sanitized): exit status $rc"; tail -20 "$SAN/$t.out"
	fi
	echo "$SAN/$t (sanitized): $p passed, $f failed, $s skipped"
	tally "$p passed, $f failed, $s skipped" "$SAN/$t"
done

SP_BUILD=$PWD/$SAN tests/run.sh | tee "$SAN/run.out"
tally "$(tail -1 "$SAN/run.out")" "tests/run.sh"
tool_skips "$SAN/run.out"

# The fast mutants (tests/mutants/list, docs/mutants.md): one killed is a
# pass, one that survived a failure.
tests/mutants/run.sh --fast | tee build/mutants.out
tally "$(tail -1 build/mutants.out | awk '$2 == "mutants," && $4 == "killed" { print $3 " passed, " $1 - $3 " failed" }')" \
	"tests/mutants/run.sh --fast"

if [ "${SP_VM:-1}" = 0 ]; then
	echo "SKIP kernel matrix: SP_VM=0"
	skipn=$((skipn + 1))
else
	tests/vm/matrix.sh | tee build/vm-matrix.out
	tally "$(tail -1 build/vm-matrix.out)" "tests/vm/matrix.sh"
	tool_skips build/vm-matrix.out
fi
echo "$pass passed, $failn failed, $skipn skipped"
[ "$failn" = 0 ]
