# SPDX-License-Identifier: GPL-2.0
# Sourced by each test (a fresh bash per test function). Everything a test
# makes is named with $ID, unique to this test run, and removed by cleanup()
# on every exit path, including a timeout's SIGTERM.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SP_BUILD:-$ROOT/build}
SP=$BUILD/stackpilot
TCPTOOL=$BUILD/tcptool
FRAGFLOOD=$BUILD/fragflood
ID=${SP_TEST_ID:-$(printf 's%05x' $(( (RANDOM << 8 ^ $$) & 0xfffff )))}
PIN=/sys/fs/bpf/sp-test-$ID
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
CG=$CG2/sp-test-$ID
NS_A=sp-$ID-a
NS_B=sp-$ID-b
SP_PID=
NETNS=()
BG_PIDS=()
CLEANUPS=()
TMP=$(mktemp -d /tmp/sp-test-$ID.XXXX)
# A run killed by a test cannot unmount the bpffs it mounted: cleanup does.
BPFFS_BEFORE=$(stat -f -c %T /sys/fs/bpf 2>/dev/null)

# A pipeline's status is its last failing command's: xfer's is tcptool's,
# not its sed's. The price: `cmd | grep -q x` fails when grep stops at the
# first match and cmd, still writing, dies of SIGPIPE: tests use has (below).
set -o pipefail

# A failure ends the test wherever fail() runs. In a subshell (a $(...), a
# pipeline's part, a ( ... ) &) exit ends only that subshell: it also
# signals the test's own shell, whose trap exits 1 (once the command it
# waits for returns), if that is still the shell that started it (its
# start time: not a process that took its pid). The trap ignores the
# signal from then on: a second job failing at once would otherwise exit
# the shell again from inside cleanup(), before it stopped anything (a
# `stackpilot run` left running; 7 in 500 in a simulation, none since). A
# subshell that catches its failures itself (a try of several) defines
# its own fail().
fail() {
	local st
	echo "FAIL: $*" >&2
	if [ "$BASHPID" != "$$" ] && read -r -a st </proc/$$/stat 2>/dev/null && [ "${st[21]}" = "$TEST_START" ]; then
		kill -USR1 $$ 2>/dev/null
	fi
	exit 1
}
read -r -a TEST_START </proc/$$/stat
TEST_START=${TEST_START[21]}
trap 'trap "" USR1; exit 1' USR1
# This kernel (or machine) cannot run the test: the runner prints "SKIP name: why".
skip() { echo "SKIP: $*" >&2; exit 77; }
# A tool the test needs that scripts/install-deps.sh installs (or tries to,
# as prometheus): missing, the test skips with "missing tool", which `make
# check` (tests/check.sh) counts as a failure. A kernel's lack is
# need_feature's (or a module the kernel refuses, sp_spawn): a skip there too.
need_tool() { # need_tool COMMAND DEBIAN-PACKAGE
	command -v "$1" >/dev/null ||
		skip "missing tool $1 (Debian package $2, which scripts/install-deps.sh installs)"
}
# The test is about a kernel feature (a name of `stackpilot probe --json`'s
# features; SP_PROBE_OFF applies): skipped where the kernel lacks it.
has_feature() { [ "$("$SP" probe --json | jq -r ".features.$1")" = true ]; }
need_feature() { has_feature "$1" || skip "this kernel ($(uname -r)) has no $1"; }
# pmtu clamps a connection at connect where sockops' bpf_setsockopt() takes
# TCP_MAXSEG (6.1 on); before, it learns and searches alike but clamps
# nothing (a route does, with route=1). A test whose last part checks the
# clamp calls this before it: the part before ran, the rest skips.
need_clamp() { need_feature sockops_maxseg; }
# Run a command under a cleanup list, newest first.
on_exit() { CLEANUPS=("$*" "${CLEANUPS[@]}"); }

