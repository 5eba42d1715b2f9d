# SPDX-License-Identifier: GPL-2.0
# pmtu: 10 sequential transfers to one destination behind a black hole
# (router egress MTU 1400 at 1 Gbit/s, ICMP frag-needed dropped, endpoints at 1500), per
# configuration, each on a fresh testbed so nothing learned carries over:
#   probing0/1/2  the kernel alone, net.ipv4.tcp_mtu_probing = 0/1/2
#   oracle        TCPMSS clamp on the router to the right value (1360)
#   sp            stackpilot pmtu (tcp_mtu_probing=1 for the first connection)
#   sp_route      stackpilot pmtu with pmtu.route=1
source "$ROOT/tests/lib_pmtu.sh"
N=${N:-10}
TIMEOUT=${TIMEOUT:-10}	# per transfer; tcp_mtu_probing=0 never completes
CONFIGS=${CONFIGS:-"probing0 probing1 probing2 oracle sp sp_route"}

fresh() {
	local p
	[ -n "$SP_PID" ] && sp_stop
	for p in "${NETNS[@]}"; do ip netns pids "$p" | xargs -r kill -KILL; ip netns del "$p"; done 2>/dev/null
	NETNS=()
	pmtu_topo 1400
	# A 1 Gbit/s bottleneck, so transfer times are not all below the noise.
	ip netns exec "$NS_RT" tc qdisc add dev rd root tbf rate 1gbit burst 128k latency 5ms
	case $1 in
	probing*) ip netns exec "$NS_S" sysctl -qw net.ipv4.tcp_mtu_probing=${1#probing} ;;
	oracle) ip netns exec "$NS_RT" nft add rule inet bh c_fwd tcp flags syn tcp option maxseg size set 1360 ;;
	sp) sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1 ;;
	sp_route) sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
		  sp_ctl set pmtu.route=1 >/dev/null ;;
	esac
}

make_cgroup
: >"$TMP/pm.raw"
for size in 2000000 100000; do
	for cfg in $CONFIGS; do
		fresh "$cfg"
		fails=0
		for i in $(seq "$N"); do
			line=$(in_cgroup ip netns exec "$NS_S" "$TCPTOOL" client 10.30.2.2 5201 "$size" 1 "$TIMEOUT")
			echo "$cfg $size $i $(echo "$line" | sed -n 's/^conn secs=\([0-9.]*\) mss=\([0-9]*\) retrans=\([0-9]*\).*done=\([01]\)$/\1 \2 \3 \4/p')" >>"$TMP/pm.raw"
			echo "$line" | grep -q 'done=1' || fails=$((fails + 1))
			[ "$fails" -ge 2 ] && break	# it does not recover: no need to wait out all ten
		done
		if [ "$size" = 2000000 ]; then	# steady state: one long flow after the ten
			ip netns exec "$NS_D" iperf3 -s -D -1 -p 5301 >/dev/null 2>&1; sleep 0.2
			bps=$(in_cgroup ip netns exec "$NS_S" timeout 20 iperf3 -c 10.30.2.2 -p 5301 -t 4 -J 2>/dev/null |
				jq '.end.sum_received.bits_per_second // 0' 2>/dev/null)
			echo "$cfg long 0 ${bps:-0}" >>"$TMP/pm.long"
		fi
	done
done
fresh none
cp "$TMP/pm.raw" "$ROOT/results/pmtu-raw-$ID.txt" 2>/dev/null

# Per config and size: conn 1 time, mean and worst of conns 2..N, their MSS, ratio to the oracle.
summ() { # summ CFG SIZE FIELD
	awk -v c="$1" -v s="$2" -v f="$3" -v n="$N" '
		$1 == c && $2 == s {
			if ($7 != 1) { nd++; next }
			if ($3 == 1) first = $4
			else { sum += $4; k++; if ($4 > worst) worst = $4; mss = $5 } }
		END {
			if (f == "first") print (first == "" ? "never" : sprintf("%.3f", first))
			if (f == "mean") print (k ? sprintf("%.4f", sum / k) : "never")
			if (f == "worst") print (k ? sprintf("%.4f", worst) : "-")
			if (f == "mss") print (k ? mss : "-")
			if (f == "nd") print nd + 0 }' "$TMP/pm.raw"
}
echo "## pmtu: sequential transfers through a black hole (egress MTU 1400 at 1 Gbit/s, no ICMP)"
echo
echo "Seconds per transfer; 'never' = not completed within ${TIMEOUT} s (stopped after 2 such)."
echo "ratio = mean of connections 2..$N / the oracle's. MSS as the sender used it (with timestamps)."
echo
for size in 2000000 100000; do
	o=$(summ oracle "$size" mean)
	echo "### $((size / 1000)) KB per transfer"
	echo
	echo "| config | connection 1 | 2..$N mean | 2..$N worst | ratio to oracle | MSS 2..$N | not completed |"
	echo "|---|---|---|---|---|---|---|"
	for cfg in $CONFIGS; do
		m=$(summ "$cfg" "$size" mean)
		r=$(awk -v m="$m" -v o="$o" 'BEGIN { print (m == "never" || o == "never") ? "-" : sprintf("%.2f", m / o) }')
		echo "| $cfg | $(summ "$cfg" "$size" first) | $m | $(summ "$cfg" "$size" worst) | $r | $(summ "$cfg" "$size" mss) | $(summ "$cfg" "$size" nd) |"
	done
	echo
done
echo "### one long flow after the ten 2 MB transfers (iperf3, 4 s)"
echo
echo "| config | Gbit/s | ratio to oracle |"
echo "|---|---|---|"
ol=$(awk '$1 == "oracle" { print $4 }' "$TMP/pm.long")
awk -v o="$ol" '{ printf "| %s | %.2f | %s |\n", $1, $4 / 1e9, (o > 0 ? sprintf("%.2f", $4 / o) : "-") }' "$TMP/pm.long"
