# SPDX-License-Identifier: GPL-2.0
# `run --config FILE` (issue 12): many cgroups in one process, each its own
# instance; cgroups that appear and go; SIGHUP reloads; check-config.
# Cgroups are children of the test's cgroup, pins under the test's $PIN.

# The test's cgroup and children NAME ..., removed (with their processes) on exit.
cg_tree() {
	local c
	make_cgroup
	for c in "$@"; do mkdir "$CG/$c" || fail "mkdir $CG/$c"; done
	on_exit 'for d in "$CG"/*/; do for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -KILL $p; done; rmdir "$d"; done'
}

# Run "$@" in child cgroup $1 of the test's cgroup.
in_cg() { local c=$1; shift; in_cgroup_at "$CG/$c" "$@"; }

# A config at $TMP/sp.conf: the global lines, then "$@" as its lines.
conf() {
	{ echo "pin-path = $PIN"; printf '%s\n' "$@"; } >"$TMP/sp.conf"
}

# State (a config run persists it) in the test's folder, never /var/lib.
cfg_start() { : >"$TMP/sp.err"; sp_spawn "$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state" "$@"; }

# get KEY of child cgroup C: get_cg C KEY -> value
get_cg() { "$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID/$1" "$2" | cut -d= -f2; }

# A status --json member of the instance of child cgroup C: st C JQ-PATH
st() { "$SP" status --pin-path "$PIN" --json | jq -r --arg c "$CG/$1" ".instances[] | select(.cgroup == \$c) | $2"; }

# Programs attached to child cgroup C, as ids.
progs_of() { cgroup_progs "$CG/$1" | sort | paste -sd, -; }

has_progs() { [ -n "$(progs_of "$1")" ]; }
no_progs() { local c; for c; do [ -z "$(progs_of "$c")" ] || return 1; done; }

# Wait up to 3 s for "$@" to succeed.
wait_for() { for _ in $(seq 30); do "$@" && return 0; sleep 0.1; done; return 1; }

# Signal the run and wait for the log line that says it is done with the file.
reload() {
	local n=$(grep -c 'reload' "$TMP/sp.err")
	kill -HUP "$SP_PID" || fail "run gone"
	wait_for eval '[ "$(grep -c reload "$TMP/sp.err")" -gt '"$n"' ]' || fail "reload lines: $(grep -c reload "$TMP/sp.err"), expected more than $n: $(cat "$TMP/sp.err")"
}

# Errors name FILE:LINE, exit 1, attach nothing; the example config is good.
t_config_check() {
	local f=$TMP/bad.conf out rc
	cg_tree a
	"$SP" check-config "$ROOT/dist/stackpilot.conf" || fail "dist/stackpilot.conf does not validate: exit $?"
	check_bad() {	# LINE EXPECTED-TEXT then the file's lines
		local line=$1 want=$2; shift 2
		printf '%s\n' "pin-path = $PIN" "$@" >"$f"
		out=$("$SP" check-config "$f" 2>&1); rc=$?
		assert_eq $rc 1 "check-config exit status for: $*"
		[[ $out == "stackpilot: $f:$line: "*"$want"* ]] || fail "expected $f:$line: ...$want..., got: $out"
		[ "$(echo "$out" | wc -l)" = 1 ] || fail "more than one line: $out"
		out=$("$SP" run --config "$f" --state-dir "$TMP/state" 2>&1); rc=$?
		assert_eq $rc 1 "run exit status for: $*"
		[[ $out == *"$f:$line: "* ]] || fail "run does not name $f:$line: $out"
	}
	check_bad 3 "out of range [0, 100]" "[cgroup sp-test-$ID/a]" "rehash.prob = 101"
	check_bad 4 "module pmtu is not in this section's modules" "[cgroup sp-test-$ID/a]" "modules = rehash" "pmtu.route = 1"
	check_bad 2 "rehash attaches to cgroups" "rehash.prob = 5" "[cgroup sp-test-$ID/a]"
	check_bad 3 "has a section already, at line 2" "[cgroup sp-test-$ID/a]" "[cgroup sp-test-$ID/a]"
	check_bad 2 "'..' component" "[cgroup sp-test-$ID/../x]"
	check_bad 2 "relative to the cgroup v2 mount" "[cgroup /sp-test-$ID/a]"
	check_bad 2 "unknown setting 'bogus'" "bogus = 1"
	check_bad 2 "mtu-probing 3: expected 0, 1 or 2" "mtu-probing = 3"
	check_bad 2 "no such interface" "iface = nosuch$ID"
	check_bad 3 "unknown tunable 'rehash.nope'" "[cgroup sp-test-$ID/a]" "rehash.nope = 1"
	check_bad 4 "already set at line 3" "[cgroup sp-test-$ID/a]" "rehash.prob = 1" "rehash.prob = 2"
	check_bad 3 "expected KEY = VALUE" "[cgroup sp-test-$ID/a]" "modules rehash"
	check_bad 3 "unknown module 'nope'" "[cgroup sp-test-$ID/a]" "modules = nope"
	check_bad 2 "interval 99999999: expected seconds" "interval = 99999999" "[cgroup sp-test-$ID/a]"
	# A key given twice is an error, not "the last one wins".
	check_bad 4 "modules: already set at line 3" "[cgroup sp-test-$ID/a]" "modules = rehash" "modules = pmtu"
	check_bad 3 "interval: already set at line 2" "interval = 5" "interval = 7" "[cgroup sp-test-$ID/a]"
	check_bad 2 "pin-path: already set at line 1" "pin-path = $PIN-2" "[cgroup sp-test-$ID/a]"
	# A section inside another running the same module could not override it (both programs run).
	check_bad 3 "overlaps [cgroup sp-test-$ID] at line 2: sp-test-$ID's rehash programs also run for sp-test-$ID/a's" \
		"[cgroup sp-test-$ID]" "[cgroup sp-test-$ID/a]" "modules = rehash"
	check_bad 4 "[cgroup /]: overlaps [cgroup sp-test-$ID/a] at line 2: /'s tcpstats" \
		"[cgroup sp-test-$ID/a]" "modules = tcpstats" "[cgroup /]"
	# Nothing of those runs is left: no programs, no pins.
	assert_eq "$(progs_of a)" "" "programs after refused runs"
	[ -e "$PIN" ] && fail "pin folder left by a refused run"
	# A config and a target on the command line do not mix.
	conf "[cgroup sp-test-$ID/a]"
	"$SP" run --config "$TMP/sp.conf" --cgroup / --state-dir "$TMP/state" >/dev/null 2>&1; assert_eq $? 2 "--config with --cgroup"
	"$SP" check-config "$TMP/sp.conf" | has -x "cgroup sp-test-$ID/a: pins in $PIN/sp-test-$ID:a" || fail "pin folder name"
	# Disjoint sections are fine, also nested ones with no module in common.
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "[cgroup sp-test-$ID/ab]" "modules = rehash" \
	     "[cgroup sp-test-$ID]" "modules = tcpstats"
	"$SP" check-config "$TMP/sp.conf" >/dev/null || fail "disjoint sections refused: exit $?"
	return 0
}

