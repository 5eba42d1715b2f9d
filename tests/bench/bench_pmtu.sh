# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/pmtu.md (tests/bench/run.sh writes what this prints there)
# pmtu with real clients: 5 fetches of 5 MB (curl against python3's
# http.server, a new connection each, 12 s at most) through the black hole of
# tests/lib_pmtu.sh (router links at MTU 1400 both ways, ICMP frag-needed /
# packet-too-big dropped, a 1 Gbit/s tbf each way), per case and
# configuration, each on a fresh testbed so nothing learned carries over.
# Cases:
#   download      curl GET in S from the server in D
#   download_vxlan  the same through the VXLAN overlay (PMTU_OVERLAY=vxlan)
#   download_srv  curl GET in D from the server in S (stackpilot's side)
#   upload        curl PUT in S to the server in D (today's case)
# Configurations:
#   kernel0          tcp_mtu_probing 0 everywhere (the default)
#   client1/client2  tcp_mtu_probing 1/2 in the client's namespace
#   server1/server2  tcp_mtu_probing 1/2 in the server's namespace
#   oracle           route MTU = the true path MTU on both ends
#   sp               stackpilot pmtu in S (--mtu-probing 1), the client in its
#                    cgroup; for download_srv the server, and pmtu.route=1
# Also counts stackpilot's probe packets (echo, SYNs with data) on S's way
# out: during fetch 1 and the search it started (a new destination), and
# during fetches 2..5 (a known one). Writes docs/pmtu-fetches.png.
source "$ROOT/tests/lib_pmtu.sh"
N=5
LIMIT=${LIMIT:-12}
# A run of chosen cases or configurations leaves docs/ alone.
PARTIAL=${CASES:+1}${CONFIGS:+1}
CASES=${CASES:-"download download_vxlan download_srv upload"}
CONFIGS=${CONFIGS:-"kernel0 client1 client2 server1 server2 oracle sp"}
ROUNDS=${ROUNDS:-2}

fresh() { # fresh CASE CONFIG: sets CLI SRV HOST METHOD WHERE
	local p true_mtu=1400 cns sns
	[ -n "$SP_PID" ] && sp_stop
	for p in "${NETNS[@]}"; do ip netns pids "$p" | xargs -r kill -KILL; ip netns del "$p"; done 2>/dev/null
	NETNS=()
	PMTU_OVERLAY=
	[ "$1" = download_vxlan ] && PMTU_OVERLAY=vxlan true_mtu=1350
	pmtu_topo 1400
	ip netns exec "$NS_RT" tc qdisc add dev rd root tbf rate 1gbit burst 128k latency 5ms
	ip netns exec "$NS_RT" tc qdisc add dev rs root tbf rate 1gbit burst 128k latency 5ms
	pmtu_probe_counter
	METHOD=GET; [ "$1" = upload ] && METHOD=PUT
	# WHERE: which side runs in S, where stackpilot and its cgroup are: the
	# client, or for download_srv the server.
	if [ "$1" = download_srv ]; then
		cns=$NS_D sns=$NS_S HOST=$SRC4 WHERE=server
	else
		cns=$NS_S sns=$NS_D HOST=$DST4 WHERE=client
	fi
	CLI=$cns
	case $2 in
	client*) ip netns exec "$cns" sysctl -qw net.ipv4.tcp_mtu_probing=${2#client} ;;
	server*) ip netns exec "$sns" sysctl -qw net.ipv4.tcp_mtu_probing=${2#server} ;;
	oracle)
		if [ -n "$PMTU_OVERLAY" ]; then
			ip -n "$NS_S" route add "$DST4" dev vx0 mtu $true_mtu
			ip -n "$NS_D" route add "$SRC4" dev vx0 mtu $true_mtu
		else
			ip -n "$NS_S" route add "$DST4" via 10.30.1.2 mtu $true_mtu
			ip -n "$NS_D" route add "$SRC4" via 10.30.2.1 mtu $true_mtu
		fi ;;
	esac
	if [ "$WHERE" = server ]; then http_serve "$NS_S" cgroup; else http_serve "$NS_D"; fi
	if [ "$2" = sp ]; then
		sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
		[ "$WHERE" = server ] && sp_ctl set pmtu.route=1 >/dev/null
	fi
}

# Until no search stackpilot started is still going (3 s at most), so the
# probes it costs are counted with the fetch that caused it.
settle() {
	local s
	for _ in $(seq 30); do
		s=$(sp_json "[.modules.pmtu.destinations[] | select(.state != \"learned\" and .state != \"searched\" and .state != \"no_probe\")] | length")
		[ "$s" = 0 ] && return
		sleep 0.1
	done
}

