# SPDX-License-Identifier: GPL-2.0
# stackpilot as a host service (issue 12): version, journal logging,
# `make install` into a DESTDIR, the unit, capabilities, man pages, bash
# completion, README's install section. Nothing here touches the host's
# /etc, /usr, systemd or sysctls: installs go to $TMP, networks to the
# test's namespaces.

# journal_env, unit_caps, unit_start, unit_reload, notify_*.
source "$ROOT/tests/lib_unit.sh"

# `run` in the background as sp_start does, but with our options only
# (sp_start always passes --interval 0).
start_raw() { sp_spawn "$@"; }

t_version() {
	local v=$("$SP" --version) rc
	[[ $v =~ ^stackpilot\ [^\ ]+$ ]] || fail "--version: '$v'"
	assert_eq "$("$SP" -V)" "$v" "-V"
	# From git: describe's form (TAG-N-gHASH, or HASH without tags, then
	# -dirty), naming a commit of this repository. Not compared with HEAD:
	# the build may be older than the last commit.
	if [ -e "$ROOT/.git" ]; then
		local h=${v#stackpilot }
		h=${h%-dirty}
		[[ $h == *-g* ]] && h=${h##*-g}	# else a tag, or a hash alone
		git -C "$ROOT" cat-file -e "$h^{commit}" || fail "--version names no commit: '$v'"
	fi
	# A tree without .git (a tarball) falls back to VERSION.
	mkdir "$TMP/src" && cp "$ROOT/Makefile" "$ROOT/VERSION" "$TMP/src/" || fail "copy: exit $?"
	make -s -C "$TMP/src" OUTPUT=b b/version.h >/dev/null || fail "make version.h: exit $?"
	assert_eq "$(cat "$TMP/src/b/version.h")" "#define SP_VERSION \"$(cat "$ROOT/VERSION")\"" "version.h without git"
	"$SP" --version --bogus >/dev/null; rc=$?
	assert_eq $rc 0 "--version ignores what follows"
}

# Under journald each line carries its syslog priority: <3> error, <4>
# warning, <6> info, <7> debug; with stderr elsewhere, none.
t_log_journal_priorities() {
	local err=$TMP/sp.err out
	# An error, with stderr the journal and with it not.
	env "$(journal_env "$err")" "$SP" run --pin-path "$PIN" --cgroup "sp-test-$ID-none" 2>>"$err" >/dev/null
	grep -q '^<3>stackpilot: .*sp-test-'"$ID"'-none' "$err" || fail "no <3> error line: $(cat "$err")"
	out=$(env "$(journal_env "$TMP/other")" "$SP" run --pin-path "$PIN" --cgroup "sp-test-$ID-none" 2>&1 >/dev/null)
	[[ $out == stackpilot:* ]] || fail "prefix though stderr is not the journal: $out"
	out=$(STACKPILOT_LOG_PRIORITIES=1 "$SP" get --pin-path "$PIN" 2>&1 >/dev/null)
	[[ $out == '<3>stackpilot: '* ]] || fail "STACKPILOT_LOG_PRIORITIES=1: $out"
	# Warning, info and debug from a run: an interface gone and back, a signal.
	source "$ROOT/tests/lib_frag.sh"
	frag_topo 1
	export "$(journal_env "$err")"
	sp_start --modules fragguard --iface rp1 --log-level debug
	ip -n "$NS_R" link del rp1 || fail "link del: exit $?"
	veth "$NS_R" rp1 "sp-$ID-p1" pr1
	for _ in $(seq 30); do grep -q 'rp1 is back' "$err" && break; sleep 0.1; done
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	unset JOURNAL_STREAM
	cat "$err"
	grep -q '^<4>stackpilot: warning: interface rp1 (index [0-9]*) is gone' "$err" || fail "no <4> line: $(tail -5 "$err")"
	grep -q '^<6>stackpilot: interface rp1 is back' "$err" || fail "no <6> line: $(tail -5 "$err")"
	grep -q '^<7>stackpilot: debug: signal 15' "$err" || fail "no <7> line: $(tail -5 "$err")"
	grep -v '^<[3467]>' "$err" && fail "a line without a priority"
	return 0
}

# --log-level LEVEL shows that level and the more severe ones only.
t_log_level_filter() {
	local l n err=$TMP/sp.err
	source "$ROOT/tests/lib_frag.sh"
	frag_topo 1
	"$SP" run --log-level loud --cgroup / >/dev/null 2>&1; assert_eq $? 2 "--log-level loud"
	for l in error warn info debug; do
		: >"$err"
		STACKPILOT_LOG_PRIORITIES=1 sp_start --modules fragguard --iface rp1 --log-level $l
		ip -n "$NS_R" link del rp1 || fail "link del: exit $?"
		for _ in $(seq 30); do grep -q 'rp1.*is gone' "$err" && break; sleep 0.1; done
		veth "$NS_R" rp1 "sp-$ID-p1" pr1
		for _ in $(seq 30); do grep -q 'rp1 is back' "$err" && break; sleep 0.1; done
		[ $l = error ] && sleep 1
		sp_stop || fail "exit at $l: stackpilot run exited $?; its stderr ends: $(sp_said)"
		n=$(grep -c '^<4>' "$err"); [ $l = error ] && { assert_eq "$n" 0 "warnings at $l"; true; } || assert_ge "$n" 1 "warnings at $l"
		n=$(grep -c '^<6>' "$err"); case $l in error|warn) assert_eq "$n" 0 "info at $l" ;; *) assert_ge "$n" 1 "info at $l" ;; esac
		n=$(grep -c '^<7>' "$err"); [ $l = debug ] && assert_ge "$n" 1 "debug at $l" || assert_eq "$n" 0 "debug at $l"
	done
	# The environment sets the default level too.
	: >"$err"
	STACKPILOT_LOG_LEVEL=debug STACKPILOT_LOG_PRIORITIES=1 sp_start --modules fragguard --iface rp1
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q '^<7>stackpilot: debug: signal' "$err" || fail "STACKPILOT_LOG_LEVEL=debug: $(cat "$err")"
}

