# SPDX-License-Identifier: GPL-2.0
# pmtu on the overlay testbed (tests/lib_pmtu.sh, PMTU_OVERLAY=vxlan): the
# endpoints see a clean MTU 1450 on vx0, the black hole sits in the underlay
# (1400, no ICMP), so the true inner MTU is 1350. stackpilot inside S.
PMTU_OVERLAY=vxlan
source "$ROOT/tests/lib_pmtu.sh"

# The testbed itself: the kernel (DF pings) finds the inner boundary at 1350
# for IPv4 and IPv6, the underlay's at 1400, and a transfer at vx0's MTU
# black-holes in both directions without stackpilot: the server is there
# and small packets pass (a small transfer completes, the big one connects
# and gets its headers), full-size ones vanish.
t_pmtu_overlay_testbed() {
	local out
	pmtu_topo 1400; make_cgroup
	assert_eq "$(pmtu_true_mtu "$DST4")" 1350 "inner IPv4 MTU by ping -M do"
	assert_eq "$(pmtu_true_mtu "$DST6" -6)" 1350 "inner IPv6 MTU by ping -M do"
	assert_eq "$(pmtu_true_mtu 10.30.2.2)" 1400 "underlay MTU by ping -M do"
	set -- $(xfer "$DST4" 1000 outside 3)
	assert_eq "${3:-}" 0 "retransmissions of a 1000-byte upload through the tunnel (secs mss retrans: '$*')"
	out=$(ip netns exec "$NS_S" "$TCPTOOL" client "$DST4" 5201 300000 1 3) &&
		fail "an upload at MSS 1398 through the tunnel completed: $out"
	[[ $out =~ mss=([0-9]+)\ retrans=([0-9]+).*done=0 ]] || fail "the upload did not connect: '$out'"
	assert_eq "${BASH_REMATCH[1]}" 1398 "MSS of the upload through the tunnel"
	assert_ge "${BASH_REMATCH[2]}" 1 "retransmissions of the upload through the tunnel"
	http_serve "$NS_D"
	head -c 1000 /dev/zero >"$TMP/www/small"
	dl() { ip netns exec "$NS_S" curl -s -o /dev/null -w '%{http_code} %{size_download}' --max-time 3 \
		"http://$DST4:$HTTP_PORT/$1"; }
	assert_eq "$(dl small)" "200 1000" "HTTP status and bytes of a 1000-byte download through the tunnel"
	set -- $(dl file)
	echo "upload: $out; download of $HTTP_SIZE bytes: HTTP ${1:-?}, ${2:-?} bytes in 3 s"
	assert_eq "$1" 200 "HTTP status of a $HTTP_SIZE-byte download through the tunnel (its headers passed)"
	assert_le "$2" $((HTTP_SIZE / 10)) "bytes of a $HTTP_SIZE-byte download through the tunnel in 3 s"
}

# Learned inner MTU within threshold of the kernel's answer, never above it,
# and the next connection starts there (its MSS) without an RTO.
# pmtu_overlay_learned FAMILY-ADDRESS ENTRY-KEY IP-AND-TCP-HEADERS [-6]
pmtu_overlay_learned() {
	local true_mtu=$(pmtu_true_mtu "$1" $4) low second thr r0
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	thr=$(sp_ctl get pmtu.threshold | grep -o '[0-9]*$')
	xfer "$1" 1000000 >/dev/null || true
	for _ in $(seq 50); do [ "$(pm_entry "$2" state)" = searched ] && break; sleep 0.1; done
	r0=$(s_rtos)
	second=$(xfer "$1" 1000000)
	low=$(pm_entry "$2" low_mtu)
	echo "true MTU $true_mtu, threshold $thr; entry $(sp_json '.modules.pmtu.destinations | tostring'); second: $second"
	[ "$(pm_entry "$2" state)" = searched ] || fail "$1 not searched"
	[ "$low" -le "$true_mtu" ] && [ "$low" -gt $((true_mtu - thr)) ] ||
		fail "learned inner MTU $low, true $true_mtu (threshold $thr)"
	need_clamp	# the second connection starts right by its clamp
	[ -n "$second" ] || fail "second connection did not complete"
	set -- $second "$3"
	assert_eq "$2" $((low - $4 - 12)) "second connection's MSS (learned MTU - $4 - timestamps)"
	# Not its retransmissions: a tail loss probe on a busy host counts as
	# one (1 in a 1.1 ms transfer at the right MSS, seen once). Segments
	# too big for the tunnel would vanish, and only an RTO recovers them.
	assert_eq $(( $(s_rtos) - r0 )) 0 "second connection's RTOs ($3 retransmissions)"
}

