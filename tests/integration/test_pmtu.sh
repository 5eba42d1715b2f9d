# SPDX-License-Identifier: GPL-2.0
# pmtu on the black-hole testbed (tests/lib_pmtu.sh), stackpilot inside S.
source "$ROOT/tests/lib_pmtu.sh"

# The first connection stalls into the black hole; stackpilot searches the path
# with probes; the second starts at the learned MSS and never stalls.
t_pmtu_second_connection_learned() {
	need_feature sockops_maxseg
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	local first second
	first=$(xfer 10.30.2.2 1000000) || true
	[ -n "$first" ] || fail "first transfer did not complete"
	second=$(xfer 10.30.2.2 1000000)
	echo "first: $first; second: $second; entry $(sp_json '.modules.pmtu.destinations[0] | tostring')"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	[ "$(pm_entry 10.30.2.2 state)" = searched ] || fail "destination not searched: state '$(pm_entry 10.30.2.2 state)'"
	# Within threshold (8) of the real path MTU, never above it.
	[ "$low" -le 1400 ] && [ "$low" -gt 1392 ] || fail "learned MTU $low, expected 1392 < MTU <= 1400 (the path's)"
	set -- $second
	[ "$3" = 0 ] || fail "second connection retransmitted $3 times"
	# MSS = MTU - 40 - 12 (timestamps)
	assert_eq "$2" $((low - 52)) "second connection's MSS"
	awk "BEGIN { exit !($1 < 1) }" || fail "second connection took $1 s"
	assert_ge "$(pm_entry 10.30.2.2 clamped)" 1 "connections started with the learned MSS"
	# Other destinations and processes outside the cgroup are not clamped.
	set -- $(xfer 10.30.3.2 100000)
	assert_eq "$2" 1448 "MSS to a destination without an entry"
	set -- $(xfer 10.30.2.2 1000 outside)
	assert_eq "$2" 1448 "MSS of a process outside the cgroup"
}

# pmtu.route=1: the route MTU rescues the first connection too, and goes on exit.
t_pmtu_route_option() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	set -- $(xfer 10.30.2.2 1000000)
	echo "first connection with the route option: $* s; route: $(ip -n "$NS_S" route show proto 0xa5)"
	awk "BEGIN { exit !($1 < 2) }" || fail "first connection took $1 s with the route option, expected < 2 s"
	ip -n "$NS_S" route show proto 0xa5 | has '^10.30.2.2 via 10.30.1.2 dev s0 .*mtu 1[34][0-9][0-9]' ||
		fail "no route MTU installed: $(ip -n "$NS_S" route show proto 0xa5)"
	assert_eq "$(pm_entry 10.30.2.2 route_mtu)" "$(pm_entry 10.30.2.2 low_mtu)" "route MTU in status"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "routes left after exit"
	assert_eq "$(ip netns exec "$NS_S" sysctl -n net.ipv4.tcp_mtu_probing)" 0 "tcp_mtu_probing restored"
}

# IPv6 at its minimum MTU: the learned value is 1280, never below.
t_pmtu_ipv6_minimum() {
	pmtu_topo 1280; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	sp_ctl set pmtu.base_mss=500 >/dev/null || fail "set pmtu.base_mss=500: exit $?"	# would probe at 560 if allowed
	xfer fd30:2::2 500000 >/dev/null || true
	local low=$(pm_entry fd30:2:: low_mtu)
	echo "IPv6 entry: $(sp_json '.modules.pmtu.destinations[0] | tostring')"
	assert_eq "$low" 1280 "IPv6 learned MTU on a 1280 path"
	need_clamp
	set -- $(xfer fd30:2::2 500000)
	assert_eq "$2" 1208 "second IPv6 connection's MSS (1280 - 60 - 12)"
	assert_eq "$3" 0 "second IPv6 connection's retransmissions"
}

# Echo filtered: TCP SYNs with data to the connection's port do the search.
t_pmtu_echo_filtered_syn_probes() {
	pmtu_topo 1400 noecho; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	xfer 10.30.2.2 1000000 >/dev/null || true
	xfer fd30:2::2 1000000 >/dev/null || true
	sleep 0.5
	echo "$(cat "$TMP/sp.err"); $(sp_json '.modules.pmtu.destinations | tostring')"
	grep -q '10.30.2.2 does not answer ICMP echo; probing it with TCP SYNs to port 5201' "$TMP/sp.err" ||
		fail "no SYN fallback message: $(cat "$TMP/sp.err")"
	local low=$(pm_entry 10.30.2.2 low_mtu) low6=$(pm_entry fd30:2:: low_mtu)
	[ "$(pm_entry 10.30.2.2 state)" = searched ] || fail "IPv4 destination not searched: state '$(pm_entry 10.30.2.2 state)'"
	[ "$low" -le 1400 ] && [ "$low" -gt 1392 ] || fail "IPv4 MTU by SYN probes $low, expected 1392 < MTU <= 1400 (the path's)"
	[ "$low6" -le 1400 ] && [ "$low6" -gt 1392 ] || fail "IPv6 MTU by SYN probes $low6, expected 1392 < MTU <= 1400 (the path's)"
	need_clamp
	set -- $(xfer 10.30.2.2 1000000)
	assert_eq "$3" 0 "retransmissions of a connection started at the learned MSS"
}

# Every probe filtered: the module says it cannot probe, and still learns from
# connections (the kernel's own detection, tcp_mtu_probing=1).
t_pmtu_unprobeable_learns_from_connections() {
	pmtu_topo 1400 noprobe; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	xfer 10.30.2.2 1000000 >/dev/null || true
	sleep 0.5
	grep -q '10.30.2.2 answers neither ICMP echo nor a TCP SYN to port 5201.*cannot probe it' "$TMP/sp.err" ||
		fail "no clear message: $(cat "$TMP/sp.err")"
	assert_eq "$(pm_entry 10.30.2.2 state)" no_probe "state of an unprobeable destination"
	xfer 10.30.2.2 300000 >/dev/null || true	# delivers learn_kb at the reduced MSS
	local low=$(pm_entry 10.30.2.2 low_mtu)
	echo "entry: $(sp_json '.modules.pmtu.destinations[0] | tostring')"
	# At least the kernel's black-hole MSS (tcp_base_mss 1024) + 40: an entry
	# with nothing learned has 0.
	assert_ge "$low" 1064 "MTU learned from connections"
	assert_le "$low" 1400 "MTU learned from connections (path MTU 1400)"
	need_clamp
	set -- $(xfer 10.30.2.2 1000000)
	assert_eq "$3" 0 "retransmissions of a connection started at the learned MSS"
}

