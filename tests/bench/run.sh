#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: runs every tests/bench/bench_*.sh (each prints Markdown),
# shows the tables and writes them to results/bench-DATE.md.
# Usage: tests/bench/run.sh [PATTERN]
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
mkdir -p results
out=results/bench-$(date +%Y%m%d-%H%M%S).md
{
	echo "# stackpilot benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Kernel $(uname -r), $(nproc) CPUs. Ratios compare runs interleaved in one session."
} >"$out"
# Benchmarks run long: use a snapshot of the binaries, so a rebuild meanwhile
# cannot change (or break) what is being measured.
export SP_BUILD=$(mktemp -d /tmp/sp-bench-build.XXXX)
trap 'rm -rf "$SP_BUILD"' EXIT
cp build/stackpilot build/tcptool build/fragflood build/fragdiff build/fgcost build/rhfloor "$SP_BUILD"/
rc=0
for b in tests/bench/bench_*.sh; do
	echo "$b" | grep -q -- "${1:-.}" || continue
	echo >>"$out"
	bash -c 'source tests/lib.sh && source "$1"' _ "$b" | tee -a "$out" || rc=1
done
echo
echo "results written to $out"
exit $rc
