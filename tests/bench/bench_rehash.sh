# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/rehash.md (tests/bench/run.sh writes what this prints there)
# rehash: Brakmo's scenarios and issue 11's on the ECMP testbed, every result
# as a ratio to the oracle measured in the same run.
# Configurations (switched between runs; run i of every configuration is done
# before run i+1 of any, so drift hits all alike):
#   oracle   best static placement: R1 pins the flows one per path round-robin
#            (policy routing, tests/lib_ecmp.sh ecmp_oracle); with a lossy
#            path, all flows on the good one. prob=0, no kernel rehash.
#   kernel   prob=0: only the kernel's own RTO rehash (stock Linux)
#   p20m0    prob=20 mode=0 (the patch's default)
#   p20m1    prob=20 mode=1
#   memory   prob=20 mode=1 with path memory (revert_pct=RH_REVERT)
#   corr     policy=1 mode=1: rehash episodes within one srtt of a sibling's
#   dens     policy=2 mode=1: rehash flows losing > 3 x the pair's best per byte
#   reuse    policy=2 mode=1 reuse=1: and start / land on known-good hashes
# Per run: goodput of the cgroup's flows / the oracle's goodput in the same
# round, and fairness = fastest / slowest of the cgroup's flows.
# The machine this was written on is small and shared: RUNS and SECS default
# to 3 x 8 s, FAIR_SECS (2x7, 3x6, 3x16) to 30 s (the issue asks for 10 runs):
# say so beside any number.
# FLOWS=1 also writes each flow of each run to $RAW.flows: "scenario|config|
# run|port Mbit/s rehashes reverts episodes rtos" (the last four from
# rehash_conns, per address and port pair: a port an earlier run used adds
# to its counts; "- - - -" for a connection with none of them), then
# "z=N" (1-s intervals in which it delivered nothing) and "rtx=N" (its
# retransmitted segments, iperf3's count), to find out what the slowest flow
# of a bad run went through.
source "$ROOT/tests/lib_ecmp.sh"
RUNS=${RUNS:-3}
SECS=${SECS:-8}
FAIR_SECS=${FAIR_SECS:-30}
RH_REVERT=${RH_REVERT:-85}
CONFIGS=${CONFIGS:-"oracle kernel p20m0 p20m1 memory dens"}
LOSSY=
CROSS=
FAMILY=6

set_config() {
	local sets off="rehash.policy=0 rehash.reuse=0"
	case $1 in
	oracle|kernel) sets="rehash.prob=0 rehash.mode=0 rehash.revert_pct=0 $off" ;;
	p20m0) sets="rehash.prob=20 rehash.mode=0 rehash.revert_pct=0 $off" ;;
	p20m1) sets="rehash.prob=20 rehash.mode=1 rehash.revert_pct=0 $off" ;;
	memory) sets="rehash.prob=20 rehash.mode=1 rehash.revert_pct=$RH_REVERT $off" ;;
	corr) sets="rehash.prob=20 rehash.mode=1 rehash.revert_pct=0 rehash.policy=1 rehash.reuse=0" ;;
	dens) sets="rehash.prob=20 rehash.mode=1 rehash.revert_pct=0 rehash.policy=2 rehash.reuse=0" ;;
	reuse) sets="rehash.prob=20 rehash.mode=1 rehash.revert_pct=0 rehash.policy=2 rehash.reuse=1" ;;
	esac
	"$SP" set --pin-path "$PIN" $sets >/dev/null || fail "set $1"
	if [ "$1" != oracle ]; then
		ecmp_oracle off
	elif [ -n "$LOSSY" ]; then
		# Oracle with a lossy path 1: everything on path 0.
		ecmp_oracle off
		ip netns exec "$NS_S" sysctl -qw net.core.txrehash=0
	else
		ecmp_oracle on
	fi
	ip -n "$NS_R1" -6 rule del pref 950 2>/dev/null; ip -n "$NS_R1" -4 rule del pref 950 2>/dev/null
	if [ "$1" = oracle ] && [ -n "$LOSSY" ]; then
		ip -n "$NS_R1" -6 rule add ipproto tcp dport 5201 table 100 pref 950
		ip -n "$NS_R1" -4 rule add ipproto tcp dport 5201 table 100 pref 950
	fi
	return 0
}

