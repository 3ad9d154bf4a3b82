#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The VM runner from a checkout whose path is 150 bytes or more (run on the
# host by run.sh; each case boots a VM or starts to):
#  - `make vm` runs a command with two cards: the emulators' and QEMU's
#    UNIX sockets live in a private 0700 runtime directory under
#    $XDG_RUNTIME_DIR, not under the checkout (a socket path holds at most
#    107 bytes; the runner used to put them in build/vm-runs/ID and failed
#    from any checkout path longer than about 40 bytes);
#  - the guest sees the long checkout (cwd, module) through its 9p root, the
#    initramfs is built under it, the RAM file carries its tag;
#  - the runtime directory is removed after a succeeding command, a failing
#    command (with /tmp as the fallback when $XDG_RUNTIME_DIR is unusable),
#    an emulator that does not start, a TERM to the runner, and QEMU dying;
#    no emulator, QEMU or RAM file is left behind.
#
# Why not a fresh clone and a plain `make vm`: `make vm` first runs
# `make all`, which in a clone builds rbln.ko and all of user space (many
# minutes on 2 cores) before the one VM step this test is about.  Instead
# this copies what `make vm` and the runner read -- Makefile, tools/vm/,
# kernel/rbln.ko, build/kver, rbln-emu -- into a directory under /tmp (where
# the CI clone /tmp/<40 hex digits>/src failed) with a path of >= 150 bytes
# and runs `make -o all vm` there: the same target and the same runner, with
# every path derived from the long checkout (run directory, initramfs,
# module, guest cwd, RAM file tag).  Only the build is skipped.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
emu="$top/build/cmake/tools/rbln-emu/rbln-emu"
pass=0 fail=0

ok() { echo "ok - $1"; pass=$((pass + 1)); }
notok() { echo "not ok - $1${2:+ ($2)}"; fail=$((fail + 1)); }
check() { # name expected-rc actual-rc
	if [ "$2" = "$3" ]; then ok "$1"; else notok "$1" "expected exit $2, got $3"; fi
}

for f in "$top/kernel/rbln.ko" "$emu" "$top/build/kver"; do
	[ -e "$f" ] || { echo "not ok - long-path runner test: no $f (run make)"; exit 1; }
done

base=$(mktemp -d /tmp/rbln-runner-test.XXXXXX) || exit 1
xdg=$(mktemp -d /tmp/rbln-runner-xdg.XXXXXX) || { rm -rf "$base"; exit 1; }
hex=0123456789abcdef0123456789abcdef01234567
long="$base/$hex/$hex/$hex/src"
bg=""
finish() {
	[ -n "$bg" ] && kill "$bg" 2>/dev/null && wait "$bg" 2>/dev/null
	rm -rf "$base" "$xdg"
}
trap finish EXIT
mkdir -p "$long/tools/vm" "$long/kernel" "$long/build/cmake/tools/rbln-emu"
cp -p "$top/Makefile" "$long/"
cp -p "$top/tools/vm/"* "$long/tools/vm/"
cp -p "$top/kernel/rbln.ko" "$long/kernel/"
cp -p "$top/build/kver" "$long/build/"
cp -p "$emu" "$long/build/cmake/tools/rbln-emu/"
vm="$long/tools/vm/rbln-vm"
echo "# checkout copy at a path of ${#long} bytes: $long"
[ "${#long}" -ge 150 ] || notok "the checkout path is at least 150 bytes" "${#long}"

# What the runner names after the checkout: the RAM file in /dev/shm and
# the runtime directory rbln-vm-TAG.XXXXXX.
tag=$(printf '%s' "$long" | cksum | cut -d' ' -f1)
rtdirs() { compgen -G "$xdg/rbln-vm-*"; compgen -G "/tmp/rbln-vm-$tag.*"; }
ramfiles() { compgen -G "/dev/shm/rbln-vm-$tag-*"; }
# Emulators and QEMUs of this checkout: their command lines name its RAM file.
procs() { pgrep -f "/dev/shm/rbln-vm-$tag-" 2>/dev/null; }
nothing_left() { # case name
	local left
	left=$(rtdirs; procs; ramfiles)
	if [ -z "$left" ]; then
		ok "$1: no runtime directory, emulator, QEMU or RAM file left"
	else
		notok "$1: no runtime directory, emulator, QEMU or RAM file left" "left: ${left//$'\n'/ }"
	fi
}
# Waits (up to 60 s) until the background run has its control sockets and
# QEMU up; prints the runtime directory.
wait_for_qemu() {
	local d
	for _ in $(seq 600); do
		kill -0 "$bg" 2>/dev/null || return 1
		for d in $(rtdirs); do
			if [ -S "$d/card0.ctl" ] && pgrep -f "qemu-system-x86_64 .*path=$d/card0.sock" >/dev/null; then
				echo "$d"
				return 0
			fi
		done
		sleep 0.1
	done
	return 1
}

