#!/bin/sh
# make-deb.sh OUTDIR [VERSION ...]: the Debian package, built by debhelper
# (dpkg-buildpackage -b) in a copy of this tree, written to OUTDIR as
# stackpilot_VERSION_ARCH.deb; prints each file's path. A VERSION replaces
# debian/changelog's without touching the tree (a snapshot, or a test of an
# upgrade); with several, one package each, the later ones rebuilding only
# what the version changes (the binary's --version and what embeds it).
set -e
out=${1:?usage: make-deb.sh OUTDIR [VERSION ...]}
shift
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
for v in "$@"; do
	case $v in
	[0-9]*) ;;
	*) echo "make-deb: version '$v' must start with a digit" >&2; exit 2 ;;
	esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/stackpilot"
# What the build reads; not build/, nor anything made by a test.
(cd "$src" && tar -cf - Makefile VERSION vmlinux.h bpf include src scripts dist docs debian) |
	tar -xf - -C "$tmp/stackpilot"
: "${DEB_BUILD_OPTIONS=parallel=$(nproc) noautodbgsym}"
export DEB_BUILD_OPTIONS
# Called from make: its command line's variables must not reach debian/rules.
unset MAKEFLAGS MFLAGS MAKELEVEL
[ $# -gt 0 ] || set -- ""
nc=
for v in "$@"; do
	[ -z "$v" ] || sed -i "1s/^stackpilot ([^)]*)/stackpilot ($v)/" "$tmp/stackpilot/debian/changelog"
	rm -f "$tmp"/*.deb
	(cd "$tmp/stackpilot" && dpkg-buildpackage -b -us -uc $nc) >"$tmp/log" 2>&1 || {
		tail -40 "$tmp/log" >&2
		echo "make-deb: dpkg-buildpackage failed (the last 40 lines above)" >&2
		exit 1
	}
	for f in "$tmp"/stackpilot_*.deb; do
		cp "$f" "$out/"
		echo "$out/${f##*/}"
	done
	nc=-nc
done
