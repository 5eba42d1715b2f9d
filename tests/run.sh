#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test runner: unit tests, then every t_* function of tests/integration/*.sh,
# each in its own bash with its own namespaces, cgroup and pins.
# A test that cannot run here (a kernel without the feature it is about)
# exits 77 through skip(): "SKIP name: why", counted apart.
# Ends with "N passed, N failed, N skipped"; exits non-zero on any failure.
# Usage: tests/run.sh [PATTERN ...]   (run only tests whose name matches a PATTERN)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ $# = 0 ] && set -- .
patterns=("$@")
pass=0 failn=0 skipn=0 failed=()
# Whether NAME matches one of the patterns (regular expressions, matched
# by bash itself: a grep per test and pattern cost the kernel matrix's
# guests, where a process start is slow, 30 s a run).
wanted() {
	local p
	for p in "${patterns[@]}"; do [[ $1 =~ $p ]] && return 0; done
	return 1
}
# The whole suite: what no test may leave behind is checked at the end.
all=0
[ "${patterns[*]}" = . ] && all=1

if [ "$(id -u)" != 0 ]; then
	echo "tests/run.sh: the integration tests need root" >&2
	exit 1
fi

# What tests may leave behind, before: compared with after, at the end.
leftovers() {
	grep -E ' /sys/fs/(bpf|cgroup) ' /proc/self/mounts | awk '{ print "mount " $2 " " $3 }'
	ip netns list 2>/dev/null | awk '$1 ~ /^sp-/ { print "netns " $1 }'
	ls -d /sys/fs/cgroup/*/sp-test-* /sys/fs/cgroup/sp-test-* /sys/fs/bpf/sp-test-* 2>/dev/null
	ls -d /tmp/sp-test-* 2>/dev/null
	bpftool prog show 2>/dev/null | awk '$2 == "sched_cls" || $2 == "sock_ops" || $2 == "tracing" { print "prog " $4 }' | grep -E ' sp_' || true
}
before=$(leftovers)
missing=$(mktemp /tmp/sp-run-missing.XXXX)
trap 'rm -f "$missing"' EXIT

# Unit tests (loader parsing; BPF programs on crafted packets) print
# "PASS name" / "FAIL name: why" / "SKIP name: why"; a non-zero exit counts
# as one more failure.
for bin in build/test_unit build/test_fragguard; do
	wanted "$bin" || [ $all = 1 ] || continue
	while read -r word name rest; do
		case $word in
		PASS) pass=$((pass + 1)); echo "PASS unit/$name" ;;
		FAIL) name=${name%:}; failn=$((failn + 1)); failed+=("unit/$name"); echo "FAIL unit/$name: $rest" ;;
		SKIP) name=${name%:}; skipn=$((skipn + 1)); echo "SKIP unit/$name: $rest" ;;
		END) [ "$name" = 0 ] || { failn=$((failn + 1)); failed+=("$bin"); echo "FAIL $bin: exit status $name"; } ;;
		esac
	done < <(timeout 120 "$bin" 2>&1; echo "END $?")
done

for f in tests/integration/test_*.sh; do
	for t in $(grep -o '^t_[a-z0-9_]*' "$f"); do
		name=$(basename "$f" .sh)/$t
		wanted "$name" || continue
		start=$(date +%s.%N)
		# A test has no set -e: a call to a function or tool that does not
		# exist would go on and could pass. The handler (exported to the
		# bash scripts a test starts) writes the name to a file, whatever
		# happens to the test's stderr; a name there fails the test.
		: >"$missing"
		out=$(SP_TEST_MISSING=$missing timeout -k 5 180 bash -c '
			command_not_found_handle() {
				echo "sp-test: no such command: $1" >&2
				echo "$1" >>"$SP_TEST_MISSING"
				return 127
			}
			export -f command_not_found_handle
			source tests/lib.sh && source "$1" && "$2"' _ "$f" "$t" 2>&1)
		rc=$?
		if [ -s "$missing" ]; then
			[ $rc != 0 ] || rc=127
			out+=$'\n'"sp-test: commands not found: $(sort -u "$missing" | tr '\n' ' ')"
		fi
		secs=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")
		if [ $rc = 0 ]; then
			pass=$((pass + 1)); printf 'PASS %s (%.1fs)\n' "$name" "$secs"
		elif [ $rc = 77 ]; then
			skipn=$((skipn + 1))
			printf 'SKIP %s: %s\n' "$name" "$(echo "$out" | sed -n 's/^SKIP: //p' | tail -1)"
		else
			failn=$((failn + 1)); failed+=("$name")
			printf 'FAIL %s (rc %d)\n' "$name" $rc
			echo "$out" | sed 's/^/    /' | tail -20
		fi
	done
done

after=$(leftovers)
if [ $all = 1 ] || [ -n "${SP_LEFTOVERS:-}" ]; then
	if [ "$after" != "$before" ]; then
		failn=$((failn + 1)); failed+=("harness/no_leftovers")
		echo "FAIL harness/no_leftovers:"; diff <(echo "$before") <(echo "$after") | sed 's/^/    /'
	else
		pass=$((pass + 1)); echo "PASS harness/no_leftovers"
	fi
fi

for n in "${failed[@]}"; do echo "failed: $n"; done
echo "$pass passed, $failn failed, $skipn skipped"
[ "$failn" = 0 ]
