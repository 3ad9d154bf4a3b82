#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The kselftests with kernel allocation failures injected, probe's error
# unwinding, and a working card afterwards, on the debug kernel (KASAN,
# lockdep, kmemleak): tests/runner/failslab-guest.sh in a 1-card VM run by
# rbln-vm --debug-kernel --fault-injection.  Any oops, WARN (but the known
# PAT one, told apart and counted), KASAN/lockdep report, kmemleak object or
# hang fails it.
#
#   tests/runner/failslab.sh [PROBABILITY [PATTERN...]]   (default 10 %, every
#   kselftest binary; PATTERNs: only those whose name holds one of them)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/tools/scripts/build-debug-kernel.sh" --print >/dev/null ||
	{ echo "failslab: no debug kernel (run tools/scripts/build-debug-kernel.sh)"; exit 2; }
exec "$top/tools/vm/rbln-vm" -q --debug-kernel --fault-injection --timeout 5400 \
	--modparams job_timeout_ms=2000 -- "$top/tests/runner/failslab-guest.sh" \
	"$top/build/cmake/tests/kselftest" "$top/build/cmake/tools/rbln-smi/rbln-smi" "${1:-10}" "${@:2}"
