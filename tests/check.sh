#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make check`: the sanitized unit tests, the whole suite on this machine's
# kernel against the sanitized loader (build-san/), then the kernel matrix
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

if [ "${SP_VM:-1}" = 0 ]; then
	echo "SKIP kernel matrix: SP_VM=0"
	skipn=$((skipn + 1))
else
	tests/vm/matrix.sh | tee build/vm-matrix.out
	tally "$(tail -1 build/vm-matrix.out)" "tests/vm/matrix.sh"
fi
echo "$pass passed, $failn failed, $skipn skipped"
[ "$failn" = 0 ]
