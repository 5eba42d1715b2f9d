#!/bin/sh
# Installs the Debian packages stackpilot needs, when any is missing.
#   install-deps.sh [build]  what building needs (`make deps`, `make run`,
#                            `make deb`): compilers, headers, rst2man, debhelper
#   install-deps.sh test     that and what the tests, the benchmarks and the
#                            kernel matrix need (`make test-deps`, `make check`)
# The Debian package (`make deb`) needs neither: its Depends are the
# runtime libraries only. Non-interactive; Debian's archive is the only
# source (the kernel matrix fetches Debian's kernel packages itself:
# tests/vm/fetch.sh).
set -e
build="make clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libmnl-dev libmicrohttpd-dev
       libsystemd-dev pkg-config gcc python3-docutils debhelper dpkg-dev"
test="iproute2 iperf3 nftables iptables iputils-ping procps kmod bc jq util-linux tmux
      groff-base systemd gnuplot-nox curl python3 lintian
      qemu-system-x86 busybox-static cpio xz-utils zstd
      podman buildah runc catatonit python3-yaml"
# Only the metrics tests use these (promtool, node_exporter): tried, but a
# machine without them still builds; tests/integration/test_metrics.sh skips.
optional_test="prometheus prometheus-node-exporter"
case ${1:-build} in
build) pkgs=$build optional= ;;
test) pkgs="$build $test" optional=$optional_test ;;
*) echo "install-deps: unknown set '$1' (build or test)" >&2; exit 2 ;;
esac
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