cleanup() {
	local c p
	trap - EXIT TERM INT
	trap '' USR1	# a background job's fail() must not cut the cleanup short
	[ -n "$SP_PID" ] && kill -TERM "$SP_PID" 2>/dev/null && wait "$SP_PID" 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for c in "${CLEANUPS[@]}"; do eval "$c" >/dev/null 2>&1; done
	# Every namespace named for this run, also those made in a subshell
	# (where NETNS did not see them).
	for p in "${NETNS[@]}" $(ip netns list 2>/dev/null | awk -v p="sp-$ID-" 'index($1, p) == 1 { print $1 }'); do
		ip netns pids "$p" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$p" 2>/dev/null
	done
	if [ -d "$CG" ]; then
		for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
		for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$CG" 2>/dev/null && break; sleep 0.1; done
	fi
	rm -rf "$PIN" "$TMP"
	if [ "$BPFFS_BEFORE" != bpf_fs ] && [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" = bpf_fs ] &&
	   [ -z "$(ls /sys/fs/bpf | grep -v '\.debug$')" ]; then
		umount /sys/fs/bpf
	fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# The bpffs systemd mounts at boot, for a test that runs with no loader to
# mount it (or with the unit's capabilities: no CAP_SYS_ADMIN to mount
# it). A bare host, a fresh CI machine, has none. cleanup() unmounts it.
host_bpffs() {
	[ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" = bpf_fs ] ||
		mount -t bpf -o mode=0700 bpf /sys/fs/bpf || fail "mount bpffs at /sys/fs/bpf"
}

# A namespace of this test, removed by cleanup(), with lo up.
mk_netns() {
	ip netns add "$1" || fail "ip netns add $1"
	NETNS+=("$1")
	ip -n "$1" link set lo up
}

# A veth pair between two of the test's namespaces, both ends up: veth NS1 DEV1 NS2 DEV2.
veth() {
	ip link add "$2" netns "$1" type veth peer name "$4" netns "$3" || fail "veth $2"
	ip -n "$1" link set "$2" up; ip -n "$3" link set "$4" up
}

# Two namespaces joined by a veth pair: A 10.77.0.1 / fd77::1, B 10.77.0.2 / fd77::2.
netns_pair() {
	mk_netns "$NS_A"; mk_netns "$NS_B"
	veth "$NS_A" "v$ID"a "$NS_B" "v$ID"b
	ip -n "$NS_A" addr add 10.77.0.1/24 dev "v$ID"a
	ip -n "$NS_B" addr add 10.77.0.2/24 dev "v$ID"b
	ip -n "$NS_A" addr add fd77::1/64 dev "v$ID"a nodad
	ip -n "$NS_B" addr add fd77::2/64 dev "v$ID"b nodad
}

make_cgroup() { mkdir "$CG" || fail "mkdir $CG"; }

# Run "$@" as a process inside the test cgroup (and its children stay there).
in_cgroup() { in_cgroup_at "$CG" "$@"; }
# The same in cgroup DIR: in_cgroup_at DIR COMMAND...
in_cgroup_at() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"; }

# Start `stackpilot run` in the background with the test's pins; wait until attached.
# With SP_NS set, it runs as `ip netns exec $SP_NS stackpilot run`: in that
# namespace, with a private /sys where it mounts its own bpffs, and sp_ctl
# reaches it there through nsenter.
sp_start() {
	: >"$TMP/sp.err"
	sp_spawn ${SP_NS:+ip netns exec "$SP_NS"} "$SP" run --pin-path "$PIN" --interval 0 "$@"
}

# "--bpf-stats" if this build's run takes it (older builds counted runs
# always): for benchmarks that read run counts and may time an older build.
sp_stats_opt() { "$SP" run --help 2>/dev/null | has -e --bpf-stats && echo --bpf-stats; }

# Run "$@", a `stackpilot run` command line of the test's own, in the
# background as SP_PID (stopped by cleanup); wait until it has attached.
# Its stderr is added to $TMP/sp.err. SP_SPAWN_SECS: the wait (10 s).
sp_spawn() {
	local secs=${SP_SPAWN_SECS:-10}
	"$@" >"$TMP/sp.out" 2>>"$TMP/sp.err" &
	SP_PID=$!
	for _ in $(seq $((secs * 10))); do
		grep -q '^stackpilot: attached' "$TMP/sp.out" 2>/dev/null && return 0
		if ! kill -0 "$SP_PID" 2>/dev/null; then
			cat "$TMP/sp.err" >&2; SP_PID=
			# A module this kernel cannot run (stackpilot probe): not this test's to judge.
			grep -q 'which this kernel lacks$' "$TMP/sp.err" &&
				skip "$(grep -m1 'which this kernel lacks$' "$TMP/sp.err" | sed 's/^stackpilot: //')"
			fail "stackpilot run exited"
		fi
		sleep 0.1
	done
	fail "stackpilot run did not attach in $secs s"
}

sp_stop() {
	kill -"${1:-TERM}" "$SP_PID" || fail "stackpilot not running"
	wait "$SP_PID"; local rc=$?
	SP_PID=
	return $rc
}
# What the run last wrote to its stderr ($TMP/sp.err; sp_spawn): the end
# of a failure message, `sp_stop || fail "... $(sp_said)"`. sp_said [LINES]
sp_said() { tail -n "${1:-5}" "$TMP/sp.err" 2>/dev/null; }

# A TCP sink in namespace B on PORT; it dies with the test.
tcp_server() {
	ip netns exec "$NS_B" "$TCPTOOL" server "$@" >/dev/null &
	BG_PIDS+=($!); disown
	sleep 0.2
}

# stackpilot COMMAND ... against the running instance (status, get, set).
sp_ctl() {
	local c=$1; shift
	if [ -n "${SP_NS:-}" ]; then
		nsenter -t "$SP_PID" -m -n "$SP" "$c" --pin-path "$PIN" "$@"
	else
		"$SP" "$c" --pin-path "$PIN" "$@"
	fi
}

# status --json field: json_get KEY (crude but enough for flat numeric keys).
status_num() {
	sp_ctl status --json | grep -o "\"$1\":[0-9.]*" | head -1 | cut -d: -f2
}

# grep -q that reads all of stdin: has [GREP OPTIONS] PATTERN. Under
# pipefail, `cmd | grep -q x` fails when cmd dies of SIGPIPE after grep's
# early exit.
has() { [ "$(grep -c "$@")" -gt 0 ]; }
# $1 if it is an integer, else the test fails naming $2: jq prints null
# for a missing field, and $(( null )) is 0.
num() { [[ $1 =~ ^-?[0-9]+$ ]] || fail "${2:-value}: expected a number, got '$1'"; echo "$1"; }
# A number of `status --json` (jq expression): sp_num '.modules.x.y'.
sp_num() { num "$(sp_json "$1")" "status $1"; }
# Wait for each pid, failing at the first that exited non-zero: `wait A B`
# returns B's status alone. wait_each WHAT PID...
wait_each() {
	local what=$1 p rc; shift
	for p; do
		wait "$p"; rc=$?
		[ "$rc" = 0 ] || fail "$what: pid $p exited $rc"
	done
}

assert_eq() { [ "$1" = "$2" ] || fail "${3:-value}: expected '$2', got '$1'"; }
assert_ge() { [ "$1" -ge "$2" ] 2>/dev/null || fail "${3:-value}: expected >= $2, got '$1'"; }
assert_le() { [ "$1" -le "$2" ] 2>/dev/null || fail "${3:-value}: expected <= $2, got '$1'"; }

# Which of the program ids $@ are still loaded, after up to 2 s for them to
# go: a link holding one is released a moment after the process that held
# it exited. Empty when all went.
progs_loaded() {
	local id left=
	for _ in $(seq 20); do
		left=
		for id; do bpftool prog show id "$id" >/dev/null 2>&1 && left+=" $id"; done
		[ -z "$left" ] && break
		sleep 0.1
	done
	echo $left
}

# The ids of the programs in the sockops chains of cgroup $1 (default the
# test's): the sockops modules behind each sp_sockops attached there, read
# from the program array the kernel has it use.
chain_progs() {
	local p m
	for p in $(cgroup_progs "$@"); do
		for m in $(bpftool prog show id "$p" -j | jq '.map_ids[]?'); do
			[ "$(bpftool map show id "$m" -j | jq -r .type)" = prog_array ] || continue
			# Values are ids as little-endian bytes ("0x.." each).
			bpftool map dump id "$m" -j | jq -r '.[] | .value | if type == "array"
				then map(ltrimstr("0x")) | reverse | join("") else "n\(.)" end' |
				while read -r v; do
					case $v in n*) echo "${v#n}" ;; ?*) echo $((16#$v)) ;; esac
				done
		done
	done
}

# Program ids attached to cgroup $1 (default the test's; empty when none).
# Debian's bpftool 7.1 stops with an error on 5.10 at attach types that
# kernel does not know: there, what the cgroup has beyond its parent's.
cgroup_progs() {
	local cg=${1:-$CG} out
	if out=$(bpftool cgroup show "$cg" 2>/dev/null); then
		echo "$out" | awk 'NR > 1 { print $1 }'
		return
	fi
	comm -23 <(bpftool cgroup show "$cg" effective | awk 'NR > 1 { print $1 }' | sort) \
		<(bpftool cgroup show "$(dirname "$cg")" effective | awk 'NR > 1 { print $1 }' | sort)
}
# A jq expression over `status --json`.
sp_json() { sp_ctl status --json | jq -r "$1"; }