# One iperf3 run with N flows from the cgroup: prints "goodput_bps fairness".
# With CROSS, a flow from outside the cgroup, pinned to path 0, runs alongside.
run_flows() {
	local dst=fd02::2 xp=
	[ "$FAMILY" = 4 ] && dst=10.99.0.2
	if [ -n "$CROSS" ]; then
		ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5202 -t $((SECS + 1)) >/dev/null 2>&1 &
		xp=$!
		sleep 0.5
	fi
	# iperf3's server takes one client at a time: a run right after one
	# whose control connection crossed the 50%-loss path can find it still
	# busy. Tried again then (up to 3 times). Every try that gave no
	# result goes to $RAW.err, with iperf3's error if it printed one.
	local try err out
	for try in 1 2 3; do
		in_cgroup ip netns exec "$NS_S" iperf3 -$FAMILY -c $dst -p 5201 -t "$SECS" -P "$1" -J \
			>"$TMP/iperf.json"
		out=$(jq -r '[.end.streams[].receiver.bits_per_second] as $b |
			"\($b | add) \(($b | max) / ([($b | min), 1] | max))"' "$TMP/iperf.json" 2>/dev/null)
		[ -n "$out" ] && break
		err=$(jq -r '.error // empty' "$TMP/iperf.json" 2>/dev/null)
		echo "$name|$cfg|$r|try $try: ${err:-no result, no error}" >>"$RAW.err"
		case $err in *busy*) sleep 1 ;; *) break ;; esac
	done
	echo "$out"
	[ -n "$out" ] && [ -n "${FLOWS:-}" ] && flow_lines >>"$RAW.flows"
	[ -n "$xp" ] && wait "$xp"
}

# Each stream of the last run, with its connection's counters (FLOWS=1).
flow_lines() {
	local conns=$(bpftool -j map dump pinned "$PIN/rehash_conns" 2>/dev/null |
		jq -c 'if type == "array" then [.[] | .formatted |
			{(.key.sport | tostring): .value}] | add // {} else {} end' 2>/dev/null)
	[ -n "$conns" ] || conns='{}'
	jq -r --argjson c "$conns" --arg pre "$name|$cfg|$r" '
		(.start.connected | map({(.socket | tostring): .local_port}) | add) as $port |
		([.intervals[].streams[] | select(.bytes == 0) | .socket] | group_by(.) |
			map({(.[0] | tostring): length}) | add // {}) as $zero |
		.end.streams[] | .sender.retransmits as $rtx | .receiver |
		(.socket | tostring) as $s | ($port[$s] | tostring) as $p |
		"\($pre)|\($p) \(.bits_per_second / 1e6 * 100 | floor / 100) " +
		($c[$p] // null | if . then "\(.rehashes) \(.reverts) \(.episodes) \(.rtos)" else "- - - -" end) +
		" z=\($zero[$s] // 0) rtx=\($rtx // "?")"' \
		"$TMP/iperf.json"
}

# The run's txhash changes: "moves reverts rtos episodes" so far; with the
# earlier line as argument, since then. moves: rehashes applied (at once,
# deferred, forced); reverts: back to the old txhash (path memory, RTO
# steering); rtos: RTOs, each a kernel rehash unless steered (txrehash=1 on S).
rh_counts() {
	local now
	# An earlier reading that failed: no changes to give.
	[ "$#" = 0 ] || [ -n "$1" ] || return 0
	now=$(sp_json '.modules.rehash | "\(.rehash_now + .rehash_deferred_done + .rehash_deferred_forced) \(.memory_reverted) \(.rto) \(.episodes)"')
	[ "$#" = 0 ] && { echo "$now"; return; }
	awk -v a="$now" -v b="$1" 'BEGIN { n = split(a, x); split(b, y)
		for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? " " : ""), x[i] - y[i] }'
}

