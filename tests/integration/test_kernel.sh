# SPDX-License-Identifier: GPL-2.0
# Kernels: what `stackpilot probe` says against what `run` does, refusals,
# the fallbacks (forced here with SP_PROBE_OFF on a kernel that has the real
# thing), and the fentry paths (where the kernel allows fentry: the VM
# matrix, tests/vm/). Each t_* runs in its own bash with tests/lib.sh sourced.
source "$ROOT/tests/lib_pmtu.sh"
source "$ROOT/tests/lib_frag.sh"
source "$ROOT/tests/integration/test_pmtu.sh"
source "$ROOT/tests/integration/test_fragguard.sh"

# probe_json JQ: a field of `stackpilot probe --json` (SP_PROBE_OFF applies).
probe_json() { "$SP" probe --json | jq -r "$1"; }

# What probe says runs, runs: each module alone attaches and leaves nothing;
# what it says is refused is refused with its one line, before anything is
# attached. With every module refused that can be (SP_PROBE_OFF), natively too.
probe_agrees_with_run() {
	local m rc ok why args
	make_cgroup; netns_pair
	"$SP" probe >"$TMP/probe.txt"; rc=$?
	cat "$TMP/probe.txt"
	for m in tcpstats rehash pmtu fragguard; do
		ok=$(probe_json ".modules.$m.runs")
		if [ $m = fragguard ]; then args=(--iface "v$ID"a); SP_NS=$NS_A; else args=(--cgroup "$CG"); SP_NS=; fi
		if [ "$ok" = true ]; then
			sp_start --modules $m "${args[@]}"
			grep -q "^stackpilot: attached $m" "$TMP/sp.out" || fail "$m: $(cat "$TMP/sp.out")"
			sp_stop || fail "$m: stackpilot run exited $?; its stderr ends: $(sp_said)"
			[ -z "$(cgroup_progs)" ] && [ ! -e "$PIN" ] || fail "$m: left attached or pinned"
		else
			[ "$ok" = false ] || fail "$m: probe --json runs is '$ok'"
			why=$(probe_json ".modules.$m.missing.message")
			echo "$why" | has -E "^$m: needs .* \(Linux [0-9]+\.[0-9]+\), which this kernel lacks$" ||
				fail "$m: refusal '$why'"
			${SP_NS:+ip netns exec "$SP_NS"} "$SP" run --pin-path "$PIN" --interval 0 --modules $m "${args[@]}" \
				>"$TMP/o" 2>"$TMP/e"
			assert_eq "$?" 1 "$m refused: exit status"
			assert_eq "$(cat "$TMP/e")" "stackpilot: $why" "$m refused: stderr"
			grep -q attached "$TMP/o" && fail "$m refused but attached"
			[ -z "$(cgroup_progs)" ] && [ ! -e "$PIN" ] || fail "$m refused: something attached or pinned"
		fi
	done
	# Exit status 0 exactly when every module runs.
	if [ "$(probe_json '[.modules[].runs] | all')" = true ]; then
		assert_eq "$rc" 0 "probe exit status"
	else
		assert_eq "$rc" 1 "probe exit status"
	fi
}

t_kernel_probe_agrees_with_run() {
	probe_agrees_with_run
}

# The same with fragguard and pmtu refused (their newest needs taken away).
t_kernel_refused_by_name() {
	export SP_PROBE_OFF=bpf_loop,ringbuf
	assert_eq "$(probe_json .modules.fragguard.missing.feature)" bpf_loop "fragguard's missing feature"
	assert_eq "$(probe_json .modules.pmtu.missing.since)" 5.8 "ring buffer's first kernel"
	probe_agrees_with_run
	"$SP" probe pmtu >/dev/null; assert_eq "$?" 1 "probe pmtu exit status"
	"$SP" probe tcpstats rehash >/dev/null; assert_eq "$?" 0 "probe tcpstats rehash exit status"
	"$SP" probe nope >/dev/null 2>&1; assert_eq "$?" 2 "probe of an unknown module"
	SP_PROBE_OFF=nope "$SP" probe >/dev/null 2>"$TMP/e"; assert_eq "$?" 1 "SP_PROBE_OFF=nope"
	grep -q "SP_PROBE_OFF: unknown feature 'nope'" "$TMP/e" || fail "SP_PROBE_OFF=nope: $(cat "$TMP/e")"
}