# learn_kb written as 0 by bpftool acts as its minimum, 4 KiB; search_new=0
# leaves learning to connections: no entry after a connection of 2000
# bytes (one that happened, seen by pmtu), an entry after one of 6000.
t_pmtu_bpftool_clamp() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	# prefix4 prefix6 learn_kb threshold max_step_pct max_probes timeout interval base_mss route
	# enforce search_new searches_per_s max_searches probes_per_s
	nsenter -t "$SP_PID" -m -n bpftool map update pinned "$PIN/pmtu_cfg" key 0 0 0 0 value \
		32 0 0 0  64 0 0 0  0 0 0 0  8 0 0 0  200 0 0 0  3 0 0 0  0xf4 1 0 0  \
		0x58 2 0 0  0 4 0 0  0 0 0 0  1 0 0 0  0 0 0 0  10 0 0 0  4 0 0 0  100 0 0 0 || fail "bpftool: exit $?"
	local c0 r
	c0=$(sp_num .modules.pmtu.connects)
	r=$(xfer 10.30.3.2 2000) || fail "xfer of 2000 bytes: '$r'"
	set -- $r
	assert_eq "$#" 3 "fields of the 2000-byte transfer's line (secs mss retrans): '$*'"
	assert_eq "$(sp_num .modules.pmtu.connects)" $((c0 + 1)) "connections pmtu saw"
	assert_eq "$(pm_entry 10.30.3.2 low_mtu)" "" "entry after 2000 bytes (learn_kb 0 must act as 4)"
	xfer 10.30.3.2 6000 >/dev/null || fail "xfer: exit $?"
	assert_eq "$(pm_entry 10.30.3.2 low_mtu)" 1500 "entry after 6000 bytes (learn_kb 0 must act as 4)"
	# enforce 7 acts as 1; searches_per_s, max_searches, probes_per_s 0 as 1.
	nsenter -t "$SP_PID" -m -n bpftool map update pinned "$PIN/pmtu_cfg" key 0 0 0 0 value \
		32 0 0 0  64 0 0 0  0 0 0 0  8 0 0 0  200 0 0 0  3 0 0 0  0xf4 1 0 0  \
		0x58 2 0 0  0 4 0 0  0 0 0 0  7 0 0 0  1 0 0 0  0 0 0 0  0 0 0 0  0 0 0 0 || fail "bpftool: exit $?"
	xfer 10.30.3.2 2000 >/dev/null || fail "xfer: exit $?"
	if has_feature sockops_maxseg; then
		assert_eq "$(sp_json .modules.pmtu.started_with_learned_mss)" 1 "clamped with enforce written as 7"
	else
		echo "not checked: the clamp with enforce written as 7 (this kernel has no sockops_maxseg)"
	fi
	local t0=$(date +%s%N)
	xfer fd30:3::2 2000 >/dev/null || fail "xfer: exit $?"
	for _ in $(seq 50); do [ "$(pm_entry fd30:3:: state)" = searched ] && break; sleep 0.1; done
	local ms=$(( ($(date +%s%N) - t0) / 1000000 )) probes=$(pm_entry fd30:3:: probes)
	echo "search with the rates written as 0: $probes probes, searched within $ms ms; $(grep "fd30:3::2: path MTU" "$TMP/sp.err")"
	assert_eq "$(pm_entry fd30:3:: low_mtu)" 1500 "MTU found with the rates written as 0"
	# Base size, then the route's MTU: 2 probes, or 3 if the path lost one
	# (CI saw 3 twice; 42 runs here under 0-12 busy loops never did).
	# probes_per_s written as 0 is 1 a second, not unlimited: the second
	# probe waited for its token.
	[ "$probes" = 2 ] || [ "$probes" = 3 ] || fail "probes of a search with the rates written as 0: $probes"
	assert_ge "$ms" 900 "ms until a 2-probe search at probes_per_s=1 (written as 0) ended"
	kill -0 "$SP_PID" || fail "stackpilot died: $(sp_said)"
}

# pmtu.route=1 never shadows a route an admin made: a host route to the
# destination at metric 100 (ours, metric 0, would win) or a covering /64.
t_pmtu_route_refrains_for_admin_route() {
	pmtu_topo 1400; make_cgroup
	ip -n "$NS_S" route add 10.30.2.2 via 10.30.1.2 metric 100 || fail "admin route: exit $?"
	ip -n "$NS_S" -6 route add fd30:2::/64 via fd30:1::2 metric 100 || fail "admin route 6: exit $?"
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	xfer 10.30.2.2 1000000 >/dev/null || true
	xfer fd30:2::2 1000000 >/dev/null || true
	for _ in $(seq 50); do
		[ "$(pm_entry fd30:2:: state)" = searched ] && [ "$(pm_entry 10.30.2.2 state)" = searched ] && break
		sleep 0.1
	done
	echo "$(grep 'not shadowing' "$TMP/sp.err")"
	[ "$(pm_entry 10.30.2.2 state)" = searched ] || fail "IPv4 destination not searched: state '$(pm_entry 10.30.2.2 state)'"
	[ "$(pm_entry fd30:2:: state)" = searched ] || fail "IPv6 destination not searched: state '$(pm_entry fd30:2:: state)'"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)$(ip -n "$NS_S" -6 route show proto 0xa5)" "" "our routes next to admin routes"
	grep -q 'no route MTU to 10.30.2.2: a host route to it exists.*not shadowing it' "$TMP/sp.err" ||
		fail "no log line for the IPv4 refusal: $(cat "$TMP/sp.err")"
	grep -q 'no route MTU to fd30:2::2: an admin route fd30:2::/64.*covers it; not shadowing it' "$TMP/sp.err" ||
		fail "no log line for the IPv6 refusal: $(cat "$TMP/sp.err")"
	assert_eq "$(pm_entry 10.30.2.2 route_mtu)" 0 "route MTU in status"
	ip -n "$NS_S" route show 10.30.2.2 | has 'metric 100' || fail "admin route gone"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	ip -n "$NS_S" -6 route show fd30:2::/64 | has 'metric 100' || fail "admin IPv6 route gone"
}

