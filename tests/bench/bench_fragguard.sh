# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/fragguard.md (tests/bench/run.sh writes what this prints there)
# fragguard: the seed's cases on the fragment testbed (tests/lib_frag.sh).
# Each measurement gets a fresh receiver namespace: reassembly queues outlive
# a run by ipfrag_time, so nothing may carry over from one to the next.
#  (1) 10 fragmented UDP streams from one peer, no hog: with vs without stackpilot
#  (2) hog (incomplete-datagram flood + its own stream) + victim stream, under
#      stock defaults, high_thresh 100 MiB (the seed's), ipfrag_time 1 s, stackpilot
#  (3) a flood from random spoofed sources + victim: stock vs stackpilot
#  (4) 65000-byte datagrams at IPv6 MTU 1280 and IPv4 MTU 576: stock vs stackpilot
#  (5) spoofers completing tiny datagrams + a first-fragment flood + victim
#  and the program's own cost per fragment and per non-fragment (bpf_stats)
source "$ROOT/tests/lib_frag.sh"
RUNS=${RUNS:-3}
SECS=${SECS:-4}
VRATE=${VRATE:-50M}	# victim's and hog's legitimate streams
S1RATE=${S1RATE:-300M}	# each of the 10 streams of case (1): together more than 2 CPUs forward
PPS=${PPS:-20000}	# flood rate, first fragments per second

fresh() { # fresh CONFIG: new testbed configured as CONFIG
	local p
	[ -n "$SP_PID" ] && sp_stop
	for p in "${NETNS[@]}"; do ip netns pids "$p" | xargs -r kill -KILL; ip netns del "$p"; done 2>/dev/null
	NETNS=()
	frag_topo 2; udp_servers 2
	case $1 in
	high100) ip netns exec "$NS_R" sysctl -qw net.ipv4.ipfrag_high_thresh=104857600 \
			net.ipv4.ipfrag_low_thresh=78643200 ;;
	time1) ip netns exec "$NS_R" sysctl -qw net.ipv4.ipfrag_time=1 ;;
	stackpilot) sp_start --modules fragguard --iface rp1 --iface rp2 $(sp_stats_opt) ;;
	esac
}

# Goodput (Mbit/s received) of peer $1's fragmented UDP stream, $2 parallel
# streams at $3, over IPv$4 (default 4).
goodput() {
	local dst=10.50.$1.1
	[ "${4:-4}" = 6 ] && dst=fd50:$1::1
	peer "$1" iperf3 -"${4:-4}" -u -l 4000 -b "${3:-$VRATE}" -P "${2:-1}" -t "$SECS" -c "$dst" -p $((5200 + $1)) -J 2>/dev/null |
		jq '.end.sum_received.bits_per_second / 1e6'
}

flood() { # flood SRC [DST]: from peer 1 for the whole measurement
	peer 1 "$FRAGFLOOD" "${2:-10.50.1.1}" $((PPS * (SECS + 2))) "$1" "$PPS" >/dev/null &
	BG_PIDS+=($!)
	sleep 1	# let it fill what it can
}

# sp_fragguard's run count and run time now: "CNT NS".
prog_stats() { sp_json '.programs[] | select(.name == "sp_fragguard") | "\(.run_cnt) \(.run_time_ns)"'; }
# Average ns per run between two prog_stats outputs.
ns_per_run() { echo "$1 $2" | awk '{ printf "%.0f", ($3 > $1) ? ($4 - $2) / ($3 - $1) : 0 }'; }
# Percent of UDP bytes delivered: 65000-byte datagrams from peer 1 over IPv$1.
large() {
	local a=10.50.1.1; [ "$1" = 6 ] && a=fd50:1::1
	peer 1 iperf3 -"$1" -u -l 65000 -b 4M -t "$SECS" -c $a -p 5201 -J 2>/dev/null |
		jq '.end | 100 * .sum_received.bytes / .sum_sent.bytes'
}

