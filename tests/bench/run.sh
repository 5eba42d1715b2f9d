#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: runs every tests/bench/bench_*.sh (each prints Markdown),
# shows the tables and writes them to results/bench-DATE.md, and refreshes
# each benchmark's part of its page in docs/bench/ (bench_page, below).
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
cp build/stackpilot $(sed '/^[[:space:]]*\(#.*\)\{0,1\}$/d; s|^|build/|' tests/bench/tools) "$SP_BUILD"/ || exit 1

# The page a benchmark names in its "# Page: docs/bench/NAME.md" line gets
# what it printed, between two marker lines of its own, with the command
# (the variables of the script that are set, then this script and its
# name) and the date: the docs show the last measurement and how to
# repeat it. The prose around the markers is left as it is; a page without
# the markers gets them at its end. A benchmark that failed is written too,
# with its exit status, since a partial table is still what was measured.
bench_page() { # bench_page BENCH_SCRIPT ITS_OUTPUT EXIT_STATUS
	local b=$1 printed=$2 status=$3 page name v cmd= begin end block
	page=$(sed -n 's/^# Page: \([^ ]*\).*/\1/p' "$b")
	[ -n "$page" ] || return 0
	name=$(basename "$b" .sh)
	begin="<!-- make bench: $name begins; tests/bench/run.sh rewrites what is up to the end line -->"
	end="<!-- make bench: $name ends -->"
	for v in $(grep -oE '\$\{[A-Z_][A-Z0-9_]*:-' "$b" | sed 's/^..//; s/:-$//' | sort -u); do
		[ -n "${!v+x}" ] || continue
		case ${!v} in
		*[[:space:]]*) cmd+="$v=\"${!v}\" " ;;
		*) cmd+="$v=${!v} " ;;
		esac
	done
	cmd+="tests/bench/run.sh ${name#bench_}"
	block=$(mktemp /tmp/sp-bench-page.XXXX)
	{
		echo "$begin"
		echo
		echo "Written by \`make bench\` on $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r),"
		echo "$(nproc) CPUs, commit $(git describe --always --dirty 2>/dev/null || echo unknown)$([ "$status" = 0 ] || echo ", exit status $status (output may be partial)"):"
		echo
		echo "    $cmd"
		echo
		# Pictures are linked from results/ as ../docs/X.png; from docs/bench/,
		# ../X.png. Headings go one level down, below the page's own.
		sed -e 's#](\.\./docs/#](../#g' -e 's/^\(#\{1,5\}\) /\1# /' "$printed"
		echo
		echo "$end"
	} >"$block"
	if [ -f "$page" ] && grep -qF "<!-- make bench: $name begins" "$page"; then
		awk -v b="<!-- make bench: $name begins" -v e="$end" -v f="$block" '
			index($0, b) == 1 { while ((getline l < f) > 0) print l; skip = 1; next }
			skip { if ($0 == e) skip = 0; next }
			{ print }' "$page" >"$block.page" && cat "$block.page" >"$page"
	else
		[ -f "$page" ] || printf '# %s benchmarks\n' "${name#bench_}" >"$page"
		{ echo; cat "$block"; } >>"$page"
	fi
	rm -f "$block" "$block.page"
	echo "page $page: $name's part written"
}

rc=0
one=$(mktemp /tmp/sp-bench-one.XXXX)
trap 'rm -rf "$SP_BUILD" "$one"' EXIT
for b in tests/bench/bench_*.sh; do
	echo "$b" | grep -q -- "${1:-.}" || continue
	echo >>"$out"
	bash -c 'source tests/lib.sh && source "$1"' _ "$b" | tee -a "$out" "$one"
	st=("${PIPESTATUS[@]}")
	[ "${st[1]}" = 0 ] || rc=1
	bench_page "$b" "$one" "${st[0]}"
	: >"$one"
done
echo
echo "results written to $out"
exit $rc
