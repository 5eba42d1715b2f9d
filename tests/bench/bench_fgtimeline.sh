# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/fragguard.md (tests/bench/run.sh writes what this prints there)
# fragguard over time: the victim's goodput, 0.5 s at a time, while a hog
# starts flooding incomplete datagrams (t = 3 s) and then a spoofed /16
# flood starts too (t = 7 s); stock kernel vs stackpilot, one fresh receiver
# each. Writes results/fragguard-timeline.png (and a docs/ copy for docs/bench/fragguard.md).
source "$ROOT/tests/lib_frag.sh"
SECS=12
PPS=${PPS:-20000}

# Received Mbit/s per 0.5 s of peer 2's stream, "t Mbit/s" per line, as the
# receiving server counts them (a server of its own, with 0.5 s intervals).
timeline() {
	peer 2 iperf3 -u -l 4000 -b 50M -t "${1:-$SECS}" -c 10.50.2.1 -p 5302 -J --get-server-output 2>/dev/null |
		jq -r '.server_output_json.intervals[].sum | select(.seconds > 0.4) | "\(.end * 2 | round / 2) \(.bits_per_second / 1e6)"'
}

run_one() { # run_one CONFIG: prints "t Mbit/s" lines
	local p
	[ -n "$SP_PID" ] && sp_stop
	for p in "${NETNS[@]}"; do ip netns pids "$p" | xargs -r kill -KILL; ip netns del "$p"; done 2>/dev/null
	NETNS=()
	frag_topo 2
	ip netns exec "$NS_R" iperf3 -s -D -p 5302 -i 0.5 -J >/dev/null
	sleep 0.3
	# With stackpilot the victim streams first: known after 64 KiB over 2 s.
	[ "$1" = stackpilot ] && { sp_start --modules fragguard --iface rp1 --iface rp2; timeline 3 >/dev/null; }
	timeline >"$TMP/tl.$1" &
	local tl=$!
	sleep 3
	peer 1 "$FRAGFLOOD" 10.50.1.1 $((PPS * (SECS - 3))) - "$PPS" >/dev/null &
	BG_PIDS+=($!)
	sleep 4
	peer 1 "$FRAGFLOOD" 10.50.1.1 $((PPS * (SECS - 7))) 10.60.0.0/16 "$PPS" >/dev/null &
	BG_PIDS+=($!)
	wait $tl
}

run_one stock
run_one stackpilot
[ -n "$SP_PID" ] && sp_stop
join "$TMP/tl.stock" "$TMP/tl.stackpilot" >"$TMP/tl.dat"
mkdir -p "$ROOT/results" "$ROOT/docs"
png=$ROOT/results/fragguard-timeline.png
gnuplot <<GP
set terminal pngcairo size 720,360 font ",10"
set output "$png"
set title "Victim's fragmented UDP stream (50 Mbit/s offered) on one receiver"
set xlabel "seconds"
set ylabel "Mbit/s received"
set yrange [0:60]
set key bottom left
set arrow from 3, graph 0 to 3, graph 1 nohead dt 2
set arrow from 7, graph 0 to 7, graph 1 nohead dt 2
set label "hog starts" at 3.1, 57
set label "spoofed /16 flood too" at 7.1, 57
plot "$TMP/tl.dat" using 1:2 with linespoints title "stock kernel", \
     "" using 1:3 with linespoints title "stackpilot fragguard"
GP
cp "$png" "$ROOT/docs/fragguard-timeline.png"
echo "## fragguard over time"
echo
echo "Victim's goodput each 0.5 s; a hog floods incomplete datagrams from t = 3 s, a spoofed /16 flood joins at t = 7 s ($PPS first fragments/s each)."
echo
echo "![fragguard timeline](../docs/fragguard-timeline.png)"
echo
echo "| t (s) | stock, Mbit/s | stackpilot, Mbit/s |"
echo "|---|---|---|"
awk '{ printf "| %.1f | %.1f | %.1f |\n", $1, $2, $3 }' "$TMP/tl.dat"
