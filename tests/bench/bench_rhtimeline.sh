# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/rehash.md (tests/bench/run.sh writes what this prints there)
# rehash over time: two flows that share one path of the ECMP testbed
# (2 x 100 Mbit/s), each flow's goodput and each path's rate every 0.5 s:
# configurations as in bench_rehash.sh, one after the other: stock
# (rehash.prob=0: only the kernel's own RTO rehash), p20m0 (the defaults:
# prob=20 mode=0), p20m1 (prob=20 mode=1) and memory (p20m1 with path memory,
# revert_pct=RH_REVERT). Default CONFIGS: stock, p20m1, memory: with mode=0
# a flow that had an RTO is never rehashed for balance, and on this testbed
# nearly every flow has one in slow start, so p20m0 looks like stock. Writes
# results/rehash-timeline.png (and a docs/ copy for docs/bench/rehash.md).
#
# Every run starts with prob=0 and is kept only if, WARM s in (past slow
# start, whose RTOs make the kernel itself rehash), one path carries both
# flows; then the configuration's settings are applied. So each picture
# starts from the same state, flows sharing a path in steady state, and
# shows what moves them. A run that is not there at WARM s is stopped and
# started again; the Markdown says how many starts each needed.
source "$ROOT/tests/lib_ecmp.sh"
SECS=${SECS:-12}
WARM=${WARM:-3}
TRIES=${TRIES:-60}
RH_REVERT=${RH_REVERT:-85}
CONFIGS=${CONFIGS:-"stock p20m1 memory"}

# Bytes R1 sent on paths 0 and 1, one process for both (path_tx runs ip and
# jq per path, and came back empty now and then under this load).
paths_tx() {
	ip netns exec "$NS_R1" cat /sys/class/net/p0/statistics/tx_bytes /sys/class/net/p1/statistics/tx_bytes |
		paste -sd' '
}

# Each path's Mbit/s over 0.5 s steps for $1 s: "t p0 p1" lines, t since the
# start; a step whose counters could not be read is left out.
sample_paths() {
	local t0 now a b prev
	t0=$(date +%s.%N) prev=$t0 a=$(paths_tx)
	for _ in $(seq $(($1 * 2))); do
		sleep 0.5
		now=$(date +%s.%N) b=$(paths_tx)
		awk -v t="$now" -v t0="$t0" -v p="$prev" -v a="$a" -v b="$b" 'BEGIN {
			split(a, x, " "); split(b, y, " ")
			if (x[2] == "" || y[2] == "" || y[1] < x[1] || y[2] < x[2]) exit
			printf "%.2f %.1f %.1f\n", t - t0, (y[1] - x[1]) * 8 / (t - p) / 1e6, (y[2] - x[2]) * 8 / (t - p) / 1e6 }'
		prev=$now a=$b
	done
}

# The last path sample shows one path above 80 Mbit/s, the other under 5.
one_path() {
	tail -1 "$1" | awk '{ exit !(($2 > 80 && $3 < 5) || ($3 > 80 && $2 < 5)) }'
}

run_one() { # run_one CONFIG SETS: $TMP/tl.CONFIG "t flow1 flow2", $TMP/paths.CONFIG, $TMP/tries.CONFIG
	local try ipf smp
	for try in $(seq "$TRIES"); do
		sp_ctl set rehash.prob=0 >/dev/null || fail set
		in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t "$SECS" -P 2 -J \
			--get-server-output >"$TMP/ip.$1" 2>/dev/null &
		ipf=$!
		sample_paths "$SECS" >"$TMP/paths.$1" &
		smp=$!
		sleep "$WARM"
		if one_path "$TMP/paths.$1"; then
			sp_ctl set $2 >/dev/null || fail "set $2"
			wait "$ipf" || fail "iperf3 ($1)"
			wait "$smp"
			echo "$try" >"$TMP/tries.$1"
			# The receiver's count per stream and 0.5 s interval.
			jq -r '.server_output_json.intervals[] | select(.sum.seconds > 0.4) |
				"\(.sum.end * 2 | round / 2) \([.streams[].bits_per_second / 1e6] | join(" "))"' \
				"$TMP/ip.$1" >"$TMP/tl.$1"
			return 0
		fi
		echo "$1 start $try: not on one path at ${WARM} s (t Mbit/s path 0, 1: $(tail -1 "$TMP/paths.$1"))" >&2
		kill "$ipf" "$smp" 2>/dev/null
		wait "$ipf" "$smp" 2>/dev/null
		sleep 1	# the iperf3 server notices its client is gone
	done
	fail "$1: the two flows were never on one path at ${WARM} s in $TRIES starts"
}

rehashes() { sp_json '.modules.rehash | "\(.rehash_now + .rehash_deferred_done + .rehash_deferred_forced) \(.memory_reverted)"'; }

