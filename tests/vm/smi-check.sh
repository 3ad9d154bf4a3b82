#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Checks rbln-smi inside the rbln VM against what the VM runner started:
# RBLN_VM_CARDS cards of family RBLN_VM_FAMILY with RBLN_VM_HBM bytes of HBM
# per chiplet.
#
#   tests/vm/smi-check.sh [RBLN_SMI]    (default build/cmake/tools/rbln-smi/rbln-smi)
#
# - the default view, -L and -j exit 0 and show every card, its family,
#   its chiplets and their HBM; -j is valid JSON (schema_version 1);
# - as an unprivileged user (no access to /dev/accel/*) rbln-smi still lists
#   the same cards from sysfs, and the card's sysfs and hwmon files are
#   readable;
# - with every card unbound it exits 4 ("no device") and says so; the cards
#   are bound again afterwards, also when a check failed;
# - each run is timed; the figures are printed at the end, with the time
#   of /bin/true as the baseline of this VM.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
smi=${1:-$top/build/cmake/tools/rbln-smi/rbln-smi}
py=/usr/bin/python3
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)

fails=0
timings=()
tmp=$(mktemp -d /tmp/smi-check.XXXXXX)

fail() {
	echo "not ok - $*"
	fails=$((fails + 1))
}

pass() {
	echo "ok - $*"
}

die() {
	echo "smi-check: $*" >&2
	exit 2
}

[ -x "$smi" ] || die "no rbln-smi at $smi (build it with cmake)"
[ -x "$py" ] || die "no $py"
[ "${RBLN_VM:-}" = 1 ] || die "run me inside the rbln VM (tools/vm/rbln-vm)"
cards=${RBLN_VM_CARDS:?RBLN_VM_CARDS unset}
family=${RBLN_VM_FAMILY:?RBLN_VM_FAMILY unset}
hbm=${RBLN_VM_HBM:?RBLN_VM_HBM unset}
case $family in
rebel100) chiplets=4 display=Rebel100 ;;
atom) chiplets=1 display=ATOM ;;
*) die "unknown RBLN_VM_FAMILY $family" ;;
esac

# The PCI functions bound to rbln, sorted (what sysfs says, not rbln-smi).
bound_bdfs() {
	local d
	for d in /sys/bus/pci/drivers/rbln/0000:*; do
		[ -e "$d" ] && basename "$d"
	done | sort
}

# run NAME OUTFILE CMD...: runs CMD, keeps stdout in OUTFILE and stderr in
# OUTFILE.err, records the time, returns the exit status.
run() {
	local name=$1 out=$2 t0 t1 rc
	shift 2
	t0=$(date +%s%N)
	"$@" >"$out" 2>"$out.err"
	rc=$?
	t1=$(date +%s%N)
	timings+=("$name $(((t1 - t0) / 1000000)) ms")
	return "$rc"
}

# Baseline for the timings: starting a trivial binary costs this much here
# (TCG and 9p make every exec slow; compare rbln-smi against it, not against
# times taken elsewhere).
run "baseline /bin/true" "$tmp/true" /bin/true

bdfs=$(bound_bdfs)
nbound=$(echo "$bdfs" | grep -c .)
[ "$nbound" = "$cards" ] || fail "sysfs: $nbound functions bound to rbln, RBLN_VM_CARDS=$cards"

# ---- the default view
if run "default" "$tmp/table" "$smi"; then
	ok=1
	for b in $bdfs; do
		grep -q "$b" "$tmp/table" || { fail "default view: no row for $b"; ok=0; }
	done
	n=$(grep -c "| $display " "$tmp/table")
	[ "$n" = "$cards" ] || { fail "default view: $n $display rows, want $cards"; ok=0; }
	grep -q "Driver (rbln.ko)" "$tmp/table" || { fail "default view: no driver version"; ok=0; }
	[ "$ok" = 1 ] && pass "default view lists $cards $display card(s)"
else
	fail "default view: exit $? ($(head -c 300 "$tmp/table.err"))"
fi

# ---- -L: one line per card
if run "-L" "$tmp/list" "$smi" -L; then
	ok=1
	n=$(grep -c '^NPU [0-9]*: ' "$tmp/list")
	[ "$n" = "$cards" ] || { fail "-L: $n lines, want $cards"; ok=0; }
	if [ "$chiplets" = 1 ]; then want="$display (1 chiplet, "; else want="$display ($chiplets chiplets, "; fi
	n=$(grep -cF "$want" "$tmp/list")
	[ "$n" = "$cards" ] || { fail "-L: $n lines say '$want', want $cards"; ok=0; }
	for b in $bdfs; do
		grep -q " $b " "$tmp/list" || { fail "-L: no line for $b"; ok=0; }
	done
	[ "$ok" = 1 ] && pass "-L: one line per card"
