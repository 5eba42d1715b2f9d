# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/overhead.md (tests/bench/run.sh writes what this prints there)
# Overhead of stackpilot (all modules, defaults) on TCP over a veth pair
# between two namespaces, sender in the attached cgroup, against the same
# without stackpilot. Rounds alternate off/on so drift hits both alike.
ROUNDS=${ROUNDS:-6}
SECS=${SECS:-3}
CONNS=${CONNS:-2000}

netns_pair; make_cgroup
# Thousands of client TIME_WAITs otherwise slow port selection as the run
# goes on, which would bias whichever side runs later.
ip netns exec "$NS_A" sysctl -qw net.ipv4.tcp_tw_reuse=1 net.ipv4.ip_local_port_range="1024 65000"
ip netns exec "$NS_B" iperf3 -s -D -p 5201 -I "$TMP/iperf.pid" >/dev/null || fail iperf3
on_exit "kill \$(cat $TMP/iperf.pid)"
tcp_server 5301
sleep 0.3

tput() { # Gbit/s of one iperf3 run from the cgroup
	in_cgroup ip netns exec "$NS_A" iperf3 -c 10.77.0.2 -p 5201 -t "$SECS" -J |
		jq '.end.sum_received.bits_per_second / 1e9'
}
crate() { # connections per second, each carrying 100 bytes
	local t0=$(date +%s.%N)
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5301 100 "$CONNS" >/dev/null
	echo "$CONNS / ($(date +%s.%N) - $t0)" | bc -l
}
span() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.4g-%.4g", lo, hi }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

: >"$TMP/off.t"; : >"$TMP/on.t"; : >"$TMP/off.c"; : >"$TMP/on.c"
crate >/dev/null	# warm-up
measure() { tput >>"$TMP/$1.t"; crate >>"$TMP/$1.c"; }
with_sp() {
	sp_start --cgroup "$CG"
	measure on
	"$SP" status --json --pin-path "$PIN" >"$TMP/status.json"
	sp_stop
}
for r in $(seq "$ROUNDS"); do	# ABBA: neither side always goes first
	if [ $((r % 2)) = 1 ]; then measure off; with_sp; else with_sp; measure off; fi
done

off_t=$(median <"$TMP/off.t"); on_t=$(median <"$TMP/on.t")
off_c=$(median <"$TMP/off.c"); on_c=$(median <"$TMP/on.c")
echo "## Overhead: TCP over veth, sender in the attached cgroup"
echo
echo "Median of $ROUNDS alternating rounds; iperf3 ${SECS} s single stream; $CONNS sequential 100-byte connections."
echo
echo "| metric | without stackpilot (range) | with stackpilot (range) | ratio of medians (with / without) |"
echo "|---|---|---|---|"
printf '| throughput, Gbit/s | %.2f (%s) | %.2f (%s) | %.3f |\n' "$off_t" "$(span <"$TMP/off.t")" \
	"$on_t" "$(span <"$TMP/on.t")" "$(echo "$on_t / $off_t" | bc -l)"
printf '| connection rate, conn/s | %.0f (%s) | %.0f (%s) | %.3f |\n' "$off_c" "$(span <"$TMP/off.c")" \
	"$on_c" "$(span <"$TMP/on.c")" "$(echo "$on_c / $off_c" | bc -l)"
echo
echo "| program | runs (last measurement) | average run time, ns |"
echo "|---|---|---|"
jq -r '.programs[] | "| \(.name) | \(.run_cnt) | \(.avg_ns) |"' "$TMP/status.json"