ecmp_topo 2 100mbit
ip netns exec "$NS_D" iperf3 -s -D -p 5201 -i 0.5 -J >/dev/null || fail iperf3
make_cgroup
sp_start --cgroup "$CG" --modules rehash
declare -A title note sets
title[stock]="stock kernel (rehash.prob=0; the kernel itself rehashes after an RTO)"
title[p20m0]="stackpilot rehash, defaults (prob=20 mode=0)"
title[p20m1]="stackpilot rehash, prob=20 mode=1"
title[memory]="stackpilot rehash, prob=20 mode=1, path memory (revert_pct=$RH_REVERT)"
sets[stock]="rehash.prob=0 rehash.mode=0 rehash.revert_pct=0"
sets[p20m0]="rehash.prob=20 rehash.mode=0 rehash.revert_pct=0"
sets[p20m1]="rehash.prob=20 rehash.mode=1 rehash.revert_pct=0"
sets[memory]="rehash.prob=20 rehash.mode=1 rehash.revert_pct=$RH_REVERT"
for cfg in $CONFIGS; do
	[ -n "${sets[$cfg]:-}" ] || fail "CONFIGS: unknown $cfg"
	sp_ctl set rehash.revert_pct=0 rehash.mode=0 >/dev/null || fail set
	read -r a0 v0 <<<"$(rehashes)"
	run_one "$cfg" "${sets[$cfg]}"
	read -r a1 v1 <<<"$(rehashes)"
	note[$cfg]="$cfg: $(cat "$TMP/tries.$cfg") start(s), $((a1 - a0)) rehashes, $((v1 - v0)) reverts"
done
sp_stop
set -- $CONFIGS
cp "$TMP/tl.$1" "$TMP/tl.dat"
for cfg in "${@:2}"; do join "$TMP/tl.dat" "$TMP/tl.$cfg" >"$TMP/tl.j" && mv "$TMP/tl.j" "$TMP/tl.dat"; done
mkdir -p "$ROOT/results" "$ROOT/docs"
png=$ROOT/results/rehash-timeline.png
{
	echo 'set terminal pngcairo noenhanced size 720,'$((60 + 200 * $#))' font ",9"'
	echo "set output \"$png\""
	echo "set multiplot layout $#,1 title \"Two flows sharing one of two 100 Mbit/s ECMP paths at $WARM s\""
	echo 'set ylabel "Mbit/s"; set yrange [0:119]; set key outside right'
	echo "set xrange [0:$SECS]"
	echo "set arrow from $WARM, graph 0 to $WARM, graph 1 nohead dt 2 lc rgb \"red\""
	echo "set label \"settings applied\" at $WARM + 0.1, 112 tc rgb \"red\""
	for cfg in "$@"; do
		[ "$cfg" = "${@: -1}" ] && echo 'set xlabel "seconds"'
		echo "set title \"${title[$cfg]}\""
		echo "plot \"$TMP/tl.$cfg\" using 1:2 with linespoints pt 7 ps 0.5 title \"flow 1\", \\"
		echo "     \"\" using 1:3 with linespoints pt 7 ps 0.5 title \"flow 2\", \\"
		echo "     \"$TMP/paths.$cfg\" using 1:2 with lines dt 2 lc rgb \"gray40\" title \"path 0\", \\"
		echo "     \"\" using 1:3 with lines dt 3 lc rgb \"gray60\" title \"path 1\""
	done
	echo 'unset multiplot'
} | gnuplot || fail gnuplot
cp "$png" "$ROOT/docs/rehash-timeline.png"
echo "## rehash over time"
echo
echo "Two iperf3 flows (-P 2, ${SECS} s) from the cgroup over 2 x 100 Mbit/s ECMP paths; every run starts with prob=0 and is kept only if both flows are on one path at ${WARM} s, when the configuration's settings are applied (red line); receiver goodput per flow and R1's rate per path, each 0.5 s, one run per configuration. $(IFS=';'; for c in "$@"; do printf '%s; ' "${note[$c]}"; done)"
echo
echo "![rehash timeline](../docs/rehash-timeline.png)"
echo
printf '| t (s) |'; for c in "$@"; do printf ' %s flow 1 | %s flow 2 |' "$c" "$c"; done; echo
printf '|---|'; for c in "$@"; do printf -- '---|---|'; done; echo
awk '{ printf "|"; for (i = 1; i <= NF; i++) printf " %.1f |", $i; print "" }' "$TMP/tl.dat"
echo
echo "Both flows together over the second half of the time after ${WARM} s (Mbit/s):"
i=2
for c in "$@"; do
	awk -v s="$SECS" -v i=$i -v c="$c" '$1 > (s + '"$WARM"') / 2 { a += $i + $(i + 1); n++ } END { printf "%s %.1f; ", c, a / n }' "$TMP/tl.dat"
	i=$((i + 2))
done
echo