# A NUL byte in a line of the config file is named, with its line (it was
# "line longer than 1022 characters"); a line really too long still is.
t_config_nul_line_named() {
	local f=$TMP/nul.conf out
	cg_tree a
	printf 'pin-path = %s\n[cgroup sp-test-%s/a]\nrehash.prob = 1\0x\nmodules = rehash\n' "$PIN" "$ID" >"$f"
	out=$("$SP" check-config "$f" 2>&1); assert_eq $? 1 "check-config exit status: $out"
	assert_eq "$out" "stackpilot: $f:3: a NUL byte in the line (not a text file?)" "check-config"
	out=$(timeout 10 "$SP" run --config "$f" --state-dir "$TMP/state" 2>&1); assert_eq $? 1 "run exit status: $out"
	[[ $out == *"$f:3: a NUL byte"* ]] || fail "run said: $out"
	{ echo "pin-path = $PIN"; head -c 1100 /dev/zero | tr '\0' '#'; echo; } >"$f"
	out=$("$SP" check-config "$f" 2>&1); assert_eq $? 1 "check-config exit status: $out"
	assert_eq "$out" "stackpilot: $f:2: line longer than 1023 characters" "a long line"
	assert_eq "$(progs_of a)" "" "programs after refused runs"
}

# check-config checks the pin path as `run` does: /etc (not below a bpf
# filesystem) and a folder of /tmp are refused with FILE:LINE, by run too;
# a folder on bpffs is good.
t_config_pin_path_checked() {
	local f=$TMP/pin.conf out p
	cg_tree a
	for p in /etc "$TMP/pins"; do
		printf 'pin-path = %s\n[cgroup sp-test-%s/a]\nmodules = tcpstats\n' "$p" "$ID" >"$f"
		out=$("$SP" check-config "$f" 2>&1); assert_eq $? 1 "check-config exit status, pin-path = $p: $out"
		[[ $out == "stackpilot: $f:1: pin path $p: "* ]] && [ "$(echo "$out" | wc -l)" = 1 ] ||
			fail "check-config of pin-path = $p said: $out"
		out=$(timeout 10 "$SP" run --config "$f" --state-dir "$TMP/state" 2>&1)
		assert_eq $? 1 "run exit status, pin-path = $p: $out"
		[[ $out == *"$f:1: pin path $p: "* ]] || fail "run with pin-path = $p said: $out"
	done
	[ -e "$TMP/pins" ] && fail "pin folder made in /tmp"
	assert_eq "$(progs_of a)" "" "programs after refused runs"
	printf 'pin-path = %s\n[cgroup sp-test-%s/a]\nmodules = tcpstats\n' "$PIN" "$ID" >"$f"
	"$SP" check-config "$f" >/dev/null || fail "pin-path = $PIN refused"
}