# Under journald no status every 2 s, unless --interval asks for it;
# elsewhere the default dump is there.
t_journal_no_status_dump() {
	make_cgroup
	start_raw env "$(journal_env "$TMP/sp.err")" "$SP" run --pin-path "$PIN" --modules tcpstats --cgroup "$CG"
	sleep 2.5
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(grep -c tcpstats "$TMP/sp.out")" 1 "status dumps under the journal (only the attached line expected)"
	start_raw env "$(journal_env "$TMP/sp.err")" "$SP" run --pin-path "$PIN" --modules tcpstats --cgroup "$CG" --interval 1
	sleep 2.5
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_ge "$(grep -c tcpstats "$TMP/sp.out")" 2 "status dumps with --interval 1 under the journal"
	start_raw "$SP" run --pin-path "$PIN" --modules tcpstats --cgroup "$CG"
	sleep 2.5
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_ge "$(grep -c tcpstats "$TMP/sp.out")" 2 "status dumps by default outside the journal"
}

# Install into a DESTDIR: exactly these files, the unit's ExecStart at the
# PREFIX, the binary the build's.
t_install_tree() {
	local d=$TMP/root
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install: exit $?"
	(cd "$d" && find . -type f -printf '%m %p\n' | sort) >"$TMP/tree"
	cat >"$TMP/want" <<-'END'
	644 ./etc/iproute2/rt_protos.d/stackpilot.conf
	644 ./etc/stackpilot/stackpilot.conf
	644 ./usr/local/lib/systemd/system/stackpilot.service
	644 ./usr/local/share/bash-completion/completions/stackpilot
	644 ./usr/local/share/man/man8/stackpilot-fragguard.8
	644 ./usr/local/share/man/man8/stackpilot-pmtu.8
	644 ./usr/local/share/man/man8/stackpilot-rehash.8
	644 ./usr/local/share/man/man8/stackpilot-tcpstats.8
	644 ./usr/local/share/man/man8/stackpilot.8
	755 ./usr/local/sbin/stackpilot
	END
	diff "$TMP/want" "$TMP/tree" || fail "installed tree differs"
	assert_eq "$("$d/usr/local/sbin/stackpilot" --version)" "$("$ROOT/build/stackpilot" --version)" "installed --version"
	grep -qx 'ExecStart=/usr/local/sbin/stackpilot run --config /etc/stackpilot/stackpilot.conf' "$d/usr/local/lib/systemd/system/stackpilot.service" ||
		fail "ExecStart: $(grep ExecStart= "$d/usr/local/lib/systemd/system/stackpilot.service")"
	grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$d/usr/local/lib/systemd/system/stackpilot.service" || fail "no ExecReload: $(tail -5 "$d/usr/local/lib/systemd/system/stackpilot.service")"
	"$d/usr/local/sbin/stackpilot" check-config "$d/etc/stackpilot/stackpilot.conf" >/dev/null || fail "installed config does not validate"
	# An operator's config is never overwritten by an install, nor removed by an uninstall.
	echo "# mine" >>"$d/etc/stackpilot/stackpilot.conf"
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install again: exit $?"
	tail -1 "$d/etc/stackpilot/stackpilot.conf" | has -x '# mine' || fail "install overwrote the config"
	make -s -C "$ROOT" uninstall PREFIX=/usr/local DESTDIR="$d" || fail "make uninstall: exit $?"
	[ -f "$d/etc/stackpilot/stackpilot.conf" ] || fail "uninstall removed a changed config"
	rm "$d/etc/stackpilot/stackpilot.conf" && rmdir "$d/etc/stackpilot"
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install: exit $?"
	# The number pmtu marks its routes with is the one named.
	local n=$(printf '%d' "$(sed -n 's/^#define RTPROT_STACKPILOT[[:space:]]*\(0x[0-9a-f]*\).*/\1/p' "$ROOT/src/modules/pmtu/pmtu_state.h")")
	assert_eq "$(grep -v '^#' "$d/etc/iproute2/rt_protos.d/stackpilot.conf" | tr -s '\t ' ' ')" "$n stackpilot" "rt_protos.d entry"
	make -s -C "$ROOT" uninstall PREFIX=/usr/local DESTDIR="$d" || fail "make uninstall: exit $?"
	assert_eq "$(find "$d" -type f)" "" "files left by uninstall"
}

