#!/bin/sh
# Installs the Debian packages stackpilot builds, runs and tests with, when
# any is missing. Non-interactive; Debian's archive is the only source (the
# kernel matrix fetches Debian's kernel packages itself: tests/vm/fetch.sh).
set -e
pkgs="make clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libmnl-dev libmicrohttpd-dev pkg-config gcc
      iproute2 iperf3 nftables iptables iputils-ping procps kmod bc jq util-linux tmux
      python3-docutils groff-base systemd gnuplot-nox curl python3
      qemu-system-x86 busybox-static cpio xz-utils zstd
      podman buildah runc catatonit python3-yaml"
# Only the metrics tests use these (promtool, node_exporter): tried, but a
# machine without them still builds; tests/integration/test_metrics.sh skips.
optional="prometheus prometheus-node-exporter"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
opt_missing=
for p in $optional; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		opt_missing="$opt_missing $p"
done
[ -z "$missing$opt_missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	[ -z "$missing" ] && exit 0
	echo "install-deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
[ -z "$missing" ] || apt-get install -y -qq --no-install-recommends $missing >/dev/null
# The tests start their own instances; on a systemd host Debian also enables
# the packages' services (ports 9090, 9100): disable them if unwanted.
[ -z "$opt_missing" ] || {
	echo "install-deps: trying the optional$opt_missing"
	apt-get install -y -qq --no-install-recommends $opt_missing >/dev/null ||
		echo "install-deps: optional$opt_missing not installed: the metrics tests will skip" >&2
}