mean() { awk '{ s += $1; n++ } END { printf "%.1f", n ? s / n : 0 }'; }

: >"$TMP/fg.raw"
for r in $(seq "$RUNS"); do
	for cfg in stock stackpilot; do	# (1)
		fresh "$cfg"
		echo "s1 $cfg $(goodput 1 10 "$S1RATE")" >>"$TMP/fg.raw"
	done
	fresh stock	# victim and hog alone: the references for (2) and (3)
	echo "ref victim $(goodput 2)" >>"$TMP/fg.raw"
	echo "ref hog $(goodput 1)" >>"$TMP/fg.raw"
	echo "ref victim6 $(goodput 2 1 "$VRATE" 6)" >>"$TMP/fg.raw"
	for cfg in stock high100 time1 stackpilot; do	# (2)
		fresh "$cfg"
		flood -
		goodput 1 >"$TMP/hog" &
		echo "s2 $cfg victim $(goodput 2)" >>"$TMP/fg.raw"
		wait $!
		echo "s2 $cfg hog $(cat "$TMP/hog")" >>"$TMP/fg.raw"
	done
	for cfg in stock stackpilot; do	# (3)
		fresh "$cfg"
		[ "$cfg" = stackpilot ] && goodput 2 >/dev/null	# the victim has completed before
		flood 10.60.0.0/16
		echo "s3 $cfg victim $(goodput 2)" >>"$TMP/fg.raw"
		[ "$cfg" = stackpilot ] && {
			bpftool map show -j | jq '[.[] | select(.name | startswith("fragguard")) |
				.bytes_memlock] | add' >"$TMP/memlock"
			sp_json '.modules.fragguard.peers_tracked' >"$TMP/peers"
		}
	done
	for cfg in stock stackpilot; do	# (1) below saturation, and the cost per packet
		fresh "$cfg"
		[ "$cfg" = stackpilot ] && p0=$(prog_stats)
		echo "s1low $cfg $(goodput 1 10 50M)" >>"$TMP/fg.raw"
		[ "$cfg" = stackpilot ] && {
			p1=$(prog_stats)
			echo "nsfrag $(ns_per_run "$p0" "$p1")" >>"$TMP/fg.raw"
			peer 1 iperf3 -c 10.50.1.1 -p 5201 -t 2 >/dev/null 2>&1
			echo "nsplain $(ns_per_run "$p1" "$(prog_stats)")" >>"$TMP/fg.raw"
		}
	done
	for cfg in stock stackpilot; do	# (4)
		fresh "$cfg"
		ip -n "$NS_R" link set rp1 mtu 1280; ip -n "sp-$ID-p1" link set pr1 mtu 1280
		echo "s4 $cfg v6 $(large 6)" >>"$TMP/fg.raw"
		ip -n "$NS_R" link set rp1 mtu 576; ip -n "sp-$ID-p1" link set pr1 mtu 576
		echo "s4 $cfg v4 $(large 4)" >>"$TMP/fg.raw"
	done
	for cfg in stock stackpilot; do	# (5), IPv4 and IPv6
		for fam in 4 6; do
			fresh "$cfg"
			[ "$cfg" = stackpilot ] && SECS=3 goodput 2 1 "$VRATE" $fam >/dev/null	# known: 64 KiB over 2 s
			if [ $fam = 4 ]; then
				peer 1 "$FRAGFLOOD" 10.50.1.1 10000 10.70.0.0/16 0 8 complete >/dev/null || true
				flood 10.60.0.0/16
			else
				peer 1 "$FRAGFLOOD" fd50:1::1 10000 fd70::/64 0 8 complete >/dev/null || true
				flood fd60::/64 fd50:1::1
			fi
			echo "s5 $cfg victim$fam $(goodput 2 1 "$VRATE" $fam)" >>"$TMP/fg.raw"
		done
	done
