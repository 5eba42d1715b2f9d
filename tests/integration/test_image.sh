# SPDX-License-Identifier: GPL-2.0
# The container image (`make image`: scripts/image.sh) and the Kubernetes
# manifests (dist/kubernetes/) (issue 27). The image attaches to another
# podman container's cgroup with the capabilities the README names, and
# counts that container's connections; the DaemonSet's pod template runs
# under `podman kube play`; the manifests name only paths, ports, options
# and keys the code has; --watch-config follows a ConfigMap's symlink swap.
# Images, containers and pods are named for the run and removed on exit;
# traffic stays on a container's own loopback.

# podman as it runs here: runc (crun refuses a hybrid cgroup layout),
# cgroupfs (no systemd cgroup manager), ulimits under the hard limits.
PM=(podman --runtime runc --cgroup-manager cgroupfs)
ULIM=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
IMG=localhost/sp-test-$ID
BBIMG=localhost/sp-test-$ID-bb
# The README's way to run the image: these capabilities and no more
# (t_image_caps), the host's network and cgroup namespaces, its bpffs and
# cgroup mount. podman's seccomp profile allows bpf() only with SYS_ADMIN.
CAPS=(--cap-drop=all --cap-add=BPF,PERFMON,NET_ADMIN,NET_RAW --security-opt seccomp=unconfined)
HOST=(--network host --cgroupns host -v /sys/fs/bpf:/sys/fs/bpf -v /sys/fs/cgroup:/sys/fs/cgroup)
KUBE=$ROOT/dist/kubernetes/stackpilot.yaml

need_podman() {
	need_tool podman podman
	need_tool buildah buildah
	need_tool runc runc
	"${PM[@]}" info >/dev/null 2>&1 || skip "podman does not run here: $("${PM[@]}" info 2>&1 | tail -1)"
}

# The image of this run, $IMG:test (and :latest), as `make image` builds it.
sp_image() {
	on_exit "${PM[*]} rmi -f $IMG:test $IMG:latest"
	"$ROOT/scripts/image.sh" "$SP" "$IMG" test >"$TMP/image.out" 2>&1 ||
		fail "scripts/image.sh: $(tail -3 "$TMP/image.out")"
}

# A busybox image from scratch (the static busybox of busybox-static): sh, nc, sleep.
bb_image() {
	local bb ctr root a
	need_tool busybox busybox-static
	bb=$(command -v busybox)
	ldd "$bb" >/dev/null 2>&1 && skip "$bb is not static (busybox-static)"
	on_exit "${PM[*]} rmi -f $BBIMG"
	ctr=$(buildah from scratch) || fail "buildah from scratch"
	on_exit "buildah rm $ctr"
	root=$(buildah mount "$ctr") || fail "buildah mount"
	mkdir -p "$root/bin" && cp "$bb" "$root/bin/busybox" || fail "copy busybox"
	for a in sh nc sleep; do ln -s busybox "$root/bin/$a"; done
	buildah umount "$ctr" >/dev/null
	buildah commit -q "$ctr" "$BBIMG" >/dev/null || fail "buildah commit $BBIMG"
}

# A busybox container NAME with no network but its own loopback, idle.
bb_start() {
	on_exit "${PM[*]} rm -f -t 0 $1"
	"${PM[@]}" run -d --name "$1" "${ULIM[@]}" --network none "$BBIMG" sleep 600 >/dev/null ||
		fail "podman run $1"
}

# The cgroup v2 path of container NAME, from its process' /proc/PID/cgroup.
cg_of() {
	local pid
	pid=$("${PM[@]}" inspect -f '{{.State.Pid}}' "$1") || fail "podman inspect $1"
	awk -F: '$1 == "0" { print $3 }' "/proc/$pid/cgroup"
}

# N TCP connections in container NAME over its own loopback, each opened
# and accepted there: conns NAME N
conns() {
	"${PM[@]}" exec "$1" sh -c 'i=0; while [ $i -lt '"$2"' ]; do
		nc -l -p 7000 >/dev/null & sleep 0.2; echo x | nc 127.0.0.1 7000; wait; i=$((i + 1)); done' ||
		fail "connections in $1: exit $?"
}