# systemd-analyze verify finds nothing wrong with the unit, and would: a
# copy with a bad value is reported. Installed without DESTDIR under $TMP
# so ExecStart's binary and the Documentation= page exist where named.
t_unit_verifies() {
	local p=$TMP/p/usr/local out
	make -s -C "$ROOT" install PREFIX="$p" SYSCONFDIR="$TMP/p/etc" >/dev/null || fail "make install: exit $?"
	out=$(MANPATH=$p/share/man systemd-analyze verify "$p/lib/systemd/system/stackpilot.service" 2>&1)
	echo "$out"
	echo "$out" | grep -i 'stackpilot' && fail "systemd-analyze verify complains about the unit"
	mkdir "$TMP/bad" && sed 's/^Restart=.*/Restart=sometimes/' "$p/lib/systemd/system/stackpilot.service" >"$TMP/bad/stackpilot.service"
	out=$(MANPATH=$p/share/man systemd-analyze verify "$TMP/bad/stackpilot.service" 2>&1)
	echo "$out" | has -i 'stackpilot.service.*restart' || fail "a bad unit is not reported: $out"
	return 0
}

# iproute2 names our protocol from the installed file: in a private mount
# namespace, /etc/iproute2 is a copy with it (the host's is untouched).
t_rt_protos_name() {
	local d=$TMP/root
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install: exit $?"
	mk_netns "sp-$ID-a"
	ip -n "sp-$ID-a" link add d0 type veth peer name d1 && ip -n "sp-$ID-a" link set d0 up && ip -n "sp-$ID-a" link set d1 up &&
		ip -n "sp-$ID-a" addr add 10.66.0.1/24 dev d0 || fail "veth"
	ip -n "sp-$ID-a" route add 10.66.1.0/24 via 10.66.0.2 proto 0xa5 mtu 1400 || fail "route: exit $?"
	cp -a /etc/iproute2 "$TMP/iproute2" && cp "$d/etc/iproute2/rt_protos.d/stackpilot.conf" "$TMP/iproute2/rt_protos.d/" || fail "copy: exit $?"
	local out=$(unshare -m sh -c 'mount --bind "$1" /etc/iproute2 && ip -n "$2" route show 10.66.1.0/24' _ "$TMP/iproute2" "sp-$ID-a")
	echo "$out"
	[[ $out == *"proto stackpilot"* ]] || fail "route not shown as proto stackpilot: $out"
}

