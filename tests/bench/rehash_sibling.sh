#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rehash policy 2, the pair-rate half of its path memory (README, rehash):
# a trial that is not (yet) a test, because the decision it checks comes
# out right in about half the runs. Usage, as root:
#   tests/bench/rehash_sibling.sh [TRIALS]   (default 8)
# Each trial is one run of t_sibling below in its own namespaces; the
# script prints each trial's line and how many ended with A alone.
if [ "${1:-}" != --trial ]; then
	ROOT=$(cd "$(dirname "$0")/../.." && pwd)
	cd "$ROOT" || exit 1
	n=${1:-8} ok=0
	for i in $(seq "$n"); do
		out=$(timeout -k 5 120 bash -c 'source tests/lib.sh && source tests/integration/test_rehash.sh &&
			source tests/bench/rehash_sibling.sh --trial && t_sibling' 2>&1)
		echo "$out" | grep -E '^(A |FAIL)' | head -2
		echo "$out" | grep -q '^FAIL' || ok=$((ok + 1))
	done
	echo "$ok of $n trials: A alone on path 1 (B's move kept)"
	exit 0
fi

# Policy 2's pair view: two flows of the cgroup on path 1, traffic from
# outside the host alone on path 0. Whichever of them moves to path 0 loses
# as often per byte as before (it now shares with the outside flow), so by
# its own density the move went nowhere; but the sibling it left is alone
# now and stops losing, the pair's episode rate falls, and the move is kept.
# R1 routes flow B (port 5201) by its flow label: the label of the first
# full-sized packet to that port (the data connection's first; iperf3's
# control connection sends none) to path 1, any other to path 0; A (5203) is pinned to path 1,
# the outside flow (5202) to path 0. Once B moves, A has path 1 to itself:
# A ends with most of path 1 to itself. Stuck on one path (the move
# reverted), A gets about half.
t_sibling() {
	local a b
	rh_setup
	rh_tables
	ip netns exec "$NS_D" iperf3 -s -D -p 5203 >/dev/null || fail iperf3
	ip netns exec "$NS_D" iperf3 -s -D -p 5202 >/dev/null || fail iperf3
	printf 'table ip6 sptrial {\n set first { typeof ip6 flowlabel; size 1; flags dynamic; }\n chain pre {\n type filter hook prerouting priority mangle + 1;\n iifname "r1s" tcp dport 5201 meta length > 1000 add @first { ip6 flowlabel }\n iifname "r1s" tcp dport 5201 ip6 flowlabel @first meta mark set 0x22\n iifname "r1s" tcp dport 5201 ip6 flowlabel != @first meta mark set 0x21\n }\n}\n' |
		ip netns exec "$NS_R1" nft -f - || fail "nft first label"
	ip -n "$NS_R1" -6 rule add fwmark 0x21 table 100 pref 850 || fail "mark rule"
	ip -n "$NS_R1" -6 rule add fwmark 0x22 table 101 pref 851 || fail "mark rule"
	rh_pin 5203 1
	ip -n "$NS_R1" -6 rule add ipproto tcp dport 5202 table 100 pref 902 || fail "cross rule"
	"$SP" set --pin-path "$PIN" rehash.policy=2 rehash.mode=1 >/dev/null || fail set
	rh_seed_base 300
	ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5202 -t 9 >/dev/null &
	BG_PIDS+=($!)
	sleep 0.5
	in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5203 -t 8 -J >"$TMP/a.json" &
	BG_PIDS+=($!)
	in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t 8 -J >"$TMP/b.json" || fail iperf3
	wait "${BG_PIDS[-1]}" || fail iperf3
	a=$(jq '.end.sum_received.bytes' "$TMP/a.json") b=$(jq '.end.sum_received.bytes' "$TMP/b.json")
	echo "A (pinned to path 1) $((a / 1000000)) MB, B $((b / 1000000)) MB;" \
		"$(rh rehash_now) + $(rh rehash_deferred) rehashes, $(rh futile_moves) futile," \
		"$(rh memory_reverted) reverted; B's labels: $(labels | jq -c '[.[]] | map(length)')"
	# A alone on path 1 for most of the 8 s: 100 Mbit/s x 8 s is 100 MB.
	assert_ge "$((a / 1000000))" 70 "A's MB (alone on path 1 once B moved)"
}

