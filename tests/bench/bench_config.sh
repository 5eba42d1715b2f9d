# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/config.md (tests/bench/run.sh writes what this prints there)
# run --config (issue 12): what many cgroups in one process cost. Start-up
# with 1 and with N cgroups (alternating rounds), SIGHUP to "reloaded" with
# one value changed, a cgroup made to its programs attached, and the CPU
# time of an idle run whose N cgroups do not exist (the 200 ms stat check).
ROUNDS=${ROUNDS:-5}
N=${N:-32}
# Starting 32 cgroups took 11 s under load: what is measured, not a hang.
export SP_SPAWN_SECS=${SP_SPAWN_SECS:-60}

make_cgroup
on_exit 'for d in "$CG"/*/; do rmdir "$d"; done'
for i in $(seq "$N"); do mkdir "$CG/c$i"; done

conf_n() { # conf_n COUNT [PREFIX]: COUNT sections of cgroups PREFIXi
	echo "pin-path = $PIN"
	for i in $(seq "$1"); do
		printf '[cgroup sp-test-%s/%s%d]\nmodules = tcpstats,rehash\nrehash.prob = 30\n' "$ID" "${2:-c}" "$i"
	done
}
now() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# Seconds from exec to the "attached" line.
start_secs() {
	local t0=$(now)
	: >"$TMP/sp.err"
	sp_spawn "$SP" run --config "$TMP/c.conf" --interval 0 --state-dir "$TMP/state"
	echo "$(now) - $t0" | bc -l
}

: >"$TMP/s1"; : >"$TMP/sN"; : >"$TMP/r1"; : >"$TMP/rN"
for r in $(seq "$ROUNDS"); do
	for n in 1 "$N"; do
		conf_n "$n" >"$TMP/c.conf"
		start_secs >>"$TMP/s$([ "$n" = 1 ] && echo 1 || echo N)"
		# Reload with one value changed: SIGHUP to the "reloaded" line.
		sed -i '0,/rehash.prob = 30/s//rehash.prob = 31/' "$TMP/c.conf"
		local_n=$(grep -c reloaded "$TMP/sp.err")
		t0=$(now); kill -HUP "$SP_PID"
		while [ "$(grep -c reloaded "$TMP/sp.err")" = "$local_n" ]; do sleep 0.002; done
		echo "$(now) - $t0" | bc -l >>"$TMP/r$([ "$n" = 1 ] && echo 1 || echo N)"
		sp_stop
	done
done

# A cgroup made while the run waits for it: mkdir to its programs attached.
conf_n 1 w >"$TMP/c.conf"
sp_spawn "$SP" run --config "$TMP/c.conf" --interval 0 --state-dir "$TMP/state"
: >"$TMP/appear"
for r in $(seq "$ROUNDS"); do
	t0=$(now); mkdir "$CG/w1"
	until bpftool cgroup show "$CG/w1" 2>/dev/null | grep -q sp_sockops; do sleep 0.005; done
	echo "$(now) - $t0" | bc -l >>"$TMP/appear"
	rmdir "$CG/w1"
	while [ -e "$PIN/sp-test-$ID:w1" ]; do sleep 0.01; done
done
sp_stop

# CPU time (utime + stime, clock ticks) of a run in 10 s: N waiting cgroups vs N attached.
cpu10() {
	local a b
	sp_spawn "$SP" run --config "$TMP/c.conf" --interval 0 --state-dir "$TMP/state"
	sleep 1
	a=$(awk '{ print $14 + $15 }' "/proc/$SP_PID/stat"); sleep 10
	b=$(awk '{ print $14 + $15 }' "/proc/$SP_PID/stat")
	sp_stop
	echo $((b - a))
}
conf_n "$N" w >"$TMP/c.conf"; cw=$(cpu10)
conf_n "$N" >"$TMP/c.conf"; ca=$(cpu10)