# run_cfg CASE CFG ROUND: N fetches on a fresh testbed, appended to pm.raw
# as "case cfg round fetch secs ok" (ok "skip": not run).
run_cfg() {
	local case=$1 cfg=$2 r=$3 pre= fails=0 p1= b1= i
	fresh "$case" "$cfg"
	[ "$WHERE" = client ] && [ "$cfg" = sp ] && pre=cgroup
	for i in $(seq "$N"); do
		if [ "$fails" -ge 2 ]; then	# it does not recover: no need to wait out all five
			echo "$case $cfg $r $i - skip" >>"$TMP/pm.raw"; continue
		fi
		set -- $(http_fetch "$CLI" "$HOST" "$METHOD" "$pre" "$LIMIT")
		echo "$case $cfg $r $i $1 $2" >>"$TMP/pm.raw"
		[ "$2" = 1 ] || fails=$((fails + 1))
		if [ "$i" = 1 ]; then
			[ "$cfg" = sp ] && settle
			p1=$(pmtu_probes) b1=$(pmtu_probes bytes)
		fi
	done
	echo "$case $cfg $r $p1 $(($(pmtu_probes) - p1)) $b1 $(($(pmtu_probes bytes) - b1))" >>"$TMP/pm.probes"
}

# Round 1 runs every configuration; rounds 2..ROUNDS again those whose
# fetches 2..N all completed in under 1 s, the ones whose ratio to the
# oracle is the question, interleaved with the oracle's own repeats (its
# spread between rounds is the noise floor).
make_cgroup
: >"$TMP/pm.raw"; : >"$TMP/pm.probes"
# PMTU_RAW=results/pmtu-raw-ID.txt: no measuring, the tables and picture of
# that saved run again (with its pmtu-probes-ID.txt).
if [ -n "${PMTU_RAW:-}" ]; then
	cp "$PMTU_RAW" "$TMP/pm.raw" || fail "$PMTU_RAW"
	cp "${PMTU_RAW/-raw-/-probes-}" "$TMP/pm.probes" 2>/dev/null
	CASES=$(awk '!s[$1]++ { printf "%s ", $1 }' "$TMP/pm.raw")
	CONFIGS=$(awk '!s[$2]++ { printf "%s ", $2 }' "$TMP/pm.raw")
	ROUNDS=$(awk '$3 > r { r = $3 } END { print r }' "$TMP/pm.raw")
fi
for case in $CASES; do
	[ -n "${PMTU_RAW:-}" ] && break
	for cfg in $CONFIGS; do run_cfg "$case" "$cfg" 1; done
	for r in $(seq 2 "$ROUNDS"); do
		for cfg in $CONFIGS; do
			awk -v c="$case" -v g="$cfg" '$1 == c && $2 == g && $3 == 1 && $4 > 1 && ($6 != 1 || $5 >= 1) { bad = 1 }
				END { exit bad }' "$TMP/pm.raw" && run_cfg "$case" "$cfg" "$r"
		done
	done
done
[ -n "$SP_PID" ] && sp_stop
mkdir -p "$ROOT/results"
if [ -z "${PMTU_RAW:-}" ]; then
	cp "$TMP/pm.raw" "$ROOT/results/pmtu-raw-$ID.txt"
	cp "$TMP/pm.probes" "$ROOT/results/pmtu-probes-$ID.txt"
fi

