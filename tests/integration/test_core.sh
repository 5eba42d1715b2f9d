# SPDX-License-Identifier: GPL-2.0
# Foundation: loader errors, cleanup, status, tunables, and tcpstats end to end.
# Each t_* runs in its own bash with tests/lib.sh sourced.

# Nothing of a failed run may stay: no pins, no programs on the cgroup.
assert_nothing_left() {
	[ ! -e "$PIN" ] || fail "pin folder $PIN left behind"
	[ -z "$(cgroup_progs)" ] || fail "programs left on $CG: $(cgroup_progs)"
}

# expect_error EXIT_CODE PATTERN cmd...: non-zero exit, exactly one stderr line matching PATTERN.
expect_error() {
	local want=$1 pat=$2 rc; shift 2
	"$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ "$rc" = "$want" ] || fail "'$*': exit $rc, expected $want; stderr: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/err")" = 1 ] || fail "'$*': expected one stderr line, got: $(cat "$TMP/err")"
	grep -q -- "$pat" "$TMP/err" || fail "'$*': stderr '$(cat "$TMP/err")' lacks '$pat'"
}

t_help() {
	local c
	"$SP" --help | has tcpstats || fail "--help does not list modules"
	for c in run status get set probe; do
		"$SP" "$c" --help >"$TMP/h" || fail "$c --help exit $?"
		grep -q "Usage: stackpilot $c" "$TMP/h" || fail "$c --help"
	done
	# Every long option run --help names is one run accepts. The unknown
	# option after it (or a bad value "x") stops run before it does anything.
	for c in $("$SP" run --help | grep -o -- '--[a-z-]*' | sort -u | grep -vx -- --help); do
		"$SP" run "$c" x --no-such-option-zz >"$TMP/o" 2>&1
		[ $? = 2 ] || fail "run $c x --no-such-option-zz: exit status not 2: $(cat "$TMP/o")"
		grep -q "unrecognized option '$c'" "$TMP/o" && fail "run --help names $c but run rejects it"
	done
	"$SP" get --help | has 'tcpstats.port' || fail "get --help does not list tunables"
	expect_error 2 "unknown command 'frob'" "$SP" frob
	# What run --help says goes with --config run takes with it; each other
	# option it names is refused with --config (a config file that does not
	# exist: nothing starts either way).
	local with a
	with=$("$SP" run --help | tr '\n' ' ' | sed -n 's/.*With it go only \([^.]*\)\..*/\1/p' |
		grep -o -- '--[a-z-]*')
	[ -n "$with" ] || fail "run --help does not say what goes with --config"
	for c in $("$SP" run --help | grep -o -- '--[a-z-]*' | sort -u | grep -vxe --help -e --config -e --persist); do
		case $c in
		--iface) a=lo ;; --cgroup) a=/ ;; --modules) a=tcpstats ;; --log-level) a=info ;;
		--pin-path|--btf|--state-dir|--metrics-textfile) a=$TMP ;;
		--interval|--metrics-top|--mtu-probing) a=1 ;; --metrics-listen) a=9999 ;;
		*) a= ;;
		esac
		"$SP" run --config "/nonexistent-$ID" "$c" $a >"$TMP/o" 2>&1
		if echo "$with" | grep -qx -- "$c"; then
			! has -e "give it in the file" <"$TMP/o" ||
				fail "run --help says $c goes with --config; run: $(cat "$TMP/o")"
		else
			has -e "give it in the file" <"$TMP/o" ||
				fail "run --help leaves $c out of what goes with --config; run: $(cat "$TMP/o")"
		fi
	done
}

