# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/overhead.md (tests/bench/run.sh writes what this prints there)
# Overhead of stackpilot (all modules, defaults) on TCP over a veth pair
# between two namespaces, sender in the attached cgroup, against the same
# without stackpilot. Rounds alternate off/on so drift hits both alike.
ROUNDS=${ROUNDS:-8}
SECS=${SECS:-3}
# Long enough (about a second) that one scheduling hiccup is not the round.
CONNS=${CONNS:-10000}

netns_pair; make_cgroup
# Thousands of client TIME_WAITs otherwise slow port selection as the run
# goes on, which would bias whichever side runs later.
ip netns exec "$NS_A" sysctl -qw net.ipv4.tcp_tw_reuse=1 net.ipv4.ip_local_port_range="1024 65000"
ip netns exec "$NS_B" iperf3 -s -D -p 5201 -I "$TMP/iperf.pid" >/dev/null || fail iperf3
on_exit "kill \$(cat $TMP/iperf.pid)"
tcp_server 5301
tcp_server 5302 reply
sleep 0.3

tput() { # Gbit/s of one iperf3 run from cgroup $1 (default $CG)
	in_cgroup_at "${1:-$CG}" \
		ip netns exec "$NS_A" iperf3 -c 10.77.0.2 -p 5201 -t "$SECS" -J |
		jq '.end.sum_received.bits_per_second / 1e9' | grep . || fail "iperf3"
}
# Connections per second of one-request fetches (connect, 100 bytes each
# way, the server's close) from cgroup $1 (default $CG), $2 of them (CONNS).
crate() {
	in_cgroup_at "${1:-$CG}" \
		ip netns exec "$NS_A" "$TCPTOOL" fetch 10.77.0.2 5302 100 "${2:-$CONNS}" |
		awk -F'[= ]' '$1 == "fetches" && $4 > 0 { print $2 / $4 }' | grep . || fail "tcptool fetch"
}
span() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.4g-%.4g", lo, hi }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

: >"$TMP/off.t"; : >"$TMP/on.t"; : >"$TMP/off.c"; : >"$TMP/on.c"; : >"$TMP/stats.c"; : >"$TMP/rpm"; : >"$TMP/rpc"; : >"$TMP/ns"
crate >/dev/null	# warm-up
measure() { tput >>"$TMP/$1.t"; crate >>"$TMP/$1.c"; }
# Every sockops program's runs so far, "name runs ns" lines.
progs() {
	"$SP" status --json --pin-path "$PIN" |
		jq -r '.programs[] | select(.name == "sp_sockops") | "\(.name) \(.run_cnt) \(.avg_ns)"' | sort
}
# Runs per MB after the handshake: one connection of 1 KiB, then one of
# RUNS_MB MiB (paced); what the second ran beyond the first, per MB.
RUNS_MB=${RUNS_MB:-256}
rpm() {
	local a b c
	a=$(progs)
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5301 1024 1 >/dev/null
	b=$(progs)
	# Paced at 512 MiB/s, a third of what one stream reaches here: a clean
	# flow (no queue overflows into loss callbacks, which are not steady state).
	in_cgroup ip netns exec "$NS_A" env TCPTOOL_PACING=$((512 << 20)) \
		"$TCPTOOL" client 10.77.0.2 5301 $((RUNS_MB << 20)) 1 60 >/dev/null
	c=$(progs)
	join <(echo "$a") <(echo "$b") | join - <(echo "$c") |
		awk -v mb="$RUNS_MB" '{ printf "%s %.4f\n", $1, (($6 - $4) - ($4 - $2)) / mb }' >>"$TMP/rpm"
}
with_sp() {
	local a
	# As an operator runs it: without --bpf-stats, whose clock reads every
	# BPF program of the host would pay.
	sp_start --cgroup "$CG"
	measure on
	sp_stop
	# Then with the kernel's run counts and times, to see per program; the
	# connection rate again, to see what the counting costs.
	sp_start --cgroup "$CG" $(sp_stats_opt)
	a=$(progs)
	crate >>"$TMP/stats.c"
	join <(echo "$a") <(progs) >"$TMP/before-after"
	awk -v n="$CONNS" '{ printf "%s %.2f\n", $1, ($4 - $2) / n }' "$TMP/before-after" >>"$TMP/rpc"
	progs | awk '{ print $1, $3 }' >>"$TMP/ns"
	rpm
	sp_stop
}
for r in $(seq "$ROUNDS"); do	# ABBA: neither side always goes first
	if [ $((r % 2)) = 1 ]; then measure off; with_sp; else with_sp; measure off; fi
done

# The design (docs/architecture.md): one program a run, sp_sockops, with
# the modules behind it in a chain of tail calls. An empty sockops program
# beside it, on the connection-rate load, measures what the kernel's
# dispatch of one program costs and the events per connection.
sp_start --cgroup "$CG" $(sp_stats_opt)
coproc FLOOR { exec "$BUILD/sockops_floor" "$CG"; }
read -r floor_id <&"${FLOOR[0]}" || fail "sockops_floor did not start"
crate >/dev/null
read -r floor_runs floor_ns < <(bpftool prog show id "$floor_id" -j | jq -r '"\(.run_cnt // 0) \(.run_time_ns // 0)"')
exec {FLOOR[1]}>&-
wait "$FLOOR_PID"
sp_stop

