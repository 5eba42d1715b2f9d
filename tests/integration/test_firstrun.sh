# SPDX-License-Identifier: GPL-2.0
# The first five minutes (issue 29): what a first `run` meets when something
# is missing is one line on stderr naming what is wrong and the fix, a
# non-zero exit, and nothing left attached or pinned. Covered elsewhere:
# not root or without the BPF capabilities (test_core.sh t_not_root), no
# BTF file (t_usage_errors), a kernel without a module's feature
# (test_kernel.sh, SP_PROBE_OFF), another run on the same cgroup or
# interface (t_second_run_refused and after).

# first_fails EXIT PATTERN cmd...: exit EXIT, exactly one stderr line, which
# matches PATTERN (grep -E), and nothing of the run left: no pins, no
# programs on the test's cgroup.
first_fails() {
	local want=$1 pat=$2 rc; shift 2
	"$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
	echo "stderr: $(cat "$TMP/err")"
	[ "$rc" = "$want" ] || fail "'$*': exit $rc, expected $want; stderr: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/err")" = 1 ] || fail "'$*': expected one stderr line, got: $(cat "$TMP/err")"
	grep -qE -- "$pat" "$TMP/err" || fail "'$*': stderr '$(cat "$TMP/err")' lacks /$pat/"
	[ ! -e "$PIN" ] || fail "pin folder $PIN left behind"
	[ ! -d "$CG" ] || [ -z "$(cgroup_progs)" ] || fail "programs left on $CG: $(cgroup_progs)"
}

# A cgroup that does not exist: how to find the right one.
t_firstrun_no_cgroup() {
	first_fails 1 "^stackpilot: cgroup $CG2/sp-test-$ID-nope does not exist \(a service's: \`systemctl show -p ControlGroup UNIT\`; a process's: /proc/PID/cgroup\)\$" \
		"$SP" run --pin-path "$PIN" --interval 0 --cgroup "sp-test-$ID-nope"
}

# No cgroup v2 anywhere (a host booted with cgroup v1 only): a private mount
# namespace without the cgroup2 mounts, /sys/fs/cgroup a tmpfs that is not
# empty (an empty one, run would mount cgroup2 on, as under ip netns exec).
t_firstrun_no_cgroup2() {
	first_fails 1 '^stackpilot: no cgroup v2 filesystem is mounted \(mount -t cgroup2 none /sys/fs/cgroup/unified\)$' \
		unshare -m --propagation private sh -c '
			for m in $(awk "\$3 == \"cgroup2\" { print \$2 }" /proc/self/mounts | sort -r); do
				umount -l "$m" || exit 99
			done
			mount -t tmpfs sp-test /sys/fs/cgroup && touch /sys/fs/cgroup/not-empty || exit 99
			exec "$0" run --pin-path "$1" --interval 0 --modules tcpstats --cgroup "$2"' \
		"$SP" "$PIN" "sp-test-$ID"
}

# --pin-path on a folder that is not a bpf filesystem: mount one, or use /sys/fs/bpf.
t_firstrun_no_bpffs() {
	make_cgroup
	first_fails 1 "^stackpilot: pin path $TMP/pins: $TMP is not a bpf filesystem: mount one there \(mount -t bpf bpf $TMP\), or use a folder below /sys/fs/bpf\$" \
		"$SP" run --pin-path "$TMP/pins" --interval 0 --cgroup "$CG"
	[ ! -e "$TMP/pins" ] || fail "pin folder $TMP/pins made"
}

# --btf of an empty file (a failed download, a wrong path to a copy).
t_firstrun_btf_empty() {
	make_cgroup
	: >"$TMP/vmlinux"
	first_fails 1 "^stackpilot: --btf $TMP/vmlinux: not a BTF file \(raw BTF or an ELF file with a .BTF section\)\$" \
		"$SP" run --pin-path "$PIN" --interval 0 --cgroup "$CG" --btf "$TMP/vmlinux"
}

# Another run on the cgroup: which one (its pid), and what to do.
t_firstrun_another_run() {
	make_cgroup
	sp_start --cgroup "$CG" --modules tcpstats
	local progs=$(cgroup_progs)
	"$SP" run --pin-path "$PIN-2" --interval 0 --cgroup "$CG" --modules tcpstats >"$TMP/out" 2>"$TMP/err"
	assert_eq "$?" 1 "exit of a second run on $CG"
	assert_eq "$(wc -l <"$TMP/err")" 1 "stderr lines of the second run"
	grep -qE "^stackpilot: another \`stackpilot run\` \(pid $SP_PID\) is attached to cgroup $CG \(lock /run/stackpilot/[^ ]+\): stop it first, or pick another target\$" "$TMP/err" ||
		fail "the second run's stderr: $(cat "$TMP/err")"
	[ ! -e "$PIN-2" ] || fail "the second run left $PIN-2"
	assert_eq "$(cgroup_progs)" "$progs" "programs on $CG after the second run"
}

# The metrics port taken by another program: the run says so, and detaches.
t_firstrun_metrics_port_in_use() {
	make_cgroup
	python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$TMP/port" &
	BG_PIDS+=($!)
	for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
	local port=$(num "$(cat "$TMP/port")" "the port taken")
	first_fails 1 "^stackpilot: --metrics-listen 127.0.0.1:$port: the port is in use \(\`ss -ltnp\` names who listens there\): pick another PORT\$" \
		"$SP" run --pin-path "$PIN" --interval 0 --cgroup "$CG" --modules tcpstats --metrics-listen "127.0.0.1:$port"
}
