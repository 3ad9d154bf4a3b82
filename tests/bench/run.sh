#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs the rbln benchmarks inside the rbln VM and keeps their output.
#
#   tools/vm/rbln-vm -q -- tests/bench/run.sh [BINDIR [rbln_bench options]]
#
# BINDIR defaults to build/cmake/tests/bench.  Loads vgem (the baseline of
# BO creation) first; without it the vgem columns say n/a.  The table is
# copied to $RBLN_VM_RESULTS/bench/ when set.  Exits with rbln_bench's
# status; no figure is judged.

set -u

bindir=${1:-build/cmake/tests/bench}
[ $# -gt 0 ] && shift
bin=$bindir/rbln_bench
if [ ! -x "$bin" ]; then
	echo "run.sh: no $bin (build with cmake first)" >&2
	exit 2
fi

if ! modprobe vgem 2>/dev/null; then
	echo "run.sh: modprobe vgem failed: no vgem baseline" >&2
fi

log=$(mktemp /tmp/rbln-bench.XXXXXX) || exit 2
"$bin" "$@" >"$log" 2>&1
rc=$?
cat "$log"
if [ -n "${RBLN_VM_RESULTS:-}" ] && mkdir -p "$RBLN_VM_RESULTS/bench"; then
	cp "$log" "$RBLN_VM_RESULTS/bench/rbln_bench.txt"
fi
rm -f "$log"
exit "$rc"
