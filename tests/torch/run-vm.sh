#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# torch_rbln's pytest in the VM (tests/torch/README.md).
#   run-vm.sh quick   one VM of 2 Rebel100 cards, every test but the
#                     slow ones (make test's subset: one Python process)
#   run-vm.sh all     that VM with every test, then 4 ATOM cards
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
vm="$top/tools/vm/rbln-vm"
mode=${1:-quick}
case $mode in quick | all) ;; *) echo "usage: run-vm.sh quick|all" >&2; exit 2 ;; esac
[ -f "$top/build/torch/torch_rbln/_C.cpython-311-x86_64-linux-gnu.so" ] ||
	ls "$top"/build/torch/torch_rbln/_C*.so >/dev/null 2>&1 ||
	{ echo "run-vm.sh: build torch_rbln first (make torch)" >&2; exit 1; }

# In the guest: the host root is read-only, so no bytecode and no cache.
pytest_cmd() { # marker expression
	echo "cd '$top/tests/torch' && PYTHONPATH='$top/build/torch' PYTHONDONTWRITEBYTECODE=1" \
		"/usr/bin/python3 -m pytest -q --color=no -p no:cacheprovider -m '$1' ."
}

if [ "$mode" = quick ]; then
	"$vm" -q --timeout 900 --cards 2 -- bash -c "$(pytest_cmd 'not full')"
	exit
fi
rc=0
"$vm" -q --timeout 1200 --cards 2 -- bash -c "$(pytest_cmd 'not atom4')" || rc=1
"$vm" -q --timeout 900 --cards 4 --family atom --hbm 128M -- \
	bash -c "$(pytest_cmd 'atom4 or not card')" || rc=1
exit $rc