done
fresh none
cp "$TMP/fg.raw" "$ROOT/results/fragguard-raw-$ID.txt" 2>/dev/null

v() { grep "^$1 " "$TMP/fg.raw" | awk '{ print $NF }' | mean; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
rv=$(v "ref victim"); rh=$(v "ref hog")
echo "## fragguard: fragmented UDP under a reassembly-memory hog"
echo
echo "Receiver namespace with stock settings unless named; UDP datagrams of 4000 bytes (3 fragments)"
echo "at $VRATE per stream ($S1RATE in case 1), $SECS s, mean of $RUNS runs; flood $PPS first fragments/s of 1400 bytes."
echo "Alone, the victim gets $rv Mbit/s and the hog's stream $rh Mbit/s (the references)."
echo
echo "| case | stock | high_thresh 100 MiB | ipfrag_time 1 s | stackpilot |"
echo "|---|---|---|---|---|"
s1s=$(v "s1 stock"); s1p=$(v "s1 stackpilot")
echo "| (1) 10 streams, no hog: Mbit/s (stackpilot / stock) | $s1s | | | $s1p ($(ratio "$s1p" "$s1s")) |"
echo "| (2) victim / its goodput alone | $(ratio "$(v "s2 stock victim")" "$rv") | $(ratio "$(v "s2 high100 victim")" "$rv") | $(ratio "$(v "s2 time1 victim")" "$rv") | $(ratio "$(v "s2 stackpilot victim")" "$rv") |"
echo "| (2) hog's own stream / alone | $(ratio "$(v "s2 stock hog")" "$rh") | $(ratio "$(v "s2 high100 hog")" "$rh") | $(ratio "$(v "s2 time1 hog")" "$rh") | $(ratio "$(v "s2 stackpilot hog")" "$rh") |"
echo "| (3) victim during a spoofed /16 flood / alone | $(ratio "$(v "s3 stock victim")" "$rv") | | | $(ratio "$(v "s3 stackpilot victim")" "$rv") |"
s1ls=$(v "s1low stock"); s1lp=$(v "s1low stackpilot")
echo "| (1') 10 streams at 50M each (not CPU-bound): Mbit/s (stackpilot / stock) | $s1ls | | | $s1lp ($(ratio "$s1lp" "$s1ls")) |"
echo "| (4) 65000 B datagrams, IPv6 MTU 1280: % delivered (stackpilot / stock) | $(v "s4 stock v6") | | | $(v "s4 stackpilot v6") ($(ratio "$(v "s4 stackpilot v6")" "$(v "s4 stock v6")")) |"
echo "| (4) 65000 B datagrams, IPv4 MTU 576: % delivered (stackpilot / stock) | $(v "s4 stock v4") | | | $(v "s4 stackpilot v4") ($(ratio "$(v "s4 stackpilot v4")" "$(v "s4 stock v4")")) |"
rv6=$(v "ref victim6")
echo "| (5) victim, completing spoofers + flood, IPv4 / alone | $(ratio "$(v "s5 stock victim4")" "$rv") | | | $(ratio "$(v "s5 stackpilot victim4")" "$rv") |"
echo "| (5) victim, completing spoofers + flood, IPv6 / alone | $(ratio "$(v "s5 stock victim6")" "$rv6") | | | $(ratio "$(v "s5 stackpilot victim6")" "$rv6") |"
echo
echo "sp_fragguard cost (bpf_stats run time / runs, includes the stats' own overhead): $(v nsfrag) ns per fragment (case 1'), $(v nsplain) ns per non-fragment (a TCP stream through the same interface)."
echo
echo "stackpilot's maps after the spoofed flood: $(cat "$TMP/peers") peers tracked (LRU of 16384), $(cat "$TMP/memlock") bytes of map memory as bpftool reports it (for the maps allocated on use, 65536 datagrams a family and 4096 run bitmaps, their most)."

# The program's own cost without a network (BPF_PROG_TEST_RUN), this version
# beside v1 (fragguard as of commit 3aa5433, built from git history) and an
# empty tc program.
V1=3aa5433
# The object of the stackpilot being measured when its build has one beside
# it (tests/bench/compare.sh), else the tree's.
fg_obj=$ROOT/build/fragguard.bpf.o
[ -e "$BUILD/fragguard.bpf.o" ] && fg_obj=$BUILD/fragguard.bpf.o
objs=("$fg_obj")
if git -C "$ROOT" cat-file -e "$V1" 2>/dev/null; then
	mkdir -p "$TMP/v1/include"
	git -C "$ROOT" show "$V1:bpf/fragguard.bpf.c" >"$TMP/v1/fragguard.bpf.c"
	git -C "$ROOT" show "$V1:bpf/common.bpf.h" >"$TMP/v1/common.bpf.h"
	git -C "$ROOT" show "$V1:include/stackpilot.h" >"$TMP/v1/include/stackpilot.h"
	clang -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -I"$TMP/v1" -I"$TMP/v1/include" \
		-I"$ROOT" -c "$TMP/v1/fragguard.bpf.c" -o "$TMP/v1/fragguard-v1.bpf.o" &&
		objs=("$TMP/v1/fragguard-v1.bpf.o" "${objs[@]}")
fi
# fgcost's table from $TMP/NAME1..3: the median of the three runs, cell by
# cell, of its two cost columns; COL, a column taken from run 2 as it is.
median3() { # median3 NAME [COL]
	local f=$TMP/$1 keep=$2 r name
	med() { for i in 1 2 3; do sed -n "${r}p" "$f$i" | cut -d'|' -f"$1"; done | sort -g | sed -n 2p; }
	head -2 "${f}1"
	for r in $(seq 3 "$(wc -l <"${f}1")"); do
		name=$(sed -n "${r}p" "${f}1" | cut -d'|' -f2)
		echo "|$name| $(med 3) | $(med 4) |${keep:+$(sed -n "${r}p" "${f}2" | cut -d'|' -f"$keep")|}"
	done | sed "s|$TMP/v1/||; s|$ROOT/build/||; s|$BUILD/||"
}
echo
echo "Cost per packet without a network (\`fgcost\`: BPF_PROG_TEST_RUN, 20000 datagrams of 3 fragments from one peer, known after its first; medians of 3):"
echo
for i in 1 2 3; do "$SP_BUILD/fgcost" "${objs[@]}" >"$TMP/cost$i"; done
median3 cost 5
echo
echo "The same frames received back to back (\`fgcost -i\`: through a veth pair, 64 a sendmmsg() from one CPU, no system call between two fragments, as in a driver's poll; the kernel's run-time stats; medians of 3):"
echo
# One system call a fragment (above) starts each with cold caches and, where
# page-table isolation runs without PCID, a cold TLB; a driver's poll does not.
mk_netns "sp-$ID-fgc"
ip -n "sp-$ID-fgc" link add name fgc-s type veth peer name fgc-r || fail "veth fgc-s"
ip -n "sp-$ID-fgc" link set fgc-s up; ip -n "sp-$ID-fgc" link set fgc-r up
ip -n "sp-$ID-fgc" addr add 10.9.0.1/24 dev fgc-r
for i in 1 2 3; do ip netns exec "sp-$ID-fgc" "$SP_BUILD/fgcost" -i fgc-s,fgc-r "${objs[@]}" >"$TMP/batch$i"; done
median3 batch
echo
echo "The same, the peer known for longer than ipfrag_time before the measurement (\`fgcost -S -i\`: a known peer's datagrams are then looked for in its slots alone; medians of 3):"
echo
for i in 1 2 3; do ip netns exec "sp-$ID-fgc" "$SP_BUILD/fgcost" -S -i fgc-s,fgc-r "${objs[@]}" >"$TMP/settled$i"; done
median3 settled
