#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# `make image`: the container image of stackpilot, built with buildah from
# scratch (no base image to pull): the binary, the shared libraries ldd
# names for it and the folders it writes to. stackpilot execs nothing
# (no ip, no sysctl: netlink and /proc/sys from the code), so nothing else.
#   scripts/image.sh BINARY NAME VERSION  ->  NAME:VERSION and NAME:latest
# How to run it: README.md, "Container image"; Kubernetes: dist/kubernetes/.
set -eu
bin=$1 name=$2 version=$3
command -v buildah >/dev/null ||
	{ echo "image: buildah is missing (Debian package buildah)" >&2; exit 1; }
[ -x "$bin" ] || { echo "image: $bin: no such program (make all)" >&2; exit 1; }

ctr=$(buildah from scratch)
trap 'buildah umount "$ctr" >/dev/null 2>&1; buildah rm "$ctr" >/dev/null 2>&1' EXIT
root=$(buildah mount "$ctr")

install -D -m 0755 "$bin" "$root/usr/sbin/stackpilot"
# Every library at the path ldd found it at, and the dynamic loader (the
# line without "=>"); the vDSO has no file.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
while read -r lib; do
	install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
done
# /run/stackpilot: locks and the undo state; /var/lib/stackpilot: saved
# tunables (--persist, --config); /etc/stackpilot: the config file, mounted.
# /sys, /proc and /tmp come from the runtime.
mkdir -p "$root/run/stackpilot" "$root/var/lib/stackpilot" "$root/etc/stackpilot" \
	 "$root/sys" "$root/proc" "$root/tmp"
chmod 1777 "$root/tmp"
buildah config \
	--entrypoint '["/usr/sbin/stackpilot"]' \
	--cmd 'run --config /etc/stackpilot/stackpilot.conf --interval 0' \
	--workingdir / \
	--env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	--port 9477/tcp \
	--label org.opencontainers.image.title=stackpilot \
	--label org.opencontainers.image.version="$version" \
	--label org.opencontainers.image.description="eBPF network policies per cgroup" \
	--label org.opencontainers.image.licenses=GPL-2.0 \
	"$ctr"
buildah umount "$ctr" >/dev/null
buildah commit -q --rm "$ctr" "$name:$version" >/dev/null
trap - EXIT
buildah tag "$name:$version" "$name:latest"
echo "image: $name:$version and $name:latest"