# `run` as the unit runs it: root with only CAPS in its bounding set (so in
# its permitted and effective sets), in namespace S of the black-hole
# testbed, with the host's bpffs and cgroup mounts (nsenter --net only).
cap_run() {
	local caps=$1; shift
	: >"$TMP/sp.err"
	start_raw nsenter --net="/run/netns/$NS_S" setpriv --bounding-set "-all,$caps" --inh-caps -all -- \
		"$SP" run --pin-path "$PIN" --interval 0 --cgroup "sp-test-$ID" "$@"
}

# Which capabilities `run` needs (the unit's comment records this):
# with the unit's set every module attaches and pmtu searches, installs its
# route and restores what it changed; without CAP_NET_RAW the search cannot
# probe; without CAP_BPF, CAP_PERFMON or CAP_NET_ADMIN nothing starts;
# CAP_SYS_ADMIN adds only BPF run-time stats (--bpf-stats).
t_service_capabilities() {
	source "$ROOT/tests/lib_pmtu.sh"
	pmtu_topo 1400; make_cgroup; host_bpffs
	SP_NS=
	local caps=$(unit_caps) c rc
	assert_eq "$caps" "+bpf,+perfmon,+net_admin,+net_raw" "unit's bounding set"
	cap_run "$caps" --modules all --iface s0 --mtu-probing 1 --bpf-stats
	grep CapEff "/proc/$SP_PID/status"
	assert_eq "$(sp_json '.modules | keys | sort | join(",")')" "fragguard,pmtu,rehash,tcpstats" "modules attached"
	grep -q 'bpf-stats: BPF run-time stats unavailable' "$TMP/sp.err" ||
		fail "expected the stats warning for --bpf-stats without CAP_SYS_ADMIN: $(tail -5 "$TMP/sp.err")"
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	set -- $(xfer 10.30.2.2 1000000)
	echo "first connection, unit's capabilities: $* ; $(cat "$TMP/sp.err")"
	awk "BEGIN { exit !($1 < 2) }" || fail "first connection took $1 s, expected < 2 s"
	ip -n "$NS_S" route show proto 0xa5 | has '^10.30.2.2 .*mtu 1[34][0-9][0-9]' || fail "no route MTU installed"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "routes left after exit"
	assert_eq "$(ip netns exec "$NS_S" sysctl -n net.ipv4.tcp_mtu_probing)" 0 "tcp_mtu_probing restored"
	# Without CAP_NET_RAW: attached, but the search cannot send a probe.
	cap_run "+bpf,+perfmon,+net_admin" --modules pmtu
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	xfer 10.30.2.2 200000 "" 3 >/dev/null
	for _ in $(seq 30); do grep -q 'cannot send a probe' "$TMP/sp.err" && break; sleep 0.1; done
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	cat "$TMP/sp.err"
	grep -q 'cannot send a probe: Operation not permitted' "$TMP/sp.err" || fail "no probe failure logged without CAP_NET_RAW: $(tail -5 "$TMP/sp.err")"
	! grep -q 'run-time stats' "$TMP/sp.err" || fail "a stats warning without --bpf-stats: $(grep 'run-time stats' "$TMP/sp.err")"
	# Without any one of the other three: refused before anything attaches.
	for c in bpf perfmon net_admin; do
		nsenter --net="/run/netns/$NS_S" setpriv --bounding-set "-all,${caps//+$c,/}" --inh-caps -all -- \
			"$SP" run --pin-path "$PIN" --interval 0 --cgroup "sp-test-$ID" --modules tcpstats >/dev/null 2>"$TMP/err.$c"
		rc=$?
		assert_eq $rc 1 "exit status without cap_$c"
		assert_eq "$(cgroup_progs)" "" "programs attached without cap_$c"
	done
	# With CAP_SYS_ADMIN too, the one difference: run-time stats.
	cap_run "$caps,+sys_admin" --modules tcpstats --bpf-stats
	xfer 10.30.2.2 1000 >/dev/null
	local runs=$(sp_json '[.programs[].run_cnt] | add')
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q 'run-time stats unavailable' "$TMP/sp.err" && fail "stats unavailable with CAP_SYS_ADMIN"
	assert_ge "$runs" 1 "runs counted with --bpf-stats and CAP_SYS_ADMIN"
	return 0
}

