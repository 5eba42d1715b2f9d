# SPDX-License-Identifier: GPL-2.0
# stackpilot as a host service (issue 12): version, journal logging,
# `make install` into a DESTDIR, the unit, capabilities, man pages, bash
# completion, README's install section. Nothing here touches the host's
# /etc, /usr, systemd or sysctls: installs go to $TMP, networks to the
# test's namespaces.

# stderr of what follows is "the journal": JOURNAL_STREAM names its file.
journal_env() { : >"$1"; echo "JOURNAL_STREAM=$(stat -c '%d:%i' "$1")"; }

# `run` in the background as sp_start does, but with our options only
# (sp_start always passes --interval 0).
start_raw() {
	"$@" >"$TMP/sp.out" 2>>"$TMP/sp.err" &
	SP_PID=$!
	for _ in $(seq 100); do
		grep -q '^stackpilot: attached' "$TMP/sp.out" 2>/dev/null && return 0
		kill -0 "$SP_PID" 2>/dev/null || { cat "$TMP/sp.err" >&2; SP_PID=; fail "stackpilot run exited"; }
		sleep 0.1
	done
	fail "stackpilot run did not attach in 10 s"
}

t_version() {
	local v=$("$SP" --version) rc
	[[ $v =~ ^stackpilot\ [^\ ]+$ ]] || fail "--version: '$v'"
	assert_eq "$("$SP" -V)" "$v" "-V"
	if [ -e "$ROOT/.git" ]; then
		local d=$(git -C "$ROOT" describe --tags --always)
		assert_eq "${v%-dirty}" "stackpilot $d" "--version against git describe"
	fi
	# A tree without .git (a tarball) falls back to VERSION.
	mkdir "$TMP/src" && cp "$ROOT/Makefile" "$ROOT/VERSION" "$TMP/src/" || fail "copy"
	make -s -C "$TMP/src" OUTPUT=b b/version.h >/dev/null || fail "make version.h"
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
	ip -n "$NS_R" link del rp1 || fail "link del"
	veth "$NS_R" rp1 "sp-$ID-p1" pr1
	for _ in $(seq 30); do grep -q 'rp1 is back' "$err" && break; sleep 0.1; done
	sp_stop || fail "exit status"
	unset JOURNAL_STREAM
	cat "$err"
	grep -q '^<4>stackpilot: warning: interface rp1 (index [0-9]*) is gone' "$err" || fail "no <4> line"
	grep -q '^<6>stackpilot: interface rp1 is back' "$err" || fail "no <6> line"
	grep -q '^<7>stackpilot: debug: signal 15' "$err" || fail "no <7> line"
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
		ip -n "$NS_R" link del rp1 || fail "link del"
		for _ in $(seq 30); do grep -q 'rp1.*is gone' "$err" && break; sleep 0.1; done
		veth "$NS_R" rp1 "sp-$ID-p1" pr1
		for _ in $(seq 30); do grep -q 'rp1 is back' "$err" && break; sleep 0.1; done
		[ $l = error ] && sleep 1
		sp_stop || fail "exit status at $l"
		n=$(grep -c '^<4>' "$err"); [ $l = error ] && { assert_eq "$n" 0 "warnings at $l"; true; } || assert_ge "$n" 1 "warnings at $l"
		n=$(grep -c '^<6>' "$err"); case $l in error|warn) assert_eq "$n" 0 "info at $l" ;; *) assert_ge "$n" 1 "info at $l" ;; esac
		n=$(grep -c '^<7>' "$err"); [ $l = debug ] && assert_ge "$n" 1 "debug at $l" || assert_eq "$n" 0 "debug at $l"
	done
	# The environment sets the default level too.
	: >"$err"
	STACKPILOT_LOG_LEVEL=debug STACKPILOT_LOG_PRIORITIES=1 sp_start --modules fragguard --iface rp1
	sp_stop || fail "exit status"
	grep -q '^<7>stackpilot: debug: signal' "$err" || fail "STACKPILOT_LOG_LEVEL=debug: $(cat "$err")"
}