# A destination that answers no probe (10 tries of 10 s per size) does not
# hold up the search of another one: searches run side by side.
t_pmtu_searches_side_by_side() {
	pmtu_topo 1400 noprobe4; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	sp_ctl set pmtu.max_probes=10 pmtu.probe_timeout_ms=10000 >/dev/null || fail "set pmtu.max_probes=10 pmtu.probe_timeout_ms=10000: exit $?"
	xfer 10.30.2.2 1000000 >/dev/null || true	# its search goes on for minutes
	grep -q '10.30.2.2: .*searching its path MTU' "$TMP/sp.err" || fail "IPv4 search not started: $(cat "$TMP/sp.err")"
	xfer fd30:2::2 1000000 >/dev/null || true
	for _ in $(seq 50); do
		[ "$(pm_entry fd30:2:: state)" = searched ] && break
		sleep 0.1
	done
	echo "$(cat "$TMP/sp.err")"
	[ "$(pm_entry fd30:2:: state)" = searched ] || fail "IPv6 destination not searched while IPv4's search runs: state '$(pm_entry fd30:2:: state)'"
	local low6=$(pm_entry fd30:2:: low_mtu)
	[ "$low6" -le 1400 ] && [ "$low6" -gt 1392 ] || fail "IPv6 MTU $low6, expected 1392 < MTU <= 1400 (the path's)"
	grep -q '10.30.2.2: path MTU\|10.30.2.2 answers neither' "$TMP/sp.err" && fail "the IPv4 search ended early"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# --mtu-probing is pmtu's own run option: checked by pmtu, refused without it.
t_pmtu_run_option_errors() {
	local rc
	"$SP" run --pin-path "$PIN" --modules tcpstats --mtu-probing 1 2>"$TMP/err"; rc=$?
	assert_eq "$rc" 2 "exit with --mtu-probing but no pmtu"
	assert_eq "$(cat "$TMP/err")" "stackpilot: --mtu-probing is for the pmtu module, which is not chosen" "error line"
	"$SP" run --pin-path "$PIN" --mtu-probing 3 2>"$TMP/err"; rc=$?
	assert_eq "$rc" 2 "exit with --mtu-probing 3"
	assert_eq "$(cat "$TMP/err")" "stackpilot: --mtu-probing 3: expected 0, 1 or 2" "error line"
	"$SP" run --help | has -- '--mtu-probing N .*pmtu: ' || fail "--mtu-probing not in run --help"
	[ ! -e "$PIN" ] || fail "pin folder made by a refused run"
}

# Wait up to 10 s for DST's entry to be in state STATE.
pm_wait_state() {
	for _ in $(seq 100); do
		[ "$(pm_entry "$1" state)" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# Wait up to 10 s for DST's Nth finished search (at expiry: N = 2).
pm_wait_searches() {
	for _ in $(seq 100); do
		[ "$(grep -c "$1: path MTU" "$TMP/sp.err")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# Learn before the stall: a first connection that never stalls (1000 bytes,
# one small segment) is enough for the destination to be searched in the
# background; the second connection starts at the learned MSS. Connections
# to a known destination then ask for nothing and cost no probe.
t_pmtu_learns_before_stall() {
	need_feature sockops_maxseg
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	set -- $(xfer 10.30.2.2 1000)
	assert_eq "$3" 0 "retransmissions of the first connection"
	pm_wait_state 10.30.2.2 searched || fail "not searched after a first connection: $(cat "$TMP/sp.err")"
	local low=$(pm_entry 10.30.2.2 low_mtu) probes=$(pm_entry 10.30.2.2 probes)
	echo "entry: $(sp_json '.modules.pmtu.destinations[0] | tostring')"
	assert_eq "$(sp_json .modules.pmtu.black_hole_suspects)" 0 "black-hole suspects (no RTO was needed)"
	assert_eq "$(sp_json .modules.pmtu.searches_asked)" 1 "searches asked"
	[ "$low" -le 1400 ] && [ "$low" -gt 1392 ] || fail "learned MTU $low, expected 1392 < MTU <= 1400 (the path's)"
	[ "$probes" -le 20 ] || fail "$probes probes for one new destination (target <= 20)"
	# tcp_mtu_probing is 0: into the black hole it would never complete. (Not
	# retransmissions == 0: a busy machine's tail loss probe counts as one.)
	set -- $(xfer 10.30.2.2 1000000 "" 5)
	[ -n "${1:-}" ] || fail "second connection did not complete"
	awk "BEGIN { exit !($1 < 1) }" || fail "second connection took $1 s"
	assert_eq "$2" $((low - 52)) "second connection's MSS"
	# 20 connections to the known destination: not one ask, not one probe.
	in_cgroup ip netns exec "$NS_S" "$TCPTOOL" client 10.30.2.2 5201 1000 20 >/dev/null || fail "20 connections: exit $?"
	sleep 0.3
	assert_eq "$(pm_entry 10.30.2.2 probes)" "$probes" "probes after 20 connections to a known destination"
	assert_eq "$(sp_json .modules.pmtu.searches_asked)" 1 "searches asked after 20 connections"
	assert_eq "$(grep -c '10.30.2.2: .*searching its path MTU' "$TMP/sp.err")" 1 "searches of 10.30.2.2"
	# A healthy path is done in two probes: the base size and the route's MTU.
	xfer 10.30.3.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.3.2 searched || fail "healthy destination not searched"
	assert_eq "$(pm_entry 10.30.3.2 low_mtu)" 1500 "healthy destination's MTU"
	assert_eq "$(pm_entry 10.30.3.2 probes)" 2 "probes for a healthy destination"
}

# The server side: the server runs in the cgroup, its client is behind the
# black hole; route=1. server_download SEARCH_NEW LIMIT_S: 5 MB over HTTP
# (python3 http.server, curl), fetch 1 must complete within LIMIT_S.
server_download() {
	pmtu_topo 1400; make_cgroup
	mkdir "$TMP/www" && head -c 5000000 /dev/zero >"$TMP/www/f"
	in_cgroup ip netns exec "$NS_S" python3 -m http.server --bind 10.30.1.1 --directory "$TMP/www" 8080 \
		>/dev/null 2>&1 &
	BG_PIDS+=($!); disown
	for _ in $(seq 50); do ip netns exec "$NS_S" ss -ltn | has ':8080 ' && break; sleep 0.1; done
	fetch() { ip netns exec "$NS_D" curl -s -o /dev/null -m "$1" -w '%{time_total} %{size_download}\n' \
		http://10.30.1.1:8080/f; }
	# Without stackpilot the download stalls for good (tcp_mtu_probing=0).
	fetch 2 >/dev/null && fail "the download completed without stackpilot: no black hole?"
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.route=1 pmtu.search_new="$1" >/dev/null || fail "set pmtu.route=1 pmtu.search_new=$1: exit $?"
	local f1 f2
	f1=$(fetch 12) || fail "fetch 1 did not complete: $(cat "$TMP/sp.err")"
	f2=$(fetch 12) || fail "fetch 2 did not complete"
	echo "search_new=$1: fetch 1: $f1; fetch 2: $f2; $(sp_json '.modules.pmtu | {accepts, searches_asked, black_hole_suspects, destinations} | tostring')"
	set -- "$@" $f1
	assert_eq "$4" 5000000 "bytes of fetch 1"
	awk "BEGIN { exit !($3 < $2) }" || fail "fetch 1 took $3 s (limit $2 s)"
	assert_ge "$(sp_json .modules.pmtu.accepts)" 2 "accepted connections seen"
	assert_eq "$(pm_entry 10.30.2.2 state)" searched "state of the client's entry"
	ip -n "$NS_S" route show proto 0xa5 | has '^10.30.2.2 .*mtu 1[34][0-9][0-9]' ||
		fail "no route MTU to the client: $(ip -n "$NS_S" route show proto 0xa5)"
}

# The accepted connection asks for a search at once; the route MTU rescues
# the download already stalled (target: fetch 1 < 1.5 s).
t_pmtu_server_download_route() {
	server_download 1 1.5
	assert_eq "$(sp_json .modules.pmtu.searches_asked)" 1 "searches asked"
}

# Without the early search, the accepted connection's RTO (no data was ever
# acked: the first flight is full-size) is the suspect that starts it.
t_pmtu_server_rto_suspect() {
	server_download 0 3
	assert_eq "$(sp_json .modules.pmtu.searches_asked)" 0 "searches asked with search_new=0"
	assert_ge "$(sp_json .modules.pmtu.black_hole_suspects)" 1 "black-hole suspects"
}

# enforce=0: learns and reports (would_clamp), clamps nothing, adds no route.
t_pmtu_enforce_off() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.enforce=0 pmtu.route=1 >/dev/null || fail "set pmtu.enforce=0 pmtu.route=1: exit $?"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "not searched with enforce=0"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	set -- $(xfer 10.30.2.2 1000)
	assert_eq "$2" 1448 "MSS with enforce=0"
	assert_eq "$(sp_json .modules.pmtu.would_clamp)" 1 "would_clamp"
	assert_eq "$(sp_json .modules.pmtu.started_with_learned_mss)" 0 "clamped with enforce=0"
	assert_eq "$(pm_entry 10.30.2.2 route_mtu)" 0 "route MTU in status with enforce=0"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "routes with enforce=0"
	need_clamp
	sp_ctl set pmtu.enforce=1 >/dev/null || fail "set pmtu.enforce=1: exit $?"
	set -- $(xfer 10.30.2.2 1000)
	assert_eq "$2" $((low - 52)) "MSS once enforce=1"
}

# An entry remembers what answered: where echo is filtered, its expiry's
# search starts with SYNs to the same port, spending nothing on echo.
t_pmtu_research_remembers_method() {
	pmtu_topo 1400 noecho; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "not searched: $(cat "$TMP/sp.err")"
	assert_eq "$(pm_entry 10.30.2.2 method)" syn "method"
	assert_eq "$(pm_entry 10.30.2.2 port)" 5201 "port"
	local p1=$(pm_entry 10.30.2.2 probes)
	sp_ctl set pmtu.interval_s=2 >/dev/null || fail "set pmtu.interval_s=2: exit $?"
	pm_wait_searches 10.30.2.2 2
	echo "$(grep 10.30.2.2 "$TMP/sp.err")"
	grep -q '10.30.2.2: entry expired (port 5201); searching its path MTU with TCP SYNs, which answered its last search' \
		"$TMP/sp.err" || fail "the expiry's search did not start with SYNs"
	assert_eq "$(grep -c '10.30.2.2 does not answer ICMP echo' "$TMP/sp.err")" 1 "echo fallbacks"
	grep '10.30.2.2: path MTU' "$TMP/sp.err" | sed -n 2p | has 'by TCP SYN' || fail "second search not by SYN"
	local p2=$(pm_entry 10.30.2.2 probes)
	# The first search spent max_probes (3) echo probes that the second did not.
	[ $((p2 - p1)) -le $((p1 - 3)) ] || fail "second search: $((p2 - p1)) probes, first $p1"
	[ "$(pm_entry 10.30.2.2 low_mtu)" -gt 1392 ] || fail "re-searched MTU $(pm_entry 10.30.2.2 low_mtu), expected > 1392"
}

# probes_per_s and max_searches hold: 5 probes a second, one search at a time.
t_pmtu_rate_limits() {
	pmtu_topo 1400; make_cgroup
	# Counted as they reach the router, before its MTU check drops the big ones.
	ip netns exec "$NS_RT" nft add chain inet bh pre '{ type filter hook prerouting priority -300; }'
	ip netns exec "$NS_RT" nft add rule inet bh pre icmp type echo-request counter
	echoes() { ip netns exec "$NS_RT" nft list chain inet bh pre | sed -n 's/.*echo-request counter packets \([0-9]*\).*/\1/p'; }
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.probes_per_s=5 pmtu.max_searches=1 >/dev/null || fail "set pmtu.probes_per_s=5 pmtu.max_searches=1: exit $?"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	xfer 10.30.3.2 1000 >/dev/null || fail "xfer: exit $?"
	sleep 1
	local n1=$(echoes)
	pm_wait_state 10.30.3.2 searched || fail "second destination not searched: $(cat "$TMP/sp.err")"
	local p=$(pm_entry 10.30.2.2 probes) n=$(echoes)
	echo "echo requests after 1 s: $n1, in all $n; probes to 10.30.2.2: $p; $(grep 'pmtu:' "$TMP/sp.err")"
	assert_eq "$n" $((p + 2)) "echo requests counted (both searches)"
	# a burst of 5, then 5 a second
	[ "$n1" -le 11 ] || fail "$n1 probes in the first second with probes_per_s=5, expected <= 11"
	assert_ge "$p" 12 "probes of the black-hole search (else the limit was not tested)"
	# One at a time: the second search began after the first ended.
	grep -n '10.30.2.2: path MTU\|10.30.3.2: .*searching' "$TMP/sp.err" | head -1 | has '10.30.2.2: path MTU' ||
		fail "the second search started while the first ran"
}

# Why pmtu does not trigger on a receive-side stall: 1.2 s into a download
# stalled by the black hole (server in S sends full-size segments toward D),
# the client's socket looks, in every field a detector could use, the same as
# with a healthy server that sent its headers and then pauses (a long poll, a
# stream): request acked, one data segment in (the headers), no
# out-of-order data, no retransmission, rcv_mss never above a small segment,
# nothing received since. A receiver cannot tell the two apart; searching at
# the first connection (search_new) is what protects downloads.
t_pmtu_rx_stall_indistinguishable() {
	pmtu_topo 1400
	mkdir "$TMP/www" && head -c 5000000 /dev/zero >"$TMP/www/f"
	printf '%s\n' 'import http.server, time' \
		'class H(http.server.BaseHTTPRequestHandler):' \
		'    def do_GET(self):' \
		'        self.send_response(200); self.send_header("Content-Length", "1000"); self.end_headers()' \
		'        self.wfile.flush(); time.sleep(2); self.wfile.write(b"x" * 1000)' \
		'http.server.HTTPServer(("10.30.1.1", 8081), H).serve_forever()' >"$TMP/pause.py"
	ip netns exec "$NS_S" python3 -m http.server --bind 10.30.1.1 --directory "$TMP/www" 8080 >/dev/null 2>&1 &
	BG_PIDS+=($!); disown
	ip netns exec "$NS_S" python3 "$TMP/pause.py" >/dev/null 2>&1 &
	BG_PIDS+=($!); disown
	for _ in $(seq 50); do
		[ "$(ip netns exec "$NS_S" ss -ltnH | grep -c ':808[01] ')" = 2 ] && break
		sleep 0.1
	done
	rx() {
		ip netns exec "$NS_D" ss -tinH dst 10.30.1.1 dport = ":$1" | tr -s ' \t\n' ' ' |
			grep -o ' \(data_segs_in\|rcvmss\|rcv_ooopack\|retrans\|bytes_retrans\|unacked\|lastrcv\):[0-9/]*' | tr -d '\n'
	}
	local port info=()
	for port in 8080 8081; do
		ip netns exec "$NS_D" curl -s -o /dev/null -m 2.5 "http://10.30.1.1:$port/f" &
		BG_PIDS+=($!)
		sleep 1.2
		info+=("$(rx $port)")
	done
	echo "black hole: ${info[0]}; pausing server: ${info[1]}"
	local lr
	for lr in "${info[@]}"; do
		lr=${lr##*lastrcv:}
		assert_ge "${lr%% *}" 1000 "ms since the client last received"
	done
	[ -n "${info[0]}" ] || fail "no client socket seen"
	assert_eq "${info[0]% lastrcv:*}" "${info[1]% lastrcv:*}" "client socket, black hole vs pausing server"
	ip netns exec "$NS_D" curl -s -o /dev/null -m 3 http://10.30.1.1:8080/f && fail "download completed: no black hole"
	return 0
}

# A dual-stack server (tcptool listens on ::) in the cgroup: its IPv4
# clients' sockets are IPv4-mapped IPv6; they are keyed and probed as IPv4.
t_pmtu_server_v4_mapped() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	in_cgroup ip netns exec "$NS_S" "$TCPTOOL" server 5202 >/dev/null &
	BG_PIDS+=($!); disown
	sleep 0.3
	ip netns exec "$NS_D" "$TCPTOOL" client 10.30.1.1 5202 1000 >/dev/null || fail "client in D: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "no IPv4 entry for the mapped client: $(sp_json '.modules.pmtu | tostring')"
	echo "$(sp_json '.modules.pmtu.destinations | tostring')"
	assert_eq "$(sp_json '.modules.pmtu.destinations | length')" 1 "entries"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	[ "$low" -le 1400 ] && [ "$low" -gt 1392 ] || fail "learned MTU $low, expected 1392 < MTU <= 1400 (the path's)"
}

# Connections from another network namespace than the loader's cannot be
# probed from here: said once, and the destination is left alone (no_probe)
# instead of being asked for at every connection.
t_pmtu_other_netns() {
	pmtu_topo 1400; make_cgroup
	mk_netns "sp-$ID-o"
	SP_NS=sp-$ID-o sp_start --modules pmtu --cgroup "sp-test-$ID"
	SP_NS=sp-$ID-o
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 no_probe || fail "state: $(sp_json '.modules.pmtu | tostring')"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	xfer 10.30.3.2 1000 >/dev/null || fail "xfer: exit $?"
	sleep 0.3
	echo "$(cat "$TMP/sp.err")"
	assert_eq "$(sp_json .modules.pmtu.searches_asked)" 2 "searches asked (one per destination)"
	assert_eq "$(grep -c 'another network namespace' "$TMP/sp.err")" 1 "log lines"
	assert_eq "$(pm_entry 10.30.2.2 probes)" 0 "probes"
}

# While an expired entry is searched again (slowed here to a probe a second),
# connections still start at its low: it passed, and 1448 would stall.
t_pmtu_expired_entry_still_clamps() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "not searched"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	need_clamp
	sp_ctl set pmtu.probes_per_s=1 pmtu.interval_s=1 >/dev/null || fail "set pmtu.probes_per_s=1 pmtu.interval_s=1: exit $?"
	for _ in $(seq 50); do grep -q '10.30.2.2: entry expired' "$TMP/sp.err" && break; sleep 0.1; done
	grep -q '10.30.2.2: entry expired' "$TMP/sp.err" || fail "no search at expiry: $(cat "$TMP/sp.err")"
	sleep 1.2	# expired for over a second, its search in flight
	set -- $(xfer 10.30.2.2 1000000 "" 5)
	echo "during the search at expiry: $*; $(sp_json '.modules.pmtu.destinations | tostring')"
	[ -n "${1:-}" ] || fail "connection during the search at expiry did not complete"
	assert_eq "$2" $((low - 52)) "MSS during the search at expiry"
	grep -q '10.30.2.2: path MTU.*' <(grep -A100 'entry expired' "$TMP/sp.err") && fail "the search at expiry was over: not tested"
	return 0
}

# The black-hole testbed, route=1, 10.30.2.2 searched (and its route added).
pm_searched_with_route() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "not searched: $(cat "$TMP/sp.err")"
}

# A path whose MTU grows while its route MTU (route=1) is in place: the
# search at expiry probes above our own route (its ceiling is the route
# beneath ours), finds the larger MTU and removes the route. Our route must
# never be the ceiling of the search that decides whether it stays.
t_pmtu_path_grows_under_our_route() {
	pm_searched_with_route
	[ "$(pm_entry 10.30.2.2 route_mtu)" -le 1400 ] || fail "route MTU '$(pm_entry 10.30.2.2 route_mtu)', expected <= 1400: $(sp_json '.modules.pmtu.destinations | tostring')"
	ip -n "$NS_RT" link set rd mtu 1500	# the overlay is fixed: the path grows
	sp_ctl set pmtu.interval_s=1 >/dev/null || fail "set pmtu.interval_s=1: exit $?"
	pm_wait_searches 10.30.2.2 2
	echo "$(grep 10.30.2.2 "$TMP/sp.err"); $(sp_json '.modules.pmtu.destinations | tostring')"
	assert_ge "$(grep -c '10.30.2.2: path MTU' "$TMP/sp.err")" 2 "searches at expiry ('10.30.2.2: path MTU' lines)"
	assert_eq "$(pm_entry 10.30.2.2 low_mtu)" 1500 "MTU after the path grew"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "our route after the path grew"
}

# A peer that advertises a small MSS (536 here: any server or client may)
# limits the connection's MSS, not the path: such a connection proves
# nothing about the path and must not become the destination's low (every
# later connection to it, to any port, would start at MSS 536).
t_pmtu_peer_mss_not_learned() {
	pmtu_topo 1400; make_cgroup
	printf '%s\n' 'import socket' 's = socket.socket()' \
		's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)' \
		's.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)' \
		's.bind(("0.0.0.0", 5203)); s.listen()' \
		'while True:' '    c, _ = s.accept()' '    while c.recv(65536): pass' '    c.close()' >"$TMP/mss.py"
	ip netns exec "$NS_D2" python3 "$TMP/mss.py" >/dev/null 2>&1 &
	BG_PIDS+=($!); disown
	for _ in $(seq 50); do ip netns exec "$NS_D2" ss -ltnH | has ':5203 ' && break; sleep 0.1; done
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.search_new=0 >/dev/null || fail "set pmtu.search_new=0: exit $?"	# learning from connections only
	set -- $(in_cgroup ip netns exec "$NS_S" "$TCPTOOL" client 10.30.3.2 5203 300000 |
		sed -n 's/^conn secs=\([0-9.]*\) mss=\([0-9]*\).*done=1$/\1 \2/p')
	assert_eq "${2:-}" 524 "MSS toward the server advertising 536 (536 - 12)"
	sleep 0.2
	echo "entries: $(sp_json '.modules.pmtu.destinations | tostring')"
	assert_eq "$(pm_entry 10.30.3.2 low_mtu)" "" "low learned from a connection limited by its peer's MSS"
	set -- $(xfer 10.30.3.2 100000)
	assert_eq "${2:-}" 1448 "MSS of a later connection to another port of that host"
	# A connection limited by the path alone still teaches its MTU.
	set -- $(xfer 10.30.3.2 300000)
	assert_eq "$(pm_entry 10.30.3.2 low_mtu)" 1500 "low learned from a connection at the path's MTU"
}

# route=1, the black hole still there at expiry: the search at expiry finds
# it again and the route stays (it was removed, "as the route's" MTU, when
# our own route capped that search: every other interval without a rescue).
t_pmtu_route_survives_research() {
	pm_searched_with_route
	sp_ctl set pmtu.interval_s=1 >/dev/null || fail "set pmtu.interval_s=1: exit $?"
	pm_wait_searches 10.30.2.2 3 || fail "no two searches at expiry: $(cat "$TMP/sp.err")"
	sp_ctl set pmtu.interval_s=600 >/dev/null || fail "set pmtu.interval_s=600: exit $?"
	echo "$(grep 10.30.2.2 "$TMP/sp.err")"
	grep '10.30.2.2: path MTU' "$TMP/sp.err" | has "as the route's" && fail "a search at expiry took our route's MTU for the path's"
	ip -n "$NS_S" route show proto 0xa5 | has '^10.30.2.2 .*mtu 1[34][0-9][0-9]' ||
		fail "route gone after the searches at expiry: $(ip -n "$NS_S" route show proto 0xa5)"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	[ "$low" -le 1400 ] && [ "$low" -gt 1392 ] || fail "MTU $low after the searches at expiry, expected 1392 < MTU <= 1400 (the path's)"
}

# An entry evicted from the LRU map (deleted here with bpftool, as the
# 4097th destination would) takes its route with it within a second:
# otherwise the route stays until exit, never searched again.
t_pmtu_route_goes_with_evicted_entry() {
	pm_searched_with_route
	ip -n "$NS_S" route show proto 0xa5 | has '^10.30.2.2 ' || fail "no route"
	local key
	key=$(nsenter -t "$SP_PID" -m -n bpftool -j map dump pinned "$PIN/pmtu_dsts" | jq -r '.[0].key | join(" ")')
	[ -n "$key" ] || fail "no key in the map"
	nsenter -t "$SP_PID" -m -n bpftool map delete pinned "$PIN/pmtu_dsts" key $key || fail "bpftool delete: exit $?"
	for _ in $(seq 30); do [ -z "$(ip -n "$NS_S" route show proto 0xa5)" ] && break; sleep 0.1; done
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "our route after its entry was evicted"
	grep -q 'route to 10.30.2.2 removed' "$TMP/sp.err" || fail "no log line: $(tail -5 "$TMP/sp.err")"
}

# pm_flood FORMAT FIRST LAST SERVER: a server in the cgroup (port 5202) and
# one connection to it from each source address FORMAT % i (i = FIRST..LAST) of D2,
# PM_FLOOD_GAP seconds apart (default 0: as fast as python connects).
pm_flood() {
	in_cgroup ip netns exec "$NS_S" "$TCPTOOL" server 5202 >/dev/null &
	BG_PIDS+=($!); disown
	sleep 0.3
	printf '%s\n' 'import socket, sys, time' 'f, a, b, srv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]' \
		'for i in range(a, b + 1):' '    s = socket.socket(socket.AF_INET6 if ":" in srv else socket.AF_INET)' \
		'    s.bind((f % i, 0)); s.settimeout(2)' \
		'    s.connect((srv, 5202)); s.send(b"x"); s.close()' \
		"    time.sleep(${PM_FLOOD_GAP:-0})" >"$TMP/flood.py"
	ip netns exec "$NS_D2" python3 "$TMP/flood.py" "$@" || fail "flood clients: exit $?"
}

# A server in the cgroup, 70 clients from 70 addresses that answer no probe
# (each search: 2 x max_probes timeouts, 3 s): the queue of 64 is full for a
# minute. A client connection that stalls into the black hole meanwhile is
# searched at once (suspects go first, one search slot is theirs) and its
# route (route=1) rescues it. Before: its ask was dropped, the stall stayed.
t_pmtu_stall_searched_during_flood() {
	pmtu_topo 1400; make_cgroup
	ip netns exec "$NS_RT" nft add rule inet bh c_fwd ip daddr 10.30.3.100-10.30.3.199 icmp type echo-request drop
	ip netns exec "$NS_RT" nft add rule inet bh c_fwd ip daddr 10.30.3.100-10.30.3.199 'tcp flags & (syn | ack) == syn drop'
	for i in $(seq 100 169); do ip -n "$NS_D2" addr add "10.30.3.$i/32" dev d0; done
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	# searches_per_s at its maximum, 1000, and clients 2 ms apart: the asks'
	# bucket (burst 64, 1 ms an ask) is never empty. Unpaced, the 70 clients
	# came in 2-6 ms, 1-4 asks were limited and CI once saw 66 asked.
	sp_ctl set pmtu.route=1 pmtu.searches_per_s=1000 >/dev/null || fail "set pmtu.route=1 pmtu.searches_per_s=1000: exit $?"
	PM_FLOOD_GAP=0.002 pm_flood 10.30.3.%d 100 169 10.30.1.1
	# 3 searching, 64 waiting: the queue is full.
	for _ in $(seq 30); do [ "$(sp_json .modules.pmtu.searches_asked)" -ge 67 ] 2>/dev/null && break; sleep 0.1; done
	echo "flood: $(sp_json '.modules.pmtu | {accepts, searches_asked, asks_limited} | tostring')"
	assert_ge "$(sp_json .modules.pmtu.searches_asked)" 67 "searches asked by the flood"
	set -- $(xfer 10.30.2.2 1000000 "" 8)
	echo "stalled connection during the flood: ${*:-did not complete}; $(grep '10.30.2.2\|waiting' "$TMP/sp.err")"
	[ -n "${1:-}" ] || fail "the stalled connection was not rescued during the flood"
	awk "BEGIN { exit !($1 < 3) }" || fail "the stalled connection took $1 s, expected < 3 s"
	[ "$(pm_entry 10.30.2.2 state)" = searched ] || fail "black hole not searched: state '$(pm_entry 10.30.2.2 state)'"
}

# A server in the cgroup accepts 5000 clients from 5000 IPv6 prefixes (an
# attacker's /48 has 65536 /64s; prefix6=128 here stands for that). Asks are
# a bucket of searches_per_s with a burst of 64, and they are what makes an
# accepted client an entry: the LRU map (4096) holds the clients the loader
# can search, not 4096 of them, and keeps what the cgroup learned. Before:
# every client made an entry, the map was full of them (the LRU then evicts
# the cgroup's destinations least used, and they stall again).
t_pmtu_ask_flood_keeps_entries() {
	pmtu_topo 1400; make_cgroup
	ip -n "$NS_RT" -6 route add fd31::/32 via fd30:3::2 || fail "flood route: exit $?"
	for i in $(seq 5000); do printf 'addr add fd31:0:%x::1/128 dev lo nodad\n' "$i"; done |
		ip -n "$NS_D2" -batch - || fail "flood addresses"
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.prefix6=128 >/dev/null || fail "set pmtu.prefix6=128: exit $?"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "not searched: $(cat "$TMP/sp.err")"
	local low=$(pm_entry 10.30.2.2 low_mtu) t0 secs n max
	t0=$(date +%s.%N)
	pm_flood fd31:0:%x::1 1 5000 fd30:1::1
	secs=$(echo "$(date +%s.%N) - $t0" | bc)
	n=$(nsenter -t "$SP_PID" -m -n bpftool -j map dump pinned "$PIN/pmtu_dsts" | jq length)
	echo "flood of 5000 clients in $secs s: $n entries; $(sp_json '.modules.pmtu | {accepts, searches_asked, asks_limited} | tostring')"
	assert_ge "$(sp_json .modules.pmtu.accepts)" 5000 "accepted connections"
	# 1 learned + a burst of 64 + 10 a second (searches_per_s), and some slack for CPUs racing.
	max=$(echo "66 + 10 * ($secs + 1) + 8" | bc | cut -d. -f1)
	[ "$n" -le $max ] || fail "$n entries after a flood of $secs s, expected <= $max"
	need_clamp
	set -- $(xfer 10.30.2.2 1000000 "" 5)
	[ -n "${1:-}" ] || fail "a connection to the learned destination stalled after the flood"
	assert_eq "$2" $((low - 52)) "MSS of a connection to the learned destination after the flood"
}

# The router's link goes down during a search (slowed to 2 probes a second),
# after the base size was answered: every later probe is lost. That is not a
# path MTU of base_mss: the base size is probed again, and unanswered, the
# search ends without a result. Before: learned 1064 (MSS 1024 for every
# connection, and route=1 made it a route) for interval_s.
t_pmtu_path_lost_during_search() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.probes_per_s=2 >/dev/null || fail "set pmtu.probes_per_s=2: exit $?"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	for _ in $(seq 50); do grep -q '10.30.2.2: new destination' "$TMP/sp.err" && break; sleep 0.05; done
	sleep 0.3
	ip -n "$NS_RT" link set rd down
	for _ in $(seq 200); do grep -q '10.30.2.2: path MTU\|10.30.2.2 stopped answering' "$TMP/sp.err" && break; sleep 0.1; done
	ip -n "$NS_RT" link set rd up
	echo "$(grep 10.30.2.2 "$TMP/sp.err"); $(sp_json '.modules.pmtu.destinations | tostring')"
	grep -q '10.30.2.2 stopped answering 1064-byte probes during its search' "$TMP/sp.err" || fail "no log line: $(tail -5 "$TMP/sp.err")"
	grep -q '10.30.2.2: path MTU' "$TMP/sp.err" && fail "a path MTU learned from a search whose path went away"
	[ "$(pm_entry 10.30.2.2 state)" != searched ] || fail "state searched"
	return 0
}

# kill -9 while a route is in place and a search at expiry runs: the route
# stays (nothing ran at exit); the next start removes it before attaching.
t_pmtu_killed_during_search() {
	pm_searched_with_route
	sp_ctl set pmtu.probes_per_s=1 pmtu.interval_s=1 >/dev/null || fail "set pmtu.probes_per_s=1 pmtu.interval_s=1: exit $?"
	for _ in $(seq 50); do grep -q '10.30.2.2: entry expired' "$TMP/sp.err" && break; sleep 0.1; done
	grep -q '10.30.2.2: entry expired' "$TMP/sp.err" || fail "no search at expiry: $(tail -5 "$TMP/sp.err")"
	sp_stop KILL
	ip -n "$NS_S" route show proto 0xa5 | has '^10.30.2.2 ' || fail "route gone with kill -9: not tested"
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	echo "$(cat "$TMP/sp.err")"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "routes of the killed run after the next start"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# Echo replies forged with our probes' id and sequence number (read off
# the wire: R captures each probe on its way in) while the black hole's
# search runs: for each probe, one reply of the probe's size from another
# host (D2's address), one from the destination's address but small. A
# reply counts only from the destination and at the probe's size: either
# forgery accepted makes sizes above the black hole pass. Before: sizes
# above the black hole passed, the learned MTU was too high, and stalls
# went unsearched for interval_s.
t_pmtu_forged_echo_replies() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	printf '%s\n' 'import socket, struct, sys' \
		'def csum(b):' '    b += b"\0" * (len(b) % 2); s = sum(struct.unpack("!%dH" % (len(b) // 2), b))' \
		'    s = (s >> 16) + (s & 0xffff); s += s >> 16; return ~s & 0xffff' \
		'dst, other, to, log = sys.argv[1:5]' \
		'sn = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800)); sn.bind(("rs", 0x0800))' \
		'tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)' \
		'open(log + ".ready", "w").close()' \
		'def reply(src, idseq, data):' \
		'    h = bytearray(b"\0\0\0\0" + idseq + data); h[2:4] = struct.pack("!H", csum(bytes(h)))' \
		'    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(h), 0, 0x4000, 64, 1, 0,' \
		'                     socket.inet_aton(src), socket.inet_aton(to))' \
		'    tx.sendto(ip + bytes(h), (to, 0))' \
		'while True:' '    p = sn.recv(65535); hl = (p[0] & 15) * 4' \
		'    if p[9] != 1 or p[hl] != 8 or socket.inet_ntoa(p[16:20]) != dst: continue' \
		'    reply(other, p[hl + 4:hl + 8], p[hl + 8:])	# the probe whole, from another host' \
		'    reply(dst, p[hl + 4:hl + 8], b"Z" * 8)	# from the destination, small' \
		'    open(log, "a").write("%d\n" % len(p))' >"$TMP/forge.py"
	ip netns exec "$NS_RT" python3 "$TMP/forge.py" 10.30.2.2 10.30.3.2 10.30.1.1 "$TMP/forged" &
	BG_PIDS+=($!); disown
	# The search's first probes are the large ones: the forger must be
	# listening before it starts (a fixed 0.3 s was not, once, under CI load).
	for _ in $(seq 100); do [ -e "$TMP/forged.ready" ] && break; sleep 0.1; done
	[ -e "$TMP/forged.ready" ] || fail "the forger did not start in 10 s"
	xfer 10.30.2.2 1000 >/dev/null || fail "xfer: exit $?"
	pm_wait_state 10.30.2.2 searched || fail "not searched: $(cat "$TMP/sp.err")"
	echo "$(grep 10.30.2.2 "$TMP/sp.err"); $(sp_json '.modules.pmtu.destinations | tostring')"
	echo "probes answered by forgeries, by size: $(sort -n "$TMP/forged" | uniq -c | tr -s ' \n' ' ')"
	assert_ge "$(awk '$1 > 1400' "$TMP/forged" | wc -l)" 1 "probes above the black hole answered by forgeries"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	assert_le "$low" 1400 "learned MTU with forged echo replies (path MTU 1400)"
	assert_ge "$low" 1393 "learned MTU with forged echo replies (path MTU 1400, threshold 8)"
}

# The path shrinks below a searched low (the overlay's MTU lowered to
# 1300): connections clamped to the old low stall. The third RTO in a row
# of such a connection (at most once per 5 s per destination) has the entry
# searched again from the base size; route=1 rescues the stalled connection.
# Before: "known to pass" ignored the RTOs until the entry expired (600 s).
t_pmtu_path_shrinks_below_low() {
	pm_searched_with_route
	ip -n "$NS_RT" link set rd mtu 1300
	sleep 5	# SP_PM_RECHECK_NS since the search
	set -- $(xfer 10.30.2.2 1000000 "" 10)
	echo "stalled at the old low: ${*:-did not complete}; $(grep 10.30.2.2 "$TMP/sp.err"); $(sp_json '.modules.pmtu.destinations | tostring')"
	[ -n "${1:-}" ] || fail "the connection clamped to the old low was not rescued"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	[ "$low" -le 1300 ] && [ "$low" -gt 1292 ] || fail "MTU $low after the path shrank to 1300, expected 1292 < MTU <= 1300"
	awk "BEGIN { exit !($1 < 8) }" || fail "the stalled connection took $1 s, expected < 8 s"
}

# A connection to one of our own addresses (not 127/8): its route is lo's,
# MTU 65536; it is recorded at that MTU without a probe (before: about 20
# probes of up to 64 KB to ourselves).
t_pmtu_own_address_not_probed() {
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	ip netns exec "$NS_S" "$TCPTOOL" server 5203 >/dev/null &
	BG_PIDS+=($!); disown
	sleep 0.3
	in_cgroup ip netns exec "$NS_S" "$TCPTOOL" client 10.30.1.1 5203 1000 >/dev/null || fail "connection to ourselves: exit $?"
	pm_wait_state 10.30.1.1 searched || fail "not recorded: $(sp_json '.modules.pmtu | tostring')"
	echo "$(sp_json '.modules.pmtu.destinations | tostring')"
	assert_eq "$(pm_entry 10.30.1.1 probes)" 0 "probes to our own address"
	assert_eq "$(pm_entry 10.30.1.1 low_mtu)" 65535 "MTU recorded for our own address"
}

# A search's result goes into its entry through sp_pmtu_save, in place:
# what connections keep there (clamped, asked_ns, the prover's claim) is
# never written back over with what it was when the search began (a
# claim lost so made a second prover: t_overhead_proof_left). The program
# run here as the loader runs it, on an entry bpftool wrote.
t_pmtu_save_keeps_connections_fields() {
	make_cgroup
	sp_start --modules pmtu --cgroup "$CG"
	local dsts prog key now
	dsts=$(bpftool map show pinned "$PIN/pmtu_dsts" -j | jq .id)
	prog=$(bpftool prog show -j | jq --argjson m "$dsts" \
		'[.[] | select(.name == "sp_pmtu_save" and ((.map_ids // []) | index($m)))][0].id')
	[ "$prog" != null ] || fail "no sp_pmtu_save beside $PIN/pmtu_dsts"
	# key: netns, AF_INET, 10.99.0.0; entry: low high state(ASKED) probes
	# updated_ns clamped route_mtu asked_ns method port probe_bytes prover_t.
	# updated_ns now (CLOCK_MONOTONIC, as the loader's): the loader's
	# expiry, every second, deletes an entry older than interval_s.
	now=$("$PYTHON3" -c 'import time; print(time.monotonic_ns())')
	key=$("$PYTHON3" -c 'import struct,sys; sys.stdout.write(" ".join("%02x" % b for b in
		struct.pack("<QI4I4x", 77, 2, 0x630a, 0, 0, 0)))')
	bpftool map update pinned "$PIN/pmtu_dsts" key hex $key value hex $("$PYTHON3" -c '
import struct,sys; sys.stdout.write(" ".join("%02x" % b for b in
	struct.pack("<4IQ2IQ2I2I", 1400, 0, 4, 3, int(sys.argv[1]), 7, 0, 5555, 0, 0, 300, 1234)))' "$now") ||
		fail "bpftool map update: exit $?"
	# The message (struct sp_pmtu_save) after 14 bytes of Ethernet header:
	# SEARCHED, low 1450, high 1451, route_mtu 0, SYN to port 80, 2 probes
	# of 3000 bytes, updated_ns now + 9.
	save() { # save STATE SEARCHED [ADDR as a u32 [LOW HIGH]]: the program's return value
		"$PYTHON3" -c 'import struct,sys
k=struct.pack("<QI4I4x", 77, 2, int(sys.argv[3]), 0, 0, 0)
sys.stdout.buffer.write(bytes(14) + k + struct.pack("<Q10I", int(sys.argv[4]) + 9, int(sys.argv[1]),
	int(sys.argv[2]), int(sys.argv[5]), int(sys.argv[6]), 0, 2, 80, 2, 3000, 0))' \
			"$1" "$2" "${3:-25354}" "$now" "${4:-1450}" "${5:-1451}" >"$TMP/msg"
		bpftool prog run id "$prog" data_in "$TMP/msg" repeat 1 | sed -n 's/^Return value: \([0-9]*\).*/\1/p'
	}
	entry() { bpftool map lookup pinned "$PIN/pmtu_dsts" key hex $key -j | jq -c ".formatted.value | $1"; }
	assert_eq "$(save 2 1)" 0 "sp_pmtu_save on an entry"
	assert_eq "$(entry '[.clamped, .asked_ns, .prover_t]')" "[7,5555,1234]" \
		"what connections wrote (clamped, asked_ns, prover_t), after a search's save"
	assert_eq "$(entry '[.state, .low, .high, .method, .port, .updated_ns]')" "[2,1450,1451,2,80,$((now + 9))]" \
		"the search's result (state, low, high, method, port, updated_ns)"
	assert_eq "$(entry '[.probes, .probe_bytes]')" "[5,3300]" "probes and their bytes, added"
	# NOPROBE: the bounds are not the search's to write.
	assert_eq "$(save 3 0)" 0 "sp_pmtu_save of a search nothing answered"
	assert_eq "$(entry '[.state, .low, .high, .clamped, .prover_t]')" "[3,1450,1451,7,1234]" \
		"entry after a search nothing answered"
	# What no search ends in (root can run the program too): refused,
	# nothing written. A state of no search's; an MTU past 65535 (its
	# MSS, on connect, past what TCP takes); a high at or below the low.
	assert_eq "$(save 99 1)" 4 "sp_pmtu_save of state 99"
	assert_eq "$(save 2 1 25354 4294967295 0)" 4 "sp_pmtu_save of low 2^32-1"
	assert_eq "$(save 2 1 25354 1450 1450)" 4 "sp_pmtu_save of high = low"
	assert_eq "$(entry '[.state, .low, .high, .probes]')" "[3,1450,1451,7]" \
		"entry after refused saves"
	# An entry evicted while it was searched (11.99.0.0, never made): made
	# anew, with only the search's.
	assert_eq "$(save 2 1 25355)" 1 "sp_pmtu_save where the entry is gone"
	key=$("$PYTHON3" -c 'import struct,sys; sys.stdout.write(" ".join("%02x" % b for b in
		struct.pack("<QI4I4x", 77, 2, 0x630b, 0, 0, 0)))')
	assert_eq "$(entry '[.state, .low, .high, .method, .port, .probes, .clamped, .prover_t]')" \
		"[2,1450,1451,2,80,2,0,0]" \
		"entry made by sp_pmtu_save"
}