# A rendered man page as plain text, wide enough that no entry wraps.
render() { MANWIDTH=250 man -l "$1" 2>&1 | col -b; }

# One page per module and stackpilot(8); every tunable of every module in
# its page with its range and default (from `get --help`, the loader's
# table as `set` checks it), every option of `run` and every command in
# stackpilot(8).
t_man_pages() {
	local d=$TMP/root man m n=0 key min max def o
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install: exit $?"
	man=$d/usr/local/share/man/man8
	render "$man/stackpilot.8" >"$TMP/stackpilot.txt"
	grep -q '^STACKPILOT(8)' "$TMP/stackpilot.txt" || fail "stackpilot(8) does not render: $(head -3 "$TMP/stackpilot.txt")"
	for m in $("$SP" --help | awk '/^Modules:/ { f = 1; next } f && !NF { exit } f { print $1 }'); do
		[ -f "$man/stackpilot-$m.8" ] || fail "no page for module $m"
		render "$man/stackpilot-$m.8" >"$TMP/$m.txt"
		grep -q "^STACKPILOT-${m^^}(8)" "$TMP/$m.txt" || fail "stackpilot-$m(8) does not render"
		grep -q "stackpilot-$m(8)" "$TMP/stackpilot.txt" || fail "stackpilot(8) does not name stackpilot-$m(8)"
	done
	while read -r key min max def; do
		m=${key%%.*}
		grep -qF "$key ($min..$max, default $def)" "$TMP/$m.txt" || fail "$key [$min, $max] default $def not in stackpilot-$m(8)"
		n=$((n + 1))
	done < <("$SP" get --help | sed -n 's/^  \([a-z0-9_]*\.[a-z0-9_]*\) *\[\([0-9]*\), \([0-9]*\)\] default \([0-9]*\):.*/\1 \2 \3 \4/p')
	assert_ge $n 25 "tunables checked"
	for o in $("$SP" run --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
		grep -q -- "$o" "$TMP/stackpilot.txt" || fail "run $o not in stackpilot(8)"
	done
	for o in run status get set tunables --version 'EXIT STATUS' 'LIFECYCLE PROMISES' /run/stackpilot; do
		grep -q -- "$o" "$TMP/stackpilot.txt" || fail "'$o' not in stackpilot(8)"
	done
	echo "$n tunables found in their pages"
}

# The completion, sourced as bash-completion would, against this build.
t_bash_completion() {
	local d=$TMP/root
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install: exit $?"
	make_cgroup
	PATH=$BUILD:$PATH
	source "$d/usr/local/share/bash-completion/completions/stackpilot"
	complete -p stackpilot | has _stackpilot || fail "not registered"
	comp() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _stackpilot; echo "${COMPREPLY[*]}"; }
	assert_eq "$(comp stackpilot s)" "status set" "commands"
	assert_eq "$(comp stackpilot run --log)" "--log-level" "run option"
	assert_eq "$(comp stackpilot run --mtu)" "--mtu-probing" "a module's run option"
	assert_eq "$(comp stackpilot run --log-level w)" "warn" "log level"
	assert_eq "$(comp stackpilot run --modules tcpstats,f)" "tcpstats,fragguard" "module list"
	assert_eq "$(comp stackpilot run --cgroup "sp-test-$ID")" "sp-test-$ID" "cgroup relative to the mount"
	assert_eq "$(comp stackpilot status --j)" "--json" "status option"
	assert_eq "$(comp stackpilot set rehash.pro)" "rehash.prob= rehash.probe_rtts=" "set key"
	assert_eq "$(comp stackpilot get --pin-path /tmp fragguard.enf)" "fragguard.enforce" "get key after an option"
	assert_eq "$(comp stackpilot tunables pm)" "pmtu" "module of tunables"
	assert_eq "$(comp stackpilot che)" "check-config" "check-config"
	assert_eq "$(comp stackpilot pr)" "probe" "probe"
	assert_eq "$(comp stackpilot probe re)" "rehash" "module of probe"
	assert_eq "$(comp stackpilot run --conf)" "--config" "run --config"
	assert_eq "$(comp stackpilot status --cg)" "--cgroup" "status --cgroup"
	# Every key `get --help` knows is offered.
	local all=$(comp stackpilot get "" | tr ' ' '\n' | sort)
	assert_eq "$all" "$("$SP" get --help | sed -n 's/^  \([a-z0-9_]*\.[a-z0-9_]*\) .*/\1/p' | sort)" "all keys"
}

