# SPDX-License-Identifier: GPL-2.0
# The systemd unit as systemd would run it, on a machine where systemd may
# not be PID 1 (sourced by test_service.sh and test_package.sh after
# tests/lib.sh): its ExecStart in a cgroup of the test's, with the unit's
# capability bounding set, stderr "the journal" and a notify socket the test
# listens on; its ExecReload lines as systemd runs them. The sandboxing
# options (ProtectSystem=, SystemCallFilter=, ...) need systemd itself:
# t_unit_security measures them instead.

# stderr of what follows is "the journal": JOURNAL_STREAM names its file.
journal_env() { : >"$1"; echo "JOURNAL_STREAM=$(stat -c '%d:%i' "$1")"; }

# The unit's CapabilityBoundingSet as setpriv's --bounding-set argument.
unit_caps() {
	sed -n 's/^CapabilityBoundingSet=//p' "${1:-$ROOT/dist/stackpilot.service.in}" |
		tr ' ' '\n' | sed 's/^CAP_//' | tr 'A-Z' 'a-z' | sed 's/^/+/' | paste -sd, -
}

# The service manager's end of sd_notify(3): a datagram socket at
# $TMP/notify; each message is a line of $TMP/notify.log (its assignments
# joined by '|'). At READY=1 it also writes "progs=N", the programs attached
# to cgroup $1 at that moment: readiness must mean attached.
notify_listen() {
	rm -f "$TMP/notify" "$TMP/notify.log"
	python3 - "$TMP/notify" "$TMP/notify.log" "$1" <<-'END' &
	import socket, subprocess, sys
	s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
	s.bind(sys.argv[1])
	with open(sys.argv[2], "a", buffering=1) as f:
	    while True:
	        m = s.recv(4096).decode().strip("\n")
	        line = m.replace("\n", "|") + "\n"
	        if "READY=1" in m.split("\n"):
	            out = subprocess.run(["bpftool", "cgroup", "show", sys.argv[3]],
	                                 capture_output=True, text=True).stdout
	            # One write: a reader that sees READY=1 sees its count too.
	            line += "progs=%d\n" % max(len(out.splitlines()) - 1, 0)
	        f.write(line)
	END
	BG_PIDS+=($!)
	for _ in $(seq 50); do [ -S "$TMP/notify" ] && return 0; sleep 0.1; done
	fail "the notify listener did not start"
}

# Wait up to 10 s for a line of the notify log matching the regex $1, after
# the first $2 lines (default 0); prints its line number.
notify_wait() {
	local n
	for _ in $(seq 100); do
		n=$(tail -n +$((${2:-0} + 1)) "$TMP/notify.log" 2>/dev/null | grep -n -m1 -E "$1" | cut -d: -f1)
		[ -n "$n" ] && { echo $((n + ${2:-0})); return 0; }
		sleep 0.1
	done
	fail "no '$1' from the service in 10 s; it sent: $(tr '\n' ';' <"$TMP/notify.log" 2>/dev/null)"
}

# unit_start UNIT CONF: the unit's ExecStart with its config file CONF (the
# test's: its cgroup and pins) and the test's state folder, run as systemd
# would: in cgroup $CG/svc, with the unit's bounding set, the journal and
# the notify socket. Returns once `run` says it attached; SP_PID is it.
unit_start() {
	local unit=$1 conf=$2 exec
	exec=$(sed -n 's/^ExecStart=//p' "$unit")
	[[ $exec == *" --config "* ]] || fail "ExecStart has no --config: '$exec'"
	grep -qx 'Type=notify' "$unit" || fail "the unit is not Type=notify"
	mkdir -p "$CG/svc" || fail "mkdir $CG/svc"
	on_exit rmdir "$CG/svc"
	notify_listen "$CG"
	: >"$TMP/sp.err"
	sp_spawn env NOTIFY_SOCKET="$TMP/notify" "$(journal_env "$TMP/sp.err")" \
		sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG/svc" \
		setpriv --bounding-set "-all,$(unit_caps "$unit")" --inh-caps -all -- \
		${exec%% --config *} --config "$conf" --state-dir "$TMP/state"
}

# unit_reload UNIT CONF: the unit's ExecReload lines in order, for the run
# SP_PID with config CONF; stops at the first that fails, as systemd does
# (`systemctl reload` then fails). Their output goes to $TMP/reload.out.
unit_reload() {
	local unit=$1 conf=$2 line rc
	: >"$TMP/reload.out"
	while read -r line; do
		line=${line//\$MAINPID/$SP_PID}
		line=$(echo "$line" | sed "s| [^ ]*/stackpilot/stackpilot.conf| $conf|")
		echo "ExecReload: $line" >>"$TMP/reload.out"
		setpriv --bounding-set "-all,$(unit_caps "$unit")" --inh-caps -all -- $line >>"$TMP/reload.out" 2>&1
		rc=$?
		[ $rc = 0 ] || return $rc
	done < <(sed -n 's/^ExecReload=//p' "$unit")
	return 0
}