scenario() { # scenario NAME PATHS RATES FLOWS [lossy|cross|vxlan|fair]
	local name=$1 paths=$2 rates=$3 flows=$4 kind=${5:-} cfg r SECS=$SECS c0 res
	[ "$kind" = fair ] && SECS=$FAIR_SECS
	cleanup_topo
	LOSSY= CROSS= FAMILY=6
	ecmp_topo "$paths" "$rates"
	ip netns exec "$NS_D" iperf3 -s -D -p 5201 >/dev/null || fail iperf3
	case $kind in
	lossy)	# path 1 drops half of what R1 sends on it
		printf 'table inet sp {\n chain c_fwd {\n type filter hook forward priority 0;\n oifname "p1" numgen random mod 2 == 0 drop\n }\n}\n' |
			ip netns exec "$NS_R1" nft -f - || fail "nft lossy path"
		LOSSY=1 ;;
	cross)	ip netns exec "$NS_D" iperf3 -s -D -p 5202 >/dev/null || fail iperf3
		ecmp_cross_pin 5202
		CROSS=1 ;;
	vxlan)	ecmp_vxlan
		FAMILY=4 ;;
	esac
	sleep 0.2
	for r in $(seq "$RUNS"); do
		for cfg in $CONFIGS; do
			set_config "$cfg"
			c0=$(rh_counts)
			res=$(run_flows "$flows")
			[ -n "$res" ] && res="$res $(rh_counts "$c0")"
			echo "$name|$cfg|$r|$res" >>"$RAW"
		done
	done
}

cleanup_topo() {
	local p
	for p in "${NETNS[@]}"; do ip netns pids "$p" | xargs -r kill -KILL; ip netns del "$p"; done 2>/dev/null
	NETNS=()
}

# The per-ACK price: one clean bulk flow over a veth pair (no loss), then 2
# lossy flows on 2 x 100 Mbit/s (prob=20), each with a fresh stackpilot:
# sp_sockops runs (rehash alone behind it) and run time per MB delivered,
# average per run, and RTT
# callbacks per MB. Then the same workload with rhfloor instead (a sockops
# program that only asks for RTT callbacks: every ACK runs it warm): what
# one run of any sockops program is counted here, the floor under "avg per
# run". For the numbers before issue 11, run it with SP_BUILD pointing at a
# build of an older commit.
cost() {
	local b fb runs ns label fp
	for label in clean lossy; do
		cleanup_topo
		if [ $label = clean ]; then
			netns_pair
			ip netns exec "$NS_B" iperf3 -s -D -p 5201 >/dev/null || fail iperf3
		else
			ecmp_topo 2 100mbit
			ip netns exec "$NS_D" iperf3 -s -D -p 5201 >/dev/null || fail iperf3
		fi
		sp_start --cgroup "$CG" --modules rehash $(sp_stats_opt)
		sleep 0.3
		b=$(cost_flow $label)
		sp_ctl status --json >"$TMP/cost.json"
		sp_stop
		rm -rf "$PIN"
		"$BUILD/rhfloor" "$CG" >"$TMP/floor" &
		fp=$!
		BG_PIDS+=($fp)
		for _ in $(seq 50); do
			grep -qx ready "$TMP/floor" && break
			kill -0 "$fp" 2>/dev/null || fail "rhfloor exited"
			sleep 0.1
		done
		grep -qx ready "$TMP/floor" || fail "rhfloor did not start in 5 s"
		fb=$(cost_flow $label)
		kill -TERM "$fp"
		wait "$fp" || fail "rhfloor failed"
		read -r _ runs _ ns < <(grep '^runs ' "$TMP/floor")
		[ -n "$ns" ] || fail "rhfloor printed no counts"
		jq -r --arg l "$label" --argjson b "$b" --argjson fb "$fb" --argjson runs "$runs" --argjson ns "$ns" '
			(.modules.rehash | if .rtt_callbacks == null then "n/a"
			 else "\(.rtt_callbacks) (\(.rtt_callbacks_per_mb))" end) as $cpm |
			.programs[] | select(.name == "sp_sockops") |
			"| \($l) | \($b / 1e6 | floor) | \(.run_cnt / ($b / 1e6) * 100 | floor / 100) | \(.run_time_ns / ($b / 1e6) | floor) | \(.avg_ns | floor) | \($cpm) | \($ns / ([$runs, 1] | max) | floor) (\($runs / ($fb / 1e6) * 100 | floor / 100)) |"' \
			"$TMP/cost.json"
	done
}

