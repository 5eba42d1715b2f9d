#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench-compare REV=...`: the benchmarks matching PATTERN, each run
# against the stackpilot binary of REV and of this tree, in one session, in
# the order REV, this tree, this tree, REV (ABBA: drift over the session hits
# both alike). Only the stackpilot binary (loader and its embedded BPF
# objects) differs between the two: the traffic tools are this tree's, so
# a tool's change cannot pass for stackpilot's. What each run printed goes
# to results/compare-DATE.md under its build's name, nothing into docs/.
# Usage: tests/bench/compare.sh REV [PATTERN]
# ORDER="old new" (a shorter session) replaces the ABBA order.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
[ "$(id -u)" = 0 ] || { echo "bench-compare: needs root" >&2; exit 1; }
rev=${1:?usage: tests/bench/compare.sh REV [PATTERN]}
ORDER=${ORDER:-old new new old}
case " $ORDER " in *" old "*" new "*|*" new "*" old "*) ;; *)
	echo "bench-compare: ORDER '$ORDER': give old and new, each at least once" >&2; exit 2 ;;
esac
pat=${2:-.}
old_id=$(git rev-parse --short --verify "$rev^{commit}" 2>/dev/null) ||
	{ echo "bench-compare: $rev: not a commit of this repository" >&2; exit 2; }
new_id="$(git describe --always --dirty)"
ls tests/bench/bench_*.sh | grep -q -- "$pat" ||
	{ echo "bench-compare: no benchmark matches '$pat'" >&2; exit 2; }

work=$(mktemp -d /tmp/sp-compare.XXXX)
trap 'git worktree remove --force "$work/src" >/dev/null 2>&1; rm -rf "$work"' EXIT
git worktree add --detach -q "$work/src" "$old_id" ||
	{ echo "bench-compare: cannot check out $old_id" >&2; exit 1; }
echo "building $old_id ..."
make -C "$work/src" -j"$(nproc)" build/stackpilot >"$work/make.log" 2>&1 ||
	{ tail -20 "$work/make.log"; echo "bench-compare: $old_id does not build" >&2; exit 1; }
# Each build: this tree's tools, its own stackpilot.
for b in old new; do
	mkdir "$work/$b"
	cp $(sed '/^[[:space:]]*\(#.*\)\{0,1\}$/d; s|^|build/|' tests/bench/tools) "$work/$b"/ || exit 1
done
cp "$work/src/build/stackpilot" "$work/old/"
cp build/stackpilot "$work/new/"
# The BPF objects too, for benchmarks that also time a program on its own
# (bench_fragguard's fgcost); stackpilot itself embeds them.
cp "$work/src"/build/*.bpf.o "$work/old/" 2>/dev/null
cp build/*.bpf.o "$work/new/"

mkdir -p results
out=results/compare-$(date +%Y%m%d-%H%M%S).md
{
	echo "# stackpilot $old_id against $new_id, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Kernel $(uname -r), $(nproc) CPUs. \`tests/bench/compare.sh $rev $pat\`: each benchmark"
	echo "with the stackpilot binary of $old_id (old) and of $new_id (new), in the order $ORDER."
} >"$out"
rc=0
for b in tests/bench/bench_*.sh; do
	echo "$b" | grep -q -- "$pat" || continue
	for build in $ORDER; do
		{ echo; echo "## $(basename "$b" .sh), $build ($([ $build = old ] && echo "$old_id" || echo "$new_id"))"; echo; } |
			tee -a "$out"
		SP_BUILD="$work/$build" bash -c 'source tests/lib.sh && source "$1"' _ "$b" |
			sed 's/^\(#\{1,4\}\) /#\1 /' | tee -a "$out"
		[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	done
done
echo
echo "results written to $out"
exit $rc
