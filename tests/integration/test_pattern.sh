# SPDX-License-Identifier: GPL-2.0
# [cgroup PATTERN] sections (issue 27): an instance per cgroup a pattern
# matches, attached as the cgroup appears and dropped as it goes; matches
# that would nest in another section's cgroup refused; podman containers.

# Children PATH ... of the test's cgroup (any depth), removed with it on exit.
pat_tree() {
	local c
	[ -d "$CG" ] || make_cgroup
	for c in "$@"; do mkdir -p "$CG/$c" || fail "mkdir $CG/$c"; done
	on_exit 'find "$CG" -mindepth 1 -depth -type d -exec rmdir {} \;'
}

# A config at $TMP/sp.conf: pins in $PIN, then "$@" as its lines.
pat_conf() { { echo "pin-path = $PIN"; printf '%s\n' "$@"; } >"$TMP/sp.conf"; }
pat_start() { : >"$TMP/sp.err"; sp_spawn "$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state" "$@"; }

# The pin folder of child cgroup C of the test's cgroup.
pat_pins() { echo "$PIN/sp-test-$ID:$(echo "$1" | sed 's|/|:|g; s|\.|+|g')"; }
attached() { [ -e "$(pat_pins "$1")/meta" ] && [ -n "$(cgroup_progs "$CG/$1")" ]; }
detached() { [ ! -e "$(pat_pins "$1")" ]; }
pat_wait() { for _ in $(seq 30); do "$@" && return 0; sleep 0.1; done; return 1; }

# '*' within a level, '**' across levels: what matches is attached as it is
# made, and dropped (pins and programs gone) as it is removed; what does not
# match is left alone.
t_pattern_attach_drop() {
	local p
	pat_tree a/x
	pat_conf "[cgroup sp-test-$ID/*/c-*]" "modules = tcpstats" \
		"[cgroup sp-test-$ID/deep/**/leaf]" "modules = tcpstats"
	pat_start
	grep -q "2 patterns matching 0" "$TMP/sp.out" || fail "attached line: $(cat "$TMP/sp.out")"
	mkdir -p "$CG/a/c-1" "$CG/b/c-2" "$CG/a/x/c-3" "$CG/c-4" "$CG/deep/leaf" "$CG/deep/1/2/leaf" "$CG/deep/1/other"
	pat_wait attached a/c-1 || fail "a/c-1 not attached: $(sp_said)"
	pat_wait attached b/c-2 || fail "b/c-2 (its parent made with it) not attached: $(sp_said)"
	pat_wait attached deep/leaf || fail "deep/leaf ('**' as zero levels) not attached: $(sp_said)"
	pat_wait attached deep/1/2/leaf || fail "deep/1/2/leaf ('**' as two levels) not attached: $(sp_said)"
	sleep 0.5
	for p in a/x/c-3 c-4 deep/1/other a b deep; do
		[ -z "$(cgroup_progs "$CG/$p")" ] || fail "$p matches no pattern but has programs"
	done
	grep -q "cgroup sp-test-$ID/a/c-1 (matches \[cgroup sp-test-$ID/\*/c-\*\]): attached tcpstats" "$TMP/sp.err" ||
		fail "no attached line naming the pattern: $(sp_said)"
	p=$(cgroup_progs "$CG/a/c-1")
	rmdir "$CG/a/c-1" || fail "rmdir a/c-1"
	pat_wait detached a/c-1 || fail "pins of the removed a/c-1 left"
	grep -q "cgroup sp-test-$ID/a/c-1 (matches .*) is gone: dropped" "$TMP/sp.err" || fail "no dropped line: $(sp_said)"
	[ -z "$(progs_loaded $p)" ] || fail "programs of a/c-1 still loaded: $(progs_loaded $p)"
	attached b/c-2 || fail "b/c-2 lost its programs"
	# Back: a new instance, as a new container would be.
	mkdir "$CG/a/c-1" && pat_wait attached a/c-1 || fail "a/c-1 not attached when made again"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
	[ -z "$(ls "$PIN" 2>/dev/null)" ] || fail "pins left after the run: $(ls "$PIN")"
}

