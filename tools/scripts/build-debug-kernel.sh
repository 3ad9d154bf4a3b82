#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# build-debug-kernel.sh: builds the debug kernel of `make test`'s debug tier
# (KASAN, lockdep, kmemleak, DMA-API debug, KFENCE, fault injection; the
# config is tools/scripts/debug-kernel.config on top of x86_64 defconfig)
# from Debian's linux-source-6.12, then rbln.ko against it.
#
#   build-debug-kernel.sh [-j N] [--kernel-only]
#   build-debug-kernel.sh --print      release of the ready kernel, or exit 1
#
# The kernel is built once per source version + config and cached:
#   build/debug-kernel/<key>/linux      the built tree (rbln.ko's KDIR)
#   build/debug-kernel/<key>/vmlinuz    the image rbln-vm boots
#   build/debug-kernel/<key>/modroot    its modules (INSTALL_MOD_PATH)
#   build/debug-kernel/<key>/release    its name, 6.12.N-rbln-debug (never
#                                       the runner's default 6.12.*-amd64)
#   build/debug-kernel/current          -> <key>, what rbln-vm --debug-kernel uses
# <key> is the linux-source-6.12 package version and a hash of the
# fragment, the compiler and the kernel recipe below; a changed key reuses
# the previous tree (make rebuilds what the new config changed) and
# removes the old key.  A full build takes ~13 min on two idle cores and
# 20-45 min at nice 19 beside other work (ncpus jobs, at nice 19; -j to
# change).
#
# rbln.ko is rebuilt on every call (incremental, seconds) from a copy of
# kernel/ in build/debug-kernel/rbln/, so the build tree's own kernel/rbln.ko
# stays the production kernel's: build/debug-kernel/rbln/kernel/rbln.ko.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
self="$top/tools/scripts/build-debug-kernel.sh"
frag="$top/tools/scripts/debug-kernel.config"
base="$top/build/debug-kernel"
jobs=$(nproc 2>/dev/null || echo 2)
kernel_only=0 print=0
while [ $# -gt 0 ]; do
	case "$1" in
	-j) jobs=$2; shift 2 ;;
	-j*) jobs=${1#-j}; shift ;;
	--kernel-only) kernel_only=1; shift ;;
	--print) print=1; shift ;;
	-h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-debug-kernel: unknown argument $1" >&2; exit 2 ;;
	esac
done

log() { printf 'build-debug-kernel: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s; }

if [ "$print" = 1 ]; then
	[ -f "$base/current/.done" ] || exit 1
	cat "$base/current/release"
	exit 0
fi

tarball=$(ls /usr/src/linux-source-6.12*.tar.xz 2>/dev/null | sort -V | tail -n 1)
[ -n "$tarball" ] || die "no /usr/src/linux-source-6.12*.tar.xz (run tools/scripts/install-deps.sh)"
for t in flex bison bc gcc make perl; do
	command -v "$t" >/dev/null || die "$t is missing (run tools/scripts/install-deps.sh)"
done
[ -f /usr/include/libelf.h ] || [ -f /usr/include/gelf.h ] ||
	die "libelf-dev is missing (run tools/scripts/install-deps.sh)"
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) ||
	srcver=$(stat -c '%s-%Y' "$tarball")

# The key: what decides the kernel's content.  Only the recipe part of this
# script counts, so editing the rbln.ko part does not rebuild the kernel.
hash=$({
	echo "$srcver $(basename "$tarball")"
	gcc --version | head -n 1
	cat "$frag"
	sed -n '/^# --- kernel recipe: begin/,/^# --- kernel recipe: end/p' "$self"
} | sha256sum | cut -c1-12)
key="${srcver//[^A-Za-z0-9.+-]/_}-$hash"
dir="$base/$key"

mkdir -p "$base"
exec 9> "$base/.lock"
if ! flock -n 9; then
	log "waiting for another build in $base"
	flock 9
fi

# --- kernel recipe: begin -------------------------------------------------
# check_config: every value the fragment sets is in .config.
check_config() {
	local line sym want got bad=0
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) sym=${line%%=*}; want=${line#*=} ;;
		"# CONFIG_"*" is not set") sym=${line#\# }; sym=${sym%% *}; want=n ;;
		*) continue ;;
		esac
		got=$(sed -n "s/^$sym=//p" .config)
		[ -n "$got" ] || got=n
		if [ "$got" != "$want" ]; then
			log "config: $sym=$got, the fragment wants $want (a dependency is missing or it is selected)"
			bad=1
		fi
	done < "$frag"
	return "$bad"
}

