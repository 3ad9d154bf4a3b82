#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the rbln test VM, chrooted into the host root (see init):
# loads rbln.ko with its dependencies, binds the emulated cards, runs the
# command of this run and leaves its exit status and the kernel log in the
# results directory.
set -u
# shellcheck source=/dev/null
. "$RBLN_RUN/config.sh"
res="$RBLN_RUN/results"
export RBLN_VM=1 RBLN_VM_CARDS RBLN_VM_FAMILY RBLN_VM_HBM RBLN_VM_RESULTS="$res"
[ "${RBLN_VM_HOTPLUG_ON:-0}" = 1 ] && export RBLN_VM_HOTPLUG="$res/hotplug"
export HOME=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

finish() {
	echo "$1" > "$res/rc"
	dmesg > "$res/dmesg.txt" 2>&1
	exit 0
}

say() { echo "rbln-vm: $*"; }

dbg=/sys/kernel/debug
# A kernel with DMA-API debugging prints only its first error unless told
# otherwise; error_count counts them all (read by debug_checks).
[ -w "$dbg/dma-api/all_errors" ] && echo 1 > "$dbg/dma-api/all_errors"

# The debug kernel's end-of-run checks (rbln-vm --debug-kernel; rbln-vm
# reads the files and fails the run): unload rbln.ko, so that its remove
# path runs under the checkers and nothing it leaked stays referenced;
# then two kmemleak scans a few seconds apart (an object is reported once
# it has stayed unreferenced across scans); then the DMA-API error count
# and whether lockdep is still on (it turns itself off at its first report
# or when it runs out of table space, and sees nothing after that).
debug_checks() {
	[ "${RBLN_VM_CHECKS:-0}" = 1 ] || return 0
	local t0=$SECONDS
	if grep -q '^rbln ' /proc/modules && ! rmmod rbln 2> "$res/unload.txt"; then
		say "rmmod rbln failed: $(cat "$res/unload.txt")"
		grep '^rbln ' /proc/modules >> "$res/unload.txt"
	else
		rm -f "$res/unload.txt"
	fi
	if [ -w "$dbg/kmemleak" ]; then
		echo scan > "$dbg/kmemleak"
		sleep 5
		echo scan > "$dbg/kmemleak"
		cat "$dbg/kmemleak" > "$res/kmemleak.txt"
	fi
	[ -r "$dbg/dma-api/error_count" ] && cat "$dbg/dma-api/error_count" > "$res/dma-api-errors"
	[ -r /proc/lockdep_stats ] &&
		sed -n 's/^ *debug_locks: *//p' /proc/lockdep_stats > "$res/debug-locks"
	say "debug checks took $((SECONDS - t0))s"
}

# Dependencies of rbln.ko come from the VM kernel's own modules.
if [ "$RBLN_VM_DKMS" = 1 ]; then
	modprobe rbln $RBLN_VM_MODPARAMS || { say "modprobe rbln (DKMS) failed"; finish 125; }
	say "loaded $(modinfo -n rbln) (DKMS)"
elif [ -n "$RBLN_VM_MODULE" ]; then
	deps=$(modinfo -F depends "$RBLN_VM_MODULE" | tr ',' ' ')
	[ -z "$deps" ] || modprobe -a $deps || { say "modprobe $deps failed"; finish 125; }
	insmod "$RBLN_VM_MODULE" $RBLN_VM_MODPARAMS || { say "insmod $RBLN_VM_MODULE failed"; finish 125; }
fi

# Bind every emulated card (ivshmem function 1af4:1110) to rbln, in BDF order.
if [ "$RBLN_VM_BIND" = 1 ]; then
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x1110 ] || continue
		echo rbln > "$d/driver_override"
		echo "$(basename "$d")" > /sys/bus/pci/drivers_probe 2>/dev/null ||
			say "binding $(basename "$d") to rbln failed"
	done
fi

# Loopback, for commands that talk TCP to themselves (torch.distributed's store).
ip link set lo up 2>/dev/null || say "ip link set lo up failed"

# The NIC of --net-udp / --ip: its address, and its name for the command.
if [ -n "${RBLN_VM_IP:-}" ]; then
	modprobe virtio_net || { say "modprobe virtio_net failed"; finish 125; }
	for _ in $(seq 50); do
		RBLN_VM_NETDEV=""
		for n in /sys/class/net/*; do
			[ "${n##*/}" = lo ] || { RBLN_VM_NETDEV=${n##*/}; break; }
		done
		[ -n "$RBLN_VM_NETDEV" ] && break
		sleep 0.1
	done
	[ -n "$RBLN_VM_NETDEV" ] || { say "no network interface for $RBLN_VM_IP"; finish 125; }
	ip addr add "$RBLN_VM_IP" dev "$RBLN_VM_NETDEV" && ip link set "$RBLN_VM_NETDEV" up ||
		{ say "configuring $RBLN_VM_NETDEV as $RBLN_VM_IP failed"; finish 125; }
	export RBLN_VM_NETDEV
fi

say "command starts at uptime $(cut -d" " -f1 /proc/uptime)s"
cd "$RBLN_VM_CWD" 2>/dev/null || cd /
bash "$RBLN_RUN/cmd.sh"
rc=$?
debug_checks
finish $rc