# A match inside (or holding) another section's cgroup with a module of
# both is refused with a line naming both; one with other modules is not;
# and the refused one is attached once the other goes.
t_pattern_nesting_refused() {
	pat_tree outer
	pat_conf "[cgroup sp-test-$ID/outer]" "modules = tcpstats" \
		"[cgroup sp-test-$ID/**/c-*]" "modules = tcpstats"
	pat_start
	mkdir "$CG/outer/c-1" "$CG/c-2"
	pat_wait attached c-2 || fail "c-2 not attached: $(sp_said)"
	pat_wait grep -q "sp-test-$ID/outer/c-1 (matches .*): not attached: is inside \[cgroup sp-test-$ID/outer\] at line 2, and both run tcpstats" "$TMP/sp.err" ||
		fail "no refusal line for outer/c-1: $(sp_said)"
	[ -z "$(cgroup_progs "$CG/outer/c-1")" ] || fail "outer/c-1 attached inside outer"
	attached outer || fail "outer lost its programs"
	[ "$(grep -c "outer/c-1 (matches" "$TMP/sp.err")" = 1 ] || fail "refusal said more than once: $(grep "outer/c-1" "$TMP/sp.err")"
	# Inside another match.
	rmdir "$CG/outer/c-1" && mkdir "$CG/c-3" "$CG/c-3/c-4"
	pat_wait grep -q "sp-test-$ID/c-3/c-4 (matches .*): not attached: is inside cgroup sp-test-$ID/c-3 (matches" "$TMP/sp.err" ||
		fail "no refusal line for a match inside a match: $(sp_said)"
	rmdir "$CG/c-3/c-4" "$CG/c-3"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
	# A match that holds a section's cgroup: attached once that one goes
	# (seen by the walk every 5 s: the folder below is not one it watches).
	pat_tree o-1/inner
	pat_conf "[cgroup sp-test-$ID/o-1/inner]" "modules = tcpstats" "[cgroup sp-test-$ID/o-*]" "modules = tcpstats"
	pat_start
	grep -q "sp-test-$ID/o-1 (matches .*): not attached: holds \[cgroup sp-test-$ID/o-1/inner\] at line 2" "$TMP/sp.err" ||
		fail "no refusal line for o-1: $(sp_said)"
	rmdir "$CG/o-1/inner"
	for _ in $(seq 80); do attached o-1 && break; sleep 0.1; done
	attached o-1 || fail "o-1 not attached once what it held went: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
	# A pattern that matches below another pattern's match.
	pat_conf "[cgroup sp-test-$ID/p-*]" "modules = tcpstats" "[cgroup sp-test-$ID/p-*/q-*]" "modules = tcpstats"
	mkdir "$CG/p-1"
	pat_start
	mkdir "$CG/p-1/q-1"
	pat_wait grep -q "sp-test-$ID/p-1/q-1 (matches .*): not attached: is inside cgroup sp-test-$ID/p-1 (matches \[cgroup sp-test-$ID/p-\*\] at line 2)" "$TMP/sp.err" ||
		fail "no refusal line for p-1/q-1: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
}

# What a pattern may be: '**' a whole level, not every cgroup; check-config
# says a pattern's pins are per match.
t_pattern_config_checked() {
	local out
	pat_conf "[cgroup a/b**/c]" "modules = tcpstats"
	out=$("$SP" check-config "$TMP/sp.conf" 2>&1) && fail "a**: check-config passed"
	echo "$out" | has "sp.conf:2: cgroup a/b\*\*/c: '\*\*' must be a whole level" || fail "a**: $out"
	pat_conf "[cgroup **]" "modules = tcpstats"
	out=$("$SP" check-config "$TMP/sp.conf" 2>&1) && fail "**: check-config passed"
	echo "$out" | has "matches every cgroup" || fail "**: $out"
	pat_conf "[cgroup machine.slice/libpod-*.scope]" "modules = tcpstats"
	out=$("$SP" check-config "$TMP/sp.conf" 2>&1) || fail "a good pattern: $out"
	echo "$out" | has "cgroup machine.slice/libpod-\*.scope: a pattern; each cgroup it matches has its pins in $PIN/NAME" || fail "check-config: $out"
}

# The limit: with few descriptors to open, matches are attached until the
# next would not fit, one line says which limit and why, and once some go
# the others are attached.
t_pattern_limit() {
	local n
	pat_tree
	pat_conf "[cgroup sp-test-$ID/c-*]" "modules = tcpstats"
	# 256 kept free for the rest of the run, then about 10 a tcpstats match.
	: >"$TMP/sp.err"
	sp_spawn bash -c 'ulimit -n 400 && exec "$@"' _ "$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state"
	for n in $(seq 30); do mkdir "$CG/c-$n"; done
	pat_wait grep -q "limit reached: [0-9]* instances of patterns hold [0-9]* of the 400 file descriptors this process may open" "$TMP/sp.err" ||
		fail "no limit line: $(sp_said)"
	sleep 0.5
	n=$(ls -d "$PIN"/sp-test-$ID:c-* | wc -l)
	assert_ge "$n" 5 "matches attached under the limit"
	assert_le "$n" 15 "matches attached under the limit"
	[ "$(grep -c "limit reached" "$TMP/sp.err")" = 1 ] || fail "the limit said more than once: $(grep "limit reached" "$TMP/sp.err")"
	# The attached ones go: the others fit now.
	for d in "$PIN"/sp-test-$ID:c-*; do rmdir "$CG/${d##*:}"; done
	pat_wait grep -q "patterns: below the limit again" "$TMP/sp.err" || fail "no line when below the limit: $(sp_said)"
	pat_wait eval '[ "$(ls -d "$PIN"/sp-test-$ID:c-* 2>/dev/null | wc -l)" -ge 5 ]' || fail "fewer than 5 of the others attached: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
}

# podman as it runs here (crun refuses the hybrid cgroup layout).
PODMAN_RUN=(podman run -d --rm --network none --runtime runc --cgroup-manager cgroupfs
	--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

# An image of busybox alone, built from scratch (nothing can be pulled), as
# $IMG; removed on exit with every container of the test and their cgroups.
podman_image() {
	local w m
	need_tool podman podman; need_tool buildah buildah; need_tool runc runc
	# The image has nothing else: a busybox that needs no dynamic loader.
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
		skip "missing a static /bin/busybox (Debian package busybox-static, which scripts/install-deps.sh installs)"
	IMG=localhost/sp-test-$ID:latest
	PODP=sp-test-$ID-pod
	on_exit 'for d in /sys/fs/cgroup/*/"$PODP"; do find "$d" -depth -type d -exec rmdir {} \;; done'
	on_exit 'podman rmi -f "$IMG"'
	on_exit 'podman ps -aq --filter label=sp-test="$ID" | xargs -r podman rm -f -t 0'
	w=$(buildah from scratch) || fail "buildah from scratch"
	on_exit "buildah rm $w"
	m=$(buildah mount "$w") || fail "buildah mount"
	mkdir -p "$m/bin" && cp /bin/busybox "$m/bin/" && ln -s busybox "$m/bin/sleep" || fail "image files"
	buildah umount "$w" >/dev/null && buildah commit -q "$w" "$IMG" >/dev/null || fail "buildah commit"
}

# Programs and maps of stackpilot's (by name: bpftool here cannot say whose),
# the daemon's pins, lock files, RSS (kB) and descriptors. Not the start's
# probes (sp_probe): closed before the daemon is ready, the kernel frees
# them a moment later, so one was counted "before" once (the harness's
# end-of-run check still sees any left).
leak_probe() {
	local q='[.[] | select(.name // "" | test("^(sp_|tcpstats|rehash|pmtu|fragguard)")) |
		select(.name | startswith("sp_probe") | not)] | length'
	echo "progs=$(bpftool prog show --json | jq "$q") maps=$(bpftool map show --json | jq "$q")" \
	     "pins=$(find "$PIN" -mindepth 1 | wc -l) locks=$(ls /run/stackpilot 2>/dev/null | wc -l)" \
	     "rss=$(awk '/^VmRSS/ { print $2 }' /proc/$SP_PID/status) fds=$(ls /proc/$SP_PID/fd | wc -l)"
}
probe_val() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# 100 podman containers started and stopped in a loop, under a pattern on
# their cgroups (libpod-<id> below their parent): each attached within 1 s
# of `podman run -d` returning (min/median/p95/max printed), each dropped
# once it stopped, and nothing left: programs, maps, pins, locks as before;
# the daemon's RSS and descriptors flat between the 10th and the 100th.
t_pattern_podman() {
	local n=${SP_PODMAN_N:-100} i id t0 t1 ta lat=() before after at10 s
	podman_image
	# tcpstats: a load of all cgroup modules takes 0.5 s a match on this
	# machine (verifier and vmlinux BTF, docs/configuration.md), more than
	# 2 CPUs shared with podman keep up with at one container a second.
	pat_conf "[cgroup $PODP/libpod-*]" "modules = ${SP_PODMAN_MODULES:-tcpstats}"
	# Under `make check` the loader is built with ASan, whose quarantine holds
	# freed memory back (256 MiB by default): RSS would measure the quarantine.
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0
	# The daemon's log lines with the time each was written (bash's clock, as t0/t1).
	: >"$TMP/sp.err"
	sp_spawn bash -c 'exec "$@" 2> >(while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done >>"$0")' \
		"$TMP/sp.err" "$SP" run --config "$TMP/sp.conf" --interval 0 --state-dir "$TMP/state"
	before=$(leak_probe)
	for i in $(seq "$n"); do
		t0=$EPOCHREALTIME
		id=$("${PODMAN_RUN[@]}" --cgroup-parent "/$PODP" --label sp-test="$ID" "$IMG" sleep 2) ||
			fail "podman run $i: exit $?"
		t1=$EPOCHREALTIME
		echo "$id $t0 $t1" >>"$TMP/runs"
		[ "$i" = 10 ] && at10=$(leak_probe)
		# The attach and drop lines are what this test reads, and each of
		# the loader's log call sites passes 5 lines a second (burst 5,
		# SP_LOG_BURST): where podman starts a container in 0.13 s, 7 a
		# second had some lines suppressed. At most 3 a second here.
		sleep 0.33
	done
	for _ in $(seq 100); do
		[ -z "$(podman ps -q --filter label=sp-test="$ID")" ] && [ -z "$(ls "$PIN")" ] && break
		sleep 0.1
	done
	[ -z "$(podman ps -q --filter label=sp-test="$ID")" ] || fail "containers still running"
	sleep 1
	after=$(leak_probe)
	while read -r id t0 t1; do
		ta=$(awk -v p="$PODP/libpod-$id " 'index($0, p) && / attached / { print $1; exit }' "$TMP/sp.err")
		[ -n "$ta" ] || fail "container $id (run at $t0) never attached: $(grep -F "libpod-$id" "$TMP/sp.err")"
		grep -q "$PODP/libpod-$id (matches .*) is gone: dropped" "$TMP/sp.err" || fail "container $id never dropped"
		lat+=("$(echo "$ta - $t1" | bc)")
	done <"$TMP/runs"
	s=$(printf '%s\n' "${lat[@]}" | sort -g | awk '{ v[NR] = $1 } END {
		printf "min %.3f median %.3f p95 %.3f max %.3f", v[1], v[int((NR + 1) / 2)], v[int(NR * 0.95 + 0.5)], v[NR] }')
	echo "attach after podman run -d returned (s, $n containers): $s"
	echo "run -d took (s): $(awk '{ printf "%.3f\n", $3 - $2 }' "$TMP/runs" | sort -g | awk '{ v[NR] = $1 } END { printf "median %.3f max %.3f", v[int((NR + 1) / 2)], v[NR] }')"
	echo "before: $before"; echo "at 10:  $at10"; echo "after:  $after"
	awk -v m="$(echo "$s" | awk '{ print $8 }')" 'BEGIN { exit !(m <= 1.0) }' || fail "attached later than 1.0 s: $s"
	[ "$(probe_val "$at10" progs)" -gt 0 ] || fail "programs counted while containers ran: not > 0: $at10"
	for k in progs maps pins locks; do
		assert_eq "$(probe_val "$after" $k)" "$(probe_val "$before" $k)" "$k after $n containers"
	done
	assert_le "$(probe_val "$after" fds)" "$(probe_val "$before" fds)" "daemon descriptors after $n containers"
	assert_le "$(probe_val "$after" rss)" "$(( $(probe_val "$at10" rss) + 4096 ))" "daemon RSS (kB) after $n containers, vs the 10th"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
}

# SIGHUP: a pattern's matches keep their programs when its modules stay
# (a tunable written in place), are attached anew when they change, are
# detached when the pattern leaves the file; a new pattern attaches.
t_pattern_reload() {
	local p1 n
	pat_tree c-1 d-1
	pat_conf "[cgroup sp-test-$ID/c-*]" "modules = tcpstats, rehash" "rehash.prob = 10"
	pat_start
	pat_wait attached c-1 || fail "c-1 not attached: $(sp_said)"
	p1=$(cgroup_progs "$CG/c-1" | sort | paste -sd,)
	pat_conf "[cgroup sp-test-$ID/c-*]" "modules = tcpstats, rehash" "rehash.prob = 20" \
		"[cgroup sp-test-$ID/d-*]" "modules = tcpstats"
	n=$(grep -c reloaded "$TMP/sp.err")
	kill -HUP "$SP_PID"
	pat_wait eval '[ "$(grep -c reloaded "$TMP/sp.err")" -gt '"$n"' ]' || fail "no reload line: $(sp_said)"
	assert_eq "$(cgroup_progs "$CG/c-1" | sort | paste -sd,)" "$p1" "c-1's programs after a tunable changed"
	grep -q "cgroup sp-test-$ID/c-1: rehash.prob 10 -> 20" "$TMP/sp.err" || fail "no tunable line: $(sp_said)"
	assert_eq "$("$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID/c-1" rehash.prob | cut -d= -f2)" 20 "c-1's rehash.prob"
	pat_wait attached d-1 || fail "d-1 of the added pattern not attached: $(sp_said)"
	pat_conf "[cgroup sp-test-$ID/c-*]" "modules = tcpstats"
	n=$(grep -c reloaded "$TMP/sp.err")
	kill -HUP "$SP_PID"
	pat_wait eval '[ "$(grep -c reloaded "$TMP/sp.err")" -gt '"$n"' ]' || fail "no reload line: $(sp_said)"
	pat_wait detached d-1 || fail "d-1 still attached after its pattern left the file"
	pat_wait attached c-1 || fail "c-1 not attached anew: $(sp_said)"
	[ "$(cgroup_progs "$CG/c-1" | sort | paste -sd,)" != "$p1" ] || fail "c-1 kept its programs when its modules changed"
	grep -q "cgroup sp-test-$ID/c-1 (matches .*): modules changed: attached anew" "$TMP/sp.err" || fail "no line for c-1: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?: $(sp_said)"
}