t_usage_errors() {
	make_cgroup
	expect_error 2 "unknown module 'nope'" "$SP" run --pin-path "$PIN" --modules tcpstats,nope
	expect_error 2 "--iface nosuch$ID: no such interface" "$SP" run --pin-path "$PIN" --iface "nosuch$ID"
	expect_error 2 "--iface: none of the chosen modules" "$SP" run --pin-path "$PIN" --modules tcpstats --iface lo
	expect_error 2 "the chosen modules need at least one --iface" "$SP" run --pin-path "$PIN" --modules fragguard
	expect_error 2 "--interval x: expected seconds" "$SP" run --pin-path "$PIN" --interval x
	expect_error 2 "must be an absolute path" "$SP" run --pin-path relative/pins
	expect_error 1 "cgroup /nonexistent-$ID does not exist" "$SP" run --pin-path "$PIN" --cgroup "/nonexistent-$ID"
	expect_error 1 "is not on cgroup v2" "$SP" run --pin-path "$PIN" --cgroup /tmp
	expect_error 1 "no kernel BTF at /nonexistent-$ID" "$SP" run --pin-path "$PIN" --cgroup "$CG" --btf "/nonexistent-$ID"
	expect_error 1 "/tmp is not a bpf filesystem" "$SP" run --pin-path "/tmp/pins-$ID" --cgroup "$CG"
	expect_error 2 "unknown tunable 'tcpstats.nope'" "$SP" set --pin-path "$PIN" tcpstats.nope=1
	expect_error 2 "unknown module 'nope'" "$SP" get --pin-path "$PIN" nope.port
	expect_error 2 "tcpstats.port=70000: out of range \[0, 65535\]" "$SP" set --pin-path "$PIN" tcpstats.port=70000
	expect_error 2 "tcpstats.port=abc: not a number" "$SP" set --pin-path "$PIN" tcpstats.port=abc
	expect_error 1 "is \`stackpilot run\` active" "$SP" status --pin-path "$PIN"
	assert_nothing_left
}

t_not_root() {
	make_cgroup
	expect_error 1 "need root" setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$SP" run --pin-path "$PIN" --cgroup "$CG"
	# Root without the BPF capabilities is refused too.
	expect_error 1 "need root" setpriv --inh-caps=-all --bounding-set=-all \
		"$SP" run --pin-path "$PIN" --cgroup "$CG"
	assert_nothing_left
}

t_bpffs_not_mountable() {
	make_cgroup
	mkdir "$TMP/cg"
	# A private mount namespace where /sys/fs is a read-only tmpfs: no bpffs,
	# and none can be mounted. The cgroup v2 mount stays reachable elsewhere.
	expect_error 1 "cannot mount bpffs at /sys/fs/bpf" unshare -m --propagation private sh -c \
		'mount --bind "$1" "$2" && mount -t tmpfs -o ro none /sys/fs && shift 2 && exec "$@"' \
		_ "$CG2" "$TMP/cg" "$SP" run --cgroup "$TMP/cg/sp-test-$ID"
	assert_nothing_left
}

# One run per cgroup and per interface, whatever the pin folder: a second
# is refused with one line naming the first one's pid.
t_second_run_refused() {
	make_cgroup
	sp_start --cgroup "$CG" --modules tcpstats
	local before=$(cgroup_progs)
	expect_error 1 "another \`stackpilot run\` (pid $SP_PID) is attached to cgroup $CG" \
		timeout 5 "$SP" run --pin-path "$PIN" --cgroup "$CG"
	expect_error 1 "another \`stackpilot run\` (pid $SP_PID) is attached to cgroup $CG" \
		timeout 5 "$SP" run --pin-path "$PIN-2" --cgroup "$CG" --modules tcpstats
	[ ! -e "$PIN-2" ] || fail "a refused run left its pin folder"
	assert_eq "$(cgroup_progs)" "$before" "programs on the cgroup after refused second runs"
	kill -0 "$SP_PID" || fail "first run died: $(sp_said)"
	# Another cgroup (here a child of the first) is another target.
	mkdir "$CG/c2"; on_exit "rmdir $CG/c2"
	"$SP" run --pin-path "$PIN-2" --cgroup "$CG/c2" --modules tcpstats --interval 0 >"$TMP/second" 2>&1 &
	local p2=$!
	on_exit "kill $p2; rm -rf $PIN-2"
	for _ in $(seq 50); do grep -q attached "$TMP/second" && break; sleep 0.1; done
	grep -q attached "$TMP/second" || fail "run on another cgroup: $(cat "$TMP/second")"
	kill -INT $p2; wait $p2 || fail "second instance exit $?"
	assert_eq "$(cgroup_progs)" "$before" "programs after the second instance left"
	sp_stop || fail "first run exit: stackpilot run exited $?; its stderr ends: $(sp_said)"
	# Its lock went with it: a new run may take the cgroup.
	sp_start --cgroup "$CG" --modules tcpstats
}

