#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The bounded soak (tests/soak/README.md): boots one VM with two emulated
# Rebel100 cards and runs tests/soak/in-vm.sh in it for SECONDS (default
# 600).  `make soak SECONDS=N` runs it; `make test` runs 120 s of it
# (tools/scripts/test-vm.sh).  Exit status: the soak's (0 passed).
# usage: run.sh [SECONDS]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-600}
case $secs in
'' | *[!0-9]*)
	echo "usage: run.sh [SECONDS]" >&2
	exit 2
	;;
esac
for f in "$top/build/cmake/tests/soak/rbln-soak" "$top/build/cmake/tools/rbln-smi/rbln-smi" \
	"$top/kernel/rbln.ko"; do
	[ -e "$f" ] || { echo "soak: $f is missing: run make first" >&2; exit 2; }
done
# A short job timeout: each injected hang costs its chiplet a ring reset
# 2 s after the hung job started instead of the default 10 s.  The VM's
# timeout covers the soak, the boot and the final checks with room for a
# loaded machine.
exec "$top/tools/vm/rbln-vm" -q --cards 2 --timeout $((secs + 600)) \
	--modparams job_timeout_ms=2000 -- \
	"$top/tests/soak/in-vm.sh" "$top/build/cmake" "$secs"
