#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Tests of the VM runner itself (run on the host; each case boots a VM):
#  - a command's exit status comes back as the runner's;
#  - a failing command fails the run;
#  - a kernel WARN in the guest fails a run whose command succeeded;
#  - no emulator, QEMU, shm file or runtime directory is left behind;
#  - long-path.sh: the runner from a checkout path of 150 bytes or more.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
vm="$top/tools/vm/rbln-vm"
kver=$(cat "$top/build/kver")
warn_ko="$top/build/runner-warn/rbln_vmtest_warn.ko"
pass=0 fail=0

check() { # name expected-rc actual-rc
	if [ "$2" = "$3" ]; then
		echo "ok - $1"
		pass=$((pass + 1))
	else
		echo "not ok - $1 (expected exit $2, got $3)"
		fail=$((fail + 1))
	fi
}

# Leftovers of this checkout's runs only: other checkouts (a CI clone next
# to a working tree) may run VMs at the same time.
tag=$(printf '%s' "$top" | cksum | cut -d' ' -f1)
leftovers() {
	local n
	n=$(compgen -G "/dev/shm/rbln-vm-$tag-*" | wc -l)
	n=$((n + $(pgrep -fc "rbln-emu --family .*--guest-ram /dev/shm/rbln-vm-$tag-" || true)))
	n=$((n + $(compgen -G "/tmp/rbln-vm-$tag.*" | wc -l)))
	[ -z "${XDG_RUNTIME_DIR:-}" ] || n=$((n + $(compgen -G "$XDG_RUNTIME_DIR/rbln-vm-$tag.*" | wc -l)))
	echo "$n"
}

before=$(leftovers)

"$vm" -q --timeout 120 -- true
check "a succeeding command passes the run" 0 $?

"$vm" -q --timeout 120 -- sh -c 'exit 7'
check "a failing command fails the run with its status" 7 $?

rm -rf "$top/build/runner-warn"
mkdir -p "$top/build/runner-warn"
cp "$top/tests/runner/warn-module/"* "$top/build/runner-warn/"
make -s -C "/lib/modules/$kver/build" M="$top/build/runner-warn" modules >/dev/null
"$vm" -q --timeout 120 -- insmod "$warn_ko"
check "a kernel WARN in the guest fails the run" 126 $?

check "no emulator, shm file or runtime directory left behind" "$before" "$(leftovers)"

"$top/tests/runner/long-path.sh"
check "the runner works from a checkout path of 150 bytes or more" 0 $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