else
	fail "-L: exit $? ($(head -c 300 "$tmp/list.err"))"
fi

# check_json FILE WHO: the JSON document describes the cards of the VM.
check_json() {
	# shellcheck disable=SC2016
	"$py" - "$1" "$2" "$cards" "$family" "$chiplets" "$hbm" "$bdfs" <<'EOF'
import json, os, sys

path, who, cards, family, chiplets, hbm, bdfs = sys.argv[1:8]
cards, chiplets, hbm = int(cards), int(chiplets), int(hbm)
bdfs = bdfs.split()
errors = []

def check(cond, msg):
    if not cond:
        errors.append(msg)

try:
    doc = json.load(open(path))
except ValueError as e:
    print(f"not ok - -j ({who}): not JSON: {e}")
    sys.exit(1)

check(doc.get("schema_version") == 1, f"schema_version {doc.get('schema_version')!r}")
check(doc.get("driver", {}).get("name") == "rbln", f"driver {doc.get('driver')!r}")
check(bool(doc.get("driver", {}).get("version")), "no driver version")
cs = doc.get("cards")
check(isinstance(cs, list), "no cards array")
cs = cs if isinstance(cs, list) else []
check(len(cs) == cards, f"{len(cs)} cards, want {cards}")
check(sorted(c.get("pci_bdf") for c in cs) == sorted(bdfs),
      f"BDFs {[c.get('pci_bdf') for c in cs]}, sysfs says {bdfs}")
check([c.get("index") for c in cs] == list(range(len(cs))),
      f"indices {[c.get('index') for c in cs]}")
for c in cs:
    n = c.get("pci_bdf")
    check(c.get("family") == family, f"{n}: family {c.get('family')!r}, want {family}")
    check(c.get("chiplet_count") == chiplets, f"{n}: chiplet_count {c.get('chiplet_count')}")
    ch = c.get("chiplets") or []
    check(len(ch) == chiplets, f"{n}: {len(ch)} chiplet entries")
    for i, x in enumerate(ch):
        check(x.get("index") == i, f"{n}: chiplet {i} has index {x.get('index')}")
        check(x.get("hbm_total_bytes") == hbm,
              f"{n}: chiplet {i} HBM {x.get('hbm_total_bytes')}, want {hbm}")
    check(c.get("hbm_total_bytes") == hbm * chiplets,
          f"{n}: hbm_total_bytes {c.get('hbm_total_bytes')}, want {hbm * chiplets}")
    node = c.get("accel_node") or ""
    check(node.startswith("/dev/accel/accel") and os.path.exists(node), f"{n}: node {node!r}")
    check(str(c.get("fw_iface_version", "")).startswith("1."),
          f"{n}: fw_iface_version {c.get('fw_iface_version')!r}")
    check(bool(c.get("serial")), f"{n}: no serial")
    check(bool(c.get("fw_version")), f"{n}: no fw_version")
    check(bool(c.get("state")), f"{n}: no state")
    t = c.get("temperature_mc")
    check(isinstance(t, int) and 0 < t <= 110000, f"{n}: temperature_mc {t!r}")
    p = c.get("power_uw")
    check(isinstance(p, int) and 0 < p < 2000000000, f"{n}: power_uw {p!r}")

for e in errors:
    print(f"not ok - -j ({who}): {e}")
if errors:
    sys.exit(1)
print(f"ok - -j ({who}): valid JSON, {len(cs)} card(s) as started")
EOF
}

# ---- -j as root
if run "-j" "$tmp/json" "$smi" -j; then
	check_json "$tmp/json" root || fails=$((fails + 1))
else
	fail "-j: exit $? ($(head -c 300 "$tmp/json.err"))"
fi