# A root service runs what its file says: a file others can write, or that is
# not a regular file (a FIFO would block the event loop on reload), is refused
# at start and on reload, which keeps the running policy.
t_config_file_trust() {
	local f=$TMP/sp.conf p out
	cg_tree a
	conf "[cgroup sp-test-$ID/a]" "modules = tcpstats"
	refused() {	# EXPECTED-TEXT: check-config and run refuse $f, one line, nothing attached
		out=$("$SP" check-config "$f" 2>&1) && fail "check-config accepted: $(ls -l "$f")"
		[[ $out == "stackpilot: $f: "*"$1"* ]] && [ "$(echo "$out" | wc -l)" = 1 ] || fail "check-config said: $out"
		out=$(timeout 10 "$SP" run --config "$f" --state-dir "$TMP/state" 2>&1); assert_eq $? 1 "run exit status: $out"
		assert_eq "$(progs_of a)" "" "programs after a refused run"
	}
	chmod 666 "$f"; refused "must belong to root"
	chmod 664 "$f"; chgrp nogroup "$f"; refused "mode 0664"
	chmod 644 "$f"; chown nobody "$f"; refused "owned by uid 65534"
	chown 0:0 "$f"
	# A symlink is followed; its target is what is checked.
	ln -s "$f" "$TMP/link.conf"
	"$SP" check-config "$TMP/link.conf" >/dev/null || fail "symlink to a good file refused: exit $?"
	# A huge file is a mistake, refused before reading it.
	{ cat "$f"; head -c 1100000 /dev/zero | tr '\0' '#' | fold -w 100; } >"$TMP/huge.conf"
	out=$("$SP" check-config "$TMP/huge.conf" 2>&1); assert_eq $? 1 "check-config of a 1.1 MB file: $out"
	[[ $out == *"huge.conf: over 1048576 bytes"* ]] || fail "huge file: $out"
	mkfifo "$TMP/fifo.conf"
	out=$(timeout 10 "$SP" check-config "$TMP/fifo.conf" 2>&1); assert_eq $? 1 "check-config of a FIFO: $out"
	[[ $out == *"fifo.conf: not a regular file"* ]] || fail "FIFO: $out"
	cfg_start
	p=$(progs_of a)
	[ -n "$p" ] || fail "not attached"
	chmod 666 "$f"
	reload
	grep -q "reload rejected, the running policy stays: $f: owned by uid 0, mode 0666" "$TMP/sp.err" ||
		fail "world-writable file on reload: $(tail -2 "$TMP/sp.err")"
	chmod 644 "$f"
	mv "$f" "$f.good"; mkfifo "$f"
	reload
	grep -q "reload rejected, the running policy stays: $f: not a regular file" "$TMP/sp.err" ||
		fail "FIFO on reload: $(tail -2 "$TMP/sp.err")"
	assert_eq "$(progs_of a)" "$p" "programs after rejected reloads"
	rm "$f"; mv "$f.good" "$f"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# The folders on the way to the config file are checked as sshd's
# StrictModes does: one another user can write (as owner, group or others)
# refuses the file with one line, at start and on reload, since that user
# could move the file away and put a symlink to another config in its place.
# A symlink is followed, and the folders of its target are checked too; a
# sticky folder (/tmp) is fine where the name in it is root's.
t_config_folder_trust() {
	local d=$TMP/etc out
	cg_tree a
	conf "[cgroup sp-test-$ID/a]" "modules = tcpstats"
	mkdir -p "$d/sub" && cp "$TMP/sp.conf" "$d/sub/sp.conf" && cp "$TMP/sp.conf" "$TMP/other.conf" || fail "setup: exit $?"
	chmod 755 "$TMP" "$d" "$d/sub"
	refused() {	# FILE FOLDER-AND-WHY: check-config and run refuse FILE, one line, nothing attached
		out=$("$SP" check-config "$1" 2>&1) && fail "check-config accepted $1: $(ls -ld "$TMP" "$d" "$d/sub")"
		[[ $out == "stackpilot: $1: folder $2"*"refusing it" ]] && [ "$(echo "$out" | wc -l)" = 1 ] ||
			fail "check-config said: $out"
		out=$(timeout 10 "$SP" run --config "$1" --state-dir "$TMP/state" 2>&1); assert_eq $? 1 "run exit status: $out"
		assert_eq "$(progs_of a)" "" "programs after a refused run"
	}
	"$SP" check-config "$d/sub/sp.conf" >/dev/null || fail "good folders refused: exit $?"
	chown nobody "$d/sub"
	refused "$d/sub/sp.conf" "$d/sub is owned by uid 65534, not by root or uid 0"
	# What its owner can then do: the file away, a symlink to another config in its place.
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
		'mv "$0/sp.conf" "$0/old.conf" && ln -s "$1" "$0/sp.conf"' "$d/sub" "$TMP/other.conf" || fail "swap: exit $?"
	refused "$d/sub/sp.conf" "$d/sub is owned by uid 65534"
	chown root "$d/sub"
	chgrp nogroup "$d" && chmod 775 "$d"
	refused "$d/sub/sp.conf" "$d is writable by its group (mode 0775)"
	chmod 755 "$d"
	# A symlink in a good folder to a file in a folder others can write.
	mkdir "$TMP/open" && chmod 757 "$TMP/open" && cp "$TMP/sp.conf" "$TMP/open/sp.conf" || fail "setup: exit $?"
	ln -s "$TMP/open/sp.conf" "$d/link.conf"
	refused "$d/link.conf" "$TMP/open is writable by others (mode 0757)"
	# A relative path is checked from / too.
	(cd "$TMP/open" && "$SP" check-config sp.conf >/dev/null 2>&1) && fail "relative path in an open folder accepted"
	# A run whose folder becomes open: the reload is rejected, the policy stays.
	cfg_start
	chmod 757 "$TMP"
	reload
	chmod 755 "$TMP"
	grep -q "reload rejected, the running policy stays: $TMP/sp.conf: folder $TMP is writable by others" \
		"$TMP/sp.err" || fail "reload: $(tail -2 "$TMP/sp.err")"
	has_progs a || fail "programs gone after a rejected reload"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# A reload changes a key `set` saved a value for, and that saved value
# cannot be replaced (a full state folder, a small tmpfs): the running
# value stays, with one line, rather than one a restart would take back.
t_config_reload_unsaved_change_kept() {
	cg_tree a
	mkdir -m 700 "$TMP/state"
	mount -t tmpfs -o size=64k,mode=0700 "sp-$ID" "$TMP/state" || fail "mount tmpfs: exit $?"
	on_exit umount "$TMP/state"
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 50"
	cfg_start
	"$SP" set --pin-path "$PIN" --cgroup "sp-test-$ID/a" rehash.prob=33 >/dev/null || fail "set rehash.prob=33: exit $?"
	head -c 1M /dev/zero >"$TMP/state/fill" 2>/dev/null
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 60"
	reload
	assert_eq "$(get_cg a rehash.prob)" 33 "running value after a reload whose save failed"
	grep -q "sp-test-$ID/a: rehash.prob not changed to 60: the value \`set\` saved for it could not be replaced" \
		"$TMP/sp.err" || fail "no line: $(tail -3 "$TMP/sp.err")"
	rm "$TMP/state/fill"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	cfg_start
	assert_eq "$(get_cg a rehash.prob)" 33 "after a restart"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# A cgroup's pin folder of a config run is locked as a single run's is: a
# run given it as --pin-path is refused with one line, instead of taking
# the live instance's pins for a killed run's and removing them.
t_config_instance_folder_locked() {
	local out rc
	cg_tree a b
	conf "[cgroup sp-test-$ID/a]" "modules = tcpstats"
	cfg_start
	out=$(timeout 10 "$SP" run --pin-path "$PIN/sp-test-$ID:a" --cgroup "$CG/b" --modules tcpstats \
		--interval 0 2>&1); rc=$?
	assert_eq "$rc" 1 "exit of a run on the instance's pin folder: $out"
	assert_eq "$out" "stackpilot: another \`stackpilot run\` is active on $PIN/sp-test-$ID:a" "its error"
	assert_eq "$(get_cg a tcpstats.port)" 0 "the instance's tunables after the refused run"
	assert_eq "$(progs_of b)" "" "programs of the refused run"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# The issue's whole-service test: three cgroups with different policies,
# traffic in each; each policy applies only to its own cgroup.
t_config_three_cgroups() {
	local b l f
	netns_pair; cg_tree batch latency front
	tcp_server 5201; tcp_server 5202
	mkdir "$TMP/tf"
	conf "metrics-textfile = $TMP/tf" \
	     "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 100" "rehash.mode = 1" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats, rehash" "rehash.prob = 0  # never" \
	     "rehash.mode = 1" "tcpstats.port = 5201" \
	     "[cgroup sp-test-$ID/front]" "modules = tcpstats" "tcpstats.port = 5202"
	cfg_start
	grep -q "attached from $TMP/sp.conf: 3 cgroups (0 waiting" "$TMP/sp.out" || fail "attached line: $(cat "$TMP/sp.out")"
	# Each its own programs and pins; `bpftool map update` per cgroup.
	b=$(progs_of batch) l=$(progs_of latency) f=$(progs_of front)
	[ -n "$b" ] && [ -n "$l" ] && [ -n "$f" ] && [ "$b" != "$l" ] || fail "programs: batch $b latency $l front $f"
	assert_eq "$(get_cg batch rehash.prob)" 100 "batch rehash.prob"
	assert_eq "$(get_cg latency rehash.prob)" 0 "latency rehash.prob"
	assert_eq "$(get_cg front tcpstats.port)" 5202 "front tcpstats.port"
	# Without --cgroup, get and set say which to pick.
	out=$("$SP" get --pin-path "$PIN" rehash.prob 2>&1); assert_eq $? 2 "get without --cgroup"
	[[ $out == *"--cgroup"*"$CG/batch"* ]] || fail "get without --cgroup: $out"
	"$SP" set --pin-path "$PIN" rehash.prob=5 >/dev/null 2>&1 && fail "set without --cgroup worked"
	# Connections: batch 3 to each port, latency 2 to each, front 1 to each.
	for p in 5201 5202; do
		in_cg batch ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 $p 1000 3 >/dev/null || fail "client: exit $?"
		in_cg latency ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 $p 1000 2 >/dev/null || fail "client: exit $?"
		in_cg front ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 $p 1000 1 >/dev/null || fail "client: exit $?"
	done
	ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 4 >/dev/null || fail "client outside: exit $?"
	assert_eq "$(st batch .modules.tcpstats.active_opens)" 6 "batch: every port"
	assert_eq "$(st latency .modules.tcpstats.active_opens)" 2 "latency: port 5201 only"
	assert_eq "$(st front .modules.tcpstats.active_opens)" 1 "front: port 5202 only"
	# 20% loss: batch (prob 100) rehashes, latency (prob 0) never does.
	printf 'table inet sptest {\n chain in {\n type filter hook input priority 0;\n }\n}\n' |
		ip netns exec "$NS_B" nft -f - || fail "nft: exit $?"
	ip netns exec "$NS_B" nft add rule inet sptest in tcp dport 5201 numgen random mod 10 '<' 2 drop
	in_cg batch ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 2000000 1 >/dev/null || fail "lossy batch: exit $?"
	in_cg latency ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 2000000 1 >/dev/null || fail "lossy latency: exit $?"
	ip netns exec "$NS_B" nft flush chain inet sptest in
	local bn=$(st batch '.modules.rehash | .rehash_now + .rehash_deferred')
	local lr=$(st latency '.modules.rehash.retrans_seen') ln=$(st latency '.modules.rehash | .rehash_now + .rehash_deferred')
	echo "batch rehashes $bn; latency retransmissions $lr, rehashes $ln"
	assert_ge "$bn" 1 "batch rehashes with prob 100"
	assert_ge "$lr" 1 "latency retransmissions"
	assert_eq "$ln" 0 "latency rehashes with prob 0"
	# bpftool on one cgroup's pin changes that cgroup only.
	bpftool map update pinned "$PIN/sp-test-$ID:front/tcpstats_cfg" key 0 0 0 0 value 0x51 0x14 0 0 0 0 0 0 || fail "bpftool: exit $?"
	assert_eq "$(get_cg front tcpstats.port)" 5201 "front after bpftool"
	assert_eq "$(get_cg latency tcpstats.port)" 5201 "latency after bpftool on front"
	assert_eq "$(get_cg batch tcpstats.port)" 0 "batch after bpftool on front"
	# status --cgroup shows one instance, as a single run's status.
	assert_eq "$("$SP" status --pin-path "$PIN" --cgroup "sp-test-$ID/front" --json | jq -r .cgroup)" "$CG/front" "status --cgroup"
	assert_eq "$("$SP" status --pin-path "$PIN" --cgroup "$CG/front" --json | jq -r .modules.tcpstats.active_opens)" 1 "status --cgroup FULL-PATH"
	"$SP" status --pin-path "$PIN" --cgroup "sp-test-$ID/nope" >/dev/null 2>&1 && fail "status of a cgroup not in the run"
	# status shows every instance; Prometheus has one series per cgroup.
	assert_eq "$("$SP" status --pin-path "$PIN" --json | jq '.instances | length')" 3 "instances in status"
	"$SP" status --pin-path "$PIN" | grep -c '^stackpilot pid' | has -x 3 || fail "text status: not 3 instances: $("$SP" status --pin-path "$PIN" | grep '^stackpilot pid')"
	"$SP" status --pin-path "$PIN" --prometheus >"$TMP/prom" || fail "status --prometheus: exit $?"
	# promtool's status is not read: it fails on the lines allowed here.
	promtool check metrics <"$TMP/prom" >"$TMP/lint" 2>&1
	grep -v 'counter metrics should have "_total" suffix' "$TMP/lint" | has -i error && fail "promtool: $(cat "$TMP/lint")"
	assert_eq "$(grep -c '^stackpilot_tcpstats_active_opens_total{cgroup=' "$TMP/prom")" 3 "active_opens series"
	grep -qx "stackpilot_tcpstats_active_opens_total{cgroup=\"$CG/batch\"} 7" "$TMP/prom" || fail "batch series: $(grep active_opens "$TMP/prom")"
	assert_eq "$(grep -c '^stackpilot_running{cgroup=' "$TMP/prom")" 3 "running series, one per cgroup"
	assert_eq "$(grep -c '^# TYPE stackpilot_tcpstats_active_opens_total ' "$TMP/prom")" 1 "TYPE lines"
	# The textfile of the file's metrics-textfile: the same, every instance.
	assert_eq "$(grep -c '^stackpilot_running{cgroup=' "$TMP/tf/stackpilot.prom")" 3 "running series in the textfile"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q '^stackpilot: detached' "$TMP/sp.out" || fail "not detached: $(tail -5 "$TMP/sp.out")"
	assert_eq "$(progs_of batch)$(progs_of latency)$(progs_of front)" "" "programs after exit"
	[ -e "$PIN" ] && fail "pins left after exit: $(ls -R "$PIN")"
	return 0
}

# SIGHUP: a changed value in place, an added and a removed cgroup, the
# others' programs untouched; a file with an error changes nothing.
t_config_reload() {
	local b l out
	cg_tree batch latency front extra
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 100" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 0" \
	     "[cgroup sp-test-$ID/front]" "modules = tcpstats"
	cfg_start
	b=$(progs_of batch) l=$(progs_of latency)
	# A `set` of a key the file does not change survives the reload.
	"$SP" set --pin-path "$PIN" --cgroup "sp-test-$ID/batch" rehash.pause_ms=777 rehash.prob=66 >/dev/null || fail "set rehash.pause_ms=777 rehash.prob=66: exit $?"
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 50" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 0" \
	     "[cgroup sp-test-$ID/extra]" "modules = tcpstats" "tcpstats.port = 443"
	reload
	cat "$TMP/sp.err"
	grep -q "cgroup sp-test-$ID/batch: rehash.prob 100 -> 50" "$TMP/sp.err" || fail "no line for the change: $(tail -5 "$TMP/sp.err")"
	assert_eq "$(get_cg batch rehash.prob)" 50 "changed value"
	assert_eq "$(get_cg batch rehash.pause_ms)" 777 "a set value the file does not change"
	# What `set` saved (a config run persists) follows the file's change, so a restart agrees.
	grep -qx rehash.prob=50 "$TMP/state/cgroup-sp-test-$ID%2Fbatch.tunables" ||
		fail "saved value after the reload: $(cat "$TMP/state/"*batch.tunables)"
	assert_eq "$(progs_of batch)" "$b" "batch programs after reload"
	assert_eq "$(progs_of latency)" "$l" "latency programs after reload"
	assert_eq "$(progs_of front)" "" "programs of the removed cgroup"
	[ -e "$PIN/sp-test-$ID:front" ] && fail "pins of the removed cgroup left"
	[ -n "$(progs_of extra)" ] || fail "added cgroup not attached"
	assert_eq "$(get_cg extra tcpstats.port)" 443 "added cgroup's tunable"
	# The lock of the removed cgroup is free: another run may take it.
	"$SP" run --pin-path "$PIN-2" --cgroup "$CG/front" --modules tcpstats --interval 0 >"$TMP/other.out" 2>&1 &
	local other=$!
	wait_for grep -q attached "$TMP/other.out" || fail "another run cannot take the removed cgroup: $(cat "$TMP/other.out")"
	# Back in the file while that run holds it: logged, the rest goes on; tried again on the next reload.
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 50" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 0" \
	     "[cgroup sp-test-$ID/extra]" "modules = tcpstats" "tcpstats.port = 443" \
	     "[cgroup sp-test-$ID/front]" "modules = tcpstats"
	reload
	grep -q "cgroup sp-test-$ID/front: another \`stackpilot run\` (pid $other) is attached" "$TMP/sp.err" ||
		fail "no line for the cgroup held by another run: $(tail -3 "$TMP/sp.err")"
	kill -0 "$SP_PID" || fail "the config run ended: $(sp_said)"
	assert_eq "$(progs_of batch)" "$b" "batch programs while front is refused"
	kill $other; wait $other
	reload
	has_progs front || fail "front not attached on the reload after the other run left: $(tail -3 "$TMP/sp.err")"
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 50" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 0" \
	     "[cgroup sp-test-$ID/extra]" "modules = tcpstats" "tcpstats.port = 443"
	reload
	# Other modules for latency: attached anew (new programs), batch untouched.
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 50" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats" \
	     "[cgroup sp-test-$ID/extra]" "modules = tcpstats" "tcpstats.port = 443"
	reload
	grep -q "cgroup sp-test-$ID/latency: modules changed: attached anew" "$TMP/sp.err" || fail "no line for latency: $(tail -5 "$TMP/sp.err")"
	[ "$(progs_of latency | tr ',' '\n' | wc -l)" = 1 ] && [ "$(progs_of latency)" != "$l" ] ||
		fail "latency programs after its modules changed: $(progs_of latency) (were $l)"
	# One program a run: rehash's going shows in its chain (tcpstats alone).
	assert_eq "$(chain_progs "$CG/latency" | wc -l)" 1 "modules behind latency's sp_sockops after rehash went"
	assert_eq "$(progs_of batch)" "$b" "batch programs after latency's modules changed"
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 50" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 0" \
	     "[cgroup sp-test-$ID/extra]" "modules = tcpstats" "tcpstats.port = 443"
	reload
	l=$(progs_of latency)
	# A broken file: rejected whole, with one line naming it; nothing changes.
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 7" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 300"
	reload
	out=$(grep 'reload' "$TMP/sp.err" | tail -1)
	[[ $out == *"reload rejected, the running policy stays: $TMP/sp.conf:7: rehash.prob=300: out of range"* ]] ||
		fail "rejection line: $out"
	assert_eq "$(grep -c "$TMP/sp.conf:7" "$TMP/sp.err")" 1 "lines about the error"
	assert_eq "$(get_cg batch rehash.prob)" 50 "batch after a broken reload"
	[ -n "$(progs_of extra)" ] || fail "extra detached by a broken reload"
	assert_eq "$(progs_of batch)" "$b" "batch programs after a broken reload"
	kill -0 "$SP_PID" || fail "run ended on a broken reload: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	# A restart with the last good file: the file's values and the saved ones.
	conf "[cgroup sp-test-$ID/batch]" "modules = tcpstats,rehash" "rehash.prob = 50" \
	     "[cgroup sp-test-$ID/latency]" "modules = tcpstats,rehash" "rehash.prob = 0"
	cfg_start
	assert_eq "$(get_cg batch rehash.prob) $(get_cg batch rehash.pause_ms)" "50 777" "after a restart"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# A cgroup named in the file that does not exist yet is attached when it
# appears, detached when it goes, and attached again when it is back.
t_config_cgroup_appears() {
	local p1 p2
	netns_pair; cg_tree here
	tcp_server 5201
	conf "[cgroup sp-test-$ID/here]" "modules = tcpstats" "[cgroup sp-test-$ID/later]" "modules = tcpstats"
	cfg_start
	grep -q "1 cgroup (1 waiting" "$TMP/sp.out" || fail "attached line: $(cat "$TMP/sp.out")"
	grep -q "cgroup sp-test-$ID/later does not exist yet" "$TMP/sp.err" || fail "no waiting line: $(tail -5 "$TMP/sp.err")"
	out=$("$SP" status --pin-path "$PIN" --cgroup "sp-test-$ID/later" 2>&1) && fail "status of a cgroup waited for"
	echo "$out"
	mkdir "$CG/later" || fail "mkdir: exit $?"
	wait_for has_progs later || fail "not attached after the cgroup appeared: $(cat $TMP/sp.err)"
	p1=$(progs_of later)
	in_cg later ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 2 >/dev/null || fail "client: exit $?"
	assert_eq "$(st later .modules.tcpstats.active_opens)" 2 "connections counted in the new cgroup"
	rmdir "$CG/later" || fail "rmdir: exit $?"
	wait_for test ! -e "$PIN/sp-test-$ID:later" || fail "pins of the removed cgroup left"
	grep -q "cgroup sp-test-$ID/later is gone: detached" "$TMP/sp.err" || fail "no line for the removal: $(tail -5 "$TMP/sp.err")"
	mkdir "$CG/later" || fail "mkdir: exit $?"
	wait_for has_progs later || fail "not attached when the cgroup came back"
	p2=$(progs_of later)
	[ "$p1" != "$p2" ] || fail "the same programs: $p1"
	assert_eq "$(st later .modules.tcpstats.active_opens)" 0 "a new cgroup starts at 0"
	[ -n "$(progs_of here)" ] || fail "the other cgroup lost its programs"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	rmdir "$CG/later"
}

# kill -9, then a new run of the file: the tunables are the file's again,
# and the killed run's pin folders (also of a cgroup left out since) are gone.
t_config_kill9_restart() {
	cg_tree a b
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 42" "[cgroup sp-test-$ID/b]" "modules = tcpstats"
	cfg_start
	# A config run persists `set` by default.
	"$SP" set --pin-path "$PIN" --cgroup "sp-test-$ID/a" rehash.mode=1 >/dev/null || fail "set rehash.mode=1: exit $?"
	sp_stop KILL
	wait_for no_progs a b || fail "programs left after kill -9"
	[ -e "$PIN/sp-test-$ID:b/meta" ] || fail "expected the killed run's pins"
	# And a single run's, killed too, on the same pin folder.
	sp_spawn "$SP" run --pin-path "$PIN" --cgroup "$CG/b" --modules tcpstats --interval 0
	sp_stop KILL
	[ -e "$PIN/meta" ] || fail "expected the killed single run's pins"
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 42"
	cfg_start
	assert_eq "$(get_cg a rehash.prob)" 42 "tunable of the file after kill -9 and restart"
	assert_eq "$(get_cg a rehash.mode)" 1 "tunable set while running, after kill -9 and restart"
	[ -e "$PIN/sp-test-$ID:b" ] && fail "stale pin folder of the killed run"
	assert_eq "$(find "$PIN" -maxdepth 1 ! -type d)" "" "stale pins in the pin folder"
	[ -n "$(progs_of a)" ] || fail "not attached"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# The global settings' interfaces: fragguard with its tunables from the file,
# in the namespace of the interfaces (ip netns exec, its own bpffs); a
# reload changes a tunable in place, then takes the interfaces away.
t_config_ifaces() {
	source "$ROOT/tests/lib_frag.sh"
	frag_topo 2
	local ctl=(nsenter -t "$SP_PID" -m -n "$SP") id
	{ echo "pin-path = $PIN"; echo "iface = rp1, rp2"; echo "fragguard.enforce = 0"; } >"$TMP/sp.conf"
	: >"$TMP/sp.err"
	sp_spawn ip netns exec "$NS_R" "$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state"
	ctl=(nsenter -t "$SP_PID" -m -n "$SP")
	grep -q "interfaces rp1,rp2" "$TMP/sp.out" || fail "attached line: $(cat "$TMP/sp.out")"
	assert_eq "$("${ctl[@]}" get --pin-path "$PIN" fragguard.enforce)" "fragguard.enforce=0" "enforce from the file"
	id=$("${ctl[@]}" status --pin-path "$PIN" --json | jq -r '.programs[] | select(.name == "sp_fragguard") | .id' | sort -u)
	[ -n "$id" ] || fail "no fragguard program"
	sed -i 's/^fragguard.enforce = 0/fragguard.enforce = 1/' "$TMP/sp.conf"
	reload
	assert_eq "$("${ctl[@]}" get --pin-path "$PIN" fragguard.enforce)" "fragguard.enforce=1" "enforce after reload"
	assert_eq "$("${ctl[@]}" status --pin-path "$PIN" --json | jq -r '.programs[] | select(.name == "sp_fragguard") | .id' | sort -u)" \
		"$id" "fragguard program after a tunable reload"
	grep -q "interfaces: fragguard.enforce 0 -> 1" "$TMP/sp.err" || fail "no line for the change: $(cat "$TMP/sp.err")"
	# An interface that is not there: rejected, the running policy stays.
	echo "iface = nosuch$ID" >"$TMP/sp.conf.new"; cat "$TMP/sp.conf" >>"$TMP/sp.conf.new"; mv "$TMP/sp.conf.new" "$TMP/sp.conf"
	reload
	grep -q "reload rejected, the running policy stays: $TMP/sp.conf:1: iface nosuch$ID: no such interface" "$TMP/sp.err" ||
		fail "rejection: $(tail -1 "$TMP/sp.err")"
	assert_eq "$("${ctl[@]}" get --pin-path "$PIN" fragguard.enforce)" "fragguard.enforce=1" "enforce after a rejected reload"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q '^stackpilot: detached' "$TMP/sp.out" || fail "not detached: $(tail -5 "$TMP/sp.out")"
}

# What pmtu learned in a config run is saved (every 60 s, when its cgroup
# goes, at exit) and restored: after kill -9 and a restart the first
# connection starts at the learned MSS and loses nothing in the black hole;
# the same when the service's cgroup goes and comes back.
t_config_pmtu_state_restart() {
	source "$ROOT/tests/lib_pmtu.sh"
	pmtu_topo 1400; make_cgroup
	conf "mtu-probing = 1" "[cgroup sp-test-$ID]" "modules = pmtu"
	sp_json() { sp_ctl status --cgroup "sp-test-$ID" --json | jq -r "$1"; }
	start() { : >"$TMP/sp.err"; sp_spawn ip netns exec "$NS_S" "$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state"; }
	start
	assert_eq "$(ip netns exec "$NS_S" sysctl -n net.ipv4.tcp_mtu_probing)" 1 "tcp_mtu_probing while running"
	# One run per namespace sets it: another is refused.
	out=$(ip netns exec "$NS_S" "$SP" run --pin-path "$PIN-2" --cgroup / --modules pmtu --mtu-probing 2 2>&1) &&
		fail "a second run set tcp_mtu_probing"
	[[ $out == *"pid $SP_PID already set tcp_mtu_probing"* ]] || fail "refusal: $out"
	set -- $(xfer 10.30.2.2 1000000)
	echo "learning connection: secs mss retrans $*"
	assert_eq "$(pm_entry 10.30.2.2 state)" searched "destination searched"
	local low=$(pm_entry 10.30.2.2 low_mtu) f=$TMP/state/cgroup-sp-test-$ID.pmtu
	# kill -9 once the periodic save (every 60 s) has it: nothing runs at exit.
	for _ in $(seq 700); do grep -q "^dst 4 10.30.2.2 " "$f" 2>/dev/null && break; sleep 0.1; done
	grep -q "^dst 4 10.30.2.2 " "$f" || fail "not saved within 70 s: $(tail -5 "$f")"
	sp_stop KILL
	start
	assert_eq "$(pm_entry 10.30.2.2 low_mtu)" "$low" "restored low_mtu after kill -9"
	set -- $(xfer 10.30.2.2 1000000)
	echo "first connection after the restart: secs mss retrans $* (learned $low)"
	assert_eq "$2" $((low - 52)) "MSS of the first connection after the restart"
	[ "$3" -le 1 ] || fail "first connection after the restart retransmitted $3 times, expected <= 1"
	# The service restarts (its cgroup goes and comes back): saved when it
	# goes, restored when it is back, under the cgroup's own name.
	rmdir "$CG" || fail "rmdir $CG"
	wait_for grep -q "cgroup sp-test-$ID is gone" "$TMP/sp.err" || fail "not detached: $(cat "$TMP/sp.err")"
	mkdir "$CG" || fail "mkdir $CG"
	attached_twice() { [ "$(grep -c "cgroup sp-test-$ID: attached" "$TMP/sp.err")" = 2 ]; }
	wait_for attached_twice || fail "not attached again: $(cat "$TMP/sp.err")"
	assert_eq "$(pm_entry 10.30.2.2 low_mtu)" "$low" "low_mtu after the cgroup came back"
	assert_eq "$(ls "$TMP/state")" "cgroup-sp-test-$ID.pmtu" "state files"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(ip netns exec "$NS_S" sysctl -n net.ipv4.tcp_mtu_probing)" 0 "tcp_mtu_probing after the run"
}

# Ten SIGHUPs in a row, one of them with a value changed, then a second
# run of the same file: the run lives, keeps its programs, ends with the
# file's value; the second is refused with one line and changes nothing.
t_config_reload_storm() {
	local a b out rc
	cg_tree a b
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 10" "[cgroup sp-test-$ID/b]" "modules = tcpstats"
	cfg_start
	a=$(progs_of a) b=$(progs_of b)
	for i in $(seq 10); do
		[ $i = 5 ] && conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 11" \
				   "[cgroup sp-test-$ID/b]" "modules = tcpstats"
		kill -HUP "$SP_PID" || fail "run gone after $i SIGHUPs"
	done
	wait_for eval '[ "$(get_cg a rehash.prob)" = 11 ]' || fail "value after the storm: $(get_cg a rehash.prob)"
	sleep 0.3
	kill -0 "$SP_PID" || fail "run ended in the storm: $(sp_said)"
	assert_eq "$(progs_of a) $(progs_of b)" "$a $b" "programs after 10 SIGHUPs"
	assert_eq "$(grep -c 'rehash.prob 10 -> 11' "$TMP/sp.err")" 1 "lines for the one change"
	out=$("$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state" 2>&1); rc=$?
	assert_eq $rc 1 "second run of the same file: $out"
	assert_eq "$(echo "$out" | grep -c .)" 1 "lines of the second run: $out"
	assert_eq "$(progs_of a) $(progs_of b)" "$a $b" "programs after a refused second run"
	assert_eq "$(get_cg a rehash.prob)" 11 "value after a refused second run"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	no_progs a b || fail "programs left after stop"
}

# A value the file changes while its cgroup is gone (a service stopped)
# replaces what `set` saved for it, as for an attached cgroup: when the
# cgroup is back it runs with the file's new value, not the older saved one.
t_config_reload_while_waiting() {
	cg_tree a
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 10"
	cfg_start
	"$SP" set --pin-path "$PIN" --cgroup "sp-test-$ID/a" rehash.prob=66 rehash.mode=1 >/dev/null || fail "set rehash.prob=66 rehash.mode=1: exit $?"
	rmdir "$CG/a" || fail "rmdir: exit $?"
	wait_for test ! -e "$PIN/sp-test-$ID:a" || fail "not detached"
	conf "[cgroup sp-test-$ID/a]" "modules = rehash" "rehash.prob = 50"
	reload
	mkdir "$CG/a" || fail "mkdir: exit $?"
	wait_for has_progs a || fail "not attached when back: $(tail -3 "$TMP/sp.err")"
	assert_eq "$(get_cg a rehash.prob)" 50 "the file's changed value after the cgroup came back"
	assert_eq "$(get_cg a rehash.mode)" 1 "a saved value the file does not change"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	cfg_start
	assert_eq "$(get_cg a rehash.prob) $(get_cg a rehash.mode)" "50 1" "after a restart"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# A reload that removes the cgroup of a client mid-transfer: its programs
# go, its connection does not (the transfer completes, at its own pace).
t_config_reload_mid_transfer() {
	local c t0
	netns_pair; cg_tree front back
	tc -n "$NS_A" qdisc add dev "v$ID"a root tbf rate 20mbit burst 32kb latency 50ms || fail "tbf: exit $?"
	tcp_server 5201
	conf "[cgroup sp-test-$ID/front]" "modules = tcpstats,rehash,pmtu" "rehash.prob = 100" \
	     "[cgroup sp-test-$ID/back]" "modules = tcpstats"
	cfg_start
	t0=$(date +%s%N)
	in_cg front ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 5000000 1 20 >/dev/null &
	c=$!
	sleep 0.5
	kill -0 $c 2>/dev/null || fail "transfer ended before the reload: too fast for this test"
	conf "[cgroup sp-test-$ID/back]" "modules = tcpstats"
	reload
	assert_eq "$(progs_of front)" "" "programs of the removed cgroup"
	wait $c || fail "transfer broken by the reload: exit $?"
	echo "transfer took $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	kill -0 "$SP_PID" || fail "run ended: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# --bpf-stats goes with --config: runs counted only when it is given.
t_config_bpf_stats() {
	local runs opt
	cg_tree a
	for opt in "" --bpf-stats; do
		conf "[cgroup sp-test-$ID/a]" "modules = tcpstats"
		cfg_start $opt
		# A socket's establishment runs tcpstats; a loopback listener in the cgroup.
		in_cg a python3 -c 'import socket; s = socket.create_server(("127.0.0.1", 0)); c = socket.create_connection(s.getsockname()); s.accept()'
		runs=$("$SP" status --pin-path "$PIN" --json | jq '[.. | objects | select(has("run_cnt")) | .run_cnt] | add // 0')
		sp_stop || fail "run --config $opt exited $?; its stderr ends: $(sp_said)"
		if [ -z "$opt" ]; then
			assert_eq "$runs" 0 "runs counted by run --config without --bpf-stats"
		else
			assert_ge "$runs" 2 "runs counted by run --config --bpf-stats"
		fi
	done
}