# The pin folder's lock is gone with the folder; the cgroup's is not.
t_second_run_refused_pins_removed() {
	make_cgroup
	sp_start --cgroup "$CG" --modules tcpstats
	rm -rf "$PIN"
	expect_error 1 "another \`stackpilot run\` (pid $SP_PID) is attached to cgroup $CG" \
		timeout 5 "$SP" run --pin-path "$PIN" --cgroup "$CG" --modules tcpstats
	assert_eq "$(cgroup_progs | wc -l)" 1 "programs on the cgroup"
	# A run killed with SIGKILL leaves its lock file, but not its lock.
	local ino=$(stat -c %i "$CG")
	sp_stop KILL
	[ -e "/run/stackpilot/cgroup-$ino.lock" ] || fail "no lock file left by the killed run"
	# The next run on any target removes lock files nobody holds.
	local c2=$CG-other
	mkdir "$c2" || fail "mkdir $c2"
	on_exit rmdir "$c2"
	"$SP" run --pin-path "$PIN-2" --cgroup "$c2" --modules tcpstats --interval 0 >"$TMP/o2" 2>&1 &
	local p2=$!
	on_exit "kill $p2 2>/dev/null; rm -rf $PIN-2"
	for _ in $(seq 50); do grep -q attached "$TMP/o2" && break; sleep 0.1; done
	grep -q attached "$TMP/o2" || fail "run on another cgroup: $(cat "$TMP/o2")"
	[ -e "/run/stackpilot/cgroup-$ino.lock" ] && fail "stale lock file not removed"
	kill -INT $p2; wait $p2 || fail "second run: exit $?"
	sp_start --cgroup "$CG" --modules tcpstats
}

# Two `ip netns exec` runs have a mount namespace (and bpffs) each; they
# still meet on the interface's lock. The same ifindex in another namespace
# is another interface.
t_second_run_refused_netns() {
	netns_pair
	SP_NS=$NS_B sp_start --modules fragguard --iface "v${ID}b"
	expect_error 1 "another \`stackpilot run\` (pid $SP_PID) is attached to interface v${ID}b" \
		timeout 5 ip netns exec "$NS_B" "$SP" run --pin-path "$PIN" --modules fragguard --iface "v${ID}b"
	expect_error 1 "another \`stackpilot run\` (pid $SP_PID) is attached to interface v${ID}b" \
		timeout 5 ip netns exec "$NS_B" "$SP" run --pin-path "$PIN-2" --modules fragguard --iface lo --iface "v${ID}b"
	kill -0 "$SP_PID" || fail "first run died: $(sp_said)"
	ip -n "$NS_A" link set "v${ID}a" name "v${ID}b" || fail "rename: exit $?"
	ip netns exec "$NS_A" "$SP" run --pin-path "$PIN" --modules fragguard --iface "v${ID}b" --interval 0 \
		>"$TMP/a.out" 2>&1 &
	local pa=$!
	BG_PIDS+=($pa)
	for _ in $(seq 50); do grep -q attached "$TMP/a.out" && break; sleep 0.1; done
	grep -q attached "$TMP/a.out" || fail "run in another namespace: $(cat "$TMP/a.out")"
	kill -INT $pa; wait $pa || fail "run in $NS_A exit $?"
}

# A signal ends the run with nothing left: pins, programs on the cgroup,
# and each program itself (one per module: freed once the process and its
# links are gone, the links' release a moment after the exit).
t_signal_cleanup() {
	local sig ids left
	make_cgroup
	for sig in INT TERM HUP; do
		sp_start --cgroup "$CG"
		ids=$(cgroup_progs)
		assert_eq "$(echo $ids | wc -w)" 1 "programs attached (sp_sockops, with tcpstats, rehash, pmtu behind it): '$ids'"
		ids+=" $(chain_progs)"
		assert_eq "$(echo $ids | wc -w)" 4 "programs of the run (sp_sockops, tcpstats, rehash, pmtu): '$ids'"
		[ -e "$PIN/tcpstats_cfg" ] && [ -e "$PIN/meta" ] || fail "pins missing"
		sp_stop "$sig" || fail "exit after SIG$sig: stackpilot run exited $?; its stderr ends: $(sp_said)"
		assert_nothing_left
		left=$(progs_loaded $ids)
		[ -z "$left" ] || fail "programs $left still loaded 2 s after SIG$sig"
	done
	assert_eq "$(sysctl -n kernel.bpf_stats_enabled)" 0 "kernel.bpf_stats_enabled after run"
}

t_sigkill_then_rerun() {
	make_cgroup
	sp_start --cgroup "$CG"
	local id=$(cgroup_progs)
	sp_stop KILL
	# The link died with the process: nothing attached, only stale pins.
	sleep 0.3
	[ -z "$(cgroup_progs)" ] || fail "program still attached after SIGKILL"
	"$SP" status --pin-path "$PIN" | has 'not running: stale pins' || fail "status does not flag stale pins: $("$SP" status --pin-path "$PIN")"
	sp_start --cgroup "$CG"
	[ -n "$(cgroup_progs)" ] || fail "rerun did not attach"
	sp_stop || fail "rerun exit: stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_nothing_left
}