# README's "Install as a service": at most five commands, each run here in
# its DESTDIR form. systemctl works on the DESTDIR (--root); the start is
# the installed unit's ExecStart as systemd would run it (its bounding
# set, stderr the journal), on the test's cgroup and pins instead of the
# host's root cgroup.
t_readme_install() {
	local d=$TMP/root line n=0 unit exec
	sed -n '/tested by tests\/integration\/test_service.sh:t_readme_install/,/^```$/p' "$ROOT/README.md" |
		sed '1,2d;$d' | sed 's/ *#.*//' >"$TMP/cmds"
	n=$(wc -l <"$TMP/cmds")
	[ "$n" -ge 1 ] && [ "$n" -le 5 ] || fail "README install section has $n commands, expected 1 to 5"
	make_cgroup; host_bpffs
	while read -r line; do
		echo "README: $line"
		case $line in
		"make deps install PREFIX=/usr/local")
			make -s -C "$ROOT" deps install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "$line" ;;
		"systemctl enable --now stackpilot")
			unit=$d/usr/local/lib/systemd/system/stackpilot.service
			systemctl --root="$d" enable stackpilot 2>/dev/null || fail "systemctl --root enable"
			[ "$(readlink "$d/etc/systemd/system/multi-user.target.wants/stackpilot.service")" = \
			  /usr/local/lib/systemd/system/stackpilot.service ] || fail "not enabled"
			# The installed config, on the test's cgroup and pins instead of the host's root.
			exec=$(sed -n 's/^ExecStart=//p' "$unit")
			sed -e "s|^\[cgroup /\]|[cgroup sp-test-$ID]|" -e "s|^#pin-path = .*|pin-path = $PIN|" \
				"$d/etc/stackpilot/stackpilot.conf" >"$TMP/sp.conf"
			grep -q "^\[cgroup sp-test-$ID\]" "$TMP/sp.conf" || fail "installed config has no [cgroup /]: $(tail -5 "$TMP/sp.conf")"
			start_raw env "$(journal_env "$TMP/sp.err")" setpriv --bounding-set "-all,$(unit_caps "$unit")" --inh-caps -all -- \
				$d${exec%% --config *} --config "$TMP/sp.conf" --state-dir "$TMP/state"
			grep -q '^<4>stackpilot: warning: ' "$TMP/sp.err" || fail "no warning with its priority: $(cat "$TMP/sp.err")"
			grep -v '^<[3467]>' "$TMP/sp.err" && fail "a log line without its priority"
			;;
		"stackpilot status")
			"$d/usr/local/sbin/stackpilot" status --pin-path "$PIN" >"$TMP/status" || fail "status"
			grep -q "sp-test-$ID" "$TMP/status" || fail "status does not show the cgroup: $(cat "$TMP/status")"
			grep -q '^ *tcpstats' "$TMP/status" || fail "status does not show tcpstats: $(cat "$TMP/status")" ;;
		"man stackpilot")
			MANWIDTH=100 man -M "$d/usr/local/share/man" stackpilot 2>&1 | col -b | has '^STACKPILOT(8)' ||
				fail "man stackpilot" ;;
		*) fail "README command not run by this test: '$line'" ;;
		esac
	done <"$TMP/cmds"
	[ -n "$SP_PID" ] || fail "the service was never started"
	sp_stop || fail "exit of the service: stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q '^stackpilot: detached' "$TMP/sp.out" || fail "not detached: $(cat "$TMP/sp.out")"
}

# The unit installed under $TMP/p (ExecStart's binary and the config path
# it names exist there); prints the unit's path.
unit_install() {
	make -s -C "$ROOT" install PREFIX="$TMP/p/usr/local" SYSCONFDIR="$TMP/p/etc" >/dev/null ||
		fail "make install: exit $?"
	echo "$TMP/p/usr/local/lib/systemd/system/stackpilot.service"
}

# systemd-analyze security's "Overall exposure level" of unit $1: "N.N RATING".
exposure() {
	systemd-analyze security --offline=true "$1" 2>&1 |
		sed -n 's/.*Overall exposure level for stackpilot.service: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p'
}

