#!/bin/sh
# Installs the Debian packages stackpilot builds, runs and tests with, when
# any is missing. Non-interactive; Debian's archive is the only source.
set -e
pkgs="make clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libmnl-dev pkg-config gcc
      iproute2 iperf3 nftables iptables iputils-ping procps kmod bc jq util-linux
      python3-docutils groff-base systemd gnuplot-nox"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