# 1: `make vm` with two cards.  The guest command checks that both cards
# were bound (their emulators answered on the ivshmem sockets), that both
# control ports are there (QEMU's chardev sockets connected), and that the
# cwd is the long checkout (the guest's 9p root with the /tmp bind).
# (One line: make's recipe takes CMD in single quotes.)
cmd='test -c /dev/accel/accel0 && test -c /dev/accel/accel1'
cmd+=' && test -e /dev/virtio-ports/rbln-emu.0 && test -e /dev/virtio-ports/rbln-emu.1'
cmd+=' && test -f kernel/rbln.ko && test -f tools/vm/rbln-vm'
(cd "$long" && exec env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS XDG_RUNTIME_DIR="$xdg" \
	make -s -o all vm CARDS=2 CMD="$cmd" VMARGS="-q --timeout 180") &
bg=$!
seen="" mode="" ram=""
while kill -0 "$bg" 2>/dev/null; do
	for d in "$xdg"/rbln-vm-"$tag".*; do
		if [ -S "$d/card0.sock" ] && [ -S "$d/card1.sock" ]; then
			seen=$d
			mode=$(stat -c %a "$d")
		fi
	done
	ramfiles >/dev/null && ram=1
	[ -n "$seen" ] && [ -n "$ram" ] && break
	sleep 0.05
done
wait "$bg"
rc=$?
bg=""
check "make vm from a ${#long}-byte path runs a command with two cards" 0 "$rc"
if [ -n "$seen" ] && [ "$mode" = 700 ]; then
	ok "the sockets live in a private runtime directory under \$XDG_RUNTIME_DIR"
else
	notok "the sockets live in a private runtime directory under \$XDG_RUNTIME_DIR" \
		"seen '${seen}' mode '${mode}'"
fi
if [ -n "$ram" ]; then
	ok "the RAM file carries the long checkout's tag"
else
	notok "the RAM file carries the long checkout's tag"
fi
kver=$(cat "$top/build/kver")
if [ -s "$long/build/vm/initramfs-$kver.cpio.gz" ]; then
	ok "the initramfs is built under the long checkout"
else
	notok "the initramfs is built under the long checkout"
fi
nothing_left "after a succeeding command"

# 2: a failing command, and an $XDG_RUNTIME_DIR the runner cannot use (not
# a directory): the runtime directory goes to /tmp and is removed.
XDG_RUNTIME_DIR=/nonexistent "$vm" -q --timeout 120 -- sh -c 'exit 7'
check "a failing command from the long path fails the run with its status" 7 $?
nothing_left "after a failing command"

# 3: an emulator that does not start (an option it rejects).
XDG_RUNTIME_DIR=$xdg "$vm" -q --timeout 120 --emu-arg --no-such-option -- true 2>/dev/null
check "an emulator that does not start fails the run as a setup failure" 125 $?
nothing_left "after an emulator failed to start"

# 4: TERM to the runner while the VM runs.
XDG_RUNTIME_DIR=$xdg "$vm" -q --timeout 120 -- sleep 600 2>/dev/null &
bg=$!
if wait_for_qemu >/dev/null; then
	kill -TERM "$bg"
	wait "$bg"
	check "TERM ends the run" 143 $?
else
	notok "TERM ends the run" "QEMU did not start"
fi
bg=""
nothing_left "after TERM"

# 5: QEMU dies under the runner.
XDG_RUNTIME_DIR=$xdg "$vm" -q --timeout 120 -- sleep 600 2>/dev/null &
bg=$!
if d=$(wait_for_qemu); then
	kill -KILL $(pgrep -f "qemu-system-x86_64 .*path=$d/card0.sock")
	wait "$bg"
	check "QEMU dying ends the run as a setup failure" 125 $?
else
	notok "QEMU dying ends the run as a setup failure" "QEMU did not start"
fi
bg=""
nothing_left "after QEMU died"

echo "long-path: $pass passed, $fail failed"
[ "$fail" = 0 ]