build_kernel() {
	local t0 prev
	t0=$(now)
	if [ ! -f "$dir/.extracted" ]; then
		# Reuse the previous key's tree of the same source: make rebuilds
		# only what the new config changes.
		prev=""
		for d in "$base/${srcver//[^A-Za-z0-9.+-]/_}"-*; do
			[ -f "$d/.extracted" ] && [ "$d" != "$dir" ] && prev=$d
		done
		if [ -n "$prev" ]; then
			log "reusing the tree of $(basename "$prev")"
			rm -rf "$dir"
			mv "$prev" "$dir"
			rm -f "$dir/.done"
		else
			log "extracting $(basename "$tarball")"
			rm -rf "$dir"
			mkdir -p "$dir"
			tar -xJf "$tarball" -C "$dir"
			mv "$dir"/linux-source-6.12 "$dir/linux"
			touch "$dir/.extracted"
		fi
	fi
	cd "$dir/linux"
	make -s defconfig
	scripts/kconfig/merge_config.sh -m .config "$frag" >/dev/null
	make -s olddefconfig
	check_config || die "the config does not hold the fragment (above): fix $frag"
	log "building the debug kernel $key: make -j$jobs at nice 19, ~13 min on two idle cores, up to ~45 min on a busy machine"
	nice -n 19 make -s -j"$jobs" bzImage modules
	rm -rf "$dir/modroot"
	make -s modules_install INSTALL_MOD_PATH="$dir/modroot" INSTALL_MOD_STRIP=1 >/dev/null
	cp arch/x86/boot/bzImage "$dir/vmlinuz"
	# Not "make kernelrelease": under a parent make (make test) it prints
	# "make[2]: Entering directory ..." around the name.
	cp include/config/kernel.release "$dir/release"
	touch "$dir/.done"
	cd "$top"
	log "kernel $(cat "$dir/release") built in $(( $(now) - t0 ))s"
}
# --- kernel recipe: end ---------------------------------------------------

if [ -f "$dir/.done" ]; then
	cp "$dir/linux/include/config/kernel.release" "$dir/release"	# heals a cache written by the old recipe
	log "kernel $(cat "$dir/release") ($key) is cached"
else
	build_kernel
fi
ln -sfn "$key" "$base/current"
for d in "$base"/*/; do	# other keys' trees are several GB each
	d=${d%/}
	[ -L "$d" ] || [ "$d" = "$dir" ] || [ ! -f "$d/.extracted" ] || { log "removing the stale $(basename "$d")"; rm -rf "$d"; }
done
[ "$kernel_only" = 1 ] && exit 0

# --- rbln.ko against it ---------------------------------------------------
# A copy of kernel/ beside links to the trees its Kbuild and Makefile
# reach through ../ (contract headers, the feature probe).  Only files
# whose content changed are copied (with a new mtime), so make rebuilds
# exactly those; a new kernel starts from a clean copy.
t0=$(now)
rdir="$base/rbln"
if [ "$(cat "$rdir/.key" 2>/dev/null)" != "$key" ]; then
	rm -rf "$rdir"
fi
mkdir -p "$rdir/kernel"
for l in include firmware-iface tools; do
	ln -sfn "$top/$l" "$rdir/$l"
done
(cd "$top/kernel" && find . -type f \( -name '*.[ch]' -o -name Kbuild -o -name Makefile \) \
	! -name '*.mod.c' ! -name rbln_config.h -print0) |
while IFS= read -r -d '' f; do
	if ! cmp -s "$top/kernel/$f" "$rdir/kernel/$f"; then
		mkdir -p "$(dirname "$rdir/kernel/$f")"
		cp "$top/kernel/$f" "$rdir/kernel/$f"
	fi
done
echo "$key" > "$rdir/.key"
nice -n 19 make -s -C "$rdir/kernel" KDIR="$dir/linux" modules -j"$jobs" >&2
log "rbln.ko for $(cat "$dir/release") in $(( $(now) - t0 ))s: $rdir/kernel/rbln.ko"