# The connection rate again, paired: stackpilot attached to $CG the whole
# time; the same load from $CG and from a sibling cgroup it is not attached
# to (no program of it runs there), taking turns every PAIR_CONNS
# connections. A ratio of two adjacent runs: the machine's drift (the
# baseline moved by 20% between two runs of this benchmark) cancels. Each
# module alone, then the defaults together: what each costs.
PAIRS=${PAIRS:-24}
PAIR_CONNS=${PAIR_CONNS:-4000}
# emptyN: N empty sockops programs instead (sockops_floor), what the
# kernel's dispatch of N programs costs before any module's work: what one
# program calling every module would save (docs/architecture.md).
# learned:MODULES: after one 1 MiB connection, which proves the path to
# pmtu (stackpilot runs in the host's namespace, the connections in
# another: pmtu cannot probe them, as for a container's, and a fetch
# proves nothing). Without it, one fetch a second waits for its proof
# (SP_PM_PROVER_T; before 2026-12-03, every fetch did).
PAIR_SETS=${PAIR_SETS:-"empty1 empty3 tcpstats rehash pmtu tcpstats,rehash,pmtu learned:tcpstats,rehash,pmtu"}
mkdir "$CG-off" || fail "mkdir $CG-off"
# pair R MEASURE [ARGS]: "without with", MEASURE run from the sibling and
# from $CG (its first argument the cgroup); which goes first alternates with R.
pair() {
	local r=$1 m=$2 a b; shift 2
	if [ $((r % 2)) = 1 ]; then a=$($m "$CG-off" "$@"); b=$($m "$CG" "$@")
	else b=$($m "$CG" "$@"); a=$($m "$CG-off" "$@"); fi
	echo "$a $b"
}
# "without with" lines in, the ratios' summary out: "median [95% interval]
# (quartiles) | pairs at 0.99 or more". The interval is the median's
# distribution-free one, between the order statistics n/2 -+ 0.98 sqrt(n)
# (binomial, normal approximation): whether a run of pairs can tell a
# ratio from 0.99 at all. 48 pairs scatter about +-0.005 around theirs.
pair_summary() {
	awk '$1 > 0 { print $2 / $1 }' | sort -g | awk '
		{ r[NR] = $1; if ($1 >= 0.99) k++ }
		END {
			m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
			h = 0.98 * sqrt(NR); lo = int(NR / 2 - h); hi = int(NR / 2 + 1 + h + 0.999)
			if (lo < 1) lo = 1
			if (hi > NR) hi = NR
			printf "%.3f [%.3f-%.3f] (%.3f-%.3f) | %d of %d", m, r[lo], r[hi],
				r[int((NR + 3) / 4)], r[int((3 * NR + 3) / 4)], k, NR
		}'
}
on_exit "rmdir $CG-off"
empty_on() { # empty_on N: N empty sockops programs on $CG until empty_off
	local i
	mkfifo "$TMP/empty" || fail "mkfifo"
	EMPTY_PIDS=()
	for i in $(seq "$1"); do
		"$BUILD/sockops_floor" "$CG" <"$TMP/empty" >>"$TMP/empty.ids" &
		EMPTY_PIDS+=($!); BG_PIDS+=($!)
	done
	exec {EMPTY_FD}>"$TMP/empty"
	for i in $(seq 50); do
		[ "$(wc -l <"$TMP/empty.ids")" -ge "$1" ] && return
		sleep 0.1
	done
	fail "sockops_floor did not attach"
}
empty_off() { exec {EMPTY_FD}>&-; wait "${EMPTY_PIDS[@]}"; rm -f "$TMP/empty" "$TMP/empty.ids"; }
for set in $PAIR_SETS; do
	case $set in
	empty*) empty_on "${set#empty}" ;;
	learned:*)
		sp_start --cgroup "$CG" --modules "${set#learned:}"
		in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5301 $((1 << 20)) 1 >/dev/null ||
			fail "the 1 MiB connection"
		[ "$(sp_num '.modules.pmtu.learned_from_connections')" -ge 1 ] ||
			fail "pmtu did not learn from the 1 MiB connection"
		;;
	*) sp_start --cgroup "$CG" --modules "$set" ;;
	esac
	for r in $(seq "$PAIRS"); do	# which side goes first alternates too
		echo "$set $(pair "$r" crate "$PAIR_CONNS")" >>"$TMP/pairs"
	done
	case $set in
	empty*) empty_off ;;
	*) sp_stop ;;
	esac
done

