#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the VM for `make demo`: shows the cards with rbln-smi, then
# puts the card to work through the driver and shows it again.
set -euo pipefail
smi=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
echo
"$smi"
echo
"$smi" -L
demo="$top/build/cmake/tests/kselftest/rbln_get_info_test"
if [ -x "$demo" ]; then
	echo
	echo "== identity and telemetry through the driver (GET_INFO, admin ring round trips) =="
	"$demo" | grep -E "^(ok|not ok|# PASSED|# FAILED)"
fi