# The unit's sandboxing, as systemd rates it: at most 3.0, "OK". And the
# measure measures: the same unit without its sandboxing lines rates worse.
t_unit_security() {
	local unit e bare
	unit=$(unit_install) || exit 1
	e=$(exposure "$unit")
	echo "exposure of the unit: $e"
	[[ $e =~ ^[0-9]+\.[0-9]+\ [A-Z]+$ ]] || fail "no exposure level from systemd-analyze security: '$e'"
	awk "BEGIN { exit !(${e% *} <= 3.0) }" || fail "exposure ${e% *}, expected at most 3.0"
	assert_eq "${e#* }" OK "rating"
	mkdir "$TMP/bare" && grep -vE '^(Protect|Private|Restrict|SystemCall|ReadWrite|Lock|Memory|Device|UMask|NoNew|CapabilityBounding)' \
		"$unit" >"$TMP/bare/stackpilot.service" || fail "bare copy"
	bare=$(exposure "$TMP/bare/stackpilot.service")
	echo "exposure without the sandboxing lines: $bare"
	awk "BEGIN { exit !(${bare% *} > 3.0) }" || fail "the unsandboxed unit rates ${bare% *}: the measure does not tell (expected > 3.0)"
}

# Type=notify: READY=1 once the config's instances are attached (the
# listener counts the cgroup's programs when READY=1 arrives), a STATUS=
# line; around a reload RELOADING=1 ... READY=1; STOPPING=1 on SIGTERM.
t_service_notify() {
	local unit n at_ready
	unit=$(unit_install) || exit 1
	make_cgroup; host_bpffs
	printf 'pin-path = %s\n[cgroup sp-test-%s]\nmodules = tcpstats,rehash\n[cgroup sp-test-%s/later]\nmodules = pmtu\n' \
		"$PIN" "$ID" "$ID" >"$TMP/sp.conf"
	unit_start "$unit" "$TMP/sp.conf"
	n=$(notify_wait '^READY=1$') || exit 1
	cat "$TMP/notify.log"
	at_ready=$(sed -n "$((n + 1))s/^progs=//p" "$TMP/notify.log")
	assert_eq "$at_ready" "$(cgroup_progs | wc -l)" "programs attached when READY=1 came"
	# One a run: sp_sockops, on the cgroup once tcpstats and rehash are behind it.
	assert_ge "$at_ready" 1 "programs attached when READY=1 came (sp_sockops)"
	assert_eq "$(chain_progs | wc -l)" 2 "programs behind sp_sockops (tcpstats, rehash)"
	head -n "$n" "$TMP/notify.log" | has -x "STATUS=attached from $TMP/sp.conf: 1 cgroup (1 waiting for theirs)" ||
		fail "no STATUS= before READY=1: $(head -n "$n" "$TMP/notify.log" | tr '\n' ';')"
	sed -i 's/^modules = tcpstats,rehash$/modules = tcpstats,rehash\nrehash.prob = 40/' "$TMP/sp.conf"
	unit_reload "$unit" "$TMP/sp.conf" || fail "reload: exit $?: $(cat "$TMP/reload.out")"
	n=$(notify_wait '^RELOADING=1$' "$n") || exit 1
	n=$(notify_wait '^STATUS=reloaded ' "$n") || exit 1
	n=$(notify_wait '^READY=1$' "$n") || exit 1
	assert_eq "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" rehash.prob)" "rehash.prob=40" "after the reload"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	notify_wait '^STOPPING=1$' "$n" >/dev/null || exit 1
}