# Throughput paired the same way, the defaults attached throughout: one
# iperf3 run from $CG, one from the sibling, adjacent. Started and stopped
# rounds (above) moved 0.966-1.020 between sessions, too coarse for 0.99.
TPUT_PAIRS=${TPUT_PAIRS:-12}
if [ "$TPUT_PAIRS" -gt 0 ]; then
	sp_start --cgroup "$CG"
	for r in $(seq "$TPUT_PAIRS"); do
		pair "$r" tput >>"$TMP/tpairs"
	done
	sp_stop
fi

off_t=$(median <"$TMP/off.t"); on_t=$(median <"$TMP/on.t")
off_c=$(median <"$TMP/off.c"); on_c=$(median <"$TMP/on.c"); st_c=$(median <"$TMP/stats.c")
echo "## Overhead: TCP over veth, sender in the attached cgroup"
echo
echo "Median of $ROUNDS alternating rounds, stackpilot started and stopped; iperf3 ${SECS} s single stream;"
echo "$CONNS sequential one-request fetches (each a connect, 100 bytes each way, the server's close)."
echo
echo "| metric | without stackpilot (range) | with stackpilot (range) | ratio of medians (with / without) |"
echo "|---|---|---|---|"
printf '| throughput, Gbit/s | %.2f (%s) | %.2f (%s) | %.3f |\n' "$off_t" "$(span <"$TMP/off.t")" \
	"$on_t" "$(span <"$TMP/on.t")" "$(echo "$on_t / $off_t" | bc -l)"
printf '| connection rate, conn/s | %.0f (%s) | %.0f (%s) | %.3f |\n' "$off_c" "$(span <"$TMP/off.c")" \
	"$on_c" "$(span <"$TMP/on.c")" "$(echo "$on_c / $off_c" | bc -l)"
printf '| connection rate with --bpf-stats, conn/s | %.0f (%s) | %.0f (%s) | %.3f |\n' "$off_c" "$(span <"$TMP/off.c")" \
	"$st_c" "$(span <"$TMP/stats.c")" "$(echo "$st_c / $off_c" | bc -l)"
echo
echo "Paired, the headline for the connection rate: $PAIRS pairs of $PAIR_CONNS fetches a set of modules,"
echo "stackpilot attached throughout, one run of a pair from the attached cgroup and one from a sibling"
echo "cgroup it is not attached to, adjacent in time. Ratio with / without: the median over the pairs"
echo "with its 95% interval and its quartiles; cost: what a connection took longer, from the pairs' mean rates."
echo
echo "| attached (emptyN: N empty programs) | connection rate, with / without [95% interval] (quartiles) | pairs at 0.99 or more | cost per connection, us |"
echo "|---|---|---|---|"
for set in $PAIR_SETS; do
	printf '| %s | %s | %s |\n' "$set" "$(awk -v s="$set" '$1 == s { print $2, $3 }' "$TMP/pairs" | pair_summary)" \
		"$(awk -v s="$set" '$1 == s { n++; a += $2; b += $3 } END { printf "%.2f", 1e6 * n / b - 1e6 * n / a }' "$TMP/pairs")"
done
if [ "$TPUT_PAIRS" -gt 0 ]; then
	echo
	echo "Throughput paired: $TPUT_PAIRS pairs of ${SECS} s iperf3 runs, the defaults attached throughout, one run"
	echo "from the attached cgroup and one from the sibling, adjacent in time."
	echo
	echo "| attached | throughput, with / without [95% interval] (quartiles) | pairs at 0.99 or more | Gbit/s without, with (medians) |"
	echo "|---|---|---|---|"
	printf '| tcpstats,rehash,pmtu | %s | %.2f, %.2f |\n' "$(pair_summary <"$TMP/tpairs")" \
		"$(awk '{ print $1 }' "$TMP/tpairs" | median)" "$(awk '{ print $2 }' "$TMP/tpairs" | median)"
fi
echo
echo "Per program (medians over the rounds): runs per connection of the connection-rate load;"
echo "runs per MB after the handshake (one ${RUNS_MB} MiB connection's runs, paced at 512 MiB/s, beyond a 1 KiB one's,"
echo "per MB); the average run time the kernel measured (run --bpf-stats: its own clock reads included)."
echo
echo "| program | runs per connection | runs per MB after the handshake | average run, ns |"
echo "|---|---|---|---|"
for p in $(awk '{ print $1 }' "$TMP/rpc" | sort -u); do
	printf '| %s | %s | %s | %s |\n' "$p" \
		"$(awk -v p="$p" '$1 == p { print $2 }' "$TMP/rpc" | median)" \
		"$(awk -v p="$p" '$1 == p { print $2 }' "$TMP/rpm" | median)" \
		"$(awk -v p="$p" '$1 == p { print $2 }' "$TMP/ns" | median)"
done
echo
awk -v r="$floor_runs" -v t="$floor_ns" -v n="$CONNS" 'BEGIN {
	printf "An empty sockops program beside it: %.1f runs per connection, %.1f ns a run (with --bpf-stats:\n", r / n, r ? t / r : 0
	printf "its two clock reads included). sp_sockops runs the modules by tail calls, no runs of their own;\n"
	printf "the paired empty1 and empty3 rows, where measured, give the dispatch of one program and of three.\n"
}'
