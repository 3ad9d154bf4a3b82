#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Installs what rbln needs from Debian's archive, and nothing else.
# Runs apt-get update first; idempotent: when everything is present it
# installs nothing and returns in about 3 s.
#
#   KVER=6.12.NNN+deb12-amd64  pick the VM kernel instead of the newest
#
# Prints the resolved kernel version on the last line of stdout
# ("KVER=<ver>") and writes it to build/kver so make can pick it up.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$top/build"

pkgs=(qemu-system-x86 busybox-static kmod cpio xz-utils cmake pkg-config
      liburing-dev libdrm-dev libnuma-dev libgtest-dev libgmock-dev
      libbenchmark-dev dkms sparse linux-source-6.12
      g++ make bc python3 clang-format clang-tidy	# build, runner, JSON check, lint
      clang libclang-rt-14-dev			# tests/fuzz (libFuzzer, sanitizers)
      flex bison libelf-dev libssl-dev		# the debug kernel (build-debug-kernel.sh)
      python3-torch libtorch-dev python3-pybind11 python3-pytest	# umd/torch, tests/torch
      libibverbs-dev ibverbs-providers iproute2)	# RDMA (soft-RoCE) tests in the VM

log() { printf 'install-deps: %s\n' "$*" >&2; }

missing() {
	local p out=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			out+=("$p")
	done
	printf '%s\n' "${out[@]}"
}

updated=0
apt_update() {
	[ "$updated" = 1 ] && return 0
	log "apt-get update"
	apt-get update -qq >&2
	updated=1
}

apt_install() {
	log "installing: $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

if [ "$(id -u)" != 0 ]; then
	mapfile -t need < <(missing "${pkgs[@]}")
	if [ "${#need[@]}" -gt 0 ] && [ -n "${need[0]}" ]; then
		log "missing packages (run as root to install): ${need[*]}"
		exit 1
	fi
	updated=1	# nothing to install, and no right to update the lists
fi

apt_update

mapfile -t need < <(missing "${pkgs[@]}")
if [ -n "${need[0]:-}" ]; then
	apt_update
	apt_install "${need[@]}"
fi

# --- the VM kernel -------------------------------------------------------
# Newest linux-image-6.12.*+deb12-amd64-unsigned whose linux-headers exists.
resolve_kver() {
	# One apt-cache call: the image names and the header names together.
	apt-cache pkgnames linux- 2>/dev/null | awk '
		/^linux-headers-6\.12\.[0-9]+\+deb12-amd64$/ { h[substr($0, 15)] = 1 }
		/^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$/ {
			v = substr($0, 13); sub(/-unsigned$/, "", v); img[v] = 1 }
		END { for (v in img) if (v in h) print v }' | sort -V | tail -n 1
}

installed_kver() {
	dpkg-query -W -f='${Package} ${Status}\n' 'linux-image-6.12.*+deb12-amd64-unsigned' 2>/dev/null |
		awk '/install ok installed/ {print $1}' |
		sed -n 's/^linux-image-\(.*\)-unsigned$/\1/p' |
		while read -r v; do
			[ -f "/usr/src/linux-headers-$v/Makefile" ] && echo "$v"
		done | sort -V -r | head -n 1
}

kver=${KVER:-}
if [ -z "$kver" ]; then
	kver=$(resolve_kver)
	if [ -z "$kver" ]; then
		kver=$(installed_kver)
	fi
fi
if [ -z "$kver" ]; then
	log "no linux-image-6.12.*+deb12-amd64-unsigned with matching headers found in apt-cache"
	log "enable bookworm-security or bookworm-backports (Debian 12's own 6.1 kernel has no accel subsystem)"
	exit 1
fi

mapfile -t need < <(missing "linux-image-$kver-unsigned" "linux-headers-$kver")
if [ -n "${need[0]:-}" ]; then
	apt_update
	apt_install "${need[@]}"
fi

# --- files the build needs from linux-source-6.12 ------------------------
src_dir="$top/build/linux-src"
tarball=$(ls /usr/src/linux-source-6.12*.tar.xz 2>/dev/null | sort -V | tail -n 1)
if [ -z "$tarball" ]; then
	log "linux-source-6.12 is installed but has no tarball in /usr/src"
	exit 1
fi
stamp="$src_dir/.from-$(basename "$tarball")"
if [ ! -f "$stamp" ]; then
	log "extracting kselftest harness and checkpatch from $(basename "$tarball")"
	rm -rf "$src_dir"
	mkdir -p "$src_dir"
	base=$(basename "$tarball" .tar.xz)
	tar -xJf "$tarball" -C "$src_dir" --strip-components=1 \
		"$base/tools/testing/selftests/kselftest_harness.h" \
		"$base/tools/testing/selftests/kselftest.h" \
		"$base/scripts/checkpatch.pl" \
		"$base/scripts/spelling.txt" \
		"$base/scripts/const_structs.checkpatch"
	touch "$stamp"
fi

echo "$kver" > "$top/build/kver"
echo "KVER=$kver"
