#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs every rbln kselftest binary and exits non-zero if any failed.
#
#   tests/kselftest/run.sh [BINDIR [PATTERN...]]
#
# BINDIR defaults to build/cmake/tests/kselftest.  With PATTERNs, only the
# binaries whose name contains one of them run (run.sh DIR info runs
# rbln_get_info_test only).
#
# Meant for the rbln VM: tools/vm/rbln-vm -- tests/kselftest/run.sh build/cmake/tests/kselftest
# Read-only tests run first, then the memory tests (buffers, VMs, PRIME:
# they change no card state that outlives them), the job tests (queues,
# packets, syncobjs, io_uring), the ones that reset rings, unbind and fault
# cards last.  After
# each binary every card must be bound to rbln again (the tests restore it in
# their teardown; a card left unbound is a failure of that binary).  The TAP
# output of each binary is copied to $RBLN_VM_RESULTS/kselftest/ when set.

set -u

bindir=${1:-build/cmake/tests/kselftest}
[ $# -gt 0 ] && shift
all="rbln_get_info_test rbln_uapi_errors_test rbln_sysfs_test
rbln_bo_test rbln_bo_errors_test rbln_mem_stats_test rbln_userptr_test
rbln_hbm_full_test rbln_coherence_test rbln_isolation_test rbln_prime_test
rbln_dmabuf_export_test
rbln_submit_copy_test rbln_submit_kernels_test rbln_submit_sync_test
rbln_submit_errors_test rbln_submit_uring_test rbln_graph_test rbln_release_test
rbln_mmu_fault_test rbln_submit_fault_test
rbln_unplug_test rbln_removal_test rbln_fw_fault_test rbln_probe_fail_test"
tests=
for t in $all; do
	if [ $# -eq 0 ]; then
		tests="$tests $t"
		continue
	fi
	for p in "$@"; do
		case $t in *"$p"*) tests="$tests $t"; break ;; esac
	done
done
if [ -z "$tests" ]; then
	echo "run.sh: no test matches: $*" >&2
	exit 2
fi

if [ ! -d "$bindir" ]; then
	echo "run.sh: no such directory: $bindir (build with cmake first)" >&2
	exit 2
fi

outdir=
if [ -n "${RBLN_VM_RESULTS:-}" ]; then
	outdir=$RBLN_VM_RESULTS/kselftest
	mkdir -p "$outdir" || outdir=
fi
logdir=${outdir:-$(mktemp -d /tmp/rbln-ksft.XXXXXX)}

# PCI functions that should be bound to rbln (driver_override = rbln).
rbln_functions() {
	for d in /sys/bus/pci/devices/*; do
		[ -r "$d/driver_override" ] || continue
		[ "$(cat "$d/driver_override" 2>/dev/null)" = rbln ] && basename "$d"
	done
}

unbound_functions() {
	for f in $(rbln_functions); do
		drv=$(readlink "/sys/bus/pci/devices/$f/driver" 2>/dev/null)
		[ "${drv##*/}" = rbln ] || echo "$f"
	done
}

before=$(unbound_functions)
if [ -n "$before" ]; then
	echo "run.sh: not bound to rbln before the tests: $before" >&2
fi

pass=0
fail=0
failed=
for t in $tests; do
	bin=$bindir/$t
	if [ ! -x "$bin" ]; then
		echo "not ok - $t: missing binary $bin"
		fail=$((fail + 1))
		failed="$failed $t"
		continue
	fi
	echo "# ==== $t"
	start=$(date +%s)
	"$bin" >"$logdir/$t.tap" 2>&1
	rc=$?
	cat "$logdir/$t.tap"
	secs=$(($(date +%s) - start))
	left=$(unbound_functions)
	if [ -n "$left" ] && [ -z "$before" ]; then
		echo "# $t left PCI functions unbound: $left"
		rc=1
	fi
	if [ "$rc" -eq 0 ]; then
		echo "ok - $t (${secs}s)"
		pass=$((pass + 1))
	else
		echo "not ok - $t (exit $rc, ${secs}s)"
		fail=$((fail + 1))
		failed="$failed $t"
	fi
done

echo "# kselftest: $pass passed, $fail failed${failed:+ (failed:$failed)}; logs in $logdir"
[ "$fail" -eq 0 ]
