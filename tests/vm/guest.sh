#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Inside the VM, as PID 1 after switch_root: the mounts a booted Debian host
# has (cgroup v2 alone at /sys/fs/cgroup; no bpffs: the loader mounts it, as
# on a bare CI machine), then the job the host wrote in /sp-out/job, its
# output to /sp-out/log (and the console), its exit status to /sp-out/rc.
# Powers off whatever happens.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
off() { sync; echo o >/proc/sysrq-trigger; sleep 10 2>/dev/null; }
trap off EXIT
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
# What udev makes on a booted host: bash's <(...) needs /dev/fd.
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
for d in /tmp /run /var/tmp /dev/shm; do mount -t tmpfs tmpfs "$d"; done
chmod 1777 /tmp /var/tmp /dev/shm
ip link set lo up
hostname sp-vm
echo 1 >/proc/sys/kernel/sysrq
ulimit -n 65536
# The job: KEY=VALUE lines (SP_ROOT, SP_BUILD, SP_VM_KERNEL, SP_TESTS).
set -a; . /sp-out/job; set +a
# The checkout, at its own path, over whatever tmpfs above covers it.
mkdir -p "$SP_ROOT"
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose checkout "$SP_ROOT" ||
	{ echo "vm-guest: cannot mount the checkout at $SP_ROOT" >/dev/console; exit 1; }
cd "$SP_ROOT" || exit 1
if [ -n "${SP_CMD:-}" ]; then
	# A command of one's own (VM_CMD, for a look around): its output only.
	bash -c "$SP_CMD" >/sp-out/log 2>&1 </dev/null
	echo $? >/sp-out/rc
	exit
fi
echo "vm-guest: $(uname -r), running tests/run.sh $SP_TESTS" >/dev/console
# shellcheck disable=SC2086
tests/run.sh $SP_TESTS 2>&1 | tee /sp-out/log >/dev/console
echo "${PIPESTATUS[0]}" >/sp-out/rc