# Under journald no status every 2 s, unless --interval asks for it;
# elsewhere the default dump is there.
t_journal_no_status_dump() {
	make_cgroup
	start_raw env "$(journal_env "$TMP/sp.err")" "$SP" run --pin-path "$PIN" --modules tcpstats --cgroup "$CG"
	sleep 2.5
	sp_stop || fail "exit status"
	assert_eq "$(grep -c tcpstats "$TMP/sp.out")" 1 "status dumps under the journal (only the attached line expected)"
	start_raw env "$(journal_env "$TMP/sp.err")" "$SP" run --pin-path "$PIN" --modules tcpstats --cgroup "$CG" --interval 1
	sleep 2.5
	sp_stop || fail "exit status"
	assert_ge "$(grep -c tcpstats "$TMP/sp.out")" 2 "status dumps with --interval 1 under the journal"
	start_raw "$SP" run --pin-path "$PIN" --modules tcpstats --cgroup "$CG"
	sleep 2.5
	sp_stop || fail "exit status"
	assert_ge "$(grep -c tcpstats "$TMP/sp.out")" 2 "status dumps by default outside the journal"
}

# Install into a DESTDIR: exactly these files, the unit's ExecStart at the
# PREFIX, the binary the build's.
t_install_tree() {
	local d=$TMP/root
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install"
	(cd "$d" && find . -type f -printf '%m %p\n' | sort) >"$TMP/tree"
	cat >"$TMP/want" <<-'END'
	644 ./etc/iproute2/rt_protos.d/stackpilot.conf
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
	grep -qx 'ExecStart=/usr/local/sbin/stackpilot run --cgroup /' "$d/usr/local/lib/systemd/system/stackpilot.service" ||
		fail "ExecStart: $(grep ExecStart= "$d/usr/local/lib/systemd/system/stackpilot.service")"
	# The number pmtu marks its routes with is the one named.
	local n=$(printf '%d' "$(sed -n 's/^#define RTPROT_STACKPILOT[[:space:]]*\(0x[0-9a-f]*\).*/\1/p' "$ROOT/src/pmtu.h")")
	assert_eq "$(grep -v '^#' "$d/etc/iproute2/rt_protos.d/stackpilot.conf" | tr -s '\t ' ' ')" "$n stackpilot" "rt_protos.d entry"
	make -s -C "$ROOT" uninstall PREFIX=/usr/local DESTDIR="$d" || fail "make uninstall"
	assert_eq "$(find "$d" -type f)" "" "files left by uninstall"
}

# systemd-analyze verify finds nothing wrong with the unit, and would: a
# copy with a bad value is reported. Installed without DESTDIR under $TMP
# so ExecStart's binary and the Documentation= page exist where named.
t_unit_verifies() {
	local p=$TMP/p/usr/local out
	make -s -C "$ROOT" install PREFIX="$p" SYSCONFDIR="$TMP/p/etc" >/dev/null || fail "make install"
	out=$(MANPATH=$p/share/man systemd-analyze verify "$p/lib/systemd/system/stackpilot.service" 2>&1)
	echo "$out"
	echo "$out" | grep -i 'stackpilot' && fail "systemd-analyze verify complains about the unit"
	mkdir "$TMP/bad" && sed 's/^Restart=.*/Restart=sometimes/' "$p/lib/systemd/system/stackpilot.service" >"$TMP/bad/stackpilot.service"
	out=$(MANPATH=$p/share/man systemd-analyze verify "$TMP/bad/stackpilot.service" 2>&1)
	echo "$out" | grep -qi 'stackpilot.service.*restart' || fail "a bad unit is not reported: $out"
	return 0
}

# iproute2 names our protocol from the installed file: in a private mount
# namespace, /etc/iproute2 is a copy with it (the host's is untouched).
t_rt_protos_name() {
	local d=$TMP/root
	make -s -C "$ROOT" install PREFIX=/usr/local DESTDIR="$d" >/dev/null || fail "make install"
	mk_netns "sp-$ID-a"
	ip -n "sp-$ID-a" link add d0 type veth peer name d1 && ip -n "sp-$ID-a" link set d0 up && ip -n "sp-$ID-a" link set d1 up &&
		ip -n "sp-$ID-a" addr add 10.66.0.1/24 dev d0 || fail "veth"
	ip -n "sp-$ID-a" route add 10.66.1.0/24 via 10.66.0.2 proto 0xa5 mtu 1400 || fail "route"
	cp -a /etc/iproute2 "$TMP/iproute2" && cp "$d/etc/iproute2/rt_protos.d/stackpilot.conf" "$TMP/iproute2/rt_protos.d/" || fail "copy"
	local out=$(unshare -m sh -c 'mount --bind "$1" /etc/iproute2 && ip -n "$2" route show 10.66.1.0/24' _ "$TMP/iproute2" "sp-$ID-a")
	echo "$out"
	[[ $out == *"proto stackpilot"* ]] || fail "route not shown as proto stackpilot: $out"
}