t_pmtu_overlay_ipv4_learned() {
	pmtu_topo 1400; make_cgroup
	pmtu_overlay_learned "$DST4" "$DST4" 40
}

t_pmtu_overlay_ipv6_learned() {
	pmtu_topo 1400; make_cgroup
	pmtu_overlay_learned "$DST6" "$DST6P" 60 -6
}

# Echo filtered at D: SYN probes through the tunnel find the same boundary.
t_pmtu_overlay_echo_filtered_syn_probes() {
	pmtu_topo 1400 noecho; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	xfer "$DST4" 1000000 >/dev/null || true
	for _ in $(seq 50); do [ "$(pm_entry "$DST4" state)" = searched ] && break; sleep 0.1; done
	echo "$(cat "$TMP/sp.err"); $(sp_json '.modules.pmtu.destinations | tostring')"
	grep -q "$DST4 does not answer ICMP echo; probing it with TCP SYNs to port 5201" "$TMP/sp.err" ||
		fail "no SYN fallback: $(cat "$TMP/sp.err")"
	local low=$(pm_entry "$DST4" low_mtu)
	[ "$low" -le 1350 ] && [ "$low" -gt 1342 ] || fail "inner MTU by SYN probes $low, expected 1342 < MTU <= 1350 (the true one)"
}

# pmtu.route=1 puts the inner MTU on a route through vx0, which rescues the
# stalled first connection.
t_pmtu_overlay_route_option() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	set -- $(xfer "$DST4" 1000000)
	echo "first connection: $* ; routes: $(ip -n "$NS_S" route show proto 0xa5)"
	[ -n "${1:-}" ] && awk "BEGIN { exit !($1 < 2) }" || fail "first connection took '${1:-never}' s with the route option, expected < 2 s"
	ip -n "$NS_S" route show proto 0xa5 | has "^$DST4 dev vx0 .*mtu 13[45][0-9]" ||
		fail "no inner route MTU: $(ip -n "$NS_S" route show proto 0xa5)"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "routes left after exit"
}

# Learn before the stall (pmtu2's search on a destination's first
# connection): one small connection through the tunnel, no RTO, and the
# inner MTU is known within threshold of 1350 for the next one.
t_pmtu_overlay_learns_before_stall() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	set -- $(xfer "$DST4" 1000)
	assert_eq "${3:-}" 0 "retransmissions of a first connection of 1000 bytes"
	for _ in $(seq 100); do [ "$(pm_entry "$DST4" state)" = searched ] && break; sleep 0.1; done
	local low=$(pm_entry "$DST4" low_mtu)
	echo "entry: $(sp_json '.modules.pmtu.destinations | tostring')"
	assert_eq "$(sp_json .modules.pmtu.black_hole_suspects)" 0 "black-hole suspects"
	[ -n "$low" ] && [ "$low" -le 1350 ] && [ "$low" -gt 1342 ] || fail "inner MTU '$low' after a first connection, expected 1342 < MTU <= 1350 (the true one)"
	# The second connection starts at the learned MSS and needs no RTO;
	# its retransmission count is not the test (tunnel loss under load
	# gave 30 in 2.7 ms once, at the right MSS): see pmtu_overlay_learned.
	need_clamp
	local r0=$(s_rtos)
	set -- $(xfer "$DST4" 1000000)
	[ -n "${2:-}" ] || fail "second connection did not complete"
	assert_eq "$2" $((low - 40 - 12)) "second connection's MSS (learned MTU - 40 - timestamps)"
	assert_eq $(( $(s_rtos) - r0 )) 0 "second connection's RTOs (${3:-?} retransmissions)"
}