# ---- as nobody: no access to the node, sysfs and hwmon suffice
for b in $bdfs; do
	for n in /sys/class/accel/accel*; do
		[ "$(basename "$(readlink -f "$n/device")")" = "$b" ] || continue
		node=/dev/accel/$(basename "$n")
		if "${nobody[@]}" sh -c "exec 3<>$node" 2>/dev/null; then
			echo "# note: nobody can open $node (mode $(stat -c %a "$node")); the sysfs path is not exercised"
		fi
	done
	ok=1
	for f in family chiplet_count hbm_total_bytes fw_version fw_iface_version serial state; do
		v=$("${nobody[@]}" cat "/sys/bus/pci/devices/$b/rbln/$f" 2>&1) ||
			{ fail "nobody: cannot read $b/rbln/$f: $v"; ok=0; }
	done
	hw=
	for h in "/sys/bus/pci/devices/$b"/hwmon/hwmon*; do
		[ "$(cat "$h/name" 2>/dev/null)" = rbln ] && hw=$h
	done
	if [ -z "$hw" ]; then
		fail "$b: no hwmon device named rbln"
		ok=0
	else
		t=$("${nobody[@]}" cat "$hw/temp1_input" 2>&1)
		if ! [[ "$t" =~ ^[0-9]+$ ]] || [ "$t" -le 0 ] || [ "$t" -gt 110000 ]; then
			fail "nobody: $hw/temp1_input: '$t'"
			ok=0
		fi
		p=$("${nobody[@]}" cat "$hw/power1_input" 2>&1)
		[[ "$p" =~ ^[0-9]+$ ]] || { fail "nobody: $hw/power1_input: '$p'"; ok=0; }
	fi
	[ "$ok" = 1 ] && pass "nobody reads the sysfs and hwmon of $b"
done

if run "-j as nobody" "$tmp/json-nobody" "${nobody[@]}" "$smi" -j; then
	check_json "$tmp/json-nobody" nobody || fails=$((fails + 1))
	# the same cards, as far as sysfs tells
	"$py" - "$tmp/json" "$tmp/json-nobody" <<'EOF' || fails=$((fails + 1))
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("index", "family", "pci_bdf", "chiplet_count", "hbm_total_bytes", "chiplets",
        "fw_version", "fw_iface_version", "serial")
bad = [(ca.get("pci_bdf"), k) for ca, cb in zip(a["cards"], b["cards"]) for k in keys
       if ca.get(k) != cb.get(k)]
if bad or len(a["cards"]) != len(b["cards"]):
    print(f"not ok - nobody sees other cards than root: {bad}")
    sys.exit(1)
print("ok - nobody sees the same cards as root")
EOF
else
	fail "-j as nobody: exit $? ($(head -c 300 "$tmp/json-nobody.err"))"
fi
if run "-L as nobody" "$tmp/list-nobody" "${nobody[@]}" "$smi" -L; then
	n=$(grep -c '^NPU [0-9]*: ' "$tmp/list-nobody")
	if [ "$n" = "$cards" ]; then
		pass "-L as nobody: $n card(s)"
	else
		fail "-L as nobody: $n lines, want $cards"
	fi
else
	fail "-L as nobody: exit $? ($(head -c 300 "$tmp/list-nobody.err"))"
fi

# ---- no card bound: exit 4, and the cards come back afterwards
rebind() {
	local b
	for b in $bdfs; do
		[ -e "/sys/bus/pci/drivers/rbln/$b" ] || echo "$b" >/sys/bus/pci/drivers/rbln/bind
	done
}
if [ "$(id -u)" = 0 ]; then
	trap rebind EXIT
	for b in $bdfs; do
		echo "$b" >/sys/bus/pci/drivers/rbln/unbind || fail "unbind $b"
	done
	run "-L without cards" "$tmp/none" "$smi" -L
	rc=$?
	if [ "$rc" = 4 ] && [ -s "$tmp/none.err" ]; then
		pass "no card bound: exit 4 ($(head -n1 "$tmp/none.err"))"
	else
		fail "no card bound: exit $rc, stderr '$(head -c 200 "$tmp/none.err")', want exit 4 and a message"
	fi
	rebind
	trap - EXIT
	sleep 0.2
	[ "$(bound_bdfs)" = "$bdfs" ] || fail "cards not bound again: $(bound_bdfs | tr '\n' ' ')"
	if run "-L after rebind" "$tmp/again" "$smi" -L &&
		[ "$(grep -c '^NPU ' "$tmp/again")" = "$cards" ]; then
		pass "rbln-smi -L after rebinding"
	else
		fail "rbln-smi -L after rebinding"
	fi
fi

echo "# rbln-smi timings: $(printf '%s; ' "${timings[@]}")"
if [ -n "${RBLN_VM_RESULTS:-}" ]; then
	mkdir -p "$RBLN_VM_RESULTS/smi-check" &&
		cp "$tmp"/* "$RBLN_VM_RESULTS/smi-check/" 2>/dev/null
	printf '%s\n' "${timings[@]}" >"$RBLN_VM_RESULTS/smi-check/timings.txt" 2>/dev/null
fi
rm -rf "$tmp"
if [ "$fails" = 0 ]; then
	echo "# smi-check: all checks passed"
	exit 0
fi
echo "# smi-check: $fails check(s) failed"
exit 1