# Without --modules (all), a module this kernel cannot run is left out with
# one warning and the others run; a config section's "all" likewise, while
# a section that names it is refused with its file and line.
t_kernel_all_carries_on() {
	export SP_PROBE_OFF=ringbuf
	make_cgroup
	sp_start --cgroup "$CG"
	grep -q "^stackpilot: attached tcpstats rehash to cgroup" "$TMP/sp.out" || fail "attached: $(cat "$TMP/sp.out")"
	grep -q "warning: pmtu: needs the BPF ring buffer (Linux 5.8), which this kernel lacks: not started" \
		"$TMP/sp.err" || fail "no warning: $(cat "$TMP/sp.err")"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	printf '[cgroup %s]\nmodules = tcpstats, pmtu\n' "sp-test-$ID" >"$TMP/named.conf"
	"$SP" check-config "$TMP/named.conf" >"$TMP/o" 2>"$TMP/e"
	assert_eq "$?" 1 "check-config of a section naming pmtu"
	assert_eq "$(cat "$TMP/e")" \
		"stackpilot: $TMP/named.conf:2: pmtu: needs the BPF ring buffer (Linux 5.8), which this kernel lacks" \
		"check-config's line"
	printf '[cgroup %s]\n' "sp-test-$ID" >"$TMP/all.conf"
	"$SP" check-config "$TMP/all.conf" >"$TMP/o" 2>"$TMP/e" || fail "check-config of 'all': $(cat "$TMP/e")"
	grep -q "pmtu: needs the BPF ring buffer" "$TMP/e" || fail "no warning for 'all': $(cat "$TMP/e")"
}

# The README's Kernels table has a row for this kernel (by major.minor), and
# it says what probe says: "yes", "yes: MECHANISM, ..." in probe's order, or
# "no: needs FEATURE (VERSION)".
t_kernel_readme_table() {
	local v row m col=2 cell want
	v=$(uname -r | grep -Eo '^[0-9]+\.[0-9]+')
	row=$(grep -E "^\| $v( |\|)" "$ROOT/README.md") ||
		skip "the README has no Kernels row for $v: only the matrix's kernels and CI's have one"
	echo "README: $row"
	for m in tcpstats rehash pmtu fragguard; do
		col=$((col + 1))
		cell=$(echo "$row" | awk -F'|' -v c=$col '{ gsub(/^ +| +$/, "", $c); print $c }')
		if [ "$(probe_json ".modules.$m.runs")" = true ]; then
			want=$(probe_json "[.modules.$m.mechanisms[].uses] | if length > 0 then \"yes: \" + join(\", \") else \"yes\" end")
		else
			want="no: needs $(probe_json ".modules.$m.missing.feature") ($(probe_json ".modules.$m.missing.since"))"
		fi
		assert_eq "$cell" "$want" "README's $m cell for $v"
	done
}

# ---- fallbacks, natively ---------------------------------------------------

# Namespaces named by inode number (kernels before 5.15): learned and
# clamped as with cookies, and another namespace's run still keeps out.
t_kernel_pmtu_netns_inode() {
	export SP_PROBE_OFF=netns_cookie
	t_pmtu_second_connection_learned
}

t_kernel_pmtu_netns_inode_other_netns() {
	export SP_PROBE_OFF=netns_cookie
	t_pmtu_other_netns
}

# rehash's build without BPF atomics (kernels before 5.12) moves flows too;
# it is the other build that is loaded (another program tag). sp_rehash is
# in the run's chain, behind sp_sockops (chain_progs).
rehash_tag() {
	local id
	for id in $(chain_progs); do bpftool prog show id "$id" -j | jq -r 'select(.name == "sp_rehash") | .tag'; done
}
t_kernel_rehash_noatomics() {
	local tag
	make_cgroup
	sp_start --cgroup "$CG" --modules rehash
	tag=$(rehash_tag)
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	rmdir "$CG"
	export SP_PROBE_OFF=atomics
	source "$ROOT/tests/integration/test_rehash.sh"
	t_rehash_moves_flow
	[ -n "$tag" ] && [ "$(rehash_tag)" != "$tag" ] || fail "the same program ($tag) with and without atomics"
}

# Without bpf_cast_to_kern_ctx (before 6.2) fragguard reads a fragment's
# truesize with a probe read: what it charges still matches the kernel.
t_kernel_fragguard_probe_read() {
	export SP_PROBE_OFF=kern_ctx
	assert_eq "$(probe_json .features.kern_ctx)" false "kern_ctx with SP_PROBE_OFF=kern_ctx"
	t_fragguard_estimate_calibrated
}

# clsact instead of tcx, the sweep instead of the kernel's expiry drops.
t_kernel_fragguard_clsact_sweep() {
	export SP_PROBE_OFF=tcx,frag_drop_reasons,fentry
	t_fragguard_victim_survives_hog
	[ -z "$(ip netns exec "$NS_R" tc filter show dev rp1 ingress)" ] || fail "clsact filter left after exit"
}

# A run killed with SIGKILL leaves its clsact filter (no tcx): from 2 s after
# its last heartbeat it passes everything, also when killed before its
# first tick (the heartbeat is written before the filter is attached).
t_kernel_fragguard_clsact_sigkill() {
	export SP_PROBE_OFF=tcx
	source "$ROOT/tests/integration/test_lifecycle.sh"
	t_lifecycle_fragguard_sigkill_leaves_nothing
}

# ---- fentry (the kernel's own discoveries) ---------------------------------

