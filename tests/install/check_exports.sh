#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Checks the dynamic symbols of a librbln.so against its public surface
# (umd/include/rbln/export.h, umd/librbln.map):
#   - no internal symbol is exported: none of the patterns below appears in
#     `nm -D --defined-only -C` (the kernel boundary, the submitter, the
#     command encoder, sysfs, the control-block parser, the uAPI encoding,
#     detail:: state, the allocator's segment plumbing);
#   - nothing but the C ABI (rbln_*) and namespace rbln is exported (plus
#     the version node);
#   - with INCLUDE_DIR: every function the installed C headers declare
#     (rbln/rbln*.h) is exported, so a header that lost its visibility
#     pragma is caught.
# Prints the number of exported symbols.
#
#   check_exports.sh LIBRBLN_SO [INCLUDE_DIR]
set -euo pipefail

lib=$1
inc=${2:-}

fail() {
	echo "check_exports: $*" >&2
	exit 1
}

# Internal names (umd/src) that must not leave librbln.so.
forbidden=(
	'KernelInterface' 'KernelDevice' 'make_ring' 'CommandRing' 'kernel_uapi'
	'drm_rbln_' 'Submitter' 'CommandEncoder' 'Sysfs' 'parse_control_block'
	'detail::' 'UniqueFd' 'BoMemory' 'SegmentProvider' 'AllocatorPlace'
	'ChipletAllocator'
)

syms=$(nm -D --defined-only -C "$lib" | sed -E 's/^[0-9a-f]* [A-Za-z] //; s/@@?[A-Za-z0-9_.]+$//')
count=$(printf '%s\n' "$syms" | grep -c .)
bad=0
for p in "${forbidden[@]}"; do
	hits=$(printf '%s\n' "$syms" | grep -F -- "$p" || true)
	if [ -n "$hits" ]; then
		echo "check_exports: $lib exports internal symbols matching '$p':" >&2
		printf '%s\n' "$hits" | sed -n '1,5s/^/    /p' >&2
		n=$(printf '%s\n' "$hits" | grep -c .)
		[ "$n" -le 5 ] || echo "    ... ($n in all)" >&2
		bad=1
	fi
done
# Only the C ABI, namespace rbln (its functions, type info and vtables)
# and the version node.
others=$(printf '%s\n' "$syms" |
	grep -Ev '^(rbln_|rbln::|typeinfo for rbln::|typeinfo name for rbln::|vtable for rbln::|LIBRBLN_)' ||
	true)
if [ -n "$others" ]; then
	echo "check_exports: $lib exports symbols outside rbln_* and namespace rbln:" >&2
	printf '%s\n' "$others" | sed -n '1,5s/^/    /p' >&2
	bad=1
fi
if [ -n "$inc" ]; then
	for h in "$inc"/rbln/rbln*.h; do
		while read -r f; do
			# A here-string, not a pipe: grep -q stops reading at the first
			# match, and under pipefail the writer's SIGPIPE would fail the test.
			grep -qx -- "$f" <<<"$syms" ||
				{ echo "check_exports: $(basename "$h") declares $f, $lib does not export it" >&2; bad=1; }
		done < <(sed -nE 's/^[a-z_][a-z0-9_ *]*[ *](rbln_[a-z0-9_]*)\(.*/\1/p' "$h")
	done
fi
[ "$bad" = 0 ] || fail "$lib: the exported symbols are not librbln's public surface (umd/include/rbln/export.h)"
echo "check_exports: $lib exports $count dynamic symbols, none internal"
