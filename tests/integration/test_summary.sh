# SPDX-License-Identifier: GPL-2.0
# `status` in words (issue 29): after traffic that makes each module act,
# every number its summary says equals the counters it sums in
# `status --json`. Each module on the testbed of its own tests.
source "$ROOT/tests/lib_ecmp.sh"
source "$ROOT/tests/lib_pmtu.sh"
source "$ROOT/tests/lib_frag.sh"

# What `status` says of module $1: its line and the lines it wraps onto, joined.
summary_line() {
	sp_ctl status | awk -v m="$1" '
		$1 == m { on = 1; sub(/^[^ ]+ +/, ""); s = $0; next }
		on && /^            */ && !/^warning/ { sub(/^ +/, ""); s = s " " $0; next }
		{ on = 0 }
		END { print s }'
}

# summary_matches MODULE REGEX JQ [REGEX JQ ...]: the number in each REGEX
# (its group) of MODULE's summary equals JQ over .modules.MODULE of
# `status --json`, read before and after the summary (the same both times:
# nothing moved in between; else read again).
summary_matches() {
	local m=$1 try i j1 j2 line a b ok
	shift
	local pairs=("$@")
	for try in $(seq 20); do
		j1=$(sp_ctl status --json) || fail "status --json: exit $?"
		line=$(summary_line "$m")
		j2=$(sp_ctl status --json) || fail "status --json: exit $?"
		ok=1
		for ((i = 0; i < ${#pairs[@]}; i += 2)); do
			a=$(jq -r ".modules.$m | ${pairs[i + 1]}" <<<"$j1")
			b=$(jq -r ".modules.$m | ${pairs[i + 1]}" <<<"$j2")
			[ "$a" = "$b" ] || { ok=0; break; }
		done
		[ $ok = 1 ] && break
		sleep 0.5
	done
	[ $ok = 1 ] || fail "$m's counters did not settle in 10 s"
	echo "$m: $line"
	for ((i = 0; i < ${#pairs[@]}; i += 2)); do
		[[ $line =~ ${pairs[i]} ]] || fail "$m's summary does not say /${pairs[i]}/: '$line'"
		a=$(jq -r ".modules.$m | ${pairs[i + 1]}" <<<"$j1")
		assert_eq "${BASH_REMATCH[1]}" "$(num "$a" "${pairs[i + 1]}")" "$m's summary /${pairs[i]}/ against ${pairs[i + 1]}"
	done
}

# The number of REGEX's group in module $1's summary: said MODULE REGEX.
said() {
	local line=$(summary_line "$1")
	[[ $line =~ $2 ]] || fail "$1's summary does not say /$2/: '$line'"
	echo "${BASH_REMATCH[1]}"
}

TS_SAYS=('([0-9]+) connections?' '.active_opens + .passive_opens'
	 '([0-9]+) segments? retransmitted' '.retrans_segs'
	 '([0-9]+) RTOs?' '.rto')

# rehash moves a flow on the ECMP testbed (t_rehash_moves_flow's traffic);
# tcpstats counts the same connections.
t_status_summary_counters_rehash() {
	ecmp_topo 2 100mbit
	[ ! -e /proc/sys/net/core/txrehash ] || ip netns exec "$NS_S" sysctl -qw net.core.txrehash=0
	ip netns exec "$NS_D" iperf3 -s -D -p 5201 >/dev/null || fail "iperf3: exit $?"
	make_cgroup
	sp_start --cgroup "$CG" --modules rehash,tcpstats
	# closes on: the share retransmitted is said (retrans_share_matches).
	sp_ctl set rehash.prob=100 rehash.mode=1 tcpstats.closes=1 >/dev/null ||
		fail "set rehash.prob=100 rehash.mode=1 tcpstats.closes=1: exit $?"
	in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t 4 -C cubic >/dev/null || fail "iperf3"
	sp_ctl status | has "^stackpilot pid $SP_PID, up [0-9]* s, cgroup $CG\$" ||
		fail "status does not say where it is attached: $(sp_ctl status)"
	summary_matches rehash 'moved flows ([0-9]+) times?' '.rehash_now + .rehash_deferred_done + .rehash_deferred_forced' \
		'([0-9]+) moved back' '.memory_reverted' '([0-9]+) loss episodes?' '.episodes' '([0-9]+) RTOs?' '.rto'
	summary_matches tcpstats "${TS_SAYS[@]}"
	assert_ge "$(said rehash 'moved flows ([0-9]+) times?')" 1 "flows moved, as status says"
	assert_ge "$(said tcpstats '([0-9]+) connections?')" 2 "connections, as status says"
	retrans_share_matches
}

# tcpstats' share of segments retransmitted is that of its closed
# connections' counters, once the connections of the test closed.
retrans_share_matches() {
	local j pct want
	for _ in $(seq 50); do
		j=$(sp_ctl status --json) || fail "status --json: exit $?"
		want=$(jq -r '.modules.tcpstats | if .closed_segs_out > 0 then
			100 * .closed_retrans_segs / .closed_segs_out else empty end' <<<"$j")
		[ -n "$want" ] && [[ $(summary_line tcpstats) =~ ([0-9.]+)%\ of\ segments\ retransmitted ]] &&
			pct=${BASH_REMATCH[1]} && [ "$pct" = "$(printf %.1f "$want")" ] && break
		sleep 0.1
	done
	[ -n "$want" ] || fail "no closed connection counted: $(jq -c .modules.tcpstats <<<"$j")"
	assert_eq "$pct" "$(printf %.1f "$want")" "tcpstats' share retransmitted against its counters"
}

# Under --dry-run, rehash says what it would have done: its skipped writes.
t_status_summary_dry_run_rehash() {
	ecmp_topo 2 100mbit
	ip netns exec "$NS_D" iperf3 -s -D -p 5201 >/dev/null || fail "iperf3: exit $?"
	make_cgroup
	sp_start --cgroup "$CG" --modules rehash --dry-run
	sp_ctl set rehash.prob=100 rehash.mode=1 >/dev/null || fail "set rehash.prob=100 rehash.mode=1: exit $?"
	in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t 4 -C cubic >/dev/null || fail "iperf3"
	sp_ctl status | has '^dry run' || fail "status does not say it is a dry run: $(sp_ctl status)"
	summary_matches rehash 'would have moved flows ([0-9]+) times?' '.dry_run_skipped'
	assert_ge "$(said rehash 'would have moved flows ([0-9]+) times?')" 1 "moves a dry run would have made"
	summary_line rehash | has 'would have moved flows' || fail "dry run summary: $(summary_line rehash)"
}

# pmtu learns a black-holed path (t_pmtu_second_connection_learned's
# traffic) and clamps the next connection; tcpstats sees the stall.
t_status_summary_counters_pmtu() {
	need_feature sockops_maxseg
	pmtu_topo 1400; make_cgroup
	sp_start --modules pmtu,tcpstats --cgroup "sp-test-$ID" --mtu-probing 1
	xfer 10.30.2.2 1000000 >/dev/null || true
	xfer 10.30.2.2 1000000 >/dev/null
	summary_matches pmtu 'learned ([0-9]+) paths?' '[.destinations[] | select(.state != "suspect" and .state != "asked" and .low_mtu > 0)] | length' \
		'([0-9]+) searching' '[.destinations[] | select(.state == "suspect" or .state == "asked")] | length' \
		'clamped ([0-9]+) connections?' '.started_with_learned_mss' \
		'([0-9]+) black-hole suspects?' '.black_hole_suspects'
	summary_matches tcpstats "${TS_SAYS[@]}"
	assert_ge "$(said pmtu 'learned ([0-9]+) paths?')" 1 "paths learned, as status says"
	summary_line pmtu | has '(10\.30\.2\.2 1[34][0-9][0-9])' || fail "the learned path is not named: $(summary_line pmtu)"
	assert_ge "$(said pmtu 'clamped ([0-9]+) connections?')" 1 "clamped connections, as status says"
}

# fragguard refuses a hog (t_fragguard_victim_survives_hog's traffic) and
# lets a victim's datagrams through.
t_status_summary_counters_fragguard() {
	frag_topo 2; udp_servers 2
	sp_start --modules fragguard --iface rp1 --iface rp2
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood: exit $?"
	udp_delivered 2 1 5M >/dev/null
	sp_ctl status | has "^stackpilot pid $SP_PID, up [0-9]* s, iface rp1,rp2\$" ||
		fail "status does not say where it is attached: $(sp_ctl status)"
	summary_matches fragguard 'refused ([0-9]+) fragments?' \
		'.refused_peer_limit + .refused_fair_share + .refused_unknown_pool + .refused_age + .refused_followers' \
		'from ([0-9]+) peers? of the top 10' '[.top_peers[] | select(.refused > 0)] | length' \
		'([0-9]+) datagrams? reassembled' '.completed' '([0-9]+) peers? known' '.peers_known'
	assert_ge "$(said fragguard 'refused ([0-9]+) fragments?')" 100 "fragments refused, as status says"
	assert_ge "$(said fragguard 'from ([0-9]+) peers? of the top 10')" 1 "peers refused, as status says"
}

# run's live view as a person sees it (issue 29 items 1 and 5): `stackpilot
# run` with all four modules in a tmux pane of 80x24, in the fragment
# testbed's receiver R (its cgroup modules on the test's cgroup, fragguard on
# rp1), traffic that makes each act, the screen read with capture-pane.
screen() { tmux -L "sp-$ID" capture-pane -p -t live; }
# Wait up to $2 tenths of a second for the screen to match $1 (grep -E).
screen_wait() {
	for _ in $(seq "${2:-100}"); do
		screen | has -E "$1" && return 0
		sleep 0.1
	done
	fail "the screen does not show /$1/ in $(( ${2:-100} / 10 )) s: $(screen)"
}

# live_start INTERVAL [RUN OPTIONS]: the run of all four modules in the
# pane; live_traffic [WORDS]: traffic that makes each act, then the screen
# shows it (WORDS: "would have " for a dry run's words).
live_start() {
	local secs=$1; shift
	need_tool tmux tmux
	frag_topo 1; make_cgroup
	ip netns exec "sp-$ID-p1" iperf3 -s -D -p 5201 >/dev/null || fail "iperf3 server: exit $?"
	on_exit "tmux -L sp-$ID kill-server"
	tmux -L "sp-$ID" new-session -d -s live -x 80 -y 24 \
		"exec ip netns exec $NS_R $SP run --pin-path $PIN --interval $secs --cgroup sp-test-$ID --iface rp1 $* 2>>$TMP/sp.err" ||
		fail "tmux new-session: exit $?"
	LIVE_PID=$(tmux -L "sp-$ID" list-panes -t live -F '#{pane_pid}')
	# The pane's process is the run (exec'd twice): stopped by cleanup, and waited for.
	on_exit "for _ in \$(seq 50); do kill -0 $LIVE_PID 2>/dev/null || break; sleep 0.1; done"
	SP_PID=$LIVE_PID
	screen_wait '^fragguard'
}
live_traffic() {
	local w=${1:-}
	# pmtu learns the peer's path at the first connection; with losses on
	# R's side of the link and rehash at every episode, flows move;
	# fragguard refuses a hog.
	in_cgroup ip netns exec "$NS_R" iperf3 -c 10.50.1.2 -p 5201 -t 1 >/dev/null || fail "iperf3: exit $?"
	screen_wait '^pmtu +learned 1 path \(10\.50\.1\.2 1500\)'
	sp_ctl set rehash.prob=100 rehash.mode=1 >/dev/null || fail "set rehash.prob=100 rehash.mode=1: exit $?"
	# A small queue at a low rate: the flow loses packets and recovers.
	tc -n "$NS_R" qdisc add dev rp1 root tbf rate 20mbit burst 8k latency 5ms || fail "tbf: exit $?"
	in_cgroup ip netns exec "$NS_R" iperf3 -c 10.50.1.2 -p 5201 -t 3 >/dev/null || fail "iperf3: exit $?"
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood: exit $?"
	screen_wait "^rehash +${w}moved flows [1-9][0-9]* times?"
	screen_wait "^fragguard +${w}refused [1-9][0-9]* fragments?"
	screen_wait '^tcpstats +[1-9][0-9]* connections?'
	screen_wait '^ +last [0-9]+ s, per s: '
}

t_run_live_view_tmux() {
	live_start 1
	live_traffic
	local pid=$LIVE_PID
	screen_wait '^ +last 1 s, per s: '
	local s1=$(screen) up1 up2
	echo "$s1"
	# It fits: 24 lines at most, none over 80 columns, nothing but the view.
	assert_le "$(echo "$s1" | wc -l)" 24 "lines on the screen"
	assert_eq "$(echo "$s1" | awk 'length > 80' | wc -l)" 0 "lines over 80 columns"
	echo "$s1" | has '^Ctrl-C detaches' || fail "the view's last line is not on the screen"
	# It updates: the uptime grows, the screen is redrawn in place.
	up1=$(echo "$s1" | sed -n 's/^stackpilot pid [0-9]*, up \([0-9]*\) s.*/\1/p')
	sleep 2.2
	up2=$(screen | sed -n 's/^stackpilot pid [0-9]*, up \([0-9]*\) s.*/\1/p')
	assert_ge "$(num "$up2" "uptime on the screen")" $(( $(num "$up1" "uptime on the screen") + 2 )) "uptime after 2.2 s"
	assert_eq "$(screen | grep -c '^stackpilot pid')" 1 "headers on the screen (redrawn in place, not scrolled)"
	kill -TERM "$pid"
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "the run did not stop in 5 s"
	SP_PID=
	[ -z "$(cgroup_progs)" ] || fail "programs left on $CG: $(cgroup_progs)"
}

# The README's first screen (the block under "## First step") is a live
# view of a dry run as the code draws it today: the same lines around the
# modules, the same modules in the same order, each with the same phrases
# (numbers, the paths named and plurals aside), and the phrases of its
# "last N s" lines among them (tests/tools/view_shape.pl). The screen is
# drawn here under t_run_live_view_tmux's traffic; SP_SAVE_SCREEN=FILE
# keeps it (how the README's block was made).
t_run_live_view_readme() {
	local block=$TMP/readme-block s diffs
	awk '/^## First step/ { on = 1; next } /^## / { on = 0 }
		on && /^```/ { n++; next } on && n == 1' "$ROOT/README.md" >"$block"
	[ -s "$block" ] || fail "README.md has no block under '## First step'"
	grep -q '^tcpstats' "$block" || fail "README.md's first screen shows no module: $(cat "$block")"
	assert_le "$(wc -l <"$block")" 24 "lines of README.md's first screen"
	assert_eq "$(awk 'length > 80' "$block" | wc -l)" 0 "lines of README.md's first screen over 80 columns"
	live_start 2 --dry-run
	live_traffic "would have "
	screen_wait '^tcpstats .*[1-9][0-9]* segments? retransmitted'
	s=$(screen)
	echo "$s"
	[ -z "${SP_SAVE_SCREEN:-}" ] || echo "$s" >"$SP_SAVE_SCREEN"
	echo "$s" >"$TMP/screen"
	diffs=$(perl "$ROOT/tests/tools/view_shape.pl" "$block" "$TMP/screen") || fail "view_shape.pl: exit $?"
	[ -z "$diffs" ] || fail "README.md's first screen differs from the code's: $diffs"
	# The comparison can fail: a phrase the code does not say is caught.
	sed 's/loss episode/lost episode/' "$block" >"$TMP/drifted"
	diffs=$(perl "$ROOT/tests/tools/view_shape.pl" "$TMP/drifted" "$TMP/screen") || fail "view_shape.pl: exit $?"
	[ -n "$diffs" ] || fail "view_shape.pl finds no difference in a README block with a changed phrase"
}