# An ICMP "fragmentation needed" the kernel took: the next connection to
# that destination starts at its MTU, with no ICMP of its own, even after
# the kernel's route exception is gone and stackpilot never probed.
pmtu_icmp_learned() {
	local fam=$1 dst=$2 key=$3 out icmp0 icmp1 mtu
	need_feature fentry_sk_storage
	pmtu_topo 1400; make_cgroup
	ip netns exec "$NS_RT" nft delete table inet bh || fail "let R's ICMP out: exit $?"
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	sp_ctl set pmtu.search_new=0 >/dev/null || fail "set pmtu.search_new=0: exit $?"
	out=$(xfer "$dst" 300000) || true
	[ -n "$out" ] || fail "first transfer did not complete"
	assert_eq "$(pm_entry "$key" method)" icmp "method of $key: $(sp_json '.modules.pmtu | tostring')"
	assert_eq "$(pm_entry "$key" low_mtu)" 1400 "MTU learned from the ICMP"
	assert_eq "$(pm_entry "$key" probes)" 0 "probes sent"
	assert_ge "$(sp_json .modules.pmtu.learned_from_kernel)" 1 "learned_from_kernel"
	ip -n "$NS_S" -"$fam" route flush cache
	icmp0=$(router_icmp "$fam")
	set -- $(xfer "$dst" 300000)
	icmp1=$(router_icmp "$fam")
	echo "second connection: $*; router's ICMP: $icmp0 -> $icmp1"
	[ "$fam" = 4 ] && mtu=$((1400 - 52)) || mtu=$((1400 - 72))
	assert_eq "$2" "$mtu" "second connection's MSS"
	assert_eq "$icmp1" "$icmp0" "ICMP the router sent for the second connection"
	assert_ge "$(pm_entry "$key" clamped)" 1 "connections clamped"
}
# ICMP errors R sent (fragmentation needed / packet too big).
router_icmp() {
	if [ "$1" = 4 ]; then
		ip netns exec "$NS_RT" awk '/^Icmp:/ { if (h) print $4; h = 1 }' /proc/net/snmp
	else
		ip netns exec "$NS_RT" awk '$1 == "Icmp6OutPktTooBigs" { print $2 }' /proc/net/snmp6
	fi
}

t_kernel_pmtu_learns_icmp4() { pmtu_icmp_learned 4 10.30.2.2 10.30.2.2; }
t_kernel_pmtu_learns_icmp6() { pmtu_icmp_learned 6 fd30:2::2 fd30:2::; }

# The kernel's own MTU probing (tcp_mtu_probing=2, from tcp_base_mss up)
# across the black hole: each size it proves is learned, and the next
# connection starts at it, with stackpilot's own search off.
t_kernel_pmtu_learns_kernel_probing() {
	need_feature fentry_sk_storage
	pmtu_topo 1400; make_cgroup
	# S's own namespace: set back to 0 below, so that the second connection
	# starts where its clamp says, not at tcp_base_mss as mode 2 does.
	ip netns exec "$NS_S" sysctl -qw net.ipv4.tcp_mtu_probing=2
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	# Neither stackpilot's search nor a connection's own proof (learn_kb).
	sp_ctl set pmtu.search_new=0 pmtu.learn_kb=1048576 >/dev/null || fail "set pmtu.search_new=0 pmtu.learn_kb=1048576: exit $?"
	set -- $(xfer 10.30.2.2 4000000)
	[ -n "${1:-}" ] || fail "transfer did not complete"
	echo "transfer: $*; entry $(sp_json '.modules.pmtu.destinations[0] | tostring')"
	echo "kernel: $(ip netns exec "$NS_S" awk '/^TcpExt:/ { if (!h) { split($0, n); h = 1 } else for (i = 2; i <= NF; i++) if (n[i] ~ /MTUP/) printf "%s=%s ", n[i], $i }' /proc/net/netstat)"
	local low=$(pm_entry 10.30.2.2 low_mtu)
	assert_eq "$(pm_entry 10.30.2.2 method)" kernel "method"
	# Above what tcp_base_mss (1024) starts at, never above the path.
	[ "$low" -gt 1100 ] && [ "$low" -le 1400 ] || fail "learned MTU $low, expected 1100 < MTU <= 1400 (the path's)"
	assert_eq "$(pm_entry 10.30.2.2 probes)" 0 "stackpilot's probes"
	ip netns exec "$NS_S" sysctl -qw net.ipv4.tcp_mtu_probing=0
	set -- $(xfer 10.30.2.2 100000)
	assert_eq "$2" $((low - 52)) "second connection's MSS"
}

# fentry on the kernel's reassembly timers (6.1: no reassembly drop reasons):
# the differential test against the kernel, whose queues expire in 1 s here.
t_kernel_fragguard_fentry_expiry() {
	need_feature fentry
	[ "$(probe_json .modules.fragguard.runs)" = true ] || skip "$(probe_json .modules.fragguard.missing.message)"
	[ "$(probe_json .features.frag_drop_reasons)" = false ] ||
		export SP_PROBE_OFF=frag_drop_reasons
	assert_eq "$(probe_json '.modules.fragguard.mechanisms["kernel drops"].uses')" \
		"fentry expiry" "kernel drops mechanism"
	FRAGDIFF_COUNT=${FRAGDIFF_COUNT:-20000} t_fragguard_differential
	assert_ge "$(sp_json .modules.fragguard.kernel_drop_timeout)" 1 "expiries seen by fentry"
}