# Wait up to 15 s for container NAME's log to say it attached.
wait_attached() {
	for _ in $(seq 150); do
		# stdout and stderr come interleaved in pieces: not at a line's start.
		"${PM[@]}" logs "$1" 2>&1 | has 'stackpilot: attached' && return 0
		[ "$("${PM[@]}" inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ] ||
			fail "$1 exited: $("${PM[@]}" logs "$1" 2>&1 | tail -3)"
		sleep 0.1
	done
	"${PM[@]}" logs "$1" >"$TMP/logs" 2>&1; fail "$1 did not attach in 15 s: $(head -3 "$TMP/logs"; echo ...; tail -3 "$TMP/logs")"
}

# `stackpilot status --json` inside container NAME: ctr_status NAME JQ
ctr_status() { "${PM[@]}" exec "$1" stackpilot status --pin-path "$PIN" --json | jq -r "$2"; }

# The image attaches tcpstats to a second container's cgroup, counts that
# container's connections and nothing else, and detaches on podman stop.
t_image_attach() {
	local bb=sp-test-$ID-bb sp=sp-test-$ID-sp cg id n
	need_podman
	host_bpffs
	sp_image
	bb_image
	# What the image holds: the binary, its libraries, nothing it would exec.
	"${PM[@]}" run --rm "${ULIM[@]}" "$IMG:test" --version >"$TMP/v" || fail "stackpilot --version in the image"
	assert_eq "$(cat "$TMP/v")" "$("$SP" --version)" "the image's stackpilot"
	bb_start "$bb"
	cg=$(cg_of "$bb")
	id=$("${PM[@]}" inspect -f '{{.Id}}' "$bb")
	[[ $cg == */libpod-$id ]] || fail "cgroup of $bb: '$cg', expected .../libpod-$id"
	on_exit "${PM[*]} rm -f -t 0 $sp"
	"${PM[@]}" run -d --name "$sp" "${ULIM[@]}" "${CAPS[@]}" "${HOST[@]}" "$IMG:test" \
		run --cgroup "${cg#/}" --modules tcpstats --pin-path "$PIN" --interval 0 >/dev/null ||
		fail "podman run $sp"
	wait_attached "$sp"
	assert_eq "$(ctr_status "$sp" .cgroup)" "$CG2$cg" "the cgroup attached"
	# Connections of the host (another namespace, outside that cgroup): not counted.
	mk_netns "$NS_A"
	ip netns exec "$NS_A" busybox sh -c 'busybox nc -l -p 7000 >/dev/null & sleep 0.2; echo x | busybox nc 127.0.0.1 7000; wait' ||
		fail "a connection outside the container"
	conns "$bb" 5
	n=$(num "$(ctr_status "$sp" .modules.tcpstats.active_opens)" active_opens)
	echo "tcpstats in the container: $n opened, $(ctr_status "$sp" .modules.tcpstats.passive_opens) accepted"
	assert_eq "$n" 5 "connections the busybox container opened"
	assert_eq "$(ctr_status "$sp" .modules.tcpstats.passive_opens)" 5 "connections it accepted"
	"${PM[@]}" exec "$sp" stackpilot status --pin-path "$PIN" | has '^tcpstats *10 connections' ||
		fail "status: $("${PM[@]}" exec "$sp" stackpilot status --pin-path "$PIN")"
	"${PM[@]}" stop -t 10 "$sp" >/dev/null || fail "podman stop"
	assert_eq "$("${PM[@]}" inspect -f '{{.State.ExitCode}}' "$sp")" 0 "exit status after SIGTERM"
	"${PM[@]}" logs "$sp" 2>&1 | has 'stackpilot: detached, pins removed' ||
		fail "no detach line: $("${PM[@]}" logs "$sp" 2>&1 | tail -3)"
	assert_eq "$(cgroup_progs "$CG2$cg")" "" "programs left on the container's cgroup"
}

# The capabilities the README names are the minimum: without any one of
# BPF, PERFMON, NET_ADMIN run refuses or fails and attaches nothing.
# (NET_RAW: pmtu's probes, measured by t_service_capabilities.) Under
# podman's default seccomp profile SYS_ADMIN stands in for seccomp=unconfined.
t_image_caps() {
	local drop caps out rc
	need_podman
	host_bpffs
	make_cgroup
	sp_image
	try() {	# try NAME PODMAN-OPTIONS...: run's exit status, output in $TMP/NAME
		local n=$1; shift
		timeout 60 "${PM[@]}" run --rm --name "sp-test-$ID-$n" "${ULIM[@]}" "$@" "${HOST[@]}" "$IMG:test" \
			run --cgroup "$CG" --modules tcpstats --pin-path "$PIN" --interval 0 >"$TMP/$n" 2>&1 &
		local p=$!
		for _ in $(seq 100); do has 'stackpilot: attached' "$TMP/$n" && break; kill -0 $p 2>/dev/null || break; sleep 0.1; done
		has 'stackpilot: attached' "$TMP/$n" && { assert_ne_progs; "${PM[@]}" stop -t 10 "sp-test-$ID-$n" >/dev/null; }
		wait $p
	}
	assert_ne_progs() { [ -n "$(cgroup_progs)" ] || fail "attached, but no program on $CG"; }
	on_exit "for c in all BPF PERFMON NET_ADMIN seccomp sysadmin; do ${PM[*]} rm -f -t 0 sp-test-$ID-\$c; done"
	try all "${CAPS[@]}"; rc=$?
	has 'stackpilot: attached' "$TMP/all" || fail "with ${CAPS[*]}: $(tail -3 "$TMP/all")"
	assert_eq $rc 0 "exit status with ${CAPS[*]}"
	for drop in BPF PERFMON NET_ADMIN; do
		caps=$(echo BPF,PERFMON,NET_ADMIN,NET_RAW | sed "s/$drop,//; s/,$drop//")
		try "$drop" --cap-drop=all --cap-add="$caps" --security-opt seccomp=unconfined; rc=$?
		out=$(tail -1 "$TMP/$drop")
		echo "without CAP_$drop: exit $rc: $out"
		has 'stackpilot: attached' "$TMP/$drop" && fail "attached without CAP_$drop"
		[ "$rc" != 0 ] || fail "exit 0 without CAP_$drop"
		assert_eq "$(cgroup_progs)" "" "programs without CAP_$drop"
	done
	try seccomp --cap-drop=all --cap-add=BPF,PERFMON,NET_ADMIN,NET_RAW; rc=$?
	echo "podman's seccomp profile, no SYS_ADMIN: exit $rc: $(tail -1 "$TMP/seccomp")"
	has 'stackpilot: attached' "$TMP/seccomp" && echo "(this podman's seccomp profile lets CAP_BPF call bpf())"
	try sysadmin --cap-drop=all --cap-add=BPF,PERFMON,NET_ADMIN,NET_RAW,SYS_ADMIN
	has 'stackpilot: attached' "$TMP/sysadmin" || fail "with SYS_ADMIN under podman's seccomp: $(tail -3 "$TMP/sysadmin")"
}

# A containers.conf for `podman kube play` (it takes no --runtime per pod).
kube_conf() {
	cat >"$TMP/containers.conf" <<-EOF
	[containers]
	default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
	[engine]
	runtime = "runc"
	cgroup_manager = "cgroupfs"
	EOF
	export CONTAINERS_CONF=$TMP/containers.conf
}

# The manifest names what the code has: each hostPath a path of the code,
# mounted where the code looks for it; each port the config's
# metrics-listen port; each probe and scrape path one the server answers;
# each argument an option of `run --help`; the config valid (check-config)
# with every key a setting or tunable; the capabilities the README's.
t_kube_manifest() {
	local port p
	need_tool python3 python3
	python3 -c 'import yaml' 2>/dev/null || skip "missing python3-yaml (scripts/install-deps.sh installs it)"
	python3 - "$KUBE" "$ROOT/dist/kubernetes/servicemonitor.yaml" "$TMP" <<-'EOF' || fail "reading the manifests"
	import sys, yaml
	docs = [d for f in sys.argv[1:3] for d in yaml.safe_load_all(open(f)) if d]
	out = sys.argv[3]
	kinds = {d["kind"]: d for d in docs}
	for k in ("ConfigMap", "DaemonSet", "Service", "ServiceMonitor"):
	    assert k in kinds, "no " + k
	pod = kinds["DaemonSet"]["spec"]["template"]
	c = pod["spec"]["containers"][0]
	vols = {v["name"]: v for v in pod["spec"]["volumes"]}
	with open(out + "/hostpaths", "w") as f:
	    for m in c["volumeMounts"]:
	        v = vols[m["name"]]
	        if "hostPath" in v:
	            f.write("%s %s\n" % (v["hostPath"]["path"], m["mountPath"]))
	with open(out + "/ports", "w") as f:
	    for p in c["ports"]:
	        f.write("containerPort %s\n" % p["containerPort"])
	    for pr in ("readinessProbe", "livenessProbe"):
	        f.write("%s %s\n" % (pr, c[pr]["httpGet"]["port"]))
	    f.write("annotation %s\n" % pod["metadata"]["annotations"]["prometheus.io/port"])
	    f.write("service %s\n" % kinds["Service"]["spec"]["ports"][0]["port"])
	with open(out + "/paths", "w") as f:
	    for pr in ("readinessProbe", "livenessProbe"):
	        f.write(c[pr]["httpGet"]["path"] + "\n")
	    f.write(pod["metadata"]["annotations"]["prometheus.io/path"] + "\n")
	    f.write(kinds["ServiceMonitor"]["spec"]["endpoints"][0]["path"] + "\n")
	open(out + "/args", "w").write("\n".join(c["args"]) + "\n")
	open(out + "/caps", "w").write(" ".join(sorted(c["securityContext"]["capabilities"]["add"])) + "\n")
	cm = kinds["ConfigMap"]["data"]
	assert list(cm) == ["stackpilot.conf"], "ConfigMap keys: %s" % list(cm)
	open(out + "/sp.conf", "w").write(cm["stackpilot.conf"])
	# The Service and the ServiceMonitor find the pods; the port's name matches.
	sel = kinds["DaemonSet"]["spec"]["selector"]["matchLabels"]
	assert all(pod["metadata"]["labels"].get(k) == v for k, v in sel.items()), "selector"
	assert kinds["Service"]["spec"]["selector"] == sel, "Service selector"
	assert kinds["ServiceMonitor"]["spec"]["endpoints"][0]["port"] == kinds["Service"]["spec"]["ports"][0]["name"]
	assert c["ports"][0]["name"] == kinds["Service"]["spec"]["ports"][0]["targetPort"]
	EOF
	# Paths: in the source as a string, bind-mounted at the same path.
	[ "$(wc -l <"$TMP/hostpaths")" -ge 4 ] || fail "hostPaths: $(wc -l <"$TMP/hostpaths"), expected >= 4: $(cat "$TMP/hostpaths")"
	while read -r p m; do
		assert_eq "$m" "$p" "mountPath of hostPath $p"
		grep -rqF "\"$p" "$ROOT/src" || fail "hostPath $p: no such path in src/"
	done <"$TMP/hostpaths"
	for p in /run/stackpilot /var/lib/stackpilot /sys/fs/bpf /sys/fs/cgroup; do
		grep -q "^$p " "$TMP/hostpaths" || fail "no hostPath $p"
	done
	# Ports: the one the config listens on.
	port=$(sed -n 's/^metrics-listen *= *.*:\([0-9]*\)$/\1/p' "$TMP/sp.conf")
	[ -n "$port" ] || fail "no metrics-listen ADDR:PORT in the ConfigMap"
	while read -r what p; do assert_eq "$p" "$port" "$what port"; done <"$TMP/ports"
	# HTTP paths the server answers.
	while read -r p; do grep -qF "\"$p\"" "$ROOT/src/export/metrics.c" || fail "path $p: not served (src/export/metrics.c)"; done <"$TMP/paths"
	# Arguments: run and its options.
	assert_eq "$(head -1 "$TMP/args")" run "the command"
	while read -r p; do
		[[ $p == --* ]] || continue
		"$SP" run --help | has -- "^ *$p\b" || fail "argument $p: not an option of run --help"
	done <"$TMP/args"
	grep -qx -- --watch-config "$TMP/args" || fail "no --watch-config: a ConfigMap change would need a restart"
	# The config: valid (check-config refuses a key that is no setting or
	# tunable: that is checked by making one up).
	"$SP" check-config "$TMP/sp.conf" || fail "the ConfigMap's config: check-config exit $?"
	{ cat "$TMP/sp.conf"; echo "tcpstats.no_such_key = 1"; } >"$TMP/bad.conf"
	"$SP" check-config "$TMP/bad.conf" 2>/dev/null && fail "check-config took a key that does not exist"
	# The capabilities: the README's.
	for p in $(cat "$TMP/caps"); do
		grep -A12 '^## Container image' "$ROOT/README.md" | has "CAP_$p" || fail "CAP_$p not named in README's Container image"
	done
	echo "hostPaths: $(cut -d' ' -f1 "$TMP/hostpaths" | tr '\n' ' '); port $port; caps $(cat "$TMP/caps")"
}

# The DaemonSet's pod template as a Pod (podman 4 plays no DaemonSet) with
# its ConfigMap, for this run: the image $IMG:test, the config's cgroup $1,
# pins in $PIN, metrics on port $2 of the loopback, /run/stackpilot and
# /var/lib/stackpilot from $TMP rather than the host's, no ports list, the
# seccomp annotation podman reads.
# Into $TMP/pod.yaml.
kube_pod() {
	python3 - "$KUBE" "$TMP/pod.yaml" "sp-test-$ID" "$IMG:test" "$1" "$2" "$PIN" "$TMP" <<-'EOF' || fail "making the Pod"
	import sys, yaml
	src, out, name, image, cgroup, port, pin, tmp = sys.argv[1:]
	docs = {d["kind"]: d for d in yaml.safe_load_all(open(src)) if d}
	tpl = docs["DaemonSet"]["spec"]["template"]
	c = tpl["spec"]["containers"][0]
	c["image"] = image
	# podman 4 refuses ports with hostNetwork (Kubernetes takes them as
	# documentation there): the probes name the port themselves.
	del c["ports"]
	for p in ("readinessProbe", "livenessProbe"):
	    c[p]["httpGet"]["port"] = int(port)
	for v in tpl["spec"]["volumes"]:
	    if v.get("hostPath", {}).get("path") in ("/run/stackpilot", "/var/lib/stackpilot"):
	        v["hostPath"]["path"] = tmp + v["hostPath"]["path"]
	    if "configMap" in v:
	        v["configMap"]["name"] = name + "-cfg"
	conf = []
	for line in docs["ConfigMap"]["data"]["stackpilot.conf"].splitlines():
	    if line.startswith("pin-path"):
	        line = "pin-path = " + pin
	    elif line.startswith("metrics-listen"):
	        line = "metrics-listen = 127.0.0.1:" + port
	    elif line.startswith("[cgroup "):
	        line = "[cgroup " + cgroup + "]"
	    conf.append(line)
	cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name + "-cfg"},
	      "data": {"stackpilot.conf": "\n".join(conf) + "\n"}}
	# podman 4 reads seccomp from the annotation that preceded
	# securityContext.seccompProfile, not from the field.
	assert c["securityContext"]["seccompProfile"]["type"] == "Unconfined"
	ann = dict(tpl["metadata"]["annotations"])
	ann["container.seccomp.security.alpha.kubernetes.io/" + c["name"]] = "unconfined"
	pod = {"apiVersion": "v1", "kind": "Pod",
	       "metadata": {"name": name, "labels": tpl["metadata"]["labels"], "annotations": ann},
	       "spec": tpl["spec"]}
	yaml.safe_dump_all([cm, pod], open(out, "w"), sort_keys=False)
	EOF
}

