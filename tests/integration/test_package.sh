# SPDX-License-Identifier: GPL-2.0
# The Debian package (issue 27): `make deb` builds it (debhelper), lintian
# finds no error in it, it holds the runtime files only and depends on
# runtime libraries only; installed on this host (README's commands), its
# unit's ExecStart runs the example config (pointed at the test's cgroup
# and pins), a build of a higher version upgrades it, and purge leaves
# nothing behind. The package is built once per test run, into the test's
# folder; dpkg's effects on the host are undone on every exit path
# (dpkg --purge).

source "$ROOT/tests/lib_unit.sh"

# What the package (or a run of its unit) can leave on the host, one line each.
pkg_traces() {
	ls -d /etc/stackpilot /etc/iproute2/rt_protos.d/stackpilot.conf /usr/sbin/stackpilot \
		/lib/systemd/system/stackpilot.service /usr/lib/systemd/system/stackpilot.service \
		/usr/share/stackpilot /usr/share/doc/stackpilot /usr/share/man/man8/stackpilot*.8.gz \
		/usr/share/bash-completion/completions/stackpilot /var/lib/stackpilot /sys/fs/bpf/stackpilot \
		/var/lib/dpkg/info/stackpilot.* /etc/systemd/system/*/stackpilot.service \
		/var/lib/systemd/deb-systemd-helper-enabled/*stackpilot* \
		/var/lib/systemd/deb-systemd-helper-masked/stackpilot* 2>/dev/null
	dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' stackpilot 2>/dev/null
}

# The installed example config on the test's cgroup and pins: prints its path.
example_conf() {
	sed -e "s|^\[cgroup /\]|[cgroup sp-test-$ID]|" -e "s|^#pin-path = .*|pin-path = $PIN|" \
		/etc/stackpilot/stackpilot.conf >"$TMP/sp.conf"
	grep -q "^\[cgroup sp-test-$ID\]" "$TMP/sp.conf" || fail "the example config has no [cgroup /]: $(grep -v '^#' "$TMP/sp.conf")"
	echo "$TMP/sp.conf"
}

# The installed unit started as systemd would: ready (READY=1 with the
# cgroup's programs attached), `status` sees it; prints the binary's
# --version as the running instance reports it.
start_installed() {
	local n at_ready
	unit_start /lib/systemd/system/stackpilot.service "$(example_conf)"
	n=$(notify_wait '^READY=1$') || exit 1
	at_ready=$(sed -n "$((n + 1))s/^progs=//p" "$TMP/notify.log")
	# One a run: sp_sockops, on the cgroup once the modules are behind it.
	assert_ge "$at_ready" 1 "programs attached at READY=1 (sp_sockops)"
	/usr/sbin/stackpilot status --pin-path "$PIN" | has "sp-test-$ID" || fail "status does not show the cgroup"
}

# README's package install, each command here in the test's form: make deb
# into the test's folder, apt install, the unit's start as systemd would
# (not enabled on the host: that is systemctl's, not the package's),
# status and the man page of the installed package.
readme_package_cmds() {
	local cmds
	cmds=$(sed -n '/tested by tests\/integration\/test_package.sh:t_package_lifecycle/,/^```$/p' "$ROOT/README.md" |
		sed '1,2d;$d' | sed 's/ *#.*//')
	assert_eq "$cmds" "make deb
apt install ./stackpilot_*.deb
systemctl enable --now stackpilot
stackpilot status
man stackpilot" "README's package commands (this test runs those)"
}