# Counters move for a process inside the cgroup, not for one outside.
t_tcpstats_counts_cgroup_only() {
	netns_pair; make_cgroup
	tcp_server 5201
	sp_start --cgroup "$CG" --modules tcpstats --bpf-stats
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 10000 3 >/dev/null || fail "client in cgroup: exit $?"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client fd77::2 5201 10000 2 >/dev/null || fail "v6 client in cgroup: exit $?"
	assert_eq "$(status_num active_opens)" 5 "active_opens after 5 connections from the cgroup"
	assert_eq "$(status_num passive_opens)" 0 "passive_opens (server is outside the cgroup)"
	ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 10000 4 >/dev/null || fail "client outside: exit $?"
	assert_eq "$(status_num active_opens)" 5 "active_opens after connections from outside the cgroup"
	# A server inside the cgroup counts its accepted connections.
	in_cgroup ip netns exec "$NS_B" "$TCPTOOL" server 5301 >/dev/null &
	BG_PIDS+=($!); sleep 0.2
	ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5301 1000 2 >/dev/null || fail "client to cgroup server: exit $?"
	assert_eq "$(status_num passive_opens)" 2 "passive_opens of a server in the cgroup"
	local runs=$(status_num run_cnt) avg=$(status_num avg_ns)
	assert_ge "$runs" 7 "program run count"
	awk "BEGIN { exit !($avg > 0) }" || fail "average run time $avg, expected > 0"
}