# summ CASE CFG FIELD: fetch 1 (mean over rounds), mean / worst of 2..N of
# all rounds, failed / not run counts, rounds.
summ() {
	awk -v c="$1" -v g="$2" -v f="$3" '
		$1 == c && $2 == g {
			if ($3 > rounds) rounds = $3
			if ($6 == "skip") { sk++; next }
			if ($6 != 1) { nf++; if ($4 == 1) f1bad++; next }
			if ($4 == 1) { f1 += $5; f1k++ }
			else { sum += $5; k++; if ($5 > worst) worst = $5 } }
		END {
			if (f == "first") print (f1k ? sprintf("%.3f", f1 / f1k) (f1bad ? sprintf(" (%d failed)", f1bad) : "") : "failed")
			if (f == "mean") print (k ? sprintf("%.4f", sum / k) : "-")
			if (f == "worst") print (k ? sprintf("%.4f", worst) : "-")
			if (f == "rounds") print rounds + 0
			if (f == "bad") printf "%d%s\n", nf, (sk ? sprintf(" (+%d not run)", sk) : "") }' "$TMP/pm.raw"
}
echo "## pmtu: 5 MB fetches with curl through a black hole (router links MTU 1400 both ways, no ICMP, 1 Gbit/s)"
echo
echo "Seconds per fetch, a new connection each; 'failed' = not complete within $LIMIT s"
echo "(after 2 failures a configuration's remaining fetches are not run). Configurations"
echo "whose fetches 2..$N all took under 1 s ran $ROUNDS rounds (a fresh testbed each,"
echo "interleaved with the oracle's): fetch 1 is their mean, 2..$N mean and worst over all."
echo "ratio = mean of fetches 2..$N / the oracle's; fetch 1 ratio likewise."
for case in $CASES; do
	om=$(summ "$case" oracle mean) o1=$(summ "$case" oracle first)
	echo
	echo "### $case"
	echo
	echo "| config | rounds | fetch 1 | fetch 1 / oracle | 2..$N mean | 2..$N worst | 2..$N / oracle | failed |"
	echo "|---|---|---|---|---|---|---|---|"
	for cfg in $CONFIGS; do
		m=$(summ "$case" "$cfg" mean) f=$(summ "$case" "$cfg" first)
		echo "| $cfg | $(summ "$case" "$cfg" rounds) | $f | $(awk -v m="$f" -v o="$o1" 'BEGIN { print (m + 0 > 0 && o + 0 > 0) ? sprintf("%.2f", m / o) : "-" }') | $m | $(summ "$case" "$cfg" worst) | $(awk -v m="$m" -v o="$om" 'BEGIN { print (m + 0 > 0 && o + 0 > 0) ? sprintf("%.2f", m / o) : "-" }') | $(summ "$case" "$cfg" bad) |"
	done
	# The noise floor: the oracle against itself, round by round.
	awk -v c="$case" '$1 == c && $2 == "oracle" && $4 > 1 && $6 == 1 { s[$3] += $5; n[$3]++ }
		END { if (n[1] && n[2]) printf "\nThe oracle'"'"'s fetches 2..5, round 2 / round 1: %.2f\n", (s[2] / n[2]) / (s[1] / n[1]) }' "$TMP/pm.raw"
done
echo
echo "### stackpilot's probe packets (echo requests and SYNs with data leaving S)"
echo
echo "Per round: packets (IP bytes)."
echo
echo "| case | new destination (fetch 1 and its search) | known destination (fetches 2..$N) |"
echo "|---|---|---|"
awk '$2 == "sp" {
		n[$1] = n[$1] (n[$1] == "" ? "" : ", ") $4 ($6 != "" ? " (" $6 ")" : "")
		k[$1] = k[$1] (k[$1] == "" ? "" : ", ") $5 ($7 != "" ? " (" $7 ")" : "")
		if (!($1 in o)) { o[$1] = ++m; c[m] = $1 } }
	END { for (i = 1; i <= m; i++) printf "| %s | %s | %s |\n", c[i], n[c[i]], k[c[i]] }' "$TMP/pm.probes"

# The picture: per-fetch seconds of round 1, one panel per case; a failed
# fetch is drawn at the limit.
awk -v lim="$LIMIT" '$3 == 1 && $6 != "skip" { print $1, $2, $4, ($6 == 1 ? $5 : lim) }' "$TMP/pm.raw" >"$TMP/pm.dat"
png=$ROOT/results/pmtu-fetches.png
{
	echo 'set terminal pngcairo size 960,640 font ",9" noenhanced'
	echo "set output \"$png\""
	echo "set multiplot layout 2,2 title \"5 MB fetches through a black hole (MTU 1400, no ICMP); failed = drawn at the $LIMIT s limit\""
	echo 'set logscale y; set yrange [0.005:20]; set xrange [0.8:5.2]; set xtics 1'
	echo 'set xlabel "fetch (new connection)"; set ylabel "seconds"; set key outside right font ",8"'
	echo "set arrow from graph 0, first $LIMIT to graph 1, first $LIMIT nohead dt 2"
	for case in $CASES; do
		echo "set title \"$case\""
		plot="plot"
		for cfg in $CONFIGS; do
			plot="$plot \"< awk '\$1 == \\\"$case\\\" && \$2 == \\\"$cfg\\\"' $TMP/pm.dat\" using 3:4 with linespoints lw $([ "$cfg" = sp ] && echo 3 || echo 1) title \"$cfg\","
		done
		echo "${plot%,}"
	done
	echo 'unset multiplot'
} >"$TMP/pm.gp"
if gnuplot "$TMP/pm.gp" 2>"$TMP/gp.err"; then
	echo
	if [ -z "$PARTIAL" ]; then
		mkdir -p "$ROOT/docs"; cp "$png" "$ROOT/docs/pmtu-fetches.png"
		echo "![pmtu fetches](../docs/pmtu-fetches.png)"
	else
		echo "![pmtu fetches](pmtu-fetches.png)"
	fi
else
	echo "gnuplot failed: $(head -3 "$TMP/gp.err")" >&2
fi