# The DaemonSet's pod template runs under `podman kube play`: it attaches
# to a busybox container's cgroup as the config says, counts its
# connections, /healthz says attached and /metrics has the counters; a
# ConfigMap change (a reload) and `podman kube down` detach cleanly.
t_kube_play() {
	local bb=sp-test-$ID-bb ctr=sp-test-$ID-stackpilot cg port=$((20000 + RANDOM % 20000)) rss
	need_podman
	need_tool catatonit catatonit
	python3 -c 'import yaml' 2>/dev/null || skip "missing python3-yaml (scripts/install-deps.sh installs it)"
	need_tool curl curl
	host_bpffs
	kube_conf
	# The infra image podman builds for a pod, when this test made it.
	"${PM[@]}" images --format '{{.Repository}}' | has '^localhost/podman-pause$' ||
		on_exit "${PM[*]} rmi -f \$(${PM[*]} images -q localhost/podman-pause)"
	sp_image
	bb_image
	bb_start "$bb"
	cg=$(cg_of "$bb")
	mkdir -p "$TMP/run" "$TMP/var/lib" && chmod 755 "$TMP" "$TMP/run" "$TMP/var" "$TMP/var/lib"
	kube_pod "${cg#/}" "$port"
	on_exit "podman kube down $TMP/pod.yaml"
	podman kube play "$TMP/pod.yaml" >"$TMP/play.out" 2>&1 || fail "podman kube play: $(tail -5 "$TMP/play.out")"
	# Its own cgroup: the pod's, /libpod_parent/<pod id>/libpod-<container id>.
	echo "the stackpilot container's cgroup: $(cg_of "$ctr")"
	wait_attached "$ctr"
	assert_eq "$(curl -s --max-time 5 "http://127.0.0.1:$port/healthz")" attached "/healthz"
	conns "$bb" 4
	assert_eq "$(ctr_status "$ctr" '.instances[0].modules.tcpstats.active_opens')" 4 "connections counted"
	curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" | has '^stackpilot_tcpstats' ||
		fail "/metrics: no tcpstats counters"
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$("${PM[@]}" inspect -f '{{.State.Pid}}' "$ctr")/status")
	echo "stackpilot in the pod: ${rss} KiB resident"
	podman kube down "$TMP/pod.yaml" >/dev/null 2>&1 || fail "podman kube down"
	has 'stackpilot: detached, pins removed' <(podman logs "$ctr" 2>&1) ||
		[ -z "$(cgroup_progs "$CG2$cg")" ] || fail "programs left after kube down"
	assert_eq "$(cgroup_progs "$CG2$cg")" "" "programs left on the busybox container's cgroup"
}