s1=$(median <"$TMP/s1") sN=$(median <"$TMP/sN") r1=$(median <"$TMP/r1") rN=$(median <"$TMP/rN")
echo "## run --config: $N cgroups in one process ($ROUNDS rounds, medians)"
echo
echo "| what | 1 cgroup | $N cgroups | ratio |"
echo "|---|---|---|---|"
printf '| start to attached (s) | %.3f | %.3f | %.1f |\n' "$s1" "$sN" "$(echo "$sN / $s1" | bc -l)"
printf '| SIGHUP to reloaded, one value changed (s) | %.4f | %.4f | %.1f |\n' "$r1" "$rN" "$(echo "$rN / $r1" | bc -l)"
echo
printf 'A cgroup made to its programs attached: median %.3f s (max %.3f s).\n' \
	"$(median <"$TMP/appear")" "$(sort -g "$TMP/appear" | tail -1)"
echo "CPU of the run in 10 s idle: $cw ticks with $N cgroups waiting, $ca ticks with $N attached (USER_HZ $(getconf CLK_TCK))."

# What an instance holds: INST_N cgroups matched by one pattern section,
# all three cgroup modules, then tcpstats alone. The run's programs and
# maps from its descriptors (/proc/PID/fdinfo: bpftool here cannot name a
# holder), the maps' bytes_memlock summed: the kernel's memory; its VmRSS
# and open descriptors from /proc; "load, each" from exec to the last
# match attached, over N.
INST_N=${INST_N:-0 1 10 100}
held() { # held: programs maps kernel-kB rss-kB descriptors of the run
	local fdi=/proc/$SP_PID/fdinfo pj mj
	# Its programs: those its descriptors hold (programs, links); its maps:
	# those its descriptors hold and those its programs use.
	pj=$(cat "$fdi"/* 2>/dev/null | awk '$1 == "prog_id:" { print $2 }' | sort -u | jq -s .)
	mj=$(cat "$fdi"/* 2>/dev/null | awk '$1 == "map_id:" { print $2 }' | sort -u | jq -s .)
	mj=$(bpftool prog show -j | jq -c --argjson p "$pj" --argjson m "$mj" \
		'[.[] | select(.id as $i | $p | index($i)) | .map_ids[]?] + $m | unique')
	echo "$(echo "$pj" | jq length) $(bpftool map show -j | jq -r --argjson m "$mj" \
		'[.[] | select(.id as $i | $m | index($i))] | "\(length) \(map(.bytes_memlock) | add // 0 | . / 1024 | floor)"')" \
		"$(awk '/^VmRSS/ { print $2 }' "/proc/$SP_PID/status") $(ls "/proc/$SP_PID/fd" | wc -l)"
}
echo
echo "## What an instance holds (\`[cgroup sp-test-ID/i*]\` matching N cgroups)"
echo
echo "| modules | instances | programs | maps | kernel memory | VmRSS | descriptors | load, each |"
echo "|---|---|---|---|---|---|---|---|"
for mods in tcpstats,rehash,pmtu tcpstats; do
	label=${mods//,/, }
	for n in $INST_N; do
		for i in $(seq "$n"); do mkdir "$CG/i$i"; done
		printf 'pin-path = %s\n[cgroup sp-test-%s/i*]\nmodules = %s\n' "$PIN" "$ID" "$mods" >"$TMP/c.conf"
		t0=$(now)
		sp_spawn "$SP" run --config "$TMP/c.conf" --interval 0 --state-dir "$TMP/state"
		for i in $(seq "$n"); do
			until bpftool cgroup show "$CG/i$i" 2>/dev/null | grep -q sp_sockops; do sleep 0.01; done
		done
		t1=$(now)
		sleep 1	# the start-up probes' programs freed
		read -r p m kb rss fds < <(held)
		printf '| %s | %d | %d | %d | %s | %.1f MB | %d | %s |\n' "$label" "$n" "$p" "$m" \
			"$(awk -v k="$kb" 'BEGIN { printf(k >= 1024 ? "%.1f MB" : "%d kB", k >= 1024 ? k / 1024 : k) }')" \
			"$(echo "$rss / 1024" | bc -l)" "$fds" \
			"$([ "$n" = 0 ] || printf '%.2f s' "$(echo "($t1 - $t0) / $n" | bc -l)")"
		sp_stop
		for i in $(seq "$n"); do rmdir "$CG/i$i"; done
		label=
	done
done