# The cost workload's flow(s) from the cgroup: prints the bytes delivered.
cost_flow() {
	if [ "$1" = clean ]; then
		in_cgroup ip netns exec "$NS_A" iperf3 -c 10.77.0.2 -p 5201 -t "$SECS" -J
	else
		in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t "$SECS" -P 2 -J
	fi | jq '.end.sum_received.bytes'
}

# The Markdown rows from raw files ("scenario|config|run|goodput fairness"
# lines); several files pool their runs (run r of file f pairs with the
# oracle's run r of file f).
table() {
	awk -F'|' -v cfgs="$CONFIGS" '
	FNR == 1 { fi++ }
	# A run iperf3 gave no result for (its JSON had none) is left out,
	# not counted as 0.
	$4 == "" { next }
	{ split($4, f, " "); name = $1; cfg = $2; r = fi "." $3
	  g[name, cfg, r] = f[1]; fair[name, cfg, r] = f[2]
	  if (!((name, r) in hasrun)) { hasrun[name, r] = 1; runs[name] = runs[name] " " r }
	  if (!(name in seen)) { seen[name] = 1; order[++no] = name } }
	END {
	  nc = split(cfgs, cf, " ")
	  for (i = 1; i <= no; i++) {
		n = order[i]; line = "| " n " goodput |"; line2 = "| " n " fairness |"
		nr = split(runs[n], rl, " ")
		for (j = 1; j <= nc; j++) {
			s = 0; w = 1e9; fs = 0; fw = 0; k = 0
			for (q = 1; q <= nr; q++) { r = rl[q]
				if (!((n, cf[j], r) in g) || !g[n, "oracle", r]) continue
				x = cf[j] == "oracle" ? g[n, "oracle", r] / 1e6 : g[n, cf[j], r] / g[n, "oracle", r]
				s += x; if (x < w) w = x; k++
				fs += fair[n, cf[j], r]; if (fair[n, cf[j], r] > fw) fw = fair[n, cf[j], r]
			}
			if (!k) { line = line " - |"; line2 = line2 " - |"; continue }
			line = line sprintf(cf[j] == "oracle" ? " %.1f (%.1f) |" : " %.3f (%.3f) |", s / k, w)
			line2 = line2 sprintf(" %.2f (%.2f) |", fs / k, fw)
		}
		print line; print line2 } }' "$@"
}

# Per cell, mean per run of what rh_counts recorded (runs that have it):
# "moves / reverts / RTOs (episodes)".
counts_table() {
	awk -F'|' -v cfgs="$CONFIGS" '
	{ n = split($4, f, " "); if (n < 6) next
	  k = $1 SUBSEP $2; runs[k]++; for (i = 3; i <= 6; i++) sum[k, i] += f[i]
	  if (!($1 in seen)) { seen[$1] = 1; order[++no] = $1 } }
	END {
	  nc = split(cfgs, cf, " ")
	  for (i = 1; i <= no; i++) {
		line = "| " order[i] " |"
		for (j = 1; j <= nc; j++) {
			k = order[i] SUBSEP cf[j]
			if (!runs[k]) { line = line " - |"; continue }
			line = line sprintf(" %.1f / %.1f / %.1f (%.0f) |", sum[k, 3] / runs[k],
				sum[k, 4] / runs[k], sum[k, 5] / runs[k], sum[k, 6] / runs[k])
		}
		print line } }' "$@"
}