t_package_lifecycle() {
	local v1 v2 deb1 deb2 dep mtu_before routes_before out
	readme_package_cmds
	need_tool dpkg-buildpackage dpkg-dev
	need_tool dh debhelper
	need_tool lintian lintian
	# Never over an install of the operator's (a package or `make install PREFIX=/usr`).
	out=$(pkg_traces)
	[ -z "$out" ] || skip "stackpilot is installed on this host already: $(echo "$out" | head -3 | tr '\n' ' ')"
	mtu_before=$(sysctl -n net.ipv4.tcp_mtu_probing)
	routes_before=$(ip route show proto 0xa5)

	# One build, then a second of a higher version from the same tree.
	v1=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version) || fail "dpkg-parsechangelog: exit $?"
	v2=$v1+sp$ID
	make -s -C "$ROOT" deb DEB_OUT="$TMP/deb" DEB_VERSIONS="$v1 $v2" >"$TMP/make-deb.out" ||
		fail "make deb: exit $?: $(tail -5 "$TMP/make-deb.out")"
	deb1=$TMP/deb/stackpilot_${v1}_amd64.deb deb2=$TMP/deb/stackpilot_${v2}_amd64.deb
	[ -f "$deb1" ] && [ -f "$deb2" ] || fail "make deb wrote: $(ls "$TMP/deb")"

	lintian "$deb1" >"$TMP/lintian" 2>&1
	cat "$TMP/lintian"
	has '^E:' "$TMP/lintian" && fail "lintian errors: $(grep '^E:' "$TMP/lintian")"
	# Runtime libraries only: no compiler, no header package, no test tool.
	dep=$(dpkg-deb -f "$deb1" Depends)
	echo "Depends: $dep"
	echo "$dep" | has -E 'libbpf' || fail "Depends lacks libbpf: $dep"
	echo "$dep" | tr ',' '\n' | has -E 'clang|llvm|gcc|bpftool|-dev( |$)|make|iperf|nftables|prometheus' &&
		fail "Depends has a build or test tool: $dep"
	dpkg-deb -c "$deb1" | awk '{ print $6 }' | grep -v '/$' | sort >"$TMP/files"
	cat >"$TMP/want" <<-'END'
	./etc/iproute2/rt_protos.d/stackpilot.conf
	./etc/stackpilot/stackpilot.conf
	./lib/systemd/system/stackpilot.service
	./usr/sbin/stackpilot
	./usr/share/bash-completion/completions/stackpilot
	./usr/share/doc/stackpilot/changelog.gz
	./usr/share/doc/stackpilot/copyright
	./usr/share/man/man8/stackpilot-fragguard.8.gz
	./usr/share/man/man8/stackpilot-pmtu.8.gz
	./usr/share/man/man8/stackpilot-rehash.8.gz
	./usr/share/man/man8/stackpilot-tcpstats.8.gz
	./usr/share/man/man8/stackpilot.8.gz
	./usr/share/stackpilot/grafana/stackpilot.json
	END
	diff "$TMP/want" "$TMP/files" || fail "the package's files differ"

	on_exit dpkg --purge stackpilot
	# apt, as the README says: the Depends are all installed here, so
	# nothing is fetched (the .deb itself is a "Get:" of its path).
	apt-get install -y -o DPkg::Lock::Timeout=60 --no-install-recommends "$deb1" >"$TMP/dpkg.out" 2>&1 ||
		fail "apt install: exit $?: $(tail -5 "$TMP/dpkg.out")"
	cat "$TMP/dpkg.out"
	has -E '^Get:[0-9]+ [a-z]+://' "$TMP/dpkg.out" && fail "apt fetched something: $(grep -E '^Get:' "$TMP/dpkg.out")"
	assert_eq "$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' stackpilot)" "ii $v1" "installed"
	assert_eq "$(/usr/sbin/stackpilot --version)" "stackpilot $v1" "installed --version"
	[ -e /etc/systemd/system/multi-user.target.wants/stackpilot.service ] && fail "the unit was enabled on install"
	/usr/sbin/stackpilot check-config /etc/stackpilot/stackpilot.conf >/dev/null || fail "the installed example does not validate"

	make_cgroup; host_bpffs
	start_installed
	MANWIDTH=100 man stackpilot 2>&1 | col -b | has '^STACKPILOT(8)' || fail "man stackpilot"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(cgroup_progs)" "" "programs left after stop"

	# The upgrade keeps the operator's config (a conffile) and replaces the binary.
	echo "# mine" >>/etc/stackpilot/stackpilot.conf
	apt-get install -y -o DPkg::Lock::Timeout=60 --no-install-recommends "$deb2" >"$TMP/dpkg.out" 2>&1 ||
		fail "upgrade: apt install: exit $?: $(tail -5 "$TMP/dpkg.out")"
	cat "$TMP/dpkg.out"
	assert_eq "$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' stackpilot)" "ii $v2" "upgraded"
	assert_eq "$(/usr/sbin/stackpilot --version)" "stackpilot $v2" "upgraded --version"
	tail -1 /etc/stackpilot/stackpilot.conf | has -x '# mine' || fail "the upgrade replaced the changed config"
	start_installed
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"

	dpkg --purge stackpilot >"$TMP/dpkg.out" 2>&1 || fail "dpkg --purge: exit $?: $(tail -5 "$TMP/dpkg.out")"
	cat "$TMP/dpkg.out"
	assert_eq "$(pkg_traces)" "" "left by purge"
	assert_eq "$(cgroup_progs)" "" "programs left"
	assert_eq "$(ip route show proto 0xa5)" "$routes_before" "stackpilot's routes on the host"
	assert_eq "$(sysctl -n net.ipv4.tcp_mtu_probing)" "$mtu_before" "net.ipv4.tcp_mtu_probing"
	assert_eq "$(ls /run/stackpilot 2>/dev/null | grep -e "-$(stat -c %i "$CG")\.lock")" "" "the test cgroup's lock in /run/stackpilot"
}
