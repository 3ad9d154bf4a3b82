#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# torch_rbln's pytest in the VM (tests/torch/README.md).
#   run-vm.sh quick   one VM of 2 Rebel100 cards, every test but the
#                     slow ones (make test's subset: one Python process)
#   run-vm.sh all     that VM with every test, then 4 ATOM cards, then
#                     two-vms
#   run-vm.sh two-vms torch.distributed's rbln backend across two VMs of
#                     one card each, joined by a QEMU UDP socket network
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
vm="$top/tools/vm/rbln-vm"
mode=${1:-quick}
case $mode in quick | all | two-vms) ;; *) echo "usage: run-vm.sh quick|all|two-vms" >&2; exit 2 ;; esac
[ -f "$top/build/torch/torch_rbln/_C.cpython-311-x86_64-linux-gnu.so" ] ||
	ls "$top"/build/torch/torch_rbln/_C*.so >/dev/null 2>&1 ||
	{ echo "run-vm.sh: build torch_rbln first (make torch)" >&2; exit 1; }

# In the guest: the host root is read-only, so no bytecode and no cache.
pytest_cmd() { # marker expression
	echo "cd '$top/tests/torch' && PYTHONPATH='$top/build/torch' PYTHONDONTWRITEBYTECODE=1" \
		"/usr/bin/python3 -m pytest -q --color=no -p no:cacheprovider -m '$1' ."
}

# Two ranks in two VMs (10.77.0.1 and .2 on one UDP-socket Ethernet
# segment), each on its VM's only card; rank 0 hosts the TCP store.  Each
# prints dist_worker.py's JSON report; every check must be "ok" on both.
two_vms() {
	local base=$((20000 + RANDOM % 20000)) out rc=0 r pids=()
	out=$(mktemp -d)
	for r in 0 1; do
		local worker="cd '$top/tests/torch' && PYTHONPATH='$top/build/torch'"
		worker+=" PYTHONDONTWRITEBYTECODE=1 RANK=$r WORLD_SIZE=2 MASTER_ADDR=10.77.0.1"
		worker+=" MASTER_PORT=29500 RBLN_DIST_CARD=0 GLOO_SOCKET_IFNAME=\$RBLN_VM_NETDEV"
		# stderr (PyTorch's and glog's warnings) only on failure: the
		# console's "WARNING:" lines would read as a kernel splat.
		worker+=" /usr/bin/python3 dist_worker.py test 2>/tmp/rank.err"
		worker+="; rc=\$?; [ \$rc = 0 ] || tail -n 40 /tmp/rank.err; exit \$rc"
		"$vm" -q --timeout 1200 --cards 1 --net-udp "$((base + r)):$((base + 1 - r))" \
			--ip "10.77.0.$((r + 1))/24" -- bash -c "$worker" > "$out/rank$r" 2>&1 &
		pids+=($!)
	done
	for r in 0 1; do
		wait "${pids[$r]}" || { echo "two-vms: VM of rank $r failed:"; cat "$out/rank$r"; rc=1; }
	done
	[ $rc = 0 ] && /usr/bin/python3 - "$out/rank0" "$out/rank1" <<'PY' || rc=1
import json, sys
bad = 0
for path in sys.argv[1:]:
    lines = [l for l in open(path) if l.startswith("{")]
    if not lines:
        print(f"two-vms: no report in {path}:\n" + open(path).read()[-3000:])
        bad = 1
        continue
    rep = json.loads(lines[-1])
    for name, res in rep["results"].items():
        if res != "ok":
            print(f"two-vms: rank {rep['rank']}: {name} FAILED\n{res}")
            bad = 1
    print(f"two-vms: rank {rep['rank']} (card {rep['card']}): "
          f"{sum(v == 'ok' for v in rep['results'].values())}/{len(rep['results'])} checks ok, "
          f"{rep['seconds']:.0f}s, DDP max |diff| {rep.get('ddp_max_diff', float('nan')):.2g}")
sys.exit(bad)
PY
	rm -rf "$out"
	return $rc
}

if [ "$mode" = two-vms ]; then
	two_vms
	exit
fi
if [ "$mode" = quick ]; then
	"$vm" -q --timeout 900 --cards 2 -- bash -c "$(pytest_cmd 'not full')"
	exit
fi
rc=0
"$vm" -q --timeout 1200 --cards 2 -- bash -c "$(pytest_cmd 'not atom4')" || rc=1
"$vm" -q --timeout 900 --cards 4 --family atom --hbm 128M -- \
	bash -c "$(pytest_cmd 'atom4 or not card')" || rc=1
two_vms || rc=1
exit $rc