header() {
	local c h="| scenario |" l="|---|"
	for c in $CONFIGS; do
		case $c in
		kernel) c="kernel (prob=0)" ;;
		p20m0) c="prob=20 mode=0" ;;
		p20m1) c="prob=20 mode=1" ;;
		memory) c="memory (p20m1, revert_pct=$RH_REVERT)" ;;
		corr) c="policy=1 (timing)" ;;
		dens) c="policy=2 (density)" ;;
		reuse) c="policy=2 + reuse" ;;
		esac
		h="$h $c |" l="$l---|"
	done
	echo "$h"; echo "$l"
}

# POOL="results/rehash-raw-A.txt results/rehash-raw-B.txt": only the table,
# pooled over earlier runs' raw files; with COUNTS=1, the txhash changes per
# run instead (moves / reverts / RTOs (loss episodes)).
if [ -n "${POOL:-}" ]; then
	header
	if [ -n "${COUNTS:-}" ]; then counts_table $POOL; else table $POOL; fi
	return 0 2>/dev/null || exit 0
fi

make_cgroup
if [ "${SCENARIOS:-}" = cost ]; then
	echo "## rehash: per-ACK cost ($SECS s per flow)"
	echo
	echo "| workload | MB delivered | sp_sockops (rehash) runs per MB | run time per MB, ns | avg per run, ns | RTT callbacks (per MB) | empty sockops program: avg per run, ns (runs per MB) |"
	echo "|---|---|---|---|---|---|---|"
	cost
	return 0 2>/dev/null || exit 0
fi
sp_start --cgroup "$CG" --modules rehash
# Written as it goes: a session cut short keeps what it measured.
mkdir -p "$ROOT/results"
RAW=$ROOT/results/rehash-raw-$ID.txt
: >"$RAW"
for s in ${SCENARIOS:-2x2 2x7 3x6 3x16 lossy unequal cross vxlan}; do
	case $s in
	2x2) scenario "2 paths, 2 flows" 2 100mbit 2 ;;
	2x7) scenario "2 paths, 7 flows" 2 100mbit 7 fair ;;
	3x6) scenario "3 paths, 6 flows" 3 100mbit 6 fair ;;
	3x16) scenario "3 paths, 16 flows" 3 100mbit 16 fair ;;
	lossy) scenario "2 paths (one drops 50%), 7 flows" 2 100mbit 7 lossy ;;
	unequal) scenario "unequal paths 100+50, 3 flows" 2 100mbit,50mbit 3 ;;
	cross) scenario "2 paths, 2 flows + 1 cross flow on path 0" 2 100mbit 2 cross ;;
	vxlan) scenario "IPv4 over VXLAN, 2 paths, 2 flows" 2 100mbit 2 vxlan ;;
	esac
done

echo "## rehash: goodput and fairness on ECMP, as ratios to the oracle"
echo
echo "Paths of 100 Mbit/s unless named (tbf, 5 ms queue). $RUNS runs of $SECS s per cell"
echo "($FAIR_SECS s for 2x7, 3x6, 3x16),"
echo "configurations interleaved, fresh connections each run."
echo "goodput = the cgroup's goodput / the oracle's in the same round; fairness = fastest /"
echo "slowest of the cgroup's flows. mean (worst) over runs. oracle goodput in Mbit/s."
echo
header
table "$RAW"
echo
echo "rehash counters over the whole benchmark: $(sp_json '.modules.rehash | del(.connections, .windows) | tostring')"
echo
echo "path-memory windows (last 64): $(sp_json '[.modules.rehash.windows[] | .reverted] | "\(length) windows, \(add // 0) reverted"')"
