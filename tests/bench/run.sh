#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs the rbln benchmarks inside the rbln VM and keeps their output.
#
#   tools/vm/rbln-vm -q -- tests/bench/run.sh [BINDIR [options]]
#   tools/vm/rbln-vm -q --hbm 512M -- tests/bench/run.sh   # copies up to 256 MiB
#
# BINDIR defaults to build/cmake/tests/bench.  The options (--card N,
# --min-ms MS, --min-iters N) go to every binary: rbln_bench (buffer
# objects; loads vgem, its baseline, first: without it the vgem columns say
# n/a), rbln_submit_bench (job submission and copy bandwidth) and
# rbln_umd_bench (librbln's submission against raw io_uring).  Each
# table is copied to $RBLN_VM_RESULTS/bench/<binary>.txt when set.  Exits
# non-zero if a binary failed; no figure is judged.

set -u

bindir=${1:-build/cmake/tests/bench}
[ $# -gt 0 ] && shift
for b in rbln_bench rbln_submit_bench rbln_umd_bench; do
	if [ ! -x "$bindir/$b" ]; then
		echo "run.sh: no $bindir/$b (build with cmake first)" >&2
		exit 2
	fi
done

if ! modprobe vgem 2>/dev/null; then
	echo "run.sh: modprobe vgem failed: no vgem baseline" >&2
fi

status=0
for b in rbln_bench rbln_submit_bench rbln_umd_bench; do
	log=$(mktemp /tmp/rbln-bench.XXXXXX) || exit 2
	"$bindir/$b" "$@" >"$log" 2>&1
	rc=$?
	cat "$log"
	echo
	if [ -n "${RBLN_VM_RESULTS:-}" ] && mkdir -p "$RBLN_VM_RESULTS/bench"; then
		cp "$log" "$RBLN_VM_RESULTS/bench/$b.txt"
	fi
	rm -f "$log"
	[ "$rc" -eq 0 ] || status=$rc
done
exit "$status"