# The kernel's run counts cost every BPF program of the host two clock
# reads a run: on only with --bpf-stats, off again when the run ends.
t_bpf_stats_opt_in() {
	netns_pair; make_cgroup
	tcp_server 5201
	local runs opt
	for opt in "" --bpf-stats; do
		sp_start --cgroup "$CG" --modules tcpstats $opt
		in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 3 >/dev/null || fail "client: exit $?"
		assert_eq "$(status_num active_opens)" 3 "active_opens with '$opt'"
		runs=$(status_num run_cnt)
		sp_stop || fail "stackpilot run $opt exited $?; its stderr ends: $(sp_said)"
		if [ -z "$opt" ]; then
			assert_eq "$runs" 0 "runs counted without --bpf-stats (another process turned BPF stats on?)"
		else
			assert_ge "$runs" 3 "runs counted with --bpf-stats"
		fi
	done
	# Off with the run: a program that runs now is not counted.
	local id
	sp_start --cgroup "$CG" --modules tcpstats
	id=$(cgroup_progs)
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 2 >/dev/null || fail "client: exit $?"
	assert_eq "$(bpftool prog show id "$id" -j | jq '.run_cnt // 0')" 0 "runs of program $id after a --bpf-stats run ended"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# Loss makes retransmissions; a blackout longer than the RTO makes RTOs.
t_tcpstats_retrans_rto() {
	netns_pair; make_cgroup
	tcp_server 5201
	sp_start --cgroup "$CG" --modules tcpstats
	# The closing connections' totals are counted only with closes on.
	sp_ctl set tcpstats.closes=1 >/dev/null || fail "set tcpstats.closes=1: exit $?"
	printf 'table inet sptest {\n chain in {\n type filter hook input priority 0;\n }\n}\n' |
		ip netns exec "$NS_B" nft -f - || fail "nft: exit $?"
	# Every 10th data segment is dropped, counted, not drawn: random 20% loss
	# of every segment (the handshake too) backed off for 16 s in 1 of 60
	# runs and passed the 30 s limit in CI; 10% random loss of data left a
	# transfer with no loss at all in 2 of 80 runs (GRO makes few packets of
	# a fast transfer). A counter gave >= 150 retransmissions and <= 0.21 s
	# in 60 of 60 runs: a lone retransmission after an RTO advances it by one,
	# so it cannot be dropped again until 9 more data segments have passed.
	ip netns exec "$NS_B" nft add rule inet sptest in tcp dport 5201 ip length '>' 200 numgen inc mod 10 0 drop
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 2000000 1 >/dev/null || fail "lossy transfer: exit $?"
	assert_ge "$(status_num retrans_segs)" 1 "retrans_segs after 10% loss"
	# At its close the connection gave its own totals (tcp_sock's segs_out
	# and total_retrans): 2 MB is over 1000 segments, a tenth of them lost.
	local segs=0
	for _ in $(seq 50); do
		segs=$(status_num closed_segs_out)
		[ "${segs:-0}" -gt 0 ] && break
		sleep 0.1
	done
	assert_ge "$segs" 1000 "closed_segs_out of a 2 MB transfer"
	assert_ge "$(status_num closed_retrans_segs)" 1 "closed_retrans_segs after 10% loss"
	assert_le "$(status_num closed_retrans_segs)" "$segs" "closed_retrans_segs, of closed_segs_out"
	local rto0=$(status_num rto)	# loss at the tail of a transfer can end in an RTO
	ip netns exec "$NS_B" nft flush chain inet sptest in
	# Drop every data segment for 1.5 s, longer than the RTO; the handshake passes.
	ip netns exec "$NS_B" nft add rule inet sptest in tcp dport 5201 ip length '>' 200 drop
	( sleep 1.5; ip netns exec "$NS_B" nft flush chain inet sptest in ) &
	BG_PIDS+=($!)
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 100000 1 10 \
		>/dev/null || fail "transfer across the blackout: exit $?"
	assert_ge "$(status_num rto)" $((rto0 + 1)) "rto after a 1.5 s blackout"
}

# docs/configuration.md's bpftool command, run as written (but on this
# test's pins).
t_docs_bpftool() {
	netns_pair; make_cgroup
	tcp_server 5201; tcp_server 5202
	sp_start --cgroup "$CG" --modules tcpstats
	local cmd
	cmd=$(grep -A3 'tested by tests/integration/test_core.sh:t_docs_bpftool' "$ROOT/docs/configuration.md" |
		grep '^bpftool map update')
	[ -n "$cmd" ] || fail "docs/configuration.md has no bpftool example"
	eval "${cmd//\/sys\/fs\/bpf\/stackpilot/$PIN}" || fail "docs/configuration.md's command failed: $cmd"
	assert_eq "$("$SP" get --pin-path "$PIN" tcpstats.port)" "tcpstats.port=5201" "port after the documented command"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5202 1000 2 >/dev/null || fail "client: exit $?"
	assert_eq "$(status_num active_opens)" 0 "connections to 5202 with port=5201"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 2 >/dev/null || fail "client: exit $?"
	assert_eq "$(status_num active_opens)" 2 "connections to 5201 with port=5201"
	# Out of range from outside (70000 = 0x11170; closes 7): the port is
	# ignored, everything counts; closes counts as 1.
	bpftool map update pinned "$PIN/tcpstats_cfg" key 0 0 0 0 value 0x70 0x11 0x01 0 7 0 0 0 ||
		fail "bpftool: exit $?"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5202 1000 3 >/dev/null || fail "client: exit $?"
	assert_eq "$(status_num active_opens)" 5 "connections to 5202 with port=70000 (ignored)"
	for _ in $(seq 20); do	# a close (tcp_done) can follow the client's exit
		[ "$(status_num closed_segs_out)" -ge 9 ] && break
		sleep 0.1
	done
	assert_ge "$(status_num closed_segs_out)" 9 "closed_segs_out of 3 connections with closes=7 (as 1)"
	# stackpilot set writes the same field.
	"$SP" set --pin-path "$PIN" tcpstats.port=5201 >/dev/null || fail "set tcpstats.port=5201: exit $?"
	bpftool map dump pinned "$PIN/tcpstats_cfg" | has '"port": 5201' || fail "bpftool dump shows no field name"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5202 1000 1 >/dev/null || fail "client: exit $?"
	assert_eq "$(status_num active_opens)" 5 "connections to 5202 after set port=5201"
}

t_status_json() {
	netns_pair; make_cgroup
	sp_start --cgroup "$CG"
	"$SP" status --json --pin-path "$PIN" >"$TMP/s.json" || fail "status --json: exit $?"
	jq -e --arg cg "$CG" --argjson pid "$SP_PID" \
		'.schema == 1 and .pid == $pid and .alive and .uptime_s >= 0 and .uptime_s < 60 and .cgroup == $cg and (.modules.tcpstats.active_opens | type) == "number"
		 and (.programs | length) >= 1 and (.programs[0].avg_ns | type) == "number"' \
		"$TMP/s.json" >/dev/null || fail "status --json: $(cat "$TMP/s.json")"
	"$SP" status --all --pin-path "$PIN" | has "^cgroup $CG" || fail "text status: $("$SP" status --all --pin-path "$PIN")"
}

# The README's main-job command: attaches to the root cgroup, shows status,
# and Ctrl-C (SIGINT to its process group) leaves the system as before.
t_readme_main_job() {
	local cmd ids id
	cmd=$(sed -n '/^```sh$/,/^```$/p' "$ROOT/README.md" | grep -m1 '^make run' | sed 's/ *#.*//')
	[ "$cmd" = "make run" ] || fail "README main command not found: '$cmd'"
	[ -e /sys/fs/bpf/stackpilot ] && fail "a stackpilot instance is already running on this host"
	on_exit "rm -rf /sys/fs/bpf/stackpilot"
	# A session of its own, as a terminal would give it; $$ of that sh is its id.
	setsid sh -c 'echo $$ >"$0/sid"; cd "$1" && exec '"$cmd"' ARGS="--interval 1"' \
		"$TMP" "$ROOT" >"$TMP/main.out" 2>&1 &
	local sess=$!
	for _ in $(seq 150); do grep -q 'active_opens' "$TMP/main.out" && break; sleep 0.2; done
	local sid=$(cat "$TMP/sid")
	[ -n "$sid" ] && [ "$sid" != "$(ps -o sid= -p $$ | tr -d ' ')" ] || fail "main job has no session of its own"
	on_exit "kill -KILL -- -$sid"
	grep -q "^stackpilot: attached tcpstats rehash pmtu to cgroup $CG2;" "$TMP/main.out" || fail "main job did not attach: $(cat "$TMP/main.out")"
	grep -q 'active_opens' "$TMP/main.out" || fail "main job shows no live status: $(tail -5 "$TMP/main.out")"
	# Its own programs, by id: other sessions may load and attach theirs meanwhile.
	ids=$("$SP" status --json | jq -r '.programs[].id')
	[ -n "$ids" ] || fail "main job shows no programs"
	id=$("$SP" status --json | jq -r '.programs[] | select(.name == "sp_sockops") | .id')
	bpftool cgroup show "$CG2" | awk '{ print $1 }' | has -x "$id" || fail "sp_sockops ($id) not on the root cgroup"
	kill -INT -- -"$sid"	# Ctrl-C: the whole foreground process group
	wait $sess
	for _ in $(seq 50); do pgrep -s "$sid" >/dev/null || break; sleep 0.1; done
	grep -q 'detached, pins removed' "$TMP/main.out" || fail "no clean detach: $(tail -3 "$TMP/main.out")"
	for id in $ids; do
		bpftool prog show id "$id" >/dev/null 2>&1 && fail "program $id still loaded after Ctrl-C"
	done
	[ ! -e /sys/fs/bpf/stackpilot ] || fail "pins left after Ctrl-C"
}

# --cgroup must name an existing cgroup v2 folder strictly below the mount;
# the root only as "/" (every process on the host). `timeout` stops a run
# that would wrongly attach, so the test fails instead of hanging.
t_cgroup_input_refused() {
	make_cgroup
	expect_error 1 "--cgroup '': empty path" timeout 5 "$SP" run --pin-path "$PIN" --cgroup ""
	expect_error 1 "names the root of cgroup v2 mount" timeout 5 "$SP" run --pin-path "$PIN" --cgroup .
	expect_error 1 "names the root of cgroup v2 mount" timeout 5 "$SP" run --pin-path "$PIN" --cgroup "sp-test-$ID/.."
	expect_error 1 "names the root of cgroup v2 mount" timeout 5 "$SP" run --pin-path "$PIN" --cgroup "$CG2"
	expect_error 1 "names the root of cgroup v2 mount" timeout 5 "$SP" run --pin-path "$PIN" --cgroup "$CG/../"
	expect_error 1 "--cgroup PATH is needed" timeout 5 "$SP" run --pin-path "$PIN" --modules tcpstats
	# Over 255 characters: refused, not cut to a parent.
	local long="$CG/$(printf 'x%.0s' $(seq 300))"
	expect_error 1 "longer than 255 characters" timeout 5 "$SP" run --pin-path "$PIN" --cgroup "$long"
	expect_error 1 "--btf /etc/passwd: not a BTF file" timeout 5 "$SP" run --pin-path "$PIN" --cgroup "$CG" --btf /etc/passwd
	assert_nothing_left
	# A relative name below the mount is fine, and is shown normalised.
	sp_start --cgroup "sp-test-$ID/." --modules tcpstats
	assert_eq "$(sp_json .cgroup)" "$CG" "cgroup of a run given a relative path"
}

# --btf steers what the programs read of kernel memory: a file another user
# can change (its owner, its mode, a folder on its way) is refused with one
# line, as the config file is; the same file of root's is used.
t_btf_file_trust() {
	local d=$TMP/btf f=$TMP/btf/vmlinux
	make_cgroup
	mkdir -m 755 "$d" && cp /sys/kernel/btf/vmlinux "$f" && chmod 755 "$TMP" || fail "setup: exit $?"
	run_btf() { timeout 10 "$SP" run --pin-path "$PIN" --cgroup "$CG" --modules tcpstats --btf "$f" --interval 0; }
	chown nobody "$d"
	expect_error 1 "$f: folder $d is owned by uid 65534, not by root or uid 0" run_btf
	chown root "$d"; chmod 666 "$f"
	expect_error 1 "--btf $f: owned by uid 0, mode 0666: must be a file of root" run_btf
	chmod 644 "$f"; chown nobody "$f"
	expect_error 1 "--btf $f: owned by uid 65534, mode 0644" run_btf
	chown root "$f"
	[ -z "$(cgroup_progs)" ] || fail "programs attached: $(cgroup_progs)"
	sp_start --cgroup "$CG" --modules tcpstats --btf "$f"
	sp_stop || fail "exit with a good --btf: stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# set: decimal only (010 is not octal 8), and nothing written unless every
# assignment can be (its module loaded).
t_set_checks_all_first() {
	make_cgroup
	sp_start --cgroup "$CG" --modules tcpstats
	expect_error 2 "tcpstats.port=010: leading zeros not allowed" "$SP" set --pin-path "$PIN" tcpstats.port=010
	expect_error 1 "module rehash is not loaded" "$SP" set --pin-path "$PIN" tcpstats.port=5201 rehash.prob=50
	assert_eq "$(sp_ctl get tcpstats.port)" "tcpstats.port=0" "port after a refused set"
	sp_ctl set tcpstats.port=0x10 >/dev/null || fail "set in hex (tcpstats.port=0x10): exit $?"
	assert_eq "$(sp_ctl get tcpstats.port)" "tcpstats.port=16" "port after set 0x10"
	sp_ctl set tcpstats.port=10 tcpstats.port=0 >/dev/null || fail "two assignments to one field (tcpstats.port=10 tcpstats.port=0): exit $?"
	assert_eq "$(sp_ctl get tcpstats.port)" "tcpstats.port=0" "last assignment wins"
}

# status --json stays valid JSON when pins are missing, and says so by its exit status.
t_status_json_missing_pins() {
	make_cgroup
	sp_start --cgroup "$CG"
	rm "$PIN/rehash_ctr" "$PIN/tcpstats_cfg" "$PIN/pmtu_ctr"
	sp_ctl status --json >"$TMP/s.json" 2>"$TMP/s.err"
	assert_eq "$?" 1 "status exit with pins missing"
	jq -e '.modules.tcpstats.cfg == null and .modules.rehash.cfg.prob == 20 and
	       (.modules.rehash.connections | type) == "array" and .modules.pmtu.cfg.base_mss == 1024 and
	       (.modules.pmtu.destinations | type) == "array" and (.modules.tcpstats.active_opens | type) == "number"' \
		"$TMP/s.json" >/dev/null || fail "status --json with pins missing: $(cat "$TMP/s.json")"
	grep -q rehash_ctr "$TMP/s.err" || fail "no error line for the missing pin: $(cat "$TMP/s.err")"
	# The config pin alone missing is a failure too.
	sp_stop; sp_start --cgroup "$CG" --modules tcpstats
	rm "$PIN/tcpstats_cfg"
	sp_ctl status --json >"$TMP/s.json" 2>/dev/null
	assert_eq "$?" 1 "status exit with only the config pin missing"
	jq -e '.modules.tcpstats.cfg == null' "$TMP/s.json" >/dev/null || fail "status: $(cat "$TMP/s.json")"
	sp_stop
	# fragguard's records around a missing counter and config pin.
	netns_pair
	SP_NS=$NS_B sp_start --modules fragguard --iface "v${ID}b"
	nsenter -t "$SP_PID" -m rm "$PIN/fragguard_ctr" "$PIN/fragguard_cfg"
	SP_NS=$NS_B sp_ctl status --json >"$TMP/s.json" 2>/dev/null
	assert_eq "$?" 1 "status exit with fragguard pins missing"
	jq -e '.modules.fragguard.cfg == null and (.modules.fragguard.top_peers | type) == "array"' \
		"$TMP/s.json" >/dev/null || fail "fragguard status --json with pins missing: $(cat "$TMP/s.json")"
}

# A meta map made by someone else: a cgroup string without its NUL is read
# within its 256 bytes; a value of another size is refused, not copied.
t_status_hostile_meta() {
	host_bpffs
	mkdir "$PIN" || fail "mkdir $PIN"
	# struct sp_meta: 384 bytes up to the end of cgroup (nr_ifaces at 24),
	# then flags, pad, state_file (256), the loop delays (16), the --iface
	# names (8 x 16), the programs' modules and names (16 x 16, 16 x 32),
	# refused, metrics_top, version (32). One interface, gone (index 0), its
	# name unterminated.
	bpftool map create "$PIN/meta" type array key 4 value 1600 entries 1 name sp_meta || fail "map create: exit $?"
	bpftool map update pinned "$PIN/meta" key 0 0 0 0 value hex 01 $(printf '00 %.0s' $(seq 23)) \
		01 $(printf '00 %.0s' $(seq 103)) $(printf '41 %.0s' $(seq 256)) $(printf '00 %.0s' $(seq 280)) \
		$(printf '42 %.0s' $(seq 16)) $(printf '00 %.0s' $(seq 112)) $(printf '00 %.0s' $(seq 808)) ||
		fail "map update: exit $?"
	"$SP" status --json --pin-path "$PIN" >"$TMP/s.json" || fail "status exit $?"
	jq -e '.pid == 1 and (.cgroup | length) == 256 and (.cgroup | test("^A+$"))' "$TMP/s.json" >/dev/null ||
		fail "status --json of an unterminated cgroup: $(cat "$TMP/s.json")"
	assert_eq "$(jq -c .ifaces "$TMP/s.json")" '["BBBBBBBBBBBBBBBB (gone)"]' "an unterminated interface name"
	"$SP" status --all --pin-path "$PIN" | has -x "cgroup $(printf 'A%.0s' $(seq 256))" || fail "text status: $("$SP" status --all --pin-path "$PIN")"
	rm "$PIN/meta"
	bpftool map create "$PIN/meta" type array key 4 value 4096 entries 1 name sp_meta || fail "map create: exit $?"
	expect_error 1 "not a stackpilot meta map" "$SP" status --pin-path "$PIN"
}

# On a bpffs anyone may write to (mode 1777), a pin folder made by someone
# else (who could hold its lock or delete our pins), or left open to others,
# is refused. A private mount namespace keeps that bpffs away from the host.
t_hostile_bpffs_refused() {
	make_cgroup
	local p=/sys/fs/bpf/sp-test-$ID setup='mount -t bpf -o mode=1777 bpf /sys/fs/bpf || exit 99'
	expect_error 1 "$p is owned by uid 65534, not by uid 0" unshare -m --propagation private sh -c \
		"$setup"' && setpriv --reuid=65534 --regid=65534 --clear-groups mkdir "$0" && exec "$@"' \
		"$p" timeout 5 "$SP" run --pin-path "$p" --cgroup "$CG"
	expect_error 1 "$p is writable by group or others (mode 0777)" unshare -m --propagation private sh -c \
		"$setup"' && mkdir -m 0777 "$0" && exec "$@"' "$p" timeout 5 "$SP" run --pin-path "$p" --cgroup "$CG"
	expect_error 1 "$p is a symlink" unshare -m --propagation private sh -c \
		"$setup"' && mkdir /sys/fs/bpf/x && ln -s /sys/fs/bpf/x "$0" && exec "$@"' \
		"$p" timeout 5 "$SP" run --pin-path "$p" --cgroup "$CG"
	[ -z "$(cgroup_progs)" ] || fail "programs attached: $(cgroup_progs)"
	# The folder a run makes itself is 0700 and root's, even on that bpffs.
	unshare -m --propagation private sh -c "$setup"' && { "$@" & } && sleep 1.5 && stat -c "%a %u" "$0" &&
		kill -INT $! && wait $!' "$p" "$SP" run --pin-path "$p" --cgroup "$CG" --modules tcpstats --interval 0 \
		>"$TMP/out" 2>"$TMP/err" || fail "run on a 1777 bpffs: $(cat "$TMP/err")"
	grep -qx "700 0" "$TMP/out" || fail "pin folder made by run: $(cat "$TMP/out")"
	assert_nothing_left
}