# `systemctl reload` of a file with an error fails (the unit's ExecReload
# checks it first) and the running instance keeps its config; the run's
# own check refuses it too when signalled anyway. A good file is applied.
t_service_reload_checks_file() {
	local unit rc
	unit=$(unit_install) || exit 1
	make_cgroup; host_bpffs
	printf 'pin-path = %s\n[cgroup sp-test-%s]\nmodules = rehash\nrehash.prob = 30\n' "$PIN" "$ID" >"$TMP/sp.conf"
	unit_start "$unit" "$TMP/sp.conf"
	notify_wait '^READY=1$' >/dev/null || exit 1
	assert_eq "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" rehash.prob)" "rehash.prob=30" "at start"
	sed -i 's/^rehash.prob = 30$/rehash.prob = 500/' "$TMP/sp.conf"
	unit_reload "$unit" "$TMP/sp.conf"; rc=$?
	cat "$TMP/reload.out"
	[ $rc != 0 ] || fail "reload of a file with rehash.prob = 500 succeeded"
	has 'rehash.prob' "$TMP/reload.out" || fail "the failed reload does not say what is wrong: $(cat "$TMP/reload.out")"
	has -F 'kill' "$TMP/reload.out" && fail "the run was signalled with a bad file"
	kill -0 "$SP_PID" || fail "the run died"
	has '^RELOADING=1$' "$TMP/notify.log" && fail "a reload began"
	assert_eq "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" rehash.prob)" "rehash.prob=30" "after the rejected reload"
	# Signalled anyway (kill -HUP by hand): the run refuses the file itself.
	kill -HUP "$SP_PID"
	notify_wait '^STATUS=reload rejected, the running policy stays: .*rehash.prob' >/dev/null || exit 1
	grep -q '^<3>stackpilot: reload rejected' "$TMP/sp.err" || fail "no error in the journal: $(sp_said)"
	assert_eq "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" rehash.prob)" "rehash.prob=30" "after SIGHUP with a bad file"
	sed -i 's/^rehash.prob = 500$/rehash.prob = 45/' "$TMP/sp.conf"
	unit_reload "$unit" "$TMP/sp.conf" || fail "reload of a good file: exit $?: $(cat "$TMP/reload.out")"
	for _ in $(seq 30); do
		[ "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" rehash.prob)" = rehash.prob=45 ] && break
		sleep 0.1
	done
	assert_eq "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" rehash.prob)" "rehash.prob=45" "after a good reload"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# The example config's comments are the code's: each line shown as a
# default is the default `run --help` (global settings) or `stackpilot
# tunables` (a module's) gives, and each shown as off is off unless set.
t_service_example_config_defaults() {
	local conf=$ROOT/dist/stackpilot.conf help key val def n=0 block
	help=$("$SP" run --help 2>&1)
	opt_help() { echo "$help" | awk -v o="--$1 " 'index($0, "  " o) == 1 { on = 1; print; next } on && /^  --/ { exit } on'; }
	while read -r block key val; do
		case $block:$key in
		default:*.*)
			def=$("$SP" tunables | awk -F'\t' -v k="$key" '$1 == k { print $4 }')
			assert_eq "$val" "$def" "example's default of $key" ;;
		default:interval)
			opt_help interval | tr -s ' \n' ' ' | has "0 when stderr is the journal" ||
				fail "interval: the example says 0 under systemd; run --help: $(opt_help interval)" ;;
		default:*)
			opt_help "$key" | has -F -e "(default $val" -e "$val (default)" -e "instead of $val" ||
				fail "$key: the example's default $val is not run --help's: $(opt_help "$key")" ;;
		off:mtu-probing)
			opt_help mtu-probing | has 'while running' || fail "mtu-probing: $(opt_help mtu-probing)" ;;
		off:metrics-listen)
			opt_help metrics-listen | tr -s ' \n' ' ' | has 'off by default' || fail "metrics-listen: $(opt_help metrics-listen)" ;;
		off:metrics-textfile)
			opt_help metrics-textfile | has 'write DIR' || fail "metrics-textfile: $(opt_help metrics-textfile)" ;;
		*) fail "a line of the example's settings this test does not know: $block $key = $val" ;;
		esac
		n=$((n + 1))
	done < <(awk '/^# Global settings come first/ { b = "default"; next }
		/^# These are off unless set/ { b = "off"; next }
		/^# Interfaces for the modules/ { b = "iface"; next }
		/^$/ { b = "" }
		b != "" && /^#[a-z][a-z.-]* = / { sub(/^#/, ""); sub(/ *#.*/, ""); split($0, kv, / = /);
			if (b == "iface" && kv[1] == "iface") next
			print (b == "iface" ? "default" : b), kv[1], kv[2] }' "$conf")
	echo "$n settings of the example checked"
	assert_ge "$n" 8 "settings checked"
	"$SP" check-config "$conf" >/dev/null || fail "the example does not validate"
}