# --watch-config follows a Kubernetes ConfigMap volume's update: the
# kubelet writes the new files into a new folder and renames a "..data"
# symlink over the old one; the config file is a symlink through it. The
# run reloads once per content change, not for the same bytes again.
t_kube_config_watch() {
	local d=$TMP/cm n
	make_cgroup
	mkdir -p "$d/..v1" && chmod 755 "$d" "$d/..v1"
	printf 'pin-path = %s\n[cgroup sp-test-%s]\nmodules = tcpstats\ntcpstats.port = 80\n' "$PIN" "$ID" >"$d/..v1/stackpilot.conf"
	ln -s ..v1 "$d/..data"
	ln -s ..data/stackpilot.conf "$d/stackpilot.conf"
	: >"$TMP/sp.err"
	sp_spawn "$SP" run --config "$d/stackpilot.conf" --watch-config --interval 0 --state-dir "$TMP/state"
	swap() {	# swap VERSION PORT: the kubelet's atomic update
		mkdir "$d/..$1" && chmod 755 "$d/..$1"
		printf 'pin-path = %s\n[cgroup sp-test-%s]\nmodules = tcpstats\ntcpstats.port = %s\n' "$PIN" "$ID" "$2" >"$d/..$1/stackpilot.conf"
		ln -s "..$1" "$d/..data_tmp" && mv -T "$d/..data_tmp" "$d/..data" || fail "swap to ..$1"
	}
	get_port() { "$SP" get --pin-path "$PIN" --cgroup "sp-test-$ID" tcpstats.port | cut -d= -f2; }
	assert_eq "$(get_port)" 80 "tcpstats.port at start"
	swap v2 443
	for _ in $(seq 30); do [ "$(get_port)" = 443 ] && break; sleep 0.1; done
	assert_eq "$(get_port)" 443 "tcpstats.port after the ConfigMap's update"
	n=$(grep -c 'changed: reloading' "$TMP/sp.err")
	assert_eq "$n" 1 "reloads after one update"
	# The same bytes again (a resync), and a file of the folder touched: no reload.
	swap v3 443
	touch "$d/..v3/stackpilot.conf"
	sleep 0.5
	assert_eq "$(grep -c 'changed: reloading' "$TMP/sp.err")" 1 "reloads after the same content again"
	# A bad file: rejected, the running policy stays.
	mkdir "$d/..v4" && echo 'tcpstats.bogus = 1' >"$d/..v4/stackpilot.conf" && chmod -R go-w "$d/..v4"
	ln -s ..v4 "$d/..data_tmp" && mv -T "$d/..data_tmp" "$d/..data"
	for _ in $(seq 30); do has 'reload rejected' "$TMP/sp.err" && break; sleep 0.1; done
	has 'reload rejected, the running policy stays' "$TMP/sp.err" || fail "no rejection: $(sp_said 3)"
	assert_eq "$(get_port)" 443 "tcpstats.port after a bad update"
	kill -0 "$SP_PID" || fail "the run ended: $(sp_said)"
	# Without --config there is nothing to watch.
	"$SP" run --cgroup "$CG" --watch-config >"$TMP/o" 2>&1; assert_eq $? 2 "--watch-config without --config"
	has -- '--watch-config: give --config FILE too' "$TMP/o" || fail "message: $(cat "$TMP/o")"
}
